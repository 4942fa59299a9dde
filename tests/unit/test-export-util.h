/* SPDX-License-Identifier: Apache-2.0 */
/* Synthetic batches for the export tests (test-export-*.c). */
#ifndef SR_TEST_EXPORT_UTIL_H
#define SR_TEST_EXPORT_UTIL_H

#include <stdint.h>

struct gw_stores;
struct gw_profiles;

/*
 * A batch of n_resources resources (service.name "svc-<tag>-<r>"), each with
 * n_samples samples (count i + 1) over stacks of 1-4 symbolized frames named
 * "fn_<tag>_<k>" in "/usr/bin/app<tag>" (GNU build ID 0xab 0x<tag>...), one
 * kernel frame every third stack, pids 100 + i % 3, thread names "worker-N".
 * *ret_total gets the sum of counts. NULL on failure.
 */
struct gw_profiles *xt_batch(struct gw_stores *s, unsigned tag, unsigned n_resources, unsigned n_samples,
			     uint64_t *ret_total);

/*
 * A batch of one resource (process.executable.name exe_name) with one sample
 * (count 7) whose stack is [JIT "JS:*hot /app/x.js:3" (perf-map), INTERPRETED
 * "alpha" in /app/work.py line 12 (cpython, first line 10), a native frame].
 * NULL on failure (test objects leak then).
 */
struct gw_profiles *xt_function_batch(struct gw_stores *s, const char *exe_name, uint64_t *ret_total);

#endif
