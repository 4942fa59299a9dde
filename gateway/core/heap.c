/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The gateway's heap (heap.h). glibc gives each thread that allocates while
 * another holds an arena's lock an arena of its own, up to 8 per core, and
 * keeps the free memory of each: a replica's decode thread, loop and pool
 * threads (encoding, symbolizing) each grew their own, and in a fleet soak
 * its heap held about 150 MiB free beside 190 MiB in use, all in RSS.
 * Fewer arenas share their free memory; a periodic trim returns the free
 * pages inside them (malloc only returns the top of a heap by itself), and
 * those of the slot pools that hold stacks and locations (slot-pool.c).
 */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "heap.h"
#include "common/clock.h"
#include "common/log.h"
#include "slot-pool.h"

/* A trim slower than this is logged (it holds each arena's lock while it walks it). */
#define SLOW_TRIM_NS (50 * 1000 * 1000ULL)

/* The operator chose it: environment variable env, or tunable in GLIBC_TUNABLES. */
static bool chosen(const char *env, const char *tunable)
{
	const char *tunables = getenv("GLIBC_TUNABLES");

	return getenv(env) || (tunables && strstr(tunables, tunable));
}

void gw_heap_setup(void)
{
	if (!chosen("MALLOC_ARENA_MAX", "glibc.malloc.arena_max"))
		mallopt(M_ARENA_MAX, GW_HEAP_ARENAS);
	/*
	 * glibc's default threshold starts at 128 KiB and rises to the size of
	 * every mapped block freed, up to 32 MiB: after the first big request
	 * bodies, batches and encodings, those come from the heap, and the holes
	 * they leave between long-lived objects stay resident (malloc_trim only
	 * gives back whole free pages). A fixed threshold keeps them in mappings
	 * of their own, given back when freed: at 2,000 simulated nodes under
	 * limit_mib 512 the replica's RSS held about 25 MiB less in one run,
	 * for no measurable CPU (docs/gateway.md, "Heap").
	 */
	if (!chosen("MALLOC_MMAP_THRESHOLD_", "glibc.malloc.mmap_threshold"))
		mallopt(M_MMAP_THRESHOLD, GW_HEAP_MMAP_THRESHOLD);
}

void gw_heap_trim(void)
{
	gw_heap_trim_caches(sr_now_ns());
	malloc_trim(0);
	gw_slot_pools_trim();
}

static void on_trim(uv_timer_t *t)
{
	uint64_t t0 = sr_now_ns(), took;

	(void)t;
	gw_heap_trim();
	took = sr_now_ns() - t0;
	if (took > SLOW_TRIM_NS)
		sr_log_debug("gateway", "giving free heap pages back was slow", "took_ms=%llu",
			     (unsigned long long)(took / 1000000));
}

int gw_heap_trim_start(uv_loop_t *loop, uv_timer_t *timer, uint64_t interval_ms)
{
	int r = uv_timer_init(loop, timer);

	if (r < 0)
		return r;
	r = uv_timer_start(timer, on_trim, interval_ms, interval_ms);
	uv_unref((uv_handle_t *)timer);
	return r;
}

struct heap_cache {
	const char *name;
	void (*release)(void);
	void (*trim)(uint64_t now_ns);
	size_t (*bytes)(void);
};

static pthread_mutex_t caches_lock = PTHREAD_MUTEX_INITIALIZER;
static struct heap_cache caches[GW_HEAP_MAX_CACHES];
static unsigned n_caches;

int gw_heap_add_cache(const char *name, void (*release)(void), void (*trim)(uint64_t now_ns), size_t (*bytes)(void))
{
	int r = 0;

	pthread_mutex_lock(&caches_lock);
	for (unsigned i = 0; i < n_caches; i++)
		if (caches[i].release == release)
			goto out;
	if (n_caches == GW_HEAP_MAX_CACHES)
		r = -ENOSPC;
	else
		caches[n_caches++] = (struct heap_cache){ name, release, trim, bytes };
out:
	pthread_mutex_unlock(&caches_lock);
	return r;
}

/* A copy of the registered caches (their functions are called outside the lock: they take their own). */
static unsigned caches_copy(struct heap_cache *copy)
{
	unsigned n;

	pthread_mutex_lock(&caches_lock);
	n = n_caches;
	memcpy(copy, caches, n * sizeof(copy[0]));
	pthread_mutex_unlock(&caches_lock);
	return n;
}

void gw_heap_release_caches(void)
{
	struct heap_cache copy[GW_HEAP_MAX_CACHES];
	unsigned n = caches_copy(copy);

	for (unsigned i = 0; i < n; i++)
		copy[i].release();
}

void gw_heap_trim_caches(uint64_t now_ns)
{
	struct heap_cache copy[GW_HEAP_MAX_CACHES];
	unsigned n = caches_copy(copy);

	for (unsigned i = 0; i < n; i++)
		if (copy[i].trim)
			copy[i].trim(now_ns);
}

void gw_heap_caches_each(void (*cb)(const char *name, size_t bytes, void *arg), void *arg)
{
	struct heap_cache copy[GW_HEAP_MAX_CACHES];
	unsigned n = caches_copy(copy);

	for (unsigned i = 0; i < n; i++)
		cb(copy[i].name, copy[i].bytes ? copy[i].bytes() : 0, arg);
}

/* Before every paged block: its size, and its mapping's length (0: from malloc). 16 bytes keep the block aligned. */
struct paged_hdr {
	size_t n, mapped;
};

void *gw_heap_paged_alloc(size_t n, bool zero)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), len;
	struct paged_hdr *h;

	if (n > SIZE_MAX / 2)
		return NULL;
	len = sizeof(*h) + n;
	if (n < GW_HEAP_PAGED_MIN) {
		h = zero ? calloc(1, len) : malloc(len);
		if (!h)
			return NULL;
		h->mapped = 0;
	} else {
		len = (len + page - 1) / page * page;
		h = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (h == MAP_FAILED)
			return NULL; /* a fresh mapping is zeroed already */
		h->mapped = len;
	}
	h->n = n;
	return h + 1;
}

void gw_heap_paged_free(void *p)
{
	struct paged_hdr *h;

	if (!p)
		return;
	h = (struct paged_hdr *)p - 1;
	if (h->mapped)
		munmap(h, h->mapped);
	else
		free(h);
}

void *gw_heap_paged_realloc(void *p, size_t n)
{
	struct paged_hdr *h, *nh;
	void *q;

	if (!p)
		return gw_heap_paged_alloc(n, false);
	h = (struct paged_hdr *)p - 1;
	if (!h->mapped && n < GW_HEAP_PAGED_MIN) {
		nh = realloc(h, sizeof(*h) + n);
		if (!nh)
			return NULL;
		nh->n = n;
		return nh + 1;
	}
	q = gw_heap_paged_alloc(n, false);
	if (!q)
		return NULL;
	memcpy(q, p, h->n < n ? h->n : n);
	gw_heap_paged_free(p);
	return q;
}
