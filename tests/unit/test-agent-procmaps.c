// SPDX-License-Identifier: Apache-2.0
/* /proc/PID/maps parsing on the shapes real files have, and on broken input. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "agent/procmaps.h"

static const char sample[] =
	"55d4c1a00000-55d4c1a02000 r--p 00000000 fd:01 1234567                    /usr/bin/my prog\n"
	"55d4c1a02000-55d4c1a05000 r-xp 00002000 fd:01 1234567                    /usr/bin/my prog\n"
	"55d4c2b7f000-55d4c2ba0000 rw-p 00000000 00:00 0                          [heap]\n"
	"7f0e5c000000-7f0e5c021000 rw-p 00000000 00:00 0 \n"
	"7f0e5d5b3000-7f0e5d5d9000 r--p 00000000 fd:01 2100000                    /usr/lib/x86_64-linux-gnu/libc.so.6\n"
	"7f0e5d5d9000-7f0e5d72e000 r-xp 00026000 fd:01 2100000                    /usr/lib/x86_64-linux-gnu/libc.so.6\n"
	"7f0e5e000000-7f0e5e100000 rwxp 00000000 00:00 0                          \n"
	"7f0e5f000000-7f0e5f010000 r-xp 00000000 00:2c 99                         /tmp/jit-1234.so (deleted)\n"
	"7f0e5f100000-7f0e5f101000 r-xs 00000000 00:05 4242                       /memfd:jit (deleted)\n"
	"7ffd4a5f0000-7ffd4a611000 rw-p 00000000 00:00 0                          [stack]\n"
	"7ffd4a7b2000-7ffd4a7b6000 r--p 00000000 00:00 0                          [vvar]\n"
	"7ffd4a7b6000-7ffd4a7b8000 r-xp 00000000 00:00 0                          [vdso]\n"
	"ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]\n";

static void test_all_lines(void **state)
{
	struct agent_map *m = NULL;
	size_t n = 0, bad = 99;

	(void)state;
	assert_int_equal(agent_procmaps_parse(sample, sizeof(sample) - 1, false, &m, &n, &bad), 0);
	assert_int_equal(n, 13);
	assert_int_equal(bad, 0);
	assert_int_equal(m[0].start, 0x55d4c1a00000ULL);
	assert_int_equal(m[1].offset, 0x2000);
	assert_int_equal(m[1].perms, AGENT_MAP_READ | AGENT_MAP_EXEC);
	assert_int_equal(m[1].dev_major, 0xfd);
	assert_int_equal(m[1].dev_minor, 1);
	assert_int_equal(m[1].inode, 1234567);
	assert_string_equal(m[1].path, "/usr/bin/my prog"); /* spaces kept */
	assert_int_equal(m[2].kind, AGENT_MAP_SPECIAL);
	assert_int_equal(m[3].kind, AGENT_MAP_ANON);
	assert_null(m[3].path);
	assert_int_equal(m[6].kind, AGENT_MAP_ANON); /* trailing spaces only */
	assert_true(m[7].deleted);
	assert_string_equal(m[7].path, "/tmp/jit-1234.so");
	assert_true(m[8].perms & AGENT_MAP_SHARED);
	assert_string_equal(m[8].path, "/memfd:jit");
	assert_int_equal(m[11].kind, AGENT_MAP_VDSO);
	assert_int_equal(m[12].start, 0xffffffffff600000ULL);
	agent_procmaps_free(m, n);
}

static void test_exec_only_and_find(void **state)
{
	struct agent_map *m = NULL;
	size_t n = 0;
	const struct agent_map *hit;

	(void)state;
	assert_int_equal(agent_procmaps_parse(sample, sizeof(sample) - 1, true, &m, &n, NULL), 0);
	assert_int_equal(n, 7);
	hit = agent_procmaps_find(m, n, 0x7f0e5d5d9000ULL + 0x1234);
	assert_non_null(hit);
	assert_string_equal(hit->path, "/usr/lib/x86_64-linux-gnu/libc.so.6");
	assert_null(agent_procmaps_find(m, n, 0x7f0e5d5b3000ULL)); /* r--p, not kept */
	assert_null(agent_procmaps_find(m, n, 0x1000));
	assert_null(agent_procmaps_find(m, n, 0x55d4c1a05000ULL)); /* end is exclusive */
	assert_non_null(agent_procmaps_find(m, n, 0x55d4c1a04fffULL));
	agent_procmaps_free(m, n);
}

static void test_bad_lines(void **state)
{
	static const char *const bad[] = {
		"",
		"garbage",
		"55d4c1a00000 r-xp 00000000 fd:01 1 /x",
		"55d4c1a02000-55d4c1a00000 r-xp 00000000 fd:01 1 /x", /* end < start */
		"55d4c1a00000-55d4c1a02000 rqxp 00000000 fd:01 1 /x",
		"55d4c1a00000-55d4c1a02000 r-xz 00000000 fd:01 1 /x",
		"55d4c1a00000-55d4c1a02000 r-xp zz fd:01 1 /x",
		"55d4c1a00000-55d4c1a02000 r-xp 00000000 fd01 1 /x",
		"55d4c1a00000-55d4c1a02000 r-xp 00000000 fd:01 /x",
		"55d4c1a00000-55d4c1a02000 r-xp 00000000 fd:01 99999999999999999999999 /x",
		"10000000000000000-20000000000000000 r-xp 00000000 fd:01 1 /x", /* > 64 bits */
		"55d4c1a00000-55d4c1a02000 r-x",
	};
	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct agent_map m;
		if (agent_procmaps_parse_line(bad[i], strlen(bad[i]), &m) != -EINVAL)
			fail_msg("accepted: %s", bad[i]);
	}
}

static void test_mixed_and_unsorted(void **state)
{
	static const char mixed[] = "7f0000002000-7f0000003000 r-xp 00000000 fd:01 5 /b\n"
				    "not a line\n"
				    "7f0000000000-7f0000001000 r-xp 00000000 fd:01 4 /a\n"
				    "7f0000004000-7f0000005000 r-xp 00000000 fd:01 6 /c"; /* no final newline */
	struct agent_map *m = NULL;
	size_t n = 0, bad = 0;

	(void)state;
	assert_int_equal(agent_procmaps_parse(mixed, sizeof(mixed) - 1, false, &m, &n, &bad), 0);
	assert_int_equal(n, 3);
	assert_int_equal(bad, 1);
	assert_string_equal(m[0].path, "/a");
	assert_string_equal(m[2].path, "/c");
	agent_procmaps_free(m, n);
}

/* A container's process as the host sees it (tests/fixtures/agent/maps-container). */
static void test_fixture(void **state)
{
	const char *dir = getenv("SR_TEST_FIXTURES");
	char path[4096], *buf;
	struct agent_map *m = NULL;
	const struct agent_map *hit;
	size_t n = 0, bad = 0, len;
	FILE *f;

	(void)state;
	if (!dir)
		skip();
	snprintf(path, sizeof(path), "%s/agent/maps-container", dir);
	f = fopen(path, "r");
	assert_non_null(f);
	buf = malloc(1 << 16);
	len = fread(buf, 1, 1 << 16, f);
	fclose(f);
	assert_int_equal(agent_procmaps_parse(buf, len, true, &m, &n, &bad), 0);
	assert_int_equal(bad, 0);
	/* app, jit, libc, plugin, ld.so, vdso, vsyscall */
	assert_int_equal(n, 7);
	hit = agent_procmaps_find(m, n, 0x5566b6a02000ULL + 0x1234);
	assert_non_null(hit);
	assert_string_equal(hit->path, "/usr/local/bin/app");
	assert_int_equal(hit->offset, 0x2000);
	hit = agent_procmaps_find(m, n, 0x7f21cd001000ULL);
	assert_int_equal(hit->kind, AGENT_MAP_SPECIAL); /* [anon:jit code cache] */
	hit = agent_procmaps_find(m, n, 0x7f21ce100010ULL);
	assert_true(hit->deleted);
	assert_string_equal(hit->path, "/app/plugins/my plugin.so");
	hit = agent_procmaps_find(m, n, 0x7ffc2a6f4100ULL);
	assert_int_equal(hit->kind, AGENT_MAP_VDSO);
	agent_procmaps_free(m, n);
	free(buf);
}

static void test_huge(void **state)
{
	/* More lines than the limit: the first AGENT_PROCMAPS_MAX_ENTRIES come back with -E2BIG. */
	size_t lines = AGENT_PROCMAPS_MAX_ENTRIES + 10, len = 0;
	char *buf = malloc(lines * 80);
	struct agent_map *m = NULL;
	size_t n = 0;

	(void)state;
	assert_non_null(buf);
	for (size_t i = 0; i < lines; i++)
		len += (size_t)sprintf(buf + len, "%zx-%zx r-xp 00000000 fd:01 %zu /lib/l%zu.so\n", (i + 1) * 0x10000,
				       (i + 1) * 0x10000 + 0x1000, i, i);
	assert_int_equal(agent_procmaps_parse(buf, len, true, &m, &n, NULL), -E2BIG);
	assert_int_equal(n, AGENT_PROCMAPS_MAX_ENTRIES);
	agent_procmaps_free(m, n);
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_all_lines), cmocka_unit_test(test_exec_only_and_find),
		cmocka_unit_test(test_bad_lines), cmocka_unit_test(test_mixed_and_unsorted),
		cmocka_unit_test(test_fixture),	  cmocka_unit_test(test_huge),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
