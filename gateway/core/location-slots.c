/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Every gw_location lives in a slot of one process-wide table (model.h,
 * gw_location__at()). A stack names each of its frames by a 4-byte slot
 * instead of an 8-byte pointer, and a location carries no malloc header: a
 * replica at 2,000 nodes holds about a million stacks of 18 frames and a
 * million locations, and these two savings are about a third of what the
 * stores take (docs/history/2026-11-fleet-scale.md, "One replica at 2,000
 * nodes").
 *
 * The table is a slot pool (slot-pool.c) of 2^GW_LOCATION_CHUNK_SHIFT slots
 * a chunk: a slot number is the pool's handle, and gw_location_chunks[]
 * names each chunk's first slot. Chunks never move and are never unmapped:
 * a slot number stays valid for as long as anything holds the location, on
 * any thread, without a lock (the chunk's entry is written under the pool's
 * lock before any of its slots is handed out, and a slot number only
 * reaches another thread through a lock or an atomic that orders it). Free
 * slots are reused lowest first, and pages whose slots are all free go back
 * to the system at each trim (stackrelay_gateway_location_slots).
 */
#include <errno.h>
#include <string.h>

#include "model-private.h"
#include "slot-pool.h"

struct gw_location *gw_location_chunks[GW_LOCATION_MAX_CHUNKS];

static void on_chunk(uint32_t index, void *slots)
{
	gw_location_chunks[index] = slots;
}

/* 2^28 locations alive at once: the stores' bounds forbid it long before. */
static struct gw_slot_pool table =
	GW_SLOT_POOL_INIT(sizeof(struct gw_location), 1u << GW_LOCATION_CHUNK_SHIFT, GW_LOCATION_MAX_CHUNKS, on_chunk);
_Static_assert(sizeof(struct gw_location) % 8 == 0, "a location slot is a multiple of 8 bytes");
_Static_assert(((size_t)sizeof(struct gw_location) << GW_LOCATION_CHUNK_SHIFT) + 4096 <= GW_SLOT_CHUNK_BYTES,
	       "a chunk of the slot pool holds 2^GW_LOCATION_CHUNK_SHIFT locations beside its header");

struct gw_location *gw_location_slot_alloc(void)
{
	struct gw_location *l = gw_slot_alloc(&table, NULL);

	if (!l)
		return NULL; /* errno: ENOMEM */
	memset(l, 0, sizeof(*l));
	return l;
}

uint32_t gw_location__slot(const struct gw_location *l)
{
	return gw_slot_handle(l);
}

void gw_location_slot_free(struct gw_location *l)
{
	gw_slot_free(l);
}

void gw_location_slots__stats(uint64_t *live, uint64_t *capacity)
{
	struct gw_slot_pool_stats st;

	gw_slot_pool__stats(&table, &st);
	*live = st.live / sizeof(struct gw_location);
	*capacity = st.mapped / GW_SLOT_CHUNK_BYTES << GW_LOCATION_CHUNK_SHIFT;
}

void gw_location_slots__bytes(struct gw_slot_pool_stats *ret)
{
	gw_slot_pool__stats(&table, ret);
}
