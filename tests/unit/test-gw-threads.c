// SPDX-License-Identifier: Apache-2.0
/*
 * Thread priorities (gateway/core/threads.h): a background thread runs
 * GW_BACKGROUND_NICE nicer than the process, once however often it asks,
 * and the threads that answer agents keep the process's priority. The CPUs
 * usable: the affinity's, capped by cpu.max in the cgroup or an ancestor.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/threads.h"
#include "macro.h"

static int nice_of_thread(void)
{
	int n;

	errno = 0;
	n = getpriority(PRIO_PROCESS, (id_t)gettid());
	assert_false(n == -1 && errno != 0);
	return n;
}

struct result {
	int before, after, again;
};

static void *background_thread(void *arg)
{
	struct result *r = arg;

	r->before = nice_of_thread();
	gw_thread_background();
	r->after = nice_of_thread();
	gw_thread_background();
	r->again = nice_of_thread();
	return NULL;
}

static void test_background(void **state)
{
	int main_before = nice_of_thread();
	struct result r = { 0 };
	pthread_t t;

	(void)state;
	assert_int_equal(pthread_create(&t, NULL, background_thread, &r), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(r.before, main_before); /* a new thread starts at its creator's */
	assert_int_equal(r.after, SR_MIN(r.before + GW_BACKGROUND_NICE, 19));
	assert_int_equal(r.again, r.after);		 /* once per thread */
	assert_int_equal(nice_of_thread(), main_before); /* only the calling thread */
}

static void write_file(const char *dir, const char *name, const char *text)
{
	char path[PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void test_cpus_usable(void **state)
{
	char root[] = "/tmp/sr-cgroup-XXXXXX", mid[PATH_MAX], leaf[PATH_MAX + 16];

	(void)state;
	assert_non_null(mkdtemp(root));
	snprintf(mid, sizeof(mid), "%s/kubepods", root);
	snprintf(leaf, sizeof(leaf), "%s/pod1", mid);
	assert_int_equal(mkdir(mid, 0700), 0);
	assert_int_equal(mkdir(leaf, 0700), 0);
	/* No cpu.max anywhere, no cgroup, "max": the affinity's count. */
	assert_int_equal(gw_cpus_usable_in(leaf, 8), 8);
	assert_int_equal(gw_cpus_usable_in("", 8), 8);
	assert_int_equal(gw_cpus_usable_in(NULL, 0), 1);
	write_file(leaf, "cpu.max", "max 100000\n");
	assert_int_equal(gw_cpus_usable_in(leaf, 8), 8);
	/* A quota: rounded up (1.5 CPUs: 2), never above the affinity, never 0. */
	write_file(leaf, "cpu.max", "150000 100000\n");
	assert_int_equal(gw_cpus_usable_in(leaf, 8), 2);
	assert_int_equal(gw_cpus_usable_in(leaf, 1), 1);
	write_file(leaf, "cpu.max", "1000 100000\n");
	assert_int_equal(gw_cpus_usable_in(leaf, 8), 1);
	/* An ancestor's smaller quota counts too; garbage is no quota. */
	write_file(leaf, "cpu.max", "400000 100000\n");
	write_file(mid, "cpu.max", "100000 100000\n");
	assert_int_equal(gw_cpus_usable_in(leaf, 8), 1);
	write_file(mid, "cpu.max", "lots 100000\n");
	assert_int_equal(gw_cpus_usable_in(leaf, 8), 4);
	write_file(mid, "cpu.max", "100000 0\n");
	assert_int_equal(gw_cpus_usable_in(leaf, 8), 4);
	/* This process: at least 1, at most what sysconf says is online. */
	assert_true(gw_cpus_usable() >= 1);
	assert_true(gw_cpus_usable() <= (unsigned)sysconf(_SC_NPROCESSORS_CONF));
	snprintf(mid, sizeof(mid), "rm -rf '%s'", root);
	assert_int_equal(system(mid), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_background),
		cmocka_unit_test(test_cpus_usable),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
