// SPDX-License-Identifier: Apache-2.0
/*
 * The agent-upload path: an executable the gateway has no file for is
 * "wanted", then resolved from the symbol table an agent uploads (here
 * extracted with nm from a binary built at test time, as the agent would
 * with libelf), kept on disk across restarts; error reports, limits, kernel
 * (kallsyms) tables.
 */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/model.h"
#include "symbolize.h"

static char tmp[256];
static atomic_int notified;

static void on_notify(void *userdata)
{
	atomic_fetch_add(&notified, 1);
}

static struct gw_symbolizer *new_sym(const char *cache_dir, uint64_t max_upload)
{
	struct gw_symbolizer *s = gw_symbolizer_new(&(struct gw_symbolizer_config){
		.demangle = GW_DEMANGLE_TEMPLATES,
		.cache_dir = cache_dir,
		.max_upload_bytes = max_upload,
		.notify = on_notify,
	});
	assert_non_null(s);
	return s;
}

struct symlist {
	struct gw_symbol *v;
	size_t n, cap;
	char *names;
};

/* The defined function symbols of file, as an agent would upload them (via nm, independent of our reader). */
static void read_nm(const char *file, struct symlist *l)
{
	char cmd[PATH_MAX + 64], line[1024];
	FILE *f;
	size_t pool = 0;

	snprintf(cmd, sizeof(cmd), "nm -P -S --defined-only '%s'", file);
	f = popen(cmd, "r");
	assert_non_null(f);
	l->names = malloc(1 << 20);
	l->cap = 4096;
	l->v = calloc(l->cap, sizeof(*l->v));
	while (fgets(line, sizeof(line), f) && l->n < l->cap) {
		char name[512], type;
		unsigned long long a, sz = 0;
		if (sscanf(line, "%511s %c %llx %llx", name, &type, &a, &sz) < 3 || (type != 'T' && type != 't'))
			continue;
		size_t nl = strlen(name) + 1;
		if (pool + nl > (1 << 20))
			break;
		memcpy(l->names + pool, name, nl);
		l->v[l->n++] = (struct gw_symbol){ .address = a, .size = sz, .name = l->names + pool };
		pool += nl;
	}
	pclose(f);
}

static uint64_t find(const struct symlist *l, const char *name)
{
	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->v[i].name, name) == 0)
			return l->v[i].address;
	fail_msg("%s not uploaded", name);
	return 0;
}

static int setup(void **state)
{
	snprintf(tmp, sizeof(tmp), "/tmp/sr-test-sym-uploaded-tables.XXXXXX");
	return mkdtemp(tmp) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	return system(cmd) == 0 ? 0 : -1;
}

static void test_upload_resolves_and_persists(void **state)
{
	const char *fixtures = getenv("SR_TEST_FIXTURES");
	char cmd[PATH_MAX * 2], prog[PATH_MAX], cache[PATH_MAX];
	struct symlist l = { 0 };
	uint8_t id[20] = { 0xab, 0xcd, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18 };
	struct gw_sym_handle *h = NULL;
	struct gw_symbolizer *s;
	const char *name, *sys;

	if (system("command -v gcc >/dev/null && command -v nm >/dev/null") != 0)
		skip();
	snprintf(prog, sizeof(prog), "%s/prog", tmp);
	snprintf(cache, sizeof(cache), "%s/cache", tmp);
	snprintf(cmd, sizeof(cmd), "gcc -O1 -o '%s' '%s/sym/prog.c'", prog, fixtures ? fixtures : "tests/fixtures");
	assert_int_equal(system(cmd), 0);
	read_nm(prog, &l);
	assert_true(l.n >= 3);

	s = new_sym(cache, 0);
	/* Nothing local, no debuginfod: the agent is asked. */
	assert_int_equal(gw_symbolizer__acquire(s, id, sizeof(id), NULL, &h), GW_SYM_WANTED);
	atomic_store(&notified, 0);
	assert_int_equal(gw_symbolizer__add_upload(s, id, sizeof(id), l.v, l.n, ""), 0);
	assert_true(atomic_load(&notified) >= 1);
	assert_int_equal(gw_symbolizer__acquire(s, id, sizeof(id), NULL, &h), GW_SYM_READY);
	assert_int_equal(gw_sym_handle__function(h, find(&l, "sr_fixture_leaf") + 3, &name, &sys), 0);
	assert_string_equal(name, "sr_fixture_leaf");
	assert_int_equal(gw_sym_handle__function(h, find(&l, "main"), &name, &sys), 0);
	assert_string_equal(name, "main");
	gw_sym_handle__release(h);
	gw_symbolizer_free(s);

	/* After a restart the table comes from cache_dir. */
	s = new_sym(cache, 0);
	assert_int_equal(gw_symbolizer__acquire(s, id, sizeof(id), NULL, &h), GW_SYM_READY);
	assert_int_equal(gw_sym_handle__function(h, find(&l, "sr_fixture_middle"), &name, &sys), 0);
	assert_string_equal(name, "sr_fixture_middle");
	gw_sym_handle__release(h);
	gw_symbolizer_free(s);
	free(l.v);
	free(l.names);
}

static void test_upload_error_and_limits(void **state)
{
	uint8_t id[8] = { 1, 2, 3, 4, 5, 6, 7, 8 }, id2[8] = { 9, 9, 9, 9, 9, 9, 9, 9 }, big[65] = { 0 };
	struct gw_symbol syms[3] = {
		{ .address = 0x1000, .size = 0x10, .name = "_ZN3foo3barEv" },
		{ .address = 0, .size = 0x10, .name = "zero_address" },
		{ .address = UINT64_MAX - 4, .size = 0x10, .name = "wraps" },
	};
	struct gw_sym_handle *h = NULL;
	struct gw_symbolizer *s = new_sym(NULL, 1024);
	const char *name, *sys;

	/* An agent that cannot read the file says so: no more waiting for it. */
	assert_int_equal(gw_symbolizer__add_upload(s, id, sizeof(id), NULL, 0, "open /usr/bin/x: permission denied"),
			 0);
	assert_int_equal(gw_symbolizer__acquire(s, id, sizeof(id), NULL, &h), GW_SYM_UNAVAILABLE);
	/* Bad IDs. */
	assert_int_equal(gw_symbolizer__add_upload(s, id, 0, syms, 1, ""), -EINVAL);
	assert_int_equal(gw_symbolizer__add_upload(s, big, sizeof(big), syms, 1, ""), -EINVAL);
	/* Unusable symbols only. */
	assert_int_equal(gw_symbolizer__add_upload(s, id2, sizeof(id2), syms + 1, 2, ""), -EBADMSG);
	/* Valid ones are kept, bad ones skipped; names demangled. */
	assert_int_equal(gw_symbolizer__add_upload(s, id2, sizeof(id2), syms, 3, ""), 0);
	assert_int_equal(gw_symbolizer__acquire(s, id2, sizeof(id2), NULL, &h), GW_SYM_READY);
	assert_int_equal(gw_sym_handle__function(h, 0x1008, &name, &sys), 0);
	assert_string_equal(name, "foo::bar");
	assert_string_equal(sys, "_ZN3foo3barEv");
	assert_int_equal(gw_sym_handle__symbol_count(h), 1);
	gw_sym_handle__release(h);
	/* Over max_upload_bytes (1 KiB here: 24 bytes per symbol plus names). */
	struct gw_symbol *many = calloc(100, sizeof(*many));
	for (int i = 0; i < 100; i++)
		many[i] = (struct gw_symbol){ .address = 0x1000 + 16 * (uint64_t)i, .size = 16, .name = "f" };
	assert_int_equal(gw_symbolizer__add_upload(s, id2, sizeof(id2), many, 100, ""), -E2BIG);
	free(many);
	struct gw_symbolizer_stats st;
	gw_symbolizer__stats(s, &st);
	assert_int_equal(st.uploads_accepted, 1);
	assert_int_equal(st.uploads_rejected, 4);
	assert_int_equal(st.upload_errors, 1);
	gw_symbolizer_free(s);
}

/* Memory LRU and disk store bounds: old tables leave memory (and come back from disk), old files leave disk. */
static void test_cache_bounds(void **state)
{
	char cache[PATH_MAX];
	struct gw_symbol syms[200];
	char names[200][32];
	struct gw_symbolizer_stats st;
	struct gw_sym_handle *h = NULL;
	const char *name, *sys;

	snprintf(cache, sizeof(cache), "%s/bounded", tmp);
	for (int i = 0; i < 200; i++) {
		snprintf(names[i], sizeof(names[i]), "function_number_%d", i);
		syms[i] =
			(struct gw_symbol){ .address = 0x1000 + 0x100 * (uint64_t)i, .size = 0x100, .name = names[i] };
	}
	/* About 9 KB per table in memory and on disk: room for ~3 in memory, ~5 on disk. */
	struct gw_symbolizer *s = gw_symbolizer_new(&(struct gw_symbolizer_config){
		.demangle = GW_DEMANGLE_NONE,
		.cache_dir = cache,
		.memory_cache_bytes = 30000,
		.disk_cache_bytes = 50000,
	});
	assert_non_null(s);
	for (uint8_t k = 1; k <= 10; k++) {
		uint8_t id[4] = { 0xee, 0, 0, k };
		assert_int_equal(gw_symbolizer__add_upload(s, id, sizeof(id), syms, 200, ""), 0);
	}
	gw_symbolizer__stats(s, &st);
	assert_true(st.evictions >= 6);
	assert_true(st.memory_bytes <= 30000);
	assert_true(st.disk_bytes <= 50000);
	/* The newest is on disk and comes back after eviction from memory; the oldest is gone. */
	uint8_t newest[4] = { 0xee, 0, 0, 10 }, oldest[4] = { 0xee, 0, 0, 1 };
	for (uint8_t k = 7; k <= 9; k++) {
		uint8_t id[4] = { 0xee, 0, 0, k };
		assert_int_equal(gw_symbolizer__acquire(s, id, sizeof(id), NULL, &h), GW_SYM_READY);
		gw_sym_handle__release(h);
	}
	assert_int_equal(gw_symbolizer__acquire(s, newest, sizeof(newest), NULL, &h), GW_SYM_READY);
	assert_int_equal(gw_sym_handle__function(h, 0x1000 + 0x100 * 42 + 7, &name, &sys), 0);
	assert_string_equal(name, "function_number_42");
	gw_sym_handle__release(h);
	assert_int_equal(gw_symbolizer__acquire(s, oldest, sizeof(oldest), NULL, &h), GW_SYM_WANTED);
	gw_symbolizer__stats(s, &st);
	assert_true(st.disk_hits >= 1);
	gw_symbolizer_free(s);
}

/* A kallsyms snapshot uploaded under a kernel ID; runtime addresses of this boot (KASLR included). */
static void test_kernel_kallsyms(void **state)
{
	FILE *f = fopen("/proc/kallsyms", "r");
	char line[512];
	struct symlist l = { 0 };
	size_t pool = 0;
	uint8_t kid[16] = { 'k', 'e', 'r', 'n', 'e', 'l' };
	struct gw_sym_handle *h = NULL;
	struct gw_sym_hint hint = { .is_kernel = true };
	struct gw_symbolizer *s;
	size_t checked = 0;

	if (!f)
		skip();
	l.cap = 1 << 20;
	l.v = calloc(l.cap, sizeof(*l.v));
	l.names = malloc(64 << 20);
	while (fgets(line, sizeof(line), f) && l.n < l.cap) {
		unsigned long long a;
		char type, name[256], mod[128] = "";
		int k = sscanf(line, "%llx %c %255s %127s", &a, &type, name, mod);
		if (k < 3 || a == 0 || !strchr("tTwW", type))
			continue;
		char full[400];
		int fl = snprintf(full, sizeof(full), "%s%s%s", name, mod[0] ? " " : "", mod);
		if (pool + (size_t)fl + 1 > (64u << 20))
			break;
		memcpy(l.names + pool, full, (size_t)fl + 1);
		l.v[l.n++] = (struct gw_symbol){ .address = a, .name = l.names + pool };
		pool += (size_t)fl + 1;
	}
	fclose(f);
	if (l.n < 1000) {
		free(l.v);
		free(l.names);
		skip(); /* not root, or kptr_restrict hides the addresses */
	}
	s = new_sym(NULL, 256ULL << 20);
	assert_int_equal(gw_symbolizer__acquire(s, kid, sizeof(kid), &hint, &h), GW_SYM_WANTED);
	assert_int_equal(gw_symbolizer__add_upload(s, kid, sizeof(kid), l.v, l.n, ""), 0);
	assert_int_equal(gw_symbolizer__acquire(s, kid, sizeof(kid), &hint, &h), GW_SYM_READY);
	/* Every 97th symbol: its start and a byte inside resolve to a symbol at that address. */
	for (size_t i = 0; i < l.n; i += 97) {
		const char *name, *sys;
		uint64_t start, size;
		assert_int_equal(gw_sym_handle__function(h, l.v[i].address, &name, &sys), 0);
		/* Aliases at one address reduce to one name; it must be one of those at that address. */
		bool ok = false;
		/* kallsyms lists aliases next to each other. */
		for (size_t j = i > 64 ? i - 64 : 0; j < l.n && j < i + 64 && !ok; j++)
			ok = l.v[j].address == l.v[i].address && strcmp(l.v[j].name, name) == 0;
		if (!ok)
			fail_msg("0x%llx resolved to %s, which kallsyms does not list there",
				 (unsigned long long)l.v[i].address, name);
		assert_int_equal(gw_sym_handle__symbol_at(h, 0, &start, &size), 0);
		checked++;
	}
	assert_true(checked > 10);
	gw_sym_handle__release(h);
	gw_symbolizer_free(s);
	free(l.v);
	free(l.names);
}

static struct gw_symbolizer *new_sym_dirs(const char *cache_dir, const char *debug_dir)
{
	const char *dirs[] = { debug_dir };
	struct gw_symbolizer *s = gw_symbolizer_new(&(struct gw_symbolizer_config){
		.demangle = GW_DEMANGLE_TEMPLATES,
		.cache_dir = cache_dir,
		.debug_dirs = dirs,
		.n_debug_dirs = 1,
		.notify = on_notify,
	});
	assert_non_null(s);
	return s;
}

static void sh(const char *fmt, ...)
{
	char cmd[PATH_MAX * 4];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	assert_int_equal(system(cmd), 0);
}

/* The poisoned table an attacker uploads: every fixture function renamed. */
static void poison(struct symlist *l, struct symlist *evil)
{
	*evil = *l;
	evil->v = calloc(l->n, sizeof(*evil->v));
	for (size_t i = 0; i < l->n; i++)
		evil->v[i] = (struct gw_symbol){ .address = l->v[i].address, .size = l->v[i].size, .name = "evil" };
}

/*
 * Sources are ranked: an upload never replaces a debug file's table, and a
 * stored upload never shadows a debug file found at the next start.
 */
static void test_upload_outranked(void **state)
{
	const char *fixtures = getenv("SR_TEST_FIXTURES");
	char prog[PATH_MAX], cache[PATH_MAX], debug[PATH_MAX], hex[64];
	struct symlist l = { 0 }, evil;
	uint8_t bid[64];
	struct gw_sym_handle *h = NULL;
	struct gw_symbolizer *s;
	struct gw_symbolizer_stats st;
	const char *name, *sys;
	int n;

	if (system("command -v gcc >/dev/null && command -v nm >/dev/null") != 0)
		skip();
	snprintf(prog, sizeof(prog), "%s/rprog", tmp);
	snprintf(cache, sizeof(cache), "%s/rcache", tmp);
	snprintf(debug, sizeof(debug), "%s/rdebug", tmp);
	sh("gcc -O1 -Wl,--build-id -o '%s' '%s/sym/prog.c'", prog, fixtures ? fixtures : "tests/fixtures");
	read_nm(prog, &l);
	poison(&l, &evil);
	s = new_sym(NULL, 0);
	n = gw_symbolizer__add_file(s, prog, bid, sizeof(bid));
	gw_symbolizer_free(s);
	assert_true(n == 20);
	for (int i = 0; i < n; i++)
		snprintf(hex + 2 * i, 3, "%02x", bid[i]);
	struct gw_sym_hint hint = { .build_id = bid, .build_id_len = (size_t)n };

	/* 1. Nothing local yet: the (asked) upload is taken and stored. */
	s = new_sym_dirs(cache, debug);
	assert_int_equal(gw_symbolizer__acquire(s, bid, (size_t)n, &hint, &h), GW_SYM_WANTED);
	assert_int_equal(gw_symbolizer__add_upload(s, bid, (size_t)n, evil.v, evil.n, ""), 0);
	gw_symbolizer_free(s);

	/* 2. The operator installs the debug file: at the next start it wins over the stored upload. */
	sh("mkdir -p '%s/.build-id/%.2s' && cp '%s' '%s/.build-id/%.2s/%s.debug'", debug, hex, prog, debug, hex,
	   hex + 2);
	s = new_sym_dirs(cache, debug);
	assert_int_equal(gw_symbolizer__acquire(s, bid, (size_t)n, &hint, &h), GW_SYM_READY);
	assert_int_equal(gw_sym_handle__function(h, find(&l, "sr_fixture_leaf"), &name, &sys), 0);
	assert_string_equal(name, "sr_fixture_leaf");
	gw_sym_handle__release(h);

	/* 3. An upload for it now is refused and counted; the names stay. */
	assert_int_equal(gw_symbolizer__add_upload(s, bid, (size_t)n, evil.v, evil.n, ""), -EEXIST);
	gw_symbolizer__stats(s, &st);
	assert_int_equal(st.uploads_outranked, 1);
	assert_int_equal(gw_symbolizer__acquire(s, bid, (size_t)n, &hint, &h), GW_SYM_READY);
	assert_int_equal(gw_sym_handle__function(h, find(&l, "sr_fixture_leaf"), &name, &sys), 0);
	assert_string_equal(name, "sr_fixture_leaf");
	gw_sym_handle__release(h);
	gw_symbolizer_free(s);
	free(evil.v);
	free(l.v);
	free(l.names);
}

/*
 * Debug-directory lookups stay beneath their directory: an agent's path with
 * ".." (how a host library was named) and links out of it are refused and
 * counted; a link that stays inside (Fedora's .build-id layout) works.
 */
static void test_debug_dir_traversal(void **state)
{
	const char *fixtures = getenv("SR_TEST_FIXTURES");
	char prog[PATH_MAX], debug[PATH_MAX], host[PATH_MAX];
	uint8_t id[16] = { 0x77, 1, 2, 3 }, id2[16] = { 0x77, 2 }, id3[16] = { 0x77, 3 };
	struct gw_sym_handle *h = NULL;
	struct gw_symbolizer *s;
	struct gw_symbolizer_stats st;

	if (system("command -v gcc >/dev/null") != 0)
		skip();
	snprintf(prog, sizeof(prog), "%s/tprog", tmp);
	snprintf(debug, sizeof(debug), "%s/tdebug", tmp);
	snprintf(host, sizeof(host), "%s/thost", tmp);
	sh("gcc -O1 -o '%s' '%s/sym/prog.c'", prog, fixtures ? fixtures : "tests/fixtures");
	/* The "host's own library", next to the debug directory; a link out of it; a link within it. */
	sh("mkdir -p '%s/usr/bin' '%s' && cp '%s' '%s/libz.so.1' && ln -s ../thost/libz.so.1 '%s/out.debug' && "
	   "cp '%s' '%s/usr/bin/in.real' && ln -s in.real '%s/usr/bin/in.debug'",
	   debug, host, prog, host, debug, prog, debug, debug);

	s = new_sym_dirs(NULL, debug);
	struct gw_sym_hint dotdot = { .path = "/../thost/x", .debuglink = "libz.so.1" };
	assert_int_equal(gw_symbolizer__acquire(s, id, sizeof(id), &dotdot, &h), GW_SYM_WANTED);
	struct gw_sym_hint out = { .path = "/x", .debuglink = "out.debug" };
	assert_int_equal(gw_symbolizer__acquire(s, id2, sizeof(id2), &out, &h), GW_SYM_WANTED);
	gw_symbolizer__stats(s, &st);
	assert_int_equal(st.debug_paths_dot_dot, 1);
	assert_true(st.debug_paths_escaping >= 1);
	/* A debuglink next to the executable's path, through a link that stays inside: found. */
	struct gw_sym_hint in = { .path = "/usr/bin/in", .debuglink = "in.debug" };
	assert_int_equal(gw_symbolizer__acquire(s, id3, sizeof(id3), &in, &h), GW_SYM_READY);
	gw_sym_handle__release(h);
	gw_symbolizer_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_upload_resolves_and_persists),
		cmocka_unit_test(test_upload_error_and_limits),
		cmocka_unit_test(test_cache_bounds),
		cmocka_unit_test(test_kernel_kallsyms),
		cmocka_unit_test(test_upload_outranked),
		cmocka_unit_test(test_debug_dir_traversal),
	};
	return cmocka_run_group_tests_name("sym-upload", tests, setup, teardown);
}
