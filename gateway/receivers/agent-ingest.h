/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The agent protocol's request processing, free of I/O (docs/agent-protocol.md,
 * "Gateway side"): gunzip a PushRequest body within a bound, decode it with
 * the zero-copy wire reader of common/pbwire.h (field numbers from the
 * nanopb-generated headers), intern its definitions into the gateway-wide stores, turn its
 * samples into a batch of the internal model and build the PushResponse
 * (encoded with nanopb). The receiver (agent.c) and the fuzz target
 * (tests/fuzz/fuzz-pushrequest.c) drive it.
 */
#ifndef SR_GW_AGENT_INGEST_H
#define SR_GW_AGENT_INGEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gw_stores;
struct gw_profiles;
struct gw_symbol_table;

/* The protocol version this gateway speaks (PushRequest.protocol_version). */
#define GW_AGENT_PROTOCOL_VERSION 1

/* Defaults of the limits below (also the receiver's config defaults). */
/* Room for the agent's largest symbol upload (16 MiB) plus the request around it. */
#define GW_AGENT_DEFAULT_MAX_REQUEST_BYTES (32ULL << 20)
/* Frames in one stack definition; more is a bad request (BPF collects at most 127 + 127). */
#define GW_AGENT_MAX_FRAMES_PER_STACK 1024
/* Modules in one kernel definition. */
#define GW_AGENT_MAX_KERNEL_MODULES 8192
/* Symbols in the symbol tables of one request (the agent sends at most 4 Mi per file). */
#define GW_AGENT_MAX_SYMBOLS_PER_REQUEST (4u << 20)
/* Wanted executable IDs listed in one response. */
#define GW_AGENT_MAX_WANTED_PER_RESPONSE 64
/* Longest string field kept (thread/process names, paths); longer ones are cut. */
#define GW_AGENT_MAX_STRING_BYTES 4096
/* IDs in one request's probe_symbols; more is a bad request (the agent sends at most 256). */
#define GW_AGENT_MAX_PROBES_PER_REQUEST 1024
/*
 * How long an executable or kernel in accepted samples counts as pending for
 * probes (PushResponse.symbols_pending) before the symbolize processor has
 * looked it up: the time its batch may take to reach the processor. Without
 * a symbolize processor it stops counting after this, once per ID.
 */
#define GW_AGENT_QUEUED_PENDING_NS (2ULL * 1000 * 1000 * 1000)
/*
 * How long the agent asked for a wanted symbol table (PushResponse.wanted_symbols)
 * has to upload it before another agent's request may list it
 * (gw_executable__claim_ask). An agent uploads at 1 MiB/s after a burst of
 * 1 MiB (agent/sender.c), so a 16 MiB table, or one behind a dozen others
 * from the same agent, takes 15 to 20 s.
 */
#define GW_AGENT_WANTED_ASK_NS (30ULL * 1000 * 1000 * 1000)

/*
 * How long an agent asked for a table (wanted_symbols) may answer it: its
 * upload (a table, or an error) is accepted from that agent only, within this
 * time (docs/agent-protocol.md, "Who may upload"). Longer than
 * GW_AGENT_WANTED_ASK_NS: an agent's uploads queue behind each other at
 * 1 MiB/s and behind its retries; another agent asked after the claim
 * expired takes the ask over.
 */
#define GW_AGENT_ANSWER_NS (5ULL * 60 * 1000 * 1000 * 1000)

/* Why a symbol table in a request was not taken (counted per reason on /metrics). */
enum gw_upload_refusal {
	GW_UPLOAD_NOT_ASKED,	   /* a table this replica did not ask this agent for */
	GW_UPLOAD_ERROR_NOT_ASKED, /* an error-only table that answers no request of this agent */
	GW_UPLOAD_UNKNOWN,	   /* its executable or kernel is not stored (evicted meanwhile) */
	GW_UPLOAD_REFUSAL_MAX,
};

/* The metric label of each refusal. */
extern const char *const gw_upload_refusal_names[GW_UPLOAD_REFUSAL_MAX];

/*
 * Who sent a request, beyond what it says of itself: the receiver's
 * connection and what its TLS client certificate or bearer token proves.
 * NULL (tests, fuzzers): one anonymous connection, nothing bound.
 */
struct gw_ingest_peer {
	uint64_t conn_serial;  /* unique per connection: the identity of a request without instance_id */
	const char *principal; /* the certificate's subject or the token's node; NULL: none */
	/*
	 * bind: AgentInfo.node_name (host_name when it has none) must be one of
	 * node_names, else the request is refused (-EPERM, errbuf says why).
	 */
	bool bind;
	const char *const *node_names;
	size_t n_node_names;
};

/*
 * The identity an ask is recorded under (gw_executable__record_ask): the
 * agent's instance_id (any connection of that process, the same replica), or
 * the connection when the request has none, tied to the principal. Never 0.
 */
uint64_t gw_ingest_identity(const struct gw_ingest_peer *peer, const uint8_t *instance_id, size_t instance_id_len);

/* What the first look at a request found. */
struct gw_ingest_header {
	uint32_t protocol_version;
	uint64_t sequence;
	const uint8_t *instance_id; /* into the body */
	size_t instance_id_len;
	uint32_t frequency_hz;
	uint64_t n_samples;
	uint64_t table_bytes; /* encoded size of its symbol_tables */
};

/*
 * Walks the top level of a PushRequest. Returns 0, or -EBADMSG with errbuf
 * saying what is malformed and at which byte of the body.
 */
int gw_ingest_header(const uint8_t *body, size_t len, struct gw_ingest_header *ret, char *errbuf, size_t errsize);

/* Agent-side drop counters a request reported (PushRequest.drops). */
struct gw_ingest_agent_drops {
	uint64_t ring_buffer_full, stack_errors, buffer_overflow, process_unknown;
};

struct gw_ingest_result {
	/* Samples (counts) in the request, accepted into batch, refused for missing definitions. */
	uint64_t received, accepted, refused_missing;
	struct gw_profiles *batch; /* NULL when no sample was accepted */
	struct gw_symbol_table **tables;
	size_t n_tables, cap_tables;
	uint64_t missing_stacks, missing_executables, missing_kernels, missing_functions, wanted;
	/* Distinct IDs probed (PushRequest.probe_symbols), and how many of them were answered pending. */
	uint64_t probes, symbols_pending;
	uint64_t defined_stacks, defined_executables, defined_kernels, defined_functions;
	struct gw_ingest_agent_drops drops;
	/* Symbol tables not taken, by reason (the rest of the request is). */
	uint64_t tables_refused[GW_UPLOAD_REFUSAL_MAX];
	/* The executables and kernels this response asks for (claimed, referenced): gw_ingest_result_release_asks. */
	struct gw_executable **asked_exes;
	size_t n_asked_exes, cap_asked_exes;
	struct gw_kernel **asked_kernels;
	size_t n_asked_kernels, cap_asked_kernels;
	/* The encoded PushResponse (always set on success). */
	uint8_t *response;
	size_t response_len;
};

/*
 * Processes a decoded (plain) PushRequest body whose header was checked.
 * Returns 0 with *res filled (free with gw_ingest_result_free), or -EBADMSG
 * (errbuf says what) / -ENOMEM / -EPERM (the peer may not speak for the node
 * the request names; errbuf says which); then nothing is accepted (definitions already
 * interned stay: they are content-addressed and harmless).
 * epoch: a number unique per call (de-duplicates work within the request).
 */
int gw_ingest_process(struct gw_stores *stores, const struct gw_ingest_peer *peer, const uint8_t *body, size_t len,
		      uint64_t epoch, struct gw_ingest_result *res, char *errbuf, size_t errsize);
/*
 * The same for a resend answered from the de-duplication window: only the
 * definitions and symbol tables are taken (samples were counted the first
 * time); res->response is not meaningful.
 */
int gw_ingest_process_definitions(struct gw_stores *stores, const struct gw_ingest_peer *peer, const uint8_t *body,
				  size_t len, uint64_t epoch, struct gw_ingest_result *res, char *errbuf,
				  size_t errsize);
void gw_ingest_result_free(struct gw_ingest_result *res);
/*
 * The response will not reach the agent (its stream is gone, or the request is
 * refused after processing): the IDs it listed in wanted_symbols may be asked
 * from the next agent at once instead of after GW_AGENT_WANTED_ASK_NS.
 */
void gw_ingest_result_release_asks(struct gw_ingest_result *res);

/*
 * Counts the samples (sum of counts) of a request without keeping anything.
 * 0, or -EBADMSG with errbuf saying what is malformed and at which byte (as
 * gw_ingest_process() does).
 */
int gw_ingest_count_samples(const uint8_t *body, size_t len, uint64_t *ret, char *errbuf, size_t errsize);

/*
 * Encodes a PushResponse carrying only protocol_version, retry_after_ms
 * (when not 0) and error (when not NULL). *ret malloc'd.
 */
int gw_ingest_encode_error(uint32_t retry_after_ms, const char *error, uint8_t **ret, size_t *ret_len);

#endif
