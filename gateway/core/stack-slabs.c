/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Stacks live in slot pools of their own (slot-pool.c), one per size class
 * (8 bytes apart: a stack wastes 4 bytes on average), not in malloc's heap.
 * A replica at 2,000 nodes keeps about a million stacks of 100-300 bytes
 * for minutes, and replaces a few thousand a second; in the heap they were
 * strewn among the batches' short-lived arrays, so that the pages those
 * arrays freed could not go back to the kernel: the heap held 200-400 MiB
 * free, resident, beside what was in use (docs/history/2026-11-fleet-scale.md,
 * "One replica at 2,000 nodes").
 *
 * A class's pages whose slots are all free go back to the system at each
 * trim (gw_slot_pools_trim()), so a class shrinks when the mix of stack
 * depths shifts (stackrelay_gateway_stack_slab_bytes). Stacks larger than
 * the largest class (over 240 frames or so) come from malloc.
 */
#include <stdlib.h>
#include <string.h>

#include "model-private.h"
#include "slot-pool.h"

#define CLASS_STEP 8
#define N_CLASSES  (GW_STACK_SLAB_MAX / CLASS_STEP)

#define CLASS(i) GW_SLOT_POOL_INIT(((i) + 1) * CLASS_STEP, 0, 0, NULL)
#define CLASSES8(i)                                                                                                    \
	CLASS(i), CLASS((i) + 1), CLASS((i) + 2), CLASS((i) + 3), CLASS((i) + 4), CLASS((i) + 5), CLASS((i) + 6),      \
		CLASS((i) + 7)

#define CLASSES64(i)                                                                                                   \
	CLASSES8(i), CLASSES8((i) + 8), CLASSES8((i) + 16), CLASSES8((i) + 24), CLASSES8((i) + 32),                    \
		CLASSES8((i) + 40), CLASSES8((i) + 48), CLASSES8((i) + 56)

/* Class i holds stacks of up to (i + 1) * CLASS_STEP bytes. */
static struct gw_slot_pool classes[N_CLASSES] = { CLASSES64(0), CLASSES64(64) };
_Static_assert(N_CLASSES == 128, "classes[] initializes 128 classes");

static struct gw_slot_pool *class_for(size_t bytes)
{
	return &classes[(bytes + CLASS_STEP - 1) / CLASS_STEP - 1];
}

void *gw_stack_slab_alloc(size_t bytes)
{
	struct gw_slot_pool *c;
	void *p;

	if (bytes > GW_STACK_SLAB_MAX)
		return calloc(1, bytes);
	c = class_for(bytes);
	p = gw_slot_alloc(c, NULL);
	if (p)
		memset(p, 0, c->slot_size);
	return p; /* NULL: errno from gw_slot_alloc(), ENOMEM */
}

void gw_stack_slab_free(void *p, size_t bytes)
{
	if (bytes > GW_STACK_SLAB_MAX)
		free(p);
	else
		gw_slot_free(p);
}

void gw_stack_slabs__stats(struct gw_slot_pool_stats *ret)
{
	*ret = (struct gw_slot_pool_stats){ 0 };
	for (size_t i = 0; i < N_CLASSES; i++) {
		struct gw_slot_pool_stats c;

		gw_slot_pool__stats(&classes[i], &c);
		ret->live += c.live;
		ret->mapped += c.mapped;
		ret->resident += c.resident;
		ret->returned += c.returned;
	}
}
