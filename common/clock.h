/* SPDX-License-Identifier: Apache-2.0 */
/* The monotonic clock that deadlines, backoffs and expiries are measured on. */
#ifndef SR_CLOCK_H
#define SR_CLOCK_H

#include <stdint.h>
#include <time.h>

#include "common/units.h"

/*
 * CLOCK_MONOTONIC in nanoseconds: it never jumps when the wall clock is set,
 * so differences of two readings are durations. Compare its values only with
 * other values of sr_now_ns().
 */
static inline uint64_t sr_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * SR_NSEC_PER_SEC + (uint64_t)ts.tv_nsec;
}

#endif
