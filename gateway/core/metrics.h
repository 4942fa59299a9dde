/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Prometheus text exposition (format 0.0.4) for /metrics.
 *
 * Components register a collector with gw_runtime__add_metrics(); on each
 * scrape the runtime calls every collector with a writer on the loop thread,
 * then groups samples by family (HELP/TYPE once per family) and serves it.
 * Names follow Prometheus conventions: stackrelay_gateway_<what>_<unit>, counters end in _total.
 */
#ifndef SR_GW_METRICS_H
#define SR_GW_METRICS_H

#include <stddef.h>
#include <stdint.h>

struct gw_metrics_writer;

enum gw_metric_type {
	GW_METRIC_COUNTER,
	GW_METRIC_GAUGE,
	GW_METRIC_HISTOGRAM, /* through gw_metrics__add_histogram() */
};

typedef void (*gw_metrics_fn)(struct gw_metrics_writer *w, void *userdata);

/*
 * One sample. labels is the inside of {...} already formatted
 * ("component=\"agent\",reason=\"x\"") or NULL/""; use gw_metrics_label() to
 * escape values.
 */
void gw_metrics__add(struct gw_metrics_writer *w, const char *family, enum gw_metric_type type, const char *help,
		     const char *labels, double value);
/*
 * Durations in seconds, counted in the buckets of GW_DURATION_BOUNDS (the
 * Prometheus client's default buckets); one writer at a time (its owner's
 * thread or lock).
 */
#define GW_DURATION_BUCKETS 11
extern const double gw_duration_bounds[GW_DURATION_BUCKETS];
struct gw_duration_histogram {
	uint64_t counts[GW_DURATION_BUCKETS + 1]; /* per bucket, not cumulative; the last: above every bound */
	double sum;
};
void gw_duration_histogram__observe(struct gw_duration_histogram *h, double seconds);
/* The histogram as family_bucket{le}, family_sum and family_count, with labels (or NULL). */
void gw_metrics__add_histogram(struct gw_metrics_writer *w, const char *family, const char *help, const char *labels,
			       const struct gw_duration_histogram *h);

/* Appends key="escaped value" (with a leading comma when buf is not empty). */
void gw_metrics_label(char *buf, size_t size, const char *key, const char *value);

struct gw_metrics_writer *gw_metrics_writer_new(void);
void gw_metrics_writer_free(struct gw_metrics_writer *w);
/* Renders everything added so far; *ret is malloc'd. 0 or -ENOMEM. */
int gw_metrics_writer__render(struct gw_metrics_writer *w, char **ret, size_t *ret_len);

#endif
