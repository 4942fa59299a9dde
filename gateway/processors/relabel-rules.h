/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Prometheus relabeling over a set of string attributes (the relabel
 * processor runs it on each resource's attributes). Same actions, defaults
 * and regex anchoring as Prometheus' relabel_config; see docs/processors.md.
 *
 * Keys are OpenTelemetry attribute keys exactly as they are, dots included
 * (source_labels: [process.executable.name], target_label: service.name).
 * Keys starting with "__" are scratch space: removed after the last rule,
 * as Prometheus does with its __ labels.
 */
#ifndef SR_GW_RELABEL_RULES_H
#define SR_GW_RELABEL_RULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sr_kv;

/* Most rules one relabel processor accepts. */
#define GW_RELABEL_MAX_RULES 1000u

/* A set of string attributes; keys unique. */
struct gw_labels {
	struct sr_kv *v;
	size_t n, cap;
};

void gw_labels_clear(struct gw_labels *ls);
const char *gw_labels__get(const struct gw_labels *ls, const char *key);
/* Sets (copying key and value); replaces an existing value. */
int gw_labels__set(struct gw_labels *ls, const char *key, const char *value);
/* Removes key if present; returns true if it was. */
bool gw_labels__del(struct gw_labels *ls, const char *key);

enum gw_relabel_action {
	GW_RELABEL_REPLACE,
	GW_RELABEL_KEEP,
	GW_RELABEL_DROP,
	GW_RELABEL_KEEPEQUAL,
	GW_RELABEL_DROPEQUAL,
	GW_RELABEL_HASHMOD,
	GW_RELABEL_LABELMAP,
	GW_RELABEL_LABELDROP,
	GW_RELABEL_LABELKEEP,
	GW_RELABEL_LOWERCASE,
	GW_RELABEL_UPPERCASE,
	GW_RELABEL__MAX,
};

/* The action names, as written in config; NULL-terminated, indexed by the enum. */
extern const char *const gw_relabel_action_names[];

/* One rule as configured; NULL/0 members take Prometheus' defaults. */
struct gw_relabel_rule_config {
	char **source_labels;
	uint32_t source_labels_count;
	char *separator; /* default ";" */
	char *target_label;
	char *regex; /* default "(.*)", anchored */
	uint64_t modulus;
	char *replacement; /* default "$1" */
	int action;	   /* enum gw_relabel_action; default replace (0) */
};

struct gw_relabel;

/*
 * Compiles rules. On a bad rule returns NULL, errno EINVAL and a message
 * naming it in errbuf ("rules[2]: regex: missing ) at offset 4").
 */
struct gw_relabel *gw_relabel_new(const struct gw_relabel_rule_config *rules, size_t n, char *errbuf, size_t errsize);
void gw_relabel_free(struct gw_relabel *rl);

struct gw_relabel_stats {
	uint64_t kept;
	uint64_t dropped;
	uint64_t regex_limit; /* matches abandoned at GW_REGEX_MATCH_LIMIT (counted as no match) */
};

/*
 * Runs the rules over ls in order. Returns 1 when the set is kept, 0 when a
 * keep/drop rule dropped it, -ENOMEM. Counts into stats if not NULL.
 */
int gw_relabel__apply(const struct gw_relabel *rl, struct gw_labels *ls, struct gw_relabel_stats *stats);

#endif
