/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The gateway's own HTTP endpoints: the telemetry server
 * (service.telemetry.metrics.address: GET /metrics, /healthz, /readyz) and
 * the health_check extension's endpoint, each a listener of the connection
 * layer (gateway/net/) with its own gw_conn_ops. HTTP/1.1 with one request
 * per connection (the answer closes it), which is all Prometheus and kubelet
 * probes need, and HTTP/2 with prior knowledge (h2c), which the layer tells
 * apart by its preface. GET and HEAD only; a request has no body.
 *
 * A layer above gateway/net/ (which sits on gateway/core/): the runtime
 * (core/runtime.h) answers the requests, main.c starts the servers.
 */
#ifndef SR_GW_TELEMETRY_SERVER_H
#define SR_GW_TELEMETRY_SERVER_H

#include <stddef.h>

#include <uv.h>

struct gw_runtime;

/* Largest request head accepted (request line + headers); more gets 431. */
#define GW_TELEMETRY_MAX_REQUEST_BYTES 8192
/* Header lines of a request; more gets 431 (a scrape or a probe sends a handful). */
#define GW_TELEMETRY_MAX_HEADERS 100
/* Connections served at once; more are closed at accept (the oldest one that sent nothing yet makes room). */
#define GW_TELEMETRY_MAX_CONNECTIONS 64
/* Requests at once on one h2c connection. */
#define GW_TELEMETRY_MAX_STREAMS 8
/* A connection that has not sent a whole request head by then is closed; h2c connections idle this long too. */
#define GW_TELEMETRY_REQUEST_TIMEOUT_MS 10000
/* Longest request path; longer gets 400. */
#define GW_TELEMETRY_MAX_PATH_BYTES 1023

struct gw_telemetry;

/*
 * Answers one GET: sets *ret_status, *ret_body (malloc'd, the server frees it),
 * *ret_len and *ret_content_type (static). path has no query.
 */
typedef void (*gw_telemetry_handler)(void *userdata, const char *path, int *ret_status, char **ret_body,
				     size_t *ret_len, const char **ret_content_type);

/* Binds and listens; id names it in logs. NULL + errno (errbuf says what failed). */
struct gw_telemetry *gw_telemetry_new(uv_loop_t *loop, const char *id, const char *address,
				      gw_telemetry_handler handler, void *userdata, char *errbuf, size_t errsize);
/* The bound address ("127.0.0.1:8888"). */
const char *gw_telemetry__address(const struct gw_telemetry *t);
/* Closes the listener and every connection; memory is freed in the close callbacks. NULL is fine. */
void gw_telemetry_close(struct gw_telemetry *t);

/* The endpoints of one runtime. */
struct gw_telemetry_servers {
	struct gw_telemetry *metrics, *health;
};

/*
 * Starts the telemetry server on metrics_address (NULL or "": none) and the
 * health_check extension's on health_address (NULL: none; health_path is what
 * rt answers there), answered by rt; logs where they listen, or what failed.
 * 0 or -errno; on failure close s.
 */
int gw_telemetry_servers_start(struct gw_telemetry_servers *s, struct gw_runtime *rt, const char *metrics_address,
			       const char *health_address, const char *health_path);
/* Closes both (once the runtime has shut down, so the loop can end). */
void gw_telemetry_servers_close(struct gw_telemetry_servers *s);

#endif
