// SPDX-License-Identifier: Apache-2.0
/*
 * agent/proc-cache.c: entries found by key, the least recently used evicted
 * at the bound, a retired process's entries released with it, and every
 * entry freed exactly once.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "agent/proc-cache.h"

struct item {
	struct agent_pcache_entry base;
	int value;
};

static int freed;

static void item_free(struct agent_pcache_entry *e)
{
	freed++;
	free(e);
}

static void key_of(uint32_t pid, uint64_t addr, uint8_t ret[AGENT_PCACHE_KEY])
{
	uint64_t start = 1000 + pid;

	memcpy(ret, &pid, 4);
	memcpy(ret + 4, &start, 8);
	memcpy(ret + 12, &addr, 8);
}

static struct item *put(struct agent_pcache *c, uint32_t pid, uint64_t addr, int value)
{
	struct item *it = calloc(1, sizeof(*it));

	assert_non_null(it);
	key_of(pid, addr, it->base.key);
	it->base.bytes = 100 + (uint32_t)value;
	it->value = value;
	assert_int_equal(agent_pcache__put(c, &it->base), 0);
	return it;
}

static struct item *get(struct agent_pcache *c, uint32_t pid, uint64_t addr)
{
	uint8_t k[AGENT_PCACHE_KEY];

	key_of(pid, addr, k);
	return (struct item *)agent_pcache__get(c, k);
}

static void test_lru_evicts_at_bound(void **state)
{
	struct agent_pcache c;

	(void)state;
	freed = 0;
	agent_pcache_init(&c, 3, item_free);
	put(&c, 1, 0x10, 1);
	put(&c, 1, 0x20, 2);
	put(&c, 2, 0x10, 3);
	/* Touch the oldest: the next put evicts the second instead. */
	assert_int_equal(get(&c, 1, 0x10)->value, 1);
	put(&c, 3, 0x30, 4);
	assert_int_equal(c.n, 3);
	assert_int_equal(c.evicted, 1);
	assert_null(get(&c, 1, 0x20));
	assert_non_null(get(&c, 1, 0x10));
	assert_non_null(get(&c, 2, 0x10));
	assert_int_equal(freed, 1);
	/* The evicted entry's bytes go with it; the tables and owners count on top. */
	assert_int_equal(c.bytes, 101 + 103 + 104);
	assert_true(agent_pcache__bytes(&c) > c.bytes);
	agent_pcache_done(&c);
	assert_int_equal(freed, 4);
}

static void test_forget_releases_a_process(void **state)
{
	struct agent_pcache c;
	uint8_t k[AGENT_PCACHE_KEY];

	(void)state;
	freed = 0;
	agent_pcache_init(&c, 100, item_free);
	for (int i = 0; i < 10; i++)
		put(&c, 7, 0x1000 + (uint64_t)i * 8, i);
	put(&c, 8, 0x1000, 99);
	key_of(7, 0, k);
	agent_pcache__forget(&c, k);
	assert_int_equal(freed, 10);
	assert_int_equal(c.n, 1);
	assert_null(get(&c, 7, 0x1000));
	assert_int_equal(get(&c, 8, 0x1000)->value, 99);
	assert_int_equal(c.bytes, 199);
	assert_int_equal(c.n_owners, 1);
	/* Forgetting a process with nothing cached, or twice, does nothing. */
	agent_pcache__forget(&c, k);
	assert_int_equal(c.n, 1);
	/* The same process comes back: a new owner. */
	put(&c, 7, 0x1000, 5);
	assert_int_equal(get(&c, 7, 0x1000)->value, 5);
	agent_pcache_done(&c);
	assert_int_equal(freed, 12);
}

static void test_drop_one(void **state)
{
	struct agent_pcache c;
	struct item *a;

	(void)state;
	freed = 0;
	agent_pcache_init(&c, 10, item_free);
	a = put(&c, 1, 0x10, 1);
	put(&c, 1, 0x20, 2);
	agent_pcache__drop(&c, &a->base);
	assert_int_equal(c.n, 1);
	assert_null(get(&c, 1, 0x10));
	assert_int_equal(get(&c, 1, 0x20)->value, 2);
	/* Dropping the process's last entry frees its owner; a forget after that is harmless. */
	agent_pcache__drop(&c, &get(&c, 1, 0x20)->base);
	assert_int_equal(c.n, 0);
	assert_int_equal(c.bytes, 0);
	assert_int_equal(c.n_owners, 0);
	agent_pcache_done(&c);
	assert_int_equal(freed, 2);
}

static void test_churn_stays_bounded(void **state)
{
	struct agent_pcache c;
	uint8_t k[AGENT_PCACHE_KEY];

	(void)state;
	freed = 0;
	agent_pcache_init(&c, 64, item_free);
	/* Thousands of short processes, each with a few entries, each retired: nothing stays. */
	for (uint32_t pid = 1; pid <= 5000; pid++) {
		for (int i = 0; i < 5; i++)
			put(&c, pid, 0x100 + (uint64_t)i, i);
		assert_true(c.n <= 64);
		if (pid % 2) {
			key_of(pid, 0, k);
			agent_pcache__forget(&c, k);
		}
	}
	assert_true(c.n <= 64);
	assert_true(c.owners.h.n <= 64);
	assert_int_equal(c.n_owners, c.owners.h.n);
	assert_true(c.bytes <= 64 * (100 + 4));
	agent_pcache_done(&c);
	assert_int_equal(freed, 25000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lru_evicts_at_bound),
		cmocka_unit_test(test_forget_releases_a_process),
		cmocka_unit_test(test_drop_one),
		cmocka_unit_test(test_churn_stays_bounded),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
