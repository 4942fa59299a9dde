/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Stacks live in slabs of their own, by size class (16 bytes apart), not in
 * malloc's heap. A replica at 2,000 nodes keeps about a million stacks of
 * 100-300 bytes for minutes, and replaces a few thousand a second; in the
 * heap they were strewn among the batches' short-lived arrays, so that the
 * pages those arrays freed could not go back to the kernel: the heap held
 * 200-400 MiB free, resident, beside what was in use
 * (docs/reliability.md, "One replica at 2,000 nodes").
 *
 * Slabs are mapped 256 KiB at a time and never unmapped; freed slots are
 * reused first, so a class holds as much as the most stacks of its size ever
 * alive at once, which the stacks store's bound and the batches in flight
 * bound (stackrelay_gateway_stack_slab_bytes). Stacks larger than the
 * largest class (over 250 frames or so) come from malloc.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "model-private.h"
#include "poison.h"

#define CLASS_STEP 16
#define N_CLASSES  (GW_STACK_SLAB_MAX / CLASS_STEP)
#define SLAB_BYTES (256 * 1024)

struct slab_class {
	pthread_mutex_t lock;
	void *free_list;	 /* freed slots, linked through their first 8 bytes */
	char *fresh, *fresh_end; /* the newest slab's slots never handed out */
	uint64_t mapped, live;	 /* bytes */
};

static struct slab_class classes[N_CLASSES] = { [0 ... N_CLASSES - 1] = { .lock = PTHREAD_MUTEX_INITIALIZER } };

/* The class of a stack of bytes (1..GW_STACK_SLAB_MAX), and its slots' size: class i's are (i + 1) * CLASS_STEP. */
static struct slab_class *class_for(size_t bytes, size_t *ret_size)
{
	size_t i = (bytes + CLASS_STEP - 1) / CLASS_STEP - 1;

	*ret_size = (i + 1) * CLASS_STEP;
	return &classes[i];
}

void *gw_stack_slab_alloc(size_t bytes)
{
	struct slab_class *c;
	size_t size;
	void *p;

	if (bytes > GW_STACK_SLAB_MAX)
		return calloc(1, bytes);
	c = class_for(bytes, &size);
	pthread_mutex_lock(&c->lock);
	if (c->free_list) {
		p = c->free_list;
		GW_UNPOISON(p, size);
		memcpy(&c->free_list, p, sizeof(void *));
	} else {
		if ((size_t)(c->fresh_end - c->fresh) < size) {
			char *slab = mmap(NULL, SLAB_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

			if (slab == MAP_FAILED) {
				pthread_mutex_unlock(&c->lock);
				return NULL; /* errno from mmap: ENOMEM */
			}
			c->fresh = slab;
			c->fresh_end = slab + SLAB_BYTES - SLAB_BYTES % size;
			c->mapped += SLAB_BYTES;
		}
		p = c->fresh;
		c->fresh += size;
	}
	c->live += size;
	pthread_mutex_unlock(&c->lock);
	memset(p, 0, size);
	return p;
}

void gw_stack_slab_free(void *p, size_t bytes)
{
	struct slab_class *c;
	size_t size;

	if (bytes > GW_STACK_SLAB_MAX) {
		free(p);
		return;
	}
	c = class_for(bytes, &size);
	pthread_mutex_lock(&c->lock);
	memcpy(p, &c->free_list, sizeof(void *));
	GW_POISON((char *)p + sizeof(void *), size - sizeof(void *));
	c->free_list = p;
	c->live -= size;
	pthread_mutex_unlock(&c->lock);
}

void gw_stack_slabs__stats(uint64_t *live, uint64_t *mapped)
{
	*live = *mapped = 0;
	for (size_t i = 0; i < N_CLASSES; i++) {
		pthread_mutex_lock(&classes[i].lock);
		*live += classes[i].live;
		*mapped += classes[i].mapped;
		pthread_mutex_unlock(&classes[i].lock);
	}
}
