/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The locations store: its index, its recency list, and what its locations
 * hold and are held by (model-store.c has the other stores, and the bounds).
 *
 * A replica at 2,000 nodes holds about two million locations, so the store
 * costs them as little as it can. A location is a 40-byte slot of the
 * location table (location-slots.c), not a gw_obj:
 *   - the index is open addressing over 4-byte slot numbers (linear
 *     probing, at most 3/4 full; deletion shifts the entries after back, so
 *     there are no tombstones): no chain pointer in the location, and no
 *     stored hash; a probe compares the address first, and the hash is
 *     computed again when an entry moves (a deletion's shift, a doubling);
 *   - the recency list (CLOCK, as in model-store.c) links slots, not pointers, and
 *     only the locations no stored stack holds are in it; a held location
 *     keeps in that place the number of stored stacks holding it;
 *   - its charge is derived (gw_location__charge()), not kept.
 * So the index is its own and not the tree's table (common/htab.h), whose
 * slots begin with a stored 64-bit hash: 16 bytes a slot instead of 4,
 * 64 MiB instead of 16 at two million locations.
 * Evicted locations are linked through lru_next until the locks are dropped.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "model.h"
#include "model-private.h"
#include "model-store-private.h"

static struct gw_location *at(uint32_t slot)
{
	return gw_location__at(slot);
}

uint64_t gw_location__charge(const struct gw_location *l)
{
	uint64_t b = GW_LOCATION_BYTES;

	if (l->flags & GW_LOCATION_OWN_LINES)
		b += gw_lines__bytes(gw_location__lines(l));
	return b;
}

/* ---- keys ---- */

/* Chains s into h, with its terminator, so ("ab", "") and ("a", "b") differ. */
static uint64_t hash_str(uint64_t h, const char *s)
{
	return XXH3_64bits_withSeed(s ? s : "", s ? strlen(s) + 1 : 1, h);
}

uint64_t gw_location_hash(enum gw_frame_kind kind, uint64_t address, const void *owner, uint32_t line, bool preset,
			  const struct gw_line *lines, uint32_t n)
{
	/* All 64-bit members: no padding bytes to hash. */
	const uint64_t raw[3] = { address, (uint64_t)(uintptr_t)owner, (uint64_t)kind | (uint64_t)line << 32 };
	uint64_t h = XXH3_64bits(&raw, sizeof(raw));

	if (!preset)
		return h;
	h ^= 0x9e3779b97f4a7c15ULL; /* never a plain location's hash by construction */
	for (uint32_t i = 0; i < n; i++) {
		const uint64_t nums[3] = { lines[i].line, lines[i].column, lines[i].start_line };
		h = XXH3_64bits_withSeed(nums, sizeof(nums), h);
		h = hash_str(h, lines[i].function);
		h = hash_str(h, lines[i].system_name);
		h = hash_str(h, lines[i].file);
	}
	return h;
}

/* The hash of l's key (what gw_location_hash() gave the key it was interned under). */
static uint64_t location_hash(const struct gw_location *l)
{
	const struct gw_lines *lines = gw_location__lines(l);
	bool preset = gw_location__preset(l);

	return gw_location_hash(gw_location__kind(l), l->address, l->in.exe, gw_location__line(l), preset,
				preset && lines ? lines->lines : NULL, preset && lines ? lines->n : 0);
}

static bool key_match(const struct key *k, const struct gw_location *l)
{
	/* The owner: whichever member the kind names, the same pointer. */
	if (l->address != k->address || gw_location__kind(l) != k->kind || l->in.exe != k->owner ||
	    gw_location__preset(l) != k->preset || gw_location__line(l) != k->line)
		return false;
	return !k->preset || gw_lines__equal(gw_location__lines(l), k->lines, k->n_lines);
}

/* ---- the index ---- */

int gw_location_index_init(struct gw_location_index *x)
{
	x->mask = 1023;
	x->entries = calloc((size_t)x->mask + 1, sizeof(*x->entries));
	x->hot = x->cold = GW_SLOT_NONE;
	return x->entries ? 0 : -ENOMEM;
}

void gw_location_index_fini(struct gw_location_index *x)
{
	if (!x->entries)
		return;
	for (size_t i = 0; i <= x->mask; i++) {
		struct gw_location *l;

		if (!x->entries[i])
			continue;
		l = at(x->entries[i] - 1);
		l->flags &= (uint8_t) ~(GW_LOCATION_INDEXED | GW_LOCATION_LISTED);
		l->held = 0;
		gw_location__unref(l);
	}
	free(x->entries);
	x->entries = NULL;
}

static struct gw_location *index_find(const struct gw_location_index *x, const struct key *k)
{
	for (uint32_t i = (uint32_t)k->hash & x->mask; x->entries[i]; i = (i + 1) & x->mask) {
		struct gw_location *l = at(x->entries[i] - 1);

		if (key_match(k, l))
			return l;
	}
	return NULL;
}

static void index_place(uint32_t *entries, uint32_t mask, uint32_t slot, uint64_t hash)
{
	uint32_t i = (uint32_t)hash & mask;

	while (entries[i])
		i = (i + 1) & mask;
	entries[i] = slot + 1;
}

/* Doubles the table (every hash computed again); false when it cannot (the table stays). */
static bool index_grow(struct gw_location_index *x)
{
	uint32_t mask = x->mask * 2 + 1, *e;

	if (mask < x->mask)
		return false;
	e = calloc((size_t)mask + 1, sizeof(*e));
	if (!e)
		return false;
	for (size_t i = 0; i <= x->mask; i++)
		if (x->entries[i])
			index_place(e, mask, x->entries[i] - 1, location_hash(at(x->entries[i] - 1)));
	free(x->entries);
	x->entries = e;
	x->mask = mask;
	return true;
}

/* Takes l out of the index: the entries after it in its run move back where a probe finds them. */
static void index_remove(struct gw_location_index *x, const struct gw_location *l)
{
	uint32_t slot = gw_location__slot(l) + 1, i = (uint32_t)location_hash(l) & x->mask;

	while (x->entries[i] != slot) {
		if (!x->entries[i])
			return; /* not there: cannot happen for an indexed location */
		i = (i + 1) & x->mask;
	}
	for (uint32_t j = i;;) {
		uint32_t home;

		j = (j + 1) & x->mask;
		if (!x->entries[j])
			break;
		home = (uint32_t)location_hash(at(x->entries[j] - 1)) & x->mask;
		/* The entry at j stays when its home is cyclically in (i, j]. */
		if (i <= j ? (home > i && home <= j) : (home > i || home <= j))
			continue;
		x->entries[i] = x->entries[j];
		i = j;
	}
	x->entries[i] = 0;
}

/* ---- the recency list ---- */

static void list_unlink(struct gw_location_index *x, struct gw_location *l)
{
	if (l->lru_prev != GW_SLOT_NONE)
		at(l->lru_prev)->lru_next = l->lru_next;
	else
		x->hot = l->lru_next;
	if (l->lru_next != GW_SLOT_NONE)
		at(l->lru_next)->lru_prev = l->lru_prev;
	else
		x->cold = l->lru_prev;
	l->flags &= (uint8_t)~GW_LOCATION_LISTED;
	l->held = 0; /* where lru_prev was */
	l->lru_next = GW_SLOT_NONE;
}

static void list_push_hot(struct gw_location_index *x, struct gw_location *l)
{
	uint32_t slot = gw_location__slot(l);

	l->lru_prev = GW_SLOT_NONE;
	l->lru_next = x->hot;
	if (x->hot != GW_SLOT_NONE)
		at(x->hot)->lru_prev = slot;
	else
		x->cold = slot;
	x->hot = slot;
	l->flags |= GW_LOCATION_LISTED;
}

/* ---- what locations hold ---- */

/* What shared lines are charged: their bytes and their overhead. */
static uint64_t lines_charge(const struct gw_lines *lines)
{
	return gw_lines__bytes(lines) + GW_OBJ_OVERHEAD;
}

/* Locations store's lock held: indexed l holds its shared lines; the first such location charges them. */
static bool charge_lines_locked(struct gw_stores *s, struct gw_location *l, struct gw_lines *lines)
{
	if ((l->flags & GW_OBJ_LINES_CHARGED) || !(l->flags & GW_LOCATION_INDEXED))
		return false;
	l->flags |= GW_OBJ_LINES_CHARGED;
	if (lines->store_holders++ != 0)
		return false;
	atomic_fetch_add_explicit(&s->lines_bytes, lines_charge(lines), memory_order_relaxed);
	return true;
}

/* Locations store's lock held: l leaves the store; the last stored holder of its lines uncharges them. */
static void uncharge_lines_locked(struct gw_stores *s, struct gw_location *l)
{
	struct gw_lines *lines;

	if (!(l->flags & GW_OBJ_LINES_CHARGED))
		return;
	l->flags &= (uint8_t)~GW_OBJ_LINES_CHARGED;
	lines = (struct gw_lines *)gw_location__lines(l);
	if (--lines->store_holders == 0)
		atomic_fetch_sub_explicit(&s->lines_bytes, lines_charge(lines), memory_order_relaxed);
}

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
 * copies of every location under it, uncounted. True when holding charged
 * the stacks store's bound (the caller shrinks it once the locks allow).
 */
static bool hold_owner_locked(struct gw_stores *s, struct gw_location *l, bool hold, struct gw_evicted *ev)
{
	struct gw_store *os;
	struct gw_obj *o = location_owner(s, l, &os);
	bool charged = false;

	if (!o)
		return false;
	pthread_mutex_lock(&os->lock);
	if (hold) {
		charged = gw_store_hold_locked(os, o);
	} else {
		gw_store_release_locked(os, o);
		gw_store_shrink_locked(s, os, NULL, GW_STORE_SECOND_CHANCES, ev);
	}
	pthread_mutex_unlock(&os->lock);
	return charged;
}

/* Locations store's lock held: takes indexed l out of the store (the index's reference goes on ev). */
static void unindex_locked(struct gw_stores *s, struct gw_store *ls, struct gw_location *l, struct gw_evicted *ev)
{
	uint64_t charge = gw_location__charge(l);

	index_remove(&ls->loc, l);
	if (l->flags & GW_LOCATION_LISTED) {
		list_unlink(&ls->loc, l);
		ls->stats.bytes -= charge;
	} else { /* held (the stores are going): its holders still count in held */
		atomic_fetch_sub_explicit(&ls->held_bytes, charge, memory_order_relaxed);
	}
	l->flags &= (uint8_t)~GW_LOCATION_INDEXED;
	ls->stats.entries--;
	uncharge_lines_locked(s, l);
	hold_owner_locked(s, l, false, ev);
	l->lru_next = ev->locations;
	ev->locations = gw_location__slot(l);
}

/* Locations store's lock held: a stored stack starts holding l (out of the list, charged to the stacks store). */
static void hold_locked(struct gw_store *ls, struct gw_location *l)
{
	if (l->flags & GW_LOCATION_LISTED) {
		uint64_t charge = gw_location__charge(l);

		list_unlink(&ls->loc, l);
		ls->stats.bytes -= charge;
		atomic_fetch_add_explicit(&ls->held_bytes, charge, memory_order_relaxed);
	}
	l->held++;
}

/* Locations store's lock held: one stored stack lets l go; the last puts it back in the list (if indexed). */
static void release_locked(struct gw_store *ls, struct gw_location *l)
{
	uint64_t charge;

	if (--l->held != 0 || !(l->flags & GW_LOCATION_INDEXED))
		return;
	charge = gw_location__charge(l);
	list_push_hot(&ls->loc, l);
	ls->stats.bytes += charge;
	atomic_fetch_sub_explicit(&ls->held_bytes, charge, memory_order_relaxed);
}

void gw_store_hold_stack_locked(struct gw_stores *s, struct gw_stack *st, bool hold, struct gw_evicted *ev)
{
	struct gw_store *ls = &s->s[GW_STORE_LOCATIONS];

	if (!st->n_locations)
		return;
	pthread_mutex_lock(&ls->lock);
	for (uint32_t i = 0; i < st->n_locations; i++)
		(hold ? hold_locked : release_locked)(ls, gw_stack__location(st, i));
	if (!hold)
		gw_store_shrink_locations_locked(s, NULL, GW_STORE_SECOND_CHANCES, ev);
	pthread_mutex_unlock(&ls->lock);
}

/* As gw_store_shrink_locked() (model-store.c), over the list of slots. */
void gw_store_shrink_locations_locked(struct gw_stores *s, const struct gw_location *keep, unsigned chances,
				      struct gw_evicted *ev)
{
	struct gw_store *ls = &s->s[GW_STORE_LOCATIONS];
	unsigned spared = 0;

	while (gw_store_over_locked(s, ls) && ls->loc.cold != GW_SLOT_NONE) {
		struct gw_location *victim = at(ls->loc.cold);

		switch (gw_clock_step(&ls->stats, victim == keep, victim->lru_prev == GW_SLOT_NONE, &victim->flags,
				      atomic_load_explicit(&victim->refs, memory_order_relaxed) > 1, &spared,
				      chances)) {
		case GW_CLOCK_STOP:
			return;
		case GW_CLOCK_MOVE:
			list_unlink(&ls->loc, victim);
			list_push_hot(&ls->loc, victim);
			continue;
		case GW_CLOCK_EVICT:
			break;
		}
		unindex_locked(s, ls, victim, ev);
		ls->stats.evictions++;
	}
}

/* No store lock held: brings the stacks store back under its bound after a charge to it from elsewhere. */
static void shrink_stacks(struct gw_stores *s, struct gw_evicted *ev)
{
	struct gw_store *ss = &s->s[GW_STORE_STACKS];

	pthread_mutex_lock(&ss->lock);
	gw_store_shrink_locked(s, ss, NULL, GW_STORE_SECOND_CHANCES, ev);
	pthread_mutex_unlock(&ss->lock);
}

/* ---- lookups and inserts ---- */

/* Locations store's lock held: a new reference to the location equal to k, or NULL. */
static struct gw_location *find_locked(struct gw_store *ls, const struct key *k)
{
	struct gw_location *l = index_find(&ls->loc, k);

	if (!l) {
		ls->stats.misses++;
		return NULL;
	}
	if (!(l->flags & GW_OBJ_REFERENCED)) /* written once per trip to the cold end: the line stays clean */
		l->flags |= GW_OBJ_REFERENCED;
	atomic_fetch_add_explicit(&l->refs, 1, memory_order_relaxed);
	ls->stats.hits++;
	return l;
}

struct gw_location *gw_store_lookup_location(struct gw_stores *s, const struct key *k)
{
	struct gw_store *ls = &s->s[GW_STORE_LOCATIONS];
	struct gw_location *l;

	pthread_mutex_lock(&ls->lock);
	l = find_locked(ls, k);
	pthread_mutex_unlock(&ls->lock);
	return l;
}

struct gw_location *gw_store_insert_location(struct gw_stores *s, const struct key *k, struct gw_location *l)
{
	struct gw_store *ls = &s->s[GW_STORE_LOCATIONS];
	struct gw_evicted ev = GW_EVICTED_INIT;
	struct gw_location *existing;
	uint64_t charge = gw_location__charge(l);
	bool held_owner;

	pthread_mutex_lock(&ls->lock);
	existing = find_locked(ls, k);
	if (existing) {
		pthread_mutex_unlock(&ls->lock);
		gw_location__unref(l);
		return existing;
	}
	/* At most 3/4 full; a table that cannot double takes entries until one is left empty, then none. */
	if ((ls->stats.entries + 1) * 4 > ((uint64_t)ls->loc.mask + 1) * 3 && !index_grow(&ls->loc) &&
	    ls->stats.entries + 1 >= ls->loc.mask) {
		pthread_mutex_unlock(&ls->lock);
		return l; /* not indexed: a valid location the store does not share */
	}
	index_place(ls->loc.entries, ls->loc.mask, gw_location__slot(l), k->hash);
	list_push_hot(&ls->loc, l);
	l->flags |= GW_LOCATION_INDEXED;
	atomic_fetch_add_explicit(&l->refs, 1, memory_order_relaxed); /* the index's */
	ls->stats.entries++;
	ls->stats.bytes += charge;
	ls->stats.inserts++;
	held_owner = hold_owner_locked(s, l, true, &ev);
	gw_store_shrink_locations_locked(s, l, GW_STORE_SECOND_CHANCES, &ev);
	pthread_mutex_unlock(&ls->lock);
	if (held_owner) /* what it names now counts to the stacks store's bound (that lock comes first) */
		shrink_stacks(s, &ev);
	gw_store_drop_evicted(&ev);
	return l;
}

/* ---- lines ---- */

bool gw_stores__set_lines(struct gw_stores *s, struct gw_location *l, struct gw_lines *lines)
{
	struct gw_store *ls = &s->s[GW_STORE_LOCATIONS], *ss = &s->s[GW_STORE_STACKS];
	struct gw_evicted ev = GW_EVICTED_INIT;
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
			shrink_stacks(s, &ev);
			gw_store_drop_evicted(&ev);
		}
		return true;
	}
	extra = gw_lines__bytes(lines);
	/* Both locks (stacks, then locations): a held location's lines are the stacks store's to pay. */
	pthread_mutex_lock(&ss->lock);
	pthread_mutex_lock(&ls->lock);
	if ((l->flags & GW_LOCATION_INDEXED) && !(l->flags & GW_LOCATION_OWN_LINES)) {
		l->flags |= GW_LOCATION_OWN_LINES; /* its charge counts them from now on */
		if (l->flags & GW_LOCATION_LISTED) {
			ls->stats.bytes += extra;
			gw_store_shrink_locations_locked(s, l, GW_STORE_SECOND_CHANCES, &ev);
		} else {
			atomic_fetch_add_explicit(&ls->held_bytes, extra, memory_order_relaxed);
			held = true;
		}
	}
	pthread_mutex_unlock(&ls->lock);
	if (held)
		gw_store_shrink_locked(s, ss, NULL, GW_STORE_SECOND_CHANCES, &ev);
	pthread_mutex_unlock(&ss->lock);
	gw_store_drop_evicted(&ev);
	return true;
}
