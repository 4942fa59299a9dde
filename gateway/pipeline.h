/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The gateway's configuration: components (receivers, processors,
 * exporters) by ID, and service.pipelines wiring them, in the OTel
 * Collector's shape (docs/configuration.md).
 */
#ifndef SR_GW_PIPELINE_H
#define SR_GW_PIPELINE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "component.h"
#include "core/runtime.h"
#include "gateway/extensions.h"

struct sr_diag;

/* The Collector's telemetry.metrics.level values; stackrelay has one set of metrics, so only none differs. */
enum { GW_METRICS_LEVEL_NONE, GW_METRICS_LEVEL_BASIC, GW_METRICS_LEVEL_NORMAL, GW_METRICS_LEVEL_DETAILED };

struct gw_service_config {
	char *metrics_address; /* telemetry.metrics.address, or its readers' pull reader; empty: no server */
	int metrics_level;     /* telemetry.metrics.level: GW_METRICS_LEVEL_* */
	int log_level;	       /* telemetry.logs.level: enum sr_log_level */
	uint64_t shutdown_timeout_ns;
};

struct gw_config {
	char *file; /* NULL for the built-in default */
	/* Every configured component, in file order; each is used by >= 0 pipelines. */
	struct gw_component **components;
	size_t n_components;
	/* name is owned (malloc'd) here even though the runtime's struct says const. */
	struct gw_pipeline_def *pipelines;
	size_t n_pipelines;
	struct gw_service_config service;
	struct gw_extensions extensions;
};

/* The configuration used when no --config is given (YAML text). */
extern const char gw_default_config[];

/*
 * Loads and validates a configuration file (NULL: the built-in default).
 * Every problem goes to d (errors and warnings, each with file:line:col and
 * key path). Returns 0 with *ret, or -EINVAL when there is any error.
 */
int gw_config_load(const char *file, struct gw_config **ret, struct sr_diag *d);
int gw_config_load_string(const char *name, const char *text, struct gw_config **ret, struct sr_diag *d);
void gw_config_free(struct gw_config *cfg);

/*
 * For a config written for the OpenTelemetry Collector (it names a
 * component by a Collector name, or has extensions): the component types
 * it uses whose meaning differs there, one entry per type (ret_types[i]
 * its name, ret_notes[i] the sentence), at most max. Returns how many.
 */
size_t gw_config_collector_notes(const struct gw_config *cfg, const char **ret_types, const char **ret_notes,
				 size_t max);

/* Finds a component by ID, or NULL. */
struct gw_component *gw_config_component(const struct gw_config *cfg, const char *id);

/*
 * Writes every component type and its keys (for --help and docs). Returns
 * how many fields have a minimum that is never checked (sr_config_describe()).
 */
size_t gw_config_describe(FILE *f, bool markdown);

#endif
