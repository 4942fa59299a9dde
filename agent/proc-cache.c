// SPDX-License-Identifier: Apache-2.0
/*
 * A process's cached names, bounded and released with the process (proc-cache.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "proc-cache.h"

#define OWNER_KEY 12

/* A process's entries. */
struct owner {
	uint8_t key[OWNER_KEY];
	struct sr_list entries;
};

static const void *entry_key(const void *v, size_t *len)
{
	*len = AGENT_PCACHE_KEY;
	return ((const struct agent_pcache_entry *)v)->key;
}

static const void *owner_key(const void *v, size_t *len)
{
	*len = OWNER_KEY;
	return ((const struct owner *)v)->key;
}

void agent_pcache_init(struct agent_pcache *c, uint64_t max, void (*free_fn)(struct agent_pcache_entry *e))
{
	memset(c, 0, sizeof(*c));
	sr_htab_ptrs_init(&c->entries, entry_key);
	sr_htab_ptrs_init(&c->owners, owner_key);
	c->max = max ? max : 1;
	c->free_fn = free_fn;
}

void agent_pcache_done(struct agent_pcache *c)
{
	void *v;

	for (size_t i = 0; (v = sr_htab_ptrs__next(&c->entries, &i));)
		c->free_fn(v);
	for (size_t i = 0; (v = sr_htab_ptrs__next(&c->owners, &i));)
		free(v);
	sr_htab_ptrs_done(&c->entries);
	sr_htab_ptrs_done(&c->owners);
	memset(&c->lru, 0, sizeof(c->lru));
	c->n = 0;
	c->n_owners = 0;
	c->bytes = 0;
}

struct agent_pcache_entry *agent_pcache__get(struct agent_pcache *c, const uint8_t *key)
{
	struct agent_pcache_entry *e = sr_htab_ptrs__get(&c->entries, key, AGENT_PCACHE_KEY);

	if (e && c->lru.head != &e->lru) {
		sr_list__unlink(&c->lru, &e->lru);
		sr_list__push_front(&c->lru, &e->lru);
	}
	return e;
}

/* Takes e out of the cache's structures (not freed). */
static void unlink_entry(struct agent_pcache *c, struct agent_pcache_entry *e)
{
	struct owner *o = sr_htab_ptrs__get(&c->owners, e->key, OWNER_KEY);

	sr_htab_ptrs__remove(&c->entries, e->key, AGENT_PCACHE_KEY);
	sr_list__unlink(&c->lru, &e->lru);
	if (o) {
		sr_list__unlink(&o->entries, &e->owned);
		if (!o->entries.head) {
			sr_htab_ptrs__remove(&c->owners, o->key, OWNER_KEY);
			free(o);
			c->n_owners--;
		}
	}
	c->n--;
	c->bytes -= e->bytes;
}

void agent_pcache__drop(struct agent_pcache *c, struct agent_pcache_entry *e)
{
	unlink_entry(c, e);
	c->free_fn(e);
}

int agent_pcache__put(struct agent_pcache *c, struct agent_pcache_entry *e)
{
	struct owner *o = sr_htab_ptrs__get(&c->owners, e->key, OWNER_KEY);

	if (!o) {
		o = calloc(1, sizeof(*o));
		if (!o)
			return -ENOMEM;
		memcpy(o->key, e->key, OWNER_KEY);
		if (sr_htab_ptrs__put(&c->owners, o) < 0) {
			free(o);
			return -ENOMEM;
		}
		c->n_owners++;
	}
	if (sr_htab_ptrs__put(&c->entries, e) < 0) {
		if (!o->entries.head) {
			sr_htab_ptrs__remove(&c->owners, o->key, OWNER_KEY);
			free(o);
			c->n_owners--;
		}
		return -ENOMEM;
	}
	memset(&e->lru, 0, sizeof(e->lru));
	memset(&e->owned, 0, sizeof(e->owned));
	sr_list__push_front(&c->lru, &e->lru);
	sr_list__push_front(&o->entries, &e->owned);
	c->n++;
	c->bytes += e->bytes;
	while (c->n > c->max && c->lru.tail && c->lru.tail != &e->lru) {
		agent_pcache__drop(c, SR_LIST_ENTRY(c->lru.tail, struct agent_pcache_entry, lru));
		c->evicted++;
	}
	return 0;
}

void agent_pcache__forget(struct agent_pcache *c, const uint8_t *proc_key)
{
	struct owner *o = sr_htab_ptrs__get(&c->owners, proc_key, OWNER_KEY);

	/* Dropping the last entry frees the owner: stop before touching it again. */
	while (o && o->entries.head) {
		struct agent_pcache_entry *e = SR_LIST_ENTRY(o->entries.head, struct agent_pcache_entry, owned);
		int last = o->entries.head == o->entries.tail;

		agent_pcache__drop(c, e);
		if (last)
			break;
	}
}

uint64_t agent_pcache__bytes(const struct agent_pcache *c)
{
	return c->bytes + c->n_owners * sizeof(struct owner) + c->entries.h.cap * c->entries.h.elem +
	       c->owners.h.cap * c->owners.h.elem;
}
