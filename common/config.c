// SPDX-License-Identifier: Apache-2.0
/*
 * Schema checking and loading (see config.h for the whole flow).
 *
 * The check walks the YAML node tree beside the sr_field table and, at the
 * same time, emits a normalized copy of the section as YAML events: every
 * key in table order, durations and sizes as integers, enums in their
 * canonical spelling, string maps as lists of {key, value}, defaults filled
 * in. When the check found no problem, libcyaml loads that normalized text
 * with a schema generated from the same table, so libcyaml's loader, not a
 * second hand-written one, fills and allocates the struct.
 */
#include <ctype.h>
#include <cyaml/cyaml.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

#include "config.h"
#include "units.h"
#include "yaml-internal.h"

#define PATH_MAX_LEN 512

struct out_buf {
	unsigned char *s;
	size_t len, cap;
	bool oom;
};

struct check_ctx {
	const struct sr_yaml_doc *doc;
	struct sr_diag *d;
	const char *file;
	yaml_emitter_t *em; /* shared with sub-contexts for built-in defaults */
	struct out_buf out;
	bool emit_failed;
	size_t errors_before;
};

static int out_write(void *data, unsigned char *buffer, size_t size)
{
	struct out_buf *b = data;

	if (b->len + size + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 1024;
		while (cap < b->len + size + 1)
			cap *= 2;
		unsigned char *p = realloc(b->s, cap);
		if (!p) {
			b->oom = true;
			return 0;
		}
		b->s = p;
		b->cap = cap;
	}
	memcpy(b->s + b->len, buffer, size);
	b->len += size;
	b->s[b->len] = '\0';
	return 1;
}

static void emit(struct check_ctx *c, yaml_event_t *ev)
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
	emit(c, &ev);
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
	emit(c, &ev);
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
	emit(c, &ev);
}

static const char *kind_name(enum sr_field_kind k)
{
	switch (k) {
	case SR_FIELD_STRING:
		return "string";
	case SR_FIELD_BOOL:
		return "bool";
	case SR_FIELD_INT:
		return "int";
	case SR_FIELD_UINT:
		return "uint";
	case SR_FIELD_DOUBLE:
		return "float";
	case SR_FIELD_DURATION:
		return "duration";
	case SR_FIELD_SIZE:
		return "size";
	case SR_FIELD_ENUM:
		return "enum";
	case SR_FIELD_STRING_LIST:
		return "list of strings";
	case SR_FIELD_STRING_MAP:
		return "map of strings";
	case SR_FIELD_MAPPING:
		return "mapping";
	case SR_FIELD_MAPPING_LIST:
		return "list of mappings";
	case SR_FIELD_EXTERNAL:
		return "mapping";
	}
	return "?";
}

static const char *node_type_name(const struct sr_yaml_doc *doc, const struct sr_yaml_node *n)
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

static void bad(struct check_ctx *c, const struct sr_yaml_node *n, const char *path, const char *fmt, ...)
	SR_PRINTF(4, 5);
static void bad(struct check_ctx *c, const struct sr_yaml_node *n, const char *path, const char *fmt, ...)
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

static void path_join(char *out, size_t size, const char *path, const char *key)
{
	snprintf(out, size, "%s%s%s", path && *path ? path : "", path && *path ? "." : "", key);
}

static bool in_bounds_i(const struct sr_field *f, int64_t v)
{
	return f->min >= f->max || (v >= f->min && v <= f->max);
}

static bool in_bounds_u(const struct sr_field *f, uint64_t v)
{
	return f->min >= f->max || (v >= (uint64_t)f->min && v <= (uint64_t)f->max);
}

static const char *value_for_message(const struct sr_field *f, const char *text, char *buf, size_t size)
{
	if (f->secret)
		return "(secret)";
	snprintf(buf, size, "%s", text);
	return buf;
}

/*
 * Validates one scalar of a scalar kind and writes its normalized form to
 * norm (STRING: norm is not used, the caller emits text as is). Returns 0
 * or -EINVAL with a message in err.
 */
static int parse_scalar(const struct sr_field *f, const char *text, char *norm, size_t normsize, char *err,
			size_t errsize)
{
	char shown[160], b1[40], b2[40];
	char *end;

	value_for_message(f, text, shown, sizeof(shown));
	switch (f->kind) {
	case SR_FIELD_STRING:
		return 0;
	case SR_FIELD_BOOL:
		if (!strcasecmp(text, "true") || !strcasecmp(text, "yes") || !strcasecmp(text, "on")) {
			snprintf(norm, normsize, "true");
			return 0;
		}
		if (!strcasecmp(text, "false") || !strcasecmp(text, "no") || !strcasecmp(text, "off")) {
			snprintf(norm, normsize, "false");
			return 0;
		}
		snprintf(err, errsize, "invalid bool \"%s\": expected true or false", shown);
		return -EINVAL;
	case SR_FIELD_INT: {
		errno = 0;
		long long v = strtoll(text, &end, 10);
		if (!*text || *end || errno) {
			snprintf(err, errsize, "invalid integer \"%s\"", shown);
			return -EINVAL;
		}
		if (!in_bounds_i(f, v)) {
			snprintf(err, errsize, "%lld is out of range: must be from %" PRId64 " to %" PRId64, v, f->min,
				 f->max);
			return -EINVAL;
		}
		snprintf(norm, normsize, "%lld", v);
		return 0;
	}
	case SR_FIELD_UINT: {
		errno = 0;
		const char *p = text;
		while (isspace((unsigned char)*p))
			p++;
		unsigned long long v = strtoull(text, &end, 10);
		if (!*text || *end || errno || *p == '-') {
			snprintf(err, errsize, "invalid non-negative integer \"%s\"", shown);
			return -EINVAL;
		}
		if (!in_bounds_u(f, v)) {
			snprintf(err, errsize, "%llu is out of range: must be from %" PRId64 " to %" PRId64, v, f->min,
				 f->max);
			return -EINVAL;
		}
		snprintf(norm, normsize, "%llu", v);
		return 0;
	}
	case SR_FIELD_DOUBLE: {
		errno = 0;
		double v = strtod(text, &end);
		if (!*text || *end || errno || !isfinite(v)) {
			snprintf(err, errsize, "invalid number \"%s\"", shown);
			return -EINVAL;
		}
		if (f->min < f->max && (v < (double)f->min || v > (double)f->max)) {
			snprintf(err, errsize, "%g is out of range: must be from %" PRId64 " to %" PRId64, v, f->min,
				 f->max);
			return -EINVAL;
		}
		snprintf(norm, normsize, "%.17g", v);
		return 0;
	}
	case SR_FIELD_DURATION: {
		uint64_t ns;
		int r = sr_parse_duration(text, &ns);
		if (r == -ERANGE) {
			snprintf(err, errsize, "duration \"%s\" is too long", shown);
			return -EINVAL;
		}
		if (r < 0) {
			snprintf(err, errsize,
				 "invalid duration \"%s\": expected a number with a unit (ns, us, ms, s, m, h), "
				 "e.g. \"10s\", \"1m30s\", \"250ms\"",
				 shown);
			return -EINVAL;
		}
		if (!in_bounds_u(f, ns)) {
			snprintf(err, errsize, "duration %s is out of range: must be from %s to %s", shown,
				 sr_format_duration((uint64_t)f->min, b1, sizeof(b1)),
				 sr_format_duration((uint64_t)f->max, b2, sizeof(b2)));
			return -EINVAL;
		}
		snprintf(norm, normsize, "%" PRIu64, ns);
		return 0;
	}
	case SR_FIELD_SIZE: {
		uint64_t bytes;
		if (f->auto_zero && !strcasecmp(text, "auto")) {
			snprintf(norm, normsize, "0");
			return 0;
		}
		int r = sr_parse_size(text, &bytes);
		if (r < 0) {
			snprintf(err, errsize,
				 "invalid size \"%s\": expected bytes or a number with a unit (KiB, MiB, GiB, TiB, "
				 "KB, MB, GB, TB), e.g. \"64MiB\"%s",
				 shown, f->auto_zero ? ", or auto" : "");
			return -EINVAL;
		}
		if (!in_bounds_u(f, bytes)) {
			snprintf(err, errsize, "size %s is out of range: must be from %s to %s", shown,
				 sr_format_size((uint64_t)f->min, b1, sizeof(b1)),
				 sr_format_size((uint64_t)f->max, b2, sizeof(b2)));
			return -EINVAL;
		}
		snprintf(norm, normsize, "%" PRIu64, bytes);
		return 0;
	}
	case SR_FIELD_ENUM: {
		char expected[256] = "";
		size_t o = 0;
		for (size_t i = 0; f->values[i]; i++) {
			if (!strcasecmp(text, f->values[i])) {
				snprintf(norm, normsize, "%s", f->values[i]);
				return 0;
			}
			int w = snprintf(expected + o, sizeof(expected) - o, "%s%s", i ? ", " : "", f->values[i]);
			if (w > 0 && o + (size_t)w < sizeof(expected))
				o += (size_t)w;
		}
		snprintf(err, errsize, "invalid value \"%s\": expected one of %s", shown, expected);
		return -EINVAL;
	}
	default:
		snprintf(err, errsize, "internal: %s is not a scalar kind", kind_name(f->kind));
		return -EINVAL;
	}
}

static bool is_scalar_kind(enum sr_field_kind k)
{
	return k <= SR_FIELD_ENUM;
}

static void check_mapping(struct check_ctx *c, const struct sr_yaml_node *node, const struct sr_yaml_node *parent,
			  const struct sr_field *fields, const char *path);

static void check_scalar_value(struct check_ctx *c, const struct sr_field *f, const struct sr_yaml_node *v,
			       const char *path)
{
	char norm[64] = "0", err[512];

	if (sr_yaml_node_type(c->doc, v) != SR_YAML_SCALAR) {
		bad(c, v, path, "expected a %s, got %s", kind_name(f->kind), node_type_name(c->doc, v));
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
			bad(c, v, path, "length %zu is out of range: must be from %" PRId64 " to %" PRId64,
			    strlen(text), f->min, f->max);
		emit_scalar(c, text, true);
		return;
	}
	if (parse_scalar(f, text, norm, sizeof(norm), err, sizeof(err)) < 0) {
		bad(c, v, path, "%s", err);
		emit_scalar(c, "0", false);
		return;
	}
	emit_scalar(c, norm, f->kind == SR_FIELD_ENUM);
}

static void check_count(struct check_ctx *c, const struct sr_field *f, const struct sr_yaml_node *v, size_t n,
			const char *path)
{
	if (f->min < f->max && (n < (size_t)f->min || n > (size_t)f->max))
		bad(c, v, path, "has %zu entries: must have from %" PRId64 " to %" PRId64, n, f->min, f->max);
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
			bad(c, v, path, "expected a %s, got %s", kind_name(f->kind), node_type_name(c->doc, v));
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
					bad(c, item, sub, "expected a mapping, got %s", node_type_name(c->doc, item));
					continue;
				}
				check_mapping(c, item, v, f->fields, sub);
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
			bad(c, v, path, "expected a map of strings, got %s", node_type_name(c->doc, v));
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
				bad(c, k, path, "map keys must be strings");
				continue;
			}
			for (size_t j = 0; j < i; j++) {
				const struct sr_yaml_node *k2, *v2;
				sr_yaml_mapping_pair(c->doc, v, j, &k2, &v2);
				const char *ks2 = sr_yaml_raw_scalar(k2);
				if (ks2 && !strcmp(ks, ks2)) {
					bad(c, k, path, "duplicate key \"%s\"", ks);
					break;
				}
			}
			path_join(sub, sizeof(sub), path, ks);
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
			check_mapping(c, NULL, parent, f->fields, path);
			return;
		}
		if (sr_yaml_node_type(c->doc, v) != SR_YAML_MAPPING) {
			bad(c, v, path, "expected a mapping, got %s", node_type_name(c->doc, v));
			emit_mapping(c, true);
			emit_mapping(c, false);
			return;
		}
		check_mapping(c, v, parent, f->fields, path);
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
			bad(c, parent, path, "default \"%s\": %s", f->def, err);
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
			bad(c, parent, path, "internal: invalid built-in default \"%s\"", f->def);
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
			bad(c, parent, path, "internal: invalid built-in default \"%s\"", f->def);
		sr_yaml_doc_free(ddoc);
		sr_diag_free(dd);
		return;
	}
	if (parse_scalar(f, f->def, norm, sizeof(norm), err, sizeof(err)) < 0) {
		/* A bug in a schema table; the unit tests load every table with defaults. */
		bad(c, parent, path, "internal: invalid built-in default \"%s\"", f->def);
		emit_scalar(c, "0", false);
		return;
	}
	emit_scalar(c, norm, f->kind == SR_FIELD_ENUM);
}

static void check_mapping(struct check_ctx *c, const struct sr_yaml_node *node, const struct sr_yaml_node *parent,
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
			bad(c, k, path, "keys must be strings, got %s", node_type_name(c->doc, k));
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
				bad(c, k, path, "unknown key \"%s\" (did you mean \"%s\"?)", ks, best);
			else
				bad(c, k, path, "unknown key \"%s\"", ks);
			continue;
		}
		for (size_t j = 0; j < i; j++) {
			const struct sr_yaml_node *k2, *v2;
			sr_yaml_mapping_pair(c->doc, node, j, &k2, &v2);
			const char *ks2 = sr_yaml_raw_scalar(k2);
			if (ks2 && !strcmp(ks, ks2)) {
				bad(c, k, path, "duplicate key \"%s\" (first at line %u)", ks, sr_yaml_node_line(k2));
				break;
			}
		}
	}
	for (const struct sr_field *f = fields; f->key; f++) {
		const struct sr_yaml_node *v = node ? sr_yaml_mapping_get(c->doc, node, f->key) : NULL;
		if (f->kind == SR_FIELD_EXTERNAL)
			continue;
		path_join(sub, sizeof(sub), path, f->key);
		if (!v || (sr_yaml_is_null(c->doc, v) && is_scalar_kind(f->kind))) {
			if (f->required) {
				bad(c, v ? v : where, path, "missing required key \"%s\"", f->key);
				continue;
			}
			if (f->def) {
				emit_scalar(c, f->key, false);
				emit_default(c, f, where, sub);
			} else if (f->kind == SR_FIELD_MAPPING) {
				emit_scalar(c, f->key, false);
				check_mapping(c, NULL, where, f->fields, sub);
			}
			continue;
		}
		emit_scalar(c, f->key, false);
		check_value(c, f, v, where, sub);
	}
	emit_mapping(c, false);
}

/* libcyaml schemas generated from sr_field tables, built once per table and kept. */

struct schema_cache {
	const struct sr_field *fields;
	cyaml_schema_field_t *cfields;
	struct schema_cache *next;
};

static struct schema_cache *schema_cache_head;
static pthread_mutex_t schema_cache_lock = PTHREAD_MUTEX_INITIALIZER;

static const cyaml_schema_field_t kv_cfields[] = {
	CYAML_FIELD_STRING_PTR("key", CYAML_FLAG_POINTER, struct sr_kv, key, 0, CYAML_UNLIMITED),
	CYAML_FIELD_STRING_PTR("value", CYAML_FLAG_POINTER, struct sr_kv, value, 0, CYAML_UNLIMITED),
	CYAML_FIELD_END,
};
static const cyaml_schema_value_t kv_entry = {
	CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, struct sr_kv, kv_cfields),
};
static const cyaml_schema_value_t string_entry = {
	CYAML_VALUE_STRING(CYAML_FLAG_POINTER, char, 0, CYAML_UNLIMITED),
};

static size_t member_end(const struct sr_field *f)
{
	size_t end;

	switch (f->kind) {
	case SR_FIELD_EXTERNAL:
		return 0;
	case SR_FIELD_STRING:
		return f->offset + sizeof(char *);
	case SR_FIELD_BOOL:
		return f->offset + sizeof(bool);
	case SR_FIELD_ENUM:
		return f->offset + sizeof(int);
	case SR_FIELD_MAPPING:
		return f->offset + f->elem_size;
	case SR_FIELD_STRING_LIST:
	case SR_FIELD_STRING_MAP:
	case SR_FIELD_MAPPING_LIST:
		end = f->offset + sizeof(void *);
		return SR_MAX(end, (size_t)f->count_offset + sizeof(uint32_t));
	default:
		return f->offset + sizeof(uint64_t);
	}
}

static size_t table_size(const struct sr_field *fields)
{
	size_t size = 0;

	for (const struct sr_field *f = fields; f->key; f++)
		size = SR_MAX(size, member_end(f));
	return size ? size : 1;
}

static cyaml_schema_field_t *cyaml_fields_for(const struct sr_field *fields);

static int cyaml_field_for(const struct sr_field *f, cyaml_schema_field_t *cf)
{
	const enum cyaml_flag opt = CYAML_FLAG_OPTIONAL;

	cf->key = f->key;
	cf->data_offset = f->offset;
	switch (f->kind) {
	case SR_FIELD_STRING:
		cf->value = (cyaml_schema_value_t){ .type = CYAML_STRING,
						    .flags = opt | CYAML_FLAG_POINTER,
						    .data_size = sizeof(char),
						    .string = { .min = 0, .max = CYAML_UNLIMITED } };
		return 0;
	case SR_FIELD_BOOL:
		cf->value = (cyaml_schema_value_t){ .type = CYAML_BOOL, .flags = opt, .data_size = sizeof(bool) };
		return 0;
	case SR_FIELD_INT:
		cf->value = (cyaml_schema_value_t){ .type = CYAML_INT, .flags = opt, .data_size = sizeof(int64_t) };
		return 0;
	case SR_FIELD_UINT:
	case SR_FIELD_DURATION:
	case SR_FIELD_SIZE:
		cf->value = (cyaml_schema_value_t){ .type = CYAML_UINT, .flags = opt, .data_size = sizeof(uint64_t) };
		return 0;
	case SR_FIELD_DOUBLE:
		cf->value = (cyaml_schema_value_t){ .type = CYAML_FLOAT, .flags = opt, .data_size = sizeof(double) };
		return 0;
	case SR_FIELD_ENUM: {
		size_t n = 0;
		while (f->values[n])
			n++;
		cyaml_strval_t *sv = calloc(n ? n : 1, sizeof(*sv));
		if (!sv)
			return -ENOMEM;
		for (size_t i = 0; i < n; i++)
			sv[i] = (cyaml_strval_t){ .str = f->values[i], .val = (int64_t)i };
		cf->value = (cyaml_schema_value_t){ .type = CYAML_ENUM,
						    .flags = opt | CYAML_FLAG_STRICT,
						    .data_size = sizeof(int),
						    .enumeration = { .strings = sv, .count = (uint32_t)n } };
		return 0;
	}
	case SR_FIELD_STRING_LIST:
	case SR_FIELD_STRING_MAP:
	case SR_FIELD_MAPPING_LIST: {
		const cyaml_schema_value_t *entry;
		uint32_t data_size;
		if (f->kind == SR_FIELD_STRING_LIST) {
			entry = &string_entry;
			data_size = sizeof(char *);
		} else if (f->kind == SR_FIELD_STRING_MAP) {
			entry = &kv_entry;
			data_size = sizeof(struct sr_kv);
		} else {
			cyaml_schema_value_t *e = calloc(1, sizeof(*e));
			cyaml_schema_field_t *sub = cyaml_fields_for(f->fields);
			if (!e || !sub) {
				free(e);
				return -ENOMEM;
			}
			*e = (cyaml_schema_value_t){ .type = CYAML_MAPPING,
						     .flags = CYAML_FLAG_DEFAULT,
						     .data_size = f->elem_size,
						     .mapping = { .fields = sub } };
			entry = e;
			data_size = f->elem_size;
		}
		cf->count_offset = f->count_offset;
		cf->count_size = sizeof(uint32_t);
		cf->value = (cyaml_schema_value_t){ .type = CYAML_SEQUENCE,
						    .flags = opt | CYAML_FLAG_POINTER,
						    .data_size = data_size,
						    .sequence = { .entry = entry, .min = 0, .max = CYAML_UNLIMITED } };
		return 0;
	}
	case SR_FIELD_MAPPING: {
		cyaml_schema_field_t *sub = cyaml_fields_for(f->fields);
		if (!sub)
			return -ENOMEM;
		cf->value = (cyaml_schema_value_t){
			.type = CYAML_MAPPING, .flags = opt, .data_size = f->elem_size, .mapping = { .fields = sub }
		};
		return 0;
	}
	case SR_FIELD_EXTERNAL:
		break;
	}
	return -EINVAL;
}

/* Called with schema_cache_lock held (recursively through cyaml_field_for: the lock is only taken at the top). */
static cyaml_schema_field_t *cyaml_fields_for(const struct sr_field *fields)
{
	size_t n = 0;

	for (struct schema_cache *e = schema_cache_head; e; e = e->next)
		if (e->fields == fields)
			return e->cfields;
	while (fields[n].key)
		n++;
	cyaml_schema_field_t *cf = calloc(n + 1, sizeof(*cf));
	struct schema_cache *entry = calloc(1, sizeof(*entry));
	if (!cf || !entry)
		goto oom;
	for (size_t i = 0, o = 0; i < n; i++) {
		if (fields[i].kind == SR_FIELD_EXTERNAL)
			continue; /* never emitted, so libcyaml need not know it */
		if (cyaml_field_for(&fields[i], &cf[o++]) < 0)
			goto oom;
	}
	/* cf[n] is all zero: CYAML_FIELD_END. Kept for the life of the process. */
	entry->fields = fields;
	entry->cfields = cf;
	entry->next = schema_cache_head;
	schema_cache_head = entry;
	return cf;
oom:
	free(cf);
	free(entry);
	return NULL;
}

struct cyaml_log_ctx {
	char msg[512];
};

static void cyaml_log_to_buffer(cyaml_log_t level, void *ctx, const char *fmt, va_list args)
{
	struct cyaml_log_ctx *l = ctx;

	if (level < CYAML_LOG_ERROR || l->msg[0])
		return;
	vsnprintf(l->msg, sizeof(l->msg), fmt, args);
	l->msg[strcspn(l->msg, "\n")] = '\0';
}

int sr_config_load(const struct sr_yaml_doc *doc, const struct sr_yaml_node *node, const char *path,
		   const struct sr_field *fields, void *ret, struct sr_diag *d)
{
	struct check_ctx c = { .doc = doc, .d = d, .file = doc ? sr_yaml_doc_file(doc) : NULL };
	size_t errors_before = sr_diag_errors(d);
	void *loaded = NULL;
	yaml_event_t ev;
	int r = -EINVAL;

	if (node && sr_yaml_node_type(doc, node) != SR_YAML_MAPPING && !sr_yaml_is_null(doc, node)) {
		bad(&c, node, path, "expected a mapping, got %s", node_type_name(doc, node));
		return -EINVAL;
	}
	if (node && sr_yaml_is_null(doc, node))
		node = NULL;
	yaml_emitter_t em;
	c.em = &em;
	if (!yaml_emitter_initialize(&em)) {
		sr_diag_add(d, c.file, 0, 0, path, "out of memory");
		return -ENOMEM;
	}
	yaml_emitter_set_output(&em, out_write, &c.out);
	yaml_emitter_set_unicode(&em, 1);
	yaml_emitter_set_width(&em, -1);
	if (!yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING))
		c.emit_failed = true;
	else
		emit(&c, &ev);
	if (!yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1))
		c.emit_failed = true;
	else
		emit(&c, &ev);
	check_mapping(&c, node, node, fields, path);
	if (!yaml_document_end_event_initialize(&ev, 1))
		c.emit_failed = true;
	else
		emit(&c, &ev);
	if (!yaml_stream_end_event_initialize(&ev))
		c.emit_failed = true;
	else
		emit(&c, &ev);
	yaml_emitter_flush(&em);

	if (sr_diag_errors(d) > errors_before)
		goto out;
	if (c.emit_failed || c.out.oom) {
		sr_diag_add(d, c.file, 0, 0, path, "internal: could not normalize the configuration: %s",
			    em.problem ? em.problem : "out of memory");
		goto out;
	}

	pthread_mutex_lock(&schema_cache_lock);
	cyaml_schema_field_t *cfields = cyaml_fields_for(fields);
	pthread_mutex_unlock(&schema_cache_lock);
	if (!cfields) {
		sr_diag_add(d, c.file, 0, 0, path, "out of memory");
		r = -ENOMEM;
		goto out;
	}
	size_t size = table_size(fields);
	const cyaml_schema_value_t top = {
		.type = CYAML_MAPPING,
		.flags = CYAML_FLAG_POINTER,
		.data_size = (uint32_t)size,
		.mapping = { .fields = cfields },
	};
	struct cyaml_log_ctx lctx = { .msg = "" };
	const cyaml_config_t cfg = {
		.log_fn = cyaml_log_to_buffer,
		.log_ctx = &lctx,
		.mem_fn = cyaml_mem,
		.log_level = CYAML_LOG_ERROR,
		.flags = CYAML_CFG_DEFAULT,
	};
	cyaml_err_t e = cyaml_load_data(c.out.s, c.out.len, &cfg, &top, (cyaml_data_t **)&loaded, NULL);
	if (e != CYAML_OK) {
		/* Only reachable if the check above and libcyaml disagree: report, never guess. */
		sr_diag_add(d, c.file, sr_yaml_node_line(node), sr_yaml_node_column(node), path,
			    "internal: libcyaml rejected the checked configuration: %s%s%s", cyaml_strerror(e),
			    lctx.msg[0] ? ": " : "", lctx.msg);
		goto out;
	}
	memcpy(ret, loaded, size);
	free(loaded);
	r = 0;
out:
	yaml_emitter_delete(&em);
	free(c.out.s);
	return r;
}

int sr_config_load_file(const char *file, const struct sr_field *fields, void *ret, struct sr_diag *d)
{
	struct sr_yaml_doc *doc = sr_yaml_load_file(file, d);
	int r;

	if (!doc)
		return -EINVAL;
	r = sr_config_load(doc, sr_yaml_root(doc), "", fields, ret, d);
	sr_yaml_doc_free(doc);
	return r;
}

void sr_config_free(const struct sr_field *fields, void *cfg)
{
	if (!cfg)
		return;
	for (const struct sr_field *f = fields; f->key; f++) {
		char *base = (char *)cfg + f->offset;
		uint32_t *count = (uint32_t *)((char *)cfg + f->count_offset);
		switch (f->kind) {
		case SR_FIELD_STRING:
			SR_FREE(*(char **)base);
			break;
		case SR_FIELD_STRING_LIST: {
			char **items = *(char ***)base;
			for (uint32_t i = 0; items && i < *count; i++)
				free(items[i]);
			SR_FREE(*(char ***)base);
			*count = 0;
			break;
		}
		case SR_FIELD_STRING_MAP: {
			struct sr_kv *kv = *(struct sr_kv **)base;
			for (uint32_t i = 0; kv && i < *count; i++) {
				free(kv[i].key);
				free(kv[i].value);
			}
			SR_FREE(*(struct sr_kv **)base);
			*count = 0;
			break;
		}
		case SR_FIELD_MAPPING:
			sr_config_free(f->fields, base);
			break;
		case SR_FIELD_MAPPING_LIST: {
			char *items = *(char **)base;
			for (uint32_t i = 0; items && i < *count; i++)
				sr_config_free(f->fields, items + (size_t)i * f->elem_size);
			SR_FREE(*(char **)base);
			*count = 0;
			break;
		}
		default:
			break;
		}
	}
}

static void describe_type(const struct sr_field *f, bool markdown, char *buf, size_t size)
{
	if (f->kind == SR_FIELD_ENUM) {
		size_t o = (size_t)snprintf(buf, size, "enum: ");
		for (size_t i = 0; f->values[i] && o < size; i++)
			o += (size_t)snprintf(buf + o, size - o, "%s%s", i ? (markdown ? " \\| " : "|") : "",
					      f->values[i]);
		return;
	}
	snprintf(buf, size, "%s", kind_name(f->kind));
}

static void describe_bounds(const struct sr_field *f, char *buf, size_t size)
{
	char a[40], b[40];

	buf[0] = '\0';
	if (f->min >= f->max)
		return;
	switch (f->kind) {
	case SR_FIELD_DURATION:
		snprintf(buf, size, " (%s to %s)", sr_format_duration((uint64_t)f->min, a, sizeof(a)),
			 sr_format_duration((uint64_t)f->max, b, sizeof(b)));
		break;
	case SR_FIELD_SIZE:
		snprintf(buf, size, " (%s to %s%s)", sr_format_size((uint64_t)f->min, a, sizeof(a)),
			 sr_format_size((uint64_t)f->max, b, sizeof(b)), f->auto_zero ? ", or auto" : "");
		break;
	case SR_FIELD_INT:
	case SR_FIELD_UINT:
	case SR_FIELD_DOUBLE:
		snprintf(buf, size, " (%" PRId64 " to %" PRId64 ")", f->min, f->max);
		break;
	case SR_FIELD_STRING_LIST:
	case SR_FIELD_STRING_MAP:
	case SR_FIELD_MAPPING_LIST:
		snprintf(buf, size, " (%" PRId64 " to %" PRId64 " entries)", f->min, f->max);
		break;
	default:
		break;
	}
}

void sr_config_describe(const struct sr_field *fields, const char *prefix, bool markdown, FILE *f)
{
	char key[PATH_MAX_LEN], type[256], bounds[96];

	for (const struct sr_field *fl = fields; fl->key; fl++) {
		path_join(key, sizeof(key), prefix, fl->key);
		describe_type(fl, markdown, type, sizeof(type));
		describe_bounds(fl, bounds, sizeof(bounds));
		const char *def = fl->required ? "required" : fl->def ? fl->def : "";
		if (markdown)
			fprintf(f, "| `%s` | %s | %s%s%s | %s%s |\n", key, type, *def && !fl->required ? "`" : "",
				*def ? def : "—", *def && !fl->required ? "`" : "", fl->doc ? fl->doc : "", bounds);
		else
			fprintf(f, "  %-44s %-18s %-10s %s%s\n", key, type, *def ? def : "-", fl->doc ? fl->doc : "",
				bounds);
		if (fl->kind == SR_FIELD_MAPPING)
			sr_config_describe(fl->fields, key, markdown, f);
		else if (fl->kind == SR_FIELD_MAPPING_LIST) {
			char sub[PATH_MAX_LEN + 2];
			snprintf(sub, sizeof(sub), "%s[]", key);
			sr_config_describe(fl->fields, sub, markdown, f);
		}
	}
}
