// SPDX-License-Identifier: Apache-2.0
/*
 * Symbol extraction from real ELF files the test builds with the system
 * toolchain: an executable with .symtab, a stripped shared library (.dynsym
 * only), a stripped executable with MiniDebugInfo made with the standard
 * objcopy/xz recipe, a Go program stripped with -ldflags='-s -w' (named from
 * .gopclntab, addresses checked against the unstripped build's .symtab), files
 * that are not what they claim; and kernel tables from kallsyms text (modules,
 * aliases, hidden addresses) and from this machine's /proc/kallsyms.
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

static const char go_main[] = "package main\n"
			      "\n"
			      "import \"os\"\n"
			      "\n"
			      "//go:noinline\n"
			      "func spinAlpha(n int) int {\n"
			      "\ts := 0\n"
			      "\tfor i := 0; i < n; i++ {\n"
			      "\t\ts += i ^ (s >> 3)\n"
			      "\t}\n"
			      "\treturn s\n"
			      "}\n"
			      "\n"
			      "func main() { os.Exit(spinAlpha(len(os.Args)) & 0) }\n";

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
	snprintf(path, sizeof(path), "%s/main.go", dir);
	f = fopen(path, "w");
	fputs(go_main, f);
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

static int extract_file(const char *name, uint64_t max_bytes, struct agent_symtab *t)
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

static const stackrelay_v1_Symbol *find(const struct agent_symtab *t, const char *name)
{
	for (size_t i = 0; i < t->n_symbols; i++) {
		const stackrelay_v1_Symbol *s = agent_symtab__symbol(t, i);
		if (s->name && strcmp(s->name, name) == 0)
			return s;
	}
	return NULL;
}

static bool has_source(const struct agent_symtab *t, const char *src)
{
	for (pb_size_t i = 0; t->n_parts && i < t->parts[0].sources_count; i++)
		if (strcmp(t->parts[0].sources[i], src) == 0)
			return true;
	return false;
}

static void assert_sorted_unique(const struct agent_symtab *t)
{
	for (size_t i = 1; i < t->n_symbols; i++)
		assert_true(*agent_symtab__symbol(t, i - 1)->address < *agent_symtab__symbol(t, i)->address);
}

static void test_symtab(void **state)
{
	struct agent_symtab t;
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
	agent_symtab_release(&t);
}

static void test_dynsym_only(void **state)
{
	struct agent_symtab t;

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
	agent_symtab_release(&t);
}

static void test_stripped_executable_has_nothing(void **state)
{
	struct agent_symtab t;

	if (!have("cc") || !have("strip"))
		skip();
	assert_int_equal(sh("cd '%s' && cc -O1 -g0 -o prog-stripped prog.c && strip --strip-all prog-stripped", dir),
			 0);
	assert_int_equal(extract_file("prog-stripped", 1 << 20, &t), -ENODATA);
	assert_int_equal(t.n_symbols, 0);
}

static void test_minidebuginfo(void **state)
{
	struct agent_symtab t;

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
	agent_symtab_release(&t);
}

static void test_limits_and_garbage(void **state)
{
	struct agent_symtab t = { 0 };
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
	assert_int_equal(t.n_symbols, 0);
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
		agent_symtab_release(&t);
		memset(&t, 0, sizeof(t));
	}
	free(buf);
}

/* The address nm gives a symbol of the named file, or 0. */
static uint64_t nm_address(const char *file, const char *sym)
{
	char cmd[1024], line[512];
	uint64_t addr = 0;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "nm '%s/%s' 2>/dev/null | awk '$3 == \"%s\" { print $1; exit }'", dir, file, sym);
	p = popen(cmd, "r");
	if (!p)
		return 0;
	if (fgets(line, sizeof(line), p))
		addr = strtoull(line, NULL, 16);
	pclose(p);
	return addr;
}

static void test_go_stripped(void **state)
{
	struct agent_symtab t;
	const stackrelay_v1_Symbol *s, *m;
	uint64_t want;

	if (!have("go") || !have("nm")) {
		fprintf(stderr, "SKIP: go (Debian golang-go) or nm not installed\n");
		skip();
	}
	/* Go needs a writable cache; nothing is downloaded (no modules). */
	assert_int_equal(
		sh("cd '%s' && export GOCACHE='%s/gocache' GOPATH='%s/gopath' GOFLAGS= GO111MODULE=auto "
		   "GOTOOLCHAIN=local && go build -o gofull main.go && go build -ldflags='-s -w' -o gostripped "
		   "main.go",
		   dir, dir, dir),
		0);
	/* Really stripped: no .symtab, so the ELF symbol sources give nothing. */
	assert_int_equal(sh("readelf -S '%s/gostripped' | grep -q '\\.symtab'", dir) == 0, false);
	assert_int_equal(extract_file("gostripped", 64 << 20, &t), 0);
	assert_true(has_source(&t, ".gopclntab"));
	s = find(&t, "main.spinAlpha");
	m = find(&t, "main.main");
	assert_non_null(s);
	assert_non_null(m);
	assert_non_null(find(&t, "runtime.mallocgc"));
	assert_non_null(s->size);
	assert_true(*s->size > 0);
	/* Same addresses as the linker's own symbols in the unstripped build (-s -w moves no code). */
	want = nm_address("gofull", "main.spinAlpha");
	assert_true(want != 0);
	assert_int_equal(*s->address, want);
	assert_int_equal(*m->address, nm_address("gofull", "main.main"));
	assert_sorted_unique(&t);
	agent_symtab_release(&t);
	/* Unstripped, .symtab names everything and the pclntab is not read again. */
	assert_int_equal(extract_file("gofull", 64 << 20, &t), 0);
	assert_true(has_source(&t, ".symtab"));
	assert_false(has_source(&t, ".gopclntab"));
	agent_symtab_release(&t);
}

/* PIE layouts: the table in .data.rel.ro.gopclntab (internal linking) or inside .data.rel.ro (external). */
static void test_go_stripped_pie(void **state)
{
	static const char *const modes[] = { "", "-linkmode=external" };
	struct agent_symtab t;
	char name[64];

	if (!have("go") || !have("nm") || !have("gcc"))
		skip();
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		assert_int_equal(
			sh("cd '%s' && export GOCACHE='%s/gocache' GOPATH='%s/gopath' GOFLAGS= "
			   "GO111MODULE=auto GOTOOLCHAIN=local && go build -buildmode=pie -ldflags='%s' -o "
			   "gopie%zu.full main.go && go build -buildmode=pie -ldflags='-s -w %s' -o gopie%zu main.go",
			   dir, dir, dir, modes[i], i, modes[i], i),
			0);
		snprintf(name, sizeof(name), "gopie%zu", i);
		assert_int_equal(extract_file(name, 64 << 20, &t), 0);
		assert_true(has_source(&t, ".gopclntab"));
		const stackrelay_v1_Symbol *s = find(&t, "main.spinAlpha");
		assert_non_null(s);
		snprintf(name, sizeof(name), "gopie%zu.full", i);
		assert_int_equal(*s->address, nm_address(name, "main.spinAlpha"));
		assert_sorted_unique(&t);
		agent_symtab_release(&t);
	}
}

static void test_go_pclntab_garbage(void **state)
{
	struct agent_symtab t = { 0 };
	char path[512];
	uint8_t *buf;
	struct stat st;
	size_t off = 0;
	int fd;

	if (!have("go"))
		skip();
	snprintf(path, sizeof(path), "%s/gostripped", dir);
	if (access(path, R_OK) != 0)
		skip(); /* test_go_stripped builds it */
	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	buf = malloc((size_t)st.st_size);
	assert_int_equal(read(fd, buf, (size_t)st.st_size), st.st_size);
	close(fd);
	/* Find the pclntab (its magic, Go 1.18+/1.20: f0/f1 ff ff ff 00 00) and corrupt its header and body. */
	for (size_t i = 0; i + 8 < (size_t)st.st_size; i++)
		if ((buf[i] == 0xf0 || buf[i] == 0xf1) && buf[i + 1] == 0xff && buf[i + 2] == 0xff &&
		    buf[i + 3] == 0xff && buf[i + 4] == 0 && buf[i + 5] == 0 && buf[i + 7] == 8) {
			off = i;
			break;
		}
	assert_true(off > 0);
	for (size_t k = 8; k < 200; k += 8) {
		uint8_t save[8];

		memcpy(save, buf + off + k, 8);
		memset(buf + off + k, 0xff, 8);
		int r = agent_symupload_extract_mem(buf, (size_t)st.st_size, 64 << 20, &t);
		/* A malformed table is skipped (nothing else names this binary), never a crash. */
		assert_true(r == 0 || r == -ENODATA);
		agent_symtab_release(&t);
		memset(&t, 0, sizeof(t));
		memcpy(buf + off + k, save, 8);
	}
	free(buf);
}

static const char kallsyms_text[] = "ffffffff81000000 T _stext\n"
				    "ffffffff81000000 T _text\n"
				    "ffffffff81001000 t __pfx_do_one\n"
				    "ffffffff81001010 t do_one\n"
				    "ffffffff81001010 T __do_one\n"
				    "ffffffff81002000 W weak_fn\n"
				    "ffffffff81003000 D some_data\n"
				    "ffffffff81004000 r some_rodata\n"
				    "garbage line\n"
				    "\n"
				    "ffffffffc0a01000 t mod_fn\t[kvm]\n"
				    "ffffffffc0a02000 T mod_exported\t[kvm_intel]\n"
				    "ffffffffc0a03000 t bpf_prog_6deef7357e7b4530\t[bpf]";

static void test_kallsyms_text(void **state)
{
	struct agent_symtab t = { 0 };

	assert_int_equal(agent_symupload_kallsyms_mem(kallsyms_text, strlen(kallsyms_text), NULL, 0, 1 << 20, &t), 0);
	assert_true(has_source(&t, "kallsyms"));
	/* Functions only; one name per address: global beats local, then fewer underscores, shorter. */
	assert_int_equal(t.n_symbols, 7);
	assert_non_null(find(&t, "_text"));
	assert_null(find(&t, "_stext"));
	assert_non_null(find(&t, "__pfx_do_one"));
	assert_non_null(find(&t, "__do_one"));
	assert_null(find(&t, "do_one"));
	assert_non_null(find(&t, "weak_fn"));
	assert_null(find(&t, "some_data"));
	assert_null(find(&t, "some_rodata"));
	/* Module symbols as the gateway's kallsyms parser names them. */
	assert_non_null(find(&t, "mod_fn [kvm]"));
	assert_int_equal(*find(&t, "mod_fn [kvm]")->address, 0xffffffffc0a01000ULL);
	assert_non_null(find(&t, "mod_exported [kvm_intel]"));
	assert_non_null(find(&t, "bpf_prog_6deef7357e7b4530 [bpf]"));
	/* No sizes: kallsyms has none; the gateway ends a symbol at the next one. */
	assert_null(find(&t, "_text")->size);
	assert_sorted_unique(&t);
	agent_symtab_release(&t);
	memset(&t, 0, sizeof(t));

	/* Over the byte limit: refused whole. */
	assert_int_equal(agent_symupload_kallsyms_mem(kallsyms_text, strlen(kallsyms_text), NULL, 0, 64, &t), -EFBIG);
	assert_int_equal(t.n_symbols, 0);
	/* No function lines at all. */
	assert_int_equal(agent_symupload_kallsyms_mem("ffffffff81003000 D x\n", 21, NULL, 0, 1 << 20, &t), -ENODATA);
	assert_int_equal(agent_symupload_kallsyms_mem("", 0, NULL, 0, 1 << 20, &t), -ENODATA);
	/* Every prefix of the text: never a crash, never a bad table. */
	for (size_t len = 0; len <= strlen(kallsyms_text); len++) {
		int r = agent_symupload_kallsyms_mem(kallsyms_text, len, NULL, 0, 1 << 20, &t);

		assert_true(r == 0 || r == -ENODATA);
		if (r == 0)
			assert_sorted_unique(&t);
		agent_symtab_release(&t);
		memset(&t, 0, sizeof(t));
	}
}

/* One kernel ID per address space (agent/kernel.h): each table holds its own symbols, at its own addresses. */
static void test_kallsyms_spaces(void **state)
{
	struct agent_kernel_module mods[2] = {
		{ .name = "kvm", .start = 0xffffffffc0a00000ULL, .size = 0x2000, .live = true },
		{ .name = "kvm_intel", .start = 0xffffffffc0a02000ULL, .size = 0x1000, .live = true },
	};
	struct agent_kernel k = { .release = "6.1.0-test",
				  .boot_id = "b",
				  .text_start = 0xffffffff81000000ULL,
				  .text_end = 0xffffffff81003000ULL,
				  .modules = mods,
				  .n_modules = 2 };
	struct agent_symtab t = { 0 };
	size_t len = strlen(kallsyms_text);

	(void)state;
	assert_int_equal(agent_kernel_index_modules(&k), 0);
	/* The image: offsets from _text. */
	assert_int_equal(agent_symupload_kallsyms_mem(kallsyms_text, len, &k, AGENT_KSEG_IMAGE, 1 << 20, &t), 0);
	assert_int_equal(t.n_symbols, 4);
	assert_int_equal(*find(&t, "_text")->address, 0);
	assert_int_equal(*find(&t, "__do_one")->address, 0x1010);
	assert_int_equal(*find(&t, "weak_fn")->address, 0x2000);
	assert_null(find(&t, "mod_fn [kvm]"));
	agent_symtab_release(&t);
	/* A module: offsets from its start, named as before. */
	assert_int_equal(agent_symupload_kallsyms_mem(kallsyms_text, len, &k, 0, 1 << 20, &t), 0);
	assert_int_equal(t.n_symbols, 1);
	assert_int_equal(*find(&t, "mod_fn [kvm]")->address, 0x1000);
	agent_symtab_release(&t);
	assert_int_equal(agent_symupload_kallsyms_mem(kallsyms_text, len, &k, 1, 1 << 20, &t), 0);
	assert_int_equal(*find(&t, "mod_exported [kvm_intel]")->address, 0);
	agent_symtab_release(&t);
	/* The rest (a BPF program) at its runtime address. */
	assert_int_equal(agent_symupload_kallsyms_mem(kallsyms_text, len, &k, AGENT_KSEG_RUNTIME, 1 << 20, &t), 0);
	assert_int_equal(t.n_symbols, 1);
	assert_int_equal(*find(&t, "bpf_prog_6deef7357e7b4530 [bpf]")->address, 0xffffffffc0a03000ULL);
	agent_symtab_release(&t);
	/* Unloaded since: nothing to name it with (not "addresses hidden"). */
	mods[1].live = false;
	assert_int_equal(agent_kernel_index_modules(&k), 0);
	assert_int_equal(agent_symupload_kallsyms_mem(kallsyms_text, len, &k, 1, 1 << 20, &t), -ENODATA);
	free(k.by_start);
}

static void test_kallsyms_hidden(void **state)
{
	/* What an agent without CAP_SYSLOG reads (kptr_restrict): names, but every address 0. */
	static const char hidden[] = "0000000000000000 T _text\n"
				     "0000000000000000 t do_one\n"
				     "0000000000000000 t mod_fn\t[kvm]\n";
	struct agent_symtab t = { 0 };
	char path[512];
	FILE *f;

	assert_int_equal(agent_symupload_kallsyms_mem(hidden, strlen(hidden), NULL, 0, 1 << 20, &t), -EPERM);
	assert_int_equal(t.n_symbols, 0);
	snprintf(path, sizeof(path), "%s/kallsyms-hidden", dir);
	f = fopen(path, "w");
	fputs(hidden, f);
	fclose(f);
	assert_int_equal(agent_symupload_kallsyms(path, NULL, 0, 1 << 20, &t), -EPERM);
	snprintf(path, sizeof(path), "%s/no-such-file", dir);
	assert_int_equal(agent_symupload_kallsyms(path, NULL, 0, 1 << 20, &t), -ENOENT);
}

/* This machine's kernel: every T/t symbol with an address is in the table (sampled), names as in the file. */
static void test_kallsyms_proc(void **state)
{
	struct agent_symtab t = { 0 };
	int r = agent_symupload_kallsyms(AGENT_SYMUPLOAD_KALLSYMS_PATH, NULL, 0, 64 << 20, &t);

	if (r == -EPERM || r == -ENOENT || r == -EACCES) {
		fprintf(stderr, "SKIP: %s unreadable or addresses hidden (%s)\n", AGENT_SYMUPLOAD_KALLSYMS_PATH,
			strerror(-r));
		skip();
	}
	assert_int_equal(r, 0);
	assert_true(t.n_symbols > 1000);
	assert_sorted_unique(&t);
	/* A syscall entry every x86-64 and arm64 kernel has under one of its names. */
	bool found = false;
	for (size_t i = 0; i < t.n_symbols && !found; i++)
		found = strstr(agent_symtab__symbol(&t, i)->name, "sys_getppid") != NULL;
	assert_true(found);
	agent_symtab_release(&t);
}

static uint64_t rd_varint(const uint8_t **p, const uint8_t *end)
{
	uint64_t v = 0;

	for (unsigned shift = 0; *p < end && shift < 64; shift += 7) {
		uint8_t b = *(*p)++;
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			break;
	}
	return v;
}

/*
 * More symbols than nanopb's 16-bit counts hold (a real kernel has ~120k):
 * kept in parts, encoded as one SymbolTable whose fields a plain protobuf
 * reader (this one) sees as one message with every symbol, in order.
 */
static void test_large_table_parts(void **state)
{
	const size_t n = 2 * AGENT_SYMUPLOAD_PART_SYMBOLS + 1000;
	struct agent_symtab t = { 0 };
	static const uint8_t id[16] = { 0xcc, 1, 2, 3 };
	size_t cap = n * 48, len = 0, ids = 0, syms = 0, sources = 0, enc_len;
	char *text = malloc(cap);
	uint8_t *enc;
	uint64_t last = 0;
	bool sorted = true;

	assert_non_null(text);
	for (size_t i = 0; i < n; i++)
		len += (size_t)snprintf(text + len, cap - len, "%016llx t fn_%zu%s\n",
					0xffffffff81000000ULL + 16ULL * i, i, i % 7 ? "" : "\t[mod]");
	assert_int_equal(agent_symupload_kallsyms_mem(text, len, NULL, 0, 64 << 20, &t), 0);
	assert_int_equal(t.n_symbols, n);
	assert_int_equal(t.n_parts, 3);
	assert_string_equal(agent_symtab__symbol(&t, n - 1)->name, "fn_132069 [mod]"); /* 132069 = 7 * 18867 */
	assert_string_equal(agent_symtab__symbol(&t, 7)->name, "fn_7 [mod]");
	assert_null(agent_symtab__symbol(&t, n));
	assert_sorted_unique(&t);
	assert_int_equal(agent_symtab__encode(&t, id, sizeof(id), NULL, &enc, &enc_len), 0);
	for (const uint8_t *p = enc, *end = enc + enc_len; p < end;) {
		uint64_t key = rd_varint(&p, end), l;
		assert_int_equal(key & 7, 2); /* every SymbolTable field here is length-delimited */
		l = rd_varint(&p, end);
		assert_true(l <= (uint64_t)(end - p));
		if (key >> 3 == 1) {
			ids++;
			assert_int_equal(l, sizeof(id));
			assert_memory_equal(p, id, sizeof(id));
		} else if (key >> 3 == 2) {
			/* Symbol.address is field 1, first */
			const uint8_t *q = p;
			assert_int_equal(rd_varint(&q, p + l), 1 << 3);
			uint64_t a = rd_varint(&q, p + l);
			sorted = sorted && a > last;
			last = a;
			syms++;
		} else if (key >> 3 == 3) {
			sources++;
		}
		p += l;
	}
	assert_int_equal(ids, 1);
	assert_int_equal(syms, n);
	assert_int_equal(sources, 1);
	assert_true(sorted);
	free(enc);
	agent_symtab_release(&t);
	agent_symtab_release(&t); /* idempotent */
	/* The error form: only the ID and the error. */
	assert_int_equal(agent_symtab__encode(&t, id, sizeof(id), "cannot read", &enc, &enc_len), 0);
	assert_int_equal(enc_len, 2 + sizeof(id) + 2 + strlen("cannot read"));
	free(enc);
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_symtab),
		cmocka_unit_test(test_dynsym_only),
		cmocka_unit_test(test_stripped_executable_has_nothing),
		cmocka_unit_test(test_minidebuginfo),
		cmocka_unit_test(test_limits_and_garbage),
		cmocka_unit_test(test_go_stripped),
		cmocka_unit_test(test_go_stripped_pie),
		cmocka_unit_test(test_go_pclntab_garbage),
		cmocka_unit_test(test_kallsyms_text),
		cmocka_unit_test(test_kallsyms_spaces),
		cmocka_unit_test(test_kallsyms_hidden),
		cmocka_unit_test(test_kallsyms_proc),
		cmocka_unit_test(test_large_table_parts),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
