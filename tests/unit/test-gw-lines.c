/* SPDX-License-Identifier: Apache-2.0 */
/* Shared symbolized lines (gateway/core/lines.c): interning, references, threads, through the stores. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <pthread.h>

#include "core/model.h"
#include "core/model-private.h"

static void test_intern_shares_equal_lines(void **state)
{
	struct gw_lines_table *t = gw_lines_table_new();
	struct gw_line two[2] = {
		{ .function = "inlined", .file = "a.c", .line = 3 },
		{ .function = "outer", .system_name = "_Z5outerv", .file = "a.c", .line = 10, .column = 2 },
	};
	struct gw_line copy[2] = {
		{ .function = "inlined", .system_name = "", .file = "a.c", .line = 3 }, /* "" equals NULL */
		{ .function = "outer", .system_name = "_Z5outerv", .file = "a.c", .line = 10, .column = 2 },
	};
	struct gw_line other_line = { .function = "inlined", .file = "a.c", .line = 4 };
	struct gw_line other_col = { .function = "inlined", .file = "a.c", .line = 3, .column = 1 };
	struct gw_line other_name = { .function = "inlinee", .file = "a.c", .line = 3 };
	struct gw_line other_file = { .function = "inlined", .file = "b.c", .line = 3 };
	struct gw_line other_start = { .function = "inlined", .file = "a.c", .line = 3, .start_line = 1 };
	struct gw_lines_table_stats st;
	struct gw_lines *a, *b, *c, *d[5];

	assert_non_null(t);
	a = gw_lines_table__intern(t, two, 2);
	b = gw_lines_table__intern(t, copy, 2);
	c = gw_lines_table__intern(t, two, 1); /* a prefix is other lines */
	assert_non_null(a);
	assert_ptr_equal(a, b);
	assert_ptr_not_equal(a, c);
	assert_int_equal(a->n, 2);
	assert_string_equal(a->lines[0].system_name, "");
	assert_string_equal(a->lines[1].system_name, "_Z5outerv");
	assert_int_equal(a->lines[1].column, 2);
	d[0] = gw_lines_table__intern(t, &other_line, 1);
	d[1] = gw_lines_table__intern(t, &other_col, 1);
	d[2] = gw_lines_table__intern(t, &other_name, 1);
	d[3] = gw_lines_table__intern(t, &other_file, 1);
	d[4] = gw_lines_table__intern(t, &other_start, 1);
	for (int i = 0; i < 5; i++) {
		assert_ptr_not_equal(d[i], c);
		for (int j = 0; j < i; j++)
			assert_ptr_not_equal(d[i], d[j]);
	}
	gw_lines_table__stats(t, &st);
	assert_int_equal(st.entries, 7);
	assert_int_equal(st.hits, 1);
	assert_int_equal(st.misses, 7);
	{
		uint64_t want = gw_lines__bytes(a) + gw_lines__bytes(c);

		for (int i = 0; i < 5; i++)
			want += gw_lines__bytes(d[i]);
		assert_int_equal(st.bytes, want);
	}

	/* The last reference takes an entry out; equal lines then get a new one. */
	gw_lines_free(a);
	gw_lines_table__stats(t, &st);
	assert_int_equal(st.entries, 7);
	gw_lines_free(b);
	gw_lines_table__stats(t, &st);
	assert_int_equal(st.entries, 6);
	a = gw_lines_table__intern(t, two, 2);
	assert_int_equal(a->n, 2);
	gw_lines_free(a);
	gw_lines_free(c);
	for (int i = 0; i < 5; i++)
		gw_lines_free(d[i]);
	gw_lines_table__stats(t, &st);
	assert_int_equal(st.entries, 0);
	assert_int_equal(st.bytes, 0);
	gw_lines_table_free(t);
}

/* Lines outliving their table (a batch freed after the stores) stay valid and are freed by their last holder. */
static void test_lines_outlive_table(void **state)
{
	struct gw_lines_table *t = gw_lines_table_new();
	struct gw_line one = { .function = "f" };
	struct gw_lines *a = gw_lines_table__intern(t, &one, 1), *b = gw_lines_table__intern(t, &one, 1);

	assert_ptr_equal(a, b);
	gw_lines_table_free(t);
	gw_lines_free(a);
	assert_string_equal(b->lines[0].function, "f");
	gw_lines_free(b);
}

/*
 * Locations of one function share its lines, charged once while a stored
 * location holds them: to the stacks store's bound, not to each location.
 */
static void test_stores_share_lines(void **state)
{
	struct gw_stores *s = gw_stores_new(NULL);
	uint8_t id[20] = { 7 };
	struct gw_executable_def def = { .id = id, .id_len = sizeof(id), .file_name = "bin" };
	struct gw_executable *e = gw_stores__intern_executable(s, &def);
	struct gw_line fn = { .function = "handler" };
	struct gw_location *l[3];
	struct gw_store_stats before, after, sbefore, safter;
	struct gw_lines_table_stats st;

	(void)state;
	for (int i = 0; i < 3; i++)
		l[i] = gw_stores__intern_location(s, GW_FRAME_USER, 0x1000 + 4 * (uint64_t)i, e, NULL);
	gw_stores__stats(s, GW_STORE_LOCATIONS, &before);
	gw_stores__stats(s, GW_STORE_STACKS, &sbefore);
	assert_int_equal(sbefore.lines_bytes, 0);
	for (int i = 0; i < 3; i++) {
		struct gw_lines *gl = gw_lines_table__intern(gw_stores__lines(s), &fn, 1);

		assert_true(gw_stores__set_lines(s, l[i], gl));
	}
	assert_ptr_equal(gw_location__lines(l[0]), gw_location__lines(l[2]));
	gw_stores__stats(s, GW_STORE_LOCATIONS, &after);
	gw_stores__stats(s, GW_STORE_STACKS, &safter);
	assert_int_equal(after.bytes, before.bytes);
	assert_int_equal(safter.lines_bytes, gw_lines__bytes(gw_location__lines(l[0])) + GW_OBJ_OVERHEAD);
	assert_int_equal(safter.bytes - sbefore.bytes, safter.lines_bytes);
	gw_lines_table__stats(gw_stores__lines(s), &st);
	assert_int_equal(st.entries, 1);
	/* Lines set on a location no store holds are not charged. */
	{
		struct gw_location *loose = gw_location_new(GW_FRAME_USER, 0x9000, e, NULL);
		struct gw_lines *gl =
			gw_lines_table__intern(gw_stores__lines(s), &(struct gw_line){ .function = "x" }, 1);

		assert_true(gw_stores__set_lines(s, loose, gl));
		gw_stores__stats(s, GW_STORE_STACKS, &after);
		assert_int_equal(after.lines_bytes, safter.lines_bytes);
		gw_location__unref(loose);
	}
	for (int i = 0; i < 3; i++)
		gw_location__unref(l[i]);
	/* Evicting the locations uncharges the lines with the last of them. */
	gw_stores__set_limit(s, GW_STORE_LOCATIONS, 1);
	gw_stores__stats(s, GW_STORE_STACKS, &after);
	assert_int_equal(after.lines_bytes, 0);
	gw_executable__unref(e);
	gw_stores_free(s); /* frees the locations, their lines, then the table */
}

/* Shared lines count against the stacks store's bound: publishing them evicts its coldest stacks. */
static void test_shared_lines_bound_stacks(void **state)
{
	enum { N = 40 };
	struct gw_stores *s = gw_stores_new(NULL);
	uint8_t id[20] = { 9 };
	struct gw_executable_def def = { .id = id, .id_len = sizeof(id), .file_name = "bin" };
	struct gw_executable *e = gw_stores__intern_executable(s, &def);
	static char name[2048];
	struct gw_store_stats st;
	struct gw_location *hot = NULL;

	(void)state;
	for (int i = 0; i < N; i++) {
		uint8_t sid[16] = { (uint8_t)(i + 1) };
		struct gw_location *loc = gw_stores__intern_location(s, GW_FRAME_USER, 0x2000 + (uint64_t)i, e, NULL);

		if (i == N - 1)
			hot = gw_location__ref(loc);
		gw_stack__unref(gw_stores__intern_stack(s, sid, sizeof(sid), false, &loc, 1));
	}
	gw_stores__stats(s, GW_STORE_STACKS, &st);
	assert_int_equal(st.entries, N);
	/* Room for the stacks with their locations and 512 bytes more. */
	gw_stores__set_limit(s, GW_STORE_STACKS, st.bytes + 512);
	memset(name, 'f', sizeof(name) - 1);
	assert_true(gw_stores__set_lines(
		s, hot, gw_lines_table__intern(gw_stores__lines(s), &(struct gw_line){ .function = name }, 1)));
	gw_stores__stats(s, GW_STORE_STACKS, &st);
	assert_true(st.lines_bytes > sizeof(name));
	assert_true(st.evictions >= 1 && st.entries < N && st.entries > 0);
	assert_true(st.bytes <= st.limit_bytes);
	gw_location__unref(hot);
	gw_executable__unref(e);
	gw_stores_free(s);
}

struct thread_arg {
	struct gw_lines_table *t;
	unsigned seed;
};

static void *hammer(void *p)
{
	struct thread_arg *a = p;
	struct gw_lines *held[16] = { 0 };
	char name[32];

	for (int i = 0; i < 20000; i++) {
		unsigned k = (unsigned)rand_r(&a->seed) % 16;
		struct gw_line ln = { .function = name, .line = k };

		snprintf(name, sizeof(name), "fn%u", k % 4);
		gw_lines_free(held[k]);
		held[k] = gw_lines_table__intern(a->t, &ln, 1);
		if (!held[k] || held[k]->lines[0].line != k || strcmp(held[k]->lines[0].function, name) != 0)
			abort();
	}
	for (int k = 0; k < 16; k++)
		gw_lines_free(held[k]);
	return NULL;
}

/*
 * Four threads intern and free the same 16 lines at once. The even ones are
 * also held here all along, so every intern of them is a hit however the
 * threads interleave (on a busy host they may well run one after another);
 * the odd ones come and go.
 */
static void test_threads(void **state)
{
	struct gw_lines_table *t = gw_lines_table_new();
	struct thread_arg args[4];
	pthread_t th[4];
	struct gw_lines_table_stats st;
	struct gw_lines *mine[8];
	char name[32];

	for (unsigned k = 0; k < 16; k += 2) {
		snprintf(name, sizeof(name), "fn%u", k % 4);
		mine[k / 2] = gw_lines_table__intern(t, &(struct gw_line){ .function = name, .line = k }, 1);
		assert_non_null(mine[k / 2]);
	}
	for (int i = 0; i < 4; i++) {
		args[i] = (struct thread_arg){ .t = t, .seed = (unsigned)i + 1 };
		assert_int_equal(pthread_create(&th[i], NULL, hammer, &args[i]), 0);
	}
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	gw_lines_table__stats(t, &st);
	assert_int_equal(st.entries, 8);
	assert_true(st.hits >= 4 * 20000 / 4); /* about half of each thread's interns are of held ones */
	for (int k = 0; k < 8; k++)
		gw_lines_free(mine[k]);
	gw_lines_table__stats(t, &st);
	assert_int_equal(st.entries, 0);
	assert_int_equal(st.bytes, 0);
	gw_lines_table_free(t);
	(void)state;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_intern_shares_equal_lines),
		cmocka_unit_test(test_lines_outlive_table),
		cmocka_unit_test(test_stores_share_lines),
		cmocka_unit_test(test_shared_lines_bound_stacks),
		cmocka_unit_test(test_threads),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
