/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the files of the exporter (exporthelper.h) share, and nothing else
 * includes: exporthelper.c (create, start, shutdown, destroy; the consumers
 * that send queued requests, retry them and split them; the runtime's hooks)
 * and exporthelper-enqueue.c (a batch in: encoded on the thread pool and
 * queued).
 */
#ifndef SR_GW_EXPORTHELPER_PRIVATE_H
#define SR_GW_EXPORTHELPER_PRIVATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "exporthelper.h"

struct gw_queue;
struct gw_queue_item;

/* gzip level: speed first, the gateway compresses everything it sends. */
#define GW_EXPORT_GZIP_LEVEL 1

struct exporter;

struct consumer {
	struct exporter *x;
	uv_timer_t timer;
	struct gw_queue_item *item;
	struct gw_backoff backoff;
	uint8_t *framed; /* the body as sent, when the transport frames it */
	size_t framed_len;
	bool sending;
	unsigned split_depth;
};

struct exporter {
	struct gw_component *c;
	const struct gw_export_config *cfg;
	const struct gw_export_transport *t;
	uv_loop_t *loop;
	char *url;
	char **headers; /* NULL-terminated "Name: value" */
	struct gw_http_tls tls;
	struct gw_retry_config retry;
	struct gw_otlp_options enc;
	bool gzip;
	struct gw_http_client *http;
	struct gw_queue *queue;
	struct consumer *consumers;
	size_t n_consumers;
	unsigned jobs;	       /* encodings on the thread pool */
	uint64_t jobs_samples; /* their sample counts */
	unsigned open_handles; /* consumer timers not yet closed */
	bool started, shutting_down, destroyed, metrics_added;
	void (*done)(struct gw_component *c);
	bool failing; /* in a streak of failures (for one warning per streak) */
	uint64_t seed;
	/* counters for /metrics */
	uint64_t requests_ok, requests_retry, requests_split, requests_permanent, requests_transport;
	uint64_t partial_rejected_profiles;
	uint64_t bytes_sent;
	uint64_t shed_requests; /* dropped by the memory_limiter (gw_runtime__shed) */
	bool shedder_added;
};

/* exporthelper.c; loop thread */
void gw_exporter_kick(struct exporter *x);
void gw_exporter_maybe_done(struct exporter *x);
void gw_exporter_maybe_free(struct exporter *x);

#endif
