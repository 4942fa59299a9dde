/* SPDX-License-Identifier: Apache-2.0 */
/* The tree's hash table (htab.h): linear probing, stored hashes, tombstones. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "common/grow.h"
#include "common/htab.h"

#define HTAB_FIRST_CAP 16

static inline uint64_t stored_hash(uint64_t hash)
{
	return hash < 2 ? hash + 2 : hash;
}

static inline uint64_t *slot_at(const struct sr_htab *h, size_t i)
{
	return (uint64_t *)(void *)(h->slots + i * h->elem);
}

void sr_htab_init(struct sr_htab *h, size_t elem, sr_htab_eq_fn eq)
{
	*h = (struct sr_htab){ .elem = elem, .eq = eq };
}

void sr_htab_done(struct sr_htab *h)
{
	free(h->slots);
	h->slots = NULL;
	h->cap = h->n = h->used = 0;
}

void sr_htab__clear(struct sr_htab *h)
{
	if (h->slots)
		memset(h->slots, 0, h->cap * h->elem);
	h->n = h->used = 0;
}

uint64_t sr_htab_hash(const void *p, size_t len)
{
	return XXH3_64bits(p, len);
}

void *sr_htab__get(const struct sr_htab *h, uint64_t hash, const void *key)
{
	return sr_htab__find(h, hash, key, h->eq);
}

/* The first free (empty or deleted) slot of hash's probe sequence in slots of cap. */
static uint64_t *free_slot(unsigned char *slots, size_t cap, size_t elem, uint64_t hash)
{
	size_t mask = cap - 1, i = hash & mask;

	while (*(uint64_t *)(void *)(slots + i * elem) >= 2)
		i = (i + 1) & mask;
	return (uint64_t *)(void *)(slots + i * elem);
}

/* Makes room for one more entry: doubles when live entries fill half, rebuilds in place when tombstones fill the rest. */
static int reserve_one(struct sr_htab *h)
{
	size_t ncap = h->cap ? h->cap : HTAB_FIRST_CAP, zcap = 0;
	unsigned char *ns = NULL;
	int r;

	if ((h->used + 1) * 4 <= h->cap * 3)
		return 0;
	while ((h->n + 1) * 2 > ncap) {
		if (ncap > SIZE_MAX / 2)
			return -EOVERFLOW;
		ncap *= 2;
	}
	/* Exactly ncap zeroed slots, the size arithmetic checked. */
	r = sr_grow_zero((void **)&ns, &zcap, ncap, h->elem, ncap);
	if (r < 0)
		return r;
	for (size_t i = 0; i < h->cap; i++) {
		uint64_t *s = slot_at(h, i);

		if (*s >= 2)
			memcpy(free_slot(ns, ncap, h->elem, *s), s, h->elem);
	}
	free(h->slots);
	h->slots = ns;
	h->cap = ncap;
	h->used = h->n;
	return 0;
}

/* A free slot is zero past its hash: calloc()ed or cleared, or zeroed by __del(). */
static void *take(struct sr_htab *h, uint64_t *s, uint64_t hash)
{
	if (*s == SR_HTAB_EMPTY)
		h->used++;
	*s = hash;
	h->n++;
	return s;
}

int sr_htab__add(struct sr_htab *h, uint64_t hash, void **ret_slot)
{
	int r = reserve_one(h);

	if (r < 0)
		return r;
	hash = stored_hash(hash);
	*ret_slot = take(h, free_slot(h->slots, h->cap, h->elem, hash), hash);
	return 0;
}

int sr_htab__put(struct sr_htab *h, uint64_t hash, const void *key, void **ret_slot)
{
	uint64_t *s = sr_htab__get(h, hash, key);
	int r;

	if (s) {
		*ret_slot = s;
		return 0;
	}
	r = sr_htab__add(h, hash, ret_slot);
	return r < 0 ? r : 1;
}

void sr_htab__del(struct sr_htab *h, void *slot)
{
	memset(slot, 0, h->elem);
	*(uint64_t *)slot = SR_HTAB_DELETED;
	h->n--;
}

void *sr_htab__next(const struct sr_htab *h, size_t *iter)
{
	while (*iter < h->cap) {
		uint64_t *s = slot_at(h, (*iter)++);

		if (*s >= 2)
			return s;
	}
	return NULL;
}

/* ---- pointers to values keyed by bytes inside them ---- */

struct ptrs_key {
	sr_htab_key_fn key_of;
	const void *p;
	size_t len;
};

static bool ptrs_eq(const void *slot, const void *key)
{
	const struct ptrs_key *k = key;
	size_t len;
	const void *p = k->key_of(((const struct sr_htab_ptr *)slot)->value, &len);

	return len == k->len && memcmp(p, k->p, len) == 0;
}

void sr_htab_ptrs_init(struct sr_htab_ptrs *p, sr_htab_key_fn key_of)
{
	sr_htab_init(&p->h, sizeof(struct sr_htab_ptr), ptrs_eq);
	p->key_of = key_of;
}

void sr_htab_ptrs_done(struct sr_htab_ptrs *p)
{
	sr_htab_done(&p->h);
}

static struct sr_htab_ptr *ptrs_find(const struct sr_htab_ptrs *p, const void *key, size_t len)
{
	struct ptrs_key k = { p->key_of, key, len };

	return sr_htab__get(&p->h, sr_htab_hash(key, len), &k);
}

void *sr_htab_ptrs__get(const struct sr_htab_ptrs *p, const void *key, size_t len)
{
	struct sr_htab_ptr *s = ptrs_find(p, key, len);

	return s ? s->value : NULL;
}

int sr_htab_ptrs__put(struct sr_htab_ptrs *p, void *value)
{
	size_t len;
	const void *key = p->key_of(value, &len);
	struct sr_htab_ptr *s;
	int r = sr_htab__add(&p->h, sr_htab_hash(key, len), (void **)&s);

	if (r < 0)
		return r;
	s->value = value;
	return 0;
}

void *sr_htab_ptrs__remove(struct sr_htab_ptrs *p, const void *key, size_t len)
{
	struct sr_htab_ptr *s = ptrs_find(p, key, len);
	void *v;

	if (!s)
		return NULL;
	v = s->value;
	sr_htab__del(&p->h, s);
	return v;
}

void *sr_htab_ptrs__next(const struct sr_htab_ptrs *p, size_t *iter)
{
	struct sr_htab_ptr *s = sr_htab__next(&p->h, iter);

	return s ? s->value : NULL;
}
