// SPDX-License-Identifier: Apache-2.0
/* Loading and validating the gateway's pipeline configuration. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/config.h"
#include "component.h"
#include "exporters/exporthelper.h"
#include "pipeline.h"

struct recv_cfg {
	char *endpoint;
};
struct proc_cfg {
	uint64_t timeout_ns;
};
struct exp_cfg {
	char *endpoint;
	struct sr_kv *headers;
	uint32_t n_headers;
};

static const struct sr_field recv_fields[] = {
	SR_FIELD_STR("endpoint", struct recv_cfg, endpoint, .def = "127.0.0.1:7480"),
	SR_FIELD_END,
};
static const struct sr_field proc_fields[] = {
	SR_FIELD_DUR("timeout", struct proc_cfg, timeout_ns, .def = "10s"),
	SR_FIELD_END,
};
static const struct sr_field exp_fields[] = {
	SR_FIELD_STR("endpoint", struct exp_cfg, endpoint, .required = true),
	SR_FIELD_STRMAP("headers", struct exp_cfg, headers, n_headers),
	SR_FIELD_END,
};

static int exp_validate(const void *config, const char *path, struct sr_diag *d)
{
	const struct exp_cfg *c = config;

	if (strncmp(c->endpoint, "http", 4) != 0) {
		sr_diag_add(d, NULL, 0, 0, path, "endpoint must be an http:// or https:// URL");
		return -EINVAL;
	}
	return 0;
}

static const struct gw_component_type test_recv = {
	.name = "testrecv",
	.kind = GW_RECEIVER,
	.config_fields = recv_fields,
	.config_size = sizeof(struct recv_cfg),
};
static const struct gw_component_type test_proc = {
	.name = "testproc",
	.kind = GW_PROCESSOR,
	.config_fields = proc_fields,
	.config_size = sizeof(struct proc_cfg),
};
static const struct gw_component_type test_exp = {
	.name = "testexp",
	.kind = GW_EXPORTER,
	.config_fields = exp_fields,
	.config_size = sizeof(struct exp_cfg),
	.validate = exp_validate,
};
static const struct gw_component_type *const test_types[] = { &test_recv, &test_proc, &test_exp, NULL };

static struct sr_diag *diag;

static int setup(void **state)
{
	(void)state;
	gw_component_types_extra = test_types;
	diag = sr_diag_new();
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	sr_diag_print(diag, stderr);
	sr_diag_free(diag);
	return 0;
}

static bool has(const char *needle)
{
	for (size_t i = 0; sr_diag_message(diag, i); i++)
		if (strstr(sr_diag_message(diag, i), needle))
			return true;
	return false;
}

static void test_valid(void **state)
{
	struct gw_config *cfg = NULL;

	(void)state;
	setenv("SR_TEST_TENANT", "acme", 1);
	assert_int_equal(gw_config_load_string("gw.yaml",
					       "receivers:\n"
					       "  testrecv:\n"
					       "    endpoint: 0.0.0.0:7480\n"
					       "processors:\n"
					       "  testproc: {timeout: 2s}\n"
					       "  testproc/slow:\n"
					       "exporters:\n"
					       "  testexp/pyroscope:\n"
					       "    endpoint: http://pyroscope:4040\n"
					       "    headers: {X-Scope-OrgID: \"${env:SR_TEST_TENANT}\"}\n"
					       "  testexp/second: {endpoint: http://b}\n"
					       "service:\n"
					       "  pipelines:\n"
					       "    profiles:\n"
					       "      receivers: [testrecv]\n"
					       "      processors: [testproc/slow, testproc]\n"
					       "      exporters: [testexp/pyroscope, testexp/second]\n"
					       "    profiles/b:\n"
					       "      receivers: [testrecv]\n"
					       "      exporters: [testexp/second]\n"
					       "  telemetry: {metrics: {address: 0.0.0.0:8888}, logs: {level: debug}}\n"
					       "  shutdown_timeout: 45s\n",
					       &cfg, diag),
			 0);
	assert_int_equal(sr_diag_errors(diag), 0);
	assert_int_equal(sr_diag_warnings(diag), 0);
	assert_int_equal(cfg->n_components, 5);
	assert_int_equal(cfg->n_pipelines, 2);
	const struct gw_pipeline_def *p = &cfg->pipelines[0];
	assert_string_equal(p->name, "profiles");
	assert_int_equal(p->n_processors, 2);
	assert_string_equal(p->processors[0]->id, "testproc/slow");
	assert_int_equal(((struct proc_cfg *)p->processors[0]->config)->timeout_ns, 10000000000ULL);
	assert_int_equal(((struct proc_cfg *)p->processors[1]->config)->timeout_ns, 2000000000ULL);
	struct exp_cfg *e = p->exporters[0]->config;
	assert_string_equal(e->headers[0].value, "acme");
	/* One instance per ID, shared by both pipelines. */
	assert_ptr_equal(cfg->pipelines[1].exporters[0], p->exporters[1]);
	assert_string_equal(cfg->service.metrics_address, "0.0.0.0:8888");
	assert_int_equal(cfg->service.log_level, 3);
	assert_int_equal(cfg->service.shutdown_timeout_ns, 45000000000ULL);
	gw_config_free(cfg);
}

/* The acceptance case: four kinds of problem, all listed with file:line. */
static void test_four_problems(void **state)
{
	struct gw_config *cfg = NULL;

	(void)state;
	unsetenv("SR_TEST_NOPE");
	assert_int_equal(gw_config_load_string("gw.yaml",
					       "receivers:\n"
					       "  testrecv:\n"
					       "    endpont: 0.0.0.0:7480\n"
					       "processors:\n"
					       "  testproc: {timeout: 10 seconds}\n"
					       "exporters:\n"
					       "  testexp:\n"
					       "    endpoint: http://p\n"
					       "    headers: {X-Scope-OrgID: \"${env:SR_TEST_NOPE}\"}\n"
					       "service:\n"
					       "  pipelines:\n"
					       "    profiles:\n"
					       "      receivers: [testrecv]\n"
					       "      processors: [testproc]\n"
					       "      exporters: [testexp, testexp/missing]\n",
					       &cfg, diag),
			 -EINVAL);
	assert_null(cfg);
	assert_true(has("gw.yaml:3:5: error: receivers.testrecv: unknown key \"endpont\" (did you mean "
			"\"endpoint\"?)"));
	assert_true(has("gw.yaml:5:23: error: processors.testproc.timeout: invalid duration \"10 seconds\""));
	/* An unset variable is an empty string and a warning, as in the Collector. */
	assert_true(has("gw.yaml:9:30: warning: exporters.testexp.headers.X-Scope-OrgID: environment variable "
			"SR_TEST_NOPE is not set: using an empty string"));
	assert_true(has("gw.yaml:15:28: error: service.pipelines.profiles.exporters[1]: exporter "
			"\"testexp/missing\" is not defined in exporters"));
	assert_int_equal(sr_diag_errors(diag), 3);
}

static void test_structure_problems(void **state)
{
	struct gw_config *cfg = NULL;

	(void)state;
	assert_int_equal(
		gw_config_load_string("gw.yaml",
				      "receivers:\n"
				      "  nosuch: {}\n"
				      "  testrecv/a:\n"
				      "  testrecv/a:\n"
				      "  bad id!: {}\n"
				      "exporters:\n"
				      "  testexp: {endpoint: ftp://x}\n"
				      "  testexp/unused: {endpoint: http://x}\n"
				      "  testproc: {}\n"
				      "connectors: {}\n"
				      "service:\n"
				      "  pipelines:\n"
				      "    traces: {receivers: [testrecv/a], exporters: [testexp]}\n"
				      "    profiles/x:\n"
				      "      receivers: []\n"
				      "      processors: [testexp]\n"
				      "    profiles/y: {receivers: [testrecv/a, testrecv/a], exporters: [testexp]}\n"
				      "  extra: 1\n",
				      &cfg, diag),
		-EINVAL);
	assert_true(has("gw.yaml:2:3: error: receivers: unknown receiver type \"nosuch\""));
	assert_true(has("gw.yaml:4:3: error: receivers: component ID \"testrecv/a\" is defined twice"));
	assert_true(has("gw.yaml:5:3: error: receivers: invalid component ID \"bad id!\""));
	assert_true(has("gw.yaml:7:3: error: exporters.testexp: endpoint must be an http:// or https:// URL"));
	assert_true(has("gw.yaml:9:3: error: exporters: unknown exporter type \"testproc\""));
	assert_true(has("gw.yaml:10:1: error: unknown key \"connectors\""));
	assert_true(has("gw.yaml:13:5: error: service.pipelines: invalid pipeline name \"traces\""));
	assert_true(has("service.pipelines.profiles/x: pipeline has no receivers"));
	assert_true(has("service.pipelines.profiles/x: pipeline has no exporters"));
	assert_true(has("gw.yaml:16:20: error: service.pipelines.profiles/x.processors[0]: \"testexp\" is an "
			"exporter, not a processor"));
	assert_true(has("service.pipelines.profiles/y.receivers[1]: \"testrecv/a\" is listed twice"));
	assert_true(has("gw.yaml:18:3: error: service: unknown key \"extra\""));
	assert_true(has("warning: exporter \"testexp/unused\" is configured but no pipeline uses it"));
}

static void test_empty_and_missing(void **state)
{
	struct gw_config *cfg = NULL;

	(void)state;
	assert_int_equal(gw_config_load_string("gw.yaml", "", &cfg, diag), -EINVAL);
	assert_true(has("the file is empty"));
	assert_int_equal(gw_config_load_string("gw.yaml", "receivers: {testrecv: {}}\n", &cfg, diag), -EINVAL);
	assert_true(has("no service section"));
	assert_int_equal(gw_config_load("/nonexistent/gw.yaml", &cfg, diag), -EINVAL);
	assert_true(has("/nonexistent/gw.yaml: error: cannot open"));
}

/* The Collector's names for our components load as the components they name, under the IDs written. */
static void test_collector_aliases(void **state)
{
	struct gw_config *cfg = NULL;

	(void)state;
	assert_int_equal(gw_config_load_string("gw.yaml",
					       "receivers:\n"
					       "  testrecv: {endpoint: 0.0.0.0:7480}\n"
					       "processors:\n"
					       "  k8sattributes: {}\n"
					       "exporters:\n"
					       "  otlphttp/pyroscope: {endpoint: http://pyroscope:4040}\n"
					       "  otlp/collector: {endpoint: collector:4317}\n"
					       "service:\n"
					       "  pipelines:\n"
					       "    profiles:\n"
					       "      receivers: [testrecv]\n"
					       "      processors: [k8sattributes]\n"
					       "      exporters: [otlphttp/pyroscope, otlp/collector]\n",
					       &cfg, diag),
			 0);
	assert_non_null(cfg);
	assert_string_equal(gw_config_component(cfg, "k8sattributes")->type->name, "k8s_attributes");
	assert_string_equal(gw_config_component(cfg, "otlphttp/pyroscope")->type->name, "otlp_http");
	assert_string_equal(gw_config_component(cfg, "otlp/collector")->type->name, "otlp_grpc");
	assert_null(gw_component_type_alias_of(GW_RECEIVER, "otlp"));
	gw_config_free(cfg);
}

/* A config written for the Collector is told, at start, where a component it uses means something else. */
static void test_collector_notes(void **state)
{
	static const char fmt[] =
		"receivers: {testrecv: {endpoint: x}}\n"
		"processors: {memory_limiter: {limit_mib: 100}, testproc: {}}\n"
		"exporters: {%s: {endpoint: http://p:4040}}\n"
		"service: {pipelines: {profiles: {receivers: [testrecv], processors: [memory_limiter, "
		"testproc], exporters: [%s]}}}\n";
	const char *types[8], *notes[8];
	char yaml[512];
	struct gw_config *cfg = NULL;

	(void)state;
	snprintf(yaml, sizeof(yaml), fmt, "otlphttp/pyroscope", "otlphttp/pyroscope");
	assert_int_equal(gw_config_load_string("gw.yaml", yaml, &cfg, diag), 0);
	assert_int_equal(gw_config_collector_notes(cfg, types, notes, 8), 2);
	assert_string_equal(types[0], "memory_limiter");
	assert_non_null(strstr(notes[0], "RSS"));
	assert_string_equal(types[1], "otlp_http");
	assert_non_null(strstr(notes[1], "HTTP 500 is retried"));
	gw_config_free(cfg);
	cfg = NULL;

	/* The same written with stackrelay's names: nothing to say. */
	snprintf(yaml, sizeof(yaml), fmt, "otlp_http/pyroscope", "otlp_http/pyroscope");
	assert_int_equal(gw_config_load_string("gw.yaml", yaml, &cfg, diag), 0);
	assert_int_equal(gw_config_collector_notes(cfg, types, notes, 8), 0);
	gw_config_free(cfg);
}

/* service.telemetry.metrics.readers, as current Collectors write it, sets where /metrics is served. */
static void test_metric_readers(void **state)
{
	static const char head[] = "receivers: {testrecv: {endpoint: x}}\n"
				   "exporters: {testexp: {endpoint: http://p}}\n"
				   "service:\n"
				   "  pipelines: {profiles: {receivers: [testrecv], exporters: [testexp]}}\n"
				   "  telemetry:\n"
				   "    metrics:\n";
	char yaml[1024];
	struct gw_config *cfg = NULL;

	(void)state;
	snprintf(yaml, sizeof(yaml), "%s%s", head,
		 "      level: detailed\n"
		 "      readers:\n"
		 "        - pull: {exporter: {prometheus: {host: 0.0.0.0, port: 8888, without_units: true}}}\n");
	assert_int_equal(gw_config_load_string("gw.yaml", yaml, &cfg, diag), 0);
	assert_string_equal(cfg->service.metrics_address, "0.0.0.0:8888");
	assert_int_equal(cfg->service.metrics_level, GW_METRICS_LEVEL_DETAILED);
	assert_true(has("without_units is ignored"));
	gw_config_free(cfg);
	cfg = NULL;

	snprintf(yaml, sizeof(yaml), "%s%s", head,
		 "      level: none\n"
		 "      readers: [{pull: {exporter: {prometheus: {host: '::', port: 9464}}}}]\n");
	assert_int_equal(gw_config_load_string("gw.yaml", yaml, &cfg, diag), 0);
	assert_string_equal(cfg->service.metrics_address, "[::]:9464");
	assert_int_equal(cfg->service.metrics_level, GW_METRICS_LEVEL_NONE);
	gw_config_free(cfg);
	cfg = NULL;

	snprintf(yaml, sizeof(yaml), "%s%s", head,
		 "      readers: [{periodic: {exporter: {otlp: {endpoint: http://c:4318}}}}]\n");
	assert_int_equal(gw_config_load_string("gw.yaml", yaml, &cfg, diag), -EINVAL);
	assert_true(has("service.telemetry.metrics.readers[0]: periodic (push) readers are not supported"));

	snprintf(yaml, sizeof(yaml), "%s%s", head,
		 "      address: 0.0.0.0:8888\n"
		 "      readers: [{pull: {exporter: {prometheus: {port: 8888}}}}]\n");
	assert_int_equal(gw_config_load_string("gw.yaml", yaml, &cfg, diag), -EINVAL);
	assert_true(has("set address or readers, not both"));

	snprintf(yaml, sizeof(yaml), "%s%s", head, "      readers: [{pull: {exporter: {prometheus: {hots: x}}}}]\n");
	assert_int_equal(gw_config_load_string("gw.yaml", yaml, &cfg, diag), -EINVAL);
	assert_true(has("unknown key \"hots\" (expected host or port)"));
}

/* The Collector's extensions: health_check and file_storage mean what they mean there, the rest are errors. */
static void test_extensions(void **state)
{
	struct gw_config *cfg = NULL;

	(void)state;
	assert_int_equal(
		gw_config_load_string("gw.yaml",
				      "extensions:\n"
				      "  health_check: {endpoint: 0.0.0.0:13133, path: /health}\n"
				      "  zpages: {}\n"
				      "  file_storage/q: {directory: /var/lib/q}\n"
				      "receivers: {testrecv: {endpoint: x}}\n"
				      "exporters: {testexp: {endpoint: http://p}}\n"
				      "service:\n"
				      "  extensions: [health_check, zpages, file_storage/q]\n"
				      "  pipelines: {profiles: {receivers: [testrecv], exporters: [testexp]}}\n",
				      &cfg, diag),
		0);
	assert_string_equal(cfg->extensions.health_address, "0.0.0.0:13133");
	assert_string_equal(cfg->extensions.health_path, "/health");
	assert_string_equal(gw_extensions__storage_directory(&cfg->extensions, "file_storage/q"), "/var/lib/q");
	assert_true(has("extensions.zpages: ignored"));
	gw_config_free(cfg);
	cfg = NULL;

	assert_int_equal(
		gw_config_load_string("gw.yaml",
				      "extensions:\n"
				      "  oauth2client: {}\n"
				      "  health_check: {endpont: x}\n"
				      "receivers: {testrecv: {endpoint: x}}\n"
				      "exporters: {testexp: {endpoint: http://p}}\n"
				      "service:\n"
				      "  extensions: [health_check, file_storage]\n"
				      "  pipelines: {profiles: {receivers: [testrecv], exporters: [testexp]}}\n",
				      &cfg, diag),
		-EINVAL);
	assert_true(has("gw.yaml:2:3: error: extensions: unknown extension type \"oauth2client\""));
	assert_true(has("extensions.health_check: unknown key \"endpont\" (did you mean \"endpoint\"?)"));
	assert_true(has("service.extensions: extension \"file_storage\" is not defined in extensions"));
}

/*
 * sending_queue.storage naming a file_storage extension, as the Collector writes a persistent queue: the
 * queue lives in the extension's directory, one subdirectory per exporter; an absolute path still works.
 */
static void test_queue_storage_extension(void **state)
{
	struct gw_config *cfg = NULL;
	const struct gw_export_config *x;

	(void)state;
	assert_int_equal(
		gw_config_load_string("gw.yaml",
				      "extensions:\n"
				      "  file_storage/queue: {directory: /var/lib/otelcol/file_storage}\n"
				      "  pprof: {endpoint: localhost:1777}\n"
				      "receivers: {testrecv: {endpoint: x}}\n"
				      "exporters:\n"
				      "  otlphttp/pyroscope:\n"
				      "    endpoint: http://pyroscope:4040\n"
				      "    sending_queue: {storage: file_storage/queue}\n"
				      "  otlp/dir: {endpoint: c:4317, sending_queue: {storage: /srv/q}}\n"
				      "service:\n"
				      "  extensions: [file_storage/queue, pprof]\n"
				      "  pipelines: {profiles: {receivers: [testrecv], exporters: [otlphttp/pyroscope, "
				      "otlp/dir]}}\n",
				      &cfg, diag),
		0);
	x = gw_config_component(cfg, "otlphttp/pyroscope")->config;
	assert_string_equal(x->sending_queue.storage, "/var/lib/otelcol/file_storage/otlphttp_pyroscope");
	x = gw_config_component(cfg, "otlp/dir")->config;
	assert_string_equal(x->sending_queue.storage, "/srv/q");
	assert_true(has("extensions.pprof: ignored: pprof serves Go runtime pages"));
	gw_config_free(cfg);
	cfg = NULL;

	/* A storage extension that is not defined, and a name that is no storage extension. */
	assert_int_equal(
		gw_config_load_string("gw.yaml",
				      "extensions: {health_check: {}}\n"
				      "receivers: {testrecv: {endpoint: x}}\n"
				      "exporters:\n"
				      "  otlp/a: {endpoint: c:4317, sending_queue: {storage: file_storage/nope}}\n"
				      "  otlp/b: {endpoint: c:4317, sending_queue: {storage: health_check}}\n"
				      "service:\n"
				      "  extensions: [health_check]\n"
				      "  pipelines: {profiles: {receivers: [testrecv], exporters: [otlp/a, otlp/b]}}\n",
				      &cfg, diag),
		-EINVAL);
	assert_true(has("gw.yaml:4:55: error: exporters: otlp/a: sending_queue.storage names extension "
			"\"file_storage/nope\", which is not defined in extensions"));
	assert_true(has("gw.yaml:5:55: error: exporters: otlp/b: sending_queue.storage names extension "
			"\"health_check\", which is not a file_storage extension"));
	assert_false(has("must be an absolute path"));
}

/* The Collector's configtls and sending_queue keys on the OTLP exporters, with the Collector's meaning. */
static void test_collector_exporter_keys(void **state)
{
	static const char tail[] = "service: {pipelines: {profiles: {receivers: [testrecv], exporters: [%s]}}}\n";
	char yaml[2048];
	struct gw_config *cfg = NULL;
	const struct gw_export_config *x;

	(void)state;
	snprintf(yaml, sizeof(yaml),
		 "receivers: {testrecv: {endpoint: x}}\n"
		 "exporters:\n"
		 "  otlphttp/pyroscope:\n"
		 "    endpoint: http://pyroscope:4040\n"
		 "    tls: {insecure: true, min_version: \"1.3\", ca_file: /etc/ca.pem}\n"
		 "    sending_queue: {enabled: true, num_consumers: 4, queue_size: 5000}\n"
		 "  otlp/plain: {endpoint: collector:4317, tls: {insecure: true}}\n"
		 "  otlp/ca:\n"
		 "    endpoint: collector:4317\n"
		 "    tls: {insecure: true, ca_file: /etc/ca.pem, max_version: \"1.2\"}\n"
		 "    sending_queue: {queue_size: 268435456, sizer: bytes}\n"
		 "  otlp/items: {endpoint: collector:4317, sending_queue: {queue_size: 100000, sizer: items}}\n"
		 "%s",
		 "service: {pipelines: {profiles: {receivers: [testrecv], "
		 "exporters: [otlphttp/pyroscope, otlp/plain, otlp/ca, otlp/items]}}}\n");
	assert_int_equal(gw_config_load_string("gw.yaml", yaml, &cfg, diag), 0);
	assert_int_equal(sr_diag_warnings(diag), 0);
	x = gw_config_component(cfg, "otlphttp/pyroscope")->config;
	assert_true(x->tls.insecure);
	assert_string_equal(gw_export_tls_versions[x->tls.min_version], "1.3");
	assert_string_equal(x->tls.max_version, "");
	assert_string_equal(x->tls.ca_file, "/etc/ca.pem");
	assert_int_equal(x->sending_queue.queue_size, 5000);
	assert_int_equal(x->sending_queue.sizer, GW_EXPORT_SIZER_REQUESTS);
	assert_int_equal(x->sending_queue.queue_size_mib, GW_EXPORT_DEFAULT_QUEUE_MIB);
	x = gw_config_component(cfg, "otlp/plain")->config;
	assert_string_equal(gw_export_tls_versions[x->tls.min_version], "1.2");
	x = gw_config_component(cfg, "otlp/ca")->config;
	assert_int_equal(x->sending_queue.sizer, GW_EXPORT_SIZER_BYTES);
	assert_string_equal(x->tls.max_version, "1.2");
	x = gw_config_component(cfg, "otlp/items")->config;
	assert_int_equal(x->sending_queue.sizer, GW_EXPORT_SIZER_ITEMS);
	gw_config_free(cfg);
	cfg = NULL;

	/* insecure with an https:// otlphttp endpoint: loads, and a warning says TLS stays on. */
	snprintf(yaml, sizeof(yaml),
		 "receivers: {testrecv: {endpoint: x}}\n"
		 "exporters: {otlphttp: {endpoint: https://p:4040, tls: {insecure: true}}}\n"
		 "%s",
		 "");
	snprintf(yaml + strlen(yaml), sizeof(yaml) - strlen(yaml), tail, "otlphttp");
	assert_int_equal(gw_config_load_string("gw.yaml", yaml, &cfg, diag), 0);
	assert_true(has("warning: exporters.otlphttp: tls.insecure does not turn TLS off for an https:// endpoint"));
	gw_config_free(cfg);
	cfg = NULL;

	/* What has no meaning is refused, each with where and why. */
	snprintf(yaml, sizeof(yaml),
		 "receivers: {testrecv: {endpoint: x}}\n"
		 "exporters:\n"
		 "  otlp/a: {endpoint: c:4317, tls: {min_version: \"1.4\"}}\n"
		 "  otlp/b: {endpoint: c:4317, tls: {min_version: \"1.3\", max_version: \"1.2\"}}\n"
		 "  otlp/c: {endpoint: c:4317, tls: {max_version: \"TLS1.3\"}}\n"
		 "  otlp/d: {endpoint: c:4317, sending_queue: {sizer: spans}}\n"
		 "  otlp/e: {endpoint: c:4317, sending_queue: {sizer: bytes, queue_size: 1000}}\n"
		 "  otlp/f: {endpoint: c:4317, sending_queue: {sizer: bytes, queue_size: 2097152, queue_size_mib: 8}}\n"
		 "  otlp/g: {endpoint: c:4317, tls: {insecure_skip_verfy: true}}\n");
	snprintf(yaml + strlen(yaml), sizeof(yaml) - strlen(yaml), tail,
		 "otlp/a, otlp/b, otlp/c, otlp/d, otlp/e, otlp/f, otlp/g");
	assert_int_equal(gw_config_load_string("gw.yaml", yaml, &cfg, diag), -EINVAL);
	assert_true(has("gw.yaml:3:49: error: exporters.otlp/a.tls.min_version: invalid value \"1.4\""));
	assert_true(has("exporters.otlp/b: tls.max_version 1.2 is older than min_version 1.3"));
	assert_true(has("exporters.otlp/c: tls.max_version: \"TLS1.3\" is not 1.0, 1.1, 1.2 or 1.3"));
	assert_true(has("exporters.otlp/d.sending_queue.sizer"));
	assert_true(has("exporters.otlp/e: sending_queue.queue_size: 1000 bytes (sizer bytes) is less than 1MiB"));
	assert_true(has("exporters.otlp/f: sending_queue: queue_size with sizer bytes and queue_size_mib"));
	assert_true(has("did you mean \"insecure_skip_verify\""));
}

/* basicauth and an exporter's auth.authenticator, as Grafana Cloud users write them for the Collector. */
static void test_basicauth(void **state)
{
	struct gw_config *cfg = NULL;
	const struct gw_export_config *x;

	(void)state;
	setenv("SR_TEST_PASSWORD", "pass", 1);
	assert_int_equal(
		gw_config_load_string("gw.yaml",
				      "extensions:\n"
				      "  basicauth/grafana:\n"
				      "    client_auth: {username: user, password: \"${env:SR_TEST_PASSWORD}\"}\n"
				      "receivers: {testrecv: {endpoint: x}}\n"
				      "exporters:\n"
				      "  otlphttp: {endpoint: https://p, auth: {authenticator: basicauth/grafana}}\n"
				      "service:\n"
				      "  extensions: [basicauth/grafana]\n"
				      "  pipelines: {profiles: {receivers: [testrecv], exporters: [otlphttp]}}\n",
				      &cfg, diag),
		0);
	x = gw_config_component(cfg, "otlphttp")->config;
	/* base64("user:pass") */
	assert_string_equal(x->auth.ext->header, "Authorization: Basic dXNlcjpwYXNz");
	gw_config_free(cfg);
	cfg = NULL;

	assert_int_equal(
		gw_config_load_string("gw.yaml",
				      "extensions:\n"
				      "  basicauth/server: {htpasswd: {inline: \"u:p\"}}\n"
				      "  basicauth/nopass: {client_auth: {username: u}}\n"
				      "receivers: {testrecv: {endpoint: x}}\n"
				      "exporters:\n"
				      "  otlphttp/a: {endpoint: https://p, auth: {authenticator: oauth2client}}\n"
				      "  otlphttp/b:\n"
				      "    endpoint: https://p\n"
				      "    headers: {authorization: x}\n"
				      "    auth: {authenticator: basicauth/nopass}\n"
				      "service:\n"
				      "  extensions: [basicauth/server, basicauth/nopass]\n"
				      "  pipelines: {profiles: {receivers: [testrecv], exporters: [otlphttp/a]}}\n",
				      &cfg, diag),
		-EINVAL);
	assert_true(has("extensions.basicauth/server: htpasswd (checking clients' passwords) is not supported"));
	assert_true(has("extensions.basicauth/nopass: needs client_auth.username and client_auth.password"));
	assert_true(has("exporters.otlphttp/a: auth.authenticator names \"oauth2client\", which is not a basicauth"));
}

/* headers_setter, as the Collector's docs set tenants up with it. */
static void test_headers_setter(void **state)
{
	struct gw_config *cfg = NULL;
	const struct gw_export_config *x;
	char buf[64];

	(void)state;
	assert_int_equal(
		gw_config_load_string("gw.yaml",
				      "extensions:\n"
				      "  headers_setter:\n"
				      "    headers:\n"
				      "      - {action: upsert, key: X-Scope-OrgID, from_context: x-scope-orgid,\n"
				      "         default_value: anonymous}\n"
				      "      - {key: X-Source, value: gateway}\n"
				      "      - {action: delete, key: X-Debug}\n"
				      "receivers: {testrecv: {endpoint: x}}\n"
				      "exporters:\n"
				      "  otlphttp: {endpoint: http://p, auth: {authenticator: headers_setter}}\n"
				      "service:\n"
				      "  extensions: [headers_setter]\n"
				      "  pipelines: {profiles: {receivers: [testrecv], exporters: [otlphttp]}}\n",
				      &cfg, diag),
		0);
	x = gw_config_component(cfg, "otlphttp")->config;
	assert_int_equal(x->auth.ext->n_rules, 3);
	assert_null(x->auth.ext->header);
	/* from_context: the batch's value (names case-insensitive), else default_value. */
	assert_string_equal(gw_header_rule__value(&x->auth.ext->rules[0], "X-Scope-OrgID: acme\n", buf, sizeof(buf)),
			    "acme");
	assert_string_equal(gw_header_rule__value(&x->auth.ext->rules[0], NULL, buf, sizeof(buf)), "anonymous");
	assert_string_equal(gw_header_rule__value(&x->auth.ext->rules[1], NULL, buf, sizeof(buf)), "gateway");
	assert_int_equal(x->auth.ext->rules[2].action, GW_HEADER_DELETE);
	gw_config_free(cfg);
	cfg = NULL;

	assert_int_equal(
		gw_config_load_string("gw.yaml",
				      "extensions:\n"
				      "  headers_setter/a: {headers: [{key: K, value: v, from_context: c}]}\n"
				      "  headers_setter/b: {headers: [{key: K, from_attribute: sub}]}\n"
				      "receivers: {testrecv: {endpoint: x}}\n"
				      "exporters: {otlphttp: {endpoint: http://p}}\n"
				      "service:\n"
				      "  extensions: [headers_setter/a, headers_setter/b]\n"
				      "  pipelines: {profiles: {receivers: [testrecv], exporters: [otlphttp]}}\n",
				      &cfg, diag),
		-EINVAL);
	assert_true(has("extensions.headers_setter/a: headers[0] (K): set one of value and from_context"));
	assert_true(has("extensions.headers_setter/b: headers[0].from_attribute is not supported"));
}

static void test_describe_lists_service(void **state)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	(void)state;
	assert_int_equal(gw_config_describe(f, true), 0);
	fclose(f);
	assert_non_null(strstr(buf, "`receivers.testrecv.endpoint`"));
	assert_non_null(strstr(buf, "`service.shutdown_timeout` | duration | `30s`"));
	assert_non_null(strstr(buf, "`service.telemetry.metrics.address`"));
	assert_non_null(strstr(buf, "`service.pipelines.<name>.exporters`"));
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_valid, setup, teardown),
		cmocka_unit_test_setup_teardown(test_four_problems, setup, teardown),
		cmocka_unit_test_setup_teardown(test_structure_problems, setup, teardown),
		cmocka_unit_test_setup_teardown(test_empty_and_missing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_collector_aliases, setup, teardown),
		cmocka_unit_test_setup_teardown(test_collector_notes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_metric_readers, setup, teardown),
		cmocka_unit_test_setup_teardown(test_extensions, setup, teardown),
		cmocka_unit_test_setup_teardown(test_queue_storage_extension, setup, teardown),
		cmocka_unit_test_setup_teardown(test_collector_exporter_keys, setup, teardown),
		cmocka_unit_test_setup_teardown(test_basicauth, setup, teardown),
		cmocka_unit_test_setup_teardown(test_headers_setter, setup, teardown),
		cmocka_unit_test_setup_teardown(test_describe_lists_service, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
