/* SPDX-License-Identifier: GPL-2.0 OR Apache-2.0 */
/*
 * Off-CPU profiling: how long threads wait, and where (docs/agent.md,
 * "Off-CPU profiling"). It shares the maps, filters and ring buffer of CPU
 * samples (common.bpf.h) and their unwinder (unwind-run.bpf.h).
 *
 * Two hooks. At sched_switch the thread going off CPU is still current:
 * the filters run (idle, kernel threads, pids, cgroups, then the sampling
 * draw) and, if it is kept, only the time is stored, in the thread's task
 * storage. When the thread runs again, the end of __schedule() runs in its
 * context before it leaves the scheduler, so its kernel and user stacks are
 * still exactly what they were when it went off CPU: there the blocked time
 * is known, and only a thread blocked at least off_cpu.min_block, within the
 * per-CPU rate cap, has its stacks taken, through the same code as a CPU
 * sample (bpf_get_stack() for the kernel, the table unwinder or frame
 * pointers for the user). Every switch skipped is counted by reason.
 *
 * The end of __schedule() is the sched_exit_tp tracepoint (6.17+, no trace
 * event: reached through tp_btf only); older kernels are hooked at
 * finish_task_switch(), which runs there too: with an fentry (a BPF
 * trampoline) where the kernel keeps the function whole, else with a kprobe
 * on the clone the compiler left (finish_task_switch.isra.0 in Debian's
 * builds: BTF has no entry an fentry can attach to by that name, and the
 * verifier finds no symbol for the plain one). The agent loads one of the three. A tracing program tail-calls only programs of
 * its type and attach target, so the unwinder has an entry for each, loaded
 * for the same hook and never attached, each with its prog array; and the
 * off-CPU stacks have their own scratch state, since a CPU sample's NMI may
 * interrupt one half unwound.
 */
#ifndef SR_BPF_OFFCPU_BPF_H
#define SR_BPF_OFFCPU_BPF_H

#include "common.bpf.h"
#include "unwind-run.bpf.h"
#include "unwind.bpf.h"

/* Set by the agent between open and load (off_cpu.*); the programs are loaded only when off_cpu.enabled. */
const volatile __u64 off_cpu_min_block_ns = 1000000;
/* A switch is kept when bpf_get_prandom_u32() < this: probability * 2^32 (2^32 keeps every one). */
const volatile __u64 off_cpu_threshold = 1ULL << 32;
/* Stacks taken per second on one CPU at most (off_cpu.max_events_per_second). */
const volatile __u64 off_cpu_max_per_sec = 1000;

/*
 * When a kept thread went off CPU (bpf_ktime_get_ns; 0: not kept), in the
 * thread's own task storage: no lookup by ID, no bound to size, nothing
 * left behind by a thread that exits (its storage goes with it), and no
 * stale entry for a new thread that reuses an ID.
 */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u64);
} off_cpu_start SEC(".maps");

struct off_cpu_window {
	__u64 start_ns; /* the current one-second window on this CPU */
	__u64 n;	/* stacks taken in it */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct off_cpu_window);
} off_cpu_rate SEC(".maps");

struct off_cpu_prog_array {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
};

struct off_cpu_prog_array unwind_progs_exit_tp SEC(".maps");
struct off_cpu_prog_array unwind_progs_fentry SEC(".maps");
struct off_cpu_prog_array unwind_progs_kprobe SEC(".maps");

/* The unwinder's entries for off-CPU stacks: tail-called from off_cpu_resume* and from themselves. */
SEC("tp_btf/sched_exit_tp")
int unwind_user_exit_tp(u64 *ctx)
{
	return unwind_user_run(ctx, UNWIND_SCRATCH_OFF_CPU, &unwind_progs_exit_tp);
}

SEC("fentry/finish_task_switch")
int unwind_user_fentry(u64 *ctx)
{
	return unwind_user_run(ctx, UNWIND_SCRATCH_OFF_CPU, &unwind_progs_fentry);
}

/* The kprobe's section names the plain function; the agent attaches it to the clone's symbol. */
SEC("kprobe/finish_task_switch")
int unwind_user_kprobe(struct pt_regs *ctx)
{
	return unwind_user_run(ctx, UNWIND_SCRATCH_OFF_CPU, &unwind_progs_kprobe);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(off_cpu_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	__u64 id = bpf_get_current_pid_tgid(), *start;
	__u32 tgid = id >> 32;

	/* prev is current here: the filters' helpers see the thread going off CPU. */
	if (tgid == 0) {
		count(PROFILE_CNT_OFF_CPU_SKIP_IDLE);
		return 0;
	}
	if (BPF_CORE_READ(prev, flags) & PF_KTHREAD) {
		count(PROFILE_CNT_OFF_CPU_SKIP_KTHREAD);
		return 0;
	}
	if (filter_pids && !bpf_map_lookup_elem(&allowed_pids, &tgid)) {
		count(PROFILE_CNT_OFF_CPU_SKIP_PID);
		return 0;
	}
	if (filter_cgroups && !cgroup_allowed()) {
		count(PROFILE_CNT_OFF_CPU_SKIP_CGROUP);
		return 0;
	}
	if (off_cpu_threshold <= 0xffffffffULL && bpf_get_prandom_u32() >= off_cpu_threshold) {
		count(PROFILE_CNT_OFF_CPU_SKIP_PROBABILITY);
		return 0;
	}
	start = bpf_task_storage_get(&off_cpu_start, prev, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!start) {
		count(PROFILE_CNT_OFF_CPU_SKIP_NO_STORAGE);
		return 0;
	}
	*start = bpf_ktime_get_ns();
	return 0;
}

/* Whether one more stack fits in this CPU's second; counts it when it does. */
static __always_inline bool off_cpu_rate_ok(__u64 now)
{
	__u32 zero = 0;
	struct off_cpu_window *w = bpf_map_lookup_elem(&off_cpu_rate, &zero);

	if (!w)
		return false;
	if (now - w->start_ns >= 1000000000ULL) {
		w->start_ns = now;
		w->n = 0;
	}
	if (w->n >= off_cpu_max_per_sec)
		return false;
	w->n++;
	return true;
}

/*
 * current is the thread coming back on CPU, still inside the scheduler.
 * progs: the prog array of the calling program's unwinder entry.
 */
static __always_inline int off_cpu_resume_run(void *ctx, void *progs)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	__u64 id = bpf_get_current_pid_tgid(), now, blocked, *start;
	struct unwind_scratch_state *st;
	struct profile_sample *e;
	bool user = true;

	/* No storage made here: only threads kept at switch-out have one. */
	start = bpf_task_storage_get(&off_cpu_start, bpf_get_current_task_btf(), 0, 0);
	if (!start || !*start)
		return 0;
	now = bpf_ktime_get_ns();
	blocked = now - *start;
	*start = 0;
	if (blocked < off_cpu_min_block_ns) {
		count(PROFILE_CNT_OFF_CPU_SKIP_SHORT);
		return 0;
	}
	if (!off_cpu_rate_ok(now)) {
		count(PROFILE_CNT_OFF_CPU_SKIP_RATE);
		return 0;
	}
	count(PROFILE_CNT_OFF_CPU_EVENTS);
	/* As CPU samples do, waits give way to process and mapping records (sample_limit_bytes). */
	if (bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= sample_limit_bytes) {
		count(PROFILE_CNT_OFF_CPU_LOST_RINGBUF);
		return 0;
	}
	/* As for CPU samples: inside execve the user side belongs to the image being replaced. */
	if (BPF_CORE_READ_BITFIELD_PROBED(task, in_execve))
		user = false;
	if (table_unwinding && user) {
		/* No registers here but the kernel's: an ip with the top bit set takes the task's saved user ones. */
		st = table_unwind_begin(ctx, UNWIND_SCRATCH_OFF_CPU, PROFILE_EVENT_OFF_CPU, id, task, ~0ULL, 0, 0);
		if (st) {
			st->sample.off_cpu_ns = blocked;
			bpf_tail_call(ctx, progs, 0);
			/* The tail call failed: frame pointers below. */
		}
	}
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(PROFILE_CNT_OFF_CPU_LOST_RINGBUF);
		return 0;
	}
	fill_sample(e, ctx, PROFILE_EVENT_OFF_CPU, id, task, false, false);
	e->off_cpu_ns = blocked;
	if (user) {
		fp_user_stack(e, ctx);
		if (table_unwinding)
			count(PROFILE_CNT_UNWIND_FP_STACKS);
	}
	bpf_ringbuf_submit(e, sample_wakeup(e));
	return 0;
}

SEC("tp_btf/sched_exit_tp")
int off_cpu_resume_exit_tp(u64 *ctx)
{
	return off_cpu_resume_run(ctx, &unwind_progs_exit_tp);
}

SEC("fentry/finish_task_switch")
int off_cpu_resume_fentry(u64 *ctx)
{
	return off_cpu_resume_run(ctx, &unwind_progs_fentry);
}

SEC("kprobe/finish_task_switch")
int off_cpu_resume_kprobe(struct pt_regs *ctx)
{
	return off_cpu_resume_run(ctx, &unwind_progs_kprobe);
}

#endif
