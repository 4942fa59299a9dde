/* SPDX-License-Identifier: Apache-2.0 */
/*
 * HotSpot's code cache as the agent sees it from outside: its heaps (where
 * each one's code and segment map are) and the code blob that holds a pc,
 * found through the segment map as CodeHeap::find_start does. The BPF
 * unwinder runs the same search; this is its reference and what user space
 * uses to check that an nmethod a sample named is still there.
 */
#ifndef SR_AGENT_JVM_CODECACHE_H
#define SR_AGENT_JVM_CODECACHE_H

#include <stdint.h>

#include "jvm-structs.h"

/* Code heaps read at most (a segmented code cache has three). */
#define AGENT_JVM_MAX_HEAPS 8
/* Hops through a segment map at most before giving up (a 4 MiB blob takes ~130 with 128-byte segments). */
#define AGENT_JVM_MAX_SEGMAP_HOPS 1024

struct agent_jvm_heap {
	uint64_t low; /* its code: [low, high) */
	uint64_t high;
	uint64_t segmap; /* one byte per segment, from low */
	uint32_t log2_segment;
};

/* The code cache's heaps, up to max. Returns how many, or -errno (-EINVAL for a heap that makes no sense). */
int agent_jvm_heaps_read(const struct agent_jvm_reader *r, const struct agent_jvm_layout *l, struct agent_jvm_heap *ret,
			 int max);

/*
 * The address of the CodeBlob that holds pc in heap h: 0 and *ret_blob, or
 * -ENOENT when pc is in free space or the map is not what it should be,
 * or a reader error.
 */
int agent_jvm_blob_at(const struct agent_jvm_reader *r, const struct agent_jvm_layout *l,
		      const struct agent_jvm_heap *h, uint64_t pc, uint64_t *ret_blob);

#endif
