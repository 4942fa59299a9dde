// SPDX-License-Identifier: Apache-2.0
/*
 * The sender's ID sets (sender-parts-private.h): which definitions a connection
 * has seen, which executables had their symbols uploaded, which IDs a
 * response reported missing.
 */
#include <errno.h>
#include <string.h>

#include <xxhash.h>

#include "common/macro.h"
#include "sender-parts-private.h"

struct agent_idkey agent_idkey_of(enum agent_id_kind kind, const uint8_t *id, size_t len)
{
	XXH128_hash_t h = XXH3_128bits_withSeed(id, len, (XXH64_hash_t)kind);

	return (struct agent_idkey){ .hi = h.high64 | (1ULL << 63), .lo = h.low64 };
}

/* A slot of a set with values; one without holds the key alone. */
struct idslot {
	struct agent_idkey k;
	uint64_t value;
};

static bool idkey_eq(const void *slot, const void *key)
{
	const struct agent_idkey *a = slot, *b = key;

	return a->hi == b->hi && a->lo == b->lo;
}

void agent_idset_clear(struct agent_idset *set)
{
	sr_htab__clear(&set->t);
}

void agent_idset_done(struct agent_idset *set)
{
	sr_htab_done(&set->t);
}

static struct agent_idkey *agent_idset_find(const struct agent_idset *set, struct agent_idkey k)
{
	return sr_htab__get(&set->t, k.hi, &k);
}

bool agent_idset_has_key(const struct agent_idset *set, struct agent_idkey k)
{
	return agent_idset_find(set, k) != NULL;
}

bool agent_idset_has(const struct agent_idset *set, enum agent_id_kind kind, const uint8_t *id, size_t len)
{
	return agent_idset_has_key(set, agent_idkey_of(kind, id, len));
}

/* Returns 1 when added, 0 when present, -ENOMEM. A set at its maximum starts over (see idset.max). */
int agent_idset_add_key(struct agent_idset *set, struct agent_idkey k)
{
	struct agent_idkey *e;
	int r;

	if (!set->t.elem) /* a zeroed set: its table is set up at the first add */
		sr_htab_init(&set->t, set->with_values ? sizeof(struct idslot) : sizeof(struct agent_idkey), idkey_eq);
	if (agent_idset_find(set, k))
		return 0;
	if (set->max && set->t.n >= set->max)
		agent_idset_clear(set);
	r = sr_htab__add(&set->t, k.hi, (void **)&e);
	if (r < 0)
		return r;
	*e = k; /* the value, if any, is 0 */
	return 1;
}

int agent_idset_add(struct agent_idset *set, enum agent_id_kind kind, const uint8_t *id, size_t len)
{
	return agent_idset_add_key(set, agent_idkey_of(kind, id, len));
}

void agent_idset_del(struct agent_idset *set, enum agent_id_kind kind, const uint8_t *id, size_t len)
{
	struct agent_idkey *e = agent_idset_find(set, agent_idkey_of(kind, id, len));

	if (e)
		sr_htab__del(&set->t, e);
}

const struct agent_idkey *agent_idset_next(const struct agent_idset *set, size_t *iter)
{
	return sr_htab__next(&set->t, iter);
}

uint64_t *agent_idset_value(const struct agent_idset *set, enum agent_id_kind kind, const uint8_t *id, size_t len)
{
	struct idslot *e;

	if (!set->with_values)
		return NULL;
	e = (struct idslot *)agent_idset_find(set, agent_idkey_of(kind, id, len));
	return e ? &e->value : NULL;
}
