/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Binary search over sorted arrays: the one loop the address lookups
 * (mappings, unwind rows, perf-map entries, kernel symbols and modules,
 * DWARF ranges) share.
 */
#ifndef SR_SEARCH_H
#define SR_SEARCH_H

#include <stddef.h>

/*
 * The first index in [0, n) at which cond, a C expression over the index
 * named i (declared here), is false, for a cond true on a prefix of the
 * range and false after it; n when true throughout. With a sorted array
 * and cond "element i starts at or below key", it is the number of
 * elements starting at or below key: element SR_PARTITION_POINT(...) - 1
 * is the last of them, none when 0. n is evaluated once; cond about
 * log2(n) times.
 */
#define SR_PARTITION_POINT(n, i, cond)                                                                                 \
	({                                                                                                             \
		size_t sr_lo_ = 0, sr_hi_ = (n);                                                                       \
		while (sr_lo_ < sr_hi_) {                                                                              \
			size_t i = sr_lo_ + (sr_hi_ - sr_lo_) / 2;                                                     \
			if (cond)                                                                                      \
				sr_lo_ = i + 1;                                                                        \
			else                                                                                           \
				sr_hi_ = i;                                                                            \
		}                                                                                                      \
		sr_lo_;                                                                                                \
	})

#endif
