/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The JSON scanner of the OTLP/JSON transcoder (otlp-json-private.h): one
 * value of one type at a time, strings decoded straight into the protobuf
 * writer, numbers read exactly (1e3 is the integer 1000, 1.5 is no integer),
 * and errors that name the JSON path and byte.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/macro.h"
#include "otlp-json-private.h"
#include "common/pbwire.h"

/* What the value at p is, for "expected X, got Y". */
const char *gw_oj_what_is(const struct gw_oj_ctx *c, const uint8_t *p)
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

/* Writes "<path> (byte N): <message>" into errbuf and returns rc. */
int gw_oj_fail(struct gw_oj_ctx *c, int rc, const uint8_t *at, const char *fmt, ...)
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
		const struct gw_oj_seg *s = &c->path[i];

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
	/*
	 * The message quotes the input (names, values), maybe cut mid-character:
	 * it goes into HTTP bodies and gRPC statuses, which must be UTF-8 text.
	 */
	for (uint8_t *p = (uint8_t *)c->errbuf; *p;) {
		size_t len = utf8_len(p, strlen((char *)p));

		if (len == 0 || *p < 0x20 || *p == 0x7f) {
			*p++ = '?';
			continue;
		}
		p += len;
	}
	return rc;
}

void gw_oj_skip_ws(struct gw_oj_ctx *c)
{
	while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
		c->p++;
}

int gw_oj_literal(struct gw_oj_ctx *c, const char *word)
{
	size_t n = strlen(word);

	if ((size_t)(c->end - c->p) < n || memcmp(c->p, word, n) != 0)
		return gw_oj_fail(c, -EBADMSG, c->p, "invalid literal (expected %s)", word);
	c->p += n;
	return 0;
}

int gw_oj_out_check(struct gw_oj_ctx *c, const uint8_t *at)
{
	if (sr_pbw__error(c->w))
		return gw_oj_fail(c, sr_pbw__error(c->w) == -EMSGSIZE ? -EMSGSIZE : -ENOMEM, at,
				  "the protobuf output could not grow");
	if (c->w->len - c->out_start > c->lim.max_output_bytes)
		return gw_oj_fail(c, -EMSGSIZE, at, "the protobuf output exceeds %zu bytes", c->lim.max_output_bytes);
	return 0;
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
int gw_oj_string(struct gw_oj_ctx *c, size_t *ret_at)
{
	const uint8_t *q;

	if (c->p >= c->end || *c->p != '"')
		return gw_oj_fail(c, -EBADMSG, c->p, "expected a string, got %s", gw_oj_what_is(c, c->p));
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
			return gw_oj_fail(c, -EBADMSG, q, "unterminated string");
		if (*q == '"') {
			c->p++;
			return sr_pbw__error(c->w) ? gw_oj_out_check(c, c->p) : 0;
		}
		if (*q < 0x20)
			return gw_oj_fail(c, -EBADMSG, q, "control character 0x%02x in a string (escape it)", *q);
		if (*q >= 0x80) {
			if (!(k = utf8_len(q, (size_t)(c->end - q))))
				return gw_oj_fail(c, -EBADMSG, q, "invalid UTF-8 in a string");
			sr_pbw__raw(c->w, q, k);
			c->p += k;
			continue;
		}
		/* A backslash. */
		if (c->end - q < 2)
			return gw_oj_fail(c, -EBADMSG, q, "unterminated string");
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
				return gw_oj_fail(c, -EBADMSG, q, "invalid escape in a string");
			if (c->end - q < 6 || hex4(q + 2, &cp) < 0)
				return gw_oj_fail(c, -EBADMSG, q, "invalid \\u escape in a string");
			c->p += 6;
			if (cp >= 0xdc00 && cp <= 0xdfff)
				return gw_oj_fail(c, -EBADMSG, q, "lone low surrogate \\u%04x in a string", cp);
			if (cp >= 0xd800 && cp <= 0xdbff) {
				if (c->end - c->p < 6 || c->p[0] != '\\' || c->p[1] != 'u' || hex4(c->p + 2, &lo) < 0 ||
				    lo < 0xdc00 || lo > 0xdfff)
					return gw_oj_fail(c, -EBADMSG, q,
							  "high surrogate \\u%04x not followed by a low one", cp);
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
				c->p += 6;
			}
			put_utf8(c->w, cp);
		}
	}
}

/* The span of a JSON number at c->p (RFC 8259 grammar), which it passes. */
int gw_oj_number_span(struct gw_oj_ctx *c, const uint8_t **ret, size_t *ret_n)
{
	const uint8_t *p = c->p, *s = p;

#define DIGIT(q) ((q) < c->end && *(q) >= '0' && *(q) <= '9')
	if (p < c->end && *p == '-')
		p++;
	if (!DIGIT(p))
		return gw_oj_fail(c, -EBADMSG, s, "invalid number");
	if (*p == '0')
		p++;
	else
		while (DIGIT(p))
			p++;
	if (p < c->end && *p == '.') {
		p++;
		if (!DIGIT(p))
			return gw_oj_fail(c, -EBADMSG, s, "invalid number");
		while (DIGIT(p))
			p++;
	}
	if (p < c->end && (*p == 'e' || *p == 'E')) {
		p++;
		if (p < c->end && (*p == '+' || *p == '-'))
			p++;
		if (!DIGIT(p))
			return gw_oj_fail(c, -EBADMSG, s, "invalid number");
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
int gw_oj_numeric(struct gw_oj_ctx *c, unsigned type, uint64_t *ret)
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
			return gw_oj_fail(c, -EBADMSG, at, "expected a number in a string without escapes");
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
			struct gw_oj_ctx sub = *c;
			const uint8_t *ss;
			size_t sn;

			sub.p = s, sub.end = q;
			if (n == 0 || gw_oj_number_span(&sub, &ss, &sn) < 0 || sub.p != q)
				return gw_oj_fail(c, -EBADMSG, at, "\"%.*s\" is not a number", (int)(n > 40 ? 40 : n),
						  s);
		}
		c->p = q + 1;
	} else {
		if (c->p >= c->end || !(*c->p == '-' || (*c->p >= '0' && *c->p <= '9')))
			return gw_oj_fail(c, -EBADMSG, at, "expected a number, got %s", gw_oj_what_is(c, at));
		if ((r = gw_oj_number_span(c, &s, &n)) < 0)
			return r;
	}

	if (type == J_DOUBLE) {
		char buf[512];
		double d;

		if (n >= sizeof(buf))
			return gw_oj_fail(c, -EBADMSG, at, "a number of %zu characters is too long for a double", n);
		memcpy(buf, s, n);
		buf[n] = '\0';
		/* The gateway keeps the C locale, so strtod reads '.' as the decimal point. */
		d = strtod(buf, NULL);
		if (isinf(d))
			return gw_oj_fail(c, -EBADMSG, at, "%s is out of range for a double", buf);
		memcpy(ret, &d, sizeof(d));
		return 0;
	}

	r = span_integer(s, n, &neg, &mag);
	if (r == 1)
		return gw_oj_fail(c, -EBADMSG, at, "%.*s is not an integer", (int)(n > 40 ? 40 : n), s);
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
		return gw_oj_fail(c, -EBADMSG, at, "%.*s is out of range for %s", (int)(n > 40 ? 40 : n), s,
				  type_name(type));
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
long gw_oj_base64_decode(uint8_t *b, size_t n)
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

/* Decodes hex at b[0, n) in place; returns the bytes or -1. */
long gw_oj_hex_decode(uint8_t *b, size_t n)
{
	if (n % 2)
		return -1;
	for (size_t i = 0; i < n; i += 2) {
		int hi = sr_hex_value(b[i]), lo = sr_hex_value(b[i + 1]);

		if (hi < 0 || lo < 0)
			return -1;
		b[i / 2] = (uint8_t)(hi << 4 | lo);
	}
	return (long)(n / 2);
}
