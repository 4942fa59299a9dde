/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Decoding of ring-buffer records (bpf/profile.h). The ring-buffer callback
 * only hands bytes to agent_event_decode(), a pure function that checks
 * every length, so unit tests drive it without BPF (docs/style.md 11).
 */
#ifndef SR_AGENT_EVENT_H
#define SR_AGENT_EVENT_H

#include <linux/types.h>
#include <stddef.h>
#include <stdint.h>

#include "profile.h"

struct agent_event {
	uint32_t type; /* enum profile_event_type */
	const struct profile_header *hdr;
	const struct profile_sample *sample;   /* PROFILE_EVENT_SAMPLE and _OFF_CPU only */
	const struct profile_mmap_event *mmap; /* PROFILE_EVENT_MMAP only */
	const struct profile_fork_event *fork; /* PROFILE_EVENT_FORK only */
	uint64_t mm;			       /* PROFILE_EVENT_EXEC, _EXIT, _MMAP: the address space */
	uint64_t vdso;			       /* PROFILE_EVENT_EXEC: the vDSO's address, or 0 */
	size_t n_kstack;		       /* valid frames */
	size_t n_ustack;
	int kstack_err; /* bpf_get_stack()'s -errno, or 0 */
	int ustack_err;
	char comm[PROFILE_TASK_COMM_LEN + 1]; /* NUL-terminated copies */
	char pcomm[PROFILE_TASK_COMM_LEN + 1];
	char mmap_name[PROFILE_MMAP_NAME_LEN + 1];
};

/* Returns 0, -EBADMSG for a record of the wrong size or type. Pointers point into data. */
int agent_event_decode(const void *data, size_t len, struct agent_event *ret);

#endif
