/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the files of the `agent` receiver share, and nothing else includes:
 * agent.c (the component: config, metrics, lifecycle), agent-identity.c
 * (what a certificate or token proves) and agent-request.c (the protocol's
 * headers, a complete request: decoding, on the loop or the decode thread,
 * and its answer). The connections under it are the gateway's connection
 * layer (gateway/net/conn.h), served with gw_agent_conn_ops.
 */
#ifndef SR_GW_AGENT_PRIVATE_H
#define SR_GW_AGENT_PRIVATE_H

#include <stdbool.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <uv.h>

#include "agent-ingest.h"
#include "common/macro.h"
#include "decode-thread.h"
#include "gateway/net/conn.h"

#define COMPONENT "receiver/agent"
#define PUSH_PATH "/stackrelay.v1.Ingest/Push"

/* What the agent receiver counts beyond the connection layer (gw_listener_stats). */
struct gw_agent_stats {
	uint64_t bytes_wire, bytes_plain, duplicates, duplicate_samples, symbol_tables;
	uint64_t symbol_tables_deferred; /* uploads answered 429: the symbolizer had max_pending_uploads */
	uint64_t missing_stacks, missing_executables, missing_kernels, missing_functions, wanted;
	uint64_t probes, probes_pending;
	uint64_t tables_refused[GW_UPLOAD_REFUSAL_MAX]; /* symbol tables not taken, by reason */
	uint64_t identity_refusals; /* requests naming a node their certificate or token does not bind */
	struct gw_ingest_agent_drops agent_drops;
};

/* The receiver's state: its listener (first: the connection layer frees the whole struct with free(rx)) and its own. */
struct gw_agent_rx {
	struct gw_listener rx;
	struct gw_dedupe *dedupe;
	/* auth.node_tokens_file (agent-identity.c) */
	struct agent_node_token *node_tokens;
	size_t n_node_tokens;
	struct timespec node_tokens_mtime;
	uint64_t node_tokens_checked_ms;
	/* watch_stores() (agent.c, the listener's on_tick): per store watched, the figures at the start of its window, and its last warning. */
	struct {
		uint64_t at_ms, missing, evictions, warned_ms;
	} thrash[3];
	struct gw_agent_stats st;
	/* The decode thread: large requests are decoded off the loop (see process_request in agent-request.c); rx.jobs counts them. */
	struct gw_decode_thread dec;
};

static inline struct gw_agent_rx *agent_of(struct gw_listener *rx)
{
	return SR_CONTAINER_OF(rx, struct gw_agent_rx, rx);
}

/*
 * One request's body and what decoding it produced. Made on the loop; the
 * CPU-heavy part (work_run: gunzip, decoding, definitions, building the batch)
 * runs on the loop for small bodies and on the decode thread for large ones;
 * work_finish (accounting, de-duplication, admission, the answer, emitting)
 * always runs on the loop.
 */
struct work {
	struct gw_decode_job job; /* on the decode thread's lists */
	struct gw_listener *rx;
	struct conn *conn;
	struct h2stream *s; /* still the stream's only if nghttp2 says so at finish */
	int32_t stream_id;
	uint8_t *body;
	size_t len, cap;
	bool gzip;
	uint64_t epoch;
	uint64_t max_request_bytes;
	struct gw_stores *stores;
	/* The pipeline was refusing when it came (gw_runtime__admits): only counted, not processed. */
	bool closed;
	/* results */
	int status; /* 0: processed into res; otherwise answer status with msg */
	uint32_t retry_after_ms;
	bool upload_deferred;	  /* a 429: the symbolize processor had max_pending_uploads to add */
	uint64_t upload_reserved; /* bytes counted as pending since admission, until work_free */
	char msg[512];
	uint8_t *plain;
	size_t plain_len;
	struct gw_ingest_header h;
	struct gw_ingest_result res;
	/* Who sent it: the connection's identity and what its certificate or token binds (agent-identity.c). */
	struct gw_ingest_peer peer;
	char *token_node; /* taken from the stream; peer.node_names may point at it */
};

/* agent-identity.c: what a client certificate or a node token proves. */
/* Reads auth.node_tokens_file: 0, or -errno with err saying what and on which line. */
int gw_agent_node_tokens_load(struct gw_listener *rx, char *err, size_t errsize);
void gw_agent_node_tokens_free(struct gw_listener *rx);
/* Re-reads the file when it changed (at most every 10 s). */
void gw_agent_node_tokens_recheck(struct gw_listener *rx);
/* The node an `Authorization: Bearer <token>` value speaks for (a copy), or NULL: no such token. */
char *gw_agent_node_token_lookup(struct gw_listener *rx, const uint8_t *value, size_t len);
/* gw_agent_conn_ops.tls_accepted: the certificate's CN and DNS names, through tls.client_identity's template. */
int gw_agent_conn_identity(struct conn *c);
/* Fills w->peer from its connection and stream (takes s->token_node). */
void gw_agent_work_peer(struct work *w, struct conn *c, struct h2stream *s);

/* agent-request.c: the protocol on the connections (headers, requests, errors), and a complete request, decoded on the loop or the decode thread. */
extern const struct gw_conn_ops gw_agent_conn_ops;
/* agent.c: gw_agent_conn_ops.release. */
void gw_agent_release(struct gw_listener *rx);
/* The decode thread's gw_decode_thread.run and .returned (discard: the receiver is going away). */
void gw_agent_job_run(struct gw_decode_job *j);
void gw_agent_job_returned(struct gw_decode_job *j, bool discard);

#endif
