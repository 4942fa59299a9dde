/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A window's samples as one OTLP ExportProfilesServiceRequest (profiles
 * v1development, v1.10.0 or v1.9.0 field numbers), shaped as the
 * OpenTelemetry eBPF profiler shapes them (docs/agent.md, "Sending OTLP"):
 *
 *   - one ResourceProfiles per process (pid, start, container, executable),
 *     resource attributes process.pid, process.executable.path and .name,
 *     container.id, k8s.pod.uid when known, host.name; one ScopeProfiles
 *     (stackrelay-agent and its version) with a CPU profile (samples/count,
 *     period cpu/nanoseconds = 1e9 / frequency) and an off-CPU profile
 *     (off_cpu/nanoseconds) where there were waits;
 *   - sample attributes thread.id and thread.name; values: the count (CPU)
 *     or nanoseconds off CPU;
 *   - native frames unsymbolized: a Location with the mapping of its file and
 *     its ELF virtual address (return addresses already moved back into the
 *     call), the Mapping carrying the file's path and, when it has one,
 *     process.executable.build_id.gnu (hex);
 *   - frames the agent names (cpython, jvm, v8js, perf-map): a Location with
 *     one Line -> Function (name, file, start line) and its line;
 *   - kernel frames: the offset in their address space on a mapping named
 *     "[kernel.kallsyms]" or "[module]", named through meta->kernel_name
 *     (otlp-kernel-names.h) as a Line -> Function;
 *   - every Location carries profile.frame.type.
 *
 * Pure: reads definitions through agent.h's store lookups, writes bytes.
 */
#ifndef SR_AGENT_OTLP_ENCODE_H
#define SR_AGENT_OTLP_ENCODE_H

#include <stddef.h>
#include <stdint.h>

#include "agent.h"

struct sr_pbw;

enum agent_otlp_version { AGENT_OTLP_V1_10 = 0, AGENT_OTLP_V1_9 = 1 };

struct agent_otlp_meta {
	int version;		   /* enum agent_otlp_version */
	const char *host_name;	   /* host.name on every resource; NULL or empty: none */
	const char *scope_version; /* InstrumentationScope.version */
	/*
	 * Names a kernel frame (the kernel ID of its address space, the offset in
	 * it), or NULL: the frame stays an offset. Optional.
	 */
	const char *(*kernel_name)(void *ctx, const uint8_t *id, size_t len, uint64_t address);
	void *kernel_name_ctx;
};

struct agent_otlp_encode_stats {
	uint64_t samples;   /* sample messages written */
	uint64_t count;	    /* sum of their counts */
	uint64_t lost;	    /* counts of samples left out: their stack was no longer in the store */
	uint64_t resources; /* ResourceProfiles written */
};

/*
 * Appends to w one ExportProfilesServiceRequest of samples[first, first + n)
 * of b. Returns 0, -ENOMEM, -EMSGSIZE (w's error).
 */
int agent_otlp_encode(struct agent_store *s, const struct agent_batch *b, size_t first, size_t n,
		      const struct agent_otlp_meta *meta, struct sr_pbw *w, struct agent_otlp_encode_stats *ret);

/* A sample's count (1 when unset). */
uint64_t agent_otlp_sample_count(const stackrelay_v1_Sample *smp);

#endif
