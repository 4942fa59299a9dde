// SPDX-License-Identifier: Apache-2.0
/*
 * The sender against an in-process gateway (a transport that decodes each
 * PushRequest and answers as scripted) and a fake store: accounting,
 * drop-oldest, missing-ID resends, idempotent retries, retry-after, 4xx
 * handling, symbol uploads, symbol probes at flush, backoff bounds.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <pb_decode.h>
#include <pb_encode.h>

#include "agent.h"
#include "agent/config.h"
#include "agent/sender-parts-private.h"
#include "test-agent-sender-fakestore.h"

#define N_STACKS	64
#define N_EXECS		8
#define MAX_SEQS	4096
#define MAX_PIDS	4096
#define MAX_PROBE_POSTS 64

/* How the fake answers the n-th probe request (PushRequest.probe_symbols). */
struct probe_answer {
	unsigned want_execs; /* executables (bit = index) listed in wanted_symbols, if probed */
	bool want_kernel;
	unsigned pending; /* PushResponse.symbols_pending */
};

struct fakegw {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stacks[N_STACKS], execs[N_EXECS], kernel;
	/* Script, consumed per post. */
	int transport_errors; /* next N posts fail without a response */
	int lose_responses;   /* next N posts are processed, then fail as if the response was lost */
	int statuses;	      /* next N posts answer `status` without processing */
	long status;
	int retry_afters;    /* next N posts answer 200 with retry_after_ms */
	int ignore_defs;     /* next N posts' definitions are not learned */
	int new_connections; /* next N posts report a new connection */
	bool want_symbols;
	bool want_kernel_symbols; /* list the kernel in wanted_symbols until its table arrives */
	bool gate_closed;	  /* posts block until opened */
	bool blocked;		  /* a post is waiting at the gate */
	/* Record. */
	unsigned posts;
	uint64_t accepted, per_pid[MAX_PIDS];
	uint64_t seqs[MAX_SEQS];
	uint8_t *replies[MAX_SEQS];
	size_t reply_len[MAX_SEQS];
	unsigned n_seqs, duplicates;
	unsigned stack_defs, exec_defs, kernel_defs, func_defs;
	bool funcs[FAKE_N_FUNCS];
	unsigned symbol_tables, symbols_in_last;
	char last_table_error[256];
	bool sym_received[N_EXECS];
	unsigned kernel_tables, kernel_symbols;
	char kernel_table_error[256];
	bool kernel_has_module_name;
	uint64_t drops_relayed[4];
	uint64_t last_seq;
	unsigned seq_reuses; /* posts whose sequence was seen before */
	unsigned fresh_requested;
	char last_token[64];
	/* Probes: answered by script (nothing wanted or pending past its end), not counted in posts. */
	struct probe_answer probe_script[8];
	unsigned probe_script_n;
	bool probe_pending_forever;
	unsigned probe_posts, probe_max_ids;
	unsigned probed_execs[MAX_PROBE_POSTS]; /* what each probe asked about (bit = executable index) */
	bool probed_kernel[MAX_PROBE_POSTS];
	unsigned probe_before_upload; /* probes posted while a table the last answer wanted had not arrived */
	unsigned last_wanted_execs;
};

static void fakegw_init(struct fakegw *g)
{
	memset(g, 0, sizeof(*g));
	pthread_mutex_init(&g->mu, NULL);
	pthread_cond_init(&g->cv, NULL);
}

static void fakegw_done(struct fakegw *g)
{
	for (unsigned i = 0; i < g->n_seqs; i++)
		free(g->replies[i]);
	pthread_mutex_destroy(&g->mu);
	pthread_cond_destroy(&g->cv);
}

static pb_bytes_array_t *bytes_of(const uint8_t *p, size_t n)
{
	pb_bytes_array_t *b = malloc(PB_BYTES_ARRAY_T_ALLOCSIZE(n));

	b->size = (pb_size_t)n;
	memcpy(b->bytes, p, n);
	return b;
}

static void push_id(pb_bytes_array_t ***arr, pb_size_t *n, const uint8_t *id, size_t len)
{
	for (pb_size_t i = 0; i < *n; i++)
		if ((*arr)[i]->size == len && !memcmp((*arr)[i]->bytes, id, len))
			return;
	*arr = realloc(*arr, (*n + 1) * sizeof(**arr));
	(*arr)[(*n)++] = bytes_of(id, len);
}

/* Processes a decoded request like a gateway: learn, check, accept, answer. */
static void process(struct fakegw *g, stackrelay_v1_PushRequest *req, stackrelay_v1_PushResponse *resp, bool learn)
{
	uint64_t acc = 0;

	if (learn) {
		for (pb_size_t i = 0; i < req->stacks_count; i++) {
			int idx = fake_stack_index(req->stacks[i].id->bytes, req->stacks[i].id->size);

			if (idx >= 0)
				g->stacks[idx] = true;
		}
		for (pb_size_t i = 0; i < req->executables_count; i++) {
			int idx = fake_exec_index(req->executables[i].id->bytes, req->executables[i].id->size);

			if (idx >= 0)
				g->execs[idx] = true;
		}
		if (req->kernels_count)
			g->kernel = true;
		for (pb_size_t i = 0; i < req->functions_count; i++) {
			int idx = fake_func_index(req->functions[i].id->bytes, req->functions[i].id->size);

			assert_true(idx >= 0 && idx < FAKE_N_FUNCS);
			assert_non_null(req->functions[i].name);
			g->funcs[idx] = true;
		}
	}
	g->func_defs += req->functions_count;
	g->stack_defs += req->stacks_count;
	g->exec_defs += req->executables_count;
	g->kernel_defs += req->kernels_count;
	if (req->drops) {
		g->drops_relayed[0] += req->drops->ring_buffer_full ? *req->drops->ring_buffer_full : 0;
		g->drops_relayed[3] += req->drops->process_unknown ? *req->drops->process_unknown : 0;
	}
	for (pb_size_t i = 0; i < req->samples_count; i++) {
		stackrelay_v1_Sample *s = &req->samples[i];
		int idx = fake_stack_index(s->stack_id->bytes, s->stack_id->size);
		bool ok = true;
		uint8_t id[32];

		assert_true(idx >= 0);
		if (!g->stacks[idx]) {
			push_id(&resp->missing_stacks, &resp->missing_stacks_count, s->stack_id->bytes,
				s->stack_id->size);
			ok = false;
		} else {
			for (unsigned k = 0; k < 2; k++) {
				unsigned e = ((unsigned)idx + k) % N_EXECS;

				if (!g->execs[e]) {
					fake_exec_id(e, id);
					push_id(&resp->missing_executables, &resp->missing_executables_count, id,
						FAKE_EXEC_ID_BYTES);
					ok = false;
				}
			}
		}
		if (!(idx % 2) && !g->funcs[((unsigned)idx / 2) % FAKE_N_FUNCS]) {
			fake_func_id(((unsigned)idx / 2) % FAKE_N_FUNCS, id);
			push_id(&resp->missing_functions, &resp->missing_functions_count, id, FAKE_FUNC_ID_BYTES);
			ok = false;
		}
		if ((idx % 2) && !g->kernel) {
			fake_kernel_id(id);
			push_id(&resp->missing_kernels, &resp->missing_kernels_count, id, FAKE_KERNEL_ID_BYTES);
			ok = false;
		}
		if (!ok)
			continue;
		acc += *s->count;
		if (*s->pid < MAX_PIDS)
			g->per_pid[*s->pid] += *s->count;
		if (g->want_kernel_symbols && g->kernel && !g->kernel_tables) {
			fake_kernel_id(id);
			push_id(&resp->wanted_symbols, &resp->wanted_symbols_count, id, FAKE_KERNEL_ID_BYTES);
		}
		if (g->want_symbols) {
			unsigned e = (unsigned)idx % N_EXECS;

			if (!g->sym_received[e]) {
				fake_exec_id(e, id);
				push_id(&resp->wanted_symbols, &resp->wanted_symbols_count, id, FAKE_EXEC_ID_BYTES);
			}
		}
	}
	for (pb_size_t i = 0; i < req->symbol_tables_count; i++) {
		stackrelay_v1_SymbolTable *t = &req->symbol_tables[i];
		int e = fake_exec_index(t->executable_id->bytes, t->executable_id->size);
		uint8_t kid[FAKE_KERNEL_ID_BYTES];

		fake_kernel_id(kid);
		if (t->executable_id->size == sizeof(kid) && !memcmp(t->executable_id->bytes, kid, sizeof(kid))) {
			g->kernel_tables++;
			g->kernel_symbols = t->symbols_count;
			snprintf(g->kernel_table_error, sizeof(g->kernel_table_error), "%s", t->error ? t->error : "");
			for (pb_size_t k = 0; k < t->symbols_count; k++)
				if (t->symbols[k].name && !strcmp(t->symbols[k].name, "mod_fn [kvm]"))
					g->kernel_has_module_name = true;
		}
		g->symbol_tables++;
		g->symbols_in_last = t->symbols_count;
		snprintf(g->last_table_error, sizeof(g->last_table_error), "%s", t->error ? t->error : "");
		if (e >= 0)
			g->sym_received[e] = true;
	}
	g->accepted += acc;
	resp->accepted_samples = malloc(sizeof(uint64_t));
	*resp->accepted_samples = acc;
}

/* A probe request: which IDs it names, and the scripted answer. */
static void answer_probe(struct fakegw *g, const stackrelay_v1_PushRequest *req, stackrelay_v1_PushResponse *resp)
{
	unsigned k = g->probe_posts++, mask = 0;
	bool kernel = false;
	uint8_t kid[FAKE_KERNEL_ID_BYTES], id[FAKE_EXEC_ID_BYTES];

	fake_kernel_id(kid);
	assert_int_equal(req->samples_count, 0);
	for (pb_size_t i = 0; i < req->probe_symbols_count; i++) {
		const pb_bytes_array_t *p = req->probe_symbols[i];
		int e = fake_exec_index(p->bytes, p->size);

		if (e >= 0)
			mask |= 1u << e;
		else if (p->size == sizeof(kid) && !memcmp(p->bytes, kid, sizeof(kid)))
			kernel = true;
		else
			fail_msg("probe of an ID the agent never sent");
	}
	if (req->probe_symbols_count > g->probe_max_ids)
		g->probe_max_ids = req->probe_symbols_count;
	if (k < MAX_PROBE_POSTS) {
		g->probed_execs[k] = mask;
		g->probed_kernel[k] = kernel;
	}
	/* Everything the previous answer wanted must have been uploaded before this probe. */
	for (unsigned e = 0; e < N_EXECS; e++)
		if ((g->last_wanted_execs & (1u << e)) && !g->sym_received[e])
			g->probe_before_upload++;
	g->last_wanted_execs = 0;
	if (k < g->probe_script_n) {
		const struct probe_answer *a = &g->probe_script[k];

		for (unsigned e = 0; e < N_EXECS; e++) {
			if ((a->want_execs & mask & (1u << e)) == 0)
				continue;
			fake_exec_id(e, id);
			push_id(&resp->wanted_symbols, &resp->wanted_symbols_count, id, FAKE_EXEC_ID_BYTES);
			g->last_wanted_execs |= 1u << e;
		}
		if (a->want_kernel && kernel)
			push_id(&resp->wanted_symbols, &resp->wanted_symbols_count, kid, FAKE_KERNEL_ID_BYTES);
		if (a->pending) {
			resp->symbols_pending = malloc(sizeof(uint32_t));
			*resp->symbols_pending = a->pending;
		}
	} else if (g->probe_pending_forever) {
		resp->symbols_pending = malloc(sizeof(uint32_t));
		*resp->symbols_pending = req->probe_symbols_count;
	}
}

static uint8_t *encode_resp(stackrelay_v1_PushResponse *resp, size_t *len)
{
	size_t size = 0;
	uint8_t *buf;
	pb_ostream_t os;

	assert_true(pb_get_encoded_size(&size, stackrelay_v1_PushResponse_fields, resp));
	buf = malloc(size + 1);
	os = pb_ostream_from_buffer(buf, size);
	assert_true(pb_encode(&os, stackrelay_v1_PushResponse_fields, resp));
	*len = os.bytes_written;
	return buf;
}

static int fake_post(void *ud, const struct agent_sender_http_request *req, struct agent_sender_http_result *ret)
{
	struct fakegw *g = ud;
	stackrelay_v1_PushRequest pr = stackrelay_v1_PushRequest_init_zero;
	stackrelay_v1_PushResponse resp = stackrelay_v1_PushResponse_init_zero;
	pb_istream_t is;
	uint64_t seq;
	int r = 0;

	memset(ret, 0, sizeof(*ret));
	pthread_mutex_lock(&g->mu);
	while (g->gate_closed) {
		g->blocked = true;
		pthread_cond_broadcast(&g->cv);
		pthread_cond_wait(&g->cv, &g->mu);
	}
	g->blocked = false;
	g->posts++;
	if (req->fresh_connection) {
		g->fresh_requested++;
		ret->new_connection = true;
	}
	snprintf(g->last_token, sizeof(g->last_token), "%s", req->token ? req->token : "");
	if (g->new_connections > 0) {
		g->new_connections--;
		ret->new_connection = true;
	}
	if (g->transport_errors > 0) {
		g->transport_errors--;
		snprintf(ret->error, sizeof(ret->error), "scripted transport error");
		pthread_mutex_unlock(&g->mu);
		return -ECONNRESET;
	}
	if (g->statuses > 0) {
		g->statuses--;
		ret->status = g->status;
		pthread_mutex_unlock(&g->mu);
		return 0;
	}
	is = pb_istream_from_buffer(req->body, req->len);
	assert_true(pb_decode(&is, stackrelay_v1_PushRequest_fields, &pr));
	assert_non_null(pr.sequence);
	assert_non_null(pr.agent);
	assert_int_equal(pr.agent->instance_id->size, AGENT_SENDER_INSTANCE_ID_BYTES);
	assert_int_equal(*pr.protocol_version, AGENT_PROTOCOL_VERSION);
	seq = *pr.sequence;
	g->last_seq = seq;
	if (pr.probe_symbols_count) {
		g->posts--; /* counted apart */
		answer_probe(g, &pr, &resp);
		goto reply;
	}
	if (g->retry_afters > 0) {
		g->retry_afters--;
		resp.retry_after_ms = malloc(sizeof(uint32_t));
		*resp.retry_after_ms = 5;
		goto reply;
	}
	for (unsigned i = 0; i < g->n_seqs; i++) {
		if (g->seqs[i] == seq) {
			/* Duplicate: answer what we answered, accept nothing again. */
			g->duplicates++;
			g->seq_reuses++;
			if (g->lose_responses > 0) {
				g->lose_responses--;
				snprintf(ret->error, sizeof(ret->error), "scripted lost response");
				pthread_mutex_unlock(&g->mu);
				pb_release(stackrelay_v1_PushRequest_fields, &pr);
				return -ECONNRESET;
			}
			ret->status = 200;
			ret->body = malloc(g->reply_len[i] + 1);
			memcpy(ret->body, g->replies[i], g->reply_len[i]);
			ret->body_len = g->reply_len[i];
			pthread_mutex_unlock(&g->mu);
			pb_release(stackrelay_v1_PushRequest_fields, &pr);
			return 0;
		}
	}
	process(g, &pr, &resp, g->ignore_defs <= 0);
	if (g->ignore_defs > 0)
		g->ignore_defs--;
	assert_true(g->n_seqs < MAX_SEQS);
	g->seqs[g->n_seqs] = seq;
	g->replies[g->n_seqs] = encode_resp(&resp, &g->reply_len[g->n_seqs]);
	g->n_seqs++;
	if (g->lose_responses > 0) {
		g->lose_responses--;
		snprintf(ret->error, sizeof(ret->error), "scripted lost response");
		r = -ECONNRESET;
		goto out;
	}
reply:
	ret->status = 200;
	ret->body = encode_resp(&resp, &ret->body_len);
out:
	pthread_mutex_unlock(&g->mu);
	pb_release(stackrelay_v1_PushRequest_fields, &pr);
	pb_release(stackrelay_v1_PushResponse_fields, &resp);
	return r;
}

struct env {
	struct fakegw g;
	struct agent_config cfg;
	struct agent_store *store;
	struct agent_sender *s;
	uint64_t submitted;
};

static struct env *env_new(uint64_t buffer_bytes)
{
	struct env *e = calloc(1, sizeof(*e));
	struct agent_sender_transport t = { 0 };

	fakegw_init(&e->g);
	e->cfg.node_name = (char *)"node-a";
	e->cfg.gateway.endpoint = (char *)"http://127.0.0.1:1";
	e->cfg.gateway.buffer_bytes = buffer_bytes;
	e->cfg.gateway.timeout_ns = 5 * 1000000000ULL;
	e->cfg.gateway.max_symbol_upload_bytes = 8 * 1024 * 1024;
	e->store = fake_store_new(N_STACKS, N_EXECS);
	t.userdata = &e->g;
	t.post = fake_post;
	e->s = agent_sender_new_with_transport(&e->cfg, e->store, &t);
	assert_non_null(e->s);
	agent_sender__set_backoff(e->s, 1000000ULL, 4000000ULL);
	/* Every flush ends with a probe round: keep its waits short. */
	agent_sender__set_probe_wait(e->s, 1000000ULL, 4000000ULL);
	return e;
}

static void env_free(struct env *e)
{
	agent_sender_free(e->s);
	fake_store_free(e->store);
	fakegw_done(&e->g);
	free(e);
}

/* n samples over stacks [first, first + n), pid = base_pid + i, count = i + 1. */
static void submit(struct env *e, unsigned first, unsigned n, uint32_t base_pid)
{
	struct agent_batch b = { 0 };

	b.samples = calloc(n, sizeof(*b.samples));
	b.n_samples = n;
	b.frequency_hz = 19;
	b.window = base_pid / 1000; /* A = 1, B = 2 ... in the tests that name batches */
	for (unsigned i = 0; i < n; i++) {
		fake_sample(&b.samples[i], (first + i) % N_STACKS, base_pid + i, i + 1);
		b.total_count += i + 1;
	}
	e->submitted += b.total_count;
	assert_int_equal(agent_sender__submit(e->s, &b), 0);
	assert_null(b.samples);
	assert_int_equal(b.n_samples, 0);
}

/* The conservation rule, checked on the sender's own counters. */
static void assert_conserved(struct env *e)
{
	struct agent_sender_stats st;
	struct agent_sender_details d;

	agent_sender__stats(e->s, &st);
	agent_sender__details(e->s, &d);
	assert_int_equal(d.samples_submitted, e->submitted);
	assert_int_equal(st.samples_dropped, d.dropped_buffer_full + d.dropped_flush_timeout +
						     d.dropped_definition_lost + d.dropped_rejected);
	assert_int_equal(d.samples_submitted, st.samples_accepted + d.samples_buffered + st.samples_dropped);
}

static void test_backoff_bounds(void **state)
{
	uint64_t rnd = 88172645463325252ULL;

	for (unsigned f = 1; f < 70; f++) {
		uint64_t d = 500000000ULL;

		for (unsigned i = 1; i < f && d < 30000000000ULL; i++)
			d *= 2;
		if (d > 30000000000ULL)
			d = 30000000000ULL;
		for (int k = 0; k < 200; k++) {
			uint64_t v;

			rnd ^= rnd << 13;
			rnd ^= rnd >> 7;
			rnd ^= rnd << 17;
			v = agent_sender_backoff_ns(f, 500000000ULL, 30000000000ULL, rnd);
			assert_true(v >= d / 2);
			assert_true(v <= d);
		}
	}
	assert_int_equal(agent_sender_backoff_ns(0, 500000000ULL, 30000000000ULL, 7), 0);
	assert_int_equal(agent_sender_backoff_ns(1, 1000, 1000, 0), 500);
	assert_int_equal(agent_sender_backoff_ns(1, 1000, 1000, 500), 1000);
	for (int k = 0; k < 1000; k++) {
		uint64_t v = agent_sender_retry_after_ns(2000000000ULL, (uint64_t)k * 7919u * 104729u);

		assert_true(v >= 2000000000ULL && v <= 2500000000ULL);
	}
	/* Capped: a gateway cannot park an agent for a day. */
	assert_true(agent_sender_retry_after_ns(86400ULL * 1000000000ULL, 0) == AGENT_SENDER_RETRY_AFTER_MAX_NS);
}

static void test_send_and_definitions_once(void **state)
{
	struct env *e = env_new(64 * 1024 * 1024);
	struct agent_sender_stats st;

	submit(e, 0, 32, 100);
	assert_int_equal(agent_sender__flush(e->s, 10 * 1000000000ULL), 0);
	assert_int_equal(e->g.accepted, e->submitted);
	assert_int_equal(e->g.stack_defs, 32);
	assert_int_equal(e->g.exec_defs, N_EXECS);
	assert_int_equal(e->g.kernel_defs, 1);
	assert_int_equal(e->g.func_defs, FAKE_N_FUNCS);
	/* Same stacks again on the same connection: no definitions repeated. */
	submit(e, 0, 32, 200);
	assert_int_equal(agent_sender__flush(e->s, 10 * 1000000000ULL), 0);
	assert_int_equal(e->g.stack_defs, 32);
	assert_int_equal(e->g.exec_defs, N_EXECS);
	assert_int_equal(e->g.func_defs, FAKE_N_FUNCS);
	assert_int_equal(e->g.accepted, e->submitted);
	agent_sender__stats(e->s, &st);
	assert_int_equal(st.samples_accepted, e->submitted);
	assert_int_equal(st.samples_dropped, 0);
	assert_true(st.bytes_sent > 0);
	/* /metrics' sender_sent_ids: every definition the gateway has, in a table of 16-byte slots, bounded. */
	assert_int_equal(st.sent_ids, e->g.stack_defs + e->g.exec_defs + e->g.kernel_defs + e->g.func_defs);
	assert_true(st.sent_ids_bytes >= 16 * st.sent_ids);
	assert_int_equal(st.sent_ids_limit, 256 * 1024);
	assert_int_equal(st.symbol_ids_limit, 64 * 1024);
	assert_conserved(e);
	env_free(e);
}

static void test_new_connection_resends_definitions(void **state)
{
	struct env *e = env_new(64 * 1024 * 1024);

	submit(e, 0, 4, 100);
	assert_int_equal(agent_sender__flush(e->s, 10 * 1000000000ULL), 0);
	assert_int_equal(e->g.stack_defs, 4);
	/* A transport error: the next connection starts empty, so definitions go again. */
	e->g.transport_errors = 1;
	submit(e, 0, 4, 100);
	assert_int_equal(agent_sender__flush(e->s, 10 * 1000000000ULL), 0);
	assert_int_equal(e->g.stack_defs, 8);
	assert_int_equal(e->g.accepted, e->submitted);
	assert_conserved(e);
	env_free(e);
}

static void test_missing_resend(void **state)
{
	struct env *e = env_new(64 * 1024 * 1024);
	struct agent_sender_details d;

	/* The gateway "loses" the first request's definitions: everything comes back missing. */
	e->g.ignore_defs = 1;
	submit(e, 0, 16, 100);
	assert_int_equal(agent_sender__flush(e->s, 10 * 1000000000ULL), 0);
	assert_int_equal(e->g.accepted, e->submitted);
	assert_int_equal(e->g.posts, 2);
	assert_int_equal(e->g.stack_defs, 32); /* sent twice */
	for (unsigned i = 0; i < 16; i++)
		assert_int_equal(e->g.per_pid[100 + i], i + 1);
	agent_sender__details(e->s, &d);
	assert_int_equal(d.samples_resent_missing, e->submitted);
	assert_int_equal(d.accepted_mismatch, 0);
	assert_conserved(e);

	/* Only executables missing: samples of stacks whose frames reference them come back. */
	memset(e->g.execs, 0, sizeof(e->g.execs));
	submit(e, 0, 16, 300);
	assert_int_equal(agent_sender__flush(e->s, 10 * 1000000000ULL), 0);
	assert_int_equal(e->g.accepted, e->submitted);
	for (unsigned i = 0; i < 16; i++)
		assert_int_equal(e->g.per_pid[300 + i], i + 1);
	assert_conserved(e);

	/* Only functions missing: the samples of stacks with interpreted frames come back with them. */
	memset(e->g.funcs, 0, sizeof(e->g.funcs));
	{
		unsigned before = e->g.func_defs;

		submit(e, 0, 16, 500);
		assert_int_equal(agent_sender__flush(e->s, 10 * 1000000000ULL), 0);
		assert_int_equal(e->g.accepted, e->submitted);
		assert_int_equal(e->g.func_defs - before, FAKE_N_FUNCS);
	}
	for (unsigned i = 0; i < 16; i++)
		assert_int_equal(e->g.per_pid[500 + i], i + 1);
	assert_conserved(e);
	env_free(e);
}

static void test_missing_forever_is_rejected(void **state)
{
	struct env *e = env_new(64 * 1024 * 1024);
	struct agent_sender_details d;

	e->g.ignore_defs = 1000;
	submit(e, 0, 4, 100);
	assert_int_equal(agent_sender__flush(e->s, 10 * 1000000000ULL), 0);
	agent_sender__details(e->s, &d);
	assert_int_equal(e->g.accepted, 0);
	assert_int_equal(d.dropped_rejected, e->submitted);
	assert_int_equal(e->g.posts, 1 + AGENT_SENDER_MAX_MISSING_ROUNDS);
	assert_conserved(e);
	env_free(e);
}

static void test_lost_response_same_sequence(void **state)
{
	struct env *e = env_new(64 * 1024 * 1024);
	struct agent_sender_details d;

	/* Processed, response lost, twice: the resends carry the same sequence and are not counted again. */
	e->g.lose_responses = 2;
	submit(e, 0, 8, 100);
	assert_int_equal(agent_sender__flush(e->s, 10 * 1000000000ULL), 0);
	assert_int_equal(e->g.posts, 3);
	assert_int_equal(e->g.seq_reuses, 2);
	assert_int_equal(e->g.accepted, e->submitted);
	for (unsigned i = 0; i < 8; i++)
		assert_int_equal(e->g.per_pid[100 + i], i + 1);
	agent_sender__details(e->s, &d);
	assert_int_equal(d.retries, 2);
	assert_conserved(e);
	env_free(e);
}

static void test_retry_after_and_503(void **state)
{
	struct env *e = env_new(64 * 1024 * 1024);
	struct agent_sender_details d;
	struct agent_sender_stats st;

	e->g.retry_afters = 2;
	submit(e, 0, 8, 100);
	assert_int_equal(agent_sender__flush(e->s, 10 * 1000000000ULL), 0);
	assert_int_equal(e->g.accepted, e->submitted);
	e->g.statuses = 3;
	e->g.status = 503;
	submit(e, 8, 8, 200);
	assert_int_equal(agent_sender__flush(e->s, 10 * 1000000000ULL), 0);
	assert_int_equal(e->g.accepted, e->submitted);
	agent_sender__details(e->s, &d);
	agent_sender__stats(e->s, &st);
	assert_int_equal(d.retries, 5);
	assert_int_equal(st.requests_failed, 5);
	assert_int_equal(st.samples_dropped, 0);
	assert_conserved(e);
	env_free(e);
}

static void test_400_rejects_and_413_splits(void **state)
{
	struct env *e = env_new(64 * 1024 * 1024);
	struct agent_sender_details d;
	uint64_t before;

	e->g.statuses = 1;
	e->g.status = 400;
	submit(e, 0, 8, 100);
	before = e->submitted;
	assert_int_equal(agent_sender__flush(e->s, 10 * 1000000000ULL), 0);
	agent_sender__details(e->s, &d);
	assert_int_equal(d.dropped_rejected, before);
	assert_int_equal(e->g.accepted, 0);

	e->g.statuses = 1;
	e->g.status = 413;
	submit(e, 0, 8, 200);
	assert_int_equal(agent_sender__flush(e->s, 10 * 1000000000ULL), 0);
	assert_int_equal(e->g.accepted, e->submitted - before);
	/* One refused post, then the two halves. */
	assert_int_equal(e->g.posts, 1 + 1 + 2);
	assert_conserved(e);
	env_free(e);
}

static void test_drop_oldest(void **state)
{
	struct env *e;
	struct agent_sender_details d;
	struct agent_sender_stats st;
	uint64_t abc = 0, limit;

	/* Room for exactly batches A, B and C (as submit() below makes them). */
	for (unsigned b = 0; b < 3; b++)
		for (unsigned i = 0; i < 4; i++) {
			stackrelay_v1_Sample s;

			fake_sample(&s, b * 4 + i, (b + 1) * 1000 + i, i + 1);
			abc += agent_sender_sample_bytes(&s);
			pb_release(stackrelay_v1_Sample_fields, &s);
		}
	limit = abc + 8;
	e = env_new(limit);
	e->g.gate_closed = true;
	submit(e, 0, 4, 1000); /* A: becomes the head, blocks at the gate */
	pthread_mutex_lock(&e->g.mu);
	while (!e->g.blocked)
		pthread_cond_wait(&e->g.cv, &e->g.mu);
	pthread_mutex_unlock(&e->g.mu);
	submit(e, 4, 4, 2000);	/* B */
	submit(e, 8, 4, 3000);	/* C */
	submit(e, 12, 4, 4000); /* D: over the limit, B (oldest queued) goes */
	agent_sender__stats(e->s, &st);
	agent_sender__details(e->s, &d);
	assert_int_equal(d.dropped_buffer_full, 1 + 2 + 3 + 4);
	assert_true(st.buffered_bytes <= limit);
	/* The head (A, being sent) is the oldest window whose stacks must stay. */
	assert_int_equal(st.oldest_window, 1);
	assert_conserved(e);
	pthread_mutex_lock(&e->g.mu);
	e->g.gate_closed = false;
	pthread_cond_broadcast(&e->g.cv);
	pthread_mutex_unlock(&e->g.mu);
	assert_int_equal(agent_sender__flush(e->s, 10 * 1000000000ULL), 0);
	for (unsigned i = 0; i < 4; i++) {
		assert_int_equal(e->g.per_pid[1000 + i], i + 1);
		assert_int_equal(e->g.per_pid[2000 + i], 0);
		assert_int_equal(e->g.per_pid[3000 + i], i + 1);
		assert_int_equal(e->g.per_pid[4000 + i], i + 1);
	}
	assert_int_equal(e->g.accepted, e->submitted - 10);
	agent_sender__stats(e->s, &st);
	assert_int_equal(st.oldest_window, UINT64_MAX); /* nothing held: every stack may go */
	assert_conserved(e);
	env_free(e);
}

static void test_flush_timeout_drops_counted(void **state)
{
	struct env *e = env_new(64 * 1024 * 1024);
	struct agent_sender_details d;

	e->g.transport_errors = 1000000;
	submit(e, 0, 8, 100);
	assert_int_equal(agent_sender__flush(e->s, 200 * 1000000ULL), -ETIMEDOUT);
	agent_sender__details(e->s, &d);
	assert_int_equal(d.dropped_flush_timeout, e->submitted);
	assert_int_equal(d.samples_buffered, 0);
	assert_conserved(e);
	/* Later data still flows once the gateway is back. */
	e->g.transport_errors = 0;
	submit(e, 0, 8, 500);
	assert_int_equal(agent_sender__flush(e->s, 10 * 1000000000ULL), 0);
	assert_int_equal(e->g.per_pid[507], 8);
	assert_conserved(e);
	env_free(e);
}

static void test_definition_lost(void **state)
{
	struct env *e = env_new(64 * 1024 * 1024);
	struct agent_sender_details d;

	fake_store_evict_stack(e->store, 3);
	submit(e, 0, 8, 100); /* stack 3 carries count 4 */
	assert_int_equal(agent_sender__flush(e->s, 10 * 1000000000ULL), 0);
	agent_sender__details(e->s, &d);
	assert_int_equal(d.dropped_definition_lost, 4);
	assert_int_equal(e->g.accepted, e->submitted - 4);
	assert_conserved(e);
	env_free(e);
}

static void test_drop_counters_relayed(void **state)
{
	struct env *e = env_new(64 * 1024 * 1024);
	struct agent_batch b = { 0 };

	b.drops.ring_buffer_full = malloc(sizeof(uint64_t));
	*b.drops.ring_buffer_full = 17;
	b.drops.process_unknown = malloc(sizeof(uint64_t));
	*b.drops.process_unknown = 3;
	assert_int_equal(agent_sender__submit(e->s, &b), 0);
	assert_int_equal(agent_sender__flush(e->s, 10 * 1000000000ULL), 0);
	assert_int_equal(e->g.drops_relayed[0], 17);
	assert_int_equal(e->g.drops_relayed[3], 3);
	env_free(e);
}

/* The fake forgets the tables it got, so it wants them again; a window wanting them is flushed. */
static void asked_again(struct env *e, uint32_t base_pid, unsigned want_tables)
{
	memset(e->g.sym_received, 0, sizeof(e->g.sym_received));
	submit(e, 0, 2, base_pid);
	assert_int_equal(agent_sender__flush(e->s, 10 * 1000000000ULL), 0);
	assert_int_equal(e->g.symbol_tables, want_tables);
}

static void test_wanted_symbols_uploaded_once(void **state)
{
	struct env *e = env_new(64 * 1024 * 1024);
	struct agent_sender_stats st;
	struct agent_sender_details d;

	/* Executable 0 is this test program (built with .symtab); the others are unreachable. */
	fake_store_set_exec_path(e->store, 0, "/proc/self/exe");
	e->g.want_symbols = true;
	submit(e, 0, 2, 100); /* stacks 0, 1: executables 0 and 1 wanted */
	assert_int_equal(agent_sender__flush(e->s, 10 * 1000000000ULL), 0);
	agent_sender__stats(e->s, &st);
	agent_sender__details(e->s, &d);
	assert_int_equal(e->g.symbol_tables, 2);
	assert_int_equal(st.symbol_tables_sent, 1);
	assert_int_equal(d.symbol_tables_failed, 1);
	assert_true(e->g.sym_received[0] && e->g.sym_received[1]);
	/* The unreachable one was sent with an error, so the gateway stops asking. */
	assert_non_null(strstr(e->g.last_table_error, "not reachable"));
	/* Asked again: not uploaded a second time in this agent's life. */
	asked_again(e, 200, 2);
	assert_conserved(e);
	env_free(e);
}

/*
 * A gateway that wants a table again (another replica, a restart without
 * cache_dir, an eviction) gets it again once symbol_reupload_after has passed
 * since the last upload, then after twice that; never sooner.
 */
static void test_wanted_symbols_uploaded_again(void **state)
{
	struct env *e = env_new(64 * 1024 * 1024);
	struct agent_sender_details d;
	struct timespec wait = { 3, 200 * 1000000 };

	(void)state;
	e->cfg.gateway.symbol_reupload_after_ns = 3 * 1000000000ULL;
	fake_store_set_exec_path(e->store, 0, "/proc/self/exe");
	e->g.want_symbols = true;
	submit(e, 0, 2, 100); /* executables 0 (a table) and 1 (unreachable: an error table) */
	assert_int_equal(agent_sender__flush(e->s, 10 * 1000000000ULL), 0);
	assert_int_equal(e->g.symbol_tables, 2);
	/* Wanted again at once: not before 3 s. */
	asked_again(e, 200, 2);
	/* After 3 s: both again, the table and the error. */
	nanosleep(&wait, NULL);
	asked_again(e, 300, 4);
	assert_true(e->g.sym_received[0] && e->g.sym_received[1]);
	agent_sender__details(e->s, &d);
	assert_int_equal(d.symbol_tables_reuploaded, 2);
	/* The next wait is 6 s: wanted again after 3 s is not enough. */
	nanosleep(&wait, NULL);
	asked_again(e, 400, 4);
	assert_conserved(e);
	env_free(e);
}

static const char *write_tmp(const char *text, char *path, size_t size);

/*
 * Exit probes: the window's response wanted nothing (the gateway had not
 * looked at the samples yet); flush asks about every executable and the
 * kernel it sent, uploads what the answers want, and asks again while some
 * are pending or new ones were wanted: wanted, then pending, then none.
 */
static void test_exit_probes(void **state)
{
	static const char kallsyms[] = "ffffffff81000000 T _text\nffffffff81001000 T do_syscall_64\n";
	struct env *e = env_new(64 * 1024 * 1024);
	char path[256];

	agent_sender__set_kallsyms_path(e->s, write_tmp(kallsyms, path, sizeof(path)));
	fake_store_set_exec_path(e->store, 0, "/proc/self/exe");
	/* Nothing was sent yet: nothing to ask. */
	assert_int_equal(agent_sender__flush(e->s, 10 * 1000000000ULL), 0);
	assert_int_equal(e->g.probe_posts, 0);

	e->g.probe_script[0] = (struct probe_answer){ .want_execs = 0x3, .want_kernel = true, .pending = 1 };
	e->g.probe_script[1] = (struct probe_answer){ .pending = 1 };
	e->g.probe_script[2] = (struct probe_answer){ .want_execs = 0x4 };
	e->g.probe_script_n = 3;
	submit(e, 0, 3, 100); /* stacks 0..2: executables 0..3, the kernel (stack 1) */
	assert_int_equal(agent_sender__flush(e->s, 10 * 1000000000ULL), 0);
	assert_int_equal(e->g.accepted, e->submitted);
	/* 1: everything, wanted 0, 1, kernel + 1 pending; 2: the rest, pending; 3: wanted 2; 4: none. */
	assert_int_equal(e->g.probe_posts, 4);
	assert_int_equal(e->g.probed_execs[0], 0xf);
	assert_true(e->g.probed_kernel[0]);
	assert_int_equal(e->g.probed_execs[1], 0xc); /* uploaded ones are not asked about again */
	assert_false(e->g.probed_kernel[1]);
	assert_int_equal(e->g.probed_execs[2], 0xc);
	assert_int_equal(e->g.probed_execs[3], 0x8);
	assert_true(e->g.probe_max_ids <= AGENT_SENDER_PROBES_PER_REQUEST);
	assert_int_equal(e->g.probe_before_upload, 0);
	assert_true(e->g.sym_received[0] && e->g.sym_received[1] && e->g.sym_received[2]);
	assert_false(e->g.sym_received[3]);
	assert_int_equal(e->g.kernel_tables, 1);
	assert_int_equal(e->g.symbol_tables, 4);
	/* Probes are neither samples nor sequences of samples: the sample accounting is untouched. */
	assert_conserved(e);

	/* A later flush asks again about what is still not uploaded, and only that. */
	e->g.probe_script_n = 0;
	assert_int_equal(agent_sender__flush(e->s, 10 * 1000000000ULL), 0);
	assert_int_equal(e->g.probe_posts, 5);
	assert_int_equal(e->g.probed_execs[4], 0x8);
	assert_false(e->g.probed_kernel[4]);
	unlink(path);
	env_free(e);
}

/*
 * A gateway that answers "pending" forever: flush ends at its timeout, successfully (all data was delivered).
 * The timeout leaves room for the samples and two probes on a loaded machine (300 ms did not, once, at a load of 20).
 */
static void test_exit_probes_pending_bounded(void **state)
{
	struct env *e = env_new(64 * 1024 * 1024);
	struct agent_sender_details d;

	e->g.probe_pending_forever = true;
	submit(e, 0, 4, 100);
	assert_int_equal(agent_sender__flush(e->s, 1000 * 1000000ULL), 0);
	assert_int_equal(e->g.accepted, e->submitted);
	assert_true(e->g.probe_posts >= 2);
	assert_int_equal(e->g.symbol_tables, 0);
	agent_sender__details(e->s, &d);
	assert_int_equal(d.dropped_flush_timeout, 0);
	assert_conserved(e);
	env_free(e);
}

static const char *write_tmp(const char *text, char *path, size_t size)
{
	int fd;

	snprintf(path, size, "%s/sr-sender-kallsyms-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	return path;
}

static void test_wanted_kernel_symbols(void **state)
{
	static const char kallsyms[] = "ffffffff81000000 T _text\n"
				       "ffffffff81001000 T do_syscall_64\n"
				       "ffffffff81002000 D not_a_function\n"
				       "ffffffffc0a01000 t mod_fn\t[kvm]\n";
	struct env *e = env_new(64 * 1024 * 1024);
	struct agent_sender_stats st;
	char path[256];

	/* The gateway lists the kernel ID in wanted_symbols: the agent answers with kallsyms, once. */
	agent_sender__set_kallsyms_path(e->s, write_tmp(kallsyms, path, sizeof(path)));
	e->g.want_kernel_symbols = true;
	submit(e, 0, 4, 100); /* odd stacks reference the kernel */
	assert_int_equal(agent_sender__flush(e->s, 10 * 1000000000ULL), 0);
	agent_sender__stats(e->s, &st);
	assert_int_equal(e->g.kernel_tables, 1);
	assert_int_equal(e->g.kernel_symbols, 3);
	assert_string_equal(e->g.kernel_table_error, "");
	assert_true(e->g.kernel_has_module_name);
	assert_int_equal(st.symbol_tables_sent, 1);
	/* Asked again (a second gateway replica, say): once per agent lifetime. */
	e->g.kernel_tables = 0;
	submit(e, 0, 4, 200);
	assert_int_equal(agent_sender__flush(e->s, 10 * 1000000000ULL), 0);
	assert_int_equal(e->g.kernel_tables, 0);
	assert_conserved(e);
	unlink(path);
	env_free(e);
}

static void test_wanted_kernel_symbols_hidden(void **state)
{
	/* kptr_restrict without CAP_SYSLOG: zeros. The gateway gets an error table and stops asking. */
	static const char hidden[] = "0000000000000000 T _text\n0000000000000000 T do_syscall_64\n";
	struct env *e = env_new(64 * 1024 * 1024);
	struct agent_sender_details d;
	char path[256];

	agent_sender__set_kallsyms_path(e->s, write_tmp(hidden, path, sizeof(path)));
	e->g.want_kernel_symbols = true;
	submit(e, 0, 4, 100);
	assert_int_equal(agent_sender__flush(e->s, 10 * 1000000000ULL), 0);
	agent_sender__details(e->s, &d);
	assert_int_equal(e->g.kernel_tables, 1);
	assert_int_equal(e->g.kernel_symbols, 0);
	assert_non_null(strstr(e->g.kernel_table_error, "CAP_SYSLOG"));
	assert_int_equal(d.symbol_tables_failed, 1);
	assert_conserved(e);
	unlink(path);
	env_free(e);
}

static void test_max_connection_age(void **state)
{
	struct env *e = env_new(64 * 1024 * 1024);
	/*
	 * Long enough that the third round still finds the connection young on a loaded machine (with 20 ms it
	 * did not, once, at a load of 20), short enough to wait out once.
	 */
	struct timespec ts = { 0, 600 * 1000000L };

	e->cfg.gateway.max_connection_age_ns = 500 * 1000000ULL;
	submit(e, 0, 4, 100);
	assert_int_equal(agent_sender__flush(e->s, 10 * 1000000000ULL), 0);
	assert_int_equal(e->g.fresh_requested, 0);
	assert_int_equal(e->g.stack_defs, 4);
	nanosleep(&ts, NULL);
	/* Older than max_connection_age: a fresh connection, which starts without definitions. */
	submit(e, 0, 4, 200);
	assert_int_equal(agent_sender__flush(e->s, 10 * 1000000000ULL), 0);
	assert_int_equal(e->g.fresh_requested, 1);
	assert_int_equal(e->g.stack_defs, 8);
	/* Young again: reused, nothing repeated. */
	submit(e, 0, 4, 300);
	assert_int_equal(agent_sender__flush(e->s, 10 * 1000000000ULL), 0);
	assert_int_equal(e->g.fresh_requested, 1);
	assert_int_equal(e->g.stack_defs, 8);
	assert_int_equal(e->g.accepted, e->submitted);
	assert_conserved(e);
	env_free(e);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void test_token_reread_after_401(void **state)
{
	char path[] = "/tmp/sr-token-XXXXXX";
	int fd = mkstemp(path);
	struct env *e;
	struct agent_sender_transport t = { 0 };

	assert_true(fd >= 0);
	close(fd);
	write_file(path, "token-one\n");
	e = calloc(1, sizeof(*e));
	fakegw_init(&e->g);
	e->cfg.gateway.endpoint = (char *)"http://127.0.0.1:1";
	e->cfg.gateway.buffer_bytes = 1 << 20;
	e->cfg.gateway.bearer_token_file = path;
	e->store = fake_store_new(N_STACKS, N_EXECS);
	t.userdata = &e->g;
	t.post = fake_post;
	e->s = agent_sender_new_with_transport(&e->cfg, e->store, &t);
	agent_sender__set_backoff(e->s, 1000000ULL, 2000000ULL);
	submit(e, 0, 2, 100);
	assert_int_equal(agent_sender__flush(e->s, 10 * 1000000000ULL), 0);
	assert_string_equal(e->g.last_token, "token-one");
	/* Rotated on disk; the 401 makes the sender read it again at once, not after a minute. */
	write_file(path, "token-two\n");
	e->g.statuses = 1;
	e->g.status = 401;
	submit(e, 0, 2, 200);
	assert_int_equal(agent_sender__flush(e->s, 10 * 1000000000ULL), 0);
	assert_string_equal(e->g.last_token, "token-two");
	assert_int_equal(e->g.accepted, e->submitted);
	assert_conserved(e);
	env_free(e);
	unlink(path);
}

static void test_invalid_config(void **state)
{
	struct agent_config cfg = { 0 };
	struct agent_sender_transport t = { 0 };
	char err[256];

	cfg.gateway.endpoint = (char *)"ftp://x";
	assert_int_equal(agent_sender_http_new(&cfg.gateway, &t, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "http://"));
	cfg.gateway.endpoint = (char *)"http://127.0.0.1:7480";
	cfg.gateway.tls.ca_file = (char *)"/nonexistent/ca.pem";
	assert_int_equal(agent_sender_http_new(&cfg.gateway, &t, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "https://"));
	cfg.gateway.endpoint = (char *)"https://127.0.0.1:7480";
	assert_int_equal(agent_sender_http_new(&cfg.gateway, &t, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "/nonexistent/ca.pem"));
	cfg.gateway.tls.ca_file = NULL;
	cfg.gateway.tls.cert_file = (char *)"/etc/hostname";
	assert_int_equal(agent_sender_http_new(&cfg.gateway, &t, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "key_file"));
	cfg.gateway.tls.cert_file = NULL;
	assert_int_equal(agent_sender_http_new(&cfg.gateway, &t, err, sizeof(err)), 0);
	t.free(t.userdata);
}

static void test_sample_bytes_matches_encoding(void **state)
{
	for (unsigned i = 0; i < 8; i++) {
		stackrelay_v1_Sample s;
		size_t size = 0;

		fake_sample(&s, i, 1u << (i * 4), 1ULL << (i * 8));
		s.executable_path = strdup("/usr/lib/a/very/long/path/to/some/executable/that/is/longer/than/128/bytes/"
					   "so/the/length/varint/takes/two/bytes/xxxxxxxxxxxxxxxxxxxxxxxxxx");
		assert_true(pb_get_encoded_size(&size, stackrelay_v1_Sample_fields, &s));
		assert_int_equal(agent_sender_sample_bytes(&s), sizeof(s) + 2 * size);
		pb_release(stackrelay_v1_Sample_fields, &s);
	}
}

static void test_gzip_roundtrip_header(void **state)
{
	uint8_t in[4096], *out = NULL;
	size_t len = 0;

	for (size_t i = 0; i < sizeof(in); i++)
		in[i] = (uint8_t)(i % 7);
	assert_int_equal(agent_sender_gzip(in, sizeof(in), &out, &len), 0);
	assert_true(len > 18 && len < sizeof(in));
	assert_int_equal(out[0], 0x1f);
	assert_int_equal(out[1], 0x8b);
	free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_backoff_bounds),
		cmocka_unit_test(test_send_and_definitions_once),
		cmocka_unit_test(test_new_connection_resends_definitions),
		cmocka_unit_test(test_missing_resend),
		cmocka_unit_test(test_missing_forever_is_rejected),
		cmocka_unit_test(test_lost_response_same_sequence),
		cmocka_unit_test(test_retry_after_and_503),
		cmocka_unit_test(test_400_rejects_and_413_splits),
		cmocka_unit_test(test_drop_oldest),
		cmocka_unit_test(test_flush_timeout_drops_counted),
		cmocka_unit_test(test_definition_lost),
		cmocka_unit_test(test_drop_counters_relayed),
		cmocka_unit_test(test_wanted_symbols_uploaded_once),
		cmocka_unit_test(test_wanted_symbols_uploaded_again),
		cmocka_unit_test(test_wanted_kernel_symbols),
		cmocka_unit_test(test_wanted_kernel_symbols_hidden),
		cmocka_unit_test(test_exit_probes),
		cmocka_unit_test(test_exit_probes_pending_bounded),
		cmocka_unit_test(test_max_connection_age),
		cmocka_unit_test(test_token_reread_after_401),
		cmocka_unit_test(test_invalid_config),
		cmocka_unit_test(test_sample_bytes_matches_encoding),
		cmocka_unit_test(test_gzip_roundtrip_header),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
