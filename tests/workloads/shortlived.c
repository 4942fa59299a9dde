// SPDX-License-Identifier: Apache-2.0
/*
 * A short-lived process: burns the given number of milliseconds (default
 * 300) of its own CPU time in short_work(), then exits. Tests start it
 * several times while the agent runs and check its samples are attributed to
 * this file. CPU time, not wall time: on a loaded machine a wall-clock budget
 * would shrink the work (and the samples a test can expect) while start-up
 * costs the same, so the share in short_work would depend on the load.
 * Prints its pid first.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

void short_work(double ms);

static volatile uint64_t sink;

static double cpu_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

void __attribute__((noinline)) short_work(double ms)
{
	uint64_t x = 1;
	double end = cpu_now() + ms / 1000.0;

	/* About 0.2 ms between clock reads (a system call each). */
	while (cpu_now() < end)
		for (int i = 0; i < 200000; i++)
			x = x * 6364136223846793005ULL + 1442695040888963407ULL;
	sink = x;
}

int main(int argc, char **argv)
{
	printf("%d\n", (int)getpid());
	fflush(stdout);
	short_work(argc > 1 ? atof(argv[1]) : 300.0);
	return 0;
}
