/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Types shared by profile.bpf.c and the agent: fixed-width types only.
 *
 * Every record in the ring buffer starts with struct profile_header; its
 * type says which of the structs below it is. Records come out of the ring
 * buffer in the order they were reserved across all CPUs, so an exec or exit
 * record always follows the samples its process produced before it.
 */
#ifndef SR_BPF_PROFILE_H
#define SR_BPF_PROFILE_H

/* bpf_get_stack() depth per stack (kernel and user each); 127 is the kernel's default sysctl_perf_event_max_stack. */
#define PROFILE_MAX_STACK_DEPTH 127
#define PROFILE_TASK_COMM_LEN	16
/* Depth of the cgroup tree walked upwards when matching the cgroup allowlist. */
#define PROFILE_MAX_CGROUP_LEVELS 16

enum profile_event_type {
	PROFILE_EVENT_SAMPLE = 1,
	PROFILE_EVENT_EXEC = 2,
	PROFILE_EVENT_EXIT = 3,
};

/* Per-CPU counters (the `counters` map, one __u64 per index). */
enum profile_counter {
	PROFILE_CNT_SAMPLES = 0,      /* perf events that passed the filters */
	PROFILE_CNT_FILTERED_IDLE,    /* pid 0 skipped */
	PROFILE_CNT_FILTERED_KTHREAD, /* kernel threads skipped */
	PROFILE_CNT_FILTERED_PID,     /* not in the pid allowlist */
	PROFILE_CNT_FILTERED_CGROUP,  /* not under an allowed cgroup */
	PROFILE_CNT_LOST_RINGBUF,     /* sample dropped: ring buffer full */
	PROFILE_CNT_KSTACK_ERR,	      /* bpf_get_stack() failed for the kernel stack */
	PROFILE_CNT_USTACK_ERR,	      /* bpf_get_stack() failed for the user stack */
	PROFILE_CNT_TASK_EVENTS_LOST, /* exec/exit record dropped: ring buffer full */
	PROFILE_CNT__MAX,
};

struct profile_header {
	__u32 type;
	__u32 pid; /* tgid */
	__u32 tid;
	__u32 cpu;
	__u64 ktime_ns;
	/* The thread group leader's start_boottime: with pid it names a process across PID reuse. */
	__u64 start_boottime_ns;
	char comm[PROFILE_TASK_COMM_LEN];  /* the thread's */
	char pcomm[PROFILE_TASK_COMM_LEN]; /* the group leader's */
};

struct profile_sample {
	struct profile_header hdr;
	__u64 cgroup_id;
	__u32 flags; /* PROFILE_SAMPLE_* */
	/* Bytes written by bpf_get_stack(), or a negative errno. */
	__s32 kstack_len;
	__s32 ustack_len;
	__u32 pad;
	__u64 kstack[PROFILE_MAX_STACK_DEPTH];
	__u64 ustack[PROFILE_MAX_STACK_DEPTH];
};

#define PROFILE_SAMPLE_KTHREAD 0x1

/* PROFILE_EVENT_EXEC and PROFILE_EVENT_EXIT carry only the header. */
struct profile_task_event {
	struct profile_header hdr;
};

#endif
