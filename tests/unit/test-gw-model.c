/* SPDX-License-Identifier: Apache-2.0 */
/* The gateway's internal model (gateway/core/model.h): stores, references, batches, merge. */
#include <errno.h>
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
#include "core/slot-pool.h"

static struct gw_executable *exe(struct gw_stores *s, int n)
{
	uint8_t id[20] = { 0 };
	char name[32];
	id[0] = (uint8_t)n;
	id[19] = 0xee;
	snprintf(name, sizeof(name), "bin%d", n);
	struct gw_executable_def d = { .id = id,
				       .id_len = sizeof(id),
				       .id_kind = GW_EXE_ID_GNU_BUILD_ID,
				       .file_name = name,
				       .path = "/usr/bin/x" };
	return gw_stores__intern_executable(s, &d);
}

/* A stack of depth frames in executable e, ID derived from n. */
static struct gw_stack *stack(struct gw_stores *s, struct gw_executable *e, int n, uint32_t depth)
{
	struct gw_location *locs[16];
	uint8_t id[16] = { 0 };
	memcpy(id, &n, sizeof(n));
	for (uint32_t i = 0; i < depth; i++)
		locs[i] = gw_stores__intern_location(s, GW_FRAME_USER, 0x1000 + n * 64 + i, e, NULL);
	return gw_stores__intern_stack(s, id, sizeof(id), false, locs, depth);
}

static void test_ids(void **state)
{
	struct gw_id a, b;
	char hex[2 * GW_ID_MAX + 1];
	uint8_t big[GW_ID_MAX + 1] = { 0 };

	assert_int_equal(gw_id_set(&a, "\x01\xab", 2), 0);
	assert_string_equal(gw_id_to_hex(&a, hex, sizeof(hex)), "01ab");
	assert_int_equal(gw_id_set(&b, "\x01\xab", 2), 0);
	assert_true(gw_id_equal(&a, &b));
	assert_int_equal(gw_id_set(&b, big, sizeof(big)), -EINVAL);
}

static void test_store_interning(void **state)
{
	struct gw_stores *s = gw_stores_new(NULL);
	struct gw_store_stats st;

	assert_non_null(s);
	struct gw_executable *e1 = exe(s, 1), *e1b = exe(s, 1), *e2 = exe(s, 2);
	assert_ptr_equal(e1, e1b); /* content-addressed: one object per ID */
	assert_ptr_not_equal(e1, e2);
	assert_string_equal(e1->file_name, "bin1");
	assert_true(gw_id_equal(&e1->gnu_build_id, &e1->id));
	struct gw_stack *a = stack(s, e1, 7, 3), *b = stack(s, e1, 7, 3);
	assert_ptr_equal(a, b);
	assert_int_equal(a->n_locations, 3);
	assert_ptr_equal(gw_location__exe(gw_stack__location(a, 0)), e1);
	/* Lookups by ID */
	struct gw_stack *c = gw_stores__stack(s, gw_stack__id(a), a->id_len);
	assert_ptr_equal(c, a);
	assert_null(gw_stores__stack(s, "nope", 4));
	gw_stores__stats(s, GW_STORE_STACKS, &st);
	assert_int_equal(st.entries, 1);
	assert_true(st.hits >= 2);
	gw_stores__stats(s, GW_STORE_LOCATIONS, &st);
	assert_int_equal(st.entries, 3);
	/* Invalid definitions */
	assert_null(gw_stores__intern_location(s, GW_FRAME_USER, 1, NULL, NULL));
	assert_int_equal(errno, EINVAL);
	gw_stack__unref(a);
	gw_stack__unref(b);
	gw_stack__unref(c);
	gw_executable__unref(e1);
	gw_executable__unref(e1b);
	gw_executable__unref(e2);
	gw_stores_free(s);
}

static void test_store_eviction_keeps_objects_alive(void **state)
{
	struct gw_store_limits lim = { .stack_bytes = 4096 };
	struct gw_stores *s = gw_stores_new(&lim);
	struct gw_store_stats st;
	struct gw_executable *e = exe(s, 1);
	struct gw_stack *held[500];

	/* Many stacks, all still referenced: the store stays under its bound by
	 * evicting the coldest even when every one of them is in use. */
	for (int i = 0; i < 500; i++)
		held[i] = stack(s, e, i, 2);
	gw_stores__stats(s, GW_STORE_STACKS, &st);
	assert_true(st.bytes <= 4096);
	assert_true(st.evictions > 0);
	assert_true(st.entries < 500);
	/* An early one is evicted from the index (which ones depends on second chances) but our reference still
	 * works. */
	struct gw_stack *first = NULL;
	for (int i = 0; i < 500 && !first; i++) {
		struct gw_stack *again = gw_stores__stack(s, gw_stack__id(held[i]), held[i]->id_len);
		if (!again)
			first = held[i];
		gw_stack__unref(again);
	}
	assert_non_null(first);
	assert_int_equal(first->n_locations, 2);
	assert_ptr_equal(gw_location__exe(gw_stack__location(first, 1)), e);
	/* The newest is still there. */
	int last = 499;
	uint8_t id[16] = { 0 };
	memcpy(id, &last, sizeof(last));
	struct gw_stack *l = gw_stores__stack(s, id, sizeof(id));
	assert_non_null(l);
	gw_stack__unref(l);
	uint64_t first_address = gw_stack__location(first, 0)->address;
	for (int i = 0; i < 500; i++)
		if (held[i] != first)
			gw_stack__unref(held[i]);
	/* Lowering the bound evicts at once. */
	gw_stores__set_limit(s, GW_STORE_STACKS, 1024);
	gw_stores__stats(s, GW_STORE_STACKS, &st);
	assert_true(st.bytes <= 1024);
	assert_int_equal(st.limit_bytes, 1024);
	gw_stores__set_limit(s, GW_STORE_STACKS, 0);
	gw_stores__stats(s, GW_STORE_STACKS, &st);
	assert_int_equal(st.limit_bytes, GW_STORE_DEFAULT_STACK_BYTES);
	gw_stores_free(s); /* objects referenced outside outlive the stores */
	assert_int_equal(gw_stack__location(first, 0)->address, first_address);
	gw_stack__unref(first);
	gw_executable__unref(e);
}

/*
 * A cold entry something else still references gets a second chance: the
 * unreferenced ones go first, so stored stacks keep their locations indexed
 * and a definition naming them again does not make a duplicate.
 */
static void test_store_second_chance(void **state)
{
	struct gw_store_limits lim = { .stack_bytes = 4096 };
	struct gw_stores *s = gw_stores_new(&lim);
	struct gw_store_stats st;
	struct gw_executable *e = exe(s, 1);
	struct gw_stack *first = stack(s, e, 0, 2), *again;

	for (int i = 1; i < 500; i++)
		gw_stack__unref(stack(s, e, i, 2));
	gw_stores__stats(s, GW_STORE_STACKS, &st);
	assert_true(st.bytes <= 4096);
	assert_true(st.evictions > 0);
	assert_true(st.second_chances > 0);
	again = gw_stores__stack(s, gw_stack__id(first), first->id_len);
	assert_ptr_equal(again, first);
	gw_stack__unref(again);
	/* Locations: those of stored (referencing) stacks stay; re-interning one finds the same object. */
	lim = (struct gw_store_limits){ .location_bytes = 8192 };
	gw_stores_free(s);
	gw_stack__unref(first);
	s = gw_stores_new(&lim);
	struct gw_location *kept = gw_stores__intern_location(s, GW_FRAME_USER, 0x42, e, NULL), *found;
	for (int i = 0; i < 2000; i++) {
		struct gw_location *x = gw_stores__intern_location(s, GW_FRAME_USER, 0x10000 + i, e, NULL);
		gw_location__unref(x);
	}
	found = gw_stores__intern_location(s, GW_FRAME_USER, 0x42, e, NULL);
	assert_ptr_equal(found, kept);
	gw_stores__stats(s, GW_STORE_LOCATIONS, &st);
	assert_true(st.bytes <= 8192);
	assert_true(st.evictions > 1000);
	gw_location__unref(found);
	gw_location__unref(kept);
	gw_stores_free(s);
	gw_executable__unref(e);
}

/*
 * Locations held by stored stacks are never evicted from the locations store
 * (no uncounted copies); their bytes count against the stacks store's bound,
 * and evicting a stack releases them.
 */
static void test_store_held_locations(void **state)
{
	struct gw_store_limits lim = { .location_bytes = 4096, .stack_bytes = 64 * 1024 };
	struct gw_stores *s = gw_stores_new(&lim);
	struct gw_store_stats ls, ss;
	struct gw_executable *e = exe(s, 1);
	int kept = 0;

	for (int i = 0; i < 400; i++)
		gw_stack__unref(stack(s, e, i, 8));
	gw_stores__stats(s, GW_STORE_LOCATIONS, &ls);
	gw_stores__stats(s, GW_STORE_STACKS, &ss);
	assert_true(ls.bytes <= 4096);
	assert_true(ls.held_bytes > 4096);  /* far more than the locations store's own bound */
	assert_true(ss.bytes <= 64 * 1024); /* stacks and the locations they hold */
	assert_true(ss.bytes >= ls.held_bytes);
	assert_true(ss.evictions > 0);
	{ /* All the stores: held locations counted once, in the stacks store's bytes. */
		struct gw_store_stats es;

		gw_stores__stats(s, GW_STORE_EXECUTABLES, &es);
		assert_int_equal(gw_stores__bytes(s), es.bytes + ls.bytes + ss.bytes);
	}
	/* Every stored stack's locations are the indexed ones: re-interning finds the same object. */
	for (int i = 0; i < 400; i++) {
		uint8_t id[16] = { 0 };
		struct gw_stack *x;

		memcpy(id, &i, sizeof(i));
		x = gw_stores__stack(s, id, sizeof(id));
		if (!x)
			continue;
		kept++;
		for (uint32_t j = 0; j < x->n_locations; j++) {
			struct gw_location *y = gw_stores__intern_location(s, GW_FRAME_USER,
									   gw_stack__location(x, j)->address, e, NULL);

			assert_ptr_equal(y, gw_stack__location(x, j));
			gw_location__unref(y);
		}
		gw_stack__unref(x);
	}
	assert_true(kept > 0 && kept < 400);
	/* Emptying the stacks store releases them: the locations store evicts down to its bound. */
	gw_stores__set_limit(s, GW_STORE_STACKS, 1);
	gw_stores__stats(s, GW_STORE_LOCATIONS, &ls);
	assert_int_equal(ls.held_bytes, 0);
	assert_true(ls.bytes <= 4096);
	gw_stores_free(s);
	gw_executable__unref(e);
}

/*
 * The locations store's index (open addressing over slot numbers, deletion
 * by backward shift): under churn with evictions at a small bound, every
 * location still indexed is the one interning its key finds, every evicted
 * one is not; growing through several doublings keeps every entry; an
 * emptied store has none left.
 */
static void test_location_index(void **state)
{
	enum { KEYS = 3000, ROUNDS = 40000, MANY = 100000 };
	struct gw_store_limits lim = { .location_bytes = 600 * 48 };
	struct gw_stores *s = gw_stores_new(&lim);
	struct gw_executable *e = exe(s, 1);
	struct gw_location **held = calloc(KEYS, sizeof(*held)), **many;
	struct gw_store_stats st;
	uint32_t x = 12345;

	assert_non_null(held);
	for (int r = 0; r < ROUNDS; r++) {
		uint32_t a;

		x = x * 1103515245u + 12345u;
		a = (x >> 8) % KEYS;
		gw_location__unref(held[a]);
		held[a] = gw_stores__intern_location(s, GW_FRAME_USER, 0x400000 + a * 4, e, NULL);
		assert_non_null(held[a]);
		if (r % 5000 != 4999)
			continue;
		for (uint32_t k = 0; k < KEYS; k++) {
			struct gw_location *again;
			bool indexed;

			if (!held[k])
				continue;
			indexed = held[k]->flags & GW_LOCATION_INDEXED;
			again = gw_stores__intern_location(s, GW_FRAME_USER, 0x400000 + k * 4, e, NULL);
			if (indexed)
				assert_ptr_equal(again, held[k]);
			else
				assert_ptr_not_equal(again, held[k]);
			gw_location__unref(held[k]);
			held[k] = again;
		}
	}
	gw_stores__stats(s, GW_STORE_LOCATIONS, &st);
	assert_true(st.evictions > 10000);
	assert_true(st.bytes <= 600 * 48);
	for (uint32_t k = 0; k < KEYS; k++)
		gw_location__unref(held[k]);
	free(held);

	/* Growing: a bound that holds them all, several doublings. */
	gw_stores__set_limit(s, GW_STORE_LOCATIONS, (uint64_t)MANY * 64);
	many = calloc(MANY, sizeof(*many));
	assert_non_null(many);
	for (uint32_t k = 0; k < MANY; k++)
		many[k] = gw_stores__intern_location(s, GW_FRAME_USER, 0x800000 + k * 8, e, NULL);
	gw_stores__stats(s, GW_STORE_LOCATIONS, &st);
	assert_true(st.entries >= MANY);
	assert_true(st.index_bytes >= (uint64_t)MANY * 4 * 4 / 3);
	for (uint32_t k = 0; k < MANY; k++) {
		struct gw_location *again = gw_stores__intern_location(s, GW_FRAME_USER, 0x800000 + k * 8, e, NULL);

		assert_ptr_equal(again, many[k]);
		gw_location__unref(again);
	}
	/* Emptied: none indexed, none found. */
	gw_stores__set_limit(s, GW_STORE_LOCATIONS, 1);
	gw_stores__stats(s, GW_STORE_LOCATIONS, &st);
	assert_int_equal(st.entries, 0);
	assert_int_equal(st.bytes, 0);
	for (uint32_t k = 0; k < MANY; k++) {
		assert_false(many[k]->flags & GW_LOCATION_INDEXED);
		gw_location__unref(many[k]);
	}
	free(many);
	gw_stores_free(s);
	gw_executable__unref(e);
}

/*
 * An executable that a stored location names is held like a location a
 * stored stack holds: never evicted from its store (that would make a copy of
 * it and of all its locations), charged to the stacks store's bound, and let
 * go when its last stored location leaves.
 */
static void test_store_held_executables(void **state)
{
	struct gw_store_limits lim = { .executable_bytes = 1 };
	struct gw_stores *s = gw_stores_new(&lim);
	struct gw_store_stats es, ls, ss, ks, fs;
	struct gw_executable *a = exe(s, 1), *found;
	struct gw_location *l = gw_stores__intern_location(s, GW_FRAME_USER, 0x1234, a, NULL);
	uint8_t id[20] = { 1 };

	id[19] = 0xee;
	for (int i = 2; i < 60; i++)
		gw_executable__unref(exe(s, i));
	gw_stores__stats(s, GW_STORE_EXECUTABLES, &es);
	assert_true(es.evictions >= 57);
	assert_int_equal(es.held_bytes, a->obj.bytes);
	found = gw_stores__executable(s, id, sizeof(id));
	assert_ptr_equal(found, a);
	gw_executable__unref(found);
	/* Counted once, in the stacks store's bytes. */
	gw_stores__stats(s, GW_STORE_LOCATIONS, &ls);
	gw_stores__stats(s, GW_STORE_STACKS, &ss);
	gw_stores__stats(s, GW_STORE_KERNELS, &ks);
	gw_stores__stats(s, GW_STORE_FUNCTIONS, &fs);
	assert_true(ss.bytes >= es.held_bytes);
	assert_int_equal(gw_stores__bytes(s), es.bytes + ls.bytes + ss.bytes + ks.bytes + fs.bytes);
	/* Its last stored location gone, it is evicted like any other. */
	gw_stores__set_limit(s, GW_STORE_LOCATIONS, 1);
	gw_stores__stats(s, GW_STORE_EXECUTABLES, &es);
	assert_int_equal(es.held_bytes, 0);
	assert_null(gw_stores__executable(s, id, sizeof(id)));
	gw_location__unref(l);
	gw_executable__unref(a);
	gw_stores_free(s);
}

/*
 * A location naming an executable no stored location named before moves that
 * executable's bytes to the stacks store's bound: the stacks store shrinks
 * then too, not only at its next insert, so its bytes never read over it.
 */
static void test_store_held_executable_shrinks_stacks(void **state)
{
	struct gw_store_limits lim = { .stack_bytes = 16 * 1024 };
	struct gw_stores *s = gw_stores_new(&lim);
	struct gw_store_stats ss;
	struct gw_executable *e = exe(s, 1);

	for (int i = 0; i < 200; i++)
		gw_stack__unref(stack(s, e, i, 8));
	gw_stores__stats(s, GW_STORE_STACKS, &ss);
	assert_true(ss.evictions > 0); /* full */
	for (int n = 2; n < 40; n++) {
		struct gw_executable *x = exe(s, n);
		struct gw_location *l = gw_stores__intern_location(s, GW_FRAME_USER, 0x4000, x, NULL);

		gw_stores__stats(s, GW_STORE_STACKS, &ss);
		assert_true(ss.bytes <= ss.limit_bytes);
		gw_location__unref(l);
		gw_executable__unref(x);
	}
	gw_stores_free(s);
	gw_executable__unref(e);
}

/* Functions: content-addressed, byte-bounded, their locations come with lines. */
static void test_store_functions(void **state)
{
	struct gw_store_limits lim = { .function_bytes = 8192 };
	struct gw_stores *s = gw_stores_new(&lim);
	struct gw_store_stats st;
	uint8_t id[16] = { 0x77 };
	struct gw_function_def d = {
		.id = id, .id_len = 16, .runtime = "cpython", .name = "alpha", .file_name = "/app/a.py", .start_line = 3
	};
	struct gw_function *first = gw_stores__intern_function(s, &d), *again;
	struct gw_location *l;
	const struct gw_lines *lines;

	assert_non_null(first);
	/* An existing ID wins: IDs are content addresses. */
	d.name = "other";
	again = gw_stores__intern_function(s, &d);
	assert_ptr_equal(again, first);
	gw_function__unref(again);
	assert_string_equal(first->name, "alpha");
	/* No name, or a frame kind without functions: refused. */
	d.name = "";
	id[0] = 0x78;
	assert_null(gw_stores__intern_function(s, &d));
	assert_null(gw_stores__intern_function_location(s, GW_FRAME_USER, 1, first, 1));

	l = gw_stores__intern_function_location(s, GW_FRAME_INTERPRETED, 8, first, 5);
	assert_non_null(l);
	assert_ptr_equal(gw_stores__intern_function_location(s, GW_FRAME_INTERPRETED, 8, first, 5), l);
	gw_location__unref(l);
	/* The same function and offset at another line is another location. */
	{
		struct gw_location *other = gw_stores__intern_function_location(s, GW_FRAME_INTERPRETED, 8, first, 6);

		assert_ptr_not_equal(other, l);
		assert_int_equal(gw_location__lines(other)->lines[0].line, 6);
		gw_location__unref(other);
	}
	lines = gw_location__lines(l);
	assert_non_null(lines);
	assert_int_equal(lines->n, 1);
	assert_string_equal(lines->lines[0].function, "alpha");
	assert_string_equal(lines->lines[0].file, "/app/a.py");
	assert_int_equal(lines->lines[0].line, 5);
	assert_int_equal(lines->lines[0].start_line, 3);

	/* Many functions: the store stays under its bound; referenced ones stay indexed. */
	d.name = "f";
	for (int i = 0; i < 500; i++) {
		struct gw_function *f;

		memcpy(id, &i, sizeof(i));
		id[15] = 1;
		f = gw_stores__intern_function(s, &d);
		assert_non_null(f);
		gw_function__unref(f);
	}
	gw_stores__stats(s, GW_STORE_FUNCTIONS, &st);
	assert_true(st.bytes <= 8192);
	assert_true(st.evictions > 0);
	assert_string_equal(gw_store_kind_to_string(GW_STORE_FUNCTIONS), "functions");
	/* The first one is still referenced (by l): kept over unreferenced ones. */
	again = gw_stores__function(s, first->id.bytes, first->id.len);
	assert_ptr_equal(again, first);
	gw_function__unref(again);
	assert_ptr_equal(gw_location__function(l), first);
	gw_stores_free(s);
	assert_string_equal(gw_location__function(l)->name, "alpha");
	gw_location__unref(l);
	gw_function__unref(first);
}

static void test_lines_set_once(void **state)
{
	struct gw_stores *s = gw_stores_new(NULL);
	struct gw_executable *e = exe(s, 3);
	struct gw_location *l = gw_stores__intern_location(s, GW_FRAME_USER, 0x42, e, NULL);
	struct gw_line in[2] = {
		{ .function = "inlined", .file = "a.c", .line = 3 },
		{ .function = "outer", .system_name = "_Z5outerv", .file = "a.c", .line = 10, .column = 2 },
	};
	struct gw_lines *a = gw_lines_new(in, 2), *b = gw_lines_new(in, 1);

	assert_null(gw_location__lines(l));
	assert_true(gw_location__set_lines(l, a));
	assert_false(gw_location__set_lines(l, b)); /* first one wins */
	gw_lines_free(b);
	const struct gw_lines *got = gw_location__lines(l);
	assert_int_equal(got->n, 2);
	assert_string_equal(got->lines[0].function, "inlined");
	assert_string_equal(got->lines[0].system_name, "");
	assert_string_equal(got->lines[1].system_name, "_Z5outerv");
	/* want-symbols flag */
	assert_false(gw_executable__wants_symbols(e));
	gw_executable__set_want_symbols(e, true);
	assert_true(gw_executable__wants_symbols(e));
	int x = 1, y = 2;
	assert_true(gw_slot__set_once(&e->symbolizer, &x));
	assert_false(gw_slot__set_once(&e->symbolizer, &y));
	assert_ptr_equal(gw_slot__get(&e->symbolizer), &x);
	/* Through the stores: the lines are charged to the locations store, once. */
	{
		struct gw_location *l2 = gw_stores__intern_location(s, GW_FRAME_USER, 0x43, e, NULL);
		struct gw_lines *c = gw_lines_new(in, 2), *d = gw_lines_new(in, 1);
		struct gw_store_stats before, after;

		gw_stores__stats(s, GW_STORE_LOCATIONS, &before);
		assert_true(gw_stores__set_lines(s, l2, c));
		assert_false(gw_stores__set_lines(s, l2, d));
		gw_lines_free(d);
		gw_stores__stats(s, GW_STORE_LOCATIONS, &after);
		assert_int_equal(after.bytes - before.bytes, gw_lines__bytes(c));
		assert_true(gw_lines__bytes(c) > 2 * sizeof(struct gw_line) + strlen("_Z5outerv"));
		gw_location__unref(l2);
	}
	gw_location__unref(l);
	gw_executable__unref(e);
	gw_stores_free(s);
}

/* A batch of n_res resources (attrs in the order given), each with k samples of count c. */
static struct gw_profiles *batch(struct gw_stack *st, int n_res, int k, uint64_t c, bool reverse_attrs)
{
	struct gw_profiles *p = gw_profiles_new();
	for (int r = 0; r < n_res; r++) {
		char name[16];
		snprintf(name, sizeof(name), "proc%d", r);
		struct gw_attr attrs[2] = {
			{ .key = "process.executable.name", .type = GW_ATTR_STRING, .v.s = name },
			{ .key = "host.name", .type = GW_ATTR_STRING, .v.s = "node-1" },
		};
		if (reverse_attrs) {
			struct gw_attr t = attrs[0];
			attrs[0] = attrs[1];
			attrs[1] = t;
		}
		struct gw_resource *res = gw_profiles__add_resource(p, attrs, 2, 19);
		assert_non_null(res);
		for (int i = 0; i < k; i++) {
			char tn[16];
			snprintf(tn, sizeof(tn), "t%d-%d", r, i);
			struct gw_sample s = {
				.stack = st, .count = c, .pid = 10, .tid = (uint32_t)i, .thread_name = tn
			};
			assert_int_equal(gw_resource__add_sample(p, res, &s), 0);
		}
	}
	return p;
}

static bool keep_even(const struct gw_resource *r, const struct gw_sample *smp, void *ud)
{
	return smp->tid % 2 == 0 && strcmp(gw_resource__string(r, "process.executable.name"), "proc3") != 0;
}

static void test_batch_merge_filter_clone(void **state)
{
	struct gw_stores *s = gw_stores_new(NULL);
	struct gw_executable *e = exe(s, 1);
	struct gw_stack *st = stack(s, e, 1, 4);
	uint64_t live0 = gw_profiles_live_bytes();

	struct gw_profiles *a = batch(st, 3, 5, 2, false);
	struct gw_profiles *b = batch(st, 4, 2, 3, true); /* same first 3 resources, attributes in another order */
	assert_int_equal(a->total_count, 30);
	assert_int_equal(b->total_count, 24);
	assert_true(gw_profiles__memory_bytes(a) > 0);
	assert_true(gw_profiles_live_bytes() >= live0 + gw_profiles__memory_bytes(a) + gw_profiles__memory_bytes(b));

	/* A resource's window: what its samples covered, widened by a merge, kept by a clone. */
	assert_true(a->resources[0].start_ns > a->resources[0].end_ns); /* nothing covered yet */
	gw_resource__cover(&a->resources[0], 100, 200);
	gw_resource__cover(&b->resources[0], 50, 150);
	gw_resource__cover(&b->resources[3], 300, 400);
	/* Fitting gives back unused room and keeps every sample. */
	assert_int_equal(a->resources[0].cap_samples, 8);
	uint64_t bytes = gw_profiles__memory_bytes(a);
	gw_profiles__fit(a);
	assert_int_equal(a->resources[0].cap_samples, 5);
	assert_int_equal(gw_profiles__memory_bytes(a), bytes - 3 * 3 * sizeof(struct gw_sample));
	assert_int_equal(gw_profiles__check(a), 0);
	/* Room reserved is exact and counted; what fits in it needs no more. */
	bytes = gw_profiles__memory_bytes(a);
	assert_int_equal(gw_resource__reserve_samples(a, &a->resources[0], 3), 0);
	assert_int_equal(a->resources[0].cap_samples, 8);
	assert_int_equal(gw_profiles__memory_bytes(a), bytes + 3 * sizeof(struct gw_sample));
	assert_int_equal(gw_resource__reserve_samples(a, &a->resources[0], 2), 0); /* fits already */
	assert_int_equal(a->resources[0].cap_samples, 8);
	assert_int_equal(gw_resource__reserve_samples(a, &a->resources[0], UINT32_MAX), -E2BIG);
	gw_profiles__fit(a);
	assert_int_equal(gw_profiles__memory_bytes(a), bytes);

	/* Different routes do not merge. */
	b->route_stage = 1;
	assert_int_equal(gw_profiles__merge(a, b), -EXDEV);
	b->route_stage = 0;
	assert_int_equal(gw_profiles__merge(a, b), 0); /* consumes b */
	assert_int_equal(a->n_resources, 4);
	assert_int_equal(a->total_count, 54);
	assert_int_equal(a->n_samples, 15 + 8);
	assert_int_equal(gw_profiles__check(a), 0);
	assert_int_equal(a->resources[0].n_samples, 7);
	/* Strings that came from b live on in a. */
	assert_string_equal(a->resources[0].samples[6].thread_name, "t0-1");
	assert_string_equal(gw_resource__string(&a->resources[3], "process.executable.name"), "proc3");
	assert_int_equal(a->resources[0].start_ns, 50);
	assert_int_equal(a->resources[0].end_ns, 200);
	assert_int_equal(a->resources[3].start_ns, 300);
	assert_int_equal(a->resources[3].end_ns, 400);

	/* Shared batches are copied on write. */
	struct gw_profiles *shared = gw_profiles__ref(a), *w = a;
	assert_int_equal(gw_profiles__make_writable(&w), 0);
	assert_ptr_not_equal(w, a);
	assert_int_equal(w->total_count, a->total_count);
	assert_int_equal(w->resources[0].start_ns, 50);
	assert_int_equal(w->resources[0].end_ns, 200);
	assert_int_equal(gw_resource__set_string(w, &w->resources[0], "k8s.pod.name", "pod-a"), 0);
	assert_null(gw_resource__string(&a->resources[0], "k8s.pod.name"));
	assert_string_equal(gw_resource__string(&w->resources[0], "k8s.pod.name"), "pod-a");

	/* Filter drops samples and empty resources, and says how many counts. */
	uint64_t before = w->total_count;
	uint64_t removed = gw_profiles__filter(w, keep_even, NULL);
	assert_int_equal(w->total_count + removed, before);
	assert_int_equal(w->n_resources, 3);
	assert_int_equal(gw_profiles__check(w), 0);

	/* Merging a shared batch copies it. */
	struct gw_profiles *c = batch(st, 1, 1, 1, false), *c2 = gw_profiles__ref(c);
	assert_int_equal(gw_profiles__merge(w, c), 0);
	assert_int_equal(c2->total_count, 1); /* untouched */
	gw_profiles__unref(c2);

	gw_profiles__unref(w);
	gw_profiles__unref(shared); /* the last reference to a (make_writable dropped the other) */
	assert_int_equal(gw_profiles_live_bytes(), live0);
	/* Only our reference and the store's remain on the stack. */
	assert_int_equal(atomic_load(&st->obj.refs), 2);
	gw_stack__unref(st);
	gw_executable__unref(e);
	gw_stores_free(s);
}

static void test_resource_attrs(void **state)
{
	struct gw_profiles *p = gw_profiles_new();
	struct gw_resource *r = gw_profiles__add_resource(p, NULL, 0, 99);

	assert_int_equal(gw_resource__set_string(p, r, "a", "1"), 0);
	assert_int_equal(gw_resource__set_int(p, r, "pid", 42), 0);
	assert_int_equal(gw_resource__set_string(p, r, "a", "2"), 0);
	assert_int_equal(r->n_attrs, 2);
	assert_string_equal(gw_resource__string(r, "a"), "2");
	assert_int_equal(gw_resource__attr(r, "pid")->v.i, 42);
	assert_int_equal(gw_resource__remove_attr(r, "a"), 1);
	assert_int_equal(gw_resource__remove_attr(r, "a"), 0);
	assert_null(gw_resource__string(r, "a"));
	/* A big string gets its own arena chunk. */
	char big[40000];
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	const char *d = gw_profiles__strdup(p, big);
	assert_int_equal(strlen(d), sizeof(big) - 1);
	assert_string_equal(gw_profiles__strdup(p, "small"), "small");
	gw_profiles_free(p);
}

struct thread_arg {
	struct gw_stores *s;
	unsigned seed;
	unsigned long ops;
};

/* Interning, lookups, eviction and reference drops from several threads at once. */
static void *hammer(void *p)
{
	struct thread_arg *a = p;
	for (int i = 0; i < 20000; i++) {
		int n = (int)(rand_r(&a->seed) % 300);
		struct gw_executable *e = exe(a->s, n % 5);
		struct gw_stack *st = stack(a->s, e, n, 1 + (uint32_t)(n % 6));
		struct gw_stack *again = gw_stores__stack(a->s, gw_stack__id(st), st->id_len);
		if (gw_location__exe(gw_stack__location(st, 0)) != e &&
		    gw_location__exe(gw_stack__location(st, 0))->id.bytes[0] != e->id.bytes[0])
			abort();
		gw_stack__unref(again);
		gw_stack__unref(st);
		gw_executable__unref(e);
		a->ops++;
	}
	return NULL;
}

static void test_store_threads(void **state)
{
	/* Small bounds, so eviction races with lookups. */
	struct gw_store_limits lim = { .stack_bytes = 16384, .location_bytes = 16384, .executable_bytes = 65536 };
	struct gw_stores *s = gw_stores_new(&lim);
	pthread_t t[4];
	struct thread_arg args[4];
	struct gw_store_stats st;
	uint64_t live0, live, cap;
	struct gw_slot_pool_stats slab0, slab;

	gw_location_slots__stats(&live0, &cap);
	gw_stack_slabs__stats(&slab0);
	for (int i = 0; i < 4; i++) {
		args[i] = (struct thread_arg){ .s = s, .seed = (unsigned)i + 1 };
		assert_int_equal(pthread_create(&t[i], NULL, hammer, &args[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(args[i].ops, 20000);
	}
	gw_stores__stats(s, GW_STORE_STACKS, &st);
	assert_true(st.bytes <= 16384);
	assert_true(st.evictions > 0);
	gw_stores_free(s);
	/* Every location freed again, whichever thread dropped its last reference. */
	gw_location_slots__stats(&live, &cap);
	assert_int_equal(live, live0);
	gw_stack_slabs__stats(&slab);
	assert_int_equal(slab.live, slab0.live);
}

/* Locations live in slots of one table; a stack names them by slot; freed slots are reused, not grown. */
static void test_location_slots(void **state)
{
	enum { N = 10000 }; /* more than one chunk of slots */
	struct gw_stores *s = gw_stores_new(NULL);
	struct gw_executable *e = exe(s, 1);
	static struct gw_location *locs[N];
	uint64_t live0, cap0, live, cap, cap1;
	struct gw_stack *st;
	uint8_t id[16] = { 7 };

	gw_location_slots__stats(&live0, &cap0);
	for (uint32_t i = 0; i < N; i++) {
		locs[i] = gw_stores__intern_location(s, GW_FRAME_USER, 0x10000 + i, e, NULL);
		assert_non_null(locs[i]);
		assert_ptr_equal(gw_location__at(gw_location__slot(locs[i])), locs[i]);
		assert_int_equal(locs[i]->address, 0x10000 + i);
	}
	gw_location_slots__stats(&live, &cap1);
	assert_int_equal(live, live0 + N);
	assert_true(cap1 >= live);
	/* A stack of frames from both ends of the table: the stack holds its own references. */
	{
		struct gw_location *frames[3] = { gw_location__ref(locs[0]), gw_location__ref(locs[N / 2]),
						  gw_location__ref(locs[N - 1]) };
		st = gw_stores__intern_stack(s, id, sizeof(id), false, frames, 3);
	}
	assert_non_null(st);
	assert_int_equal(st->n_locations, 3);
	assert_ptr_equal(gw_stack__location(st, 0), locs[0]);
	assert_ptr_equal(gw_stack__location(st, 1), locs[N / 2]);
	assert_ptr_equal(gw_stack__location(st, 2), locs[N - 1]);
	assert_memory_equal(gw_stack__id(st), id, sizeof(id));
	/* Stacks of up to GW_STACK_SLAB_MAX bytes take a slab slot, rounded up to 8 bytes; deeper ones come from
	 * malloc. */
	{
		struct gw_slot_pool_stats slab0, slab;
		struct gw_location *frames[300];
		struct gw_stack *deep;
		uint8_t id2[16] = { 8 };

		gw_stack_slabs__stats(&slab0);
		for (uint32_t i = 0; i < 300; i++)
			frames[i] = gw_location__ref(locs[i]);
		deep = gw_stores__intern_stack(s, id2, sizeof(id2), true, frames, 300);
		assert_non_null(deep);
		assert_ptr_equal(gw_stack__location(deep, 299), locs[299]);
		gw_stack_slabs__stats(&slab);
		assert_int_equal(slab.live, slab0.live);
		gw_stack__unref(deep);
		id2[0] = 9;
		for (uint32_t i = 0; i < 5; i++)
			frames[i] = gw_location__ref(locs[i]);
		deep = gw_stores__intern_stack(s, id2, sizeof(id2), false, frames, 5);
		gw_stack_slabs__stats(&slab);
		assert_int_equal(slab.live - slab0.live,
				 (sizeof(struct gw_stack) + (sizeof(id2) + 3) / 4 * 4 + 5 * 4 + 7) / 8 * 8);
		assert_true(slab.mapped >= slab.live);
		assert_true(slab.resident <= slab.mapped);
		gw_stack__unref(deep);
	}
	for (uint32_t i = 0; i < N; i++)
		gw_location__unref(locs[i]);
	gw_executable__unref(e);
	gw_stores_free(s);
	/* The batch-like reference outlives the stores, with its frames. */
	assert_int_equal(gw_stack__location(st, 2)->address, 0x10000 + N - 1);
	gw_stack__unref(st);
	gw_location_slots__stats(&live, &cap);
	assert_int_equal(live, live0);
	assert_int_equal(cap, cap1);

	/* Again: every slot comes from the free ones, the table does not grow. */
	s = gw_stores_new(NULL);
	e = exe(s, 2);
	for (uint32_t i = 0; i < N; i++)
		locs[i] = gw_stores__intern_location(s, GW_FRAME_USER, 0x10000 + i, e, NULL);
	gw_location_slots__stats(&live, &cap);
	assert_int_equal(live, live0 + N);
	assert_int_equal(cap, cap1);
	for (uint32_t i = 0; i < N; i++)
		gw_location__unref(locs[i]);
	gw_executable__unref(e);
	gw_stores_free(s);
	gw_location_slots__stats(&live, &cap);
	assert_int_equal(live, live0);
	(void)state;
}

/* A hit marks a stack; at the cold end a marked one is kept once (CLOCK), an unmarked one evicted. */
static void test_store_clock(void **state)
{
	struct gw_store_limits lim = { .stack_bytes = 8192 };
	struct gw_stores *s = gw_stores_new(&lim);
	struct gw_executable *e = exe(s, 1);
	struct gw_store_stats st;
	struct gw_stack *hot = stack(s, e, 0, 1), *cold = stack(s, e, 1, 1), *x;
	uint8_t hot_id[16], cold_id[16];
	int n = 2;

	memcpy(hot_id, gw_stack__id(hot), sizeof(hot_id));
	memcpy(cold_id, gw_stack__id(cold), sizeof(cold_id));
	gw_stack__unref(hot); /* only the store holds them: no second chance for being in use */
	gw_stack__unref(cold);
	/* Fill until the first eviction: the two oldest reach the cold end. */
	for (gw_stores__stats(s, GW_STORE_STACKS, &st); st.evictions == 0; gw_stores__stats(s, GW_STORE_STACKS, &st))
		gw_stack__unref(stack(s, e, n++, 1));
	/* Both were at the cold end: the first eviction took one of them (hot was inserted first). */
	x = gw_stores__stack(s, hot_id, sizeof(hot_id));
	assert_null(x);
	x = gw_stores__stack(s, cold_id, sizeof(cold_id));
	assert_non_null(x); /* a hit: marked */
	gw_stack__unref(x);
	assert_int_equal(st.rescued, 0);
	/* The next eviction meets the marked one at the cold end and keeps it. */
	gw_stack__unref(stack(s, e, n++, 1));
	gw_stores__stats(s, GW_STORE_STACKS, &st);
	assert_int_equal(st.rescued, 1);
	assert_true(st.bytes <= 8192);
	x = gw_stores__stack(s, cold_id, sizeof(cold_id)); /* marked again */
	assert_non_null(x);
	gw_stack__unref(x);
	/* Kept once per hit: 400 inserts (about ten turns of a store of some 40 stacks) keep it once more, then
	 * evict it. */
	for (int i = 0; i < 400; i++)
		gw_stack__unref(stack(s, e, n++, 1));
	gw_stores__stats(s, GW_STORE_STACKS, &st);
	assert_int_equal(st.rescued, 2);
	assert_null(gw_stores__stack(s, cold_id, sizeof(cold_id)));
	gw_executable__unref(e);
	gw_stores_free(s);
	(void)state;
}

/* Every stored stack marked by a hit: the insert that passes the bound turns them all, and the new one reaches
 * the cold end first. The bound still holds: the new one is passed over, not taken for the end of the list. */
static void test_store_clock_all_marked(void **state)
{
	struct gw_store_limits lim = { .stack_bytes = 8192 };
	struct gw_stores *s = gw_stores_new(&lim);
	struct gw_executable *e = exe(s, 1);
	struct gw_store_stats st;
	int n = 0;

	for (gw_stores__stats(s, GW_STORE_STACKS, &st); st.evictions == 0; gw_stores__stats(s, GW_STORE_STACKS, &st))
		gw_stack__unref(stack(s, e, n++, 1));
	for (int i = 0; i < n; i++) {
		uint8_t id[16] = { 0 };
		struct gw_stack *x;

		memcpy(id, &i, sizeof(i));
		x = gw_stores__stack(s, id, sizeof(id));
		gw_stack__unref(x); /* NULL for the one evicted */
	}
	gw_stack__unref(stack(s, e, n++, 1));
	gw_stores__stats(s, GW_STORE_STACKS, &st);
	assert_true(st.bytes <= 8192);
	gw_executable__unref(e);
	gw_stores_free(s);
	(void)state;
}

/* An index doubles at two entries per bucket, not one: 5,000 stacks take 4,096 buckets (2^12 holds them at two). */
static void test_store_index_load_factor(void **state)
{
	struct gw_stores *s = gw_stores_new(NULL);
	struct gw_executable *e = exe(s, 1);
	struct gw_store_stats st;

	for (int i = 0; i < 5000; i++)
		gw_stack__unref(stack(s, e, i, 1));
	gw_stores__stats(s, GW_STORE_STACKS, &st);
	assert_int_equal(st.entries, 5000);
	assert_int_equal(st.index_bytes, 4096 * sizeof(void *));
	for (int i = 0; i < 5000; i++) { /* every one still found */
		uint8_t id[16] = { 0 };
		struct gw_stack *x;

		memcpy(id, &i, sizeof(i));
		x = gw_stores__stack(s, id, sizeof(id));
		assert_non_null(x);
		gw_stack__unref(x);
	}
	gw_executable__unref(e);
	gw_stores_free(s);
	(void)state;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ids),
		cmocka_unit_test(test_store_interning),
		cmocka_unit_test(test_store_eviction_keeps_objects_alive),
		cmocka_unit_test(test_store_second_chance),
		cmocka_unit_test(test_store_clock_all_marked),
		cmocka_unit_test(test_store_index_load_factor),
		cmocka_unit_test(test_store_held_locations),
		cmocka_unit_test(test_store_held_executables),
		cmocka_unit_test(test_store_held_executable_shrinks_stacks),
		cmocka_unit_test(test_location_index),
		cmocka_unit_test(test_store_functions),
		cmocka_unit_test(test_lines_set_once),
		cmocka_unit_test(test_batch_merge_filter_clone),
		cmocka_unit_test(test_resource_attrs),
		cmocka_unit_test(test_store_threads),
		cmocka_unit_test(test_location_slots),
		cmocka_unit_test(test_store_clock),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
