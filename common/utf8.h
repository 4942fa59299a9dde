/* SPDX-License-Identifier: Apache-2.0 */
/* UTF-8 for strings that arrive from peers and leave in OTLP. */
#ifndef SR_COMMON_UTF8_H
#define SR_COMMON_UTF8_H

#include <stddef.h>
#include <stdint.h>

/*
 * Copies n bytes of s as valid UTF-8 into dst (room for max + 1 bytes):
 * other bytes (invalid sequences, overlong forms, surrogates, NUL) become
 * '?', because OTLP strings must be UTF-8 and backends reject anything
 * else; cut at max bytes. NUL-terminates only if the caller does. Returns
 * the length written.
 */
size_t sr_utf8_copy(char *dst, const uint8_t *s, size_t n, size_t max);

#endif
