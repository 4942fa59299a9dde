/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Gateway components are plugins (docs/style.md 9): each receiver, processor and
 * exporter is one file exporting one `const struct gw_component_type`, listed
 * in the table in registry.c. Its config schema (an sr_field table) rejects
 * unknown keys and is the source of its documentation.
 *
 * Instances are named by ID `type` or `type/name`, as in the OTel Collector.
 *
 * Lifecycle, all on the gateway's libuv loop thread:
 *   create  -> instance state from the loaded config (no I/O yet);
 *   start   -> open sockets, timers, threads;
 *   consume -> (processors, exporters) take ownership of a batch of profiles
 *              and pass it on with gw_component_emit(), or account for
 *              every sample they drop;
 *   shutdown-> stop taking input, flush, call done() once (may be later);
 *   destroy -> free everything (after done, or after a failed start).
 */
#ifndef SR_GW_COMPONENT_H
#define SR_GW_COMPONENT_H

#include <stdbool.h>
#include <stddef.h>

struct sr_diag;
struct sr_field;
struct gw_component;
struct gw_profiles;   /* the internal model: gateway/model.h */
struct gw_runtime;    /* the pipeline runtime the instance lives in */
struct gw_extensions; /* gateway/extensions.h */

enum gw_component_kind {
	GW_RECEIVER,
	GW_PROCESSOR,
	GW_EXPORTER,
};

struct gw_component_type {
	const char *name; /* "otlp_http" */
	enum gw_component_kind kind;
	const char *doc; /* one paragraph for docs/configuration.md */
	/*
	 * Where it means something else than the OpenTelemetry Collector's
	 * component of the same name (one sentence), logged at start for
	 * configs written for the Collector; NULL: nothing. Optional.
	 */
	const char *collector_note;
	const struct sr_field *config_fields;
	size_t config_size;
	/*
	 * Checks that need more than one key (e.g. cert_file without key_file).
	 * Adds problems to d with path as their location; returns 0 or -EINVAL.
	 * Optional.
	 */
	int (*validate)(const void *config, const char *path, struct sr_diag *d);
	/*
	 * Settings that name an extension (an exporter's auth.authenticator),
	 * resolved once `extensions` is loaded: problems to d as validate's.
	 * The config may keep pointers into ext, which outlives it. Optional.
	 */
	int (*resolve)(void *config, const struct gw_extensions *ext, const char *path, struct sr_diag *d);

	int (*create)(struct gw_component *c);
	int (*start)(struct gw_component *c);
	/* Processors and exporters; takes ownership of p. */
	int (*consume)(struct gw_component *c, struct gw_profiles *p);
	void (*shutdown)(struct gw_component *c, void (*done)(struct gw_component *c));
	void (*destroy)(struct gw_component *c);
};

/* One configured instance. Layout public so component files can embed state. */
struct gw_component {
	const struct gw_component_type *type;
	char *id;     /* "otlp_http/pyroscope" */
	void *config; /* loaded struct of type->config_size bytes */
	void *state;  /* the component's own */
	struct gw_runtime *runtime;
};

/* The static table of every component type (registry.c). */
extern const struct gw_component_type *const gw_component_types[];
/* By type name or by one of the Collector's names for it (k8sattributes, otlphttp, otlp). */
const struct gw_component_type *gw_component_type_find(enum gw_component_kind kind, const char *name);
/* The type an OpenTelemetry Collector name stands for, or NULL. */
const char *gw_component_type_alias_of(enum gw_component_kind kind, const char *alias);
const char *gw_component_kind_to_string(enum gw_component_kind kind);
/* "receivers", "processors", "exporters": the config section of a kind. */
const char *gw_component_kind_section(enum gw_component_kind kind);
/* For tests: more types, searched after the built-in table (NULL-terminated). */
extern const struct gw_component_type *const *gw_component_types_extra;

#endif
