// SPDX-License-Identifier: Apache-2.0
/*
 * HotSpot's code heaps and their segment maps (jvm-codecache.h).
 */
#include <errno.h>
#include <string.h>

#include "jvm-codecache.h"

static int read_u64(const struct agent_jvm_reader *r, uint64_t addr, uint64_t *ret)
{
	if (addr + 8 < addr)
		return -EINVAL;
	return r->read(r->ctx, addr, ret, 8);
}

int agent_jvm_heaps_read(const struct agent_jvm_reader *r, const struct agent_jvm_layout *l, struct agent_jvm_heap *ret,
			 int max)
{
	uint64_t array, data, heaps[AGENT_JVM_MAX_HEAPS];
	int32_t len;
	int err;

	err = read_u64(r, l->codecache_heaps_addr, &array);
	if (err < 0)
		return err;
	if (!array)
		return -EAGAIN;
	err = r->read(r->ctx, array + l->growable_array_len, &len, 4);
	if (err == 0)
		err = read_u64(r, array + l->growable_array_data, &data);
	if (err < 0)
		return err;
	if (len < 0 || len > AGENT_JVM_MAX_HEAPS || (len && !data))
		return -EINVAL;
	if (len > max)
		len = max;
	if (len) {
		err = r->read(r->ctx, data, heaps, (size_t)len * 8);
		if (err < 0)
			return err;
	}
	for (int i = 0; i < len; i++) {
		struct agent_jvm_heap *h = &ret[i];
		uint64_t seg_high;
		int32_t log2;

		memset(h, 0, sizeof(*h));
		err = read_u64(r, heaps[i] + l->codeheap_memory + l->vspace_low, &h->low);
		if (err == 0)
			err = read_u64(r, heaps[i] + l->codeheap_memory + l->vspace_high, &h->high);
		if (err == 0)
			err = read_u64(r, heaps[i] + l->codeheap_segmap + l->vspace_low, &h->segmap);
		if (err == 0)
			err = read_u64(r, heaps[i] + l->codeheap_segmap + l->vspace_high, &seg_high);
		if (err == 0)
			err = r->read(r->ctx, heaps[i] + l->codeheap_log2_segment_size, &log2, 4);
		if (err < 0)
			return err;
		if (log2 < 4 || log2 > 16 || h->high < h->low || !h->segmap || seg_high < h->segmap ||
		    ((h->high - h->low) >> log2) > seg_high - h->segmap)
			return -EINVAL;
		h->log2_segment = (uint32_t)log2;
	}
	return len;
}

int agent_jvm_blob_at(const struct agent_jvm_reader *r, const struct agent_jvm_layout *l,
		      const struct agent_jvm_heap *h, uint64_t pc, uint64_t *ret_blob)
{
	uint64_t seg, block_len;
	uint8_t hop, used;
	int err;

	if (pc < h->low || pc >= h->high)
		return -ENOENT;
	seg = (pc - h->low) >> h->log2_segment;
	/* Each byte says how many segments back the block's start is, or 0xff for free space (CodeHeap::find_start). */
	for (int i = 0; i < AGENT_JVM_MAX_SEGMAP_HOPS; i++) {
		err = r->read(r->ctx, h->segmap + seg, &hop, 1);
		if (err < 0)
			return err;
		if (hop == 0xff)
			return -ENOENT;
		if (hop == 0) {
			uint64_t block = h->low + (seg << h->log2_segment);

			/* HeapBlock::Header: the length in segments, then whether it is used. */
			err = read_u64(r, block + l->heapblock_length, &block_len);
			if (err == 0)
				err = r->read(r->ctx, block + l->heapblock_used, &used, 1);
			if (err < 0)
				return err;
			if (!used || !block_len || block_len > (h->high - block) >> h->log2_segment ||
			    pc >= block + (block_len << h->log2_segment))
				return -ENOENT;
			*ret_blob = block + l->heapblock_size;
			return 0;
		}
		if (hop > seg)
			return -ENOENT;
		seg -= hop;
	}
	return -ENOENT;
}
