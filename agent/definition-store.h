/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The definition store (struct agent_store of agent.h): stacks, executables
 * and the kernel, by content-addressed ID. The profiling thread adds; the
 * sender and the --output writer read through agent.h's lookups. One mutex.
 *
 * Limits: at most max_stacks stacks (least recently used evicted first, but
 * never one used in the current window: then the new stack is refused and its
 * sample counted as dropped) and AGENT_STORE_MAX_EXECUTABLES executables at
 * once. An executable is held while a cached file (agent/proc.c) or a stored
 * stack names it, and freed AGENT_STORE_EXE_GRACE_WINDOWS windows after its
 * last reference went (agent_store__trim_exes()), its index then reused.
 * Stacks unused for AGENT_STORE_KEEP_WINDOWS windows are dropped once they
 * are older than every window the sender still holds
 * (agent_store__expire_stacks()): the stacks of processes that are gone do
 * not stay until the bound, even while the sender is always busy.
 */
#ifndef SR_AGENT_DEFINITION_STORE_H
#define SR_AGENT_DEFINITION_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent.h"
#include "elfinfo.h"
#include "functions.h"
#include "kernel.h"

#define AGENT_STACK_ID_LEN	       16
#define AGENT_STORE_MAX_EXECUTABLES    65536
#define AGENT_STORE_DEFAULT_MAX_STACKS 16384
#define AGENT_STORE_KEEP_WINDOWS       6
#define AGENT_STORE_EXE_GRACE_WINDOWS  2

/*
 * A frame's executable, as an index into the store's executables, or one of
 * these: a KERNEL frame's address space (kernel.h): the image, this boot's
 * runtime addresses, or module i.
 */
#define AGENT_EXE_NONE		 UINT32_MAX
#define AGENT_EXE_KERNEL	 (UINT32_MAX - 1)
#define AGENT_EXE_KERNEL_RUNTIME (UINT32_MAX - 2)
#define AGENT_EXE_KERNEL_MODULE0 (UINT32_MAX - 2 - AGENT_KERNEL_MAX_MODULES)

/* The frame executable for an address space agent_kernel_locate() returned, and back (AGENT_KSEG_NONE: none). */
static inline uint32_t agent_kernel_seg_exe(int seg)
{
	return seg == AGENT_KSEG_IMAGE	   ? AGENT_EXE_KERNEL
	       : seg == AGENT_KSEG_RUNTIME ? AGENT_EXE_KERNEL_RUNTIME
	       : seg >= 0		   ? AGENT_EXE_KERNEL_MODULE0 + (uint32_t)seg
					   : AGENT_EXE_NONE;
}
static inline int agent_exe_kernel_seg(uint32_t exe)
{
	if (exe == AGENT_EXE_KERNEL)
		return AGENT_KSEG_IMAGE;
	if (exe == AGENT_EXE_KERNEL_RUNTIME)
		return AGENT_KSEG_RUNTIME;
	if (exe >= AGENT_EXE_KERNEL_MODULE0 && exe < AGENT_EXE_KERNEL_RUNTIME)
		return (int)(exe - AGENT_EXE_KERNEL_MODULE0);
	return AGENT_KSEG_NONE;
}

/*
 * A frame. For kinds INTERPRETED and JIT, exe is the function's index in the
 * store (agent_store__add_function) and line its source line (0: unknown);
 * address is what the kind says (bytecode offset, runtime address).
 */
struct agent_frame {
	uint64_t address;
	uint32_t exe;
	uint32_t line;
	uint8_t kind; /* stackrelay_v1_FrameKind */
};

/* The frame names a function (FunctionDef) rather than an executable. */
static inline bool agent_frame_kind_has_function(uint8_t kind)
{
	return kind == stackrelay_v1_FrameKind_FRAME_KIND_INTERPRETED || kind == stackrelay_v1_FrameKind_FRAME_KIND_JIT;
}

struct agent_exe_def {
	uint8_t id[AGENT_BUILD_ID_MAX];
	size_t id_len;
	int id_kind; /* stackrelay_v1_ExecutableIdKind */
	const char *path;
	uint64_t size;
	const uint8_t *gnu_build_id; /* when id_kind is content hash but a build ID exists */
	size_t gnu_build_id_len;
	const char *debuglink;
	bool is_go;
	/* Where the file can be opened again (agent_store__open_executable). */
	uint64_t dev;
	uint64_t ino;
};

struct agent_store_stats {
	uint64_t stacks;
	uint64_t stacks_evicted;
	uint64_t stacks_expired; /* unused for AGENT_STORE_KEEP_WINDOWS windows, dropped */
	uint64_t executables;
	uint64_t executables_freed; /* no longer referenced, freed (agent_store__trim_exes) */
	uint64_t functions;
	uint64_t functions_evicted;
	uint64_t stacks_bytes;	    /* approximate heap bytes held by stacks */
	uint64_t executables_bytes; /* ... by executables */
	uint64_t functions_bytes;   /* ... by functions */
	uint64_t bytes;		    /* the three together */
};

struct agent_store *agent_store_new(uint64_t max_stacks);
void agent_store_free(struct agent_store *s);

int agent_store__set_kernel(struct agent_store *s, const struct agent_kernel *k);
/*
 * Adds an executable (or finds it by ID) and takes a reference to it;
 * returns its index or -errno. agent_store__put_exe() drops the reference.
 */
int64_t agent_store__add_exe(struct agent_store *s, const struct agent_exe_def *def);
void agent_store__put_exe(struct agent_store *s, uint32_t exe);
/*
 * Frees the executables nothing has referenced since window -
 * AGENT_STORE_EXE_GRACE_WINDOWS; call once a window, after its stacks are
 * stored. Returns how many.
 */
size_t agent_store__trim_exes(struct agent_store *s, uint64_t window);
/* Records a place the executable was last seen mapped, to reopen it later. */
void agent_store__exe_seen(struct agent_store *s, uint32_t exe, uint32_t pid, uint64_t start_ns, uint64_t map_start,
			   uint64_t map_end, const char *path);
/* The ID of an executable by index (into ret_id, AGENT_BUILD_ID_MAX bytes); returns its length or -ENOENT. */
int agent_store__exe_id(struct agent_store *s, uint32_t exe, uint8_t *ret_id);

/*
 * Adds a function (functions.h: content-addressed, bounded) or finds it, and
 * marks it used in window: a function used in the current window is not
 * evicted before a stack refers to it. Returns the index for agent_frame.exe,
 * or -EINVAL, -ENOSPC, -ENOMEM (see functions.h).
 */
int64_t agent_store__add_function(struct agent_store *s, const struct agent_function_def *def, uint64_t window);
/* The ID of a function by index; returns AGENT_FUNCTION_ID_LEN or -ENOENT. */
int agent_store__function_id(struct agent_store *s, uint32_t fn, uint8_t ret_id[AGENT_FUNCTION_ID_LEN]);

/*
 * Computes the stack's ID (XXH3-128 over the frames, with the function ID
 * and line of INTERPRETED and JIT frames) and adds it unless
 * present; marks it used in window. Returns 0, -ENOSPC (store full of stacks
 * used in this window), -ENOMEM.
 */
int agent_store__intern_stack(struct agent_store *s, const struct agent_frame *frames, size_t n, bool truncated,
			      uint64_t window, uint8_t ret_id[AGENT_STACK_ID_LEN]);
/*
 * Drops the stacks last used before window (the least recently used first).
 * Call only when nothing queued refers to them any more: a definition the
 * sender looks up later must still be here. Returns how many were dropped.
 */
size_t agent_store__expire_stacks(struct agent_store *s, uint64_t window);
/* The ID alone, no store: the same function intern uses (unit tests). */
void agent_stack_id(struct agent_store *s, const struct agent_frame *frames, size_t n,
		    uint8_t ret_id[AGENT_STACK_ID_LEN]);
void agent_store__stats(struct agent_store *s, struct agent_store_stats *ret);
/* The kernel's ID (AGENT_KERNEL_ID_LEN bytes); false when no kernel was set. */
bool agent_store__kernel_id(struct agent_store *s, uint8_t *ret_id);

#endif
