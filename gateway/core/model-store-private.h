/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Shared by the stores' files: model-store.c (the stores, their bounds, what holds
 * what), model-store-locations.c (the locations store's index and list) and
 * model-store-intern.c (what each kind of definition is keyed by).
 */
#ifndef SR_GW_MODEL_STORE_PRIVATE_H
#define SR_GW_MODEL_STORE_PRIVATE_H

#include <pthread.h>
#include <stdatomic.h>

#include "model.h"
#include "model-private.h"

/* Referenced cold entries moved to the hot end per insert, at most (gw_store_shrink_locked()). */
#define GW_STORE_SECOND_CHANCES 2

/*
 * The locations store's index and recency list (model-store-locations.c): open
 * addressing over slot numbers (entry = slot + 1, 0: empty; linear probing,
 * deletion by backward shift), the list linked through the locations'
 * lru_prev and lru_next slots.
 */
struct gw_location_index {
	uint32_t *entries;
	uint32_t mask;	    /* entries - 1 (a power of two minus one) */
	uint32_t hot, cold; /* the list's ends (GW_SLOT_NONE: empty) */
};

struct gw_store {
	pthread_mutex_t lock;
	struct gw_obj **buckets; /* all but the locations store */
	size_t n_buckets;
	struct gw_obj lru;	      /* sentinel: lru.lru_next is the most recently used */
	struct gw_location_index loc; /* the locations store */
	uint64_t limit_bytes;
	struct gw_store_stats stats;
	/*
	 * Bytes of the entries stored ones hold (locations of stored stacks;
	 * executables, kernels and functions of stored locations). Out of the
	 * LRU and of stats.bytes, charged to the stacks store's bound instead
	 * (read there without this store's lock, hence atomic).
	 */
	atomic_uint_fast64_t held_bytes;
};

struct gw_stores {
	struct gw_store s[_GW_STORE_MAX];
	/* Symbolized lines shared by locations (lines.c); held by them, so freed after the stores. */
	struct gw_lines_table *lines;
	/*
	 * Bytes of the shared lines that indexed locations hold, each counted
	 * once (gw_lines.store_holders, changed under the locations store's
	 * lock): charged to the stacks store's bound, read there without that
	 * lock.
	 */
	atomic_uint_fast64_t lines_bytes;
};

/* What a shrink evicted, to drop once the locks are: objects linked through hash_next, locations through lru_next. */
struct gw_evicted {
	struct gw_obj *objs;
	uint32_t locations; /* a slot, GW_SLOT_NONE: none */
};
#define GW_EVICTED_INIT                                                                                                \
	{                                                                                                              \
		.objs = NULL, .locations = GW_SLOT_NONE                                                                \
	}

/* A definition's key: its ID, or a location's (kind, address, owner, line, preset lines). */
struct key {
	enum gw_obj_type type;
	uint64_t hash;
	const void *id;
	size_t id_len;
	/* locations */
	enum gw_frame_kind kind;
	uint64_t address;
	const void *owner;
	uint32_t line;
	/* preset locations: their lines are part of the key */
	bool preset;
	const struct gw_line *lines;
	uint32_t n_lines;
};

/* What CLOCK does with the entry at the cold end of a store's list. */
enum gw_clock_step {
	GW_CLOCK_STOP,	/* the entry just inserted, alone in the list: it stays */
	GW_CLOCK_MOVE,	/* to the hot end */
	GW_CLOCK_EVICT, /* out of the store */
};

/*
 * The rules of gw_store_shrink_locked() for the entry at the cold end, for
 * both kinds of list (model-store.c, model-store-locations.c). The entry just inserted
 * (keep) reaches the cold end when every other one was moved past it (all
 * found, or in use): it is passed over, not taken for the end of the list,
 * or the store would stay over its bound; alone, it stays (every other move
 * clears a mark or spends a chance, so a shrink ends). An entry found since
 * it was last here is hot, as an LRU would have it: its mark is cleared and
 * it moves. One still referenced elsewhere (a stack in a batch in flight)
 * moves too, up to `chances` times a shrink: evicting it frees nothing, and
 * the next definition naming it would make a copy that lives beside it,
 * uncounted. After that, entries in use are evicted too, so the bound holds.
 */
static inline enum gw_clock_step gw_clock_step(struct gw_store_stats *stats, bool is_keep, bool alone, uint8_t *flags,
					       bool in_use, unsigned *spared, unsigned chances)
{
	if (is_keep)
		return alone ? GW_CLOCK_STOP : GW_CLOCK_MOVE;
	if (*flags & GW_OBJ_REFERENCED) {
		*flags &= (uint8_t)~GW_OBJ_REFERENCED;
		stats->rescued++;
		return GW_CLOCK_MOVE;
	}
	if (*spared < chances && in_use) {
		(*spared)++;
		stats->second_chances++;
		return GW_CLOCK_MOVE;
	}
	return GW_CLOCK_EVICT;
}

/* ---- model-store.c ---- */

/* A new reference to the indexed object equal to k, or NULL (not for locations). */
struct gw_obj *gw_store_lookup(struct gw_stores *s, enum gw_store_kind kind, const struct key *k);
/*
 * Inserts o unless an equal object got in first (o is then dropped);
 * returns the object to use, with the caller's reference (not for locations).
 */
struct gw_obj *gw_store_insert(struct gw_stores *s, enum gw_store_kind kind, const struct key *k, struct gw_obj *o);
/* Over its bound? The stacks store's bound covers what its stacks hold, and what their locations name. */
bool gw_store_over_locked(struct gw_stores *s, struct gw_store *st);
/*
 * Evicts from the cold end until st is under its bound, never keep (CLOCK:
 * marked entries get moved once, entries in use up to `chances` times).
 */
void gw_store_shrink_locked(struct gw_stores *s, struct gw_store *st, const void *keep, unsigned chances,
			    struct gw_evicted *ev);
/*
 * st's lock held: a stored location starts or stops naming o (its executable,
 * kernel or function). Hold: true when o's bytes were charged to the stacks
 * store's bound just now (the caller shrinks that store).
 */
bool gw_store_hold_locked(struct gw_store *st, struct gw_obj *o);
void gw_store_release_locked(struct gw_store *st, struct gw_obj *o);
/* Drops what was evicted (no lock held). */
void gw_store_drop_evicted(struct gw_evicted *ev);

/* ---- model-store-locations.c (the locations store's lock is the store's) ---- */

/* The location's charge: its slot and index share, and its own lines once counted (GW_LOCATION_OWN_LINES). */
uint64_t gw_location__charge(const struct gw_location *l);
/* The hash of a location's key (the same for a key and for the location it matches). */
uint64_t gw_location_hash(enum gw_frame_kind kind, uint64_t address, const void *owner, uint32_t line, bool preset,
			  const struct gw_line *lines, uint32_t n);
int gw_location_index_init(struct gw_location_index *x);
/* Drops the index's reference of every location (the stores are being freed). */
void gw_location_index_fini(struct gw_location_index *x);
struct gw_location *gw_store_lookup_location(struct gw_stores *s, const struct key *k);
struct gw_location *gw_store_insert_location(struct gw_stores *s, const struct key *k, struct gw_location *l);
/* The stacks store's lock held: a stack entered (hold) or left it; its locations are held or released. */
void gw_store_hold_stack_locked(struct gw_stores *s, struct gw_stack *st, bool hold, struct gw_evicted *ev);
/* The locations store's lock held: gw_store_shrink_locked() for it. */
void gw_store_shrink_locations_locked(struct gw_stores *s, const struct gw_location *keep, unsigned chances,
				      struct gw_evicted *ev);

#endif
