/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Types shared by the Python frame walker (pyframe.bpf.h) and the agent
 * (agent/python.c, agent/pycode.c). Fixed-width types only (docs/style.md 1).
 *
 * For a sampled thread of a process in py_procs, the walker finds the
 * thread's PyThreadState (the interpreter's thread list, matched on
 * thread_id, which is pthread_self(): the thread's FS base on x86-64), then
 * its current frame. While the table unwinder walks the native stack, each
 * native frame in _PyEval_EvalFrameDefault is replaced by the Python frames
 * that invocation of the eval loop runs, leaf first, so a stack reads
 * kernel -> native -> Python -> native -> ...
 *
 * A Python frame is one u64 in the sample's ustack (PY_FRAME_*): the code
 * object's address and the instruction offset, so it costs one slot of
 * PROFILE_MAX_STACK_DEPTH like a native frame.
 */
#ifndef SR_BPF_PYTHON_H
#define SR_BPF_PYTHON_H

/* An offset the version does not have. */
#define PY_OFF_NONE 0xffff

/* Thread states looked at to find the sampled thread's (a cache per thread answers after the first). */
#define PY_MAX_THREADS 64

/* How an invocation of the eval loop marks the first Python frame it ran (its last one, walking back). */
enum py_entry_kind {
	PY_ENTRY_PER_FRAME = 1, /* 3.8-3.10: one PyFrameObject per invocation */
	PY_ENTRY_IS_ENTRY = 2,	/* 3.11: _PyInterpreterFrame.is_entry on the invocation's first frame */
	PY_ENTRY_SHIM = 3,	/* 3.12+: a shim frame (owner == FRAME_OWNED_BY_CSTACK) below the invocation's frames */
};

/* The owner value of 3.12+'s shim frames (enum _frameowner). */
#define PY_FRAME_OWNED_BY_CSTACK 3

/* What the frame's instruction field holds. */
enum py_instr_kind {
	PY_INSTR_LASTI_BYTES = 1, /* 3.8, 3.9: int f_lasti, a byte offset */
	PY_INSTR_LASTI_UNITS = 2, /* 3.10: int f_lasti, in code units */
	PY_INSTR_PTR = 3,	  /* 3.11+: a pointer into the code object's co_code_adaptive */
};

struct py_proc_offsets {
	__u16 runtime_interp_head; /* _PyRuntimeState.interpreters.head */
	__u16 interp_threads_head; /* PyInterpreterState: the first PyThreadState */
	__u16 tstate_next;
	__u16 tstate_thread_id; /* unsigned long thread_id: pthread_self() */
	__u16 tstate_frame;	/* frame (before 3.11), cframe (3.11, 3.12), current_frame (3.13) */
	__u16 cframe_current;	/* _PyCFrame.current_frame, or PY_OFF_NONE when tstate_frame is the frame */
	__u16 frame_code;	/* f_code, or 3.13's f_executable */
	__u16 frame_previous;	/* previous, or f_back before 3.11 */
	__u16 frame_instr;	/* f_lasti, prev_instr or instr_ptr */
	__u16 frame_entry;	/* is_entry (3.11), owner (3.12+), PY_OFF_NONE before */
	__u16 code_adaptive;	/* PyCodeObject.co_code_adaptive (3.11+) */
	__u8 entry_kind;	/* enum py_entry_kind */
	__u8 instr_kind;	/* enum py_instr_kind */
};

/* A Python process, keyed by tgid in py_procs. Written by the agent (agent/python.c). */
struct py_proc {
	__u64 start_boottime_ns; /* tells a reused PID apart */
	__u64 runtime;		 /* &_PyRuntime in the process */
	__u64 eval_start;	 /* _PyEval_EvalFrameDefault: [eval_start, eval_end) */
	__u64 eval_end;
	struct py_proc_offsets off;
	__u16 pad;
};

/*
 * A Python frame in a sample's ustack: this bit, the offset, then the code
 * object's address. User addresses have 47 bits on x86-64 and 48 on arm64
 * (where the heap's mappings lie just below 2^48), which leaves the offset 15
 * bits there.
 */
#define PY_FRAME_FLAG (1ULL << 63)
#if defined(__TARGET_ARCH_arm64) || defined(__aarch64__)
#define PY_FRAME_ADDR_BITS  48
#define PY_FRAME_OFFSET_MAX 0x7fffULL /* offsets past it are recorded as this (their line is the function's first) */
#else
#define PY_FRAME_ADDR_BITS  47
#define PY_FRAME_OFFSET_MAX 0xffffULL /* offsets past it are recorded as this (their line is the function's first) */
#endif
#define PY_FRAME_ADDR_MASK    ((1ULL << PY_FRAME_ADDR_BITS) - 1)
#define PY_FRAME_OFFSET_SHIFT PY_FRAME_ADDR_BITS

#endif
