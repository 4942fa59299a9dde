/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The telemetry HTTP/1.1 server (service.telemetry.metrics.address):
 * GET /metrics, /healthz, /readyz. One request per connection (the response
 * closes it), which is all Prometheus and kubelet probes need.
 */
#ifndef SR_GW_TELEMETRY_H
#define SR_GW_TELEMETRY_H

#include <stddef.h>

#include <uv.h>

/* Largest request head accepted (request line + headers); more gets 431. */
#define GW_TELEMETRY_MAX_REQUEST_BYTES 8192
/* Header lines of a request; more gets 431 (a scrape or a probe sends a handful). */
#define GW_TELEMETRY_MAX_HEADERS 100
/* Connections served at once; more are closed at accept. */
#define GW_TELEMETRY_MAX_CONNECTIONS 64
/* A connection that has not sent a whole request head by then is closed. */
#define GW_TELEMETRY_REQUEST_TIMEOUT_MS 10000

struct gw_telemetry;

/*
 * Answers one GET: sets *ret_status, *ret_body (malloc'd, the server frees it),
 * *ret_len and *ret_content_type (static).
 */
typedef void (*gw_telemetry_handler)(void *userdata, const char *path, int *ret_status, char **ret_body,
				     size_t *ret_len, const char **ret_content_type);

/* Binds and listens; NULL + errno (errbuf says what failed). */
struct gw_telemetry *gw_telemetry_new(uv_loop_t *loop, const char *address, gw_telemetry_handler handler,
				      void *userdata, char *errbuf, size_t errsize);
/* The bound address ("127.0.0.1:8888"). */
const char *gw_telemetry__address(const struct gw_telemetry *t);
/* Closes the listener and every connection; memory is freed in the close callbacks. */
void gw_telemetry_close(struct gw_telemetry *t);

#endif
