// SPDX-License-Identifier: Apache-2.0
/*
 * bench/agent-offcpu: a context-switch-heavy workload. Two processes pass a
 * byte back and forth through two pipes ROUNDS times, both pinned to one CPU,
 * so every round trip is two blocking reads and two context switches.
 * Usage: pingpong ROUNDS [CPU]. Prints the nanoseconds per round trip.
 */
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	long rounds = argc > 1 ? atol(argv[1]) : 100000;
	int a[2], b[2];
	char c = 'x';
	uint64_t t0;
	pid_t pid;

	if (argc > 2) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(atoi(argv[2]), &set);
		if (sched_setaffinity(0, sizeof(set), &set) < 0) {
			perror("sched_setaffinity");
			return 1;
		}
	}
	if (pipe(a) < 0 || pipe(b) < 0) {
		perror("pipe");
		return 1;
	}
	pid = fork();
	if (pid < 0) {
		perror("fork");
		return 1;
	}
	if (pid == 0) {
		for (long i = 0; i < rounds; i++)
			if (read(a[0], &c, 1) != 1 || write(b[1], &c, 1) != 1)
				_exit(1);
		_exit(0);
	}
	t0 = now_ns();
	for (long i = 0; i < rounds; i++)
		if (write(a[1], &c, 1) != 1 || read(b[0], &c, 1) != 1)
			return 1;
	printf("%.1f\n", (double)(now_ns() - t0) / (double)rounds);
	waitpid(pid, NULL, 0);
	return 0;
}
