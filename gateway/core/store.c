/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The gateway-wide content-addressed stores of definitions (model.h):
 * executables, kernels, locations, stacks and functions. Each store is a chained hash
 * table plus a recency list under one mutex, bounded in bytes: inserting past the
 * bound evicts from the cold end. The index holds one reference per object;
 * eviction drops it, so objects in use by batches stay valid.
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

#include <xxhash.h>

#include "model.h"
#include "macro.h"
#include "model-private.h"
#include "store-private.h"

/* Referenced cold entries moved to the hot end per insert, at most (shrink_locked()). */
#define GW_STORE_SECOND_CHANCES 2

/*
 * Entries per bucket before the index doubles. At 2,000 nodes the stacks and
 * locations stores hold about a million entries each: at one per bucket
 * their indexes took 16 MiB each just past 2^20 entries; at two, half, for
 * one more object on an average chain (whose 32 bits of hash are compared
 * before the key: a chain step is one cache line).
 */
#define GW_STORE_LOAD_FACTOR 2

struct gw_store {
	pthread_mutex_t lock;
	struct gw_obj **buckets;
	size_t n_buckets;
	struct gw_obj lru; /* sentinel: lru.lru_next is the most recently used */
	uint64_t limit_bytes;
	struct gw_store_stats stats;
	/*
	 * Locations: bytes of those that stored stacks hold. Out of the LRU and
	 * of stats.bytes, charged to the stacks store's bound instead (read there
	 * without this store's lock, hence atomic).
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

static int store_init(struct gw_store *st, uint64_t limit)
{
	int r = pthread_mutex_init(&st->lock, NULL);
	if (r)
		return -r;
	st->n_buckets = 1024;
	st->buckets = calloc(st->n_buckets, sizeof(*st->buckets));
	if (!st->buckets) {
		pthread_mutex_destroy(&st->lock);
		return -ENOMEM;
	}
	st->lru.lru_next = st->lru.lru_prev = &st->lru;
	st->limit_bytes = limit;
	st->stats.limit_bytes = limit;
	return 0;
}

static void store_fini(struct gw_store *st)
{
	if (!st->buckets)
		return;
	/* Every indexed object (held locations are out of the LRU): unindex,
	 * then drop the index's reference; dropping a stack may drop locations
	 * of another store, never an object of this one's chains. */
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
	if ((r = store_init(&s->s[GW_STORE_EXECUTABLES], l.executable_bytes)) < 0 ||
	    (r = store_init(&s->s[GW_STORE_KERNELS], l.kernel_bytes)) < 0 ||
	    (r = store_init(&s->s[GW_STORE_LOCATIONS], l.location_bytes)) < 0 ||
	    (r = store_init(&s->s[GW_STORE_STACKS], l.stack_bytes)) < 0 ||
	    (r = store_init(&s->s[GW_STORE_FUNCTIONS], l.function_bytes)) < 0) {
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
	ret->index_bytes = st->n_buckets * sizeof(*st->buckets);
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

static void unindex_locked(struct gw_stores *s, struct gw_store *st, struct gw_obj *o, struct gw_obj **evicted);

/* Drops the index's references of a list linked through hash_next (outside the lock). */
static void unref_list(struct gw_obj *evicted)
{
	while (evicted) {
		struct gw_obj *next = evicted->hash_next;
		evicted->hash_next = NULL;
		gw_obj_unref(evicted);
		evicted = next;
	}
}

static bool in_use(const struct gw_obj *o)
{
	return atomic_load_explicit(&((struct gw_obj *)o)->refs, memory_order_relaxed) > 1; /* more than the index's */
}

/* Over its bound? The stacks store's bound covers what its stacks hold, and what their locations name. */
static bool over_locked(struct gw_stores *s, struct gw_store *st)
{
	uint64_t b = st->stats.bytes;

	if (st == &s->s[GW_STORE_STACKS])
		b += held_elsewhere(s) + atomic_load_explicit(&s->lines_bytes, memory_order_relaxed);
	return b > st->limit_bytes;
}

/*
 * st's lock held: something stored starts holding o (a stored stack its
 * location, a stored location its executable, kernel or function). Held, it
 * is out of st's list and bytes, never evicted; obj.held counts the holders.
 */
static void hold_locked(struct gw_store *st, struct gw_obj *o)
{
	if (o->lru_next) { /* in the list: indexed, and nothing held it */
		lru_unlink(o);
		st->stats.bytes -= o->bytes;
		atomic_fetch_add_explicit(&st->held_bytes, o->bytes, memory_order_relaxed);
	}
	o->held++;
}

/* st's lock held: one holder of o let it go; the last puts it back in the list (if it is still indexed). */
static void release_locked(struct gw_store *st, struct gw_obj *o)
{
	if (--o->held != 0 || !o->indexed)
		return;
	lru_push_front(st, o);
	st->stats.bytes += o->bytes;
	atomic_fetch_sub_explicit(&st->held_bytes, o->bytes, memory_order_relaxed);
}

static void shrink_locked(struct gw_stores *s, struct gw_store *st, const struct gw_obj *keep, unsigned chances,
			  struct gw_obj **evicted);

/* What a location names (its executable, kernel or function) and that one's store; NULL: nothing. */
static struct gw_obj *location_owner(struct gw_stores *s, const struct gw_location *l, struct gw_store **ret)
{
	switch (gw_location__kind(l)) {
	case GW_FRAME_USER:
		*ret = &s->s[GW_STORE_EXECUTABLES];
		return &l->in.exe->obj;
	case GW_FRAME_KERNEL:
		*ret = &s->s[GW_STORE_KERNELS];
		return &l->in.kernel->obj;
	case GW_FRAME_INTERPRETED:
	case GW_FRAME_JIT:
		*ret = &s->s[GW_STORE_FUNCTIONS];
		return &l->in.function->obj;
	default:
		return NULL;
	}
}

/*
 * Locations store's lock held: l entered or left it, so it holds or lets go
 * what it names (that store's lock taken after, as the lock order has it). An
 * executable that stored locations name is never evicted: evicting it would
 * free nothing, and the next definition naming it would make a copy, and
 * copies of every location under it, uncounted.
 */
static void hold_owner_locked(struct gw_stores *s, struct gw_location *l, bool hold, struct gw_obj **evicted)
{
	struct gw_store *os;
	struct gw_obj *o = location_owner(s, l, &os);

	if (!o)
		return;
	pthread_mutex_lock(&os->lock);
	if (hold) {
		hold_locked(os, o);
	} else {
		release_locked(os, o);
		shrink_locked(s, os, NULL, GW_STORE_SECOND_CHANCES, evicted);
	}
	pthread_mutex_unlock(&os->lock);
}

/*
 * A stack entered or left the stacks store (its lock held): its locations
 * are held or released; released ones may push the locations store over its
 * bound (evicted there, linked on *evicted).
 */
static void hold_stack_locked(struct gw_stores *s, struct gw_stack *st, bool hold, struct gw_obj **evicted)
{
	struct gw_store *ls = &s->s[GW_STORE_LOCATIONS];

	if (!st->n_locations)
		return;
	pthread_mutex_lock(&ls->lock);
	for (uint32_t i = 0; i < st->n_locations; i++)
		(hold ? hold_locked : release_locked)(ls, &gw_stack__location(st, i)->obj);
	if (!hold)
		shrink_locked(s, ls, NULL, GW_STORE_SECOND_CHANCES, evicted);
	pthread_mutex_unlock(&ls->lock);
}

/*
 * Evicts from the cold end until the store is under its bound, never keep
 * (the entry just inserted). A cold entry found since it was last at the
 * cold end is moved to the hot end (CLOCK's second chance: each hit buys at
 * most one move). A cold entry still referenced elsewhere (the
 * executable of a stored location, a stack in a batch in flight) gets a
 * second chance at the hot end, up to `chances` of them: evicting it frees
 * nothing, and the next definition naming it would make a duplicate that
 * lives beside it, uncounted. After that, entries in use are evicted too, so
 * the bound holds. (Locations that stored stacks hold are not in the LRU.)
 * Evicted entries are linked on *evicted through hash_next; evicted stacks
 * release their locations at once.
 */
static void shrink_locked(struct gw_stores *s, struct gw_store *st, const struct gw_obj *keep, unsigned chances,
			  struct gw_obj **evicted)
{
	unsigned spared = 0;

	while (over_locked(s, st) && st->lru.lru_prev != &st->lru) {
		struct gw_obj *victim = st->lru.lru_prev;

		/*
		 * The entry just inserted reaches the cold end when every other
		 * one was moved past it (all found, or in use): it is passed
		 * over, not taken for the end of the list, or the store would
		 * stay over its bound. Alone, it stays (every move above clears
		 * a mark or spends a chance, so this ends).
		 */
		if (victim == keep) {
			if (victim->lru_prev == &st->lru)
				break;
			lru_unlink(victim);
			lru_push_front(st, victim);
			continue;
		}
		/* Found since it was last here: as an LRU would have it, hot. */
		if (victim->flags & GW_OBJ_REFERENCED) {
			victim->flags &= (uint8_t)~GW_OBJ_REFERENCED;
			lru_unlink(victim);
			lru_push_front(st, victim);
			st->stats.rescued++;
			continue;
		}
		if (spared < chances && in_use(victim)) {
			lru_unlink(victim);
			lru_push_front(st, victim);
			spared++;
			st->stats.second_chances++;
			continue;
		}
		unindex_locked(s, st, victim, evicted);
		st->stats.evictions++;
		victim->hash_next = *evicted;
		*evicted = victim;
		if (st == &s->s[GW_STORE_STACKS])
			hold_stack_locked(s, (struct gw_stack *)victim, false, evicted);
	}
}

void gw_stores__set_limit(struct gw_stores *s, enum gw_store_kind k, uint64_t bytes)
{
	struct gw_store *st;
	struct gw_obj *evicted = NULL;

	if ((unsigned)k >= _GW_STORE_MAX)
		return;
	st = &s->s[k];
	pthread_mutex_lock(&st->lock);
	st->limit_bytes = st->stats.limit_bytes = bytes ? bytes : default_limits[k];
	shrink_locked(s, st, NULL, 0, &evicted);
	pthread_mutex_unlock(&st->lock);
	unref_list(evicted);
}

/* ---- keys (store-private.h) ---- */

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
	if (k->type == GW_OBJ_LOCATION) {
		const struct gw_location *l = (const struct gw_location *)o;
		const void *owner = l->in.exe; /* whichever member the kind names: the same pointer */
		if (gw_location__kind(l) != k->kind || l->address != k->address || owner != k->owner ||
		    gw_location__preset(l) != k->preset || gw_location__line(l) != k->line)
			return false;
		return !k->preset || gw_lines__equal(gw_location__lines(l), k->lines, k->n_lines);
	}
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

/* What shared lines are charged: their bytes and their overhead. */
static uint64_t lines_charge(const struct gw_lines *lines)
{
	return gw_lines__bytes(lines) + GW_OBJ_OVERHEAD;
}

/* Locations store's lock held: indexed l holds its shared lines; the first such location charges them. */
static bool charge_lines_locked(struct gw_stores *s, struct gw_location *l, struct gw_lines *lines)
{
	if ((l->obj.flags & GW_OBJ_LINES_CHARGED) || !l->obj.indexed)
		return false;
	l->obj.flags |= GW_OBJ_LINES_CHARGED;
	if (lines->store_holders++ != 0)
		return false;
	atomic_fetch_add_explicit(&s->lines_bytes, lines_charge(lines), memory_order_relaxed);
	return true;
}

/* Locations store's lock held: l leaves the store; the last stored holder of its lines uncharges them. */
static void uncharge_lines_locked(struct gw_stores *s, struct gw_location *l)
{
	struct gw_lines *lines;

	if (!(l->obj.flags & GW_OBJ_LINES_CHARGED))
		return;
	l->obj.flags &= (uint8_t)~GW_OBJ_LINES_CHARGED;
	lines = (struct gw_lines *)gw_location__lines(l);
	if (--lines->store_holders == 0)
		atomic_fetch_sub_explicit(&s->lines_bytes, lines_charge(lines), memory_order_relaxed);
}

static void unindex_locked(struct gw_stores *s, struct gw_store *st, struct gw_obj *o, struct gw_obj **evicted)
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
	if (o->type == GW_OBJ_LOCATION) {
		uncharge_lines_locked(s, (struct gw_location *)o);
		hold_owner_locked(s, (struct gw_location *)o, false, evicted);
	}
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

/*
 * Inserts o (whose creation reference the caller keeps) unless an equal
 * object got in first; returns the object to use (a new reference) and
 * evicted objects to unref once the lock is dropped.
 */
struct gw_obj *gw_store_insert(struct gw_stores *s, enum gw_store_kind kind, const struct key *k, struct gw_obj *o)
{
	struct gw_store *st = &s->s[kind];
	struct gw_obj *evicted = NULL, *existing;

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
		hold_stack_locked(s, (struct gw_stack *)o, true, &evicted);
	else if (kind == GW_STORE_LOCATIONS)
		hold_owner_locked(s, (struct gw_location *)o, true, &evicted);
	shrink_locked(s, st, o, GW_STORE_SECOND_CHANCES, &evicted);
	pthread_mutex_unlock(&st->lock);
	unref_list(evicted);
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

bool gw_stores__set_lines(struct gw_stores *s, struct gw_location *l, struct gw_lines *lines)
{
	struct gw_store *ls = &s->s[GW_STORE_LOCATIONS], *ss = &s->s[GW_STORE_STACKS];
	struct gw_obj *evicted = NULL;
	bool held = false;
	uint64_t extra;

	if (!gw_location__set_lines(l, lines))
		return false;
	if (lines->table && lines->table == s->lines) {
		/* Shared lines: charged once, to the stacks store's bound, while a stored location holds them. */
		bool charged;

		pthread_mutex_lock(&ls->lock);
		charged = charge_lines_locked(s, l, lines);
		pthread_mutex_unlock(&ls->lock);
		if (charged) {
			pthread_mutex_lock(&ss->lock);
			shrink_locked(s, ss, NULL, GW_STORE_SECOND_CHANCES, &evicted);
			pthread_mutex_unlock(&ss->lock);
			unref_list(evicted);
		}
		return true;
	}
	extra = SR_MIN(gw_lines__bytes(lines), (uint64_t)UINT32_MAX / 4);
	/* Both locks (stacks, then locations): a held location's lines are the stacks store's to pay. */
	pthread_mutex_lock(&ss->lock);
	pthread_mutex_lock(&ls->lock);
	if (l->obj.indexed && l->obj.bytes + extra < UINT32_MAX) {
		l->obj.bytes += (uint32_t)extra;
		if (l->obj.lru_next) {
			ls->stats.bytes += extra;
			shrink_locked(s, ls, &l->obj, GW_STORE_SECOND_CHANCES, &evicted);
		} else {
			atomic_fetch_add_explicit(&ls->held_bytes, extra, memory_order_relaxed);
			held = true;
		}
	}
	pthread_mutex_unlock(&ls->lock);
	if (held)
		shrink_locked(s, ss, NULL, GW_STORE_SECOND_CHANCES, &evicted);
	pthread_mutex_unlock(&ss->lock);
	unref_list(evicted);
	return true;
}

/* Chains s into h, with its terminator, so ("ab", "") and ("a", "b") differ. */
