/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gzip (RFC 1952) of a buffer in one call, for request bodies sent with
 * "Content-Encoding: gzip" or "grpc-encoding: gzip" (agent → gateway,
 * gateway → backends) and for files written gzipped (pprof).
 */
#ifndef SR_GZIP_H
#define SR_GZIP_H

#include <stddef.h>
#include <stdint.h>

/*
 * Compresses in[0..len) at a zlib level (0..9, or -1 for zlib's default, 6)
 * into one malloc()ed gzip member (libdeflate's compressor). Returns 0 with
 * *ret (free() it) and *ret_len set; -EINVAL for a bad level or a NULL
 * output, -ENOMEM, or -EIO when compression fails. On error the outputs are
 * untouched.
 */
int sr_gzip(const void *in, size_t len, int level, uint8_t **ret, size_t *ret_len);

/*
 * Decompresses one gzip member (RFC 1952 wrapper only, as Content-Encoding:
 * gzip says) into a malloc()ed buffer of at most max_bytes: a "gzip bomb" is
 * stopped after max_bytes of output. Returns 0 with *ret (free() it) and
 * *ret_len; -EFBIG when the output would exceed max_bytes, -EBADMSG when the
 * input is not valid or is truncated, -ENOMEM.
 */
int sr_gunzip(const void *in, size_t len, uint64_t max_bytes, uint8_t **ret, size_t *ret_len);

#endif
