// SPDX-License-Identifier: Apache-2.0
/*
 * JIT perf maps: the line parser (pieces, bad lines by number, long lines)
 * and the per-process reader (agent/perf-map-cache.c) on a directory laid out like
 * /proc: incremental reads of appended lines, rate limiting, newest entry
 * wins, the limits, no map, freed on exit.
 */
#include <errno.h>
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

#include "agent/perf-map-parse.h"
#include "agent/perf-map-cache.h"

struct collected {
	struct agent_perf_map_line l[16];
	char names[16][64];
	size_t n;
};

static int collect(void *userdata, const struct agent_perf_map_line *l)
{
	struct collected *c = userdata;

	if (c->n == 16)
		return -ENOSPC;
	c->l[c->n] = *l;
	snprintf(c->names[c->n], sizeof(c->names[0]), "%.*s", (int)l->name_len, l->name);
	c->n++;
	return 0;
}

static void test_parse(void **state)
{
	const char *in = "3ef414c0 398 LazyCompile:~main /app/x.js:1\n"
			 "0x7f0000 0x40 Builtin: spaced  name \r\n"
			 "zz 10 bad\n"
			 "\n"
			 "10 0 zero size\n"
			 "ffffffffffffffff 2 overflow\n"
			 "40 10\n"
			 "50 10 partial";
	struct agent_perf_map_state st = { 0 };
	struct collected c = { 0 };
	size_t used;

	/* Not at the end of the file: the last line waits. */
	assert_int_equal(agent_perf_map_parse(in, strlen(in), false, &st, collect, &c, &used), 2);
	assert_int_equal(used, strlen(in) - strlen("50 10 partial"));
	assert_int_equal(c.l[0].start, 0x3ef414c0);
	assert_int_equal(c.l[0].size, 0x398);
	assert_string_equal(c.names[0], "LazyCompile:~main /app/x.js:1");
	assert_int_equal(c.l[1].start, 0x7f0000);
	assert_string_equal(c.names[1], "Builtin: spaced  name");
	assert_int_equal(st.bad, 4);
	assert_int_equal(st.first_bad, 3); /* the line number of "zz 10 bad" */
	assert_int_equal(st.line, 7);
	/* The rest comes later, then the file ends. */
	assert_int_equal(agent_perf_map_parse(in + used, strlen(in) - used, true, &st, collect, &c, &used), 1);
	assert_string_equal(c.names[2], "partial");
	assert_int_equal(st.line, 8);
}

static void test_parse_long_lines(void **state)
{
	size_t n = AGENT_PERF_MAP_MAX_LINE + 100, used;
	char *buf = malloc(n + 32);
	struct agent_perf_map_state st = { 0 };
	struct collected c = { 0 };

	memset(buf, 'x', n);
	memcpy(buf, "10 20 ", 6);
	/* An over-long line without its end yet is skipped at once... */
	assert_int_equal(agent_perf_map_parse(buf, n, false, &st, collect, &c, &used), 0);
	assert_int_equal(used, n);
	assert_true(st.skipping);
	assert_int_equal(st.bad, 1);
	/* ... up to its end in a later piece; the next line counts. */
	assert_int_equal(agent_perf_map_parse("xxxx\n30 4 after\n", 16, false, &st, collect, &c, &used), 1);
	assert_int_equal(used, 16);
	assert_false(st.skipping);
	assert_string_equal(c.names[0], "after");
	assert_int_equal(st.bad, 1);
	assert_int_equal(st.line, 2);
	free(buf);
}

/* ---- the reader ---- */

static char root[256];

static void mkdirs(const char *fmt, ...)
{
	char path[512], cmd[600];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(path, sizeof(path), fmt, ap);
	va_end(ap);
	snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", path);
	assert_int_equal(system(cmd), 0);
}

static void write_file(const char *mode, const char *text, const char *fmt, ...)
{
	char path[512];
	va_list ap;
	FILE *f;

	va_start(ap, fmt);
	vsnprintf(path, sizeof(path), fmt, ap);
	va_end(ap);
	f = fopen(path, mode);
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static int setup(void **state)
{
	snprintf(root, sizeof(root), "/tmp/sr-perfmap-test-%d", getpid());
	/* PID 100 lives in a PID namespace where it is 7: its map is perf-7.map inside its root. */
	mkdirs("%s/100/root/tmp", root);
	write_file("w", "Name:\tnode\nNSpid:\t100\t7\n", "%s/100/status", root);
	mkdirs("%s/200/root/tmp", root);
	write_file("w", "Name:\tcat\nNSpid:\t200\n", "%s/200/status", root);
	return 0;
}

static int teardown(void **state)
{
	char cmd[300];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	return system(cmd) == 0 ? 0 : -1;
}

static const char *lookup(struct agent_perf_map_cache *m, uint32_t pid, uint64_t addr, uint64_t now,
			  enum agent_jit_result *why)
{
	static char out[128];
	size_t len = 0;
	const char *n = agent_perf_map_cache__lookup(m, pid, 1, addr, now, &len, why);

	if (!n)
		return NULL;
	snprintf(out, sizeof(out), "%.*s", (int)len, n);
	return out;
}

static void test_reader(void **state)
{
	struct agent_perf_map_cache *m = agent_perf_map_cache_new(NULL, root);
	struct agent_perf_map_cache_stats st;
	enum agent_jit_result why;
	const uint64_t s = 1000000000ULL;

	assert_non_null(m);
	/* No map: counted as such, and not looked for again at once. */
	assert_null(lookup(m, 200, 0x1000, 1 * s, &why));
	assert_int_equal(why, AGENT_JIT_NO_PERF_MAP);

	write_file("w", "1000 100 JS:*hot /app/x.js:3\n2000 80 JS:~cold /app/x.js:9\n3000 10 half",
		   "%s/100/root/tmp/perf-7.map", root);
	assert_string_equal(lookup(m, 100, 0x1010, 1 * s, &why), "JS:*hot /app/x.js:3");
	assert_int_equal(why, AGENT_JIT_NAMED);
	assert_string_equal(lookup(m, 100, 0x207f, 1 * s, &why), "JS:~cold /app/x.js:9");
	/* The half-written line is not taken yet; a miss right away does not re-read. */
	write_file("a", "\n4000 10 JS:later\n1000 40 JS:*moved\n", "%s/100/root/tmp/perf-7.map", root);
	assert_null(lookup(m, 100, 0x4000, 1 * s + 1, &why));
	assert_int_equal(why, AGENT_JIT_NOT_IN_PERF_MAP);
	/* After the re-read interval the appended lines are read (only they). */
	assert_string_equal(lookup(m, 100, 0x4000, 2 * s, &why), "JS:later");
	assert_string_equal(lookup(m, 100, 0x3005, 2 * s, &why), "half");
	/* Code moved: the later line wins where they overlap. */
	assert_string_equal(lookup(m, 100, 0x1010, 2 * s, &why), "JS:*moved");
	agent_perf_map_cache__stats(m, &st);
	assert_int_equal(st.processes, 2);
	assert_true(st.entries >= 4);
	assert_int_equal(st.bytes_read,
			 strlen("1000 100 JS:*hot /app/x.js:3\n2000 80 JS:~cold /app/x.js:9\n3000 10 half") +
				 strlen("\n4000 10 JS:later\n1000 40 JS:*moved\n"));
	/* Exit frees the process's map. */
	agent_perf_map_cache__exit(m, 100, 1);
	agent_perf_map_cache__exit(m, 200, 1);
	agent_perf_map_cache__stats(m, &st);
	assert_int_equal(st.processes, 0);
	assert_int_equal(st.entries, 0);
	assert_int_equal(st.memory_bytes, 0);
	agent_perf_map_cache_free(m);
}

static void test_reader_limits(void **state)
{
	struct agent_perf_map_cache_limits lim = { .max_entries_per_process = 2, .max_processes = 1 };
	struct agent_perf_map_cache *m = agent_perf_map_cache_new(&lim, root);
	struct agent_perf_map_cache_stats st;
	enum agent_jit_result why;

	write_file("w", "1000 10 a\n2000 10 b\n3000 10 c\n", "%s/100/root/tmp/perf-7.map", root);
	assert_string_equal(lookup(m, 100, 0x1000, 1, &why), "a");
	assert_string_equal(lookup(m, 100, 0x2000, 1, &why), "b");
	/* The third entry is over max_entries_per_process: the map is not read further. */
	assert_null(lookup(m, 100, 0x3000, 10000000000ULL, &why));
	assert_int_equal(why, AGENT_JIT_LIMIT);
	/* One process at a time: another one's lookup forgets the first. */
	assert_null(lookup(m, 200, 0x3000, 1, &why));
	agent_perf_map_cache__stats(m, &st);
	assert_int_equal(st.processes, 1);
	assert_int_equal(st.processes_forgotten, 1);
	agent_perf_map_cache_free(m);

	/* max_bytes_per_process stops reading (the rest of the map stays unread). */
	lim = (struct agent_perf_map_cache_limits){ .max_bytes_per_process = 12 };
	m = agent_perf_map_cache_new(&lim, root);
	assert_string_equal(lookup(m, 100, 0x1000, 1, &why), "a");
	assert_null(lookup(m, 100, 0x2000, 10000000000ULL, &why));
	assert_int_equal(why, AGENT_JIT_LIMIT);
	agent_perf_map_cache_free(m);
}

/* A map that is not a regular file owned by the process's user is not read. */
static void test_reader_refuses_symlink(void **state)
{
	struct agent_perf_map_cache *m = agent_perf_map_cache_new(NULL, root);
	enum agent_jit_result why;
	char target[512], link[512];

	snprintf(target, sizeof(target), "%s/secret", root);
	write_file("w", "1000 10 secret\n", "%s", target);
	snprintf(link, sizeof(link), "%s/100/root/tmp/perf-7.map", root);
	unlink(link);
	assert_int_equal(symlink(target, link), 0);
	assert_null(lookup(m, 100, 0x1000, 1, &why));
	assert_int_equal(why, AGENT_JIT_NO_PERF_MAP);
	unlink(link);
	agent_perf_map_cache_free(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_parse_long_lines),
		cmocka_unit_test_setup_teardown(test_reader, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reader_limits, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reader_refuses_symlink, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
