// SPDX-License-Identifier: Apache-2.0
/*
 * The sender's ID sets (sender-parts-private.h): which definitions a connection
 * has seen, which executables had their symbols uploaded, which IDs a
 * response reported missing.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "common/macro.h"
#include "sender-parts-private.h"

struct agent_idkey agent_idkey_of(enum agent_id_kind kind, const uint8_t *id, size_t len)
{
	XXH128_hash_t h = XXH3_128bits_withSeed(id, len, (XXH64_hash_t)kind);

	return (struct agent_idkey){ .hi = h.high64 | (1ULL << 63), .lo = h.low64 };
}

void agent_idset_clear(struct agent_idset *set)
{
	if (set->keys)
		memset(set->keys, 0, set->cap * sizeof(*set->keys));
	if (set->values)
		memset(set->values, 0, set->cap * sizeof(*set->values));
	set->used = set->live = 0;
}

void agent_idset_done(struct agent_idset *set)
{
	SR_FREE(set->keys);
	SR_FREE(set->values);
	set->cap = set->used = set->live = 0;
}

static struct agent_idkey *agent_idset_slot(const struct agent_idset *set, struct agent_idkey k, bool for_insert)
{
	size_t mask = set->cap - 1, i = (size_t)k.lo & mask;
	struct agent_idkey *tomb = NULL;

	for (;;) {
		struct agent_idkey *e = &set->keys[i];

		if (e->hi == 0 && e->lo == 0)
			return for_insert ? (tomb ? tomb : e) : NULL;
		if (e->hi == 0 && e->lo == 1) {
			if (!tomb)
				tomb = e;
		} else if (e->hi == k.hi && e->lo == k.lo) {
			return e;
		}
		i = (i + 1) & mask;
	}
}

bool agent_idset_has_key(const struct agent_idset *set, struct agent_idkey k)
{
	return set->cap && agent_idset_slot(set, k, false) != NULL;
}

bool agent_idset_has(const struct agent_idset *set, enum agent_id_kind kind, const uint8_t *id, size_t len)
{
	return agent_idset_has_key(set, agent_idkey_of(kind, id, len));
}

static int agent_idset_rehash(struct agent_idset *set, size_t cap)
{
	struct agent_idkey *old = set->keys;
	uint64_t *old_values = set->values;
	size_t old_cap = set->cap;

	set->keys = calloc(cap, sizeof(*set->keys));
	set->values = set->with_values ? calloc(cap, sizeof(*set->values)) : NULL;
	if (!set->keys || (set->with_values && !set->values)) {
		free(set->keys);
		free(set->values);
		set->keys = old;
		set->values = old_values;
		return -ENOMEM;
	}
	set->cap = cap;
	set->used = set->live = 0;
	for (size_t i = 0; i < old_cap; i++) {
		if (!old[i].hi)
			continue;
		(void)agent_idset_add_key(set, old[i]);
		if (old_values)
			set->values[agent_idset_slot(set, old[i], false) - set->keys] = old_values[i];
	}
	free(old);
	free(old_values);
	return 0;
}

/* Returns 1 when added, 0 when present, -ENOMEM. A set at its maximum starts over (see idset.max). */
int agent_idset_add_key(struct agent_idset *set, struct agent_idkey k)
{
	struct agent_idkey *e;
	int r;

	if (set->cap && agent_idset_slot(set, k, false))
		return 0;
	if (set->max && set->live >= set->max)
		agent_idset_clear(set);
	if ((set->used + 1) * 10 >= set->cap * 7) {
		size_t cap = set->cap ? set->cap : 64;

		while ((set->live + 1) * 10 >= cap * 5)
			cap *= 2;
		r = agent_idset_rehash(set, cap);
		if (r < 0)
			return r;
	}
	e = agent_idset_slot(set, k, true);
	if (e->hi == 0 && e->lo == 0)
		set->used++;
	*e = k;
	if (set->values)
		set->values[e - set->keys] = 0;
	set->live++;
	return 1;
}

int agent_idset_add(struct agent_idset *set, enum agent_id_kind kind, const uint8_t *id, size_t len)
{
	return agent_idset_add_key(set, agent_idkey_of(kind, id, len));
}

void agent_idset_del(struct agent_idset *set, enum agent_id_kind kind, const uint8_t *id, size_t len)
{
	struct agent_idkey *e;

	if (!set->cap)
		return;
	e = agent_idset_slot(set, agent_idkey_of(kind, id, len), false);
	if (e) {
		*e = (struct agent_idkey){ .hi = 0, .lo = 1 };
		set->live--;
	}
}

uint64_t *agent_idset_value(const struct agent_idset *set, enum agent_id_kind kind, const uint8_t *id, size_t len)
{
	struct agent_idkey *e;

	if (!set->cap || !set->values)
		return NULL;
	e = agent_idset_slot(set, agent_idkey_of(kind, id, len), false);
	return e ? &set->values[e - set->keys] : NULL;
}
