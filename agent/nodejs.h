/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Node.js processes (nodejs.enabled): recognises a node binary (or
 * libnode.so) among a process's executable mappings by its V8 postmortem
 * metadata (the v8dbg_* symbols, agent/v8.h), gives the BPF frame namer the
 * offsets of that build (v8_procs, bpf/v8frame.h), and names the V8 frames
 * samples bring back: the SharedFunctionInfo's function name, script and
 * the function's first line, read with process_vm_readv by
 * agent_v8_describe(); and, for an interpreted frame, the line its
 * bytecode offset runs (agent_v8_line()), kept with the function for its
 * AGENT_NODEJS_LINES most recent offsets.
 *
 * A cached name stands while the SharedFunctionInfo's map, name-or-scope-
 * info and script slots still hold what they held when it was read (three
 * words, read again for every frame): a function collected or moved by the
 * garbage collector and another object put at its address is described
 * anew, never given the old name.
 *
 * Limits: AGENT_NODEJS_MAX_FILES files examined (by dev, inode, mtime,
 * size; the table starts again when full), max_functions functions cached (agent/proc-cache.h: the least
 * recently used is evicted, a retired process's go with it),
 * AGENT_V8_MAX_NAME bytes of a name or script.
 */
#ifndef SR_AGENT_NODEJS_H
#define SR_AGENT_NODEJS_H

#include <stdint.h>

struct agent_proc;

#define AGENT_NODEJS_MAX_FILES		   1024
#define AGENT_NODEJS_DEFAULT_MAX_FUNCTIONS 65536
/* Bytecode offsets of a function whose lines are kept (the least recent is replaced). */
#define AGENT_NODEJS_LINES 16
/* Optimized Code objects whose functions are kept (the least recently used is evicted). */
#define AGENT_NODEJS_MAX_CODES 4096
/* Frames one optimized frame can stand for: the functions inlined at its pc and its own (AGENT_V8_MAX_INLINED). */
#define AGENT_NODEJS_MAX_FRAMES 8
/* pc offsets of a Code whose functions are kept (the least recent is replaced). */
#define AGENT_NODEJS_CODE_OFFSETS 8

struct agent_nodejs_stats {
	uint64_t processes;	       /* Node.js processes given to BPF */
	uint64_t unsupported;	       /* node binaries whose metadata lacks what the walk needs */
	uint64_t functions_cached;     /* functions in the cache now */
	uint64_t functions_bytes;      /* heap they hold, with the cache's tables */
	uint64_t codes_cached;	       /* optimized Code objects in the cache now */
	uint64_t codes_bytes;	       /* heap they hold, with the cache's tables */
	uint64_t function_reads;       /* functions described from processes */
	uint64_t function_read_errors; /* ... that could not be read or were no SharedFunctionInfo */
	uint64_t evicted;	       /* least recently used functions dropped for new ones */
	uint64_t line_reads;	       /* lines of bytecode offsets read from processes */
	uint64_t line_read_errors;     /* ... not found (the frame keeps the function's first line) */
	uint64_t code_reads;	       /* optimized frames' pc offsets mapped from processes */
	uint64_t code_read_errors;     /* ... that could not be read or were no optimized code */
	uint64_t code_lines_unknown;   /* ... whose line was not found (the function's first line) */
	uint64_t inlined_frames;       /* frames of functions TurboFan inlined, exported */
	uint64_t code_layouts_learned; /* processes that taught where a Code keeps its size */
	uint64_t code_layouts_refused; /* ... whose Codes then failed the layout's checks (functions only again) */
};

/* A V8 frame, named. The strings live in the agent_nodejs cache until its next call. */
struct agent_js_frame {
	const char *name;    /* as node --cpu-prof shows it: "(anonymous)" for a function without a name */
	const char *script;  /* the script's path or URL, "" when unknown */
	uint32_t line;	     /* the line being run (1-based): the first line when not known, 0 when neither is */
	uint32_t start_line; /* the function's first line (1-based), 0 when unknown */
	int32_t offset;	     /* an interpreted frame's bytecode offset, -1 for other frames */
	uint64_t sfi;	     /* the SharedFunctionInfo's tagged address */
};

struct agent_nodejs;

/* procs_fd: the v8_procs map (< 0: none, as in tests). NULL + errno. */
struct agent_nodejs *agent_nodejs_new(int procs_fd, uint64_t max_functions);
void agent_nodejs_free(struct agent_nodejs *n);

/*
 * Looks for a node binary in the process's mappings (files examined once)
 * and writes its v8_procs entry when it has one. Call when its mappings
 * changed. 0, -ENOENT (not Node.js), -ENOTSUP (metadata without what the
 * walk needs), -errno.
 */
int agent_nodejs__sync(struct agent_nodejs *n, const struct agent_proc *proc);
/* The process is retired. */
void agent_nodejs__forget(struct agent_nodejs *n, const struct agent_proc *proc);
/*
 * Names a V8 frame of a sample (a ustack value with V8_FRAME_FLAG).
 * Returns 0, or -ENOENT when it cannot be named (the process is not known as
 * Node.js, is gone and was never read, or the address is no SharedFunctionInfo).
 */
int agent_nodejs__frame(struct agent_nodejs *n, const struct agent_proc *proc, uint64_t value,
			struct agent_js_frame *ret);
/*
 * Names the V8 frames one ustack value stands for: an optimized frame
 * (V8_FRAME_CODE) gives the functions TurboFan inlined at its pc,
 * innermost first, then its own; any other value one frame, as
 * agent_nodejs__frame(). Writes up to room frames; returns how many, or
 * -ENOENT when none can be named.
 */
int agent_nodejs__frames(struct agent_nodejs *n, const struct agent_proc *proc, uint64_t value,
			 struct agent_js_frame *ret, int room);
void agent_nodejs__stats(struct agent_nodejs *n, struct agent_nodejs_stats *ret);

struct agent_v8_meta;
/*
 * Tests: takes proc as a Node.js process of metadata m (copied) without
 * reading its files or writing v8_procs. 0 or -ENOMEM.
 */
int agent_nodejs__add(struct agent_nodejs *n, const struct agent_proc *proc, const struct agent_v8_meta *m);

#endif
