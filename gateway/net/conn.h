/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The gateway's connection layer (gateway/net/), under the `agent` and `otlp`
 * receivers and the telemetry server (gateway/telemetry/): a listener
 * (struct gw_listener) with its sockets on the libuv loop, TLS, HTTP/2
 * (nghttp2) and, for an owner whose gw_conn_ops asks, HTTP/1.1 on the same
 * port; requests handed up as streams, answers written back (HEAD without
 * its body). listener.c (the listening socket, TLS, bearer token, default
 * limits, shutdown and teardown), conn.c (connections, HTTP/2, TLS), h1.c
 * (HTTP/1.1, heads read by common/http1.h), respond.c (answers), tick.c
 * (timeouts). What the requests mean is the owner's: its gw_conn_ops, and
 * its own state around the listener (gw_listener first in it). The layer
 * sits on gateway/core/ (heap.h, metrics.h) and includes nothing above it.
 */
#ifndef SR_GW_NET_CONN_H
#define SR_GW_NET_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <nghttp2/nghttp2.h>
#include <openssl/ssl.h>
#include <uv.h>

#include "metrics.h"
#include "common/macro.h"

/* Bytes queued for writing on one connection before we stop reading from it. */
#define MAX_WRITE_PENDING (4u << 20)
/* A lingering close (conn.c): what is read and thrown away after the last answer, at most, and for how long. */
#define GW_NET_LINGER_BYTES (256u * 1024u)
#define GW_NET_LINGER_MS    2000
/* After shutdown started, connections get this long to finish their streams. */
#define SHUTDOWN_GRACE_MS 5000
/* The bearer token file is re-read when it changed, checked at most this often. */
#define TOKEN_RECHECK_MS 10000
#define MAX_TOKEN_BYTES	 16384

/* ---- configuration ---- */

/* tls.client_identity: what a client certificate proves (read by the receiver's ops->tls_accepted). */
struct gw_listener_identity_config {
	bool bind_node_name;
	char *node_name_template; /* "{node}" when unset */
};

struct gw_listener_tls_config {
	char *cert_file;
	char *key_file;
	char *client_ca_file;
	struct gw_listener_identity_config client_identity;
};

struct gw_listener_auth_config {
	char *bearer_token_file;
	char *node_tokens_file; /* lines "<node name> <token>": each token speaks for its node only */
};

struct gw_listener_keepalive_config {
	uint64_t interval_ns;
	uint64_t timeout_ns;
};

struct gw_listener_resets_config {
	uint64_t burst;
	uint64_t per_second;
};

struct gw_listener_config {
	char *endpoint;
	struct gw_listener_tls_config tls;
	struct gw_listener_auth_config auth;
	uint64_t max_connections;
	uint64_t max_connections_per_peer;
	uint64_t max_concurrent_streams;
	uint64_t max_header_list_bytes;
	uint64_t max_continuations;
	uint64_t max_pending_acks;
	struct gw_listener_resets_config stream_resets;
	uint64_t max_request_bytes;
	uint64_t max_inflight_bytes;
	uint64_t header_timeout_ns;
	uint64_t request_timeout_ns;
	uint64_t idle_timeout_ns;
	struct gw_listener_keepalive_config keepalive;
	/* HTTP/1.1 request heads (net/h1.c): bytes and header lines; 0: GW_H1_MAX_HEAD_BYTES, GW_H1_MAX_HEADERS. */
	uint64_t max_head_bytes;
	uint64_t max_head_lines;
};

/*
 * A listener's limits by default, as a config file writes them: the `agent`
 * receiver's schema shows them all (docs/configuration.md), the `otlp`
 * receiver's schema those it has keys for, and gw_listener_config_defaults()
 * reads them for an owner that has no key for a limit.
 */
#define GW_LISTENER_DEF_MAX_CONNECTIONS		 "4096"
#define GW_LISTENER_DEF_MAX_CONNECTIONS_PER_PEER "0"
#define GW_LISTENER_DEF_MAX_CONCURRENT_STREAMS	 "32"
#define GW_LISTENER_DEF_MAX_HEADER_LIST_BYTES	 "16KiB"
#define GW_LISTENER_DEF_MAX_CONTINUATIONS	 "8"
#define GW_LISTENER_DEF_MAX_PENDING_ACKS	 "1000"
#define GW_LISTENER_DEF_RESETS_BURST		 "1000"
#define GW_LISTENER_DEF_RESETS_PER_SECOND	 "33"
#define GW_LISTENER_DEF_MAX_REQUEST_BYTES	 "32MiB"
#define GW_LISTENER_DEF_MAX_INFLIGHT_BYTES	 "256MiB"
#define GW_LISTENER_DEF_HEADER_TIMEOUT		 "10s"
#define GW_LISTENER_DEF_REQUEST_TIMEOUT		 "60s"
#define GW_LISTENER_DEF_IDLE_TIMEOUT		 "5m"
#define GW_LISTENER_DEF_KEEPALIVE_INTERVAL	 "30s"
#define GW_LISTENER_DEF_KEEPALIVE_TIMEOUT	 "10s"

/* ---- state ---- */

struct conn;

struct h2stream {
	int32_t id;
	struct conn *conn;
	struct h2stream *prev, *next;
	uint8_t *body;
	size_t len, cap;
	uint64_t started_ms;
	uint64_t started_ns; /* uv_hrtime() at its first header: request_duration_seconds */
	int error_status;    /* found while reading headers: answered at end of headers */
	const char *error_msg;
	bool gzip, auth_ok, responded, have_ctype;
	bool head_only;	       /* a HEAD request: its answer has no body (its Content-Length stays) */
	char *token_node;      /* auth.node_tokens_file: the node its token speaks for (malloc'd) */
	bool processing;       /* complete and being decoded: request_timeout no longer applies */
	uint64_t header_bytes; /* of the header list, counted as HTTP/2 does (name + value + 32 each) */
	uint64_t content_length;
	uint32_t proto_flags; /* what the receiver's ops->header found (its own bits) */
	/* response */
	uint8_t *resp;
	size_t resp_len, resp_off;
	char status_s[4], len_s[24], retry_s[24];
	char grpc_status[4]; /* gRPC: sent as trailers after the body */
	char *grpc_message;
	/* The otlp receiver's include_metadata: "name: value\n" lines (malloc'd), bounded by max_header_list_bytes. */
	char *metadata;
	size_t metadata_len, metadata_cap;
	void *proto_data; /* the receiver's own, for one request (malloc'd): freed with the stream */
};

struct conn {
	uv_tcp_t tcp;
	struct gw_listener *rx;
	struct conn *prev, *next;
	nghttp2_session *h2;
	SSL *ssl;
	BIO *rbio, *wbio;
	bool tls_done, got_headers, closing, reading_paused, goaway;
	uint64_t accepted_ms, last_recv_ms, ping_sent_ms;
	uint64_t last_request_ms; /* last stream opened or closed: idle_timeout counts from here */
	bool ping_outstanding;
	bool protocol_error; /* counted once in protocol_errors */
	size_t write_pending;
	unsigned n_streams;
	struct h2stream *streams;
	unsigned jobs;	    /* requests being decoded on the decode thread (they point here) */
	bool handle_closed; /* the socket is closed; freed when jobs reaches 0 */
	char peer[64];
	char peer_addr[64]; /* the peer's IP address as text, without the port (gw_resource.peer_addr) */
	/* ops->http1: the first bytes tell HTTP/2 (its preface) from HTTP/1.1 */
	bool sniffing;
	uint8_t sniff[4];
	size_t sniff_len;
	struct gw_h1 *h1; /* HTTP/1.1 connection (net/h1.c), NULL for HTTP/2 */
	/* The lingering close after the last HTTP/1.1 answer (conn.c): FIN sent, what comes is thrown away. */
	uv_shutdown_t linger_req;
	bool lingering;
	uint64_t linger_started_ms, lingered_bytes;
	uint8_t peer_ip[16]; /* the peer's address (4 or 16 bytes) for max_connections_per_peer */
	uint8_t peer_ip_len;
	uint64_t serial; /* unique per receiver: the identity of an agent that sends no instance_id */
	/* What the client certificate proves (tls.client_identity, set by ops->tls_accepted), freed with the conn. */
	char *principal;   /* its subject CN, or NULL */
	char **node_names; /* the nodes it may speak for */
	size_t n_node_names;
};

struct wreq {
	uv_write_t req;
	struct conn *c;
	size_t len;
	uint8_t data[];
};

/* What the connection layer counts; a receiver counts the rest in its own state. */
struct gw_listener_stats {
	uint64_t connections_accepted, connections_refused, connections_refused_peer, connections_evicted, tls_failures,
		header_timeouts, keepalive_timeouts, idle_closes, protocol_errors, streams_reset, headers_too_large;
	uint64_t requests[8]; /* by status class below */
	uint64_t auth_failures;
};

enum { ST_200, ST_400, ST_401, ST_403, ST_404, ST_405, ST_408, ST_413, ST_415, ST_429, ST_431, ST_503, ST_500 };
static const int status_codes[] = { 200, 400, 401, 403, 404, 405, 408, 413, 415, 429, 431, 503, 500 };

/*
 * The protocol a listener serves (the `agent` and `otlp` receivers, the
 * telemetry server): set in gw_listener.ops. The owner's cfg supplies the
 * limits, TLS and token; its state is around the listener (gw_listener first
 * in it).
 */
struct gw_conn_ops {
	/* Every request header but content-length and authorization (:method and :path included). */
	void (*header)(struct h2stream *s, const uint8_t *name, size_t namelen, const uint8_t *value, size_t valuelen);
	/* A complete request: s->body[0..s->len). */
	void (*request)(struct h2stream *s);
	/* Answers s with an error (already logged). */
	void (*error)(struct h2stream *s, int status, uint32_t retry_after_ms, const char *msg);
	/* HTTP/1.1 is served too, on the same port (told apart by the HTTP/2 client preface). */
	bool http1;
	/* HTTP/1.1: one request per connection, every answer says `Connection: close` (the telemetry server). */
	bool http1_close;
	/* What a request without a Content-Type is told (415, naming the types taken); NULL: none is needed. */
	const char *content_type_msg;
	/* Log prefix of the receiver ("receiver/otlp"). */
	const char *component;
	/*
	 * What a body over cfg->max_request_bytes is told, naming the receiver's
	 * key; NULL: "content-length exceeds max_request_bytes" for an announced
	 * length, "request body exceeds max_request_bytes" for a body.
	 */
	const char *too_large_msg;
	/* Optional: after the TLS handshake (c->principal, c->node_names); < 0 closes the connection. */
	int (*tls_accepted)(struct conn *c);
	/* Optional, with auth.node_tokens_file: the node an Authorization value's token speaks for (malloc'd), or NULL. */
	char *(*node_token)(struct gw_listener *rx, const uint8_t *value, size_t len);
	/* Optional: frees the receiver's state around rx, just before rx is freed. */
	void (*release)(struct gw_listener *rx);
};

struct gw_listener {
	struct gw_component *c;
	const struct gw_conn_ops *ops;
	void *owner;
	const struct gw_listener_config *cfg;
	uv_loop_t *loop;
	uv_tcp_t listener;
	uv_timer_t tick;
	bool listening, tick_init, shutting_down, destroyed;
	int handles; /* open handles (listener, tick, connections): freed at 0 after destroy */
	SSL_CTX *ssl_ctx;
	nghttp2_session_callbacks *cbs;
	nghttp2_option *h2opt; /* the limits nghttp2 enforces itself (resets, CONTINUATIONs, ACKs) */
	struct conn *conns;
	unsigned n_conns;
	uint64_t inflight_bytes;
	char address[64];
	/* bearer token */
	char *token;
	size_t token_len;
	struct timespec token_mtime;
	uint64_t token_checked_ms;
	uint64_t conn_serial; /* the last conn.serial given */
	uint64_t shutdown_started_ms;
	uint64_t last_warn_ms, last_tls_warn_ms;
	/* The receiver's periodic work, after the connections' (gw_net_on_tick); NULL: none. */
	void (*on_tick)(struct gw_listener *rx, uint64_t now_ms);
	void (*done)(struct gw_component *c);
	struct gw_listener_stats st;
	uint64_t statuses[SR_ARRAY_SIZE(status_codes)];
	/* First header to response, every answered request (on the loop). */
	struct gw_duration_histogram request_duration;
	/* Requests the receiver processes off the loop (they point at their connections): shutdown waits for them. */
	unsigned jobs;
	uint8_t readbuf[64 * 1024];
};

/* A header name is want (exactly: names arrive lowercase). */
static inline bool gw_net_name_is(const uint8_t *name, size_t namelen, const char *want)
{
	return namelen == strlen(want) && memcmp(name, want, namelen) == 0;
}

/* A header value is want, case-insensitive. */
static inline bool gw_net_value_is(const uint8_t *v, size_t len, const char *want)
{
	return len == strlen(want) && strncasecmp((const char *)v, want, len) == 0;
}

static inline uint64_t gw_net_now_ms(struct gw_listener *rx)
{
	return uv_now(rx->loop);
}

/* net/listener.c: a listener's life (rx->c, cfg, ops and loop set by its receiver). */
/* Every limit of cfg at its GW_LISTENER_DEF_* (endpoint, TLS and auth left alone); 0, or -EINVAL for a bad default. */
int gw_listener_config_defaults(struct gw_listener_config *cfg);
/* TLS from cfg->tls (cert_file set); 0 or -EINVAL, logged. */
int gw_listener_tls_setup(struct gw_listener *rx);
/* Reads auth.bearer_token_file: 0, or -errno with err saying what. */
int gw_listener_token_load(struct gw_listener *rx, char *err, size_t errsize);
/* Re-reads the token file when it changed (at most every TOKEN_RECHECK_MS). */
void gw_listener_token_recheck(struct gw_listener *rx);
/* An `Authorization: Bearer <token>` value with the token. */
bool gw_listener_token_ok(struct gw_listener *rx, const uint8_t *value, size_t len);
/* The listening socket and the tick of rx (TLS and token already loaded). */
int gw_listener_listen(struct gw_listener *rx);
/* Stops listening and lets connections finish; rx->done is called when they have. */
void gw_listener_shutdown(struct gw_listener *rx);
/* Closes everything of rx; it is freed when its last handle is closed. */
void gw_listener_destroy(struct gw_listener *rx);
/* uv_close callback of a receiver's own handle on rx (data: rx) counted in rx->handles. */
void gw_listener_handle_closed(uv_handle_t *h);
void gw_listener_maybe_free(struct gw_listener *rx);
void gw_listener_maybe_done(struct gw_listener *rx);

/* net/tick.c: the listener's periodic checks (timeouts of every connection), then its on_tick. */
void gw_net_on_tick(uv_timer_t *t);

/* net/conn.c: connections, HTTP/2 and TLS; net/respond.c: responses. */
void gw_net_h2_callbacks(nghttp2_session_callbacks *cbs);
void gw_net_on_connection(uv_stream_t *server, int status);
void gw_net_conn_flush(struct conn *c);
void gw_net_conn_close(struct conn *c);
void gw_net_conn_free(struct conn *c);
void gw_net_conn_goaway(struct conn *c);
/* Answers a stream; takes body (malloc'd). */
void gw_net_respond(struct h2stream *s, int status, uint8_t *body, size_t len, uint32_t retry_after_ms);
void gw_net_respond_error(struct h2stream *s, int status, uint32_t retry_after_ms, const char *fmt, ...)
	SR_PRINTF(4, 5);
/*
 * The general answer: content_type; grpc_status (non-NULL: gRPC, with
 * grpc-status/grpc-message trailers after the body, or in the headers when
 * body is NULL: a trailers-only answer). Takes body.
 */
void gw_net_respond_ex(struct h2stream *s, int status, const char *content_type, uint8_t *body, size_t len,
		       uint32_t retry_after_ms, const char *grpc_status, const char *grpc_message);
/* A request's parts as any protocol (HTTP/2 callbacks, net/h1.c) delivers them. */
struct h2stream *gw_net_stream_new(struct conn *c, int32_t id);
void gw_net_stream_free(struct h2stream *s);
void gw_net_stream_header(struct conn *c, struct h2stream *s, const uint8_t *name, size_t namelen, const uint8_t *value,
			  size_t valuelen);
void gw_net_stream_headers_done(struct conn *c, struct h2stream *s, bool end_stream);
void gw_net_stream_data(struct conn *c, struct h2stream *s, const uint8_t *data, size_t len);
/* The request body is complete. */
void gw_net_stream_end(struct h2stream *s);
/* The stream s of id is still open (its client still waits for the answer). */
bool gw_net_stream_alive(struct conn *c, int32_t id, const struct h2stream *s);
/* Records a request error found while reading headers (answered when they are complete). */
void gw_net_stream_error(struct h2stream *s, int status, const char *msg);

#endif
