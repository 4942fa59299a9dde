/* SPDX-License-Identifier: Apache-2.0 */
/* Slot pools (gateway/core/slot-pool.c): handles, first fit, chunk hooks, and pages given back by a trim. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/slot-pool.h"

/* Pages of [p, p + n) resident (mincore), as a count. */
static size_t resident_pages(const void *p, size_t n)
{
	size_t ps = (size_t)sysconf(_SC_PAGESIZE), pages = (n + ps - 1) / ps, count = 0;
	unsigned char *vec = calloc(pages, 1);

	assert_non_null(vec);
	assert_int_equal(mincore((void *)((uintptr_t)p & ~(uintptr_t)(ps - 1)), n, vec), 0);
	for (size_t i = 0; i < pages; i++)
		count += vec[i] & 1;
	free(vec);
	return count;
}

static uint32_t chunks_seen;
static void *chunk_slots[8];
static void on_chunk(uint32_t index, void *slots)
{
	if (index < 8)
		chunk_slots[index] = slots;
	chunks_seen++;
}

/* Handles name chunk and slot; the chunk hook runs once per chunk, before its first slot; max_chunks bounds. */
static void test_handles_and_bounds(void **state)
{
	static struct gw_slot_pool pool = GW_SLOT_POOL_INIT(80, 1000, 2, on_chunk);
	static void *slots[2000];
	struct gw_slot_pool_stats st;
	uint32_t h;

	for (uint32_t i = 0; i < 2000; i++) {
		slots[i] = gw_slot_alloc(&pool, &h);
		assert_non_null(slots[i]);
		assert_int_equal(h, i); /* first fit: every slot in order */
		assert_ptr_equal(slots[i], (char *)chunk_slots[i / 1000] + (i % 1000) * 80);
		memset(slots[i], 0xab, 80);
	}
	assert_int_equal(chunks_seen, 2);
	errno = 0;
	assert_null(gw_slot_alloc(&pool, &h));
	assert_int_equal(errno, ENOMEM);
	/* A freed slot is the next one handed out, lowest first. */
	gw_slot_free(slots[1500]);
	gw_slot_free(slots[7]);
	assert_ptr_equal(gw_slot_alloc(&pool, &h), slots[7]);
	assert_int_equal(h, 7);
	assert_ptr_equal(gw_slot_alloc(&pool, &h), slots[1500]);
	assert_int_equal(h, 1500);
	gw_slot_pool__stats(&pool, &st);
	assert_int_equal(st.live, 2000 * 80);
	assert_int_equal(st.mapped, 2 * GW_SLOT_CHUNK_BYTES);
	for (uint32_t i = 0; i < 2000; i++)
		gw_slot_free(slots[i]);
	gw_slot_pool__stats(&pool, &st);
	assert_int_equal(st.live, 0);
	(void)state;
}

/* Pages whose slots are all free go back at a trim, and read as zeros when used again; live ones stay. */
static void test_trim_gives_pages_back(void **state)
{
	enum { N = 5000, SIZE = 144 };
	static struct gw_slot_pool pool = GW_SLOT_POOL_INIT(SIZE, 0, 0, NULL);
	static char *slots[N];
	struct gw_slot_pool_stats st, st2;
	size_t ps = (size_t)sysconf(_SC_PAGESIZE);
	char *lo, *hi;

	for (int i = 0; i < N; i++) {
		slots[i] = gw_slot_alloc(&pool, NULL);
		assert_non_null(slots[i]);
		memset(slots[i], 0x5a, SIZE);
	}
	gw_slot_pool__stats(&pool, &st);
	assert_true(st.resident >= (uint64_t)N * SIZE);
	/* Free all but every 100th slot of the lower half and all of the upper half. */
	for (int i = 0; i < N; i++)
		if (i >= N / 2 || i % 100)
			gw_slot_free(slots[i]);
	lo = slots[N / 2 + 10];
	hi = slots[N - 10];
	assert_int_equal(resident_pages(hi, SIZE), 1);
	gw_slot_pools_trim();
	gw_slot_pool__stats(&pool, &st2);
	assert_true(st2.returned >= st.returned + (uint64_t)(N / 2 - 2) * SIZE / ps * ps - 2 * ps);
	assert_int_equal(st2.resident, st.resident - (st2.returned - st.returned));
	assert_int_equal(resident_pages(hi, SIZE), 0);
	assert_int_equal(resident_pages(lo, SIZE), 0);
	/* The kept slots are intact. */
	for (int i = 0; i < N / 2; i += 100)
		for (int j = 0; j < SIZE; j++)
			assert_int_equal(slots[i][j], 0x5a);
	/* A second trim has nothing to give. */
	assert_int_equal(gw_slot_pools_trim(), 0);
	/* Slots handed out again: lowest first, the given-back ones read as zeros and count as resident again. */
	for (int i = 0; i < N; i++)
		if (i >= N / 2 || i % 100) {
			char *p = gw_slot_alloc(&pool, NULL);

			assert_ptr_equal(p, slots[i]);
			if (i > N / 2 + 100 && i < 3000) /* in the first chunk, away from pages with kept slots */
				for (int j = 0; j < SIZE; j++)
					assert_int_equal(p[j], 0);
		}
	gw_slot_pool__stats(&pool, &st2);
	assert_int_equal(st2.resident, st.resident);
	for (int i = 0; i < N; i++)
		gw_slot_free(slots[i]);
	(void)state;
}

/* Random allocations and frees against a model: no slot handed out twice, stats add up, trims keep live data. */
static void test_random_against_model(void **state)
{
	enum { N = 20000, SIZE = 72 };
	static struct gw_slot_pool pool = GW_SLOT_POOL_INIT(SIZE, 0, 0, NULL);
	static uint64_t *live[N];
	unsigned seed = 42;
	uint64_t n_live = 0;
	struct gw_slot_pool_stats st;

	for (int round = 0; round < 200000; round++) {
		int i = (int)(rand_r(&seed) % N);

		if (live[i]) {
			for (int j = 0; j < SIZE / 8; j++)
				assert_int_equal(live[i][j], (uint64_t)i * 1000003 + (uint64_t)j);
			gw_slot_free(live[i]);
			live[i] = NULL;
			n_live--;
		} else {
			live[i] = gw_slot_alloc(&pool, NULL);
			assert_non_null(live[i]);
			for (int j = 0; j < SIZE / 8; j++)
				live[i][j] = (uint64_t)i * 1000003 + (uint64_t)j;
			n_live++;
		}
		if (round % 20000 == 0)
			gw_slot_pools_trim();
	}
	gw_slot_pool__stats(&pool, &st);
	assert_int_equal(st.live, n_live * SIZE);
	assert_true(st.resident <= st.mapped);
	for (int i = 0; i < N; i++)
		if (live[i]) {
			for (int j = 0; j < SIZE / 8; j++)
				assert_int_equal(live[i][j], (uint64_t)i * 1000003 + (uint64_t)j);
			gw_slot_free(live[i]);
		}
	gw_slot_pools_trim();
	gw_slot_pool__stats(&pool, &st);
	assert_int_equal(st.live, 0);
	/* Only each chunk's first page (its header) stays. */
	assert_int_equal(st.resident, st.mapped / GW_SLOT_CHUNK_BYTES * (uint64_t)sysconf(_SC_PAGESIZE));
	(void)state;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_handles_and_bounds),
		cmocka_unit_test(test_trim_gives_pages_back),
		cmocka_unit_test(test_random_against_model),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
