// SPDX-License-Identifier: Apache-2.0
/*
 * The otlp receiver's decoder (receivers/otlp-decode.h) on arbitrary bytes,
 * as the receiver runs it after HTTP or gRPC framing and gunzip: with
 * version detection and with each version set, with links dropped or kept,
 * and once more under tight limits so every limit's refusal runs too. The
 * definition stores persist across inputs (as in the gateway) with small
 * bounds, so eviction runs too. Nothing may crash, leak or read out of
 * bounds; a refusal carries a message; on success every sample is either
 * accepted or refused and the batch is consistent.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "common/gzip.h"
#include "core/model.h"
#include "receivers/otlp-decode.h"

#define FUZZ_MAX_INPUT (1024 * 1024)
/* Decompressed bodies are bounded as the receiver's max_recv_msg_size bounds them. */
#define FUZZ_MAX_PLAIN (4 * 1024 * 1024)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(struct gw_stores *stores, const uint8_t *data, size_t size, const struct gw_otlp_decode_options *o)
{
	struct gw_otlp_decode_result res;
	enum gw_otlp_decode_status st = gw_otlp_decode(stores, data, size, o, &res);

	if (st != res.status)
		abort();
	if (st == GW_OTLP_DECODE_OK) {
		if (res.received != res.accepted + res.refused)
			abort();
		if (res.batch && (gw_profiles__check(res.batch) != 0 || res.batch->total_count != res.accepted))
			abort();
		if (!res.batch && res.accepted)
			abort();
		if (res.rejected_profiles && !res.message[0])
			abort();
		if (res.version != GW_OTLP_DECODE_V1_9 && res.version != GW_OTLP_DECODE_V1_10)
			abort();
	} else if (!res.message[0] || res.batch || res.accepted) {
		abort();
	}
	gw_otlp_decode_result_fini(&res);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct gw_stores *stores;
	const struct gw_otlp_limits tight = {
		.max_resource_profiles = 2,
		.max_profiles = 2,
		.max_samples = 4,
		.max_sample_points = 8,
		.max_stack_depth = 3,
		.max_lines = 2,
		.max_attrs = 2,
		.max_strings = 16,
		.max_attributes = 8,
		.max_mappings = 4,
		.max_locations = 8,
		.max_functions = 4,
		.max_links = 2,
		.max_stacks = 4,
		.max_string_bytes = 8,
		.max_nesting = 2,
		.max_work_bytes = 4096,
	};
	uint8_t *plain = NULL;
	size_t plain_len = 0;

	if (size > FUZZ_MAX_INPUT)
		return 0;
	if (!stores) {
		struct gw_store_limits lim = {
			.executable_bytes = 64 * 1024,
			.kernel_bytes = 64 * 1024,
			.location_bytes = 256 * 1024,
			.stack_bytes = 256 * 1024,
		};
		stores = gw_stores_new(&lim);
		if (!stores)
			abort();
	}
	if (size >= 2 && data[0] == 0x1f && data[1] == 0x8b) {
		if (sr_gunzip(data, size, FUZZ_MAX_PLAIN, &plain, &plain_len) < 0)
			return 0;
		data = plain;
		size = plain_len;
	}
	check(stores, data, size, NULL);
	check(stores, data, size,
	      &(struct gw_otlp_decode_options){ .version = GW_OTLP_DECODE_V1_9, .links = GW_OTLP_LINKS_ATTRIBUTES });
	check(stores, data, size, &(struct gw_otlp_decode_options){ .version = GW_OTLP_DECODE_V1_10 });
	check(stores, data, size, &(struct gw_otlp_decode_options){ .limits = &tight });
	free(plain);
	return 0;
}
