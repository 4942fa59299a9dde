/* SPDX-License-Identifier: Apache-2.0 */
/* The one growth helper (grow.h): the capacity rule once, with its overflow checks. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"

/*
 * The capacity that holds want elements: cap (or first, when cap is 0)
 * doubled until it does, never past max elements nor past what a size_t can
 * count in bytes. The doubling saturates rather than fails, so that the last
 * growth before a bound still succeeds with what is left.
 */
static int next_cap(size_t cap, size_t want, size_t elem, size_t first, size_t max, size_t *ret_cap)
{
	size_t c = cap ? cap : first ? first : 1;

	if (max > SIZE_MAX / elem)
		max = SIZE_MAX / elem;
	if (want > max)
		return -EOVERFLOW;
	while (c < want)
		c = c > max / 2 ? max : c * 2;
	if (c > max) /* a first capacity above the bound */
		c = max;
	*ret_cap = c;
	return 0;
}

int sr_grow_realloc(void **arr, size_t *cap, size_t want, size_t elem, size_t first, size_t max, bool zero)
{
	size_t c;
	void *p;
	int r;

	if (want <= *cap)
		return 0;
	if (!elem)
		return -EINVAL;
	r = next_cap(*cap, want, elem, first, max, &c);
	if (r < 0)
		return r;
	p = realloc(*arr, c * elem);
	if (!p)
		return -ENOMEM;
	if (zero)
		memset((char *)p + *cap * elem, 0, (c - *cap) * elem);
	*arr = p;
	*cap = c;
	return 0;
}

int sr_grow_realloc_u32(void **arr, uint32_t *cap, uint32_t want, size_t elem, uint32_t first)
{
	size_t c = *cap;
	int r = sr_grow_realloc(arr, &c, want, elem, first, UINT32_MAX, false);

	if (r == 0)
		*cap = (uint32_t)c;
	return r;
}
