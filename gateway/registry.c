// SPDX-License-Identifier: Apache-2.0
/*
 * Every component type the gateway knows, in one table (docs/style.md 9). A new
 * receiver, processor or exporter is one file exporting one
 * `const struct gw_component_type` plus one line here.
 */
#include <string.h>

#include "component.h"

/* Receivers */
extern const struct gw_component_type gw_receiver_agent;
extern const struct gw_component_type gw_receiver_otlp;

/* Processors */
extern const struct gw_component_type gw_processor_symbolize;
extern const struct gw_component_type gw_processor_k8s_attributes;
extern const struct gw_component_type gw_processor_relabel;
extern const struct gw_component_type gw_processor_batch;
extern const struct gw_component_type gw_processor_memory_limiter;

/* Exporters */
extern const struct gw_component_type gw_exporter_otlp_http;
extern const struct gw_component_type gw_exporter_otlp_grpc;
extern const struct gw_component_type gw_exporter_file;
extern const struct gw_component_type gw_exporter_pprof;
extern const struct gw_component_type gw_exporter_flamegraph;

/* One entry per line, so adding a component is a one-line change. */
/* clang-format off */
const struct gw_component_type *const gw_component_types[] = {
	&gw_receiver_agent,
	&gw_receiver_otlp,
	&gw_processor_symbolize,
	&gw_processor_k8s_attributes,
	&gw_processor_relabel,
	&gw_processor_batch,
	&gw_processor_memory_limiter,
	&gw_exporter_otlp_http,
	&gw_exporter_otlp_grpc,
	&gw_exporter_file,
	&gw_exporter_pprof,
	&gw_exporter_flamegraph,
	NULL,
};
/* clang-format on */

/*
 * The OpenTelemetry Collector's names for the same components, so that a
 * Collector config loads as it is written: the contrib processor's old name,
 * the HTTP exporter's old name, and `otlp`, which is the Collector's gRPC
 * exporter. A component keeps the ID it was written with (`otlphttp/x`).
 */
static const struct {
	enum gw_component_kind kind;
	const char *alias, *name;
} aliases[] = {
	{ GW_PROCESSOR, "k8sattributes", "k8s_attributes" },
	{ GW_EXPORTER, "otlphttp", "otlp_http" },
	{ GW_EXPORTER, "otlp", "otlp_grpc" },
};

const char *gw_component_type_alias_of(enum gw_component_kind kind, const char *alias)
{
	for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
		if (aliases[i].kind == kind && strcmp(aliases[i].alias, alias) == 0)
			return aliases[i].name;
	return NULL;
}

/* Tests may add types of their own (a table ending with NULL). */
const struct gw_component_type *const *gw_component_types_extra;

const struct gw_component_type *gw_component_type_find(enum gw_component_kind kind, const char *name)
{
	const char *canonical = gw_component_type_alias_of(kind, name);

	if (canonical)
		name = canonical;
	for (size_t i = 0; gw_component_types[i]; i++)
		if (gw_component_types[i]->kind == kind && strcmp(gw_component_types[i]->name, name) == 0)
			return gw_component_types[i];
	for (size_t i = 0; gw_component_types_extra && gw_component_types_extra[i]; i++)
		if (gw_component_types_extra[i]->kind == kind && strcmp(gw_component_types_extra[i]->name, name) == 0)
			return gw_component_types_extra[i];
	return NULL;
}

const char *gw_component_kind_to_string(enum gw_component_kind kind)
{
	switch (kind) {
	case GW_RECEIVER:
		return "receiver";
	case GW_PROCESSOR:
		return "processor";
	case GW_EXPORTER:
		return "exporter";
	}
	return "component";
}

const char *gw_component_kind_section(enum gw_component_kind kind)
{
	switch (kind) {
	case GW_RECEIVER:
		return "receivers";
	case GW_PROCESSOR:
		return "processors";
	case GW_EXPORTER:
		return "exporters";
	}
	return "?";
}
