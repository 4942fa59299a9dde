// SPDX-License-Identifier: Apache-2.0
/*
 * sr_http1_parse (common/http1.h): complete, incomplete and malformed heads,
 * the framing headers, keep-alive by version, the limits, bare LF, and the
 * header iterator.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/http1.h"

static const struct sr_http1_limits lim = { .max_head_bytes = 1024, .max_headers = 8 };
static const struct sr_http1_limits lim_lf = { .max_head_bytes = 1024, .max_headers = 8, .bare_lf = true };

static int parse(const char *s, const struct sr_http1_limits *l, struct sr_http1_request *r)
{
	return sr_http1_parse(s, strlen(s), l, r);
}

static bool span_eq(struct sr_http1_span sp, const char *s)
{
	return sp.len == strlen(s) && memcmp(sp.p, s, sp.len) == 0;
}

/* A request that is malformed: the status and (part of) the reason. */
static void assert_bad(const char *s, const struct sr_http1_limits *l, int err, int status, const char *reason)
{
	struct sr_http1_request r;
	assert_int_equal(parse(s, l, &r), err);
	assert_int_equal(r.status, status);
	assert_non_null(strstr(r.reason, reason));
}

static void test_complete(void **state)
{
	struct sr_http1_request r;
	const char *s = "\r\n\r\nPOST /v1/x?y=1 HTTP/1.1\r\nHost: gw:4318\r\nContent-Type:  application/x-protobuf \r\n"
			"Authorization: Bearer t\r\nContent-Length: 12\r\nX-Other:\r\n\r\nbody follows";

	assert_int_equal(parse(s, &lim, &r), (int)(strstr(s, "body") - s));
	assert_true(span_eq(r.method, "POST"));
	assert_true(span_eq(r.target, "/v1/x?y=1"));
	assert_true(span_eq(r.path, "/v1/x"));
	assert_int_equal(r.minor_version, 1);
	assert_true(span_eq(r.host, "gw:4318"));
	assert_true(span_eq(r.content_type, "application/x-protobuf"));
	assert_true(span_eq(r.authorization, "Bearer t"));
	assert_true(r.has_content_length);
	assert_int_equal(r.content_length, 12);
	assert_false(r.chunked);
	assert_true(r.keep_alive);
	assert_int_equal(r.n_headers, 5);
}

static void test_incomplete(void **state)
{
	const char *s = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
	struct sr_http1_request r;

	/* Every proper prefix waits for more. */
	for (size_t n = 0; n < strlen(s); n++)
		assert_int_equal(sr_http1_parse(s, n, &lim, &r), 0);
	assert_int_equal(parse(s, &lim, &r), (int)strlen(s));
	/* Without bare_lf, LF LF is not the end of a head. */
	assert_int_equal(parse("GET / HTTP/1.1\n\n", &lim, &r), 0);
}

static void test_bare_lf(void **state)
{
	struct sr_http1_request r;

	assert_int_equal(parse("GET /metrics HTTP/1.0\nHost: x\n\n", &lim_lf, &r), 31);
	assert_true(span_eq(r.path, "/metrics"));
	assert_true(span_eq(r.host, "x"));
	assert_int_equal(parse("\nGET / HTTP/1.1\r\nA: b\n\r\n", &lim_lf, &r), 24);
	/* A bare LF inside a head read with CRLF lines only is malformed once the head ends. */
	assert_bad("GET / HTTP/1.1\r\nA: b\nC: d\r\n\r\n", &lim, -EBADMSG, 400, "bare CR or LF");
	assert_bad("GET / HTTP/1.1\nA: b\r\n\r\n", &lim, -EBADMSG, 400, "request line");
}

static void test_framing(void **state)
{
	struct sr_http1_request r;

	const char *te = "POST / HTTP/1.1\r\nTransfer-Encoding: Chunked\r\nExpect: 100-Continue\r\n\r\n";
	assert_int_equal(parse(te, &lim, &r), (int)strlen(te));
	assert_true(r.chunked);
	assert_true(r.expect_continue);
	assert_false(r.has_content_length);
	/* The same Content-Length twice is one. */
	assert_true(parse("POST / HTTP/1.1\r\nContent-Length: 5\r\ncontent-length: 5\r\n\r\n", &lim, &r) > 0);
	assert_int_equal(r.content_length, 5);
	assert_true(parse("POST / HTTP/1.1\r\nContent-Length: 18446744073709551615\r\n\r\n", &lim, &r) > 0);
	assert_true(r.content_length == UINT64_MAX);
	assert_bad("POST / HTTP/1.1\r\nContent-Length: 18446744073709551616\r\n\r\n", &lim, -EBADMSG, 400,
		   "Content-Length");
	assert_bad("POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", &lim, -EBADMSG, 400,
		   "conflicting Content-Length");
	assert_bad("POST / HTTP/1.1\r\nContent-Length: +5\r\n\r\n", &lim, -EBADMSG, 400, "Content-Length");
	assert_bad("POST / HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\n", &lim, -EBADMSG, 400, "Content-Length");
	assert_bad("POST / HTTP/1.1\r\nContent-Length:\r\n\r\n", &lim, -EBADMSG, 400, "Content-Length");
	assert_bad("POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", &lim, -EBADMSG, 400,
		   "Transfer-Encoding");
	assert_bad("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", &lim,
		   -EBADMSG, 400, "Transfer-Encoding");
	assert_bad("POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", &lim, -EBADMSG, 400,
		   "together");
	assert_bad("POST / HTTP/1.1\r\nExpect: 102-processing\r\n\r\n", &lim, -EBADMSG, 400, "Expect");
}

static void test_keep_alive(void **state)
{
	struct sr_http1_request r;

	assert_true(parse("GET / HTTP/1.1\r\n\r\n", &lim, &r) > 0 && r.keep_alive);
	assert_true(parse("GET / HTTP/1.1\r\nConnection: Close\r\n\r\n", &lim, &r) > 0 && !r.keep_alive);
	assert_true(parse("GET / HTTP/1.0\r\n\r\n", &lim, &r) > 0 && !r.keep_alive);
	assert_true(parse("GET / HTTP/1.0\r\nConnection: TE, keep-alive\r\n\r\n", &lim, &r) > 0 && r.keep_alive);
	assert_true(r.conn_keep_alive && !r.conn_close);
	assert_true(parse("GET / HTTP/1.0\r\nConnection: keep-alive\r\nConnection: close\r\n\r\n", &lim, &r) > 0);
	assert_false(r.keep_alive);
}

static void test_malformed(void **state)
{
	assert_bad("garbage\r\n\r\n", &lim, -EBADMSG, 400, "request line");
	assert_bad("POST  HTTP/1.1 x\r\n\r\n", &lim, -EBADMSG, 400, "request line");
	assert_bad(" / HTTP/1.1\r\n\r\n", &lim, -EBADMSG, 400, "request line");
	assert_bad("G(T / HTTP/1.1\r\n\r\n", &lim, -EBADMSG, 400, "method");
	assert_bad("GET /a\x01 HTTP/1.1\r\n\r\n", &lim, -EBADMSG, 400, "target");
	assert_bad("GET /a b HTTP/1.1\r\n\r\n", &lim, -EBADMSG, 400, "version");
	assert_bad("GET / HTTP/9.9\r\n\r\n", &lim, -EBADMSG, 400, "version");
	assert_bad("GET / HTTP/1.1\r\nNoColon\r\n\r\n", &lim, -EBADMSG, 400, "no colon");
	assert_bad("GET / HTTP/1.1\r\n: v\r\n\r\n", &lim, -EBADMSG, 400, "no name");
	assert_bad("GET / HTTP/1.1\r\nHost : x\r\n\r\n", &lim, -EBADMSG, 400, "header name");
	assert_bad("GET / HTTP/1.1\r\nA: a\r\n folded\r\n\r\n", &lim, -EBADMSG, 400, "no colon");
	assert_bad("GET / HTTP/1.1\r\nA: a\r\n folded: b\r\n\r\n", &lim, -EBADMSG, 400, "folded");
	assert_bad("GET / HTTP/1.1\r\nA: a\rb\r\n\r\n", &lim, -EBADMSG, 400, "control character");
	{
		static const char nul[] = "GET / HTTP/1.1\r\nA: a\0b\r\n\r\n";
		struct sr_http1_request r;
		assert_int_equal(sr_http1_parse(nul, sizeof(nul) - 1, &lim, &r), -EBADMSG);
		assert_int_equal(r.status, 400);
	}
}

static void test_limits(void **state)
{
	char big[2048];
	struct sr_http1_request r;

	/* A head that has not ended within max_head_bytes. */
	memset(big, 'a', sizeof(big));
	memcpy(big, "GET / HTTP/1.1\r\nX: ", 19);
	assert_int_equal(sr_http1_parse(big, 1023, &lim, &r), 0);
	assert_int_equal(sr_http1_parse(big, 1024, &lim, &r), -EMSGSIZE);
	assert_int_equal(r.status, 431);
	/* An end past the limit is not looked for. */
	memcpy(big + 1100, "\r\n\r\n", 4);
	assert_int_equal(sr_http1_parse(big, 1104, &lim, &r), -EMSGSIZE);
	/* One header line too many. */
	assert_true(parse("GET / HTTP/1.1\r\n1:\r\n2:\r\n3:\r\n4:\r\n5:\r\n6:\r\n7:\r\n8:\r\n\r\n", &lim, &r) > 0);
	assert_bad("GET / HTTP/1.1\r\n1:\r\n2:\r\n3:\r\n4:\r\n5:\r\n6:\r\n7:\r\n8:\r\n9:\r\n\r\n", &lim, -EMSGSIZE, 431,
		   "header lines");
}

static void test_header_next(void **state)
{
	const char *s = "POST / HTTP/1.1\r\nContent-Type: a/b\r\nX-Empty:\r\nX-Sp: \t v v \t\r\n\r\n";
	struct sr_http1_span name, value;
	struct sr_http1_request r;
	size_t pos = 0;

	assert_true(parse(s, &lim, &r) > 0);
	assert_true(sr_http1_header_next(&r, &pos, &name, &value));
	assert_true(span_eq(name, "Content-Type") && span_eq(value, "a/b"));
	assert_true(sr_http1_span_is(name, "content-type"));
	assert_true(sr_http1_header_next(&r, &pos, &name, &value));
	assert_true(span_eq(name, "X-Empty") && value.len == 0);
	assert_true(sr_http1_header_next(&r, &pos, &name, &value));
	assert_true(span_eq(name, "X-Sp") && span_eq(value, "v v"));
	assert_false(sr_http1_header_next(&r, &pos, &name, &value));
	/* A request without headers has none to give. */
	pos = 0;
	assert_true(parse("GET / HTTP/1.1\r\n\r\n", &lim, &r) > 0);
	assert_false(sr_http1_header_next(&r, &pos, &name, &value));
}

static void test_reason_phrase(void **state)
{
	assert_string_equal(sr_http1_reason_phrase(431), "Request Header Fields Too Large");
	assert_string_equal(sr_http1_reason_phrase(403), "Forbidden");
	assert_string_equal(sr_http1_reason_phrase(299), "Unknown");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_complete),      cmocka_unit_test(test_incomplete),
		cmocka_unit_test(test_bare_lf),	      cmocka_unit_test(test_framing),
		cmocka_unit_test(test_keep_alive),    cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_limits),	      cmocka_unit_test(test_header_next),
		cmocka_unit_test(test_reason_phrase),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
