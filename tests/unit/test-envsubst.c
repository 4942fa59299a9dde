// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "config.h"

static const char *fake_env(const char *name)
{
	if (!strcmp(name, "TENANT"))
		return "team-a";
	if (!strcmp(name, "EMPTY"))
		return "";
	if (!strcmp(name, "PORT"))
		return "4040";
	return NULL;
}

static void expect(const char *in, const char *out)
{
	char err[256], *s = NULL;

	assert_int_equal(sr_env_expand(in, &s, err, sizeof(err), fake_env), 0);
	assert_string_equal(s, out);
	free(s);
}

static void expect_error(const char *in, int code, const char *needle)
{
	char err[256], *s = NULL;

	assert_int_equal(sr_env_expand(in, &s, err, sizeof(err), fake_env), code);
	assert_null(s);
	assert_non_null(strstr(err, needle));
}

static void test_expand(void **state)
{
	(void)state;
	expect("plain", "plain");
	expect("", "");
	expect("${env:TENANT}", "team-a");
	expect("org-${env:TENANT}-x", "org-team-a-x");
	expect("http://pyroscope:${env:PORT}", "http://pyroscope:4040");
	expect("${env:EMPTY}", "");
	expect("${env:NOPE:-fallback}", "fallback");
	expect("${env:NOPE:-}", "");
	expect("${env:TENANT:-fallback}", "team-a");
	expect("$$5", "$5");
	expect("a$b", "a$b");
	expect("$", "$");
	expect("$$${env:PORT}", "$4040");
	expect("${env:PORT}${env:PORT}", "40404040");
}

static void test_errors(void **state)
{
	(void)state;
	expect_error("${env:MISSING}", -ENOENT, "MISSING is not set");
	expect_error("x ${env:TENANT", -EINVAL, "unterminated");
	expect_error("${TENANT}", -EINVAL, "only ${env:NAME}");
	expect_error("${file:/etc/passwd}", -EINVAL, "only ${env:NAME}");
	expect_error("${env:1X}", -EINVAL, "invalid variable name");
	expect_error("${env:A B}", -EINVAL, "invalid variable name");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_expand),
		cmocka_unit_test(test_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
