// SPDX-License-Identifier: Apache-2.0
/*
 * Loading the gateway's configuration. The top level and service.pipelines
 * have keys chosen by the user (component IDs, pipeline names), so they are
 * walked here; every component's own section, and the fixed parts of
 * `service`, are checked and loaded by their sr_field schema.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "common/log.h"
#include "pipeline.h"

/*
 * Without --config: take agents on loopback, symbolize, batch, and keep the
 * result on local disk, so the gateway is useful with no backend at all.
 * Components not built into this binary are skipped (see default_config_text).
 */
const char gw_default_config[] = "receivers:\n"
				 "  agent:\n"
				 "    endpoint: 127.0.0.1:7480\n"
				 "processors:\n"
				 "  symbolize: {}\n"
				 "  batch: {}\n"
				 "exporters:\n"
				 "  pprof:\n"
				 "    directory: stackrelay-pprof\n"
				 "  flamegraph:\n"
				 "    path: stackrelay-flamegraph.svg\n"
				 "service:\n"
				 "  pipelines:\n"
				 "    profiles:\n"
				 "      receivers: [agent]\n"
				 "      processors: [symbolize, batch]\n"
				 "      exporters: [pprof, flamegraph]\n"
				 "  telemetry:\n"
				 "    metrics:\n"
				 "      address: 127.0.0.1:8888\n";

/* Bounds on what one file may configure (docs/style.md 14). */
#define GW_MAX_COMPONENTS 256
#define GW_MAX_PIPELINES  64
#define GW_MAX_ID_LEN	  128

static const char *const log_level_names[] = { "error", "warn", "info", "debug", "trace", NULL };

static const char *const metrics_level_names[] = { "none", "basic", "normal", "detailed", NULL };

static const struct sr_field metrics_fields[] = {
	SR_FIELD_STR("address", struct gw_service_config, metrics_address, .def = "127.0.0.1:8888",
		     .doc = "host:port serving /metrics (Prometheus), /healthz and /readyz; empty: none."),
	{ .key = "readers",
	  .kind = SR_FIELD_EXTERNAL,
	  .doc = "The Collector's form of `address`: one `pull` reader with a `prometheus` exporter "
		 "(`host`, `port`) sets the address; instead of `address`." },
	SR_FIELD_ENUMERATION("level", struct gw_service_config, metrics_level, metrics_level_names, .def = "normal",
			     .doc = "The Collector's metrics level. stackrelay has one set of metrics: none turns "
				    "/metrics off (404; /healthz and /readyz stay), the others serve it."),
	SR_FIELD_END,
};

static const struct sr_field logs_fields[] = {
	SR_FIELD_ENUMERATION("level", struct gw_service_config, log_level, log_level_names, .def = "info",
			     .doc = "Least severe level logged (--log-level overrides)."),
	SR_FIELD_END,
};

/* telemetry.metrics and telemetry.logs are nested in YAML, flat in the struct (same offsets base). */
static const struct sr_field telemetry_fields[] = {
	{ .key = "metrics",
	  .kind = SR_FIELD_MAPPING,
	  .elem_size = sizeof(struct gw_service_config),
	  .fields = metrics_fields,
	  .doc = "The gateway's own metrics and health endpoints." },
	{ .key = "logs",
	  .kind = SR_FIELD_MAPPING,
	  .elem_size = sizeof(struct gw_service_config),
	  .fields = logs_fields,
	  .doc = "Logging." },
	SR_FIELD_END,
};

/* `pipelines` is walked by load_pipelines(): its keys are names. */
static const struct sr_field service_fields[] = {
	{ .key = "extensions",
	  .kind = SR_FIELD_EXTERNAL,
	  .doc = "The IDs of the extensions to start (the Collector's; see extensions)." },
	{ .key = "pipelines",
	  .kind = SR_FIELD_EXTERNAL,
	  .doc = "Pipelines by name (`profiles` or `profiles/<name>`), each with receivers, processors (in "
		 "order) and exporters, listed by component ID." },
	{ .key = "telemetry",
	  .kind = SR_FIELD_MAPPING,
	  .offset = 0,
	  .elem_size = sizeof(struct gw_service_config),
	  .fields = telemetry_fields,
	  .doc = "The gateway's own telemetry." },
	SR_FIELD_DUR("shutdown_timeout", struct gw_service_config, shutdown_timeout_ns, .def = "30s",
		     .max = 3600 * 1000000000LL,
		     .doc = "On SIGTERM/SIGINT: time to flush batches and deliver or persist queued data."),
	SR_FIELD_END,
};

struct pipeline_lists {
	char **receivers;
	uint32_t n_receivers;
	char **processors;
	uint32_t n_processors;
	char **exporters;
	uint32_t n_exporters;
};

static const struct sr_field pipeline_fields[] = {
	SR_FIELD_STRLIST("receivers", struct pipeline_lists, receivers, n_receivers,
			 .doc = "Receiver IDs feeding this pipeline."),
	SR_FIELD_STRLIST("processors", struct pipeline_lists, processors, n_processors,
			 .doc = "Processor IDs, applied in this order."),
	SR_FIELD_STRLIST("exporters", struct pipeline_lists, exporters, n_exporters,
			 .doc = "Exporter IDs; every batch goes to each of them."),
	SR_FIELD_END,
};

static const char *const top_keys[] = { "receivers", "processors", "exporters", "extensions", "service", NULL };

static void component_free(struct gw_component *c)
{
	if (!c)
		return;
	if (c->config && c->type)
		sr_config_free(c->type->config_fields, c->config);
	free(c->config);
	free(c->id);
	free(c);
}

void gw_config_free(struct gw_config *cfg)
{
	if (!cfg)
		return;
	for (size_t i = 0; i < cfg->n_components; i++)
		component_free(cfg->components[i]);
	free(cfg->components);
	gw_extensions_free(&cfg->extensions);
	for (size_t i = 0; i < cfg->n_pipelines; i++) {
		free((char *)cfg->pipelines[i].name);
		free(cfg->pipelines[i].receivers);
		free(cfg->pipelines[i].processors);
		free(cfg->pipelines[i].exporters);
	}
	free(cfg->pipelines);
	sr_config_free(service_fields, &cfg->service);
	free(cfg->file);
	free(cfg);
}

size_t gw_config_collector_notes(const struct gw_config *cfg, const char **ret_types, const char **ret_notes,
				 size_t max)
{
	const struct gw_extensions *e = &cfg->extensions;
	bool collector = e->health_address || e->n_storages || e->n_authenticators;
	size_t n = 0;

	for (size_t i = 0; i < cfg->n_components && !collector; i++) {
		const struct gw_component *c = cfg->components[i];
		size_t len = strcspn(c->id, "/");
		collector = strlen(c->type->name) != len || strncmp(c->type->name, c->id, len) != 0;
	}
	for (size_t i = 0; collector && i < cfg->n_components && n < max; i++) {
		const struct gw_component_type *t = cfg->components[i]->type;
		bool seen = false;

		for (size_t j = 0; j < n; j++)
			seen |= strcmp(ret_types[j], t->name) == 0;
		if (!t->collector_note || seen)
			continue;
		ret_types[n] = t->name;
		ret_notes[n++] = t->collector_note;
	}
	return n;
}

struct gw_component *gw_config_component(const struct gw_config *cfg, const char *id)
{
	for (size_t i = 0; i < cfg->n_components; i++)
		if (strcmp(cfg->components[i]->id, id) == 0)
			return cfg->components[i];
	return NULL;
}

static bool valid_name_part(const char *s, size_t n)
{
	if (n == 0)
		return false;
	for (size_t i = 0; i < n; i++) {
		char ch = s[i];
		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' ||
		      ch == '-' || ch == '.'))
			return false;
	}
	return true;
}

static void list_types(enum gw_component_kind kind, char *buf, size_t size)
{
	size_t o = 0;

	buf[0] = '\0';
	for (size_t i = 0; gw_component_types[i]; i++) {
		if (gw_component_types[i]->kind != kind)
			continue;
		int w = snprintf(buf + o, size - o, "%s%s", o ? ", " : "", gw_component_types[i]->name);
		if (w < 0 || (size_t)w >= size - o)
			break;
		o += (size_t)w;
	}
	if (!o)
		snprintf(buf, size, "(none built in)");
}

static int load_section(struct gw_config *cfg, const struct sr_yaml_doc *doc, const struct sr_yaml_node *sec,
			enum gw_component_kind kind, struct sr_diag *d)
{
	const char *file = sr_yaml_doc_file(doc);
	const char *section = gw_component_kind_section(kind);
	char path[GW_MAX_ID_LEN + 32], types[512];

	if (!sec || sr_yaml_is_null(doc, sec))
		return 0;
	if (sr_yaml_node_type(doc, sec) != SR_YAML_MAPPING) {
		sr_diag_add(d, file, sr_yaml_node_line(sec), sr_yaml_node_column(sec), section,
			    "expected a mapping of %s IDs to their settings", gw_component_kind_to_string(kind));
		return -EINVAL;
	}
	size_t n = sr_yaml_mapping_size(doc, sec);
	for (size_t i = 0; i < n; i++) {
		const struct sr_yaml_node *k, *v;
		sr_yaml_mapping_pair(doc, sec, i, &k, &v);
		const char *id = sr_yaml_scalar(doc, k);
		unsigned line = sr_yaml_node_line(k), col = sr_yaml_node_column(k);
		if (!id) {
			sr_diag_add(d, file, line, col, section, "component IDs must be strings");
			continue;
		}
		const char *slash = strchr(id, '/');
		size_t type_len = slash ? (size_t)(slash - id) : strlen(id);
		snprintf(path, sizeof(path), "%s.%s", section, id);
		if (strlen(id) > GW_MAX_ID_LEN || !valid_name_part(id, type_len) ||
		    (slash && !valid_name_part(slash + 1, strlen(slash + 1)))) {
			sr_diag_add(d, file, line, col, section,
				    "invalid component ID \"%s\": expected type or type/name (letters, digits, _ - .; "
				    "at most %d characters)",
				    id, GW_MAX_ID_LEN);
			continue;
		}
		if (gw_config_component(cfg, id)) {
			/* Same ID in another section, or twice in this one (YAML allows duplicate keys). */
			sr_diag_add(d, file, line, col, section, "component ID \"%s\" is defined twice", id);
			continue;
		}
		char type_name[GW_MAX_ID_LEN + 1];
		memcpy(type_name, id, type_len);
		type_name[type_len] = '\0';
		const struct gw_component_type *type = gw_component_type_find(kind, type_name);
		if (!type) {
			list_types(kind, types, sizeof(types));
			sr_diag_add(d, file, line, col, section, "unknown %s type \"%s\" (known: %s)",
				    gw_component_kind_to_string(kind), type_name, types);
			continue;
		}
		if (cfg->n_components >= GW_MAX_COMPONENTS) {
			sr_diag_add(d, file, line, col, section, "more than %d components", GW_MAX_COMPONENTS);
			return -EINVAL;
		}
		struct gw_component *c = calloc(1, sizeof(*c));
		if (!c)
			return -ENOMEM;
		c->type = type;
		c->id = strdup(id);
		c->config = calloc(1, type->config_size ? type->config_size : 1);
		cfg->components[cfg->n_components++] = c;
		if (!c->id || !c->config)
			return -ENOMEM;
		if (sr_config_load(doc, v, path, type->config_fields, c->config, d) < 0) {
			/* Keep c (zeroed config) so pipelines naming it do not report it as undefined too. */
			memset(c->config, 0, type->config_size ? type->config_size : 1);
			continue;
		}
		sr_diag_set_context(d, file, line, col);
		if (type->validate)
			type->validate(c->config, path, d);
		if (type->resolve)
			type->resolve(c->config, &cfg->extensions, path, d);
		sr_diag_set_context(d, NULL, 0, 0);
	}
	return 0;
}

static int resolve_list(struct gw_config *cfg, const struct sr_yaml_doc *doc, const struct sr_yaml_node *list_node,
			char **ids, uint32_t n, enum gw_component_kind kind, const char *path,
			struct gw_component ***ret, size_t *ret_n, struct sr_diag *d)
{
	const char *file = sr_yaml_doc_file(doc);
	char where[256];

	*ret = calloc(n ? n : 1, sizeof(**ret));
	if (!*ret)
		return -ENOMEM;
	*ret_n = 0;
	for (uint32_t i = 0; i < n; i++) {
		const struct sr_yaml_node *item = sr_yaml_sequence_item(doc, list_node, i);
		snprintf(where, sizeof(where), "%s[%u]", path, i);
		struct gw_component *c = gw_config_component(cfg, ids[i]);
		if (!c || c->type->kind != kind) {
			if (c)
				sr_diag_add(d, file, sr_yaml_node_line(item), sr_yaml_node_column(item), where,
					    "\"%s\" is %s %s, not a %s", ids[i],
					    c->type->kind == GW_EXPORTER ? "an" : "a",
					    gw_component_kind_to_string(c->type->kind),
					    gw_component_kind_to_string(kind));
			else
				sr_diag_add(d, file, sr_yaml_node_line(item), sr_yaml_node_column(item), where,
					    "%s \"%s\" is not defined in %s", gw_component_kind_to_string(kind), ids[i],
					    gw_component_kind_section(kind));
			continue;
		}
		bool dup = false;
		for (size_t j = 0; j < *ret_n; j++)
			dup |= (*ret)[j] == c;
		if (dup) {
			sr_diag_add(d, file, sr_yaml_node_line(item), sr_yaml_node_column(item), where,
				    "\"%s\" is listed twice", ids[i]);
			continue;
		}
		(*ret)[(*ret_n)++] = c;
	}
	return 0;
}

static int load_pipelines(struct gw_config *cfg, const struct sr_yaml_doc *doc, const struct sr_yaml_node *service,
			  struct sr_diag *d)
{
	const char *file = sr_yaml_doc_file(doc);
	const struct sr_yaml_node *pl = service ? sr_yaml_mapping_get(doc, service, "pipelines") : NULL;
	char path[256];
	int r;

	if (!pl || sr_yaml_is_null(doc, pl)) {
		sr_diag_add(d, file, sr_yaml_node_line(service), sr_yaml_node_column(service), "service",
			    "no pipelines: add service.pipelines.profiles with receivers and exporters");
		return 0;
	}
	if (sr_yaml_node_type(doc, pl) != SR_YAML_MAPPING) {
		sr_diag_add(d, file, sr_yaml_node_line(pl), sr_yaml_node_column(pl), "service.pipelines",
			    "expected a mapping of pipeline names to pipelines");
		return 0;
	}
	size_t n = sr_yaml_mapping_size(doc, pl);
	if (n > GW_MAX_PIPELINES) {
		sr_diag_add(d, file, sr_yaml_node_line(pl), sr_yaml_node_column(pl), "service.pipelines",
			    "%zu pipelines, more than the %d allowed", n, GW_MAX_PIPELINES);
		return 0;
	}
	if (n == 0)
		sr_diag_add(d, file, sr_yaml_node_line(pl), sr_yaml_node_column(pl), "service.pipelines",
			    "no pipelines: add a `profiles` pipeline with receivers and exporters");
	cfg->pipelines = calloc(n ? n : 1, sizeof(*cfg->pipelines));
	if (!cfg->pipelines)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const struct sr_yaml_node *k, *v;
		sr_yaml_mapping_pair(doc, pl, i, &k, &v);
		const char *name = sr_yaml_scalar(doc, k);
		unsigned line = sr_yaml_node_line(k), col = sr_yaml_node_column(k);
		if (!name)
			continue;
		snprintf(path, sizeof(path), "service.pipelines.%s", name);
		if (strncmp(name, "profiles", 8) != 0 || (name[8] != '\0' && name[8] != '/') ||
		    (name[8] == '/' && !valid_name_part(name + 9, strlen(name + 9)))) {
			sr_diag_add(d, file, line, col, "service.pipelines",
				    "invalid pipeline name \"%s\": stackrelay carries profiles, so pipelines are named "
				    "`profiles` or `profiles/<name>`",
				    name);
			continue;
		}
		struct pipeline_lists lists = { 0 };
		if (sr_config_load(doc, v, path, pipeline_fields, &lists, d) < 0)
			continue;
		struct gw_pipeline_def *p = &cfg->pipelines[cfg->n_pipelines++];
		p->name = strdup(name);
		const struct sr_yaml_node *rn = sr_yaml_mapping_get(doc, v, "receivers");
		const struct sr_yaml_node *pn = sr_yaml_mapping_get(doc, v, "processors");
		const struct sr_yaml_node *en = sr_yaml_mapping_get(doc, v, "exporters");
		char sub[300];
		snprintf(sub, sizeof(sub), "%s.receivers", path);
		r = resolve_list(cfg, doc, rn, lists.receivers, lists.n_receivers, GW_RECEIVER, sub, &p->receivers,
				 &p->n_receivers, d);
		if (r >= 0) {
			snprintf(sub, sizeof(sub), "%s.processors", path);
			r = resolve_list(cfg, doc, pn, lists.processors, lists.n_processors, GW_PROCESSOR, sub,
					 &p->processors, &p->n_processors, d);
		}
		if (r >= 0) {
			snprintf(sub, sizeof(sub), "%s.exporters", path);
			r = resolve_list(cfg, doc, en, lists.exporters, lists.n_exporters, GW_EXPORTER, sub,
					 &p->exporters, &p->n_exporters, d);
		}
		if (lists.n_receivers == 0)
			sr_diag_add(d, file, sr_yaml_node_line(v), sr_yaml_node_column(v), path,
				    "pipeline has no receivers");
		if (lists.n_exporters == 0)
			sr_diag_add(d, file, sr_yaml_node_line(v), sr_yaml_node_column(v), path,
				    "pipeline has no exporters");
		sr_config_free(pipeline_fields, &lists);
		if (!p->name || r < 0)
			return -ENOMEM;
	}
	return 0;
}

/* Where a Collector's Prometheus pull reader listens, as "host:port" ([host]:port for IPv6). */
static void load_metric_reader(struct gw_config *cfg, const struct sr_yaml_doc *doc, const struct sr_yaml_node *reader,
			       const char *path, struct sr_diag *d)
{
	const char *file = sr_yaml_doc_file(doc);
	const struct sr_yaml_node *pull = sr_yaml_mapping_get(doc, reader, "pull");
	const struct sr_yaml_node *exp = pull ? sr_yaml_mapping_get(doc, pull, "exporter") : NULL;
	const struct sr_yaml_node *prom = exp ? sr_yaml_mapping_get(doc, exp, "prometheus") : NULL;
	const char *host = "localhost", *port = NULL;
	char where[160], *addr = NULL;

	if (sr_yaml_node_type(doc, reader) != SR_YAML_MAPPING || sr_yaml_mapping_size(doc, reader) != 1 ||
	    (!pull && !sr_yaml_mapping_get(doc, reader, "periodic"))) {
		sr_diag_add(d, file, sr_yaml_node_line(reader), sr_yaml_node_column(reader), path,
			    "expected a reader: {pull: {exporter: {prometheus: {host: ..., port: ...}}}}");
		return;
	}
	if (!pull) {
		sr_diag_add(d, file, sr_yaml_node_line(reader), sr_yaml_node_column(reader), path,
			    "periodic (push) readers are not supported: the gateway's metrics are pulled from "
			    "/metrics; use pull.exporter.prometheus");
		return;
	}
	if (!prom || sr_yaml_node_type(doc, prom) != SR_YAML_MAPPING) {
		sr_diag_add(d, file, sr_yaml_node_line(pull), sr_yaml_node_column(pull), path,
			    "only pull.exporter.prometheus readers are supported");
		return;
	}
	snprintf(where, sizeof(where), "%s.pull.exporter.prometheus", path);
	size_t n = sr_yaml_mapping_size(doc, prom);
	for (size_t i = 0; i < n; i++) {
		const struct sr_yaml_node *k, *v;
		sr_yaml_mapping_pair(doc, prom, i, &k, &v);
		const char *ks = sr_yaml_scalar(doc, k), *vs = sr_yaml_scalar(doc, v);
		if (ks && strcmp(ks, "host") == 0 && vs) {
			host = vs;
		} else if (ks && strcmp(ks, "port") == 0 && vs) {
			char *end;
			unsigned long p = strtoul(vs, &end, 10);
			if (*end || p == 0 || p > 65535) {
				sr_diag_add(d, file, sr_yaml_node_line(v), sr_yaml_node_column(v), where,
					    "port: \"%s\" is not a port number (1 to 65535)", vs);
				return;
			}
			port = vs;
		} else if (ks && (strcmp(ks, "without_units") == 0 || strcmp(ks, "without_type_suffix") == 0 ||
				  strcmp(ks, "without_scope_info") == 0 ||
				  strcmp(ks, "with_resource_constant_labels") == 0)) {
			sr_diag_warn(d, file, sr_yaml_node_line(k), sr_yaml_node_column(k), where,
				     "%s is ignored: the gateway's metric names are fixed (docs/gateway.md)", ks);
		} else {
			sr_diag_add(d, file, sr_yaml_node_line(k), sr_yaml_node_column(k), where,
				    "unknown key \"%s\" (expected host or port)", ks ? ks : "?");
			return;
		}
	}
	if (!port) {
		sr_diag_add(d, file, sr_yaml_node_line(prom), sr_yaml_node_column(prom), where,
			    "missing required key \"port\"");
		return;
	}
	if (asprintf(&addr, strchr(host, ':') ? "[%s]:%s" : "%s:%s", host, port) < 0)
		return;
	free(cfg->service.metrics_address);
	cfg->service.metrics_address = addr;
}

/* service.telemetry.metrics.readers: the Collector's way to say where /metrics is served. */
static void load_metric_readers(struct gw_config *cfg, const struct sr_yaml_doc *doc,
				const struct sr_yaml_node *service, struct sr_diag *d)
{
	const char *file = sr_yaml_doc_file(doc);
	const struct sr_yaml_node *t = service ? sr_yaml_mapping_get(doc, service, "telemetry") : NULL;
	const struct sr_yaml_node *m = t ? sr_yaml_mapping_get(doc, t, "metrics") : NULL;
	const struct sr_yaml_node *readers = m ? sr_yaml_mapping_get(doc, m, "readers") : NULL;
	const char *path = "service.telemetry.metrics.readers";
	char item[64];

	if (!readers || sr_yaml_is_null(doc, readers))
		return;
	if (sr_yaml_mapping_get(doc, m, "address")) {
		sr_diag_add(d, file, sr_yaml_node_line(readers), sr_yaml_node_column(readers), path,
			    "set address or readers, not both");
		return;
	}
	if (sr_yaml_node_type(doc, readers) != SR_YAML_SEQUENCE) {
		sr_diag_add(d, file, sr_yaml_node_line(readers), sr_yaml_node_column(readers), path,
			    "expected a list of readers");
		return;
	}
	size_t n = sr_yaml_sequence_size(doc, readers);
	if (n > 1) {
		sr_diag_add(d, file, sr_yaml_node_line(readers), sr_yaml_node_column(readers), path,
			    "%zu readers: the gateway serves one /metrics endpoint, so list one pull reader", n);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		snprintf(item, sizeof(item), "%s[%zu]", path, i);
		load_metric_reader(cfg, doc, sr_yaml_sequence_item(doc, readers, i), item, d);
	}
}

static int config_from_doc(struct sr_yaml_doc *doc, struct gw_config *cfg, struct sr_diag *d)
{
	const char *file = sr_yaml_doc_file(doc);
	const struct sr_yaml_node *root = sr_yaml_root(doc);
	int r;

	if (!root || sr_yaml_is_null(doc, root)) {
		sr_diag_add(d, file, 0, 0, NULL,
			    "the file is empty: a gateway needs receivers, exporters and "
			    "service.pipelines");
		return -EINVAL;
	}
	if (sr_yaml_node_type(doc, root) != SR_YAML_MAPPING) {
		sr_diag_add(d, file, sr_yaml_node_line(root), sr_yaml_node_column(root), NULL,
			    "expected a mapping with receivers, processors, exporters and service");
		return -EINVAL;
	}
	size_t n = sr_yaml_mapping_size(doc, root);
	for (size_t i = 0; i < n; i++) {
		const struct sr_yaml_node *k, *v;
		sr_yaml_mapping_pair(doc, root, i, &k, &v);
		const char *ks = sr_yaml_scalar(doc, k);
		bool known = false;
		for (size_t j = 0; ks && top_keys[j]; j++)
			known |= strcmp(ks, top_keys[j]) == 0;
		if (!known)
			sr_diag_add(
				d, file, sr_yaml_node_line(k), sr_yaml_node_column(k), NULL,
				"unknown key \"%s\" (expected receivers, processors, exporters, extensions or service)",
				ks ? ks : "?");
	}
	const struct sr_yaml_node *service = sr_yaml_mapping_get(doc, root, "service");
	if (service && sr_yaml_node_type(doc, service) != SR_YAML_MAPPING)
		service = NULL; /* reported below */
	/* Extensions first: a sending_queue may name a file_storage extension. */
	r = gw_extensions_load(&cfg->extensions, doc, root, service, d);
	if (r >= 0)
		r = gw_extensions_resolve_storage(&cfg->extensions, doc, root, d);
	if (r < 0)
		return r;
	cfg->components = calloc(GW_MAX_COMPONENTS, sizeof(*cfg->components));
	if (!cfg->components)
		return -ENOMEM;
	static const enum gw_component_kind kinds[] = { GW_RECEIVER, GW_PROCESSOR, GW_EXPORTER };
	for (size_t i = 0; i < SR_ARRAY_SIZE(kinds); i++) {
		r = load_section(cfg, doc, sr_yaml_mapping_get(doc, root, gw_component_kind_section(kinds[i])),
				 kinds[i], d);
		if (r == -ENOMEM)
			return r;
	}

	service = sr_yaml_mapping_get(doc, root, "service");
	if (!service || sr_yaml_is_null(doc, service)) {
		sr_diag_add(d, file, 0, 0, NULL, "no service section: add service.pipelines");
	} else if (sr_yaml_node_type(doc, service) != SR_YAML_MAPPING) {
		sr_diag_add(d, file, sr_yaml_node_line(service), sr_yaml_node_column(service), "service",
			    "expected a mapping");
		service = NULL;
	}
	/* Reports unknown keys and loads telemetry and shutdown_timeout (defaults without service); pipelines next. */
	sr_config_load(doc, service, "service", service_fields, &cfg->service, d);
	load_metric_readers(cfg, doc, service, d);
	r = load_pipelines(cfg, doc, service, d);
	if (r < 0)
		return r;

	/* Components no pipeline uses are configured for nothing: probably a mistake. */
	for (size_t i = 0; i < cfg->n_components; i++) {
		struct gw_component *c = cfg->components[i];
		bool used = false;
		for (size_t p = 0; p < cfg->n_pipelines && !used; p++) {
			struct gw_pipeline_def *pc = &cfg->pipelines[p];
			for (size_t j = 0; j < pc->n_receivers; j++)
				used |= pc->receivers[j] == c;
			for (size_t j = 0; j < pc->n_processors; j++)
				used |= pc->processors[j] == c;
			for (size_t j = 0; j < pc->n_exporters; j++)
				used |= pc->exporters[j] == c;
		}
		if (!used)
			sr_diag_warn(d, file, 0, 0, NULL, "%s \"%s\" is configured but no pipeline uses it",
				     gw_component_kind_to_string(c->type->kind), c->id);
	}
	return 0;
}

static int config_load_doc(struct sr_yaml_doc *doc, const char *file, struct gw_config **ret, struct sr_diag *d)
{
	size_t errors_before = sr_diag_errors(d);
	struct gw_config *cfg;
	int r;

	cfg = calloc(1, sizeof(*cfg));
	if (!cfg) {
		sr_yaml_doc_free(doc);
		return -ENOMEM;
	}
	r = config_from_doc(doc, cfg, d);
	sr_yaml_doc_free(doc);
	if (r >= 0 && file) {
		cfg->file = strdup(file);
		if (!cfg->file)
			r = -ENOMEM;
	}
	if (r < 0 || sr_diag_errors(d) > errors_before) {
		gw_config_free(cfg);
		return r < 0 ? r : -EINVAL;
	}
	*ret = cfg;
	return 0;
}

int gw_config_load_string(const char *name, const char *text, struct gw_config **ret, struct sr_diag *d)
{
	struct sr_yaml_doc *doc = sr_yaml_load_string(name, text, strlen(text), d);

	/* Substitution problems were reported and the document kept, so every other problem shows too. */
	if (!doc)
		return -EINVAL;
	return config_load_doc(doc, NULL, ret, d);
}

int gw_config_load(const char *file, struct gw_config **ret, struct sr_diag *d)
{
	struct sr_yaml_doc *doc;

	if (!file)
		return gw_config_load_string("<built-in default config>", gw_default_config, ret, d);
	doc = sr_yaml_load_file(file, d);
	if (!doc)
		return -EINVAL;
	return config_load_doc(doc, file, ret, d);
}

size_t gw_config_describe(FILE *f, bool markdown)
{
	size_t unchecked = 0;
	static const enum gw_component_kind kinds[] = { GW_RECEIVER, GW_PROCESSOR, GW_EXPORTER };

	const struct gw_component_type *const *tables[] = { gw_component_types, gw_component_types_extra };

	for (size_t k = 0; k < SR_ARRAY_SIZE(kinds) * SR_ARRAY_SIZE(tables); k++) {
		const struct gw_component_type *const *table = tables[k % SR_ARRAY_SIZE(tables)];
		for (size_t i = 0; table && table[i]; i++) {
			const struct gw_component_type *t = table[i];
			if (t->kind != kinds[k / SR_ARRAY_SIZE(tables)])
				continue;
			char prefix[160];
			snprintf(prefix, sizeof(prefix), "%s.%s", gw_component_kind_section(t->kind), t->name);
			if (markdown) {
				fprintf(f, "\n### `%s` (%s)\n\n%s\n\n", t->name, gw_component_kind_to_string(t->kind),
					t->doc ? t->doc : "");
				fprintf(f, "| key | type | default | description |\n|---|---|---|---|\n");
			} else {
				fprintf(f, "\n%s %s\n", gw_component_kind_to_string(t->kind), t->name);
			}
			unchecked += sr_config_describe(t->config_fields, prefix, markdown, f);
		}
	}
	unchecked += gw_extensions_describe(f, markdown);
	if (markdown)
		fprintf(f, "\n### `service`\n\n| key | type | default | description |\n|---|---|---|---|\n");
	else
		fprintf(f, "\nservice\n");
	unchecked += sr_config_describe(service_fields, "service", markdown, f);
	unchecked += sr_config_describe(pipeline_fields, "service.pipelines.<name>", markdown, f);
	return unchecked;
}
