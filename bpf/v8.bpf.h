/* SPDX-License-Identifier: GPL-2.0 OR Apache-2.0 */
/*
 * V8 (Node.js) JavaScript frames inside the table unwinder (bpf/v8frame.h
 * says what is recorded). v8_begin() runs once per sample and copies the
 * process's offsets into the scratch state when it is in v8_procs;
 * v8_frame() runs for each frame the unwinder crosses by its frame pointer
 * and, when the frame is a JavaScript one, replaces the pc just recorded
 * with the function's SharedFunctionInfo and, for an interpreted frame,
 * its bytecode offset, or, for optimized code, with its Code object and
 * the pc's offset in it. Both are global functions (checked once by the
 * verifier); a frame costs at most thirteen reads of process memory and no
 * loop.
 */
#ifndef SR_BPF_V8_BPF_H
#define SR_BPF_V8_BPF_H

#include "common.bpf.h"
#include "unwind.bpf.h"
#include "v8frame.h"

/* tgid -> its V8 offsets; sized to profiling.max_processes by the agent. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct v8_proc);
} v8_procs SEC(".maps");

/*
 * (tgid, SharedFunctionInfo or Code, offset) seen lately. A sample with one
 * not in it wakes the agent at once (through the scratch state's py_new, as
 * a new Python code object does): the agent reads the function's name and
 * the offset's line (and inlined functions) from the process's memory,
 * which a short-lived process takes with it when it exits.
 */
#define V8_SFIS_SEEN 65536
struct v8_sfi_key {
	__u32 tgid;
	__u32 offset; /* the slot's offset bits (V8_FRAME_OFFSET_*) */
	__u64 sfi;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, V8_SFIS_SEEN);
	__type(key, struct v8_sfi_key);
	__type(value, __u8);
} v8_sfis_seen SEC(".maps");

static __always_inline bool v8_is_object(__u64 v)
{
	return (v & V8_HEAP_OBJECT_TAG_MASK) == V8_HEAP_OBJECT_TAG && !(v & ~V8_FRAME_ADDR_MASK);
}

static __always_inline __u64 v8_read_ptr(__u64 addr)
{
	__u64 v = 0;

	if (bpf_probe_read_user(&v, sizeof(v), (const void *)addr))
		return 0;
	return v;
}

/* The instance type of a tagged heap object, read through its map; 0xffffffff when it is not one. */
static __always_inline __u32 v8_type_of(const struct v8_proc *p, __u64 obj)
{
	__u64 map = v8_read_ptr(obj - V8_HEAP_OBJECT_TAG + p->heap_object_map);
	__u16 t;

	if (!v8_is_object(map) ||
	    bpf_probe_read_user(&t, sizeof(t), (const void *)(map - V8_HEAP_OBJECT_TAG + p->map_instance_type)))
		return 0xffffffff;
	return t;
}

/* Sets up the scratch state of slot for this sample's V8 frames, when its process is V8. */
__noinline int v8_begin(__u32 slot)
{
	struct unwind_scratch_state *st = bpf_map_lookup_elem(&unwind_scratch, &slot);
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	const struct v8_proc *p;

	if (!st)
		return 0;
	st->v8.start_boottime_ns = 0;
	st->v8_frames = 0;
	p = bpf_map_lookup_elem(&v8_procs, &tgid);
	if (p && p->start_boottime_ns == st->sample.hdr.start_boottime_ns)
		st->v8 = *p;
	return 0;
}

/*
 * An interpreted frame's bytecode offset, plus one, as V8_FRAME_* keeps it;
 * 0 for any other frame. The two slots are adjacent (the agent sets
 * off_fp_bytecode_array only then) and read at once.
 */
static __always_inline __u64 v8_bytecode_offset(const struct v8_proc *p, __u64 fp)
{
	__u64 slots[2];
	__s64 off;

	if (!p->off_fp_bytecode_array ||
	    bpf_probe_read_user(slots, sizeof(slots), (const void *)(fp + p->off_fp_bytecode_offset)))
		return 0;
	/* A Smi (its value in the upper half), then a BytecodeArray. */
	if ((slots[0] & 0xffffffff) || !v8_is_object(slots[1]) || v8_type_of(p, slots[1]) != p->type_bytecode_array)
		return 0;
	/* The offset is from the tagged BytecodeArray: the first bytecode is at bytecode_data - tag. */
	off = ((__s64)slots[0] >> 32) - (p->bytecode_data - V8_HEAP_OBJECT_TAG);
	if (off < 0 || off > (__s64)V8_FRAME_OFFSET_MAX)
		return 0;
	return (__u64)off + 1;
}

/*
 * Until the agent has learned where a Code keeps its instruction size,
 * the code of each JavaScript frame's function is looked at: a Code
 * without an InstructionStream (a builtin's: an interpreted function's
 * is the interpreter's entry) is offered to the agent in learn_code.
 */
static __always_inline void v8_offer_code(const struct v8_proc *p, __u32 tgid, __u64 fn)
{
	struct v8_proc *e;
	__u64 code;

	if (!p->js_function_code || p->code_instruction_size)
		return;
	code = v8_read_ptr(fn - V8_HEAP_OBJECT_TAG + p->js_function_code);
	if (!v8_is_object(code) || v8_read_ptr(code - V8_HEAP_OBJECT_TAG + p->code_instruction_stream))
		return;
	e = bpf_map_lookup_elem(&v8_procs, &tgid);
	if (e && !e->learn_code)
		e->learn_code = code;
}

/*
 * An optimized frame's Code and the pc's offset in it, as V8_FRAME_* keeps
 * them (V8_FRAME_CODE set); 0 when the function's current code is not
 * optimized code of it (interpreter and baseline code, a builtin: their
 * deoptimization-data slot holds no such array) or does not hold the pc
 * near its start. pc is the frame's recorded pc; leaf: the sample's own,
 * else a return address, whose call instruction is one byte back.
 */
static __always_inline __u64 v8_code_offset(struct unwind_scratch_state *st, const struct v8_proc *p, __u64 fn,
					    __u64 sfi, __u64 pc, bool leaf)
{
	__u64 code, deopt, start;
	__u32 size;
	__s64 off;

	if (!p->js_function_code || !p->code_instruction_size)
		return 0;
	code = v8_read_ptr(fn - V8_HEAP_OBJECT_TAG + p->js_function_code);
	if (!v8_is_object(code) || bpf_probe_read_user(st->v8_code, sizeof(st->v8_code),
						       (const void *)(code - V8_HEAP_OBJECT_TAG + p->code_deopt_data)))
		return 0;
	/* One read of the Code's fields: the agent keeps both within V8_CODE_SPAN of the deoptimization data. */
	deopt = st->v8_code[0];
	start = st->v8_code[((__u32)(p->code_instruction_start - p->code_deopt_data) / 8) & (V8_CODE_SPAN / 8 - 1)];
	size = ((__u32 *)st->v8_code)[((__u32)(p->code_instruction_size - p->code_deopt_data) / 4) &
				      (V8_CODE_SPAN / 4 - 1)];
	if (!v8_is_object(deopt) || v8_read_ptr(deopt - V8_HEAP_OBJECT_TAG + p->deopt_sfi) != sfi)
		return 0;
	off = (__s64)(pc - start) - (leaf ? 0 : 1);
	/* The pc must lie among this Code's instructions: a frame may run another Code of its function (OSR). */
	if (!start || pc < start || pc - start >= size || off < 0 || off > (__s64)V8_FRAME_OFFSET_MAX)
		return 0;
	return V8_FRAME_CODE | (code >> 3) | ((__u64)(off + 1) << V8_FRAME_OFFSET_SHIFT);
}

/*
 * The frame the unwinder stands on is crossed by its frame pointer: when it
 * is a JavaScript frame, its recorded pc (the last ustack slot) becomes the
 * function's SharedFunctionInfo (and bytecode offset), or its optimized
 * Code and the pc's offset in it. Returns 1 when it did.
 */
__noinline int v8_frame(__u32 slot)
{
	struct unwind_scratch_state *st = bpf_map_lookup_elem(&unwind_scratch, &slot);
	const struct v8_proc *p;
	__u64 fp, fn, sfi, v, key, off, pc;
	__u32 t, idx;

	if (!st || !st->v8.start_boottime_ns || !st->rbp_valid)
		return 0;
	p = &st->v8;
	fp = st->rbp;
	if (fp < st->rsp || (fp & 7) || st->n == 0)
		return 0;
	/* Typed frames (entry, exit, stubs) keep a Smi marker where JavaScript frames keep their context. */
	v = v8_read_ptr(fp + p->off_fp_context);
	if (!v8_is_object(v))
		return 0;
	fn = v8_read_ptr(fp + p->off_fp_function);
	if (!v8_is_object(fn))
		return 0;
	t = v8_type_of(p, fn);
	if (t < p->type_js_function_first || t > p->type_js_function_last)
		return 0;
	sfi = v8_read_ptr(fn - V8_HEAP_OBJECT_TAG + p->js_function_shared);
	if (!v8_is_object(sfi) || v8_type_of(p, sfi) != p->type_sfi)
		return 0;
	idx = st->n - 1;
	if (idx >= PROFILE_MAX_STACK_DEPTH)
		return 0;
	pc = st->sample.ustack[idx];
	v8_offer_code(p, st->sample.hdr.pid, fn);
	/* The slot's value first: the index's bound must hold at the store. */
	key = sfi;
	off = v8_bytecode_offset(p, fp);
	if (off) {
		v = V8_FRAME_FLAG | (sfi >> 3) | (off << V8_FRAME_OFFSET_SHIFT);
	} else {
		v = v8_code_offset(st, p, fn, sfi, pc, idx == 0);
		if (v)
			key = (v & V8_FRAME_SFI_MASK) << 3 | V8_HEAP_OBJECT_TAG;
		v = v ? V8_FRAME_FLAG | v : V8_FRAME_FLAG | (sfi >> 3);
	}
	idx = st->n - 1;
	if (idx >= PROFILE_MAX_STACK_DEPTH)
		return 0;
	st->sample.ustack[idx] = v;
	st->v8_frames++;
	if (!st->py_new) {
		/* An optimized frame's Code and offset are named as a function is: once, while the process lives. */
		struct v8_sfi_key k = { .tgid = st->sample.hdr.pid,
					.offset = (__u32)((v >> V8_FRAME_OFFSET_SHIFT) & V8_FRAME_OFFSET_MASK),
					.sfi = key };
		__u8 one = 1;

		if (!bpf_map_lookup_elem(&v8_sfis_seen, &k)) {
			bpf_map_update_elem(&v8_sfis_seen, &k, &one, BPF_ANY);
			st->py_new = 1;
		}
	}
	return 1;
}

#endif
