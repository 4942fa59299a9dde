/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The samples of one PushRequest (agent-ingest-private.h): decoded, checked
 * against the stores (one answer per stack and kernel ID a request), grouped
 * into the batch's resources, with the symbols the gateway wants noted.
 * Untrusted input, as in agent-ingest.c.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "stackrelay/v1/ingest.pb.h"
#include "stackrelay/v1/types.pb.h"

#include "agent-ingest-private.h"
#include "agent-ingest.h"
#include "common/grow.h"
#include "common/macro.h"
#include "model.h"
#include "common/pbwire.h"

int gw_ingest_parse_sample(struct sr_pbr r, struct gw_ingest_sample *in, char *errbuf, size_t errsize)
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

static bool rslot_eq(const void *slot, const void *key)
{
	return rkey_eq(&((const struct rslot *)slot)->k, key);
}

static int add_str_attr(struct gw_profiles *p, struct gw_resource *r, const char *key, struct sr_pb_slice v)
{
	char buf[GW_AGENT_MAX_STRING_BYTES + 1];
	if (!v.n)
		return 0;
	return gw_resource__set_string(p, r, key, gw_ingest_cstr(buf, v));
}

/* The resource index for a sample's identity, created on first use. */
static int resource_for(struct gw_ingest_ctx *c, const struct gw_ingest_sample *in, uint32_t *ret)
{
	struct gw_profiles *p = c->res->batch;
	enum gw_profile_type type = in->profile_type == stackrelay_v1_ProfileType_PROFILE_TYPE_OFF_CPU
					    ? GW_PROFILE_OFF_CPU
					    : GW_PROFILE_CPU;
	struct rkey k = { in->process_name, in->exe_path, in->container_id, in->pod_uid, type };
	struct sr_htab *t = &c->resources;
	struct rslot *slot;
	uint64_t h;
	int e;

	h = slice_hash(in->process_name, 1);
	h = slice_hash(in->exe_path, h);
	h = slice_hash(in->container_id, h);
	h = slice_hash(in->pod_uid, h) ^ (uint64_t)type;
	if (!t->elem) /* the request's first sample */
		sr_htab_init(t, sizeof(*slot), rslot_eq);
	slot = sr_htab__find(t, h, &k, rslot_eq); /* per sample: eq inlined */
	if (slot) {
		*ret = slot->idx;
		return 0;
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
	if ((e = sr_htab__add(t, h, (void **)&slot)) < 0)
		return e;
	slot->k = k;
	slot->idx = p->n_resources - 1;
	*ret = p->n_resources - 1;
	return 0;
}

/* One thread-name string per distinct name in the batch. */
static const char *thread_name(struct gw_ingest_ctx *c, struct sr_pb_slice s)
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
 * agent is being asked for it (claim_ask), and records that this agent was
 * asked (its upload is taken from it only); the claim is kept with the result,
 * so it can be released if the response is never delivered. Returns 1 when
 * listed, 0 when another agent has it or the list is full.
 */
int gw_ingest_ask_for(struct gw_ingest_ctx *c, struct gw_executable *x, struct gw_kernel *k)
{
	struct gw_ingest_result *res = c->res;
	int e;

	if (c->wanted.n >= GW_AGENT_MAX_WANTED_PER_RESPONSE)
		return 0;
	if (x) {
		if (sr_grow((void **)&res->asked_exes, &res->cap_asked_exes, res->n_asked_exes + 1,
			    sizeof(*res->asked_exes), 16) < 0)
			return -ENOMEM;
		if (!gw_executable__claim_ask(x, GW_AGENT_WANTED_ASK_NS))
			return 0;
		gw_executable__record_ask(x, c->defs.identity, GW_AGENT_ANSWER_NS);
		res->asked_exes[res->n_asked_exes++] = gw_executable__ref(x);
		e = gw_idlist__add(&c->wanted, x->id.bytes, x->id.len);
	} else {
		if (sr_grow((void **)&res->asked_kernels, &res->cap_asked_kernels, res->n_asked_kernels + 1,
			    sizeof(*res->asked_kernels), 4) < 0)
			return -ENOMEM;
		if (!gw_kernel__claim_ask(k, GW_AGENT_WANTED_ASK_NS))
			return 0;
		gw_kernel__record_ask(k, c->defs.identity, GW_AGENT_ANSWER_NS);
		res->asked_kernels[res->n_asked_kernels++] = gw_kernel__ref(k);
		e = gw_idlist__add(&c->wanted, k->id.bytes, k->id.len);
	}
	return e < 0 ? e : 1;
}

/* Adds the wanted executables and kernels behind a stack (once per stack and exe per request). */
static int note_wanted(struct gw_ingest_ctx *c, struct gw_stack *st)
{
	/* Only an optimization (the wanted list de-duplicates too), so a race between
	 * two requests processed at once costs a second walk, nothing more. */
	if (atomic_load_explicit(&st->scratch_epoch, memory_order_relaxed) == (uint32_t)c->epoch)
		return 0;
	atomic_store_explicit(&st->scratch_epoch, (uint32_t)c->epoch, memory_order_relaxed);
	/* Every location named already (symbolize-pass.c): no symbols or lookups are wanted for it, and one flag
	 * saves a cache miss per location on most samples. */
	if (atomic_load_explicit(&st->symbolized, memory_order_acquire))
		return 0;
	for (uint32_t i = 0; i < st->n_locations; i++) {
		const struct gw_location *l = gw_stack__location(st, i);
		struct gw_executable *x = gw_location__exe(l);
		struct gw_kernel *k = gw_location__kernel(l);
		/* A kernel whose kallsyms the symbolize processor needs (few per request: the list de-duplicates). */
		if (k && gw_kernel__wants_symbols(k)) {
			int e = gw_ingest_ask_for(c, NULL, k);
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
			int e = gw_ingest_ask_for(c, x, NULL);
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
static bool stack_names_missing(const struct gw_ingest_ctx *c, const struct gw_stack *st)
{
	if (!c->defs.missing_exes.n && !c->defs.missing_kernels.n)
		return false;
	for (uint32_t i = 0; i < st->n_locations; i++) {
		const struct gw_location *l = gw_stack__location(st, i);

		if (gw_location__exe(l) && idlist_has(&c->defs.missing_exes, &gw_location__exe(l)->id))
			return true;
		if (gw_location__kernel(l) && idlist_has(&c->defs.missing_kernels, &gw_location__kernel(l)->id))
			return true;
	}
	return false;
}

/*
 * The stack of this ID as this request first found it (*ret: borrowed, NULL
 * when missing): later samples of the request get the same answer.
 */
static int seen_stack(struct gw_ingest_ctx *c, struct sr_pb_slice id, struct gw_stack **ret)
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

/*
 * The array a request's samples wait in is kept for the thread's next
 * request (one per thread: the loop's, the decode thread's), up to
 * PENDING_KEEP_BYTES: at 2,000 nodes a replica reads about 200 requests a
 * second, of a few thousand samples each, and growing the array from 256
 * entries for each of them, in a heap strewn with batches, was a fifth of
 * malloc's 6-7 % of the core (perf --call-graph dwarf, a 10-minute soak).
 * A thread's array is freed when the thread ends.
 */
#define PENDING_KEEP_BYTES (1u << 20)

struct pending_spare {
	struct gw_ingest_pending *v;
	uint32_t cap;
};

static pthread_key_t spare_key;
static pthread_once_t spare_once = PTHREAD_ONCE_INIT;
static bool spare_ok;

static void spare_free(void *p)
{
	struct pending_spare *sp = p;

	free(sp->v);
	free(sp);
}

static void spare_init(void)
{
	spare_ok = pthread_key_create(&spare_key, spare_free) == 0;
}

static struct pending_spare *spare(bool create)
{
	struct pending_spare *sp;

	pthread_once(&spare_once, spare_init);
	if (!spare_ok)
		return NULL;
	sp = pthread_getspecific(spare_key);
	if (!sp && create && (sp = calloc(1, sizeof(*sp))) && pthread_setspecific(spare_key, sp) != 0) {
		free(sp);
		sp = NULL;
	}
	return sp;
}

static void pending_take(struct gw_ingest_ctx *c)
{
	struct pending_spare *sp = spare(false);

	if (!sp || !sp->v)
		return;
	c->pending = sp->v;
	c->cap_pending = sp->cap;
	sp->v = NULL;
	sp->cap = 0;
}

static void pending_keep(struct gw_ingest_ctx *c)
{
	struct pending_spare *sp;

	if (!c->pending)
		return;
	if ((size_t)c->cap_pending * sizeof(*c->pending) > PENDING_KEEP_BYTES || !(sp = spare(true)) ||
	    sp->cap >= c->cap_pending) {
		free(c->pending);
		return;
	}
	free(sp->v);
	sp->v = c->pending;
	sp->cap = c->cap_pending;
}

int gw_ingest_add_sample(struct gw_ingest_ctx *c, const struct gw_ingest_sample *in)
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
		.pid = (uint32_t)in->pid,
		.tid = (uint32_t)in->tid,
		.thread_name = thread_name(c, in->thread_name),
		.off_cpu_ns = in->profile_type == stackrelay_v1_ProfileType_PROFILE_TYPE_OFF_CPU ? in->off_cpu_nanos
												 : 0,
	};
	if (!c->pending)
		pending_take(c);
	if (c->n_pending == c->cap_pending) {
		int r = sr_grow_u32((void **)&c->pending, &c->cap_pending, c->n_pending + 1, sizeof(*c->pending), 256);

		if (r < 0) {
			gw_stack__unref(st);
			return r;
		}
	}
	c->pending[c->n_pending++] = (struct gw_ingest_pending){ s, ri };
	gw_resource__cover(&c->res->batch->resources[ri], in->start, in->end);
	c->res->accepted += in->count;
	return 0;
}

int gw_ingest_place_samples(struct gw_ingest_ctx *c)
{
	struct gw_profiles *p = c->res->batch;
	uint32_t *count;
	int e = 0;

	if (!c->n_pending)
		return 0;
	count = calloc(p->n_resources, sizeof(*count));
	if (!count)
		return -ENOMEM;
	for (uint32_t i = 0; i < c->n_pending; i++)
		count[c->pending[i].resource]++;
	for (uint32_t i = 0; i < p->n_resources && e == 0; i++)
		if (count[i])
			e = gw_resource__reserve_samples(p, &p->resources[i], count[i]);
	free(count);
	if (e < 0)
		return e;			    /* gw_ingest_pending_free() releases them */
	for (uint32_t i = 0; i < c->n_pending; i++) /* room reserved: cannot fail */
		(void)gw_resource__add_sample_owned(p, &p->resources[c->pending[i].resource], &c->pending[i].s);
	c->n_pending = 0;
	return 0;
}

void gw_ingest_pending_free(struct gw_ingest_ctx *c)
{
	for (uint32_t i = 0; i < c->n_pending; i++)
		gw_stack__unref(c->pending[i].s.stack);
	pending_keep(c);
	c->pending = NULL;
	c->n_pending = c->cap_pending = 0;
}
