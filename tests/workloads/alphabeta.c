// SPDX-License-Identifier: Apache-2.0
/*
 * CPU-bound workload with a known split: main() alternates between alpha()
 * and beta(), giving alpha 7 units of work and beta 3 (~70% / ~30%).
 * Usage: alphabeta SECONDS (of its own CPU time, so that the samples a test
 * can expect do not depend on the machine's load). Prints its pid first so
 * tests can filter on it.
 * The functions are noinline and the work cannot be optimized away.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define UNIT 200000

uint64_t alpha(uint64_t x);
uint64_t beta(uint64_t x);

static volatile uint64_t sink;

static uint64_t __attribute__((noinline)) spin(uint64_t n, uint64_t x)
{
	for (uint64_t i = 0; i < n; i++)
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
	return x;
}

/*
 * alpha and beta are the leaves themselves. The accumulator lives on the
 * stack: GCC emits no frame-pointer prologue in a leaf that touches no stack
 * memory (even with -fno-omit-frame-pointer), and then the frame-pointer
 * walk skips the caller. That is true of real programs too (docs/agent.md).
 */
uint64_t __attribute__((noinline)) alpha(uint64_t x)
{
	volatile uint64_t acc = x;

	for (uint64_t i = 0; i < 7 * UNIT; i++)
		acc = acc * 6364136223846793005ULL + 1442695040888963407ULL;
	return acc;
}

uint64_t __attribute__((noinline)) beta(uint64_t x)
{
	volatile uint64_t acc = x;

	for (uint64_t i = 0; i < 3 * UNIT; i++)
		acc = acc * 6364136223846793005ULL + 1442695040888963407ULL;
	return acc;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 5.0, end;
	uint64_t x = 1;

	printf("%d\n", (int)getpid());
	fflush(stdout);
	sink = spin(1, 1);
	end = now() + seconds;
	while (now() < end) {
		x = alpha(x);
		x = beta(x);
	}
	sink = x;
	return 0;
}
