// SPDX-License-Identifier: Apache-2.0
/*
 * The receivers' HTTP/1.1 connections (gateway/net/h1.c, heads read by common/http1.c) on
 * arbitrary bytes, as a connection of a receiver that serves HTTP/1.1 (the
 * otlp receiver) feeds it: request lines, headers, Content-Length and
 * chunked bodies, keep-alive and pipelined requests, early answers and the
 * body thrown away after them. The first input byte picks how the rest is
 * cut into reads (1 to 64 bytes, or all at once), so every parsing state
 * meets a read boundary. A test receiver answers each complete request
 * 200 (its body echoed), 413 or 503 (by the body's first byte). Nothing may
 * crash, leak, read out of bounds or lose track of buffered bytes: at the
 * end the receiver holds no request bytes (inflight_bytes is 0), and what
 * was written is a sequence of HTTP/1.1 answers.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "component.h"
#include "gateway/net/conn.h"
#include "gateway/net/h1.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void t_header(struct h2stream *s, const uint8_t *name, size_t namelen, const uint8_t *value, size_t valuelen)
{
	if (namelen == 5 && memcmp(name, ":path", 5) == 0 && !(valuelen == 2 && memcmp(value, "/p", 2) == 0))
		gw_net_stream_error(s, 404, "unknown path");
	else if (namelen == 12 && memcmp(name, "content-type", 12) == 0)
		s->have_ctype = true;
	else if (namelen == 16 && memcmp(name, "content-encoding", 16) == 0)
		s->gzip = true;
}

static void t_request(struct h2stream *s)
{
	uint8_t *body = NULL;

	if (s->len && s->body[0] == 'T') {
		gw_net_respond_error(s, 413, 0, "too large");
		return;
	}
	if (s->len && s->body[0] == 'U') {
		gw_net_respond_error(s, 503, 1500, "unavailable");
		return;
	}
	if (s->len) {
		body = malloc(s->len);
		if (body)
			memcpy(body, s->body, s->len);
	}
	gw_net_respond_ex(s, 200, "application/x-protobuf", body, body ? s->len : 0, 0, NULL, NULL);
}

static void t_error(struct h2stream *s, int status, uint32_t retry_after_ms, const char *msg)
{
	char *body = strdup(msg);
	gw_net_respond_ex(s, status, "text/plain", (uint8_t *)body, body ? strlen(body) : 0, retry_after_ms, NULL,
			  NULL);
}

static const struct gw_conn_ops t_ops = {
	.header = t_header,
	.request = t_request,
	.error = t_error,
	.http1 = true,
	.component = "fuzz/http1",
	.content_type_msg = "content-type is needed",
	.too_large_msg = "request body exceeds the fuzz limit",
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uv_loop_t loop;
	static bool loop_init;
	static struct gw_listener_config cfg = {
		.max_request_bytes = 4096,
		.max_inflight_bytes = 1 << 20,
		.max_concurrent_streams = 1,
	};
	static struct gw_component comp = { .id = (char *)"fuzz" };
	struct gw_listener *rx;
	struct conn *c;
	size_t step;
	bool wrote = false;

	if (size == 0)
		return 0;
	if (!loop_init) {
		uv_loop_init(&loop);
		loop_init = true;
	}
	rx = calloc(1, sizeof(*rx));
	c = calloc(1, sizeof(*c));
	if (!rx || !c || (c->rx = rx, gw_h1_start(c)) < 0) {
		free(rx);
		free(c);
		return 0;
	}
	rx->c = &comp;
	rx->cfg = &cfg;
	rx->ops = &t_ops;
	rx->loop = &loop;
	step = data[0] % 66;
	step = step == 65 ? size : step + 1;
	data++;
	size--;
	for (size_t off = 0; off < size; off += step) {
		size_t n = size - off < step ? size - off : step;
		const uint8_t *out;
		ssize_t o;
		if (gw_h1_feed(c, data + off, n) < 0)
			break;
		while ((o = gw_h1_pull(c, &out)) > 0) {
			/* Answers are whole: the first bytes ever written start one. */
			if (!wrote && (o < 9 || memcmp(out, "HTTP/1.1 ", 9) != 0))
				abort();
			wrote = true;
		}
		if (gw_h1_finished(c))
			break;
	}
	while (c->streams)
		gw_net_stream_free(c->streams);
	if (rx->inflight_bytes != 0)
		abort(); /* request bytes lost track of */
	gw_h1_free(c->h1);
	free(c);
	free(rx);
	return 0;
}
