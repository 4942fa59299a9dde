// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
/*
 * CPU sampling: one perf_event program on a cpu-clock event per CPU, plus
 * exec/exit tracepoints so user space can refresh and retire its process
 * cache, and executable mappings as they are made (fentry on uprobe_mmap)
 * so no process is too short-lived to attribute. Filters
 * run first, before any stack work, so a filtered sample costs a map lookup
 * at most. User stacks come from the table unwinder (unwind.bpf.h) for
 * processes whose mappings the agent has given it, else from the frame
 * pointers. Stacks leave as raw addresses through one ring buffer
 * (docs/agent.md says why not in-kernel aggregation). Off-CPU time is
 * measured on the scheduler's hooks in offcpu.bpf.h, with the same filters,
 * unwinder and ring buffer.
 */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "profile.h"

#define PF_KTHREAD 0x00200000
#define VM_EXEC	   0x00000004

/* Set by the agent between open and load (docs/style.md 3). */
const volatile bool skip_idle = true;
const volatile bool skip_kthreads = false;
const volatile bool kernel_stacks = true;
const volatile bool filter_pids = false;
const volatile bool filter_cgroups = false;
/* Report executable file mappings as they are made (PROFILE_EVENT_MMAP). */
const volatile bool track_mmaps = false;
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

/*
 * Files (dev, inode) the agent has identified: a mapping of one of them does
 * not wake the agent. Sized by the agent; least recently used forgotten.
 */
struct file_key {
	__u64 dev;
	__u64 ino;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1);
	__type(key, struct file_key);
	__type(value, __u8);
} known_files SEC(".maps");

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

#include "unwind.bpf.h"
#include "pyframe.bpf.h"
#include "v8.bpf.h"
#include "hotspot.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} unwind_progs SEC(".maps");

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

/* Kernel frames above the scheduler in an off-CPU stack: the BPF program and bpf_trace_run1 (or the trampoline). */
#define OFF_CPU_KSTACK_SKIP 2

/*
 * Everything but the user stack. ctx is the calling program's (a perf event's
 * or a kprobe's): bpf_get_stack() takes either.
 */
static __always_inline void fill_sample(struct profile_sample *e, void *ctx, __u32 type, __u64 id,
					struct task_struct *task, bool kthread)
{
	fill_header(&e->hdr, type, id, task);
	e->off_cpu_ns = 0;
	e->cgroup_id = bpf_get_current_cgroup_id();
	e->mm = (__u64)BPF_CORE_READ(task, mm);
	e->flags = kthread ? PROFILE_SAMPLE_KTHREAD : 0;
	e->pad = 0;
	e->kstack_len = 0;
	if (kernel_stacks) {
		/*
		 * An off-CPU stack is taken from a tracing program: its first
		 * frames are the program's and the tracepoint's (or trampoline's)
		 * glue, not the thread's.
		 */
		__u64 skip = type == PROFILE_EVENT_OFF_CPU ? OFF_CPU_KSTACK_SKIP : 0;

		e->kstack_len = bpf_get_stack(ctx, e->kstack, sizeof(e->kstack), skip & BPF_F_SKIP_FIELD_MASK);
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

/*
 * The table unwinder's start: the sample goes into the per-CPU scratch entry
 * with the user registers, ready for unwind_user() (or unwind_user_kprobe()).
 * Returns NULL when the process has no mappings in unwind_procs (yet). ip,
 * sp, bp: the registers the program was handed; when they are a kernel's
 * (its addresses have the top bit set), the user's are the ones the task
 * saved at kernel entry.
 */
static __always_inline struct unwind_scratch_state *
table_unwind_begin(void *ctx, __u32 slot, __u32 type, __u64 id, struct task_struct *task, __u64 ip, __u64 sp, __u64 bp)
{
	struct pt_regs *regs;
	__u32 tgid = id >> 32;
	struct unwind_proc *proc = bpf_map_lookup_elem(&unwind_procs, &tgid);
	struct unwind_scratch_state *st;

	if (!proc || proc->start_boottime_ns != BPF_CORE_READ(task, group_leader, start_boottime))
		return NULL;
	st = bpf_map_lookup_elem(&unwind_scratch, &slot);
	if (!st)
		return NULL;
	st->slot = slot;
	fill_sample(&st->sample, ctx, type, id, task, false);
	if ((__s64)ip < 0) {
		regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
		st->rip = BPF_CORE_READ(regs, ip);
		st->rsp = BPF_CORE_READ(regs, sp);
		st->rbp = BPF_CORE_READ(regs, bp);
	} else {
		st->rip = ip;
		st->rsp = sp;
		st->rbp = bp;
	}
	st->n = 0;
	st->table_frames = 0;
	st->fp_frames = 0;
	/* The CPU's last stack may have been another process's. */
	st->cur_valid = 0;
	st->rbp_valid = 1;
	st->return_address = 0;
	st->py_state = PY_STATE_OFF;
	st->py_frames = 0;
	st->py_new = 0;
	if (python_frames)
		py_begin(slot);
	st->v8.start_boottime_ns = 0;
	if (v8_frames)
		v8_begin(slot);
	st->jvm.start_boottime_ns = 0;
	if (java_frames)
		hotspot_begin(slot);
	count(PROFILE_CNT_UNWIND_STACKS);
	return st;
}

/* Returns false when the process has no tables or the tail call failed: the caller falls back to frame pointers. */
static __always_inline bool start_table_unwind(struct bpf_perf_event_data *ctx, __u64 id, struct task_struct *task)
{
	if (!table_unwind_begin(ctx, UNWIND_SCRATCH_CPU, PROFILE_EVENT_SAMPLE, id, task, ctx->regs.ip, ctx->regs.sp,
				ctx->regs.bp))
		return false;
	bpf_tail_call(ctx, &unwind_progs, 0);
	return false;
}

static __always_inline void submit_unwound(struct unwind_scratch_state *st, int why)
{
	__u32 n = st->n;
	__u64 wake;

	count(why);
	count_add(PROFILE_CNT_UNWIND_TABLE_FRAMES, st->table_frames);
	count_add(PROFILE_CNT_UNWIND_FP_FRAMES, st->fp_frames);
	if (st->py_frames)
		count_add(PROFILE_CNT_PY_FRAMES, st->py_frames);
	if (st->v8.start_boottime_ns)
		count_add(PROFILE_CNT_V8_FRAMES, st->v8_frames);
	if (st->jvm.start_boottime_ns)
		count_add(PROFILE_CNT_JVM_FRAMES, st->jvm_frames);
	st->sample.flags |= PROFILE_SAMPLE_UNWOUND;
	st->sample.ustack_len = (__s32)(n * sizeof(__u64));
	wake = sample_wakeup(&st->sample);
	if (st->py_new)
		wake = BPF_RB_FORCE_WAKEUP;
	if (bpf_ringbuf_output(&events, &st->sample, sizeof(st->sample), wake))
		count(st->sample.hdr.type == PROFILE_EVENT_OFF_CPU ? PROFILE_CNT_OFF_CPU_LOST_RINGBUF
								   : PROFILE_CNT_LOST_RINGBUF);
}

/*
 * One frame: record the pc, step to the caller. A global function, so the
 * verifier checks it once however many times the loop below calls it (a
 * static one is re-verified per call site and iteration, past the
 * verifier's limits). Returns 0 to go on, or the PROFILE_CNT_UNWIND_END_*.
 */
__noinline int unwind_frame(__u32 slot)
{
	struct unwind_scratch_state *st = bpf_map_lookup_elem(&unwind_scratch, &slot);
	__u32 n;

	if (!st)
		return PROFILE_CNT_UNWIND_END_READ_FAULT;
	n = st->n;
	if (n >= PROFILE_MAX_STACK_DEPTH)
		return PROFILE_CNT_UNWIND_END_DEPTH;
	/* An eval-loop frame of a Python process: its Python frames instead, one a call (pyframe.bpf.h). */
	if (python_frames &&
	    (st->py_state == PY_STATE_EMITTING ||
	     (st->py_state == PY_STATE_READY && st->rip >= st->py.eval_start && st->rip < st->py.eval_end))) {
		switch (py_frame_step(slot)) {
		case PY_STEP_FRAME:
			return 0;
		case PY_STEP_END:
			return unwind_step(st);
		default:
			break;
		}
	}
	st->sample.ustack[n] = st->rip;
	st->n = n + 1;
	return unwind_step(st);
}

/*
 * UNWIND_FRAMES_PER_PROG frames, then a tail call to the same program for
 * the next ones, or the finished stack into the ring buffer. slot: the
 * scratch state (UNWIND_SCRATCH_*); progs: the prog array of the caller's
 * program type (a tail call keeps the type).
 */
static __always_inline int unwind_user_run(void *ctx, __u32 slot, void *progs)
{
	struct unwind_scratch_state *st;
	int why = 0;

	for (int f = 0; f < UNWIND_FRAMES_PER_PROG && !why; f++)
		why = unwind_frame(slot);
	st = bpf_map_lookup_elem(&unwind_scratch, &slot);
	if (!st)
		return 0;
	if (!why) {
		bpf_tail_call(ctx, progs, 0);
		/* Out of tail calls: what was unwound so far is the stack. */
		why = PROFILE_CNT_UNWIND_END_DEPTH;
	}
	submit_unwound(st, why);
	return 0;
}

/* Tail-called from do_sample and from itself. */
SEC("perf_event")
int unwind_user(struct bpf_perf_event_data *ctx)
{
	return unwind_user_run(ctx, UNWIND_SCRATCH_CPU, &unwind_progs);
}

SEC("perf_event")
int do_sample(struct bpf_perf_event_data *ctx)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	__u64 id = bpf_get_current_pid_tgid();
	struct profile_sample *e;
	bool kthread, user = true;
	int why;

	why = filtered(id >> 32, task);
	if (why >= 0) {
		count(why);
		return 0;
	}
	count(PROFILE_CNT_SAMPLES);
	/* Before any stack work: a sample that will not fit costs nothing more. */
	if (bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= sample_limit_bytes) {
		count(PROFILE_CNT_LOST_RINGBUF);
		return 0;
	}
	kthread = (id >> 32) == 0 || (BPF_CORE_READ(task, flags) & PF_KTHREAD);
	/*
	 * Inside execve the user registers and memory belong to the image
	 * being replaced (or to none yet): the sample is the kernel's work,
	 * so it keeps its kernel stack and no user stack.
	 */
	if (!kthread && BPF_CORE_READ_BITFIELD_PROBED(task, in_execve)) {
		count(PROFILE_CNT_USTACK_IN_EXEC);
		user = false;
	}
	if (table_unwinding && !kthread && user && start_table_unwind(ctx, id, task))
		return 0;
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(PROFILE_CNT_LOST_RINGBUF);
		return 0;
	}
	fill_sample(e, ctx, PROFILE_EVENT_SAMPLE, id, task, kthread);
	if (!kthread && user) {
		fp_user_stack(e, ctx);
		if (table_unwinding)
			count(PROFILE_CNT_UNWIND_FP_STACKS);
	}
	bpf_ringbuf_submit(e, sample_wakeup(e));
	return 0;
}

#include "offcpu.bpf.h"

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
	e->mm = (__u64)BPF_CORE_READ(task, mm);
	e->vdso = 0;
	if (type == PROFILE_EVENT_EXEC && bpf_core_field_exists(struct mm_struct, context.vdso))
		e->vdso = (__u64)BPF_CORE_READ(task, mm, context.vdso);
	if (type == PROFILE_EVENT_EXEC) {
		__u32 tgid = id >> 32;

		/* A new image: its first sample must wake the agent again. */
		bpf_map_delete_elem(&seen, &tgid);
		/* ... and the old image's interpreter is gone (the agent adds the new one's if it has one). */
		if (python_frames && bpf_map_lookup_elem(&py_procs, &tgid))
			bpf_map_delete_elem(&py_procs, &tgid);
		if (v8_frames && bpf_map_lookup_elem(&v8_procs, &tgid))
			bpf_map_delete_elem(&v8_procs, &tgid);
		if (java_frames && bpf_map_lookup_elem(&hotspot_procs, &tgid))
			bpf_map_delete_elem(&hotspot_procs, &tgid);
	}
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
	return 0;
}

/*
 * BTF-enabled tracepoints (5.5+) attach by BTF ID, without tracefs, which
 * many nodes and containers do not mount. Only the first argument is used,
 * so later kernels' extra arguments do not matter.
 */
static __always_inline void report_vma(__u64 addr);

/* Set by the agent once handle_vm_mmap is attached: exec's mappings then arrive through it. */
volatile bool exec_maps_by_fexit = false;

SEC("tp_btf/sched_process_exec")
int handle_exec(u64 *ctx)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct pt_regs *regs;

	if (filtered(bpf_get_current_pid_tgid() >> 32, task) >= 0)
		return 0;
	/*
	 * exec maps the program and its interpreter in the kernel, without
	 * mmap(2): report the program's text and the code where it will start
	 * (the dynamic loader's entry point, or the program's own when static),
	 * before the exec record, which adds the vDSO to them.
	 */
	if (track_mmaps && !exec_maps_by_fexit) {
		report_vma(BPF_CORE_READ(task, mm, start_code));
		regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
		report_vma(BPF_CORE_READ(regs, ip));
	}
	return task_event(PROFILE_EVENT_EXEC);
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(handle_fork, struct task_struct *parent, struct task_struct *child)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	__u32 tgid = BPF_CORE_READ(child, tgid);
	struct profile_fork_event *e;

	/* Threads share their process's mappings: only new processes matter. */
	if (!track_mmaps || BPF_CORE_READ(child, pid) != tgid || filtered(tgid, task) >= 0)
		return 0;
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(PROFILE_CNT_TASK_EVENTS_LOST);
		return 0;
	}
	fill_header(&e->hdr, PROFILE_EVENT_FORK, bpf_get_current_pid_tgid(), task);
	e->parent_pid = e->hdr.pid;
	e->parent_start_boottime_ns = e->hdr.start_boottime_ns;
	e->hdr.pid = tgid;
	e->hdr.tid = tgid;
	e->hdr.start_boottime_ns = BPF_CORE_READ(child, start_boottime);
	e->pad = 0;
	e->mm = (__u64)BPF_CORE_READ(child, mm);
	if (table_unwinding)
		unwind_track_fork(e->parent_pid, e->parent_start_boottime_ns, tgid, e->hdr.start_boottime_ns, e->mm);
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int handle_exit(u64 *ctx)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();

	__u32 tgid = bpf_get_current_pid_tgid() >> 32;

	/* Only the last thread of a process retires it. */
	if (BPF_CORE_READ(task, signal, live.counter) != 0)
		return 0;
	/*
	 * Its mapping list may have been written here alone (unwind_track_mapping):
	 * the agent may never see it. Most exiting processes have none (filtered,
	 * or never sampled nor mapping a file): the lock-free lookup spares them
	 * the delete's bucket lock.
	 */
	if (table_unwinding && bpf_map_lookup_elem(&unwind_procs, &tgid))
		bpf_map_delete_elem(&unwind_procs, &tgid);
	return task_event(PROFILE_EVENT_EXIT);
}

/* inode timestamps moved: i_mtime (timespec64) until 6.6, __i_mtime in 6.7-6.10, i_mtime_sec/nsec since 6.11. */
struct inode___sec {
	time64_t i_mtime_sec;
	__u32 i_mtime_nsec;
} __attribute__((preserve_access_index));

struct inode___ts {
	struct timespec64 __i_mtime;
} __attribute__((preserve_access_index));

struct inode___old {
	struct timespec64 i_mtime;
} __attribute__((preserve_access_index));

static __always_inline __u64 inode_mtime_ns(struct inode *inode)
{
	if (bpf_core_field_exists(struct inode___sec, i_mtime_sec)) {
		struct inode___sec *i = (void *)inode;
		return (__u64)BPF_CORE_READ(i, i_mtime_sec) * 1000000000ULL + BPF_CORE_READ(i, i_mtime_nsec);
	}
	if (bpf_core_field_exists(struct inode___ts, __i_mtime)) {
		struct inode___ts *i = (void *)inode;
		return (__u64)BPF_CORE_READ(i, __i_mtime.tv_sec) * 1000000000ULL + BPF_CORE_READ(i, __i_mtime.tv_nsec);
	}
	struct inode___old *i = (void *)inode;
	return (__u64)BPF_CORE_READ(i, i_mtime.tv_sec) * 1000000000ULL + BPF_CORE_READ(i, i_mtime.tv_nsec);
}

/* The kernel's dev_t (major << 20 | minor) as stat() reports it (new_encode_dev). */
static __always_inline __u64 user_dev(__u32 kdev)
{
	__u32 major = kdev >> 20, minor = kdev & ((1U << 20) - 1);

	return (minor & 0xff) | ((__u64)major << 8) | ((__u64)(minor & ~0xffU) << 12);
}

/* What report_vma() needs of a mapping, filled by bpf_find_vma()'s callback. */
struct vma_info {
	__u64 start;
	__u64 end;
	__u64 offset;
	__u64 dev;
	__u64 ino;
	__u64 size;
	__u64 mtime_ns;
	__u64 mm;
	__u32 ok; /* an executable file mapping */
	__u32 pad;
	char name[PROFILE_MMAP_NAME_LEN];
};

static long vma_info_cb(struct task_struct *task, struct vm_area_struct *vma, struct vma_info *vi)
{
	struct file *file = vma->vm_file;
	struct inode *inode;

	if (!file || !(vma->vm_flags & VM_EXEC))
		return 0;
	inode = BPF_CORE_READ(file, f_inode);
	vi->start = vma->vm_start;
	vi->end = vma->vm_end;
	vi->offset = (__u64)vma->vm_pgoff << 12;
	vi->mm = (__u64)vma->vm_mm;
	vi->dev = user_dev(BPF_CORE_READ(inode, i_sb, s_dev));
	vi->ino = BPF_CORE_READ(inode, i_ino);
	vi->size = (__u64)BPF_CORE_READ(inode, i_size);
	vi->mtime_ns = inode_mtime_ns(inode);
	bpf_probe_read_kernel_str(vi->name, sizeof(vi->name), BPF_CORE_READ(file, f_path.dentry, d_name.name));
	vi->ok = 1;
	return 0;
}

/*
 * Reports the executable file mapping of the current process that holds
 * addr, if there is one: a PROFILE_EVENT_MMAP record, which wakes the agent
 * when the file is new to it (it must read the file while the process
 * lives). bpf_find_vma() (5.17+) takes the mmap lock for reading, so no
 * caller may hold it.
 */
static __always_inline void report_vma(__u64 addr)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	__u64 id = bpf_get_current_pid_tgid();
	struct profile_mmap_event *e;
	struct vma_info vi = {};
	struct file_key key;

	if (filtered(id >> 32, task) >= 0)
		return;
	if (bpf_find_vma(bpf_get_current_task_btf(), addr, vma_info_cb, &vi, 0) || !vi.ok)
		return;
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(PROFILE_CNT_TASK_EVENTS_LOST);
		return;
	}
	fill_header(&e->hdr, PROFILE_EVENT_MMAP, id, task);
	e->mm = vi.mm;
	e->start = vi.start;
	e->end = vi.end;
	e->offset = vi.offset;
	e->dev = vi.dev;
	e->ino = vi.ino;
	e->size = vi.size;
	e->mtime_ns = vi.mtime_ns;
	e->pad = 0;
	__builtin_memcpy(e->name, vi.name, sizeof(e->name));
	key.dev = vi.dev;
	key.ino = vi.ino;
	e->flags = bpf_map_lookup_elem(&known_files, &key) ? 0 : PROFILE_MMAP_UNKNOWN_FILE;
	count(PROFILE_CNT_MMAP_EVENTS);
	bpf_ringbuf_submit(e, e->flags ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP);
	if (table_unwinding) {
		struct unwind_file_key fk = { vi.dev, vi.ino, vi.mtime_ns, vi.size };

		unwind_track_mapping(id >> 32, BPF_CORE_READ(task, group_leader, start_boottime), vi.mm, vi.start,
				     vi.end, vi.offset, &fk);
	}
}

/*
 * Libraries (the dynamic loader's mmaps, dlopen) arrive through mmap(2):
 * at its exit the mapping exists. The per-syscall tracepoint costs nothing
 * for other syscalls' BPF; it needs tracefs, so a host without it uses the
 * raw sys_exit tracepoint, which runs for every syscall and filters here.
 * (fentry on the mm code would see mprotect too, but is refused where BPF
 * trampolines are locked down, and uprobe_mmap/perf_event_mmap are not
 * always traceable.)
 */
#define SR_PROT_EXEC	 0x4
#define SR_MAP_ANONYMOUS 0x20

/*
 * Whether the mmap(2) whose exit this is asked for executable file memory:
 * at the syscall's exit the task's user registers still hold its arguments
 * (prot is the third, flags the fourth). Most mmaps are data (malloc arenas,
 * thread stacks, files read by mapping them): they return here, before the
 * filters and bpf_find_vma()'s walk under the mmap lock.
 */
static __always_inline bool mmap_wants_exec(struct pt_regs *regs)
{
	unsigned long prot = PT_REGS_PARM3_CORE_SYSCALL(regs);
	unsigned long flags = PT_REGS_PARM4_CORE_SYSCALL(regs);

	return (prot & SR_PROT_EXEC) && !(flags & SR_MAP_ANONYMOUS);
}

SEC("tracepoint/syscalls/sys_exit_mmap")
int handle_mmap_exit(struct trace_event_raw_sys_exit *ctx)
{
	long ret = ctx->ret;

	if (ret < 0 && ret > -4096)
		return 0;
	if (!mmap_wants_exec((struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf())))
		return 0;
	report_vma((__u64)ret);
	return 0;
}

/*
 * Every file mapping goes through vm_mmap_pgoff(): mmap(2) and the ELF
 * loader's during exec (program, interpreter). At its exit the mapping
 * exists and mmap_lock is released, so report_vma() may look it up. The
 * agent prefers this hook (agent/sampler.c): it runs for mappings only, and
 * returns before any lookup for the non-executable ones.
 */
SEC("fexit/vm_mmap_pgoff")
int BPF_PROG(handle_vm_mmap, struct file *file, unsigned long addr, unsigned long len, unsigned long prot,
	     unsigned long flag, unsigned long pgoff, unsigned long ret)
{
	if (!file || !(prot & SR_PROT_EXEC) || ret >= (unsigned long)-4095)
		return 0;
	report_vma(ret);
	return 0;
}

/*
 * The same hook where trampolines are refused: a kretprobe (the kprobe PMU,
 * no tracefs needed). Without the arguments at return, every mapping is
 * looked up, not only executable ones; report_vma() keeps executable file
 * mappings.
 */
SEC("kretprobe/vm_mmap_pgoff")
int BPF_KRETPROBE(handle_vm_mmap_ret, unsigned long ret)
{
	if (ret >= (unsigned long)-4095)
		return 0;
	report_vma(ret);
	return 0;
}

#define SR_NR_MMAP 9 /* x86-64 */

SEC("tp_btf/sys_exit")
int BPF_PROG(handle_sys_exit, struct pt_regs *regs, long ret)
{
	if (BPF_CORE_READ(regs, orig_ax) != SR_NR_MMAP || (ret < 0 && ret > -4096) || !mmap_wants_exec(regs))
		return 0;
	report_vma((__u64)ret);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
