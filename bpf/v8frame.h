/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Types shared by the V8 frame namer (v8.bpf.h) and the agent
 * (agent/nodejs.c). Fixed-width types only (docs/style.md 1).
 *
 * For a sampled thread of a process in v8_procs, every frame the table
 * unwinder crosses by its frame pointer (JIT code, V8's embedded builtins)
 * is checked for a JavaScript frame: the slot at fp + off_fp_context holds a
 * heap object (typed frames keep a Smi marker there) and the slot at
 * fp + off_fp_function a JSFunction (its map's instance type in the
 * JSFunction range). Such a frame is recorded as the function's
 * SharedFunctionInfo instead of its pc: one u64 in the sample's ustack
 * (V8_FRAME_*), which the agent names from the process's memory.
 *
 * An interpreted (Ignition) frame also keeps the bytecode it runs and the
 * offset in it: the slot at fp + off_fp_bytecode_array holds a
 * BytecodeArray and the one at fp + off_fp_bytecode_offset a Smi (a
 * baseline frame keeps its feedback vector there, an optimized frame a
 * spill slot: their frames go without an offset). The offset travels with
 * the SharedFunctionInfo; the agent maps it to a line through the bytecode's
 * source position table.
 *
 * A baseline or optimized frame whose function's current code (the
 * JSFunction's code slot) is optimized code of that same function (its
 * deoptimization data names the frame's SharedFunctionInfo) and holds the
 * frame's pc among its instructions (within V8_FRAME_OFFSET_MAX bytes of the
 * first) is
 * recorded as that Code object and the pc's offset in it instead
 * (V8_FRAME_CODE): the agent maps the offset to the function's line and to
 * the functions TurboFan inlined there, through the Code's source position
 * table and deoptimization data.
 */
#ifndef SR_BPF_V8FRAME_H
#define SR_BPF_V8FRAME_H

/* A V8 process, keyed by tgid in v8_procs. Offsets from the node binary's v8dbg_* symbols. */
struct v8_proc {
	__u64 start_boottime_ns; /* tells a reused PID apart */
	__s16 off_fp_function;	 /* v8dbg_off_fp_function: the JSFunction, from the frame pointer */
	__s16 off_fp_context;	 /* v8dbg_off_fp_context: the context, or a typed frame's Smi marker */
	__u16 heap_object_map;	 /* HeapObject::map, from the untagged address */
	__u16 map_instance_type; /* Map::instance_type (a u16) */
	__u16 js_function_shared;
	__u16 type_js_function_first; /* [first, last]: JSFunction and its subclasses' instance types */
	__u16 type_js_function_last;
	__u16 type_sfi; /* SHARED_FUNCTION_INFO_TYPE */
	/* Interpreted frames; off_fp_bytecode_array 0: offsets not recorded. */
	__s16 off_fp_bytecode_array;  /* v8dbg_off_fp_bytecode_array: the BytecodeArray */
	__s16 off_fp_bytecode_offset; /* v8dbg_off_fp_bytecode_offset: a Smi, from the tagged BytecodeArray */
	__u16 bytecode_data;	      /* v8dbg_class_BytecodeArray__data__uintptr_t: the first bytecode */
	__u16 type_bytecode_array;    /* BYTECODE_ARRAY_TYPE */
	/* Optimized frames; js_function_code 0: recorded by their SharedFunctionInfo only. */
	__u16 js_function_code;	      /* JSFunction's code slot (derived, agent/v8.h) */
	__u16 code_deopt_data;	      /* v8dbg_class_Code__deoptimization_data__FixedArray */
	__u16 code_instruction_start; /* Code's first instruction's address (derived, agent/v8.h) */
	__u16 deopt_sfi;	      /* the SharedFunctionInfo's element of the deoptimization data */
	/*
	 * Code's instruction size (a __u32), learned by the agent from one of
	 * the process's builtins (agent/v8.h); 0 until then: optimized frames
	 * are recorded by their SharedFunctionInfo, and the namer offers the
	 * agent a Code that has no InstructionStream (a builtin's, whose
	 * instructions lie in the node binary) to learn from in learn_code
	 * (the map's own entry).
	 */
	__u16 code_instruction_size;
	__u16 code_instruction_stream; /* a builtin's Code has none: 0 there (derived, agent/v8.h) */
	__u16 pad[2];
	__u64 learn_code;
};

/*
 * A V8 frame in a sample's ustack: V8_FRAME_FLAG (bit 62 alone: a Python
 * frame has bit 63, a Java frame bits 62 and 61), then the
 * SharedFunctionInfo's tagged address >> 3 in bits 0-43 (its tag, binary
 * 001, is put back), and in bits 44-59 the interpreted frame's bytecode
 * offset plus one (0: none, as for baseline and optimized frames, or an
 * offset past V8_FRAME_OFFSET_MAX). With V8_FRAME_CODE (bit 60), bits 0-43
 * are a Code object's instead and bits 44-59 the pc's offset from its
 * first instruction plus one: the leaf's pc, a caller's return address
 * minus one (the call instruction, as V8's own lookup takes it).
 */
#define V8_FRAME_FLAG	      (1ULL << 62)
#define V8_FRAME_ADDR_BITS    47 /* a tagged address below 2^47 (user space) */
#define V8_FRAME_ADDR_MASK    ((1ULL << V8_FRAME_ADDR_BITS) - 1)
#define V8_FRAME_SFI_BITS     44
#define V8_FRAME_SFI_MASK     ((1ULL << V8_FRAME_SFI_BITS) - 1)
#define V8_FRAME_OFFSET_SHIFT 44
#define V8_FRAME_OFFSET_MASK  0xffffULL
#define V8_FRAME_OFFSET_MAX   (V8_FRAME_OFFSET_MASK - 1)
#define V8_FRAME_CODE	      (1ULL << 60)
/*
 * Bytes of a Code read at once from its deoptimization data on: the first
 * instruction's address (8-aligned from it) and the instruction size (a
 * __u32) lie within them, or optimized frames are not recorded.
 */
#define V8_CODE_SPAN 64
/* V8's heap object tag on 64-bit builds: a tagged pointer ends in binary 01. */
#define V8_HEAP_OBJECT_TAG	1
#define V8_HEAP_OBJECT_TAG_MASK 3

#endif
