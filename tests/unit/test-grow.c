// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/grow.h"

/*
 * realloc() is wrapped (-Wl,--wrap=realloc): a request over fail_above bytes
 * fails as it would on a full machine, and the size asked for is kept, so
 * that sizes no machine could allocate can be checked without allocating.
 */
void *__real_realloc(void *p, size_t n);
void *__wrap_realloc(void *p, size_t n);
static size_t fail_above = SIZE_MAX;
static size_t last_request;

void *__wrap_realloc(void *p, size_t n)
{
	last_request = n;
	if (n > fail_above)
		return NULL;
	return __real_realloc(p, n);
}

/* An empty array starts at the first capacity, then doubles until it holds what is wanted. */
static void test_doubles_from_first(void **state)
{
	int *v = NULL;
	size_t cap = 0;

	(void)state;
	assert_int_equal(sr_grow((void **)&v, &cap, 1, sizeof(*v), 16), 0);
	assert_non_null(v);
	assert_int_equal(cap, 16);
	assert_int_equal(sr_grow((void **)&v, &cap, 17, sizeof(*v), 16), 0);
	assert_int_equal(cap, 32);
	assert_int_equal(sr_grow((void **)&v, &cap, 100, sizeof(*v), 16), 0);
	assert_int_equal(cap, 128);
	v[127] = 7; /* the whole capacity is usable */
	free(v);
}

/* Asking for no more than the capacity changes nothing, not even the pointer. */
static void test_enough_is_a_no_op(void **state)
{
	char *v = malloc(8);
	char *was = v;
	size_t cap = 8;

	(void)state;
	assert_int_equal(sr_grow((void **)&v, &cap, 8, 1, 4), 0);
	assert_ptr_equal(v, was);
	assert_int_equal(cap, 8);
	assert_int_equal(sr_grow((void **)&v, &cap, 0, 1, 4), 0);
	assert_int_equal(cap, 8);
	free(v);
}

/* The elements already there survive; the zeroing variant clears only the new ones. */
static void test_keeps_and_zeroes(void **state)
{
	uint64_t *v = NULL;
	size_t cap = 0;

	(void)state;
	assert_int_equal(sr_grow_zero((void **)&v, &cap, 3, sizeof(*v), 4), 0);
	assert_int_equal(cap, 4);
	for (size_t i = 0; i < cap; i++)
		assert_int_equal(v[i], 0);
	for (size_t i = 0; i < cap; i++)
		v[i] = i + 1;
	assert_int_equal(sr_grow_zero((void **)&v, &cap, 5, sizeof(*v), 4), 0);
	assert_int_equal(cap, 8);
	for (size_t i = 0; i < 4; i++)
		assert_int_equal(v[i], i + 1);
	for (size_t i = 4; i < 8; i++)
		assert_int_equal(v[i], 0);
	free(v);
}

/* A count times an element size past SIZE_MAX is refused before realloc() sees a wrapped size. */
static void test_overflow_refused(void **state)
{
	uint64_t *v = NULL;
	size_t cap = 0;
	uint32_t cap32 = 0;

	(void)state;
	last_request = 0;
	assert_int_equal(sr_grow((void **)&v, &cap, SIZE_MAX / 4, sizeof(*v), 16), -EOVERFLOW);
	assert_int_equal(sr_grow_zero((void **)&v, &cap, SIZE_MAX / 8 + 1, sizeof(*v), 16), -EOVERFLOW);
	assert_int_equal(sr_grow_u32((void **)&v, &cap32, 3, SIZE_MAX / 2, 1), -EOVERFLOW);
	assert_int_equal(last_request, 0);
	assert_null(v);
	assert_int_equal(cap, 0);
	assert_int_equal(cap32, 0);
	assert_int_equal(sr_grow((void **)&v, &cap, 1, 0, 16), -EINVAL);
}

/* Near the bound the doubling stops at the largest capacity that fits instead of wrapping. */
static void test_doubling_saturates(void **state)
{
	char *v = NULL;
	size_t cap = 0;
	uint32_t cap32 = 0;
	size_t elem = SIZE_MAX / 3;

	(void)state;
	fail_above = 1 << 20;
	assert_int_equal(sr_grow((void **)&v, &cap, 3, elem, 2), -ENOMEM);
	assert_int_equal(last_request, 3 * elem);
	assert_null(v);
	assert_int_equal(cap, 0);

	/* A uint32_t count stops at UINT32_MAX: 2^31 doubled would be 2^32. */
	cap32 = 0;
	assert_int_equal(sr_grow_u32((void **)&v, &cap32, UINT32_MAX, 1, 1u << 31), -ENOMEM);
	assert_int_equal(last_request, UINT32_MAX);
	assert_int_equal(cap32, 0);
	fail_above = SIZE_MAX;
}

/* A failed realloc() leaves the array and its capacity as they were. */
static void test_enomem_keeps_array(void **state)
{
	uint32_t *v = NULL;
	uint32_t cap = 0;

	(void)state;
	assert_int_equal(sr_grow_u32((void **)&v, &cap, 10, sizeof(*v), 4), 0);
	assert_int_equal(cap, 16);
	v[15] = 42;
	fail_above = 16 * sizeof(*v);
	assert_int_equal(sr_grow_u32((void **)&v, &cap, 17, sizeof(*v), 4), -ENOMEM);
	fail_above = SIZE_MAX;
	assert_int_equal(cap, 16);
	assert_int_equal(v[15], 42);
	free(v);
}

/* A bounded array doubles up to its bound, then is full: a first capacity past the bound is cut to it. */
static void test_bounded(void **state)
{
	char *v = NULL;
	size_t cap = 0;

	(void)state;
	assert_int_equal(sr_grow_max((void **)&v, &cap, 1, 1, 1024, 100), 0);
	assert_int_equal(cap, 100);
	free(v);
	v = NULL;
	cap = 0;
	assert_int_equal(sr_grow_max((void **)&v, &cap, 1, 1, 64, 100), 0);
	assert_int_equal(cap, 64);
	assert_int_equal(sr_grow_max((void **)&v, &cap, 65, 1, 64, 100), 0);
	assert_int_equal(cap, 100);
	assert_int_equal(sr_grow_max((void **)&v, &cap, 101, 1, 64, 100), -EOVERFLOW);
	assert_int_equal(cap, 100);
	free(v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_doubles_from_first),
		cmocka_unit_test(test_enough_is_a_no_op),
		cmocka_unit_test(test_keeps_and_zeroes),
		cmocka_unit_test(test_overflow_refused),
		cmocka_unit_test(test_doubling_saturates),
		cmocka_unit_test(test_enomem_keeps_array),
		cmocka_unit_test(test_bounded),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
