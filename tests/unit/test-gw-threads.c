// SPDX-License-Identifier: Apache-2.0
/*
 * Thread priorities (gateway/core/threads.h): a background thread runs
 * GW_BACKGROUND_NICE nicer than the process, once however often it asks,
 * and the threads that answer agents keep the process's priority.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/threads.h"
#include "common/macro.h"

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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_background),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
