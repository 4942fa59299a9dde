// SPDX-License-Identifier: Apache-2.0
/*
 * The ProfilesDictionary of an OTLP profiles request (otlp-decode-private.h):
 * one pass records every table entry as a slice of the request (tables
 * bounded by the limits), then entries are decoded on first use and kept,
 * so a location shared by a thousand stacks is decoded and interned once.
 *
 * Mapping to the model (docs/receivers.md):
 *   - a Mapping with process.executable.build_id.gnu (hex) becomes a
 *     gw_executable of that GNU build ID; with only
 *     process.executable.build_id.htlhash, one with that content hash;
 *   - a Location without lines on such a mapping (a native frame) becomes a
 *     plain USER location at its address (the OTel profiler sends ELF
 *     virtual addresses), which the symbolize processor names;
 *   - a Location with lines keeps them as they are (a preset location, see
 *     gw_stores__intern_location_lines); interpreter frames
 *     (profile.frame.type other than native, go, kernel) are kept as they
 *     came, with or without lines; native frames without a build ID and
 *     kernel frames without lines, which nothing can name later, get one
 *     line "<file>+0x<address>" / "[kernel]+0x<address>";
 *   - a Stack becomes a gw_stack whose ID is a content hash of its
 *     locations (OTLP has no stack IDs), so equal stacks share one object.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "agent-ingest-private.h"
#include "core/model.h"
#include "macro.h"
#include "otlp-decode-private.h"
#include "pbwire.h"

#include "opentelemetry/proto/common/v1/common.pb.h"
#include "opentelemetry/proto/profiles/v1development/profiles.pb.h"

#define P(m, f) opentelemetry_proto_profiles_v1development_##m##_##f##_tag
#define C(m, f) opentelemetry_proto_common_v1_##m##_##f##_tag

/* Stack IDs made here: a tag byte then a 128-bit content hash (agent IDs are 16 bytes: never equal). */
#define OTLP_STACK_ID_TAG 'o'
#define OTLP_STACK_ID_LEN 17

static const char *const table_names[_OT_MAX] = {
	[OT_MAPPING] = "mapping_table", [OT_LOCATION] = "location_table", [OT_FUNCTION] = "function_table",
	[OT_LINK] = "link_table",	[OT_STRING] = "string_table",	  [OT_ATTRIBUTE] = "attribute_table",
	[OT_STACK] = "stack_table",
};

static const uint32_t table_fields[_OT_MAX] = {
	[OT_MAPPING] = P(ProfilesDictionary, mapping_table),   [OT_LOCATION] = P(ProfilesDictionary, location_table),
	[OT_FUNCTION] = P(ProfilesDictionary, function_table), [OT_LINK] = P(ProfilesDictionary, link_table),
	[OT_STRING] = P(ProfilesDictionary, string_table),     [OT_ATTRIBUTE] = P(ProfilesDictionary, attribute_table),
	[OT_STACK] = P(ProfilesDictionary, stack_table),
};

/* Working bytes per entry of each table: its slice plus its decoded form. */
static const size_t entry_bytes[_OT_MAX] = {
	[OT_MAPPING] = sizeof(struct sr_pb_slice) + sizeof(struct otlp_mapping),
	[OT_LOCATION] = sizeof(struct sr_pb_slice) + sizeof(struct otlp_location),
	[OT_FUNCTION] = sizeof(struct sr_pb_slice) + sizeof(struct otlp_function),
	[OT_LINK] = sizeof(struct sr_pb_slice),
	[OT_STRING] = sizeof(struct sr_pb_slice) + sizeof(const char *),
	[OT_ATTRIBUTE] = sizeof(struct sr_pb_slice) + sizeof(struct otlp_attr),
	[OT_STACK] = sizeof(struct sr_pb_slice) + sizeof(struct gw_stack *) + sizeof(bool),
};

const char *otlp_table_name(enum otlp_table t)
{
	return (unsigned)t < _OT_MAX ? table_names[t] : "?";
}

int otlp_fail(struct otlp_dec *d, enum gw_otlp_decode_status st, const uint8_t *at, const char *fmt, ...)
{
	struct gw_otlp_decode_result *res = d->res;

	if (res->status == GW_OTLP_DECODE_OK) {
		/* Room for the offset is kept at the end, so a long path never hides it. */
		const size_t room = sizeof(res->message) - 32;
		va_list ap;
		size_t n;

		va_start(ap, fmt);
		vsnprintf(res->message, room, fmt, ap);
		va_end(ap);
		res->status = st;
		n = strlen(res->message);
		if (at && at >= d->base && at <= d->base + d->len)
			snprintf(res->message + n, sizeof(res->message) - n, " (at byte %zu)", (size_t)(at - d->base));
	}
	switch (st) {
	case GW_OTLP_DECODE_TOO_LARGE:
		return -E2BIG;
	case GW_OTLP_DECODE_NO_MEMORY:
		return -ENOMEM;
	case GW_OTLP_DECODE_AMBIGUOUS:
		return -EPROTO;
	default:
		return -EBADMSG;
	}
}

int otlp_nomem(struct otlp_dec *d, const char *what)
{
	return otlp_fail(d, GW_OTLP_DECODE_NO_MEMORY, NULL, "out of memory decoding %s", what);
}

int otlp_charge(struct otlp_dec *d, uint64_t n, const uint8_t *at)
{
	if (n > d->lim.max_work_bytes || d->work_bytes > d->lim.max_work_bytes - n)
		return otlp_fail(d, GW_OTLP_DECODE_TOO_LARGE, at,
				 "request needs more than %" PRIu64 " bytes of decoding memory (max_work_bytes)",
				 d->lim.max_work_bytes);
	d->work_bytes += n;
	return 0;
}

static uint32_t table_limit(const struct otlp_dec *d, enum otlp_table t)
{
	switch (t) {
	case OT_MAPPING:
		return d->lim.max_mappings;
	case OT_LOCATION:
		return d->lim.max_locations;
	case OT_FUNCTION:
		return d->lim.max_functions;
	case OT_LINK:
		return d->lim.max_links;
	case OT_STRING:
		return d->lim.max_strings;
	case OT_ATTRIBUTE:
		return d->lim.max_attributes;
	default:
		return d->lim.max_stacks;
	}
}

int otlp_dict_scan(struct otlp_dec *d, struct sr_pb_slice dict)
{
	struct sr_pbr r = sr_pbr_of(d->base, d->len), q;
	struct sr_pb_field f;
	int e;

	if (!dict.p) /* no dictionary: every table empty */
		dict = (struct sr_pb_slice){ d->base, 0 };
	d->dict_at = dict.p;
	/* First count (every table bounded before anything is allocated), then record. */
	q = sr_pbr__sub(&r, dict);
	while ((e = sr_pbr__next(&q, &f)) == 0) {
		for (int t = 0; t < _OT_MAX; t++) {
			if (f.number != table_fields[t])
				continue;
			if (f.wt != SR_PB_LEN)
				return otlp_fail(d, GW_OTLP_DECODE_INVALID, f.start,
						 "dictionary.%s[%u]: wire type %u, not a message", table_names[t],
						 d->n[t], f.wt);
			if (d->n[t] >= table_limit(d, t))
				return otlp_fail(d, GW_OTLP_DECODE_TOO_LARGE, f.start,
						 "dictionary.%s has more than %u entries (max_%s)", table_names[t],
						 table_limit(d, t),
						 t == OT_ATTRIBUTE  ? "attributes"
						 : t == OT_STRING   ? "strings"
						 : t == OT_MAPPING  ? "mappings"
						 : t == OT_FUNCTION ? "functions"
						 : t == OT_LINK	    ? "links"
						 : t == OT_STACK    ? "stacks"
								    : "locations");
			d->n[t]++;
		}
	}
	if (e < 0)
		return otlp_fail(d, GW_OTLP_DECODE_INVALID, q.p, "dictionary: malformed field");
	for (int t = 0; t < _OT_MAX; t++) {
		if ((e = otlp_charge(d, (uint64_t)d->n[t] * entry_bytes[t], dict.p)) < 0)
			return e;
		if (!d->n[t])
			continue;
		d->entries[t] = malloc(d->n[t] * sizeof(*d->entries[t]));
		if (!d->entries[t])
			return otlp_nomem(d, "the dictionary");
	}
	d->strings = calloc(d->n[OT_STRING] + 1, sizeof(*d->strings));
	d->attrs = calloc(d->n[OT_ATTRIBUTE] + 1, sizeof(*d->attrs));
	d->mappings = calloc(d->n[OT_MAPPING] + 1, sizeof(*d->mappings));
	d->functions = calloc(d->n[OT_FUNCTION] + 1, sizeof(*d->functions));
	d->locations = calloc(d->n[OT_LOCATION] + 1, sizeof(*d->locations));
	d->stacks = calloc(d->n[OT_STACK] + 1, sizeof(*d->stacks));
	d->stack_done = calloc(d->n[OT_STACK] + 1, sizeof(*d->stack_done));
	if (!d->strings || !d->attrs || !d->mappings || !d->functions || !d->locations || !d->stacks || !d->stack_done)
		return otlp_nomem(d, "the dictionary");
	uint32_t k[_OT_MAX] = { 0 };
	q = sr_pbr__sub(&r, dict);
	while (sr_pbr__next(&q, &f) == 0)
		for (int t = 0; t < _OT_MAX; t++)
			if (f.number == table_fields[t])
				d->entries[t][k[t]++] = (struct sr_pb_slice){ f.data, f.len };
	return 0;
}

void otlp_dict_free(struct otlp_dec *d)
{
	for (uint32_t i = 0; d->mappings && i < d->n[OT_MAPPING]; i++)
		gw_executable__unref(d->mappings[i].exe);
	for (uint32_t i = 0; d->locations && i < d->n[OT_LOCATION]; i++)
		gw_location__unref(d->locations[i].l);
	for (uint32_t i = 0; d->stacks && i <= d->n[OT_STACK]; i++)
		gw_stack__unref(d->stacks[i]);
	for (int t = 0; t < _OT_MAX; t++)
		free(d->entries[t]);
	free(d->strings);
	free(d->attrs);
	free(d->mappings);
	free(d->functions);
	free(d->locations);
	free(d->stacks);
	free(d->stack_done);
}

/* Index i of table t, checked; 0 or -EBADMSG naming `what`. */
static int check_index(struct otlp_dec *d, enum otlp_table t, uint64_t i, const char *what, const uint8_t *at)
{
	if (i < d->n[t])
		return 0;
	return otlp_fail(d, GW_OTLP_DECODE_INVALID, at, "%s: %s index %" PRIu64 " is out of range (%s has %u entries)",
			 otlp_what(d, what), table_names[t], i, table_names[t], d->n[t]);
}

/* A reader of entry i of table t. */
static struct sr_pbr entry_reader(const struct otlp_dec *d, enum otlp_table t, uint32_t i)
{
	struct sr_pbr r = sr_pbr_of(d->base, d->len);
	return sr_pbr__sub(&r, d->entries[t][i]);
}

const char *otlp_batch_string(struct otlp_dec *d, struct sr_pb_slice s)
{
	size_t max = d->lim.max_string_bytes;
	char stackbuf[1024], *buf = stackbuf;
	const char *out;

	if (SR_MIN(s.n, max) >= sizeof(stackbuf)) {
		buf = malloc(SR_MIN(s.n, max) + 1);
		if (!buf)
			return NULL;
	}
	gw_utf8_copy(buf, s.p, s.n, max);
	out = gw_profiles__strdup(d->batch, buf);
	if (buf != stackbuf)
		free(buf);
	return out;
}

int otlp_dict_string(struct otlp_dec *d, uint64_t i, const char *what, const uint8_t *at, const char **ret)
{
	int e;

	if (i == 0) {
		*ret = "";
		return 0;
	}
	if ((e = check_index(d, OT_STRING, i, what, at)) < 0)
		return e;
	if (!d->strings[i]) {
		d->strings[i] = otlp_batch_string(d, d->entries[OT_STRING][i]);
		if (!d->strings[i])
			return otlp_nomem(d, "a string");
	}
	*ret = d->strings[i];
	return 0;
}

enum otlp_attr_role otlp_attr_role_of(const char *key)
{
	static const struct {
		const char *key;
		enum otlp_attr_role role;
	} roles[] = {
		{ "thread.id", OA_THREAD_ID },
		{ "thread.name", OA_THREAD_NAME },
		{ "process.pid", OA_PROCESS_PID },
		{ "profile.frame.type", OA_FRAME_TYPE },
		{ "process.executable.build_id.gnu", OA_BUILD_ID_GNU },
		{ "process.executable.build_id.htlhash", OA_BUILD_ID_HTLHASH },
	};
	for (size_t i = 0; i < SR_ARRAY_SIZE(roles); i++)
		if (strcmp(key, roles[i].key) == 0)
			return roles[i].role;
	return OA_PLAIN;
}

/* Walks an array or kvlist only to bound its nesting; its content is not kept. */
static int check_nesting(struct otlp_dec *d, struct sr_pbr r, unsigned depth, bool kvlist, const char *what)
{
	struct sr_pb_field f;
	int e;

	if (depth > d->lim.max_nesting)
		return otlp_fail(d, GW_OTLP_DECODE_TOO_LARGE, r.p, "%s: values nested deeper than %u (max_nesting)",
				 what, d->lim.max_nesting);
	while ((e = sr_pbr__next(&r, &f)) == 0) {
		struct sr_pbr v;
		struct sr_pb_field g;

		/* ArrayValue.values and KeyValueList.values are both field 1. */
		if (f.number != 1 || f.wt != SR_PB_LEN)
			continue;
		v = sr_pbr__sub(&r, (struct sr_pb_slice){ f.data, f.len });
		if (kvlist) {
			/* A KeyValue: its value (field 2) is an AnyValue. */
			struct sr_pbr kv = v;
			while ((e = sr_pbr__next(&kv, &g)) == 0)
				if (g.number == C(KeyValue, value) && g.wt == SR_PB_LEN)
					break;
			if (e < 0)
				return otlp_fail(d, GW_OTLP_DECODE_INVALID, kv.p, "%s: malformed KeyValue", what);
			if (e == 1)
				continue;
			v = sr_pbr__sub(&r, (struct sr_pb_slice){ g.data, g.len });
		}
		/* v reads an AnyValue: descend into its array or kvlist. */
		while ((e = sr_pbr__next(&v, &g)) == 0) {
			if (g.wt != SR_PB_LEN ||
			    (g.number != C(AnyValue, array_value) && g.number != C(AnyValue, kvlist_value)))
				continue;
			e = check_nesting(d, sr_pbr__sub(&v, (struct sr_pb_slice){ g.data, g.len }), depth + 1,
					  g.number == C(AnyValue, kvlist_value), what);
			if (e < 0)
				return e;
		}
		if (e < 0)
			return otlp_fail(d, GW_OTLP_DECODE_INVALID, v.p, "%s: malformed AnyValue", what);
	}
	if (e < 0)
		return otlp_fail(d, GW_OTLP_DECODE_INVALID, r.p, "%s: malformed value list", what);
	return 0;
}

int otlp_any_value(struct otlp_dec *d, struct sr_pb_slice v, const char *what, struct gw_attr *a, bool *ret_usable)
{
	struct sr_pbr root = sr_pbr_of(d->base, d->len), r = sr_pbr__sub(&root, v);
	struct sr_pb_field f;
	bool usable = false;
	int e;

	while ((e = sr_pbr__next(&r, &f)) == 0) {
		switch (f.number) {
		case C(AnyValue, string_value):
			if (f.wt != SR_PB_LEN)
				goto bad;
			a->type = GW_ATTR_STRING;
			a->v.s = otlp_batch_string(d, (struct sr_pb_slice){ f.data, f.len });
			if (!a->v.s)
				return otlp_nomem(d, what);
			usable = true;
			break;
		case C(AnyValue, bool_value):
			if (f.wt != SR_PB_VARINT)
				goto bad;
			a->type = GW_ATTR_BOOL;
			a->v.b = f.value != 0;
			usable = true;
			break;
		case C(AnyValue, int_value):
			if (f.wt != SR_PB_VARINT)
				goto bad;
			a->type = GW_ATTR_INT;
			a->v.i = (int64_t)f.value;
			usable = true;
			break;
		case C(AnyValue, double_value):
			if (f.wt != SR_PB_I64)
				goto bad;
			a->type = GW_ATTR_DOUBLE;
			memcpy(&a->v.d, &f.value, sizeof(a->v.d));
			usable = true;
			break;
		case C(AnyValue, array_value):
		case C(AnyValue, kvlist_value):
			if (f.wt != SR_PB_LEN)
				goto bad;
			e = check_nesting(d, sr_pbr__sub(&r, (struct sr_pb_slice){ f.data, f.len }), 1,
					  f.number == C(AnyValue, kvlist_value), what);
			if (e < 0)
				return e;
			usable = false; /* the last member of a oneof wins */
			break;
		case C(AnyValue, bytes_value):
			if (f.wt != SR_PB_LEN)
				goto bad;
			usable = false;
			break;
		default:
			break; /* unknown members: ignored, as protobuf does */
		}
	}
	if (e < 0)
		return otlp_fail(d, GW_OTLP_DECODE_INVALID, r.p, "%s: malformed AnyValue", what);
	*ret_usable = usable;
	return 0;
bad:
	return otlp_fail(d, GW_OTLP_DECODE_INVALID, f.start, "%s: AnyValue member %u has wire type %u", what, f.number,
			 f.wt);
}

int otlp_dict_attr(struct otlp_dec *d, uint64_t i, const char *what, const uint8_t *at, const struct otlp_attr **ret)
{
	struct otlp_attr *x;
	struct sr_pbr r;
	struct sr_pb_field f;
	char path[64];
	int e;

	if ((e = check_index(d, OT_ATTRIBUTE, i, what, at)) < 0)
		return e;
	x = &d->attrs[i];
	*ret = x;
	if (x->done || i == 0) {
		x->done = true;
		return 0;
	}
	snprintf(path, sizeof(path), "dictionary.attribute_table[%" PRIu64 "]", i);
	r = entry_reader(d, OT_ATTRIBUTE, (uint32_t)i);
	x->a.key = "";
	while ((e = sr_pbr__next(&r, &f)) == 0) {
		if (f.number == P(KeyValueAndUnit, key_strindex)) {
			if (f.wt != SR_PB_VARINT)
				return otlp_fail(d, GW_OTLP_DECODE_INVALID, f.start, "%s.key_strindex: not a varint",
						 path);
			if ((e = otlp_dict_string(d, f.value, path, f.start, &x->a.key)) < 0)
				return e;
		} else if (f.number == P(KeyValueAndUnit, value)) {
			if (f.wt != SR_PB_LEN)
				return otlp_fail(d, GW_OTLP_DECODE_INVALID, f.start, "%s.value: not a message", path);
			if ((e = otlp_any_value(d, (struct sr_pb_slice){ f.data, f.len }, path, &x->a, &x->usable)) < 0)
				return e;
		} else if (f.number == P(KeyValueAndUnit, unit_strindex)) {
			const char *unit;
			if (f.wt != SR_PB_VARINT)
				return otlp_fail(d, GW_OTLP_DECODE_INVALID, f.start, "%s.unit_strindex: not a varint",
						 path);
			if ((e = otlp_dict_string(d, f.value, path, f.start, &unit)) < 0)
				return e;
		}
	}
	if (e < 0)
		return otlp_fail(d, GW_OTLP_DECODE_INVALID, r.p, "%s: malformed field", path);
	if (!x->a.key[0])
		x->usable = false;
	x->role = otlp_attr_role_of(x->a.key);
	x->done = true;
	return 0;
}

/* Reads packed or unpacked int32 indices of field f into a checked list of attributes; calls fn for each. */
static int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* A hex build ID into bytes; false when it is not even-length hex of 1 to GW_ID_MAX bytes. */
static bool parse_hex_id(const char *s, uint8_t *out, size_t *ret_len)
{
	size_t n = strlen(s);

	if (n == 0 || n % 2 || n / 2 > GW_ID_MAX)
		return false;
	for (size_t i = 0; i < n; i += 2) {
		int hi = hex_value(s[i]), lo = hex_value(s[i + 1]);
		if (hi < 0 || lo < 0)
			return false;
		out[i / 2] = (uint8_t)(hi << 4 | lo);
	}
	*ret_len = n / 2;
	return true;
}

static int decode_mapping(struct otlp_dec *d, uint32_t i, const struct otlp_mapping **ret)
{
	struct otlp_mapping *m = &d->mappings[i];
	uint8_t gnu[GW_ID_MAX], htl[GW_ID_MAX];
	size_t gnu_len = 0, htl_len = 0;
	uint32_t n_attrs = 0;
	struct sr_pbr r;
	struct sr_pb_field f;
	char path[64];
	int e;

	*ret = m;
	if (m->done)
		return 0;
	m->filename = "";
	if (i == 0) {
		m->done = true;
		return 0;
	}
	snprintf(path, sizeof(path), "dictionary.mapping_table[%u]", i);
	r = entry_reader(d, OT_MAPPING, i);
	while ((e = sr_pbr__next(&r, &f)) == 0) {
		if (f.number == P(Mapping, filename_strindex)) {
			if (f.wt != SR_PB_VARINT)
				return otlp_fail(d, GW_OTLP_DECODE_INVALID, f.start,
						 "%s.filename_strindex: not a varint", path);
			if ((e = otlp_dict_string(d, f.value, path, f.start, &m->filename)) < 0)
				return e;
		} else if (f.number == P(Mapping, attribute_indices)) {
			struct sr_pbr el;
			uint64_t v;
			if (sr_pbr__elements(&r, &f, SR_PB_VARINT, &el) < 0)
				return otlp_fail(d, GW_OTLP_DECODE_INVALID, f.start, "%s.attribute_indices: malformed",
						 path);
			while (sr_pbr__more(&el)) {
				const struct otlp_attr *a;
				const uint8_t *at = el.p;
				if (sr_pbr__varint(&el, &v) < 0)
					return otlp_fail(d, GW_OTLP_DECODE_INVALID, at,
							 "%s.attribute_indices: malformed varint", path);
				if (++n_attrs > d->lim.max_attrs)
					return otlp_fail(d, GW_OTLP_DECODE_TOO_LARGE, at,
							 "%s: more than %u attributes (max_attrs)", path,
							 d->lim.max_attrs);
				if ((e = otlp_dict_attr(d, v, path, at, &a)) < 0)
					return e;
				if (!a->usable || a->a.type != GW_ATTR_STRING)
					continue;
				/* A build ID that is not hex is ignored: the mapping is then like one without. */
				if (a->role == OA_BUILD_ID_GNU && !parse_hex_id(a->a.v.s, gnu, &gnu_len))
					gnu_len = 0;
				else if (a->role == OA_BUILD_ID_HTLHASH && !parse_hex_id(a->a.v.s, htl, &htl_len))
					htl_len = 0;
			}
		} else if (f.number == P(Mapping, memory_start) || f.number == P(Mapping, memory_limit) ||
			   f.number == P(Mapping, file_offset)) {
			if (f.wt != SR_PB_VARINT)
				return otlp_fail(d, GW_OTLP_DECODE_INVALID, f.start, "%s: field %u is not a varint",
						 path, f.number);
		}
	}
	if (e < 0)
		return otlp_fail(d, GW_OTLP_DECODE_INVALID, r.p, "%s: malformed field", path);
	if (gnu_len || htl_len) {
		const char *base = strrchr(m->filename, '/');
		struct gw_executable_def def = {
			.id = gnu_len ? gnu : htl,
			.id_len = gnu_len ? gnu_len : htl_len,
			.id_kind = gnu_len ? GW_EXE_ID_GNU_BUILD_ID : GW_EXE_ID_CONTENT_HASH,
			.file_name = base ? base + 1 : m->filename,
			.path = m->filename,
			.gnu_build_id = gnu_len ? gnu : NULL,
			.gnu_build_id_len = gnu_len,
		};
		m->exe = gw_stores__intern_executable(d->stores, &def);
		if (!m->exe)
			return otlp_nomem(d, path);
	}
	m->done = true;
	return 0;
}

static int decode_function(struct otlp_dec *d, uint64_t i, const char *what, const uint8_t *at,
			   const struct otlp_function **ret)
{
	struct otlp_function *fn;
	struct sr_pbr r;
	struct sr_pb_field f;
	char path[64];
	int e;

	if ((e = check_index(d, OT_FUNCTION, i, what, at)) < 0)
		return e;
	fn = &d->functions[i];
	*ret = fn;
	if (fn->done)
		return 0;
	fn->name = fn->system_name = fn->file = "";
	fn->done = true;
	if (i == 0)
		return 0;
	snprintf(path, sizeof(path), "dictionary.function_table[%" PRIu64 "]", i);
	r = entry_reader(d, OT_FUNCTION, (uint32_t)i);
	while ((e = sr_pbr__next(&r, &f)) == 0) {
		const char **dst = f.number == P(Function, name_strindex)	   ? &fn->name
				   : f.number == P(Function, system_name_strindex) ? &fn->system_name
				   : f.number == P(Function, filename_strindex)	   ? &fn->file
										   : NULL;
		if (!dst && f.number != P(Function, start_line))
			continue;
		if (f.wt != SR_PB_VARINT) {
			fn->done = false;
			return otlp_fail(d, GW_OTLP_DECODE_INVALID, f.start, "%s: field %u is not a varint", path,
					 f.number);
		}
		if (!dst) {
			fn->start_line = f.value > UINT32_MAX ? 0 : (uint32_t)f.value;
		} else if ((e = otlp_dict_string(d, f.value, path, f.start, dst)) < 0) {
			fn->done = false;
			return e;
		}
	}
	if (e < 0) {
		fn->done = false;
		return otlp_fail(d, GW_OTLP_DECODE_INVALID, r.p, "%s: malformed field", path);
	}
	return 0;
}

/* What a frame type makes of a location. */
enum frame_class { FC_NATIVE, FC_KERNEL, FC_INTERPRETED };

static enum frame_class frame_class_of(const char *type)
{
	if (!type || !*type || strcmp(type, "native") == 0 || strcmp(type, "go") == 0)
		return FC_NATIVE;
	if (strcmp(type, "kernel") == 0)
		return FC_KERNEL;
	return FC_INTERPRETED;
}

/* Chains s into h, with its terminator. */
static uint64_t hash_str(uint64_t h, const char *s)
{
	return XXH3_64bits_withSeed(s, strlen(s) + 1, h);
}

/*
 * Reads location i: its content hash, and (intern) the gw_location. Stacks
 * first ask only for hashes: a stack already in the store is found by its ID
 * without interning its locations.
 */
static int decode_location(struct otlp_dec *d, uint64_t i, const char *what, const uint8_t *at, bool intern,
			   const struct otlp_location **ret)
{
	const int saved_table = d->ctx_table;
	const uint64_t saved_index = d->ctx_index;
	struct gw_line lines[GW_OTLP_DEFAULT_MAX_LINES];
	struct gw_line *lv = lines;
	uint32_t n_lines = 0, n_attrs = 0;
	const struct otlp_mapping *m = NULL;
	const char *frame_type = NULL;
	uint64_t address = 0;
	struct otlp_location *loc;
	struct gw_location *l = NULL;
	struct sr_pbr r;
	struct sr_pb_field f;
	char fallback[160];
	uint64_t h[2];
	bool preset;
	struct gw_executable *exe;
	enum frame_class fc;
	int e;

	if ((e = check_index(d, OT_LOCATION, i, what, at)) < 0)
		return e;
	loc = &d->locations[i];
	*ret = loc;
	if (intern ? loc->l != NULL : loc->hashed)
		return 0;
	if (d->lim.max_lines > SR_ARRAY_SIZE(lines)) {
		lv = malloc(d->lim.max_lines * sizeof(*lv));
		if (!lv)
			return otlp_nomem(d, "a location");
	}
	d->ctx_table = OT_LOCATION;
	d->ctx_index = i;
	r = entry_reader(d, OT_LOCATION, (uint32_t)i);
	while ((e = sr_pbr__next(&r, &f)) == 0) {
		if (f.number == P(Location, mapping_index)) {
			if (f.wt != SR_PB_VARINT) {
				e = otlp_fail(d, GW_OTLP_DECODE_INVALID, f.start, "%s.mapping_index: not a varint",
					      otlp_what(d, NULL));
				goto out;
			}
			if ((e = check_index(d, OT_MAPPING, f.value, NULL, f.start)) < 0 ||
			    (e = decode_mapping(d, (uint32_t)f.value, &m)) < 0)
				goto out;
		} else if (f.number == P(Location, address)) {
			if (f.wt != SR_PB_VARINT) {
				e = otlp_fail(d, GW_OTLP_DECODE_INVALID, f.start, "%s.address: not a varint",
					      otlp_what(d, NULL));
				goto out;
			}
			address = f.value;
		} else if (f.number == P(Location, lines)) {
			struct sr_pbr lr;
			struct sr_pb_field g;
			const struct otlp_function *fn = NULL;
			int64_t line = 0, column = 0;

			if (f.wt != SR_PB_LEN) {
				e = otlp_fail(d, GW_OTLP_DECODE_INVALID, f.start, "%s.lines[%u]: not a message",
					      otlp_what(d, NULL), n_lines);
				goto out;
			}
			if (n_lines >= d->lim.max_lines) {
				e = otlp_fail(d, GW_OTLP_DECODE_TOO_LARGE, f.start,
					      "%s: more than %u lines (max_lines)", otlp_what(d, NULL),
					      d->lim.max_lines);
				goto out;
			}
			lr = sr_pbr__sub(&r, (struct sr_pb_slice){ f.data, f.len });
			while ((e = sr_pbr__next(&lr, &g)) == 0) {
				if (g.number != P(Line, function_index) && g.number != P(Line, line) &&
				    g.number != P(Line, column))
					continue;
				if (g.wt != SR_PB_VARINT) {
					e = otlp_fail(d, GW_OTLP_DECODE_INVALID, g.start,
						      "%s.lines[%u]: field %u is not a varint", otlp_what(d, NULL),
						      n_lines, g.number);
					goto out;
				}
				if (g.number == P(Line, function_index))
					e = decode_function(d, g.value, NULL, g.start, &fn);
				else if (g.number == P(Line, line))
					line = (int64_t)g.value;
				else
					column = (int64_t)g.value;
				if (e < 0)
					goto out;
			}
			if (e < 0) {
				e = otlp_fail(d, GW_OTLP_DECODE_INVALID, lr.p, "%s.lines[%u]: malformed field",
					      otlp_what(d, NULL), n_lines);
				goto out;
			}
			if (!fn && (e = decode_function(d, 0, NULL, f.start, &fn)) < 0)
				goto out;
			lv[n_lines++] = (struct gw_line){
				.function = fn->name,
				/* The model keeps "" when the linkage name is the display name. */
				.system_name = strcmp(fn->system_name, fn->name) == 0 ? "" : fn->system_name,
				.file = fn->file,
				.line = line < 0 || line > UINT32_MAX ? 0 : (uint32_t)line,
				.column = column < 0 || column > UINT32_MAX ? 0 : (uint32_t)column,
				.start_line = fn->start_line,
			};
		} else if (f.number == P(Location, attribute_indices)) {
			struct sr_pbr el;
			uint64_t v;
			if (sr_pbr__elements(&r, &f, SR_PB_VARINT, &el) < 0) {
				e = otlp_fail(d, GW_OTLP_DECODE_INVALID, f.start, "%s.attribute_indices: malformed",
					      otlp_what(d, NULL));
				goto out;
			}
			while (sr_pbr__more(&el)) {
				const struct otlp_attr *a;
				const uint8_t *vat = el.p;
				if (sr_pbr__varint(&el, &v) < 0) {
					e = otlp_fail(d, GW_OTLP_DECODE_INVALID, vat,
						      "%s.attribute_indices: malformed varint", otlp_what(d, NULL));
					goto out;
				}
				if (++n_attrs > d->lim.max_attrs) {
					e = otlp_fail(d, GW_OTLP_DECODE_TOO_LARGE, vat,
						      "%s: more than %u attributes (max_attrs)", otlp_what(d, NULL),
						      d->lim.max_attrs);
					goto out;
				}
				if ((e = otlp_dict_attr(d, v, NULL, vat, &a)) < 0)
					goto out;
				if (a->usable && a->role == OA_FRAME_TYPE && a->a.type == GW_ATTR_STRING)
					frame_type = a->a.v.s;
			}
		}
	}
	if (e < 0) {
		e = otlp_fail(d, GW_OTLP_DECODE_INVALID, r.p, "%s: malformed field", otlp_what(d, NULL));
		goto out;
	}
	e = 0;
	fc = frame_class_of(frame_type);
	/* A native frame on a mapping with a build ID is the symbolize processor's; anything else is preset. */
	exe = fc == FC_NATIVE && m ? m->exe : NULL;
	preset = !(exe && n_lines == 0);
	if (preset && n_lines == 0 && fc != FC_INTERPRETED) {
		/* Nothing can name it later: a native frame without a build ID, a kernel frame without a name. */
		const char *base = m ? strrchr(m->filename, '/') : NULL;
		const char *file = base ? base + 1 : m ? m->filename : "";
		if (fc == FC_KERNEL)
			snprintf(fallback, sizeof(fallback), "[%.64s]+0x%" PRIx64, *file ? file : "kernel", address);
		else
			snprintf(fallback, sizeof(fallback), "%.128s+0x%" PRIx64, *file ? file : "[unknown]", address);
		lv[n_lines++] = (struct gw_line){ .function = fallback, .system_name = "", .file = "" };
	}
	if (!loc->hashed) {
		/* Kind, address, executable ID, and the lines when they are part of its identity; two seeds: 128 bits. */
		for (int k = 0; k < 2; k++) {
			const uint64_t head[3] = { exe ? GW_FRAME_USER : GW_FRAME_UNKNOWN, address, preset };
			h[k] = XXH3_64bits_withSeed(head, sizeof(head), 0x6f746c70u + (uint64_t)k);
			if (exe)
				h[k] = XXH3_64bits_withSeed(exe->id.bytes, exe->id.len, h[k]);
			for (uint32_t j = 0; preset && j < n_lines; j++) {
				const uint64_t nums[3] = { lv[j].line, lv[j].column, lv[j].start_line };
				h[k] = XXH3_64bits_withSeed(nums, sizeof(nums), h[k]);
				h[k] = hash_str(h[k], lv[j].function);
				h[k] = hash_str(h[k], lv[j].system_name ? lv[j].system_name : "");
				h[k] = hash_str(h[k], lv[j].file ? lv[j].file : "");
			}
			loc->hash[k] = h[k];
		}
		loc->hashed = true;
	}
	if (!intern)
		goto out;
	if (preset)
		l = gw_stores__intern_location_lines(d->stores, exe ? GW_FRAME_USER : GW_FRAME_UNKNOWN, address, exe,
						     NULL, lv, n_lines);
	else
		l = gw_stores__intern_location(d->stores, GW_FRAME_USER, address, exe, NULL);
	if (!l) {
		e = otlp_nomem(d, "a location");
		goto out;
	}
	loc->l = l;
out:
	d->ctx_table = saved_table;
	d->ctx_index = saved_index;
	if (lv != lines)
		free(lv);
	return e;
}

/* Calls fn on each location index of stack entry r (validated, bounded by max_stack_depth). */
static int stack_walk(struct otlp_dec *d, struct sr_pbr r, bool intern, struct gw_location **locs, uint64_t *hashes,
		      uint32_t *ret_n)
{
	struct sr_pb_field f;
	uint32_t n = 0;
	int e = 0;

	while (r.p && (e = sr_pbr__next(&r, &f)) == 0) {
		struct sr_pbr el;
		uint64_t v;
		if (f.number != P(Stack, location_indices))
			continue;
		if (sr_pbr__elements(&r, &f, SR_PB_VARINT, &el) < 0)
			return otlp_fail(d, GW_OTLP_DECODE_INVALID, f.start, "%s.location_indices: malformed",
					 otlp_what(d, NULL));
		while (sr_pbr__more(&el)) {
			const struct otlp_location *loc;
			const uint8_t *vat = el.p;
			if (sr_pbr__varint(&el, &v) < 0)
				return otlp_fail(d, GW_OTLP_DECODE_INVALID, vat,
						 "%s.location_indices: malformed varint", otlp_what(d, NULL));
			if (n >= d->lim.max_stack_depth)
				return otlp_fail(d, GW_OTLP_DECODE_TOO_LARGE, vat,
						 "%s: more than %u locations (max_stack_depth)", otlp_what(d, NULL),
						 d->lim.max_stack_depth);
			if ((e = decode_location(d, v, NULL, vat, intern, &loc)) < 0)
				return e;
			if (intern) {
				locs[n++] = gw_location__ref(loc->l);
			} else {
				hashes[2 * n] = loc->hash[0];
				hashes[2 * n + 1] = loc->hash[1];
				n++;
			}
		}
	}
	if (e < 0)
		return otlp_fail(d, GW_OTLP_DECODE_INVALID, r.p, "%s: malformed field", otlp_what(d, NULL));
	*ret_n = n;
	return 0;
}

int otlp_dict_stack(struct otlp_dec *d, uint64_t i, const char *what, const uint8_t *at, struct gw_stack **ret)
{
	const int saved_table = d->ctx_table;
	const uint64_t saved_index = d->ctx_index;
	struct gw_location **locs = NULL;
	uint64_t *hashes = NULL;
	uint32_t n = 0, n_locs = 0;
	uint8_t id[OTLP_STACK_ID_LEN];
	struct sr_pbr r = { 0 };
	int e = 0;

	if (i != 0 || d->n[OT_STACK]) {
		if ((e = check_index(d, OT_STACK, i, what, at)) < 0)
			return e;
		r = entry_reader(d, OT_STACK, (uint32_t)i);
	}
	if (d->stack_done[i]) {
		*ret = gw_stack__ref(d->stacks[i]);
		return 0;
	}
	d->ctx_table = OT_STACK;
	d->ctx_index = i;
	hashes = malloc(2 * sizeof(*hashes) * d->lim.max_stack_depth);
	if (!hashes) {
		e = otlp_nomem(d, "a stack");
		goto out;
	}
	/* The ID from the locations' content; a stack already stored needs nothing interned. */
	if ((e = stack_walk(d, r, false, NULL, hashes, &n)) < 0)
		goto out;
	XXH128_hash_t h = XXH3_128bits(hashes, n * 2 * sizeof(uint64_t));
	id[0] = OTLP_STACK_ID_TAG;
	memcpy(id + 1, &h.low64, 8);
	memcpy(id + 9, &h.high64, 8);
	d->stacks[i] = gw_stores__stack(d->stores, id, sizeof(id));
	if (!d->stacks[i]) {
		locs = malloc(sizeof(*locs) * (n ? n : 1));
		if (!locs) {
			e = otlp_nomem(d, "a stack");
			goto out;
		}
		if ((e = stack_walk(d, r, true, locs, NULL, &n_locs)) < 0)
			goto out;
		/* intern_stack takes the location references, also on failure. */
		d->stacks[i] = gw_stores__intern_stack(d->stores, id, sizeof(id), false, locs, n_locs);
		n_locs = 0;
		if (!d->stacks[i]) {
			e = otlp_nomem(d, "a stack");
			goto out;
		}
	}
	d->stack_done[i] = true;
	*ret = gw_stack__ref(d->stacks[i]);
	e = 0;
out:
	d->ctx_table = saved_table;
	d->ctx_index = saved_index;
	for (uint32_t k = 0; k < n_locs; k++)
		gw_location__unref(locs[k]);
	free(locs);
	free(hashes);
	return e;
}

static const char *hex_string(struct otlp_dec *d, const uint8_t *p, size_t n)
{
	char buf[2 * 32 + 1];

	n = SR_MIN(n, (size_t)32);
	for (size_t i = 0; i < n; i++)
		snprintf(buf + 2 * i, 3, "%02x", p[i]);
	buf[2 * n] = '\0';
	return gw_profiles__strdup(d->batch, buf);
}

int otlp_dict_link(struct otlp_dec *d, uint64_t i, const char *what, const uint8_t *at, bool *ret_has,
		   const char **ret_trace, const char **ret_span)
{
	struct sr_pb_slice trace = { 0 }, span = { 0 };
	struct sr_pbr r;
	struct sr_pb_field f;
	int e;

	*ret_has = false;
	if (i == 0)
		return 0;
	if ((e = check_index(d, OT_LINK, i, what, at)) < 0)
		return e;
	r = entry_reader(d, OT_LINK, (uint32_t)i);
	while ((e = sr_pbr__next(&r, &f)) == 0) {
		if (f.number != P(Link, trace_id) && f.number != P(Link, span_id))
			continue;
		if (f.wt != SR_PB_LEN)
			return otlp_fail(d, GW_OTLP_DECODE_INVALID, f.start,
					 "dictionary.link_table[%" PRIu64 "]: field %u is not bytes", i, f.number);
		if (f.number == P(Link, trace_id))
			trace = (struct sr_pb_slice){ f.data, f.len };
		else
			span = (struct sr_pb_slice){ f.data, f.len };
	}
	if (e < 0)
		return otlp_fail(d, GW_OTLP_DECODE_INVALID, r.p, "dictionary.link_table[%" PRIu64 "]: malformed field",
				 i);
	if ((trace.n && trace.n != 16) || (span.n && span.n != 8))
		return otlp_fail(d, GW_OTLP_DECODE_INVALID, d->entries[OT_LINK][i].p,
				 "dictionary.link_table[%" PRIu64 "]: trace_id must be 16 bytes and span_id 8", i);
	if (!trace.n && !span.n)
		return 0;
	*ret_has = true;
	if (ret_trace) {
		*ret_trace = hex_string(d, trace.p, trace.n);
		*ret_span = hex_string(d, span.p, span.n);
		if (!*ret_trace || !*ret_span)
			return otlp_nomem(d, "a link");
	}
	return 0;
}
