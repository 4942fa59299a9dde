// SPDX-License-Identifier: Apache-2.0
/*
 * The HTTP/1.x request-head parser (common/http1.h) on arbitrary bytes, with
 * CRLF lines only and with bare LF allowed, at the limits of the gateway's
 * receivers and of the telemetry servers. Checked: an answer is one of the
 * documented ones; a complete head lies inside the input and the limit, every
 * span points inside it, the iterator gives exactly n_headers headers, the
 * same head alone parses the same, and one byte less of it is not complete.
 * The connection layer around it has a target of its own (fuzz-net-h1).
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/http1.h"

#define FUZZ_MAX_INPUT (64 * 1024)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(bool ok)
{
	if (!ok)
		abort();
}

static void inside(struct sr_http1_span s, const char *buf, size_t n)
{
	check(!s.p ? s.len == 0 : s.p >= buf && s.p + s.len <= buf + n);
}

static void one(const char *buf, size_t size, const struct sr_http1_limits *lim)
{
	struct sr_http1_request r, again;
	struct sr_http1_span name, value;
	size_t pos = 0, n_headers = 0;
	int n = sr_http1_parse(buf, size, lim, &r);

	if (n == 0)
		return;
	if (n < 0) {
		check((n == -EBADMSG && r.status == 400) || (n == -EMSGSIZE && r.status == 431));
		check(r.reason && r.reason[0]);
		return;
	}
	check((size_t)n <= size && (size_t)n <= lim->max_head_bytes && buf[n - 1] == '\n');
	check(r.minor_version == 0 || r.minor_version == 1);
	check(r.method.len > 0 && r.target.len > 0 && r.path.len <= r.target.len);
	check(!(r.chunked && r.has_content_length));
	check(r.n_headers <= lim->max_headers);
	inside(r.method, buf, (size_t)n);
	inside(r.target, buf, (size_t)n);
	inside(r.host, buf, (size_t)n);
	inside(r.content_type, buf, (size_t)n);
	inside(r.authorization, buf, (size_t)n);
	while (sr_http1_header_next(&r, &pos, &name, &value)) {
		inside(name, buf, (size_t)n);
		inside(value, buf, (size_t)n);
		check(name.len > 0);
		n_headers++;
	}
	check(n_headers == r.n_headers);
	/* The head is the same without what follows it, and not complete without its last byte. */
	check(sr_http1_parse(buf, (size_t)n, lim, &again) == n);
	check(again.n_headers == r.n_headers && again.content_length == r.content_length);
	check(sr_http1_parse(buf, (size_t)n - 1, lim, &again) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct sr_http1_limits limits[] = {
		{ .max_head_bytes = 16384, .max_headers = 1024 },
		{ .max_head_bytes = 8192, .max_headers = 100, .bare_lf = true },
		{ .max_head_bytes = 64, .max_headers = 2 },
	};
	char *buf;

	if (size > FUZZ_MAX_INPUT)
		return 0;
	/* A copy of exactly the input's size: a read past it is a finding. */
	buf = malloc(size ? size : 1);
	if (!buf)
		return 0;
	memcpy(buf, data, size);
	for (size_t i = 0; i < sizeof(limits) / sizeof(limits[0]); i++)
		one(buf, size, &limits[i]);
	free(buf);
	return 0;
}
