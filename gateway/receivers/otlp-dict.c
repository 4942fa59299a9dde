// SPDX-License-Identifier: Apache-2.0
/*
 * The ProfilesDictionary of an OTLP profiles request (otlp-decode-private.h):
 * one pass records every table entry as a slice of the request (tables
 * bounded by the limits), then entries are decoded on first use and kept,
 * so a location shared by a thousand stacks is decoded and interned once.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/model.h"
#include "common/macro.h"
#include "otlp-decode-private.h"
#include "common/pbwire.h"
#include "common/utf8.h"

#include "opentelemetry/proto/common/v1/common.pb.h"
#include "opentelemetry/proto/profiles/v1development/profiles.pb.h"

#define P(m, f) opentelemetry_proto_profiles_v1development_##m##_##f##_tag
#define C(m, f) opentelemetry_proto_common_v1_##m##_##f##_tag

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

int otlp_check_index(struct otlp_dec *d, enum otlp_table t, uint64_t i, const char *what, const uint8_t *at)
{
	if (i < d->n[t])
		return 0;
	return otlp_fail(d, GW_OTLP_DECODE_INVALID, at, "%s: %s index %" PRIu64 " is out of range (%s has %u entries)",
			 otlp_what(d, what), table_names[t], i, table_names[t], d->n[t]);
}

struct sr_pbr otlp_entry_reader(const struct otlp_dec *d, enum otlp_table t, uint32_t i)
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
	sr_utf8_copy(buf, s.p, s.n, max);
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
	if ((e = otlp_check_index(d, OT_STRING, i, what, at)) < 0)
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

	if ((e = otlp_check_index(d, OT_ATTRIBUTE, i, what, at)) < 0)
		return e;
	x = &d->attrs[i];
	*ret = x;
	if (x->done || i == 0) {
		x->done = true;
		return 0;
	}
	snprintf(path, sizeof(path), "dictionary.attribute_table[%" PRIu64 "]", i);
	r = otlp_entry_reader(d, OT_ATTRIBUTE, (uint32_t)i);
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
	if ((e = otlp_check_index(d, OT_LINK, i, what, at)) < 0)
		return e;
	r = otlp_entry_reader(d, OT_LINK, (uint32_t)i);
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
