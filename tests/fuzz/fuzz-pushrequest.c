// SPDX-License-Identifier: Apache-2.0
/*
 * The agent receiver's request path on arbitrary bytes, as the gateway runs
 * it after HTTP/2: gunzip (when the input looks like gzip) bounded by a
 * limit, the PushRequest header walk, then the full processing: definitions
 * (executables, kernels with modules, functions, stacks with native,
 * interpreted and JIT frames), symbol-table
 * uploads, samples into a batch, the encoded PushResponse, and the
 * de-duplication window. Symbol probes (probe_symbols) are answered twice:
 * once as received, once after the executables and kernels of the accepted
 * samples were flagged wanted or pending (chosen by the input), so the
 * wanted and pending answers run too. The definition stores persist across inputs (as in
 * the gateway) with small bounds, so eviction runs too. Nothing may crash,
 * leak or read out of bounds.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/gzip.h"
#include "core/model.h"
#include "receivers/agent-dedupe.h"
#include "receivers/agent-ingest.h"

#define FUZZ_MAX_INPUT (1024 * 1024)
/* Decompressed bodies are bounded like max_request_bytes bounds them. */
#define FUZZ_MAX_PLAIN (4 * 1024 * 1024)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Flags what the batch uses as the symbolize processor would: wanted, pending or looked up (by seed bits). */
static void flag_batch(struct gw_profiles *p, uint8_t seed)
{
	unsigned i = 0;

	gw_profiles_foreach_resource(p, r)
	{
		gw_resource_foreach_sample(r, sm)
		{
			for (uint32_t j = 0; sm->stack && j < sm->stack->n_locations; j++, i++) {
				struct gw_location *l = gw_stack__location(sm->stack, j);
				unsigned what = (seed >> (i % 4 * 2)) & 3;

				if (gw_location__exe(l)) {
					gw_executable__set_want_symbols(gw_location__exe(l), what == 1);
					gw_executable__set_lookup(gw_location__exe(l),
								  what == 2 ? 60ULL * 1000000000ULL : 0);
				}
				if (gw_location__kernel(l)) {
					gw_kernel__set_want_symbols(gw_location__kernel(l), what == 1);
					gw_kernel__set_lookup(gw_location__kernel(l),
							      what == 2 ? 60ULL * 1000000000ULL : 0);
				}
			}
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct gw_stores *stores;
	static struct gw_dedupe *dedupe;
	static uint64_t epoch;
	struct gw_ingest_header h;
	struct gw_ingest_result res;
	uint8_t *plain = NULL;
	size_t plain_len = 0;
	char err[512];
	uint64_t n;

	if (size > FUZZ_MAX_INPUT)
		return 0;
	if (!stores) {
		struct gw_store_limits lim = {
			.executable_bytes = 64 * 1024,
			.kernel_bytes = 64 * 1024,
			.location_bytes = 256 * 1024,
			.stack_bytes = 256 * 1024,
			.function_bytes = 64 * 1024,
		};
		stores = gw_stores_new(&lim);
		dedupe = gw_dedupe_new(64, 16, 64 * 1024);
		if (!stores || !dedupe)
			abort();
	}
	if (size >= 2 && data[0] == 0x1f && data[1] == 0x8b) {
		if (sr_gunzip(data, size, FUZZ_MAX_PLAIN, &plain, &plain_len) < 0)
			return 0;
		data = plain;
		size = plain_len;
	}
	if (gw_ingest_header(data, size, &h, err, sizeof(err)) == 0) {
		err[0] = '\0';
		if (gw_ingest_count_samples(data, size, &n, err, sizeof(err)) < 0 &&
		    (!memchr(err, '\0', sizeof(err)) || !err[0]))
			abort(); /* a refusal's 400 says what is wrong */
		if (gw_ingest_process(stores, NULL, data, size, ++epoch, &res, err, sizeof(err)) == 0) {
			if (res.batch && gw_profiles__check(res.batch) != 0)
				abort();
			if (res.accepted + res.refused_missing != res.received)
				abort();
			if (res.probes > GW_AGENT_MAX_PROBES_PER_REQUEST || res.symbols_pending > res.probes)
				abort();
			if (h.instance_id_len)
				gw_dedupe__insert(dedupe, h.instance_id, h.instance_id_len, h.sequence, res.response,
						  res.response_len);
			if (res.batch) {
				flag_batch(res.batch, size ? data[size - 1] : 0);
				gw_ingest_result_free(&res);
				if (gw_ingest_process(stores, NULL, data, size, ++epoch, &res, err, sizeof(err)) == 0 &&
				    res.symbols_pending > res.probes)
					abort();
			}
			gw_ingest_result_free(&res);
		}
		if (gw_ingest_process_definitions(stores, NULL, data, size, ++epoch, &res, err, sizeof(err)) == 0)
			gw_ingest_result_free(&res);
	}
	free(plain);
	return 0;
}
