/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the files of the `agent` receiver share, and nothing else includes:
 * agent.c (the component: config, token, metrics, lifecycle, and the
 * listener's setup the otlp receiver shares), agent-identity.c (what a
 * certificate or token proves) and agent-request.c (a complete request:
 * decoding, on the loop or the decode thread, and its answer). The
 * connections under it are the gateway's connection layer (gateway/net/conn.h).
 */
#ifndef SR_GW_AGENT_PRIVATE_H
#define SR_GW_AGENT_PRIVATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "agent-ingest.h"
#include "common/macro.h"
#include "gateway/net/conn.h"

#define COMPONENT "receiver/agent"
#define PUSH_PATH "/stackrelay.v1.Ingest/Push"
/*
 * Request bodies up to this many bytes (as received) are decoded on the loop
 * (a few milliseconds at most); larger ones, e.g. symbol-table uploads of
 * many MiB, go to the receiver's decode thread so they never stall the
 * network I/O of other agents. (Not libuv's pool: symbolization fills it.)
 */
#define GW_AGENT_INLINE_MAX_BYTES (256u * 1024u)
/*
 * A gzip body's cost is its decompressed size (up to max_request_bytes, a
 * thousand times the wire size for a gzip bomb): only small ones are
 * decoded on the loop.
 */
#define GW_AGENT_INLINE_MAX_GZIP_BYTES (16u * 1024u)

/*
 * One request's body and what decoding it produced. Made on the loop; the
 * CPU-heavy part (work_run: gunzip, decoding, definitions, building the batch)
 * runs on the loop for small bodies and on the decode thread for large ones;
 * work_finish (accounting, de-duplication, admission, the answer, emitting)
 * always runs on the loop.
 */
struct work {
	struct work *next;
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
/* After the TLS handshake: the certificate's CN and DNS names, through tls.client_identity's template. */
int gw_agent_conn_identity(struct conn *c);
void gw_agent_conn_identity_free(struct conn *c);
/* Fills w->peer from its connection and stream (takes s->token_node). */
void gw_agent_work_peer(struct work *w, struct conn *c, struct h2stream *s);

/* agent-request.c: a complete request, decoded on the loop or the decode thread. */
void gw_agent_process_request(struct h2stream *s);
void *gw_agent_decode_thread(void *arg);
void gw_agent_on_decoded(uv_async_t *a);
/* A job back from the decode thread; discard: the receiver is going away. */
void gw_agent_job_returned(struct work *w, bool discard);

#endif
