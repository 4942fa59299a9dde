/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the files of the exporter (exporthelper.h) share, and nothing else
 * includes: exporthelper.c (create, start, shutdown, destroy; the consumers
 * that send queued requests, retry them and split them; the runtime's hooks)
 * exporthelper-enqueue.c (a batch in: encoded on the thread pool and
 * queued) and exporthelper-disk.c (admission: a full queue, a disk that
 * cannot take writes, and the probe that takes the disk back).
 */
#ifndef SR_GW_EXPORTHELPER_PRIVATE_H
#define SR_GW_EXPORTHELPER_PRIVATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "exporthelper.h"
#include "gateway/extensions.h"

struct gw_queue;
struct gw_queue_item;

/* gzip level: speed first, the gateway compresses everything it sends. */
#define GW_EXPORT_GZIP_LEVEL 1

struct exporter;
struct gw_metrics_writer;

/* Why a persistent queue's disk write failed, for metrics: errno → reason (the last is any other). */
#define GW_EXPORT_DISK_REASONS 6

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
	/* auth.authenticator's headers_setter rules (copied), applied to each request's metadata. */
	struct gw_header_rule *rules;
	size_t n_rules;
	struct gw_http_tls tls;
	struct gw_retry_config retry;
	struct gw_otlp_options enc;
	bool gzip;
	struct gw_http_client *http;
	struct gw_queue *queue;
	/* sending_queue.queue_size with sizer requests or items (0: none); bytes are the queue's own bound. */
	uint64_t max_requests, max_samples;
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
	/* A persistent queue's disk (exporthelper-disk.c). */
	uv_timer_t disk_timer; /* probes the disk while it fails; at shutdown, stops sending */
	bool disk_timer_init;
	bool disk_failing;    /* logged, timer running, receivers refused */
	bool stopped_sending; /* persistent, shutting down: in-flight requests aborted, left on disk */
	bool draining, drain_warned;
	uint64_t disk_errors[GW_EXPORT_DISK_REASONS];  /* failed writes by reason */
	uint64_t refusals[GW_EXPORT_DISK_REASONS + 1]; /* receiver requests refused: disk reasons, queue_full */
	char refusal_why[192];
};

/* exporthelper.c; loop thread */
/*
 * Whether the queue, with one more request of len bytes and samples samples
 * (0, 0: none more, the queue as it is), stays within its bounds times
 * factor (1, or GW_EXPORT_BLOCK_HARD_FACTOR for what a blocking queue may
 * still take): bytes, and the requests or samples of sending_queue.queue_size.
 */
bool gw_exporter_queue_fits(const struct exporter *x, uint64_t len, uint64_t samples, uint64_t factor);
void gw_exporter_kick(struct exporter *x);
void gw_exporter_maybe_done(struct exporter *x);
void gw_exporter_maybe_free(struct exporter *x);
/* Persistent queue at shutdown: requests waiting for a retry go back, those in flight are aborted. */
void gw_exporter_stop_sending(struct exporter *x);

/* exporthelper-disk.c; loop thread */
void gw_exporter_disk_start(struct exporter *x);
/* A push was held in memory (GW_QUEUE_HELD): the first of an episode logs, counts and starts the probe. */
void gw_exporter_disk_held(struct exporter *x);
/* The admission check of a persistent queue or block_on_overflow (gw_admission_fn). */
int gw_exporter_admission(struct gw_component *c, uint32_t *ret_retry_after_ms, const char **ret_why);
void gw_exporter_disk_metrics(struct gw_metrics_writer *w, struct exporter *x, const char *labels);
/*
 * Shutdown of a persistent queue, once no batch is being encoded: the disk is
 * tried again, requests it still cannot take are delivered until nothing is
 * held only in memory, then sending stops (gw_exporter_stop_sending) and
 * gw_exporter_maybe_done() is called again. From a timer, never from inside
 * an HTTP callback (stopping closes the HTTP client).
 */
void gw_exporter_disk_drain(struct exporter *x);
/* Destroy: the disk tried once more; what it still cannot take is dropped and counted; the timer closed. */
void gw_exporter_disk_destroy(struct exporter *x);

#endif
