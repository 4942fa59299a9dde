/* SPDX-License-Identifier: Apache-2.0 */
/* The HTTP/1.x request head (http1.h). */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/http1.h"

static bool is_tchar(unsigned char ch)
{
	return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
	       (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

static char lower(char ch)
{
	return ch >= 'A' && ch <= 'Z' ? (char)(ch - 'A' + 'a') : ch;
}

bool sr_http1_span_is(struct sr_http1_span span, const char *s)
{
	size_t n = strlen(s);
	if (span.len != n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (lower(span.p[i]) != lower(s[i]))
			return false;
	return true;
}

/*
 * The line at p (before end): its content [p, *ret_eol) and where the next
 * begins (*ret_next). False when no line end is there yet.
 */
static bool line_at(const char *p, const char *end, bool bare_lf, const char **ret_eol, const char **ret_next)
{
	const char *lf = p < end ? memchr(p, '\n', (size_t)(end - p)) : NULL;
	if (!lf)
		return false;
	*ret_next = lf + 1;
	*ret_eol = lf > p && lf[-1] == '\r' ? lf - 1 : lf;
	/* Without bare_lf a lone LF is not a line end: the line is malformed (its content keeps the LF). */
	if (!bare_lf && *ret_eol == lf)
		*ret_eol = lf + 1;
	return true;
}

static struct sr_http1_span trim(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	while (end > p && (end[-1] == ' ' || end[-1] == '\t'))
		end--;
	return (struct sr_http1_span){ p, (size_t)(end - p) };
}

/* Is the comma-separated option list v holding option (case-insensitive)? */
static bool has_option(struct sr_http1_span v, const char *option)
{
	const char *p = v.p, *end = v.p + v.len;
	while (p < end) {
		const char *comma = memchr(p, ',', (size_t)(end - p));
		const char *e = comma ? comma : end;
		if (sr_http1_span_is(trim(p, e), option))
			return true;
		p = e + 1;
	}
	return false;
}

static int fail(struct sr_http1_request *r, int err, int status, const char *reason)
{
	r->status = status;
	r->reason = reason;
	return err;
}

static int bad(struct sr_http1_request *r, const char *reason)
{
	return fail(r, -EBADMSG, 400, reason);
}

static int request_line(const char *p, const char *eol, struct sr_http1_request *r)
{
	const char *sp1 = memchr(p, ' ', (size_t)(eol - p));
	const char *sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t)(eol - sp1 - 1)) : NULL;

	if (!sp1 || !sp2 || sp1 == p || sp2 == sp1 + 1)
		return bad(r, "malformed HTTP/1.1 request line");
	for (const char *m = p; m < sp1; m++)
		if (!is_tchar((unsigned char)*m))
			return bad(r, "malformed HTTP/1.1 request line (method)");
	for (const char *t = sp1 + 1; t < sp2; t++)
		if ((unsigned char)*t <= ' ' || *t == 0x7f)
			return bad(r, "malformed HTTP/1.1 request line (target)");
	r->method = (struct sr_http1_span){ p, (size_t)(sp1 - p) };
	r->target = (struct sr_http1_span){ sp1 + 1, (size_t)(sp2 - sp1 - 1) };
	r->path = r->target;
	const char *q = memchr(r->target.p, '?', r->target.len);
	if (q)
		r->path.len = (size_t)(q - r->target.p);
	struct sr_http1_span v = { sp2 + 1, (size_t)(eol - sp2 - 1) };
	if (v.len == 8 && memcmp(v.p, "HTTP/1.1", 8) == 0)
		r->minor_version = 1;
	else if (v.len == 8 && memcmp(v.p, "HTTP/1.0", 8) == 0)
		r->minor_version = 0;
	else
		return bad(r, "unsupported HTTP version (HTTP/1.1 and HTTP/1.0 are served)");
	return 0;
}

/* One header line [p, eol): checks it and takes what the head says of the request. */
static int header_line(const char *p, const char *eol, struct sr_http1_request *r)
{
	const char *colon = memchr(p, ':', (size_t)(eol - p));
	if (!colon || colon == p)
		return bad(r, "malformed HTTP/1.1 header line (no name or no colon)");
	for (const char *n = p; n < colon; n++)
		if (!is_tchar((unsigned char)*n))
			return bad(r, "malformed HTTP/1.1 header name (or an obsolete folded line)");
	for (const char *c = colon + 1; c < eol; c++)
		if (((unsigned char)*c < ' ' && *c != '\t') || *c == 0x7f)
			return bad(r, "control character in an HTTP/1.1 header value");
	struct sr_http1_span name = { p, (size_t)(colon - p) }, v = trim(colon + 1, eol);

	if (sr_http1_span_is(name, "content-length")) {
		uint64_t cl = 0;
		if (v.len == 0)
			return bad(r, "invalid or conflicting Content-Length");
		for (size_t i = 0; i < v.len; i++) {
			unsigned d = (unsigned)(unsigned char)v.p[i] - '0';
			if (d > 9 || cl > (UINT64_MAX - d) / 10)
				return bad(r, "invalid or conflicting Content-Length");
			cl = cl * 10 + d;
		}
		if (r->has_content_length && cl != r->content_length)
			return bad(r, "invalid or conflicting Content-Length");
		r->has_content_length = true;
		r->content_length = cl;
	} else if (sr_http1_span_is(name, "transfer-encoding")) {
		if (!sr_http1_span_is(v, "chunked") || r->chunked)
			return bad(r, "only Transfer-Encoding: chunked is supported");
		r->chunked = true;
	} else if (sr_http1_span_is(name, "connection")) {
		r->conn_close |= has_option(v, "close");
		r->conn_keep_alive |= has_option(v, "keep-alive");
	} else if (sr_http1_span_is(name, "expect")) {
		if (!sr_http1_span_is(v, "100-continue"))
			return bad(r, "only Expect: 100-continue is supported");
		r->expect_continue = true;
	} else if (sr_http1_span_is(name, "host"))
		r->host = v;
	else if (sr_http1_span_is(name, "content-type"))
		r->content_type = v;
	else if (sr_http1_span_is(name, "authorization"))
		r->authorization = v;
	return 0;
}

int sr_http1_parse(const char *buf, size_t len, const struct sr_http1_limits *limits, struct sr_http1_request *ret)
{
	const char *p = buf, *end, *eol, *next;
	int r;

	memset(ret, 0, sizeof(*ret));
	/* Only the first max_head_bytes are looked at: a head must end within them. */
	end = buf + (len < limits->max_head_bytes ? len : limits->max_head_bytes);
	/* Empty lines before the request line (RFC 9112 2.2). */
	while (p < end && line_at(p, end, limits->bare_lf, &eol, &next) && eol == p)
		p = next;
	if (!line_at(p, end, limits->bare_lf, &eol, &next))
		goto incomplete;
	/* The whole head first: nothing of a request is taken before it is complete. */
	const char *line = next;
	size_t n_headers = 0;
	for (;;) {
		const char *le, *ln;
		if (!line_at(line, end, limits->bare_lf, &le, &ln))
			goto incomplete;
		if (le == line)
			break;
		if (++n_headers > limits->max_headers)
			return fail(ret, -EMSGSIZE, 431, "too many HTTP/1.1 header lines");
		line = ln;
	}
	if (eol > next - 1 || (r = request_line(p, eol, ret)) < 0)
		return eol > next - 1 ? bad(ret, "malformed HTTP/1.1 request line") : r;
	ret->headers = next;
	ret->headers_end = line;
	ret->n_headers = n_headers;
	for (const char *h = next; h < line;) {
		line_at(h, line, limits->bare_lf, &eol, &next);
		if (eol > next - 1)
			return bad(ret, "malformed HTTP/1.1 header line (a bare CR or LF)");
		if ((r = header_line(h, eol, ret)) < 0)
			return r;
		h = next;
	}
	if (ret->has_content_length && ret->chunked)
		return bad(ret, "Content-Length and Transfer-Encoding together");
	ret->keep_alive = ret->minor_version ? !ret->conn_close : ret->conn_keep_alive && !ret->conn_close;
	/* The empty line that ends the head. */
	line_at(line, end, limits->bare_lf, &eol, &next);
	return (int)(next - buf);

incomplete:
	if (len >= limits->max_head_bytes)
		return fail(ret, -EMSGSIZE, 431, "request line and headers too large");
	return 0;
}

bool sr_http1_header_next(const struct sr_http1_request *r, size_t *pos, struct sr_http1_span *ret_name,
			  struct sr_http1_span *ret_value)
{
	const char *p = r->headers + *pos, *eol, *next, *colon;

	/* sr_http1_parse() checked every line: each ends, and has a colon after a name. */
	if (!r->headers || !line_at(p, r->headers_end, true, &eol, &next))
		return false;
	colon = memchr(p, ':', (size_t)(eol - p));
	*ret_name = (struct sr_http1_span){ p, (size_t)(colon - p) };
	*ret_value = trim(colon + 1, eol);
	*pos = (size_t)(next - r->headers);
	return true;
}

const char *sr_http1_reason_phrase(int status)
{
	switch (status) {
	case 100:
		return "Continue";
	case 200:
		return "OK";
	case 400:
		return "Bad Request";
	case 401:
		return "Unauthorized";
	case 403:
		return "Forbidden";
	case 404:
		return "Not Found";
	case 405:
		return "Method Not Allowed";
	case 408:
		return "Request Timeout";
	case 413:
		return "Content Too Large";
	case 415:
		return "Unsupported Media Type";
	case 429:
		return "Too Many Requests";
	case 431:
		return "Request Header Fields Too Large";
	case 500:
		return "Internal Server Error";
	case 503:
		return "Service Unavailable";
	default:
		return "Unknown";
	}
}
