/* SPDX-License-Identifier: Apache-2.0 */
/* Growing a heap array by doubling, with the size arithmetic checked: the one growth helper of the tree. */
#ifndef SR_GROW_H
#define SR_GROW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * The out-of-line part of the functions below, for when the array must grow:
 * callers use those. max bounds the capacity in elements.
 */
int sr_grow_realloc(void **arr, size_t *cap, size_t want, size_t elem, size_t first, size_t max, bool zero);
int sr_grow_realloc_u32(void **arr, uint32_t *cap, uint32_t want, size_t elem, uint32_t first);

/*
 * Makes *arr, an array with room for *cap elements of elem bytes, hold at
 * least want elements. The capacity doubles, from *cap or from first when
 * *cap is 0, until it holds want; a doubling that would pass what a size_t
 * can count stops at the largest capacity that fits. Returns 0 (also when
 * the array is already large enough), -EOVERFLOW when want elements of elem
 * bytes do not fit in a size_t, -ENOMEM when realloc() fails, -EINVAL for an
 * elem of 0; on an error *arr and *cap are left as they were. The new
 * elements are not initialised. Inline, so that a push that fits costs a
 * comparison.
 */
static inline int sr_grow(void **arr, size_t *cap, size_t want, size_t elem, size_t first)
{
	return want <= *cap ? 0 : sr_grow_realloc(arr, cap, want, elem, first, SIZE_MAX, false);
}

/* As sr_grow(), with the new elements zeroed, for arrays whose unused tail must read as empty. */
static inline int sr_grow_zero(void **arr, size_t *cap, size_t want, size_t elem, size_t first)
{
	return want <= *cap ? 0 : sr_grow_realloc(arr, cap, want, elem, first, SIZE_MAX, true);
}

/* As sr_grow(), with the capacity never past max elements (want above max: -EOVERFLOW). */
static inline int sr_grow_max(void **arr, size_t *cap, size_t want, size_t elem, size_t first, size_t max)
{
	return want <= *cap ? 0 : sr_grow_realloc(arr, cap, want, elem, first, max, false);
}

/*
 * As sr_grow(), for an array whose count is a uint32_t (indexes on the wire
 * are 32 bits): the capacity never passes UINT32_MAX.
 */
static inline int sr_grow_u32(void **arr, uint32_t *cap, uint32_t want, size_t elem, uint32_t first)
{
	return want <= *cap ? 0 : sr_grow_realloc_u32(arr, cap, want, elem, first);
}

#endif
