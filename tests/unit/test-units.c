// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/units.h"

static void test_durations(void **state)
{
	static const struct {
		const char *in;
		uint64_t ns;
	} ok[] = {
		{ "0", 0 },
		{ "0s", 0 },
		{ "10s", 10 * SR_NSEC_PER_SEC },
		{ "1m30s", 90 * SR_NSEC_PER_SEC },
		{ "1h", 3600 * SR_NSEC_PER_SEC },
		{ "250ms", 250 * SR_NSEC_PER_MSEC },
		{ "1.5s", 1500 * SR_NSEC_PER_MSEC },
		{ "0.5h", 1800 * SR_NSEC_PER_SEC },
		{ "10us", 10 * SR_NSEC_PER_USEC },
		{ "10\xc2\xb5s", 10 * SR_NSEC_PER_USEC },
		{ "7ns", 7 },
		{ "2h45m", (2 * 3600 + 45 * 60) * SR_NSEC_PER_SEC },
		{ "1m0.5s", 60500 * SR_NSEC_PER_MSEC },
	};
	static const char *const bad[] = { "", "s", "10", "10x", "-1s", "1.s.", "ms", "1 s", "s10", "10sm", "1e3s" };
	uint64_t ns;

	(void)state;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		assert_int_equal(sr_parse_duration(ok[i].in, &ns), 0);
		assert_int_equal(ns, ok[i].ns);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(sr_parse_duration(bad[i], &ns), -EINVAL);
	assert_int_equal(sr_parse_duration("99999999999999h", &ns), -ERANGE);
	assert_int_equal(sr_parse_duration("18446744073709551616ns", &ns), -ERANGE);
}

static void test_duration_format_roundtrip(void **state)
{
	static const uint64_t values[] = { 0,
					   1,
					   999,
					   1000,
					   1500000,
					   250 * SR_NSEC_PER_MSEC,
					   SR_NSEC_PER_SEC,
					   90 * SR_NSEC_PER_SEC,
					   3600 * SR_NSEC_PER_SEC,
					   3661 * SR_NSEC_PER_SEC,
					   61500 * SR_NSEC_PER_MSEC };
	char buf[32];
	uint64_t back;

	(void)state;
	for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
		sr_format_duration(values[i], buf, sizeof(buf));
		assert_int_equal(sr_parse_duration(buf, &back), 0);
		assert_int_equal(back, values[i]);
	}
	assert_string_equal(sr_format_duration(90 * SR_NSEC_PER_SEC, buf, sizeof(buf)), "1m30s");
	assert_string_equal(sr_format_duration(250 * SR_NSEC_PER_MSEC, buf, sizeof(buf)), "250ms");
}

static void test_sizes(void **state)
{
	uint64_t b;

	(void)state;
	assert_int_equal(sr_parse_size("64MiB", &b), 0);
	assert_int_equal(b, 64ULL << 20);
	assert_int_equal(sr_parse_size("1GiB", &b), 0);
	assert_int_equal(b, 1ULL << 30);
	assert_int_equal(sr_parse_size("1.5KiB", &b), 0);
	assert_int_equal(b, 1536);
	assert_int_equal(sr_parse_size("10MB", &b), 0);
	assert_int_equal(b, 10000000);
	assert_int_equal(sr_parse_size("4096", &b), 0);
	assert_int_equal(b, 4096);
	assert_int_equal(sr_parse_size("12B", &b), 0);
	assert_int_equal(b, 12);
	assert_int_equal(sr_parse_size("64 MiB", &b), 0);
	assert_int_equal(b, 64ULL << 20);
	assert_int_equal(sr_parse_size("1.5", &b), -EINVAL);
	assert_int_equal(sr_parse_size("64mib", &b), -EINVAL);
	assert_int_equal(sr_parse_size("", &b), -EINVAL);
	assert_int_equal(sr_parse_size("MiB", &b), -EINVAL);
	assert_int_equal(sr_parse_size("-1", &b), -EINVAL);
	assert_int_equal(sr_parse_size("99999999999TiB", &b), -ERANGE);
}

static void test_size_format(void **state)
{
	char buf[32];

	(void)state;
	assert_string_equal(sr_format_size(64ULL << 20, buf, sizeof(buf)), "64MiB");
	assert_string_equal(sr_format_size(1000, buf, sizeof(buf)), "1000B");
	assert_string_equal(sr_format_size(0, buf, sizeof(buf)), "0B");
	assert_string_equal(sr_format_size(3ULL << 40, buf, sizeof(buf)), "3TiB");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_durations),
		cmocka_unit_test(test_duration_format_roundtrip),
		cmocka_unit_test(test_sizes),
		cmocka_unit_test(test_size_format),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
