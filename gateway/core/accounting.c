/* SPDX-License-Identifier: Apache-2.0 */
/* Sample accounting per component (accounting.h). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "accounting.h"
#include "common/macro.h"
#include "metrics.h"

struct reason_count {
	char *reason;
	uint64_t n;
};

struct comp {
	char *name;
	bool exporter;
	uint64_t c[_GW_COUNT_MAX];
	struct reason_count refused[GW_ACCOUNTING_MAX_REASONS];
	struct reason_count dropped[GW_ACCOUNTING_MAX_REASONS];
};

struct gw_accounting {
	pthread_mutex_t lock;
	struct comp *comps;
	size_t n, cap;
};

static const char *const count_names[_GW_COUNT_MAX] = {
	[GW_COUNT_RECEIVED] = "received", [GW_COUNT_ACCEPTED] = "accepted", [GW_COUNT_REFUSED] = "refused",
	[GW_COUNT_DROPPED] = "dropped",	  [GW_COUNT_EXPORTED] = "exported",
};

const char *gw_count_to_string(enum gw_count c)
{
	return (unsigned)c < _GW_COUNT_MAX ? count_names[c] : "unknown";
}

struct gw_accounting *gw_accounting_new(void)
{
	struct gw_accounting *a = calloc(1, sizeof(*a));
	if (!a)
		return NULL;
	pthread_mutex_init(&a->lock, NULL);
	return a;
}

void gw_accounting_free(struct gw_accounting *a)
{
	if (!a)
		return;
	for (size_t i = 0; i < a->n; i++) {
		for (size_t j = 0; j < GW_ACCOUNTING_MAX_REASONS; j++) {
			free(a->comps[i].refused[j].reason);
			free(a->comps[i].dropped[j].reason);
		}
		free(a->comps[i].name);
	}
	free(a->comps);
	pthread_mutex_destroy(&a->lock);
	free(a);
}

/* Lock held. NULL only when out of memory. */
static struct comp *comp_get(struct gw_accounting *a, const char *name, bool create)
{
	for (size_t i = 0; i < a->n; i++)
		if (strcmp(a->comps[i].name, name) == 0)
			return &a->comps[i];
	if (!create)
		return NULL;
	if (sr_grow((void **)&a->comps, &a->cap, a->n + 1, sizeof(*a->comps), 16) < 0)
		return NULL;
	struct comp *c = &a->comps[a->n];
	memset(c, 0, sizeof(*c));
	c->name = strdup(name);
	if (!c->name)
		return NULL;
	a->n++;
	return c;
}

static void reason_add(struct reason_count *r, const char *reason, uint64_t n)
{
	size_t i;

	if (!reason || !*reason)
		reason = "unspecified";
	for (i = 0; i < GW_ACCOUNTING_MAX_REASONS - 1; i++) {
		if (!r[i].reason) {
			r[i].reason = strdup(reason);
			if (!r[i].reason)
				break;
			r[i].n += n;
			return;
		}
		if (strcmp(r[i].reason, reason) == 0) {
			r[i].n += n;
			return;
		}
	}
	/* The last slot collects every further reason (and allocation failures). */
	i = GW_ACCOUNTING_MAX_REASONS - 1;
	if (!r[i].reason)
		r[i].reason = strdup("other");
	r[i].n += n;
}

void gw_accounting__declare(struct gw_accounting *a, const char *component, bool exporter)
{
	pthread_mutex_lock(&a->lock);
	struct comp *c = comp_get(a, component, true);
	if (c)
		c->exporter = exporter;
	pthread_mutex_unlock(&a->lock);
}

void gw_accounting__declare_reasons(struct gw_accounting *a, const char *component, enum gw_count what,
				    const char *const *reasons)
{
	if ((what != GW_COUNT_REFUSED && what != GW_COUNT_DROPPED) || !reasons)
		return;
	pthread_mutex_lock(&a->lock);
	struct comp *c = comp_get(a, component, true);
	for (size_t i = 0; c && reasons[i]; i++)
		reason_add(what == GW_COUNT_REFUSED ? c->refused : c->dropped, reasons[i], 0);
	pthread_mutex_unlock(&a->lock);
}

void gw_accounting__add(struct gw_accounting *a, const char *component, enum gw_count what, const char *reason,
			uint64_t samples)
{
	if ((unsigned)what >= _GW_COUNT_MAX)
		return;
	pthread_mutex_lock(&a->lock);
	struct comp *c = comp_get(a, component, true);
	if (c) {
		c->c[what] += samples;
		if (what == GW_COUNT_REFUSED)
			reason_add(c->refused, reason, samples);
		else if (what == GW_COUNT_DROPPED)
			reason_add(c->dropped, reason, samples);
	}
	pthread_mutex_unlock(&a->lock);
}

uint64_t gw_accounting__get(struct gw_accounting *a, const char *component, enum gw_count what, const char *reason)
{
	uint64_t v = 0;
	pthread_mutex_lock(&a->lock);
	struct comp *c = comp_get(a, component, false);
	if (c && (unsigned)what < _GW_COUNT_MAX) {
		if (!reason || (what != GW_COUNT_REFUSED && what != GW_COUNT_DROPPED))
			v = c->c[what];
		else {
			struct reason_count *r = what == GW_COUNT_REFUSED ? c->refused : c->dropped;
			for (size_t i = 0; i < GW_ACCOUNTING_MAX_REASONS && r[i].reason; i++)
				if (strcmp(r[i].reason, reason) == 0)
					v = r[i].n;
		}
	}
	pthread_mutex_unlock(&a->lock);
	return v;
}

static int64_t held(const struct comp *c)
{
	uint64_t out = c->exporter ? c->c[GW_COUNT_EXPORTED] : c->c[GW_COUNT_ACCEPTED];
	return (int64_t)(c->c[GW_COUNT_RECEIVED] - out - c->c[GW_COUNT_REFUSED] - c->c[GW_COUNT_DROPPED]);
}

int64_t gw_accounting__held(struct gw_accounting *a, const char *component)
{
	int64_t v = 0;
	pthread_mutex_lock(&a->lock);
	struct comp *c = comp_get(a, component, false);
	if (c)
		v = held(c);
	pthread_mutex_unlock(&a->lock);
	return v;
}

int gw_accounting__check(struct gw_accounting *a, bool quiescent)
{
	int r = 0;
	pthread_mutex_lock(&a->lock);
	for (size_t i = 0; i < a->n; i++) {
		int64_t h = held(&a->comps[i]);
		if (h < 0 || (quiescent && h != 0))
			r = -EUCLEAN;
	}
	pthread_mutex_unlock(&a->lock);
	return r;
}

void gw_accounting__write_metrics(struct gw_accounting *a, struct gw_metrics_writer *w)
{
	static const struct {
		enum gw_count what;
		const char *family, *help;
	} fams[] = {
		{ GW_COUNT_RECEIVED, "stackrelay_gateway_samples_received_total",
		  "CPU samples (sum of sample counts) that entered the component." },
		{ GW_COUNT_ACCEPTED, "stackrelay_gateway_samples_accepted_total",
		  "CPU samples the component passed on (receivers: acknowledged to the agent)." },
		{ GW_COUNT_EXPORTED, "stackrelay_gateway_samples_exported_total",
		  "CPU samples an exporter delivered to its backend." },
	};

	pthread_mutex_lock(&a->lock);
	for (size_t i = 0; i < a->n; i++) {
		const struct comp *c = &a->comps[i];
		char lbl[256] = "", lbl2[512];

		gw_metrics_label(lbl, sizeof(lbl), "component", c->name);
		for (size_t f = 0; f < SR_ARRAY_SIZE(fams); f++) {
			/* An exporter's "passed on" is its exported count. */
			if ((fams[f].what == GW_COUNT_EXPORTED && !c->exporter) ||
			    (fams[f].what == GW_COUNT_ACCEPTED && c->exporter))
				continue;
			gw_metrics__add(w, fams[f].family, GW_METRIC_COUNTER, fams[f].help, lbl,
					(double)c->c[fams[f].what]);
		}
		for (size_t j = 0; j < GW_ACCOUNTING_MAX_REASONS && c->refused[j].reason; j++) {
			snprintf(lbl2, sizeof(lbl2), "%s", lbl);
			gw_metrics_label(lbl2, sizeof(lbl2), "reason", c->refused[j].reason);
			gw_metrics__add(w, "stackrelay_gateway_samples_refused_total", GW_METRIC_COUNTER,
					"CPU samples given back to the sender (which still holds them), by reason.",
					lbl2, (double)c->refused[j].n);
		}
		for (size_t j = 0; j < GW_ACCOUNTING_MAX_REASONS && c->dropped[j].reason; j++) {
			snprintf(lbl2, sizeof(lbl2), "%s", lbl);
			gw_metrics_label(lbl2, sizeof(lbl2), "reason", c->dropped[j].reason);
			gw_metrics__add(w, "stackrelay_gateway_samples_dropped_total", GW_METRIC_COUNTER,
					"CPU samples lost in the component, by reason.", lbl2, (double)c->dropped[j].n);
		}
		gw_metrics__add(
			w, "stackrelay_gateway_samples_held", GW_METRIC_GAUGE,
			"CPU samples in the component's buffers now (received - passed on - refused - dropped).", lbl,
			(double)held(c));
	}
	pthread_mutex_unlock(&a->lock);
}
