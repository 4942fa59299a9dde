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
#include "common.bpf.h"
#include "unwind.bpf.h"
#include "pyframe.bpf.h"
#include "v8.bpf.h"
#include "hotspot.bpf.h"
#include "unwind-run.bpf.h"
#include "offcpu.bpf.h"

#define VM_EXEC 0x00000004

/* Report executable file mappings as they are made (PROFILE_EVENT_MMAP). */
const volatile bool track_mmaps = false;

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

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} unwind_progs SEC(".maps");

/* Returns false when the process has no tables or the tail call failed: the caller falls back to frame pointers. */
static __always_inline bool start_table_unwind(struct bpf_perf_event_data *ctx, __u64 id, struct task_struct *task,
					       __u64 t0)
{
	struct unwind_scratch_state *st = table_unwind_begin(ctx, UNWIND_SCRATCH_CPU, PROFILE_EVENT_SAMPLE, id, task,
							     PT_REGS_IP(&ctx->regs), PT_REGS_SP(&ctx->regs),
							     PT_REGS_FP(&ctx->regs));

	if (!st)
		return false;
	if (debug_stage_times) {
		st->dbg_t = bpf_ktime_get_ns();
		count_add(PROFILE_CNT_DBG_NS_BEGIN, st->dbg_t - t0);
	}
	bpf_tail_call(ctx, &unwind_progs, 0);
	return false;
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
	__u64 t0 = dbg_now();
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
	if (table_unwinding && !kthread && user && start_table_unwind(ctx, id, task, t0))
		return 0;
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(PROFILE_CNT_LOST_RINGBUF);
		return 0;
	}
	fill_sample(e, ctx, PROFILE_EVENT_SAMPLE, id, task, kthread, (__s64)PT_REGS_IP(&ctx->regs) >= 0);
	if (!kthread && user) {
		fp_user_stack(e, ctx);
		if (table_unwinding)
			count(PROFILE_CNT_UNWIND_FP_STACKS);
	}
	bpf_ringbuf_submit(e, sample_wakeup(e));
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

/*
 * The exec record alone: where executable mappings are not watched, or
 * arrive through handle_vm_mmap_args, whose kernels (before 5.17) refuse
 * handle_exec's bpf_find_vma() even unreached (its callback is a BPF
 * function pointer, which they do not know). The agent loads one of the two.
 */
SEC("tp_btf/sched_process_exec")
int handle_exec_plain(u64 *ctx)
{
	if (filtered(bpf_get_current_pid_tgid() >> 32, (struct task_struct *)bpf_get_current_task()) >= 0)
		return 0;
	return task_event(PROFILE_EVENT_EXEC);
}

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
		report_vma(PT_REGS_IP_CORE(regs));
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

/* The file's part of vi: its identity and name. */
static __always_inline void vma_info_file(struct vma_info *vi, struct file *file)
{
	struct inode *inode = BPF_CORE_READ(file, f_inode);

	vi->dev = user_dev(BPF_CORE_READ(inode, i_sb, s_dev));
	vi->ino = BPF_CORE_READ(inode, i_ino);
	vi->size = (__u64)BPF_CORE_READ(inode, i_size);
	vi->mtime_ns = inode_mtime_ns(inode);
	bpf_probe_read_kernel_str(vi->name, sizeof(vi->name), BPF_CORE_READ(file, f_path.dentry, d_name.name));
	vi->ok = 1;
}

static long vma_info_cb(struct task_struct *task, struct vm_area_struct *vma, struct vma_info *vi)
{
	struct file *file = vma->vm_file;

	if (!file || !(vma->vm_flags & VM_EXEC))
		return 0;
	vi->start = vma->vm_start;
	vi->end = vma->vm_end;
	vi->offset = (__u64)vma->vm_pgoff << 12;
	vi->mm = (__u64)vma->vm_mm;
	vma_info_file(vi, file);
	return 0;
}

/*
 * Sends the mapping record of vi, which wakes the agent when the file is new
 * to it (it must read the file while the process lives). unwind: whether the mapping also goes into
 * the process's unwind list here (unwind_track_mapping(), which bpf_loop()
 * needs: 5.17, as bpf_find_vma()).
 */
static __always_inline void send_vma(const struct vma_info *vi, __u64 id, struct task_struct *task, bool unwind)
{
	struct profile_mmap_event *e;
	struct file_key key;

	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(PROFILE_CNT_TASK_EVENTS_LOST);
		return;
	}
	fill_header(&e->hdr, PROFILE_EVENT_MMAP, id, task);
	e->mm = vi->mm;
	e->start = vi->start;
	e->end = vi->end;
	e->offset = vi->offset;
	e->dev = vi->dev;
	e->ino = vi->ino;
	e->size = vi->size;
	e->mtime_ns = vi->mtime_ns;
	e->pad = 0;
	__builtin_memcpy(e->name, vi->name, sizeof(e->name));
	key.dev = vi->dev;
	key.ino = vi->ino;
	e->flags = bpf_map_lookup_elem(&known_files, &key) ? 0 : PROFILE_MMAP_UNKNOWN_FILE;
	count(PROFILE_CNT_MMAP_EVENTS);
	bpf_ringbuf_submit(e, e->flags ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP);
	if (unwind && table_unwinding) {
		struct unwind_file_key fk = { vi->dev, vi->ino, vi->mtime_ns, vi->size };

		unwind_track_mapping(id >> 32, BPF_CORE_READ(task, group_leader, start_boottime), vi->mm, vi->start,
				     vi->end, vi->offset, &fk);
	}
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
	struct vma_info vi = {};

	if (filtered(id >> 32, task) >= 0)
		return;
	if (bpf_find_vma(bpf_get_current_task_btf(), addr, vma_info_cb, &vi, 0) || !vi.ok)
		return;
	send_vma(&vi, id, task, true);
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
 * The same hook on kernels without bpf_find_vma() (before 5.17): the
 * mapping as vm_mmap_pgoff() was asked to make it, from its arguments and
 * result, which is what the record carries anyway (the kernel may merge it
 * with a neighbour; the agent keys mappings by their start). Nothing goes
 * into the unwind lists here: table unwinding needs bpf_loop() (5.17) too,
 * and the agent fills them from /proc/PID/maps as it does everywhere.
 */
SEC("fexit/vm_mmap_pgoff")
int BPF_PROG(handle_vm_mmap_args, struct file *file, unsigned long addr, unsigned long len, unsigned long prot,
	     unsigned long flag, unsigned long pgoff, unsigned long ret)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	__u64 id = bpf_get_current_pid_tgid();
	struct vma_info vi = {};

	if (!file || !(prot & SR_PROT_EXEC) || ret >= (unsigned long)-4095 || filtered(id >> 32, task) >= 0)
		return 0;
	vi.start = ret;
	vi.end = ret + ((len + 4095) & ~4095UL);
	vi.offset = (__u64)pgoff << 12;
	vi.mm = (__u64)BPF_CORE_READ(task, mm);
	vma_info_file(&vi, file);
	send_vma(&vi, id, task, false);
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

/* mmap(2)'s number, and where the kernel keeps the number of the system call being made. */
#if defined(__TARGET_ARCH_arm64)
#define SR_NR_MMAP	    222
#define SR_SYSCALL_NR(regs) BPF_CORE_READ(regs, syscallno)
#else
#define SR_NR_MMAP	    9 /* x86-64 */
#define SR_SYSCALL_NR(regs) BPF_CORE_READ(regs, orig_ax)
#endif

SEC("tp_btf/sys_exit")
int BPF_PROG(handle_sys_exit, struct pt_regs *regs, long ret)
{
	if (SR_SYSCALL_NR(regs) != SR_NR_MMAP || (ret < 0 && ret > -4096) || !mmap_wants_exec(regs))
		return 0;
	report_vma((__u64)ret);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
