/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sender's parts below its state (sender-private.h): its limits, the ID
 * sets, the definitions one request carries, the transport and the test
 * hooks. Shared by sender.c and the sender-*.c files beside it (queue,
 * protocol logic, thread), sender-http.c (libcurl transport) and the unit
 * tests and test drivers, which replace the transport with canned responses.
 */
#ifndef SR_AGENT_SENDER_PARTS_PRIVATE_H
#define SR_AGENT_SENDER_PARTS_PRIVATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent.h"
#include "common/htab.h"

struct agent_gateway_config;

/*
 * Limits of the sender that are not (yet) configuration keys; each is
 * documented in docs/agent-protocol.md ("Limits").
 */
/* Encoded sample bytes in one request; definitions come on top. */
#define AGENT_SENDER_REQUEST_SAMPLE_BYTES (1024 * 1024)
/* A submitted batch is cut into chunks of at most this many bytes, the unit drop-oldest works in. */
#define AGENT_SENDER_CHUNK_BYTES (256 * 1024)
/* A response body larger than this is a protocol error. */
#define AGENT_SENDER_MAX_RESPONSE_BYTES (16 * 1024 * 1024)
/* Backoff after failures: initial, doubling per failure, capped; each wait drawn uniformly from [d/2, d]. */
#define AGENT_SENDER_BACKOFF_INITIAL_NS (500ULL * 1000 * 1000)
#define AGENT_SENDER_BACKOFF_MAX_NS	(30ULL * 1000 * 1000 * 1000)
/* A retry-after longer than this is capped to it. */
#define AGENT_SENDER_RETRY_AFTER_MAX_NS (300ULL * 1000 * 1000 * 1000)
/* Samples resent this many times for missing definitions and still missing are dropped (reason rejected). */
#define AGENT_SENDER_MAX_MISSING_ROUNDS 3
/* IDs remembered as sent on the current connection; when full the memory starts over. */
#define AGENT_SENDER_SENT_SET_MAX (256 * 1024)
/* Executable IDs remembered for symbol upload (pending and done). */
#define AGENT_SENDER_SYMBOL_SET_MAX (64 * 1024)
/*
 * A table wanted again is uploaded again once gateway.symbol_reupload_after
 * has passed since its last upload, then after twice that, and so on, but at
 * least once per this (docs/agent-protocol.md, "Symbol upload").
 */
#define AGENT_SENDER_SYMBOL_REUPLOAD_MAX_NS (3600ULL * 1000 * 1000 * 1000)
/*
 * Symbol probes at flush (docs/agent-protocol.md, "Symbol probes"). IDs
 * remembered for them: the most recent distinct executables and kernels the
 * gateway was sent definitions of (older ones had later windows' responses).
 */
#define AGENT_SENDER_PROBE_IDS_MAX 4096
/* IDs in one probe request (the gateway accepts up to 1024). */
#define AGENT_SENDER_PROBES_PER_REQUEST 256
/* Wait before the first round (the gateway looks at the last window meanwhile), and after new uploads. */
#define AGENT_SENDER_PROBE_FIRST_WAIT_NS (200ULL * 1000 * 1000)
/* While answers say "pending" the wait doubles up to this; all of it within gateway.flush_timeout. */
#define AGENT_SENDER_PROBE_MAX_WAIT_NS (2ULL * 1000 * 1000 * 1000)
/* Symbol uploads are rate-limited by a token bucket refilled at this many bytes per second. */
#define AGENT_SENDER_SYMBOL_RATE_BYTES (1024 * 1024)
/* The bearer token file is re-read this often (and after every 401). */
#define AGENT_SENDER_TOKEN_REREAD_NS (60ULL * 1000 * 1000 * 1000)
#define AGENT_SENDER_MAX_TOKEN_BYTES 16384
/* Length of AgentInfo.instance_id. */
#define AGENT_SENDER_INSTANCE_ID_BYTES 16

#define AGENT_PROTOCOL_VERSION 1
#define AGENT_PUSH_PATH	       "/stackrelay.v1.Ingest/Push"

/* Key domains of the ID sets: equal bytes of different kinds are different keys. */
enum agent_id_kind {
	AGENT_ID_STACK = 1,
	AGENT_ID_EXECUTABLE = 2,
	AGENT_ID_KERNEL = 3,
	AGENT_ID_SYMBOLS = 4,
	AGENT_ID_FUNCTION = 5,
};

/*
 * A set of IDs by their 128-bit hash, on the tree's table (common/htab.h):
 * the slot is the key, hi its hash. A false "present" would only make the
 * agent skip a definition the gateway then reports missing, so hashes are
 * enough.
 */
struct agent_idkey {
	uint64_t hi, lo; /* hi has its top bit set, so it is a hash the table stores as it is */
};

struct agent_idset {
	struct sr_htab t; /* of agent_idkey, or of agent_idkey and its value; all zero: empty */
	size_t max;
	/* With values (set before the first add): one uint64_t per ID, 0 when added. */
	bool with_values;
};

/* sender-idset.c */
struct agent_idkey agent_idkey_of(enum agent_id_kind kind, const uint8_t *id, size_t len);
void agent_idset_clear(struct agent_idset *set);
void agent_idset_done(struct agent_idset *set);
bool agent_idset_has_key(const struct agent_idset *set, struct agent_idkey k);
bool agent_idset_has(const struct agent_idset *set, enum agent_id_kind kind, const uint8_t *id, size_t len);
/* Returns 1 when added, 0 when present, -ENOMEM. A set at its maximum starts over (see agent_idset.max). */
int agent_idset_add_key(struct agent_idset *set, struct agent_idkey k);
int agent_idset_add(struct agent_idset *set, enum agent_id_kind kind, const uint8_t *id, size_t len);
void agent_idset_del(struct agent_idset *set, enum agent_id_kind kind, const uint8_t *id, size_t len);
/* The IDs one by one: for (size_t i = 0; (k = agent_idset_next(set, &i));) — no adds meanwhile. */
const struct agent_idkey *agent_idset_next(const struct agent_idset *set, size_t *iter);
/* How many IDs the set holds. */
static inline size_t agent_idset_count(const struct agent_idset *set)
{
	return set->t.n;
}
/* The heap its table holds (slots, live or not). */
static inline size_t agent_idset_bytes(const struct agent_idset *set)
{
	return set->t.cap * set->t.elem;
}
/* The value of a present ID in a set with_values; NULL when absent (or the set has no values). */
uint64_t *agent_idset_value(const struct agent_idset *set, enum agent_id_kind kind, const uint8_t *id, size_t len);

/* sender-defs.c: the definitions one request carries. */
struct agent_defs {
	stackrelay_v1_StackDef *stacks;
	size_t n_stacks, cap_stacks;
	stackrelay_v1_ExecutableDef *executables;
	size_t n_executables, cap_executables;
	stackrelay_v1_KernelDef *kernels;
	size_t n_kernels, cap_kernels;
	stackrelay_v1_FunctionDef *functions;
	size_t n_functions, cap_functions;
	struct agent_idset local; /* IDs defined in this request */
	/*
	 * Resends after "missing" carry every definition their samples need: a
	 * gateway that lost a stack most likely lost its executables too (restart,
	 * another replica), and one round trip is cheaper than three.
	 */
	bool all;
};

void agent_defs_free(struct agent_defs *d);
/*
 * Adds the definitions one sample needs that sent (the connection) has not
 * seen: its stack, the stack's executables, functions and kernel, the
 * sample's kernel. -ENOENT (or another error) when the store cannot provide
 * one: the sample is dropped, and d is as before.
 */
int agent_defs_add_sample(const struct agent_idset *sent, struct agent_store *store, struct agent_defs *d,
			  const stackrelay_v1_Sample *sample);
/*
 * Does a sample reference one of the missing IDs? check_frames: look at the
 * stack's frames too (missing executables, kernels, functions). 1, 0 or -errno.
 */
int agent_defs_sample_missing(struct agent_store *store, const stackrelay_v1_Sample *sample,
			      const struct agent_idset *missing, bool check_frames);

struct agent_sender_http_request {
	const uint8_t *body;
	size_t len;
	bool gzip;	       /* body is gzip-compressed */
	const char *token;     /* bearer token or NULL */
	bool fresh_connection; /* open a new connection (max_connection_age) */
	/* Polled during the transfer; true aborts it (flush deadline, shutdown). */
	bool (*should_abort)(void *ctx);
	void *abort_ctx;
};

struct agent_sender_http_result {
	long status;   /* HTTP status; 0 when no response arrived */
	uint8_t *body; /* response body, malloc()ed, or NULL */
	size_t body_len;
	uint64_t retry_after_ns; /* Retry-After header, 0 when absent */
	bool new_connection;	 /* the transfer opened a new connection */
	char error[256];	 /* what failed when status is 0 */
};

/*
 * How requests reach the gateway. post() returns 0 when a response arrived
 * (any status) and -errno when none did (ret->error says why); either way the
 * caller frees ret->body.
 */
struct agent_sender_transport {
	void *userdata;
	int (*post)(void *userdata, const struct agent_sender_http_request *req, struct agent_sender_http_result *ret);
	void (*free)(void *userdata);
};

/* libcurl transport for cfg (sender-http.c). Returns 0 or -errno; on -EINVAL *ret_error says what is wrong. */
int agent_sender_http_new(const struct agent_gateway_config *cfg, struct agent_sender_transport *ret, char *ret_error,
			  size_t error_size);

/* Builds a sender on any transport (the sender takes ownership of t, also on failure). */
struct agent_sender *agent_sender_new_with_transport(const struct agent_config *cfg, struct agent_store *store,
						     struct agent_sender_transport *t);
/* Tests: shorter backoff so failure paths run fast. */
void agent_sender__set_backoff(struct agent_sender *s, uint64_t initial_ns, uint64_t max_ns);
/* Tests: shorter waits between exit symbol probe rounds (AGENT_SENDER_PROBE_*_WAIT_NS). */
void agent_sender__set_probe_wait(struct agent_sender *s, uint64_t first_ns, uint64_t max_ns);
/* Tests: read kernel symbols from path instead of /proc/kallsyms (kept, not copied; set before submitting). */
void agent_sender__set_kallsyms_path(struct agent_sender *s, const char *path);

/* Delay before attempt after `failures` consecutive failures (≥ 1): uniform in [d/2, d], d = min(initial·2^(failures-1), max). */
uint64_t agent_sender_backoff_ns(unsigned failures, uint64_t initial_ns, uint64_t max_ns, uint64_t rnd);
/* Delay for a retry-after of ra: uniform in [ra, ra·1.25], capped at AGENT_SENDER_RETRY_AFTER_MAX_NS. */
uint64_t agent_sender_retry_after_ns(uint64_t ra_ns, uint64_t rnd);
/* Approximate bytes one sample holds in the buffer. */
uint64_t agent_sender_sample_bytes(const stackrelay_v1_Sample *sample);

/* gzip (RFC 1952) of in; returns 0 or -errno, *ret is malloc()ed. */
int agent_sender_gzip(const uint8_t *in, size_t len, uint8_t **ret, size_t *ret_len);

#endif
