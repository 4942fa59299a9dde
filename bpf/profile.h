/* SPDX-License-Identifier: Apache-2.0 */
/* Types shared by profile.bpf.c and the agent: fixed-width types only. */
#ifndef SR_BPF_PROFILE_H
#define SR_BPF_PROFILE_H

#define PROFILE_MAX_STACK_DEPTH 127
#define PROFILE_TASK_COMM_LEN 16

struct profile_event {
	__u32 pid;
	__u32 tid;
	__u32 cpu;
	__u32 flags;
	__u64 ktime_ns;
	__s32 kstack_len;
	__s32 ustack_len;
	char comm[PROFILE_TASK_COMM_LEN];
	__u64 kstack[PROFILE_MAX_STACK_DEPTH];
	__u64 ustack[PROFILE_MAX_STACK_DEPTH];
};

#endif
