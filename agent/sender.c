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
 *
 * This file holds the thread and the sender's life: creating it, flush,
 * counters, freeing it. The queue is in sender-queue.c, requests of samples
 * and their answers in sender-samples.c, what every request does (encoding,
 * posting, classifying the answer, backoff) in sender-request.c, symbol
 * uploads and probes in sender-symbols.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "config.h"
#include "common/log.h"
#include "sender-private.h"
#include "symupload.h"
#include "common/units.h"

uint64_t agent_sender_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * SR_NSEC_PER_SEC + (uint64_t)ts.tv_nsec;
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
			agent_sender_send_head(s, h);
			pthread_mutex_lock(&s->mu);
			s->sent_count = agent_idset_count(&s->sent);
			s->sent_bytes = agent_idset_bytes(&s->sent);
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
	ret->sent_ids = s->sent_count;
	ret->sent_ids_bytes = s->sent_bytes;
	ret->sent_ids_limit = AGENT_SENDER_SENT_SET_MAX;
	ret->symbol_ids = agent_idset_count(&s->symdone); /* changed under the lock only */
	ret->symbol_ids_bytes = agent_idset_bytes(&s->symdone);
	ret->symbol_ids_limit = AGENT_SENDER_SYMBOL_SET_MAX;
	/* The queue is in submit order, and the head (being sent) is older than all of it. */
	ret->oldest_window = s->head ? s->head->window
				     : (TAILQ_EMPTY(&s->queue) ? UINT64_MAX : TAILQ_FIRST(&s->queue)->window);
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
	s->symdone.with_values = true;
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
	agent_sender_reread_token(s, true);
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
