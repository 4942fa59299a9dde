// SPDX-License-Identifier: Apache-2.0
/* The tree's hash table (common/htab.h): slots of the owner's size, and the pointer table over it. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/htab.h"

/* A slot holding its key and value inline, as the gateway's sets do. */
struct pair {
	uint64_t hash;
	uint32_t key;
	uint32_t value;
};

static bool pair_eq(const void *slot, const void *key)
{
	return ((const struct pair *)slot)->key == *(const uint32_t *)key;
}

/* A deliberately poor hash, so that probes run long and wrap around the table's end. */
static uint64_t poor_hash(uint32_t k)
{
	return k % 7;
}

static void test_inline_slots(void **state)
{
	struct sr_htab h;
	struct pair *s;
	size_t seen = 0;

	(void)state;
	sr_htab_init(&h, sizeof(struct pair), pair_eq);
	assert_null(sr_htab__get(&h, 1, &(uint32_t){ 1 })); /* empty: no slots yet */
	for (uint32_t k = 0; k < 1000; k++) {
		assert_int_equal(sr_htab__put(&h, poor_hash(k), &k, (void **)&s), 1);
		assert_int_equal(s->key, 0); /* zeroed for the owner */
		s->key = k;
		s->value = k * 3;
	}
	assert_int_equal(h.n, 1000);
	assert_true(h.used * 4 <= h.cap * 3);
	for (uint32_t k = 0; k < 1000; k++) {
		assert_int_equal(sr_htab__put(&h, poor_hash(k), &k, (void **)&s), 0);
		assert_int_equal(s->value, k * 3);
	}
	/* Hashes 0 and 1 (the empty and deleted marks) are keys' hashes like any other. */
	assert_non_null(sr_htab__get(&h, 0, &(uint32_t){ 0 }));
	assert_non_null(sr_htab__get(&h, 1, &(uint32_t){ 1 }));
	assert_null(sr_htab__get(&h, 0, &(uint32_t){ 1000 }));
	for (uint32_t k = 0; k < 1000; k += 2)
		sr_htab__del(&h, sr_htab__get(&h, poor_hash(k), &k));
	assert_int_equal(h.n, 500);
	for (size_t i = 0; (s = sr_htab__next(&h, &i));) {
		assert_int_equal(s->key % 2, 1);
		seen++;
	}
	assert_int_equal(seen, 500);
	/* Deleting while iterating leaves the others to be seen. */
	seen = 0;
	for (size_t i = 0; (s = sr_htab__next(&h, &i));) {
		seen++;
		if (s->key % 4 == 1)
			sr_htab__del(&h, s);
	}
	assert_int_equal(seen, 500);
	assert_int_equal(h.n, 250);
	for (uint32_t k = 0; k < 1000; k++)
		assert_true((sr_htab__get(&h, poor_hash(k), &k) != NULL) == (k % 4 == 3));
	sr_htab__clear(&h);
	assert_int_equal(h.n, 0);
	assert_null(sr_htab__get(&h, poor_hash(3), &(uint32_t){ 3 }));
	sr_htab_done(&h);
	sr_htab_done(&h); /* twice: harmless */
}

/* Tombstones are reused and rebuilt away: churn at a steady size does not grow the table. */
static void test_churn_keeps_size(void **state)
{
	struct sr_htab h;
	struct pair *s;
	size_t cap;

	(void)state;
	sr_htab_init(&h, sizeof(struct pair), pair_eq);
	for (uint32_t k = 0; k < 100; k++) {
		assert_int_equal(sr_htab__add(&h, sr_htab_hash(&k, sizeof(k)), (void **)&s), 0);
		s->key = k;
	}
	cap = h.cap;
	for (uint32_t k = 100; k < 100000; k++) {
		uint32_t old = k - 100;

		sr_htab__del(&h, sr_htab__get(&h, sr_htab_hash(&old, sizeof(old)), &old));
		assert_int_equal(sr_htab__add(&h, sr_htab_hash(&k, sizeof(k)), (void **)&s), 0);
		s->key = k;
	}
	assert_int_equal(h.n, 100);
	assert_int_equal(h.cap, cap);
	for (uint32_t k = 99900; k < 100000; k++)
		assert_non_null(sr_htab__get(&h, sr_htab_hash(&k, sizeof(k)), &k));
	sr_htab_done(&h);
}

/* A slot too large for any table to hold twice as many: the size arithmetic fails, the table stays. */
static void test_overflow(void **state)
{
	struct sr_htab h;
	void *s;

	(void)state;
	sr_htab_init(&h, SIZE_MAX / 8 + 8, pair_eq);
	assert_int_equal(sr_htab__add(&h, 5, &s), -EOVERFLOW);
	assert_int_equal(h.n, 0);
	assert_null(h.slots);
	sr_htab_done(&h);
}

struct item {
	uint32_t key;
	int value;
};

static const void *item_key(const void *v, size_t *len)
{
	*len = sizeof(uint32_t);
	return &((const struct item *)v)->key;
}

static void test_ptrs(void **state)
{
	struct sr_htab_ptrs h;
	struct item *items = calloc(5000, sizeof(*items));
	struct item *it;
	size_t seen = 0;

	(void)state;
	sr_htab_ptrs_init(&h, item_key);
	for (uint32_t i = 0; i < 5000; i++) {
		items[i].key = i * 2654435761u;
		items[i].value = (int)i;
		assert_int_equal(sr_htab_ptrs__put(&h, &items[i]), 0);
	}
	for (uint32_t i = 0; i < 5000; i += 2) /* remove half: tombstones */
		assert_ptr_equal(sr_htab_ptrs__remove(&h, &items[i].key, 4), &items[i]);
	assert_int_equal(h.h.n, 2500);
	assert_null(sr_htab_ptrs__remove(&h, &items[0].key, 4));
	for (uint32_t i = 0; i < 5000; i++) {
		it = sr_htab_ptrs__get(&h, &items[i].key, 4);
		if (i % 2)
			assert_ptr_equal(it, &items[i]);
		else
			assert_null(it);
	}
	/* A key of another length is another key. */
	assert_null(sr_htab_ptrs__get(&h, &items[1].key, 3));
	for (uint32_t i = 0; i < 5000; i += 2) /* reinsert over tombstones */
		assert_int_equal(sr_htab_ptrs__put(&h, &items[i]), 0);
	for (size_t i = 0; (it = sr_htab_ptrs__next(&h, &i));)
		seen++;
	assert_int_equal(seen, 5000);
	sr_htab_ptrs_done(&h);
	free(items);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_inline_slots),
		cmocka_unit_test(test_churn_keeps_size),
		cmocka_unit_test(test_overflow),
		cmocka_unit_test(test_ptrs),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
