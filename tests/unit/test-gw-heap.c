// SPDX-License-Identifier: Apache-2.0
/*
 * core/heap.c: the periodic trim gives the pages of free memory inside the
 * heap back to the system (malloc returns only the heap's top by itself);
 * paged blocks are resident only where written, and keep their bytes
 * across realloc in and out of their own pages.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

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

/* Resident pages among the whole pages of [p, p + n). */
static size_t resident_pages(const void *p, size_t n)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	uintptr_t a = ((uintptr_t)p + page - 1) / page * page, e = ((uintptr_t)p + n) / page * page;
	unsigned char vec[64];
	size_t count = 0;

	assert_true(e > a && (e - a) / page <= sizeof(vec));
	assert_int_equal(mincore((void *)a, e - a, vec), 0);
	for (size_t i = 0; i < (e - a) / page; i++)
		count += vec[i] & 1;
	return count;
}

static void test_paged_blocks(void **state)
{
	uint8_t *small, *big, *zeroed, *p;

	(void)state;
	small = gw_heap_paged_alloc(100, false);
	assert_non_null(small);
	memset(small, 0xab, 100);

	/* A big block is in pages of its own: none but the first (its header) resident before it is written. */
	big = gw_heap_paged_alloc(16 * 1024 + 10, false);
	assert_non_null(big);
	assert_int_equal(resident_pages(big, 16 * 1024 + 10), 0);
	big[0] = 1;		/* in the first page, with the header: not counted */
	big[8 * 1024] = 2;	/* a page of its own */
	big[16 * 1024 + 9] = 3; /* the last page, only partly the block's: not counted */
	assert_int_equal(resident_pages(big, 16 * 1024 + 10), 1);

	zeroed = gw_heap_paged_alloc(GW_HEAP_PAGED_MIN, true);
	assert_non_null(zeroed);
	for (size_t i = 0; i < GW_HEAP_PAGED_MIN; i += 997)
		assert_int_equal(zeroed[i], 0);
	p = gw_heap_paged_alloc(10, true);
	assert_non_null(p);
	assert_memory_equal(p, "\0\0\0\0\0\0\0\0\0\0", 10);
	gw_heap_paged_free(p);

	/* realloc: small to small, small to paged, paged to small; the bytes stay. */
	small = gw_heap_paged_realloc(small, 200);
	assert_non_null(small);
	assert_int_equal(small[99], 0xab);
	small = gw_heap_paged_realloc(small, 3 * GW_HEAP_PAGED_MIN);
	assert_non_null(small);
	for (int i = 0; i < 100; i++)
		assert_int_equal(small[i], 0xab);
	small[3 * GW_HEAP_PAGED_MIN - 1] = 7;
	small = gw_heap_paged_realloc(small, 50);
	assert_non_null(small);
	assert_int_equal(small[49], 0xab);
	p = gw_heap_paged_realloc(NULL, 20);
	assert_non_null(p);

	/* Sizes no allocation can have fail cleanly. */
	assert_null(gw_heap_paged_alloc(SIZE_MAX - 8, false));
	assert_null(gw_heap_paged_realloc(p, SIZE_MAX - 8));

	gw_heap_paged_free(p);
	gw_heap_paged_free(small);
	gw_heap_paged_free(big);
	gw_heap_paged_free(zeroed);
	gw_heap_paged_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_trim_gives_pages_back),
		cmocka_unit_test(test_paged_blocks),
	};

	gw_heap_setup();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
