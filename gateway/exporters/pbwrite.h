/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A minimal protobuf writer for the exporters' hot path: appends fields to a
 * growable buffer in one pass. Nested messages reserve a maximal length
 * prefix and close it with a memmove of the body (cheap for the small
 * messages that dominate; nanopb's pb_encode would size every level twice).
 * Field numbers come from the nanopb-generated headers (*_tag), so the .proto
 * files stay the single source of truth.
 *
 * Errors are sticky: after a failed allocation every call is a no-op and
 * pbw_error() returns -ENOMEM.
 */
#ifndef SR_GW_PBWRITE_H
#define SR_GW_PBWRITE_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct pbw {
	uint8_t *buf;
	size_t len, cap;
	int error;
};

enum { PBW_VARINT = 0, PBW_I64 = 1, PBW_LEN = 2, PBW_I32 = 5 };

static inline int pbw_error(const struct pbw *w)
{
	return w->error;
}

static inline void pbw_free(struct pbw *w)
{
	free(w->buf);
	*w = (struct pbw){ 0 };
}

static inline bool pbw_reserve(struct pbw *w, size_t n)
{
	if (w->error)
		return false;
	if (w->len + n > w->cap) {
		size_t cap = w->cap ? w->cap : 4096;
		uint8_t *b;

		while (cap < w->len + n)
			cap *= 2;
		b = realloc(w->buf, cap);
		if (!b) {
			w->error = -ENOMEM;
			return false;
		}
		w->buf = b;
		w->cap = cap;
	}
	return true;
}

static inline size_t pbw_varint_size(uint64_t v)
{
	size_t n = 1;

	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

static inline uint8_t *pbw_put_varint(uint8_t *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	return p;
}

static inline void pbw_varint(struct pbw *w, uint64_t v)
{
	if (!pbw_reserve(w, 10))
		return;
	w->len = (size_t)(pbw_put_varint(w->buf + w->len, v) - w->buf);
}

static inline void pbw_tag(struct pbw *w, uint32_t field, unsigned wt)
{
	pbw_varint(w, ((uint64_t)field << 3) | wt);
}

/* proto3: zero values are not written. */
static inline void pbw_uint(struct pbw *w, uint32_t field, uint64_t v)
{
	if (v == 0)
		return;
	pbw_tag(w, field, PBW_VARINT);
	pbw_varint(w, v);
}

/* int32/int64 fields: negative values take ten bytes, as the spec says. */
static inline void pbw_int(struct pbw *w, uint32_t field, int64_t v)
{
	pbw_uint(w, field, (uint64_t)v);
}

static inline void pbw_bool(struct pbw *w, uint32_t field, bool v)
{
	pbw_uint(w, field, v ? 1 : 0);
}

static inline void pbw_fixed64(struct pbw *w, uint32_t field, uint64_t v)
{
	if (v == 0)
		return;
	pbw_tag(w, field, PBW_I64);
	if (!pbw_reserve(w, 8))
		return;
	for (int i = 0; i < 8; i++)
		w->buf[w->len++] = (uint8_t)(v >> (8 * i));
}

static inline void pbw_double(struct pbw *w, uint32_t field, double d)
{
	uint64_t v;

	memcpy(&v, &d, sizeof(v));
	pbw_fixed64(w, field, v);
}

/* Always written, even when empty (repeated string elements must keep their place). */
static inline void pbw_bytes_always(struct pbw *w, uint32_t field, const void *data, size_t len)
{
	pbw_tag(w, field, PBW_LEN);
	pbw_varint(w, len);
	if (!pbw_reserve(w, len))
		return;
	if (len)
		memcpy(w->buf + w->len, data, len);
	w->len += len;
}

static inline void pbw_bytes(struct pbw *w, uint32_t field, const void *data, size_t len)
{
	if (len)
		pbw_bytes_always(w, field, data, len);
}

static inline void pbw_string(struct pbw *w, uint32_t field, const char *s)
{
	if (s)
		pbw_bytes(w, field, s, strlen(s));
}

/* Opens a length-delimited field; returns the mark for pbw_end(). */
static inline size_t pbw_begin(struct pbw *w, uint32_t field)
{
	pbw_tag(w, field, PBW_LEN);
	if (!pbw_reserve(w, 5))
		return 0;
	w->len += 5;
	return w->len;
}

/* Closes it: writes the minimal length varint and slides the body back. */
static inline void pbw_end(struct pbw *w, size_t mark)
{
	size_t body, n;

	if (w->error)
		return;
	body = w->len - mark;
	n = pbw_varint_size(body);
	pbw_put_varint(w->buf + mark - 5, body);
	if (n < 5) {
		memmove(w->buf + mark - 5 + n, w->buf + mark, body);
		w->len -= 5 - n;
	}
}

/* A packed repeated varint field from int32 values (indices). */
static inline void pbw_packed_i32(struct pbw *w, uint32_t field, const int32_t *v, size_t n)
{
	size_t m;

	if (n == 0)
		return;
	m = pbw_begin(w, field);
	for (size_t i = 0; i < n; i++)
		pbw_varint(w, (uint64_t)(int64_t)v[i]);
	pbw_end(w, m);
}

#endif
