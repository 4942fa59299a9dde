/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Pools of fixed-size slots in chunks of their own (slot-pool.c): the
 * memory of the gateway's million stacks and locations (stack-slabs.c,
 * location-slots.c). A chunk is GW_SLOT_CHUNK_BYTES, aligned to that size,
 * so a slot's chunk is its address rounded down; a slot is also named by a
 * 32-bit handle (chunk index × slots per chunk + slot), stable for as long
 * as the slot is allocated.
 *
 * Free slots are tracked in a bitmap in the chunk's header, never inside the
 * slots, and a new slot goes to the lowest free one of the lowest chunk with
 * room (address-ordered first fit), so live slots pack together. Pages whose
 * slots are all free can then be given back to the system
 * (gw_slot_pools_trim()) while the chunk stays mapped: a pool holds about
 * what its live slots need, not the most it ever held.
 */
#ifndef SR_GW_SLOT_POOL_H
#define SR_GW_SLOT_POOL_H

#include <pthread.h>
#include <stdint.h>

#define GW_SLOT_CHUNK_BYTES (512 * 1024)

struct gw_slot_chunk;

struct gw_slot_pool {
	pthread_mutex_t lock;
	uint32_t slot_size;	/* bytes, a multiple of 8 */
	uint32_t max_per_chunk; /* 0: as many as fit */
	uint32_t max_chunks;	/* 0: no bound but memory */
	uint32_t per_chunk;	/* slots per chunk (set with the first chunk) */
	uint32_t slots_offset;	/* where the slots start in a chunk */
	struct gw_slot_chunk **chunks;
	uint32_t n_chunks, cap_chunks;
	uint32_t first_nonfull;	 /* chunks below it have no free slot */
	uint64_t live, resident; /* bytes: in allocated slots; in the chunks' resident pages */
	uint64_t returned;	 /* bytes of pages given back by trims, in all */
	/*
	 * Called under the pool's lock when chunk index is mapped, before any
	 * of its slots is handed out (slots: where its first slot starts);
	 * NULL: none. Its handles are index × per_chunk and up.
	 */
	void (*on_chunk)(uint32_t index, void *slots);
	struct gw_slot_pool *next_pool; /* the registry of pools that have chunks (gw_slot_pools_trim()) */
};

/*
 * A pool lives as long as the process (a static; its chunks are never
 * unmapped): a pool of slots of size bytes (a multiple of 8, at most 64 KiB), at most
 * max_per_chunk per chunk (0: as many as fit) and max_chunks chunks (0: no
 * bound), calling on_chunk (or NULL).
 */
#define GW_SLOT_POOL_INIT(size, max_per_chunk_, max_chunks_, on_chunk_)                                                \
	{                                                                                                              \
		.lock = PTHREAD_MUTEX_INITIALIZER, .slot_size = (size), .max_per_chunk = (max_per_chunk_),             \
		.max_chunks = (max_chunks_), .on_chunk = (on_chunk_)                                                   \
	}

/*
 * A slot of the pool, not zeroed (pages given back read as zeros, reused
 * slots hold what was there); its handle in *ret_handle (may be NULL).
 * NULL + errno: ENOMEM (no memory, or max_chunks full).
 */
void *gw_slot_alloc(struct gw_slot_pool *pool, uint32_t *ret_handle);
/* Gives back p, a slot from gw_slot_alloc() (of any pool). */
void gw_slot_free(void *p);
/* The handle of p, an allocated slot (no lock: what it reads is set before the slot was handed out). */
uint32_t gw_slot_handle(const void *p);

/* The pool's bytes: in allocated slots, chunks mapped, in resident pages, given back by trims in all. */
struct gw_slot_pool_stats {
	uint64_t live, mapped, resident, returned;
};
void gw_slot_pool__stats(struct gw_slot_pool *pool, struct gw_slot_pool_stats *ret);

/* Gives back the pages of every pool whose slots are all free (the chunk's first page stays); the bytes. */
uint64_t gw_slot_pools_trim(void);

#endif
