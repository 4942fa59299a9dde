// SPDX-License-Identifier: Apache-2.0
/* The agent's configuration schema: defaults, a full file, and its errors. */
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

#include "agent/config.h"
#include "common/log.h"

static int load(const char *text, struct agent_config *c, struct sr_diag *d)
{
	struct sr_yaml_doc *doc = sr_yaml_load_string("agent.yaml", text, strlen(text), d);
	int r = -EINVAL;

	memset(c, 0, sizeof(*c));
	if (doc)
		r = sr_config_load(doc, sr_yaml_root(doc), "", agent_config_fields, c, d);
	sr_yaml_doc_free(doc);
	sr_diag_print(d, stderr);
	return r;
}

static void test_defaults(void **state)
{
	struct sr_diag *d = sr_diag_new();
	struct agent_config c = { 0 };

	(void)state;
	setenv("NODE_NAME", "node-7", 1);
	assert_int_equal(sr_config_load(NULL, NULL, "", agent_config_fields, &c, d), 0);
	assert_string_equal(c.node_name, "node-7");
	assert_string_equal(c.gateway.endpoint, "http://127.0.0.1:7480");
	assert_int_equal(c.gateway.compression, 0);
	assert_int_equal(c.gateway.timeout_ns, 10000000000ULL);
	assert_int_equal(c.gateway.buffer_bytes, 64ULL << 20);
	assert_false(c.gateway.tls.insecure_skip_verify);
	assert_int_equal(c.profiling.frequency_hz, 19);
	assert_int_equal(c.profiling.report_interval_ns, 10000000000ULL);
	assert_false(c.profiling.include_idle);
	assert_true(c.profiling.include_kernel_threads);
	assert_true(c.profiling.kernel_stacks);
	assert_int_equal(c.profiling.n_pids, 0);
	assert_int_equal(c.telemetry.log_level, SR_LOG_INFO);
	assert_null(c.telemetry.metrics_address);
	assert_null(c.output);
	sr_config_free(agent_config_fields, &c);
	sr_diag_free(d);
	unsetenv("NODE_NAME");
}

static void test_full_file(void **state)
{
	struct sr_diag *d = sr_diag_new();
	struct agent_config c;

	(void)state;
	assert_int_equal(load("node_name: n1\n"
			      "gateway:\n"
			      "  endpoint: https://gw.example:7480\n"
			      "  tls: {ca_file: /ca.pem, cert_file: /c.pem, key_file: /k.pem}\n"
			      "  compression: none\n"
			      "  max_connection_age: 5m\n"
			      "profiling:\n"
			      "  frequency: 97\n"
			      "  pids: [\"1\", \"42\"]\n"
			      "  cgroups: [/kubepods]\n"
			      "telemetry:\n"
			      "  metrics: {address: 127.0.0.1:9400}\n"
			      "  logs: {level: debug}\n",
			      &c, d),
			 0);
	assert_string_equal(c.gateway.endpoint, "https://gw.example:7480");
	assert_string_equal(c.gateway.tls.key_file, "/k.pem");
	assert_int_equal(c.gateway.compression, 1);
	assert_int_equal(c.gateway.max_connection_age_ns, 300000000000ULL);
	assert_int_equal(c.profiling.frequency_hz, 97);
	assert_int_equal(c.profiling.n_pids, 2);
	assert_string_equal(c.profiling.pids[1], "42");
	assert_string_equal(c.profiling.cgroups[0], "/kubepods");
	assert_string_equal(c.telemetry.metrics_address, "127.0.0.1:9400");
	assert_int_equal(c.telemetry.log_level, SR_LOG_DEBUG);
	sr_config_free(agent_config_fields, &c);
	sr_diag_free(d);
}

static void test_errors(void **state)
{
	struct sr_diag *d = sr_diag_new();
	struct agent_config c;

	(void)state;
	assert_int_equal(load("profiling:\n"
			      "  frequency: 5000\n"
			      "  report_interval: 100ms\n"
			      "gateway:\n"
			      "  compression: brotli\n"
			      "telemetry: {logs: {level: loud}}\n",
			      &c, d),
			 -EINVAL);
	assert_int_equal(sr_diag_errors(d), 4);
	sr_diag_free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_full_file),
		cmocka_unit_test(test_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
