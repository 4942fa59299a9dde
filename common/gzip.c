// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <stdlib.h>

#include <libdeflate.h>
#include <zlib.h>

#include "common/grow.h"
#include "common/macro.h"
#include "gzip.h"

/* zlib's Z_DEFAULT_COMPRESSION means its level 6. */
#define SR_GZIP_DEFAULT_LEVEL 6

/*
 * Compression is libdeflate's: one call on a whole buffer, the same gzip
 * format as zlib's, 2.3 times as fast at level 1 (export-bench in
 * bench/gateway-throughput times both), where the
 * gateway's exporters spent a third of their CPU in zlib's deflate().
 * Decompression tries libdeflate first on a buffer sized from the gzip
 * trailer, and streams with zlib under the size limit when that does not
 * fit (gunzip_sized()).
 */
int sr_gzip(const void *in, size_t len, int level, uint8_t **ret, size_t *ret_len)
{
	struct libdeflate_compressor *c;
	size_t bound, n;
	uint8_t *out;

	if (!ret || !ret_len || (!in && len > 0) || level < Z_DEFAULT_COMPRESSION || level > Z_BEST_COMPRESSION)
		return -EINVAL;
	c = libdeflate_alloc_compressor(level == Z_DEFAULT_COMPRESSION ? SR_GZIP_DEFAULT_LEVEL : level);
	if (!c)
		return -ENOMEM;
	bound = libdeflate_gzip_compress_bound(c, len);
	out = malloc(bound ? bound : 1);
	if (!out) {
		libdeflate_free_compressor(c);
		return -ENOMEM;
	}
	/* The bound is enough: 0 (no room) cannot happen, but is an error rather than an empty body. */
	n = libdeflate_gzip_compress(c, in ? in : "", len, out, bound);
	libdeflate_free_compressor(c);
	if (n == 0) {
		free(out);
		return -EIO;
	}
	*ret = out;
	*ret_len = n;
	return 0;
}

/*
 * The fast path of sr_gunzip(): libdeflate (about twice zlib's inflate speed)
 * decompresses a whole member into a buffer sized from the member's trailer
 * (ISIZE: the length modulo 2^32). That is only a hint: trailing bytes after
 * the member, a lying or wrapped ISIZE, or bad data make it fail, and the
 * caller then streams with zlib, whose answer (and limit checks) stand.
 * Returns 0 with the output, or 1: not done here.
 */
static int gunzip_sized(const uint8_t *in, size_t len, uint64_t max_bytes, uint8_t **ret, size_t *ret_len)
{
	struct libdeflate_decompressor *d;
	size_t want, in_used = 0, out_len = 0;
	enum libdeflate_result r;
	uint8_t *out;

	if (len < 18) /* a member's header and trailer alone */
		return 1;
	want = (size_t)in[len - 4] | (size_t)in[len - 3] << 8 | (size_t)in[len - 2] << 16 | (size_t)in[len - 1] << 24;
	if (want > max_bytes)
		return 1; /* zlib says -EFBIG after max_bytes, or finds the hint wrong */
	d = libdeflate_alloc_decompressor();
	if (!d)
		return 1;
	out = malloc(want ? want : 1);
	if (!out) {
		libdeflate_free_decompressor(d);
		return 1;
	}
	r = libdeflate_gzip_decompress_ex(d, in, len, out, want, &in_used, &out_len);
	libdeflate_free_decompressor(d);
	if (r != LIBDEFLATE_SUCCESS || out_len != want || in_used != len) {
		free(out);
		return 1;
	}
	*ret = out;
	*ret_len = out_len;
	return 0;
}

int sr_gunzip(const void *data, size_t len, uint64_t max_bytes, uint8_t **ret, size_t *ret_len)
{
	const uint8_t *in = data;
	z_stream z = { 0 };
	size_t cap = SR_MIN((uint64_t)SR_MAX(len * 4, (size_t)4096), max_bytes + 1);
	uint8_t *out;
	int r, e = 0;

	if (in && gunzip_sized(in, len, max_bytes, ret, ret_len) == 0)
		return 0;
	out = malloc(cap ? cap : 1);
	if (!out)
		return -ENOMEM;
	/* 16 + MAX_WBITS: gzip wrapper only (RFC 1952), as Content-Encoding: gzip says. */
	if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) {
		free(out);
		return -ENOMEM;
	}
	z.next_in = (Bytef *)in;
	z.avail_in = (uInt)SR_MIN(len, (size_t)UINT32_MAX);
	for (;;) {
		if (z.total_out == cap) {
			if (cap > max_bytes) {
				e = -EFBIG;
				break;
			}
			/* Up to one byte past max_bytes: inflating into it says the body is larger. */
			if (sr_grow_max((void **)&out, &cap, cap + 1, 1, 1,
					(size_t)SR_MIN(max_bytes + 1, (uint64_t)SIZE_MAX)) < 0) {
				e = -ENOMEM;
				break;
			}
		}
		z.next_out = out + z.total_out;
		z.avail_out = (uInt)SR_MIN(cap - z.total_out, (size_t)UINT32_MAX);
		r = inflate(&z, Z_NO_FLUSH);
		if (r == Z_STREAM_END) {
			if (z.total_out > max_bytes)
				e = -EFBIG;
			break;
		}
		if (r == Z_BUF_ERROR && z.avail_in == 0 && z.avail_out > 0) {
			e = -EBADMSG; /* truncated */
			break;
		}
		if (r != Z_OK && r != Z_BUF_ERROR) {
			e = r == Z_MEM_ERROR ? -ENOMEM : -EBADMSG;
			break;
		}
	}
	if (e == 0 && z.total_out > max_bytes)
		e = -EFBIG;
	*ret_len = z.total_out;
	inflateEnd(&z);
	if (e < 0) {
		free(out);
		return e;
	}
	*ret = out;
	return 0;
}
