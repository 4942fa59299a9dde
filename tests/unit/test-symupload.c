// SPDX-License-Identifier: Apache-2.0
/*
 * Symbol extraction from real ELF files the test builds with the system
 * toolchain: an executable with .symtab, a stripped shared library (.dynsym
 * only), a stripped executable with MiniDebugInfo made with the standard
 * objcopy/xz recipe, and files that are not what they claim.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <pb_decode.h>

#include "agent/symupload.h"

static char dir[256];

static const char prog_c[] =
	"#include <stdio.h>\n"
	"static int __attribute__((noinline)) local_helper(int x) { return x * 3 + 1; }\n"
	"int __attribute__((noinline)) exported_worker(int x) { return local_helper(x) + 2; }\n"
	"int main(int argc, char **argv) { printf(\"%d\\n\", exported_worker(argc)); return 0; }\n";

static const char lib_c[] = "static int __attribute__((noinline)) lib_private(int x) { return x + 7; }\n"
			    "int lib_public_one(int x) { return lib_private(x) * 2; }\n"
			    "int lib_public_two(int x) { return lib_private(x) * 5; }\n";

static int sh(const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;
	int r;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	r = system(cmd);
	return r == 0 ? 0 : -1;
}

static int setup(void **state)
{
	FILE *f;
	char path[512];

	snprintf(dir, sizeof(dir), "%s/sr-symupload-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(dir))
		return -1;
	snprintf(path, sizeof(path), "%s/prog.c", dir);
	f = fopen(path, "w");
	fputs(prog_c, f);
	fclose(f);
	snprintf(path, sizeof(path), "%s/lib.c", dir);
	f = fopen(path, "w");
	fputs(lib_c, f);
	fclose(f);
	return 0;
}

static int teardown(void **state)
{
	sh("rm -rf '%s'", dir);
	return 0;
}

static bool have(const char *tool)
{
	return sh("command -v %s >/dev/null 2>&1", tool) == 0;
}

static int extract_file(const char *name, uint64_t max_bytes, stackrelay_v1_SymbolTable *t)
{
	char path[512];
	int fd, r;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	memset(t, 0, sizeof(*t));
	r = agent_symupload_extract_fd(fd, max_bytes, t);
	close(fd);
	return r;
}

static const stackrelay_v1_Symbol *find(const stackrelay_v1_SymbolTable *t, const char *name)
{
	for (pb_size_t i = 0; i < t->symbols_count; i++)
		if (t->symbols[i].name && strcmp(t->symbols[i].name, name) == 0)
			return &t->symbols[i];
	return NULL;
}

static bool has_source(const stackrelay_v1_SymbolTable *t, const char *src)
{
	for (pb_size_t i = 0; i < t->sources_count; i++)
		if (strcmp(t->sources[i], src) == 0)
			return true;
	return false;
}

static void assert_sorted_unique(const stackrelay_v1_SymbolTable *t)
{
	for (pb_size_t i = 1; i < t->symbols_count; i++)
		assert_true(*t->symbols[i - 1].address < *t->symbols[i].address);
}

static void test_symtab(void **state)
{
	stackrelay_v1_SymbolTable t;
	const stackrelay_v1_Symbol *s;

	if (!have("cc"))
		skip();
	assert_int_equal(sh("cd '%s' && cc -O1 -g0 -o prog prog.c", dir), 0);
	assert_int_equal(extract_file("prog", 1 << 20, &t), 0);
	assert_true(has_source(&t, ".symtab"));
	assert_non_null(find(&t, "main"));
	s = find(&t, "local_helper");
	assert_non_null(s);
	assert_non_null(s->size);
	assert_true(*s->size > 0);
	assert_non_null(find(&t, "exported_worker"));
	/* Imports (printf) are undefined here and must not appear. */
	assert_null(find(&t, "printf"));
	assert_sorted_unique(&t);
	pb_release(stackrelay_v1_SymbolTable_fields, &t);
}

static void test_dynsym_only(void **state)
{
	stackrelay_v1_SymbolTable t;

	if (!have("cc") || !have("strip"))
		skip();
	assert_int_equal(sh("cd '%s' && cc -O1 -g0 -shared -fPIC -o lib.so lib.c && strip --strip-all lib.so", dir), 0);
	assert_int_equal(extract_file("lib.so", 1 << 20, &t), 0);
	assert_false(has_source(&t, ".symtab"));
	assert_true(has_source(&t, ".dynsym"));
	assert_non_null(find(&t, "lib_public_one"));
	assert_non_null(find(&t, "lib_public_two"));
	assert_null(find(&t, "lib_private")); /* local: gone with .symtab */
	assert_sorted_unique(&t);
	pb_release(stackrelay_v1_SymbolTable_fields, &t);
}

static void test_stripped_executable_has_nothing(void **state)
{
	stackrelay_v1_SymbolTable t;

	if (!have("cc") || !have("strip"))
		skip();
	assert_int_equal(sh("cd '%s' && cc -O1 -g0 -o prog-stripped prog.c && strip --strip-all prog-stripped", dir),
			 0);
	assert_int_equal(extract_file("prog-stripped", 1 << 20, &t), -ENODATA);
	assert_int_equal(t.symbols_count, 0);
}

static void test_minidebuginfo(void **state)
{
	stackrelay_v1_SymbolTable t;

	if (!have("cc") || !have("objcopy") || !have("xz") || !have("nm") || !have("strip"))
		skip();
	/* The recipe of GDB's manual ("MiniDebugInfo"), as distributions run it. */
	assert_int_equal(
		sh("cd '%s' && cc -O1 -g -rdynamic -o mini prog.c && "
		   "nm -D mini --format=posix --defined-only | awk '{ print $1 }' | sort > dynsyms && "
		   "nm mini --format=posix --defined-only | awk '{ if ($2 == \"T\" || $2 == \"t\") print $1 }'"
		   " | sort > funcsyms && "
		   "comm -13 dynsyms funcsyms > keep_symbols && "
		   "objcopy --only-keep-debug mini debuginfo && "
		   "objcopy -S --remove-section .gdb_index --remove-section .comment --keep-symbols=keep_symbols "
		   "debuginfo mini_debuginfo && "
		   "xz -f mini_debuginfo && "
		   "strip --strip-all -R .comment mini && "
		   "objcopy --add-section .gnu_debugdata=mini_debuginfo.xz mini",
		   dir),
		0);
	assert_int_equal(extract_file("mini", 1 << 20, &t), 0);
	assert_false(has_source(&t, ".symtab"));
	assert_true(has_source(&t, ".dynsym"));
	assert_true(has_source(&t, ".gnu_debugdata"));
	/* Only MiniDebugInfo knows the static function; .dynsym knows the exported ones. */
	assert_non_null(find(&t, "local_helper"));
	assert_non_null(find(&t, "exported_worker"));
	assert_non_null(find(&t, "main"));
	assert_sorted_unique(&t);
	pb_release(stackrelay_v1_SymbolTable_fields, &t);
}

static void test_limits_and_garbage(void **state)
{
	stackrelay_v1_SymbolTable t = stackrelay_v1_SymbolTable_init_zero;
	char path[512];
	uint8_t *buf;
	struct stat st;
	int fd;

	if (!have("cc"))
		skip();
	assert_int_equal(sh("cd '%s' && cc -O1 -o prog2 prog.c && cc -c -o obj.o lib.c && echo 'not elf' > text", dir),
			 0);
	/* Too large for the limit: refused whole, not cut. */
	assert_int_equal(extract_file("prog2", 64, &t), -EFBIG);
	assert_int_equal(t.symbols_count, 0);
	assert_int_equal(extract_file("text", 1 << 20, &t), -ENOEXEC);
	/* A relocatable object holds section offsets, not addresses. */
	assert_int_equal(extract_file("obj.o", 1 << 20, &t), -ENOEXEC);

	/* Every truncation of a real file: errors or fewer symbols, never a crash. */
	snprintf(path, sizeof(path), "%s/prog2", dir);
	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	buf = malloc((size_t)st.st_size);
	assert_int_equal(read(fd, buf, (size_t)st.st_size), st.st_size);
	close(fd);
	for (off_t len = 0; len < st.st_size; len += len < 256 ? 1 : 97) {
		int r = agent_symupload_extract_mem(buf, (size_t)len, 1 << 20, &t);

		assert_true(r == 0 || r == -ENOEXEC || r == -ENODATA);
		pb_release(stackrelay_v1_SymbolTable_fields, &t);
		memset(&t, 0, sizeof(t));
	}
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_symtab),
		cmocka_unit_test(test_dynsym_only),
		cmocka_unit_test(test_stripped_executable_has_nothing),
		cmocka_unit_test(test_minidebuginfo),
		cmocka_unit_test(test_limits_and_garbage),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
