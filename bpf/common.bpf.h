/* SPDX-License-Identifier: GPL-2.0 OR Apache-2.0 */
/*
 * What every part of the profiling program shares (profile.bpf.c and the
 * *.bpf.h it includes): the agent's settings (rodata), the ring buffer,
 * the filters and their maps, the counters, and the making of a sample up
 * to its user stack. Each part includes this first.
 */
#ifndef SR_BPF_COMMON_BPF_H
#define SR_BPF_COMMON_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "profile.h"

#define PF_KTHREAD 0x00200000

/* Set by the agent between open and load (docs/style.md 3). */
const volatile bool skip_idle = true;
const volatile bool skip_kthreads = false;
const volatile bool kernel_stacks = true;
const volatile bool filter_pids = false;
const volatile bool filter_cgroups = false;
/* Unwind user stacks with the agent's tables where it has given them (profiling.unwinding: auto). */
const volatile bool table_unwinding = false;
/* Walk the Python frames of processes the agent put in py_procs (python: true). */
const volatile bool python_frames = false;
/* Name the JavaScript frames of processes the agent put in v8_procs (nodejs.enabled). */
const volatile bool v8_frames = false;
/* Step and record the Java frames of processes the agent put in hotspot_procs (java.enabled). */
const volatile bool java_frames = false;
/* Wake the agent for samples only once this much is waiting; it also polls on a timer. */
const volatile __u64 wakeup_bytes = 1024 * 1024;
/*
 * Samples stop once this much is waiting: the rest of the ring buffer is
 * kept for process and mapping records. A lost sample is counted and costs
 * one sample; a lost mapping would leave every later sample of that process
 * unattributed, so when the agent falls behind, samples give way first.
 */
const volatile __u64 sample_limit_bytes = 7 * 1024 * 1024;
/* Time a CPU sample's stages into the PROFILE_CNT_DBG_* counters (SR_AGENT_DEBUG_STAGE_TIMES=1); off: no code. */
const volatile bool debug_stage_times = false;

/* bpf_ktime_get_ns() when the stages are timed, else 0 (and no call). */
static __always_inline __u64 dbg_now(void)
{
	return debug_stage_times ? bpf_ktime_get_ns() : 0;
}

/* Sizes are set by the agent before load; these are placeholders. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 * 1024 * 1024);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u8);
} allowed_pids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__type(key, __u64);
	__type(value, __u8);
} allowed_cgroups SEC(".maps");

/*
 * Processes (tgid -> start_boottime) that have had a sample since their last
 * exec. A process's first sample wakes the agent at once, so it reads the
 * process's mappings while the process still runs; later samples wait for
 * the agent's next poll. Sized to profiling.max_processes by the agent.
 */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} seen SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PROFILE_CNT__MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

static __always_inline void count_add(__u32 which, __u64 v)
{
	__u64 *n = bpf_map_lookup_elem(&counters, &which);

	if (n)
		*n += v;
}

static __always_inline void count(__u32 which)
{
	count_add(which, 1);
}

static __always_inline bool cgroup_allowed(void)
{
	/*
	 * Walk from the root down: an allowed cgroup admits its whole subtree,
	 * so a pod's cgroup admits each of its containers.
	 */
	for (int level = 0; level < PROFILE_MAX_CGROUP_LEVELS; level++) {
		__u64 id = bpf_get_current_ancestor_cgroup_id(level);

		if (!id)
			return false;
		if (bpf_map_lookup_elem(&allowed_cgroups, &id))
			return true;
	}
	return false;
}

/* Returns the counter that explains why the current task is filtered out, or -1 to keep it. */
static __always_inline int filtered(__u32 tgid, struct task_struct *task)
{
	/* Without kernel stacks, idle and kernel threads would leave empty samples. */
	if (tgid == 0)
		return skip_idle || !kernel_stacks ? PROFILE_CNT_FILTERED_IDLE : -1;
	if ((skip_kthreads || !kernel_stacks) && (BPF_CORE_READ(task, flags) & PF_KTHREAD))
		return PROFILE_CNT_FILTERED_KTHREAD;
	if (filter_pids && !bpf_map_lookup_elem(&allowed_pids, &tgid))
		return PROFILE_CNT_FILTERED_PID;
	if (filter_cgroups && !cgroup_allowed())
		return PROFILE_CNT_FILTERED_CGROUP;
	return -1;
}

static __always_inline void fill_header(struct profile_header *h, __u32 type, __u64 id, struct task_struct *task)
{
	struct task_struct *leader = BPF_CORE_READ(task, group_leader);

	h->type = type;
	h->pid = id >> 32;
	h->tid = (__u32)id;
	h->cpu = bpf_get_smp_processor_id();
	h->ktime_ns = bpf_ktime_get_ns();
	h->start_boottime_ns = BPF_CORE_READ(leader, start_boottime);
	bpf_get_current_comm(h->comm, sizeof(h->comm));
	bpf_probe_read_kernel_str(h->pcomm, sizeof(h->pcomm), &leader->comm);
}

/*
 * A wakeup per sample would cost the agent a context switch per sample; it
 * polls every few hundred milliseconds anyway, so only a process's first
 * sample, or a filling buffer, wakes it.
 */
static __always_inline __u64 sample_wakeup(const struct profile_sample *e)
{
	__u32 tgid = e->hdr.pid;
	__u64 started = e->hdr.start_boottime_ns;
	__u64 *seen_start;
	bool wake = false;

	if (!(e->flags & PROFILE_SAMPLE_KTHREAD)) {
		seen_start = bpf_map_lookup_elem(&seen, &tgid);
		wake = !seen_start || *seen_start != started;
		if (wake)
			bpf_map_update_elem(&seen, &tgid, &started, BPF_ANY);
	}
	if (bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= wakeup_bytes)
		wake = true;
	return wake ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
}

/*
 * Frames of the off-CPU hook's own above the scheduler in a kernel stack
 * (bpf/offcpu.bpf.h): the BPF program and bpf_trace_run1 or the trampoline
 * (2); none from a kprobe, whose stack starts at the probed function.
 */
const volatile __u32 off_cpu_kstack_skip = 2;

/*
 * Everything but the user stack. ctx is the calling program's (a perf event's
 * or a kprobe's): bpf_get_stack() takes either. in_user: the sample
 * interrupted user code, so it has no kernel stack: bpf_get_stack() would
 * find none, after fetching its per-CPU callchain buffer and zeroing the
 * whole kstack, which on a CPU whose caches the workload has taken over
 * since the last sample costs microseconds (bench/README.md, "Agent overhead").
 */
static __always_inline void fill_sample(struct profile_sample *e, void *ctx, __u32 type, __u64 id,
					struct task_struct *task, bool kthread, bool in_user)
{
	fill_header(&e->hdr, type, id, task);
	e->off_cpu_ns = 0;
	e->cgroup_id = bpf_get_current_cgroup_id();
	e->mm = (__u64)BPF_CORE_READ(task, mm);
	e->flags = kthread ? PROFILE_SAMPLE_KTHREAD : 0;
	e->pad = 0;
	e->kstack_len = 0;
	if (kernel_stacks && !in_user) {
		/*
		 * An off-CPU stack is taken from a tracing program: its first
		 * frames are the program's and the tracepoint's (or trampoline's)
		 * glue, not the thread's.
		 */
		__u64 skip = type == PROFILE_EVENT_OFF_CPU ? off_cpu_kstack_skip : 0;
		__u64 t = dbg_now();

		e->kstack_len = bpf_get_stack(ctx, e->kstack, sizeof(e->kstack), skip & BPF_F_SKIP_FIELD_MASK);
		if (debug_stage_times && type == PROFILE_EVENT_SAMPLE)
			count_add(PROFILE_CNT_DBG_NS_KSTACK, bpf_ktime_get_ns() - t);
		if (e->kstack_len < 0)
			count(PROFILE_CNT_KSTACK_ERR);
	}
	e->ustack_len = 0;
}

static __always_inline void fp_user_stack(struct profile_sample *e, void *ctx)
{
	e->ustack_len = bpf_get_stack(ctx, e->ustack, sizeof(e->ustack), BPF_F_USER_STACK);
	if (e->ustack_len < 0)
		count(PROFILE_CNT_USTACK_ERR);
}

#endif
