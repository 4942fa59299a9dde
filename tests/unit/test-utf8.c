// SPDX-License-Identifier: Apache-2.0
/* sr_utf8_copy: valid UTF-8 kept, everything else replaced byte by byte, cut at max. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/utf8.h"

static const char *copy(const char *in, size_t n, size_t max, char *buf)
{
	size_t len = sr_utf8_copy(buf, (const uint8_t *)in, n, max);
	buf[len] = '\0';
	return buf;
}

static void test_valid_kept(void **state)
{
	char buf[64];
	const char *s = "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80z"; /* a é € 😀 z */
	assert_string_equal(copy(s, strlen(s), 63, buf), s);
}

static void test_invalid_replaced(void **state)
{
	char buf[64];
	/* Lone continuation, overlong "/", surrogate U+D800, past U+10FFFF, NUL, truncated sequence. */
	assert_string_equal(copy("\x80", 1, 63, buf), "?");
	assert_string_equal(copy("\xc0\xaf", 2, 63, buf), "??");
	assert_string_equal(copy("\xed\xa0\x80", 3, 63, buf), "???");
	assert_string_equal(copy("\xf4\x90\x80\x80", 4, 63, buf), "????");
	assert_string_equal(copy("a\0b", 3, 63, buf), "a?b");
	assert_string_equal(copy("x\xe2\x82", 3, 63, buf), "x??");
}

static void test_cut_at_max(void **state)
{
	char buf[64];
	/* A sequence cut by max is not copied half. */
	assert_string_equal(copy("ab\xe2\x82\xac", 5, 3, buf), "ab?");
	assert_string_equal(copy("abcdef", 6, 4, buf), "abcd");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_valid_kept),
		cmocka_unit_test(test_invalid_replaced),
		cmocka_unit_test(test_cut_at_max),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
