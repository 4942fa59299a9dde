// SPDX-License-Identifier: Apache-2.0
/*
 * The agent's sender: a thread that turns submitted batches into PushRequests
 * (docs/agent-protocol.md).
 *
 * Data flow. submit() cuts a batch into chunks and appends them to a queue
 * bounded in bytes (drop-oldest, counted); it only takes a mutex for a few
 * pointer moves, so sampling never waits for the network. The thread takes
 * the oldest chunks as the "head": the unit of one request. The head gets a
 * sequence number the first time it is sent and keeps it, with exactly the
 * same samples, for every retry, so a gateway that saw it already (response
 * lost) recognises the duplicate by (instance_id, sequence) and does not
 * count it twice. Samples the gateway did not accept because it lacked a
 * definition become a new chunk at the front of the queue (new sequence),
 * sent again with the definitions.
 *
 * Only the thread touches the head, the per-connection "sent" set and the
 * symbol queue; the mutex guards the queue, the counters and the flags.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <pb_decode.h>
#include <pb_encode.h>
#include <xxhash.h>

#include "agent.h"
#include "config.h"
#include "log.h"
#include "sender-private.h"
#include "sr-config.h"
#include "symupload.h"
#include "units.h"

uint64_t agent_sender_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * SR_NSEC_PER_SEC + (uint64_t)ts.tv_nsec;
}

static uint64_t rnd_next(struct agent_sender *s)
{
	/* xorshift64*: jitter needs spread, not secrecy. */
	uint64_t x = s->rnd_state;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	s->rnd_state = x;
	return x * 0x2545F4914F6CDD1DULL;
}

uint64_t agent_sender_backoff_ns(unsigned failures, uint64_t initial_ns, uint64_t max_ns, uint64_t rnd)
{
	uint64_t d = initial_ns;

	if (failures == 0)
		return 0;
	for (unsigned i = 1; i < failures && d < max_ns; i++)
		d = d > max_ns / 2 ? max_ns : d * 2;
	if (d > max_ns)
		d = max_ns;
	/* "Equal jitter": at least half the delay, so a fleet that failed together spreads out. */
	return d / 2 + (d / 2 ? rnd % (d / 2 + 1) : 0);
}

uint64_t agent_sender_retry_after_ns(uint64_t ra_ns, uint64_t rnd)
{
	uint64_t d = ra_ns > AGENT_SENDER_RETRY_AFTER_MAX_NS ? AGENT_SENDER_RETRY_AFTER_MAX_NS : ra_ns;

	/* Never earlier than asked; up to a quarter later so agents do not return in lockstep. */
	return d + (d / 4 ? rnd % (d / 4 + 1) : 0);
}

/* ---- requests ---- */

/*
 * table (may be NULL) is an encoded SymbolTable appended as one more
 * PushRequest.symbol_tables field: a table too large for nanopb's 16-bit
 * repeated counts is encoded by agent_symtab__encode() instead of through req.
 */
int agent_sender_encode(struct agent_sender *s, stackrelay_v1_PushRequest *req, const uint8_t *table, size_t table_len,
			struct encoded *ret)
{
	size_t size = 0;
	pb_ostream_t os;
	uint8_t *buf;

	if (!pb_get_encoded_size(&size, stackrelay_v1_PushRequest_fields, req))
		return -EINVAL;
	if (table)
		size += 1 + 10 + table_len; /* tag 9 (one byte), length varint, body */
	buf = malloc(size ? size : 1);
	if (!buf)
		return -ENOMEM;
	os = pb_ostream_from_buffer(buf, size);
	if (!pb_encode(&os, stackrelay_v1_PushRequest_fields, req) ||
	    (table && (!pb_encode_tag(&os, PB_WT_STRING, stackrelay_v1_PushRequest_symbol_tables_tag) ||
		       !pb_encode_varint(&os, table_len) || !pb_write(&os, table, table_len)))) {
		free(buf);
		return -EINVAL;
	}
	if (s->gzip) {
		uint8_t *z = NULL;
		size_t zlen = 0;
		int r = agent_sender_gzip(buf, os.bytes_written, &z, &zlen);

		free(buf);
		if (r < 0)
			return r;
		buf = z;
		size = zlen;
	} else {
		size = os.bytes_written;
	}
	ret->buf = buf;
	ret->len = size;
	return 0;
}

void agent_sender_fill_common(struct agent_sender *s, stackrelay_v1_PushRequest *req, struct req_common *st,
			      uint64_t seq)
{
	memset(req, 0, sizeof(*req));
	st->protocol_version = AGENT_PROTOCOL_VERSION;
	st->seq = seq;
	st->instance = (pb_bytes_array_t *)st->instance_buf;
	st->instance->size = AGENT_SENDER_INSTANCE_ID_BYTES;
	memcpy(st->instance->bytes, s->instance_id, AGENT_SENDER_INSTANCE_ID_BYTES);
	memset(&st->agent, 0, sizeof(st->agent));
	st->agent.instance_id = st->instance;
	st->agent.host_name = s->host_name;
	st->agent.node_name = s->cfg->node_name;
	st->agent.version = (char *)SR_VERSION;
	req->protocol_version = &st->protocol_version;
	req->agent = &st->agent;
	req->sequence = &st->seq;
}

static bool should_abort_cb(void *ctx)
{
	struct agent_sender *s = ctx;

	return atomic_load(&s->abort_transfer);
}

static void reread_token(struct agent_sender *s, bool force)
{
	const char *path = s->cfg->gateway.bearer_token_file;
	uint64_t now = agent_sender_now_ns();
	char buf[AGENT_SENDER_MAX_TOKEN_BYTES + 1];
	ssize_t n;
	int fd;

	if (!path || !*path)
		return;
	if (!force && s->token && now - s->token_read_ns < AGENT_SENDER_TOKEN_REREAD_NS)
		return;
	s->token_read_ns = now;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		sr_log_warn(LOG_COMPONENT, "cannot read the bearer token file; keeping the previous token",
			    "file=%s error=\"%s\"", path, strerror(errno));
		return;
	}
	n = read(fd, buf, sizeof(buf));
	close(fd);
	if (n < 0 || n > AGENT_SENDER_MAX_TOKEN_BYTES) {
		sr_log_warn(LOG_COMPONENT, "bearer token file unreadable or too large; keeping the previous token",
			    "file=%s max_bytes=%d", path, AGENT_SENDER_MAX_TOKEN_BYTES);
		return;
	}
	/* Tokens are mounted as files, often with a trailing newline. */
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' ' || buf[n - 1] == '\t'))
		n--;
	buf[n] = '\0';
	if (s->token && strcmp(s->token, buf) == 0)
		return;
	free(s->token);
	s->token = strdup(buf);
}

static void classify(struct agent_sender *s, int r, struct agent_sender_http_result *res, struct attempt *a)
{
	pb_istream_t is;

	a->status = res->status;
	if (r < 0 || res->status == 0) {
		a->outcome = OUT_RETRY;
		snprintf(a->why, sizeof(a->why), "%s", res->error[0] ? res->error : strerror(-r));
		return;
	}
	if (res->body_len) {
		is = pb_istream_from_buffer(res->body, res->body_len);
		a->have_resp = pb_decode(&is, stackrelay_v1_PushResponse_fields, &a->resp);
		if (!a->have_resp)
			pb_release(stackrelay_v1_PushResponse_fields, &a->resp);
	}
	if (res->status == 200) {
		if (!a->have_resp && res->body_len) {
			/* Processed or not, we cannot tell: resend under the same sequence (the gateway de-duplicates). */
			a->outcome = OUT_RETRY;
			snprintf(a->why, sizeof(a->why), "undecodable PushResponse (%zu bytes)", res->body_len);
			return;
		}
		if (a->have_resp && a->resp.retry_after_ms && *a->resp.retry_after_ms) {
			a->outcome = OUT_RETRY;
			a->wait_ns = (uint64_t)*a->resp.retry_after_ms * SR_NSEC_PER_MSEC;
			snprintf(a->why, sizeof(a->why), "gateway asked to retry after %" PRIu32 "ms%s%s",
				 *a->resp.retry_after_ms, a->resp.error ? ": " : "",
				 a->resp.error ? a->resp.error : "");
			return;
		}
		a->outcome = OUT_DONE;
		return;
	}
	snprintf(a->why, sizeof(a->why), "HTTP %ld%s%s", res->status, a->have_resp && a->resp.error ? ": " : "",
		 a->have_resp && a->resp.error ? a->resp.error : "");
	switch (res->status) {
	case 401:
	case 403:
		/* The token may have rotated, or the gateway's list may change: keep the data, read the token again. */
		reread_token(s, true);
		a->outcome = OUT_RETRY;
		break;
	case 408:
	case 425:
	case 429:
	case 500:
	case 502:
	case 503:
	case 504:
		a->outcome = OUT_RETRY;
		a->wait_ns = res->retry_after_ns;
		if (a->have_resp && a->resp.retry_after_ms && *a->resp.retry_after_ms)
			a->wait_ns = (uint64_t)*a->resp.retry_after_ms * SR_NSEC_PER_MSEC;
		break;
	case 413:
		a->outcome = OUT_TOO_LARGE;
		break;
	default:
		a->outcome = res->status >= 500 ? OUT_RETRY : OUT_REJECT;
		break;
	}
}

/* Sends one request body and classifies the answer. */
void agent_sender_post(struct agent_sender *s, const struct encoded *enc, struct attempt *a)
{
	struct agent_sender_http_result res = { 0 };
	struct agent_sender_http_request req = {
		.body = enc->buf,
		.len = enc->len,
		.gzip = s->gzip,
		.should_abort = should_abort_cb,
		.abort_ctx = s,
	};
	uint64_t now = agent_sender_now_ns(), age = s->cfg->gateway.max_connection_age_ns;
	int r;

	reread_token(s, false);
	req.token = s->token;
	/* Reconnect now and then, so agents behind an L4 balancer spread over new replicas. */
	req.fresh_connection = s->force_fresh || (s->have_conn && age && now - s->conn_started_ns >= age);
	r = s->transport.post(s->transport.userdata, &req, &res);
	if (res.new_connection) {
		pthread_mutex_lock(&s->mu);
		s->details.connections++;
		pthread_mutex_unlock(&s->mu);
	}
	s->force_fresh = false;
	classify(s, r, &res, a);
	if (r == 0 && res.status) {
		__atomic_add_fetch(&s->stats.bytes_sent, enc->len, __ATOMIC_RELAXED);
		if (res.new_connection || req.fresh_connection || !s->have_conn)
			s->conn_started_ns = now;
		s->have_conn = true;
	} else {
		/* No response: the next request probably goes out on a new connection, which starts empty. */
		s->have_conn = false;
	}
	free(res.body);
}

/*
 * The set `sent` after a request: a new connection knew only what this request
 * defined. The executables and kernels defined are remembered for the exit
 * probes: their samples are at the gateway now, which may want their symbols.
 */
static void commit_defs(struct agent_sender *s, struct agent_defs *d, bool new_connection)
{
	if (new_connection)
		agent_idset_clear(&s->sent);
	for (size_t i = 0; i < d->local.cap; i++)
		if (d->local.keys[i].hi)
			(void)agent_idset_add_key(&s->sent, d->local.keys[i]);
	for (size_t i = 0; i < d->n_executables; i++)
		agent_sender_probe_remember(s, d->executables[i].id);
	for (size_t i = 0; i < d->n_kernels; i++)
		agent_sender_probe_remember(s, d->kernels[i].id);
}

void agent_sender_note_failure(struct agent_sender *s, const struct attempt *a, const char *what)
{
	pthread_mutex_lock(&s->mu);
	s->stats.requests_failed++;
	pthread_mutex_unlock(&s->mu);
	if (!s->failing) {
		sr_log_warn(LOG_COMPONENT, "push to the gateway failed; keeping the data and retrying with backoff",
			    "endpoint=%s request=%s error=\"%s\"", s->cfg->gateway.endpoint, what, a->why);
		s->failing = true;
	} else {
		sr_log_debug(LOG_COMPONENT, "push to the gateway failed again", "request=%s error=\"%s\" failures=%u",
			     what, a->why, s->failures);
	}
}

void agent_sender_note_success(struct agent_sender *s)
{
	if (s->failing)
		sr_log_info(LOG_COMPONENT, "push to the gateway recovered", "endpoint=%s failures=%u",
			    s->cfg->gateway.endpoint, s->failures);
	s->failing = false;
	s->failures = 0;
}

/* Schedules the next attempt after a failure. */
void agent_sender_schedule_retry(struct agent_sender *s, uint64_t wait_ns)
{
	uint64_t d;

	s->failures++;
	d = wait_ns ? agent_sender_retry_after_ns(wait_ns, rnd_next(s))
		    : agent_sender_backoff_ns(s->failures, s->backoff_initial_ns, s->backoff_max_ns, rnd_next(s));
	pthread_mutex_lock(&s->mu);
	s->next_attempt_ns = agent_sender_now_ns() + d;
	s->details.retries++;
	pthread_mutex_unlock(&s->mu);
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

	if (missing.live) {
		again = calloc(1, sizeof(*again));
		if (again)
			again->samples = malloc(head->n * sizeof(*again->samples));
		if (again && !again->samples)
			SR_FREE(again);
	}
	for (size_t i = 0; i < head->n; i++) {
		stackrelay_v1_Sample *sm = &head->samples[i];
		uint64_t c = agent_sender_sample_count(sm), b = agent_sender_sample_bytes(sm);
		int m = missing.live ? agent_defs_sample_missing(s->store, sm, &missing, check_frames) : 0;

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
static void send_head(struct agent_sender *s, struct chunk *h)
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

static bool idle_locked(const struct agent_sender *s)
{
	return TAILQ_EMPTY(&s->queue) && !s->head && !s->busy && s->n_symjobs == 0 && !s->has_pending_drops &&
	       (!s->flushing || s->probe_state == PROBE_DONE);
}

static void timed_wait(struct agent_sender *s, uint64_t until_ns)
{
	struct timespec ts;

	if (!until_ns) {
		pthread_cond_wait(&s->wake, &s->mu);
		return;
	}
	ts.tv_sec = (time_t)(until_ns / SR_NSEC_PER_SEC);
	ts.tv_nsec = (long)(until_ns % SR_NSEC_PER_SEC);
	pthread_cond_timedwait(&s->wake, &s->mu, &ts);
}

static void *sender_thread(void *arg)
{
	struct agent_sender *s = arg;

	pthread_mutex_lock(&s->mu);
	for (;;) {
		uint64_t now = agent_sender_now_ns();
		struct chunk *h;

		if (s->stop)
			break;
		if (s->flush_expired) {
			agent_sender_drop_all_locked(s);
			s->flush_expired = false;
			atomic_store(&s->abort_transfer, false);
			pthread_cond_broadcast(&s->idle);
			continue;
		}
		if (now < s->next_attempt_ns) {
			timed_wait(s, s->next_attempt_ns);
			continue;
		}
		h = s->head ? s->head : agent_sender_form_head_locked(s);
		if (h) {
			s->busy = true;
			pthread_mutex_unlock(&s->mu);
			send_head(s, h);
			pthread_mutex_lock(&s->mu);
			s->busy = false;
			continue;
		}
		if (s->n_symjobs) {
			agent_sender_refill_symbol_tokens(s, now);
			/* Rate limit, except when flushing: then every wanted table goes before exit. */
			if (s->sym_tokens <= 0 && !s->flushing) {
				uint64_t wait = (uint64_t)(-s->sym_tokens / AGENT_SENDER_SYMBOL_RATE_BYTES * 1e9) + 1;

				timed_wait(s, now + wait);
				continue;
			}
			s->busy = true;
			pthread_mutex_unlock(&s->mu);
			agent_sender_send_symbols(s);
			pthread_mutex_lock(&s->mu);
			s->busy = false;
			continue;
		}
		/* Flushing, everything sent: ask whether the gateway wants symbol tables for what it got. */
		if (s->flushing && s->probe_state != PROBE_DONE) {
			if (s->probe_state == PROBE_OFF) {
				s->probe_state = PROBE_WAIT;
				s->probe_wait_ns = s->probe_first_ns;
				s->probe_at_ns = now + s->probe_first_ns;
				if (s->probe_n == 0)
					agent_sender_probe_done_locked(s);
				continue;
			}
			if (now < s->probe_at_ns) {
				timed_wait(s, s->probe_at_ns);
				continue;
			}
			s->busy = true;
			pthread_mutex_unlock(&s->mu);
			agent_sender_probe_round(s);
			pthread_mutex_lock(&s->mu);
			s->busy = false;
			continue;
		}
		pthread_cond_broadcast(&s->idle);
		timed_wait(s, 0);
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

/* ---- public ---- */

int agent_sender__flush(struct agent_sender *s, uint64_t timeout_ns)
{
	struct timespec ts;
	uint64_t deadline, dropped;
	int r = 0;

	if (!s)
		return -EINVAL;
	pthread_mutex_lock(&s->mu);
	deadline = agent_sender_now_ns() + timeout_ns;
	s->flushing++;
	s->flush_dropped = 0;
	s->flush_deadline_ns = deadline;
	/* Every flush asks again: a second flush may follow more samples. */
	s->probe_state = PROBE_OFF;
	/* A flush sends now: pending backoff is cut short, bounded by the deadline anyway. */
	if (s->next_attempt_ns > deadline)
		s->next_attempt_ns = agent_sender_now_ns();
	pthread_cond_signal(&s->wake);
	while (!idle_locked(s) && agent_sender_now_ns() < deadline) {
		ts.tv_sec = (time_t)(deadline / SR_NSEC_PER_SEC);
		ts.tv_nsec = (long)(deadline % SR_NSEC_PER_SEC);
		pthread_cond_timedwait(&s->idle, &s->mu, &ts);
	}
	if (!idle_locked(s)) {
		uint64_t syms = s->n_symjobs;
		/* Everything delivered, only asking whether the gateway still wants symbols: not a failure. */
		bool probing = TAILQ_EMPTY(&s->queue) && !s->head && !s->n_symjobs && !s->has_pending_drops;

		s->flush_expired = true;
		atomic_store(&s->abort_transfer, true);
		pthread_cond_signal(&s->wake);
		while (s->flush_expired && !s->stop)
			pthread_cond_wait(&s->idle, &s->mu);
		dropped = s->flush_dropped;
		if (probing && !dropped) {
			sr_log_info(LOG_COMPONENT,
				    "flush timeout reached while asking the gateway which symbol tables it wants",
				    "timeout=%.3fs", (double)timeout_ns / 1e9);
		} else {
			sr_log_warn(LOG_COMPONENT, "flush timed out; dropped what was not delivered",
				    "timeout=%.3fs samples_dropped=%" PRIu64 " symbol_tables_dropped=%" PRIu64,
				    (double)timeout_ns / 1e9, dropped, syms);
			r = -ETIMEDOUT;
		}
	}
	s->flushing--;
	if (!s->flushing)
		s->flush_deadline_ns = 0;
	pthread_mutex_unlock(&s->mu);
	return r;
}

void agent_sender__stats(struct agent_sender *s, struct agent_sender_stats *ret)
{
	pthread_mutex_lock(&s->mu);
	*ret = s->stats;
	ret->bytes_sent = __atomic_load_n(&s->stats.bytes_sent, __ATOMIC_RELAXED);
	ret->buffered_bytes = s->buffered_bytes;
	pthread_mutex_unlock(&s->mu);
}

void agent_sender__details(struct agent_sender *s, struct agent_sender_details *ret)
{
	pthread_mutex_lock(&s->mu);
	*ret = s->details;
	ret->samples_buffered = s->buffered_samples;
	pthread_mutex_unlock(&s->mu);
}

void agent_sender__set_backoff(struct agent_sender *s, uint64_t initial_ns, uint64_t max_ns)
{
	pthread_mutex_lock(&s->mu);
	s->backoff_initial_ns = initial_ns;
	s->backoff_max_ns = max_ns;
	pthread_mutex_unlock(&s->mu);
}

void agent_sender__set_probe_wait(struct agent_sender *s, uint64_t first_ns, uint64_t max_ns)
{
	pthread_mutex_lock(&s->mu);
	s->probe_first_ns = first_ns;
	s->probe_max_ns = max_ns;
	pthread_mutex_unlock(&s->mu);
}

void agent_sender__set_kallsyms_path(struct agent_sender *s, const char *path)
{
	pthread_mutex_lock(&s->mu);
	s->kallsyms_path = path;
	pthread_mutex_unlock(&s->mu);
}

static bool compression_is_gzip(const struct agent_config *cfg)
{
	const char *name = agent_compression_names[cfg->gateway.compression];

	return name && strcmp(name, "gzip") == 0;
}

struct agent_sender *agent_sender_new_with_transport(const struct agent_config *cfg, struct agent_store *store,
						     struct agent_sender_transport *t)
{
	struct agent_sender *s = NULL;
	pthread_condattr_t ca;
	int r;

	s = calloc(1, sizeof(*s));
	if (!s) {
		r = -ENOMEM;
		goto fail;
	}
	pthread_mutex_init(&s->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->wake, &ca);
	pthread_cond_init(&s->idle, &ca);
	pthread_condattr_destroy(&ca);
	s->cfg = cfg;
	s->store = store;
	s->transport = *t;
	t->userdata = NULL;
	TAILQ_INIT(&s->queue);
	s->gzip = compression_is_gzip(cfg);
	s->buffer_limit = cfg->gateway.buffer_bytes;
	s->backoff_initial_ns = AGENT_SENDER_BACKOFF_INITIAL_NS;
	s->kallsyms_path = AGENT_SYMUPLOAD_KALLSYMS_PATH;
	s->backoff_max_ns = AGENT_SENDER_BACKOFF_MAX_NS;
	s->probe_first_ns = AGENT_SENDER_PROBE_FIRST_WAIT_NS;
	s->probe_max_ns = AGENT_SENDER_PROBE_MAX_WAIT_NS;
	s->sent.max = AGENT_SENDER_SENT_SET_MAX;
	if (getrandom(s->instance_id, sizeof(s->instance_id), 0) != sizeof(s->instance_id) ||
	    getrandom(&s->rnd_state, sizeof(s->rnd_state), 0) != sizeof(s->rnd_state)) {
		r = -errno;
		goto fail_free;
	}
	s->rnd_state |= 1;
	if (gethostname(s->host_name, sizeof(s->host_name) - 1) < 0)
		s->host_name[0] = '\0';
	s->sym_tokens_ns = agent_sender_now_ns();
	s->sym_tokens = (double)AGENT_SENDER_SYMBOL_RATE_BYTES;
	atomic_init(&s->abort_transfer, false);
	reread_token(s, true);
	r = -pthread_create(&s->thread, NULL, sender_thread, s);
	if (r < 0)
		goto fail_free;
	s->thread_started = true;
	return s;
fail_free:
	agent_sender_free(s);
	errno = -r;
	return NULL;
fail:
	if (t->free)
		t->free(t->userdata);
	errno = -r;
	return NULL;
}

struct agent_sender *agent_sender_new(const struct agent_config *cfg, struct agent_store *store)
{
	struct agent_sender_transport t = { 0 };
	char err[256] = "";
	int r;

	if (!cfg || !cfg->gateway.endpoint) {
		errno = EINVAL;
		return NULL;
	}
	r = agent_sender_http_new(&cfg->gateway, &t, err, sizeof(err));
	if (r < 0) {
		sr_log_error(LOG_COMPONENT, "cannot set up the gateway connection", "endpoint=%s error=\"%s\"",
			     cfg->gateway.endpoint, err[0] ? err : strerror(-r));
		errno = -r;
		return NULL;
	}
	return agent_sender_new_with_transport(cfg, store, &t);
}

void agent_sender_free(struct agent_sender *s)
{
	uint64_t left;

	if (!s)
		return;
	if (s->thread_started) {
		pthread_mutex_lock(&s->mu);
		s->stop = true;
		atomic_store(&s->abort_transfer, true);
		pthread_cond_broadcast(&s->wake);
		pthread_mutex_unlock(&s->mu);
		pthread_join(s->thread, NULL);
	}
	pthread_mutex_lock(&s->mu);
	s->flush_dropped = 0;
	agent_sender_drop_all_locked(s);
	left = s->flush_dropped;
	pthread_mutex_unlock(&s->mu);
	if (left)
		sr_log_warn(LOG_COMPONENT, "sender stopped with unsent samples; dropped", "samples=%" PRIu64, left);
	if (s->transport.free)
		s->transport.free(s->transport.userdata);
	agent_idset_done(&s->sent);
	agent_idset_done(&s->symdone);
	agent_idset_done(&s->probe_set);
	free(s->probe_ids);
	free(s->symjobs);
	free(s->token);
	pthread_cond_destroy(&s->wake);
	pthread_cond_destroy(&s->idle);
	pthread_mutex_destroy(&s->mu);
	free(s);
}
