/* SPDX-License-Identifier: Apache-2.0 */
/* What the agent's memory is made of (agent/memstats.c), for /metrics. */
#ifndef SR_AGENT_MEMSTATS_H
#define SR_AGENT_MEMSTATS_H

#include <stddef.h>
#include <stdint.h>

/* Resident bytes by kind of mapping. */
struct agent_rss {
	uint64_t total;
	uint64_t bpf_maps;  /* BPF map pages mapped into the agent: the ring buffer (twice), mmapable arrays */
	uint64_t anonymous; /* heap, stacks, other anonymous memory */
	uint64_t files;	    /* the agent's and its libraries' code and data */
};

/* The kernel memory of the BPF maps the agent holds open, summed by map name. */
struct agent_bpf_map_mem {
	char name[16]; /* BPF_OBJ_NAME_LEN */
	uint64_t bytes;
	uint32_t maps;
};

/* 0, or a negative errno (smaps unreadable). */
int agent_memstats_rss(struct agent_rss *ret);
/* Fills up to max entries (the last collects any further names); 0 or a negative errno. */
int agent_memstats_bpf_maps(struct agent_bpf_map_mem *out, size_t max, size_t *ret_n);
/* A ring buffer's kernel memory, for kernels whose fdinfo reads 0 for it (before 6.4): data_bytes its max_entries. */
uint64_t agent_memstats_ringbuf_bytes(uint64_t data_bytes, uint64_t page_size);

#endif
