// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/config.h"

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
	/* The Collector's default scheme is env: ${NAME} is ${env:NAME}. */
	expect("${TENANT}", "team-a");
	expect("${NOPE:-fallback}", "fallback");
	expect("a-${PORT}-${env:TENANT}", "a-4040-team-a");
}

/* An unset variable without a default: an empty string and a warning, as in the Collector. */
static void test_unset_warns(void **state)
{
	char err[256], *s = NULL;

	(void)state;
	assert_int_equal(sr_env_expand("x${env:MISSING}y${OTHER}", &s, err, sizeof(err), fake_env), 1);
	assert_string_equal(s, "xy");
	assert_non_null(strstr(err, "MISSING is not set: using an empty string"));
	free(s);
}

static void test_file(void **state)
{
	char path[] = "/tmp/sr-envsubst-XXXXXX", ref[64], err[256], *s = NULL;
	int fd = mkstemp(path);

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "s3cr3t\r\n\n", 9), 9);
	close(fd);
	snprintf(ref, sizeof(ref), "Bearer ${file:%s}", path);
	expect(ref, "Bearer s3cr3t");
	unlink(path);
	assert_int_equal(sr_env_expand(ref, &s, err, sizeof(err), fake_env), -ENOENT);
	assert_null(s);
	assert_non_null(strstr(err, "No such file"));
	expect_error("${file:/proc}", -EINVAL, "not a regular file");
	expect_error("${file:}", -EINVAL, "invalid file reference");
}

static void test_errors(void **state)
{
	(void)state;
	expect_error("x ${env:TENANT", -EINVAL, "unterminated");
	expect_error("${http://example/x}", -EINVAL, "unsupported substitution");
	expect_error("${yaml:a: b}", -EINVAL, "the schemes are env");
	expect_error("${env:1X}", -EINVAL, "invalid variable name");
	expect_error("${env:A B}", -EINVAL, "invalid variable name");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_expand),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_unset_warns),
		cmocka_unit_test(test_file),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
