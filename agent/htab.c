// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "htab.h"

#define HASH_EMPTY   0
#define HASH_DELETED 1

void agent_htab_init(struct agent_htab *h, agent_htab_key_fn key_of)
{
	memset(h, 0, sizeof(*h));
	h->key_of = key_of;
}

void agent_htab_done(struct agent_htab *h)
{
	free(h->slots);
	h->slots = NULL;
	h->cap = h->n = h->used = 0;
}

uint64_t agent_htab_hash(const void *key, size_t len)
{
	uint64_t x = XXH3_64bits(key, len);

	return x < 2 ? x + 2 : x;
}

static struct agent_htab_slot *find(const struct agent_htab *h, const void *key, size_t len, uint64_t hash)
{
	if (!h->cap)
		return NULL;
	for (size_t i = hash & (h->cap - 1), probes = 0; probes < h->cap; i = (i + 1) & (h->cap - 1), probes++) {
		struct agent_htab_slot *s = &h->slots[i];
		size_t klen;
		const void *k;

		if (s->hash == HASH_EMPTY)
			return NULL;
		if (s->hash != hash)
			continue;
		k = h->key_of(s->value, &klen);
		if (klen == len && memcmp(k, key, len) == 0)
			return s;
	}
	return NULL;
}

void *agent_htab__get(const struct agent_htab *h, const void *key, size_t len)
{
	struct agent_htab_slot *s = find(h, key, len, agent_htab_hash(key, len));

	return s ? s->value : NULL;
}

static void insert_slot(struct agent_htab_slot *slots, size_t cap, uint64_t hash, void *value)
{
	size_t i = hash & (cap - 1);

	while (slots[i].hash >= 2)
		i = (i + 1) & (cap - 1);
	slots[i].hash = hash;
	slots[i].value = value;
}

static int grow(struct agent_htab *h)
{
	size_t ncap = h->cap ? h->cap : 16;
	struct agent_htab_slot *ns;

	/* Double when live entries fill half; rebuild in place when tombstones do. */
	while ((h->n + 1) * 2 > ncap)
		ncap *= 2;
	ns = calloc(ncap, sizeof(*ns));
	if (!ns)
		return -ENOMEM;
	for (size_t i = 0; i < h->cap; i++)
		if (h->slots[i].hash >= 2)
			insert_slot(ns, ncap, h->slots[i].hash, h->slots[i].value);
	free(h->slots);
	h->slots = ns;
	h->cap = ncap;
	h->used = h->n;
	return 0;
}

int agent_htab__put(struct agent_htab *h, void *value)
{
	size_t len;
	const void *key = h->key_of(value, &len);
	uint64_t hash = agent_htab_hash(key, len);
	int r;

	if ((h->used + 1) * 4 > h->cap * 3) {
		r = grow(h);
		if (r < 0)
			return r;
	}
	size_t i = hash & (h->cap - 1);
	while (h->slots[i].hash >= 2)
		i = (i + 1) & (h->cap - 1);
	if (h->slots[i].hash == HASH_EMPTY)
		h->used++;
	h->slots[i].hash = hash;
	h->slots[i].value = value;
	h->n++;
	return 0;
}

void *agent_htab__remove(struct agent_htab *h, const void *key, size_t len)
{
	struct agent_htab_slot *s = find(h, key, len, agent_htab_hash(key, len));
	void *v;

	if (!s)
		return NULL;
	v = s->value;
	s->hash = HASH_DELETED;
	s->value = NULL;
	h->n--;
	return v;
}

void *agent_htab__next(const struct agent_htab *h, size_t *iter)
{
	while (*iter < h->cap) {
		struct agent_htab_slot *s = &h->slots[(*iter)++];
		if (s->hash >= 2)
			return s->value;
	}
	return NULL;
}
