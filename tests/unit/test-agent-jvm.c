// SPDX-License-Identifier: Apache-2.0
/*
 * HotSpot support against a real JVM: a small Java program is compiled with
 * javac and run until C2 has compiled its hot method; the test then reads
 * the JVM's vmStructs tables from its memory, derives the layout, walks the
 * code cache's heaps, finds each nmethod again through the segment map, and
 * names its Method* (class, method, file, line). Skipped when the JDK is not
 * installed. The pure decoders (class names, line tables) are tested on
 * their own too.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/jvm-codecache.h"
#include "agent/jvm-method.h"
#include "agent/jvm.h"
#include "agent/procmaps.h"
#include "agent/util.h"
#include "test-filter.h"

extern char **environ;

static void class_names(void **state)
{
	char out[64];

	(void)state;
	assert_int_equal(agent_jvm_class_name((const uint8_t *)"java/lang/String", 16, out, sizeof(out)), 16);
	assert_string_equal(out, "java.lang.String");
	agent_jvm_class_name((const uint8_t *)"java/util/HashMap$Node", 22, out, sizeof(out));
	assert_string_equal(out, "java.util.HashMap$Node");
	/* Not UTF-8: replaced, never copied. */
	agent_jvm_class_name((const uint8_t *)"a/\xff", 3, out, sizeof(out));
	assert_string_equal(out, "a.?");
	/* Cut to fit. */
	assert_int_equal(agent_jvm_class_name((const uint8_t *)"abcdef", 6, out, 4), 3);
	assert_string_equal(out, "abc");
}

/* HotSpot's writer (CompressedWriteStream::write_int and write_signed_int), to build tables. */
static size_t put_u5(uint8_t *p, uint32_t v)
{
	size_t n = 0;

	for (int i = 0; i < 4 && v >= 192; i++) {
		p[n++] = (uint8_t)(192 + ((v - 192) & 63));
		v = (v - 192) >> 6;
	}
	p[n++] = (uint8_t)v;
	return n;
}

static size_t put_pair(uint8_t *p, int32_t dbci, int32_t dline)
{
	size_t n = 0;

	if (dbci >= 0 && dbci < 32 && dline >= 0 && dline < 8) {
		p[0] = (uint8_t)(dbci << 3 | dline);
		return 1;
	}
	p[n++] = 0xff;
	n += put_u5(p + n, ((uint32_t)dbci << 1) ^ (uint32_t)(dbci >> 31));
	n += put_u5(p + n, ((uint32_t)dline << 1) ^ (uint32_t)(dline >> 31));
	return n;
}

static void line_tables(void **state)
{
	uint8_t t[64];
	size_t n = 0;

	(void)state;
	/* bci 0 → line 10, bci 4 → 11, bci 300 → 9 (a loop's condition), bci 305 → 5000 */
	n += put_pair(t + n, 0, 10);
	n += put_pair(t + n, 4, 1);
	n += put_pair(t + n, 296, -2);
	n += put_pair(t + n, 5, 4991);
	t[n++] = 0;
	assert_int_equal(agent_jvm_line(t, n, 0), 10);
	assert_int_equal(agent_jvm_line(t, n, 3), 10);
	assert_int_equal(agent_jvm_line(t, n, 4), 11);
	assert_int_equal(agent_jvm_line(t, n, 299), 11);
	assert_int_equal(agent_jvm_line(t, n, 300), 9);
	assert_int_equal(agent_jvm_line(t, n, 305), 5000);
	assert_int_equal(agent_jvm_line(t, n, 60000), 5000);
	/* Cut in the middle of a long entry: what came before stands. */
	assert_int_equal(agent_jvm_line(t, 4, 300), 11);
	assert_int_equal(agent_jvm_line(t, 0, 3), 0);
}

/* The Java program: spin() is hot (C2 compiles it), small() is inlined into it. Line numbers matter below. */
static const char hot_java[] = "public class Hot {\n"		       /* 1 */
			       "    static int small(int x) {\n"       /* 2 */
			       "        return x * 31 + 7;\n"	       /* 3 */
			       "    }\n"			       /* 4 */
			       "    static long spin(int n) {\n"       /* 5 */
			       "        long s = 0;\n"		       /* 6 */
			       "        for (int i = 0; i < n; i++)\n" /* 7 */
			       "            s += small(i);\n"	       /* 8 */
			       "        return s;\n"		       /* 9 */
			       "    }\n"			       /* 10 */
			       "    public static void main(String[] a) throws Exception {\n"
			       "        long s = 0;\n"
			       "        for (int i = 0; i < 20000; i++)\n"
			       "            s += spin(1000);\n"
			       "        System.out.println(\"ready \" + s);\n"
			       "        System.out.flush();\n"
			       "        System.in.read();\n"
			       "    }\n"
			       "}\n";

struct jvm_child {
	char dir[64];
	pid_t pid;
	int in;	 /* its stdin: closing it ends the program */
	int out; /* its stdout */
};

static int run_wait(char *const argv[])
{
	pid_t pid;
	int status;

	if (posix_spawnp(&pid, argv[0], NULL, NULL, argv, environ) != 0)
		return -ENOENT;
	if (waitpid(pid, &status, 0) < 0)
		return -errno;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EIO;
}

/* Compiles Hot.java and starts it; false (and the test is skipped) without a JDK. */
static bool start_jvm(struct jvm_child *c)
{
	posix_spawn_file_actions_t fa;
	int pin[2], pout[2];
	char path[128], line[128];
	char *javac[] = { (char *)"javac", (char *)"-g", (char *)"-d", c->dir, path, NULL };
	char *java[] = { (char *)"java", (char *)"-cp", c->dir, (char *)"Hot", NULL };
	FILE *f, *out;

	strcpy(c->dir, "/tmp/sr-test-jvm-XXXXXX");
	if (!mkdtemp(c->dir))
		return false;
	snprintf(path, sizeof(path), "%s/Hot.java", c->dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(hot_java, f);
	fclose(f);
	if (run_wait(javac) < 0)
		return false;
	assert_int_equal(pipe(pin), 0);
	assert_int_equal(pipe(pout), 0);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, pin[0], 0);
	posix_spawn_file_actions_adddup2(&fa, pout[1], 1);
	posix_spawn_file_actions_addclose(&fa, pin[1]);
	posix_spawn_file_actions_addclose(&fa, pout[0]);
	assert_int_equal(posix_spawnp(&c->pid, "java", &fa, NULL, java, environ), 0);
	posix_spawn_file_actions_destroy(&fa);
	close(pin[0]);
	close(pout[1]);
	c->in = pin[1];
	out = fdopen(pout[0], "r");
	assert_non_null(out);
	/* "ready" comes once spin() has run 20,000 times: C2 has compiled it by then. */
	assert_non_null(fgets(line, sizeof(line), out));
	assert_memory_equal(line, "ready ", 6);
	fclose(out);
	return true;
}

static void stop_jvm(struct jvm_child *c)
{
	char cmd[128];
	int status;

	if (c->in >= 0)
		close(c->in);
	c->in = -1;
	/* Its work is done (or an assertion failed): nothing to wait for. */
	if (c->pid > 0) {
		kill(c->pid, SIGKILL);
		waitpid(c->pid, &status, 0);
	}
	c->pid = -1;
	snprintf(cmd, sizeof(cmd), "%s/Hot.java", c->dir);
	unlink(cmd);
	snprintf(cmd, sizeof(cmd), "%s/Hot.class", c->dir);
	unlink(cmd);
	rmdir(c->dir);
	c->dir[0] = '\0';
}

/* libjvm.so's path and load bias in the process (its first mapping maps file offset 0 at ELF address 0). */
static void find_libjvm(pid_t pid, char *path, size_t cap, uint64_t *bias)
{
	char file[64], *buf = malloc(1 << 20);
	struct agent_map *maps;
	size_t n = 0, bad;
	ssize_t len;
	int fd;

	assert_non_null(buf);
	snprintf(file, sizeof(file), "/proc/%d/maps", (int)pid);
	fd = open(file, O_RDONLY);
	assert_true(fd >= 0);
	/* A read of /proc/PID/maps returns a page at most. */
	for (size_t have = 0;;) {
		len = read(fd, buf + have, (1 << 20) - 1 - have);
		assert_true(len >= 0);
		if (len == 0) {
			len = (ssize_t)have;
			break;
		}
		have += (size_t)len;
	}
	close(fd);
	assert_true(len > 0);
	assert_int_equal(agent_procmaps_parse(buf, (size_t)len, false, &maps, &n, &bad), 0);
	path[0] = '\0';
	for (size_t i = 0; i < n && !path[0]; i++) {
		if (maps[i].path && strstr(maps[i].path, "/libjvm.so") && maps[i].offset == 0) {
			snprintf(path, cap, "%s", maps[i].path);
			*bias = maps[i].start;
		}
	}
	agent_procmaps_free(maps, n);
	free(buf);
	assert_true(path[0]);
}

static void read_cstr(const struct agent_jvm_reader *r, uint64_t addr, char *out, size_t cap)
{
	out[0] = '\0';
	for (size_t i = 0; i + 1 < cap; i++) {
		if (r->read(r->ctx, addr + i, out + i, 1) < 0 || !out[i])
			return;
		out[i + 1] = '\0';
	}
}

/* Pcs where Hot.small() is a frame of its own inlined into Hot.spin() at line 8. */
static int small_in_spin;

/*
 * The frames of pcs across an nmethod: whenever there are some, the
 * outermost is the nmethod's own method, every one is a method with a name
 * and its bci is inside it. Returns how many pcs had inlined frames.
 */
static int check_frames(const struct agent_jvm_reader *r, const struct agent_jvm_layout *l, uint64_t blob,
			uint64_t method)
{
	struct agent_jvm_frame frames[AGENT_JVM_MAX_SCOPES];
	uint64_t begin, end;
	int inlined = 0;

	assert_int_equal(r->read(r->ctx, blob + l->codeblob_code_begin, &begin, 8), 0);
	assert_int_equal(r->read(r->ctx, blob + l->codeblob_code_end, &end, 8), 0);
	for (uint64_t pc = begin; pc < end; pc += 16) {
		int n = agent_jvm_nmethod_frames(r, l, blob, pc, frames, AGENT_JVM_MAX_SCOPES);
		struct agent_jvm_method names[2];

		if (n == -ENOENT)
			break;
		if (n < 0)
			fprintf(stderr, "frames: %d at +%llu\n", n, (unsigned long long)(pc - begin));
		assert_true(n >= 0);
		if (n == 0)
			continue;
		assert_int_equal(frames[n - 1].method, method);
		for (int i = 0; i < n; i++) {
			struct agent_jvm_method m;

			assert_int_equal(agent_jvm_method_read(r, l, frames[i].method, &m), 0);
			assert_true(m.name[0] && m.klass[0]);
			assert_true(frames[i].bci >= -1 && frames[i].bci < (int32_t)m.code_size);
			if (getenv("SR_TEST_VERBOSE"))
				fprintf(stderr, "%s%s.%s bci %d line %d\n", i ? "  in " : "", m.klass, m.name,
					frames[i].bci,
					frames[i].bci >= 0 ? agent_jvm_method_line(r, &m, (uint32_t)frames[i].bci) : 0);
		}
		inlined += n > 1;
		if (n == 2 && agent_jvm_method_read(r, l, frames[0].method, &names[0]) == 0 &&
		    agent_jvm_method_read(r, l, frames[1].method, &names[1]) == 0 && !strcmp(names[0].name, "small") &&
		    !strcmp(names[1].name, "spin") && agent_jvm_method_line(r, &names[1], (uint32_t)frames[1].bci) == 8)
			small_in_spin++;
	}
	return inlined;
}

/* The per-build layout cache and the method name cache, on the same JVM. */
static void check_cache(const struct jvm_child *c, const char *lib, uint64_t bias, const struct agent_jvm_layout *l,
			uint64_t spin_method)
{
	struct agent_jvm *j = agent_jvm_new(0);
	uint8_t key[12] = { 0 }, other[12] = { 1 };
	const struct agent_jvm_layout *pl;
	struct agent_jvm_named named;
	struct agent_jvm_stats st;
	int fd = open(lib, O_RDONLY | O_CLOEXEC);

	assert_non_null(j);
	assert_true(fd >= 0);
	memcpy(key, &c->pid, 4);
	assert_int_equal(agent_jvm__add(j, key, (uint32_t)c->pid, fd, bias), 0);
	/* A second process of the same build: the layout is not read again. */
	assert_int_equal(agent_jvm__add(j, other, (uint32_t)c->pid, fd, bias), 0);
	close(fd);
	agent_jvm__stats(j, &st);
	assert_int_equal(st.builds, 1);
	assert_int_equal(st.processes, 2);
	pl = agent_jvm__layout(j, key);
	assert_non_null(pl);
	assert_memory_equal(pl, l, sizeof(*l));

	assert_int_equal(agent_jvm__method(j, key, spin_method, 0, &named), 0);
	assert_string_equal(named.klass, "Hot");
	assert_string_equal(named.name, "spin");
	assert_string_equal(named.file, "Hot.java");
	assert_int_equal(named.line, 6);
	assert_int_equal(agent_jvm__method(j, key, spin_method, -1, &named), 0);
	assert_int_equal(named.line, 0);
	agent_jvm__stats(j, &st);
	assert_int_equal(st.method_reads, 1);
	assert_int_equal(st.methods_cached, 1);
	/* Not a Method*: its "ConstMethod" is not one. */
	assert_int_equal(agent_jvm__method(j, key, l->codecache_heaps_addr, 0, &named), -ENOENT);
	agent_jvm__forget(j, key);
	assert_null(agent_jvm__layout(j, key));
	assert_int_equal(agent_jvm__method(j, key, spin_method, 0, &named), -ENOENT);
	agent_jvm_free(j);
}

/* The JVM of real_jvm, stopped and its files removed by the teardown even when an assertion failed or it was skipped. */
static struct jvm_child c = { .pid = -1, .in = -1 };

static int real_jvm_teardown(void **state)
{
	(void)state;
	if (c.dir[0])
		stop_jvm(&c);
	return 0;
}

static void real_jvm(void **state)
{
	struct agent_jvm_heap heaps[AGENT_JVM_MAX_HEAPS];
	struct agent_jvm_tables *t;
	struct agent_jvm_layout l;
	struct agent_jvm_reader r;
	uint64_t syms[AGENT_JVM_N_SYMS], bias = 0, v;
	const char *missing = NULL;
	char lib[512];
	size_t counts[4];
	int n_heaps, fd, nmethods = 0, spin = 0, main_named = 0, inlined = 0;
	uint64_t spin_method = 0;

	(void)state;
	if (!start_jvm(&c))
		skip();
	r.read = agent_peek_cb;
	r.ctx = (void *)(uintptr_t)c.pid;
	find_libjvm(c.pid, lib, sizeof(lib), &bias);
	fd = open(lib, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(agent_jvm_file_syms(fd, syms), 0);
	close(fd);

	t = agent_jvm_tables_of((uint32_t)c.pid, bias, syms);
	assert_non_null(t);
	agent_jvm_tables__counts(t, counts);
	/* OpenJDK 17: hundreds of each. */
	assert_true(counts[0] > 500 && counts[1] > 500 && counts[2] > 100 && counts[3] > 10);
	assert_int_equal(agent_jvm_tables__field(t, "Method", "_constMethod", &v), 0);
	assert_int_equal(agent_jvm_tables__is_static(t, "CodeCache", "_heaps"), 1);
	assert_int_equal(agent_jvm_tables__size(t, "Symbol", &v), 0);
	assert_int_equal(agent_jvm_layout_from(t, &l, &missing), 0);
	assert_null(missing);
	agent_jvm_tables_free(t);
	assert_int_equal(l.interp_frame_method, -3);
	assert_int_equal(l.interp_frame_bcp, -8);

	n_heaps = agent_jvm_heaps_read(&r, &l, heaps, AGENT_JVM_MAX_HEAPS);
	assert_true(n_heaps >= 1);
	for (int h = 0; h < n_heaps; h++) {
		uint64_t block = heaps[h].low;

		/* Every block, in order: each blob found by its own code through the segment map too. */
		for (int i = 0; i < 1000000 && block < heaps[h].high; i++) {
			uint64_t len = 0, blob, name_ptr, code_begin, method, found;
			uint8_t used = 0;
			char name[64];
			struct agent_jvm_method m;

			if (r.read(r.ctx, block + l.heapblock_length, &len, 8) < 0 || !len)
				break;
			assert_int_equal(r.read(r.ctx, block + l.heapblock_used, &used, 1), 0);
			blob = block + l.heapblock_size;
			block += len << heaps[h].log2_segment;
			if (!used)
				continue;
			assert_int_equal(r.read(r.ctx, blob + l.codeblob_name, &name_ptr, 8), 0);
			read_cstr(&r, name_ptr, name, sizeof(name));
			assert_int_equal(r.read(r.ctx, blob + l.codeblob_code_begin, &code_begin, 8), 0);
			assert_int_equal(agent_jvm_blob_at(&r, &l, &heaps[h], code_begin, &found), 0);
			assert_int_equal(found, blob);
			if (strcmp(name, "nmethod"))
				continue;
			nmethods++;
			assert_int_equal(r.read(r.ctx, blob + l.nmethod_method, &method, 8), 0);
			assert_int_equal(agent_jvm_method_read(&r, &l, method, &m), 0);
			if (!strcmp(m.klass, "Hot") && !strcmp(m.name, "spin")) {
				spin++;
				spin_method = method;
				assert_string_equal(m.file, "Hot.java");
				/* bci 0 is "long s = 0" on line 6; the method's last bytecode returns on line 9. */
				assert_int_equal(agent_jvm_method_line(&r, &m, 0), 6);
				assert_int_equal(agent_jvm_method_line(&r, &m, m.code_size - 1), 9);
			}
			if (!strcmp(m.klass, "java.lang.String") || !strcmp(m.klass, "java.lang.Object"))
				main_named++;
			inlined += check_frames(&r, &l, blob, method);
		}
	}
	assert_true(nmethods > 0);
	assert_true(spin >= 1);
	assert_true(main_named >= 1);
	/* The JDK's own hot methods have calls inside inlined code: some pcs have inlined frames. */
	assert_true(inlined >= 1);
	assert_true(small_in_spin >= 1);
	check_cache(&c, lib, bias, &l, spin_method);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(class_names),
		cmocka_unit_test(line_tables),
		cmocka_unit_test_teardown(real_jvm, real_jvm_teardown),
	};

	sr_test_filter_from_env();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
