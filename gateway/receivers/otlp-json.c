/* SPDX-License-Identifier: Apache-2.0 */
/*
 * OTLP/JSON to protobuf (otlp-json.h). The messages of both proto versions
 * are tables; one recursive-descent parser walks the JSON against them and
 * writes each field as soon as its value is read. Nested messages go through
 * sr_pbw__begin/end, whose length fix-up is what lets one pass suffice.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "otlp-json.h"
#include "pbwire.h"

/* ---- the messages ---- */

enum jtype {
	J_STRING,
	J_BYTES, /* base64 */
	J_HEX,	 /* trace and span IDs */
	J_ID,	 /* profile IDs: hex when 32 hex digits, base64 otherwise */
	J_BOOL,
	J_INT32,
	J_UINT32,
	J_INT64,
	J_UINT64,
	J_FIXED64,
	J_DOUBLE,
	J_MESSAGE,
};

enum { F_REPEATED = 1, F_ONEOF = 2 };

struct jmsg;

struct jfield {
	const char *json;  /* lowerCamelCase, as proto3's JSON mapping names it */
	const char *proto; /* as in the .proto file */
	uint32_t number;
	uint8_t type, flags;
	const struct jmsg *msg; /* J_MESSAGE */
};

struct jmsg {
	const char *name;
	const struct jfield *fields;
	unsigned n; /* at most 32: seen fields are a bit mask */
};

#define F(json, proto, number, type, flags, msg)                                                                       \
	{                                                                                                              \
		json, proto, number, type, flags, msg                                                                  \
	}
#define MSG(var, name, table) static const struct jmsg var = { name, table, sizeof(table) / sizeof(table[0]) }

/* Mutually recursive: declared before their tables. */
static const struct jmsg m_any_value, m_key_value;

static const struct jfield f_array_value[] = {
	F("values", "values", 1, J_MESSAGE, F_REPEATED, &m_any_value),
};
MSG(m_array_value, "ArrayValue", f_array_value);

static const struct jfield f_kvlist[] = {
	F("values", "values", 1, J_MESSAGE, F_REPEATED, &m_key_value),
};
MSG(m_kvlist, "KeyValueList", f_kvlist);

static const struct jfield f_any_value[] = {
	F("stringValue", "string_value", 1, J_STRING, F_ONEOF, NULL),
	F("boolValue", "bool_value", 2, J_BOOL, F_ONEOF, NULL),
	F("intValue", "int_value", 3, J_INT64, F_ONEOF, NULL),
	F("doubleValue", "double_value", 4, J_DOUBLE, F_ONEOF, NULL),
	F("arrayValue", "array_value", 5, J_MESSAGE, F_ONEOF, &m_array_value),
	F("kvlistValue", "kvlist_value", 6, J_MESSAGE, F_ONEOF, &m_kvlist),
	F("bytesValue", "bytes_value", 7, J_BYTES, F_ONEOF, NULL),
};
static const struct jmsg m_any_value = { "AnyValue", f_any_value, 7 };

static const struct jfield f_key_value[] = {
	F("key", "key", 1, J_STRING, 0, NULL),
	F("value", "value", 2, J_MESSAGE, 0, &m_any_value),
};
static const struct jmsg m_key_value = { "KeyValue", f_key_value, 2 };

static const struct jfield f_scope[] = {
	F("name", "name", 1, J_STRING, 0, NULL),
	F("version", "version", 2, J_STRING, 0, NULL),
	F("attributes", "attributes", 3, J_MESSAGE, F_REPEATED, &m_key_value),
	F("droppedAttributesCount", "dropped_attributes_count", 4, J_UINT32, 0, NULL),
};
MSG(m_scope, "InstrumentationScope", f_scope);

static const struct jfield f_resource[] = {
	F("attributes", "attributes", 1, J_MESSAGE, F_REPEATED, &m_key_value),
	F("droppedAttributesCount", "dropped_attributes_count", 2, J_UINT32, 0, NULL),
};
MSG(m_resource, "Resource", f_resource);

static const struct jfield f_link[] = {
	F("traceId", "trace_id", 1, J_HEX, 0, NULL),
	F("spanId", "span_id", 2, J_HEX, 0, NULL),
};
MSG(m_link, "Link", f_link);

static const struct jfield f_value_type[] = {
	F("typeStrindex", "type_strindex", 1, J_INT32, 0, NULL),
	F("unitStrindex", "unit_strindex", 2, J_INT32, 0, NULL),
};
MSG(m_value_type, "ValueType", f_value_type);

static const struct jfield f_mapping[] = {
	F("memoryStart", "memory_start", 1, J_UINT64, 0, NULL),
	F("memoryLimit", "memory_limit", 2, J_UINT64, 0, NULL),
	F("fileOffset", "file_offset", 3, J_UINT64, 0, NULL),
	F("filenameStrindex", "filename_strindex", 4, J_INT32, 0, NULL),
	F("attributeIndices", "attribute_indices", 5, J_INT32, F_REPEATED, NULL),
};
MSG(m_mapping, "Mapping", f_mapping);

static const struct jfield f_stack[] = {
	F("locationIndices", "location_indices", 1, J_INT32, F_REPEATED, NULL),
};
MSG(m_stack, "Stack", f_stack);

static const struct jfield f_line[] = {
	F("functionIndex", "function_index", 1, J_INT32, 0, NULL),
	F("line", "line", 2, J_INT64, 0, NULL),
	F("column", "column", 3, J_INT64, 0, NULL),
};
MSG(m_line, "Line", f_line);

static const struct jfield f_location[] = {
	F("mappingIndex", "mapping_index", 1, J_INT32, 0, NULL),
	F("address", "address", 2, J_UINT64, 0, NULL),
	F("lines", "lines", 3, J_MESSAGE, F_REPEATED, &m_line),
	F("attributeIndices", "attribute_indices", 4, J_INT32, F_REPEATED, NULL),
};
MSG(m_location, "Location", f_location);

static const struct jfield f_function[] = {
	F("nameStrindex", "name_strindex", 1, J_INT32, 0, NULL),
	F("systemNameStrindex", "system_name_strindex", 2, J_INT32, 0, NULL),
	F("filenameStrindex", "filename_strindex", 3, J_INT32, 0, NULL),
	F("startLine", "start_line", 4, J_INT64, 0, NULL),
};
MSG(m_function, "Function", f_function);

static const struct jfield f_kvu[] = {
	F("keyStrindex", "key_strindex", 1, J_INT32, 0, NULL),
	F("value", "value", 2, J_MESSAGE, 0, &m_any_value),
	F("unitStrindex", "unit_strindex", 3, J_INT32, 0, NULL),
};
MSG(m_kvu, "KeyValueAndUnit", f_kvu);

static const struct jfield f_dictionary[] = {
	F("mappingTable", "mapping_table", 1, J_MESSAGE, F_REPEATED, &m_mapping),
	F("locationTable", "location_table", 2, J_MESSAGE, F_REPEATED, &m_location),
	F("functionTable", "function_table", 3, J_MESSAGE, F_REPEATED, &m_function),
	F("linkTable", "link_table", 4, J_MESSAGE, F_REPEATED, &m_link),
	F("stringTable", "string_table", 5, J_STRING, F_REPEATED, NULL),
	F("attributeTable", "attribute_table", 6, J_MESSAGE, F_REPEATED, &m_kvu),
	F("stackTable", "stack_table", 7, J_MESSAGE, F_REPEATED, &m_stack),
};
MSG(m_dictionary, "ProfilesDictionary", f_dictionary);

/* v1.10 (profiles.proto). */
static const struct jfield f_sample_v10[] = {
	F("stackIndex", "stack_index", 1, J_INT32, 0, NULL),
	F("attributeIndices", "attribute_indices", 2, J_INT32, F_REPEATED, NULL),
	F("linkIndex", "link_index", 3, J_INT32, 0, NULL),
	F("values", "values", 4, J_INT64, F_REPEATED, NULL),
	F("timestampsUnixNano", "timestamps_unix_nano", 5, J_FIXED64, F_REPEATED, NULL),
};
MSG(m_sample_v10, "Sample", f_sample_v10);

/* v1.9 (profiles_v1_9.proto): the same Sample fields under other numbers. */
static const struct jfield f_sample_v9[] = {
	F("stackIndex", "stack_index", 1, J_INT32, 0, NULL),
	F("values", "values", 2, J_INT64, F_REPEATED, NULL),
	F("attributeIndices", "attribute_indices", 3, J_INT32, F_REPEATED, NULL),
	F("linkIndex", "link_index", 4, J_INT32, 0, NULL),
	F("timestampsUnixNano", "timestamps_unix_nano", 5, J_FIXED64, F_REPEATED, NULL),
};
MSG(m_sample_v9, "Sample", f_sample_v9);

/* Profile and the messages above it differ between versions only in the Sample they hold. */
#define PROFILE_FIELDS(sample)                                                                                         \
	F("sampleType", "sample_type", 1, J_MESSAGE, 0, &m_value_type),                                                \
		F("samples", "samples", 2, J_MESSAGE, F_REPEATED, sample),                                             \
		F("timeUnixNano", "time_unix_nano", 3, J_FIXED64, 0, NULL),                                            \
		F("durationNano", "duration_nano", 4, J_UINT64, 0, NULL),                                              \
		F("periodType", "period_type", 5, J_MESSAGE, 0, &m_value_type),                                        \
		F("period", "period", 6, J_INT64, 0, NULL), F("profileId", "profile_id", 7, J_ID, 0, NULL),            \
		F("droppedAttributesCount", "dropped_attributes_count", 8, J_UINT32, 0, NULL),                         \
		F("originalPayloadFormat", "original_payload_format", 9, J_STRING, 0, NULL),                           \
		F("originalPayload", "original_payload", 10, J_BYTES, 0, NULL),                                        \
		F("attributeIndices", "attribute_indices", 11, J_INT32, F_REPEATED, NULL)

static const struct jfield f_profile_v10[] = { PROFILE_FIELDS(&m_sample_v10) };
MSG(m_profile_v10, "Profile", f_profile_v10);
static const struct jfield f_profile_v9[] = { PROFILE_FIELDS(&m_sample_v9) };
MSG(m_profile_v9, "Profile", f_profile_v9);

static const struct jfield f_scope_profiles_v10[] = {
	F("scope", "scope", 1, J_MESSAGE, 0, &m_scope),
	F("profiles", "profiles", 2, J_MESSAGE, F_REPEATED, &m_profile_v10),
	F("schemaUrl", "schema_url", 3, J_STRING, 0, NULL),
};
MSG(m_scope_profiles_v10, "ScopeProfiles", f_scope_profiles_v10);
static const struct jfield f_scope_profiles_v9[] = {
	F("scope", "scope", 1, J_MESSAGE, 0, &m_scope),
	F("profiles", "profiles", 2, J_MESSAGE, F_REPEATED, &m_profile_v9),
	F("schemaUrl", "schema_url", 3, J_STRING, 0, NULL),
};
MSG(m_scope_profiles_v9, "ScopeProfiles", f_scope_profiles_v9);

static const struct jfield f_resource_profiles_v10[] = {
	F("resource", "resource", 1, J_MESSAGE, 0, &m_resource),
	F("scopeProfiles", "scope_profiles", 2, J_MESSAGE, F_REPEATED, &m_scope_profiles_v10),
	F("schemaUrl", "schema_url", 3, J_STRING, 0, NULL),
};
MSG(m_resource_profiles_v10, "ResourceProfiles", f_resource_profiles_v10);
static const struct jfield f_resource_profiles_v9[] = {
	F("resource", "resource", 1, J_MESSAGE, 0, &m_resource),
	F("scopeProfiles", "scope_profiles", 2, J_MESSAGE, F_REPEATED, &m_scope_profiles_v9),
	F("schemaUrl", "schema_url", 3, J_STRING, 0, NULL),
};
MSG(m_resource_profiles_v9, "ResourceProfiles", f_resource_profiles_v9);

static const struct jfield f_request_v10[] = {
	F("resourceProfiles", "resource_profiles", 1, J_MESSAGE, F_REPEATED, &m_resource_profiles_v10),
	F("dictionary", "dictionary", 2, J_MESSAGE, 0, &m_dictionary),
};
MSG(m_request_v10, "ExportProfilesServiceRequest", f_request_v10);
static const struct jfield f_request_v9[] = {
	F("resourceProfiles", "resource_profiles", 1, J_MESSAGE, F_REPEATED, &m_resource_profiles_v9),
	F("dictionary", "dictionary", 2, J_MESSAGE, 0, &m_dictionary),
};
MSG(m_request_v9, "ExportProfilesServiceRequest", f_request_v9);

/* ---- the parser ---- */

/* One step of the path to the value being read: a member name or an array index. */
struct seg {
	const char *name; /* NULL: index */
	size_t len;
	size_t index;
};

struct ctx {
	const uint8_t *p, *start, *end;
	struct sr_pbw *w;
	size_t out_start;
	struct gw_otlp_json_limits lim;
	unsigned depth;
	struct seg *path;
	unsigned npath;
	char *errbuf;
	size_t errsize;
};

/* What the value at p is, for "expected X, got Y". */
static const char *what_is(const struct ctx *c, const uint8_t *p)
{
	if (p >= c->end)
		return "the end of the input";
	switch (*p) {
	case '{':
		return "an object";
	case '[':
		return "an array";
	case '"':
		return "a string";
	case 't':
	case 'f':
		return "a boolean";
	case 'n':
		return "null";
	default:
		return (*p == '-' || (*p >= '0' && *p <= '9')) ? "a number" : "a character that starts no JSON value";
	}
}

/* Writes "<path> (byte N): <message>" into errbuf and returns rc. */
__attribute__((format(printf, 4, 5))) static int fail(struct ctx *c, int rc, const uint8_t *at, const char *fmt, ...)
{
	size_t n = 0;
	va_list ap;
	int k;

	if (!c->errbuf || c->errsize == 0)
		return rc;
	c->errbuf[0] = '\0';
#define ADD(...)                                                                                                       \
	do {                                                                                                           \
		if (n < c->errsize) {                                                                                  \
			k = snprintf(c->errbuf + n, c->errsize - n, __VA_ARGS__);                                      \
			n += k > 0 ? (size_t)k : 0;                                                                    \
		}                                                                                                      \
	} while (0)
	if (c->npath == 0)
		ADD("request body");
	for (unsigned i = 0; i < c->npath; i++) {
		const struct seg *s = &c->path[i];

		if (s->name)
			ADD("%s%.*s", i ? "." : "", (int)(s->len > 64 ? 64 : s->len), s->name);
		else
			ADD("[%zu]", s->index);
	}
	ADD(" (byte %zu): ", (size_t)((at < c->end ? at : c->end) - c->start));
#undef ADD
	if (n < c->errsize) {
		va_start(ap, fmt);
		vsnprintf(c->errbuf + n, c->errsize - n, fmt, ap);
		va_end(ap);
	}
	return rc;
}

static void skip_ws(struct ctx *c)
{
	while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
		c->p++;
}

static int literal(struct ctx *c, const char *word)
{
	size_t n = strlen(word);

	if ((size_t)(c->end - c->p) < n || memcmp(c->p, word, n) != 0)
		return fail(c, -EBADMSG, c->p, "invalid literal (expected %s)", word);
	c->p += n;
	return 0;
}

static int out_check(struct ctx *c)
{
	if (sr_pbw__error(c->w))
		return fail(c, sr_pbw__error(c->w) == -EMSGSIZE ? -EMSGSIZE : -ENOMEM, c->p,
			    "the protobuf output could not grow");
	if (c->w->len - c->out_start > c->lim.max_output_bytes)
		return fail(c, -EMSGSIZE, c->p, "the protobuf output exceeds %zu bytes", c->lim.max_output_bytes);
	return 0;
}

static int push(struct ctx *c, const char *name, size_t len)
{
	/* Every level of nesting pushes at most a name and an index, and depth is checked first. */
	c->path[c->npath++] = (struct seg){ .name = name, .len = len };
	return 0;
}

/*
 * The number of bytes of the well-formed UTF-8 sequence at p (at most n
 * bytes long), or 0: no overlong forms, surrogates or code points past U+10FFFF.
 */
static size_t utf8_len(const uint8_t *p, size_t n)
{
	uint32_t cp;
	size_t k;

	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		k = 2, cp = p[0] & 0x1f;
	else if (p[0] >= 0xe0 && p[0] <= 0xef)
		k = 3, cp = p[0] & 0x0f;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		k = 4, cp = p[0] & 0x07;
	else
		return 0;
	if (n < k)
		return 0;
	for (size_t i = 1; i < k; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (p[i] & 0x3f);
	}
	if ((k == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) || (k == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;
	return k;
}

static int hex4(const uint8_t *p, uint32_t *ret)
{
	uint32_t v = 0;

	for (int i = 0; i < 4; i++) {
		uint8_t ch = p[i];

		v <<= 4;
		if (ch >= '0' && ch <= '9')
			v |= ch - '0';
		else if ((ch | 0x20) >= 'a' && (ch | 0x20) <= 'f')
			v |= (ch | 0x20) - 'a' + 10;
		else
			return -1;
	}
	*ret = v;
	return 0;
}

static void put_utf8(struct sr_pbw *w, uint32_t cp)
{
	uint8_t b[4];
	size_t n;

	if (cp < 0x80) {
		b[0] = (uint8_t)cp, n = 1;
	} else if (cp < 0x800) {
		b[0] = (uint8_t)(0xc0 | cp >> 6), b[1] = (uint8_t)(0x80 | (cp & 0x3f)), n = 2;
	} else if (cp < 0x10000) {
		b[0] = (uint8_t)(0xe0 | cp >> 12), b[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
		b[2] = (uint8_t)(0x80 | (cp & 0x3f)), n = 3;
	} else {
		b[0] = (uint8_t)(0xf0 | cp >> 18), b[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3f));
		b[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f)), b[3] = (uint8_t)(0x80 | (cp & 0x3f)), n = 4;
	}
	sr_pbw__raw(w, b, n);
}

/*
 * A JSON string at c->p, decoded and validated, appended to the writer
 * (which then holds it at [*ret_at, w->len)). Escapes become UTF-8; a lone
 * surrogate, a control character or invalid UTF-8 is an error.
 */
static int string(struct ctx *c, size_t *ret_at)
{
	const uint8_t *q;

	if (c->p >= c->end || *c->p != '"')
		return fail(c, -EBADMSG, c->p, "expected a string, got %s", what_is(c, c->p));
	*ret_at = c->w->len;
	c->p++;
	for (;;) {
		size_t k;

		/* Runs of plain characters are copied whole. */
		for (q = c->p; q < c->end && *q >= 0x20 && *q < 0x80 && *q != '"' && *q != '\\'; q++)
			;
		sr_pbw__raw(c->w, c->p, (size_t)(q - c->p));
		c->p = q;
		if (q >= c->end)
			return fail(c, -EBADMSG, q, "unterminated string");
		if (*q == '"') {
			c->p++;
			return sr_pbw__error(c->w) ? out_check(c) : 0;
		}
		if (*q < 0x20)
			return fail(c, -EBADMSG, q, "control character 0x%02x in a string (escape it)", *q);
		if (*q >= 0x80) {
			if (!(k = utf8_len(q, (size_t)(c->end - q))))
				return fail(c, -EBADMSG, q, "invalid UTF-8 in a string");
			sr_pbw__raw(c->w, q, k);
			c->p += k;
			continue;
		}
		/* A backslash. */
		if (c->end - q < 2)
			return fail(c, -EBADMSG, q, "unterminated string");
		{
			static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
			const char *e = q[1] ? strchr(from, q[1]) : NULL;
			uint32_t cp, lo;

			if (e) {
				sr_pbw__raw(c->w, &to[e - from], 1);
				c->p += 2;
				continue;
			}
			if (q[1] != 'u')
				return fail(c, -EBADMSG, q, "invalid escape in a string");
			if (c->end - q < 6 || hex4(q + 2, &cp) < 0)
				return fail(c, -EBADMSG, q, "invalid \\u escape in a string");
			c->p += 6;
			if (cp >= 0xdc00 && cp <= 0xdfff)
				return fail(c, -EBADMSG, q, "lone low surrogate \\u%04x in a string", cp);
			if (cp >= 0xd800 && cp <= 0xdbff) {
				if (c->end - c->p < 6 || c->p[0] != '\\' || c->p[1] != 'u' || hex4(c->p + 2, &lo) < 0 ||
				    lo < 0xdc00 || lo > 0xdfff)
					return fail(c, -EBADMSG, q, "high surrogate \\u%04x not followed by a low one",
						    cp);
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
				c->p += 6;
			}
			put_utf8(c->w, cp);
		}
	}
}

/* The span of a JSON number at c->p (RFC 8259 grammar), which it passes. */
static int number_span(struct ctx *c, const uint8_t **ret, size_t *ret_n)
{
	const uint8_t *p = c->p, *s = p;

#define DIGIT(q) ((q) < c->end && *(q) >= '0' && *(q) <= '9')
	if (p < c->end && *p == '-')
		p++;
	if (!DIGIT(p))
		return fail(c, -EBADMSG, s, "invalid number");
	if (*p == '0')
		p++;
	else
		while (DIGIT(p))
			p++;
	if (p < c->end && *p == '.') {
		p++;
		if (!DIGIT(p))
			return fail(c, -EBADMSG, s, "invalid number");
		while (DIGIT(p))
			p++;
	}
	if (p < c->end && (*p == 'e' || *p == 'E')) {
		p++;
		if (p < c->end && (*p == '+' || *p == '-'))
			p++;
		if (!DIGIT(p))
			return fail(c, -EBADMSG, s, "invalid number");
		while (DIGIT(p))
			p++;
	}
#undef DIGIT
	*ret = s;
	*ret_n = (size_t)(p - s);
	c->p = p;
	return 0;
}

/*
 * The integer a number span (already checked by number_span's grammar)
 * stands for, exactly: 1e3 and 10.0 are integers, 1.5 is not. *ret_neg
 * and *ret_mag; 1 when it is not an integer, 2 when |value| >= 2^64.
 */
static int span_integer(const uint8_t *s, size_t n, bool *ret_neg, uint64_t *ret_mag)
{
	const uint8_t *end = s + n, *p = s, *dot = NULL, *e = end;
	long exp10 = 0, nz = 0;
	uint64_t mag = 0;
	int ndig = 0;

	*ret_neg = p < end && *p == '-';
	if (*ret_neg)
		p++;
	for (const uint8_t *q = p; q < end; q++) {
		if (*q == '.')
			dot = q;
		if (*q == 'e' || *q == 'E') {
			e = q;
			break;
		}
	}
	if (e < end) {
		const uint8_t *q = e + 1;
		bool eneg = *q == '-';

		if (*q == '+' || *q == '-')
			q++;
		for (; q < end; q++)
			if (exp10 < 100000)
				exp10 = exp10 * 10 + (*q - '0');
		if (eneg)
			exp10 = -exp10;
	}
	if (dot)
		exp10 -= (long)(e - dot - 1);
	/* Digits without leading zeros; trailing zeros move into the exponent. */
	{
		const uint8_t *first = NULL, *last = NULL;

		for (const uint8_t *q = p; q < e; q++)
			if (*q != '.' && *q != '0') {
				if (!first)
					first = q;
				last = q;
			}
		if (!first) {
			*ret_mag = 0;
			return 0;
		}
		for (const uint8_t *q = last + 1; q < e; q++)
			if (*q != '.')
				nz++;
		exp10 += nz;
		if (exp10 < 0)
			return 1;
		for (const uint8_t *q = first; q <= last; q++)
			if (*q != '.')
				ndig++;
		if (ndig + exp10 > 20)
			return 2;
		for (const uint8_t *q = first; q <= last; q++) {
			if (*q == '.')
				continue;
			if (mag > (UINT64_MAX - (uint64_t)(*q - '0')) / 10)
				return 2;
			mag = mag * 10 + (uint64_t)(*q - '0');
		}
		for (long i = 0; i < exp10; i++) {
			if (mag > UINT64_MAX / 10)
				return 2;
			mag *= 10;
		}
	}
	*ret_mag = mag;
	return 0;
}

static const char *type_name(unsigned t)
{
	static const char *const names[] = {
		[J_INT32] = "int32",   [J_UINT32] = "uint32",	[J_INT64] = "int64",
		[J_UINT64] = "uint64", [J_FIXED64] = "fixed64", [J_DOUBLE] = "double",
	};

	return t < sizeof(names) / sizeof(names[0]) && names[t] ? names[t] : "this field";
}

/* A numeric value (number or string) of an integer or double field, as the 64 bits protobuf writes. */
static int numeric(struct ctx *c, unsigned type, uint64_t *ret)
{
	const uint8_t *at = c->p, *s;
	bool quoted = c->p < c->end && *c->p == '"', neg;
	size_t n;
	uint64_t mag;
	int r;

	if (quoted) {
		const uint8_t *q = at + 1;

		while (q < c->end && *q != '"' && *q != '\\')
			q++;
		if (q >= c->end || *q != '"')
			return fail(c, -EBADMSG, at, "expected a number in a string without escapes");
		s = at + 1;
		n = (size_t)(q - s);
		if (type == J_DOUBLE) {
			double d = 0;

			if (n == 3 && !memcmp(s, "NaN", 3))
				d = NAN;
			else if (n == 8 && !memcmp(s, "Infinity", 8))
				d = INFINITY;
			else if (n == 9 && !memcmp(s, "-Infinity", 9))
				d = -INFINITY;
			if (d != 0) {
				memcpy(ret, &d, sizeof(d));
				c->p = q + 1;
				return 0;
			}
		}
		/* The string must hold one JSON number and nothing else. */
		{
			struct ctx sub = *c;
			const uint8_t *ss;
			size_t sn;

			sub.p = s, sub.end = q;
			if (n == 0 || number_span(&sub, &ss, &sn) < 0 || sub.p != q)
				return fail(c, -EBADMSG, at, "\"%.*s\" is not a number", (int)(n > 40 ? 40 : n), s);
		}
		c->p = q + 1;
	} else {
		if (c->p >= c->end || !(*c->p == '-' || (*c->p >= '0' && *c->p <= '9')))
			return fail(c, -EBADMSG, at, "expected a number, got %s", what_is(c, at));
		if ((r = number_span(c, &s, &n)) < 0)
			return r;
	}

	if (type == J_DOUBLE) {
		char buf[512];
		double d;

		if (n >= sizeof(buf))
			return fail(c, -EBADMSG, at, "a number of %zu characters is too long for a double", n);
		memcpy(buf, s, n);
		buf[n] = '\0';
		/* The gateway keeps the C locale, so strtod reads '.' as the decimal point. */
		d = strtod(buf, NULL);
		if (isinf(d))
			return fail(c, -EBADMSG, at, "%s is out of range for a double", buf);
		memcpy(ret, &d, sizeof(d));
		return 0;
	}

	r = span_integer(s, n, &neg, &mag);
	if (r == 1)
		return fail(c, -EBADMSG, at, "%.*s is not an integer", (int)(n > 40 ? 40 : n), s);
	if (r == 0 && neg && mag == 0)
		neg = false;
	if (r == 0) {
		switch (type) {
		case J_INT32:
			r = mag > (neg ? 0x80000000u : 0x7fffffffu);
			*ret = neg ? (uint64_t) - (int64_t)mag : mag;
			break;
		case J_UINT32:
			r = neg || mag > UINT32_MAX;
			*ret = mag;
			break;
		case J_INT64:
			r = mag > (neg ? (uint64_t)1 << 63 : INT64_MAX);
			*ret = neg ? (uint64_t)0 - mag : mag;
			break;
		default: /* uint64, fixed64 */
			r = neg;
			*ret = mag;
		}
	}
	if (r)
		return fail(c, -EBADMSG, at, "%.*s is out of range for %s", (int)(n > 40 ? 40 : n), s, type_name(type));
	return 0;
}

static int base64_value(uint8_t ch)
{
	if (ch >= 'A' && ch <= 'Z')
		return ch - 'A';
	if (ch >= 'a' && ch <= 'z')
		return ch - 'a' + 26;
	if (ch >= '0' && ch <= '9')
		return ch - '0' + 52;
	if (ch == '+' || ch == '-')
		return 62;
	if (ch == '/' || ch == '_')
		return 63;
	return -1;
}

/* Decodes base64 (standard or URL-safe, padded or not) at b[0, n) in place; returns the bytes or -1. */
static long base64_decode(uint8_t *b, size_t n)
{
	size_t o = 0, i, pad = 0;
	uint32_t acc = 0;
	unsigned bits = 0;

	while (pad < 2 && n > 0 && b[n - 1] == '=')
		n--, pad++;
	if ((pad && (n + pad) % 4) || n % 4 == 1)
		return -1;
	for (i = 0; i < n; i++) {
		int v = base64_value(b[i]);

		if (v < 0)
			return -1;
		acc = (acc << 6) | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			b[o++] = (uint8_t)(acc >> bits);
		}
	}
	return (long)o;
}

static int hex_nibble(uint8_t ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	ch |= 0x20;
	return ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
}

/* Decodes hex at b[0, n) in place; returns the bytes or -1. */
static long hex_decode(uint8_t *b, size_t n)
{
	if (n % 2)
		return -1;
	for (size_t i = 0; i < n; i += 2) {
		int hi = hex_nibble(b[i]), lo = hex_nibble(b[i + 1]);

		if (hi < 0 || lo < 0)
			return -1;
		b[i / 2] = (uint8_t)(hi << 4 | lo);
	}
	return (long)(n / 2);
}

/*
 * A string or bytes value, written as field `number` (always when
 * `always`, as repeated and oneof members must be; else only when not empty).
 */
static int string_field(struct ctx *c, const struct jfield *f, bool always)
{
	size_t mark0 = c->w->len, mark = sr_pbw__begin(c->w, f->number), at, n;
	const uint8_t *start = c->p;
	int r = string(c, &at);
	long m;

	if (r < 0)
		return r;
	if (sr_pbw__error(c->w))
		return out_check(c);
	n = c->w->len - at;
	if (f->type != J_STRING) {
		uint8_t *b = c->w->buf + at;
		bool hex = f->type == J_HEX;

		if (f->type == J_ID) {
			hex = n == 32;
			for (size_t i = 0; hex && i < n; i++)
				hex = hex_nibble(b[i]) >= 0;
		}
		m = hex ? hex_decode(b, n) : base64_decode(b, n);
		if (m < 0)
			return fail(c, -EBADMSG, start, "\"%.*s\" is not %s", (int)(n > 40 ? 40 : n), b,
				    hex ? "hex (an even number of hex digits)" : "base64");
		c->w->len = at + (size_t)m;
		n = (size_t)m;
	}
	if (n == 0 && !always)
		c->w->len = mark0;
	else
		sr_pbw__end(c->w, mark);
	return out_check(c);
}

static int value_any(struct ctx *c);

/* Skips `"key": value` pairs' values and array elements of unknown fields, validating them. */
static int skip_object_or_array(struct ctx *c, bool object)
{
	const uint8_t *open = c->p;
	size_t count = 0;
	int r;

	if (++c->depth > c->lim.max_depth)
		return fail(c, -EMSGSIZE, open, "nesting deeper than %u", c->lim.max_depth);
	c->p++;
	skip_ws(c);
	if (c->p < c->end && *c->p == (object ? '}' : ']')) {
		c->p++;
		c->depth--;
		return 0;
	}
	for (;;) {
		skip_ws(c);
		if (object) {
			size_t at;

			if ((r = string(c, &at)) < 0)
				return r;
			c->w->len = at;
			skip_ws(c);
			if (c->p >= c->end || *c->p != ':')
				return fail(c, -EBADMSG, c->p, "expected ':' after a member name");
			c->p++;
			skip_ws(c);
		} else if (++count > c->lim.max_array_elements) {
			return fail(c, -EMSGSIZE, c->p, "more than %zu array elements", c->lim.max_array_elements);
		}
		if ((r = value_any(c)) < 0)
			return r;
		skip_ws(c);
		if (c->p < c->end && *c->p == ',') {
			c->p++;
			continue;
		}
		if (c->p < c->end && *c->p == (object ? '}' : ']')) {
			c->p++;
			c->depth--;
			return 0;
		}
		return fail(c, -EBADMSG, c->p, "expected ',' or '%c', got %s", object ? '}' : ']', what_is(c, c->p));
	}
}

/* Any JSON value, checked and dropped (unknown fields). */
static int value_any(struct ctx *c)
{
	const uint8_t *s;
	size_t n;

	if (c->p >= c->end)
		return fail(c, -EBADMSG, c->p, "expected a value, got the end of the input");
	switch (*c->p) {
	case '{':
	case '[':
		return skip_object_or_array(c, *c->p == '{');
	case '"': {
		size_t at;
		int r = string(c, &at);

		c->w->len = at;
		return r;
	}
	case 't':
		return literal(c, "true");
	case 'f':
		return literal(c, "false");
	case 'n':
		return literal(c, "null");
	default:
		return number_span(c, &s, &n);
	}
}

static int message(struct ctx *c, const struct jmsg *m);

/* One value of field f (an element when f is repeated), written as it is read. */
static int element(struct ctx *c, const struct jfield *f, bool always, bool packed)
{
	uint64_t v = 0;
	size_t mark;
	int r;

	switch (f->type) {
	case J_MESSAGE:
		if (c->p >= c->end || *c->p != '{')
			return fail(c, -EBADMSG, c->p, "expected an object (%s), got %s", f->msg->name,
				    what_is(c, c->p));
		mark = sr_pbw__begin(c->w, f->number);
		if ((r = message(c, f->msg)) < 0)
			return r;
		sr_pbw__end(c->w, mark);
		return out_check(c);
	case J_STRING:
	case J_BYTES:
	case J_HEX:
	case J_ID:
		return string_field(c, f, always);
	case J_BOOL:
		if (c->p < c->end && *c->p == 't')
			r = literal(c, "true"), v = 1;
		else if (c->p < c->end && *c->p == 'f')
			r = literal(c, "false");
		else
			return fail(c, -EBADMSG, c->p, "expected true or false, got %s", what_is(c, c->p));
		if (r < 0)
			return r;
		break;
	default:
		if ((r = numeric(c, f->type, &v)) < 0)
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
	return out_check(c);
}

/* A repeated field's array: messages and strings one field each, numbers packed into one. */
static int array(struct ctx *c, const struct jfield *f)
{
	bool packed = f->type != J_MESSAGE && f->type != J_STRING && f->type != J_BYTES;
	size_t mark0 = c->w->len, mark = 0, count = 0;
	unsigned np = c->npath;
	int r;

	if (c->p >= c->end || *c->p != '[')
		return fail(c, -EBADMSG, c->p, "expected an array, got %s", what_is(c, c->p));
	if (++c->depth > c->lim.max_depth)
		return fail(c, -EMSGSIZE, c->p, "nesting deeper than %u", c->lim.max_depth);
	c->p++;
	if (packed)
		mark = sr_pbw__begin(c->w, f->number);
	c->path[c->npath++] = (struct seg){ .index = 0 };
	skip_ws(c);
	if (c->p < c->end && *c->p == ']') {
		c->p++;
	} else {
		for (;;) {
			skip_ws(c);
			c->path[np].index = count;
			if (++count > c->lim.max_array_elements)
				return fail(c, -EMSGSIZE, c->p, "more than %zu array elements",
					    c->lim.max_array_elements);
			if (c->p < c->end && *c->p == 'n')
				return fail(c, -EBADMSG, c->p, "null is not a valid array element");
			if ((r = element(c, f, true, packed)) < 0)
				return r;
			skip_ws(c);
			if (c->p < c->end && *c->p == ',') {
				c->p++;
				continue;
			}
			if (c->p < c->end && *c->p == ']') {
				c->p++;
				break;
			}
			return fail(c, -EBADMSG, c->p, "expected ',' or ']', got %s", what_is(c, c->p));
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
	return out_check(c);
}

static const struct jfield *lookup(const struct jmsg *m, const uint8_t *name, size_t n)
{
	for (unsigned i = 0; i < m->n; i++) {
		const struct jfield *f = &m->fields[i];

		if ((strlen(f->json) == n && !memcmp(f->json, name, n)) ||
		    (strlen(f->proto) == n && !memcmp(f->proto, name, n)))
			return f;
	}
	return NULL;
}

/* An object of message m at c->p; its fields are written to the writer (the caller frames them). */
static int message(struct ctx *c, const struct jmsg *m)
{
	uint32_t seen = 0, oneof = 0;
	unsigned np = c->npath;
	int r;

	if (c->p >= c->end || *c->p != '{')
		return fail(c, -EBADMSG, c->p, "expected an object (%s), got %s", m->name, what_is(c, c->p));
	if (++c->depth > c->lim.max_depth)
		return fail(c, -EMSGSIZE, c->p, "nesting deeper than %u", c->lim.max_depth);
	c->p++;
	skip_ws(c);
	if (c->p < c->end && *c->p == '}') {
		c->p++;
		c->depth--;
		return 0;
	}
	for (;;) {
		const uint8_t *key_at;
		const struct jfield *f;
		size_t at, n;
		uint32_t bit;

		skip_ws(c);
		key_at = c->p;
		if ((r = string(c, &at)) < 0)
			return r;
		n = c->w->len - at;
		f = lookup(m, c->w->buf + at, n);
		c->w->len = at;
		/* Unknown names appear in paths as written (escapes and all). */
		push(c, f ? f->json : (const char *)key_at + 1, f ? strlen(f->json) : (size_t)(c->p - key_at - 2));
		skip_ws(c);
		if (c->p >= c->end || *c->p != ':')
			return fail(c, -EBADMSG, c->p, "expected ':' after the member name");
		c->p++;
		skip_ws(c);
		if (!f) {
			if ((r = value_any(c)) < 0)
				return r;
		} else {
			bit = 1u << (f - m->fields);
			if (seen & bit)
				return fail(c, -EBADMSG, key_at, "field given twice (as %s or %s)", f->json, f->proto);
			seen |= bit;
			if (c->p < c->end && *c->p == 'n') {
				/* null: the field's default, nothing to write. */
				if ((r = literal(c, "null")) < 0)
					return r;
			} else {
				if (f->flags & F_ONEOF) {
					if (oneof)
						return fail(c, -EBADMSG, key_at, "a second member of the oneof of %s",
							    m->name);
					oneof = bit;
				}
				r = (f->flags & F_REPEATED) ? array(c, f) : element(c, f, f->flags & F_ONEOF, false);
				if (r < 0)
					return r;
			}
		}
		c->npath = np;
		skip_ws(c);
		if (c->p < c->end && *c->p == ',') {
			c->p++;
			continue;
		}
		if (c->p < c->end && *c->p == '}') {
			c->p++;
			c->depth--;
			return 0;
		}
		return fail(c, -EBADMSG, c->p, "expected ',' or '}', got %s", what_is(c, c->p));
	}
}

int gw_otlp_json_transcode(const void *json, size_t len, enum gw_otlp_version version,
			   const struct gw_otlp_json_limits *limits, struct sr_pbw *out, char *errbuf, size_t errsize)
{
	struct ctx c = { .start = json,
			 .p = json,
			 .end = (const uint8_t *)json + len,
			 .w = out,
			 .errbuf = errbuf,
			 .errsize = errsize };
	const struct jmsg *root;
	size_t mark0 = out->len;
	int r;

	if (errbuf && errsize)
		errbuf[0] = '\0';
	if (!json)
		c.start = c.p = c.end = (const uint8_t *)"";
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
		root = &m_request_v10;
	else if (version == GW_OTLP_V1_9)
		root = &m_request_v9;
	else
		return fail(&c, -EINVAL, c.p, "unknown OTLP profiles version %d", (int)version);
	if (len > c.lim.max_input_bytes)
		return fail(&c, -EMSGSIZE, c.p, "the body of %zu bytes exceeds the limit of %zu", len,
			    c.lim.max_input_bytes);

	/* Each level of nesting adds at most a member name and an array index. */
	c.path = malloc(sizeof(*c.path) * (2 * (size_t)c.lim.max_depth + 2));
	if (!c.path)
		return fail(&c, -ENOMEM, c.p, "out of memory");
	if (c.end - c.p >= 3 && !memcmp(c.p, "\xef\xbb\xbf", 3))
		c.p += 3; /* a byte order mark, which RFC 8259 lets parsers ignore */
	skip_ws(&c);
	r = message(&c, root);
	if (r == 0) {
		skip_ws(&c);
		if (c.p != c.end)
			r = fail(&c, -EBADMSG, c.p, "%s after the request object", what_is(&c, c.p));
	}
	free(c.path);
	if (r < 0) {
		out->len = mark0;
		return r;
	}
	return 0;
}
