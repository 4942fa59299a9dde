// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <limits.h>
#include <stdlib.h>

#include <zlib.h>

#include "gzip.h"

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
