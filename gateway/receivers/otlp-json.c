/* SPDX-License-Identifier: Apache-2.0 */
/*
 * OTLP/JSON to protobuf (otlp-json.h): the walker. It reads the JSON against
 * the message tables of otlp-json-schema.c with the scanner of
 * otlp-json-scan.c and writes each field as soon as its value is read.
 * Nested messages go through sr_pbw__begin/end, whose length fix-up is what
 * lets one pass suffice.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/macro.h"
#include "otlp-json-private.h"
#include "otlp-json.h"
#include "common/pbwire.h"

static int push(struct gw_oj_ctx *c, const char *name, size_t len)
{
	/* Every level of nesting pushes at most a name and an index, and depth is checked first. */
	c->path[c->npath++] = (struct gw_oj_seg){ .name = name, .len = len };
	return 0;
}

/*
 * A string or bytes value, written as field `number` (always when
 * `always`, as repeated and oneof members must be; else only when not empty).
 */
static int string_field(struct gw_oj_ctx *c, const struct gw_oj_field *f, bool always)
{
	size_t mark0 = c->w->len, mark = sr_pbw__begin(c->w, f->number), at, n;
	const uint8_t *start = c->p;
	int r = gw_oj_string(c, &at);
	long m;

	if (r < 0)
		return r;
	if (sr_pbw__error(c->w))
		return gw_oj_out_check(c, start);
	n = c->w->len - at;
	if (f->type != J_STRING) {
		uint8_t *b = c->w->buf + at;
		bool hex = f->type == J_HEX;

		if (f->type == J_ID) {
			hex = n == 32;
			for (size_t i = 0; hex && i < n; i++)
				hex = sr_hex_value(b[i]) >= 0;
		}
		m = hex ? gw_oj_hex_decode(b, n) : gw_oj_base64_decode(b, n);
		if (m < 0)
			return gw_oj_fail(c, -EBADMSG, start, "\"%.*s\" is not %s", (int)(n > 40 ? 40 : n), b,
					  hex ? "hex (an even number of hex digits)" : "base64");
		c->w->len = at + (size_t)m;
		n = (size_t)m;
	}
	if (n == 0 && !always)
		c->w->len = mark0;
	else
		sr_pbw__end(c->w, mark);
	return gw_oj_out_check(c, start);
}

static int value_any(struct gw_oj_ctx *c);

/* Skips `"key": value` pairs' values and array elements of unknown fields, validating them. */
static int skip_object_or_array(struct gw_oj_ctx *c, bool object)
{
	const uint8_t *open = c->p;
	size_t count = 0;
	int r;

	if (++c->depth > c->lim.max_depth)
		return gw_oj_fail(c, -EMSGSIZE, open, "nesting deeper than %u", c->lim.max_depth);
	c->p++;
	gw_oj_skip_ws(c);
	if (c->p < c->end && *c->p == (object ? '}' : ']')) {
		c->p++;
		c->depth--;
		return 0;
	}
	for (;;) {
		gw_oj_skip_ws(c);
		if (object) {
			size_t at;

			if ((r = gw_oj_string(c, &at)) < 0)
				return r;
			c->w->len = at;
			gw_oj_skip_ws(c);
			if (c->p >= c->end || *c->p != ':')
				return gw_oj_fail(c, -EBADMSG, c->p, "expected ':' after a member name");
			c->p++;
			gw_oj_skip_ws(c);
		} else if (++count > c->lim.max_array_elements) {
			return gw_oj_fail(c, -EMSGSIZE, c->p, "more than %zu array elements",
					  c->lim.max_array_elements);
		}
		if ((r = value_any(c)) < 0)
			return r;
		gw_oj_skip_ws(c);
		if (c->p < c->end && *c->p == ',') {
			c->p++;
			continue;
		}
		if (c->p < c->end && *c->p == (object ? '}' : ']')) {
			c->p++;
			c->depth--;
			return 0;
		}
		return gw_oj_fail(c, -EBADMSG, c->p, "expected ',' or '%c', got %s", object ? '}' : ']',
				  gw_oj_what_is(c, c->p));
	}
}

/* Any JSON value, checked and dropped (unknown fields). */
static int value_any(struct gw_oj_ctx *c)
{
	const uint8_t *s;
	size_t n;

	if (c->p >= c->end)
		return gw_oj_fail(c, -EBADMSG, c->p, "expected a value, got the end of the input");
	switch (*c->p) {
	case '{':
	case '[':
		return skip_object_or_array(c, *c->p == '{');
	case '"': {
		size_t at;
		int r = gw_oj_string(c, &at);

		c->w->len = at;
		return r;
	}
	case 't':
		return gw_oj_literal(c, "true");
	case 'f':
		return gw_oj_literal(c, "false");
	case 'n':
		return gw_oj_literal(c, "null");
	case '-':
	case '0' ... '9':
		return gw_oj_number_span(c, &s, &n);
	default:
		return gw_oj_fail(c, -EBADMSG, c->p, "expected a value, got %s", gw_oj_what_is(c, c->p));
	}
}

static int message(struct gw_oj_ctx *c, const struct gw_oj_msg *m);

/* One value of field f (an element when f is repeated), written as it is read. */
static int element(struct gw_oj_ctx *c, const struct gw_oj_field *f, bool always, bool packed)
{
	const uint8_t *at = c->p;
	uint64_t v = 0;
	size_t mark;
	int r;

	switch (f->type) {
	case J_MESSAGE:
		if (c->p >= c->end || *c->p != '{')
			return gw_oj_fail(c, -EBADMSG, c->p, "expected an object (%s), got %s", f->msg->name,
					  gw_oj_what_is(c, c->p));
		mark = sr_pbw__begin(c->w, f->number);
		if ((r = message(c, f->msg)) < 0)
			return r;
		sr_pbw__end(c->w, mark);
		return gw_oj_out_check(c, at);
	case J_STRING:
	case J_BYTES:
	case J_HEX:
	case J_ID:
		return string_field(c, f, always);
	case J_BOOL:
		if (c->p < c->end && *c->p == 't')
			r = gw_oj_literal(c, "true"), v = 1;
		else if (c->p < c->end && *c->p == 'f')
			r = gw_oj_literal(c, "false");
		else
			return gw_oj_fail(c, -EBADMSG, c->p, "expected true or false, got %s", gw_oj_what_is(c, c->p));
		if (r < 0)
			return r;
		break;
	default:
		if ((r = gw_oj_numeric(c, f->type, &v)) < 0)
			return r;
	}
	if (packed) {
		if (f->type == J_FIXED64 || f->type == J_DOUBLE)
			sr_pbw__put_fixed64(c->w, v);
		else
			sr_pbw__varint(c->w, v);
	} else if (v != 0 || always) {
		if (f->type == J_FIXED64 || f->type == J_DOUBLE) {
			sr_pbw__tag(c->w, f->number, SR_PB_I64);
			sr_pbw__put_fixed64(c->w, v);
		} else {
			sr_pbw__tag(c->w, f->number, SR_PB_VARINT);
			sr_pbw__varint(c->w, v);
		}
	}
	return gw_oj_out_check(c, at);
}

/* A repeated field's array: messages and strings one field each, numbers packed into one. */
static int array(struct gw_oj_ctx *c, const struct gw_oj_field *f)
{
	bool packed = f->type >= J_BOOL && f->type != J_MESSAGE;
	const uint8_t *at = c->p;
	size_t mark0 = c->w->len, mark = 0, count = 0;
	unsigned np = c->npath;
	int r;

	if (c->p >= c->end || *c->p != '[')
		return gw_oj_fail(c, -EBADMSG, c->p, "expected an array, got %s", gw_oj_what_is(c, c->p));
	if (++c->depth > c->lim.max_depth)
		return gw_oj_fail(c, -EMSGSIZE, c->p, "nesting deeper than %u", c->lim.max_depth);
	c->p++;
	if (packed)
		mark = sr_pbw__begin(c->w, f->number);
	c->path[c->npath++] = (struct gw_oj_seg){ .index = 0 };
	gw_oj_skip_ws(c);
	if (c->p < c->end && *c->p == ']') {
		c->p++;
	} else {
		for (;;) {
			gw_oj_skip_ws(c);
			c->path[np].index = count;
			if (++count > c->lim.max_array_elements)
				return gw_oj_fail(c, -EMSGSIZE, c->p, "more than %zu array elements",
						  c->lim.max_array_elements);
			if (c->p < c->end && *c->p == 'n')
				return gw_oj_fail(c, -EBADMSG, c->p, "null is not a valid array element");
			if ((r = element(c, f, true, packed)) < 0)
				return r;
			gw_oj_skip_ws(c);
			if (c->p < c->end && *c->p == ',') {
				c->p++;
				continue;
			}
			if (c->p < c->end && *c->p == ']') {
				c->p++;
				break;
			}
			return gw_oj_fail(c, -EBADMSG, c->p, "expected ',' or ']', got %s", gw_oj_what_is(c, c->p));
		}
	}
	c->npath = np;
	c->depth--;
	if (packed) {
		if (count == 0)
			c->w->len = mark0;
		else
			sr_pbw__end(c->w, mark);
	}
	return gw_oj_out_check(c, at);
}

static const struct gw_oj_field *lookup(const struct gw_oj_msg *m, const uint8_t *name, size_t n)
{
	for (unsigned i = 0; i < m->n; i++) {
		const struct gw_oj_field *f = &m->fields[i];

		if ((strlen(f->json) == n && !memcmp(f->json, name, n)) ||
		    (strlen(f->proto) == n && !memcmp(f->proto, name, n)))
			return f;
	}
	return NULL;
}

/* An object of message m at c->p; its fields are written to the writer (the caller frames them). */
static int message(struct gw_oj_ctx *c, const struct gw_oj_msg *m)
{
	uint32_t seen = 0, oneof = 0;
	unsigned np = c->npath;
	int r;

	if (c->p >= c->end || *c->p != '{')
		return gw_oj_fail(c, -EBADMSG, c->p, "expected an object (%s), got %s", m->name,
				  gw_oj_what_is(c, c->p));
	if (++c->depth > c->lim.max_depth)
		return gw_oj_fail(c, -EMSGSIZE, c->p, "nesting deeper than %u", c->lim.max_depth);
	c->p++;
	gw_oj_skip_ws(c);
	if (c->p < c->end && *c->p == '}') {
		c->p++;
		c->depth--;
		return 0;
	}
	for (;;) {
		const uint8_t *key_at;
		const struct gw_oj_field *f;
		size_t at, n;
		uint32_t bit;

		gw_oj_skip_ws(c);
		key_at = c->p;
		if ((r = gw_oj_string(c, &at)) < 0)
			return r;
		n = c->w->len - at;
		/* The writer's buffer is NULL until its first byte. */
		f = lookup(m, c->w->buf ? c->w->buf + at : (const uint8_t *)"", n);
		c->w->len = at;
		/* Unknown names appear in paths as written (escapes and all). */
		push(c, f ? f->json : (const char *)key_at + 1, f ? strlen(f->json) : (size_t)(c->p - key_at - 2));
		gw_oj_skip_ws(c);
		if (c->p >= c->end || *c->p != ':')
			return gw_oj_fail(c, -EBADMSG, c->p, "expected ':' after the member name");
		c->p++;
		gw_oj_skip_ws(c);
		if (!f) {
			if ((r = value_any(c)) < 0)
				return r;
		} else {
			bit = 1u << (f - m->fields);
			if (seen & bit)
				return gw_oj_fail(c, -EBADMSG, key_at, "field given twice (as %s or %s)", f->json,
						  f->proto);
			seen |= bit;
			if (c->p < c->end && *c->p == 'n') {
				/* null: the field's default, nothing to write. */
				if ((r = gw_oj_literal(c, "null")) < 0)
					return r;
			} else {
				if (f->flags & F_ONEOF) {
					if (oneof)
						return gw_oj_fail(c, -EBADMSG, key_at,
								  "a second member of the oneof of %s", m->name);
					oneof = bit;
				}
				r = (f->flags & F_REPEATED) ? array(c, f) : element(c, f, f->flags & F_ONEOF, false);
				if (r < 0)
					return r;
			}
		}
		c->npath = np;
		gw_oj_skip_ws(c);
		if (c->p < c->end && *c->p == ',') {
			c->p++;
			continue;
		}
		if (c->p < c->end && *c->p == '}') {
			c->p++;
			c->depth--;
			return 0;
		}
		return gw_oj_fail(c, -EBADMSG, c->p, "expected ',' or '}', got %s", gw_oj_what_is(c, c->p));
	}
}

int gw_otlp_json_transcode(const void *json, size_t len, enum gw_otlp_version version,
			   const struct gw_otlp_json_limits *limits, struct sr_pbw *out, char *errbuf, size_t errsize)
{
	struct gw_oj_ctx c = { .w = out, .errbuf = errbuf, .errsize = errsize };
	const struct gw_oj_msg *root;
	size_t mark0 = out->len;
	int r;

	if (errbuf && errsize)
		errbuf[0] = '\0';
	if (!json)
		json = "", len = 0;
	c.start = c.p = json;
	c.end = c.start + len;
	if (limits)
		c.lim = *limits;
	if (!c.lim.max_input_bytes)
		c.lim.max_input_bytes = GW_OTLP_JSON_DEFAULT_MAX_INPUT_BYTES;
	if (!c.lim.max_depth)
		c.lim.max_depth = GW_OTLP_JSON_DEFAULT_MAX_DEPTH;
	if (c.lim.max_depth > GW_OTLP_JSON_MAX_DEPTH_CAP)
		c.lim.max_depth = GW_OTLP_JSON_MAX_DEPTH_CAP;
	if (!c.lim.max_array_elements)
		c.lim.max_array_elements = GW_OTLP_JSON_DEFAULT_MAX_ARRAY_ELEMENTS;
	if (!c.lim.max_output_bytes)
		c.lim.max_output_bytes = GW_OTLP_JSON_DEFAULT_MAX_OUTPUT_BYTES;
	c.out_start = mark0;

	if (version == GW_OTLP_V1_10)
		root = &gw_oj_request_v10;
	else if (version == GW_OTLP_V1_9)
		root = &gw_oj_request_v9;
	else
		return gw_oj_fail(&c, -EINVAL, c.p, "unknown OTLP profiles version %d", (int)version);
	if (len > c.lim.max_input_bytes)
		return gw_oj_fail(&c, -EMSGSIZE, c.p, "the body of %zu bytes exceeds the limit of %zu", len,
				  c.lim.max_input_bytes);

	/* Each level of nesting adds at most a member name and an array index. */
	c.path = malloc(sizeof(*c.path) * (2 * (size_t)c.lim.max_depth + 2));
	if (!c.path)
		return gw_oj_fail(&c, -ENOMEM, c.p, "out of memory");
	if (c.end - c.p >= 3 && !memcmp(c.p, "\xef\xbb\xbf", 3))
		c.p += 3; /* a byte order mark, which RFC 8259 lets parsers ignore */
	gw_oj_skip_ws(&c);
	r = message(&c, root);
	if (r == 0) {
		gw_oj_skip_ws(&c);
		if (c.p != c.end)
			r = gw_oj_fail(&c, -EBADMSG, c.p, "%s after the request object", gw_oj_what_is(&c, c.p));
	}
	free(c.path);
	if (r < 0) {
		out->len = mark0;
		return r;
	}
	return 0;
}
