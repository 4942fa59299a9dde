/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sender's requests of samples (sender-private.h): one attempt at the
 * head with the definitions its samples need, and what a final answer does:
 * accepted samples are counted, samples the gateway lacked definitions for go
 * back to the front of the queue, and the connection's "sent" set follows.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include <pb_decode.h>

#include "agent.h"
#include "config.h"
#include "common/log.h"
#include "common/macro.h"
#include "sender-private.h"

/*
 * The set `sent` after a request: a new connection knew only what this request
 * defined. The executables and kernels defined are remembered for the exit
 * probes: their samples are at the gateway now, which may want their symbols.
 */
static void commit_defs(struct agent_sender *s, struct agent_defs *d, bool new_connection)
{
	const struct agent_idkey *k;

	if (new_connection)
		agent_idset_clear(&s->sent);
	for (size_t i = 0; (k = agent_idset_next(&d->local, &i));)
		(void)agent_idset_add_key(&s->sent, *k);
	for (size_t i = 0; i < d->n_executables; i++)
		agent_sender_probe_remember(s, d->executables[i].id);
	for (size_t i = 0; i < d->n_kernels; i++)
		agent_sender_probe_remember(s, d->kernels[i].id);
}

/*
 * A final answer for the head: count what was accepted, requeue what the
 * gateway lacked definitions for, forget those IDs as "sent".
 */
static void apply_done(struct agent_sender *s, struct chunk *head, stackrelay_v1_PushResponse *resp)
{
	struct agent_idset missing = { 0 };
	bool check_frames;
	struct chunk *again = NULL;
	uint64_t acc = 0, acc_bytes = 0, lost = 0, lost_bytes = 0;
	size_t n_again = 0;

	for (pb_size_t i = 0; i < resp->missing_stacks_count; i++)
		if (resp->missing_stacks[i]) {
			(void)agent_idset_add(&missing, AGENT_ID_STACK, resp->missing_stacks[i]->bytes,
					      resp->missing_stacks[i]->size);
			agent_idset_del(&s->sent, AGENT_ID_STACK, resp->missing_stacks[i]->bytes,
					resp->missing_stacks[i]->size);
		}
	for (pb_size_t i = 0; i < resp->missing_executables_count; i++)
		if (resp->missing_executables[i]) {
			const pb_bytes_array_t *id = resp->missing_executables[i];

			(void)agent_idset_add(&missing, AGENT_ID_EXECUTABLE, id->bytes, id->size);
			agent_idset_del(&s->sent, AGENT_ID_EXECUTABLE, id->bytes, id->size);
		}
	for (pb_size_t i = 0; i < resp->missing_kernels_count; i++)
		if (resp->missing_kernels[i]) {
			const pb_bytes_array_t *id = resp->missing_kernels[i];

			(void)agent_idset_add(&missing, AGENT_ID_KERNEL, id->bytes, id->size);
			agent_idset_del(&s->sent, AGENT_ID_KERNEL, id->bytes, id->size);
		}
	for (pb_size_t i = 0; i < resp->missing_functions_count; i++)
		if (resp->missing_functions[i]) {
			const pb_bytes_array_t *id = resp->missing_functions[i];

			(void)agent_idset_add(&missing, AGENT_ID_FUNCTION, id->bytes, id->size);
			agent_idset_del(&s->sent, AGENT_ID_FUNCTION, id->bytes, id->size);
		}
	check_frames = resp->missing_executables_count || resp->missing_kernels_count || resp->missing_functions_count;

	if (agent_idset_count(&missing)) {
		again = calloc(1, sizeof(*again));
		if (again)
			again->samples = malloc(head->n * sizeof(*again->samples));
		if (again && !again->samples)
			SR_FREE(again);
	}
	for (size_t i = 0; i < head->n; i++) {
		stackrelay_v1_Sample *sm = &head->samples[i];
		uint64_t c = agent_sender_sample_count(sm), b = agent_sender_sample_bytes(sm);
		int m = agent_idset_count(&missing) ? agent_defs_sample_missing(s->store, sm, &missing, check_frames)
						    : 0;

		if (m == 0) {
			acc += c;
			acc_bytes += b;
		} else if (m > 0 && again) {
			/*
			 * Forget the stack as sent too: its definition goes again with the
			 * executables and kernel it references, which is what was missing.
			 */
			if (sm->stack_id)
				agent_idset_del(&s->sent, AGENT_ID_STACK, sm->stack_id->bytes, sm->stack_id->size);
			again->samples[n_again++] = *sm;
			again->count += c;
			again->bytes += b;
			continue; /* moved, not released */
		} else {
			lost += c;
			lost_bytes += b;
		}
		pb_release(stackrelay_v1_Sample_fields, sm);
	}
	free(head->samples);
	head->samples = NULL;
	head->n = 0;

	pthread_mutex_lock(&s->mu);
	s->stats.requests_ok++;
	agent_sender_count_gone_locked(s, acc, acc_bytes, -1);
	if (lost)
		agent_sender_count_gone_locked(s, lost, lost_bytes, DROP_DEFINITION_LOST);
	if (resp->accepted_samples && *resp->accepted_samples != acc) {
		s->details.accepted_mismatch++;
		if (!s->mismatch_logged) {
			s->mismatch_logged = true;
			sr_log_warn(
				LOG_COMPONENT,
				"the gateway's accepted_samples differs from the agent's count; counting the agent's",
				"seq=%" PRIu64 " gateway=%" PRIu64 " agent=%" PRIu64, head->seq,
				*resp->accepted_samples, acc);
		}
	}
	if (again && n_again) {
		again->n = n_again;
		again->frequency_hz = head->frequency_hz;
		again->rounds = head->rounds + 1;
		s->details.samples_resent_missing += again->count;
		if (again->rounds > AGENT_SENDER_MAX_MISSING_ROUNDS) {
			sr_log_warn(LOG_COMPONENT, "gateway still lacks definitions after resending them; dropping",
				    "samples=%" PRIu64 " rounds=%u", again->count, again->rounds);
			agent_sender_drop_chunk_locked(s, again, DROP_REJECTED);
		} else {
			TAILQ_INSERT_HEAD(&s->queue, again, link);
		}
	} else {
		agent_sender_chunk_free(again);
	}
	s->head = NULL;
	pthread_mutex_unlock(&s->mu);
	agent_idset_done(&missing);
	agent_sender_chunk_free(head);
}

/* One attempt at the head. */
void agent_sender_send_head(struct agent_sender *s, struct chunk *h)
{
	stackrelay_v1_PushRequest req;
	struct req_common st;
	struct agent_defs d = { 0 };
	struct encoded enc = { 0 };
	struct attempt a = { 0 };
	uint64_t lost = 0, lost_bytes = 0;
	size_t keep = 0;
	bool fresh;
	int r;

	if (!h->seq)
		h->seq = ++s->seq;
	fresh = s->force_fresh || !s->have_conn ||
		(s->cfg->gateway.max_connection_age_ns &&
		 agent_sender_now_ns() - s->conn_started_ns >= s->cfg->gateway.max_connection_age_ns);
	if (fresh)
		agent_idset_clear(&s->sent);
	d.all = h->rounds > 0;

	/* Definitions first; a sample whose definitions the store lost cannot be resolved by anyone. */
	for (size_t i = 0; i < h->n; i++) {
		r = agent_defs_add_sample(&s->sent, s->store, &d, &h->samples[i]);
		if (r < 0) {
			lost += agent_sender_sample_count(&h->samples[i]);
			lost_bytes += agent_sender_sample_bytes(&h->samples[i]);
			pb_release(stackrelay_v1_Sample_fields, &h->samples[i]);
			continue;
		}
		h->samples[keep++] = h->samples[i];
	}
	if (lost) {
		h->n = keep;
		h->count -= lost;
		h->bytes -= lost_bytes;
		pthread_mutex_lock(&s->mu);
		agent_sender_count_gone_locked(s, lost, lost_bytes, DROP_DEFINITION_LOST);
		pthread_mutex_unlock(&s->mu);
		sr_log_debug(LOG_COMPONENT, "dropped samples whose definitions the store no longer has",
			     "samples=%" PRIu64, lost);
	}
	if (h->n == 0 && !h->has_drops) {
		pthread_mutex_lock(&s->mu);
		s->head = NULL;
		pthread_mutex_unlock(&s->mu);
		agent_sender_chunk_free(h);
		agent_defs_free(&d);
		return;
	}

	agent_sender_fill_common(s, &req, &st, h->seq);
	st.frequency = h->frequency_hz;
	if (st.frequency)
		req.sampling_frequency_hz = &st.frequency;
	req.samples = h->samples;
	req.samples_count = (pb_size_t)h->n;
	req.stacks = d.stacks;
	req.stacks_count = (pb_size_t)d.n_stacks;
	req.executables = d.executables;
	req.executables_count = (pb_size_t)d.n_executables;
	req.kernels = d.kernels;
	req.kernels_count = (pb_size_t)d.n_kernels;
	req.functions = d.functions;
	req.functions_count = (pb_size_t)d.n_functions;
	if (h->has_drops) {
		memcpy(st.drops, h->drops, sizeof(st.drops));
		memset(&st.dc, 0, sizeof(st.dc));
		st.dc.ring_buffer_full = &st.drops[0];
		st.dc.stack_errors = &st.drops[1];
		st.dc.buffer_overflow = &st.drops[2];
		st.dc.process_unknown = &st.drops[3];
		req.drops = &st.dc;
	}
	r = agent_sender_encode(s, &req, NULL, 0, &enc);
	if (r < 0) {
		/* Cannot happen with valid samples; if it does, these samples cannot be sent at all. */
		sr_log_error(LOG_COMPONENT, "cannot encode a PushRequest; dropping its samples", "error=\"%s\"",
			     strerror(-r));
		pthread_mutex_lock(&s->mu);
		s->head = NULL;
		agent_sender_drop_chunk_locked(s, h, DROP_REJECTED);
		pthread_mutex_unlock(&s->mu);
		agent_defs_free(&d);
		return;
	}
	{
		bool was_conn = s->have_conn;
		uint64_t started = s->conn_started_ns;

		agent_sender_post(s, &enc, &a);
		free(enc.buf);
		/* A new connection (fresh, or curl's own reconnect) knew only this request's definitions. */
		if (a.outcome == OUT_DONE)
			commit_defs(s, &d, fresh || !was_conn || s->conn_started_ns != started);
		else if (a.status == 0)
			agent_idset_clear(&s->sent);
	}
	agent_defs_free(&d);

	switch (a.outcome) {
	case OUT_DONE:
		agent_sender_note_success(s);
		if (a.have_resp)
			agent_sender_want_symbols(s, a.resp.wanted_symbols, a.resp.wanted_symbols_count);
		{
			stackrelay_v1_PushResponse empty = stackrelay_v1_PushResponse_init_zero;

			apply_done(s, h, a.have_resp ? &a.resp : &empty);
		}
		break;
	case OUT_RETRY:
		agent_sender_note_failure(s, &a, "samples");
		agent_sender_schedule_retry(s, a.wait_ns);
		break;
	case OUT_TOO_LARGE:
		agent_sender_note_failure(s, &a, "samples");
		agent_sender_split_head(s, h);
		break;
	case OUT_REJECT:
		sr_log_error(LOG_COMPONENT, "gateway rejected a push; dropping its samples",
			     "error=\"%s\" samples=%" PRIu64, a.why, h->count);
		pthread_mutex_lock(&s->mu);
		s->stats.requests_failed++;
		s->head = NULL;
		agent_sender_drop_chunk_locked(s, h, DROP_REJECTED);
		pthread_mutex_unlock(&s->mu);
		agent_sender_note_success(s); /* the connection works; the data did not */
		break;
	}
	if (a.have_resp)
		pb_release(stackrelay_v1_PushResponse_fields, &a.resp);
}
