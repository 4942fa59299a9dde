// SPDX-License-Identifier: Apache-2.0
/*
 * Syscall-heavy workload: reads /dev/zero and writes /dev/null in a loop,
 * so most of its samples land in the kernel (read/write paths) and must
 * carry kernel stacks. Usage: syscalls SECONDS; prints its pid.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 5.0, end;
	static char buf[65536];
	struct timespec ts;
	int in = open("/dev/zero", O_RDONLY), out = open("/dev/null", O_WRONLY);

	if (in < 0 || out < 0)
		return 1;
	printf("%d\n", (int)getpid());
	fflush(stdout);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	end = (double)ts.tv_sec + ts.tv_nsec / 1e9 + seconds;
	for (;;) {
		for (int i = 0; i < 256; i++) {
			if (read(in, buf, sizeof(buf)) < 0 || write(out, buf, sizeof(buf)) < 0)
				return 1;
		}
		clock_gettime(CLOCK_MONOTONIC, &ts);
		if ((double)ts.tv_sec + ts.tv_nsec / 1e9 >= end)
			break;
	}
	return 0;
}
