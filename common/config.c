// SPDX-License-Identifier: Apache-2.0
/*
 * Loading a section (see config.h for the whole flow). sr_config_load() runs
 * the check (config-check.c), which walks the YAML node tree beside the
 * sr_field table and, at the same time, emits a normalized copy of the
 * section as YAML events: every key in table order, durations and sizes as
 * integers, enums in their canonical spelling, string maps as lists of
 * {key, value}, defaults filled in. When the check found no problem, libcyaml
 * loads that normalized text with a schema generated here from the same
 * table, so libcyaml's loader, not a second hand-written one, fills and
 * allocates the struct; sr_config_free() releases it.
 */
#include <cyaml/cyaml.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "common/grow.h"
#include "config-private.h"
#include "config.h"

static int out_write(void *data, unsigned char *buffer, size_t size)
{
	struct out_buf *b = data;

	if (sr_grow((void **)&b->s, &b->cap, b->len + size + 1, 1, 1024) < 0) {
		b->oom = true;
		return 0;
	}
	memcpy(b->s + b->len, buffer, size);
	b->len += size;
	b->s[b->len] = '\0';
	return 1;
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

/* Frees what cyaml_field_for() allocated for one field. The sub-schemas it points to are cached, so they stay. */
static void cyaml_field_free(cyaml_schema_field_t *cf)
{
	if (cf->value.type == CYAML_ENUM) {
		free((void *)cf->value.enumeration.strings);
	} else if (cf->value.type == CYAML_SEQUENCE) {
		const cyaml_schema_value_t *entry = cf->value.sequence.entry;
		if (entry != &string_entry && entry != &kv_entry)
			free((void *)entry); /* a list of mappings: its entry was allocated */
	}
}

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
				free(e); /* sub, when built, is cached */
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
	size_t n = 0, o = 0;

	for (struct schema_cache *e = schema_cache_head; e; e = e->next)
		if (e->fields == fields)
			return e->cfields;
	while (fields[n].key)
		n++;
	cyaml_schema_field_t *cf = calloc(n + 1, sizeof(*cf));
	struct schema_cache *entry = calloc(1, sizeof(*entry));
	if (!cf || !entry)
		goto oom;
	for (size_t i = 0; i < n; i++) {
		if (fields[i].kind == SR_FIELD_EXTERNAL)
			continue; /* never emitted, so libcyaml need not know it */
		if (cyaml_field_for(&fields[i], &cf[o]) < 0)
			goto oom;
		o++; /* cf[o] owns its arrays only once cyaml_field_for() succeeded on it */
	}
	/* cf[n] is all zero: CYAML_FIELD_END. Kept for the life of the process. */
	entry->fields = fields;
	entry->cfields = cf;
	entry->next = schema_cache_head;
	schema_cache_head = entry;
	return cf;
oom:
	for (size_t i = 0; i < o; i++)
		cyaml_field_free(&cf[i]);
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
		sr_config_bad(&c, node, path, "expected a mapping, got %s", sr_config_node_type_name(doc, node));
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
		sr_config_emit(&c, &ev);
	if (!yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1))
		c.emit_failed = true;
	else
		sr_config_emit(&c, &ev);
	sr_config_check_mapping(&c, node, node, fields, path);
	if (!yaml_document_end_event_initialize(&ev, 1))
		c.emit_failed = true;
	else
		sr_config_emit(&c, &ev);
	if (!yaml_stream_end_event_initialize(&ev))
		c.emit_failed = true;
	else
		sr_config_emit(&c, &ev);
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
