/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The HTTP/1.x request head (RFC 9112), read without I/O and without
 * allocating: given the bytes received so far, sr_http1_parse() says that the
 * head is not complete yet, or what it holds (request line, the headers that
 * frame the request or that the tree's servers read, an iterator over all of
 * them), or what is wrong with it, with the HTTP status that answers it.
 * Every server of the tree reads its requests' heads with it: the gateway's
 * connections (gateway/net/h1.c: the receivers' and the telemetry server's)
 * and the agent's /metrics server (agent/metrics.c).
 *
 * What is read strictly: a request line of a token method, one space, a
 * target without spaces or control bytes, one space and HTTP/1.0 or HTTP/1.1;
 * header names of token characters followed at once by a colon (so an
 * obsolete folded line is an error); values without control bytes but HTAB;
 * one Content-Length of digits (repeats with the same value are one), only
 * `Transfer-Encoding: chunked`, never both; only `Expect: 100-continue`.
 * Empty lines before the request line are skipped (RFC 9112 2.2). Lines end
 * in CRLF; a bare LF too when the limits allow it (RFC 9112 2.2 says a
 * server may).
 */
#ifndef SR_HTTP1_H
#define SR_HTTP1_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A piece of the parsed buffer (not NUL-terminated). */
struct sr_http1_span {
	const char *p;
	size_t len;
};

struct sr_http1_limits {
	/* Bytes of the head, empty lines before it and the empty line ending it included. */
	size_t max_head_bytes;
	/* Header lines. */
	size_t max_headers;
	/* A bare LF ends a line as CRLF does (for servers that curl-by-hand clients talk to). */
	bool bare_lf;
};

struct sr_http1_request {
	/* The head as given (from the request line on; empty lines before it are skipped). */
	struct sr_http1_span method, target;
	/* The target up to its query ("?"). */
	struct sr_http1_span path;
	/* 0 for HTTP/1.0, 1 for HTTP/1.1. */
	int minor_version;
	size_t n_headers;
	/* Framing. */
	bool has_content_length, chunked;
	uint64_t content_length;
	/* Connection: its close and keep-alive options, and what they mean for this version. */
	bool conn_close, conn_keep_alive, keep_alive;
	bool expect_continue;
	/* The last value of each (len 0 and p NULL when absent). */
	struct sr_http1_span host, content_type, authorization;
	/* The header lines, for sr_http1_header_next(). */
	const char *headers, *headers_end;
	/* The error (sr_http1_parse() < 0): the status that answers it and why, a static sentence. */
	int status;
	const char *reason;
};

/*
 * Reads the head at buf[0..len). Returns its length in bytes (the empty line
 * that ends it included: what follows is the body or the next request), 0 when
 * it is not complete yet and within limits, or -EBADMSG (malformed: ret->status
 * 400) or -EMSGSIZE (over a limit: ret->status 431), ret->reason saying what.
 */
int sr_http1_parse(const char *buf, size_t len, const struct sr_http1_limits *limits, struct sr_http1_request *ret);

/*
 * The next header of a parsed request after *pos (start with 0): its name (as
 * sent; names are case-insensitive) and value (without the spaces around it).
 * False after the last.
 */
bool sr_http1_header_next(const struct sr_http1_request *r, size_t *pos, struct sr_http1_span *ret_name,
			  struct sr_http1_span *ret_value);

/* Whether a span equals s, ignoring ASCII case. */
bool sr_http1_span_is(struct sr_http1_span span, const char *s);

/* The reason phrase of a status ("Not Found"), "Unknown" for one the tree does not send. */
const char *sr_http1_reason_phrase(int status);

#endif
