/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One reporting window's samples, aggregated by (stack ID, pid, tid,
 * process start); the container follows from the process. At most
 * max_entries distinct keys per window: past that a sample is refused and
 * counted (DropCounters.buffer_overflow).
 */
#ifndef SR_AGENT_AGGREGATE_H
#define SR_AGENT_AGGREGATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent.h"
#include "cgroup.h"
#include "definition-store.h"

#define AGENT_AGG_DEFAULT_MAX_ENTRIES 65536

struct agent_agg_key {
	uint8_t stack_id[AGENT_STACK_ID_LEN];
	uint32_t pid;
	uint32_t tid;
	uint64_t start_ns;
	uint32_t profile_type; /* stackrelay_v1_ProfileType: CPU samples and off-CPU waits stay apart */
	uint32_t pad;	       /* zero: keys are hashed as bytes */
};

struct agent_agg_labels {
	const char *thread_name;
	const char *process_name;
	const char *exe_path;
	const struct agent_cgroup_info *cg; /* may be NULL */
	bool kernel;			    /* the stack holds kernel frames */
};

struct agent_agg;

struct agent_agg *agent_agg_new(size_t max_entries);
void agent_agg_free(struct agent_agg *a);
/*
 * Counts one sample, or one off-CPU wait of off_cpu_ns nanoseconds (0 for CPU
 * samples). Returns 0, -ENOSPC (window full), -ENOMEM.
 */
int agent_agg__add(struct agent_agg *a, const struct agent_agg_key *k, const struct agent_agg_labels *labels,
		   uint64_t off_cpu_ns);
size_t agent_agg__size(const struct agent_agg *a);
/*
 * Moves the window into ret (samples sorted by count, largest first) and
 * starts a new one. kernel_id may be NULL. Returns 0 or -ENOMEM (the window
 * is then kept).
 */
int agent_agg__flush(struct agent_agg *a, uint64_t start_unix_ns, uint64_t end_unix_ns, const uint8_t *kernel_id,
		     size_t kernel_id_len, uint32_t frequency_hz, long clk_tck, struct agent_batch *ret);

#endif
