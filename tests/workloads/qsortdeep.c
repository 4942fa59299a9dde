// SPDX-License-Identifier: Apache-2.0
/*
 * The table unwinder's workload: built -O2 -fomit-frame-pointer, its hot
 * code runs inside libc (qsort calling a comparator, and memcpy), under a
 * call chain of CHAIN_DEPTH functions of its own, none with a frame
 * pointer. A frame-pointer walk loses everything above the libc frame; a
 * complete stack reaches main.
 *
 * Two phases alternate: sort_phase() (qsort with compare_keys) and
 * copy_phase() (memcpy of a large buffer). Each measures its own thread
 * CPU time, and at exit the program prints the truth the profile is judged
 * by: "sort_ns=N copy_ns=N".
 *
 * Usage: qsortdeep SECONDS (of its own CPU time). Prints its pid first.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CHAIN_DEPTH 12
#define N_KEYS	    20000
#define COPY_BYTES  (8u << 20)

static volatile uint64_t sink;
static uint64_t sort_ns, copy_ns;
static uint32_t keys[N_KEYS];
static char *copy_src, *copy_dst;

static uint64_t thread_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* The comparator qsort calls: libc's frame sits between it and its caller. */
static int __attribute__((noinline)) compare_keys(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return (x > y) - (x < y);
}

static void __attribute__((noinline)) sort_phase(uint32_t seed)
{
	uint64_t t0 = thread_ns();

	for (int i = 0; i < N_KEYS; i++) {
		seed = seed * 1103515245u + 12345u;
		keys[i] = seed;
	}
	qsort(keys, N_KEYS, sizeof(keys[0]), compare_keys);
	sink += keys[N_KEYS / 2];
	sort_ns += thread_ns() - t0;
}

static void __attribute__((noinline)) copy_phase(int rounds)
{
	uint64_t t0 = thread_ns();

	for (int i = 0; i < rounds; i++) {
		memcpy(copy_dst, copy_src, COPY_BYTES);
		copy_src[i & 4095]++;
	}
	sink += (uint64_t)copy_dst[123];
	copy_ns += thread_ns() - t0;
}

/* A chain of distinct frames: each level has its own stack adjustment. */
static void __attribute__((noinline)) chain(int level, uint32_t seed)
{
	volatile char pad[16 + 8 * (CHAIN_DEPTH % 7)];

	pad[0] = (char)level;
	if (level > 0) {
		chain(level - 1, seed + (uint32_t)pad[0]);
		sink += pad[0];
		return;
	}
	if (seed % 10 < 7)
		sort_phase(seed);
	else
		copy_phase(7);
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 5;
	struct timespec start, now;
	uint32_t round = 0;

	copy_src = malloc(COPY_BYTES);
	copy_dst = malloc(COPY_BYTES);
	if (!copy_src || !copy_dst)
		return 1;
	memset(copy_src, 1, COPY_BYTES);
	memset(copy_dst, 2, COPY_BYTES);
	printf("%d\n", (int)getpid());
	fflush(stdout);
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &start);
	do {
		chain(CHAIN_DEPTH, round++);
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
	} while ((double)(now.tv_sec - start.tv_sec) + (double)(now.tv_nsec - start.tv_nsec) / 1e9 < seconds);
	printf("sort_ns=%llu copy_ns=%llu\n", (unsigned long long)sort_ns, (unsigned long long)copy_ns);
	return 0;
}
