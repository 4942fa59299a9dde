/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Memory measurement for the memory_limiter processor, separate so tests can
 * point it at a fake /proc and /sys tree.
 */
#ifndef SR_GW_MEMORY_LIMITER_H
#define SR_GW_MEMORY_LIMITER_H

#include <stdbool.h>
#include <stdint.h>

/* Resident set size of this process in bytes (/proc/self/statm), or -errno. */
int64_t gw_mem_rss_bytes(void);
/* What the processor measures: gw_mem_rss_bytes; tests point it at a fake reading. */
extern int64_t (*gw_mem_rss_reader)(void);

/*
 * The memory this process may use, in bytes: the cgroup limit when there is
 * one (v2 memory.max, v1 memory.limit_in_bytes, of this process's cgroup
 * from <root>/proc/self/cgroup, else of the cgroup mount's root), else the
 * host's MemTotal. root is "" normally, a directory in tests. *ret_source
 * says where it came from ("cgroup2", "cgroup1", "meminfo"). -errno when
 * nothing could be read.
 */
int64_t gw_mem_total_bytes(const char *root, const char **ret_source);

/* Consecutive checks at or above the soft limit, with the pipeline empty, that make the limiter stuck. */
#define GW_MEMLIM_STUCK_CHECKS 5
/*
 * A stuck limiter: the RSS stays at or above the soft limit while the
 * pipeline holds no data, so refusing new data cannot bring it down (what
 * holds the memory is the stores, connections and free heap, not data) and
 * the replica refuses every request until something else frees memory.
 * Fed every check (above: RSS at or above the soft limit; quiescent: no
 * component holds samples), returns true once per episode, at the
 * GW_MEMLIM_STUCK_CHECKS-th consecutive such check; an episode ends when the
 * RSS is back under the soft limit.
 */
struct gw_memlim_stuck {
	unsigned checks;
	bool reported;
};
bool gw_memlim_stuck__check(struct gw_memlim_stuck *s, bool above, bool quiescent);

/*
 * Whether the definition stores, full (stores_limit_bytes: the sum of their
 * bounds), leave room under the soft limit: at most 3/4 of it. Above that,
 * once agents have filled them, the connections, the requests being read
 * and the batches in flight have less than a quarter of the soft limit, and
 * the limiter refuses most requests, or all (stuck, above). The limiter
 * warns once at start when they do not fit.
 */
bool gw_memlim_stores_fit(uint64_t stores_limit_bytes, uint64_t soft_limit_bytes);

#endif
