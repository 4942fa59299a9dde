// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
/*
 * CPU sampling: one perf_event program on a cpu-clock event per CPU, plus
 * exec/exit tracepoints so user space can refresh and retire its process
 * cache. Filters run first, before any stack work, so a filtered sample
 * costs a map lookup at most. Stacks leave as raw addresses through one ring
 * buffer (docs/agent.md says why not in-kernel aggregation).
 */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "profile.h"

#define PF_KTHREAD 0x00200000

/* Set by the agent between open and load (STYLE.md 3). */
const volatile bool skip_idle = true;
const volatile bool skip_kthreads = false;
const volatile bool kernel_stacks = true;
const volatile bool filter_pids = false;
const volatile bool filter_cgroups = false;
/* Wake the agent for samples only once this much is waiting; it also polls on a timer. */
const volatile __u64 wakeup_bytes = 1024 * 1024;

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

static __always_inline void count(__u32 which)
{
	__u64 *n = bpf_map_lookup_elem(&counters, &which);

	if (n)
		(*n)++;
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

SEC("perf_event")
int do_sample(struct bpf_perf_event_data *ctx)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	__u64 id = bpf_get_current_pid_tgid();
	struct profile_sample *e;
	bool kthread;
	int why;

	why = filtered(id >> 32, task);
	if (why >= 0) {
		count(why);
		return 0;
	}
	count(PROFILE_CNT_SAMPLES);
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(PROFILE_CNT_LOST_RINGBUF);
		return 0;
	}
	kthread = (id >> 32) == 0 || (BPF_CORE_READ(task, flags) & PF_KTHREAD);
	fill_header(&e->hdr, PROFILE_EVENT_SAMPLE, id, task);
	e->cgroup_id = bpf_get_current_cgroup_id();
	e->flags = kthread ? PROFILE_SAMPLE_KTHREAD : 0;
	e->pad = 0;
	e->kstack_len = 0;
	if (kernel_stacks) {
		e->kstack_len = bpf_get_stack(ctx, e->kstack, sizeof(e->kstack), 0);
		if (e->kstack_len < 0)
			count(PROFILE_CNT_KSTACK_ERR);
	}
	e->ustack_len = 0;
	if (!kthread) {
		e->ustack_len = bpf_get_stack(ctx, e->ustack, sizeof(e->ustack), BPF_F_USER_STACK);
		if (e->ustack_len < 0)
			count(PROFILE_CNT_USTACK_ERR);
	}
	/*
	 * A wakeup per sample would cost the agent a context switch per sample;
	 * it polls every few tens of milliseconds anyway, so only a process's
	 * first sample, or a filling buffer, wakes it.
	 */
	__u32 tgid = id >> 32;
	__u64 started = e->hdr.start_boottime_ns;
	__u64 *seen_start = bpf_map_lookup_elem(&seen, &tgid);
	bool wake = !kthread && (!seen_start || *seen_start != started);

	if (wake)
		bpf_map_update_elem(&seen, &tgid, &started, BPF_ANY);
	if (bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= wakeup_bytes)
		wake = true;
	bpf_ringbuf_submit(e, wake ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP);
	return 0;
}

static __always_inline int task_event(__u32 type)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	__u64 id = bpf_get_current_pid_tgid();
	struct profile_task_event *e;

	if (filtered(id >> 32, task) >= 0)
		return 0;
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(PROFILE_CNT_TASK_EVENTS_LOST);
		return 0;
	}
	fill_header(&e->hdr, type, id, task);
	if (type == PROFILE_EVENT_EXEC) {
		__u32 tgid = id >> 32;

		/* A new image: its first sample must wake the agent again. */
		bpf_map_delete_elem(&seen, &tgid);
	}
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
	return 0;
}

/*
 * BTF-enabled tracepoints (5.5+) attach by BTF ID, without tracefs, which
 * many nodes and containers do not mount. Only the first argument is used,
 * so later kernels' extra arguments do not matter.
 */
SEC("tp_btf/sched_process_exec")
int handle_exec(u64 *ctx)
{
	return task_event(PROFILE_EVENT_EXEC);
}

SEC("tp_btf/sched_process_exit")
int handle_exit(u64 *ctx)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();

	/* Only the last thread of a process retires it. */
	if (BPF_CORE_READ(task, signal, live.counter) != 0)
		return 0;
	return task_event(PROFILE_EVENT_EXIT);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
