/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One scalar value of a configuration field (config-private.h): a bool,
 * integer, number, duration, size or enum as written in YAML, parsed, checked
 * against the field's bounds and turned into its normalized text, or an
 * error message that never shows a secret; and the names of the field kinds
 * that messages and the documentation use.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include "config-private.h"
#include "config.h"
#include "units.h"

const char *sr_config_kind_name(enum sr_field_kind k)
{
	switch (k) {
	case SR_FIELD_STRING:
		return "string";
	case SR_FIELD_BOOL:
		return "bool";
	case SR_FIELD_INT:
		return "int";
	case SR_FIELD_UINT:
		return "uint";
	case SR_FIELD_DOUBLE:
		return "float";
	case SR_FIELD_DURATION:
		return "duration";
	case SR_FIELD_SIZE:
		return "size";
	case SR_FIELD_ENUM:
		return "enum";
	case SR_FIELD_STRING_LIST:
		return "list of strings";
	case SR_FIELD_STRING_MAP:
		return "map of strings";
	case SR_FIELD_MAPPING:
		return "mapping";
	case SR_FIELD_MAPPING_LIST:
		return "list of mappings";
	case SR_FIELD_EXTERNAL:
		return "mapping";
	}
	return "?";
}

static bool in_bounds_i(const struct sr_field *f, int64_t v)
{
	return f->min >= f->max || (v >= f->min && v <= f->max);
}

static bool in_bounds_u(const struct sr_field *f, uint64_t v)
{
	return f->min >= f->max || (v >= (uint64_t)f->min && v <= (uint64_t)f->max);
}

/* What an error message shows of a value: its text (cut to size), or "(secret)" for a secret field. */
static void value_for_message(const struct sr_field *f, const char *text, char *buf, size_t size)
{
	snprintf(buf, size, "%s", f->secret ? "(secret)" : text);
}

/*
 * Validates one scalar of a scalar kind and writes its normalized form to
 * norm (STRING: norm is not used, the caller emits text as is). Returns 0
 * or -EINVAL with a message in err.
 */
int sr_config_parse_scalar(const struct sr_field *f, const char *text, char *norm, size_t normsize, char *err,
			   size_t errsize)
{
	char shown[160], b1[40], b2[40];
	char *end;

	value_for_message(f, text, shown, sizeof(shown));
	switch (f->kind) {
	case SR_FIELD_STRING:
		return 0;
	case SR_FIELD_BOOL:
		if (!strcasecmp(text, "true") || !strcasecmp(text, "yes") || !strcasecmp(text, "on")) {
			snprintf(norm, normsize, "true");
			return 0;
		}
		if (!strcasecmp(text, "false") || !strcasecmp(text, "no") || !strcasecmp(text, "off")) {
			snprintf(norm, normsize, "false");
			return 0;
		}
		snprintf(err, errsize, "invalid bool \"%s\": expected true or false", shown);
		return -EINVAL;
	case SR_FIELD_INT: {
		errno = 0;
		long long v = strtoll(text, &end, 10);
		if (!*text || *end || errno) {
			snprintf(err, errsize, "invalid integer \"%s\"", shown);
			return -EINVAL;
		}
		if (!in_bounds_i(f, v)) {
			snprintf(err, errsize, "%lld is out of range: must be from %" PRId64 " to %" PRId64, v, f->min,
				 f->max);
			return -EINVAL;
		}
		snprintf(norm, normsize, "%lld", v);
		return 0;
	}
	case SR_FIELD_UINT: {
		errno = 0;
		const char *p = text;
		while (isspace((unsigned char)*p))
			p++;
		unsigned long long v = strtoull(text, &end, 10);
		if (!*text || *end || errno || *p == '-') {
			snprintf(err, errsize, "invalid non-negative integer \"%s\"", shown);
			return -EINVAL;
		}
		if (!in_bounds_u(f, v)) {
			snprintf(err, errsize, "%llu is out of range: must be from %" PRId64 " to %" PRId64, v, f->min,
				 f->max);
			return -EINVAL;
		}
		snprintf(norm, normsize, "%llu", v);
		return 0;
	}
	case SR_FIELD_DOUBLE: {
		errno = 0;
		double v = strtod(text, &end);
		if (!*text || *end || errno || !isfinite(v)) {
			snprintf(err, errsize, "invalid number \"%s\"", shown);
			return -EINVAL;
		}
		if (f->min < f->max && (v < (double)f->min || v > (double)f->max)) {
			snprintf(err, errsize, "%g is out of range: must be from %" PRId64 " to %" PRId64, v, f->min,
				 f->max);
			return -EINVAL;
		}
		snprintf(norm, normsize, "%.17g", v);
		return 0;
	}
	case SR_FIELD_DURATION: {
		uint64_t ns;
		int r = sr_parse_duration(text, &ns);
		if (r == -ERANGE) {
			snprintf(err, errsize, "duration \"%s\" is too long", shown);
			return -EINVAL;
		}
		if (r < 0) {
			snprintf(err, errsize,
				 "invalid duration \"%s\": expected a number with a unit (ns, us, ms, s, m, h), "
				 "e.g. \"10s\", \"1m30s\", \"250ms\"",
				 shown);
			return -EINVAL;
		}
		if (!in_bounds_u(f, ns)) {
			snprintf(err, errsize, "duration %s is out of range: must be from %s to %s", shown,
				 sr_format_duration((uint64_t)f->min, b1, sizeof(b1)),
				 sr_format_duration((uint64_t)f->max, b2, sizeof(b2)));
			return -EINVAL;
		}
		snprintf(norm, normsize, "%" PRIu64, ns);
		return 0;
	}
	case SR_FIELD_SIZE: {
		uint64_t bytes;
		if (f->auto_zero && !strcasecmp(text, "auto")) {
			snprintf(norm, normsize, "0");
			return 0;
		}
		int r = sr_parse_size(text, &bytes);
		if (r < 0) {
			snprintf(err, errsize,
				 "invalid size \"%s\": expected bytes or a number with a unit (KiB, MiB, GiB, TiB, "
				 "KB, MB, GB, TB), e.g. \"64MiB\"%s",
				 shown, f->auto_zero ? ", or auto" : "");
			return -EINVAL;
		}
		if (!in_bounds_u(f, bytes)) {
			snprintf(err, errsize, "size %s is out of range: must be from %s to %s", shown,
				 sr_format_size((uint64_t)f->min, b1, sizeof(b1)),
				 sr_format_size((uint64_t)f->max, b2, sizeof(b2)));
			return -EINVAL;
		}
		snprintf(norm, normsize, "%" PRIu64, bytes);
		return 0;
	}
	case SR_FIELD_ENUM: {
		char expected[256] = "";
		size_t o = 0;
		for (size_t i = 0; f->values[i]; i++) {
			if (!strcasecmp(text, f->values[i])) {
				snprintf(norm, normsize, "%s", f->values[i]);
				return 0;
			}
			int w = snprintf(expected + o, sizeof(expected) - o, "%s%s", i ? ", " : "", f->values[i]);
			if (w > 0 && o + (size_t)w < sizeof(expected))
				o += (size_t)w;
		}
		snprintf(err, errsize, "invalid value \"%s\": expected one of %s", shown, expected);
		return -EINVAL;
	}
	default:
		snprintf(err, errsize, "internal: %s is not a scalar kind", sr_config_kind_name(f->kind));
		return -EINVAL;
	}
}
