/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The gateway-wide content-addressed stores of definitions (model.h):
 * executables, kernels, locations, stacks and functions. Each store is an
 * index plus a recency list under one mutex, bounded in bytes: inserting past
 * the bound evicts from the cold end. The index holds one reference per
 * object; eviction drops it, so objects in use by batches stay valid. The
 * locations store packs its index and list into slot numbers
 * (model-store-locations.c); the others chain gw_objs.
 *
 * The list is kept as CLOCK keeps it, not as a strict LRU: a hit only marks
 * the entry referenced, and an entry found marked at the cold end is moved
 * to the hot end instead of evicted. A hit then writes one byte where an LRU
 * relink wrote four entries' links: at 2,000 nodes a replica looks up about
 * 200,000 definitions a second, most of them hits, under these locks.
 *
 * A location that a stored stack holds is out of the locations' LRU, so it is
 * never evicted while a stack it belongs to is stored (evicting it would free
 * nothing, and the next definition naming it would make an uncounted copy);
 * its bytes count against the stacks store's bound, which evicts stacks (and
 * so releases their locations) to stay under it. So is an executable, kernel
 * or function that a stored location names, one step down: after a rollout,
 * stragglers still running the old version keep its executable stored, not
 * evicted and defined again under a new object with copies of all its
 * locations. Lock order: stacks, then locations, then executables, kernels
 * and functions; a location's held bytes change only with the first two held.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "model-private.h"
#include "model-store-private.h"

/*
 * Entries per bucket before the index doubles. At 2,000 nodes the stacks and
 * locations stores hold about a million entries each: at one per bucket
 * their indexes took 16 MiB each just past 2^20 entries; at two, half, for
 * one more object on an average chain (whose 32 bits of hash are compared
 * before the key: a chain step is one cache line).
 *
 * Not the tree's table (common/htab.h) for that reason: its slots keep a
 * 64-bit hash and a pointer, 16 bytes at most 3/4 full, where a chained
 * object here costs its bucket's share (4 bytes at two per bucket) and a
 * chain pointer it carries anyway.
 */
#define GW_STORE_LOAD_FACTOR 2

static const char *const store_names[_GW_STORE_MAX] = {
	[GW_STORE_EXECUTABLES] = "executables", [GW_STORE_KERNELS] = "kernels",	    [GW_STORE_LOCATIONS] = "locations",
	[GW_STORE_STACKS] = "stacks",		[GW_STORE_FUNCTIONS] = "functions",
};

const char *gw_store_kind_to_string(enum gw_store_kind k)
{
	return (unsigned)k < _GW_STORE_MAX ? store_names[k] : "unknown";
}

static void lru_unlink(struct gw_obj *o)
{
	o->lru_prev->lru_next = o->lru_next;
	o->lru_next->lru_prev = o->lru_prev;
	o->lru_prev = o->lru_next = NULL;
}

static void lru_push_front(struct gw_store *st, struct gw_obj *o)
{
	o->lru_next = st->lru.lru_next;
	o->lru_prev = &st->lru;
	st->lru.lru_next->lru_prev = o;
	st->lru.lru_next = o;
}

static int store_init(struct gw_store *st, enum gw_store_kind kind, uint64_t limit)
{
	int r = pthread_mutex_init(&st->lock, NULL);
	if (r)
		return -r;
	if (kind == GW_STORE_LOCATIONS) {
		r = gw_location_index_init(&st->loc);
	} else {
		st->n_buckets = 1024;
		st->buckets = calloc(st->n_buckets, sizeof(*st->buckets));
		r = st->buckets ? 0 : -ENOMEM;
	}
	if (r < 0) {
		pthread_mutex_destroy(&st->lock);
		return r;
	}
	st->lru.lru_next = st->lru.lru_prev = &st->lru;
	st->limit_bytes = limit;
	st->stats.limit_bytes = limit;
	return 0;
}

static void store_fini(struct gw_store *st)
{
	if (st->loc.entries) {
		gw_location_index_fini(&st->loc);
		pthread_mutex_destroy(&st->lock);
		return;
	}
	if (!st->buckets)
		return;
	/* Every indexed object (held ones are out of the LRU): unindex, then
	 * drop the index's reference; dropping a stack may drop locations of
	 * another store, never an object of this one's chains. */
	for (size_t i = 0; i < st->n_buckets; i++) {
		struct gw_obj *o = st->buckets[i];
		st->buckets[i] = NULL;
		while (o) {
			struct gw_obj *next = o->hash_next;
			o->indexed = false;
			o->lru_prev = o->lru_next = NULL;
			o->hash_next = NULL;
			gw_obj_unref(o);
			o = next;
		}
	}
	free(st->buckets);
	st->buckets = NULL;
	pthread_mutex_destroy(&st->lock);
}

struct gw_stores *gw_stores_new(const struct gw_store_limits *limits)
{
	struct gw_store_limits l = {
		.executable_bytes = GW_STORE_DEFAULT_EXECUTABLE_BYTES,
		.kernel_bytes = GW_STORE_DEFAULT_KERNEL_BYTES,
		.location_bytes = GW_STORE_DEFAULT_LOCATION_BYTES,
		.stack_bytes = GW_STORE_DEFAULT_STACK_BYTES,
		.function_bytes = GW_STORE_DEFAULT_FUNCTION_BYTES,
	};
	struct gw_stores *s;
	int r;

	if (limits) {
		if (limits->executable_bytes)
			l.executable_bytes = limits->executable_bytes;
		if (limits->kernel_bytes)
			l.kernel_bytes = limits->kernel_bytes;
		if (limits->location_bytes)
			l.location_bytes = limits->location_bytes;
		if (limits->stack_bytes)
			l.stack_bytes = limits->stack_bytes;
		if (limits->function_bytes)
			l.function_bytes = limits->function_bytes;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->lines = gw_lines_table_new();
	if (!s->lines) {
		free(s);
		return NULL;
	}
	if ((r = store_init(&s->s[GW_STORE_EXECUTABLES], GW_STORE_EXECUTABLES, l.executable_bytes)) < 0 ||
	    (r = store_init(&s->s[GW_STORE_KERNELS], GW_STORE_KERNELS, l.kernel_bytes)) < 0 ||
	    (r = store_init(&s->s[GW_STORE_LOCATIONS], GW_STORE_LOCATIONS, l.location_bytes)) < 0 ||
	    (r = store_init(&s->s[GW_STORE_STACKS], GW_STORE_STACKS, l.stack_bytes)) < 0 ||
	    (r = store_init(&s->s[GW_STORE_FUNCTIONS], GW_STORE_FUNCTIONS, l.function_bytes)) < 0) {
		gw_stores_free(s);
		errno = -r;
		return NULL;
	}
	return s;
}

void gw_stores_free(struct gw_stores *s)
{
	if (!s)
		return;
	/* Stacks first: they hold locations, which hold executables and kernels. */
	store_fini(&s->s[GW_STORE_STACKS]);
	store_fini(&s->s[GW_STORE_LOCATIONS]);
	store_fini(&s->s[GW_STORE_FUNCTIONS]);
	store_fini(&s->s[GW_STORE_KERNELS]);
	store_fini(&s->s[GW_STORE_EXECUTABLES]);
	gw_lines_table_free(s->lines);
	free(s);
}

/*
 * Bytes charged to the stacks store's bound that other stores hold: the
 * locations stored stacks hold, and what stored locations name.
 */
static uint64_t held_elsewhere(struct gw_stores *s)
{
	uint64_t b = 0;

	for (int k = 0; k < _GW_STORE_MAX; k++)
		if (k != GW_STORE_STACKS)
			b += atomic_load_explicit(&s->s[k].held_bytes, memory_order_relaxed);
	return b;
}

void gw_stores__stats(struct gw_stores *s, enum gw_store_kind k, struct gw_store_stats *ret)
{
	struct gw_store *st = &s->s[k];
	pthread_mutex_lock(&st->lock);
	*ret = st->stats;
	ret->index_bytes = k == GW_STORE_LOCATIONS ? ((uint64_t)st->loc.mask + 1) * sizeof(*st->loc.entries)
						   : st->n_buckets * sizeof(*st->buckets);
	ret->held_bytes = atomic_load_explicit(&st->held_bytes, memory_order_relaxed);
	if (k == GW_STORE_STACKS) { /* its bound covers what they hold, and shared lines */
		ret->lines_bytes = atomic_load_explicit(&s->lines_bytes, memory_order_relaxed);
		ret->bytes += held_elsewhere(s) + ret->lines_bytes;
	}
	pthread_mutex_unlock(&st->lock);
}

/* The stores' bytes (held locations and shared lines once, in the stacks store's), or their bounds. */
static uint64_t sum_stores(struct gw_stores *s, bool limits)
{
	uint64_t bytes = 0;

	for (int k = 0; k < _GW_STORE_MAX; k++) {
		struct gw_store_stats st;

		gw_stores__stats(s, (enum gw_store_kind)k, &st);
		bytes += limits ? st.limit_bytes : st.bytes;
	}
	return bytes;
}

uint64_t gw_stores__limit_bytes(struct gw_stores *s)
{
	return sum_stores(s, true);
}

uint64_t gw_stores__bytes(struct gw_stores *s)
{
	return sum_stores(s, false);
}

static const uint64_t default_limits[_GW_STORE_MAX] = {
	[GW_STORE_EXECUTABLES] = GW_STORE_DEFAULT_EXECUTABLE_BYTES, [GW_STORE_KERNELS] = GW_STORE_DEFAULT_KERNEL_BYTES,
	[GW_STORE_LOCATIONS] = GW_STORE_DEFAULT_LOCATION_BYTES,	    [GW_STORE_STACKS] = GW_STORE_DEFAULT_STACK_BYTES,
	[GW_STORE_FUNCTIONS] = GW_STORE_DEFAULT_FUNCTION_BYTES,
};

static void unindex_locked(struct gw_store *st, struct gw_obj *o);

void gw_store_drop_evicted(struct gw_evicted *ev)
{
	while (ev->objs) {
		struct gw_obj *next = ev->objs->hash_next;
		ev->objs->hash_next = NULL;
		gw_obj_unref(ev->objs);
		ev->objs = next;
	}
	while (ev->locations != GW_SLOT_NONE) {
		struct gw_location *l = gw_location__at(ev->locations);

		ev->locations = l->lru_next;
		l->lru_next = GW_SLOT_NONE;
		gw_location__unref(l);
	}
}

static bool in_use(const struct gw_obj *o)
{
	return atomic_load_explicit(&((struct gw_obj *)o)->refs, memory_order_relaxed) > 1; /* more than the index's */
}

bool gw_store_over_locked(struct gw_stores *s, struct gw_store *st)
{
	uint64_t b = st->stats.bytes;

	if (st == &s->s[GW_STORE_STACKS])
		b += held_elsewhere(s) + atomic_load_explicit(&s->lines_bytes, memory_order_relaxed);
	return b > st->limit_bytes;
}

/*
 * Held, o is out of st's list and bytes, never evicted; obj.held counts its
 * holders. True when its bytes moved to held_bytes just now, that is to the
 * stacks store's bound, which the caller must then shrink.
 */
bool gw_store_hold_locked(struct gw_store *st, struct gw_obj *o)
{
	bool moved = o->lru_next != NULL; /* in the list: indexed, and nothing held it */

	if (moved) {
		lru_unlink(o);
		st->stats.bytes -= o->bytes;
		atomic_fetch_add_explicit(&st->held_bytes, o->bytes, memory_order_relaxed);
	}
	o->held++;
	return moved;
}

/* The last holder to let o go puts it back in the list (if it is still indexed). */
void gw_store_release_locked(struct gw_store *st, struct gw_obj *o)
{
	if (--o->held != 0 || !o->indexed)
		return;
	lru_push_front(st, o);
	st->stats.bytes += o->bytes;
	atomic_fetch_sub_explicit(&st->held_bytes, o->bytes, memory_order_relaxed);
}

/*
 * Evicts from the cold end until the store is under its bound, never keep
 * (the entry just inserted), as gw_clock_step() has it. (Held entries are
 * not in the list: locations of stored stacks, what stored locations name.)
 * Evicted entries go on ev, to drop once the locks are; evicted stacks
 * release their locations at once. The locations store has its own list
 * (gw_store_shrink_locations_locked()).
 */
void gw_store_shrink_locked(struct gw_stores *s, struct gw_store *st, const void *keep, unsigned chances,
			    struct gw_evicted *ev)
{
	unsigned spared = 0;

	if (st == &s->s[GW_STORE_LOCATIONS]) {
		gw_store_shrink_locations_locked(s, keep, chances, ev);
		return;
	}
	while (gw_store_over_locked(s, st) && st->lru.lru_prev != &st->lru) {
		struct gw_obj *victim = st->lru.lru_prev;

		switch (gw_clock_step(&st->stats, victim == keep, victim->lru_prev == &st->lru, &victim->flags,
				      in_use(victim), &spared, chances)) {
		case GW_CLOCK_STOP:
			return;
		case GW_CLOCK_MOVE:
			lru_unlink(victim);
			lru_push_front(st, victim);
			continue;
		case GW_CLOCK_EVICT:
			break;
		}
		unindex_locked(st, victim);
		st->stats.evictions++;
		victim->hash_next = ev->objs;
		ev->objs = victim;
		if (st == &s->s[GW_STORE_STACKS])
			gw_store_hold_stack_locked(s, (struct gw_stack *)victim, false, ev);
	}
}

void gw_stores__set_limit(struct gw_stores *s, enum gw_store_kind k, uint64_t bytes)
{
	struct gw_evicted ev = GW_EVICTED_INIT;
	struct gw_store *st;

	if ((unsigned)k >= _GW_STORE_MAX)
		return;
	st = &s->s[k];
	pthread_mutex_lock(&st->lock);
	st->limit_bytes = st->stats.limit_bytes = bytes ? bytes : default_limits[k];
	gw_store_shrink_locked(s, st, NULL, 0, &ev);
	pthread_mutex_unlock(&st->lock);
	gw_store_drop_evicted(&ev);
}

/* ---- keys (model-store-private.h) ---- */

/* The ID bytes of an executable, kernel, stack or function. */
static const uint8_t *obj_id(const struct gw_obj *o, size_t *ret_len)
{
	const struct gw_id *id;

	switch (o->type) {
	case GW_OBJ_EXECUTABLE:
		id = &((const struct gw_executable *)o)->id;
		break;
	case GW_OBJ_KERNEL:
		id = &((const struct gw_kernel *)o)->id;
		break;
	case GW_OBJ_STACK:
		*ret_len = ((const struct gw_stack *)o)->id_len;
		return gw_stack__id((const struct gw_stack *)o);
	case GW_OBJ_FUNCTION:
		id = &((const struct gw_function *)o)->id;
		break;
	default:
		*ret_len = 0;
		return NULL;
	}
	*ret_len = id->len;
	return id->bytes;
}

static bool key_match(const struct key *k, const struct gw_obj *o)
{
	if (o->hash != (uint32_t)k->hash)
		return false;
	size_t len;
	const uint8_t *id = obj_id(o, &len);
	return len == k->id_len && memcmp(id, k->id, len) == 0;
}

/* Caller holds the lock. Returns a new reference or NULL. */
static struct gw_obj *find_locked(struct gw_store *st, const struct key *k)
{
	for (struct gw_obj *o = st->buckets[k->hash & (st->n_buckets - 1)]; o; o = o->hash_next) {
		if (key_match(k, o)) {
			if (!(o->flags &
			      GW_OBJ_REFERENCED)) /* written once per trip to the cold end: the line stays clean */
				o->flags |= GW_OBJ_REFERENCED;
			atomic_fetch_add_explicit(&o->refs, 1, memory_order_relaxed);
			st->stats.hits++;
			return o;
		}
	}
	st->stats.misses++;
	return NULL;
}

static void unindex_locked(struct gw_store *st, struct gw_obj *o)
{
	struct gw_obj **pp = &st->buckets[o->hash & (st->n_buckets - 1)];
	while (*pp && *pp != o)
		pp = &(*pp)->hash_next;
	if (*pp)
		*pp = o->hash_next;
	o->hash_next = NULL;
	if (o->lru_next) {
		lru_unlink(o);
		st->stats.bytes -= o->bytes;
	} else { /* held */
		atomic_fetch_sub_explicit(&st->held_bytes, o->bytes, memory_order_relaxed);
	}
	o->indexed = false;
	st->stats.entries--;
}

static void grow_locked(struct gw_store *st)
{
	size_t n = st->n_buckets * 2;
	struct gw_obj **b;

	if (n > ((size_t)1 << 32))
		return; /* objects keep 32 bits of their hash: chains get longer */
	b = calloc(n, sizeof(*b));
	if (!b)
		return; /* chains just get longer */
	for (size_t i = 0; i < st->n_buckets; i++) {
		struct gw_obj *o = st->buckets[i];
		while (o) {
			struct gw_obj *next = o->hash_next;
			o->hash_next = b[o->hash & (n - 1)];
			b[o->hash & (n - 1)] = o;
			o = next;
		}
	}
	free(st->buckets);
	st->buckets = b;
	st->n_buckets = n;
}

struct gw_obj *gw_store_insert(struct gw_stores *s, enum gw_store_kind kind, const struct key *k, struct gw_obj *o)
{
	struct gw_store *st = &s->s[kind];
	struct gw_evicted ev = GW_EVICTED_INIT;
	struct gw_obj *existing;

	pthread_mutex_lock(&st->lock);
	existing = find_locked(st, k);
	if (existing) {
		pthread_mutex_unlock(&st->lock);
		gw_obj_unref(o);
		return existing;
	}
	o->hash = (uint32_t)k->hash;
	o->hash_next = st->buckets[k->hash & (st->n_buckets - 1)];
	st->buckets[k->hash & (st->n_buckets - 1)] = o;
	lru_push_front(st, o);
	o->indexed = true;
	atomic_fetch_add_explicit(&o->refs, 1, memory_order_relaxed); /* the index's */
	st->stats.entries++;
	st->stats.bytes += o->bytes;
	st->stats.inserts++;
	if (st->stats.entries > st->n_buckets * GW_STORE_LOAD_FACTOR)
		grow_locked(st);
	if (kind == GW_STORE_STACKS)
		gw_store_hold_stack_locked(s, (struct gw_stack *)o, true, &ev);
	gw_store_shrink_locked(s, st, o, GW_STORE_SECOND_CHANCES, &ev);
	pthread_mutex_unlock(&st->lock);
	gw_store_drop_evicted(&ev);
	return o;
}

struct gw_obj *gw_store_lookup(struct gw_stores *s, enum gw_store_kind kind, const struct key *k)
{
	struct gw_store *st = &s->s[kind];

	pthread_mutex_lock(&st->lock);
	struct gw_obj *o = find_locked(st, k);
	pthread_mutex_unlock(&st->lock);
	return o;
}

struct gw_lines_table *gw_stores__lines(struct gw_stores *s)
{
	return s->lines;
}
