/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The configuration reference (config-private.h): an sr_field table written
 * as one line per key, with its type, default, documentation and bounds, as
 * --help prints it, or as the Markdown tables of docs/configuration.md.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>

#include "config-private.h"
#include "config.h"
#include "units.h"

static void describe_type(const struct sr_field *f, bool markdown, char *buf, size_t size)
{
	if (f->kind == SR_FIELD_ENUM) {
		size_t o = (size_t)snprintf(buf, size, "enum: ");
		for (size_t i = 0; f->values[i] && o < size; i++)
			o += (size_t)snprintf(buf + o, size - o, "%s%s", i ? (markdown ? " \\| " : "|") : "",
					      f->values[i]);
		return;
	}
	snprintf(buf, size, "%s", sr_config_kind_name(f->kind));
}

static void describe_bounds(const struct sr_field *f, char *buf, size_t size)
{
	char a[40], b[40];

	buf[0] = '\0';
	if (f->min >= f->max)
		return;
	switch (f->kind) {
	case SR_FIELD_DURATION:
		snprintf(buf, size, " (%s to %s)", sr_format_duration((uint64_t)f->min, a, sizeof(a)),
			 sr_format_duration((uint64_t)f->max, b, sizeof(b)));
		break;
	case SR_FIELD_SIZE:
		snprintf(buf, size, " (%s to %s%s)", sr_format_size((uint64_t)f->min, a, sizeof(a)),
			 sr_format_size((uint64_t)f->max, b, sizeof(b)), f->auto_zero ? ", or auto" : "");
		break;
	case SR_FIELD_INT:
	case SR_FIELD_UINT:
	case SR_FIELD_DOUBLE:
		snprintf(buf, size, " (%" PRId64 " to %" PRId64 ")", f->min, f->max);
		break;
	case SR_FIELD_STRING_LIST:
	case SR_FIELD_STRING_MAP:
	case SR_FIELD_MAPPING_LIST:
		snprintf(buf, size, " (%" PRId64 " to %" PRId64 " entries)", f->min, f->max);
		break;
	default:
		break;
	}
}

size_t sr_config_describe(const struct sr_field *fields, const char *prefix, bool markdown, FILE *f)
{
	char key[PATH_MAX_LEN], type[256], bounds[96];
	size_t unchecked = 0;

	for (const struct sr_field *fl = fields; fl->key; fl++) {
		sr_config_path_join(key, sizeof(key), prefix, fl->key);
		describe_type(fl, markdown, type, sizeof(type));
		describe_bounds(fl, bounds, sizeof(bounds));
		if (fl->min != 0 && fl->min >= fl->max) {
			fprintf(stderr,
				"config schema: %s has a minimum (%" PRId64 ") but no maximum above it, "
				"so its minimum is never checked: give it a .max\n",
				key, fl->min);
			unchecked++;
		}
		const char *def = fl->required ? "required" : fl->def ? fl->def : "";
		if (markdown)
			fprintf(f, "| `%s` | %s | %s%s%s | %s%s |\n", key, type, *def && !fl->required ? "`" : "",
				*def ? def : "—", *def && !fl->required ? "`" : "", fl->doc ? fl->doc : "", bounds);
		else
			fprintf(f, "  %-44s %-18s %-10s %s%s\n", key, type, *def ? def : "-", fl->doc ? fl->doc : "",
				bounds);
		if (fl->kind == SR_FIELD_MAPPING)
			unchecked += sr_config_describe(fl->fields, key, markdown, f);
		else if (fl->kind == SR_FIELD_MAPPING_LIST) {
			char sub[PATH_MAX_LEN + 2];
			snprintf(sub, sizeof(sub), "%s[]", key);
			unchecked += sr_config_describe(fl->fields, sub, markdown, f);
		}
	}
	return unchecked;
}
