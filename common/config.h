/* SPDX-License-Identifier: Apache-2.0 */
/*
 * YAML configuration with a schema.
 *
 * A component describes its configuration once, as a table of struct
 * sr_field: key, type, default, bounds and a sentence of documentation. That
 * table is the single source of truth: it validates the YAML (every problem
 * is reported, each with file:line:column and the key path), supplies
 * defaults, drives libcyaml to fill the component's C struct, and prints
 * --help and docs/configuration.md.
 *
 * Loading a file:
 *   1. libyaml parses it into a node tree (syntax errors stop here);
 *   2. `${env:NAME}` / `${NAME}` / `${env:NAME:-default}` / `${file:PATH}` are substituted in every scalar
 *      (an unset variable is an empty string and a warning; `$$` is a literal `$`);
 *   3. each section is checked against its sr_field table: unknown keys, wrong
 *      node types, bad numbers, durations, sizes, enum values, bounds;
 *   4. a section without problems is re-emitted in normalized form (units
 *      converted, defaults filled in) and loaded into its struct by libcyaml.
 *
 * C types per kind: STRING char *, BOOL bool, INT int64_t, UINT uint64_t,
 * DOUBLE double, DURATION uint64_t nanoseconds, SIZE uint64_t bytes, ENUM int
 * (index into values[]), STRING_LIST char ** + uint32_t count, STRING_MAP
 * struct sr_kv * + uint32_t count, MAPPING an embedded struct, MAPPING_LIST a
 * pointer to an array of structs + uint32_t count.
 */
#ifndef SR_CONFIG_H
#define SR_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/macro.h"

enum sr_field_kind {
	SR_FIELD_STRING,
	SR_FIELD_BOOL,
	SR_FIELD_INT,
	SR_FIELD_UINT,
	SR_FIELD_DOUBLE,
	SR_FIELD_DURATION,
	SR_FIELD_SIZE,
	SR_FIELD_ENUM,
	SR_FIELD_STRING_LIST,
	SR_FIELD_STRING_MAP,
	SR_FIELD_MAPPING,
	SR_FIELD_MAPPING_LIST,
	/*
	 * A key whose value the caller walks itself (its keys are names the
	 * user chooses, like service.pipelines): accepted and documented
	 * here, neither checked nor loaded.
	 */
	SR_FIELD_EXTERNAL,
};

struct sr_kv {
	char *key;
	char *value;
};

struct sr_field {
	const char *key; /* NULL ends a table */
	enum sr_field_kind kind;
	uint32_t offset;	       /* of the member in the owning struct */
	uint32_t count_offset;	       /* lists and maps: of the uint32_t element count */
	uint32_t elem_size;	       /* MAPPING and MAPPING_LIST: sizeof the struct */
	const char *def;	       /* default, written as in YAML; NULL: none */
	const char *doc;	       /* one or two sentences for --help and docs */
	const struct sr_field *fields; /* MAPPING, MAPPING_LIST */
	const char *const *values;     /* ENUM: NULL-terminated */
	int64_t min, max;	       /* numeric bounds (and list lengths) when min < max */
	bool required;
	/* SIZE: the word "auto" is accepted too and stored as 0 (the owner sizes it). */
	bool auto_zero;
	/* Values that are secrets (tokens, passwords) are never printed. */
	bool secret;
};

#define SR__F(k, kind_, type, member, ...)                                                                             \
	{                                                                                                              \
		.key = (k), .kind = (kind_), .offset = offsetof(type, member), __VA_ARGS__                             \
	}
#define SR__FC(k, kind_, type, member, count, ...)                                                                     \
	{                                                                                                              \
		.key = (k), .kind = (kind_), .offset = offsetof(type, member), .count_offset = offsetof(type, count),  \
		__VA_ARGS__                                                                                            \
	}

/* Each takes designated initializers after the member: .def = "10s", .doc = "..." */
#define SR_FIELD_STR(k, type, member, ...)     SR__F(k, SR_FIELD_STRING, type, member, __VA_ARGS__)
#define SR_FIELD_BOOLEAN(k, type, member, ...) SR__F(k, SR_FIELD_BOOL, type, member, __VA_ARGS__)
#define SR_FIELD_I64(k, type, member, ...)     SR__F(k, SR_FIELD_INT, type, member, __VA_ARGS__)
#define SR_FIELD_U64(k, type, member, ...)     SR__F(k, SR_FIELD_UINT, type, member, __VA_ARGS__)
#define SR_FIELD_DBL(k, type, member, ...)     SR__F(k, SR_FIELD_DOUBLE, type, member, __VA_ARGS__)
#define SR_FIELD_DUR(k, type, member, ...)     SR__F(k, SR_FIELD_DURATION, type, member, __VA_ARGS__)
#define SR_FIELD_BYTES(k, type, member, ...)   SR__F(k, SR_FIELD_SIZE, type, member, __VA_ARGS__)
#define SR_FIELD_ENUMERATION(k, type, member, names, ...)                                                              \
	SR__F(k, SR_FIELD_ENUM, type, member, .values = (names), __VA_ARGS__)
#define SR_FIELD_STRLIST(k, type, member, count, ...) SR__FC(k, SR_FIELD_STRING_LIST, type, member, count, __VA_ARGS__)
#define SR_FIELD_STRMAP(k, type, member, count, ...)  SR__FC(k, SR_FIELD_STRING_MAP, type, member, count, __VA_ARGS__)
#define SR_FIELD_MAP(k, type, member, subtype, subfields, ...)                                                         \
	SR__F(k, SR_FIELD_MAPPING, type, member, .elem_size = sizeof(subtype), .fields = (subfields), __VA_ARGS__)
#define SR_FIELD_MAPLIST(k, type, member, count, subtype, subfields, ...)                                              \
	SR__FC(k, SR_FIELD_MAPPING_LIST, type, member, count, .elem_size = sizeof(subtype), .fields = (subfields),     \
	       __VA_ARGS__)
#define SR_FIELD_END                                                                                                   \
	{                                                                                                              \
		.key = NULL                                                                                            \
	}

/* Problems found while loading, each with where it is. */
struct sr_diag;

struct sr_diag *sr_diag_new(void);
void sr_diag_free(struct sr_diag *d);
/* file may be NULL (built-in defaults, flags); line 0 means "no position". */
void sr_diag_add(struct sr_diag *d, const char *file, unsigned line, unsigned column, const char *path, const char *fmt,
		 ...) SR_PRINTF(6, 7);
void sr_diag_warn(struct sr_diag *d, const char *file, unsigned line, unsigned column, const char *path,
		  const char *fmt, ...) SR_PRINTF(6, 7);
/*
 * Where problems added without a file are: set around calls into code that
 * only knows key paths (a component's validate()); file NULL clears it.
 */
void sr_diag_set_context(struct sr_diag *d, const char *file, unsigned line, unsigned column);
size_t sr_diag_errors(const struct sr_diag *d);
size_t sr_diag_warnings(const struct sr_diag *d);
/* Each problem on its own line: "FILE:LINE:COL: error: PATH: MESSAGE". */
void sr_diag_print(const struct sr_diag *d, FILE *f);
/* The n-th message as printed (for tests), or NULL. */
const char *sr_diag_message(const struct sr_diag *d, size_t n);

/* A parsed YAML document and its nodes. */
struct sr_yaml_doc;
struct sr_yaml_node;

/* Parses and env-substitutes; on failure returns NULL with the problems in d. */
struct sr_yaml_doc *sr_yaml_load_file(const char *path, struct sr_diag *d);
struct sr_yaml_doc *sr_yaml_load_string(const char *name, const char *text, size_t len, struct sr_diag *d);
void sr_yaml_doc_free(struct sr_yaml_doc *doc);
const char *sr_yaml_doc_file(const struct sr_yaml_doc *doc);
/* The root node; NULL for an empty document. */
const struct sr_yaml_node *sr_yaml_root(const struct sr_yaml_doc *doc);

enum sr_yaml_type { SR_YAML_NONE, SR_YAML_SCALAR, SR_YAML_SEQUENCE, SR_YAML_MAPPING };
enum sr_yaml_type sr_yaml_node_type(const struct sr_yaml_doc *doc, const struct sr_yaml_node *n);
unsigned sr_yaml_node_line(const struct sr_yaml_node *n);
unsigned sr_yaml_node_column(const struct sr_yaml_node *n);
/* Scalar text after substitution; NULL if not a scalar. */
const char *sr_yaml_scalar(const struct sr_yaml_doc *doc, const struct sr_yaml_node *n);
/* Replaces a scalar's value as later reads see it (a reference resolved by the loader). Returns 0 or -errno. */
int sr_yaml_set_scalar(struct sr_yaml_doc *doc, const struct sr_yaml_node *n, const char *value);
/* True for a plain `~`, `null`, or empty scalar (a key with no value). */
bool sr_yaml_is_null(const struct sr_yaml_doc *doc, const struct sr_yaml_node *n);
size_t sr_yaml_mapping_size(const struct sr_yaml_doc *doc, const struct sr_yaml_node *n);
/* i-th pair of a mapping; the key is a node too (for its position). */
int sr_yaml_mapping_pair(const struct sr_yaml_doc *doc, const struct sr_yaml_node *n, size_t i,
			 const struct sr_yaml_node **ret_key, const struct sr_yaml_node **ret_value);
const struct sr_yaml_node *sr_yaml_mapping_get(const struct sr_yaml_doc *doc, const struct sr_yaml_node *n,
					       const char *key);
size_t sr_yaml_sequence_size(const struct sr_yaml_doc *doc, const struct sr_yaml_node *n);
const struct sr_yaml_node *sr_yaml_sequence_item(const struct sr_yaml_doc *doc, const struct sr_yaml_node *n, size_t i);

/*
 * Checks node (a mapping, or NULL for "absent": all defaults) against fields
 * and, when there is no problem, fills *ret (a zeroed struct of the table's
 * type) with libcyaml. path is the key path of node for messages
 * ("exporters.otlp_http/pyroscope"). Returns 0, or -EINVAL with the problems
 * in d. The struct must be released with sr_config_free().
 */
int sr_config_load(const struct sr_yaml_doc *doc, const struct sr_yaml_node *node, const char *path,
		   const struct sr_field *fields, void *ret, struct sr_diag *d);
/* The same for a whole file whose root mapping is described by fields. */
int sr_config_load_file(const char *file, const struct sr_field *fields, void *ret, struct sr_diag *d);
/* Releases what sr_config_load put into the struct (not the struct itself). */
void sr_config_free(const struct sr_field *fields, void *cfg);

/*
 * Writes the table as documentation: one line per key with its type,
 * default and doc, indented by nesting. markdown selects a table per mapping.
 * Returns how many fields have a minimum but no maximum above it: bounds are
 * a range, checked only when min < max, so such a minimum would never be
 * enforced (each is named on stderr; docs/config-reference fails on any).
 */
size_t sr_config_describe(const struct sr_field *fields, const char *prefix, bool markdown, FILE *f);

/* The largest file a ${file:PATH} reference may name (a token, a header value). */
#define SR_ENV_FILE_MAX (1 << 20)

/*
 * Expands ${env:NAME}, ${NAME}, ${env:NAME:-default} and ${file:PATH} in s;
 * `$$` is a literal `$`. Returns 0 with *ret (malloc'd); 1 with *ret when an
 * unset variable without a default became an empty string (errbuf says
 * which: a warning); -EINVAL for bad syntax or an unsupported scheme, or
 * -errno for a file that cannot be read, errbuf then saying which and where.
 * getenv_fn lets tests supply the environment (NULL: getenv).
 */
int sr_env_expand(const char *s, char **ret, char *errbuf, size_t errsize, const char *(*getenv_fn)(const char *name));

#endif
