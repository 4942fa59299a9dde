/* SPDX-License-Identifier: Apache-2.0 */
/* HTTP/1.1 requests on the receivers' connections (gateway/net/h1.h). */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/net/h1.h"
#include "gateway/net/conn.h"
#include "common/grow.h"
#include "common/http1.h"
#include "common/macro.h"

enum h1_state {
	H1_HEAD,       /* reading the request line and headers */
	H1_BODY,       /* Content-Length body: left bytes to come */
	H1_CHUNK_LINE, /* chunked: a chunk-size line */
	H1_CHUNK_DATA, /* chunked: left bytes of the chunk */
	H1_CHUNK_CRLF, /* chunked: the CRLF after a chunk */
	H1_TRAILERS,   /* chunked: trailer lines up to an empty one */
	H1_WAIT,       /* the request is complete and being answered */
	H1_DISCARD,    /* answered early: reading discard_left bytes of its body, then closing */
	H1_CLOSED,     /* nothing more is read */
};

#define LINE_MAX_BYTES 256

struct gw_h1 {
	enum h1_state st;
	char *head; /* grows by doubling up to max_head_bytes(): most heads are a few hundred bytes */
	size_t head_len, head_cap;
	char line[LINE_MAX_BYTES];
	size_t line_len;
	size_t trailer_bytes;
	uint64_t left, discard_left;
	uint64_t head_started_ms; /* the first byte of the head being read; 0 when none is */
	bool keep_alive, expect_continue, close_after;
	struct h2stream *cur;
	int32_t next_id;
	uint8_t *out;
	size_t out_len, out_off, out_cap;
};

int gw_h1_start(struct conn *c)
{
	c->h1 = calloc(1, sizeof(*c->h1));
	if (!c->h1)
		return -ENOMEM;
	c->h1->next_id = 1;
	return 0;
}

void gw_h1_free(struct gw_h1 *h)
{
	if (!h)
		return;
	free(h->out);
	free(h->head);
	free(h);
}

struct h2stream *gw_h1_current(struct conn *c)
{
	return c->h1 ? c->h1->cur : NULL;
}

static int out_add(struct gw_h1 *h, const void *d, size_t n)
{
	if (h->out_len + n > h->out_cap) {
		size_t cap = SR_MAX(h->out_cap * 2, h->out_len + n);
		/* Not grow.h: a large body is taken at its size, not rounded up to a power of two of slack. */
		uint8_t *p = realloc(h->out, cap);
		if (!p)
			return -ENOMEM;
		h->out = p;
		h->out_cap = cap;
	}
	if (n)
		memcpy(h->out + h->out_len, d, n);
	h->out_len += n;
	return 0;
}

ssize_t gw_h1_pull(struct conn *c, const uint8_t **data)
{
	struct gw_h1 *h = c->h1;
	if (h->out_off == h->out_len) {
		h->out_off = h->out_len = 0;
		return 0;
	}
	*data = h->out + h->out_off;
	ssize_t n = (ssize_t)(h->out_len - h->out_off);
	h->out_off = h->out_len;
	return n;
}

bool gw_h1_finished(struct conn *c)
{
	struct gw_h1 *h = c->h1;
	return h->close_after && !h->cur && h->st != H1_DISCARD && h->out_off == h->out_len;
}

uint64_t gw_h1_head_started_ms(struct conn *c)
{
	return c->h1 && c->h1->st == H1_HEAD ? c->h1->head_started_ms : 0;
}

bool gw_h1_discarding(struct conn *c)
{
	return c->h1 && c->h1->st == H1_DISCARD;
}

void gw_h1_goaway(struct conn *c)
{
	if (!c->h1) {
		gw_net_conn_close(c); /* the protocol is not even known yet */
		return;
	}
	c->h1->close_after = true;
	if (!c->h1->cur && c->h1->st != H1_DISCARD)
		c->h1->st = H1_CLOSED;
	gw_net_conn_flush(c);
}

void gw_h1_respond(struct h2stream *s, int status, const char *content_type, uint8_t *body, size_t len,
		   uint32_t retry_after_ms)
{
	struct conn *c = s->conn;
	struct gw_h1 *h = c->h1;
	char hdr[512], retry[48] = "";
	int n;

	/* What comes next on this connection: another request, or (after an early answer) the end. */
	switch (h->st) {
	case H1_WAIT:
		if (h->keep_alive && !h->close_after && !c->rx->ops->http1_close)
			h->st = H1_HEAD;
		else {
			h->close_after = true;
			h->st = H1_CLOSED;
		}
		break;
	case H1_BODY:
	case H1_CHUNK_LINE:
	case H1_CHUNK_DATA:
	case H1_CHUNK_CRLF:
	case H1_TRAILERS:
		h->close_after = true;
		if (h->expect_continue) {
			h->st = H1_CLOSED; /* the client waits for our word before sending the body */
			break;
		}
		h->discard_left = h->st == H1_BODY ? SR_MIN(h->left, (uint64_t)GW_H1_MAX_DISCARD_BYTES)
						   : GW_H1_MAX_DISCARD_BYTES;
		h->st = h->discard_left ? H1_DISCARD : H1_CLOSED;
		break;
	default:
		h->close_after = true;
		if (h->st != H1_DISCARD)
			h->st = H1_CLOSED;
		break;
	}
	if (retry_after_ms)
		snprintf(retry, sizeof(retry), "Retry-After: %u\r\n", (retry_after_ms + 999) / 1000);
	n = snprintf(hdr, sizeof(hdr), "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s%s\r\n", status,
		     sr_http1_reason_phrase(status), content_type, len, retry,
		     h->close_after ? "Connection: close\r\n" : "");
	if (n < 0 || (size_t)n >= sizeof(hdr) || out_add(h, hdr, (size_t)n) < 0 ||
	    out_add(h, body, s->head_only ? 0 : len) < 0) {
		h->close_after = true;
		h->st = H1_CLOSED;
	}
	free(body);
	h->cur = NULL;
	c->last_request_ms = gw_net_now_ms(c->rx);
	gw_net_stream_free(s);
}

/* ---- the request head ---- */

/* The listener's bound on a request head's bytes (gw_listener_config.max_head_bytes). */
static size_t max_head_bytes(const struct conn *c)
{
	uint64_t n = c->rx->cfg->max_head_bytes;
	return n ? (size_t)n : GW_H1_MAX_HEAD_BYTES;
}

/*
 * Parses h->head (ending in CRLF CRLF), opens the request's stream and hands
 * it the headers. A malformed head is answered 400 (431 for too many header
 * lines) and ends the connection.
 */
static int head_parse(struct conn *c)
{
	struct gw_h1 *h = c->h1;
	struct sr_http1_request req;
	struct sr_http1_span name, value;
	const char *err = NULL;
	int status = 400;
	size_t pos = 0;
	struct h2stream *s;

	s = gw_net_stream_new(c, h->next_id);
	if (!s)
		return -ENOMEM;
	h->next_id += 2;
	h->cur = s;
	h->expect_continue = false;
	h->st = H1_CLOSED; /* until the framing is known */

	/* What the head reader (common/http1.h) is held to: the head size, and header lines, which it bounds too. */
	const struct sr_http1_limits limits = {
		.max_head_bytes = max_head_bytes(c),
		.max_headers = c->rx->cfg->max_head_lines ? (size_t)c->rx->cfg->max_head_lines : GW_H1_MAX_HEADERS,
	};
	if (sr_http1_parse(h->head, h->head_len, &limits, &req) <= 0) {
		err = req.reason ? req.reason : "malformed HTTP/1.1 request head";
		status = req.reason ? req.status : 400;
		goto bad;
	}
	if (req.target.p[0] != '/') {
		err = "the request target must be a path (origin-form)";
		goto bad;
	}
	gw_net_stream_header(c, s, (const uint8_t *)":method", 7, (const uint8_t *)req.method.p, req.method.len);
	gw_net_stream_header(c, s, (const uint8_t *)":path", 5, (const uint8_t *)req.path.p, req.path.len);
	while (sr_http1_header_next(&req, &pos, &name, &value)) {
		/* What frames the request is the parser's; the receivers see the rest, names in lower case. */
		if (sr_http1_span_is(name, "transfer-encoding") || sr_http1_span_is(name, "connection") ||
		    sr_http1_span_is(name, "expect") || sr_http1_span_is(name, "te") || sr_http1_span_is(name, "host"))
			continue;
		char *lname = h->head + (name.p - h->head); /* our own copy of the head */
		for (size_t i = 0; i < name.len; i++)
			lname[i] = (char)tolower((unsigned char)lname[i]);
		gw_net_stream_header(c, s, (const uint8_t *)lname, name.len, (const uint8_t *)value.p, value.len);
	}
	h->keep_alive = req.keep_alive;
	h->expect_continue = req.expect_continue;
	if (req.chunked)
		h->st = H1_CHUNK_LINE;
	else if (req.content_length) {
		h->st = H1_BODY;
		h->left = req.content_length;
	} else
		h->st = H1_WAIT;
	gw_net_stream_headers_done(c, s, h->st == H1_WAIT);
	if (h->cur == s && !s->responded && h->expect_continue && h->st != H1_WAIT) {
		static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
		if (out_add(h, cont, sizeof(cont) - 1) < 0)
			return -ENOMEM;
	}
	return 0;
bad:
	h->close_after = true;
	gw_net_stream_error(s, status, err);
	gw_net_stream_headers_done(c, s, true);
	return 0;
}

/* ---- input ---- */

static void body_bytes(struct conn *c, const uint8_t *d, size_t k)
{
	struct gw_h1 *h = c->h1;
	h->left -= k;
	if (h->cur && !h->cur->responded)
		gw_net_stream_data(c, h->cur, d, k);
}

static void body_done(struct conn *c)
{
	struct gw_h1 *h = c->h1;
	h->st = H1_WAIT;
	if (h->cur)
		gw_net_stream_end(h->cur);
}

/* Reads one CRLF-terminated line into h->line; 1 when complete, 0 when more is needed, -1 when too long. */
static int line_read(struct gw_h1 *h, const uint8_t **d, size_t *n)
{
	while (*n) {
		char ch = (char)**d;
		(*d)++;
		(*n)--;
		if (h->line_len == sizeof(h->line) - 1)
			return -1;
		h->line[h->line_len++] = ch;
		if (ch == '\n') {
			if (h->line_len < 2 || h->line[h->line_len - 2] != '\r')
				return -1;
			h->line[h->line_len - 2] = '\0';
			h->line_len = 0;
			return 1;
		}
	}
	return 0;
}

static void framing_error(struct conn *c, const char *msg)
{
	struct gw_h1 *h = c->h1;
	h->st = H1_CLOSED;
	h->close_after = true;
	if (h->cur && !h->cur->responded)
		gw_net_respond_error(h->cur, 400, 0, "%s", msg);
}

int gw_h1_feed(struct conn *c, const uint8_t *d, size_t n)
{
	struct gw_h1 *h = c->h1;
	size_t max_head = max_head_bytes(c);
	int r;

	while (n > 0 && !c->closing) {
		size_t k;
		switch (h->st) {
		case H1_HEAD:
			/* Empty lines before the request line count as part of its head's time too. */
			if (!h->head_started_ms)
				h->head_started_ms = SR_MAX(gw_net_now_ms(c->rx), 1);
			for (k = 0; k < n;) {
				if (h->head_len == max_head)
					break;
				/* Below max_head here: the bound cannot fail the growth. */
				if (sr_grow_max((void **)&h->head, &h->head_cap, h->head_len + 1, 1, 1024, max_head) <
				    0)
					return -ENOMEM;
				h->head[h->head_len++] = (char)d[k++];
				/* Empty lines before a request line are ignored (RFC 9112 2.2). */
				if (h->head_len == 2 && memcmp(h->head, "\r\n", 2) == 0)
					h->head_len = 0;
				else if (h->head_len >= 4 && memcmp(h->head + h->head_len - 4, "\r\n\r\n", 4) == 0)
					break;
			}
			d += k;
			n -= k;
			if (h->head_len >= 4 && memcmp(h->head + h->head_len - 4, "\r\n\r\n", 4) == 0) {
				r = head_parse(c);
				h->head_len = 0;
				h->head_started_ms = 0;
				if (r < 0)
					return r;
			} else if (h->head_len == max_head) {
				/* Over a limit: 431, as common/http1.h answers a head with too many lines. */
				struct h2stream *s = gw_net_stream_new(c, h->next_id);
				h->head_len = 0;
				if (!s)
					return -ENOMEM;
				h->cur = s;
				h->st = H1_CLOSED;
				h->close_after = true;
				c->rx->st.headers_too_large++;
				gw_net_respond_error(s, 431, 0, "request line and headers exceed %zu bytes", max_head);
			}
			break;
		case H1_BODY:
		case H1_CHUNK_DATA:
			k = (size_t)SR_MIN((uint64_t)n, h->left);
			body_bytes(c, d, k);
			d += k;
			n -= k;
			if (h->st == H1_DISCARD || h->st == H1_CLOSED)
				break; /* answered early (e.g. too large) */
			if (h->left == 0) {
				if (h->st == H1_BODY)
					body_done(c);
				else
					h->st = H1_CHUNK_CRLF;
			}
			break;
		case H1_CHUNK_LINE:
			r = line_read(h, &d, &n);
			if (r < 0) {
				framing_error(c, "malformed chunk-size line");
				break;
			}
			if (r == 0)
				break;
			{
				char *e;
				errno = 0;
				unsigned long long sz = strtoull(h->line, &e, 16);
				if (!isxdigit((unsigned char)h->line[0]) || errno || (*e && *e != ';' && *e != ' ')) {
					framing_error(c, "malformed chunk-size line");
					break;
				}
				h->left = sz;
				h->st = sz ? H1_CHUNK_DATA : H1_TRAILERS;
				h->trailer_bytes = 0;
			}
			break;
		case H1_CHUNK_CRLF:
			r = line_read(h, &d, &n);
			if (r < 0 || (r == 1 && h->line[0] != '\0'))
				framing_error(c, "chunk data not followed by CRLF");
			else if (r == 1)
				h->st = H1_CHUNK_LINE;
			break;
		case H1_TRAILERS:
			r = line_read(h, &d, &n);
			if (r < 0 || h->trailer_bytes > max_head) {
				framing_error(c, "malformed or too long trailer section");
				break;
			}
			if (r == 1) {
				if (h->line[0] == '\0')
					body_done(c);
				else
					h->trailer_bytes += strlen(h->line) + 2; /* trailers are ignored */
			}
			break;
		case H1_WAIT:
			/* More bytes while the request is still processed: its answer is the last on this connection. */
			h->close_after = true;
			h->st = H1_CLOSED;
			return 0;
		case H1_DISCARD:
			k = (size_t)SR_MIN((uint64_t)n, h->discard_left);
			h->discard_left -= k;
			d += k;
			n -= k;
			if (h->discard_left == 0)
				h->st = H1_CLOSED;
			break;
		case H1_CLOSED:
			return 0;
		}
	}
	return 0;
}
