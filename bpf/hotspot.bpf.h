/* SPDX-License-Identifier: GPL-2.0 OR Apache-2.0 */
/*
 * HotSpot (Java) frames inside the table unwinder (bpf/hotspot.h says what
 * is walked and recorded). hotspot_begin() runs once per sample and copies
 * the process's layout into the scratch state when it is in hotspot_procs;
 * hotspot_step() runs where the unwinder has no table for a pc and, when
 * the pc lies in one of the JVM's code heaps, steps the frame as the JVM
 * lays it out and records it as a Java frame. Both are global functions
 * (checked once by the verifier); a frame costs at most HOTSPOT_SEGMAP_HOPS
 * + 6 reads of process memory, every loop bounded.
 */
#ifndef SR_BPF_HOTSPOT_BPF_H
#define SR_BPF_HOTSPOT_BPF_H

#include "common.bpf.h"
#include "hotspot.h"
#include "unwind.bpf.h"

/* hotspot_step()'s answer when the pc is not in the JVM's code: the caller goes on as it would have. */
#define HOTSPOT_NOT_JAVA (-1)
/* Largest frame believed (words): HotSpot refuses methods whose frames are this big long before. */
#define HOTSPOT_MAX_FRAME_WORDS (1 << 16)
/* An interpreted frame's sender_sp lies this far above its fp at most. */
#define HOTSPOT_MAX_SENDER_GAP (1 << 20)

/* tgid -> its JVM's layout; sized to profiling.max_processes by the agent. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct hotspot_proc);
} hotspot_procs SEC(".maps");

/* Sets up the scratch state of slot for this sample's Java frames, when its process is a known JVM. */
__noinline int hotspot_begin(__u32 slot)
{
	struct unwind_scratch_state *st = bpf_map_lookup_elem(&unwind_scratch, &slot);
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	const struct hotspot_proc *p;

	if (!st)
		return 0;
	st->jvm.start_boottime_ns = 0;
	st->jvm_frames = 0;
	p = bpf_map_lookup_elem(&hotspot_procs, &tgid);
	if (p && p->start_boottime_ns == st->sample.hdr.start_boottime_ns)
		st->jvm = *p;
	return 0;
}

/* The first eight bytes of the names of the blobs the walker tells apart (CodeBlob::_name), little-endian. */
#define HOTSPOT_NAME_INTERPRETER 0x6572707265746e49ULL /* "Interpre" */
#define HOTSPOT_NAME_NMETHOD	 0x00646f6874656d6eULL /* "nmethod\0": C1 and C2 code */
#define HOTSPOT_NAME_NATIVE	 0x6e2065766974616eULL /* "native n": a native method's wrapper */

/* The blob of heap h that holds pc, found through the segment map (CodeHeap::find_start); 0 when none. */
static __always_inline __u64 hotspot_blob(const struct hotspot_heap *h, __u16 heapblock_size, __u64 pc)
{
	__u32 shift = h->log2_segment & 31;
	__u64 seg = (pc - h->low) >> shift;
	__u8 hop;

	/* Each byte says how many segments back the block's start is (0: here), or 0xff for free space. */
	for (int i = 0; i < HOTSPOT_SEGMAP_HOPS; i++) {
		if (bpf_probe_read_user(&hop, sizeof(hop), (const void *)(h->segmap + seg)) || hop == 0xff)
			return 0;
		if (hop == 0)
			return h->low + (seg << shift) + heapblock_size;
		if (hop > seg)
			return 0;
		seg -= hop;
	}
	return 0;
}

/* Replaces the pc just recorded (the last ustack slot) with the Java frame v. */
static __always_inline void hotspot_record(struct unwind_scratch_state *st, __u64 v)
{
	/* 64 bits wide, so that no zero-extension comes between the check and the store. */
	__u64 idx = (__u32)(st->n - 1);

	/* Checked where the store is: the compiler may otherwise keep the index where the verifier loses its bound. */
	asm volatile("" : "+r"(idx));
	if (idx >= PROFILE_MAX_STACK_DEPTH)
		return;
	st->sample.ustack[idx] = v;
	st->jvm_frames++;
}

/*
 * The interpreted frame at RBP (the last ustack slot its pc): recorded as its
 * Method* and bytecode index; the caller is at the frame's return address,
 * its stack pointer the frame's sender_sp (the caller's own, before the
 * interpreter extended it for the callee's locals).
 */
static __always_inline int hotspot_interpreted(struct unwind_scratch_state *st)
{
	const struct hotspot_proc *p = &st->jvm;
	__u64 fp = st->rbp, link[2], method, bcp, sender_sp, cm, bci = HOTSPOT_BCI_NONE;

	if (!st->rbp_valid || fp < st->rsp || (fp & 7))
		return PROFILE_CNT_UNWIND_END_JVM;
	if (bpf_probe_read_user(link, sizeof(link), (const void *)fp) ||
	    bpf_probe_read_user(&method, sizeof(method), (const void *)(fp + 8 * (__s64)p->interp_method)) ||
	    bpf_probe_read_user(&bcp, sizeof(bcp), (const void *)(fp + 8 * (__s64)p->interp_bcp)) ||
	    bpf_probe_read_user(&sender_sp, sizeof(sender_sp), (const void *)(fp + 8 * (__s64)p->interp_sender_sp)))
		return PROFILE_CNT_UNWIND_END_READ_FAULT;
	if (sender_sp < fp + 16 || sender_sp - fp > HOTSPOT_MAX_SENDER_GAP || (sender_sp & 7))
		return PROFILE_CNT_UNWIND_END_JVM;
	/* The bytecodes follow the ConstMethod: the index is the bytecode pointer's distance from them. */
	if (method && !(method & 7) && !(method >> HOTSPOT_PC_BITS)) {
		if (!bpf_probe_read_user(&cm, sizeof(cm), (const void *)(method + p->method_constmethod)) &&
		    bcp >= cm + p->constmethod_size && bcp - cm - p->constmethod_size < HOTSPOT_BCI_NONE)
			bci = bcp - cm - p->constmethod_size;
		hotspot_record(st, HOTSPOT_FRAME_FLAG | (bci << HOTSPOT_BCI_SHIFT) | (method >> 3));
	}
	st->rsp = sender_sp;
	st->rbp = link[0];
	st->rip = link[1];
	st->rbp_valid = 1;
	st->return_address = 1;
	return link[1] ? 0 : PROFILE_CNT_UNWIND_END_COMPLETE;
}

/*
 * The unwinder stands on a pc it has no table for. When the pc is in the
 * JVM's code: steps the frame (0), or says why the stack ends there
 * (a PROFILE_CNT_UNWIND_END_*); HOTSPOT_NOT_JAVA when it is not Java's or
 * the blob keeps an RBP frame, which the frame-pointer step crosses.
 */
__noinline int hotspot_step(__u32 slot)
{
	struct unwind_scratch_state *st = bpf_map_lookup_elem(&unwind_scratch, &slot);
	const struct hotspot_proc *p;
	__u64 pc, blob = 0, name_ptr, name = 0, link[2], caller_sp;
	__s32 frame_size, compile_id;

	if (!st || !st->jvm.start_boottime_ns)
		return HOTSPOT_NOT_JAVA;
	p = &st->jvm;
	pc = st->rip - (st->return_address ? 1 : 0);
	if (pc < p->low || pc >= p->high)
		return HOTSPOT_NOT_JAVA;
	for (int i = 0; i < HOTSPOT_MAX_HEAPS; i++) {
		if (i < p->n_heaps && pc >= p->heaps[i].low && pc < p->heaps[i].high) {
			blob = hotspot_blob(&p->heaps[i], p->heapblock_size, pc);
			break;
		}
	}
	if (!blob)
		return PROFILE_CNT_UNWIND_END_JVM;
	if (bpf_probe_read_user(&name_ptr, sizeof(name_ptr), (const void *)(blob + p->codeblob_name)) ||
	    bpf_probe_read_user(&name, sizeof(name), (const void *)name_ptr) ||
	    bpf_probe_read_user(&frame_size, sizeof(frame_size), (const void *)(blob + p->codeblob_frame_size)))
		return PROFILE_CNT_UNWIND_END_READ_FAULT;
	if (st->n == 0)
		return PROFILE_CNT_UNWIND_END_JVM;
	if (name == HOTSPOT_NAME_INTERPRETER)
		return hotspot_interpreted(st);
	/* No frame size: the blob keeps an RBP frame (the call stub, the stub routines). */
	if (frame_size <= 0)
		return HOTSPOT_NOT_JAVA;
	if (frame_size > HOTSPOT_MAX_FRAME_WORDS)
		return PROFILE_CNT_UNWIND_END_JVM;
	/* The frame is frame_size words up to the caller's stack pointer: the return address, the saved RBP below it. */
	caller_sp = st->rsp + 8 * (__u64)frame_size;
	if (bpf_probe_read_user(link, sizeof(link), (const void *)(caller_sp - 16)))
		return PROFILE_CNT_UNWIND_END_READ_FAULT;
	if (name == HOTSPOT_NAME_NMETHOD || name == HOTSPOT_NAME_NATIVE) {
		if (bpf_probe_read_user(&compile_id, sizeof(compile_id), (const void *)(blob + p->nmethod_compile_id)))
			compile_id = 0;
		/*
		 * The pc to look debug information up by (HOTSPOT_PC_BITS): a
		 * PcDesc at offset X describes the instruction ending at X, so a
		 * caller's return address is its own key, and the interrupted
		 * instruction at the leaf is found past its first byte.
		 */
		hotspot_record(st, HOTSPOT_FRAME_FLAG | HOTSPOT_FRAME_COMPILED |
					   (((__u64)compile_id & HOTSPOT_COMPILE_ID_MASK) << HOTSPOT_COMPILE_ID_SHIFT) |
					   ((st->rip + (st->return_address ? 0 : 1)) & HOTSPOT_PC_MASK));
	}
	st->rsp = caller_sp;
	st->rbp = link[0];
	st->rip = link[1];
	st->rbp_valid = 1;
	st->return_address = 1;
	return link[1] ? 0 : PROFILE_CNT_UNWIND_END_COMPLETE;
}

#endif
