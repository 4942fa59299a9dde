// SPDX-License-Identifier: Apache-2.0
/*
 * A YAML document as libyaml loads it, plus what we add: every scalar
 * value after ${env:...} substitution, and positions for messages.
 *
 * Limits (config files are small; these stop hostile or broken input):
 * SR_YAML_MAX_FILE_BYTES per file, SR_YAML_MAX_DEPTH of nesting, and
 * SR_YAML_MAX_VISITS node visits, which bounds alias expansion ("billion
 * laughs") because aliases are walked, not copied.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <yaml.h>

#include "config.h"
#include "yaml-private.h"

#define SR_YAML_MAX_FILE_BYTES (4u << 20)
#define SR_YAML_MAX_DEPTH      64
#define SR_YAML_MAX_VISITS     200000

struct sr_yaml_doc {
	char *file;
	yaml_document_t doc;
	bool loaded;
	size_t n_nodes;
	char **expanded;    /* per node index (0-based): scalar after substitution */
	unsigned char *bad; /* per node: substitution failed, already reported */
	unsigned char *seen;
};

static size_t node_index(const struct sr_yaml_doc *doc, const struct sr_yaml_node *n)
{
	return (size_t)((const yaml_node_t *)n - doc->doc.nodes.start);
}

static const yaml_node_t *get_node(const struct sr_yaml_doc *doc, int id)
{
	return yaml_document_get_node((yaml_document_t *)&doc->doc, id);
}

const char *sr_yaml_doc_file(const struct sr_yaml_doc *doc)
{
	return doc->file;
}

const struct sr_yaml_node *sr_yaml_root(const struct sr_yaml_doc *doc)
{
	const yaml_node_t *n = yaml_document_get_root_node((yaml_document_t *)&doc->doc);
	return (const struct sr_yaml_node *)n;
}

enum sr_yaml_type sr_yaml_node_type(const struct sr_yaml_doc *doc, const struct sr_yaml_node *n)
{
	const yaml_node_t *y = (const yaml_node_t *)n;

	(void)doc;
	if (!y)
		return SR_YAML_NONE;
	switch (y->type) {
	case YAML_SCALAR_NODE:
		return SR_YAML_SCALAR;
	case YAML_SEQUENCE_NODE:
		return SR_YAML_SEQUENCE;
	case YAML_MAPPING_NODE:
		return SR_YAML_MAPPING;
	default:
		return SR_YAML_NONE;
	}
}

unsigned sr_yaml_node_line(const struct sr_yaml_node *n)
{
	return n ? (unsigned)((const yaml_node_t *)n)->start_mark.line + 1 : 0;
}

unsigned sr_yaml_node_column(const struct sr_yaml_node *n)
{
	return n ? (unsigned)((const yaml_node_t *)n)->start_mark.column + 1 : 0;
}

const char *sr_yaml_raw_scalar(const struct sr_yaml_node *n)
{
	const yaml_node_t *y = (const yaml_node_t *)n;

	if (!y || y->type != YAML_SCALAR_NODE)
		return NULL;
	return (const char *)y->data.scalar.value;
}

const char *sr_yaml_scalar(const struct sr_yaml_doc *doc, const struct sr_yaml_node *n)
{
	const yaml_node_t *y = (const yaml_node_t *)n;

	if (!y || y->type != YAML_SCALAR_NODE)
		return NULL;
	size_t i = node_index(doc, n);
	if (i < doc->n_nodes && doc->expanded[i])
		return doc->expanded[i];
	return (const char *)y->data.scalar.value;
}

int sr_yaml_set_scalar(struct sr_yaml_doc *doc, const struct sr_yaml_node *n, const char *value)
{
	const yaml_node_t *y = (const yaml_node_t *)n;
	size_t i;
	char *copy;

	if (!y || y->type != YAML_SCALAR_NODE)
		return -EINVAL;
	i = node_index(doc, n);
	if (i >= doc->n_nodes)
		return -EINVAL;
	copy = strdup(value);
	if (!copy)
		return -ENOMEM;
	free(doc->expanded[i]);
	doc->expanded[i] = copy;
	return 0;
}

bool sr_yaml_scalar_failed(const struct sr_yaml_doc *doc, const struct sr_yaml_node *n)
{
	size_t i = node_index(doc, n);
	return i < doc->n_nodes && doc->bad[i];
}

bool sr_yaml_is_null(const struct sr_yaml_doc *doc, const struct sr_yaml_node *n)
{
	const yaml_node_t *y = (const yaml_node_t *)n;

	if (!y)
		return true;
	if (y->type != YAML_SCALAR_NODE || y->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return false;
	const char *s = (const char *)y->data.scalar.value;
	(void)doc;
	return s[0] == '\0' || strcmp(s, "~") == 0 || strcasecmp(s, "null") == 0;
}

size_t sr_yaml_mapping_size(const struct sr_yaml_doc *doc, const struct sr_yaml_node *n)
{
	const yaml_node_t *y = (const yaml_node_t *)n;

	(void)doc;
	if (!y || y->type != YAML_MAPPING_NODE)
		return 0;
	return (size_t)(y->data.mapping.pairs.top - y->data.mapping.pairs.start);
}

int sr_yaml_mapping_pair(const struct sr_yaml_doc *doc, const struct sr_yaml_node *n, size_t i,
			 const struct sr_yaml_node **ret_key, const struct sr_yaml_node **ret_value)
{
	const yaml_node_t *y = (const yaml_node_t *)n;

	if (i >= sr_yaml_mapping_size(doc, n))
		return -ERANGE;
	const yaml_node_pair_t *p = y->data.mapping.pairs.start + i;
	*ret_key = (const struct sr_yaml_node *)get_node(doc, p->key);
	*ret_value = (const struct sr_yaml_node *)get_node(doc, p->value);
	return 0;
}

const struct sr_yaml_node *sr_yaml_mapping_get(const struct sr_yaml_doc *doc, const struct sr_yaml_node *n,
					       const char *key)
{
	size_t count = sr_yaml_mapping_size(doc, n);

	for (size_t i = 0; i < count; i++) {
		const struct sr_yaml_node *k, *v;
		if (sr_yaml_mapping_pair(doc, n, i, &k, &v) < 0)
			continue;
		const char *ks = sr_yaml_raw_scalar(k);
		if (ks && strcmp(ks, key) == 0)
			return v;
	}
	return NULL;
}

size_t sr_yaml_sequence_size(const struct sr_yaml_doc *doc, const struct sr_yaml_node *n)
{
	const yaml_node_t *y = (const yaml_node_t *)n;

	(void)doc;
	if (!y || y->type != YAML_SEQUENCE_NODE)
		return 0;
	return (size_t)(y->data.sequence.items.top - y->data.sequence.items.start);
}

const struct sr_yaml_node *sr_yaml_sequence_item(const struct sr_yaml_doc *doc, const struct sr_yaml_node *n, size_t i)
{
	const yaml_node_t *y = (const yaml_node_t *)n;

	if (i >= sr_yaml_sequence_size(doc, n))
		return NULL;
	return (const struct sr_yaml_node *)get_node(doc, y->data.sequence.items.start[i]);
}

void sr_yaml_doc_free(struct sr_yaml_doc *doc)
{
	if (!doc)
		return;
	if (doc->expanded)
		for (size_t i = 0; i < doc->n_nodes; i++)
			free(doc->expanded[i]);
	free(doc->expanded);
	free(doc->bad);
	free(doc->seen);
	if (doc->loaded)
		yaml_document_delete(&doc->doc);
	free(doc->file);
	free(doc);
}

struct expand_ctx {
	struct sr_yaml_doc *doc;
	struct sr_diag *d;
	size_t visits;
	bool too_big;
};

/* Substitutes in every scalar value reachable from n (keys are left as written). */
static void expand_walk(struct expand_ctx *c, const struct sr_yaml_node *n, char *path, size_t path_len,
			size_t path_cap, unsigned depth)
{
	struct sr_yaml_doc *doc = c->doc;
	enum sr_yaml_type t = sr_yaml_node_type(doc, n);

	if (!n || c->too_big)
		return;
	if (++c->visits > SR_YAML_MAX_VISITS || depth > SR_YAML_MAX_DEPTH) {
		c->too_big = true;
		sr_diag_add(c->d, doc->file, sr_yaml_node_line(n), sr_yaml_node_column(n), path,
			    "document too large or too deeply nested (more than %d levels or %d nodes, counting "
			    "aliases as often as they are used)",
			    SR_YAML_MAX_DEPTH, SR_YAML_MAX_VISITS);
		return;
	}
	size_t idx = node_index(doc, n);
	if (t == SR_YAML_SCALAR) {
		if (doc->seen[idx])
			return;
		doc->seen[idx] = 1;
		const char *raw = sr_yaml_raw_scalar(n);
		if (!strchr(raw, '$'))
			return;
		char err[512], *out = NULL;
		int r = sr_env_expand(raw, &out, err, sizeof(err), NULL);
		if (r < 0) {
			doc->bad[idx] = 1;
			sr_diag_add(c->d, doc->file, sr_yaml_node_line(n), sr_yaml_node_column(n), path, "%s", err);
			return;
		}
		if (r > 0)
			sr_diag_warn(c->d, doc->file, sr_yaml_node_line(n), sr_yaml_node_column(n), path, "%s", err);
		doc->expanded[idx] = out;
		return;
	}
	if (t == SR_YAML_SEQUENCE) {
		size_t count = sr_yaml_sequence_size(doc, n);
		for (size_t i = 0; i < count; i++) {
			int w = snprintf(path + path_len, path_cap - path_len, "[%zu]", i);
			size_t nl = path_len + (w > 0 ? (size_t)w : 0);
			if (nl >= path_cap)
				nl = path_cap - 1;
			expand_walk(c, sr_yaml_sequence_item(doc, n, i), path, nl, path_cap, depth + 1);
			path[path_len] = '\0';
		}
		return;
	}
	if (t == SR_YAML_MAPPING) {
		size_t count = sr_yaml_mapping_size(doc, n);
		for (size_t i = 0; i < count; i++) {
			const struct sr_yaml_node *k, *v;
			if (sr_yaml_mapping_pair(doc, n, i, &k, &v) < 0)
				continue;
			const char *ks = sr_yaml_raw_scalar(k);
			int w = snprintf(path + path_len, path_cap - path_len, "%s%s", path_len ? "." : "",
					 ks ? ks : "?");
			size_t nl = path_len + (w > 0 ? (size_t)w : 0);
			if (nl >= path_cap)
				nl = path_cap - 1;
			expand_walk(c, v, path, nl, path_cap, depth + 1);
			path[path_len] = '\0';
		}
	}
}

struct sr_yaml_doc *sr_yaml_load_string(const char *name, const char *text, size_t len, struct sr_diag *d)
{
	struct sr_yaml_doc *doc = NULL;
	yaml_parser_t parser;
	bool parser_ok = false;

	doc = calloc(1, sizeof(*doc));
	if (!doc)
		goto oom;
	doc->file = strdup(name ? name : "<config>");
	if (!doc->file)
		goto oom;
	if (len > SR_YAML_MAX_FILE_BYTES) {
		sr_diag_add(d, doc->file, 0, 0, NULL, "file is %zu bytes, more than the %u bytes a config may have",
			    len, SR_YAML_MAX_FILE_BYTES);
		goto fail;
	}
	if (!yaml_parser_initialize(&parser))
		goto oom;
	parser_ok = true;
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	if (!yaml_parser_load(&parser, &doc->doc)) {
		unsigned line = (unsigned)parser.problem_mark.line + 1, col = (unsigned)parser.problem_mark.column + 1;
		if (parser.context)
			sr_diag_add(d, doc->file, line, col, NULL, "invalid YAML: %s %s", parser.problem,
				    parser.context);
		else
			sr_diag_add(d, doc->file, line, col, NULL, "invalid YAML: %s",
				    parser.problem ? parser.problem : "parse error");
		goto fail;
	}
	doc->loaded = true;
	yaml_parser_delete(&parser);
	parser_ok = false;

	doc->n_nodes = (size_t)(doc->doc.nodes.top - doc->doc.nodes.start);
	doc->expanded = calloc(doc->n_nodes ? doc->n_nodes : 1, sizeof(char *));
	doc->bad = calloc(doc->n_nodes ? doc->n_nodes : 1, 1);
	doc->seen = calloc(doc->n_nodes ? doc->n_nodes : 1, 1);
	if (!doc->expanded || !doc->bad || !doc->seen)
		goto oom;

	char path[1024] = "";
	struct expand_ctx c = { .doc = doc, .d = d };
	expand_walk(&c, sr_yaml_root(doc), path, 0, sizeof(path), 0);
	if (c.too_big)
		goto fail;
	return doc;

oom:
	sr_diag_add(d, name, 0, 0, NULL, "out of memory");
fail:
	if (parser_ok)
		yaml_parser_delete(&parser);
	sr_yaml_doc_free(doc);
	return NULL;
}

struct sr_yaml_doc *sr_yaml_load_file(const char *path, struct sr_diag *d)
{
	struct sr_yaml_doc *doc;
	struct stat st;
	char *buf = NULL;
	FILE *f;

	f = fopen(path, "rb");
	if (!f) {
		sr_diag_add(d, path, 0, 0, NULL, "cannot open: %s", strerror(errno));
		return NULL;
	}
	if (fstat(fileno(f), &st) < 0 || !S_ISREG(st.st_mode)) {
		sr_diag_add(d, path, 0, 0, NULL, "not a regular file");
		fclose(f);
		return NULL;
	}
	if ((uint64_t)st.st_size > SR_YAML_MAX_FILE_BYTES) {
		sr_diag_add(d, path, 0, 0, NULL, "file is %lld bytes, more than the %u bytes a config may have",
			    (long long)st.st_size, SR_YAML_MAX_FILE_BYTES);
		fclose(f);
		return NULL;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		fclose(f);
		sr_diag_add(d, path, 0, 0, NULL, "out of memory");
		return NULL;
	}
	size_t n = fread(buf, 1, (size_t)st.st_size, f);
	if (ferror(f)) {
		sr_diag_add(d, path, 0, 0, NULL, "read error: %s", strerror(errno));
		fclose(f);
		free(buf);
		return NULL;
	}
	fclose(f);
	buf[n] = '\0';
	doc = sr_yaml_load_string(path, buf, n, d);
	free(buf);
	return doc;
}
