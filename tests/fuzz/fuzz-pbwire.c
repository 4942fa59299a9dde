// SPDX-License-Identifier: Apache-2.0
/*
 * The protobuf wire layer (common/pbwire.h) on arbitrary bytes, generically:
 * the input is walked as a message, every length-delimited field is tried as
 * a sub-message (recursively, depth-limited by sr_pbr__enter) and as packed
 * varints, fixed32s and fixed64s. Checked: nothing reads out of bounds; a
 * failed read leaves the reader where it was, inside the message; the
 * tag/skip walk and the whole-field walk agree; and what was read, written
 * again with the writer, reads back the same. The message decoders built on
 * the layer have targets of their own (fuzz-pushrequest, fuzz-otlp-response).
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/pbwire.h"

#define FUZZ_MAX_INPUT (64 * 1024)
/* Shallower than the default, so deep inputs reach the limit with few bytes too. */
#define FUZZ_MAX_DEPTH 16

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(bool ok)
{
	if (!ok)
		abort();
}

/* A failed read must leave the reader inside its message, at or before where it was. */
static void check_failed(const struct sr_pbr *r, const uint8_t *before, int e)
{
	check(e == -EBADMSG || e == -EOVERFLOW || e == -EPROTONOSUPPORT);
	check(r->p == before);
}

static void elements(const struct sr_pbr *r, const struct sr_pb_field *f)
{
	static const unsigned types[] = { SR_PB_VARINT, SR_PB_I64, SR_PB_I32 };

	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		struct sr_pbr el;
		size_t n, seen = 0;
		uint64_t v;
		uint32_t v32;
		int counted, e = 0;

		if (sr_pbr__elements(r, f, types[i], &el) < 0)
			continue;
		check(el.p >= r->base && el.end <= r->end);
		counted = sr_pbr__count_elements(&el, types[i], &n);
		while (sr_pbr__more(&el)) {
			const uint8_t *at = el.p;

			e = types[i] == SR_PB_VARINT ? sr_pbr__varint(&el, &v)
			    : types[i] == SR_PB_I64  ? sr_pbr__fixed64(&el, &v)
						     : sr_pbr__fixed32(&el, &v32);
			if (e < 0) {
				check_failed(&el, at, e);
				break;
			}
			seen++;
		}
		check(counted < 0 ? e < 0 : e == 0 && n == seen);
	}
}

/* Walks a message; returns what its field walk ended with (1: the end, or a negative errno). */
static int walk(struct sr_pbr *r, struct sr_pbw *out)
{
	struct sr_pbr copy = *r;
	struct sr_pb_field f;
	uint32_t number;
	unsigned wt;
	int e, e2 = 1;

	for (;;) {
		const uint8_t *at = r->p;
		struct sr_pbr sub;

		if ((e = sr_pbr__next(r, &f)) != 0) {
			if (e < 0)
				check_failed(r, at, e);
			break;
		}

		check(f.start >= r->base && f.end <= r->end && f.start < f.end && r->p == f.end);
		check(f.data >= f.start && f.data + f.len <= f.end);
		sr_pbw__tag(out, f.number, f.wt);
		switch (f.wt) {
		case SR_PB_VARINT:
			sr_pbw__varint(out, f.value);
			break;
		case SR_PB_I64:
			sr_pbw__put_fixed64(out, f.value);
			break;
		case SR_PB_I32:
			check(f.value <= UINT32_MAX);
			sr_pbw__put_fixed32(out, (uint32_t)f.value);
			break;
		case SR_PB_LEN:
			check(f.value == f.len);
			sr_pbw__varint(out, f.len);
			sr_pbw__raw(out, f.data, f.len);
			break;
		default:
			abort(); /* groups never come out of sr_pbr__next */
		}
		elements(r, &f);
		if (f.wt == SR_PB_LEN) {
			struct sr_pbw scratch = { 0 };

			if (sr_pbr__enter(r, (struct sr_pb_slice){ f.data, f.len }, &sub) == 0) {
				check(sub.depth == r->depth + 1 && sub.depth <= r->max_depth);
				walk(&sub, &scratch);
			} else {
				check(r->depth >= r->max_depth);
			}
			sr_pbw__free(&scratch);
		}
	}

	/* The tag/skip walk must end at the same place with the same verdict. */
	while (sr_pbr__more(&copy)) {
		const uint8_t *at = copy.p;

		if ((e2 = sr_pbr__tag(&copy, &number, &wt)) < 0) {
			check_failed(&copy, at, e2);
			break;
		}
		const uint8_t *value = copy.p;
		if ((e2 = sr_pbr__skip(&copy, wt)) < 0) {
			check_failed(&copy, value, e2);
			copy.p = at;
			break;
		}
	}
	if (!sr_pbr__more(&copy))
		e2 = 1;
	check(e2 == e && copy.p == r->p);
	return e;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sr_pbw out = { 0 }, again = { 0 };
	struct sr_pbr r, back;
	size_t good;

	if (size > FUZZ_MAX_INPUT)
		return 0;
	r = sr_pbr_of(data, size);
	r.max_depth = FUZZ_MAX_DEPTH;
	walk(&r, &out);
	good = sr_pbr__offset(&r); /* the fields before the first problem */
	check(good <= size);
	check(sr_pbw__error(&out) == 0);
	/* What was read, written again, reads back field for field (the writer's varints are minimal). */
	back = sr_pbr_of(out.buf, out.len);
	back.max_depth = FUZZ_MAX_DEPTH;
	check(walk(&back, &again) == 1);
	check(again.len == out.len && (out.len == 0 || memcmp(again.buf, out.buf, out.len) == 0));
	check(out.len <= good);
	sr_pbw__free(&out);
	sr_pbw__free(&again);
	return 0;
}
