/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The definition store's entries, shared by its two files: definition-store.c
 * (interning stacks, executables and functions; their lifetimes and bounds)
 * and definition-store-lookup.c (their protocol definitions and files for
 * the sender and the output writer). Nothing outside them includes this.
 */
#ifndef SR_AGENT_DEFINITION_STORE_PRIVATE_H
#define SR_AGENT_DEFINITION_STORE_PRIVATE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/htab.h"
#include "common/list.h"
#include "definition-store.h"

/*
 * A frame as a stored stack keeps it: struct agent_frame in 16 bytes rather
 * than 24, since stored stacks' frames are most of the agent's heap under
 * process churn. The kind goes in the top byte of exe: executable and
 * function indices stay far below 2^24, and the kernel's address spaces
 * (AGENT_EXE_KERNEL*, the values at the top of the range) keep their low
 * 24 bits and get the top ones back.
 */
struct stored_frame {
	uint64_t address;
	uint32_t exe_kind;
	uint32_t line;
};

#define STORED_EXE_BITS 24
#define STORED_EXE_MASK ((1u << STORED_EXE_BITS) - 1)
#define STORED_EXE_HIGH (AGENT_EXE_KERNEL_MODULE0 & STORED_EXE_MASK)
_Static_assert(AGENT_STORE_MAX_EXECUTABLES < STORED_EXE_HIGH && AGENT_FUNCTIONS_MAX < STORED_EXE_HIGH,
	       "indices must not reach the kernel's address spaces in 24 bits");
_Static_assert(sizeof(struct stored_frame) == 16, "a stored frame is 16 bytes");

static inline struct stored_frame frame_pack(const struct agent_frame *f)
{
	return (struct stored_frame){ .address = f->address,
				      .exe_kind = (f->exe & STORED_EXE_MASK) | (uint32_t)f->kind << STORED_EXE_BITS,
				      .line = f->line };
}

static inline uint32_t frame_exe(const struct stored_frame *f)
{
	uint32_t exe = f->exe_kind & STORED_EXE_MASK;

	return exe >= STORED_EXE_HIGH ? exe | ~STORED_EXE_MASK : exe;
}

static inline uint8_t frame_kind(const struct stored_frame *f)
{
	return (uint8_t)(f->exe_kind >> STORED_EXE_BITS);
}

struct stack_entry {
	uint8_t id[AGENT_STACK_ID_LEN];
	struct sr_list_node lru; /* in agent_store.lru */
	uint64_t last_window;
	uint16_t n;
	bool truncated;
	struct stored_frame frames[];
};

struct exe_entry {
	uint8_t id[AGENT_BUILD_ID_MAX];
	size_t id_len;
	int id_kind;
	char *path;
	uint64_t size;
	uint8_t gnu_build_id[AGENT_BUILD_ID_MAX];
	size_t gnu_build_id_len;
	char *debuglink;
	bool is_go;
	uint64_t dev, ino;
	uint32_t idx;	      /* its index in agent_store.exes */
	uint32_t refs;	      /* cached files (agent/proc.c) and stored stacks naming it */
	uint64_t last_window; /* last window a reference was taken or dropped */
	/* Last place it was seen mapped. */
	uint32_t pid;
	uint64_t start_ns, map_start, map_end;
	char *seen_path;
};

struct agent_store {
	pthread_mutex_t lock;
	struct sr_htab_ptrs stacks;
	struct sr_list lru; /* stacks, head is the most recently used */
	uint64_t max_stacks;
	uint64_t evicted;
	uint64_t expired; /* dropped unused after AGENT_STORE_KEEP_WINDOWS windows */
	struct sr_htab_ptrs exes_by_id;
	struct exe_entry **exes; /* by index; NULL: a freed slot, listed in free_exes */
	size_t n_exes, cap_exes;
	uint32_t *free_exes;
	size_t n_free_exes, cap_free_exes;
	uint64_t exes_freed;
	uint64_t window; /* the latest window the store was told of */
	bool have_kernel;
	struct agent_kernel kernel;
	struct agent_functions funcs;
	uint64_t stack_bytes; /* stacks' entries */
	uint64_t exe_bytes;   /* executables' entries */
};

/* The ID of executable (or kernel address space) exe into ret_id: its length, 0 when none, -ENOENT; lock held. */
int agent_store_exe_id_locked(struct agent_store *s, uint32_t exe, uint8_t *ret_id);
/* The ID of function fn into ret_id: AGENT_FUNCTION_ID_LEN or -ENOENT; lock held. */
int agent_store_function_id_locked(struct agent_store *s, uint32_t fn, uint8_t *ret_id);

#endif
