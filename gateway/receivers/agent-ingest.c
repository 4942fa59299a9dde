/* SPDX-License-Identifier: Apache-2.0 */
/*
 * PushRequest processing (agent-ingest.h): the header, the order fields are
 * taken in, samples into a batch with their resources, wanted symbols and
 * probes, and the PushResponse; definitions are decoded in agent-defs.c.
 * Untrusted input: every length is checked against what is left of its
 * enclosing message before use, every count is bounded, nothing recurses on
 * input, and no allocation is larger than a small multiple of the (already
 * bounded) body.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pb_encode.h>
#include <xxhash.h>

#include "stackrelay/v1/ingest.pb.h"
#include "stackrelay/v1/types.pb.h"

#include "agent-ingest-private.h"
#include "agent-ingest.h"
#include "macro.h"
#include "model.h"
#include "pbwire.h"

/* ---- header ---- */

int gw_ingest_header(const uint8_t *body, size_t len, struct gw_ingest_header *ret, char *errbuf, size_t errsize)
{
	struct sr_pbr r = sr_pbr_of(body, len);
	uint32_t f, wt;
	uint64_t v;
	struct sr_pb_slice s;
	int e = 0;

	memset(ret, 0, sizeof(*ret));
	while (r.p < r.end) {
		if ((e = sr_pbr__tag(&r, &f, &wt)) < 0)
			FAIL(&r, "PushRequest: bad field key");
		switch (f) {
		case stackrelay_v1_PushRequest_protocol_version_tag:
			if ((e = sr_pbr__field_varint(&r, wt, &v)) < 0)
				FAIL(&r, "PushRequest.protocol_version: malformed");
			ret->protocol_version = v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
			break;
		case stackrelay_v1_PushRequest_sequence_tag:
			if ((e = sr_pbr__field_varint(&r, wt, &ret->sequence)) < 0)
				FAIL(&r, "PushRequest.sequence: malformed");
			break;
		case stackrelay_v1_PushRequest_sampling_frequency_hz_tag:
			if ((e = sr_pbr__field_varint(&r, wt, &v)) < 0)
				FAIL(&r, "PushRequest.sampling_frequency_hz: malformed");
			ret->frequency_hz = v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
			break;
		case stackrelay_v1_PushRequest_agent_tag: {
			if ((e = sr_pbr__field_bytes(&r, wt, &s)) < 0)
				FAIL(&r, "PushRequest.agent: malformed");
			struct sr_pbr a = sr_pbr__sub(&r, s);
			while (a.p < a.end) {
				struct sr_pb_slice t = { 0 };
				if ((e = sr_pbr__tag(&a, &f, &wt)) < 0)
					FAIL(&a, "AgentInfo: bad field key");
				if (f == stackrelay_v1_AgentInfo_instance_id_tag) {
					if ((e = sr_pbr__field_bytes(&a, wt, &t)) < 0 || t.n > GW_ID_MAX)
						FAIL(&a, "AgentInfo.instance_id: malformed or longer than %d bytes",
						     GW_ID_MAX);
					ret->instance_id = t.p;
					ret->instance_id_len = t.n;
				} else if ((e = sr_pbr__skip(&a, wt)) < 0)
					FAIL(&a, "AgentInfo: malformed field %u", f);
			}
			break;
		}
		case stackrelay_v1_PushRequest_samples_tag:
			if ((e = sr_pbr__field_bytes(&r, wt, &s)) < 0)
				FAIL(&r, "PushRequest.samples: malformed");
			ret->n_samples++;
			break;
		default:
			if ((e = sr_pbr__skip(&r, wt)) < 0)
				FAIL(&r, "PushRequest: malformed field %u", f);
		}
	}
out:
	return e;
}

/* Resource identity of a sample: process, executable, container, pod (slices into the body). */
struct rkey {
	struct sr_pb_slice process_name, exe_path, container_id, pod_uid;
	enum gw_profile_type type;
};

struct rslot {
	uint64_t h;
	struct rkey k;
	uint32_t idx;
	bool used;
};

struct rtable {
	struct rslot *s;
	size_t cap, n;
};

struct ctx {
	struct gw_stores *stores;
	struct gw_ingest_defs defs; /* the same stores and res; missing executables and kernels */
	uint64_t epoch;
	struct gw_idlist missing_stacks, wanted;
	struct gw_idlist probed; /* probe_symbols, de-duplicated */
	struct gw_ingest_result *res;
	/* resources of the batch by identity */
	struct rtable resources;
	struct gw_bytes_set thread_names;
	struct sr_pb_slice host_name, node_name;
	struct sr_pb_slice known_kernel; /* a kernel ID found in the store during this request */
	/*
	 * What the first lookup of each stack and kernel ID found (stacks: a
	 * reference held here, or NULL: missing). A request sees
	 * one answer per ID even while other requests store and evict: the
	 * response lists an ID as missing only if none of its samples was
	 * accepted, or the agent's resend would export them twice.
	 */
	struct gw_bytes_set stacks_seen;
	struct gw_bytes_set kernels_seen; /* value non-NULL: found */
	uint32_t frequency_hz;
	bool definitions_only;
};

static int parse_drops(struct ctx *c, struct sr_pbr r, char *errbuf, size_t errsize)
{
	uint32_t f, wt;
	uint64_t v;
	int e = 0;
	while (r.p < r.end) {
		if ((e = sr_pbr__tag(&r, &f, &wt)) < 0)
			FAIL(&r, "DropCounters: bad field key");
		if (wt != SR_PB_VARINT) {
			if ((e = sr_pbr__skip(&r, wt)) < 0)
				FAIL(&r, "DropCounters: malformed field %u", f);
			continue;
		}
		if ((e = sr_pbr__varint(&r, &v)) < 0)
			FAIL(&r, "DropCounters: malformed field %u", f);
		switch (f) {
		case stackrelay_v1_DropCounters_ring_buffer_full_tag:
			c->res->drops.ring_buffer_full += v;
			break;
		case stackrelay_v1_DropCounters_stack_errors_tag:
			c->res->drops.stack_errors += v;
			break;
		case stackrelay_v1_DropCounters_buffer_overflow_tag:
			c->res->drops.buffer_overflow += v;
			break;
		case stackrelay_v1_DropCounters_process_unknown_tag:
			c->res->drops.process_unknown += v;
			break;
		}
	}
out:
	return e;
}

/* ---- samples ---- */

struct sample_in {
	struct sr_pb_slice stack_id, thread_name, process_name, exe_path, container_id, pod_uid, kernel_id;
	uint64_t pid, tid, count, start, end, start_ticks;
	uint64_t profile_type, off_cpu_nanos; /* stackrelay_v1_ProfileType */
};

static int parse_sample(struct sr_pbr r, struct sample_in *in, char *errbuf, size_t errsize)
{
	uint32_t f, wt;
	int e = 0;

	memset(in, 0, sizeof(*in));
	while (r.p < r.end) {
		if ((e = sr_pbr__tag(&r, &f, &wt)) < 0)
			FAIL(&r, "Sample: bad field key");
		switch (f) {
		case stackrelay_v1_Sample_stack_id_tag:
			e = sr_pbr__field_bytes(&r, wt, &in->stack_id);
			break;
		case stackrelay_v1_Sample_pid_tag:
			e = sr_pbr__field_varint(&r, wt, &in->pid);
			break;
		case stackrelay_v1_Sample_tid_tag:
			e = sr_pbr__field_varint(&r, wt, &in->tid);
			break;
		case stackrelay_v1_Sample_thread_name_tag:
			e = sr_pbr__field_bytes(&r, wt, &in->thread_name);
			break;
		case stackrelay_v1_Sample_process_name_tag:
			e = sr_pbr__field_bytes(&r, wt, &in->process_name);
			break;
		case stackrelay_v1_Sample_executable_path_tag:
			e = sr_pbr__field_bytes(&r, wt, &in->exe_path);
			break;
		case stackrelay_v1_Sample_container_id_tag:
			e = sr_pbr__field_bytes(&r, wt, &in->container_id);
			break;
		case stackrelay_v1_Sample_count_tag:
			e = sr_pbr__field_varint(&r, wt, &in->count);
			break;
		case stackrelay_v1_Sample_start_time_unix_nano_tag:
			e = sr_pbr__field_fixed64(&r, wt, &in->start);
			break;
		case stackrelay_v1_Sample_end_time_unix_nano_tag:
			e = sr_pbr__field_fixed64(&r, wt, &in->end);
			break;
		case stackrelay_v1_Sample_process_start_ticks_tag:
			e = sr_pbr__field_varint(&r, wt, &in->start_ticks);
			break;
		case stackrelay_v1_Sample_pod_uid_tag:
			e = sr_pbr__field_bytes(&r, wt, &in->pod_uid);
			break;
		case stackrelay_v1_Sample_kernel_id_tag:
			e = sr_pbr__field_bytes(&r, wt, &in->kernel_id);
			if (e == 0 && in->kernel_id.n > GW_ID_MAX)
				e = -EBADMSG;
			break;
		case stackrelay_v1_Sample_profile_type_tag:
			e = sr_pbr__field_varint(&r, wt, &in->profile_type);
			break;
		case stackrelay_v1_Sample_off_cpu_nanos_tag:
			e = sr_pbr__field_varint(&r, wt, &in->off_cpu_nanos);
			break;
		default:
			e = sr_pbr__skip(&r, wt);
		}
		if (e < 0)
			FAIL(&r, "Sample: malformed field %u", f);
	}
	if (in->stack_id.n == 0 || in->stack_id.n > GW_ID_MAX)
		FAIL(&r, "Sample.stack_id: empty or longer than %d bytes", GW_ID_MAX);
	/* A type this gateway cannot export is refused, not exported as something else. */
	if (in->profile_type > stackrelay_v1_ProfileType_PROFILE_TYPE_OFF_CPU)
		FAIL(&r, "Sample.profile_type: %llu is not a type this gateway knows (0-2)",
		     (unsigned long long)in->profile_type);
out:
	return e;
}

static uint64_t slice_hash(struct sr_pb_slice s, uint64_t seed)
{
	return XXH3_64bits_withSeed(s.p, s.n, seed);
}

static bool slice_eq(struct sr_pb_slice a, struct sr_pb_slice b)
{
	return a.n == b.n && (a.n == 0 || memcmp(a.p, b.p, a.n) == 0);
}

static bool rkey_eq(const struct rkey *a, const struct rkey *b)
{
	return a->type == b->type && slice_eq(a->process_name, b->process_name) && slice_eq(a->exe_path, b->exe_path) &&
	       slice_eq(a->container_id, b->container_id) && slice_eq(a->pod_uid, b->pod_uid);
}

static int rtable_grow(struct rtable *t)
{
	size_t cap = t->cap ? t->cap * 2 : 64;
	struct rslot *ns = calloc(cap, sizeof(*ns));
	if (!ns)
		return -ENOMEM;
	for (size_t i = 0; i < t->cap; i++) {
		if (!t->s[i].used)
			continue;
		size_t j = t->s[i].h & (cap - 1);
		while (ns[j].used)
			j = (j + 1) & (cap - 1);
		ns[j] = t->s[i];
	}
	free(t->s);
	t->s = ns;
	t->cap = cap;
	return 0;
}

static int add_str_attr(struct gw_profiles *p, struct gw_resource *r, const char *key, struct sr_pb_slice v)
{
	char buf[GW_AGENT_MAX_STRING_BYTES + 1];
	if (!v.n)
		return 0;
	return gw_resource__set_string(p, r, key, gw_ingest_cstr(buf, v));
}

/* The resource index for a sample's identity, created on first use. */
static int resource_for(struct ctx *c, const struct sample_in *in, uint32_t *ret)
{
	struct gw_profiles *p = c->res->batch;
	enum gw_profile_type type = in->profile_type == stackrelay_v1_ProfileType_PROFILE_TYPE_OFF_CPU
					    ? GW_PROFILE_OFF_CPU
					    : GW_PROFILE_CPU;
	struct rkey k = { in->process_name, in->exe_path, in->container_id, in->pod_uid, type };
	struct rtable *t = &c->resources;
	uint64_t h;
	size_t j;
	int e;

	h = slice_hash(in->process_name, 1);
	h = slice_hash(in->exe_path, h);
	h = slice_hash(in->container_id, h);
	h = slice_hash(in->pod_uid, h) ^ (uint64_t)type;
	if ((t->n + 1) * 2 > t->cap && (e = rtable_grow(t)) < 0)
		return e;
	for (j = h & (t->cap - 1); t->s[j].used; j = (j + 1) & (t->cap - 1)) {
		if (t->s[j].h == h && rkey_eq(&t->s[j].k, &k)) {
			*ret = t->s[j].idx;
			return 0;
		}
	}
	struct gw_resource *r = gw_profiles__add_typed_resource(p, NULL, 0, c->frequency_hz, type);
	if (!r)
		return -ENOMEM;
	if ((e = add_str_attr(p, r, "host.name", c->host_name)) < 0 ||
	    (e = add_str_attr(p, r, "k8s.node.name", c->node_name)) < 0 ||
	    (e = add_str_attr(p, r, "container.id", in->container_id)) < 0 ||
	    (e = add_str_attr(p, r, "k8s.pod.uid", in->pod_uid)) < 0 ||
	    (e = add_str_attr(p, r, "process.executable.name", in->process_name)) < 0 ||
	    (e = add_str_attr(p, r, "process.executable.path", in->exe_path)) < 0)
		return e;
	t->s[j] = (struct rslot){ .h = h, .k = k, .idx = p->n_resources - 1, .used = true };
	t->n++;
	*ret = p->n_resources - 1;
	return 0;
}

/* One thread-name string per distinct name in the batch. */
static const char *thread_name(struct ctx *c, struct sr_pb_slice s)
{
	char buf[GW_AGENT_MAX_STRING_BYTES + 1];
	bool found;
	struct gw_bytes_set_entry *se;

	if (!s.n)
		return NULL;
	se = gw_bytes_set__put(&c->thread_names, XXH3_64bits(s.p, s.n), s.p, s.n, &found);
	if (!se)
		return NULL;
	if (!found)
		se->value = gw_profiles__strdup(c->res->batch, gw_ingest_cstr(buf, s));
	return se->value;
}

/*
 * Lists a wanted executable (x) or kernel (k) in this response when no other
 * agent is being asked for it (claim_ask); the claim is kept with the result,
 * so it can be released if the response is never delivered. Returns 1 when
 * listed, 0 when another agent has it or the list is full.
 */
static int ask_for(struct ctx *c, struct gw_executable *x, struct gw_kernel *k)
{
	struct gw_ingest_result *res = c->res;
	int e;

	if (c->wanted.n >= GW_AGENT_MAX_WANTED_PER_RESPONSE)
		return 0;
	if (x) {
		struct gw_executable **v = realloc(res->asked_exes, (res->n_asked_exes + 1) * sizeof(*v));
		if (!v)
			return -ENOMEM;
		res->asked_exes = v;
		if (!gw_executable__claim_ask(x, GW_AGENT_WANTED_ASK_NS))
			return 0;
		v[res->n_asked_exes++] = gw_executable__ref(x);
		e = gw_idlist__add(&c->wanted, x->id.bytes, x->id.len);
	} else {
		struct gw_kernel **v = realloc(res->asked_kernels, (res->n_asked_kernels + 1) * sizeof(*v));
		if (!v)
			return -ENOMEM;
		res->asked_kernels = v;
		if (!gw_kernel__claim_ask(k, GW_AGENT_WANTED_ASK_NS))
			return 0;
		v[res->n_asked_kernels++] = gw_kernel__ref(k);
		e = gw_idlist__add(&c->wanted, k->id.bytes, k->id.len);
	}
	return e < 0 ? e : 1;
}

/* Adds the wanted executables and kernels behind a stack (once per stack and exe per request). */
static int note_wanted(struct ctx *c, struct gw_stack *st)
{
	/* Only an optimization (the wanted list de-duplicates too), so a race between
	 * two requests processed at once costs a second walk, nothing more. */
	if (atomic_load_explicit(&st->scratch_epoch, memory_order_relaxed) == c->epoch)
		return 0;
	atomic_store_explicit(&st->scratch_epoch, c->epoch, memory_order_relaxed);
	for (uint32_t i = 0; i < st->n_locations; i++) {
		struct gw_executable *x = st->locations[i]->exe;
		struct gw_kernel *k = st->locations[i]->kernel;
		/* A kernel whose kallsyms the symbolize processor needs (few per request: the list de-duplicates). */
		if (k && gw_kernel__wants_symbols(k)) {
			int e = ask_for(c, NULL, k);
			if (e < 0)
				return e;
		}
		/* On its way to the symbolize processor: a probe in the meantime is answered "pending". */
		if (k)
			gw_kernel__set_queued(k, GW_AGENT_QUEUED_PENDING_NS);
		if (!x || atomic_load_explicit(&x->scratch_epoch, memory_order_relaxed) == c->epoch)
			continue;
		atomic_store_explicit(&x->scratch_epoch, c->epoch, memory_order_relaxed);
		gw_executable__set_queued(x, GW_AGENT_QUEUED_PENDING_NS);
		if (gw_executable__wants_symbols(x)) {
			int e = ask_for(c, x, NULL);
			if (e < 0)
				return e;
		}
	}
	return 0;
}

/* Does the list hold this ID? Missing lists are short (a linear scan). */
static bool idlist_has(const struct gw_idlist *l, const struct gw_id *id)
{
	for (size_t i = 0; i < l->n; i++)
		if (l->v[i].n == id->len && memcmp(l->v[i].p, id->bytes, id->len) == 0)
			return true;
	return false;
}

/*
 * A stored stack whose frames name an executable or kernel this response
 * lists as missing (another stack of the request needed it after it was
 * evicted): agents resend the samples of such stacks (docs/agent-protocol.md:
 * samples that reference a missing ID through their stack's frames were not
 * accepted), so accepting them here too would export them twice.
 */
static bool stack_names_missing(const struct ctx *c, const struct gw_stack *st)
{
	if (!c->defs.missing_exes.n && !c->defs.missing_kernels.n)
		return false;
	for (uint32_t i = 0; i < st->n_locations; i++) {
		const struct gw_location *l = st->locations[i];

		if (l->exe && idlist_has(&c->defs.missing_exes, &l->exe->id))
			return true;
		if (l->kernel && idlist_has(&c->defs.missing_kernels, &l->kernel->id))
			return true;
	}
	return false;
}

/*
 * The stack of this ID as this request first found it (*ret: borrowed, NULL
 * when missing): later samples of the request get the same answer.
 */
static int seen_stack(struct ctx *c, struct sr_pb_slice id, struct gw_stack **ret)
{
	bool found;
	struct gw_bytes_set_entry *e = gw_bytes_set__put(&c->stacks_seen, XXH3_64bits(id.p, id.n), id.p, id.n, &found);

	if (!e)
		return -ENOMEM;
	if (!found)
		e->value = gw_stores__stack(c->stores, id.p, id.n);
	*ret = (struct gw_stack *)e->value;
	return 0;
}

static int add_sample(struct ctx *c, const struct sample_in *in)
{
	struct gw_stack *st;
	uint32_t ri;
	int e;

	/* The sample's kernel must be known too (docs/agent-protocol.md): the
	 * last one found is remembered, samples of one node share it. */
	if (in->kernel_id.n && !slice_eq(in->kernel_id, c->known_kernel)) {
		bool seen;
		struct gw_bytes_set_entry *ke = gw_bytes_set__put(&c->kernels_seen,
								  XXH3_64bits(in->kernel_id.p, in->kernel_id.n),
								  in->kernel_id.p, in->kernel_id.n, &seen);

		if (!ke)
			return -ENOMEM;
		if (!seen) {
			struct gw_kernel *k = gw_stores__kernel(c->stores, in->kernel_id.p, in->kernel_id.n);

			ke->value = k ? (const void *)c : NULL; /* non-NULL: found */
			if (k)
				gw_kernel__unref(k);
		}
		if (!ke->value) {
			c->res->refused_missing += in->count;
			if ((e = gw_idlist__add(&c->defs.missing_kernels, in->kernel_id.p, in->kernel_id.n)) < 0)
				return e;
			/* Also list the stack when it is unknown, so one resend carries everything. */
			if ((e = seen_stack(c, in->stack_id, &st)) < 0)
				return e;
			if (st)
				return 0;
			return gw_idlist__add(&c->missing_stacks, in->stack_id.p, in->stack_id.n);
		}
		c->known_kernel = in->kernel_id;
	}
	if ((e = seen_stack(c, in->stack_id, &st)) < 0)
		return e;
	if (!st) {
		c->res->refused_missing += in->count;
		return gw_idlist__add(&c->missing_stacks, in->stack_id.p, in->stack_id.n);
	}
	if (stack_names_missing(c, st)) {
		c->res->refused_missing += in->count;
		return 0;
	}
	gw_stack__ref(st); /* the sample's own */
	if ((e = note_wanted(c, st)) < 0 || (e = resource_for(c, in, &ri)) < 0) {
		gw_stack__unref(st);
		return e;
	}
	struct gw_sample s = {
		.stack = st,
		.count = in->count,
		.start_ns = in->start,
		.end_ns = in->end,
		.pid = (uint32_t)in->pid,
		.tid = (uint32_t)in->tid,
		.thread_name = thread_name(c, in->thread_name),
		.process_start_ticks = in->start_ticks,
		.off_cpu_ns = in->profile_type == stackrelay_v1_ProfileType_PROFILE_TYPE_OFF_CPU ? in->off_cpu_nanos
												 : 0,
	};
	e = gw_resource__add_sample_owned(c->res->batch, &c->res->batch->resources[ri], &s);
	if (e < 0) {
		gw_stack__unref(st);
		return e;
	}
	c->res->accepted += in->count;
	return 0;
}

/* ---- response ---- */

static bool enc_ids(pb_ostream_t *os, uint32_t tag, const struct gw_idlist *l)
{
	for (size_t i = 0; i < l->n; i++)
		if (!pb_encode_tag(os, PB_WT_STRING, tag) || !pb_encode_string(os, l->v[i].p, l->v[i].n))
			return false;
	return true;
}

static bool enc_varint(pb_ostream_t *os, uint32_t tag, uint64_t v)
{
	return v == 0 || (pb_encode_tag(os, PB_WT_VARINT, tag) && pb_encode_varint(os, v));
}

struct resp {
	uint64_t accepted;
	uint32_t retry_after_ms;
	uint32_t symbols_pending;
	const char *error;
	const struct gw_idlist *stacks, *exes, *kernels, *functions, *wanted;
};

static bool enc_response(pb_ostream_t *os, const struct resp *r)
{
	if (!enc_varint(os, stackrelay_v1_PushResponse_protocol_version_tag, GW_AGENT_PROTOCOL_VERSION) ||
	    !enc_varint(os, stackrelay_v1_PushResponse_accepted_samples_tag, r->accepted))
		return false;
	if ((r->stacks && !enc_ids(os, stackrelay_v1_PushResponse_missing_stacks_tag, r->stacks)) ||
	    (r->exes && !enc_ids(os, stackrelay_v1_PushResponse_missing_executables_tag, r->exes)) ||
	    (r->kernels && !enc_ids(os, stackrelay_v1_PushResponse_missing_kernels_tag, r->kernels)) ||
	    (r->functions && !enc_ids(os, stackrelay_v1_PushResponse_missing_functions_tag, r->functions)) ||
	    (r->wanted && !enc_ids(os, stackrelay_v1_PushResponse_wanted_symbols_tag, r->wanted)))
		return false;
	if (!enc_varint(os, stackrelay_v1_PushResponse_retry_after_ms_tag, r->retry_after_ms) ||
	    !enc_varint(os, stackrelay_v1_PushResponse_symbols_pending_tag, r->symbols_pending))
		return false;
	if (r->error && *r->error &&
	    (!pb_encode_tag(os, PB_WT_STRING, stackrelay_v1_PushResponse_error_tag) ||
	     !pb_encode_string(os, (const pb_byte_t *)r->error, strlen(r->error))))
		return false;
	return true;
}

static int encode_response(const struct resp *r, uint8_t **ret, size_t *ret_len)
{
	pb_ostream_t sizing = PB_OSTREAM_SIZING;
	pb_ostream_t os;
	uint8_t *buf;

	if (!enc_response(&sizing, r))
		return -EINVAL;
	buf = malloc(sizing.bytes_written ? sizing.bytes_written : 1);
	if (!buf)
		return -ENOMEM;
	os = pb_ostream_from_buffer(buf, sizing.bytes_written);
	if (!enc_response(&os, r)) {
		free(buf);
		return -EINVAL;
	}
	*ret = buf;
	*ret_len = os.bytes_written;
	return 0;
}

int gw_ingest_encode_error(uint32_t retry_after_ms, const char *error, uint8_t **ret, size_t *ret_len)
{
	struct resp r = { .retry_after_ms = retry_after_ms, .error = error };
	return encode_response(&r, ret, ret_len);
}

/* ---- the request ---- */

/* Calls fn with a reader of every top-level field numbered tag (length-delimited). */
static int each_field(struct sr_pbr r, uint32_t tag,
		      int (*fn)(struct ctx *c, struct sr_pbr m, char *errbuf, size_t errsize), struct ctx *c,
		      char *errbuf, size_t errsize)
{
	uint32_t f, wt;
	struct sr_pb_slice s;
	int e;

	while (r.p < r.end) {
		if (sr_pbr__tag(&r, &f, &wt) < 0) {
			snprintf(errbuf, errsize, "PushRequest: bad field key (at byte %zu)", sr_pbr__offset(&r));
			return -EBADMSG;
		}
		if (f != tag) {
			if (sr_pbr__skip(&r, wt) < 0) {
				snprintf(errbuf, errsize, "PushRequest: malformed field %u (at byte %zu)", f,
					 sr_pbr__offset(&r));
				return -EBADMSG;
			}
			continue;
		}
		if (sr_pbr__field_bytes(&r, wt, &s) < 0) {
			snprintf(errbuf, errsize, "PushRequest: field %u is not length-delimited (at byte %zu)", f,
				 sr_pbr__offset(&r));
			return -EBADMSG;
		}
		if ((e = fn(c, sr_pbr__sub(&r, s), errbuf, errsize)) < 0)
			return e;
	}
	return 0;
}

static int do_executable(struct ctx *c, struct sr_pbr m, char *errbuf, size_t errsize)
{
	c->res->defined_executables++;
	return gw_ingest_parse_executable(c->stores, m, errbuf, errsize);
}

static int do_kernel(struct ctx *c, struct sr_pbr m, char *errbuf, size_t errsize)
{
	c->res->defined_kernels++;
	return gw_ingest_parse_kernel(c->stores, m, errbuf, errsize);
}

static int do_function(struct ctx *c, struct sr_pbr m, char *errbuf, size_t errsize)
{
	c->res->defined_functions++;
	return gw_ingest_parse_function(c->stores, m, errbuf, errsize);
}

static int do_stack(struct ctx *c, struct sr_pbr m, char *errbuf, size_t errsize)
{
	c->res->defined_stacks++;
	return gw_ingest_parse_stack(&c->defs, m, errbuf, errsize);
}

static int do_symbol_table(struct ctx *c, struct sr_pbr m, char *errbuf, size_t errsize)
{
	return gw_ingest_parse_symbol_table(&c->defs, m, errbuf, errsize);
}

static int do_agent(struct ctx *c, struct sr_pbr r, char *errbuf, size_t errsize)
{
	uint32_t f, wt;
	int e = 0;
	while (r.p < r.end) {
		struct sr_pb_slice t = { 0 };
		if ((e = sr_pbr__tag(&r, &f, &wt)) < 0)
			FAIL(&r, "AgentInfo: bad field key");
		if (f == stackrelay_v1_AgentInfo_host_name_tag) {
			if ((e = sr_pbr__field_bytes(&r, wt, &t)) < 0)
				FAIL(&r, "AgentInfo.host_name: malformed");
			c->host_name = t;
		} else if (f == stackrelay_v1_AgentInfo_node_name_tag) {
			if ((e = sr_pbr__field_bytes(&r, wt, &t)) < 0)
				FAIL(&r, "AgentInfo.node_name: malformed");
			c->node_name = t;
		} else if ((e = sr_pbr__skip(&r, wt)) < 0)
			FAIL(&r, "AgentInfo: malformed field %u", f);
	}
out:
	return e;
}

static int do_sample(struct ctx *c, struct sr_pbr m, char *errbuf, size_t errsize)
{
	struct sample_in in;
	int e = parse_sample(m, &in, errbuf, errsize);
	if (e < 0)
		return e;
	if (in.count == 0)
		return 0;
	if (c->res->received + in.count < c->res->received) {
		snprintf(errbuf, errsize, "Sample.count: the sum of counts overflows 64 bits");
		return -EBADMSG;
	}
	c->res->received += in.count;
	return add_sample(c, &in);
}

/*
 * One probed ID (docs/agent-protocol.md, "Symbol probes"): listed in
 * wanted_symbols when the symbolizer wants the agent's table, counted in
 * symbols_pending while a lookup is still going on. An ID this gateway does
 * not know is neither: it holds no frames in it.
 */
static int do_probe(struct ctx *c, struct sr_pbr m, char *errbuf, size_t errsize)
{
	struct sr_pb_slice s = { m.p, sr_pbr__remaining(&m) };
	struct gw_executable *x;
	struct gw_kernel *k = NULL;
	bool wanted, pending, dup;
	size_t before = c->probed.n;
	int e;

	if (s.n == 0 || s.n > GW_ID_MAX) {
		snprintf(errbuf, errsize, "PushRequest.probe_symbols: an ID is empty or longer than %d bytes",
			 GW_ID_MAX);
		return -EBADMSG;
	}
	if ((e = gw_idlist__add(&c->probed, s.p, s.n)) < 0)
		return e;
	dup = c->probed.n == before;
	if (dup)
		return 0;
	if (c->probed.n > GW_AGENT_MAX_PROBES_PER_REQUEST) {
		snprintf(errbuf, errsize, "PushRequest.probe_symbols: more than %d IDs in one request",
			 GW_AGENT_MAX_PROBES_PER_REQUEST);
		return -EBADMSG;
	}
	x = gw_stores__executable(c->stores, s.p, s.n);
	if (x) {
		wanted = gw_executable__wants_symbols(x);
		pending = gw_executable__symbols_pending(x);
	} else if ((k = gw_stores__kernel(c->stores, s.p, s.n))) {
		wanted = gw_kernel__wants_symbols(k);
		pending = gw_kernel__symbols_pending(k);
	} else {
		return 0;
	}
	e = 0;
	if (wanted) {
		/*
		 * Not listed (a full list, or another agent is uploading it): pending,
		 * so the agent asks again after a while, and uploads it then if the
		 * other agent never did.
		 */
		if ((e = ask_for(c, x, k)) == 0)
			c->res->symbols_pending++;
	} else if (pending) {
		c->res->symbols_pending++;
	}
	gw_executable__unref(x);
	gw_kernel__unref(k);
	return e < 0 ? e : 0;
}

static int process(struct gw_stores *stores, const uint8_t *body, size_t len, uint64_t epoch, bool definitions_only,
		   struct gw_ingest_result *res, char *errbuf, size_t errsize)
{
	struct sr_pbr r = sr_pbr_of(body, len);
	struct ctx c = { .stores = stores,
			 .defs = { .stores = stores, .res = res },
			 .epoch = epoch,
			 .res = res,
			 .definitions_only = definitions_only };
	struct gw_ingest_header h;
	int e;

	memset(res, 0, sizeof(*res));
	if ((e = gw_ingest_header(body, len, &h, errbuf, errsize)) < 0)
		return e;
	c.frequency_hz = h.frequency_hz;
	res->batch = gw_profiles_new();
	if (!res->batch) {
		e = -ENOMEM;
		goto fail;
	}
	/* Definitions before their users, whatever the order on the wire. */
	if ((e = each_field(r, stackrelay_v1_PushRequest_agent_tag, do_agent, &c, errbuf, errsize)) < 0 ||
	    (e = each_field(r, stackrelay_v1_PushRequest_executables_tag, do_executable, &c, errbuf, errsize)) < 0 ||
	    (e = each_field(r, stackrelay_v1_PushRequest_kernels_tag, do_kernel, &c, errbuf, errsize)) < 0 ||
	    (e = each_field(r, stackrelay_v1_PushRequest_functions_tag, do_function, &c, errbuf, errsize)) < 0 ||
	    (e = each_field(r, stackrelay_v1_PushRequest_stacks_tag, do_stack, &c, errbuf, errsize)) < 0 ||
	    (e = each_field(r, stackrelay_v1_PushRequest_symbol_tables_tag, do_symbol_table, &c, errbuf, errsize)) <
		    0 ||
	    (e = each_field(r, stackrelay_v1_PushRequest_drops_tag, parse_drops, &c, errbuf, errsize)) < 0 ||
	    (!definitions_only &&
	     (e = each_field(r, stackrelay_v1_PushRequest_samples_tag, do_sample, &c, errbuf, errsize)) < 0) ||
	    (!definitions_only &&
	     (e = each_field(r, stackrelay_v1_PushRequest_probe_symbols_tag, do_probe, &c, errbuf, errsize)) < 0))
		goto fail;
	res->probes = c.probed.n;
	res->missing_stacks = c.missing_stacks.n;
	res->missing_executables = c.defs.missing_exes.n;
	res->missing_kernels = c.defs.missing_kernels.n;
	res->missing_functions = c.defs.missing_functions.n;
	res->wanted = c.wanted.n;
	{
		struct resp rs = {
			.accepted = res->accepted,
			.symbols_pending = (uint32_t)SR_MIN(res->symbols_pending, (uint64_t)UINT32_MAX),
			.stacks = &c.missing_stacks,
			.exes = &c.defs.missing_exes,
			.kernels = &c.defs.missing_kernels,
			.functions = &c.defs.missing_functions,
			.wanted = &c.wanted,
		};
		if ((e = encode_response(&rs, &res->response, &res->response_len)) < 0)
			goto fail;
	}
	if (res->batch->n_samples == 0) {
		gw_profiles__unref(res->batch);
		res->batch = NULL;
	}
	e = 0;
	goto out;
fail:
	if (e == -ENOMEM)
		snprintf(errbuf, errsize, "out of memory processing the request");
	gw_ingest_result_release_asks(res);
	gw_ingest_result_free(res);
out:
	gw_idlist__free(&c.missing_stacks);
	gw_idlist__free(&c.defs.missing_exes);
	gw_idlist__free(&c.defs.missing_kernels);
	gw_idlist__free(&c.defs.missing_functions);
	gw_idlist__free(&c.wanted);
	gw_idlist__free(&c.probed);
	free(c.resources.s);
	gw_bytes_set__free(&c.thread_names);
	for (size_t i = 0; i < c.stacks_seen.cap; i++)
		if (c.stacks_seen.e[i].used && c.stacks_seen.e[i].value)
			gw_stack__unref((struct gw_stack *)c.stacks_seen.e[i].value);
	gw_bytes_set__free(&c.stacks_seen);
	gw_bytes_set__free(&c.kernels_seen);
	return e;
}

int gw_ingest_process(struct gw_stores *stores, const uint8_t *body, size_t len, uint64_t epoch,
		      struct gw_ingest_result *res, char *errbuf, size_t errsize)
{
	return process(stores, body, len, epoch, false, res, errbuf, errsize);
}

int gw_ingest_process_definitions(struct gw_stores *stores, const uint8_t *body, size_t len, uint64_t epoch,
				  struct gw_ingest_result *res, char *errbuf, size_t errsize)
{
	return process(stores, body, len, epoch, true, res, errbuf, errsize);
}

void gw_ingest_result_release_asks(struct gw_ingest_result *res)
{
	for (size_t i = 0; i < res->n_asked_exes; i++)
		gw_executable__release_ask(res->asked_exes[i]);
	for (size_t i = 0; i < res->n_asked_kernels; i++)
		gw_kernel__release_ask(res->asked_kernels[i]);
}

void gw_ingest_result_free(struct gw_ingest_result *res)
{
	for (size_t i = 0; i < res->n_asked_exes; i++)
		gw_executable__unref(res->asked_exes[i]);
	free(res->asked_exes);
	for (size_t i = 0; i < res->n_asked_kernels; i++)
		gw_kernel__unref(res->asked_kernels[i]);
	free(res->asked_kernels);
	gw_profiles__unref(res->batch);
	for (size_t i = 0; i < res->n_tables; i++)
		gw_symbol_table_free(res->tables[i]);
	free(res->tables);
	free(res->response);
	memset(res, 0, sizeof(*res));
}

static int count_one(struct ctx *c, struct sr_pbr m, char *errbuf, size_t errsize)
{
	struct sample_in in;
	int e = parse_sample(m, &in, errbuf, errsize);
	if (e < 0)
		return e;
	if (c->res->received + in.count < c->res->received)
		return -EBADMSG;
	c->res->received += in.count;
	return 0;
}

int gw_ingest_count_samples(const uint8_t *body, size_t len, uint64_t *ret)
{
	struct gw_ingest_result res = { 0 };
	struct ctx c = { .defs = { .res = &res }, .res = &res };
	char err[128];
	int e = each_field(sr_pbr_of(body, len), stackrelay_v1_PushRequest_samples_tag, count_one, &c, err,
			   sizeof(err));
	*ret = res.received;
	return e;
}
