// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "k8s-map.h"

struct entry {
	struct entry *next;
	void *value;
	uint64_t hash;
	char key[];
};

struct k8s_map {
	struct entry **buckets;
	size_t nbuckets; /* power of two */
	size_t size;
};

#define K8S_MAP_INITIAL_BUCKETS 64

struct k8s_map *k8s_map_new(void)
{
	struct k8s_map *m = calloc(1, sizeof(*m));

	if (!m)
		return NULL;
	m->buckets = calloc(K8S_MAP_INITIAL_BUCKETS, sizeof(*m->buckets));
	if (!m->buckets) {
		free(m);
		errno = ENOMEM;
		return NULL;
	}
	m->nbuckets = K8S_MAP_INITIAL_BUCKETS;
	return m;
}

void k8s_map_free(struct k8s_map *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->nbuckets; i++) {
		struct entry *e = m->buckets[i];
		while (e) {
			struct entry *n = e->next;
			free(e);
			e = n;
		}
	}
	free(m->buckets);
	free(m);
}

size_t k8s_map__size(const struct k8s_map *m)
{
	return m->size;
}

static uint64_t hash_key(const char *key)
{
	return XXH3_64bits(key, strlen(key));
}

static struct entry **find_slot(const struct k8s_map *m, const char *key, uint64_t h)
{
	struct entry **p = &m->buckets[h & (m->nbuckets - 1)];

	for (; *p; p = &(*p)->next)
		if ((*p)->hash == h && strcmp((*p)->key, key) == 0)
			return p;
	return p;
}

void *k8s_map__get(const struct k8s_map *m, const char *key)
{
	struct entry **p = find_slot(m, key, hash_key(key));

	return *p ? (*p)->value : NULL;
}

static void grow(struct k8s_map *m)
{
	size_t n = m->nbuckets * 2;
	struct entry **b = calloc(n, sizeof(*b));

	/* Failing to grow only makes chains longer; the map stays correct. */
	if (!b)
		return;
	for (size_t i = 0; i < m->nbuckets; i++) {
		struct entry *e = m->buckets[i];
		while (e) {
			struct entry *next = e->next;
			e->next = b[e->hash & (n - 1)];
			b[e->hash & (n - 1)] = e;
			e = next;
		}
	}
	free(m->buckets);
	m->buckets = b;
	m->nbuckets = n;
}

int k8s_map__put(struct k8s_map *m, const char *key, void *value, void **ret_old)
{
	uint64_t h = hash_key(key);
	struct entry **p = find_slot(m, key, h);
	size_t len;

	if (*p) {
		if (ret_old)
			*ret_old = (*p)->value;
		(*p)->value = value;
		return 0;
	}
	len = strlen(key);
	struct entry *e = malloc(sizeof(*e) + len + 1);
	if (!e)
		return -ENOMEM;
	memcpy(e->key, key, len + 1);
	e->hash = h;
	e->value = value;
	e->next = NULL;
	*p = e;
	m->size++;
	if (ret_old)
		*ret_old = NULL;
	if (m->size > m->nbuckets)
		grow(m);
	return 0;
}

void *k8s_map__remove(struct k8s_map *m, const char *key)
{
	struct entry **p = find_slot(m, key, hash_key(key));
	struct entry *e = *p;
	void *v;

	if (!e)
		return NULL;
	*p = e->next;
	v = e->value;
	free(e);
	m->size--;
	return v;
}

void k8s_map__iter_init(const struct k8s_map *m, struct k8s_map_iter *it)
{
	it->bucket = 0;
	it->next = m->nbuckets ? m->buckets[0] : NULL;
}

bool k8s_map__iter_next(const struct k8s_map *m, struct k8s_map_iter *it, const char **ret_key, void **ret_value)
{
	while (!it->next) {
		if (++it->bucket >= m->nbuckets)
			return false;
		it->next = m->buckets[it->bucket];
	}
	struct entry *e = it->next;
	it->next = e->next;
	*ret_key = e->key;
	*ret_value = e->value;
	return true;
}
