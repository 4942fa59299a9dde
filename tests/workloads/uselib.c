// SPDX-License-Identifier: Apache-2.0
/*
 * Spends its time in lib_work() of libsrwork.so (a shared library mapped at
 * a random address), so frames must be attributed to the library's build ID
 * at the library's own ELF addresses. Usage: uselib SECONDS (of its own CPU time); prints its pid.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

uint64_t lib_work(uint64_t x, uint64_t n);

static volatile uint64_t sink;

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 5.0;
	struct timespec ts;
	double end;
	uint64_t x = 1;

	printf("%d\n", (int)getpid());
	fflush(stdout);
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	end = (double)ts.tv_sec + ts.tv_nsec / 1e9 + seconds;
	for (;;) {
		x = lib_work(x, 1000000);
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
		if ((double)ts.tv_sec + ts.tv_nsec / 1e9 >= end)
			break;
	}
	sink = x;
	return 0;
}
