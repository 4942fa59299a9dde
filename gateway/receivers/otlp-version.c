// SPDX-License-Identifier: Apache-2.0
/*
 * Samples read in one version, and which version a request is read in
 * (otlp-decode-private.h).
 *
 * v1.9 and v1.10 differ only in Sample: v1.9 has values = 2,
 * attribute_indices = 3, link_index = 4; v1.10 has attribute_indices = 2,
 * link_index = 3, values = 4. With `version: auto`, every sample is read
 * both ways first, checking what each reading requires (link_index is a
 * single varint; a sample has values or timestamps, and as many values as
 * timestamps when it has both, or one value without; indices within their
 * tables). The request is read in the one version every sample satisfies;
 * when both readings are well-formed and would differ, it is refused as
 * ambiguous (the receiver's `version` setting decides then), never guessed.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/model.h"
#include "common/macro.h"
#include "otlp-decode-private.h"
#include "otlp-decode.h"
#include "common/pbwire.h"

#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb.h"
#include "opentelemetry/proto/profiles/v1development/profiles.pb.h"
#include "opentelemetry/proto/profiles/v1development/profiles_v1_9.pb.h"

#define P(m, f) opentelemetry_proto_profiles_v1development_##m##_##f##_tag
#define REQ(f)	opentelemetry_proto_collector_profiles_v1development_ExportProfilesServiceRequest_##f##_tag
#define S10(f)	opentelemetry_proto_profiles_v1development_Sample_##f##_tag
#define S9(f)	opentelemetry_proto_profiles_v1development_v1_9_Sample_##f##_tag

int otlp_read_sample(struct otlp_dec *d, struct sr_pb_slice s, bool v19, const struct sample_buf *buf,
		     struct sample_in *in)
{
	const uint32_t f_attrs = v19 ? S9(attribute_indices) : S10(attribute_indices);
	const uint32_t f_link = v19 ? S9(link_index) : S10(link_index);
	const uint32_t f_values = v19 ? S9(values) : S10(values);
	struct sr_pbr root = sr_pbr_of(d->base, d->len), r = sr_pbr__sub(&root, s), el;
	struct sr_pb_field f;
	uint64_t v;
	int e;

	*in = (struct sample_in){ .attrs = buf->attrs, .attrs_at = buf->attrs_at, .ts_min = UINT64_MAX, .start = s.p };
	while ((e = sr_pbr__next(&r, &f)) == 0) {
		if (f.number == S10(stack_index)) {
			d->field = "stack_index";
			if (f.wt != SR_PB_VARINT)
				return otlp_fail(d, GW_OTLP_DECODE_INVALID, f.start, "%s: not a varint",
						 otlp_what(d, NULL));
			in->stack = f.value;
			in->stack_at = f.start;
		} else if (f.number == f_link) {
			d->field = "link_index";
			if (f.wt != SR_PB_VARINT) {
				in->link_len = true;
				return otlp_fail(d, GW_OTLP_DECODE_INVALID, f.start, "%s: not a varint",
						 otlp_what(d, NULL));
			}
			in->link = f.value;
			in->link_at = f.start;
		} else if (f.number == f_attrs) {
			d->field = "attribute_indices";
			if (sr_pbr__elements(&r, &f, SR_PB_VARINT, &el) < 0)
				return otlp_fail(d, GW_OTLP_DECODE_INVALID, f.start, "%s: malformed",
						 otlp_what(d, NULL));
			while (sr_pbr__more(&el)) {
				const uint8_t *at = el.p;
				if (sr_pbr__varint(&el, &v) < 0)
					return otlp_fail(d, GW_OTLP_DECODE_INVALID, at, "%s: malformed varint",
							 otlp_what(d, NULL));
				if (in->n_attrs >= d->lim.max_attrs)
					return otlp_fail(d, GW_OTLP_DECODE_TOO_LARGE, at,
							 "%s: more than %u attributes (max_attrs)", otlp_what(d, NULL),
							 d->lim.max_attrs);
				in->attrs_at[in->n_attrs] = at;
				in->attrs[in->n_attrs++] = v;
			}
		} else if (f.number == f_values) {
			d->field = "values";
			if (sr_pbr__elements(&r, &f, SR_PB_VARINT, &el) < 0)
				return otlp_fail(d, GW_OTLP_DECODE_INVALID, f.start, "%s: malformed",
						 otlp_what(d, NULL));
			while (sr_pbr__more(&el)) {
				const uint8_t *at = el.p;
				if (sr_pbr__varint(&el, &v) < 0)
					return otlp_fail(d, GW_OTLP_DECODE_INVALID, at, "%s: malformed varint",
							 otlp_what(d, NULL));
				if ((int64_t)v < 0)
					return otlp_fail(d, GW_OTLP_DECODE_INVALID, at, "%s: negative value %" PRId64,
							 otlp_what(d, NULL), (int64_t)v);
				if (in->values_sum > UINT64_MAX / 2 - v)
					return otlp_fail(d, GW_OTLP_DECODE_INVALID, at, "%s: sum overflows",
							 otlp_what(d, NULL));
				in->values_sum += v;
				in->n_values++;
			}
		} else if (f.number == S10(timestamps_unix_nano)) {
			d->field = "timestamps_unix_nano";
			if (sr_pbr__elements(&r, &f, SR_PB_I64, &el) < 0)
				return otlp_fail(d, GW_OTLP_DECODE_INVALID, f.start, "%s: malformed",
						 otlp_what(d, NULL));
			while (sr_pbr__more(&el)) {
				if (sr_pbr__fixed64(&el, &v) < 0)
					return otlp_fail(d, GW_OTLP_DECODE_INVALID, el.p, "%s: malformed",
							 otlp_what(d, NULL));
				in->ts_min = SR_MIN(in->ts_min, v);
				in->ts_max = SR_MAX(in->ts_max, v);
				in->n_ts++;
			}
		}
	}
	d->field = NULL;
	if (e < 0)
		return otlp_fail(d, GW_OTLP_DECODE_INVALID, r.p, "%s: malformed field", otlp_what(d, NULL));
	if (in->n_values == 0 && in->n_ts == 0)
		return otlp_fail(d, GW_OTLP_DECODE_INVALID, s.p, "%s: neither values nor timestamps",
				 otlp_what(d, NULL));
	if (in->n_ts ? in->n_values && in->n_values != in->n_ts : in->n_values != 1)
		return otlp_fail(d, GW_OTLP_DECODE_INVALID, s.p,
				 "%s: %" PRIu64 " values for %" PRIu64
				 " timestamps (one value without timestamps, or one per timestamp)",
				 otlp_what(d, NULL), in->n_values, in->n_ts);
	return 0;
}

/* Whether a sample read in one version refers only to entries that exist. */
static bool sample_in_bounds(const struct otlp_dec *d, const struct sample_in *in)
{
	if ((in->stack && in->stack >= d->n[OT_STACK]) || (in->link && in->link >= d->n[OT_LINK]))
		return false;
	for (uint32_t i = 0; i < in->n_attrs; i++)
		if (in->attrs[i] && in->attrs[i] >= d->n[OT_ATTRIBUTE])
			return false;
	return true;
}

/* ---- version detection ---- */

struct probe {
	bool ok9, ok10, differ;
	/* Fields only one version has length-delimited: packed field 3 (v1.9), packed field 4 (v1.10). */
	uint64_t ev9, ev10;
	uint64_t samples;
	const struct sample_buf *buf;
	int e; /* a hard error (too large, out of memory) */
};

static void probe_sample(struct otlp_dec *d, struct sr_pb_slice s, struct probe *pr)
{
	struct sample_in in;
	struct sr_pbr root = sr_pbr_of(d->base, d->len), r = sr_pbr__sub(&root, s);
	struct sr_pb_field f;

	/* Fields 2-4 mean different things in each version; a sample without them reads the same. */
	while (sr_pbr__next(&r, &f) == 0) {
		if (f.number >= 2 && f.number <= 4)
			pr->differ = true;
		if (f.number == 3 && f.wt == SR_PB_LEN)
			pr->ev9++;
		else if (f.number == 4 && f.wt == SR_PB_LEN)
			pr->ev10++;
	}
	for (int v = 0; v < 2; v++) {
		bool *ok = v ? &pr->ok9 : &pr->ok10;
		int e;

		if (!*ok)
			continue;
		e = otlp_read_sample(d, s, v == 1, pr->buf, &in);
		d->field = NULL;
		if (e == -E2BIG || e == -ENOMEM) {
			pr->e = e;
			return;
		}
		/* A probe's failure is not the request's first problem: forget it. */
		d->res->status = GW_OTLP_DECODE_OK;
		d->res->message[0] = '\0';
		*ok = e == 0 && sample_in_bounds(d, &in);
	}
}

/* Walks request → resource_profiles → scope_profiles → profiles → samples, probing each sample. */
static int probe_level(struct otlp_dec *d, struct sr_pb_slice m, int level, struct probe *pr)
{
	static const uint32_t child[] = { REQ(resource_profiles), P(ResourceProfiles, scope_profiles),
					  P(ScopeProfiles, profiles), P(Profile, samples) };
	struct sr_pbr root = sr_pbr_of(d->base, d->len), r = sr_pbr__sub(&root, m);
	struct sr_pb_field f;
	int e;

	int64_t *const idx[] = { &d->rp, &d->sp, &d->pr, &d->sa };

	*idx[level] = 0;
	while ((e = sr_pbr__next(&r, &f)) == 0) {
		if (f.number != child[level] || f.wt != SR_PB_LEN)
			continue;
		if (level < 3) {
			if ((e = probe_level(d, (struct sr_pb_slice){ f.data, f.len }, level + 1, pr)) < 0)
				return e;
			*idx[level + 1] = -1;
			(*idx[level])++;
			continue;
		}
		if (++pr->samples > d->lim.max_samples)
			return otlp_fail(d, GW_OTLP_DECODE_TOO_LARGE, f.start,
					 "request has more than %" PRIu64 " samples (max_samples)", d->lim.max_samples);
		probe_sample(d, (struct sr_pb_slice){ f.data, f.len }, pr);
		if (pr->e)
			return pr->e;
		if (!pr->ok9 && !pr->ok10)
			return 0; /* the full read reports the problem */
		d->sa++;
	}
	/* Malformed bytes: the full read reports them. */
	return 0;
}

int otlp_detect_version(struct otlp_dec *d, const struct sample_buf *buf, bool *ret_v19)
{
	struct probe pr = { .ok9 = true, .ok10 = true, .buf = buf };
	int e;

	d->rp = d->sp = d->pr = d->sa = -1;
	e = probe_level(d, (struct sr_pb_slice){ d->base, d->len }, 0, &pr);
	d->rp = d->sp = d->pr = d->sa = -1;
	if (e < 0)
		return e;
	if (!pr.ok9 && !pr.ok10) {
		/* Neither fits: the read in the version the sample fields point to names the problem. */
		*ret_v19 = pr.ev9 > pr.ev10;
		return 0;
	}
	if (!pr.differ || (pr.ok10 && !pr.ok9)) {
		/* Same meaning either way, or only v1.10 fits. */
		*ret_v19 = false;
		return 0;
	}
	if (pr.ok9 && !pr.ok10) {
		*ret_v19 = true;
		return 0;
	}
	return otlp_fail(d, GW_OTLP_DECODE_AMBIGUOUS, NULL,
			 "the request reads as well-formed OTLP v1.9 and v1.10 with different meanings "
			 "(Sample fields 2-4); set the otlp receiver's `version` to the senders' version");
}
