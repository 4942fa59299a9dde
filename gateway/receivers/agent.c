/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Receiver `agent`: the stackrelay agent protocol (docs/agent-protocol.md)
 * over HTTP/2 (nghttp2) on the gateway's libuv loop; plain TCP with prior
 * knowledge (h2c), or TLS via OpenSSL memory BIOs with ALPN "h2", optionally
 * requiring client certificates (mTLS) and/or a bearer token.
 *
 * One request = one stream: POST /stackrelay.v1.Ingest/Push with a PushRequest
 * body (optionally gzip). The body is buffered up to max_request_bytes (also
 * after decompression), then processed synchronously on the loop by
 * agent-ingest.c and answered; the batch goes into the pipelines with
 * gw_component_emit(). Everything a client controls is bounded: connections,
 * streams per connection, request bytes per stream and in flight overall, the
 * time to send headers, idle time, and unanswered PINGs.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <nghttp2/nghttp2.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <uv.h>

#include "gzip.h"
#include "accounting.h"
#include "agent-dedupe.h"
#include "agent-ingest.h"
#include "agent.h"
#include "config.h"
#include "log.h"
#include "macro.h"
#include "metrics.h"
#include "model.h"
#include "netaddr.h"
#include "runtime.h"
#include "units.h"

#define COMPONENT "receiver/agent"
#define PUSH_PATH "/stackrelay.v1.Ingest/Push"
/* Bytes queued for writing on one connection before we stop reading from it. */
#define MAX_WRITE_PENDING (4u << 20)
/* After shutdown started, connections get this long to finish their streams. */
#define SHUTDOWN_GRACE_MS 5000
/* The bearer token file is re-read when it changed, checked at most this often. */
#define TOKEN_RECHECK_MS 10000
#define MAX_TOKEN_BYTES	 16384
/*
 * Request bodies up to this many bytes (as received) are decoded on the loop
 * (a few milliseconds at most); larger ones, e.g. symbol-table uploads of
 * many MiB, go to the receiver's decode thread so they never stall the
 * network I/O of other agents. (Not libuv's pool: symbolization fills it.)
 */
#define GW_AGENT_INLINE_MAX_BYTES (256u * 1024u)

/* ---- configuration ---- */

struct agent_tls_config {
	char *cert_file;
	char *key_file;
	char *client_ca_file;
};

struct agent_auth_config {
	char *bearer_token_file;
};

struct agent_keepalive_config {
	uint64_t interval_ns;
	uint64_t timeout_ns;
};

struct agent_dedupe_config {
	uint64_t max_entries;
	uint64_t max_bytes;
};

struct agent_stores_config {
	uint64_t executables;
	uint64_t kernels;
	uint64_t locations;
	uint64_t stacks;
};

struct agent_config {
	char *endpoint;
	struct agent_tls_config tls;
	struct agent_auth_config auth;
	uint64_t max_connections;
	uint64_t max_concurrent_streams;
	uint64_t max_request_bytes;
	uint64_t max_inflight_bytes;
	uint64_t header_timeout_ns;
	uint64_t request_timeout_ns;
	uint64_t idle_timeout_ns;
	struct agent_keepalive_config keepalive;
	struct agent_dedupe_config dedupe;
	struct agent_stores_config stores;
};

static const struct sr_field tls_fields[] = {
	SR_FIELD_STR("cert_file", struct agent_tls_config, cert_file,
		     .doc = "PEM server certificate (chain). With key_file, the receiver speaks TLS (ALPN h2) only."),
	SR_FIELD_STR("key_file", struct agent_tls_config, key_file, .doc = "PEM private key of cert_file."),
	SR_FIELD_STR("client_ca_file", struct agent_tls_config, client_ca_file,
		     .doc = "PEM CA bundle; when set, every agent must present a certificate it signed (mTLS)."),
	SR_FIELD_END,
};

static const struct sr_field auth_fields[] = {
	SR_FIELD_STR("bearer_token_file", struct agent_auth_config, bearer_token_file,
		     .doc = "File holding the token agents must send as `Authorization: Bearer <token>`; re-read "
			    "when it changes (checked every 10s)."),
	SR_FIELD_END,
};

static const struct sr_field keepalive_fields[] = {
	SR_FIELD_DUR("interval", struct agent_keepalive_config, interval_ns, .def = "30s",
		     .doc = "Send an HTTP/2 PING after this long without traffic from the agent; 0 disables."),
	SR_FIELD_DUR("timeout", struct agent_keepalive_config, timeout_ns, .def = "10s",
		     .doc = "Close the connection when a PING is not answered within this."),
	SR_FIELD_END,
};

static const struct sr_field dedupe_fields[] = {
	SR_FIELD_U64("max_entries", struct agent_dedupe_config, max_entries, .def = "65536", .min = 0, .max = 16777216,
		     .doc = "Responses remembered by (agent instance_id, sequence) so a resent request is not "
			    "counted twice on this replica; 0 disables."),
	SR_FIELD_BYTES("max_bytes", struct agent_dedupe_config, max_bytes, .def = "32MiB",
		       .doc = "Bytes the remembered responses may use."),
	SR_FIELD_END,
};

static const struct sr_field stores_fields[] = {
	SR_FIELD_BYTES("executables", struct agent_stores_config, executables, .def = "16MiB", .min = 65536,
		       .doc = "Bytes of executable definitions kept."),
	SR_FIELD_BYTES("kernels", struct agent_stores_config, kernels, .def = "4MiB", .min = 65536,
		       .doc = "Bytes of kernel definitions (with module lists) kept."),
	SR_FIELD_BYTES("locations", struct agent_stores_config, locations, .def = "256MiB", .min = 65536,
		       .doc = "Bytes of locations (executable + address, with their symbolized lines) kept."),
	SR_FIELD_BYTES("stacks", struct agent_stores_config, stacks, .def = "256MiB", .min = 65536,
		       .doc = "Bytes of stack definitions kept."),
	SR_FIELD_END,
};

static const struct sr_field agent_fields[] = {
	SR_FIELD_STR("endpoint", struct agent_config, endpoint, .def = "127.0.0.1:7480",
		     .doc = "HOST:PORT to listen on (0.0.0.0:7480 for every interface)."),
	SR_FIELD_MAP("tls", struct agent_config, tls, struct agent_tls_config, tls_fields,
		     .doc = "TLS; absent: plain HTTP/2 (h2c, prior knowledge)."),
	SR_FIELD_MAP("auth", struct agent_config, auth, struct agent_auth_config, auth_fields,
		     .doc = "Bearer-token authentication; absent: none."),
	SR_FIELD_U64("max_connections", struct agent_config, max_connections, .def = "4096", .min = 1, .max = 1000000,
		     .doc = "Open connections; more are closed at accept."),
	SR_FIELD_U64("max_concurrent_streams", struct agent_config, max_concurrent_streams, .def = "32", .min = 1,
		     .max = 1000, .doc = "Concurrent requests per connection (HTTP/2 SETTINGS)."),
	SR_FIELD_BYTES("max_request_bytes", struct agent_config, max_request_bytes, .def = "32MiB", .min = 1024,
		       .max = 1073741824,
		       .doc = "Largest request body, compressed and after gzip decompression; larger gets 413. The "
			      "default leaves room for the agent's largest symbol upload (16MiB)."),
	SR_FIELD_BYTES("max_inflight_bytes", struct agent_config, max_inflight_bytes, .def = "256MiB", .min = 1024,
		       .doc = "Request bytes buffered across all connections; beyond it requests get 503 with "
			      "retry_after_ms."),
	SR_FIELD_DUR("header_timeout", struct agent_config, header_timeout_ns, .def = "10s",
		     .doc = "Time from accept to the first complete request headers (TLS handshake included)."),
	SR_FIELD_DUR("request_timeout", struct agent_config, request_timeout_ns, .def = "60s",
		     .doc = "Time a request may take to arrive completely; slower ones get 408."),
	SR_FIELD_DUR("idle_timeout", struct agent_config, idle_timeout_ns, .def = "5m",
		     .doc = "A connection without requests for this long is closed with GOAWAY."),
	SR_FIELD_MAP("keepalive", struct agent_config, keepalive, struct agent_keepalive_config, keepalive_fields,
		     .doc = "HTTP/2 PING keepalive: finds dead agents behind NATs and load balancers."),
	SR_FIELD_MAP("dedupe", struct agent_config, dedupe, struct agent_dedupe_config, dedupe_fields,
		     .doc = "De-duplication of resent requests."),
	SR_FIELD_MAP("stores", struct agent_config, stores, struct agent_stores_config, stores_fields,
		     .doc = "Bounds of the gateway-wide definition stores (LRU by bytes; an evicted definition is "
			    "asked for again). Shared by every receiver: the last one started sets them."),
	SR_FIELD_END,
};

/* ---- state ---- */

struct conn;

struct h2stream {
	int32_t id;
	struct conn *conn;
	struct h2stream *prev, *next;
	uint8_t *body;
	size_t len, cap;
	uint64_t started_ms;
	int error_status; /* found while reading headers: answered at end of headers */
	const char *error_msg;
	bool gzip, auth_ok, responded, have_ctype;
	bool processing; /* complete and being decoded: request_timeout no longer applies */
	uint64_t content_length;
	/* response */
	uint8_t *resp;
	size_t resp_len, resp_off;
	char status_s[4], len_s[24], retry_s[24];
};

struct conn {
	uv_tcp_t tcp;
	struct agent_rx *rx;
	struct conn *prev, *next;
	nghttp2_session *h2;
	SSL *ssl;
	BIO *rbio, *wbio;
	bool tls_done, got_headers, closing, reading_paused, goaway;
	uint64_t accepted_ms, last_recv_ms, ping_sent_ms;
	uint64_t last_request_ms; /* last stream opened or closed: idle_timeout counts from here */
	bool ping_outstanding;
	size_t write_pending;
	unsigned n_streams;
	struct h2stream *streams;
	unsigned jobs;	    /* requests being decoded on the decode thread (they point here) */
	bool handle_closed; /* the socket is closed; freed when jobs reaches 0 */
	char peer[64];
};

struct wreq {
	uv_write_t req;
	struct conn *c;
	size_t len;
	uint8_t data[];
};

struct agent_stats {
	uint64_t connections_accepted, connections_refused, tls_failures, header_timeouts, keepalive_timeouts,
		idle_closes, protocol_errors;
	uint64_t requests[8]; /* by status class below */
	uint64_t bytes_wire, bytes_plain, duplicates, duplicate_samples, auth_failures, symbol_tables;
	uint64_t missing_stacks, missing_executables, missing_kernels, wanted;
	uint64_t probes, probes_pending;
	struct gw_ingest_agent_drops agent_drops;
};

enum { ST_200, ST_400, ST_401, ST_404, ST_405, ST_408, ST_413, ST_415, ST_429, ST_503, ST_500 };
static const int status_codes[] = { 200, 400, 401, 404, 405, 408, 413, 415, 429, 503, 500 };

struct agent_rx {
	struct gw_component *c;
	const struct agent_config *cfg;
	uv_loop_t *loop;
	uv_tcp_t listener;
	uv_timer_t tick;
	bool listening, tick_init, shutting_down, destroyed;
	int handles; /* open handles (listener, tick, connections): freed at 0 after destroy */
	SSL_CTX *ssl_ctx;
	nghttp2_session_callbacks *cbs;
	struct gw_dedupe *dedupe;
	struct conn *conns;
	unsigned n_conns;
	uint64_t inflight_bytes;
	char address[64];
	/* bearer token */
	char *token;
	size_t token_len;
	struct timespec token_mtime;
	uint64_t token_checked_ms;
	uint64_t shutdown_started_ms;
	uint64_t last_warn_ms, last_tls_warn_ms;
	void (*done)(struct gw_component *c);
	struct agent_stats st;
	uint64_t statuses[SR_ARRAY_SIZE(status_codes)];
	/* The decode thread: large requests are decoded off the loop (see process_request). */
	struct {
		pthread_t thread;
		bool started, stop;
		pthread_mutex_t lock;
		pthread_cond_t cond;
		struct work *todo, *todo_tail, *done;
		uv_async_t async;
		bool async_init;
		unsigned jobs; /* queued or running or done-not-finished */
	} dec;
	uint8_t readbuf[64 * 1024];
};

/*
 * One request's body and what decoding it produced. Made on the loop; the
 * CPU-heavy part (work_run: gunzip, decoding, definitions, building the batch)
 * runs on the loop for small bodies and on the decode thread for large ones;
 * work_finish (accounting, de-duplication, admission, the answer, emitting)
 * always runs on the loop.
 */
struct work {
	struct work *next;
	struct agent_rx *rx;
	struct conn *conn;
	struct h2stream *s; /* still the stream's only if nghttp2 says so at finish */
	int32_t stream_id;
	uint8_t *body;
	size_t len, cap;
	bool gzip;
	uint64_t epoch;
	uint64_t max_request_bytes;
	struct gw_stores *stores;
	/* results */
	int status; /* 0: processed into res; otherwise answer status with msg */
	uint32_t retry_after_ms;
	char msg[512];
	uint8_t *plain;
	size_t plain_len;
	struct gw_ingest_header h;
	struct gw_ingest_result res;
};

/* Shared by every receiver instance: per-request scratch epochs on shared stacks (loop thread). */
static uint64_t ingest_epoch;

static uint64_t now_ms(struct agent_rx *rx)
{
	return uv_now(rx->loop);
}

static void count_status(struct agent_rx *rx, int status)
{
	for (size_t i = 0; i < SR_ARRAY_SIZE(status_codes); i++)
		if (status_codes[i] == status) {
			rx->statuses[i]++;
			return;
		}
	rx->statuses[ST_500]++;
}

/* ---- token ---- */

static int token_load(struct agent_rx *rx, char *err, size_t errsize)
{
	const char *path = rx->cfg->auth.bearer_token_file;
	struct stat stt;
	char *buf = NULL;
	ssize_t n;
	int fd, e;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &stt) < 0) {
		e = -errno;
		snprintf(err, errsize, "cannot read bearer_token_file %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return e;
	}
	buf = malloc(MAX_TOKEN_BYTES + 1);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	n = read(fd, buf, MAX_TOKEN_BYTES + 1);
	e = -errno;
	close(fd);
	if (n < 0 || n > MAX_TOKEN_BYTES) {
		snprintf(err, errsize, "bearer_token_file %s: %s", path, n < 0 ? strerror(-e) : "longer than 16 KiB");
		free(buf);
		return n < 0 ? e : -EFBIG;
	}
	/* Trailing whitespace (a final newline) is not part of the token. */
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' ' || buf[n - 1] == '\t'))
		n--;
	buf[n] = '\0';
	if (n == 0) {
		snprintf(err, errsize, "bearer_token_file %s is empty", path);
		free(buf);
		return -EINVAL;
	}
	free(rx->token);
	rx->token = buf;
	rx->token_len = (size_t)n;
	rx->token_mtime = stt.st_mtim;
	return 0;
}

static void token_recheck(struct agent_rx *rx)
{
	struct stat stt;
	char err[256];

	if (now_ms(rx) - rx->token_checked_ms < TOKEN_RECHECK_MS)
		return;
	rx->token_checked_ms = now_ms(rx);
	if (stat(rx->cfg->auth.bearer_token_file, &stt) < 0)
		return; /* keep the last good token */
	if (stt.st_mtim.tv_sec == rx->token_mtime.tv_sec && stt.st_mtim.tv_nsec == rx->token_mtime.tv_nsec)
		return;
	if (token_load(rx, err, sizeof(err)) < 0)
		sr_log_warn(COMPONENT, "cannot re-read the bearer token; keeping the previous one",
			    "id=%s error=\"%s\"", rx->c->id, err);
}

static bool token_ok(struct agent_rx *rx, const uint8_t *value, size_t len)
{
	static const char prefix[] = "Bearer ";
	if (len < sizeof(prefix) - 1 || strncasecmp((const char *)value, prefix, sizeof(prefix) - 1) != 0)
		return false;
	value += sizeof(prefix) - 1;
	len -= sizeof(prefix) - 1;
	return len == rx->token_len && CRYPTO_memcmp(value, rx->token, len) == 0;
}

/* ---- connections ---- */

static void conn_flush(struct conn *c);
static void conn_close(struct conn *c);

static void rx_maybe_free(struct agent_rx *rx)
{
	if (!rx->destroyed || rx->handles > 0)
		return;
	if (rx->dec.async_init) {
		pthread_mutex_destroy(&rx->dec.lock);
		pthread_cond_destroy(&rx->dec.cond);
	}
	SSL_CTX_free(rx->ssl_ctx);
	nghttp2_session_callbacks_del(rx->cbs);
	gw_dedupe_free(rx->dedupe);
	free(rx->token);
	free(rx);
}

static void rx_maybe_done(struct agent_rx *rx)
{
	if (!rx->shutting_down || rx->n_conns > 0 || rx->listening || rx->dec.jobs > 0 || !rx->done)
		return;
	void (*done)(struct gw_component * c) = rx->done;
	rx->done = NULL;
	if (rx->tick_init && !uv_is_closing((uv_handle_t *)&rx->tick))
		uv_timer_stop(&rx->tick);
	done(rx->c);
}

static void stream_free(struct h2stream *s)
{
	struct conn *c = s->conn;
	if (s->prev)
		s->prev->next = s->next;
	else
		c->streams = s->next;
	if (s->next)
		s->next->prev = s->prev;
	c->n_streams--;
	c->rx->inflight_bytes -= s->cap;
	free(s->body);
	free(s->resp);
	free(s);
}

static void conn_free(struct conn *c)
{
	struct agent_rx *rx = c->rx;

	while (c->streams)
		stream_free(c->streams);
	nghttp2_session_del(c->h2);
	SSL_free(c->ssl); /* frees the BIOs too */
	free(c);
	rx->handles--;
	rx_maybe_done(rx);
	rx_maybe_free(rx);
}

static void conn_closed_cb(uv_handle_t *h)
{
	struct conn *c = h->data;

	c->handle_closed = true;
	/* Requests still decoding point at the connection: the last one frees it. */
	if (c->jobs == 0)
		conn_free(c);
}

static void conn_close(struct conn *c)
{
	struct agent_rx *rx = c->rx;
	if (c->closing)
		return;
	c->closing = true;
	if (c->prev)
		c->prev->next = c->next;
	else
		rx->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	rx->n_conns--;
	uv_close((uv_handle_t *)&c->tcp, conn_closed_cb);
}

static void on_write(uv_write_t *req, int status)
{
	struct wreq *w = (struct wreq *)req;
	struct conn *c = w->c;

	c->write_pending -= w->len;
	free(w);
	if (c->closing)
		return;
	if (status < 0) {
		conn_close(c);
		return;
	}
	conn_flush(c);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);

/* A growable output buffer for one flush. */
struct obuf {
	uint8_t *p;
	size_t len, cap;
};

static int obuf_add(struct obuf *o, const uint8_t *d, size_t n)
{
	if (o->len + n > o->cap) {
		size_t cap = SR_MAX(o->cap * 2, o->len + n);
		cap = SR_MAX(cap, (size_t)16384);
		uint8_t *np = realloc(o->p, sizeof(struct wreq) + cap);
		if (!np)
			return -ENOMEM;
		o->p = np;
		o->cap = cap;
	}
	memcpy(o->p + sizeof(struct wreq) + o->len, d, n);
	o->len += n;
	return 0;
}

static int drain_tls(struct conn *c, struct obuf *o)
{
	uint8_t tmp[16384];
	int n;
	while ((n = BIO_read(c->wbio, tmp, sizeof(tmp))) > 0)
		if (obuf_add(o, tmp, (size_t)n) < 0)
			return -ENOMEM;
	return 0;
}

/* Moves whatever nghttp2 (and TLS) want to send onto the socket. */
static void conn_flush(struct conn *c)
{
	struct obuf o = { 0 };

	if (c->closing)
		return;
	/* During the TLS handshake only the handshake's own bytes go out. */
	while ((!c->ssl || c->tls_done) && c->write_pending + o.len < MAX_WRITE_PENDING) {
		const uint8_t *data;
		ssize_t n = nghttp2_session_mem_send(c->h2, &data);
		if (n < 0) {
			free(o.p);
			conn_close(c);
			return;
		}
		if (n == 0)
			break;
		if (c->ssl) {
			int w = SSL_write(c->ssl, data, (int)n);
			if (w <= 0) {
				free(o.p);
				conn_close(c);
				return;
			}
			if (drain_tls(c, &o) < 0)
				goto fail;
		} else if (obuf_add(&o, data, (size_t)n) < 0)
			goto fail;
	}
	if (c->ssl && drain_tls(c, &o) < 0)
		goto fail;
	if (o.len) {
		struct wreq *w = (struct wreq *)o.p;
		uv_buf_t b = uv_buf_init((char *)w->data, (unsigned)o.len);
		w->c = c;
		w->len = o.len;
		c->write_pending += o.len;
		if (uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, on_write) < 0) {
			c->write_pending -= o.len;
			free(w);
			conn_close(c);
			return;
		}
	} else
		free(o.p);
	/* Back-pressure: stop reading while the peer does not take our output. */
	if (c->write_pending >= MAX_WRITE_PENDING && !c->reading_paused) {
		uv_read_stop((uv_stream_t *)&c->tcp);
		c->reading_paused = true;
	} else if (c->write_pending < MAX_WRITE_PENDING / 2 && c->reading_paused) {
		c->reading_paused = false;
		uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
	}
	if (!nghttp2_session_want_read(c->h2) && !nghttp2_session_want_write(c->h2) && c->write_pending == 0)
		conn_close(c);
	return;
fail:
	free(o.p);
	conn_close(c);
}

/* ---- responses ---- */

static ssize_t resp_read(nghttp2_session *session, int32_t stream_id, uint8_t *buf, size_t length, uint32_t *data_flags,
			 nghttp2_data_source *source, void *user_data)
{
	struct h2stream *s = source->ptr;
	size_t n = SR_MIN(length, s->resp_len - s->resp_off);
	memcpy(buf, s->resp + s->resp_off, n);
	s->resp_off += n;
	if (s->resp_off == s->resp_len)
		*data_flags |= NGHTTP2_DATA_FLAG_EOF;
	return (ssize_t)n;
}

#define NV(n, v)                                                                                                       \
	{                                                                                                              \
		(uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v), NGHTTP2_NV_FLAG_NO_COPY_NAME                 \
	}

/* Answers s with status and an encoded PushResponse (taken). */
static void respond(struct h2stream *s, int status, uint8_t *body, size_t len, uint32_t retry_after_ms)
{
	struct conn *c = s->conn;
	nghttp2_data_provider prd = { .source.ptr = s, .read_callback = resp_read };
	nghttp2_nv nva[4];
	size_t n = 0;

	if (s->responded) {
		free(body);
		return;
	}
	s->responded = true;
	count_status(c->rx, status);
	/* The request body is no longer needed. */
	c->rx->inflight_bytes -= s->cap;
	free(s->body);
	s->body = NULL;
	s->len = s->cap = 0;
	s->resp = body;
	s->resp_len = len;
	snprintf(s->status_s, sizeof(s->status_s), "%d", status);
	snprintf(s->len_s, sizeof(s->len_s), "%zu", len);
	nva[n++] = (nghttp2_nv)NV(":status", s->status_s);
	nva[n++] = (nghttp2_nv)NV("content-type", "application/x-protobuf");
	nva[n++] = (nghttp2_nv)NV("content-length", s->len_s);
	if (retry_after_ms) {
		/* Retry-After has whole seconds; the body has the exact milliseconds. */
		snprintf(s->retry_s, sizeof(s->retry_s), "%u", (retry_after_ms + 999) / 1000);
		nva[n++] = (nghttp2_nv)NV("retry-after", s->retry_s);
	}
	if (nghttp2_submit_response(c->h2, s->id, nva, n, &prd) != 0)
		nghttp2_submit_rst_stream(c->h2, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_INTERNAL_ERROR);
}

static void respond_error(struct h2stream *s, int status, uint32_t retry_after_ms, const char *fmt, ...)
	SR_PRINTF(4, 5);

static void respond_error(struct h2stream *s, int status, uint32_t retry_after_ms, const char *fmt, ...)
{
	char msg[512];
	uint8_t *body = NULL;
	size_t len = 0;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* Bad requests mean an incompatible or broken agent: worth a warning, at most once a minute. */
	struct agent_rx *rx = s->conn->rx;
	if (status == 400 && (rx->last_warn_ms == 0 || now_ms(rx) - rx->last_warn_ms >= 60000)) {
		rx->last_warn_ms = now_ms(rx);
		sr_log_warn(COMPONENT,
			    "refusing an invalid agent request (further ones are logged at debug for a minute)",
			    "id=%s peer=%s status=%d error=\"%s\"", rx->c->id, s->conn->peer, status, msg);
	} else
		sr_log_debug(COMPONENT, "request refused", "id=%s peer=%s status=%d error=\"%s\"", rx->c->id,
			     s->conn->peer, status, msg);
	if (gw_ingest_encode_error(retry_after_ms, msg, &body, &len) < 0)
		len = 0;
	respond(s, status, body, len, retry_after_ms);
}

/* ---- request processing ---- */

static void hand_over_tables(struct agent_rx *rx, struct gw_ingest_result *res)
{
	for (size_t i = 0; i < res->n_tables; i++) {
		rx->st.symbol_tables++;
		gw_runtime__symbol_table(rx->c->runtime, res->tables[i]);
		res->tables[i] = NULL;
	}
}

static void work_free(struct work *w)
{
	w->rx->inflight_bytes -= w->cap;
	free(w->body);
	free(w->plain);
	gw_ingest_result_free(&w->res);
	free(w);
}

static void work_fail(struct work *w, int status, uint32_t retry_after_ms, const char *fmt, ...) SR_PRINTF(4, 5);

static void work_fail(struct work *w, int status, uint32_t retry_after_ms, const char *fmt, ...)
{
	va_list ap;

	w->status = status;
	w->retry_after_ms = retry_after_ms;
	va_start(ap, fmt);
	vsnprintf(w->msg, sizeof(w->msg), fmt, ap);
	va_end(ap);
}

/* The CPU-heavy part; touches nothing but w and the (thread-safe) stores. Any thread. */
static void work_run(struct work *w)
{
	char err[512];
	int e;

	if (w->gzip) {
		e = sr_gunzip(w->body, w->len, w->max_request_bytes, &w->plain, &w->plain_len);
		if (e == -EFBIG)
			return work_fail(w, 413, 0, "request body decompresses to more than max_request_bytes (%llu)",
					 (unsigned long long)w->max_request_bytes);
		if (e < 0)
			return work_fail(w, 400, 0, "request body is not valid gzip: %s", strerror(-e));
	}
	const uint8_t *body = w->plain ? w->plain : w->body ? w->body : (const uint8_t *)"";
	size_t len = w->plain ? w->plain_len : w->len;

	if (gw_ingest_header(body, len, &w->h, err, sizeof(err)) < 0)
		return work_fail(w, 400, 0, "cannot decode PushRequest: %s", err);
	if (w->h.protocol_version != GW_AGENT_PROTOCOL_VERSION) {
		if (w->h.protocol_version == 0)
			return work_fail(w, 400, 0,
					 "PushRequest.protocol_version is missing; this gateway speaks version %d",
					 GW_AGENT_PROTOCOL_VERSION);
		return work_fail(w, 400, 0,
				 "PushRequest.protocol_version %u is not supported; this gateway speaks version %d "
				 "(upgrade the older of agent and gateway)",
				 w->h.protocol_version, GW_AGENT_PROTOCOL_VERSION);
	}
	/*
	 * Processed before de-duplication and admission are decided (on the loop,
	 * in work_finish): definitions are content-addressed, so interning them is
	 * harmless either way, and the samples only count if work_finish says so.
	 */
	e = gw_ingest_process(w->stores, body, len, w->epoch, &w->res, err, sizeof(err));
	if (e == -ENOMEM)
		return work_fail(w, 503, 1000, "the gateway is out of memory; retry later");
	if (e < 0)
		return work_fail(w, 400, 0, "invalid PushRequest: %s", err);
}

/* The loop part: what the request means for the pipeline and the agent. */
static void work_finish(struct work *w)
{
	struct agent_rx *rx = w->rx;
	struct gw_component *comp = rx->c;
	struct conn *c = w->conn;
	struct h2stream *s = NULL;
	uint32_t retry_ms;

	rx->st.bytes_wire += w->len;
	rx->st.bytes_plain += w->plain ? w->plain_len : w->len;
	/* The stream may be gone (the agent reset it, the connection died) while decoding. */
	if (!c->handle_closed && !c->closing && nghttp2_session_get_stream_user_data(c->h2, w->stream_id) == w->s)
		s = w->s;
	if (w->status) {
		if (w->status == 400)
			rx->st.protocol_errors++;
		if (s)
			respond_error(s, w->status, w->retry_after_ms, "%s", w->msg);
		goto out;
	}
	/*
	 * An agent that got no answer resends the same request; so a request
	 * whose stream is gone is not counted (and not remembered): its resend
	 * will be, once. Its symbol tables and definitions are kept.
	 */
	if (!s) {
		gw_ingest_result_release_asks(&w->res);
		hand_over_tables(rx, &w->res);
		goto out;
	}
	/* A resend of a request this replica answered: the same answer, counted once. */
	if (w->h.instance_id_len) {
		uint8_t *cached;
		size_t clen;
		if (gw_dedupe__lookup(rx->dedupe, w->h.instance_id, w->h.instance_id_len, w->h.sequence, &cached,
				      &clen) == 0) {
			rx->st.duplicates++;
			rx->st.duplicate_samples += w->res.received;
			/* Its definitions were taken; a symbol table in it goes to the symbolizer. The
			 * first answer is what the agent gets: what this processing asked for is not. */
			gw_ingest_result_release_asks(&w->res);
			hand_over_tables(rx, &w->res);
			respond(s, 200, cached, clen, 0);
			goto out;
		}
	}
	if (gw_runtime__admit(comp->runtime, &retry_ms) < 0) {
		gw_component_received(comp, w->res.received);
		gw_component_refused(comp, GW_REASON_RETRY_LATER, w->res.received);
		/* Its wanted_symbols are not delivered either: the next request (this resend, or another agent's) asks. */
		gw_ingest_result_release_asks(&w->res);
		respond_error(s, 429, retry_ms, "the gateway is over its memory limit; retry after %u ms", retry_ms);
		goto out;
	}
	gw_component_received(comp, w->res.received);
	if (w->res.refused_missing)
		gw_component_refused(comp, GW_REASON_MISSING_DEFINITION, w->res.refused_missing);
	rx->st.missing_stacks += w->res.missing_stacks;
	rx->st.missing_executables += w->res.missing_executables;
	rx->st.missing_kernels += w->res.missing_kernels;
	rx->st.wanted += w->res.wanted;
	rx->st.probes += w->res.probes;
	rx->st.probes_pending += w->res.symbols_pending;
	rx->st.agent_drops.ring_buffer_full += w->res.drops.ring_buffer_full;
	rx->st.agent_drops.stack_errors += w->res.drops.stack_errors;
	rx->st.agent_drops.buffer_overflow += w->res.drops.buffer_overflow;
	rx->st.agent_drops.process_unknown += w->res.drops.process_unknown;
	hand_over_tables(rx, &w->res);
	if (w->h.instance_id_len)
		gw_dedupe__insert(rx->dedupe, w->h.instance_id, w->h.instance_id_len, w->h.sequence, w->res.response,
				  w->res.response_len);
	/* Answer before the pipeline runs: the response is final either way. */
	respond(s, 200, w->res.response, w->res.response_len, 0);
	w->res.response = NULL;
	if (w->res.batch) {
		struct gw_profiles *b = w->res.batch;
		w->res.batch = NULL;
		gw_component_emit(comp, b);
	}
out:
	work_free(w);
}

/* ---- the decode thread ---- */

static void *decode_thread(void *arg)
{
	struct agent_rx *rx = arg;

	pthread_mutex_lock(&rx->dec.lock);
	for (;;) {
		while (!rx->dec.stop && !rx->dec.todo)
			pthread_cond_wait(&rx->dec.cond, &rx->dec.lock);
		if (rx->dec.stop)
			break;
		struct work *w = rx->dec.todo;
		rx->dec.todo = w->next;
		if (!rx->dec.todo)
			rx->dec.todo_tail = NULL;
		pthread_mutex_unlock(&rx->dec.lock);
		work_run(w);
		pthread_mutex_lock(&rx->dec.lock);
		w->next = rx->dec.done;
		rx->dec.done = w;
		uv_async_send(&rx->dec.async);
	}
	pthread_mutex_unlock(&rx->dec.lock);
	return NULL;
}

/* Finishes (or, when discard, just frees) a job that came back from the decode thread. */
static void job_returned(struct work *w, bool discard)
{
	struct agent_rx *rx = w->rx;
	struct conn *c = w->conn;

	if (discard)
		work_free(w);
	else
		work_finish(w);
	rx->dec.jobs--;
	if (--c->jobs == 0 && c->handle_closed)
		conn_free(c); /* also re-checks rx_maybe_done */
	else {
		if (!c->closing && !rx->destroyed)
			conn_flush(c);
		rx_maybe_done(rx);
	}
}

static void on_decoded(uv_async_t *a)
{
	struct agent_rx *rx = a->data;
	struct work *list, *rev = NULL;

	pthread_mutex_lock(&rx->dec.lock);
	list = rx->dec.done;
	rx->dec.done = NULL;
	pthread_mutex_unlock(&rx->dec.lock);
	while (list) { /* oldest first */
		struct work *next = list->next;
		list->next = rev;
		rev = list;
		list = next;
	}
	while (rev) {
		struct work *next = rev->next;
		job_returned(rev, false);
		rev = next;
	}
}

static void process_request(struct h2stream *s)
{
	struct conn *c = s->conn;
	struct agent_rx *rx = c->rx;
	struct work *w = calloc(1, sizeof(*w));

	if (!w) {
		respond_error(s, 503, 1000, "out of memory; retry later");
		return;
	}
	w->rx = rx;
	w->conn = c;
	w->s = s;
	w->stream_id = s->id;
	w->gzip = s->gzip;
	w->epoch = ++ingest_epoch;
	w->max_request_bytes = rx->cfg->max_request_bytes;
	w->stores = gw_runtime__stores(rx->c->runtime);
	/* The body moves to the work (still counted in inflight_bytes until it is freed). */
	w->body = s->body;
	w->len = s->len;
	w->cap = s->cap;
	s->body = NULL;
	s->len = s->cap = 0;
	s->processing = true;
	if (w->len <= GW_AGENT_INLINE_MAX_BYTES || !rx->dec.started) {
		work_run(w);
		work_finish(w);
		return;
	}
	rx->dec.jobs++;
	c->jobs++;
	pthread_mutex_lock(&rx->dec.lock);
	if (rx->dec.todo_tail)
		rx->dec.todo_tail->next = w;
	else
		rx->dec.todo = w;
	rx->dec.todo_tail = w;
	pthread_cond_signal(&rx->dec.cond);
	pthread_mutex_unlock(&rx->dec.lock);
}

/* ---- nghttp2 callbacks ---- */

static int on_begin_headers(nghttp2_session *session, const nghttp2_frame *frame, void *user_data)
{
	struct conn *c = user_data;
	struct h2stream *s;

	if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
		return 0;
	s = calloc(1, sizeof(*s));
	if (!s)
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	s->id = frame->hd.stream_id;
	s->conn = c;
	s->started_ms = now_ms(c->rx);
	c->last_request_ms = s->started_ms;
	s->auth_ok = !c->rx->cfg->auth.bearer_token_file;
	s->next = c->streams;
	if (c->streams)
		c->streams->prev = s;
	c->streams = s;
	c->n_streams++;
	nghttp2_session_set_stream_user_data(session, s->id, s);
	return 0;
}

static bool hdr_is(const uint8_t *name, size_t namelen, const char *want)
{
	return namelen == strlen(want) && memcmp(name, want, namelen) == 0;
}

static bool val_is(const uint8_t *v, size_t len, const char *want)
{
	return len == strlen(want) && strncasecmp((const char *)v, want, len) == 0;
}

static void set_error(struct h2stream *s, int status, const char *msg)
{
	if (!s->error_status) {
		s->error_status = status;
		s->error_msg = msg;
	}
}

static int on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name, size_t namelen,
		     const uint8_t *value, size_t valuelen, uint8_t flags, void *user_data)
{
	struct conn *c = user_data;
	struct h2stream *s;

	if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
		return 0;
	s = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
	if (!s)
		return 0;
	if (hdr_is(name, namelen, ":method")) {
		if (!val_is(value, valuelen, "POST"))
			set_error(s, 405, "only POST " PUSH_PATH " is served");
	} else if (hdr_is(name, namelen, ":path")) {
		if (!(valuelen == sizeof(PUSH_PATH) - 1 && memcmp(value, PUSH_PATH, valuelen) == 0))
			set_error(s, 404, "unknown path; the agent protocol is POST " PUSH_PATH);
	} else if (hdr_is(name, namelen, "content-type")) {
		/* Media type without parameters, case-insensitive. */
		size_t n = 0;
		while (n < valuelen && value[n] != ';' && value[n] != ' ')
			n++;
		if (val_is(value, n, "application/x-protobuf") || val_is(value, n, "application/protobuf"))
			s->have_ctype = true;
		else
			set_error(s, 415, "content-type must be application/x-protobuf");
	} else if (hdr_is(name, namelen, "content-encoding")) {
		if (val_is(value, valuelen, "gzip"))
			s->gzip = true;
		else if (!val_is(value, valuelen, "identity"))
			set_error(s, 415, "content-encoding must be gzip or identity");
	} else if (hdr_is(name, namelen, "content-length")) {
		char buf[24];
		size_t n = SR_MIN(valuelen, sizeof(buf) - 1);
		memcpy(buf, value, n);
		buf[n] = '\0';
		s->content_length = strtoull(buf, NULL, 10);
		if (s->content_length > c->rx->cfg->max_request_bytes)
			set_error(s, 413, "content-length exceeds max_request_bytes");
	} else if (hdr_is(name, namelen, "authorization") && c->rx->cfg->auth.bearer_token_file) {
		token_recheck(c->rx);
		s->auth_ok = token_ok(c->rx, value, valuelen);
	}
	return 0;
}

static void headers_done(struct conn *c, struct h2stream *s, bool end_stream)
{
	struct agent_rx *rx = c->rx;

	c->got_headers = true;
	if (!s->auth_ok && !s->error_status) {
		rx->st.auth_failures++;
		set_error(s, 401, "missing or wrong bearer token (Authorization: Bearer <token>)");
	}
	if (!s->have_ctype && !s->error_status)
		set_error(s, 415, "content-type must be application/x-protobuf");
	if (s->error_status) {
		respond_error(s, s->error_status, 0, "%s", s->error_msg);
		return;
	}
	if (rx->shutting_down) {
		respond_error(s, 503, 1000, "the gateway is shutting down; retry on another replica");
		return;
	}
	if (end_stream)
		process_request(s);
}

static int on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame, void *user_data)
{
	struct conn *c = user_data;
	struct h2stream *s;

	switch (frame->hd.type) {
	case NGHTTP2_HEADERS:
		if (frame->headers.cat != NGHTTP2_HCAT_REQUEST)
			break;
		s = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
		if (s)
			headers_done(c, s, frame->hd.flags & NGHTTP2_FLAG_END_STREAM);
		break;
	case NGHTTP2_DATA:
		s = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
		if (s && (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) && !s->responded)
			process_request(s);
		break;
	case NGHTTP2_PING:
		if (frame->hd.flags & NGHTTP2_FLAG_ACK)
			c->ping_outstanding = false;
		break;
	default:
		break;
	}
	return 0;
}

static int on_data_chunk(nghttp2_session *session, uint8_t flags, int32_t stream_id, const uint8_t *data, size_t len,
			 void *user_data)
{
	struct conn *c = user_data;
	struct agent_rx *rx = c->rx;
	struct h2stream *s = nghttp2_session_get_stream_user_data(session, stream_id);

	if (!s || s->responded)
		return 0;
	if (s->len + len > rx->cfg->max_request_bytes) {
		respond_error(s, 413, 0, "request body exceeds max_request_bytes (%llu)",
			      (unsigned long long)rx->cfg->max_request_bytes);
		return 0;
	}
	if (s->len + len > s->cap) {
		size_t cap = SR_MAX(s->cap * 2, s->len + len);
		if (s->content_length && s->cap == 0 && s->content_length >= s->len + len)
			cap = (size_t)s->content_length; /* allocate once when the size is announced */
		cap = (size_t)SR_MIN((uint64_t)cap, rx->cfg->max_request_bytes);
		if (rx->inflight_bytes + (cap - s->cap) > rx->cfg->max_inflight_bytes) {
			respond_error(s, 503, 1000,
				      "the receiver buffers max_inflight_bytes (%llu) of requests; retry later",
				      (unsigned long long)rx->cfg->max_inflight_bytes);
			return 0;
		}
		uint8_t *nb = realloc(s->body, cap);
		if (!nb) {
			respond_error(s, 503, 1000, "out of memory; retry later");
			return 0;
		}
		rx->inflight_bytes += cap - s->cap;
		s->body = nb;
		s->cap = cap;
	}
	memcpy(s->body + s->len, data, len);
	s->len += len;
	return 0;
}

static int on_stream_close(nghttp2_session *session, int32_t stream_id, uint32_t error_code, void *user_data)
{
	struct h2stream *s = nghttp2_session_get_stream_user_data(session, stream_id);
	if (s) {
		nghttp2_session_set_stream_user_data(session, stream_id, NULL);
		s->conn->last_request_ms = now_ms(s->conn->rx);
		stream_free(s);
	}
	return 0;
}

/* ---- socket I/O ---- */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	struct conn *c = h->data;
	/* One buffer for the whole receiver: libuv calls on_read right after on_alloc. */
	*buf = uv_buf_init((char *)c->rx->readbuf, sizeof(c->rx->readbuf));
}

static int feed_h2(struct conn *c, const uint8_t *data, size_t len)
{
	ssize_t r = nghttp2_session_mem_recv(c->h2, data, len);
	if (r < 0) {
		c->rx->st.protocol_errors++;
		sr_log_debug(COMPONENT, "HTTP/2 protocol error; closing the connection", "id=%s peer=%s error=\"%s\"",
			     c->rx->c->id, c->peer, nghttp2_strerror((int)r));
		return -EPROTO;
	}
	return 0;
}

static void tls_failed(struct conn *c, const char *what)
{
	char err[256] = "";
	unsigned long e = ERR_peek_last_error();
	if (e)
		ERR_error_string_n(e, err, sizeof(err));
	ERR_clear_error();
	c->rx->st.tls_failures++;
	/* A wrong client certificate or CA is a deployment problem: warn, at most once a minute. */
	if (c->rx->last_tls_warn_ms == 0 || now_ms(c->rx) - c->rx->last_tls_warn_ms >= 60000) {
		c->rx->last_tls_warn_ms = now_ms(c->rx);
		sr_log_warn(COMPONENT, "TLS handshake failed (further failures are logged at debug for a minute)",
			    "id=%s peer=%s stage=%s error=\"%s\"", c->rx->c->id, c->peer, what, err);
	} else
		sr_log_debug(COMPONENT, "TLS handshake failed; closing the connection",
			     "id=%s peer=%s stage=%s error=\"%s\"", c->rx->c->id, c->peer, what, err);
}

static void on_read(uv_stream_t *stream, ssize_t n, const uv_buf_t *buf)
{
	struct conn *c = stream->data;

	if (n == 0)
		return;
	if (n < 0) {
		conn_close(c);
		return;
	}
	c->last_recv_ms = now_ms(c->rx);
	if (!c->ssl) {
		if (feed_h2(c, (const uint8_t *)buf->base, (size_t)n) < 0) {
			conn_flush(c); /* send the GOAWAY nghttp2 queued */
			conn_close(c);
			return;
		}
		conn_flush(c);
		return;
	}
	if (BIO_write(c->rbio, buf->base, (int)n) != n) {
		conn_close(c);
		return;
	}
	if (!c->tls_done) {
		int r = SSL_do_handshake(c->ssl);
		if (r != 1) {
			int err = SSL_get_error(c->ssl, r);
			if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
				conn_flush(c);
				return;
			}
			tls_failed(c, "handshake");
			conn_flush(c); /* the alert */
			conn_close(c);
			return;
		}
		c->tls_done = true;
	}
	for (;;) {
		uint8_t tmp[16384];
		int r = SSL_read(c->ssl, tmp, sizeof(tmp));
		if (r > 0) {
			if (feed_h2(c, tmp, (size_t)r) < 0) {
				conn_flush(c);
				conn_close(c);
				return;
			}
			if (c->closing)
				return;
			continue;
		}
		int err = SSL_get_error(c->ssl, r);
		if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE)
			break;
		if (err != SSL_ERROR_ZERO_RETURN)
			tls_failed(c, "read");
		conn_close(c);
		return;
	}
	conn_flush(c);
}

static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen, const unsigned char *in,
		       unsigned int inlen, void *arg)
{
	/* HTTP/2 only: an agent that does not offer h2 cannot talk to us. */
	if (nghttp2_select_next_protocol((unsigned char **)out, outlen, in, inlen) != 1)
		return SSL_TLSEXT_ERR_ALERT_FATAL;
	return SSL_TLSEXT_ERR_OK;
}

static void on_connection(uv_stream_t *server, int status)
{
	struct agent_rx *rx = server->data;
	nghttp2_settings_entry settings[3];
	struct sockaddr_storage ss;
	int namelen = sizeof(ss);
	struct conn *c;

	if (status < 0)
		return;
	c = calloc(1, sizeof(*c));
	if (!c)
		return;
	c->rx = rx;
	uv_tcp_init(rx->loop, &c->tcp);
	c->tcp.data = c;
	rx->handles++;
	c->next = rx->conns;
	if (rx->conns)
		rx->conns->prev = c;
	rx->conns = c;
	rx->n_conns++;
	if (uv_accept(server, (uv_stream_t *)&c->tcp) < 0) {
		conn_close(c);
		return;
	}
	if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &namelen) == 0)
		gw_sockaddr_format((struct sockaddr *)&ss, c->peer, sizeof(c->peer));
	if (rx->n_conns > rx->cfg->max_connections || rx->shutting_down) {
		rx->st.connections_refused++;
		sr_log_debug(COMPONENT, "connection refused: max_connections reached", "id=%s peer=%s max=%llu",
			     rx->c->id, c->peer, (unsigned long long)rx->cfg->max_connections);
		conn_close(c);
		return;
	}
	rx->st.connections_accepted++;
	uv_tcp_nodelay(&c->tcp, 1);
	c->accepted_ms = c->last_recv_ms = c->last_request_ms = now_ms(rx);
	if (nghttp2_session_server_new(&c->h2, rx->cbs, c) != 0)
		goto fail;
	settings[0] = (nghttp2_settings_entry){ NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS,
						(uint32_t)rx->cfg->max_concurrent_streams };
	/* Windows large enough for big bodies in few round trips; memory is bounded by our own limits. */
	settings[1] = (nghttp2_settings_entry){ NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1u << 20 };
	settings[2] = (nghttp2_settings_entry){ NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, 16384 };
	if (nghttp2_submit_settings(c->h2, NGHTTP2_FLAG_NONE, settings, SR_ARRAY_SIZE(settings)) != 0 ||
	    nghttp2_session_set_local_window_size(c->h2, NGHTTP2_FLAG_NONE, 0, 16 << 20) != 0)
		goto fail;
	if (rx->ssl_ctx) {
		c->ssl = SSL_new(rx->ssl_ctx);
		c->rbio = BIO_new(BIO_s_mem());
		c->wbio = BIO_new(BIO_s_mem());
		if (!c->ssl || !c->rbio || !c->wbio) {
			BIO_free(c->rbio);
			BIO_free(c->wbio);
			goto fail;
		}
		SSL_set_bio(c->ssl, c->rbio, c->wbio);
		SSL_set_accept_state(c->ssl);
	}
	if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) < 0)
		goto fail;
	if (!c->ssl)
		conn_flush(c);
	return;
fail:
	conn_close(c);
}

/* ---- timers ---- */

static void conn_goaway(struct conn *c)
{
	if (c->goaway || c->closing)
		return;
	c->goaway = true;
	nghttp2_submit_goaway(c->h2, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(c->h2),
			      NGHTTP2_NO_ERROR, NULL, 0);
	conn_flush(c);
}

static void on_tick(uv_timer_t *t)
{
	struct agent_rx *rx = t->data;
	const struct agent_config *cfg = rx->cfg;
	uint64_t now = now_ms(rx);
	struct conn *c = rx->conns;

	while (c) {
		struct conn *next = c->next;
		if (!c->got_headers && now - c->accepted_ms > cfg->header_timeout_ns / SR_NSEC_PER_MSEC) {
			rx->st.header_timeouts++;
			sr_log_debug(COMPONENT, "no request headers within header_timeout; closing", "id=%s peer=%s",
				     rx->c->id, c->peer);
			conn_close(c);
			goto next;
		}
		if (c->ping_outstanding && now - c->ping_sent_ms > cfg->keepalive.timeout_ns / SR_NSEC_PER_MSEC) {
			rx->st.keepalive_timeouts++;
			sr_log_debug(COMPONENT, "PING not answered within keepalive.timeout; closing", "id=%s peer=%s",
				     rx->c->id, c->peer);
			conn_close(c);
			goto next;
		}
		if (rx->shutting_down && now - rx->shutdown_started_ms > SHUTDOWN_GRACE_MS) {
			conn_close(c);
			goto next;
		}
		for (struct h2stream *s = c->streams, *sn; s; s = sn) {
			sn = s->next;
			if (!s->responded && !s->processing &&
			    now - s->started_ms > cfg->request_timeout_ns / SR_NSEC_PER_MSEC)
				respond_error(s, 408, 0, "request not complete within request_timeout");
		}
		if (c->n_streams == 0 && cfg->idle_timeout_ns &&
		    now - c->last_request_ms > cfg->idle_timeout_ns / SR_NSEC_PER_MSEC && c->got_headers) {
			rx->st.idle_closes++;
			conn_goaway(c);
			goto next;
		}
		if (cfg->keepalive.interval_ns && !c->ping_outstanding && c->got_headers &&
		    now - c->last_recv_ms > cfg->keepalive.interval_ns / SR_NSEC_PER_MSEC) {
			if (nghttp2_submit_ping(c->h2, NGHTTP2_FLAG_NONE, NULL) == 0) {
				c->ping_outstanding = true;
				c->ping_sent_ms = now;
			}
		}
		conn_flush(c);
	next:
		c = next;
	}
}

/* ---- metrics ---- */

static void write_metrics(struct gw_metrics_writer *w, void *userdata)
{
	struct agent_rx *rx = userdata;
	char lbl[128] = "", l2[256];
	const struct {
		const char *family, *help;
		uint64_t v;
	} counters[] = {
		{ "stackrelay_gateway_agent_connections_accepted_total", "Agent connections accepted.",
		  rx->st.connections_accepted },
		{ "stackrelay_gateway_agent_connections_refused_total",
		  "Agent connections closed at accept (max_connections or shutting down).",
		  rx->st.connections_refused },
		{ "stackrelay_gateway_agent_tls_handshake_failures_total",
		  "TLS handshakes that failed (wrong or missing client certificate, no h2 ALPN, not TLS).",
		  rx->st.tls_failures },
		{ "stackrelay_gateway_agent_header_timeouts_total",
		  "Connections closed for sending no request headers within header_timeout.", rx->st.header_timeouts },
		{ "stackrelay_gateway_agent_keepalive_timeouts_total", "Connections closed for an unanswered PING.",
		  rx->st.keepalive_timeouts },
		{ "stackrelay_gateway_agent_idle_closes_total", "Connections closed after idle_timeout.",
		  rx->st.idle_closes },
		{ "stackrelay_gateway_agent_protocol_errors_total",
		  "Malformed HTTP/2 or PushRequests, and unsupported protocol versions.", rx->st.protocol_errors },
		{ "stackrelay_gateway_agent_auth_failures_total", "Requests without the right bearer token.",
		  rx->st.auth_failures },
		{ "stackrelay_gateway_agent_request_bytes_total", "Request body bytes as received (compressed).",
		  rx->st.bytes_wire },
		{ "stackrelay_gateway_agent_request_decoded_bytes_total", "Request body bytes after decompression.",
		  rx->st.bytes_plain },
		{ "stackrelay_gateway_agent_duplicate_requests_total",
		  "Resent requests answered from the de-duplication window (not counted again).", rx->st.duplicates },
		{ "stackrelay_gateway_agent_duplicate_samples_total", "CPU samples in those resent requests.",
		  rx->st.duplicate_samples },
		{ "stackrelay_gateway_agent_symbol_tables_total", "Symbol tables agents uploaded.",
		  rx->st.symbol_tables },
		{ "stackrelay_gateway_agent_wanted_symbols_total", "Executable IDs asked for in wanted_symbols.",
		  rx->st.wanted },
		{ "stackrelay_gateway_agent_symbol_probes_total",
		  "Executable and kernel IDs agents asked about in probe_symbols (at exit).", rx->st.probes },
		{ "stackrelay_gateway_agent_symbol_probes_pending_total",
		  "Probed IDs answered as still being looked up (symbols_pending).", rx->st.probes_pending },
	};

	gw_metrics_label(lbl, sizeof(lbl), "component", rx->c->id);
	for (size_t i = 0; i < SR_ARRAY_SIZE(counters); i++)
		gw_metrics__add(w, counters[i].family, GW_METRIC_COUNTER, counters[i].help, lbl, (double)counters[i].v);
	gw_metrics__add(w, "stackrelay_gateway_agent_connections", GW_METRIC_GAUGE, "Open agent connections.", lbl,
			rx->n_conns);
	gw_metrics__add(w, "stackrelay_gateway_agent_inflight_bytes", GW_METRIC_GAUGE,
			"Request bytes buffered now (bounded by max_inflight_bytes).", lbl, (double)rx->inflight_bytes);
	gw_metrics__add(w, "stackrelay_gateway_agent_dedupe_entries", GW_METRIC_GAUGE,
			"Responses remembered for de-duplication.", lbl, (double)gw_dedupe__entries(rx->dedupe));
	for (size_t i = 0; i < SR_ARRAY_SIZE(status_codes); i++) {
		char code[8];
		snprintf(code, sizeof(code), "%d", status_codes[i]);
		snprintf(l2, sizeof(l2), "%s", lbl);
		gw_metrics_label(l2, sizeof(l2), "status", code);
		gw_metrics__add(w, "stackrelay_gateway_agent_requests_total", GW_METRIC_COUNTER,
				"Agent requests answered, by HTTP status.", l2, (double)rx->statuses[i]);
	}
	const struct {
		const char *kind;
		uint64_t v;
	} missing[] = {
		{ "stack", rx->st.missing_stacks },
		{ "executable", rx->st.missing_executables },
		{ "kernel", rx->st.missing_kernels },
	};
	for (size_t i = 0; i < SR_ARRAY_SIZE(missing); i++) {
		snprintf(l2, sizeof(l2), "%s", lbl);
		gw_metrics_label(l2, sizeof(l2), "kind", missing[i].kind);
		gw_metrics__add(w, "stackrelay_gateway_agent_missing_definitions_total", GW_METRIC_COUNTER,
				"Definitions reported missing to agents (they resend them).", l2, (double)missing[i].v);
	}
	const struct {
		const char *reason;
		uint64_t v;
	} drops[] = {
		{ "ring_buffer_full", rx->st.agent_drops.ring_buffer_full },
		{ "stack_errors", rx->st.agent_drops.stack_errors },
		{ "buffer_overflow", rx->st.agent_drops.buffer_overflow },
		{ "process_unknown", rx->st.agent_drops.process_unknown },
	};
	for (size_t i = 0; i < SR_ARRAY_SIZE(drops); i++) {
		snprintf(l2, sizeof(l2), "%s", lbl);
		gw_metrics_label(l2, sizeof(l2), "reason", drops[i].reason);
		gw_metrics__add(w, "stackrelay_gateway_agent_reported_drops_total", GW_METRIC_COUNTER,
				"CPU samples agents reported lost before sending, by reason (from PushRequest.drops).",
				l2, (double)drops[i].v);
	}
}

/* ---- lifecycle ---- */

static int agent_validate(const void *config, const char *path, struct sr_diag *d)
{
	const struct agent_config *cfg = config;
	int r = 0;

	if (!!cfg->tls.cert_file != !!cfg->tls.key_file) {
		sr_diag_add(d, NULL, 0, 0, path, "tls: cert_file and key_file go together (one is missing)");
		r = -EINVAL;
	}
	if (cfg->tls.client_ca_file && !cfg->tls.cert_file) {
		sr_diag_add(d, NULL, 0, 0, path, "tls.client_ca_file needs tls.cert_file and tls.key_file");
		r = -EINVAL;
	}
	if (cfg->endpoint) {
		struct sockaddr_storage ss;
		char err[256];
		if (gw_parse_endpoint(cfg->endpoint, &ss, err, sizeof(err)) == -EINVAL) {
			sr_diag_add(d, NULL, 0, 0, path, "endpoint: %s", err);
			r = -EINVAL;
		}
	}
	return r;
}

static int tls_setup(struct agent_rx *rx)
{
	const struct agent_tls_config *t = &rx->cfg->tls;
	char err[256] = "";
	const char *what;

	rx->ssl_ctx = SSL_CTX_new(TLS_server_method());
	if (!rx->ssl_ctx)
		return -ENOMEM;
	SSL_CTX_set_min_proto_version(rx->ssl_ctx, TLS1_2_VERSION);
	SSL_CTX_set_options(rx->ssl_ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
	what = "cert_file";
	if (SSL_CTX_use_certificate_chain_file(rx->ssl_ctx, t->cert_file) != 1)
		goto fail;
	what = "key_file";
	if (SSL_CTX_use_PrivateKey_file(rx->ssl_ctx, t->key_file, SSL_FILETYPE_PEM) != 1 ||
	    SSL_CTX_check_private_key(rx->ssl_ctx) != 1)
		goto fail;
	if (t->client_ca_file) {
		what = "client_ca_file";
		if (SSL_CTX_load_verify_locations(rx->ssl_ctx, t->client_ca_file, NULL) != 1)
			goto fail;
		STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(t->client_ca_file);
		if (names)
			SSL_CTX_set_client_CA_list(rx->ssl_ctx, names);
		SSL_CTX_set_verify(rx->ssl_ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
	}
	SSL_CTX_set_alpn_select_cb(rx->ssl_ctx, alpn_select, NULL);
	return 0;
fail:
	ERR_error_string_n(ERR_get_error(), err, sizeof(err));
	ERR_clear_error();
	sr_log_error(COMPONENT, "cannot load TLS files", "id=%s key=tls.%s error=\"%s\"", rx->c->id, what, err);
	return -EINVAL;
}

static int agent_create(struct gw_component *c)
{
	struct agent_rx *rx = calloc(1, sizeof(*rx));
	if (!rx)
		return -ENOMEM;
	rx->c = c;
	rx->cfg = c->config;
	c->state = rx;
	return 0;
}

static int agent_start(struct gw_component *c)
{
	struct agent_rx *rx = c->state;
	const struct agent_config *cfg = rx->cfg;
	struct sockaddr_storage ss;
	char err[256];
	int namelen = sizeof(ss);
	int r;

	rx->loop = gw_runtime__loop(c->runtime);
	{
		struct gw_stores *st = gw_runtime__stores(c->runtime);
		gw_stores__set_limit(st, GW_STORE_EXECUTABLES, cfg->stores.executables);
		gw_stores__set_limit(st, GW_STORE_KERNELS, cfg->stores.kernels);
		gw_stores__set_limit(st, GW_STORE_LOCATIONS, cfg->stores.locations);
		gw_stores__set_limit(st, GW_STORE_STACKS, cfg->stores.stacks);
	}
	if (cfg->tls.cert_file && (r = tls_setup(rx)) < 0)
		return r;
	if (cfg->auth.bearer_token_file && (r = token_load(rx, err, sizeof(err))) < 0) {
		sr_log_error(COMPONENT, "cannot load the bearer token", "id=%s error=\"%s\"", c->id, err);
		return r;
	}
	rx->token_checked_ms = uv_now(rx->loop);
	rx->dedupe = gw_dedupe_new((uint32_t)cfg->dedupe.max_entries, cfg->dedupe.max_bytes);
	if (!rx->dedupe || nghttp2_session_callbacks_new(&rx->cbs) != 0)
		return -ENOMEM;
	nghttp2_session_callbacks_set_on_begin_headers_callback(rx->cbs, on_begin_headers);
	nghttp2_session_callbacks_set_on_header_callback(rx->cbs, on_header);
	nghttp2_session_callbacks_set_on_frame_recv_callback(rx->cbs, on_frame_recv);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(rx->cbs, on_data_chunk);
	nghttp2_session_callbacks_set_on_stream_close_callback(rx->cbs, on_stream_close);

	r = gw_parse_endpoint(cfg->endpoint, &ss, err, sizeof(err));
	if (r < 0) {
		sr_log_error(COMPONENT, "bad endpoint", "id=%s error=\"%s\"", c->id, err);
		return r;
	}
	/* The decode thread for large requests. */
	pthread_mutex_init(&rx->dec.lock, NULL);
	pthread_cond_init(&rx->dec.cond, NULL);
	if ((r = uv_async_init(rx->loop, &rx->dec.async, on_decoded)) < 0)
		return r;
	rx->dec.async.data = rx;
	rx->dec.async_init = true;
	/* It must not keep the loop alive by itself (shutdown waits for jobs explicitly). */
	uv_unref((uv_handle_t *)&rx->dec.async);
	rx->handles++;
	if ((r = pthread_create(&rx->dec.thread, NULL, decode_thread, rx)) != 0) {
		sr_log_error(COMPONENT, "cannot start the decode thread", "id=%s error=\"%s\"", c->id, strerror(r));
		return -r;
	}
	rx->dec.started = true;
	uv_tcp_init(rx->loop, &rx->listener);
	rx->listener.data = rx;
	rx->handles++;
	rx->listening = true;
	if ((r = uv_tcp_bind(&rx->listener, (struct sockaddr *)&ss, 0)) < 0 ||
	    (r = uv_listen((uv_stream_t *)&rx->listener, 511, on_connection)) < 0) {
		sr_log_error(COMPONENT, "cannot listen", "id=%s endpoint=%s error=\"%s\"", c->id, cfg->endpoint,
			     uv_strerror(r));
		return r;
	}
	uv_tcp_getsockname(&rx->listener, (struct sockaddr *)&ss, &namelen);
	gw_sockaddr_format((struct sockaddr *)&ss, rx->address, sizeof(rx->address));

	uint64_t tick = 1000;
	if (cfg->header_timeout_ns)
		tick = SR_MIN(tick, cfg->header_timeout_ns / SR_NSEC_PER_MSEC / 4);
	if (cfg->keepalive.interval_ns)
		tick = SR_MIN(tick, cfg->keepalive.interval_ns / SR_NSEC_PER_MSEC / 4);
	if (cfg->keepalive.timeout_ns)
		tick = SR_MIN(tick, cfg->keepalive.timeout_ns / SR_NSEC_PER_MSEC / 4);
	tick = SR_MAX(tick, (uint64_t)20);
	uv_timer_init(rx->loop, &rx->tick);
	rx->tick.data = rx;
	rx->handles++;
	rx->tick_init = true;
	uv_timer_start(&rx->tick, on_tick, tick, tick);
	/* (The tick is stopped when shutdown is done, so it does not keep the loop alive.) */
	gw_runtime__add_metrics(c->runtime, write_metrics, rx);
	sr_log_info(COMPONENT, "listening for agents", "id=%s address=%s tls=%s mtls=%s auth=%s", c->id, rx->address,
		    rx->ssl_ctx ? "yes" : "no", cfg->tls.client_ca_file ? "yes" : "no",
		    cfg->auth.bearer_token_file ? "bearer" : "none");
	return 0;
}

static void listener_closed(uv_handle_t *h)
{
	struct agent_rx *rx = h->data;
	rx->handles--;
	rx->listening = false;
	rx_maybe_done(rx);
	rx_maybe_free(rx);
}

static void tick_closed(uv_handle_t *h)
{
	struct agent_rx *rx = h->data;
	rx->handles--;
	rx_maybe_free(rx);
}

static void agent_shutdown(struct gw_component *c, void (*done)(struct gw_component *c))
{
	struct agent_rx *rx = c->state;

	rx->done = done;
	rx->shutting_down = true;
	rx->shutdown_started_ms = now_ms(rx);
	if (rx->listening && !uv_is_closing((uv_handle_t *)&rx->listener))
		uv_close((uv_handle_t *)&rx->listener, listener_closed);
	/* Finish what was started, refuse new streams: GOAWAY with the last stream we saw. */
	for (struct conn *cn = rx->conns, *next; cn; cn = next) {
		next = cn->next;
		conn_goaway(cn);
	}
	rx_maybe_done(rx);
}

static void agent_destroy(struct gw_component *c)
{
	struct agent_rx *rx = c->state;

	if (!rx)
		return;
	c->state = NULL;
	if (c->runtime)
		gw_runtime__remove_metrics(c->runtime, write_metrics, rx);
	rx->destroyed = true;
	rx->done = NULL;
	if (rx->dec.started) {
		pthread_mutex_lock(&rx->dec.lock);
		rx->dec.stop = true;
		pthread_cond_broadcast(&rx->dec.cond);
		pthread_mutex_unlock(&rx->dec.lock);
		/* Waits for the request being decoded, if any (bounded by max_request_bytes). */
		pthread_join(rx->dec.thread, NULL);
		rx->dec.started = false;
		for (struct work *w = rx->dec.todo, *next; w; w = next) {
			next = w->next;
			job_returned(w, true);
		}
		for (struct work *w = rx->dec.done, *next; w; w = next) {
			next = w->next;
			job_returned(w, true);
		}
		rx->dec.todo = rx->dec.todo_tail = rx->dec.done = NULL;
	}
	while (rx->conns)
		conn_close(rx->conns);
	if (rx->listening && !uv_is_closing((uv_handle_t *)&rx->listener))
		uv_close((uv_handle_t *)&rx->listener, listener_closed);
	if (rx->tick_init && !uv_is_closing((uv_handle_t *)&rx->tick))
		uv_close((uv_handle_t *)&rx->tick, tick_closed);
	if (rx->dec.async_init && !uv_is_closing((uv_handle_t *)&rx->dec.async))
		uv_close((uv_handle_t *)&rx->dec.async, tick_closed);
	rx_maybe_free(rx);
}

const char *gw_agent_receiver_address(struct gw_component *c)
{
	struct agent_rx *rx = c->state;
	return rx ? rx->address : NULL;
}

const struct gw_component_type gw_receiver_agent = {
	.name = "agent",
	.kind = GW_RECEIVER,
	.doc = "Receives profiles from stackrelay agents: the agent protocol (docs/agent-protocol.md) over HTTP/2, "
	       "plain (h2c) or TLS with optional client certificates and bearer token. Definitions (stacks, "
	       "executables, kernels) are kept in gateway-wide bounded stores; unknown ones are asked for.",
	.config_fields = agent_fields,
	.config_size = sizeof(struct agent_config),
	.validate = agent_validate,
	.create = agent_create,
	.start = agent_start,
	.shutdown = agent_shutdown,
	.destroy = agent_destroy,
};
