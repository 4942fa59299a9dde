/* SPDX-License-Identifier: GPL-2.0 OR Apache-2.0 */
/*
 * The table unwinder's driver, shared by CPU samples (profile.bpf.c) and
 * off-CPU stacks (offcpu.bpf.h): a sample's scratch state begun, its frames
 * stepped a program's worth at a time (native ones by unwind.bpf.h, Python,
 * V8 and Java ones by pyframe.bpf.h, v8.bpf.h and hotspot.bpf.h), the
 * finished stack submitted.
 */
#ifndef SR_BPF_UNWIND_RUN_BPF_H
#define SR_BPF_UNWIND_RUN_BPF_H

#include "common.bpf.h"
#include "hotspot.bpf.h"
#include "pyframe.bpf.h"
#include "unwind.bpf.h"
#include "v8.bpf.h"

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
	bool timed = debug_stage_times && type == PROFILE_EVENT_SAMPLE;
	__u64 t = timed ? bpf_ktime_get_ns() : 0, t1;
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
	if (timed) {
		t1 = bpf_ktime_get_ns();
		count_add(PROFILE_CNT_DBG_NS_LOOKUP, t1 - t);
		t = t1;
	}
	/* A CPU sample's registers are the interrupted ones: a user address, user code. */
	fill_sample(&st->sample, ctx, type, id, task, false, type == PROFILE_EVENT_SAMPLE && (__s64)ip >= 0);
	if (timed) {
		t1 = bpf_ktime_get_ns();
		count_add(PROFILE_CNT_DBG_NS_HEADER, t1 - t);
		t = t1;
	}
	if ((__s64)ip < 0) {
		regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
		st->rip = PT_REGS_IP_CORE(regs);
		st->rsp = PT_REGS_SP_CORE(regs);
		st->rbp = PT_REGS_FP_CORE(regs);
	} else {
		st->rip = ip;
		st->rsp = sp;
		st->rbp = bp;
	}
#if defined(__TARGET_ARCH_arm64)
	/* A leaf's return address, or one of a frame interrupted in its prologue or epilogue, is still in LR. */
	regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	st->lr = PT_REGS_RET_CORE(regs) & UNWIND_A64_VA_MASK;
#endif
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
	if (timed)
		count_add(PROFILE_CNT_DBG_NS_RUNTIMES, bpf_ktime_get_ns() - t);
	count(PROFILE_CNT_UNWIND_STACKS);
	return st;
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
	/*
	 * The record ends after its last user frame: the rest of the array
	 * would be bytes to copy and for the agent to read, on cache lines
	 * that are cold at a profiler's frequencies (agent/event.c takes it).
	 */
	if (n > PROFILE_MAX_STACK_DEPTH)
		n = PROFILE_MAX_STACK_DEPTH;
	if (bpf_ringbuf_output(&events, &st->sample, offsetof(struct profile_sample, ustack) + n * sizeof(__u64), wake))
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
		__u64 t = dbg_now();
		int r = py_frame_step(slot);

		if (debug_stage_times && slot == UNWIND_SCRATCH_CPU)
			count_add(PROFILE_CNT_DBG_NS_PY, bpf_ktime_get_ns() - t);
		switch (r) {
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
	if (debug_stage_times && slot == UNWIND_SCRATCH_CPU) {
		__u64 t = bpf_ktime_get_ns();

		count_add(PROFILE_CNT_DBG_NS_UNWIND, t - st->dbg_t);
		submit_unwound(st, why);
		count_add(PROFILE_CNT_DBG_NS_SUBMIT, bpf_ktime_get_ns() - t);
		count(PROFILE_CNT_DBG_STACKS);
		return 0;
	}
	submit_unwound(st, why);
	return 0;
}

#endif
