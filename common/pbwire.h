/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The protobuf wire format for the hot paths (docs/gateway.md, "The wire
 * layer"): one bounds-checked reader for untrusted bytes and one writer that
 * appends fields to a growable buffer in one pass. Both work on field
 * numbers from the nanopb-generated headers (*_tag), so the .proto files stay
 * the single source of truth; nanopb itself stays for cold, small messages.
 *
 * Reader: every read checks what is left of its message before touching a
 * byte, and a failed read leaves the reader where it was, so
 * sr_pbr__offset() names the byte of the first problem (counted from the
 * start of the outermost message, also inside sub-readers). Errors:
 * -EBADMSG (truncated, a length past the end, field number 0 or above
 * SR_PB_FIELD_MAX, wire type 6 or 7, a value of the wrong wire type),
 * -EOVERFLOW (a varint longer than SR_PB_VARINT_MAX_BYTES or above 64 bits),
 * -EPROTONOSUPPORT (a deprecated group), -ELOOP (sr_pbr__enter past
 * max_depth).
 *
 * Writer: nested messages reserve a maximal (5-byte) length prefix and
 * close it with a memmove of the body, cheap for the small messages that
 * dominate (nanopb's pb_encode would size every level twice); a body whose
 * length is known up front takes sr_pbw__len_prefix() instead. Errors are
 * sticky: after a failure every call is a no-op and sr_pbw__error() returns
 * -ENOMEM, or -EMSGSIZE for a field longer than SR_PB_MAX_LEN.
 */
#ifndef SR_PBWIRE_H
#define SR_PBWIRE_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Wire types (protobuf encoding spec). Groups are recognized in tags and refused as values. */
enum {
	SR_PB_VARINT = 0,
	SR_PB_I64 = 1,
	SR_PB_LEN = 2,
	SR_PB_SGROUP = 3,
	SR_PB_EGROUP = 4,
	SR_PB_I32 = 5,
};

/* The largest field number (2^29 - 1). */
#define SR_PB_FIELD_MAX 536870911u
/* Bytes of the longest varint (a 64-bit value); an eleventh byte is an error. */
#define SR_PB_VARINT_MAX_BYTES 10
/* Nesting sr_pbr__enter() allows unless the caller sets max_depth (protobuf's C++ library allows 100). */
#define SR_PB_DEFAULT_MAX_DEPTH 64
/* The longest length-delimited field the writer writes (protobuf's own limit, 2 GiB - 1). */
#define SR_PB_MAX_LEN 0x7fffffffu

static inline uint64_t sr_pb_zigzag_encode(int64_t v)
{
	return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static inline int64_t sr_pb_zigzag_decode(uint64_t v)
{
	return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

static inline size_t sr_pb_varint_size(uint64_t v)
{
	size_t n = 1;

	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

/* ---- reader ---- */

struct sr_pb_slice {
	const uint8_t *p;
	size_t n;
};

struct sr_pbr {
	const uint8_t *p, *end;
	const uint8_t *base; /* the outermost message: offsets count from here */
	unsigned depth, max_depth;
};

/* One whole field, as sr_pbr__next() reads it. */
struct sr_pb_field {
	uint32_t number;
	unsigned wt;
	const uint8_t *start; /* its tag */
	const uint8_t *data;  /* its value: the payload of LEN, the encoded bytes of the others */
	size_t len;	      /* bytes at data */
	const uint8_t *end;   /* past the field */
	uint64_t value;	      /* VARINT, I64, I32 (little-endian) values; LEN: len */
};

/* A reader of buf[0, len); a NULL buf is an empty message. */
static inline struct sr_pbr sr_pbr_of(const void *buf, size_t len)
{
	const uint8_t *b = buf ? (const uint8_t *)buf : (const uint8_t *)"";

	if (!buf)
		len = 0;

	return (struct sr_pbr){ .p = b, .end = b + len, .base = b, .max_depth = SR_PB_DEFAULT_MAX_DEPTH };
}

/* Whether bytes are left in the message. */
static inline bool sr_pbr__more(const struct sr_pbr *r)
{
	return r->p < r->end;
}

static inline size_t sr_pbr__remaining(const struct sr_pbr *r)
{
	return (size_t)(r->end - r->p);
}

/* Where the reader is (after a failed read: where the bad item starts), from the start of the outermost message. */
static inline size_t sr_pbr__offset(const struct sr_pbr *r)
{
	return (size_t)(r->p - r->base);
}

static inline int sr_pbr__varint(struct sr_pbr *r, uint64_t *ret)
{
	const uint8_t *p = r->p;
	uint64_t v = 0;

	if (p < r->end && *p < 0x80) {
		*ret = *p;
		r->p = p + 1;
		return 0;
	}
	for (unsigned shift = 0;; shift += 7) {
		uint8_t b;

		if (p >= r->end)
			return -EBADMSG;
		b = *p++;
		/* The tenth byte holds bit 63 alone; more, or an eleventh byte, overflows. */
		if (shift == 63 && b > 1)
			return -EOVERFLOW;
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			break;
	}
	*ret = v;
	r->p = p;
	return 0;
}

/* A varint that must fit 32 bits (int32/uint32/enum fields take the low 32 bits of 64, as the spec says). */
static inline int sr_pbr__varint32(struct sr_pbr *r, uint32_t *ret)
{
	uint64_t v;
	int e = sr_pbr__varint(r, &v);

	if (e < 0)
		return e;
	*ret = (uint32_t)v;
	return 0;
}

static inline int sr_pbr__fixed64(struct sr_pbr *r, uint64_t *ret)
{
	uint64_t v = 0;

	if (r->end - r->p < 8)
		return -EBADMSG;
	for (int i = 7; i >= 0; i--)
		v = (v << 8) | r->p[i];
	r->p += 8;
	*ret = v;
	return 0;
}

static inline int sr_pbr__fixed32(struct sr_pbr *r, uint32_t *ret)
{
	uint32_t v = 0;

	if (r->end - r->p < 4)
		return -EBADMSG;
	for (int i = 3; i >= 0; i--)
		v = (v << 8) | r->p[i];
	r->p += 4;
	*ret = v;
	return 0;
}

/* A length-delimited value: its length is checked against what remains; ret points into the message. */
static inline int sr_pbr__bytes(struct sr_pbr *r, struct sr_pb_slice *ret)
{
	const uint8_t *p = r->p;
	uint64_t n;
	int e = sr_pbr__varint(r, &n);

	if (e < 0)
		return e;
	if (n > sr_pbr__remaining(r)) {
		r->p = p;
		return -EBADMSG;
	}
	ret->p = r->p;
	ret->n = (size_t)n;
	r->p += n;
	return 0;
}

/* A field's tag: number in [1, SR_PB_FIELD_MAX], wire type 0 to 5. */
static inline int sr_pbr__tag(struct sr_pbr *r, uint32_t *ret_field, unsigned *ret_wt)
{
	const uint8_t *p = r->p;
	uint64_t k;
	int e = sr_pbr__varint(r, &k);

	if (e < 0)
		return e;
	if ((k >> 3) == 0 || (k >> 3) > SR_PB_FIELD_MAX || (k & 7) > SR_PB_I32) {
		r->p = p;
		return -EBADMSG;
	}
	*ret_field = (uint32_t)(k >> 3);
	*ret_wt = (unsigned)(k & 7);
	return 0;
}

/* Skips a field's value of wire type wt (after its tag). Groups are refused: proto3 has none. */
static inline int sr_pbr__skip(struct sr_pbr *r, unsigned wt)
{
	struct sr_pb_slice s;
	uint64_t v;

	switch (wt) {
	case SR_PB_VARINT:
		return sr_pbr__varint(r, &v);
	case SR_PB_I64:
		return sr_pbr__fixed64(r, &v);
	case SR_PB_LEN:
		return sr_pbr__bytes(r, &s);
	case SR_PB_I32:
		if (r->end - r->p < 4)
			return -EBADMSG;
		r->p += 4;
		return 0;
	case SR_PB_SGROUP:
	case SR_PB_EGROUP:
		return -EPROTONOSUPPORT;
	default:
		return -EBADMSG;
	}
}

/* A field's value that must be of one wire type (-EBADMSG otherwise). */
static inline int sr_pbr__field_varint(struct sr_pbr *r, unsigned wt, uint64_t *ret)
{
	return wt == SR_PB_VARINT ? sr_pbr__varint(r, ret) : -EBADMSG;
}

static inline int sr_pbr__field_bytes(struct sr_pbr *r, unsigned wt, struct sr_pb_slice *ret)
{
	return wt == SR_PB_LEN ? sr_pbr__bytes(r, ret) : -EBADMSG;
}

static inline int sr_pbr__field_fixed64(struct sr_pbr *r, unsigned wt, uint64_t *ret)
{
	return wt == SR_PB_I64 ? sr_pbr__fixed64(r, ret) : -EBADMSG;
}

static inline int sr_pbr__field_fixed32(struct sr_pbr *r, unsigned wt, uint32_t *ret)
{
	return wt == SR_PB_I32 ? sr_pbr__fixed32(r, ret) : -EBADMSG;
}

/*
 * A reader of a sub-message s (read from r), for decoders whose nesting the
 * schema bounds: offsets keep counting from r's outermost message.
 */
static inline struct sr_pbr sr_pbr__sub(const struct sr_pbr *r, struct sr_pb_slice s)
{
	return (struct sr_pbr){
		.p = s.p, .end = s.p + s.n, .base = r->base, .depth = r->depth + 1, .max_depth = r->max_depth
	};
}

/* The same for decoders that recurse on input: -ELOOP past r's max_depth. */
static inline int sr_pbr__enter(const struct sr_pbr *r, struct sr_pb_slice s, struct sr_pbr *ret)
{
	if (r->depth >= r->max_depth)
		return -ELOOP;
	*ret = sr_pbr__sub(r, s);
	return 0;
}

/*
 * Reads the next field whole (generic walks, raw copies). Returns 0, 1 at
 * the end of the message, or a negative errno (the reader stays at the tag).
 */
static inline int sr_pbr__next(struct sr_pbr *r, struct sr_pb_field *ret)
{
	const uint8_t *start = r->p;
	struct sr_pb_slice s = { 0 };
	uint32_t v32 = 0;
	int e;

	if (!sr_pbr__more(r))
		return 1;
	if ((e = sr_pbr__tag(r, &ret->number, &ret->wt)) < 0)
		return e;
	ret->start = start;
	ret->data = r->p;
	switch (ret->wt) {
	case SR_PB_VARINT:
		e = sr_pbr__varint(r, &ret->value);
		break;
	case SR_PB_I64:
		e = sr_pbr__fixed64(r, &ret->value);
		break;
	case SR_PB_I32:
		e = sr_pbr__fixed32(r, &v32);
		ret->value = v32;
		break;
	case SR_PB_LEN:
		e = sr_pbr__bytes(r, &s);
		ret->data = s.p;
		ret->value = s.n;
		break;
	default:
		e = sr_pbr__skip(r, ret->wt); /* groups: refused */
	}
	if (e < 0) {
		r->p = start;
		return e;
	}
	ret->len = ret->wt == SR_PB_LEN ? (size_t)ret->value : (size_t)(r->p - ret->data);
	ret->end = r->p;
	return 0;
}

/*
 * The elements of a repeated scalar field f (read from r) whose elements
 * have wire type elem_wt (VARINT, I64 or I32), packed or not (parsers must
 * take both): a reader over them, to read with sr_pbr__varint/fixed64/fixed32
 * while sr_pbr__more(). -EBADMSG when f is neither, or a packed fixed-width
 * body is not a whole number of elements.
 */
int sr_pbr__elements(const struct sr_pbr *r, const struct sr_pb_field *f, unsigned elem_wt, struct sr_pbr *ret);
/* How many elements such a reader holds (every varint validated). */
int sr_pbr__count_elements(const struct sr_pbr *elems, unsigned elem_wt, size_t *ret_n);

/* ---- writer ---- */

struct sr_pbw {
	uint8_t *buf;
	size_t len, cap;
	int error;
};

/* Makes room for n more bytes (the slow path of sr_pbw__reserve): 0 or sets the sticky error. */
int sr_pbw__grow(struct sr_pbw *w, size_t n);

static inline int sr_pbw__error(const struct sr_pbw *w)
{
	return w->error;
}

/* Frees the buffer; the writer is empty and usable again. */
static inline void sr_pbw__free(struct sr_pbw *w)
{
	free(w->buf);
	*w = (struct sr_pbw){ 0 };
}

static inline bool sr_pbw__reserve(struct sr_pbw *w, size_t n)
{
	if (__builtin_expect(w->error != 0, 0))
		return false;
	if (__builtin_expect(n > w->cap - w->len, 0))
		return sr_pbw__grow(w, n) == 0;
	return true;
}

/* Writes v at p (room for SR_PB_VARINT_MAX_BYTES), returns the byte after it. */
static inline uint8_t *sr_pb_put_varint(uint8_t *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	return p;
}

/* Bytes as they are (a field copied whole, a body built elsewhere). */
static inline void sr_pbw__raw(struct sr_pbw *w, const void *data, size_t n)
{
	if (!sr_pbw__reserve(w, n))
		return;
	if (n)
		memcpy(w->buf + w->len, data, n);
	w->len += n;
}

/* A field read by sr_pbr__next(), copied as it is. */
static inline void sr_pbw__copy_field(struct sr_pbw *w, const struct sr_pb_field *f)
{
	sr_pbw__raw(w, f->start, (size_t)(f->end - f->start));
}

static inline void sr_pbw__varint(struct sr_pbw *w, uint64_t v)
{
	if (!sr_pbw__reserve(w, SR_PB_VARINT_MAX_BYTES))
		return;
	w->len = (size_t)(sr_pb_put_varint(w->buf + w->len, v) - w->buf);
}

static inline void sr_pbw__put_fixed64(struct sr_pbw *w, uint64_t v)
{
	if (!sr_pbw__reserve(w, 8))
		return;
	for (int i = 0; i < 8; i++)
		w->buf[w->len++] = (uint8_t)(v >> (8 * i));
}

static inline void sr_pbw__put_fixed32(struct sr_pbw *w, uint32_t v)
{
	if (!sr_pbw__reserve(w, 4))
		return;
	for (int i = 0; i < 4; i++)
		w->buf[w->len++] = (uint8_t)(v >> (8 * i));
}

static inline void sr_pbw__tag(struct sr_pbw *w, uint32_t field, unsigned wt)
{
	sr_pbw__varint(w, ((uint64_t)field << 3) | wt);
}

/* proto3: zero values are not written. */
static inline void sr_pbw__uint(struct sr_pbw *w, uint32_t field, uint64_t v)
{
	if (v == 0)
		return;
	sr_pbw__tag(w, field, SR_PB_VARINT);
	sr_pbw__varint(w, v);
}

/* int32/int64 fields: negative values take ten bytes, as the spec says. */
static inline void sr_pbw__int(struct sr_pbw *w, uint32_t field, int64_t v)
{
	sr_pbw__uint(w, field, (uint64_t)v);
}

/* sint32/sint64 fields (zigzag). */
static inline void sr_pbw__sint(struct sr_pbw *w, uint32_t field, int64_t v)
{
	sr_pbw__uint(w, field, sr_pb_zigzag_encode(v));
}

static inline void sr_pbw__bool(struct sr_pbw *w, uint32_t field, bool v)
{
	sr_pbw__uint(w, field, v ? 1 : 0);
}

static inline void sr_pbw__fixed64(struct sr_pbw *w, uint32_t field, uint64_t v)
{
	if (v == 0)
		return;
	sr_pbw__tag(w, field, SR_PB_I64);
	sr_pbw__put_fixed64(w, v);
}

static inline void sr_pbw__fixed32(struct sr_pbw *w, uint32_t field, uint32_t v)
{
	if (v == 0)
		return;
	sr_pbw__tag(w, field, SR_PB_I32);
	sr_pbw__put_fixed32(w, v);
}

static inline void sr_pbw__double(struct sr_pbw *w, uint32_t field, double d)
{
	uint64_t v;

	memcpy(&v, &d, sizeof(v));
	sr_pbw__fixed64(w, field, v);
}

/* Tag and length of a length-delimited field whose len bytes of body the caller writes next. */
static inline void sr_pbw__len_prefix(struct sr_pbw *w, uint32_t field, size_t len)
{
	if (len > SR_PB_MAX_LEN) {
		if (!w->error)
			w->error = -EMSGSIZE;
		return;
	}
	sr_pbw__tag(w, field, SR_PB_LEN);
	sr_pbw__varint(w, len);
}

/* Always written, even when empty (repeated string elements must keep their place). */
static inline void sr_pbw__bytes_always(struct sr_pbw *w, uint32_t field, const void *data, size_t len)
{
	sr_pbw__len_prefix(w, field, len);
	sr_pbw__raw(w, data, len);
}

static inline void sr_pbw__bytes(struct sr_pbw *w, uint32_t field, const void *data, size_t len)
{
	if (len)
		sr_pbw__bytes_always(w, field, data, len);
}

static inline void sr_pbw__string(struct sr_pbw *w, uint32_t field, const char *s)
{
	if (s)
		sr_pbw__bytes(w, field, s, strlen(s));
}

/* Opens a length-delimited field whose length is not known yet; returns the mark for sr_pbw__end(). */
static inline size_t sr_pbw__begin(struct sr_pbw *w, uint32_t field)
{
	sr_pbw__tag(w, field, SR_PB_LEN);
	if (!sr_pbw__reserve(w, 5))
		return 0;
	w->len += 5;
	return w->len;
}

/* Closes it: writes the minimal length varint into the 5 bytes reserved and slides the body back. */
static inline void sr_pbw__end(struct sr_pbw *w, size_t mark)
{
	size_t body, n;

	if (w->error)
		return;
	body = w->len - mark;
	if (body > SR_PB_MAX_LEN) {
		w->error = -EMSGSIZE;
		return;
	}
	n = sr_pb_varint_size(body);
	sr_pb_put_varint(w->buf + mark - 5, body);
	if (n < 5) {
		memmove(w->buf + mark - 5 + n, w->buf + mark, body);
		w->len -= 5 - n;
	}
}

/* A packed repeated varint field from int32 values (indices); nothing when n is 0. */
static inline void sr_pbw__packed_i32(struct sr_pbw *w, uint32_t field, const int32_t *v, size_t n)
{
	size_t m;

	if (n == 0)
		return;
	m = sr_pbw__begin(w, field);
	for (size_t i = 0; i < n; i++)
		sr_pbw__varint(w, (uint64_t)(int64_t)v[i]);
	sr_pbw__end(w, m);
}

#endif
