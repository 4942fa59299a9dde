// SPDX-License-Identifier: Apache-2.0
/*
 * OTLP profiles requests written from the gateway's model (otlp-encode.h):
 * the profiles; their dictionary is built by otlp-dict-writer.c. Reading them back for 413 splits and
 * counts is otlp-split.c.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "core/heap.h"
#include "core/model.h"
#include "common/clock.h"
#include "common/macro.h"
#include "otlp-dict-writer-private.h"
#include "otlp-encode.h"
#include "common/pbwire.h"

#include "common/otlp-fields.h"

#define SCOPE_NAME "stackrelay"

int gw_otlp_version_from_string(const char *s, enum gw_otlp_version *ret)
{
	if (!s)
		return -EINVAL;
	if (strcmp(s, "1.10") == 0 || strcmp(s, "1.10.0") == 0)
		*ret = GW_OTLP_V1_10;
	else if (strcmp(s, "1.9") == 0 || strcmp(s, "1.9.0") == 0)
		*ret = GW_OTLP_V1_9;
	else
		return -EINVAL;
	return 0;
}

const char *gw_otlp_version_to_string(enum gw_otlp_version v)
{
	return v == GW_OTLP_V1_9 ? "1.9" : "1.10";
}

/* ---- profiles ---- */

struct pending_sample {
	int32_t stack;
	uint32_t first_attr, n_attrs; /* into enc.sample_attrs */
	uint64_t count;
	uint64_t off_cpu_ns; /* GW_PROFILE_OFF_CPU: the value exported */
};

struct enc {
	const struct gw_otlp_options *o;
	struct gw_otlp_dict d;
	struct sr_pbw *w;
	GW_OTLP_VEC(struct pending_sample) samples;
	GW_OTLP_VEC(int32_t) sample_attrs;
	GW_OTLP_VEC(uint32_t) order; /* sample indices of a resource, grouped by pid */
	struct gw_otlp_imap merge;   /* stack index → pending sample, per profile */
	struct gw_otlp_stats st;
	int32_t str_samples, str_count, str_cpu, str_nanoseconds;
};

/*
 * The buffers of the last requests encoded, kept for the next ones. A
 * request's dictionary grows its maps and tables to the request's size;
 * growing them again for every request (rehashing, realloc, page faults on
 * fresh memory) was a fifth of a busy replica's CPU (fleet soak profile).
 * Encodings run on the thread pool, several at once when batches queue up
 * behind a busy core, so up to ENC_KEEP_SETS sets are kept (with one, every
 * encoding beside another grew from empty again: a tenth of a replica's CPU
 * in the 1,000-node soak); whichever thread encodes next takes one. Their
 * sum stays under ENC_KEEP_BYTES: what this keeps beyond the requests being
 * encoded is bounded by that (a fleet's request of 8,192 records keeps about
 * 12 MiB (heaptrack of the 2,000-node soak), so four such sets).
 *
 * The sets form a stack: an encoding takes the one kept last, so a set below
 * the top is used only while encodings overlap. One kept longer than
 * GW_OTLP_ENCODE_KEEP_IDLE_NS ago is freed when the next set is kept, or by
 * the gateway's periodic heap trim (gw_heap_trim_caches()), whichever comes
 * first: two encodings that overlapped once do not keep a second set for
 * good (under process churn that was a one-time step of 2.9 MiB in a small
 * gateway's RSS), nor for minutes where requests are encoded rarely.
 */
#define ENC_KEEP_BYTES (48u << 20)
#define ENC_KEEP_SETS  4

static pthread_mutex_t kept_lock = PTHREAD_MUTEX_INITIALIZER;
static struct kept_set {
	struct enc *e;
	size_t bytes;
	uint64_t kept_ns; /* sr_now_ns() when kept: the stack's order */
} kept[ENC_KEEP_SETS];
static unsigned n_kept;
static size_t kept_bytes;

static void enc_free_buffers(struct enc *e)
{
	gw_otlp_dict_free(&e->d);
	free(e->samples.v);
	free(e->sample_attrs.v);
	free(e->order.v);
	gw_otlp_imap_free(&e->merge);
}

static void free_sets(struct kept_set *sets, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		enc_free_buffers(sets[i].e);
		free(sets[i].e);
	}
}

/* A kept set of buffers (moved into e), if one is free. */
static void scratch_take(struct enc *e)
{
	struct enc *k = NULL;

	pthread_mutex_lock(&kept_lock);
	if (n_kept) {
		n_kept--;
		k = kept[n_kept].e;
		kept_bytes -= kept[n_kept].bytes;
	}
	pthread_mutex_unlock(&kept_lock);
	if (!k)
		return;
	e->d = k->d;
	e->samples = k->samples;
	e->sample_attrs = k->sample_attrs;
	e->order = k->order;
	free(k);
}

/* Takes the sets kept before cutoff_ns (the bottom of the stack) out into out; their count. Under kept_lock. */
static unsigned take_kept_before_locked(uint64_t cutoff_ns, struct kept_set *out)
{
	unsigned n = 0;

	while (n < n_kept && kept[n].kept_ns < cutoff_ns) {
		out[n] = kept[n];
		kept_bytes -= kept[n].bytes;
		n++;
	}
	memmove(kept, kept + n, (n_kept - n) * sizeof(kept[0]));
	n_kept -= n;
	return n;
}

/* The sets no encoding took for GW_OTLP_ENCODE_KEEP_IDLE_NS before now_ns, into out. Under kept_lock. */
static unsigned take_idle_locked(uint64_t now_ns, struct kept_set *out)
{
	return now_ns > GW_OTLP_ENCODE_KEEP_IDLE_NS ? take_kept_before_locked(now_ns - GW_OTLP_ENCODE_KEEP_IDLE_NS, out)
						    : 0;
}

/* Frees every kept set: memory for speed only, given back under memory pressure (gw_heap_release_caches()). */
static void scratch_release(void)
{
	struct kept_set out[ENC_KEEP_SETS];
	unsigned n;

	pthread_mutex_lock(&kept_lock);
	n = take_kept_before_locked(UINT64_MAX, out);
	pthread_mutex_unlock(&kept_lock);
	free_sets(out, n);
}

size_t gw_otlp_encode_kept_bytes(void)
{
	size_t b;

	pthread_mutex_lock(&kept_lock);
	b = kept_bytes;
	pthread_mutex_unlock(&kept_lock);
	return b;
}

unsigned gw_otlp_encode_trim_kept(uint64_t now_ns)
{
	struct kept_set out[ENC_KEEP_SETS];
	unsigned n;

	pthread_mutex_lock(&kept_lock);
	n = take_idle_locked(now_ns, out);
	pthread_mutex_unlock(&kept_lock);
	free_sets(out, n);
	return n;
}

unsigned gw_otlp_encode_kept_sets(void)
{
	unsigned n;

	pthread_mutex_lock(&kept_lock);
	n = n_kept;
	pthread_mutex_unlock(&kept_lock);
	return n;
}

static void scratch_trim(uint64_t now_ns)
{
	(void)gw_otlp_encode_trim_kept(now_ns);
}

static void scratch_register(void)
{
	/* never full */
	(void)gw_heap_add_cache("otlp_encoder", scratch_release, scratch_trim, gw_otlp_encode_kept_bytes);
}

/* Keeps e's buffers, emptied, for a next request, or frees them (no room under the bounds). */
static void scratch_keep(struct enc *e)
{
	static pthread_once_t registered = PTHREAD_ONCE_INIT;

	size_t bytes = gw_otlp_dict_bytes(&e->d) + (size_t)e->samples.cap * sizeof(*e->samples.v) +
		       (size_t)e->sample_attrs.cap * sizeof(*e->sample_attrs.v) +
		       (size_t)e->order.cap * sizeof(*e->order.v);
	struct kept_set idle[ENC_KEEP_SETS];
	uint64_t now = sr_now_ns();
	struct enc *k;
	unsigned n_idle;

	pthread_once(&registered, scratch_register);
	gw_otlp_imap_free(&e->merge); /* sized per resource */
	if (bytes > ENC_KEEP_BYTES || !(k = calloc(1, sizeof(*k)))) {
		enc_free_buffers(e);
		return;
	}
	gw_otlp_dict_reset(&e->d);
	k->d = e->d;
	k->samples = e->samples;
	k->sample_attrs = e->sample_attrs;
	k->order = e->order;
	k->samples.n = k->sample_attrs.n = k->order.n = 0;
	pthread_mutex_lock(&kept_lock);
	if (n_kept < ENC_KEEP_SETS && kept_bytes + bytes <= ENC_KEEP_BYTES) {
		kept[n_kept++] = (struct kept_set){ k, bytes, now };
		kept_bytes += bytes;
		k = NULL;
	}
	n_idle = take_idle_locked(now, idle);
	pthread_mutex_unlock(&kept_lock);
	if (k) {
		enc_free_buffers(k);
		free(k);
	}
	free_sets(idle, n_idle);
}

static void write_key_value(struct sr_pbw *w, uint32_t field, const struct gw_attr *a)
{
	size_t m = sr_pbw__begin(w, field), vm;
	const char *str = a->type == GW_ATTR_STRING && a->v.s ? a->v.s : "";

	sr_pbw__string(w, SR_OTLP_C(KeyValue, key), a->key);
	vm = sr_pbw__begin(w, SR_OTLP_C(KeyValue, value));
	gw_otlp_write_any_value_oneof(w, a->type, str, strlen(str), a->type == GW_ATTR_INT ? a->v.i : 0,
				      a->type == GW_ATTR_BOOL && a->v.b, a->type == GW_ATTR_DOUBLE ? a->v.d : 0);
	sr_pbw__end(w, vm);
	sr_pbw__end(w, m);
}

static int sample_attr(struct enc *e, const struct gw_attr *a)
{
	int64_t idx = gw_otlp_dict_attr(&e->d, a);
	int32_t *slot;

	if (idx < 0)
		return (int)idx;
	if (GW_OTLP_VEC_PUSH(e->sample_attrs, slot) < 0)
		return -ENOMEM;
	*slot = (int32_t)idx;
	return 0;
}

static void write_value_type(struct sr_pbw *w, uint32_t field, int32_t type, int32_t unit)
{
	size_t m = sr_pbw__begin(w, field);

	sr_pbw__int(w, SR_OTLP_P(ValueType, type_strindex), type);
	sr_pbw__int(w, SR_OTLP_P(ValueType, unit_strindex), unit);
	sr_pbw__end(w, m);
}

/* Writes one ResourceProfiles for r's samples order[from..to). pid_attr: with process.pid on the resource. */
static int encode_resource(struct enc *e, const struct gw_resource *r, uint32_t from, uint32_t to, bool pid_attr)
{
	struct sr_pbw *w = e->w;
	const struct gw_otlp_options *o = e->o;
	bool v19 = o->version == GW_OTLP_V1_9;
	bool covered = r->start_ns <= r->end_ns;
	uint64_t t_min = covered ? r->start_ns : 0, t_max = covered ? r->end_ns : 0;
	bool merge = o->process_attrs == GW_OTLP_PROCESS_ATTRS_NONE;
	bool off_cpu = r->profile_type == GW_PROFILE_OFF_CPU;
	const char *jit_type = gw_otlp_jit_frame_type(r);
	size_t rm, resm, sm, pm, scm;
	int ret;

	e->samples.n = 0;
	e->sample_attrs.n = 0;
	if (merge)
		gw_otlp_imap_free(&e->merge);
	for (uint32_t k = from; k < to; k++) {
		const struct gw_sample *s = &r->samples[e->order.v[k]];
		int64_t stack = gw_otlp_dict_stack(&e->d, s->stack, jit_type);
		struct pending_sample *ps;
		bool has_attrs = s->attrs != NULL;

		if (stack < 0)
			return (int)stack;
		if (merge && !has_attrs) {
			uint64_t h = (uint64_t)stack * 0x9E3779B97F4A7C15ULL;
			uint32_t slot;

			ret = gw_otlp_imap_prepare(&e->merge);
			if (ret < 0)
				return ret;
			GW_OTLP_IMAP_FIND(&e->merge, h,
					  e->samples.v[idx].stack == stack && e->samples.v[idx].n_attrs == 0, slot);
			if (gw_otlp_imap_at(&e->merge, slot)) {
				e->samples.v[gw_otlp_imap_at(&e->merge, slot) - 1].count += s->count;
				e->samples.v[gw_otlp_imap_at(&e->merge, slot) - 1].off_cpu_ns += s->off_cpu_ns;
				continue;
			}
			ret = GW_OTLP_VEC_PUSH(e->samples, ps);
			if (ret < 0)
				return ret;
			gw_otlp_imap_set(&e->merge, slot, h, e->samples.n - 1);
		} else {
			ret = GW_OTLP_VEC_PUSH(e->samples, ps);
			if (ret < 0)
				return ret;
		}
		*ps = (struct pending_sample){ .stack = (int32_t)stack,
					       .first_attr = e->sample_attrs.n,
					       .count = s->count,
					       .off_cpu_ns = s->off_cpu_ns };
		if (o->process_attrs == GW_OTLP_PROCESS_ATTRS_SAMPLE) {
			struct gw_attr a = { .key = "process.pid", .type = GW_ATTR_INT, .v.i = s->pid };

			ret = sample_attr(e, &a);
			if (ret < 0)
				return ret;
		}
		if (o->process_attrs != GW_OTLP_PROCESS_ATTRS_NONE) {
			struct gw_attr a = { .key = "thread.id", .type = GW_ATTR_INT, .v.i = s->tid };

			ret = sample_attr(e, &a);
			if (ret == 0 && s->thread_name && *s->thread_name) {
				a = (struct gw_attr){ .key = "thread.name",
						      .type = GW_ATTR_STRING,
						      .v.s = s->thread_name };
				ret = sample_attr(e, &a);
			}
			if (ret < 0)
				return ret;
		}
		for (uint32_t i = 0; i < gw_sample__n_attrs(s); i++) {
			ret = sample_attr(e, &s->attrs->v[i]);
			if (ret < 0)
				return ret;
		}
		/* e->samples may have moved: re-find ps. */
		ps = &e->samples.v[e->samples.n - 1];
		ps->n_attrs = e->sample_attrs.n - ps->first_attr;
	}
	if (e->samples.n == 0)
		return 0;

	rm = sr_pbw__begin(w, SR_OTLP_REQ(resource_profiles));
	resm = sr_pbw__begin(w, SR_OTLP_P(ResourceProfiles, resource));
	for (uint32_t i = 0; i < r->n_attrs; i++)
		write_key_value(w, SR_OTLP_RES(attributes), &r->attrs[i]);
	if (pid_attr) {
		struct gw_attr a = { .key = "process.pid",
				     .type = GW_ATTR_INT,
				     .v.i = r->samples[e->order.v[from]].pid };

		write_key_value(w, SR_OTLP_RES(attributes), &a);
	}
	sr_pbw__end(w, resm);
	sm = sr_pbw__begin(w, SR_OTLP_P(ResourceProfiles, scope_profiles));
	scm = sr_pbw__begin(w, SR_OTLP_P(ScopeProfiles, scope));
	sr_pbw__string(w, SR_OTLP_C(InstrumentationScope, name), SCOPE_NAME);
	sr_pbw__string(w, SR_OTLP_C(InstrumentationScope, version), o->scope_version);
	sr_pbw__end(w, scm);
	pm = sr_pbw__begin(w, SR_OTLP_P(ScopeProfiles, profiles));
	/*
	 * Off-CPU: one value, nanoseconds, and no period: Pyroscope's OTLP
	 * conversion names exactly that shape (off_cpu/nanoseconds, no period
	 * type) its off_cpu profile type; see docs/exporters.md.
	 */
	if (off_cpu) {
		int64_t t = gw_otlp_dict_string(&e->d, "off_cpu");

		if (t < 0)
			return (int)t;
		write_value_type(w, SR_OTLP_P(Profile, sample_type), (int32_t)t, e->str_nanoseconds);
	} else {
		write_value_type(w, SR_OTLP_P(Profile, sample_type), e->str_samples, e->str_count);
	}
	for (uint32_t i = 0; i < e->samples.n; i++) {
		const struct pending_sample *ps = &e->samples.v[i];
		size_t m = sr_pbw__begin(w, SR_OTLP_P(Profile, samples));
		uint64_t value = off_cpu ? ps->off_cpu_ns : ps->count;
		size_t vm;

		sr_pbw__int(w, v19 ? SR_OTLP_S9(stack_index) : SR_OTLP_S10(stack_index), ps->stack);
		if (v19) {
			vm = sr_pbw__begin(w, SR_OTLP_S9(values));
			sr_pbw__varint(w, value);
			sr_pbw__end(w, vm);
			if (ps->n_attrs)
				sr_pbw__packed_i32(w, SR_OTLP_S9(attribute_indices), e->sample_attrs.v + ps->first_attr,
						   ps->n_attrs);
		} else {
			if (ps->n_attrs)
				sr_pbw__packed_i32(w, SR_OTLP_S10(attribute_indices),
						   e->sample_attrs.v + ps->first_attr, ps->n_attrs);
			vm = sr_pbw__begin(w, SR_OTLP_S10(values));
			sr_pbw__varint(w, value);
			sr_pbw__end(w, vm);
		}
		sr_pbw__end(w, m);
		e->st.samples++;
		e->st.total_count += ps->count;
	}
	sr_pbw__fixed64(w, SR_OTLP_P(Profile, time_unix_nano), t_min);
	sr_pbw__uint(w, SR_OTLP_P(Profile, duration_nano), t_max > t_min ? t_max - t_min : 0);
	if (!off_cpu) {
		write_value_type(w, SR_OTLP_P(Profile, period_type), e->str_cpu, e->str_nanoseconds);
		sr_pbw__int(w, SR_OTLP_P(Profile, period),
			    r->frequency_hz ? (int64_t)(1000000000ULL / r->frequency_hz) : 0);
	}
	sr_pbw__end(w, pm);
	sr_pbw__end(w, sm);
	sr_pbw__end(w, rm);
	e->st.profiles++;
	return sr_pbw__error(w);
}

static int by_pid(const void *a, const void *b, void *userdata)
{
	const struct gw_resource *res = userdata;
	uint32_t pa = res->samples[*(const uint32_t *)a].pid;
	uint32_t pb = res->samples[*(const uint32_t *)b].pid;

	if (pa != pb)
		return pa < pb ? -1 : 1;
	return *(const uint32_t *)a < *(const uint32_t *)b ? -1 : 1;
}

int gw_otlp_encode(const struct gw_profiles *p, const struct gw_otlp_options *opts, struct sr_pbw *out,
		   struct gw_otlp_stats *ret_stats)
{
	struct enc e = { .o = opts, .w = out };
	int64_t s[4];
	int r;

	scratch_take(&e);
	r = gw_otlp_dict_init(&e.d);
	if (r < 0)
		goto out;
	s[0] = gw_otlp_dict_string(&e.d, "samples");
	s[1] = gw_otlp_dict_string(&e.d, "count");
	s[2] = gw_otlp_dict_string(&e.d, "cpu");
	s[3] = gw_otlp_dict_string(&e.d, "nanoseconds");
	if (s[0] < 0 || s[1] < 0 || s[2] < 0 || s[3] < 0) {
		r = -ENOMEM;
		goto out;
	}
	e.str_samples = (int32_t)s[0];
	e.str_count = (int32_t)s[1];
	e.str_cpu = (int32_t)s[2];
	e.str_nanoseconds = (int32_t)s[3];

	for (uint32_t ri = 0; ri < p->n_resources; ri++) {
		const struct gw_resource *res = &p->resources[ri];

		r = gw_otlp_vec_grow((void **)&e.order.v, &e.order.cap, sizeof(uint32_t), res->n_samples);
		if (r < 0)
			goto out;
		e.order.n = res->n_samples;
		for (uint32_t i = 0; i < res->n_samples; i++)
			e.order.v[i] = i;
		if (opts->process_attrs != GW_OTLP_PROCESS_ATTRS_RESOURCE) {
			r = encode_resource(&e, res, 0, res->n_samples, false);
			if (r < 0)
				goto out;
			continue;
		}
		/* One ResourceProfiles per pid. */
		qsort_r(e.order.v, e.order.n, sizeof(uint32_t), by_pid, (void *)res);
		for (uint32_t from = 0, to; from < e.order.n; from = to) {
			uint32_t pid = res->samples[e.order.v[from]].pid;

			for (to = from + 1; to < e.order.n && res->samples[e.order.v[to]].pid == pid; to++)
				;
			r = encode_resource(&e, res, from, to, true);
			if (r < 0)
				goto out;
		}
	}
	r = gw_otlp_dict_resolve(&e.d);
	if (r < 0)
		goto out;
	gw_otlp_write_dictionary(out, &e.d);
	r = sr_pbw__error(out);
	if (r < 0)
		goto out;
	e.st.strings = e.d.strings.n;
	e.st.functions = e.d.functions.n;
	e.st.mappings = e.d.mappings.n;
	e.st.locations = e.d.locations.n;
	e.st.stacks = e.d.stacks.n;
	e.st.attributes = e.d.attrs.n;
	if (ret_stats)
		*ret_stats = e.st;
out:
	scratch_keep(&e);
	return r;
}
