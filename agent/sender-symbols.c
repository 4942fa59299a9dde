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

#include "common/grow.h"
#include "config.h"
#include "common/log.h"
#include "common/macro.h"
#include "sender-private.h"
#include "sr-config.h"
#include "symupload.h"
#include "common/units.h"

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

/*
 * What symdone holds per ID: its uploads so far, when the last one finished
 * (monotonic ms + 1) and whether one is queued or under way. A table refused
 * by the gateway (413, other 4xx) is never sent again.
 */
#define SYM_AT_MASK	  ((1ULL << 48) - 1)
#define SYM_UPLOADS_SHIFT 48
#define SYM_UPLOADS_MAX	  0x3fffULL
#define SYM_QUEUED	  (1ULL << 62)
#define SYM_NEVER	  (1ULL << 63)

/*
 * Whether an ID uploaded before may be uploaded again now: wanted again means
 * a gateway lacks it (another replica, a restart without cache_dir, an
 * eviction), and a table sent once per agent lifetime would leave that
 * gateway's frames unnamed. The wait doubles with every upload, so a gateway
 * that keeps forgetting costs one table per ID per AGENT_SENDER_SYMBOL_REUPLOAD_MAX_NS.
 */
static bool may_upload_again(const struct agent_sender *s, uint64_t v, uint64_t now_ns)
{
	uint64_t after = s->cfg->gateway.symbol_reupload_after_ns, uploads = (v >> SYM_UPLOADS_SHIFT) & SYM_UPLOADS_MAX;
	uint64_t wait = after, at_ms = (v & SYM_AT_MASK) - 1, now_ms = now_ns / 1000000;

	if (!after || (v & (SYM_QUEUED | SYM_NEVER)) || !uploads)
		return false;
	for (uint64_t i = 1; i < uploads && wait < AGENT_SENDER_SYMBOL_REUPLOAD_MAX_NS; i++)
		wait *= 2;
	wait = SR_MIN(wait, SR_MAX(after, AGENT_SENDER_SYMBOL_REUPLOAD_MAX_NS));
	return now_ms >= at_ms && now_ms - at_ms >= wait / 1000000;
}

/* Records how an upload of id ended: delivered (table or error) or refused for good. Called with mu held. */
static void symbol_upload_ended_locked(struct agent_sender *s, const struct symjob *j, bool refused)
{
	uint64_t *v = agent_idset_value(&s->symdone, AGENT_ID_SYMBOLS, j->id, j->len);
	uint64_t uploads;

	if (!v)
		return;
	uploads = SR_MIN(((*v >> SYM_UPLOADS_SHIFT) & SYM_UPLOADS_MAX) + 1, SYM_UPLOADS_MAX);
	*v = refused ? SYM_NEVER
		     : (uploads << SYM_UPLOADS_SHIFT) | ((agent_sender_now_ns() / 1000000 + 1) & SYM_AT_MASK);
}

/* Uploaded (or queued) and not to be uploaded again yet: the exit probes need not ask about it. */
static bool symbol_settled(const struct agent_sender *s, const uint8_t *id, size_t len, uint64_t now_ns)
{
	const uint64_t *v = agent_idset_value(&s->symdone, AGENT_ID_SYMBOLS, id, len);

	return v && !may_upload_again(s, *v, now_ns);
}

/* Queues uploads for the wanted IDs not uploaded lately; returns how many were queued. */
size_t agent_sender_want_symbols(struct agent_sender *s, pb_bytes_array_t **ids, pb_size_t n)
{
	uint64_t now = agent_sender_now_ns();
	size_t added = 0;

	/* The queue is the thread's, but flush() reads its length: change it under the lock. */
	pthread_mutex_lock(&s->mu);
	for (pb_size_t i = 0; i < n; i++) {
		const pb_bytes_array_t *id = ids[i];
		uint64_t *v;
		struct symjob *j;

		if (!id || !id->size || id->size > sizeof(j->id))
			continue;
		v = agent_idset_value(&s->symdone, AGENT_ID_SYMBOLS, id->bytes, id->size);
		if (v && !may_upload_again(s, *v, now))
			continue;
		if (!v && agent_idset_count(&s->symdone) >= AGENT_SENDER_SYMBOL_SET_MAX)
			continue;
		if (sr_grow_zero((void **)&s->symjobs, &s->symjobs_cap, s->n_symjobs + 1, sizeof(*s->symjobs), 16) < 0)
			continue;
		if (v) {
			uint64_t uploads = (*v >> SYM_UPLOADS_SHIFT) & SYM_UPLOADS_MAX;

			s->details.symbol_tables_reuploaded++;
			sr_log_debug(LOG_COMPONENT, "symbol table wanted again; uploading it again", "uploads=%" PRIu64,
				     uploads);
		} else if (agent_idset_add(&s->symdone, AGENT_ID_SYMBOLS, id->bytes, id->size) < 0 ||
			   !(v = agent_idset_value(&s->symdone, AGENT_ID_SYMBOLS, id->bytes, id->size))) {
			continue;
		}
		*v |= SYM_QUEUED;
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

/*
 * A wanted ID is an executable's or one of the kernel's address spaces
 * (kernel.h: the image, a module, this boot's runtime addresses). For the
 * kernel, fills k (agent_kernel_done() it) and *ret_seg.
 */
static bool kernel_space(struct agent_sender *s, const struct symjob *j, struct agent_kernel *k, int *ret_seg)
{
	if (agent_store__kernel_copy(s->store, k) < 0)
		return false;
	*ret_seg = agent_kernel_seg_of_id(k, j->id, j->len);
	if (*ret_seg != AGENT_KSEG_NONE)
		return true;
	agent_kernel_done(k);
	return false;
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
	bool failed = false, finished = true, refused = false;
	struct agent_kernel kernel;
	int fd, r, seg;

	if (kernel_space(s, j, &kernel, &seg)) {
		/* The running kernel: the kallsyms lines of that address space, at its addresses. */
		r = agent_symupload_kallsyms(s->kallsyms_path, &kernel, seg, s->cfg->gateway.max_symbol_upload_bytes,
					     &table);
		agent_kernel_done(&kernel);
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
		} else if (r == -ENODATA) {
			/* A module unloaded, BPF programs gone: nothing to name those frames with any more. */
			snprintf(err, sizeof(err), "%s lists no function symbols in %s", s->kallsyms_path,
				 seg == AGENT_KSEG_IMAGE ? "the kernel image"
				 : seg >= 0		 ? "that module"
							 : "runtime code");
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
			failed = refused = true;
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
		symbol_upload_ended_locked(s, j, refused);
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
		uint64_t now = agent_sender_now_ns();

		/* The next batch of IDs not uploaded (or being uploaded) lately. */
		for (; i < s->probe_n && n < AGENT_SENDER_PROBES_PER_REQUEST; i++) {
			const struct probe_id *p = &s->probe_ids[i];

			if (symbol_settled(s, p->id, p->len, now))
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
