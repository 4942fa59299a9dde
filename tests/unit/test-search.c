// SPDX-License-Identifier: Apache-2.0
/* SR_PARTITION_POINT (common/search.h) against a linear scan, over every key around every element. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/search.h"

struct range {
	uint64_t start;
	uint64_t end;
};

static size_t linear(const struct range *r, size_t n, uint64_t key)
{
	size_t i = 0;

	while (i < n && r[i].start <= key)
		i++;
	return i;
}

static void test_matches_linear_scan(void **state)
{
	/* Sorted starts with repeats, at the ends of the key space too. */
	static const struct range r[] = { { 0, 1 }, { 5, 9 }, { 5, 6 }, { 10, 20 }, { 30, 31 }, { UINT64_MAX, 0 } };

	(void)state;
	for (size_t n = 0; n <= sizeof(r) / sizeof(r[0]); n++) {
		for (size_t k = 0; k < n; k++) {
			uint64_t keys[3] = { r[k].start - 1, r[k].start, r[k].start + 1 };

			for (int j = 0; j < 3; j++) {
				size_t got = SR_PARTITION_POINT(n, i, r[i].start <= keys[j]);

				assert_int_equal(got, linear(r, n, keys[j]));
			}
		}
	}
	/* Empty: 0; all at or below: n; none: 0. */
	assert_int_equal(SR_PARTITION_POINT(0, i, r[i].start <= 7), 0);
	assert_int_equal(SR_PARTITION_POINT(5, i, r[i].start <= 1000), 5);
	assert_int_equal(SR_PARTITION_POINT(5, i, r[i].start + 1 <= 0), 0);
}

static void test_n_evaluated_once(void **state)
{
	static const uint32_t v[] = { 1, 3, 3, 8 };
	size_t calls = 0;

	(void)state;
	assert_int_equal(SR_PARTITION_POINT((calls++, 4), i, v[i] <= 3), 3);
	assert_int_equal(calls, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_matches_linear_scan),
		cmocka_unit_test(test_n_evaluated_once),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
