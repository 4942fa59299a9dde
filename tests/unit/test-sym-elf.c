// SPDX-License-Identifier: Apache-2.0
/*
 * The symbolizer against real binaries built at test time from
 * tests/fixtures/sym (gcc, g++, go), with binutils/elfutils as independent
 * truth (nm, objcopy, readelf): .symtab, DWARF lines and inlined frames,
 * stripped binaries with their debug file found by build ID or
 * .gnu_debuglink, MiniDebugInfo, C++ demangling in every mode, stripped Go.
 * A test whose compiler is missing is skipped.
 */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "symbolize.h"

static char tmp[256];
static char fixtures[PATH_MAX];

static int shv(bool quiet, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
static int shv(bool quiet, const char *fmt, va_list ap)
{
	char cmd[8192];
	int r;

	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	r = system(cmd);
	if (r != 0 && !quiet)
		fprintf(stderr, "command failed (%d): %s\n", r, cmd);
	return r;
}

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = shv(false, fmt, ap);
	va_end(ap);
	return r;
}

/* For commands expected to fail (a grep that must find nothing). */
static int sh_quiet(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh_quiet(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = shv(true, fmt, ap);
	va_end(ap);
	return r;
}

/* First line of a command's output, trimmed; "" on failure. */
static const char *sh_line(const char *cmd)
{
	static char buf[1024];
	FILE *f = popen(cmd, "r");

	buf[0] = '\0';
	if (!f)
		return buf;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = '\0';
	pclose(f);
	buf[strcspn(buf, "\r\n")] = '\0';
	return buf;
}

static bool have(const char *tool)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "command -v %s >/dev/null 2>&1", tool);
	return system(cmd) == 0;
}

/* Address and size of sym in file, from nm (independent of our ELF reader). */
static uint64_t nm_sym(const char *file, const char *sym, uint64_t *ret_size)
{
	char cmd[PATH_MAX + 256];
	unsigned long long a = 0, sz = 0;

	snprintf(cmd, sizeof(cmd), "nm -P -S '%s' | awk '$1 == \"%s\" { print $3, $4 }'", file, sym);
	const char *l = sh_line(cmd);
	if (sscanf(l, "%llx %llx", &a, &sz) < 1)
		fail_msg("nm: %s not found in %s", sym, file);
	if (ret_size)
		*ret_size = sz;
	return a;
}

static int marker_line(const char *file, const char *mark)
{
	FILE *f = fopen(file, "r");
	char line[512];
	int n = 0;

	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		n++;
		if (strstr(line, mark)) {
			fclose(f);
			return n;
		}
	}
	fclose(f);
	fail_msg("marker %s not in %s", mark, file);
	return 0;
}

static size_t hex_to_bytes(const char *hex, uint8_t *out, size_t max)
{
	size_t n = 0;

	while (hex[0] && hex[1] && n < max) {
		unsigned v;
		if (sscanf(hex, "%2x", &v) != 1)
			break;
		out[n++] = (uint8_t)v;
		hex += 2;
	}
	return n;
}

static size_t build_id_of(const char *file, uint8_t *out)
{
	char cmd[PATH_MAX + 128];

	snprintf(cmd, sizeof(cmd), "readelf -n '%s' | awk '/Build ID:/ { print $3 }'", file);
	return hex_to_bytes(sh_line(cmd), out, 64);
}

static struct gw_symbolizer *new_sym(enum gw_demangle_mode mode, const char *cache_dir, const char *debug_dir)
{
	const char *dirs[1] = { debug_dir };
	struct gw_symbolizer *s = gw_symbolizer_new(&(struct gw_symbolizer_config){
		.demangle = mode,
		.cache_dir = cache_dir,
		.debug_dirs = debug_dir ? dirs : NULL,
		.n_debug_dirs = debug_dir ? 1 : 0,
	});
	assert_non_null(s);
	return s;
}

static struct gw_sym_handle *add_and_acquire(struct gw_symbolizer *s, const char *file)
{
	uint8_t id[64];
	struct gw_sym_handle *h = NULL;
	int n = gw_symbolizer__add_file(s, file, id, sizeof(id));

	if (n < 0)
		fail_msg("add_file %s: %s", file, strerror(-n));
	assert_int_equal(gw_symbolizer__acquire(s, id, (size_t)n, NULL, &h), GW_SYM_READY);
	return h;
}

static const char *func_at(struct gw_sym_handle *h, uint64_t addr)
{
	const char *name, *sys;

	return gw_sym_handle__function(h, addr, &name, &sys) == 0 ? name : NULL;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);

	return a >= b && strcmp(s + a - b, suffix) == 0;
}

static int setup(void **state)
{
	const char *f = getenv("SR_TEST_FIXTURES");

	snprintf(fixtures, sizeof(fixtures), "%s/sym", f ? f : "tests/fixtures");
	snprintf(tmp, sizeof(tmp), "/tmp/sr-test-sym-elf.XXXXXX");
	if (!mkdtemp(tmp))
		return -1;
	if (have("gcc") && sh("cd %s && gcc -O1 -g -o prog %s/prog.c", tmp, fixtures) != 0)
		return -1;
	return 0;
}

static int teardown(void **state)
{
	if (tmp[0])
		sh("rm -rf '%s'", tmp);
	return 0;
}

static void test_symtab_lines_inline(void **state)
{
	char prog[PATH_MAX], src[PATH_MAX + 16];
	uint64_t size, leaf;
	struct gw_sym_result *r = malloc(sizeof(*r));
	struct gw_symbolizer *s;
	struct gw_sym_handle *h;
	bool found_inline = false;

	if (!have("gcc"))
		skip();
	snprintf(prog, sizeof(prog), "%s/prog", tmp);
	snprintf(src, sizeof(src), "%s/prog.c", fixtures);
	s = new_sym(GW_DEMANGLE_TEMPLATES, NULL, NULL);
	h = add_and_acquire(s, prog);
	assert_true(gw_sym_handle__has_lines(h));
	leaf = nm_sym(prog, "sr_fixture_leaf", &size);
	assert_true(size > 0);
	assert_string_equal(func_at(h, leaf), "sr_fixture_leaf");
	assert_string_equal(func_at(h, leaf + size - 1), "sr_fixture_leaf");
	assert_string_equal(func_at(h, nm_sym(prog, "sr_fixture_middle", NULL)), "sr_fixture_middle");
	assert_string_equal(func_at(h, nm_sym(prog, "main", NULL)), "main");

	int inner = marker_line(src, "MARK:inner"), call = marker_line(src, "MARK:call");
	for (uint64_t a = leaf; a < leaf + size; a++) {
		int n = gw_sym_handle__resolve(h, a, r);
		assert_true(n >= 1);
		/* The outermost line is always the out-of-line function, with a file and line. */
		assert_string_equal(r->lines[n - 1].function, "sr_fixture_leaf");
		assert_true(ends_with(r->lines[n - 1].file, "prog.c"));
		assert_true(r->lines[n - 1].line > 0);
		if (n == 2 && strcmp(r->lines[0].function, "sr_fixture_inline_add") == 0) {
			found_inline = true;
			assert_true(ends_with(r->lines[0].file, "prog.c"));
			assert_int_equal(r->lines[0].line, inner);
			assert_int_equal(r->lines[1].line, call); /* the call site of the inlined function */
			assert_true(r->lines[0].start_line > 0);
		}
	}
	assert_true(found_inline);
	gw_sym_handle__release(h);
	gw_symbolizer_free(s);
	free(r);
}

static void test_stripped_debug_dir_and_store(void **state)
{
	char dbg[PATH_MAX], cache[PATH_MAX], hex[129], stripped[PATH_MAX];
	uint8_t bid[64];
	size_t bl;
	struct gw_symbolizer *s;
	struct gw_sym_handle *h = NULL;
	struct gw_sym_result *r = malloc(sizeof(*r));
	struct gw_symbolizer_stats st;

	if (!have("gcc") || !have("objcopy"))
		skip();
	snprintf(stripped, sizeof(stripped), "%s/prog.stripped", tmp);
	assert_int_equal(
		sh("cd %s && objcopy --only-keep-debug prog prog.debug && objcopy --strip-all prog prog.stripped", tmp),
		0);
	bl = build_id_of(stripped, bid);
	assert_true(bl >= 16);
	gw_sym_hex(bid, bl, hex, sizeof(hex));
	snprintf(dbg, sizeof(dbg), "%s/debug", tmp);
	snprintf(cache, sizeof(cache), "%s/cache", tmp);
	assert_int_equal(sh("mkdir -p %s/.build-id/%.2s && cp %s/prog.debug %s/.build-id/%.2s/%s.debug", dbg, hex, tmp,
			    dbg, hex, hex + 2),
			 0);
	/* The stripped file alone has nothing to name sr_fixture_leaf with. */
	assert_int_not_equal(sh_quiet("nm %s 2>/dev/null | grep -q sr_fixture_leaf", stripped), 0);

	uint64_t size, leaf;
	char prog[PATH_MAX];
	snprintf(prog, sizeof(prog), "%s/prog", tmp);
	leaf = nm_sym(prog, "sr_fixture_leaf", &size);

	s = new_sym(GW_DEMANGLE_TEMPLATES, cache, dbg);
	struct gw_sym_hint hint = { .build_id = bid, .build_id_len = bl };
	assert_int_equal(gw_symbolizer__acquire(s, bid, bl, &hint, &h), GW_SYM_READY);
	assert_true(gw_sym_handle__has_lines(h));
	assert_true(gw_sym_handle__resolve(h, leaf + 1, r) >= 1);
	assert_string_equal(r->lines[r->n - 1].function, "sr_fixture_leaf");
	assert_true(r->lines[r->n - 1].line > 0);
	gw_sym_handle__release(h);
	gw_symbolizer_free(s);

	/* A new symbolizer without the debug directory finds the table in its store. */
	s = new_sym(GW_DEMANGLE_TEMPLATES, cache, NULL);
	assert_int_equal(gw_symbolizer__acquire(s, bid, bl, &hint, &h), GW_SYM_READY);
	assert_string_equal(func_at(h, leaf + 2), "sr_fixture_leaf");
	gw_symbolizer__stats(s, &st);
	assert_int_equal(st.disk_hits, 1);
	assert_true(st.disk_bytes > 0);
	gw_sym_handle__release(h);
	gw_symbolizer_free(s);

	/* Without any source it is wanted from the agent. */
	s = new_sym(GW_DEMANGLE_TEMPLATES, NULL, NULL);
	assert_int_equal(gw_symbolizer__acquire(s, bid, bl, &hint, &h), GW_SYM_WANTED);
	assert_null(h);
	gw_symbolizer_free(s);
	free(r);
}

static void test_debuglink(void **state)
{
	char dbg[PATH_MAX], prog[PATH_MAX];
	uint8_t id[16] = { 0xc0, 0xff, 0xee, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13 };
	struct gw_symbolizer *s;
	struct gw_sym_handle *h = NULL;
	uint64_t leaf;

	if (!have("gcc") || !have("objcopy"))
		skip();
	snprintf(dbg, sizeof(dbg), "%s/debuglink", tmp);
	snprintf(prog, sizeof(prog), "%s/prog", tmp);
	leaf = nm_sym(prog, "sr_fixture_leaf", NULL);
	assert_int_equal(sh("cd %s && objcopy --only-keep-debug prog prog.dbg2 && mkdir -p %s/usr/bin && "
			    "cp prog.dbg2 %s/usr/bin/prog.debug",
			    tmp, dbg, dbg),
			 0);
	s = new_sym(GW_DEMANGLE_TEMPLATES, NULL, dbg);
	/* A content-hash ID (no build ID): the .gnu_debuglink name next to the path finds it. */
	struct gw_sym_hint hint = { .path = "/usr/bin/prog", .debuglink = "prog.debug" };
	assert_int_equal(gw_symbolizer__acquire(s, id, sizeof(id), &hint, &h), GW_SYM_READY);
	assert_string_equal(func_at(h, leaf), "sr_fixture_leaf");
	gw_sym_handle__release(h);
	gw_symbolizer_free(s);
}

static void test_minidebuginfo(void **state)
{
	char mini[PATH_MAX], prog[PATH_MAX];
	struct gw_symbolizer *s;
	struct gw_sym_handle *h;
	uint64_t leaf, middle;

	if (!have("gcc") || !have("objcopy") || !have("xz"))
		skip();
	snprintf(prog, sizeof(prog), "%s/prog", tmp);
	snprintf(mini, sizeof(mini), "%s/prog.mini", tmp);
	leaf = nm_sym(prog, "sr_fixture_leaf", NULL);
	middle = nm_sym(prog, "sr_fixture_middle", NULL);
	/* The recipe of Fedora's find-debuginfo (gdb's "MiniDebugInfo"). */
	assert_int_equal(
		sh("cd %s && nm -D prog --format=posix --defined-only | awk '{ print $1 }' | sort > dynsyms && "
		   "nm prog --format=posix --defined-only | awk '$2 == \"T\" || $2 == \"t\" { print $1 }' | sort > "
		   "funcsyms && "
		   "comm -13 dynsyms funcsyms > keep && objcopy --only-keep-debug prog mini.full && "
		   "objcopy -S --remove-section .gdb_index --remove-section .comment --keep-symbols=keep mini.full "
		   "mini && "
		   "rm -f mini.xz && xz -k mini && objcopy --strip-all --add-section .gnu_debugdata=mini.xz prog "
		   "prog.mini",
		   tmp),
		0);
	assert_int_not_equal(sh_quiet("nm %s 2>/dev/null | grep -q sr_fixture_leaf", mini), 0);
	s = new_sym(GW_DEMANGLE_TEMPLATES, NULL, NULL);
	h = add_and_acquire(s, mini);
	assert_false(gw_sym_handle__has_lines(h));
	assert_string_equal(func_at(h, leaf + 1), "sr_fixture_leaf");
	assert_string_equal(func_at(h, middle), "sr_fixture_middle");
	gw_sym_handle__release(h);
	gw_symbolizer_free(s);
}

static void test_cplusplus_modes(void **state)
{
	static const char *const want[_GW_DEMANGLE_MAX] = {
		"_ZNK2sr3BoxIiE3getEi",
		"sr::Box::get",
		"sr::Box<int>::get",
		"sr::Box<int>::get(int) const",
	};
	char tpl[PATH_MAX];
	uint64_t addr;

	if (!have("g++"))
		skip();
	assert_int_equal(sh("cd %s && g++ -O1 -o tpl %s/templates.cc", tmp, fixtures), 0);
	snprintf(tpl, sizeof(tpl), "%s/tpl", tmp);
	addr = nm_sym(tpl, "_ZNK2sr3BoxIiE3getEi", NULL);
	for (int m = 0; m < _GW_DEMANGLE_MAX; m++) {
		struct gw_symbolizer *s = new_sym((enum gw_demangle_mode)m, NULL, NULL);
		struct gw_sym_handle *h = add_and_acquire(s, tpl);
		const char *name, *sys;
		assert_int_equal(gw_sym_handle__function(h, addr + 1, &name, &sys), 0);
		assert_string_equal(name, want[m]);
		assert_string_equal(sys, "_ZNK2sr3BoxIiE3getEi");
		gw_sym_handle__release(h);
		gw_symbolizer_free(s);
	}
}

static void check_go(const char *flags)
{
	char bin[PATH_MAX], full[PATH_MAX];
	struct gw_symbolizer *s;
	struct gw_sym_handle *h;

	assert_int_equal(
		sh("cd %s && export HOME=%s GOCACHE=%s/gocache GOPATH=%s/gopath GO111MODULE=off GOFLAGS= && "
		   "go build %s -ldflags='-s -w' -o hello %s/hello.go && go build %s -o hello.full %s/hello.go",
		   tmp, tmp, tmp, tmp, flags, fixtures, flags, fixtures),
		0);
	snprintf(bin, sizeof(bin), "%s/hello", tmp);
	snprintf(full, sizeof(full), "%s/hello.full", tmp);
	/* Stripped indeed: no symbol table left for nm. */
	assert_int_not_equal(sh_quiet("nm %s 2>/dev/null | grep -q srFixtureWork", bin), 0);
	s = new_sym(GW_DEMANGLE_TEMPLATES, NULL, NULL);
	h = add_and_acquire(s, bin);
	assert_string_equal(func_at(h, nm_sym(full, "main.srFixtureWork", NULL) + 1), "main.srFixtureWork");
	assert_string_equal(func_at(h, nm_sym(full, "main.main", NULL)), "main.main");
	assert_string_equal(func_at(h, nm_sym(full, "runtime.mallocgc", NULL) + 4), "runtime.mallocgc");
	assert_true(gw_sym_handle__symbol_count(h) > 1000);
	gw_sym_handle__release(h);
	gw_symbolizer_free(s);
}

static void test_go_stripped(void **state)
{
	if (!have("go"))
		skip();
	check_go("");
}

static void test_go_stripped_pie(void **state)
{
	if (!have("go"))
		skip();
	/* PIE: the pclntab lives inside .data.rel.ro, found by its header. */
	check_go("-buildmode=pie");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_symtab_lines_inline), cmocka_unit_test(test_stripped_debug_dir_and_store),
		cmocka_unit_test(test_debuglink),	    cmocka_unit_test(test_minidebuginfo),
		cmocka_unit_test(test_cplusplus_modes),	    cmocka_unit_test(test_go_stripped),
		cmocka_unit_test(test_go_stripped_pie),
	};
	return cmocka_run_group_tests_name("sym-elf", tests, setup, teardown);
}
