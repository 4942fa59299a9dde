// SPDX-License-Identifier: Apache-2.0
/*
 * Bytes the exporters read back: a backend's ExportProfilesServiceResponse
 * (partial_success), gzip bodies, and OTLP requests they split on a 413 or
 * count (as found in queue files on disk). Nothing may crash or read out of
 * bounds; a split must conserve the sample count.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "common/gzip.h"
#include "exporters/exporthelper.h"
#include "exporters/otlp-encode.h"
#include "common/pbwire.h"

#define FUZZ_MAX_INPUT (256 * 1024)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int64_t rejected;
	char msg[128];
	uint64_t total, a_count, b_count;
	uint8_t *out = NULL;
	size_t out_len;

	if (size > FUZZ_MAX_INPUT)
		return 0;
	gw_export_parse_response(data, size, &rejected, msg, sizeof(msg));
	if (sr_gunzip(data, size, 1 << 20, &out, &out_len) == 0)
		free(out);
	for (int v = 0; v < 2; v++) {
		enum gw_otlp_version ver = v ? GW_OTLP_V1_9 : GW_OTLP_V1_10;
		struct sr_pbw a = { 0 }, b = { 0 };

		if (gw_otlp_count(data, size, ver, &total) < 0)
			continue;
		if (gw_otlp_split(data, size, ver, &a, &a_count, &b, &b_count) == 0 && a_count + b_count != total)
			abort();
		sr_pbw__free(&a);
		sr_pbw__free(&b);
	}
	return 0;
}
