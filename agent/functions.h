/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Functions the agent names itself, for frames of kind INTERPRETED (e.g.
 * CPython) and JIT (perf maps): content-addressed FunctionDefs
 * (docs/agent-protocol.md, "Functions"). The table belongs to the
 * definition store (store.h), which locks around every call.
 *
 * A function is referred to from a stored frame by its index (agent_frame.exe
 * for these kinds). Limits: at most AGENT_FUNCTIONS_MAX functions and
 * AGENT_FUNCTIONS_MAX_BYTES bytes of them. When full, the least recently used
 * function no stored stack refers to and not used in the current window is
 * evicted; when there is none, adding fails with -ENOSPC (the caller keeps
 * the frame unnamed). Names longer than AGENT_FUNCTION_NAME_MAX and file names
 * longer than AGENT_FUNCTION_FILE_MAX bytes are cut there before hashing.
 */
#ifndef SR_AGENT_FUNCTIONS_H
#define SR_AGENT_FUNCTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/htab.h"
#include "common/list.h"

#define AGENT_FUNCTION_ID_LEN	   16
#define AGENT_FUNCTIONS_MAX	   65536
#define AGENT_FUNCTIONS_MAX_BYTES  (32 * 1024 * 1024)
#define AGENT_FUNCTION_NAME_MAX	   1024
#define AGENT_FUNCTION_FILE_MAX	   4096
#define AGENT_FUNCTION_RUNTIME_MAX 32

struct agent_function_def {
	const char *runtime; /* "cpython", "perf-map" */
	const char *name;
	const char *file_name; /* may be NULL or empty */
	uint32_t start_line;   /* 0: unknown */
};

struct agent_function {
	uint8_t id[AGENT_FUNCTION_ID_LEN];
	struct sr_list_node lru;
	uint64_t last_window;
	uint32_t refs; /* stored stacks with a frame of this function */
	uint32_t index;
	uint32_t start_line;
	char *runtime, *name, *file_name; /* one allocation, runtime first */
	size_t bytes;
};

struct agent_functions {
	struct sr_htab_ptrs by_id;
	struct agent_function **slots; /* by index; NULL: free */
	uint32_t *free_idx;	       /* free indexes, a stack */
	size_t n_slots, cap_slots, n_free;
	struct sr_list lru; /* head is the most recently used */
	size_t n;
	uint64_t bytes;
	uint64_t evicted;
	size_t max_n;	    /* AGENT_FUNCTIONS_MAX unless a test lowers it */
	uint64_t max_bytes; /* AGENT_FUNCTIONS_MAX_BYTES unless a test lowers it */
};

/* FunctionDef.id: XXH3-128 over the (cut) fields, length-prefixed (types.proto). */
void agent_function_id(const struct agent_function_def *def, uint8_t ret[AGENT_FUNCTION_ID_LEN]);

void agent_functions_init(struct agent_functions *f);
void agent_functions_done(struct agent_functions *f);
/*
 * Adds a function (or finds it by ID) and marks it used in window. Returns its
 * index, -EINVAL (no runtime or name), -ENOSPC (full of functions in use),
 * -ENOMEM.
 */
int64_t agent_functions__add(struct agent_functions *f, const struct agent_function_def *def, uint64_t window);
/* The function at index, or NULL. */
struct agent_function *agent_functions__at(const struct agent_functions *f, uint32_t index);
struct agent_function *agent_functions__get(const struct agent_functions *f, const uint8_t *id, size_t len);
/* A stored stack starts or stops referring to the function at index. */
void agent_functions__ref(struct agent_functions *f, uint32_t index);
void agent_functions__unref(struct agent_functions *f, uint32_t index);

#endif
