// SPDX-License-Identifier: Apache-2.0
/*
 * The sender's symbol work (sender-private.h): uploads of the symbol tables
 * the gateway wants (docs/agent-protocol.md, "Symbol upload"), rate-limited,
 * and the probes at exit ("Symbol probes").
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <pb_decode.h>

#include "config.h"
#include "log.h"
#include "macro.h"
#include "sender-private.h"
#include "sr-config.h"
#include "symupload.h"
#include "units.h"

/* Remembers an ID for the exit probes; the ring forgets the oldest when full. */
void agent_sender_probe_remember(struct agent_sender *s, const pb_bytes_array_t *id)
{
	struct probe_id *p;

	if (!id || !id->size || id->size > sizeof(p->id) ||
	    agent_idset_has(&s->probe_set, AGENT_ID_SYMBOLS, id->bytes, id->size))
		return;
	if (!s->probe_ids) {
		s->probe_ids = calloc(AGENT_SENDER_PROBE_IDS_MAX, sizeof(*s->probe_ids));
		if (!s->probe_ids)
			return;
	}
	p = &s->probe_ids[s->probe_next];
	/* One key domain for both kinds: the probe names the ID, the gateway knows what it is. */
	if (agent_idset_add(&s->probe_set, AGENT_ID_SYMBOLS, id->bytes, id->size) < 0)
		return;
	if (s->probe_n == AGENT_SENDER_PROBE_IDS_MAX)
		agent_idset_del(&s->probe_set, AGENT_ID_SYMBOLS, p->id, p->len); /* the oldest, overwritten below */
	memcpy(p->id, id->bytes, id->size);
	p->len = (uint8_t)id->size;
	s->probe_next = (s->probe_next + 1) % AGENT_SENDER_PROBE_IDS_MAX;
	if (s->probe_n < AGENT_SENDER_PROBE_IDS_MAX)
		s->probe_n++;
}

/* Queues uploads for the wanted IDs not uploaded yet; returns how many were queued. */
size_t agent_sender_want_symbols(struct agent_sender *s, pb_bytes_array_t **ids, pb_size_t n)
{
	size_t added = 0;

	/* The queue is the thread's, but flush() reads its length: change it under the lock. */
	pthread_mutex_lock(&s->mu);
	for (pb_size_t i = 0; i < n; i++) {
		const pb_bytes_array_t *id = ids[i];
		struct symjob *j;

		if (!id || !id->size || id->size > sizeof(j->id))
			continue;
		/* Once per executable per agent lifetime (unless it failed): the set remembers. */
		if (agent_idset_has(&s->symdone, AGENT_ID_SYMBOLS, id->bytes, id->size))
			continue;
		if (s->symdone.live >= AGENT_SENDER_SYMBOL_SET_MAX)
			continue;
		if (agent_sender_grow((void **)&s->symjobs, &s->symjobs_cap, s->n_symjobs, sizeof(*s->symjobs)) < 0)
			continue;
		if (agent_idset_add(&s->symdone, AGENT_ID_SYMBOLS, id->bytes, id->size) < 0)
			continue;
		j = &s->symjobs[s->n_symjobs++];
		memcpy(j->id, id->bytes, id->size);
		j->len = id->size;
		j->attempts = 0;
		j->seq = 0;
		added++;
	}
	pthread_mutex_unlock(&s->mu);
	return added;
}

/* A wanted ID is either an executable's or the kernel's (the store holds one kernel: this boot's). */
static bool is_kernel(struct agent_sender *s, const struct symjob *j)
{
	stackrelay_v1_KernelDef def = stackrelay_v1_KernelDef_init_zero;
	bool found = agent_store__kernel(s->store, j->id, j->len, &def) == 0;

	pb_release(stackrelay_v1_KernelDef_fields, &def);
	return found;
}

/* One symbol table upload, for the first pending job. */
void agent_sender_send_symbols(struct agent_sender *s)
{
	/* A copy: agent_sender_want_symbols() below may grow (move) the queue. */
	struct symjob job = s->symjobs[0], *j = &job;
	struct agent_symtab table = { 0 };
	uint8_t *tbuf = NULL;
	size_t tlen = 0;
	stackrelay_v1_PushRequest req;
	struct req_common st;
	struct encoded enc = { 0 };
	struct attempt a = { 0 };
	char err[256] = "";
	bool failed = false, finished = true;
	int fd, r;

	if (is_kernel(s, j)) {
		/* The running kernel (the store knows only this boot's): its kallsyms, runtime addresses. */
		r = agent_symupload_kallsyms(s->kallsyms_path, s->cfg->gateway.max_symbol_upload_bytes, &table);
		if (r == -EPERM) {
			snprintf(err, sizeof(err),
				 "%s shows every address as 0 (kptr_restrict): the agent needs CAP_SYSLOG",
				 s->kallsyms_path);
			sr_log_warn(LOG_COMPONENT, "cannot upload kernel symbols; kernel frames stay unnamed",
				    "path=%s error=\"addresses hidden: grant CAP_SYSLOG\"", s->kallsyms_path);
		} else if (r == -EFBIG) {
			snprintf(err, sizeof(err), "kernel symbol table exceeds max_symbol_upload_bytes (%" PRIu64 ")",
				 s->cfg->gateway.max_symbol_upload_bytes);
			sr_log_warn(LOG_COMPONENT, "cannot upload kernel symbols; kernel frames stay unnamed",
				    "path=%s error=\"%s\"", s->kallsyms_path, err);
		} else if (r < 0) {
			snprintf(err, sizeof(err), "cannot read %s: %s", s->kallsyms_path, strerror(-r));
			sr_log_warn(LOG_COMPONENT, "cannot upload kernel symbols; kernel frames stay unnamed",
				    "path=%s error=\"%s\"", s->kallsyms_path, strerror(-r));
		}
	} else if ((fd = agent_store__open_executable(s->store, j->id, j->len)) < 0) {
		snprintf(err, sizeof(err), "executable not reachable on this node: %s", strerror(-fd));
	} else {
		r = agent_symupload_extract_fd(fd, s->cfg->gateway.max_symbol_upload_bytes, &table);
		close(fd);
		if (r == -EFBIG)
			snprintf(err, sizeof(err), "symbol table exceeds max_symbol_upload_bytes (%" PRIu64 ")",
				 s->cfg->gateway.max_symbol_upload_bytes);
		else if (r == -ENODATA)
			snprintf(err, sizeof(err),
				 "no function symbols (.symtab, .dynsym, .gnu_debugdata, .gopclntab)");
		else if (r < 0)
			snprintf(err, sizeof(err), "cannot read symbols: %s", strerror(-r));
	}
	if (err[0]) {
		/* Tell the gateway, so it stops asking this agent (docs/agent-protocol.md). */
		agent_symtab_release(&table);
		failed = true;
	}
	if (agent_symtab__encode(&table, j->id, j->len, err, &tbuf, &tlen) < 0)
		tbuf = NULL;
	agent_symtab_release(&table);

	if (!j->seq)
		j->seq = ++s->seq;
	agent_sender_fill_common(s, &req, &st, j->seq);
	r = tbuf ? agent_sender_encode(s, &req, tbuf, tlen, &enc) : -ENOMEM;
	free(tbuf);
	if (r < 0) {
		failed = true;
	} else {
		size_t cost = enc.len;

		agent_sender_post(s, &enc, &a);
		free(enc.buf);
		s->sym_tokens -= (double)cost;
		if (a.outcome == OUT_DONE) {
			agent_sender_note_success(s);
			pthread_mutex_lock(&s->mu);
			s->stats.requests_ok++;
			if (!failed)
				s->stats.symbol_tables_sent++;
			pthread_mutex_unlock(&s->mu);
			if (a.have_resp)
				agent_sender_want_symbols(s, a.resp.wanted_symbols, a.resp.wanted_symbols_count);
		} else if (a.outcome == OUT_RETRY) {
			/*
			 * Kept and retried like samples (after them, same sequence), until it
			 * goes through or a flush deadline drops it: a short run must still
			 * leave symbolized profiles behind.
			 */
			j->attempts++;
			agent_sender_note_failure(s, &a, "symbols");
			agent_sender_schedule_retry(s, a.wait_ns);
			finished = false;
		} else {
			/* Refused (413: larger than the gateway's max_request_bytes, or 4xx): asking again will not help. */
			agent_sender_note_failure(s, &a, "symbols");
			failed = true;
			sr_log_warn(LOG_COMPONENT, "gateway refused a symbol table upload; not retrying it",
				    "error=\"%s\"", a.why);
		}
		if (a.have_resp)
			pb_release(stackrelay_v1_PushResponse_fields, &a.resp);
	}
	if (!finished) {
		pthread_mutex_lock(&s->mu);
		s->symjobs[0].attempts = job.attempts;
		s->symjobs[0].seq = job.seq;
		pthread_mutex_unlock(&s->mu);
	} else {
		if (failed) {
			pthread_mutex_lock(&s->mu);
			s->details.symbol_tables_failed++;
			pthread_mutex_unlock(&s->mu);
			sr_log_debug(LOG_COMPONENT, "symbol table upload failed", "error=\"%s\"", err[0] ? err : a.why);
		}
		pthread_mutex_lock(&s->mu);
		memmove(&s->symjobs[0], &s->symjobs[1], (s->n_symjobs - 1) * sizeof(*s->symjobs));
		s->n_symjobs--;
		pthread_mutex_unlock(&s->mu);
	}
}

/* Ends the probe phase of this flush. Called with mu held. */
void agent_sender_probe_done_locked(struct agent_sender *s)
{
	s->probe_state = PROBE_DONE;
	s->probe_at_ns = 0;
}

/*
 * One probe round at flush (docs/agent-protocol.md, "Symbol probes"): asks the
 * gateway about every remembered ID not uploaded yet, in requests of at most
 * AGENT_SENDER_PROBES_PER_REQUEST IDs, queues uploads for the wanted ones
 * (sent by the thread before the next round) and plans the next round while
 * the gateway still looks some up (symbols_pending) or wanted new ones.
 */
void agent_sender_probe_round(struct agent_sender *s)
{
	const size_t slot = PB_BYTES_ARRAY_T_ALLOCSIZE(sizeof(((struct probe_id *)0)->id));
	pb_bytes_array_t *ptrs[AGENT_SENDER_PROBES_PER_REQUEST];
	uint8_t *bufs = malloc(AGENT_SENDER_PROBES_PER_REQUEST * slot);
	uint64_t pending = 0;
	size_t queued = 0, asked = 0, i = 0;
	bool retry = false, give_up = false;

	if (!bufs) {
		give_up = true;
		goto decide;
	}
	while (i < s->probe_n && !retry && !give_up) {
		stackrelay_v1_PushRequest req;
		struct req_common st;
		struct encoded enc = { 0 };
		struct attempt a = { 0 };
		pb_size_t n = 0;

		/* The next batch of IDs not uploaded (or being uploaded) in this run. */
		for (; i < s->probe_n && n < AGENT_SENDER_PROBES_PER_REQUEST; i++) {
			const struct probe_id *p = &s->probe_ids[i];

			if (agent_idset_has(&s->symdone, AGENT_ID_SYMBOLS, p->id, p->len))
				continue;
			ptrs[n] = (pb_bytes_array_t *)(bufs + n * slot);
			ptrs[n]->size = p->len;
			memcpy(ptrs[n]->bytes, p->id, p->len);
			n++;
		}
		if (n == 0)
			break;
		/* A new sequence every time: the answer changes as the gateway works, a cached one would be stale. */
		agent_sender_fill_common(s, &req, &st, ++s->seq);
		req.probe_symbols = ptrs;
		req.probe_symbols_count = n;
		if (agent_sender_encode(s, &req, NULL, 0, &enc) < 0) {
			give_up = true;
			break;
		}
		{
			bool was_conn = s->have_conn;
			uint64_t started = s->conn_started_ns;

			agent_sender_post(s, &enc, &a);
			/* A new connection (max_connection_age, or none before) has seen no definitions yet. */
			if (a.status == 0 || !was_conn || s->conn_started_ns != started)
				agent_idset_clear(&s->sent);
		}
		free(enc.buf);
		asked += n;
		switch (a.outcome) {
		case OUT_DONE:
			agent_sender_note_success(s);
			pthread_mutex_lock(&s->mu);
			s->stats.requests_ok++;
			pthread_mutex_unlock(&s->mu);
			if (a.have_resp) {
				queued += agent_sender_want_symbols(s, a.resp.wanted_symbols,
								    a.resp.wanted_symbols_count);
				if (a.resp.symbols_pending)
					pending += *a.resp.symbols_pending;
			}
			break;
		case OUT_RETRY:
			agent_sender_note_failure(s, &a, "symbol probe");
			agent_sender_schedule_retry(s, a.wait_ns);
			retry = true;
			break;
		default:
			/* Refused for good (an old or strict gateway): the profiles stay as the windows left them. */
			agent_sender_note_failure(s, &a, "symbol probe");
			sr_log_warn(LOG_COMPONENT, "gateway refused a symbol probe; not asking again", "error=\"%s\"",
				    a.why);
			give_up = true;
			break;
		}
		if (a.have_resp)
			pb_release(stackrelay_v1_PushResponse_fields, &a.resp);
	}
decide:
	free(bufs);
	pthread_mutex_lock(&s->mu);
	if (give_up || s->probe_state != PROBE_WAIT) {
		agent_sender_probe_done_locked(s);
	} else if (retry) {
		/* The same round again once the backoff (next_attempt_ns) is over. */
		s->probe_at_ns = 0;
	} else if (pending || queued) {
		uint64_t now = agent_sender_now_ns();

		/* New uploads: ask right after them; only pending: wait longer each round. */
		if (pending)
			s->probe_wait_ns = s->probe_wait_ns * 2 > s->probe_max_ns ? s->probe_max_ns
										  : s->probe_wait_ns * 2;
		s->probe_at_ns = now + (pending ? s->probe_wait_ns : s->probe_first_ns);
		if (s->flush_deadline_ns && s->probe_at_ns >= s->flush_deadline_ns) {
			sr_log_info(LOG_COMPONENT, "symbols still being looked up by the gateway at exit; not waiting",
				    "pending=%" PRIu64 " flush_timeout_left_ms=%" PRIu64, pending,
				    (uint64_t)(s->flush_deadline_ns > now
						       ? (s->flush_deadline_ns - now) / SR_NSEC_PER_MSEC
						       : 0));
			agent_sender_probe_done_locked(s);
		}
	} else {
		agent_sender_probe_done_locked(s);
	}
	pthread_mutex_unlock(&s->mu);
	sr_log_debug(LOG_COMPONENT, "symbol probe round", "asked=%zu wanted_new=%zu pending=%" PRIu64, asked, queued,
		     pending);
}

void agent_sender_refill_symbol_tokens(struct agent_sender *s, uint64_t now)
{
	double cap = (double)(s->cfg->gateway.max_symbol_upload_bytes ? s->cfg->gateway.max_symbol_upload_bytes
								      : AGENT_SENDER_SYMBOL_RATE_BYTES);

	if (cap < AGENT_SENDER_SYMBOL_RATE_BYTES)
		cap = AGENT_SENDER_SYMBOL_RATE_BYTES;
	s->sym_tokens += (double)(now - s->sym_tokens_ns) / 1e9 * AGENT_SENDER_SYMBOL_RATE_BYTES;
	s->sym_tokens_ns = now;
	if (s->sym_tokens > cap)
		s->sym_tokens = cap;
}
