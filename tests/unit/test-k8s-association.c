// SPDX-License-Identifier: Apache-2.0
/* k8s_attributes' pod_association rules: what is accepted, what each rule means, and the errors. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "gateway/processors/k8s_attributes-config.h"

#define S(x) ((char *)(x))

static int parse(struct assoc_source_config *src, uint32_t n_rules, enum assoc_key *keys, char *err, size_t size)
{
	struct assoc_rule_config rules[K8SATTR_MAX_ASSOC + 1];
	struct k8s_attributes_config cfg = { .pod_association = rules, .n_pod_association = n_rules };

	for (uint32_t i = 0; i < n_rules; i++)
		rules[i] = (struct assoc_rule_config){ .sources = &src[i], .n_sources = 1 };
	err[0] = '\0';
	return k8sattr_parse_association(&cfg, keys, err, size);
}

static void test_sources(void **state)
{
	struct assoc_source_config src[] = {
		{ .from = 0, .name = S("container.id") }, { .from = 0, .name = S("k8s.pod.uid") },
		{ .from = 0, .name = S("k8s.pod.ip") },	  { .from = 1 },
		{ .from = 1, .name = S("ip") },		  { .from = 0, .name = S("host.name") },
	};
	enum assoc_key keys[6];
	char err[256];

	assert_int_equal(parse(src, 6, keys, err, sizeof(err)), 6);
	assert_int_equal(keys[0], ASSOC_CONTAINER_ID);
	assert_int_equal(keys[1], ASSOC_POD_UID);
	assert_int_equal(keys[2], ASSOC_POD_IP);
	assert_int_equal(keys[3], ASSOC_CONNECTION);
	assert_int_equal(keys[4], ASSOC_CONNECTION);
	assert_int_equal(keys[5], ASSOC_HOST_NAME);
}

static void test_errors(void **state)
{
	struct assoc_source_config unknown[] = { { .from = 0, .name = S("container.id") },
						 { .from = 0, .name = S("service.name") } };
	struct assoc_source_config conn_name[] = { { .from = 1, .name = S("container.id") } };
	struct assoc_source_config many[K8SATTR_MAX_ASSOC + 1];
	char err[256];

	assert_int_equal(parse(unknown, 2, NULL, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "pod_association[1].sources[0].name"));
	assert_non_null(strstr(err, "service.name"));
	assert_int_equal(parse(conn_name, 1, NULL, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "from: connection"));
	for (int i = 0; i <= K8SATTR_MAX_ASSOC; i++)
		many[i] = (struct assoc_source_config){ .from = 1 };
	assert_int_equal(parse(many, K8SATTR_MAX_ASSOC + 1, NULL, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "at most"));

	/* Two sources in one rule: each identifies a pod alone. */
	struct assoc_source_config two[] = { { .from = 0, .name = S("container.id") }, { .from = 1 } };
	struct assoc_rule_config rule = { .sources = two, .n_sources = 2 };
	struct k8s_attributes_config cfg = { .pod_association = &rule, .n_pod_association = 1 };
	assert_int_equal(k8sattr_parse_association(&cfg, NULL, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "one source per rule"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sources),
		cmocka_unit_test(test_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
