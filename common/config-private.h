/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the files of the configuration engine share, and nothing else
 * includes: config.c (loading: the normalized YAML into a struct through
 * libcyaml schemas generated from the tables), config-check.c (the walk that
 * checks a YAML section against its table and emits the normalized copy),
 * config-value.c (one scalar value: parsed, bounded, normalized) and
 * config-describe.c (--help and docs/configuration.md).
 */
#ifndef SR_CONFIG_PRIVATE_H
#define SR_CONFIG_PRIVATE_H

#include <stdbool.h>
#include <stddef.h>

#include <yaml.h>

#include "config.h"
#include "common/macro.h"

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
};

/* config-value.c */
const char *sr_config_kind_name(enum sr_field_kind k);
int sr_config_parse_scalar(const struct sr_field *f, const char *text, char *norm, size_t normsize, char *err,
			   size_t errsize);

/* config-check.c */
void sr_config_emit(struct check_ctx *c, yaml_event_t *ev);
const char *sr_config_node_type_name(const struct sr_yaml_doc *doc, const struct sr_yaml_node *n);
void sr_config_bad(struct check_ctx *c, const struct sr_yaml_node *n, const char *path, const char *fmt, ...)
	SR_PRINTF(4, 5);
void sr_config_path_join(char *out, size_t size, const char *path, const char *key);
void sr_config_check_mapping(struct check_ctx *c, const struct sr_yaml_node *node, const struct sr_yaml_node *parent,
			     const struct sr_field *fields, const char *path);

#endif
