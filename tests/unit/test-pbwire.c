// SPDX-License-Identifier: Apache-2.0
/*
 * The protobuf wire layer (common/pbwire.h): the reader on every edge of the
 * encoding (truncation, overlong varints, lengths past the end, bad tags,
 * unknown and deprecated wire types, nesting), with the byte offsets it
 * reports; the writer against the spec's examples; and random round trips
 * writer -> reader, cross-checked both ways with nanopb's independent
 * implementation.
 */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <pb_decode.h>
#include <pb_encode.h>

#include "common/pbwire.h"

static struct sr_pbr rd(const uint8_t *b, size_t n)
{
	return sr_pbr_of(b, n);
}

/* The encoding spec's varint examples, and the edges of each length. */
static const struct {
	uint64_t v;
	size_t n;
	uint8_t b[10];
} varints[] = {
	{ 0, 1, { 0x00 } },
	{ 1, 1, { 0x01 } },
	{ 127, 1, { 0x7f } },
	{ 128, 2, { 0x80, 0x01 } },
	{ 150, 2, { 0x96, 0x01 } },
	{ 300, 2, { 0xac, 0x02 } },
	{ 16383, 2, { 0xff, 0x7f } },
	{ 16384, 3, { 0x80, 0x80, 0x01 } },
	{ UINT32_MAX, 5, { 0xff, 0xff, 0xff, 0xff, 0x0f } },
	{ (uint64_t)-2, 10, { 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01 } },
	{ UINT64_MAX, 10, { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01 } },
};

static void test_varint_known(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(varints) / sizeof(varints[0]); i++) {
		struct sr_pbw w = { 0 };
		struct sr_pbr r = rd(varints[i].b, varints[i].n);
		uint64_t v = 42;

		assert_int_equal(sr_pbr__varint(&r, &v), 0);
		assert_true(v == varints[i].v);
		assert_false(sr_pbr__more(&r));
		/* int32/uint32/enum fields keep the low 32 bits (a negative int32 takes ten bytes). */
		uint32_t v32 = 42;
		r = rd(varints[i].b, varints[i].n);
		assert_int_equal(sr_pbr__varint32(&r, &v32), 0);
		assert_int_equal(v32, (uint32_t)varints[i].v);
		assert_int_equal(sr_pb_varint_size(varints[i].v), varints[i].n);
		sr_pbw__varint(&w, varints[i].v);
		assert_int_equal(sr_pbw__error(&w), 0);
		assert_int_equal(w.len, varints[i].n);
		assert_memory_equal(w.buf, varints[i].b, varints[i].n);
		sr_pbw__free(&w);
	}
}

/* Every proper prefix of a varint is truncated; the reader stays put so the offset names its start. */
static void test_varint_truncated(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(varints) / sizeof(varints[0]); i++)
		for (size_t cut = 0; cut < varints[i].n; cut++) {
			uint8_t buf[11] = { 0x08 }; /* a tag first, so the offset is not 0 */
			struct sr_pbr r;
			uint32_t f;
			unsigned wt;
			uint64_t v;

			memcpy(buf + 1, varints[i].b, cut);
			r = rd(buf, 1 + cut);
			assert_int_equal(sr_pbr__tag(&r, &f, &wt), 0);
			assert_int_equal(sr_pbr__varint(&r, &v), -EBADMSG);
			assert_int_equal(sr_pbr__offset(&r), 1);
			assert_int_equal(sr_pbr__skip(&r, SR_PB_VARINT), -EBADMSG);
			assert_int_equal(sr_pbr__offset(&r), 1);
		}
}

static void test_varint_overflow(void **state)
{
	/* Eleven bytes: the tenth has its continuation bit set. */
	static const uint8_t eleven[] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x81, 0x00 };
	/* Ten bytes whose last carries bit 64 (value above 2^64 - 1). */
	static const uint8_t above[] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02 };
	/* Not minimal but within ten bytes: valid (the spec allows padding), 0. */
	static const uint8_t padded[] = { 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00 };
	/* Eleven bytes of padding. */
	static const uint8_t padded11[] = { 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00 };
	struct sr_pbr r;
	uint64_t v;

	(void)state;
	r = rd(eleven, sizeof(eleven));
	assert_int_equal(sr_pbr__varint(&r, &v), -EOVERFLOW);
	assert_int_equal(sr_pbr__offset(&r), 0);
	r = rd(above, sizeof(above));
	assert_int_equal(sr_pbr__varint(&r, &v), -EOVERFLOW);
	r = rd(padded11, sizeof(padded11));
	assert_int_equal(sr_pbr__varint(&r, &v), -EOVERFLOW);
	r = rd(padded, sizeof(padded));
	assert_int_equal(sr_pbr__varint(&r, &v), 0);
	assert_true(v == 0);
	assert_false(sr_pbr__more(&r));
	/* As a tag, too. */
	r = rd(eleven, sizeof(eleven));
	uint32_t f;
	unsigned wt;
	assert_int_equal(sr_pbr__tag(&r, &f, &wt), -EOVERFLOW);
}

static void test_zigzag(void **state)
{
	static const struct {
		int64_t s;
		uint64_t u;
	} z[] = {
		{ 0, 0 },
		{ -1, 1 },
		{ 1, 2 },
		{ -2, 3 },
		{ 2147483647, 4294967294u },
		{ -2147483648LL, 4294967295u },
		{ INT64_MAX, UINT64_MAX - 1 },
		{ INT64_MIN, UINT64_MAX },
	};
	(void)state;
	for (size_t i = 0; i < sizeof(z) / sizeof(z[0]); i++) {
		assert_true(sr_pb_zigzag_encode(z[i].s) == z[i].u);
		assert_true(sr_pb_zigzag_decode(z[i].u) == z[i].s);
	}
}

static void test_fixed(void **state)
{
	static const uint8_t b[] = { 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08 };
	struct sr_pbr r = rd(b, sizeof(b));
	uint64_t v64;
	uint32_t v32;

	(void)state;
	assert_int_equal(sr_pbr__fixed64(&r, &v64), 0);
	assert_true(v64 == 0x0807060504030201ULL);
	r = rd(b, sizeof(b));
	assert_int_equal(sr_pbr__fixed32(&r, &v32), 0);
	assert_int_equal(v32, 0x04030201u);
	assert_int_equal(sr_pbr__fixed32(&r, &v32), 0);
	assert_int_equal(v32, 0x08070605u);
	assert_int_equal(sr_pbr__fixed32(&r, &v32), -EBADMSG);
	for (size_t cut = 0; cut < 8; cut++) {
		r = rd(b, cut);
		assert_int_equal(sr_pbr__fixed64(&r, &v64), -EBADMSG);
		assert_int_equal(sr_pbr__skip(&r, SR_PB_I64), -EBADMSG);
		assert_int_equal(sr_pbr__offset(&r), 0);
		if (cut < 4) {
			assert_int_equal(sr_pbr__fixed32(&r, &v32), -EBADMSG);
			assert_int_equal(sr_pbr__skip(&r, SR_PB_I32), -EBADMSG);
		}
	}
}

static void test_tags(void **state)
{
	struct sr_pbw w = { 0 };
	struct sr_pbr r;
	uint32_t f;
	unsigned wt;

	(void)state;
	/* Field 0 and wire types 6 and 7 are invalid; the largest field number is fine. */
	static const uint8_t field0[] = { 0x00 }, field0_len[] = { 0x02 }, wt6[] = { 0x0e }, wt7[] = { 0x0f };
	r = rd(field0, 1);
	assert_int_equal(sr_pbr__tag(&r, &f, &wt), -EBADMSG);
	assert_int_equal(sr_pbr__offset(&r), 0);
	r = rd(field0_len, 1);
	assert_int_equal(sr_pbr__tag(&r, &f, &wt), -EBADMSG);
	r = rd(wt6, 1);
	assert_int_equal(sr_pbr__tag(&r, &f, &wt), -EBADMSG);
	r = rd(wt7, 1);
	assert_int_equal(sr_pbr__tag(&r, &f, &wt), -EBADMSG);

	sr_pbw__tag(&w, SR_PB_FIELD_MAX, SR_PB_I32);
	sr_pbw__varint(&w, ((uint64_t)SR_PB_FIELD_MAX + 1) << 3);
	sr_pbw__varint(&w, (uint64_t)UINT32_MAX << 3 | SR_PB_LEN);
	r = rd(w.buf, w.len);
	assert_int_equal(sr_pbr__tag(&r, &f, &wt), 0);
	assert_int_equal(f, SR_PB_FIELD_MAX);
	assert_int_equal(wt, SR_PB_I32);
	size_t at = sr_pbr__offset(&r);
	assert_int_equal(sr_pbr__tag(&r, &f, &wt), -EBADMSG);
	assert_int_equal(sr_pbr__offset(&r), at);
	assert_int_equal(sr_pbr__skip(&r, SR_PB_VARINT), 0);
	assert_int_equal(sr_pbr__tag(&r, &f, &wt), -EBADMSG);
	sr_pbw__free(&w);

	/* Groups are valid tags, refused as values. */
	static const uint8_t group[] = { 0x0b, 0x08, 0x01, 0x0c };
	r = rd(group, sizeof(group));
	assert_int_equal(sr_pbr__tag(&r, &f, &wt), 0);
	assert_int_equal(wt, SR_PB_SGROUP);
	assert_int_equal(sr_pbr__skip(&r, wt), -EPROTONOSUPPORT);
	assert_int_equal(sr_pbr__skip(&r, SR_PB_EGROUP), -EPROTONOSUPPORT);
	assert_int_equal(sr_pbr__skip(&r, 6), -EBADMSG);
	struct sr_pb_field fl;
	r = rd(group, sizeof(group));
	assert_int_equal(sr_pbr__next(&r, &fl), -EPROTONOSUPPORT);
	assert_int_equal(sr_pbr__offset(&r), 0);
}

static void test_lengths(void **state)
{
	struct sr_pb_slice s;
	struct sr_pbr r;
	uint64_t v;

	(void)state;
	/* tag 1 LEN, length 3, 3 bytes: fine; the same claiming 4: past the end. */
	static const uint8_t ok[] = { 0x0a, 0x03, 'a', 'b', 'c' }, past[] = { 0x0a, 0x04, 'a', 'b', 'c' };
	r = rd(ok, sizeof(ok));
	uint32_t f;
	unsigned wt;
	assert_int_equal(sr_pbr__tag(&r, &f, &wt), 0);
	assert_int_equal(sr_pbr__field_bytes(&r, wt, &s), 0);
	assert_int_equal(s.n, 3);
	assert_ptr_equal(s.p, ok + 2);
	assert_false(sr_pbr__more(&r));
	r = rd(past, sizeof(past));
	assert_int_equal(sr_pbr__tag(&r, &f, &wt), 0);
	assert_int_equal(sr_pbr__field_bytes(&r, wt, &s), -EBADMSG);
	assert_int_equal(sr_pbr__offset(&r), 1);
	assert_int_equal(sr_pbr__skip(&r, wt), -EBADMSG);
	assert_int_equal(sr_pbr__offset(&r), 1);

	/* A length near 2^64 must not wrap the bounds check. */
	static const uint8_t huge[] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 'x' };
	r = rd(huge, sizeof(huge));
	assert_int_equal(sr_pbr__bytes(&r, &s), -EBADMSG);
	assert_int_equal(sr_pbr__offset(&r), 0);
	/* A truncated length. */
	r = rd(huge, 3);
	assert_int_equal(sr_pbr__bytes(&r, &s), -EBADMSG);

	/* Every value read with the wrong wire type is refused, the reader unmoved. */
	r = rd(ok, sizeof(ok));
	assert_int_equal(sr_pbr__tag(&r, &f, &wt), 0);
	assert_int_equal(sr_pbr__field_varint(&r, wt, &v), -EBADMSG);
	assert_int_equal(sr_pbr__field_fixed64(&r, wt, &v), -EBADMSG);
	uint32_t v32;
	assert_int_equal(sr_pbr__field_fixed32(&r, wt, &v32), -EBADMSG);
	assert_int_equal(sr_pbr__offset(&r), 1);
	/* An empty buffer, even a NULL one, is an empty message. */
	r = sr_pbr_of(NULL, 0);
	assert_false(sr_pbr__more(&r));
	r = sr_pbr_of(NULL, 5);
	assert_false(sr_pbr__more(&r));
	struct sr_pb_field fl;
	assert_int_equal(sr_pbr__next(&r, &fl), 1);
}

/* Unknown fields of every wire type are skipped whole; the known one after them is found. */
static void test_skip_unknown(void **state)
{
	struct sr_pbw w = { 0 };
	struct sr_pbr r;
	uint32_t f = 0;
	unsigned wt = 0;
	uint64_t v = 0;

	(void)state;
	sr_pbw__uint(&w, 100, 1234567);
	sr_pbw__fixed64(&w, 101, 0x1122334455667788ULL);
	sr_pbw__bytes(&w, 102, "hello", 5);
	sr_pbw__fixed32(&w, 103, 0xdeadbeef);
	sr_pbw__bytes_always(&w, 104, NULL, 0);
	sr_pbw__uint(&w, 1, 7);
	assert_int_equal(sr_pbw__error(&w), 0);
	r = rd(w.buf, w.len);
	while (sr_pbr__more(&r)) {
		assert_int_equal(sr_pbr__tag(&r, &f, &wt), 0);
		if (f == 1)
			assert_int_equal(sr_pbr__field_varint(&r, wt, &v), 0);
		else
			assert_int_equal(sr_pbr__skip(&r, wt), 0);
	}
	assert_true(v == 7);
	sr_pbw__free(&w);
}

/* A decoder that recurses on input (as an AnyValue's array would), depth-limited by sr_pbr__enter. */
static int walk(struct sr_pbr *r, unsigned *ret_deepest)
{
	struct sr_pb_field f;
	int e;

	if (r->depth > *ret_deepest)
		*ret_deepest = r->depth;
	while ((e = sr_pbr__next(r, &f)) == 0) {
		struct sr_pbr sub;

		if (f.wt != SR_PB_LEN)
			continue;
		if ((e = sr_pbr__enter(r, (struct sr_pb_slice){ f.data, f.len }, &sub)) < 0)
			return e;
		if ((e = walk(&sub, ret_deepest)) < 0) {
			*r = sub; /* the offset of the innermost problem */
			return e;
		}
	}
	return e < 0 ? e : 0;
}

static void nest(struct sr_pbw *w, unsigned levels)
{
	size_t marks[256];

	assert_true(levels <= 256);
	for (unsigned i = 0; i < levels; i++)
		marks[i] = sr_pbw__begin(w, 1);
	sr_pbw__uint(w, 2, 1);
	for (unsigned i = levels; i-- > 0;)
		sr_pbw__end(w, marks[i]);
	assert_int_equal(sr_pbw__error(w), 0);
}

static void test_depth(void **state)
{
	struct sr_pbw w = { 0 };
	struct sr_pbr r;
	unsigned deepest = 0;

	(void)state;
	nest(&w, SR_PB_DEFAULT_MAX_DEPTH);
	r = rd(w.buf, w.len);
	assert_int_equal(walk(&r, &deepest), 0);
	assert_int_equal(deepest, SR_PB_DEFAULT_MAX_DEPTH);
	sr_pbw__free(&w);

	nest(&w, SR_PB_DEFAULT_MAX_DEPTH + 1);
	r = rd(w.buf, w.len);
	deepest = 0;
	assert_int_equal(walk(&r, &deepest), -ELOOP);
	assert_int_equal(deepest, SR_PB_DEFAULT_MAX_DEPTH);
	sr_pbw__free(&w);

	/* A caller's own bound. */
	nest(&w, 5);
	r = rd(w.buf, w.len);
	r.max_depth = 4;
	deepest = 0;
	assert_int_equal(walk(&r, &deepest), -ELOOP);
	r = rd(w.buf, w.len);
	r.max_depth = 5;
	assert_int_equal(walk(&r, &deepest), 0);
	sr_pbw__free(&w);

	/* Offsets inside sub-readers count from the outermost message: a bad tag 3 levels down. */
	size_t m1 = sr_pbw__begin(&w, 1), m2 = sr_pbw__begin(&w, 1), m3 = sr_pbw__begin(&w, 1);
	size_t bad = w.len;
	sr_pbw__raw(&w, "\x00", 1);
	sr_pbw__end(&w, m3);
	sr_pbw__end(&w, m2);
	sr_pbw__end(&w, m1);
	bad -= 3 * 4; /* each length took 1 byte of the 5 reserved */
	r = rd(w.buf, w.len);
	deepest = 0;
	assert_int_equal(walk(&r, &deepest), -EBADMSG);
	assert_int_equal(sr_pbr__offset(&r), bad);
	assert_int_equal(bad, 6);
	sr_pbw__free(&w);
}

static void test_packed(void **state)
{
	static const int32_t idx[] = { 0, 1, 127, 128, 300, -1, INT32_MAX, INT32_MIN };
	struct sr_pbw w = { 0 };
	struct sr_pb_field f;
	struct sr_pbr r, el;
	size_t n = 0;
	uint64_t v = 0;

	(void)state;
	sr_pbw__packed_i32(&w, 1, idx, sizeof(idx) / sizeof(idx[0]));
	sr_pbw__uint(&w, 1, 5); /* the same field unpacked: parsers must take both */
	size_t m = sr_pbw__begin(&w, 2);
	sr_pbw__put_fixed64(&w, 1);
	sr_pbw__put_fixed64(&w, UINT64_MAX);
	sr_pbw__end(&w, m);
	sr_pbw__fixed64(&w, 2, 3);
	m = sr_pbw__begin(&w, 3);
	sr_pbw__put_fixed32(&w, 9);
	sr_pbw__end(&w, m);
	sr_pbw__packed_i32(&w, 4, idx, 0); /* nothing */
	assert_int_equal(sr_pbw__error(&w), 0);

	r = rd(w.buf, w.len);
	assert_int_equal(sr_pbr__next(&r, &f), 0);
	assert_int_equal(sr_pbr__elements(&r, &f, SR_PB_VARINT, &el), 0);
	assert_int_equal(sr_pbr__count_elements(&el, SR_PB_VARINT, &n), 0);
	assert_int_equal(n, sizeof(idx) / sizeof(idx[0]));
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(sr_pbr__varint(&el, &v), 0);
		assert_int_equal((int32_t)v, idx[i]);
	}
	assert_false(sr_pbr__more(&el));
	assert_int_equal(sr_pbr__next(&r, &f), 0);
	assert_int_equal(sr_pbr__elements(&r, &f, SR_PB_VARINT, &el), 0);
	assert_int_equal(sr_pbr__count_elements(&el, SR_PB_VARINT, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(sr_pbr__varint(&el, &v), 0);
	assert_true(v == 5);
	/* A varint field is not a fixed64 one. */
	assert_int_equal(sr_pbr__elements(&r, &f, SR_PB_I64, &el), -EBADMSG);

	assert_int_equal(sr_pbr__next(&r, &f), 0);
	assert_int_equal(sr_pbr__elements(&r, &f, SR_PB_I64, &el), 0);
	assert_int_equal(sr_pbr__count_elements(&el, SR_PB_I64, &n), 0);
	assert_int_equal(n, 2);
	assert_int_equal(sr_pbr__fixed64(&el, &v), 0);
	assert_true(v == 1);
	assert_int_equal(sr_pbr__fixed64(&el, &v), 0);
	assert_true(v == UINT64_MAX);
	assert_int_equal(sr_pbr__next(&r, &f), 0);
	assert_int_equal(sr_pbr__elements(&r, &f, SR_PB_I64, &el), 0);
	assert_int_equal(sr_pbr__fixed64(&el, &v), 0);
	assert_true(v == 3);
	assert_false(sr_pbr__more(&el));
	assert_int_equal(sr_pbr__next(&r, &f), 0);
	/* 4 bytes are one fixed32, not a whole fixed64. */
	assert_int_equal(sr_pbr__elements(&r, &f, SR_PB_I64, &el), -EBADMSG);
	assert_int_equal(sr_pbr__elements(&r, &f, SR_PB_I32, &el), 0);
	assert_int_equal(sr_pbr__count_elements(&el, SR_PB_I32, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(sr_pbr__elements(&r, &f, SR_PB_LEN, &el), -EINVAL);
	assert_int_equal(sr_pbr__next(&r, &f), 1);
	sr_pbw__free(&w);

	/* A packed body ending inside a varint. */
	static const uint8_t cut[] = { 0x0a, 0x02, 0x01, 0x80 };
	r = rd(cut, sizeof(cut));
	assert_int_equal(sr_pbr__next(&r, &f), 0);
	assert_int_equal(sr_pbr__elements(&r, &f, SR_PB_VARINT, &el), 0);
	assert_int_equal(sr_pbr__count_elements(&el, SR_PB_VARINT, &n), -EBADMSG);
	assert_int_equal(sr_pbr__varint(&el, &v), 0);
	assert_int_equal(sr_pbr__varint(&el, &v), -EBADMSG);
	assert_int_equal(sr_pbr__offset(&el), 3);
}

/* Lengths of nested messages at the edges of each varint size, closed in place (backpatched) or given up front. */
static void test_writer_lengths(void **state)
{
	static const size_t sizes[] = { 0, 1, 127, 128, 16383, 16384, 2097151, 2097152 };
	uint8_t *body = calloc(1, 2097152);

	(void)state;
	assert_non_null(body);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		struct sr_pbw a = { 0 }, b = { 0 };
		struct sr_pbr r;
		struct sr_pb_field f;
		size_t m;

		body[0] = (uint8_t)i;
		m = sr_pbw__begin(&a, 7);
		sr_pbw__raw(&a, body, sizes[i]);
		sr_pbw__end(&a, m);
		sr_pbw__len_prefix(&b, 7, sizes[i]);
		sr_pbw__raw(&b, body, sizes[i]);
		assert_int_equal(sr_pbw__error(&a), 0);
		assert_int_equal(a.len, 1 + sr_pb_varint_size(sizes[i]) + sizes[i]);
		assert_int_equal(a.len, b.len);
		assert_memory_equal(a.buf, b.buf, a.len);
		r = rd(a.buf, a.len);
		assert_int_equal(sr_pbr__next(&r, &f), 0);
		assert_int_equal(f.number, 7);
		assert_int_equal(f.wt, SR_PB_LEN);
		assert_int_equal(f.len, sizes[i]);
		assert_ptr_equal(f.start, a.buf);
		assert_ptr_equal(f.end, a.buf + a.len);
		assert_memory_equal(f.data, body, sizes[i]);
		sr_pbw__free(&a);
		sr_pbw__free(&b);
	}
	free(body);
}

static void test_writer_errors(void **state)
{
	struct sr_pbw w = { 0 };

	(void)state;
	/* proto3 defaults are not written; empty repeated elements are. */
	sr_pbw__uint(&w, 1, 0);
	sr_pbw__int(&w, 1, 0);
	sr_pbw__sint(&w, 1, 0);
	sr_pbw__bool(&w, 1, false);
	sr_pbw__fixed64(&w, 1, 0);
	sr_pbw__fixed32(&w, 1, 0);
	sr_pbw__double(&w, 1, 0.0);
	sr_pbw__bytes(&w, 1, "", 0);
	sr_pbw__string(&w, 1, NULL);
	sr_pbw__string(&w, 1, "");
	assert_int_equal(w.len, 0);
	sr_pbw__bytes_always(&w, 1, "", 0);
	assert_int_equal(w.len, 2);
	/* Longer than protobuf allows: a sticky -EMSGSIZE, nothing written. */
	sr_pbw__len_prefix(&w, 1, (size_t)SR_PB_MAX_LEN + 1);
	assert_int_equal(sr_pbw__error(&w), -EMSGSIZE);
	assert_int_equal(w.len, 2);
	sr_pbw__uint(&w, 1, 1);
	assert_int_equal(w.len, 2);
	assert_int_equal(sr_pbw__begin(&w, 1), 0);
	sr_pbw__free(&w);
	assert_int_equal(sr_pbw__error(&w), 0);
	/* A failed allocation: sticky -ENOMEM, later calls are no-ops. */
	assert_int_equal(sr_pbw__grow(&w, SIZE_MAX - 8), -ENOMEM);
	sr_pbw__string(&w, 1, "x");
	assert_int_equal(w.len, 0);
	assert_int_equal(sr_pbw__error(&w), -ENOMEM);
	sr_pbw__free(&w);
}

static uint64_t rnd_state = 0x9e3779b97f4a7c15ULL;

static uint64_t rnd(void)
{
	/* xorshift64*: reproducible, and every bit length gets its turn below. */
	rnd_state ^= rnd_state >> 12;
	rnd_state ^= rnd_state << 25;
	rnd_state ^= rnd_state >> 27;
	return rnd_state * 2685821657736338717ULL;
}

/* A value of a random bit length, so short and long varints are equally likely. */
static uint64_t rnd_value(void)
{
	unsigned bits = (unsigned)(rnd() % 65);

	return bits == 0 ? 0 : rnd() >> (64 - bits);
}

enum kind { K_UINT, K_SINT, K_FIXED64, K_FIXED32, K_BYTES, K_NESTED, K_MAX };

struct item {
	enum kind k;
	uint32_t field;
	uint64_t v;
	uint8_t bytes[40];
	size_t n;
};

static void gen(struct item *it)
{
	it->k = (enum kind)(rnd() % K_MAX);
	it->field = 1 + (uint32_t)(rnd() % 3 == 0 ? rnd() % SR_PB_FIELD_MAX : rnd() % 20);
	it->v = rnd_value() | 1; /* proto3 omits zeros: keep every item on the wire */
	if (it->k == K_FIXED32)
		it->v = (uint32_t)it->v | 1;
	it->n = (size_t)(rnd() % sizeof(it->bytes));
	for (size_t i = 0; i < it->n; i++)
		it->bytes[i] = (uint8_t)rnd();
}

static void put(struct sr_pbw *w, const struct item *it)
{
	size_t m;

	switch (it->k) {
	case K_UINT:
		sr_pbw__uint(w, it->field, it->v);
		break;
	case K_SINT:
		sr_pbw__sint(w, it->field, (int64_t)it->v);
		break;
	case K_FIXED64:
		sr_pbw__fixed64(w, it->field, it->v);
		break;
	case K_FIXED32:
		sr_pbw__fixed32(w, it->field, (uint32_t)it->v);
		break;
	case K_BYTES:
		sr_pbw__bytes_always(w, it->field, it->bytes, it->n);
		break;
	case K_NESTED:
		m = sr_pbw__begin(w, it->field);
		sr_pbw__uint(w, 1, it->v);
		sr_pbw__bytes_always(w, 2, it->bytes, it->n);
		sr_pbw__end(w, m);
		break;
	default:
		fail();
	}
}

static void check(struct sr_pbr *r, const struct item *it)
{
	struct sr_pb_slice s = { 0 };
	struct sr_pbr sub = { 0 };
	uint32_t f = 0, v32 = 0;
	unsigned wt = 0;
	uint64_t v = 0;

	assert_int_equal(sr_pbr__tag(r, &f, &wt), 0);
	assert_int_equal(f, it->field);
	switch (it->k) {
	case K_UINT:
		assert_int_equal(sr_pbr__field_varint(r, wt, &v), 0);
		assert_true(v == it->v);
		break;
	case K_SINT:
		assert_int_equal(sr_pbr__field_varint(r, wt, &v), 0);
		assert_true(sr_pb_zigzag_decode(v) == (int64_t)it->v);
		break;
	case K_FIXED64:
		assert_int_equal(sr_pbr__field_fixed64(r, wt, &v), 0);
		assert_true(v == it->v);
		break;
	case K_FIXED32:
		assert_int_equal(sr_pbr__field_fixed32(r, wt, &v32), 0);
		assert_true(v32 == (uint32_t)it->v);
		break;
	case K_BYTES:
		assert_int_equal(sr_pbr__field_bytes(r, wt, &s), 0);
		assert_int_equal(s.n, it->n);
		assert_memory_equal(s.p, it->bytes, it->n);
		break;
	case K_NESTED:
		assert_int_equal(sr_pbr__field_bytes(r, wt, &s), 0);
		assert_int_equal(sr_pbr__enter(r, s, &sub), 0);
		assert_int_equal(sr_pbr__tag(&sub, &f, &wt), 0);
		assert_int_equal(sr_pbr__field_varint(&sub, wt, &v), 0);
		assert_true(v == it->v);
		assert_int_equal(sr_pbr__tag(&sub, &f, &wt), 0);
		assert_int_equal(sr_pbr__field_bytes(&sub, wt, &s), 0);
		assert_int_equal(s.n, it->n);
		assert_memory_equal(s.p, it->bytes, it->n);
		assert_false(sr_pbr__more(&sub));
		break;
	default:
		fail();
	}
}

/* nanopb reads what we wrote: an independent decoder of the same bytes. */
static void check_nanopb(pb_istream_t *is, const struct item *it)
{
	pb_wire_type_t wt;
	uint32_t f, v32;
	uint64_t v;
	int64_t sv;
	bool eof;
	uint8_t buf[sizeof(it->bytes)];

	assert_true(pb_decode_tag(is, &wt, &f, &eof));
	assert_int_equal(f, it->field);
	switch (it->k) {
	case K_UINT:
		assert_int_equal(wt, PB_WT_VARINT);
		assert_true(pb_decode_varint(is, &v));
		assert_true(v == it->v);
		break;
	case K_SINT:
		assert_int_equal(wt, PB_WT_VARINT);
		assert_true(pb_decode_svarint(is, &sv));
		assert_true(sv == (int64_t)it->v);
		break;
	case K_FIXED64:
		assert_int_equal(wt, PB_WT_64BIT);
		assert_true(pb_decode_fixed64(is, &v));
		assert_true(v == it->v);
		break;
	case K_FIXED32:
		assert_int_equal(wt, PB_WT_32BIT);
		assert_true(pb_decode_fixed32(is, &v32));
		assert_true(v32 == (uint32_t)it->v);
		break;
	case K_BYTES:
		assert_int_equal(wt, PB_WT_STRING);
		assert_true(pb_decode_varint(is, &v));
		assert_true(v == it->n);
		assert_true(pb_read(is, buf, it->n));
		assert_memory_equal(buf, it->bytes, it->n);
		break;
	case K_NESTED:
		assert_int_equal(wt, PB_WT_STRING);
		assert_true(pb_skip_field(is, wt));
		break;
	default:
		fail();
	}
}

/* What nanopb writes, we read. */
static void put_nanopb(pb_ostream_t *os, const struct item *it)
{
	switch (it->k) {
	case K_UINT:
		assert_true(pb_encode_tag(os, PB_WT_VARINT, it->field) && pb_encode_varint(os, it->v));
		break;
	case K_SINT:
		assert_true(pb_encode_tag(os, PB_WT_VARINT, it->field) && pb_encode_svarint(os, (int64_t)it->v));
		break;
	case K_FIXED64:
		assert_true(pb_encode_tag(os, PB_WT_64BIT, it->field) && pb_encode_fixed64(os, &it->v));
		break;
	case K_FIXED32: {
		uint32_t v32 = (uint32_t)it->v;
		assert_true(pb_encode_tag(os, PB_WT_32BIT, it->field) && pb_encode_fixed32(os, &v32));
		break;
	}
	case K_BYTES:
		assert_true(pb_encode_tag(os, PB_WT_STRING, it->field) && pb_encode_string(os, it->bytes, it->n));
		break;
	case K_NESTED: {
		/* The nested body by hand, then as a string field. */
		uint8_t body[64];
		pb_ostream_t bs = pb_ostream_from_buffer(body, sizeof(body));
		assert_true(pb_encode_tag(&bs, PB_WT_VARINT, 1) && pb_encode_varint(&bs, it->v));
		assert_true(pb_encode_tag(&bs, PB_WT_STRING, 2) && pb_encode_string(&bs, it->bytes, it->n));
		assert_true(pb_encode_tag(os, PB_WT_STRING, it->field) && pb_encode_string(os, body, bs.bytes_written));
		break;
	}
	default:
		fail();
	}
}

#define N_ITEMS 2000

static void test_roundtrip_random(void **state)
{
	struct item *items = calloc(N_ITEMS, sizeof(*items));
	size_t cap = N_ITEMS * 80;
	uint8_t *nbuf = malloc(cap);
	struct sr_pbw w = { 0 };
	struct sr_pbr r;

	(void)state;
	assert_non_null(items);
	assert_non_null(nbuf);
	for (int round = 0; round < 20; round++) {
		for (size_t i = 0; i < N_ITEMS; i++) {
			gen(&items[i]);
			put(&w, &items[i]);
		}
		assert_int_equal(sr_pbw__error(&w), 0);
		/* writer -> reader */
		r = rd(w.buf, w.len);
		for (size_t i = 0; i < N_ITEMS; i++)
			check(&r, &items[i]);
		assert_false(sr_pbr__more(&r));
		/* writer -> nanopb */
		pb_istream_t is = pb_istream_from_buffer(w.buf, w.len);
		for (size_t i = 0; i < N_ITEMS; i++)
			check_nanopb(&is, &items[i]);
		assert_int_equal(is.bytes_left, 0);
		/* nanopb -> reader: the same bytes */
		pb_ostream_t os = pb_ostream_from_buffer(nbuf, cap);
		for (size_t i = 0; i < N_ITEMS; i++)
			put_nanopb(&os, &items[i]);
		assert_int_equal(os.bytes_written, w.len);
		assert_memory_equal(nbuf, w.buf, w.len);
		r = rd(nbuf, os.bytes_written);
		for (size_t i = 0; i < N_ITEMS; i++)
			check(&r, &items[i]);
		/* Every cut of the stream reads up to the cut and then fails without moving, or ends cleanly. */
		size_t at = (size_t)(rnd() % (w.len + 1));
		struct sr_pb_field f;
		int e;
		r = rd(w.buf, at);
		while ((e = sr_pbr__next(&r, &f)) == 0)
			;
		assert_true(e == 1 || e == -EBADMSG);
		assert_true(sr_pbr__offset(&r) <= at);
		w.len = 0;
	}
	sr_pbw__free(&w);
	free(nbuf);
	free(items);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_varint_known),
		cmocka_unit_test(test_varint_truncated),
		cmocka_unit_test(test_varint_overflow),
		cmocka_unit_test(test_zigzag),
		cmocka_unit_test(test_fixed),
		cmocka_unit_test(test_tags),
		cmocka_unit_test(test_lengths),
		cmocka_unit_test(test_skip_unknown),
		cmocka_unit_test(test_depth),
		cmocka_unit_test(test_packed),
		cmocka_unit_test(test_writer_lengths),
		cmocka_unit_test(test_writer_errors),
		cmocka_unit_test(test_roundtrip_random),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
