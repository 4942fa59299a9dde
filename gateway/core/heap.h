/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The gateway's heap (glibc malloc): how many arenas it uses, and giving
 * its free pages back to the system (docs/gateway.md, "Memory").
 */
#ifndef SR_GW_HEAP_H
#define SR_GW_HEAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

/* How often the gateway gives free heap pages back (gw_heap_trim_start()). */
#define GW_HEAP_TRIM_INTERVAL_MS 10000

/*
 * Limits malloc to GW_HEAP_ARENAS arenas, and serves every block of
 * GW_HEAP_MMAP_THRESHOLD bytes or more with a mapping of its own, unless the
 * environment sets them (MALLOC_ARENA_MAX or glibc.malloc.arena_max,
 * MALLOC_MMAP_THRESHOLD_ or glibc.malloc.mmap_threshold in GLIBC_TUNABLES).
 * Call before any thread starts.
 */
#define GW_HEAP_ARENAS	       2
#define GW_HEAP_MMAP_THRESHOLD (64 * 1024)
void gw_heap_setup(void);

/*
 * Gives free pages back to the system: what the caches kept idle
 * (gw_heap_trim_caches()), then malloc_trim(0) (the heap's) and
 * gw_slot_pools_trim() (the stack slabs' and location table's). Any thread.
 */
void gw_heap_trim(void);

/*
 * Every interval_ms, gw_heap_trim() on the loop: the pages of free memory
 * inside the heap and the slot pools go back to the system. timer is
 * initialized here and does not keep the loop alive; close it at shutdown.
 * 0 or -errno.
 */
int gw_heap_trim_start(uv_loop_t *loop, uv_timer_t *timer, uint64_t interval_ms);

/*
 * Caches of memory kept for speed only, never data (the OTLP encoder's
 * dictionaries between requests): each registers a function that frees what
 * it keeps, and the memory_limiter calls them all above its soft limit,
 * where that memory counts against data the replica would otherwise refuse;
 * and one that frees what it kept idle too long, which the periodic trim
 * (every GW_HEAP_TRIM_INTERVAL_MS) calls, so that idle memory goes back
 * without waiting for the cache's next use.
 */
#define GW_HEAP_MAX_CACHES 8
/*
 * Registers a cache: name (a metric label, static), release, trim (frees
 * what was idle at now_ns, a sr_now_ns() value; NULL: none), and bytes (what
 * it keeps now, for /metrics: stackrelay_gateway_heap_cache_bytes). A second
 * registration of the same release is a no-op; 0, or -ENOSPC. Any thread.
 */
int gw_heap_add_cache(const char *name, void (*release)(void), void (*trim)(uint64_t now_ns), size_t (*bytes)(void));
/* Calls every registered trim with now_ns. Any thread. */
void gw_heap_trim_caches(uint64_t now_ns);
/* Calls every registered release. Any thread. */
void gw_heap_release_caches(void);
/* Calls cb with each registered cache's name and bytes kept now. Any thread. */
void gw_heap_caches_each(void (*cb)(const char *name, size_t bytes, void *arg), void *arg);

/*
 * Blocks that live as long as a connection and are mostly never written:
 * nghttp2 gives every session a 16 KiB frame buffer, of which an agent's
 * small responses write one page, and in the heap the rest counts in RSS
 * as soon as any earlier block used those pages. A block of GW_HEAP_PAGED_MIN
 * bytes or more gets pages of its own (mmap), resident only where written
 * and given back when freed; a smaller one comes from malloc. Each block
 * carries a 16-byte header. Any thread.
 */
#define GW_HEAP_PAGED_MIN (8 * 1024)
/* n bytes (zeroed when zero is set), or NULL (n of 0 gives a block too). */
void *gw_heap_paged_alloc(size_t n, bool zero);
/* As realloc(): p may be NULL; NULL on failure, leaving p as it was. */
void *gw_heap_paged_realloc(void *p, size_t n);
/* A block from the two above, or NULL. */
void gw_heap_paged_free(void *p);

#endif
