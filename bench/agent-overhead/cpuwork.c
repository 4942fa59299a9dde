// SPDX-License-Identifier: Apache-2.0
/*
 * The fixed CPU-bound workload of bench/agent-overhead: each of N worker
 * processes does the same number of iterations under a 24-deep call chain
 * (so sampled stacks have a realistic depth), then reports. The parent
 * prints the wall-clock seconds from first start to last finish, and the
 * CPU seconds (user + system) the workers used: on a machine shared with
 * other work the wall time varies with their load, the CPU time much less.
 * Usage: cpuwork WORKERS ITERATIONS_MILLIONS
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DEPTH 24

uint64_t descend(int depth, uint64_t n, uint64_t x);

static volatile uint64_t sink;

uint64_t __attribute__((noinline)) descend(int depth, uint64_t n, uint64_t x)
{
	volatile uint64_t acc = x;

	if (depth > 0)
		return descend(depth - 1, n, x + 1) + 1;
	for (uint64_t i = 0; i < n; i++)
		acc = acc * 6364136223846793005ULL + 1442695040888963407ULL;
	return acc;
}

int main(int argc, char **argv)
{
	int workers = argc > 1 ? atoi(argv[1]) : 2;
	uint64_t millions = argc > 2 ? strtoull(argv[2], NULL, 10) : 1000;
	struct timespec a, b;
	struct rusage ru;

	clock_gettime(CLOCK_MONOTONIC, &a);
	for (int w = 0; w < workers; w++) {
		if (fork() == 0) {
			uint64_t x = (uint64_t)w;
			for (uint64_t i = 0; i < millions; i++)
				x = descend(DEPTH, 1000000, x);
			sink = x;
			_exit(0);
		}
	}
	while (wait(NULL) > 0)
		;
	clock_gettime(CLOCK_MONOTONIC, &b);
	getrusage(RUSAGE_CHILDREN, &ru);
	printf("%.4f %.4f\n", (double)(b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9,
	       (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
		       ru.ru_stime.tv_usec / 1e6);
	return 0;
}
