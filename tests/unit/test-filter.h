/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Lets meson run one cmocka program as several tests (tests/unit/meson.build,
 * unit_test_parts): SR_TEST_ONLY runs only the tests whose names match a
 * cmocka pattern (`*` and `?`), SR_TEST_SKIP runs all but those. Call before
 * cmocka_run_group_tests().
 */
#ifndef SR_TEST_FILTER_H
#define SR_TEST_FILTER_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdlib.h>
#include <cmocka.h>

static inline void sr_test_filter_from_env(void)
{
	const char *only = getenv("SR_TEST_ONLY");
	const char *skip = getenv("SR_TEST_SKIP");

	if (only && *only)
		cmocka_set_test_filter(only);
	if (skip && *skip)
		cmocka_set_skip_filter(skip);
}

#endif
