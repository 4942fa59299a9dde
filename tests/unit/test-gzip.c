// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <zlib.h>

#include "common/gzip.h"

/* Inflates with zlib directly (gzip wrapper only), so the test does not trust sr_gzip's own view of the format. */
static void inflate_all(const uint8_t *gz, size_t gz_len, uint8_t *out, size_t cap, size_t *ret_len)
{
	z_stream z = { 0 };

	assert_int_equal(inflateInit2(&z, 16 + MAX_WBITS), Z_OK);
	z.next_in = (Bytef *)gz;
	z.avail_in = (uInt)gz_len;
	z.next_out = out;
	z.avail_out = (uInt)cap;
	assert_int_equal(inflate(&z, Z_FINISH), Z_STREAM_END);
	assert_int_equal(z.avail_in, 0);
	*ret_len = z.total_out;
	inflateEnd(&z);
}

static void roundtrip(const uint8_t *in, size_t len, int level)
{
	uint8_t *gz = NULL, *back;
	size_t gz_len = 0, back_len = 0;

	assert_int_equal(sr_gzip(in, len, level, &gz, &gz_len), 0);
	assert_non_null(gz);
	/* RFC 1952: magic 1f 8b, method 8 (deflate); a member is at least 18 bytes. */
	assert_true(gz_len >= 18);
	assert_int_equal(gz[0], 0x1f);
	assert_int_equal(gz[1], 0x8b);
	assert_int_equal(gz[2], 8);
	back = malloc(len + 1);
	assert_non_null(back);
	inflate_all(gz, gz_len, back, len + 1, &back_len);
	assert_int_equal(back_len, len);
	assert_memory_equal(back, in, len);
	free(back);
	free(gz);
}

static void test_roundtrip_levels(void **state)
{
	static const int levels[] = { Z_DEFAULT_COMPRESSION, 0, 1, 6, 9 };
	uint8_t in[4096];

	(void)state;
	for (size_t i = 0; i < sizeof(in); i++)
		in[i] = (uint8_t)(i % 7);
	for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]); i++)
		roundtrip(in, sizeof(in), levels[i]);
}

static void test_compresses(void **state)
{
	uint8_t in[4096], *gz = NULL;
	size_t gz_len = 0;

	(void)state;
	memset(in, 'a', sizeof(in));
	assert_int_equal(sr_gzip(in, sizeof(in), 1, &gz, &gz_len), 0);
	assert_true(gz_len < sizeof(in) / 10);
	free(gz);
}

/* Incompressible input grows: the output buffer (deflateBound) must still hold it in one call. */
static void test_incompressible(void **state)
{
	size_t len = 1 << 20;
	uint8_t *in = malloc(len);
	uint64_t x = 0x9e3779b97f4a7c15ull;

	(void)state;
	assert_non_null(in);
	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		in[i] = (uint8_t)x;
	}
	roundtrip(in, len, 9);
	roundtrip(in, len, 0);
	free(in);
}

static void test_empty(void **state)
{
	(void)state;
	roundtrip((const uint8_t *)"", 0, Z_DEFAULT_COMPRESSION);
	roundtrip(NULL, 0, 1);
}

static void test_invalid(void **state)
{
	uint8_t *gz = (uint8_t *)&gz;
	size_t gz_len = 7;

	(void)state;
	assert_int_equal(sr_gzip("x", 1, 10, &gz, &gz_len), -EINVAL);
	assert_int_equal(sr_gzip("x", 1, -2, &gz, &gz_len), -EINVAL);
	assert_int_equal(sr_gzip(NULL, 1, 1, &gz, &gz_len), -EINVAL);
	assert_int_equal(sr_gzip("x", 1, 1, NULL, &gz_len), -EINVAL);
	assert_int_equal(sr_gzip("x", 1, 1, &gz, NULL), -EINVAL);
	/* Outputs untouched on error. */
	assert_ptr_equal(gz, (uint8_t *)&gz);
	assert_int_equal(gz_len, 7);
}

/* sr_gunzip: libdeflate on a buffer sized from the trailer, zlib when that does not fit; the same answers. */
static void test_gunzip_paths(void **state)
{
	uint8_t in[8192], *gz, *two, *out;
	size_t gz_len, out_len;

	(void)state;
	for (size_t i = 0; i < sizeof(in); i++)
		in[i] = (uint8_t)(i * 7 % 251);
	assert_int_equal(sr_gzip(in, sizeof(in), 1, &gz, &gz_len), 0);
	/* the fast path */
	assert_int_equal(sr_gunzip(gz, gz_len, sizeof(in), &out, &out_len), 0);
	assert_int_equal(out_len, sizeof(in));
	assert_memory_equal(out, in, sizeof(in));
	free(out);
	/* the limit holds either way */
	assert_int_equal(sr_gunzip(gz, gz_len, sizeof(in) - 1, &out, &out_len), -EFBIG);
	/* bytes after the member (another member): the first member, as zlib has always answered */
	two = malloc(2 * gz_len);
	assert_non_null(two);
	memcpy(two, gz, gz_len);
	memcpy(two + gz_len, gz, gz_len);
	assert_int_equal(sr_gunzip(two, 2 * gz_len, 2 * sizeof(in), &out, &out_len), 0);
	assert_int_equal(out_len, sizeof(in));
	assert_memory_equal(out, in, sizeof(in));
	free(out);
	/* a trailer that lies about the length: small (a bomb's way past the fast path), or wrong */
	memcpy(two, gz, gz_len);
	two[gz_len - 4] = 16;
	two[gz_len - 3] = two[gz_len - 2] = two[gz_len - 1] = 0;
	assert_int_equal(sr_gunzip(two, gz_len, 1 << 20, &out, &out_len), -EBADMSG);
	assert_int_equal(sr_gunzip(two, gz_len, 100, &out, &out_len), -EFBIG);
	/* corrupt data: both paths refuse it */
	memcpy(two, gz, gz_len);
	two[gz_len / 2] ^= 0x55;
	assert_int_not_equal(sr_gunzip(two, gz_len, 1 << 20, &out, &out_len), 0);
	/* truncated */
	assert_int_equal(sr_gunzip(gz, gz_len - 5, 1 << 20, &out, &out_len), -EBADMSG);
	free(two);
	free(gz);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip_levels), cmocka_unit_test(test_compresses),
		cmocka_unit_test(test_incompressible),	 cmocka_unit_test(test_empty),
		cmocka_unit_test(test_invalid),		 cmocka_unit_test(test_gunzip_paths),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
