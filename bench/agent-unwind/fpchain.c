// SPDX-License-Identifier: Apache-2.0
/*
 * bench/agent-unwind's fair workload: a call chain of DEPTH frames of its
 * own, built with frame pointers everywhere (leaves too), spinning in the
 * innermost one. Both unwinders walk it to main (the frame-pointer walk ends
 * in libc's __libc_start_call_main, the table walk three frames later at
 * _start), so their BPF cost per sample compares like for like; qsortdeep is
 * the same shape without frame pointers and with libc on top.
 *
 * Usage: fpchain SECONDS [DEPTH]. Prints its pid first.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define MAX_DEPTH 200

static volatile uint64_t sink;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The leaf: work that cannot be optimized away, long enough that samples land here. */
static uint64_t __attribute__((noinline)) spin(uint64_t x)
{
	volatile uint64_t acc = x;

	for (int i = 0; i < 2000000; i++)
		acc = acc * 6364136223846793005ULL + 1442695040888963407ULL;
	return acc;
}

/*
 * The volatile local is read after the call: GCC turns a plain "return
 * chain(...) + 1" into a loop (tail recursion with an accumulator), which
 * leaves a stack one frame deep.
 */
static uint64_t __attribute__((noinline)) chain(int level, uint64_t x)
{
	volatile uint64_t keep = x;

	if (level > 0)
		return chain(level - 1, x + 1) ^ keep;
	return spin(x);
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 5, end;
	int depth = argc > 2 ? atoi(argv[2]) : 14;
	uint64_t x = 1;

	if (depth < 0 || depth > MAX_DEPTH)
		depth = 14;
	printf("%d\n", (int)getpid());
	fflush(stdout);
	end = now() + seconds;
	while (now() < end)
		x = chain(depth, x);
	sink = x;
	return 0;
}
