/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The agent's own OTLP export (docs/agent.md, "Sending OTLP"): each window
 * is encoded at once (otlp-encode.h: the definitions it needs are in the
 * store now, maybe not later) into requests of at most
 * AGENT_OTLP_MAX_SAMPLES_PER_REQUEST samples, gzipped, and queued; a thread
 * of its own POSTs them to <endpoint>/v1development/profiles with libcurl.
 *
 * Limits: the queue holds at most otlp.buffer_size bytes of encoded
 * requests; beyond it the oldest waiting request is dropped and its samples
 * counted. A request that fails retryably (connection error, timeout, 429,
 * 500, 502, 503, 504) is retried after a backoff (initial_interval, x1.5 per
 * attempt with +-50% jitter, at most max_interval; Retry-After honoured up
 * to AGENT_OTLP_RETRY_AFTER_MAX_NS) until max_elapsed_time; other statuses
 * drop it (counted as rejected).
 */
#ifndef SR_AGENT_OTLP_EXPORT_H
#define SR_AGENT_OTLP_EXPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "agent.h"

#define AGENT_OTLP_PATH			   "/v1development/profiles"
#define AGENT_OTLP_MAX_SAMPLES_PER_REQUEST 16384
#define AGENT_OTLP_RETRY_AFTER_MAX_NS	   (300ULL * 1000 * 1000 * 1000)
/* Bytes of a response body kept to log a failure; the rest is read and dropped. */
#define AGENT_OTLP_RESPONSE_LOG_BYTES 256

struct agent_otlp_config;
struct agent_otlp_meta;
struct agent_otlp_exporter;

struct agent_otlp_stats {
	uint64_t samples_submitted; /* sample counts handed to the exporter */
	uint64_t samples_sent;	    /* counts in requests the endpoint accepted (2xx) */
	uint64_t dropped_buffer_full;
	uint64_t dropped_rejected;	    /* a non-retryable status */
	uint64_t dropped_retries_exhausted; /* max_elapsed_time passed */
	uint64_t dropped_shutdown;	    /* still queued when flush_timeout ended */
	uint64_t dropped_definition_lost;   /* the store no longer had their stack */
	uint64_t dropped_encoding;	    /* could not be encoded (memory) */
	uint64_t requests_ok;
	uint64_t requests_failed; /* attempts that failed, retried or not */
	uint64_t retries;
	uint64_t bytes_sent; /* request bodies as sent (after compression) */
	uint64_t buffered_bytes;
	uint64_t buffered_samples;
};

/* Checks the settings (err says what is wrong) and starts the thread. NULL with errno set. */
struct agent_otlp_exporter *agent_otlp_exporter_new(const struct agent_otlp_config *cfg,
						    const struct agent_otlp_meta *meta, char *err, size_t err_size);
/* Encodes b's samples now and queues them; b stays the caller's. 0 or -errno (then counted as dropped). */
int agent_otlp_exporter__submit(struct agent_otlp_exporter *x, struct agent_store *s, const struct agent_batch *b);
/* Waits until the queue is empty or timeout_ns passed; what is left is dropped and counted. 0 or -ETIMEDOUT. */
int agent_otlp_exporter__flush(struct agent_otlp_exporter *x, uint64_t timeout_ns);
void agent_otlp_exporter__stats(struct agent_otlp_exporter *x, struct agent_otlp_stats *ret);
/* The stackrelay_agent_otlp_* metrics, in Prometheus text format. */
void agent_otlp_exporter__render_metrics(struct agent_otlp_exporter *x, FILE *f);
void agent_otlp_exporter_free(struct agent_otlp_exporter *x);

#endif
