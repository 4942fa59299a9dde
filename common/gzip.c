// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <limits.h>
#include <stdlib.h>

#include <zlib.h>

#include "gzip.h"
#include "macro.h"

int sr_gzip(const void *in, size_t len, int level, uint8_t **ret, size_t *ret_len)
{
	z_stream z = { 0 };
	uLong bound;
	uint8_t *out;
	int zr;

	if (!ret || !ret_len || (!in && len > 0) || level < Z_DEFAULT_COMPRESSION || level > Z_BEST_COMPRESSION)
		return -EINVAL;
	/* One deflate() call: avail_in is a uInt, a larger buffer would be cut silently. */
	if (len > UINT_MAX)
		return -EFBIG;
	/* windowBits 15 + 16: a gzip wrapper, which Content-Encoding: gzip means. */
	if (deflateInit2(&z, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return -ENOMEM;
	/* deflateBound() is enough for Z_FINISH in one call: no output loop. */
	bound = deflateBound(&z, (uLong)len);
	if (bound > UINT_MAX) {
		deflateEnd(&z);
		return -EFBIG;
	}
	out = malloc(bound ? bound : 1);
	if (!out) {
		deflateEnd(&z);
		return -ENOMEM;
	}
	z.next_in = (Bytef *)in;
	z.avail_in = (uInt)len;
	z.next_out = out;
	z.avail_out = (uInt)bound;
	zr = deflate(&z, Z_FINISH);
	deflateEnd(&z);
	if (zr != Z_STREAM_END) {
		free(out);
		return -EIO;
	}
	*ret = out;
	*ret_len = z.total_out;
	return 0;
}

int sr_gunzip(const void *data, size_t len, uint64_t max_bytes, uint8_t **ret, size_t *ret_len)
{
	const uint8_t *in = data;
	z_stream z = { 0 };
	size_t cap = SR_MIN((uint64_t)SR_MAX(len * 4, (size_t)4096), max_bytes + 1);
	uint8_t *out = malloc(cap ? cap : 1);
	int r, e = 0;

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
			size_t ncap = (size_t)SR_MIN((uint64_t)cap * 2, max_bytes + 1);
			uint8_t *n = realloc(out, ncap);
			if (!n) {
				e = -ENOMEM;
				break;
			}
			out = n;
			cap = ncap;
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
