/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Python processes (python: true): recognises a CPython interpreter among a
 * process's executable mappings (python3.X or libpython3.X, with the
 * _PyRuntime symbol), gives the BPF walker its addresses and the version's
 * offsets (py_procs, bpf/pyframe.h), and names the Python frames samples
 * bring back: the code object's qualified name, file name, first line and
 * line table, read with process_vm_readv and decoded by agent/pycode.c.
 *
 * Limits: AGENT_PY_MAX_FILES interpreter files examined (by dev, inode,
 * mtime, size), max_codes code objects cached (agent/proc-cache.h: the least
 * recently used is evicted, a retired process's go with it), AGENT_PY_MAX_NAME bytes of a name, AGENT_PY_MAX_LINETABLE bytes of
 * a line table.
 */
#ifndef SR_AGENT_PYTHON_H
#define SR_AGENT_PYTHON_H

#include <stdbool.h>
#include <stdint.h>

#include <linux/types.h>

struct agent_proc;

#define AGENT_PY_MAX_FILES	   1024
#define AGENT_PY_DEFAULT_MAX_CODES 65536

struct agent_python_stats {
	uint64_t processes;	   /* Python processes given to BPF */
	uint64_t unsupported;	   /* interpreters of a version without a layout */
	uint64_t codes_cached;	   /* code objects in the cache now */
	uint64_t codes_bytes;	   /* heap they hold, with the cache's tables */
	uint64_t code_reads;	   /* code objects read from processes */
	uint64_t code_read_errors; /* ... that could not be read or were not code objects */
	uint64_t evicted;	   /* least recently used code objects dropped for new ones */
};

/* A Python frame, named. The strings live in the agent_python cache until its next call. */
struct agent_py_frame {
	const char *name; /* the qualified name (3.11+), the function name before */
	const char *file;
	int32_t first_line;
	int32_t line;	 /* 0: unknown */
	uint64_t code;	 /* the code object's address */
	uint32_t offset; /* the instruction offset recorded */
};

struct agent_python;

/* procs_fd: the py_procs map. NULL + errno. */
struct agent_python *agent_python_new(int procs_fd, uint64_t max_codes);
void agent_python_free(struct agent_python *py);

/*
 * Looks for an interpreter in the process's mappings (files examined once)
 * and writes its py_procs entry when it has one. Call when its mappings
 * changed. 0, -ENOENT (not Python), -ENOTSUP (a version without a layout), -errno.
 */
int agent_python__sync(struct agent_python *py, const struct agent_proc *proc);
/* The process is retired. */
void agent_python__forget(struct agent_python *py, const struct agent_proc *proc);
/*
 * Reads ahead, in one system call, the code object heads of one sample's
 * Python frames (the ustack values with PY_FRAME_FLAG among values[0..n));
 * agent_python__frame() takes them from there until the next call, which
 * forgets them (n = 0: only that).
 */
void agent_python__prefetch(struct agent_python *py, const struct agent_proc *proc, const __u64 *values, size_t n);
/*
 * Names a Python frame of a sample (a ustack value with PY_FRAME_FLAG).
 * Returns 0, or -ENOENT when the frame cannot be named (the process is not
 * known as Python, is gone, or the address is not a code object).
 */
int agent_python__frame(struct agent_python *py, const struct agent_proc *proc, uint64_t value,
			struct agent_py_frame *ret);
void agent_python__stats(struct agent_python *py, struct agent_python_stats *ret);

#endif
