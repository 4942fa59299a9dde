/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The check of a YAML section against its sr_field table
 * (config-private.h): the walk over the node tree beside the table that
 * reports every problem (unknown keys with a "did you mean", duplicates,
 * wrong node types, values, counts, missing required keys) and, at the same
 * time, emits the normalized copy of the section that config.c hands to
 * libcyaml, defaults filled in.
 */
#include <ctype.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "config-private.h"
#include "config.h"
#include "yaml-private.h"

void sr_config_emit(struct check_ctx *c, yaml_event_t *ev)
{
	if (c->emit_failed) {
		yaml_event_delete(ev);
		return;
	}
	if (!yaml_emitter_emit(c->em, ev))
		c->emit_failed = true;
}

static void emit_scalar(struct check_ctx *c, const char *s, bool quoted)
{
	yaml_event_t ev;

	if (!yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)s, (int)strlen(s), !quoted, quoted,
					  quoted ? YAML_DOUBLE_QUOTED_SCALAR_STYLE : YAML_PLAIN_SCALAR_STYLE)) {
		c->emit_failed = true;
		return;
	}
	sr_config_emit(c, &ev);
}

static void emit_mapping(struct check_ctx *c, bool start)
{
	yaml_event_t ev;
	int ok = start ? yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_MAPPING_STYLE)
		       : yaml_mapping_end_event_initialize(&ev);
	if (!ok) {
		c->emit_failed = true;
		return;
	}
	sr_config_emit(c, &ev);
}

static void emit_sequence(struct check_ctx *c, bool start)
{
	yaml_event_t ev;
	int ok = start ? yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_SEQUENCE_STYLE)
		       : yaml_sequence_end_event_initialize(&ev);
	if (!ok) {
		c->emit_failed = true;
		return;
	}
	sr_config_emit(c, &ev);
}

const char *sr_config_node_type_name(const struct sr_yaml_doc *doc, const struct sr_yaml_node *n)
{
	switch (sr_yaml_node_type(doc, n)) {
	case SR_YAML_SCALAR:
		return "a scalar";
	case SR_YAML_SEQUENCE:
		return "a sequence";
	case SR_YAML_MAPPING:
		return "a mapping";
	default:
		return "nothing";
	}
}

void sr_config_bad(struct check_ctx *c, const struct sr_yaml_node *n, const char *path, const char *fmt, ...)
{
	char msg[768];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	sr_diag_add(c->d, c->file, sr_yaml_node_line(n), sr_yaml_node_column(n), path, "%s", msg);
}

/* Levenshtein distance, for "did you mean". Keys are short. */
static size_t edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	size_t row[64];

	if (la >= SR_ARRAY_SIZE(row) || lb >= SR_ARRAY_SIZE(row))
		return SIZE_MAX;
	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t prev = row[0];
		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t cur = row[j];
			size_t cost = tolower((unsigned char)a[i - 1]) == tolower((unsigned char)b[j - 1]) ? 0 : 1;
			row[j] = SR_MIN(SR_MIN(row[j] + 1, row[j - 1] + 1), prev + cost);
			prev = cur;
		}
	}
	return row[lb];
}

static const struct sr_field *field_find(const struct sr_field *fields, const char *key)
{
	for (const struct sr_field *f = fields; f->key; f++)
		if (strcmp(f->key, key) == 0)
			return f;
	return NULL;
}

void sr_config_path_join(char *out, size_t size, const char *path, const char *key)
{
	snprintf(out, size, "%s%s%s", path && *path ? path : "", path && *path ? "." : "", key);
}

static bool is_scalar_kind(enum sr_field_kind k)
{
	return k <= SR_FIELD_ENUM;
}

static void check_scalar_value(struct check_ctx *c, const struct sr_field *f, const struct sr_yaml_node *v,
			       const char *path)
{
	char norm[64] = "0", err[512];

	if (sr_yaml_node_type(c->doc, v) != SR_YAML_SCALAR) {
		sr_config_bad(c, v, path, "expected a %s, got %s", sr_config_kind_name(f->kind),
			      sr_config_node_type_name(c->doc, v));
		emit_scalar(c, f->kind == SR_FIELD_STRING ? "" : "0", f->kind == SR_FIELD_STRING);
		return;
	}
	if (sr_yaml_scalar_failed(c->doc, v)) {
		emit_scalar(c, "0", false); /* reported already; nothing will be loaded */
		return;
	}
	const char *text = sr_yaml_scalar(c->doc, v);
	if (f->kind == SR_FIELD_STRING) {
		if (f->min < f->max && (strlen(text) < (size_t)f->min || strlen(text) > (size_t)f->max))
			sr_config_bad(c, v, path, "length %zu is out of range: must be from %" PRId64 " to %" PRId64,
				      strlen(text), f->min, f->max);
		emit_scalar(c, text, true);
		return;
	}
	if (sr_config_parse_scalar(f, text, norm, sizeof(norm), err, sizeof(err)) < 0) {
		sr_config_bad(c, v, path, "%s", err);
		emit_scalar(c, "0", false);
		return;
	}
	emit_scalar(c, norm, f->kind == SR_FIELD_ENUM);
}

static void check_count(struct check_ctx *c, const struct sr_field *f, const struct sr_yaml_node *v, size_t n,
			const char *path)
{
	if (f->min < f->max && (n < (size_t)f->min || n > (size_t)f->max))
		sr_config_bad(c, v, path, "has %zu entries: must have from %" PRId64 " to %" PRId64, n, f->min, f->max);
}

static void check_value(struct check_ctx *c, const struct sr_field *f, const struct sr_yaml_node *v,
			const struct sr_yaml_node *parent, const char *path)
{
	char sub[PATH_MAX_LEN];

	if (is_scalar_kind(f->kind)) {
		check_scalar_value(c, f, v, path);
		return;
	}
	switch (f->kind) {
	case SR_FIELD_STRING_LIST:
	case SR_FIELD_MAPPING_LIST: {
		emit_sequence(c, true);
		if (sr_yaml_is_null(c->doc, v)) {
			emit_sequence(c, false);
			return;
		}
		if (sr_yaml_node_type(c->doc, v) != SR_YAML_SEQUENCE) {
			sr_config_bad(c, v, path, "expected a %s, got %s", sr_config_kind_name(f->kind),
				      sr_config_node_type_name(c->doc, v));
			emit_sequence(c, false);
			return;
		}
		size_t n = sr_yaml_sequence_size(c->doc, v);
		check_count(c, f, v, n, path);
		for (size_t i = 0; i < n; i++) {
			const struct sr_yaml_node *item = sr_yaml_sequence_item(c->doc, v, i);
			snprintf(sub, sizeof(sub), "%s[%zu]", path, i);
			if (f->kind == SR_FIELD_MAPPING_LIST) {
				if (sr_yaml_node_type(c->doc, item) != SR_YAML_MAPPING) {
					sr_config_bad(c, item, sub, "expected a mapping, got %s",
						      sr_config_node_type_name(c->doc, item));
					continue;
				}
				sr_config_check_mapping(c, item, v, f->fields, sub);
				continue;
			}
			struct sr_field item_field = { .key = f->key, .kind = SR_FIELD_STRING, .secret = f->secret };
			check_scalar_value(c, &item_field, item, sub);
		}
		emit_sequence(c, false);
		return;
	}
	case SR_FIELD_STRING_MAP: {
		emit_sequence(c, true);
		if (sr_yaml_is_null(c->doc, v)) {
			emit_sequence(c, false);
			return;
		}
		if (sr_yaml_node_type(c->doc, v) != SR_YAML_MAPPING) {
			sr_config_bad(c, v, path, "expected a map of strings, got %s",
				      sr_config_node_type_name(c->doc, v));
			emit_sequence(c, false);
			return;
		}
		size_t n = sr_yaml_mapping_size(c->doc, v);
		check_count(c, f, v, n, path);
		for (size_t i = 0; i < n; i++) {
			const struct sr_yaml_node *k, *val;
			sr_yaml_mapping_pair(c->doc, v, i, &k, &val);
			const char *ks = sr_yaml_raw_scalar(k);
			if (!ks) {
				sr_config_bad(c, k, path, "map keys must be strings");
				continue;
			}
			for (size_t j = 0; j < i; j++) {
				const struct sr_yaml_node *k2, *v2;
				sr_yaml_mapping_pair(c->doc, v, j, &k2, &v2);
				const char *ks2 = sr_yaml_raw_scalar(k2);
				if (ks2 && !strcmp(ks, ks2)) {
					sr_config_bad(c, k, path, "duplicate key \"%s\"", ks);
					break;
				}
			}
			sr_config_path_join(sub, sizeof(sub), path, ks);
			emit_mapping(c, true);
			emit_scalar(c, "key", false);
			emit_scalar(c, ks, true);
			emit_scalar(c, "value", false);
			struct sr_field item_field = { .key = ks, .kind = SR_FIELD_STRING, .secret = f->secret };
			if (sr_yaml_is_null(c->doc, val))
				emit_scalar(c, "", true);
			else
				check_scalar_value(c, &item_field, val, sub);
			emit_mapping(c, false);
		}
		emit_sequence(c, false);
		return;
	}
	case SR_FIELD_MAPPING:
		if (sr_yaml_is_null(c->doc, v)) {
			sr_config_check_mapping(c, NULL, parent, f->fields, path);
			return;
		}
		if (sr_yaml_node_type(c->doc, v) != SR_YAML_MAPPING) {
			sr_config_bad(c, v, path, "expected a mapping, got %s", sr_config_node_type_name(c->doc, v));
			emit_mapping(c, true);
			emit_mapping(c, false);
			return;
		}
		sr_config_check_mapping(c, v, parent, f->fields, path);
		return;
	default:
		return;
	}
}

static void emit_default(struct check_ctx *c, const struct sr_field *f, const struct sr_yaml_node *parent,
			 const char *path)
{
	char norm[64], err[512];

	if (f->kind == SR_FIELD_STRING) {
		/* String defaults may name the environment: "${env:NODE_NAME:-}". */
		char *expanded = NULL;
		if (sr_env_expand(f->def, &expanded, err, sizeof(err), NULL) < 0) {
			sr_config_bad(c, parent, path, "default \"%s\": %s", f->def, err);
			emit_scalar(c, "", true);
			return;
		}
		emit_scalar(c, expanded, true);
		free(expanded);
		return;
	}
	if (!is_scalar_kind(f->kind)) {
		/* Defaults of lists and maps are written in YAML flow style: "[/usr/lib/debug]". */
		struct sr_diag *dd = sr_diag_new();
		struct sr_yaml_doc *ddoc = dd ? sr_yaml_load_string("<built-in default>", f->def, strlen(f->def), dd)
					      : NULL;
		if (!ddoc) {
			sr_config_bad(c, parent, path, "internal: invalid built-in default \"%s\"", f->def);
			emit_sequence(c, true);
			emit_sequence(c, false);
			sr_diag_free(dd);
			return;
		}
		struct check_ctx sub = *c;
		sub.doc = ddoc;
		sub.d = dd;
		sub.file = "<built-in default>";
		check_value(&sub, f, sr_yaml_root(ddoc), NULL, path);
		c->emit_failed = sub.emit_failed;
		if (sr_diag_errors(dd))
			sr_config_bad(c, parent, path, "internal: invalid built-in default \"%s\"", f->def);
		sr_yaml_doc_free(ddoc);
		sr_diag_free(dd);
		return;
	}
	if (sr_config_parse_scalar(f, f->def, norm, sizeof(norm), err, sizeof(err)) < 0) {
		/* A bug in a schema table; the unit tests load every table with defaults. */
		sr_config_bad(c, parent, path, "internal: invalid built-in default \"%s\"", f->def);
		emit_scalar(c, "0", false);
		return;
	}
	emit_scalar(c, norm, f->kind == SR_FIELD_ENUM);
}

void sr_config_check_mapping(struct check_ctx *c, const struct sr_yaml_node *node, const struct sr_yaml_node *parent,
			     const struct sr_field *fields, const char *path)
{
	char sub[PATH_MAX_LEN];
	size_t n = node ? sr_yaml_mapping_size(c->doc, node) : 0;
	const struct sr_yaml_node *where = node ? node : parent;

	emit_mapping(c, true);
	/* Keys that are not in the table, and keys written twice. */
	for (size_t i = 0; i < n; i++) {
		const struct sr_yaml_node *k, *v;
		sr_yaml_mapping_pair(c->doc, node, i, &k, &v);
		const char *ks = sr_yaml_raw_scalar(k);
		if (!ks) {
			sr_config_bad(c, k, path, "keys must be strings, got %s", sr_config_node_type_name(c->doc, k));
			continue;
		}
		if (!field_find(fields, ks)) {
			const char *best = NULL;
			size_t best_d = 3;
			for (const struct sr_field *f = fields; f->key; f++) {
				size_t dist = edit_distance(ks, f->key);
				if (dist < best_d) {
					best_d = dist;
					best = f->key;
				}
			}
			if (best)
				sr_config_bad(c, k, path, "unknown key \"%s\" (did you mean \"%s\"?)", ks, best);
			else
				sr_config_bad(c, k, path, "unknown key \"%s\"", ks);
			continue;
		}
		for (size_t j = 0; j < i; j++) {
			const struct sr_yaml_node *k2, *v2;
			sr_yaml_mapping_pair(c->doc, node, j, &k2, &v2);
			const char *ks2 = sr_yaml_raw_scalar(k2);
			if (ks2 && !strcmp(ks, ks2)) {
				sr_config_bad(c, k, path, "duplicate key \"%s\" (first at line %u)", ks,
					      sr_yaml_node_line(k2));
				break;
			}
		}
	}
	for (const struct sr_field *f = fields; f->key; f++) {
		const struct sr_yaml_node *v = node ? sr_yaml_mapping_get(c->doc, node, f->key) : NULL;
		if (f->kind == SR_FIELD_EXTERNAL)
			continue;
		sr_config_path_join(sub, sizeof(sub), path, f->key);
		if (!v || (sr_yaml_is_null(c->doc, v) && is_scalar_kind(f->kind))) {
			if (f->required) {
				sr_config_bad(c, v ? v : where, path, "missing required key \"%s\"", f->key);
				continue;
			}
			if (f->def) {
				emit_scalar(c, f->key, false);
				emit_default(c, f, where, sub);
			} else if (f->kind == SR_FIELD_MAPPING) {
				emit_scalar(c, f->key, false);
				sr_config_check_mapping(c, NULL, where, f->fields, sub);
			}
			continue;
		}
		emit_scalar(c, f->key, false);
		check_value(c, f, v, where, sub);
	}
	emit_mapping(c, false);
}
