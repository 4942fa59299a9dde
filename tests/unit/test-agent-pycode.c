// SPDX-License-Identifier: Apache-2.0
/*
 * CPython decoders: line tables of every format (the 3.11 one as CPython
 * 3.11 itself wrote it for a known function), str and bytes headers, code
 * object heads, and the layout table.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "agent/pycode.h"

static size_t unhex(const char *s, uint8_t *out)
{
	size_t n = 0;

	for (; s[0] && s[1]; s += 2) {
		unsigned v;

		sscanf(s, "%2x", &v);
		out[n++] = (uint8_t)v;
	}
	return n;
}

/*
 * co_linetable and co_positions() of this function, compiled by Debian's
 * python3.11 (first line 2, so each line is its line in the source + 1):
 *
 *   def f(a, b):
 *       x = 0
 *       for i in range(a):
 *           if i % 3:
 *               x += i
 *           else:
 *               x -= (
 *                   i
 *                   *
 *                   b)
 *       try:
 *           y = 1 / a
 *       except ZeroDivisionError:
 *           y = 0
 *   (3 empty lines)
 *       return x + y
 *
 * It has short forms, one-line forms, negative deltas, entries without a
 * location and a long form (the jump over the empty lines).
 */
static const char table311[] =
	"8000d808098041dd0d12903189588c58f000070513f0000705138801d80b0c88718935f000060913d80c0d9011894688418841e00c0dd8"
	"1011e01011f105021112f103030d1388418841f00803050ed80c0d9001894588018801f8dd0b1cf00001050ef00001050ef00001050ed8"
	"0c0d880188018801f00301050ef8f8f8f00a000c0d88718935804c";
static const int32_t lines311[] = { 2,	3,  3,	4,  4,	4,  4,	4,  4,	4,  4,	4,  4,	4,  4,	4,  4,	4,
				    4,	4,  5,	5,  5,	5,  5,	6,  6,	6,  6,	6,  6,	8,  9,	11, 9,	9,
				    8,	8,  8,	8,  12, 13, 13, 13, 13, 13, 13, 0,  14, 14, 14, 14, 14, 14,
				    14, 14, 14, 15, 15, 15, 15, 14, 0,	0,  0,	19, 19, 19, 19, 19 };

static void test_locations_311(void **state)
{
	uint8_t t[256];
	size_t n = unhex(table311, t);

	(void)state;
	for (uint32_t i = 0; i < sizeof(lines311) / sizeof(lines311[0]); i++)
		assert_int_equal(agent_py_line(AGENT_PY_LOCATIONS, 2, t, n, i), lines311[i]);
	/* Past the end, and cut tables: no line, no read past the buffer. */
	assert_int_equal(agent_py_line(AGENT_PY_LOCATIONS, 2, t, n, 1000), 0);
	for (size_t cut = 0; cut < n; cut++)
		(void)agent_py_line(AGENT_PY_LOCATIONS, 2, t, cut, 60);
	/* A first byte without bit 7 is not an entry. */
	t[0] = 0x00;
	assert_int_equal(agent_py_line(AGENT_PY_LOCATIONS, 2, t, n, 0), 0);
}

static void test_lnotab(void **state)
{
	/* 3.8: first line 10; bytes 0-5 line 10, 6-9 line 11, 10-13 line 9 (negative delta), 14+ line 12. */
	static const uint8_t t[] = { 6, 1, 4, (uint8_t)-2, 4, 3 };

	(void)state;
	assert_int_equal(agent_py_line(AGENT_PY_LNOTAB, 10, t, sizeof(t), 0), 10);
	assert_int_equal(agent_py_line(AGENT_PY_LNOTAB, 10, t, sizeof(t), 5), 10);
	assert_int_equal(agent_py_line(AGENT_PY_LNOTAB, 10, t, sizeof(t), 6), 11);
	assert_int_equal(agent_py_line(AGENT_PY_LNOTAB, 10, t, sizeof(t), 10), 9);
	assert_int_equal(agent_py_line(AGENT_PY_LNOTAB, 10, t, sizeof(t), 200), 12);
	/* An odd length: the last byte is ignored. */
	assert_int_equal(agent_py_line(AGENT_PY_LNOTAB, 10, t, 3, 8), 11);
}

static void test_linetable_310(void **state)
{
	/* 3.10: first line 20; bytes [0,4) line 21, [4,8) no line, [8,14) line 23; offsets in code units. */
	static const uint8_t t[] = { 4, 1, 4, (uint8_t)-128, 6, 2 };

	(void)state;
	assert_int_equal(agent_py_line(AGENT_PY_LINETABLE310, 20, t, sizeof(t), 0), 21);
	assert_int_equal(agent_py_line(AGENT_PY_LINETABLE310, 20, t, sizeof(t), 1), 21);
	assert_int_equal(agent_py_line(AGENT_PY_LINETABLE310, 20, t, sizeof(t), 2), 0);
	assert_int_equal(agent_py_line(AGENT_PY_LINETABLE310, 20, t, sizeof(t), 4), 23);
	assert_int_equal(agent_py_line(AGENT_PY_LINETABLE310, 20, t, sizeof(t), 7), 0);
	assert_int_equal(agent_py_line(99, 20, t, sizeof(t), 0), 0);
}

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void test_str_header(void **state)
{
	const struct agent_py_layout *l311 = agent_py_layout(AGENT_PY_VERSION(3, 11));
	const struct agent_py_layout *l312 = agent_py_layout(AGENT_PY_VERSION(3, 12));
	uint8_t b[AGENT_PY_STR_HEAD] = { 0 };
	struct agent_py_str s;

	(void)state;
	put64(b + 16, 5);
	/* state: kind 1 (bits 2-4), compact (bit 5), ascii (bit 6), ready (bit 7) */
	b[32] = 1 << 2 | 1 << 5 | 1 << 6 | 1 << 7;
	assert_int_equal(agent_py_str_header(l311, 0x1000, b, sizeof(b), &s), 0);
	assert_int_equal(s.length, 5);
	assert_int_equal(s.kind, 1);
	assert_int_equal(s.data, 0x1000 + 48);
	assert_int_equal(agent_py_str_header(l312, 0x1000, b, sizeof(b), &s), 0);
	assert_int_equal(s.data, 0x1000 + 40);
	/* Compact, not ASCII, 2 bytes a character: after PyCompactUnicodeObject. */
	b[32] = 2 << 2 | 1 << 5 | 1 << 7;
	assert_int_equal(agent_py_str_header(l311, 0x1000, b, sizeof(b), &s), 0);
	assert_int_equal(s.kind, 2);
	assert_int_equal(s.data, 0x1000 + 72);
	assert_int_equal(agent_py_str_header(l312, 0x1000, b, sizeof(b), &s), 0);
	assert_int_equal(s.data, 0x1000 + 56);
	/* Not compact, kind 3, ASCII with kind 4, a short buffer, an absurd length: refused. */
	b[32] = 1 << 2;
	assert_int_equal(agent_py_str_header(l311, 0x1000, b, sizeof(b), &s), -EINVAL);
	b[32] = 3 << 2 | 1 << 5;
	assert_int_equal(agent_py_str_header(l311, 0x1000, b, sizeof(b), &s), -EINVAL);
	b[32] = 4 << 2 | 1 << 5 | 1 << 6;
	assert_int_equal(agent_py_str_header(l311, 0x1000, b, sizeof(b), &s), -EINVAL);
	assert_int_equal(agent_py_str_header(l311, 0x1000, b, 20, &s), -EINVAL);
	b[32] = 1 << 2 | 1 << 5 | 1 << 6;
	put64(b + 16, 1ULL << 50);
	assert_int_equal(agent_py_str_header(l311, 0x1000, b, sizeof(b), &s), -EINVAL);
}

static void test_str_utf8(void **state)
{
	static const uint8_t latin1[] = { 'c', 0xe9 };		  /* "cé" */
	static const uint8_t ucs2[] = { 0x34, 0x12, 0x00, 0xd8 }; /* U+1234, a lone surrogate */
	static const uint8_t ucs4[] = { 0x00, 0xf6, 0x01, 0x00 }; /* U+1F600 */
	char out[16];

	(void)state;
	assert_int_equal(agent_py_str_utf8(latin1, 2, 1, out, sizeof(out)), 3);
	assert_string_equal(out, "c\xc3\xa9");
	assert_int_equal(agent_py_str_utf8(ucs2, 2, 2, out, sizeof(out)), 6);
	assert_string_equal(out, "\xe1\x88\xb4\xef\xbf\xbd");
	assert_int_equal(agent_py_str_utf8(ucs4, 1, 4, out, sizeof(out)), 4);
	assert_string_equal(out, "\xf0\x9f\x98\x80");
	/* Cut at a character boundary: 3 bytes of room keep "c" and not half of "é". */
	assert_int_equal(agent_py_str_utf8(latin1, 2, 1, out, 3), 1);
	assert_string_equal(out, "c");
}

static void test_bytes_and_code(void **state)
{
	const struct agent_py_layout *l = agent_py_layout(AGENT_PY_VERSION(3, 11));
	uint8_t b[AGENT_PY_CODE_HEAD] = { 0 };
	struct agent_py_code c;
	uint64_t data, size;

	(void)state;
	put64(b + 16, 42);
	assert_int_equal(agent_py_bytes_header(0x2000, b, 32, &data, &size), 0);
	assert_int_equal(data, 0x2000 + 32);
	assert_int_equal(size, 42);
	put64(b + 16, (uint64_t)-1);
	assert_int_equal(agent_py_bytes_header(0x2000, b, 32, &data, &size), -EINVAL);

	memset(b, 0, sizeof(b));
	put64(b + 8, 0x959440);
	put64(b + 112, 0x1111);
	put64(b + 120, 0x2222);
	put64(b + 128, 0x3333);
	put64(b + 136, 0x4444);
	b[72] = 17;
	assert_int_equal(agent_py_code_parse(l, b, sizeof(b), &c), 0);
	assert_int_equal(c.type, 0x959440);
	assert_int_equal(c.filename, 0x1111);
	assert_int_equal(c.name, 0x3333); /* co_qualname */
	assert_int_equal(c.linetable, 0x4444);
	assert_int_equal(c.firstlineno, 17);
	assert_int_equal(agent_py_code_parse(l, b, 100, &c), -EINVAL);
	/* Before 3.11, co_name. */
	l = agent_py_layout(AGENT_PY_VERSION(3, 9));
	put64(b + 112, 0x5555);
	assert_int_equal(agent_py_code_parse(l, b, sizeof(b), &c), 0);
	assert_int_equal(c.name, 0x5555);
}

static void test_layouts(void **state)
{
	(void)state;
	for (unsigned minor = 8; minor <= 13; minor++) {
		const struct agent_py_layout *l = agent_py_layout(AGENT_PY_VERSION(3, minor));

		assert_non_null(l);
		assert_true(l->bpf.entry_kind >= PY_ENTRY_PER_FRAME && l->bpf.entry_kind <= PY_ENTRY_SHIM);
		/* Every field a code object head holds is inside what the agent reads of it. */
		assert_true(l->code_linetable + 8 <= AGENT_PY_CODE_HEAD);
		assert_true(l->code_filename + 8 <= AGENT_PY_CODE_HEAD);
	}
	assert_null(agent_py_layout(AGENT_PY_VERSION(3, 7)));
	assert_null(agent_py_layout(AGENT_PY_VERSION(3, 14)));
	assert_null(agent_py_layout(AGENT_PY_VERSION(2, 7)));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_locations_311), cmocka_unit_test(test_lnotab),
		cmocka_unit_test(test_linetable_310), cmocka_unit_test(test_str_header),
		cmocka_unit_test(test_str_utf8),      cmocka_unit_test(test_bytes_and_code),
		cmocka_unit_test(test_layouts),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
