/* SPDX-License-Identifier: Apache-2.0 */
/* The de-duplication window of the agent receiver (agent-dedupe.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "agent-dedupe.h"
#include "model.h"

/* One agent instance's remembered responses, oldest first (a sender resends only its latest requests). */
struct dinst {
	uint64_t h;
	uint8_t id[GW_ID_MAX];
	uint8_t id_len;
	uint32_t n;
	struct dentry *first, *last;
	struct dinst *hnext;
};

struct dentry {
	uint64_t h;
	uint8_t id[GW_ID_MAX];
	uint8_t id_len;
	uint64_t seq;
	uint8_t *resp;
	size_t len;
	struct dentry *prev, *next, *hnext; /* LRU (next = older) and bucket chain */
	struct dinst *inst;
	struct dentry *inext, *iprev; /* the instance's entries, in the order remembered */
};

struct gw_dedupe {
	uint32_t max_entries, max_per_instance;
	uint64_t max_bytes, bytes;
	uint64_t n, n_inst;
	uint64_t evictions; /* responses forgotten for a bound (the agent's or the window's) */
	struct dentry **buckets;
	struct dinst **ibuckets;
	size_t n_buckets;
	struct dentry *head, *tail;
};

/* Charged to the byte bound once per instance with remembered responses. */
#define DINST_BYTES sizeof(struct dinst)

struct gw_dedupe *gw_dedupe_new(uint32_t max_entries, uint32_t max_per_instance, uint64_t max_bytes)
{
	struct gw_dedupe *d = calloc(1, sizeof(*d));
	if (!d)
		return NULL;
	d->max_entries = max_entries;
	d->max_per_instance = max_per_instance ? max_per_instance : 1;
	d->max_bytes = max_bytes;
	d->n_buckets = 1;
	while (d->n_buckets < max_entries)
		d->n_buckets *= 2;
	d->buckets = calloc(d->n_buckets, sizeof(*d->buckets));
	d->ibuckets = calloc(d->n_buckets, sizeof(*d->ibuckets));
	if (!d->buckets || !d->ibuckets) {
		free(d->buckets);
		free(d->ibuckets);
		free(d);
		return NULL;
	}
	return d;
}

static struct dinst *inst_find(struct gw_dedupe *d, const uint8_t *id, size_t len, uint64_t h)
{
	for (struct dinst *i = d->ibuckets[h & (d->n_buckets - 1)]; i; i = i->hnext)
		if (i->h == h && i->id_len == len && memcmp(i->id, id, len) == 0)
			return i;
	return NULL;
}

static void inst_unlink(struct gw_dedupe *d, struct dentry *e)
{
	struct dinst *i = e->inst;

	if (e->iprev)
		e->iprev->inext = e->inext;
	else
		i->first = e->inext;
	if (e->inext)
		e->inext->iprev = e->iprev;
	else
		i->last = e->iprev;
	if (--i->n == 0) {
		struct dinst **pp = &d->ibuckets[i->h & (d->n_buckets - 1)];
		while (*pp != i)
			pp = &(*pp)->hnext;
		*pp = i->hnext;
		d->n_inst--;
		d->bytes -= DINST_BYTES;
		free(i);
	}
}

static void dedupe_remove(struct gw_dedupe *d, struct dentry *e)
{
	struct dentry **pp = &d->buckets[e->h & (d->n_buckets - 1)];
	while (*pp != e)
		pp = &(*pp)->hnext;
	*pp = e->hnext;
	inst_unlink(d, e);
	if (e->prev)
		e->prev->next = e->next;
	else
		d->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		d->tail = e->prev;
	d->bytes -= sizeof(*e) + e->len;
	d->n--;
	free(e->resp);
	free(e);
}

void gw_dedupe_free(struct gw_dedupe *d)
{
	if (!d)
		return;
	while (d->head)
		dedupe_remove(d, d->head);
	free(d->buckets);
	free(d->ibuckets);
	free(d);
}

static uint64_t dkey(const uint8_t *id, size_t len, uint64_t seq)
{
	return XXH3_64bits_withSeed(id, len, seq);
}

static struct dentry *dedupe_find(struct gw_dedupe *d, const uint8_t *id, size_t len, uint64_t seq, uint64_t h)
{
	for (struct dentry *e = d->buckets[h & (d->n_buckets - 1)]; e; e = e->hnext)
		if (e->h == h && e->seq == seq && e->id_len == len && memcmp(e->id, id, len) == 0)
			return e;
	return NULL;
}

int gw_dedupe__lookup(struct gw_dedupe *d, const uint8_t *instance_id, size_t id_len, uint64_t sequence, uint8_t **ret,
		      size_t *ret_len)
{
	struct dentry *e;
	if (!d || d->max_entries == 0 || id_len == 0 || id_len > GW_ID_MAX)
		return -ENOENT;
	e = dedupe_find(d, instance_id, id_len, sequence, dkey(instance_id, id_len, sequence));
	if (!e)
		return -ENOENT;
	*ret = malloc(e->len ? e->len : 1);
	if (!*ret)
		return -ENOMEM;
	memcpy(*ret, e->resp, e->len);
	*ret_len = e->len;
	return 0;
}

int gw_dedupe__insert(struct gw_dedupe *d, const uint8_t *instance_id, size_t id_len, uint64_t sequence,
		      const uint8_t *response, size_t len)
{
	uint64_t h, ih;
	struct dentry *e;
	struct dinst *inst;

	if (!d || d->max_entries == 0 || id_len == 0 || id_len > GW_ID_MAX)
		return 0;
	if (sizeof(*e) + DINST_BYTES + len > d->max_bytes)
		return -EFBIG;
	h = dkey(instance_id, id_len, sequence);
	e = dedupe_find(d, instance_id, id_len, sequence, h);
	if (e)
		dedupe_remove(d, e);
	e = calloc(1, sizeof(*e));
	if (e)
		e->resp = malloc(len ? len : 1);
	if (!e || !e->resp) {
		free(e);
		return -ENOMEM;
	}
	ih = XXH3_64bits(instance_id, id_len);
	inst = inst_find(d, instance_id, id_len, ih);
	if (inst && inst->n >= d->max_per_instance) {
		/* Its oldest: the agent has had that answer, or has moved past it (it resends only its latest). */
		dedupe_remove(d, inst->first);
		d->evictions++;
		inst = inst_find(d, instance_id, id_len, ih); /* gone with its last entry when max_per_instance is 1 */
	}
	if (!inst) {
		inst = calloc(1, sizeof(*inst));
		if (!inst) {
			free(e->resp);
			free(e);
			return -ENOMEM;
		}
		inst->h = ih;
		memcpy(inst->id, instance_id, id_len);
		inst->id_len = (uint8_t)id_len;
		inst->hnext = d->ibuckets[ih & (d->n_buckets - 1)];
		d->ibuckets[ih & (d->n_buckets - 1)] = inst;
		d->n_inst++;
		d->bytes += DINST_BYTES;
	}
	e->inst = inst;
	e->iprev = inst->last;
	if (inst->last)
		inst->last->inext = e;
	else
		inst->first = e;
	inst->last = e;
	inst->n++;
	memcpy(e->resp, response, len);
	e->len = len;
	e->h = h;
	memcpy(e->id, instance_id, id_len);
	e->id_len = (uint8_t)id_len;
	e->seq = sequence;
	e->hnext = d->buckets[h & (d->n_buckets - 1)];
	d->buckets[h & (d->n_buckets - 1)] = e;
	e->next = d->head;
	if (d->head)
		d->head->prev = e;
	d->head = e;
	if (!d->tail)
		d->tail = e;
	d->n++;
	d->bytes += sizeof(*e) + len;
	while (d->tail && d->tail != e && (d->n > d->max_entries || d->bytes > d->max_bytes)) {
		dedupe_remove(d, d->tail);
		d->evictions++;
	}
	return 0;
}

uint64_t gw_dedupe__entries(struct gw_dedupe *d)
{
	return d ? d->n : 0;
}

uint64_t gw_dedupe__bytes(struct gw_dedupe *d)
{
	return d ? d->bytes : 0;
}

uint64_t gw_dedupe__instances(struct gw_dedupe *d)
{
	return d ? d->n_inst : 0;
}

uint64_t gw_dedupe__evictions(struct gw_dedupe *d)
{
	return d ? d->evictions : 0;
}
