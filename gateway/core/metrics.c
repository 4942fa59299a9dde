/* SPDX-License-Identifier: Apache-2.0 */
/* Prometheus text exposition writer (metrics.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "metrics.h"

struct entry {
	const char *family; /* static strings: families and help are literals */
	const char *help;
	enum gw_metric_type type;
	const char *suffix; /* histograms: "_bucket", "_sum" or "_count"; else "" */
	char *labels;
	double value;
	size_t family_order;
	size_t seq;
};

struct gw_metrics_writer {
	struct entry *e;
	size_t n, cap;
	/* first-seen order of families */
	const char **families;
	size_t n_families, cap_families;
};

struct gw_metrics_writer *gw_metrics_writer_new(void)
{
	return calloc(1, sizeof(struct gw_metrics_writer));
}

void gw_metrics_writer_free(struct gw_metrics_writer *w)
{
	if (!w)
		return;
	for (size_t i = 0; i < w->n; i++)
		free(w->e[i].labels);
	free(w->e);
	free(w->families);
	free(w);
}

static size_t family_order(struct gw_metrics_writer *w, const char *family)
{
	for (size_t i = 0; i < w->n_families; i++)
		if (strcmp(w->families[i], family) == 0)
			return i;
	if (sr_grow((void **)&w->families, &w->cap_families, w->n_families + 1, sizeof(*w->families), 32) < 0)
		return SIZE_MAX;
	w->families[w->n_families] = family;
	return w->n_families++;
}

static void add(struct gw_metrics_writer *w, const char *family, enum gw_metric_type type, const char *suffix,
		const char *help, const char *labels, double value)
{
	size_t order;

	if (sr_grow((void **)&w->e, &w->cap, w->n + 1, sizeof(*w->e), 64) < 0)
		return;
	order = family_order(w, family);
	if (order == SIZE_MAX)
		return;
	w->e[w->n] = (struct entry){
		.family = w->families[order],
		.help = help,
		.type = type,
		.suffix = suffix,
		.labels = labels && *labels ? strdup(labels) : NULL,
		.value = value,
		.family_order = order,
		.seq = w->n,
	};
	w->n++;
}

void gw_metrics__add(struct gw_metrics_writer *w, const char *family, enum gw_metric_type type, const char *help,
		     const char *labels, double value)
{
	add(w, family, type, "", help, labels, value);
}

const double gw_duration_bounds[GW_DURATION_BUCKETS] = { 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10 };

void gw_duration_histogram__observe(struct gw_duration_histogram *h, double seconds)
{
	size_t i = 0;

	while (i < GW_DURATION_BUCKETS && seconds > gw_duration_bounds[i])
		i++;
	h->counts[i]++;
	h->sum += seconds;
}

void gw_metrics__add_histogram(struct gw_metrics_writer *w, const char *family, const char *help, const char *labels,
			       const struct gw_duration_histogram *h)
{
	uint64_t cum = 0;

	for (size_t i = 0; i <= GW_DURATION_BUCKETS; i++) {
		char lbl[512], le[32] = "+Inf";

		cum += h->counts[i];
		snprintf(lbl, sizeof(lbl), "%s", labels ? labels : "");
		if (i < GW_DURATION_BUCKETS)
			snprintf(le, sizeof(le), "%g", gw_duration_bounds[i]);
		gw_metrics_label(lbl, sizeof(lbl), "le", le);
		add(w, family, GW_METRIC_HISTOGRAM, "_bucket", help, lbl, (double)cum);
	}
	add(w, family, GW_METRIC_HISTOGRAM, "_sum", help, labels, h->sum);
	add(w, family, GW_METRIC_HISTOGRAM, "_count", help, labels, (double)cum);
}

void gw_metrics_label(char *buf, size_t size, const char *key, const char *value)
{
	size_t len = strnlen(buf, size);
	int n;

	if (len >= size)
		return;
	n = snprintf(buf + len, size - len, "%s%s=\"", len ? "," : "", key);
	if (n < 0 || (size_t)n >= size - len)
		return;
	len += (size_t)n;
	for (const char *p = value ? value : ""; *p && len + 3 < size; p++) {
		/* The exposition format escapes backslash, double quote and newline. */
		if (*p == '\\' || *p == '"') {
			buf[len++] = '\\';
			buf[len++] = *p;
		} else if (*p == '\n') {
			buf[len++] = '\\';
			buf[len++] = 'n';
		} else
			buf[len++] = *p;
	}
	if (len + 2 <= size) {
		buf[len++] = '"';
		buf[len] = '\0';
	} else
		buf[size - 1] = '\0';
}

static int cmp(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;
	if (x->family_order != y->family_order)
		return x->family_order < y->family_order ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

int gw_metrics_writer__render(struct gw_metrics_writer *w, char **ret, size_t *ret_len)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return -ENOMEM;
	qsort(w->e, w->n, sizeof(*w->e), cmp);
	for (size_t i = 0; i < w->n; i++) {
		const struct entry *e = &w->e[i];
		if (i == 0 || e->family_order != w->e[i - 1].family_order) {
			if (e->help)
				fprintf(f, "# HELP %s %s\n", e->family, e->help);
			fprintf(f, "# TYPE %s %s\n", e->family,
				e->type == GW_METRIC_COUNTER	 ? "counter"
				: e->type == GW_METRIC_HISTOGRAM ? "histogram"
								 : "gauge");
		}
		if (e->labels)
			fprintf(f, "%s%s{%s} ", e->family, e->suffix, e->labels);
		else
			fprintf(f, "%s%s ", e->family, e->suffix);
		if (e->value == floor(e->value) && fabs(e->value) < 9.007199254740992e15)
			fprintf(f, "%.0f\n", e->value);
		else
			fprintf(f, "%.17g\n", e->value);
	}
	if (fclose(f) != 0) {
		free(buf);
		return -ENOMEM;
	}
	*ret = buf;
	*ret_len = len;
	return 0;
}
