// SPDX-License-Identifier: Apache-2.0
/* Retry policy: status classes, Retry-After, and the Collector's backoff. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "exporters/retry.h"

#define S 1000000000ULL

static void test_classify(void **state)
{
	assert_int_equal(gw_retry_classify_http(200, true), GW_EXPORT_OK);
	assert_int_equal(gw_retry_classify_http(204, true), GW_EXPORT_OK);
	assert_int_equal(gw_retry_classify_http(0, true), GW_EXPORT_RETRY);
	assert_int_equal(gw_retry_classify_http(429, true), GW_EXPORT_RETRY);
	assert_int_equal(gw_retry_classify_http(502, true), GW_EXPORT_RETRY);
	assert_int_equal(gw_retry_classify_http(503, true), GW_EXPORT_RETRY);
	assert_int_equal(gw_retry_classify_http(504, true), GW_EXPORT_RETRY);
	/* Pyroscope's transient failures: retried unless configured otherwise. */
	assert_int_equal(gw_retry_classify_http(500, true), GW_EXPORT_RETRY);
	assert_int_equal(gw_retry_classify_http(500, false), GW_EXPORT_PERMANENT);
	assert_int_equal(gw_retry_classify_http(413, true), GW_EXPORT_SPLIT);
	assert_int_equal(gw_retry_classify_http(400, true), GW_EXPORT_PERMANENT);
	assert_int_equal(gw_retry_classify_http(401, true), GW_EXPORT_PERMANENT);
	assert_int_equal(gw_retry_classify_http(403, true), GW_EXPORT_PERMANENT);
	assert_int_equal(gw_retry_classify_http(415, true), GW_EXPORT_PERMANENT);
	assert_int_equal(gw_retry_classify_grpc(0), GW_EXPORT_OK);
	assert_int_equal(gw_retry_classify_grpc(14), GW_EXPORT_RETRY);
	assert_int_equal(gw_retry_classify_grpc(3), GW_EXPORT_PERMANENT);
	assert_int_equal(gw_retry_classify_grpc(16), GW_EXPORT_PERMANENT);
	assert_string_equal(gw_export_outcome_to_string(GW_EXPORT_SPLIT), "split");
}

static void test_retry_after(void **state)
{
	uint64_t ns;
	/* Sun, 06 Nov 1994 08:49:37 GMT, the RFC 9110 example */
	time_t now = 784111777;

	assert_int_equal(gw_retry_parse_after("120", now, &ns), 0);
	assert_int_equal(ns, 120 * S);
	assert_int_equal(gw_retry_parse_after(" 0 ", now, &ns), 0);
	assert_int_equal(ns, 0);
	assert_int_equal(gw_retry_parse_after("Sun, 06 Nov 1994 08:49:47 GMT", now, &ns), 0);
	assert_int_equal(ns, 10 * S);
	assert_int_equal(gw_retry_parse_after("Sunday, 06-Nov-94 08:50:37 GMT", now, &ns), 0);
	assert_int_equal(ns, 60 * S);
	assert_int_equal(gw_retry_parse_after("Sun Nov  6 08:49:57 1994", now, &ns), 0);
	assert_int_equal(ns, 20 * S);
	/* In the past: now. */
	assert_int_equal(gw_retry_parse_after("Sun, 06 Nov 1994 08:00:00 GMT", now, &ns), 0);
	assert_int_equal(ns, 0);
	/* Absurdly far: capped. */
	assert_int_equal(gw_retry_parse_after("99999999999", now, &ns), 0);
	assert_int_equal(ns, GW_RETRY_AFTER_MAX_NS);
	assert_int_equal(gw_retry_parse_after("", now, &ns), -EINVAL);
	assert_int_equal(gw_retry_parse_after("soon", now, &ns), -EINVAL);
	assert_int_equal(gw_retry_parse_after(NULL, now, &ns), -EINVAL);
}

static void test_backoff_defaults(void **state)
{
	struct gw_retry_config cfg = {
		.enabled = true,
		.initial_interval_ns = 5 * S,
		.randomization_factor = 0.5,
		.multiplier = 1.5,
		.max_interval_ns = 30 * S,
		.max_elapsed_time_ns = 300 * S,
	};
	struct gw_backoff b;
	uint64_t now = 1000 * S, d, cur = 5 * S, total = 0;
	unsigned n = 0;

	gw_backoff_init(&b, &cfg, now, 42);
	/* Every delay within ±50% of the current interval, which grows ×1.5 up to 30s. */
	while (gw_backoff_next(&b, now, 0, &d)) {
		assert_true(d >= cur / 2 && d <= cur + cur / 2 + 1);
		cur = cur * 3 / 2 > 30 * S ? 30 * S : cur * 3 / 2;
		now += d;
		total += d;
		n++;
		assert_true(n < 100);
	}
	/* Stops once the next wait would pass max_elapsed_time (5m). */
	assert_true(total <= 300 * S);
	assert_true(total > 300 * S - 45 * S);
	assert_true(n >= 9);
}

static void test_backoff_retry_after_and_disabled(void **state)
{
	struct gw_retry_config cfg = {
		.enabled = true,
		.initial_interval_ns = 1 * S,
		.randomization_factor = 0,
		.multiplier = 2,
		.max_interval_ns = 4 * S,
		.max_elapsed_time_ns = 0,
	};
	struct gw_backoff b;
	uint64_t d;

	gw_backoff_init(&b, &cfg, 0, 1);
	assert_true(gw_backoff_next(&b, 0, 0, &d));
	assert_int_equal(d, 1 * S);
	/* A server's Retry-After longer than the backoff wins. */
	assert_true(gw_backoff_next(&b, 0, 10 * S, &d));
	assert_int_equal(d, 10 * S);
	assert_true(gw_backoff_next(&b, 0, 0, &d));
	assert_int_equal(d, 4 * S);
	/* max_elapsed_time 0: for ever. */
	assert_true(gw_backoff_next(&b, 1000000 * S, 0, &d));
	assert_int_equal(d, 4 * S);

	cfg.enabled = false;
	gw_backoff_init(&b, &cfg, 0, 1);
	assert_false(gw_backoff_next(&b, 0, 0, &d));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_classify),
		cmocka_unit_test(test_retry_after),
		cmocka_unit_test(test_backoff_defaults),
		cmocka_unit_test(test_backoff_retry_after_and_disabled),
	};

	return cmocka_run_group_tests_name("export-retry", tests, NULL, NULL);
}
