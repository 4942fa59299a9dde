// SPDX-License-Identifier: Apache-2.0
/*
 * The table unwinder's "Rust-like" workload: a static executable linked
 * without .eh_frame_hdr (-static -Wl,--no-eh-frame-hdr, as some Rust and
 * Zig toolchains leave them), built -O2 -fomit-frame-pointer. Its only
 * unwind information is .eh_frame, which the table builder reads linearly.
 * Under a chain of CHAIN_DEPTH frames of its own, it alternates its own hot
 * loop (spin) with the static glibc's qsort calling back into it
 * (compare_vals), so stacks cross from its code into libc's and back.
 *
 * Usage: staticnohdr SECONDS (of its own CPU time). Prints its pid first.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define CHAIN_DEPTH 10
#define N_VALS	    4096

static volatile uint64_t sink;
static uint64_t vals[N_VALS];

static int __attribute__((noinline)) compare_vals(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

static void __attribute__((noinline)) sort_work(uint64_t seed)
{
	for (int i = 0; i < N_VALS; i++) {
		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		vals[i] = seed;
	}
	qsort(vals, N_VALS, sizeof(vals[0]), compare_vals);
	sink += vals[N_VALS / 2];
}

static uint64_t __attribute__((noinline)) spin(uint64_t x)
{
	for (int i = 0; i < 300000; i++) {
		x ^= x >> 29;
		x *= 0xbf58476d1ce4e5b9ULL;
	}
	sink += x;
	return x;
}

static void __attribute__((noinline)) chain(int level, uint64_t seed)
{
	volatile char pad[24];

	pad[0] = (char)level;
	if (level > 0) {
		chain(level - 1, seed + (uint64_t)pad[0]);
		sink += pad[0];
		return;
	}
	if (seed & 1)
		sort_work(seed);
	else
		spin(seed);
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 5;
	struct timespec start, now;
	uint64_t round = 0;

	printf("%d\n", (int)getpid());
	fflush(stdout);
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &start);
	do {
		chain(CHAIN_DEPTH, round++);
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
	} while ((double)(now.tv_sec - start.tv_sec) + (double)(now.tv_nsec - start.tv_nsec) / 1e9 < seconds);
	printf("rounds=%llu\n", (unsigned long long)round);
	return 0;
}
