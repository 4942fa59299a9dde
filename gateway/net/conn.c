/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The receivers' connections (gateway/net/conn.h): sockets on the libuv
 * loop, TLS through OpenSSL memory BIOs, HTTP/2 sessions (nghttp2) and their
 * callbacks up to a complete request (handed to the receiver's
 * gw_conn_ops.request), and GOAWAY. The timers that bound a client's time (headers, requests,
 * idleness, unanswered PINGs, shutdown grace) run in net/tick.c.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nghttp2/nghttp2.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <uv.h>

#include "component.h"
#include "gateway/net/conn.h"
#include "gateway/net/h1.h"
#include "heap.h"
#include "common/log.h"
#include "common/macro.h"
#include "common/netaddr.h"

/* ---- connections ---- */

void gw_net_stream_free(struct h2stream *s)
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
	free(s->grpc_message);
	free(s->token_node);
	free(s->metadata);
	free(s->proto_data);
	free(s);
}

void gw_net_conn_free(struct conn *c)
{
	struct gw_listener *rx = c->rx;

	while (c->streams)
		gw_net_stream_free(c->streams);
	gw_h1_free(c->h1);
	nghttp2_session_del(c->h2);
	SSL_free(c->ssl); /* frees the BIOs too */
	for (size_t i = 0; i < c->n_node_names; i++)
		free(c->node_names[i]);
	free(c->node_names);
	free(c->principal);
	free(c);
	rx->handles--;
	gw_listener_maybe_done(rx);
	gw_listener_maybe_free(rx);
}

static void conn_closed_cb(uv_handle_t *h)
{
	struct conn *c = h->data;

	c->handle_closed = true;
	/* Requests still decoding point at the connection: the last one frees it. */
	if (c->jobs == 0)
		gw_net_conn_free(c);
}

void gw_net_conn_close(struct conn *c)
{
	struct gw_listener *rx = c->rx;
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
		gw_net_conn_close(c);
		return;
	}
	gw_net_conn_flush(c);
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
		/* Not grow.h: the uv write request sits in front of the bytes, outside the capacity. */
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

static void on_linger_shutdown(uv_shutdown_t *req, int status)
{
	struct conn *c = req->data;
	if (status < 0 && status != UV_ECANCELED && !c->closing)
		gw_net_conn_close(c);
}

/*
 * The end of an HTTP/1.1 connection after its last answer. Closing a socket
 * with request bytes still unread makes the kernel send RST, and the client
 * may lose the answer just written (a 431 for an oversized head, say). So
 * without TLS: send FIN, and read and throw away until the client closes, at
 * most GW_NET_LINGER_BYTES or GW_NET_LINGER_MS (net/tick.c).
 */
static void conn_end(struct conn *c)
{
	if (c->lingering)
		return;
	if (c->ssl) {
		gw_net_conn_close(c);
		return;
	}
	c->lingering = true;
	c->linger_started_ms = gw_net_now_ms(c->rx);
	c->linger_req.data = c;
	if (uv_shutdown(&c->linger_req, (uv_stream_t *)&c->tcp, on_linger_shutdown) < 0)
		gw_net_conn_close(c);
}

/* Moves whatever nghttp2 (and TLS) want to send onto the socket. */
void gw_net_conn_flush(struct conn *c)
{
	struct obuf o = { 0 };

	if (c->closing)
		return;
	/* During the TLS handshake only the handshake's own bytes go out; nothing before the protocol is known. */
	while ((!c->ssl || c->tls_done) && !c->sniffing && c->write_pending + o.len < MAX_WRITE_PENDING) {
		const uint8_t *data;
		ssize_t n = c->h1 ? gw_h1_pull(c, &data) : nghttp2_session_mem_send(c->h2, &data);
		if (n < 0) {
			free(o.p);
			gw_net_conn_close(c);
			return;
		}
		if (n == 0)
			break;
		if (c->ssl) {
			int w = SSL_write(c->ssl, data, (int)n);
			if (w <= 0) {
				free(o.p);
				gw_net_conn_close(c);
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
			gw_net_conn_close(c);
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
	if (c->write_pending == 0 && c->h1 && gw_h1_finished(c))
		conn_end(c);
	else if (c->write_pending == 0 && !c->h1 && !c->sniffing && !nghttp2_session_want_read(c->h2) &&
		 !nghttp2_session_want_write(c->h2))
		gw_net_conn_close(c);
	return;
fail:
	free(o.p);
	gw_net_conn_close(c);
}

/* ---- nghttp2 callbacks ---- */

struct h2stream *gw_net_stream_new(struct conn *c, int32_t id)
{
	struct h2stream *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->id = id;
	s->conn = c;
	s->started_ms = gw_net_now_ms(c->rx);
	s->started_ns = uv_hrtime();
	c->last_request_ms = s->started_ms;
	s->auth_ok = !c->rx->cfg->auth.bearer_token_file && !c->rx->cfg->auth.node_tokens_file;
	s->next = c->streams;
	if (c->streams)
		c->streams->prev = s;
	c->streams = s;
	c->n_streams++;
	return s;
}

static int on_begin_headers(nghttp2_session *session, const nghttp2_frame *frame, void *user_data)
{
	struct h2stream *s;

	if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
		return 0;
	s = gw_net_stream_new(user_data, frame->hd.stream_id);
	if (!s)
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	nghttp2_session_set_stream_user_data(session, s->id, s);
	return 0;
}

bool gw_net_stream_alive(struct conn *c, int32_t id, const struct h2stream *s)
{
	if (c->handle_closed || c->closing)
		return false;
	if (c->h1)
		return gw_h1_current(c) == s;
	return nghttp2_session_get_stream_user_data(c->h2, id) == s;
}

void gw_net_stream_error(struct h2stream *s, int status, const char *msg)
{
	if (!s->error_status) {
		s->error_status = status;
		s->error_msg = msg;
	}
}

void gw_net_stream_header(struct conn *c, struct h2stream *s, const uint8_t *name, size_t namelen, const uint8_t *value,
			  size_t valuelen)
{
	/* The rest of an oversized list is only looked at by nghttp2's decoder (bounded by max_continuations). */
	s->header_bytes += namelen + valuelen + 32;
	if (s->header_bytes > c->rx->cfg->max_header_list_bytes) {
		gw_net_stream_error(s, 431, "request headers exceed max_header_list_bytes");
		return;
	}
	if (!gw_net_name_is(name, namelen, "content-length") && !gw_net_name_is(name, namelen, "authorization")) {
		/* What HEAD means (the answer of a GET without its body) is HTTP's: the answers leave the body out. */
		if (gw_net_name_is(name, namelen, ":method") && valuelen == 4 && memcmp(value, "HEAD", 4) == 0)
			s->head_only = true;
		c->rx->ops->header(s, name, namelen, value, valuelen);
	} else if (gw_net_name_is(name, namelen, "content-length")) {
		char buf[24];
		size_t n = SR_MIN(valuelen, sizeof(buf) - 1);
		memcpy(buf, value, n);
		buf[n] = '\0';
		s->content_length = strtoull(buf, NULL, 10);
		if (s->content_length > c->rx->cfg->max_request_bytes)
			gw_net_stream_error(s, 413,
					    c->rx->ops->too_large_msg ? c->rx->ops->too_large_msg
								      : "content-length exceeds max_request_bytes");
	} else if (c->rx->cfg->auth.node_tokens_file && c->rx->ops->node_token) {
		/* One token per node: the token also says which node the request may speak for. */
		free(s->token_node);
		s->token_node = c->rx->ops->node_token(c->rx, value, valuelen);
		s->auth_ok = s->token_node != NULL;
	} else if (c->rx->cfg->auth.bearer_token_file) {
		gw_listener_token_recheck(c->rx);
		s->auth_ok = gw_listener_token_ok(c->rx, value, valuelen);
	}
}

static int on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name, size_t namelen,
		     const uint8_t *value, size_t valuelen, uint8_t flags, void *user_data)
{
	struct h2stream *s;

	if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
		return 0;
	s = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
	if (s)
		gw_net_stream_header(user_data, s, name, namelen, value, valuelen);
	return 0;
}

static void request_complete(struct h2stream *s)
{
	s->conn->rx->ops->request(s);
}

void gw_net_stream_end(struct h2stream *s)
{
	if (!s->responded)
		request_complete(s);
}

void gw_net_stream_headers_done(struct conn *c, struct h2stream *s, bool end_stream)
{
	struct gw_listener *rx = c->rx;

	c->got_headers = true;
	if (!s->auth_ok && !s->error_status) {
		rx->st.auth_failures++;
		gw_net_stream_error(s, 401, "missing or wrong bearer token (Authorization: Bearer <token>)");
	}
	if (rx->ops->content_type_msg && !s->have_ctype && !s->error_status)
		gw_net_stream_error(s, 415, rx->ops->content_type_msg);
	if (s->error_status) {
		if (s->error_status == 431)
			rx->st.headers_too_large++;
		gw_net_respond_error(s, s->error_status, 0, "%s", s->error_msg);
		return;
	}
	if (rx->shutting_down) {
		gw_net_respond_error(s, 503, 1000, "the gateway is shutting down; retry on another replica");
		return;
	}
	if (end_stream)
		request_complete(s);
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
			gw_net_stream_headers_done(c, s, frame->hd.flags & NGHTTP2_FLAG_END_STREAM);
		break;
	case NGHTTP2_DATA:
		s = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
		if (s && (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) && !s->responded)
			request_complete(s);
		break;
	case NGHTTP2_PING:
		if (frame->hd.flags & NGHTTP2_FLAG_ACK)
			c->ping_outstanding = false;
		break;
	case NGHTTP2_RST_STREAM:
		c->rx->st.streams_reset++;
		break;
	default:
		break;
	}
	return 0;
}

/* A GOAWAY with an error: nghttp2 found the client breaking the protocol or one of its limits. */
static int on_frame_send(nghttp2_session *session, const nghttp2_frame *frame, void *user_data)
{
	struct conn *c = user_data;

	if (frame->hd.type == NGHTTP2_GOAWAY && frame->goaway.error_code != NGHTTP2_NO_ERROR && !c->protocol_error) {
		c->protocol_error = true;
		c->rx->st.protocol_errors++;
		sr_log_debug(c->rx->ops->component, "closing the connection with GOAWAY", "id=%s peer=%s error=\"%s\"",
			     c->rx->c->id, c->peer, nghttp2_http2_strerror(frame->goaway.error_code));
	}
	return 0;
}

void gw_net_stream_data(struct conn *c, struct h2stream *s, const uint8_t *data, size_t len)
{
	struct gw_listener *rx = c->rx;

	if (s->len + len > rx->cfg->max_request_bytes) {
		gw_net_respond_error(s, 413, 0, "%s (%llu bytes)",
				     rx->ops->too_large_msg ? rx->ops->too_large_msg
							    : "request body exceeds max_request_bytes",
				     (unsigned long long)rx->cfg->max_request_bytes);
		return;
	}
	if (s->len + len > s->cap) {
		size_t cap = SR_MAX(s->cap * 2, s->len + len);
		if (s->content_length && s->cap == 0 && s->content_length >= s->len + len)
			cap = (size_t)s->content_length; /* allocate once when the size is announced */
		cap = (size_t)SR_MIN((uint64_t)cap, rx->cfg->max_request_bytes);
		if (rx->inflight_bytes + (cap - s->cap) > rx->cfg->max_inflight_bytes) {
			gw_net_respond_error(s, 503, 1000,
					     "the receiver buffers max_inflight_bytes (%llu) of requests; retry later",
					     (unsigned long long)rx->cfg->max_inflight_bytes);
			return;
		}
		/* Not grow.h: bounded by max_request_bytes and max_inflight_bytes; a Content-Length is taken at once. */
		uint8_t *nb = realloc(s->body, cap);
		if (!nb) {
			gw_net_respond_error(s, 503, 1000, "out of memory; retry later");
			return;
		}
		rx->inflight_bytes += cap - s->cap;
		s->body = nb;
		s->cap = cap;
	}
	memcpy(s->body + s->len, data, len);
	s->len += len;
}

static int on_data_chunk(nghttp2_session *session, uint8_t flags, int32_t stream_id, const uint8_t *data, size_t len,
			 void *user_data)
{
	struct h2stream *s = nghttp2_session_get_stream_user_data(session, stream_id);

	if (s && !s->responded)
		gw_net_stream_data(user_data, s, data, len);
	return 0;
}

static int on_stream_close(nghttp2_session *session, int32_t stream_id, uint32_t error_code, void *user_data)
{
	struct h2stream *s = nghttp2_session_get_stream_user_data(session, stream_id);
	if (s) {
		nghttp2_session_set_stream_user_data(session, stream_id, NULL);
		s->conn->last_request_ms = gw_net_now_ms(s->conn->rx);
		gw_net_stream_free(s);
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
	if (c->sniffing) {
		/* HTTP/2 starts with its client preface ("PRI * HTTP/2.0"), HTTP/1.1 with a method. */
		size_t k = SR_MIN(len, sizeof(c->sniff) - c->sniff_len);
		memcpy(c->sniff + c->sniff_len, data, k);
		c->sniff_len += k;
		data += k;
		len -= k;
		if (c->sniff_len < sizeof(c->sniff) && memcmp(c->sniff, "PRI ", c->sniff_len) == 0)
			return 0;
		c->sniffing = false;
		if (memcmp(c->sniff, "PRI ", c->sniff_len) != 0 && gw_h1_start(c) < 0)
			return -ENOMEM;
		if (feed_h2(c, c->sniff, c->sniff_len) < 0)
			return -EPROTO;
		if (len == 0 || c->closing)
			return 0;
	}
	if (c->h1)
		return gw_h1_feed(c, data, len);
	ssize_t r = nghttp2_session_mem_recv(c->h2, data, len);
	if (r < 0) {
		if (!c->protocol_error)
			c->rx->st.protocol_errors++;
		c->protocol_error = true;
		sr_log_debug(c->rx->ops->component, "HTTP/2 protocol error; closing the connection",
			     "id=%s peer=%s error=\"%s\"", c->rx->c->id, c->peer, nghttp2_strerror((int)r));
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
	if (c->rx->last_tls_warn_ms == 0 || gw_net_now_ms(c->rx) - c->rx->last_tls_warn_ms >= 60000) {
		c->rx->last_tls_warn_ms = gw_net_now_ms(c->rx);
		sr_log_warn(c->rx->ops->component,
			    "TLS handshake failed (further failures are logged at debug for a minute)",
			    "id=%s peer=%s stage=%s error=\"%s\"", c->rx->c->id, c->peer, what, err);
	} else
		sr_log_debug(c->rx->ops->component, "TLS handshake failed; closing the connection",
			     "id=%s peer=%s stage=%s error=\"%s\"", c->rx->c->id, c->peer, what, err);
}

static void on_read(uv_stream_t *stream, ssize_t n, const uv_buf_t *buf)
{
	struct conn *c = stream->data;

	if (n == 0)
		return;
	if (n < 0) {
		gw_net_conn_close(c);
		return;
	}
	c->last_recv_ms = gw_net_now_ms(c->rx);
	if (c->lingering) {
		c->lingered_bytes += (uint64_t)n;
		if (c->lingered_bytes > GW_NET_LINGER_BYTES)
			gw_net_conn_close(c);
		return;
	}
	if (!c->ssl) {
		if (feed_h2(c, (const uint8_t *)buf->base, (size_t)n) < 0) {
			gw_net_conn_flush(c); /* send the GOAWAY nghttp2 queued */
			gw_net_conn_close(c);
			return;
		}
		gw_net_conn_flush(c);
		return;
	}
	if (BIO_write(c->rbio, buf->base, (int)n) != n) {
		gw_net_conn_close(c);
		return;
	}
	if (!c->tls_done) {
		int r = SSL_do_handshake(c->ssl);
		if (r != 1) {
			int err = SSL_get_error(c->ssl, r);
			if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
				gw_net_conn_flush(c);
				return;
			}
			tls_failed(c, "handshake");
			gw_net_conn_flush(c); /* the alert */
			gw_net_conn_close(c);
			return;
		}
		c->tls_done = true;
		if (c->rx->ops->tls_accepted && c->rx->ops->tls_accepted(c) < 0) {
			gw_net_conn_close(c);
			return;
		}
	}
	for (;;) {
		uint8_t tmp[16384];
		int r = SSL_read(c->ssl, tmp, sizeof(tmp));
		if (r > 0) {
			if (feed_h2(c, tmp, (size_t)r) < 0) {
				gw_net_conn_flush(c);
				gw_net_conn_close(c);
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
		gw_net_conn_close(c);
		return;
	}
	gw_net_conn_flush(c);
}

static void peer_ip_set(struct conn *c, const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET) {
		memcpy(c->peer_ip, &((const struct sockaddr_in *)ss)->sin_addr, 4);
		c->peer_ip_len = 4;
	} else if (ss->ss_family == AF_INET6) {
		memcpy(c->peer_ip, &((const struct sockaddr_in6 *)ss)->sin6_addr, 16);
		c->peer_ip_len = 16;
	}
}

/* Open connections from c's address, c included. */
static uint64_t peer_connections(const struct conn *c)
{
	uint64_t n = 0;
	for (const struct conn *o = c->rx->conns; o; o = o->next)
		n += o->peer_ip_len == c->peer_ip_len && memcmp(o->peer_ip, c->peer_ip, c->peer_ip_len) == 0;
	return n;
}

/*
 * When every connection is taken, the oldest one that has not sent a request
 * yet makes room: agents send theirs right after connecting, so idle
 * connections (slowloris) cannot lock agents out for header_timeout.
 */
static bool evict_silent(struct gw_listener *rx, const struct conn *newest)
{
	struct conn *victim = NULL;
	for (struct conn *o = rx->conns; o; o = o->next)
		if (o != newest && !o->got_headers)
			victim = o; /* the list is newest first: the last match is the oldest */
	if (!victim)
		return false;
	sr_log_debug(rx->ops->component, "max_connections reached: closing the oldest connection without a request",
		     "id=%s peer=%s", rx->c->id, victim->peer);
	gw_net_conn_close(victim);
	return true;
}

/* nghttp2's memory: its per-session frame buffer, 16 KiB of which a response writes one page, in pages of its own. */
static void *h2_malloc(size_t n, void *ud)
{
	(void)ud;
	return gw_heap_paged_alloc(n, false);
}

static void h2_free(void *p, void *ud)
{
	(void)ud;
	gw_heap_paged_free(p);
}

static void *h2_calloc(size_t nmemb, size_t size, void *ud)
{
	(void)ud;
	return size && nmemb > SIZE_MAX / size ? NULL : gw_heap_paged_alloc(nmemb * size, true);
}

static void *h2_realloc(void *p, size_t n, void *ud)
{
	(void)ud;
	return gw_heap_paged_realloc(p, n);
}

static nghttp2_mem h2_mem = { .malloc = h2_malloc, .free = h2_free, .calloc = h2_calloc, .realloc = h2_realloc };

void gw_net_on_connection(uv_stream_t *server, int status)
{
	struct gw_listener *rx = server->data;
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
	c->serial = ++rx->conn_serial;
	uv_tcp_init(rx->loop, &c->tcp);
	c->tcp.data = c;
	rx->handles++;
	c->next = rx->conns;
	if (rx->conns)
		rx->conns->prev = c;
	rx->conns = c;
	rx->n_conns++;
	if (uv_accept(server, (uv_stream_t *)&c->tcp) < 0) {
		gw_net_conn_close(c);
		return;
	}
	if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &namelen) == 0) {
		sr_sockaddr_format((struct sockaddr *)&ss, c->peer, sizeof(c->peer));
		const struct sockaddr *sa = (const struct sockaddr *)&ss;
		const void *ip = sa->sa_family == AF_INET6 ? (const void *)&((struct sockaddr_in6 *)sa)->sin6_addr
							   : (const void *)&((struct sockaddr_in *)sa)->sin_addr;
		if (!inet_ntop(sa->sa_family, ip, c->peer_addr, sizeof(c->peer_addr)))
			c->peer_addr[0] = '\0';
		peer_ip_set(c, &ss);
	}
	c->sniffing = rx->ops->http1;
	if (rx->cfg->max_connections_per_peer && peer_connections(c) > rx->cfg->max_connections_per_peer) {
		rx->st.connections_refused_peer++;
		sr_log_debug(rx->ops->component, "connection refused: max_connections_per_peer reached",
			     "id=%s peer=%s max=%llu", rx->c->id, c->peer,
			     (unsigned long long)rx->cfg->max_connections_per_peer);
		gw_net_conn_close(c);
		return;
	}
	if (rx->n_conns > rx->cfg->max_connections && !rx->shutting_down && evict_silent(rx, c))
		rx->st.connections_evicted++;
	if (rx->n_conns > rx->cfg->max_connections || rx->shutting_down) {
		rx->st.connections_refused++;
		sr_log_debug(rx->ops->component, "connection refused: max_connections reached",
			     "id=%s peer=%s max=%llu", rx->c->id, c->peer,
			     (unsigned long long)rx->cfg->max_connections);
		gw_net_conn_close(c);
		return;
	}
	rx->st.connections_accepted++;
	uv_tcp_nodelay(&c->tcp, 1);
	c->accepted_ms = c->last_recv_ms = c->last_request_ms = gw_net_now_ms(rx);
	if (nghttp2_session_server_new3(&c->h2, rx->cbs, c, rx->h2opt, &h2_mem) != 0)
		goto fail;
	settings[0] = (nghttp2_settings_entry){ NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS,
						(uint32_t)rx->cfg->max_concurrent_streams };
	/* Windows large enough for big bodies in few round trips; memory is bounded by our own limits. */
	settings[1] = (nghttp2_settings_entry){ NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1u << 20 };
	settings[2] = (nghttp2_settings_entry){ NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE,
						(uint32_t)rx->cfg->max_header_list_bytes };
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
		gw_net_conn_flush(c);
	return;
fail:
	gw_net_conn_close(c);
}

/* ---- GOAWAY ---- */

void gw_net_conn_goaway(struct conn *c)
{
	if (c->goaway || c->closing)
		return;
	c->goaway = true;
	if (c->h1 || c->sniffing) {
		gw_h1_goaway(c);
		return;
	}
	nghttp2_submit_goaway(c->h2, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(c->h2),
			      NGHTTP2_NO_ERROR, NULL, 0);
	gw_net_conn_flush(c);
}

/* The nghttp2 callbacks of every connection. */
void gw_net_h2_callbacks(nghttp2_session_callbacks *cbs)
{
	nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, on_begin_headers);
	nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data_chunk);
	nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
	nghttp2_session_callbacks_set_on_frame_send_callback(cbs, on_frame_send);
}
