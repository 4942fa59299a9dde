/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gateway/receivers/otlp-json.c as a command, for tests that check it
 * against an independent implementation (tests/integration/otlp-json-protobuf.py):
 *
 *   otlp-json-driver VERSION < request.json > request.pb
 *
 * VERSION is 1.9 or 1.10. Exit 0 with the protobuf on stdout, or 1 with the
 * error on stderr (its first word the errno name: EBADMSG, EMSGSIZE, ...).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/receivers/otlp-json.h"
#include "common/pbwire.h"

int main(int argc, char **argv)
{
	enum gw_otlp_version version;
	struct sr_pbw out = { 0 };
	size_t len = 0, cap = 1 << 16;
	char *in = malloc(cap), err[512];
	int r;

	if (argc != 2 || gw_otlp_version_from_string(argv[1], &version) < 0) {
		fprintf(stderr, "usage: %s 1.9|1.10 < request.json > request.pb\n", argv[0]);
		return 2;
	}
	for (;;) {
		size_t n;

		if (!in)
			return 3;
		n = fread(in + len, 1, cap - len, stdin);
		len += n;
		if (n == 0)
			break;
		if (len == cap)
			in = realloc(in, cap *= 2);
	}
	r = gw_otlp_json_transcode(in, len, version, NULL, &out, err, sizeof(err));
	free(in);
	if (r < 0) {
		fprintf(stderr, "%s: %s\n",
			r == -EBADMSG	 ? "EBADMSG"
			: r == -EMSGSIZE ? "EMSGSIZE"
			: r == -ENOMEM	 ? "ENOMEM"
					 : "EINVAL",
			err);
		sr_pbw__free(&out);
		return 1;
	}
	if (out.len && fwrite(out.buf, 1, out.len, stdout) != out.len)
		r = -EIO;
	sr_pbw__free(&out);
	return r < 0 ? 3 : 0;
}
