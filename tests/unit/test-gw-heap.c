// SPDX-License-Identifier: Apache-2.0
/*
 * core/heap.c: the periodic trim gives the pages of free memory inside the
 * heap back to the system (malloc returns only the heap's top by itself).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <uv.h>

#include "core/heap.h"

/* Resident anonymous memory of this process, in KiB (RssAnon in /proc/self/status). */
static long rss_anon_kib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long v = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "RssAnon: %ld kB", &v) == 1)
			break;
	fclose(f);
	return v;
}

static void on_stop(uv_timer_t *t)
{
	uv_stop(t->loop);
}

#define N_CHUNKS 2048
#define CHUNK	 (32 * 1024) /* under malloc's mmap threshold: in the heap */

static void test_trim_gives_pages_back(void **state)
{
	static void *chunks[N_CHUNKS];
	uv_loop_t loop;
	uv_timer_t trim, stop;
	long before, after;

	(void)state;
#ifdef __SANITIZE_ADDRESS__
	skip(); /* the sanitizer's allocator is not glibc's: nothing for malloc_trim() to give back */
#endif
	if (rss_anon_kib() < 0)
		skip();
	/* 64 MiB touched, then all freed but the last chunk, which keeps the free space off the heap's top. */
	for (int i = 0; i < N_CHUNKS; i++) {
		chunks[i] = malloc(CHUNK);
		assert_non_null(chunks[i]);
		memset(chunks[i], 0x5a, CHUNK);
	}
	for (int i = 0; i < N_CHUNKS - 1; i++)
		free(chunks[i]);
	before = rss_anon_kib();

	assert_int_equal(uv_loop_init(&loop), 0);
	assert_int_equal(gw_heap_trim_start(&loop, &trim, 20), 0);
	uv_timer_init(&loop, &stop);
	uv_timer_start(&stop, on_stop, 200, 0);
	uv_run(&loop, UV_RUN_DEFAULT);
	after = rss_anon_kib();
	print_message("RssAnon %ld KiB with 64 MiB free in the heap, %ld KiB after the trims\n", before, after);
	assert_true(before - after > 32 * 1024);

	/* The trim timer does not keep the loop alive: with the stop timer closed, the loop ends. */
	uv_close((uv_handle_t *)&stop, NULL);
	assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
	uv_close((uv_handle_t *)&trim, NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	assert_int_equal(uv_loop_close(&loop), 0);
	free(chunks[N_CHUNKS - 1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_trim_gives_pages_back),
	};

	gw_heap_setup();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
