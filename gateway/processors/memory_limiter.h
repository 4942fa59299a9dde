/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Memory measurement for the memory_limiter processor, separate so tests can
 * point it at a fake /proc and /sys tree.
 */
#ifndef SR_GW_MEMORY_LIMITER_H
#define SR_GW_MEMORY_LIMITER_H

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

#endif
