/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Symbolized lines (model.h) and the gateway-wide table that shares them.
 *
 * Most symbolized locations are named by a symbol alone (stripped binaries
 * with uploaded or debuginfod symbol tables, kernels): every address inside
 * one function has the same lines. Sharing one copy among them saves a
 * gw_lines allocation and its strings per location, and lets the OTLP
 * encoder add a shared copy's lines to a request's dictionary once
 * (exporters/otlp-dict-writer.c). The table holds no reference: an entry lives while
 * a location holds it, so it is bounded by the stores that bound locations.
 * References of shared lines change under the table's lock only.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "common/macro.h"
#include "model.h"
#include "model-private.h"

#define LINES_TABLE_INITIAL_BUCKETS 1024

/*
 * Chained through the entries (gw_lines.hash_next), not common/htab.h: an
 * entry leaves the table when its last reference goes, from any thread and
 * on every eviction of a location, so removals are as frequent as
 * insertions; unlinking a known entry needs no probe and leaves no tombstone
 * to be swept by rehashing, and neither inserting nor removing can fail for
 * want of memory (a table that cannot grow only gets longer chains), so
 * interning never fails once its entry is built.
 */
struct gw_lines_table {
	pthread_mutex_t lock;
	struct gw_lines **buckets;
	size_t n_buckets;
	struct gw_lines_table_stats stats;
};

static size_t lines_alloc_bytes(const struct gw_line *lines, uint32_t n)
{
	size_t b = sizeof(struct gw_lines) + n * sizeof(lines[0]);

	for (uint32_t i = 0; i < n; i++)
		b += gw_slen(lines[i].function) + gw_slen(lines[i].system_name) + gw_slen(lines[i].file);
	return b;
}

struct gw_lines *gw_lines_new(const struct gw_line *lines, uint32_t n)
{
	struct gw_lines *l = malloc(lines_alloc_bytes(lines, n));
	char *pos;

	if (!l)
		return NULL;
	*l = (struct gw_lines){ .n = n, .refs = 1 };
	pos = (char *)(l->lines + n);
	for (uint32_t i = 0; i < n; i++) {
		l->lines[i] = lines[i];
		l->lines[i].function = gw_scopy(&pos, lines[i].function);
		l->lines[i].system_name = gw_scopy(&pos, lines[i].system_name);
		l->lines[i].file = gw_scopy(&pos, lines[i].file);
	}
	return l;
}

size_t gw_lines__bytes(const struct gw_lines *lines)
{
	return lines_alloc_bytes(lines->lines, lines->n);
}

static void unlink_locked(struct gw_lines_table *t, struct gw_lines *l)
{
	struct gw_lines **pp = &t->buckets[l->hash & (t->n_buckets - 1)];

	while (*pp && *pp != l)
		pp = &(*pp)->hash_next;
	if (*pp)
		*pp = l->hash_next;
	t->stats.entries--;
	t->stats.bytes -= gw_lines__bytes(l);
}

void gw_lines_free(struct gw_lines *l)
{
	struct gw_lines_table *t;
	bool last;

	if (!l)
		return;
	t = l->table;
	if (!t) {
		if (atomic_fetch_sub_explicit(&l->refs, 1, memory_order_acq_rel) == 1)
			free(l);
		return;
	}
	pthread_mutex_lock(&t->lock);
	last = atomic_fetch_sub_explicit(&l->refs, 1, memory_order_relaxed) == 1;
	if (last)
		unlink_locked(t, l);
	pthread_mutex_unlock(&t->lock);
	if (last)
		free(l);
}

struct gw_lines_table *gw_lines_table_new(void)
{
	struct gw_lines_table *t = calloc(1, sizeof(*t));
	int r;

	if (!t)
		return NULL;
	t->n_buckets = LINES_TABLE_INITIAL_BUCKETS;
	t->buckets = calloc(t->n_buckets, sizeof(*t->buckets));
	if (!t->buckets) {
		free(t);
		errno = ENOMEM;
		return NULL;
	}
	r = pthread_mutex_init(&t->lock, NULL);
	if (r) {
		free(t->buckets);
		free(t);
		errno = r;
		return NULL;
	}
	return t;
}

void gw_lines_table_free(struct gw_lines_table *t)
{
	if (!t)
		return;
	/* Entries still held (by a batch outliving the stores) are left to their holders, unshared from here on. */
	for (size_t i = 0; i < t->n_buckets; i++)
		for (struct gw_lines *l = t->buckets[i]; l; l = l->hash_next)
			l->table = NULL;
	pthread_mutex_destroy(&t->lock);
	free(t->buckets);
	free(t);
}

static uint64_t str_hash(const char *s, uint64_t seed)
{
	return s ? XXH3_64bits_withSeed(s, strlen(s), seed) : XXH3_64bits_withSeed("", 0, seed);
}

static uint64_t lines_hash(const struct gw_line *lines, uint32_t n)
{
	uint64_t h = n;

	for (uint32_t i = 0; i < n; i++) {
		const uint64_t nums[2] = { (uint64_t)lines[i].line << 32 | lines[i].column, lines[i].start_line };

		h = XXH3_64bits_withSeed(nums, sizeof(nums), h);
		h = str_hash(lines[i].function, h);
		h = str_hash(lines[i].system_name, h ^ 1);
		h = str_hash(lines[i].file, h ^ 2);
	}
	return h;
}

static bool str_eq(const char *a, const char *b)
{
	return strcmp(a ? a : "", b ? b : "") == 0;
}

bool gw_lines__equal(const struct gw_lines *have, const struct gw_line *want, uint32_t n)
{
	if (!have || have->n != n)
		return false;
	for (uint32_t i = 0; i < n; i++) {
		const struct gw_line *a = &have->lines[i], *b = &want[i];

		if (a->line != b->line || a->column != b->column || a->start_line != b->start_line ||
		    !str_eq(a->function, b->function) || !str_eq(a->system_name, b->system_name) ||
		    !str_eq(a->file, b->file))
			return false;
	}
	return true;
}

static void grow_locked(struct gw_lines_table *t)
{
	size_t n = t->n_buckets * 2;
	struct gw_lines **b = calloc(n, sizeof(*b));

	if (!b)
		return; /* chains just get longer */
	for (size_t i = 0; i < t->n_buckets; i++) {
		struct gw_lines *l = t->buckets[i];

		while (l) {
			struct gw_lines *next = l->hash_next;

			l->hash_next = b[l->hash & (n - 1)];
			b[l->hash & (n - 1)] = l;
			l = next;
		}
	}
	free(t->buckets);
	t->buckets = b;
	t->n_buckets = n;
}

/* Equal lines in the table, with a new reference, or NULL. */
static struct gw_lines *find_locked(struct gw_lines_table *t, uint64_t h, const struct gw_line *lines, uint32_t n)
{
	for (struct gw_lines *l = t->buckets[h & (t->n_buckets - 1)]; l; l = l->hash_next) {
		if (l->hash == h && gw_lines__equal(l, lines, n)) {
			atomic_fetch_add_explicit(&l->refs, 1, memory_order_relaxed);
			t->stats.hits++;
			return l;
		}
	}
	return NULL;
}

struct gw_lines *gw_lines_table__intern(struct gw_lines_table *t, const struct gw_line *lines, uint32_t n)
{
	uint64_t h = lines_hash(lines, n);
	struct gw_lines *l, *fresh;

	pthread_mutex_lock(&t->lock);
	l = find_locked(t, h, lines, n);
	pthread_mutex_unlock(&t->lock);
	if (l)
		return l;

	/* Built outside the lock; another thread may add equal lines meanwhile. */
	fresh = gw_lines_new(lines, n);
	if (!fresh)
		return NULL;
	fresh->hash = h;
	pthread_mutex_lock(&t->lock);
	l = find_locked(t, h, lines, n);
	if (!l) {
		fresh->table = t;
		fresh->hash_next = t->buckets[h & (t->n_buckets - 1)];
		t->buckets[h & (t->n_buckets - 1)] = fresh;
		t->stats.entries++;
		t->stats.bytes += gw_lines__bytes(fresh);
		t->stats.misses++;
		if (t->stats.entries > t->n_buckets)
			grow_locked(t);
	}
	pthread_mutex_unlock(&t->lock);
	if (l) {
		free(fresh);
		return l;
	}
	return fresh;
}

void gw_lines_table__stats(struct gw_lines_table *t, struct gw_lines_table_stats *ret)
{
	pthread_mutex_lock(&t->lock);
	*ret = t->stats;
	pthread_mutex_unlock(&t->lock);
}
