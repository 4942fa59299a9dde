// SPDX-License-Identifier: Apache-2.0
/* Compact symbol tables: aliases, sizes, lookups, the serialized form, kallsyms. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "symtab.h"

static struct gw_symtab *build(enum gw_demangle_mode mode)
{
	struct gw_symtab_builder *b = gw_symtab_builder_new();
	struct gw_symtab *t;

	assert_non_null(b);
	/* Added out of order on purpose. */
	assert_int_equal(gw_symtab_builder__add(b, 0x3000, 0x100, "third", 5, GW_SYMTAB_RANK_GLOBAL, true), 0);
	assert_int_equal(gw_symtab_builder__add(b, 0x1000, 0x80, "first", 5, GW_SYMTAB_RANK_GLOBAL, true), 0);
	/* Aliases at 0x2000: global/weak beat local; then fewest leading underscores, shortest, smallest. */
	assert_int_equal(gw_symtab_builder__add(b, 0x2000, 0x40, "__aa", 4, GW_SYMTAB_RANK_GLOBAL, true), 0);
	assert_int_equal(gw_symtab_builder__add(b, 0x2000, 0x40, "local_alias", 11, GW_SYMTAB_RANK_LOCAL, true), 0);
	assert_int_equal(gw_symtab_builder__add(b, 0x2000, 0x40, "weak_alias_long", 15, GW_SYMTAB_RANK_WEAK, true), 0);
	assert_int_equal(gw_symtab_builder__add(b, 0x2000, 0x40, "a", 1, GW_SYMTAB_RANK_LOCAL, true), 0);
	assert_int_equal(gw_symtab_builder__add(b, 0x2000, 0x40, "zz_global", 9, GW_SYMTAB_RANK_GLOBAL, true), 0);
	assert_int_equal(gw_symtab_builder__add(b, 0x2000, 0x40, "aa_global", 9, GW_SYMTAB_RANK_GLOBAL, true), 0);
	/* An unsized symbol: reaches the next one. */
	assert_int_equal(gw_symtab_builder__add(b, 0x4000, 0, "unsized", 7, GW_SYMTAB_RANK_GLOBAL, true), 0);
	assert_int_equal(gw_symtab_builder__add(b, 0x4800, 0x10, "after_unsized", 13, GW_SYMTAB_RANK_GLOBAL, true), 0);
	/* A big function with a nested (sized) local label inside it. */
	assert_int_equal(gw_symtab_builder__add(b, 0x10000, 0x1000, "outer", 5, GW_SYMTAB_RANK_GLOBAL, true), 0);
	assert_int_equal(gw_symtab_builder__add(b, 0x10100, 0x10, "inner", 5, GW_SYMTAB_RANK_LOCAL, true), 0);
	/* A mangled name, and a versioned one. */
	assert_int_equal(gw_symtab_builder__add(b, 0x20000, 0x20, "_ZN3foo3barEv", 13, GW_SYMTAB_RANK_GLOBAL, true), 0);
	assert_int_equal(
		gw_symtab_builder__add(b, 0x20100, 0x20, "memcpy@@GLIBC_2.14", 18, GW_SYMTAB_RANK_GLOBAL, true), 0);
	/* Empty names are ignored. */
	assert_int_equal(gw_symtab_builder__add(b, 0x30000, 0x20, "", 0, GW_SYMTAB_RANK_GLOBAL, true), 0);
	t = gw_symtab_builder__finish(b, mode, GW_SYMTAB_SRC_SYMTAB);
	gw_symtab_builder_free(b);
	assert_non_null(t);
	return t;
}

static const char *name_at(const struct gw_symtab *t, uint64_t addr)
{
	struct gw_symtab_hit hit;

	return gw_symtab__lookup(t, addr, &hit) == 0 ? hit.name : NULL;
}

static void test_lookup(void **state)
{
	struct gw_symtab *t = build(GW_DEMANGLE_TEMPLATES);
	struct gw_symtab_hit hit;

	assert_int_equal(gw_symtab__count(t), 9); /* 4 aliases became 1; the empty name is gone */
	assert_null(name_at(t, 0xfff));
	assert_string_equal(name_at(t, 0x1000), "first");
	assert_string_equal(name_at(t, 0x107f), "first");
	assert_null(name_at(t, 0x1080)); /* past the size: a gap */
	assert_string_equal(name_at(t, 0x2000), "aa_global");
	assert_string_equal(name_at(t, 0x3050), "third");
	assert_string_equal(name_at(t, 0x4000), "unsized");
	assert_string_equal(name_at(t, 0x47ff), "unsized");
	assert_string_equal(name_at(t, 0x4800), "after_unsized");
	assert_string_equal(name_at(t, 0x10100), "inner");
	assert_string_equal(name_at(t, 0x10200), "outer"); /* after the nested one: the enclosing function */
	assert_string_equal(name_at(t, 0x10fff), "outer");
	assert_null(name_at(t, 0x11000));
	assert_int_equal(gw_symtab__lookup(t, 0x20010, &hit), 0);
	assert_string_equal(hit.name, "foo::bar");
	assert_string_equal(hit.sysname, "_ZN3foo3barEv");
	assert_int_equal(hit.start, 0x20000);
	assert_int_equal(hit.size, 0x20);
	assert_string_equal(name_at(t, 0x20100), "memcpy");
	assert_null(name_at(t, UINT64_MAX));
	gw_symtab_free(t);
}

static void test_empty(void **state)
{
	struct gw_symtab_builder *b = gw_symtab_builder_new();
	struct gw_symtab *t = gw_symtab_builder__finish(b, GW_DEMANGLE_NONE, 0);
	struct gw_symtab_hit hit;

	assert_non_null(t);
	assert_int_equal(gw_symtab__count(t), 0);
	assert_int_equal(gw_symtab__lookup(t, 0x1000, &hit), -ENOENT);
	gw_symtab_free(t);
	gw_symtab_builder_free(b);
}

static void test_serialize(void **state)
{
	struct gw_symtab *t = build(GW_DEMANGLE_TEMPLATES), *u, *v;
	void *buf;
	size_t len;

	assert_int_equal(gw_symtab__serialize(t, &buf, &len), 0);
	u = gw_symtab_deserialize(buf, len, GW_DEMANGLE_TEMPLATES);
	assert_non_null(u);
	assert_int_equal(gw_symtab__count(u), gw_symtab__count(t));
	for (uint64_t a = 0xf00; a < 0x21000; a += 0x37)
		assert_true((name_at(t, a) == NULL) == (name_at(u, a) == NULL));
	assert_string_equal(name_at(u, 0x20000), "foo::bar");
	/* Another mode: names demangled again from the stored system names. */
	v = gw_symtab_deserialize(buf, len, GW_DEMANGLE_FULL);
	assert_non_null(v);
	assert_string_equal(name_at(v, 0x20000), "foo::bar()");
	assert_int_equal(gw_symtab__demangle_mode(v), GW_DEMANGLE_FULL);
	gw_symtab_free(v);

	/* Every single-byte corruption and every truncation is rejected (checksum or invariants). */
	uint8_t *p = buf;
	for (size_t i = 0; i < len; i += 7) {
		p[i] ^= 0x5a;
		v = gw_symtab_deserialize(buf, len, GW_DEMANGLE_TEMPLATES);
		assert_null(v);
		assert_int_equal(errno, EBADMSG);
		p[i] ^= 0x5a;
	}
	for (size_t l = 0; l < len; l += 13)
		assert_null(gw_symtab_deserialize(buf, l, GW_DEMANGLE_TEMPLATES));
	free(buf);
	gw_symtab_free(u);
	gw_symtab_free(t);
}

static void test_kallsyms(void **state)
{
	static const char text[] = "ffffffff81000000 T _text\n"
				   "ffffffff81000000 T startup_64\n"
				   "ffffffff81001000 t local_func\n"
				   "ffffffff81002000 D some_data\n"
				   "ffffffff81003000 W weak_func\n"
				   "garbage line\n"
				   "0000000000000000 T hidden_by_kptr_restrict\n"
				   "ffffffffc0a00000 t mod_func\t[nf_tables]\n"
				   "ffffffffc0a01000 T mod_other\t[nf_tables]";
	struct gw_symtab_builder *b = gw_symtab_builder_new();
	size_t bad = 0;
	int n = gw_kallsyms_parse(text, sizeof(text) - 1, b, &bad);
	struct gw_symtab *t;

	assert_int_equal(n, 6);
	assert_int_equal(bad, 2);
	t = gw_symtab_builder__finish(b, GW_DEMANGLE_TEMPLATES, GW_SYMTAB_SRC_KALLSYMS);
	assert_non_null(t);
	/* _text and startup_64 alias: both global, the one without a leading underscore wins. */
	assert_string_equal(name_at(t, 0xffffffff81000010), "startup_64");
	assert_string_equal(name_at(t, 0xffffffff81001abc), "local_func");
	/* Data symbols are not kept, so local_func reaches weak_func. */
	assert_string_equal(name_at(t, 0xffffffff81002010), "local_func");
	assert_string_equal(name_at(t, 0xffffffff81003001), "weak_func");
	assert_string_equal(name_at(t, 0xffffffffc0a00010), "mod_func [nf_tables]");
	assert_string_equal(name_at(t, 0xffffffffc0a01010), "mod_other [nf_tables]");
	gw_symtab_free(t);
	gw_symtab_builder_free(b);
}

static void test_rollback(void **state)
{
	struct gw_symtab_builder *b = gw_symtab_builder_new();
	struct gw_symtab *t;

	assert_int_equal(gw_symtab_builder__add(b, 0x1000, 0x10, "keep", 4, GW_SYMTAB_RANK_GLOBAL, true), 0);
	size_t mark = gw_symtab_builder__count(b);
	assert_int_equal(gw_symtab_builder__add(b, 0x2000, 0x10, "drop1", 5, GW_SYMTAB_RANK_GLOBAL, true), 0);
	assert_int_equal(gw_symtab_builder__add(b, 0x3000, 0x10, "drop2", 5, GW_SYMTAB_RANK_GLOBAL, true), 0);
	gw_symtab_builder__rollback(b, mark);
	assert_int_equal(gw_symtab_builder__add(b, 0x4000, 0x10, "later", 5, GW_SYMTAB_RANK_GLOBAL, true), 0);
	t = gw_symtab_builder__finish(b, GW_DEMANGLE_NONE, 0);
	assert_int_equal(gw_symtab__count(t), 2);
	assert_string_equal(name_at(t, 0x1000), "keep");
	assert_string_equal(name_at(t, 0x4000), "later");
	assert_null(name_at(t, 0x2000));
	gw_symtab_free(t);
	gw_symtab_builder_free(b);
}

static void put32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4);
}

static void put64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, 8);
}

/* A hand-made Go 1.18 pclntab with two functions, as the linker lays it out. */
static void test_gopclntab_118(void **state)
{
	uint8_t t[256] = { 0 };
	struct gw_symtab_builder *b = gw_symtab_builder_new();
	struct gw_symtab *s;

	put32(t, 0xfffffff0);
	t[6] = 1;
	t[7] = 8;
	put64(t + 8, 2);	 /* nfunc */
	put64(t + 16, 0);	 /* nfiles */
	put64(t + 24, 0x401000); /* textStart */
	put64(t + 32, 72);	 /* funcnameOffset */
	put64(t + 64, 120);	 /* pclnOffset (functab) */
	memcpy(t + 72, "main.main\0runtime.main\0", 23);
	/* functab at 120: {entryoff, funcoff} x 3 (the last is the end) */
	put32(t + 120, 0x0);
	put32(t + 124, 24);
	put32(t + 128, 0x80);
	put32(t + 132, 32);
	put32(t + 136, 0x100);
	put32(t + 140, 0);
	/* func records relative to functab: {entryoff u32, nameoff i32} */
	put32(t + 144, 0x0);
	put32(t + 148, 0);
	put32(t + 152, 0x80);
	put32(t + 156, 10);
	assert_int_equal(gw_gopclntab_parse(t, sizeof(t), 0, b), 2);
	s = gw_symtab_builder__finish(b, GW_DEMANGLE_TEMPLATES, GW_SYMTAB_SRC_GOPCLNTAB);
	assert_string_equal(name_at(s, 0x401010), "main.main");
	assert_string_equal(name_at(s, 0x4010ff), "runtime.main");
	assert_null(name_at(s, 0x401100));
	gw_symtab_free(s);

	/* Bad inputs: unknown magic, names out of bounds, a count that cannot fit. */
	put32(t, 0x12345678);
	assert_int_equal(gw_gopclntab_parse(t, sizeof(t), 0, b), -EPROTONOSUPPORT);
	put32(t, 0xfffffff0);
	put32(t + 156, 100000);
	assert_int_equal(gw_gopclntab_parse(t, sizeof(t), 0, b), -EBADMSG);
	put32(t + 156, 10);
	put64(t + 8, 1u << 30);
	assert_int_equal(gw_gopclntab_parse(t, sizeof(t), 0, b), -EBADMSG);
	gw_symtab_builder_free(b);
}

static uint64_t rng_state = 42;

static uint64_t rng(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* The indexed lookups (page index for compact spans, two-level otherwise) against a linear scan. */
static void check_against_reference(uint64_t spread)
{
	enum { N = 5000 };
	static uint64_t addr[N], size[N];
	struct gw_symtab_builder *b = gw_symtab_builder_new();
	char name[32];

	for (int i = 0; i < N; i++) {
		addr[i] = 0x400000 + (rng() % spread) * 16;
		size[i] = rng() % 4 == 0 ? 0 : rng() % 512;
		snprintf(name, sizeof(name), "f%d", i);
		assert_int_equal(gw_symtab_builder__add(b, addr[i], size[i], name, strlen(name), GW_SYMTAB_RANK_GLOBAL,
							true),
				 0);
	}
	struct gw_symtab *t = gw_symtab_builder__finish(b, GW_DEMANGLE_NONE, 0);
	size_t n = gw_symtab__count(t);
	for (int k = 0; k < 20000; k++) {
		/* Probe near symbols (starts, ends, inside) and anywhere. */
		struct gw_symtab_hit s0, hit;
		gw_symtab__get(t, rng() % n, &s0);
		uint64_t a = k % 3 == 0 ? s0.start
					: (k % 3 == 1 ? s0.start + rng() % 1024 : 0x400000 + rng() % (spread * 16));
		/* Reference: the last symbol starting at or below a, as the lookup defines it. */
		long best = -1;
		for (size_t i = 0; i < n; i++) {
			struct gw_symtab_hit h;
			gw_symtab__get(t, i, &h);
			if (h.start > a)
				break;
			best = (long)i;
		}
		int r = gw_symtab__lookup(t, a, &hit);
		if (best < 0) {
			assert_int_equal(r, -ENOENT);
			continue;
		}
		struct gw_symtab_hit h;
		gw_symtab__get(t, (size_t)best, &h);
		bool covers = h.size ? a - h.start < h.size : a - h.start < GW_SYMTAB_IMPLICIT_SIZE_MAX;
		if (covers) {
			assert_int_equal(r, 0);
			assert_int_equal(hit.start, h.start);
		} else if (r == 0) {
			/* Only an enclosing (nested) symbol may answer then. */
			assert_true(hit.start < h.start && a - hit.start < hit.size);
		}
	}
	gw_symtab_free(t);
	gw_symtab_builder_free(b);
}

static void test_index_compact(void **state)
{
	check_against_reference(200000); /* ~3 MiB span: page index */
}

static void test_index_sparse(void **state)
{
	check_against_reference(1ULL << 36); /* huge span: two-level index */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lookup),	      cmocka_unit_test(test_empty),
		cmocka_unit_test(test_serialize),     cmocka_unit_test(test_kallsyms),
		cmocka_unit_test(test_rollback),      cmocka_unit_test(test_gopclntab_118),
		cmocka_unit_test(test_index_compact), cmocka_unit_test(test_index_sparse),
	};
	return cmocka_run_group_tests_name("sym-symtab", tests, NULL, NULL);
}
