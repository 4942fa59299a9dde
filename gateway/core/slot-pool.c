/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Pools of fixed-size slots (slot-pool.h).
 *
 * Why not a free list: the pools before this one linked free slots through
 * the slots themselves, so a page of free slots could not be given back
 * without losing the list, and a pool stayed at the most it ever held. In a
 * 10-minute soak at 2,000 nodes the stack slabs kept 21 MiB mapped and not
 * live as the mix of stack depths shifted (docs/history/2026-11-fleet-scale.md).
 * Here the
 * free slots are bits in the chunk's header, each page counts the live
 * slots that overlap it, and a trim gives back every resident page whose
 * count is zero with madvise(MADV_DONTNEED): a private anonymous page reads
 * as zeros when touched again.
 *
 * First fit by address (the lowest free slot of the lowest chunk with
 * room) keeps live slots packed at the low end, so that the pages a pool no
 * longer needs are the ones that empty out. Each chunk's first page holds
 * its header and is never given back.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/grow.h"
#include "poison.h"
#include "slot-pool.h"

#define CHUNK_PAGES_MAX (GW_SLOT_CHUNK_BYTES / 4096)

struct gw_slot_chunk {
	struct gw_slot_pool *pool;
	uint32_t index;					/* in pool->chunks */
	uint32_t n_live;				/* allocated slots */
	uint32_t hint;					/* words of used[] below it are full */
	uint32_t n_pages;				/* pages that slots reach, from the first */
	uint64_t resident[(CHUNK_PAGES_MAX + 63) / 64]; /* a page touched since the chunk was mapped or last trimmed */
	uint16_t page_live[CHUNK_PAGES_MAX];		/* allocated slots that overlap each page */
	uint64_t used[];				/* a bit per slot: allocated */
};

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct gw_slot_pool *registry;

static size_t page_size(void)
{
	static size_t ps;

	if (!ps) {
		long v = sysconf(_SC_PAGESIZE);
		ps = v >= 4096 && v <= GW_SLOT_CHUNK_BYTES ? (size_t)v : 4096; /* same value in every thread */
	}
	return ps;
}

static size_t round_up(size_t n, size_t to)
{
	return (n + to - 1) / to * to;
}

/* Slots per chunk and where they start: the most that fit beside a header with their bitmap. */
static void pool_layout(struct gw_slot_pool *p)
{
	size_t n = (GW_SLOT_CHUNK_BYTES - sizeof(struct gw_slot_chunk)) / p->slot_size, off;

	if (p->max_per_chunk && n > p->max_per_chunk)
		n = p->max_per_chunk;
	for (;; n--) {
		off = round_up(sizeof(struct gw_slot_chunk) + (n + 63) / 64 * sizeof(uint64_t), 64);
		if (off + n * p->slot_size <= GW_SLOT_CHUNK_BYTES)
			break;
	}
	p->per_chunk = (uint32_t)n;
	p->slots_offset = (uint32_t)off;
}

/* A new chunk at the end of the pool's list (its lock held); NULL + errno. */
static struct gw_slot_chunk *chunk_new(struct gw_slot_pool *p)
{
	struct gw_slot_chunk *c;
	uintptr_t base, aligned;
	char *m;
	int r;

	if (!p->per_chunk) {
		pool_layout(p);
		pthread_mutex_lock(&registry_lock);
		p->next_pool = registry;
		registry = p;
		pthread_mutex_unlock(&registry_lock);
	}
	if (p->max_chunks && p->n_chunks == p->max_chunks) {
		errno = ENOMEM;
		return NULL;
	}
	r = sr_grow_u32((void **)&p->chunks, &p->cap_chunks, p->n_chunks + 1, sizeof(*p->chunks), 16);
	if (r < 0) {
		errno = -r;
		return NULL;
	}
	/* Twice the size, then the ends cut off: a chunk aligned to its size. */
	m = mmap(NULL, 2 * GW_SLOT_CHUNK_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return NULL;
	base = (uintptr_t)m;
	aligned = round_up(base, GW_SLOT_CHUNK_BYTES);
	if (aligned > base)
		munmap(m, aligned - base);
	munmap((char *)aligned + GW_SLOT_CHUNK_BYTES, base + GW_SLOT_CHUNK_BYTES - aligned);
	c = (struct gw_slot_chunk *)aligned;
	c->pool = p;
	c->index = p->n_chunks;
	c->n_pages =
		(uint32_t)((p->slots_offset + (size_t)p->per_chunk * p->slot_size + page_size() - 1) / page_size());
	c->resident[0] = 1; /* the header's page */
	p->resident += page_size();
	/* The slots are free, and poisoned until handed out (the bitmap's tail past per_chunk stays 0, never scanned). */
	GW_POISON((char *)c + p->slots_offset, (size_t)p->per_chunk * p->slot_size);
	GW_LEAK_ROOT(c, GW_SLOT_CHUNK_BYTES); /* locations point to their lines, in the heap */
	p->chunks[p->n_chunks++] = c;
	if (p->on_chunk)
		p->on_chunk(c->index, (char *)c + p->slots_offset);
	return c;
}

void *gw_slot_alloc(struct gw_slot_pool *p, uint32_t *ret_handle)
{
	struct gw_slot_chunk *c;
	size_t ps = page_size(), first, last, off;
	uint32_t w, slot = 0, n_words;
	char *s;

	pthread_mutex_lock(&p->lock);
	while (p->first_nonfull < p->n_chunks && p->chunks[p->first_nonfull]->n_live == p->per_chunk)
		p->first_nonfull++;
	if (p->first_nonfull < p->n_chunks) {
		c = p->chunks[p->first_nonfull];
	} else if (!(c = chunk_new(p))) {
		pthread_mutex_unlock(&p->lock);
		return NULL;
	}
	n_words = (p->per_chunk + 63) / 64;
	for (w = c->hint; w < n_words; w++) {
		uint64_t free_bits = ~c->used[w];

		if (w == n_words - 1 && p->per_chunk % 64)
			free_bits &= (UINT64_C(1) << (p->per_chunk % 64)) - 1;
		if (free_bits) {
			slot = w * 64 + (uint32_t)__builtin_ctzll(free_bits);
			break;
		}
	}
	if (w == n_words) /* n_live < per_chunk, and the words below the hint are full: cannot happen */
		abort();
	c->hint = w;
	c->used[w] |= UINT64_C(1) << (slot % 64);
	c->n_live++;
	p->live += p->slot_size;
	off = p->slots_offset + (size_t)slot * p->slot_size;
	first = off / ps;
	last = (off + p->slot_size - 1) / ps;
	for (size_t pg = first; pg <= last; pg++) {
		c->page_live[pg]++;
		if (!(c->resident[pg / 64] & (UINT64_C(1) << (pg % 64)))) {
			c->resident[pg / 64] |= UINT64_C(1) << (pg % 64);
			p->resident += ps;
		}
	}
	if (ret_handle)
		*ret_handle = c->index * p->per_chunk + slot;
	pthread_mutex_unlock(&p->lock);
	s = (char *)c + off;
	GW_UNPOISON(s, p->slot_size);
	return s;
}

void gw_slot_free(void *ptr)
{
	struct gw_slot_chunk *c = (struct gw_slot_chunk *)((uintptr_t)ptr & ~(uintptr_t)(GW_SLOT_CHUNK_BYTES - 1));
	struct gw_slot_pool *p = c->pool;
	size_t ps = page_size(), off = (size_t)((char *)ptr - (char *)c);
	uint32_t slot = (uint32_t)((off - p->slots_offset) / p->slot_size);

	GW_POISON(ptr, p->slot_size);
	pthread_mutex_lock(&p->lock);
	c->used[slot / 64] &= ~(UINT64_C(1) << (slot % 64));
	if (slot / 64 < c->hint)
		c->hint = slot / 64;
	c->n_live--;
	p->live -= p->slot_size;
	for (size_t pg = off / ps; pg <= (off + p->slot_size - 1) / ps; pg++)
		c->page_live[pg]--;
	if (c->index < p->first_nonfull)
		p->first_nonfull = c->index;
	pthread_mutex_unlock(&p->lock);
}

uint32_t gw_slot_handle(const void *ptr)
{
	const struct gw_slot_chunk *c =
		(const struct gw_slot_chunk *)((uintptr_t)ptr & ~(uintptr_t)(GW_SLOT_CHUNK_BYTES - 1));
	const struct gw_slot_pool *p = c->pool;

	return c->index * p->per_chunk +
	       (uint32_t)(((size_t)((const char *)ptr - (const char *)c) - p->slots_offset) / p->slot_size);
}

void gw_slot_pool__stats(struct gw_slot_pool *p, struct gw_slot_pool_stats *ret)
{
	pthread_mutex_lock(&p->lock);
	*ret = (struct gw_slot_pool_stats){
		.live = p->live,
		.mapped = (uint64_t)p->n_chunks * GW_SLOT_CHUNK_BYTES,
		.resident = p->resident,
		.returned = p->returned,
	};
	pthread_mutex_unlock(&p->lock);
}

/* Gives back the free resident pages of c (its pool's lock held), in runs; the bytes. */
static uint64_t chunk_trim(struct gw_slot_chunk *c, size_t ps)
{
	uint64_t bytes = 0;
	uint32_t run = 0; /* first page of the current run, 0: none (the header's page is never in one) */

	for (uint32_t pg = 1; pg <= c->n_pages; pg++) {
		bool take = pg < c->n_pages && c->page_live[pg] == 0 &&
			    (c->resident[pg / 64] & (UINT64_C(1) << (pg % 64)));

		if (take && !run)
			run = pg;
		if (take || !run)
			continue;
		/* Pages [run, pg) are free and resident: read as zeros from now on. Poisoned slots stay poisoned. */
		if (madvise((char *)c + (size_t)run * ps, (size_t)(pg - run) * ps, MADV_DONTNEED) == 0) {
			for (uint32_t q = run; q < pg; q++)
				c->resident[q / 64] &= ~(UINT64_C(1) << (q % 64));
			bytes += (uint64_t)(pg - run) * ps;
		}
		run = 0;
	}
	return bytes;
}

uint64_t gw_slot_pools_trim(void)
{
	size_t ps = page_size();
	uint64_t total = 0;
	struct gw_slot_pool *p;

	pthread_mutex_lock(&registry_lock);
	p = registry;
	pthread_mutex_unlock(&registry_lock);
	/* Pools are only ever added at the head: the list from p on is stable. */
	for (; p; p = p->next_pool) {
		uint64_t bytes = 0;

		pthread_mutex_lock(&p->lock);
		for (uint32_t i = 0; i < p->n_chunks; i++)
			bytes += chunk_trim(p->chunks[i], ps);
		p->resident -= bytes;
		p->returned += bytes;
		pthread_mutex_unlock(&p->lock);
		total += bytes;
	}
	return total;
}
