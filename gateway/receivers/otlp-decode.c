// SPDX-License-Identifier: Apache-2.0
/*
 * The OTLP profiles request decoder (otlp-decode.h): the request's top
 * level, its resources, profiles and samples. Which version a request is
 * read in is otlp-version.c's; the dictionary is otlp-dict.c's and
 * otlp-frames.c's.
 *
 * Samples become gw_samples (docs/receivers.md): sample type samples/count
 * counts CPU samples, cpu/nanoseconds is converted to samples with the
 * period, off_cpu/nanoseconds is the off-CPU profile type; a value-less
 * sample counts its timestamps. thread.id, thread.name and process.pid
 * attributes become the sample's tid, thread name and pid.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "core/model.h"
#include "common/macro.h"
#include "otlp-decode-private.h"
#include "otlp-decode.h"
#include "common/pbwire.h"

#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb.h"
#include "opentelemetry/proto/common/v1/common.pb.h"
#include "opentelemetry/proto/profiles/v1development/profiles.pb.h"
#include "opentelemetry/proto/resource/v1/resource.pb.h"

#define P(m, f) opentelemetry_proto_profiles_v1development_##m##_##f##_tag
#define C(m, f) opentelemetry_proto_common_v1_##m##_##f##_tag
#define REQ(f)	opentelemetry_proto_collector_profiles_v1development_ExportProfilesServiceRequest_##f##_tag
#define RES(f)	opentelemetry_proto_resource_v1_Resource_##f##_tag

int gw_otlp_decode_version_from_string(const char *s, enum gw_otlp_decode_version *ret)
{
	if (!s)
		return -EINVAL;
	if (*s == 'v')
		s++;
	if (strcmp(s, "auto") == 0)
		*ret = GW_OTLP_DECODE_AUTO;
	else if (strcmp(s, "1.9") == 0 || strcmp(s, "1.9.0") == 0)
		*ret = GW_OTLP_DECODE_V1_9;
	else if (strcmp(s, "1.10") == 0 || strcmp(s, "1.10.0") == 0)
		*ret = GW_OTLP_DECODE_V1_10;
	else
		return -EINVAL;
	return 0;
}

const char *gw_otlp_decode_version_to_string(enum gw_otlp_decode_version v)
{
	switch (v) {
	case GW_OTLP_DECODE_V1_9:
		return "1.9";
	case GW_OTLP_DECODE_V1_10:
		return "1.10";
	default:
		return "auto";
	}
}

const char *gw_otlp_decode_status_to_string(enum gw_otlp_decode_status s)
{
	switch (s) {
	case GW_OTLP_DECODE_OK:
		return "ok";
	case GW_OTLP_DECODE_INVALID:
		return "invalid";
	case GW_OTLP_DECODE_TOO_LARGE:
		return "too large";
	case GW_OTLP_DECODE_AMBIGUOUS:
		return "version ambiguous";
	case GW_OTLP_DECODE_NO_MEMORY:
		return "out of memory";
	}
	return "unknown";
}

void gw_otlp_limits_default(struct gw_otlp_limits *ret)
{
	*ret = (struct gw_otlp_limits){
		.max_resource_profiles = GW_OTLP_DEFAULT_MAX_RESOURCE_PROFILES,
		.max_profiles = GW_OTLP_DEFAULT_MAX_PROFILES,
		.max_samples = GW_OTLP_DEFAULT_MAX_SAMPLES,
		.max_sample_points = GW_OTLP_DEFAULT_MAX_SAMPLE_POINTS,
		.max_stack_depth = GW_OTLP_DEFAULT_MAX_STACK_DEPTH,
		.max_lines = GW_OTLP_DEFAULT_MAX_LINES,
		.max_attrs = GW_OTLP_DEFAULT_MAX_ATTRS,
		.max_strings = GW_OTLP_DEFAULT_MAX_STRINGS,
		.max_attributes = GW_OTLP_DEFAULT_MAX_ATTRIBUTES,
		.max_mappings = GW_OTLP_DEFAULT_MAX_MAPPINGS,
		.max_locations = GW_OTLP_DEFAULT_MAX_LOCATIONS,
		.max_functions = GW_OTLP_DEFAULT_MAX_FUNCTIONS,
		.max_links = GW_OTLP_DEFAULT_MAX_LINKS,
		.max_stacks = GW_OTLP_DEFAULT_MAX_STACKS,
		.max_string_bytes = GW_OTLP_DEFAULT_MAX_STRING_BYTES,
		.max_nesting = GW_OTLP_DEFAULT_MAX_NESTING,
		.max_work_bytes = GW_OTLP_DEFAULT_MAX_WORK_BYTES,
	};
}

static void merge_limits(struct gw_otlp_limits *l, const struct gw_otlp_limits *user)
{
	gw_otlp_limits_default(l);
	if (!user)
		return;
#define TAKE(m)                                                                                                        \
	do {                                                                                                           \
		if (user->m)                                                                                           \
			l->m = user->m;                                                                                \
	} while (0)
	TAKE(max_resource_profiles);
	TAKE(max_profiles);
	TAKE(max_samples);
	TAKE(max_sample_points);
	TAKE(max_stack_depth);
	TAKE(max_lines);
	TAKE(max_attrs);
	TAKE(max_strings);
	TAKE(max_attributes);
	TAKE(max_mappings);
	TAKE(max_locations);
	TAKE(max_functions);
	TAKE(max_links);
	TAKE(max_stacks);
	TAKE(max_string_bytes);
	TAKE(max_nesting);
	TAKE(max_work_bytes);
#undef TAKE
}

void gw_otlp_decode_result_fini(struct gw_otlp_decode_result *res)
{
	if (!res)
		return;
	gw_profiles__unref(res->batch);
	res->batch = NULL;
}

const char *otlp_what(struct otlp_dec *d, const char *what)
{
	int n;

	if (what)
		return what;
	if (d->ctx_table >= 0) {
		snprintf(d->path, sizeof(d->path), "dictionary.%s[%" PRIu64 "]",
			 otlp_table_name((enum otlp_table)d->ctx_table), d->ctx_index);
		return d->path;
	}
	n = snprintf(d->path, sizeof(d->path), "resource_profiles[%" PRId64 "]", d->rp);
	if (d->sp >= 0 && n > 0 && (size_t)n < sizeof(d->path))
		n += snprintf(d->path + n, sizeof(d->path) - (size_t)n, ".scope_profiles[%" PRId64 "]", d->sp);
	if (d->pr >= 0 && n > 0 && (size_t)n < sizeof(d->path))
		n += snprintf(d->path + n, sizeof(d->path) - (size_t)n, ".profiles[%" PRId64 "]", d->pr);
	if (d->sa >= 0 && n > 0 && (size_t)n < sizeof(d->path))
		n += snprintf(d->path + n, sizeof(d->path) - (size_t)n, ".samples[%" PRId64 "]", d->sa);
	if (d->field && n > 0 && (size_t)n < sizeof(d->path))
		snprintf(d->path + n, sizeof(d->path) - (size_t)n, ".%s", d->field);
	return d->path;
}

/* ---- resources, profiles, samples ---- */

enum prof_kind { PK_CPU_COUNT, PK_CPU_NS, PK_OFF_CPU, PK_UNSUPPORTED };

struct attr_vec {
	struct gw_attr *v;
	uint32_t n, cap;
};

static int attr_push(struct otlp_dec *d, struct attr_vec *av, const struct gw_attr *a)
{
	if (sr_grow_u32((void **)&av->v, &av->cap, av->n + 1, sizeof(*av->v), 16) < 0)
		return otlp_nomem(d, "attributes");
	av->v[av->n++] = *a;
	return 0;
}

/* The resource of one ResourceProfiles: its attributes, and process.pid when it names one. */
struct res_in {
	struct attr_vec attrs;
	bool has_pid;
	uint32_t pid;
};

static int read_resource(struct otlp_dec *d, struct sr_pb_slice s, struct res_in *ri)
{
	struct sr_pbr root = sr_pbr_of(d->base, d->len), r = sr_pbr__sub(&root, s);
	struct sr_pb_field f;
	uint32_t n = 0;
	char what[96];
	int e;

	while ((e = sr_pbr__next(&r, &f)) == 0) {
		struct sr_pbr kv;
		struct sr_pb_field g;
		struct gw_attr a = { .key = "" };
		bool usable = false;

		if (f.number != RES(attributes))
			continue;
		snprintf(what, sizeof(what), "resource_profiles[%" PRId64 "].resource.attributes[%u]", d->rp, n);
		if (f.wt != SR_PB_LEN)
			return otlp_fail(d, GW_OTLP_DECODE_INVALID, f.start, "%s: not a message", what);
		if (++n > d->lim.max_attrs)
			return otlp_fail(d, GW_OTLP_DECODE_TOO_LARGE, f.start,
					 "%s: more than %u attributes (max_attrs)", what, d->lim.max_attrs);
		kv = sr_pbr__sub(&r, (struct sr_pb_slice){ f.data, f.len });
		while ((e = sr_pbr__next(&kv, &g)) == 0) {
			if (g.number == C(KeyValue, key)) {
				if (g.wt != SR_PB_LEN)
					return otlp_fail(d, GW_OTLP_DECODE_INVALID, g.start, "%s.key: not a string",
							 what);
				a.key = otlp_batch_string(d, (struct sr_pb_slice){ g.data, g.len });
				if (!a.key)
					return otlp_nomem(d, what);
			} else if (g.number == C(KeyValue, value)) {
				if (g.wt != SR_PB_LEN)
					return otlp_fail(d, GW_OTLP_DECODE_INVALID, g.start, "%s.value: not a message",
							 what);
				if ((e = otlp_any_value(d, (struct sr_pb_slice){ g.data, g.len }, what, &a, &usable)) <
				    0)
					return e;
			}
		}
		if (e < 0)
			return otlp_fail(d, GW_OTLP_DECODE_INVALID, kv.p, "%s: malformed field", what);
		if (!usable || !a.key[0]) {
			d->res->attrs_dropped++;
			continue;
		}
		if (otlp_attr_role_of(a.key) == OA_PROCESS_PID && a.type == GW_ATTR_INT) {
			ri->has_pid = true;
			ri->pid = (uint32_t)a.v.i;
			continue;
		}
		if ((e = attr_push(d, &ri->attrs, &a)) < 0)
			return e;
	}
	if (e < 0)
		return otlp_fail(d, GW_OTLP_DECODE_INVALID, r.p,
				 "resource_profiles[%" PRId64 "].resource: malformed field", d->rp);
	return 0;
}

struct prof_in {
	enum prof_kind kind;
	const char *st_type, *st_unit;
	int64_t period;
	uint64_t time, duration;
	uint32_t frequency_hz;
	int32_t resource; /* index in the batch, -1 until a sample is accepted */
};

static int read_value_type(struct otlp_dec *d, const struct sr_pb_field *vf, const struct sr_pbr *parent,
			   const char **ret_type, const char **ret_unit)
{
	struct sr_pbr r = sr_pbr__sub(parent, (struct sr_pb_slice){ vf->data, vf->len });
	struct sr_pb_field f;
	int e;

	while ((e = sr_pbr__next(&r, &f)) == 0) {
		const char **dst = f.number == P(ValueType, type_strindex)   ? ret_type
				   : f.number == P(ValueType, unit_strindex) ? ret_unit
									     : NULL;
		if (!dst)
			continue;
		if (f.wt != SR_PB_VARINT)
			return otlp_fail(d, GW_OTLP_DECODE_INVALID, f.start, "%s: ValueType field %u is not a varint",
					 otlp_what(d, NULL), f.number);
		if ((e = otlp_dict_string(d, f.value, NULL, f.start, dst)) < 0)
			return e;
	}
	if (e < 0)
		return otlp_fail(d, GW_OTLP_DECODE_INVALID, r.p, "%s: malformed ValueType", otlp_what(d, NULL));
	return 0;
}

/* Reads a Profile's fields other than its samples; adds its attributes to pattrs. */
static int read_profile_header(struct otlp_dec *d, struct sr_pb_slice s, struct prof_in *pi, struct attr_vec *pattrs,
			       struct res_in *ri)
{
	struct sr_pbr root = sr_pbr_of(d->base, d->len), r = sr_pbr__sub(&root, s), el;
	const char *pt_type = "", *pt_unit = "";
	struct sr_pb_field f;
	uint32_t n_attrs = 0;
	uint64_t v;
	int e;

	*pi = (struct prof_in){ .st_type = "", .st_unit = "", .resource = -1 };
	while ((e = sr_pbr__next(&r, &f)) == 0) {
		switch (f.number) {
		case P(Profile, sample_type):
		case P(Profile, period_type):
			d->field = f.number == P(Profile, sample_type) ? "sample_type" : "period_type";
			if (f.wt != SR_PB_LEN)
				return otlp_fail(d, GW_OTLP_DECODE_INVALID, f.start, "%s: not a message",
						 otlp_what(d, NULL));
			e = f.number == P(Profile, sample_type) ? read_value_type(d, &f, &r, &pi->st_type, &pi->st_unit)
								: read_value_type(d, &f, &r, &pt_type, &pt_unit);
			if (e < 0)
				return e;
			break;
		case P(Profile, time_unix_nano):
			d->field = "time_unix_nano";
			if (f.wt != SR_PB_I64)
				return otlp_fail(d, GW_OTLP_DECODE_INVALID, f.start, "%s: not fixed64",
						 otlp_what(d, NULL));
			pi->time = f.value;
			break;
		case P(Profile, duration_nano):
		case P(Profile, period):
			d->field = f.number == P(Profile, period) ? "period" : "duration_nano";
			if (f.wt != SR_PB_VARINT)
				return otlp_fail(d, GW_OTLP_DECODE_INVALID, f.start, "%s: not a varint",
						 otlp_what(d, NULL));
			if (f.number == P(Profile, period))
				pi->period = (int64_t)f.value;
			else
				pi->duration = f.value;
			break;
		case P(Profile, attribute_indices):
			d->field = "attribute_indices";
			if (sr_pbr__elements(&r, &f, SR_PB_VARINT, &el) < 0)
				return otlp_fail(d, GW_OTLP_DECODE_INVALID, f.start, "%s: malformed",
						 otlp_what(d, NULL));
			while (sr_pbr__more(&el)) {
				const struct otlp_attr *a;
				const uint8_t *at = el.p;
				if (sr_pbr__varint(&el, &v) < 0)
					return otlp_fail(d, GW_OTLP_DECODE_INVALID, at, "%s: malformed varint",
							 otlp_what(d, NULL));
				if (++n_attrs > d->lim.max_attrs)
					return otlp_fail(d, GW_OTLP_DECODE_TOO_LARGE, at,
							 "%s: more than %u attributes (max_attrs)", otlp_what(d, NULL),
							 d->lim.max_attrs);
				if ((e = otlp_dict_attr(d, v, NULL, at, &a)) < 0)
					return e;
				if (v == 0)
					continue;
				if (!a->usable) {
					d->res->attrs_dropped++;
				} else if (a->role == OA_PROCESS_PID && a->a.type == GW_ATTR_INT) {
					ri->has_pid = true;
					ri->pid = (uint32_t)a->a.v.i;
				} else if ((e = attr_push(d, pattrs, &a->a)) < 0) {
					return e;
				}
			}
			break;
		default:
			break;
		}
		d->field = NULL;
	}
	d->field = NULL;
	if (e < 0)
		return otlp_fail(d, GW_OTLP_DECODE_INVALID, r.p, "%s: malformed field", otlp_what(d, NULL));
	if (strcmp(pi->st_type, "samples") == 0 && strcmp(pi->st_unit, "count") == 0)
		pi->kind = PK_CPU_COUNT;
	else if (strcmp(pi->st_type, "cpu") == 0 && strcmp(pi->st_unit, "nanoseconds") == 0 && pi->period > 0)
		pi->kind = PK_CPU_NS;
	else if (strcmp(pi->st_type, "off_cpu") == 0 && strcmp(pi->st_unit, "nanoseconds") == 0)
		pi->kind = PK_OFF_CPU;
	else
		pi->kind = PK_UNSUPPORTED;
	/* A CPU profile's period is the sampling interval (period type cpu/nanoseconds). */
	if (pi->kind != PK_OFF_CPU && pi->period > 0 && strcmp(pt_unit, "nanoseconds") == 0)
		pi->frequency_hz =
			(uint32_t)SR_MIN((1000000000ULL + (uint64_t)pi->period / 2) / (uint64_t)pi->period, 1000000ULL);
	return 0;
}

struct walk {
	struct sample_buf buf;
	struct res_in ri;
	struct attr_vec pattrs; /* the profile's resource attributes: resource's + profile's */
	struct attr_vec sattrs; /* one sample's */
	uint64_t samples, points, profiles;
	bool rejected_noted;
};

/* Turns a read sample into a gw_sample of profile pi. */
static int add_sample(struct otlp_dec *d, struct walk *w, struct prof_in *pi, const struct sample_in *in)
{
	struct gw_otlp_decode_result *res = d->res;
	struct gw_sample s = { .pid = w->ri.pid };
	struct gw_stack *st = NULL;
	uint64_t count, start_ns, end_ns;
	bool has_link;
	const char *trace = NULL, *span = NULL;
	int e;

	w->points += in->n_values + in->n_ts;
	if (w->points > d->lim.max_sample_points)
		return otlp_fail(d, GW_OTLP_DECODE_TOO_LARGE, in->start,
				 "request has more than %" PRIu64 " values and timestamps (max_sample_points)",
				 d->lim.max_sample_points);
	d->field = "stack_index";
	if ((e = otlp_dict_stack(d, in->stack, NULL, in->stack_at ? in->stack_at : in->start, &st)) < 0)
		return e;
	w->sattrs.n = 0;
	d->field = "attribute_indices";
	for (uint32_t i = 0; i < in->n_attrs; i++) {
		const struct otlp_attr *a;
		if ((e = otlp_dict_attr(d, in->attrs[i], NULL, in->attrs_at[i], &a)) < 0)
			goto fail;
		if (in->attrs[i] == 0)
			continue;
		if (!a->usable) {
			res->attrs_dropped++;
		} else if (a->role == OA_THREAD_ID && a->a.type == GW_ATTR_INT) {
			s.tid = (uint32_t)a->a.v.i;
		} else if (a->role == OA_PROCESS_PID && a->a.type == GW_ATTR_INT) {
			s.pid = (uint32_t)a->a.v.i;
		} else if (a->role == OA_THREAD_NAME && a->a.type == GW_ATTR_STRING) {
			s.thread_name = a->a.v.s;
		} else if ((e = attr_push(d, &w->sattrs, &a->a)) < 0) {
			goto fail;
		}
	}
	d->field = "link_index";
	if ((e = otlp_dict_link(d, in->link, NULL, in->link_at, &has_link,
				d->links == GW_OTLP_LINKS_ATTRIBUTES ? &trace : NULL, &span)) < 0)
		goto fail;
	if (has_link && d->links == GW_OTLP_LINKS_DROP) {
		res->links_dropped++;
	} else if (has_link) {
		if ((e = attr_push(d, &w->sattrs, &(struct gw_attr){ "trace.id", GW_ATTR_STRING, { .s = trace } })) <
			    0 ||
		    (e = attr_push(d, &w->sattrs, &(struct gw_attr){ "span.id", GW_ATTR_STRING, { .s = span } })) < 0)
			goto fail;
	}
	d->field = NULL;

	switch (pi->kind) {
	case PK_CPU_NS:
		/* Nanoseconds of CPU into samples of the period; a value-less sample counts its timestamps. */
		count = in->n_values ? (in->values_sum + (uint64_t)pi->period / 2) / (uint64_t)pi->period : in->n_ts;
		if (count == 0 && in->values_sum)
			count = 1;
		break;
	case PK_OFF_CPU:
		count = in->n_ts ? in->n_ts : 1;
		s.off_cpu_ns = in->n_values ? in->values_sum : in->n_ts;
		break;
	default:
		count = in->n_values ? in->values_sum : in->n_ts;
	}
	s.count = count;
	if (in->n_ts) {
		start_ns = in->ts_min;
		end_ns = in->ts_max;
	} else {
		start_ns = pi->time;
		end_ns = pi->time + pi->duration < pi->time ? UINT64_MAX : pi->time + pi->duration;
	}
	res->received += count;
	if (pi->kind == PK_UNSUPPORTED || count == 0) {
		res->refused += count;
		gw_stack__unref(st);
		return 0;
	}
	if (pi->resource < 0) {
		struct gw_resource *r =
			gw_profiles__add_typed_resource(d->batch, w->pattrs.v, w->pattrs.n, pi->frequency_hz,
							pi->kind == PK_OFF_CPU ? GW_PROFILE_OFF_CPU : GW_PROFILE_CPU);
		if (!r) {
			e = otlp_nomem(d, "a resource");
			goto fail;
		}
		pi->resource = (int32_t)(d->batch->n_resources - 1);
	}
	if (w->sattrs.n) {
		struct gw_sample_attrs *av = gw_profiles__alloc(d->batch, sizeof(*av) + w->sattrs.n * sizeof(av->v[0]));
		if (!av) {
			e = otlp_nomem(d, "sample attributes");
			goto fail;
		}
		av->n = w->sattrs.n;
		memcpy(av->v, w->sattrs.v, w->sattrs.n * sizeof(av->v[0]));
		s.attrs = av;
	}
	s.stack = st;
	e = gw_resource__add_sample_owned(d->batch, &d->batch->resources[pi->resource], &s);
	if (e < 0) {
		e = otlp_nomem(d, "a sample");
		goto fail;
	}
	gw_resource__cover(&d->batch->resources[pi->resource], start_ns, end_ns);
	res->accepted += count;
	res->accepted_records++;
	return 0;
fail:
	gw_stack__unref(st);
	return e;
}

static int walk_profile(struct otlp_dec *d, struct walk *w, struct sr_pb_slice s)
{
	struct sr_pbr root = sr_pbr_of(d->base, d->len), r = sr_pbr__sub(&root, s);
	size_t base_attrs = w->pattrs.n;
	struct sr_pb_field f;
	struct prof_in pi;
	struct sample_in in;
	uint64_t refused_before = d->res->refused;
	/* A process.pid among the profile's attributes is the profile's, not its resource's. */
	const bool had_pid = w->ri.has_pid;
	const uint32_t pid = w->ri.pid;
	int e;

	if (++w->profiles > d->lim.max_profiles)
		return otlp_fail(d, GW_OTLP_DECODE_TOO_LARGE, s.p, "request has more than %u profiles (max_profiles)",
				 d->lim.max_profiles);
	if ((e = read_profile_header(d, s, &pi, &w->pattrs, &w->ri)) < 0)
		return e;
	d->sa = 0;
	while ((e = sr_pbr__next(&r, &f)) == 0) {
		if (f.number != P(Profile, samples))
			continue;
		if (f.wt != SR_PB_LEN) {
			e = otlp_fail(d, GW_OTLP_DECODE_INVALID, f.start, "%s: not a message", otlp_what(d, NULL));
			goto out;
		}
		if (++w->samples > d->lim.max_samples) {
			e = otlp_fail(d, GW_OTLP_DECODE_TOO_LARGE, f.start,
				      "request has more than %" PRIu64 " samples (max_samples)", d->lim.max_samples);
			goto out;
		}
		if ((e = otlp_read_sample(d, (struct sr_pb_slice){ f.data, f.len }, d->v19, &w->buf, &in)) < 0 ||
		    (e = add_sample(d, w, &pi, &in)) < 0)
			goto out;
		d->sa++;
	}
	d->sa = -1;
	if (e < 0) {
		e = otlp_fail(d, GW_OTLP_DECODE_INVALID, r.p, "%s: malformed field", otlp_what(d, NULL));
		goto out;
	}
	e = 0;
	if (pi.kind == PK_UNSUPPORTED) {
		d->res->rejected_profiles++;
		if (!d->res->message[0])
			snprintf(d->res->message, sizeof(d->res->message),
				 "%s: sample type %s/%s is not one stackrelay takes (samples/count, cpu/nanoseconds "
				 "with a period, off_cpu/nanoseconds); %" PRIu64 " samples refused",
				 otlp_what(d, NULL), pi.st_type, pi.st_unit, d->res->refused - refused_before);
	}
out:
	d->sa = -1;
	w->ri.has_pid = had_pid;
	w->ri.pid = pid;
	w->pattrs.n = (uint32_t)base_attrs; /* the next profile starts from the resource's attributes */
	return e;
}

/* Walks the messages of field `child` in s, calling fn on each with the index set in *idx. */
static int walk_resource(struct otlp_dec *d, struct walk *w, struct sr_pb_slice s)
{
	struct sr_pbr root = sr_pbr_of(d->base, d->len), r = sr_pbr__sub(&root, s), sr;
	struct sr_pb_field f, g;
	int e;

	w->ri.attrs.n = 0;
	w->ri.has_pid = false;
	w->ri.pid = 0;
	while ((e = sr_pbr__next(&r, &f)) == 0) {
		if (f.number != P(ResourceProfiles, resource))
			continue;
		if (f.wt != SR_PB_LEN)
			return otlp_fail(d, GW_OTLP_DECODE_INVALID, f.start, "%s.resource: not a message",
					 otlp_what(d, NULL));
		if ((e = read_resource(d, (struct sr_pb_slice){ f.data, f.len }, &w->ri)) < 0)
			return e;
	}
	if (e < 0)
		return otlp_fail(d, GW_OTLP_DECODE_INVALID, r.p, "%s: malformed field", otlp_what(d, NULL));
	r = sr_pbr__sub(&root, s);
	d->sp = 0;
	while ((e = sr_pbr__next(&r, &f)) == 0) {
		if (f.number != P(ResourceProfiles, scope_profiles))
			continue;
		if (f.wt != SR_PB_LEN)
			return otlp_fail(d, GW_OTLP_DECODE_INVALID, f.start, "%s: not a message", otlp_what(d, NULL));
		sr = sr_pbr__sub(&r, (struct sr_pb_slice){ f.data, f.len });
		d->pr = 0;
		while ((e = sr_pbr__next(&sr, &g)) == 0) {
			if (g.number != P(ScopeProfiles, profiles))
				continue;
			if (g.wt != SR_PB_LEN)
				return otlp_fail(d, GW_OTLP_DECODE_INVALID, g.start, "%s: not a message",
						 otlp_what(d, NULL));
			w->pattrs.n = 0;
			for (uint32_t i = 0; i < w->ri.attrs.n; i++)
				if ((e = attr_push(d, &w->pattrs, &w->ri.attrs.v[i])) < 0)
					return e;
			if ((e = walk_profile(d, w, (struct sr_pb_slice){ g.data, g.len })) < 0)
				return e;
			d->pr++;
		}
		d->pr = -1;
		if (e < 0)
			return otlp_fail(d, GW_OTLP_DECODE_INVALID, sr.p, "%s: malformed field", otlp_what(d, NULL));
		d->sp++;
	}
	d->sp = -1;
	if (e < 0)
		return otlp_fail(d, GW_OTLP_DECODE_INVALID, r.p, "%s: malformed field", otlp_what(d, NULL));
	return 0;
}

static int decode(struct otlp_dec *d, const struct gw_otlp_decode_options *opts)
{
	struct sr_pbr r = sr_pbr_of(d->base, d->len);
	struct sr_pb_slice dict = { 0 };
	struct walk w = { 0 };
	struct sr_pb_field f;
	uint32_t n_rp = 0;
	bool have_dict = false;
	int e;

	d->rp = d->sp = d->pr = d->sa = -1;
	while ((e = sr_pbr__next(&r, &f)) == 0) {
		if (f.number == REQ(resource_profiles)) {
			if (f.wt != SR_PB_LEN)
				return otlp_fail(d, GW_OTLP_DECODE_INVALID, f.start,
						 "resource_profiles[%u]: not a message", n_rp);
			if (++n_rp > d->lim.max_resource_profiles)
				return otlp_fail(d, GW_OTLP_DECODE_TOO_LARGE, f.start,
						 "request has more than %u resource_profiles (max_resource_profiles)",
						 d->lim.max_resource_profiles);
		} else if (f.number == REQ(dictionary)) {
			if (f.wt != SR_PB_LEN)
				return otlp_fail(d, GW_OTLP_DECODE_INVALID, f.start, "dictionary: not a message");
			/* Protobuf would merge several; no encoder splits it, so one is all we take. */
			if (have_dict)
				return otlp_fail(d, GW_OTLP_DECODE_INVALID, f.start, "dictionary: given twice");
			dict = (struct sr_pb_slice){ f.data, f.len };
			have_dict = true;
		}
	}
	if (e < 0)
		return otlp_fail(d, GW_OTLP_DECODE_INVALID, r.p, "request: malformed field");
	if ((e = otlp_dict_scan(d, dict)) < 0)
		return e;
	if ((e = otlp_charge(d, (uint64_t)d->lim.max_attrs * (sizeof(uint64_t) + sizeof(uint8_t *)), NULL)) < 0)
		return e;
	w.buf.attrs = malloc(d->lim.max_attrs * sizeof(*w.buf.attrs));
	w.buf.attrs_at = malloc(d->lim.max_attrs * sizeof(*w.buf.attrs_at));
	if (!w.buf.attrs || !w.buf.attrs_at) {
		e = otlp_nomem(d, "the request");
		goto out;
	}
	if (opts && opts->version != GW_OTLP_DECODE_AUTO) {
		d->v19 = opts->version == GW_OTLP_DECODE_V1_9;
	} else {
		if ((e = otlp_detect_version(d, &w.buf, &d->v19)) < 0)
			goto out;
		d->res->version_detected = true;
	}
	d->res->version = d->v19 ? GW_OTLP_DECODE_V1_9 : GW_OTLP_DECODE_V1_10;
	r = sr_pbr_of(d->base, d->len);
	d->rp = 0;
	while (sr_pbr__next(&r, &f) == 0) {
		if (f.number != REQ(resource_profiles))
			continue;
		if ((e = walk_resource(d, &w, (struct sr_pb_slice){ f.data, f.len })) < 0)
			goto out;
		d->rp++;
	}
	d->rp = -1;
	e = 0;
out:
	free(w.buf.attrs);
	free(w.buf.attrs_at);
	free(w.ri.attrs.v);
	free(w.pattrs.v);
	free(w.sattrs.v);
	return e;
}

enum gw_otlp_decode_status gw_otlp_decode(struct gw_stores *stores, const uint8_t *buf, size_t len,
					  const struct gw_otlp_decode_options *opts, struct gw_otlp_decode_result *res)
{
	struct otlp_dec d = {
		.stores = stores, .res = res, .ctx_table = -1, .base = buf ? buf : (const uint8_t *)"", .len = len
	};
	int e;

	*res = (struct gw_otlp_decode_result){ .status = GW_OTLP_DECODE_OK };
	if (!buf)
		d.len = 0;
	merge_limits(&d.lim, opts ? opts->limits : NULL);
	d.links = opts ? opts->links : GW_OTLP_LINKS_DROP;
	d.batch = gw_profiles_new();
	if (!d.batch) {
		otlp_nomem(&d, "a batch");
		return res->status;
	}
	e = decode(&d, opts);
	otlp_dict_free(&d);
	if (e < 0 || res->status != GW_OTLP_DECODE_OK) {
		/* Nothing is accepted from a refused request. */
		gw_profiles__unref(d.batch);
		res->accepted = res->accepted_records = 0;
		res->refused = res->received;
		if (res->status == GW_OTLP_DECODE_OK) /* cannot happen: every failure goes through otlp_fail */
			res->status = GW_OTLP_DECODE_INVALID;
		return res->status;
	}
	if (res->accepted_records)
		res->batch = d.batch;
	else
		gw_profiles__unref(d.batch);
	return res->status;
}
