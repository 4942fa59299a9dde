/* SPDX-License-Identifier: Apache-2.0 */
/*
 * When and how long to retry an export, with the OTel Collector's semantics
 * (exporterhelper's retry sender over cenkalti/backoff's ExponentialBackOff):
 * delay_n = current_n * (1 ± randomization_factor * U[0,1)), current_{n+1} =
 * min(current_n * multiplier, max_interval); give up when the time since the
 * first attempt plus the next delay exceeds max_elapsed_time (0: never). A
 * server's Retry-After raises the next delay to at least what it asked for.
 *
 * Differences from the Collector, on purpose: 500 is retryable by default
 * (Pyroscope answers 500 for transient failures), and 413 means "split".
 */
#ifndef SR_GW_RETRY_H
#define SR_GW_RETRY_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

struct gw_retry_config {
	bool enabled;
	uint64_t initial_interval_ns; /* 5s */
	double randomization_factor;  /* 0.5 */
	double multiplier;	      /* 1.5 */
	uint64_t max_interval_ns;     /* 30s */
	uint64_t max_elapsed_time_ns; /* 5m; 0: retry forever */
};

#define GW_RETRY_DEFAULT_INITIAL_INTERVAL_NS (5ULL * 1000000000ULL)
#define GW_RETRY_DEFAULT_MAX_INTERVAL_NS     (30ULL * 1000000000ULL)
#define GW_RETRY_DEFAULT_MAX_ELAPSED_NS	     (300ULL * 1000000000ULL)
/* A Retry-After further away than this is capped to it (a day). */
#define GW_RETRY_AFTER_MAX_NS (86400ULL * 1000000000ULL)

enum gw_export_outcome {
	GW_EXPORT_OK,	     /* delivered (maybe with a partial_success) */
	GW_EXPORT_RETRY,     /* transient: try again later */
	GW_EXPORT_SPLIT,     /* 413: too large, send it in halves */
	GW_EXPORT_PERMANENT, /* will never succeed as is: drop, counted */
};

const char *gw_export_outcome_to_string(enum gw_export_outcome o);

/*
 * HTTP status → outcome. status 0 means no response (connection refused,
 * reset, timeout): retryable.
 */
enum gw_export_outcome gw_retry_classify_http(long status, bool retry_on_http_500);
/* gRPC status code (grpc-status) → outcome, after the Collector's otlpexporter. */
enum gw_export_outcome gw_retry_classify_grpc(int code);

/*
 * Parses a Retry-After value: delay-seconds ("120") or an HTTP-date ("Wed, 21
 * Oct 2015 07:28:00 GMT", also RFC 850 and asctime forms). now is the wall
 * clock for dates; a date in the past gives 0. Returns 0 with *ret_ns, or
 * -EINVAL.
 */
int gw_retry_parse_after(const char *value, time_t now, uint64_t *ret_ns);

struct gw_backoff {
	const struct gw_retry_config *cfg;
	uint64_t current_ns;
	uint64_t start_ns; /* monotonic time of the first attempt */
	uint32_t attempts;
	uint64_t rng; /* xorshift state, seeded per backoff */
};

void gw_backoff_init(struct gw_backoff *b, const struct gw_retry_config *cfg, uint64_t now_ns, uint64_t seed);
/*
 * The delay before the next attempt, at least min_ns (a Retry-After). Returns
 * false when retrying must stop: disabled, or out of max_elapsed_time.
 */
bool gw_backoff_next(struct gw_backoff *b, uint64_t now_ns, uint64_t min_ns, uint64_t *ret_delay_ns);

#endif
