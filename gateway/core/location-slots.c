/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Every gw_location lives in a slot of one process-wide table (model.h,
 * gw_location__at()). A stack names each of its frames by a 4-byte slot
 * instead of an 8-byte pointer, and a location carries no malloc header: a
 * replica at 2,000 nodes holds about a million stacks of 18 frames and a
 * million locations, and these two savings are about a third of what the
 * stores take (docs/reliability.md, "One replica at 2,000 nodes").
 *
 * Slots come in chunks that never move and are never freed: a slot number
 * stays valid for as long as anything holds the location, on any thread,
 * without a lock (the chunk pointer is written before the slot is handed out,
 * and a slot number only reaches another thread through a lock or an atomic
 * that orders it). Freed slots are reused first, so the table is as large as
 * the most locations ever alive at once, which the stores' bounds and the
 * batches in flight bound (stackrelay_gateway_location_slots).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "model-private.h"
#include "poison.h"

#define NO_SLOT UINT32_MAX

struct gw_location *gw_location_chunks[GW_LOCATION_MAX_CHUNKS];

static pthread_mutex_t slots_lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t n_chunks;	     /* chunks allocated */
static uint32_t next_fresh;	     /* slots below it have been handed out at least once */
static uint32_t free_head = NO_SLOT; /* freed slots, linked through their first 4 bytes */
static uint64_t n_live;

struct gw_location *gw_location_slot_alloc(void)
{
	struct gw_location *l = NULL;
	uint32_t slot;

	pthread_mutex_lock(&slots_lock);
	if (free_head != NO_SLOT) {
		slot = free_head;
		l = gw_location__at(slot);
		GW_UNPOISON(l, sizeof(*l));
		memcpy(&free_head, l, sizeof(free_head));
	} else {
		if ((next_fresh >> GW_LOCATION_CHUNK_SHIFT) == n_chunks) {
			struct gw_location *chunk;

			if (n_chunks == GW_LOCATION_MAX_CHUNKS) {
				pthread_mutex_unlock(&slots_lock);
				errno = ENOMEM; /* 2^28 locations alive at once: the stores' bounds forbid it long before */
				return NULL;
			}
			chunk = malloc(sizeof(*chunk) << GW_LOCATION_CHUNK_SHIFT);
			if (!chunk) {
				pthread_mutex_unlock(&slots_lock);
				return NULL;
			}
			gw_location_chunks[n_chunks++] = chunk;
		}
		slot = next_fresh++;
		l = gw_location__at(slot);
	}
	n_live++;
	pthread_mutex_unlock(&slots_lock);
	memset(l, 0, sizeof(*l));
	l->slot = slot;
	return l;
}

void gw_location_slot_free(struct gw_location *l)
{
	uint32_t slot = l->slot;

	pthread_mutex_lock(&slots_lock);
	memcpy(l, &free_head, sizeof(free_head));
	/* Poisoned but its first 4 bytes (the free list's link): using a freed location is reported. */
	GW_POISON((char *)l + sizeof(free_head), sizeof(*l) - sizeof(free_head));
	free_head = slot;
	n_live--;
	pthread_mutex_unlock(&slots_lock);
}

void gw_location_slots__stats(uint64_t *live, uint64_t *capacity)
{
	pthread_mutex_lock(&slots_lock);
	*live = n_live;
	*capacity = (uint64_t)n_chunks << GW_LOCATION_CHUNK_SHIFT;
	pthread_mutex_unlock(&slots_lock);
}
