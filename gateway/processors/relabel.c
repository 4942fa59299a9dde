// SPDX-License-Identifier: Apache-2.0
/*
 * relabel: Prometheus relabeling on each resource's attributes
 * (relabel-rules.h; docs/processors.md, "relabel"). Runs on the loop thread:
 * rules are compiled once, and regex matching is bounded
 * (GW_REGEX_MATCH_LIMIT), so a batch costs microseconds per resource.
 *
 * Attribute values of every type are visible to rules as strings (an int
 * process.pid reads "1234"); an attribute a rule does not change keeps its
 * type, a changed or new one is a string. A resource dropped by keep/drop
 * loses its samples, counted as dropped with reason "relabel".
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "component.h"
#include "common/config.h"
#include "core/metrics.h"
#include "core/model.h"
#include "core/runtime.h"
#include "common/log.h"
#include "relabel-rules.h"

/* A logfmt value for messages that may hold quotes (kubeconfig names, regexes). */
#define Q(s) sr_log_quote((s), (char[600]){ 0 }, 600)

#define COMPONENT "relabel"

struct relabel_config {
	struct gw_relabel_rule_config *rules;
	uint32_t n_rules;
};

static const struct sr_field rule_fields[] = {
	SR_FIELD_STRLIST("source_labels", struct gw_relabel_rule_config, source_labels, source_labels_count,
			 .doc = "Attributes whose values are joined with separator and matched against regex."),
	SR_FIELD_STR("separator", struct gw_relabel_rule_config, separator,
		     .doc = "Joins source values; default \";\"."),
	SR_FIELD_STR("target_label", struct gw_relabel_rule_config, target_label,
		     .doc = "Attribute written by replace, hashmod, lowercase, uppercase; $1.. expand."),
	SR_FIELD_STR("regex", struct gw_relabel_rule_config, regex,
		     .doc = "Anchored RE2-style regular expression; default \"(.*)\"."),
	SR_FIELD_U64("modulus", struct gw_relabel_rule_config, modulus, .doc = "hashmod: the modulus."),
	SR_FIELD_STR("replacement", struct gw_relabel_rule_config, replacement,
		     .doc = "replace/labelmap: the value written, with $1, ${1}, ${name}; default \"$1\"."),
	SR_FIELD_ENUMERATION("action", struct gw_relabel_rule_config, action, gw_relabel_action_names, .def = "replace",
			     .doc = "replace, keep, drop, keepequal, dropequal, hashmod, labelmap, labeldrop, "
				    "labelkeep, lowercase or uppercase."),
	SR_FIELD_END,
};

static const struct sr_field relabel_fields[] = {
	SR_FIELD_MAPLIST("rules", struct relabel_config, rules, n_rules, struct gw_relabel_rule_config, rule_fields,
			 .min = 0, .max = GW_RELABEL_MAX_RULES, .doc = "Rules, applied in order to each resource."),
	SR_FIELD_END,
};

struct rp {
	struct gw_component *c;
	struct gw_relabel *rl;
	struct gw_relabel_stats stats;
	uint64_t samples_dropped;
};

static int relabel_validate(const void *config, const char *path, struct sr_diag *d)
{
	const struct relabel_config *cfg = config;
	char err[512];
	struct gw_relabel *rl = gw_relabel_new(cfg->rules, cfg->n_rules, err, sizeof(err));

	if (!rl) {
		sr_diag_add(d, NULL, 0, 0, path, "%s", err);
		return -EINVAL;
	}
	gw_relabel_free(rl);
	return 0;
}

static int relabel_create(struct gw_component *c)
{
	const struct relabel_config *cfg = c->config;
	struct rp *rp = calloc(1, sizeof(*rp));
	char err[512];

	if (!rp)
		return -ENOMEM;
	rp->c = c;
	rp->rl = gw_relabel_new(cfg->rules, cfg->n_rules, err, sizeof(err));
	if (!rp->rl) {
		int r = -errno;
		sr_log_error(COMPONENT, "invalid relabel rules", "id=%s error=%s", c->id, Q(err));
		free(rp);
		return r;
	}
	c->state = rp;
	return 0;
}

static void metrics_cb(struct gw_metrics_writer *w, void *userdata)
{
	struct rp *rp = userdata;
	char l[256] = "";

	gw_metrics_label(l, sizeof(l), "component", rp->c->id);
	gw_metrics__add(w, "stackrelay_gateway_relabel_resources_kept_total", GW_METRIC_COUNTER,
			"Resources kept by relabel rules.", l, (double)rp->stats.kept);
	gw_metrics__add(w, "stackrelay_gateway_relabel_resources_dropped_total", GW_METRIC_COUNTER,
			"Resources dropped by keep/drop rules.", l, (double)rp->stats.dropped);
	gw_metrics__add(w, "stackrelay_gateway_relabel_regex_limit_total", GW_METRIC_COUNTER,
			"Regex matches abandoned at the backtracking limit (treated as no match).", l,
			(double)rp->stats.regex_limit);
}

static const char *const relabel_drops[] = { "relabel", "out_of_memory", NULL };

static int relabel_start(struct gw_component *c)
{
	gw_component_declare_drops(c, relabel_drops);
	gw_runtime__add_metrics(c->runtime, metrics_cb, c->state);
	return 0;
}

static const char *attr_string(const struct gw_attr *a, char *buf, size_t size)
{
	switch (a->type) {
	case GW_ATTR_STRING:
		return a->v.s ? a->v.s : "";
	case GW_ATTR_INT:
		snprintf(buf, size, "%" PRId64, a->v.i);
		return buf;
	case GW_ATTR_BOOL:
		return a->v.b ? "true" : "false";
	case GW_ATTR_DOUBLE:
		snprintf(buf, size, "%.17g", a->v.d);
		return buf;
	}
	return "";
}

/* Relabels one resource; returns 1 kept, 0 dropped, -errno. */
static int relabel_resource(struct rp *rp, struct gw_profiles *p, struct gw_resource *r)
{
	struct gw_labels ls = { 0 };
	char buf[64];
	int kept, e = 0;

	for (uint32_t i = 0; i < r->n_attrs && e >= 0; i++)
		e = gw_labels__set(&ls, r->attrs[i].key, attr_string(&r->attrs[i], buf, sizeof(buf)));
	if (e < 0)
		goto out;
	kept = gw_relabel__apply(rp->rl, &ls, &rp->stats);
	if (kept <= 0) {
		e = kept;
		goto out;
	}
	/* Write back only what changed, so untouched attributes keep their types. */
	for (uint32_t i = 0; i < r->n_attrs;) {
		const char *v = gw_labels__get(&ls, r->attrs[i].key);
		if (!v) {
			gw_resource__remove_attr(r, r->attrs[i].key);
			continue;
		}
		if (strcmp(v, attr_string(&r->attrs[i], buf, sizeof(buf))) != 0 &&
		    (e = gw_resource__set_string(p, r, r->attrs[i].key, v)) < 0)
			goto out;
		i++;
	}
	for (size_t i = 0; i < ls.n; i++)
		if (!gw_resource__attr(r, ls.v[i].key) &&
		    (e = gw_resource__set_string(p, r, ls.v[i].key, ls.v[i].value)) < 0)
			goto out;
	e = 1;
out:
	gw_labels_clear(&ls);
	return e;
}

struct drop_set {
	const struct gw_resource *base;
	const bool *dropped;
};

static bool keep_sample(const struct gw_resource *r, const struct gw_sample *s, void *userdata)
{
	const struct drop_set *d = userdata;

	return !d->dropped[r - d->base];
}

static int relabel_consume(struct gw_component *c, struct gw_profiles *p)
{
	struct rp *rp = c->state;
	bool *dropped = NULL;
	uint32_t ndropped = 0;
	int r;

	if ((r = gw_profiles__make_writable(&p)) < 0) {
		gw_component_drop(c, p, "out_of_memory");
		return r;
	}
	if (p->n_resources && !(dropped = calloc(p->n_resources, sizeof(*dropped)))) {
		gw_component_drop(c, p, "out_of_memory");
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < p->n_resources; i++) {
		r = relabel_resource(rp, p, &p->resources[i]);
		if (r < 0) {
			/* Out of memory on one resource: it goes on as far as it was relabeled. */
			sr_log_warn(COMPONENT, "could not relabel a resource; passing it on", "id=%s error=\"%s\"",
				    c->id, strerror(-r));
			continue;
		}
		if (r == 0) {
			dropped[i] = true;
			ndropped++;
		}
	}
	if (ndropped) {
		struct drop_set d = { .base = p->resources, .dropped = dropped };
		uint64_t n = gw_profiles__filter(p, keep_sample, &d);
		rp->samples_dropped += n;
		gw_component_drop_samples(c, "relabel", n);
	}
	free(dropped);
	return gw_component_emit(c, p);
}

static void relabel_shutdown(struct gw_component *c, void (*done)(struct gw_component *c))
{
	done(c);
}

static void relabel_destroy(struct gw_component *c)
{
	struct rp *rp = c->state;

	if (!rp)
		return;
	if (c->runtime)
		gw_runtime__remove_metrics(c->runtime, metrics_cb, rp);
	gw_relabel_free(rp->rl);
	free(rp);
	c->state = NULL;
}

const struct gw_component_type gw_processor_relabel = {
	.name = "relabel",
	.kind = GW_PROCESSOR,
	.doc = "Prometheus relabeling (replace, keep, drop, keepequal, dropequal, hashmod, labelmap, labeldrop, "
	       "labelkeep, lowercase, uppercase) on resource attributes, e.g. to set service.name from "
	       "process.executable.name or drop noisy processes (docs/processors.md).",
	.config_fields = relabel_fields,
	.config_size = sizeof(struct relabel_config),
	.validate = relabel_validate,
	.create = relabel_create,
	.start = relabel_start,
	.consume = relabel_consume,
	.shutdown = relabel_shutdown,
	.destroy = relabel_destroy,
};
