/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sender's state, shared by sender.c (the thread, the sender's life),
 * sender-request.c (encoding, posting and classifying requests; backoff),
 * sender-samples.c (requests of samples and their answers), sender-queue.c
 * (the bounded queue) and sender-symbols.c (symbol uploads and exit probes),
 * and nothing else.
 */
#ifndef SR_AGENT_SENDER_PRIVATE_H
#define SR_AGENT_SENDER_PRIVATE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "agent.h"
#include "sender-parts-private.h"

#define LOG_COMPONENT "sender"

enum drop_reason {
	DROP_BUFFER_FULL,
	DROP_FLUSH_TIMEOUT,
	DROP_DEFINITION_LOST,
	DROP_REJECTED,
};

struct chunk {
	TAILQ_ENTRY(chunk) link;
	stackrelay_v1_Sample *samples;
	size_t n;
	uint64_t count; /* sum of counts */
	uint64_t bytes; /* buffer accounting */
	uint32_t frequency_hz;
	uint64_t window; /* the oldest agent_batch.window of its samples */
	uint64_t seq;	 /* 0 until first sent */
	unsigned rounds; /* resends for missing definitions */
	bool has_drops;
	uint64_t drops[4]; /* DropCounters relayed with this request */
};

TAILQ_HEAD(chunkq, chunk);

/* An executable or kernel ID remembered for the exit probes. */
struct probe_id {
	uint8_t id[64];
	uint8_t len;
};

/* Flush's symbol probe phase (docs/agent-protocol.md, "Symbol probes"). */
enum probe_state {
	PROBE_OFF,  /* not started for this flush */
	PROBE_WAIT, /* next round at probe_at_ns */
	PROBE_DONE, /* nothing more to ask this flush */
};

struct symjob {
	uint8_t id[64];
	size_t len;
	unsigned attempts;
	uint64_t seq; /* kept for retries, like samples: a lost response is not a second upload */
};

struct agent_sender {
	const struct agent_config *cfg;
	struct agent_store *store;
	struct agent_sender_transport transport;
	uint8_t instance_id[AGENT_SENDER_INSTANCE_ID_BYTES];
	char host_name[256];
	bool gzip;
	uint64_t buffer_limit;
	uint64_t backoff_initial_ns, backoff_max_ns;

	pthread_t thread;
	bool thread_started;
	pthread_mutex_t mu;
	pthread_cond_t wake; /* the thread waits here */
	pthread_cond_t idle; /* flush() waits here */

	/* Guarded by mu. */
	struct chunkq queue;
	struct chunk *head;
	uint64_t buffered_bytes, buffered_samples;
	uint64_t pending_drops[4];
	bool has_pending_drops;
	bool stop;
	unsigned flushing;
	uint64_t flush_deadline_ns;
	enum probe_state probe_state; /* read by flush() for idleness */
	uint64_t probe_at_ns;
	bool flush_expired;	/* set by flush(), cleared by the thread once it dropped what remained */
	uint64_t flush_dropped; /* samples dropped for the current flush's timeout */
	bool busy;		/* the thread is working on something outside the lock */
	size_t n_symjobs;	/* mirror of the thread's queue length, for idle checks */
	uint64_t next_attempt_ns;
	struct agent_sender_stats stats;
	struct agent_sender_details details;
	uint64_t last_full_log_ns;
	/* `sent`'s size after the last request, for agent_sender__stats(). */
	size_t sent_count, sent_bytes;

	atomic_bool abort_transfer;

	/* Thread-owned. */
	struct agent_idset sent;    /* definitions the current connection has seen */
	struct agent_idset symdone; /* executables (and kernels) uploaded or being uploaded */
	const char *kallsyms_path;  /* AGENT_SYMUPLOAD_KALLSYMS_PATH; tests point it at a fixture */
	struct symjob *symjobs;
	size_t symjobs_cap;
	/* IDs for the exit probes: a ring of the most recent distinct ones, and their set. */
	struct probe_id *probe_ids;
	size_t probe_n, probe_next;
	struct agent_idset probe_set;
	uint64_t probe_wait_ns;		       /* current wait between rounds */
	uint64_t probe_first_ns, probe_max_ns; /* AGENT_SENDER_PROBE_*_WAIT_NS; tests shorten them */
	uint64_t seq;
	unsigned failures;
	uint64_t conn_started_ns;
	bool have_conn;
	bool force_fresh;
	char *token;
	uint64_t token_read_ns;
	double sym_tokens;
	uint64_t sym_tokens_ns;
	uint64_t rnd_state;
	bool failing; /* last attempt failed: logged once until it recovers */
	bool mismatch_logged;
};

struct encoded {
	uint8_t *buf;
	size_t len;
};

/* Fills the fields every request has. The pointed-to values live in *st. */
struct req_common {
	uint32_t protocol_version;
	uint64_t seq;
	uint32_t frequency;
	stackrelay_v1_AgentInfo agent;
	pb_bytes_array_t *instance;
	uint8_t instance_buf[PB_BYTES_ARRAY_T_ALLOCSIZE(AGENT_SENDER_INSTANCE_ID_BYTES)];
	uint64_t drops[4];
	stackrelay_v1_DropCounters dc;
};

enum outcome {
	OUT_DONE,      /* a final answer: apply it */
	OUT_RETRY,     /* keep the data, wait, send again */
	OUT_REJECT,    /* the gateway refused the data for good */
	OUT_TOO_LARGE, /* 413: split */
};

struct attempt {
	enum outcome outcome;
	uint64_t wait_ns; /* for OUT_RETRY: at least this long (retry-after) */
	stackrelay_v1_PushResponse resp;
	bool have_resp;
	bool duplicate;
	char why[320]; /* for logs */
	long status;
};

/* sender.c */
uint64_t agent_sender_now_ns(void);

/* sender-request.c */
/*
 * Encodes req (plus table, an encoded SymbolTable, when not NULL) as a
 * request body, gzip-compressed when configured. Returns 0 or -errno.
 */
int agent_sender_encode(struct agent_sender *s, stackrelay_v1_PushRequest *req, const uint8_t *table, size_t table_len,
			struct encoded *ret);
/* Fills the fields every request has. The pointed-to values live in *st. */
void agent_sender_fill_common(struct agent_sender *s, stackrelay_v1_PushRequest *req, struct req_common *st,
			      uint64_t seq);
/* One attempt at a request; a says what came of it. */
void agent_sender_post(struct agent_sender *s, const struct encoded *enc, struct attempt *a);
void agent_sender_note_failure(struct agent_sender *s, const struct attempt *a, const char *what);
void agent_sender_note_success(struct agent_sender *s);
/* Schedules the next attempt after a failure. */
void agent_sender_schedule_retry(struct agent_sender *s, uint64_t wait_ns);
/*
 * Reads the bearer token file again when force, when there is no token yet,
 * or after AGENT_SENDER_TOKEN_REREAD_NS; a file that cannot be read keeps the
 * previous token.
 */
void agent_sender_reread_token(struct agent_sender *s, bool force);

/* sender-samples.c */
/* One attempt at the head. */
void agent_sender_send_head(struct agent_sender *s, struct chunk *h);

/* sender-queue.c */
uint64_t agent_sender_sample_count(const stackrelay_v1_Sample *sample);
void agent_sender_chunk_free(struct chunk *c);
/* Drops a chunk's samples, counted with why. Called with mu held. */
void agent_sender_drop_chunk_locked(struct agent_sender *s, struct chunk *c, enum drop_reason why);
/* Samples that left the buffer: accepted (why < 0) or dropped (enum drop_reason). Called with mu held. */
void agent_sender_count_gone_locked(struct agent_sender *s, uint64_t count, uint64_t bytes, int why);
/* Takes the oldest queued chunks (same frequency, never resends) as the next request. Called with mu held. */
struct chunk *agent_sender_form_head_locked(struct agent_sender *s);
/* Splits the head in two for a 413; a single sample too large is rejected. */
void agent_sender_split_head(struct agent_sender *s, struct chunk *h);
/* Flush ran out of time (or shutdown): everything still here is dropped, counted. Called with mu held. */
void agent_sender_drop_all_locked(struct agent_sender *s);

/* sender-symbols.c */
/* Remembers an ID for the exit probes; the ring forgets the oldest when full. */
void agent_sender_probe_remember(struct agent_sender *s, const pb_bytes_array_t *id);
/* Queues uploads for the wanted IDs not uploaded yet; returns how many were queued. */
size_t agent_sender_want_symbols(struct agent_sender *s, pb_bytes_array_t **ids, pb_size_t n);
/* One symbol table upload, for the first pending job. */
void agent_sender_send_symbols(struct agent_sender *s);
/* Ends the probe phase of this flush. Called with mu held. */
void agent_sender_probe_done_locked(struct agent_sender *s);
/* One probe round at flush (docs/agent-protocol.md, "Symbol probes"). */
void agent_sender_probe_round(struct agent_sender *s);
/* Refills the symbol upload rate limit's tokens. */
void agent_sender_refill_symbol_tokens(struct agent_sender *s, uint64_t now);

#endif
