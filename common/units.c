// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "common/macro.h"
#include "units.h"

/*
 * Parses "123" or "1.25" at *p into an integer part and a fraction scaled to
 * 1e9, so "1.5" gives int 1 and frac 500000000. Digits past nanosecond
 * precision are ignored (like Go's time.ParseDuration they cannot matter
 * for any unit we have).
 */
static int parse_decimal(const char **p, uint64_t *ret_int, uint64_t *ret_frac)
{
	const char *s = *p;
	uint64_t v = 0, frac = 0, scale = 100000000ULL;
	bool digits = false;

	while (*s >= '0' && *s <= '9') {
		if (v > (UINT64_MAX - 9) / 10)
			return -ERANGE;
		v = v * 10 + (uint64_t)(*s - '0');
		s++;
		digits = true;
	}
	if (*s == '.') {
		s++;
		while (*s >= '0' && *s <= '9') {
			frac += (uint64_t)(*s - '0') * scale;
			scale /= 10;
			s++;
			digits = true;
		}
	}
	if (!digits)
		return -EINVAL;
	*p = s;
	*ret_int = v;
	*ret_frac = frac;
	return 0;
}

/* v * mult + frac * mult / 1e9, in 128 bits so nothing overflows unnoticed. */
static int scale_value(uint64_t v, uint64_t frac, uint64_t mult, uint64_t *ret)
{
	unsigned __int128 t = (unsigned __int128)v * mult + (unsigned __int128)frac * mult / SR_NSEC_PER_SEC;

	if (t > UINT64_MAX)
		return -ERANGE;
	*ret = (uint64_t)t;
	return 0;
}

static const struct {
	const char *name;
	uint64_t ns;
} duration_units[] = {
	/* Longest first so "ms" is not read as "m" followed by "s". */
	{ "ns", 1 },
	{ "us", SR_NSEC_PER_USEC },
	{ "\xc2\xb5s", SR_NSEC_PER_USEC }, /* µs (micro sign) */
	{ "\xce\xbcs", SR_NSEC_PER_USEC }, /* μs (Greek mu) */
	{ "ms", SR_NSEC_PER_MSEC },
	{ "s", SR_NSEC_PER_SEC },
	{ "m", 60 * SR_NSEC_PER_SEC },
	{ "h", 3600 * SR_NSEC_PER_SEC },
};

int sr_parse_duration(const char *s, uint64_t *ret_ns)
{
	uint64_t total = 0;
	int r;

	if (!s || !*s)
		return -EINVAL;
	if (strcmp(s, "0") == 0) {
		*ret_ns = 0;
		return 0;
	}
	while (*s) {
		uint64_t v, frac, part;
		size_t best = 0, best_len = 0;

		r = parse_decimal(&s, &v, &frac);
		if (r < 0)
			return r;
		for (size_t i = 0; i < SR_ARRAY_SIZE(duration_units); i++) {
			size_t n = strlen(duration_units[i].name);
			if (n > best_len && strncmp(s, duration_units[i].name, n) == 0) {
				best = i;
				best_len = n;
			}
		}
		if (best_len == 0)
			return -EINVAL; /* a number without a unit, or an unknown unit */
		s += best_len;
		r = scale_value(v, frac, duration_units[best].ns, &part);
		if (r < 0)
			return r;
		if (total > UINT64_MAX - part)
			return -ERANGE;
		total += part;
	}
	*ret_ns = total;
	return 0;
}

const char *sr_format_duration(uint64_t ns, char *buf, size_t size)
{
	size_t o = 0;

	if (ns == 0) {
		snprintf(buf, size, "0s");
		return buf;
	}
	if (ns % SR_NSEC_PER_SEC != 0) {
		if (ns % SR_NSEC_PER_MSEC == 0 && ns < 60 * SR_NSEC_PER_SEC)
			snprintf(buf, size, "%llums", (unsigned long long)(ns / SR_NSEC_PER_MSEC));
		else if (ns % SR_NSEC_PER_USEC == 0 && ns < SR_NSEC_PER_SEC)
			snprintf(buf, size, "%lluus", (unsigned long long)(ns / SR_NSEC_PER_USEC));
		else
			snprintf(buf, size, "%lluns", (unsigned long long)ns);
		return buf;
	}
	uint64_t secs = ns / SR_NSEC_PER_SEC;
	uint64_t h = secs / 3600, m = (secs / 60) % 60, sec = secs % 60;
	buf[0] = '\0';
	if (h)
		o += (size_t)snprintf(buf + o, o < size ? size - o : 0, "%lluh", (unsigned long long)h);
	if (m)
		o += (size_t)snprintf(buf + o, o < size ? size - o : 0, "%llum", (unsigned long long)m);
	if (sec)
		snprintf(buf + o, o < size ? size - o : 0, "%llus", (unsigned long long)sec);
	return buf;
}

static const struct {
	const char *name;
	uint64_t mult;
} size_units[] = {
	{ "B", 1 },
	{ "KiB", 1ULL << 10 },
	{ "MiB", 1ULL << 20 },
	{ "GiB", 1ULL << 30 },
	{ "TiB", 1ULL << 40 },
	{ "KB", 1000ULL },
	{ "MB", 1000ULL * 1000 },
	{ "GB", 1000ULL * 1000 * 1000 },
	{ "TB", 1000ULL * 1000 * 1000 * 1000 },
};

int sr_parse_size(const char *s, uint64_t *ret_bytes)
{
	uint64_t v, frac, mult = 1;
	int r;

	if (!s || !*s)
		return -EINVAL;
	r = parse_decimal(&s, &v, &frac);
	if (r < 0)
		return r;
	while (*s == ' ')
		s++;
	if (*s) {
		bool found = false;
		for (size_t i = 0; i < SR_ARRAY_SIZE(size_units); i++) {
			if (strcmp(s, size_units[i].name) == 0) {
				mult = size_units[i].mult;
				found = true;
				break;
			}
		}
		if (!found)
			return -EINVAL;
	}
	if (frac != 0 && mult == 1)
		return -EINVAL; /* fractional bytes */
	return scale_value(v, frac, mult, ret_bytes);
}

const char *sr_format_size(uint64_t bytes, char *buf, size_t size)
{
	static const char *const names[] = { "TiB", "GiB", "MiB", "KiB" };
	static const unsigned shifts[] = { 40, 30, 20, 10 };

	for (size_t i = 0; i < SR_ARRAY_SIZE(names); i++) {
		uint64_t unit = 1ULL << shifts[i];
		if (bytes != 0 && bytes % unit == 0) {
			snprintf(buf, size, "%llu%s", (unsigned long long)(bytes / unit), names[i]);
			return buf;
		}
	}
	snprintf(buf, size, "%lluB", (unsigned long long)bytes);
	return buf;
}
