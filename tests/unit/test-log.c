// SPDX-License-Identifier: Apache-2.0
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/log.h"

static char last[4096];
static int lines;

static void sink(const char *line, void *userdata)
{
	(void)userdata;
	snprintf(last, sizeof(last), "%s", line);
	lines++;
}

static int format_calls;

static const char *counted(void)
{
	format_calls++;
	return "x";
}

static void test_logfmt_line(void **state)
{
	(void)state;
	sr_log_set_sink(sink, NULL);
	sr_log_set_level(SR_LOG_INFO);
	sr_log_info("gateway", "listening on \"agents\"", "address=%s streams=%d", "0.0.0.0:7480", 100);
	assert_non_null(strstr(last, " level=info component=gateway msg=\"listening on \\\"agents\\\"\""));
	assert_non_null(strstr(last, " address=0.0.0.0:7480 streams=100"));
	assert_true(strncmp(last, "ts=", 3) == 0);
	sr_log_error("agent", "started", "");
	assert_non_null(strstr(last, "msg=started"));
	assert_null(strstr(last, "started "));
}

static void test_level_checked_before_formatting(void **state)
{
	(void)state;
	sr_log_set_sink(sink, NULL);
	sr_log_set_level(SR_LOG_WARN);
	lines = 0;
	format_calls = 0;
	sr_log_debug("x", "not shown", "v=%s", counted());
	sr_log_info("x", "not shown", "v=%s", counted());
	assert_int_equal(lines, 0);
	assert_int_equal(format_calls, 0);
	sr_log_warn("x", "shown", "v=%s", counted());
	assert_int_equal(lines, 1);
	assert_int_equal(format_calls, 1);
}

static void test_levels(void **state)
{
	enum sr_log_level l;

	(void)state;
	assert_int_equal(sr_log_level_from_string("debug", &l), 0);
	assert_int_equal(l, SR_LOG_DEBUG);
	assert_int_equal(sr_log_level_from_string("WARNING", &l), 0);
	assert_int_equal(l, SR_LOG_WARN);
	assert_int_equal(sr_log_level_from_string("verbose", &l), -22);
}

static void test_quote(void **state)
{
	char buf[64];

	(void)state;
	assert_string_equal(sr_log_quote("plain", buf, sizeof(buf)), "plain");
	assert_string_equal(sr_log_quote("two words", buf, sizeof(buf)), "\"two words\"");
	assert_string_equal(sr_log_quote("", buf, sizeof(buf)), "\"\"");
	assert_string_equal(sr_log_quote("a\nb", buf, sizeof(buf)), "\"a\\nb\"");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_logfmt_line),
		cmocka_unit_test(test_level_checked_before_formatting),
		cmocka_unit_test(test_levels),
		cmocka_unit_test(test_quote),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
