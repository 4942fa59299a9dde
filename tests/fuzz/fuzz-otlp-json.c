// SPDX-License-Identifier: Apache-2.0
/*
 * OTLP/JSON bodies (gateway/receivers/otlp-json.c), transcoded as both proto
 * versions under small limits. Checked: nothing reads out of bounds or
 * overflows the stack; the only errors are the documented ones, each with a
 * message naming a byte of the input, in printable text; a failure leaves the writer as it
 * was; a success is a protobuf message of the request's two fields, within
 * the output limit, and the same bytes every time.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "otlp-json.h"
#include "common/pbwire.h"

#define FUZZ_MAX_INPUT (256 * 1024)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(bool ok)
{
	if (!ok)
		abort();
}

/* The output is a message whose fields are resource_profiles (1) and dictionary (2), both messages. */
static void check_request(const uint8_t *p, size_t n)
{
	struct sr_pbr r = sr_pbr_of(p, n);
	struct sr_pb_field f;
	int e;

	while ((e = sr_pbr__next(&r, &f)) == 0)
		check((f.number == 1 || f.number == 2) && f.wt == SR_PB_LEN);
	check(e == 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const enum gw_otlp_version versions[] = { GW_OTLP_V1_10, GW_OTLP_V1_9 };
	/* Small enough that the corpus reaches every limit with few bytes. */
	const struct gw_otlp_json_limits lim = {
		.max_input_bytes = FUZZ_MAX_INPUT,
		.max_depth = 24,
		.max_array_elements = 512,
		.max_output_bytes = 64 * 1024,
	};

	if (size > FUZZ_MAX_INPUT)
		return 0;
	for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++) {
		struct sr_pbw a = { 0 }, b = { 0 };
		char err[256];
		int r;

		/* Something in the writer already: the output is appended after it. */
		sr_pbw__raw(&a, "x", 1);
		r = gw_otlp_json_transcode(data, size, versions[i], &lim, &a, err, sizeof(err));
		check(r == 0 || r == -EBADMSG || r == -EMSGSIZE);
		check(a.len >= 1 && a.buf[0] == 'x');
		if (r < 0) {
			check(a.len == 1);
			check(strstr(err, " (byte ") != NULL);
			for (const char *q = err; *q; q++)
				check((uint8_t)*q >= 0x20 && *q != 0x7f);
		} else {
			check(err[0] == '\0');
			check(a.len - 1 <= lim.max_output_bytes);
			check_request(a.buf + 1, a.len - 1);
			check(gw_otlp_json_transcode(data, size, versions[i], &lim, &b, NULL, 0) == 0);
			check(b.len == a.len - 1 && (b.len == 0 || memcmp(b.buf, a.buf + 1, b.len) == 0));
		}
		sr_pbw__free(&a);
		sr_pbw__free(&b);
	}
	return 0;
}
