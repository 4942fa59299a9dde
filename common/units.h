/* SPDX-License-Identifier: Apache-2.0 */
/* Durations ("10s", "1m30s", "250ms") and sizes ("64MiB", "1GB", "4096"). */
#ifndef SR_UNITS_H
#define SR_UNITS_H

#include <stddef.h>
#include <stdint.h>

#define SR_NSEC_PER_USEC 1000ULL
#define SR_NSEC_PER_MSEC 1000000ULL
#define SR_NSEC_PER_SEC	 1000000000ULL

/*
 * Go/Collector duration syntax: a sequence of decimal numbers, each with an
 * optional fraction and a unit (ns, us, µs, ms, s, m, h), e.g. "1h2m3.5s".
 * "0" alone is allowed. Negative durations are rejected. Returns 0, -EINVAL
 * for bad syntax, -ERANGE on overflow of 64-bit nanoseconds.
 */
int sr_parse_duration(const char *s, uint64_t *ret_ns);
/* Shortest exact form: "1m30s", "250ms", "0s". buf of 32 bytes is enough. */
const char *sr_format_duration(uint64_t ns, char *buf, size_t size);

/*
 * Sizes: an integer or decimal number with an optional unit, B, KiB, MiB, GiB,
 * TiB (powers of 1024) or KB, MB, GB, TB (powers of 1000); no unit means
 * bytes. Returns 0, -EINVAL, or -ERANGE.
 */
int sr_parse_size(const char *s, uint64_t *ret_bytes);
/* "64MiB" when exact, else bytes: "1000B". */
const char *sr_format_size(uint64_t bytes, char *buf, size_t size);

#endif
