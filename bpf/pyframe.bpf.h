/* SPDX-License-Identifier: GPL-2.0 OR Apache-2.0 */
/*
 * Python frames inside the table unwinder (bpf/pyframe.h says what is
 * recorded). py_begin() runs once per sample of a process in py_procs and
 * finds the thread's current Python frame; py_frame_step() runs in place of
 * a native frame whose pc is in _PyEval_EvalFrameDefault, once per Python
 * frame of that invocation of the eval loop, leaf first. Both are global
 * functions (checked once by the verifier), every loop is bounded, and each
 * Python frame takes one unwind_frame() call and one ustack slot, so the
 * table unwinder's limits (PROFILE_MAX_STACK_DEPTH, the tail calls) bound
 * the Python frames too.
 */
#ifndef SR_BPF_PYTHON_BPF_H
#define SR_BPF_PYTHON_BPF_H

#include "common.bpf.h"
#include "pyframe.h"
#include "unwind.bpf.h"

/* Where the walker stands in a sample (unwind_scratch_state.py_state). */
enum py_state {
	PY_STATE_OFF = 0,  /* not a Python process, or no Python frame to show */
	PY_STATE_READY,	   /* py_frame is the next invocation's leaf frame: waiting for an eval-loop pc */
	PY_STATE_EMITTING, /* inside an invocation's frames */
};

/* py_frame_step()'s answers. */
enum py_step {
	PY_STEP_FRAME = 0, /* a Python frame recorded; the invocation has more */
	PY_STEP_END,	   /* the invocation's frames are done: step over its native frame */
	PY_STEP_FAIL,	   /* nothing recorded: keep the native frame */
};

/* tgid -> its interpreter; sized to profiling.max_processes by the agent. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct py_proc);
} py_procs SEC(".maps");

/* Thread ID -> its PyThreadState, checked on use (its thread_id must still be the thread's). */
#define PY_THREAD_CACHE 4096
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, PY_THREAD_CACHE);
	__type(key, __u32);
	__type(value, __u64);
} py_threads SEC(".maps");

/*
 * (tgid, code object) seen lately. A sample with a code object not in it
 * wakes the agent at once: the agent reads the code object's name from the
 * process's memory, which a short-lived process takes with it when it exits.
 */
#define PY_CODES_SEEN 65536
struct py_code_key {
	__u32 tgid;
	__u32 pad;
	__u64 code;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, PY_CODES_SEEN);
	__type(key, struct py_code_key);
	__type(value, __u8);
} py_codes_seen SEC(".maps");

static __always_inline __u64 py_read_ptr(__u64 addr)
{
	__u64 v = 0;

	if (bpf_probe_read_user(&v, sizeof(v), (const void *)addr))
		return 0;
	return v;
}

/* The sampled thread's PyThreadState: the cached one if it is still the thread's, else the interpreter's list. */
/*
 * Whether a thread state's thread_id (pthread_self()) is the thread whose
 * thread pointer is tp. x86-64: pthread_self() is the thread pointer, the FS
 * base. arm64: glibc's struct pthread ends where the thread pointer
 * (TPIDR_EL0) points, so pthread_self() lies below it by that struct's size,
 * which differs between glibc versions; threads' structs lie a stack apart,
 * so the first one within PY_A64_PTHREAD_MAX below tp is the thread's.
 */
#define PY_A64_PTHREAD_MAX 4096
static __always_inline bool py_thread_is(__u64 thread_id, __u64 tp)
{
#if defined(__TARGET_ARCH_arm64)
	return thread_id < tp && tp - thread_id <= PY_A64_PTHREAD_MAX;
#else
	return thread_id == tp;
#endif
}

static __always_inline __u64 py_find_tstate(const struct py_proc *p, __u32 tid, bool main_thread, __u64 tp)
{
	__u64 *cached = bpf_map_lookup_elem(&py_threads, &tid), ts, interp, head;

#if defined(__TARGET_ARCH_arm64)
	/*
	 * A main thread that has not left the CPU since its exec has no
	 * TPIDR_EL0 saved yet: tp_value is 0, or what the image before the exec
	 * left (arm64 clears it only for 32-bit tasks). Such a thread is found
	 * below when its process has one thread state, which is then its own.
	 */
	if (!tp && !main_thread)
		return 0;
#else
	/* No thread pointer: nothing to match (a thread state not yet bound has thread_id 0). */
	if (!tp)
		return 0;
#endif
	if (tp && cached && *cached && py_thread_is(py_read_ptr(*cached + p->off.tstate_thread_id), tp))
		return *cached;
	interp = py_read_ptr(p->runtime + p->off.runtime_interp_head);
	if (!interp)
		return 0;
	head = ts = py_read_ptr(interp + p->off.interp_threads_head);
	for (int i = 0; i < PY_MAX_THREADS && ts; i++) {
		if (tp && py_thread_is(py_read_ptr(ts + p->off.tstate_thread_id), tp)) {
			bpf_map_update_elem(&py_threads, &tid, &ts, BPF_ANY);
			return ts;
		}
		ts = py_read_ptr(ts + p->off.tstate_next);
	}
#if defined(__TARGET_ARCH_arm64)
	if (main_thread && head && !py_read_ptr(head + p->off.tstate_next))
		return head;
#else
	(void)main_thread;
	(void)head;
#endif
	return 0;
}

/* Sets up the scratch state of slot for the Python frames of this sample, when its process is Python. */
__noinline int py_begin(__u32 slot)
{
	struct unwind_scratch_state *st = bpf_map_lookup_elem(&unwind_scratch, &slot);
	__u64 id = bpf_get_current_pid_tgid(), ts, frame;
	/*
	 * bpf_get_current_task() (4.8), not its BTF-typed twin (5.11): the task
	 * is only read through CO-RE, and this global function is verified on
	 * every kernel, whatever the settings that leave it unreachable.
	 */
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	__u32 tgid = id >> 32;
	const struct py_proc *p;

	if (!st)
		return 0;
	st->py_state = PY_STATE_OFF;
	st->py_frames = 0;
	st->py_new = 0;
	p = bpf_map_lookup_elem(&py_procs, &tgid);
	if (!p || p->start_boottime_ns != st->sample.hdr.start_boottime_ns)
		return 0;
	st->py = *p;
	/*
	 * The thread pointer as the kernel keeps it (py_thread_is). arm64's
	 * tp_value is TPIDR_EL0 as of the task's last switch out (or its
	 * clone's CLONE_SETTLS): glibc sets the main thread's from user space,
	 * so until that thread first leaves the CPU it is 0 and no thread is
	 * found (PROFILE_CNT_PY_NO_THREAD).
	 */
#if defined(__TARGET_ARCH_arm64)
	ts = py_find_tstate(p, (__u32)id, (__u32)id == tgid,
			    bpf_core_field_exists(task->thread.uw.tp_value) ? BPF_CORE_READ(task, thread.uw.tp_value)
									    : 0);
#else
	ts = py_find_tstate(p, (__u32)id, (__u32)id == tgid,
			    bpf_core_field_exists(task->thread.fsbase) ? BPF_CORE_READ(task, thread.fsbase) : 0);
#endif
	if (!ts) {
		count(PROFILE_CNT_PY_NO_THREAD);
		return 0;
	}
	frame = py_read_ptr(ts + p->off.tstate_frame);
	if (frame && p->off.cframe_current != PY_OFF_NONE)
		frame = py_read_ptr(frame + p->off.cframe_current);
	if (!frame) {
		count(PROFILE_CNT_PY_NO_FRAME);
		return 0;
	}
	st->py_frame = frame;
	st->py_state = PY_STATE_READY;
	count(PROFILE_CNT_PY_STACKS);
	return 0;
}

/* The frame's instruction offset as bpf/pyframe.h records it (code units from 3.10, bytes before). */
static __always_inline __u64 py_instr_offset(const struct py_proc *p, __u64 frame, __u64 code)
{
	__u64 off = 0, instr, base;
	__s32 lasti = 0;

	if (p->off.instr_kind == PY_INSTR_PTR) {
		instr = py_read_ptr(frame + p->off.frame_instr);
		base = code + p->off.code_adaptive;
		if (instr >= base)
			off = (instr - base) / 2;
	} else if (!bpf_probe_read_user(&lasti, sizeof(lasti), (const void *)(frame + p->off.frame_instr)) &&
		   lasti > 0) {
		off = (__u64)lasti;
	}
	return off > PY_FRAME_OFFSET_MAX ? PY_FRAME_OFFSET_MAX : off;
}

/*
 * One step through the Python frames of the eval-loop invocation whose
 * native frame the unwinder stands on (enum py_step says what it did).
 */
__noinline int py_frame_step(__u32 slot)
{
	struct unwind_scratch_state *st = bpf_map_lookup_elem(&unwind_scratch, &slot);
	__u64 frame, code;
	__u8 entry = 0;
	bool end;
	__u32 n;

	if (!st)
		return PY_STEP_FAIL;
	frame = st->py_frame;
	if (!frame) {
		/* The chain ended inside an invocation: what was recorded stands for its native frame. */
		end = st->py_state == PY_STATE_EMITTING;
		st->py_state = PY_STATE_OFF;
		return end ? PY_STEP_END : PY_STEP_FAIL;
	}
	if (st->py.off.entry_kind == PY_ENTRY_SHIM && st->py.off.frame_entry != PY_OFF_NONE) {
		if (bpf_probe_read_user(&entry, sizeof(entry), (const void *)(frame + st->py.off.frame_entry)))
			goto fail;
		if (entry == PY_FRAME_OWNED_BY_CSTACK) {
			/* The shim below an invocation's frames: the next invocation's start after it. */
			st->py_frame = py_read_ptr(frame + st->py.off.frame_previous);
			st->py_state = PY_STATE_READY;
			return PY_STEP_END;
		}
	}
	code = py_read_ptr(frame + st->py.off.frame_code);
	if (!code || (code & ~PY_FRAME_ADDR_MASK))
		goto fail;
	n = st->n;
	if (n >= PROFILE_MAX_STACK_DEPTH)
		return PY_STEP_FAIL;
	if (!st->py_new) {
		struct py_code_key ck = { .tgid = st->sample.hdr.pid, .code = code };
		__u8 one = 1;

		if (!bpf_map_lookup_elem(&py_codes_seen, &ck)) {
			bpf_map_update_elem(&py_codes_seen, &ck, &one, BPF_ANY);
			st->py_new = 1;
		}
	}
	st->sample.ustack[n] = PY_FRAME_FLAG | (py_instr_offset(&st->py, frame, code) << PY_FRAME_OFFSET_SHIFT) | code;
	st->n = n + 1;
	st->py_frames++;
	switch (st->py.off.entry_kind) {
	case PY_ENTRY_PER_FRAME:
		end = true;
		break;
	case PY_ENTRY_IS_ENTRY:
		end = !bpf_probe_read_user(&entry, sizeof(entry), (const void *)(frame + st->py.off.frame_entry)) &&
		      entry;
		break;
	default:
		end = false;
		break;
	}
	st->py_frame = py_read_ptr(frame + st->py.off.frame_previous);
	st->py_state = end ? PY_STATE_READY : PY_STATE_EMITTING;
	return end ? PY_STEP_END : PY_STEP_FRAME;
fail:
	end = st->py_state == PY_STATE_EMITTING;
	st->py_state = PY_STATE_OFF;
	return end ? PY_STEP_END : PY_STEP_FAIL;
}

#endif
