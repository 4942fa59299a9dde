/* SPDX-License-Identifier: Apache-2.0 */
/* The telemetry HTTP/1.1 server (telemetry.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/http1.h"
#include "common/macro.h"
#include "common/netaddr.h"
#include "telemetry.h"

struct tconn {
	uv_tcp_t tcp;
	uv_timer_t timer;
	uv_write_t wreq;
	uv_shutdown_t sreq;
	struct gw_telemetry *t;
	struct tconn *prev, *next;
	char buf[GW_TELEMETRY_MAX_REQUEST_BYTES];
	size_t len;
	char *out;
	bool responded, closing, draining;
	size_t drained;
	int handles; /* open handles; freed when 0 */
};

struct gw_telemetry {
	uv_tcp_t listener;
	uv_loop_t *loop;
	gw_telemetry_handler handler;
	void *userdata;
	struct tconn *conns;
	unsigned n_conns;
	bool closing;
	int handles; /* listener + connections */
	char address[64];
};

static void telemetry_maybe_free(struct gw_telemetry *t)
{
	if (t->closing && t->handles == 0)
		free(t);
}

static void conn_handle_closed(uv_handle_t *h)
{
	struct tconn *c = h->data;
	struct gw_telemetry *t = c->t;
	if (--c->handles > 0)
		return;
	free(c->out);
	free(c);
	t->handles--;
	telemetry_maybe_free(t);
}

static void conn_close(struct tconn *c)
{
	if (c->closing)
		return;
	c->closing = true;
	if (c->prev)
		c->prev->next = c->next;
	else
		c->t->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	c->t->n_conns--;
	uv_close((uv_handle_t *)&c->tcp, conn_handle_closed);
	uv_close((uv_handle_t *)&c->timer, conn_handle_closed);
}

/*
 * A lingering close: closing a socket that still has unread request bytes
 * makes the kernel send RST, and the client may lose the response we just
 * wrote (a 431 for an oversized head, say). So after the response, send FIN
 * and read and discard until the client closes, at most
 * GW_TELEMETRY_LINGER_BYTES or GW_TELEMETRY_LINGER_MS.
 */
#define GW_TELEMETRY_LINGER_MS	  2000
#define GW_TELEMETRY_LINGER_BYTES (256 * 1024)

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);
static void on_timeout(uv_timer_t *timer);

static void on_shutdown(uv_shutdown_t *req, int status)
{
	if (status < 0)
		conn_close(req->data);
}

static void on_written(uv_write_t *req, int status)
{
	struct tconn *c = req->data;

	if (status < 0 || c->closing) {
		conn_close(c);
		return;
	}
	c->draining = true;
	c->len = 0;
	c->sreq.data = c;
	if (uv_shutdown(&c->sreq, (uv_stream_t *)&c->tcp, on_shutdown) < 0 ||
	    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) < 0) {
		conn_close(c);
		return;
	}
	uv_timer_start(&c->timer, on_timeout, GW_TELEMETRY_LINGER_MS, 0);
}

static void respond(struct tconn *c, int status, const char *ctype, const char *body, size_t len, bool head)
{
	char hdr[256];
	int hl;
	uv_buf_t b;

	c->responded = true;
	uv_read_stop((uv_stream_t *)&c->tcp);
	uv_timer_stop(&c->timer);
	hl = snprintf(hdr, sizeof(hdr),
		      "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n", status,
		      sr_http1_reason_phrase(status), ctype, len);
	c->out = malloc((size_t)hl + (head ? 0 : len));
	if (!c->out) {
		conn_close(c);
		return;
	}
	memcpy(c->out, hdr, (size_t)hl);
	if (!head && len)
		memcpy(c->out + hl, body, len);
	b = uv_buf_init(c->out, (unsigned)((size_t)hl + (head ? 0 : len)));
	c->wreq.data = c;
	if (uv_write(&c->wreq, (uv_stream_t *)&c->tcp, &b, 1, on_written) < 0)
		conn_close(c);
}

/* What the head reader (common/http1.h) is held to. */
static const struct sr_http1_limits head_limits = {
	.max_head_bytes = GW_TELEMETRY_MAX_REQUEST_BYTES,
	.max_headers = GW_TELEMETRY_MAX_HEADERS,
};

/* A complete head in c->buf: its answer. */
static void handle_request(struct tconn *c, const struct sr_http1_request *req)
{
	char path[1024];
	char *body = NULL;
	size_t blen = 0;
	int status = 500;
	const char *ctype = "text/plain; charset=utf-8";

	if (req->method.len >= 16 || req->target.len >= sizeof(path)) {
		static const char msg[] = "malformed request line\n";
		respond(c, 400, ctype, msg, sizeof(msg) - 1, false);
		return;
	}
	memcpy(path, req->path.p, req->path.len); /* queries are ignored */
	path[req->path.len] = '\0';
	bool head = req->method.len == 4 && memcmp(req->method.p, "HEAD", 4) == 0;
	if (!head && !(req->method.len == 3 && memcmp(req->method.p, "GET", 3) == 0)) {
		static const char msg[] = "only GET and HEAD\n";
		respond(c, 405, ctype, msg, sizeof(msg) - 1, false);
		return;
	}
	c->t->handler(c->t->userdata, path, &status, &body, &blen, &ctype);
	respond(c, status, ctype, body ? body : "", body ? blen : 0, head);
	free(body);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	struct tconn *c = h->data;

	if (c->draining) {
		*buf = uv_buf_init(c->buf, (unsigned)sizeof(c->buf));
		return;
	}
	*buf = uv_buf_init(c->buf + c->len, (unsigned)(sizeof(c->buf) - c->len));
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	struct tconn *c = s->data;
	struct sr_http1_request req;
	int r;

	if (n < 0) {
		conn_close(c);
		return;
	}
	if (c->draining) {
		c->drained += (size_t)n;
		if (c->drained > GW_TELEMETRY_LINGER_BYTES)
			conn_close(c);
		return;
	}
	if (n == 0 || c->responded)
		return;
	c->len += (size_t)n;
	r = sr_http1_parse(c->buf, c->len, &head_limits, &req);
	if (r > 0)
		handle_request(c, &req);
	else if (r < 0) {
		char msg[128];
		int len = snprintf(msg, sizeof(msg), "%s\n", req.reason);
		respond(c, req.status, "text/plain; charset=utf-8", msg, (size_t)SR_MIN(len, (int)sizeof(msg) - 1),
			false);
	}
}

static void on_timeout(uv_timer_t *timer)
{
	conn_close(timer->data);
}

static void on_connection(uv_stream_t *server, int status)
{
	struct gw_telemetry *t = server->data;
	struct tconn *c;

	if (status < 0)
		return;
	c = calloc(1, sizeof(*c));
	if (!c)
		return;
	c->t = t;
	uv_tcp_init(t->loop, &c->tcp);
	uv_timer_init(t->loop, &c->timer);
	c->tcp.data = c->timer.data = c;
	c->handles = 2;
	t->handles++;
	c->next = t->conns;
	if (t->conns)
		t->conns->prev = c;
	t->conns = c;
	t->n_conns++;
	if (uv_accept(server, (uv_stream_t *)&c->tcp) < 0 || t->n_conns > GW_TELEMETRY_MAX_CONNECTIONS) {
		conn_close(c);
		return;
	}
	uv_timer_start(&c->timer, on_timeout, GW_TELEMETRY_REQUEST_TIMEOUT_MS, 0);
	if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) < 0)
		conn_close(c);
}

static void listener_closed(uv_handle_t *h)
{
	struct gw_telemetry *t = h->data;
	t->handles--;
	telemetry_maybe_free(t);
}

struct gw_telemetry *gw_telemetry_new(uv_loop_t *loop, const char *address, gw_telemetry_handler handler,
				      void *userdata, char *errbuf, size_t errsize)
{
	struct sockaddr_storage ss;
	struct gw_telemetry *t;
	int namelen = sizeof(ss);
	int r;

	r = sr_parse_endpoint(address, &ss, errbuf, errsize);
	if (r < 0) {
		errno = -r;
		return NULL;
	}
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->loop = loop;
	t->handler = handler;
	t->userdata = userdata;
	uv_tcp_init(loop, &t->listener);
	t->listener.data = t;
	t->handles = 1;
	if ((r = uv_tcp_bind(&t->listener, (struct sockaddr *)&ss, 0)) < 0 ||
	    (r = uv_listen((uv_stream_t *)&t->listener, 128, on_connection)) < 0) {
		snprintf(errbuf, errsize, "cannot listen on %s: %s", address, uv_strerror(r));
		t->closing = true;
		uv_close((uv_handle_t *)&t->listener, listener_closed);
		errno = -r;
		return NULL;
	}
	uv_tcp_getsockname(&t->listener, (struct sockaddr *)&ss, &namelen);
	sr_sockaddr_format((struct sockaddr *)&ss, t->address, sizeof(t->address));
	return t;
}

const char *gw_telemetry__address(const struct gw_telemetry *t)
{
	return t->address;
}

void gw_telemetry_close(struct gw_telemetry *t)
{
	if (!t || t->closing)
		return;
	t->closing = true;
	while (t->conns)
		conn_close(t->conns);
	uv_close((uv_handle_t *)&t->listener, listener_closed);
}
