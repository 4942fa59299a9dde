/* SPDX-License-Identifier: Apache-2.0 */
/* Counters of the profiling loop (run.c), exported as metrics. */
#ifndef SR_AGENT_RUN_H
#define SR_AGENT_RUN_H

#include <stdint.h>

struct agent_run_stats {
	uint64_t samples_received;
	uint64_t samples_aggregated;
	uint64_t samples_exported;
	uint64_t dropped_stack_errors;
	uint64_t dropped_overflow;
	uint64_t frames_unattributed;
	uint64_t bad_records;
	uint64_t execs;
	uint64_t exits;
	uint64_t windows;
};

#endif
