// SPDX-License-Identifier: Apache-2.0
/*
 * Off-CPU workload (tests/integration/agent-offcpu.py): three threads, each
 * named after what it does.
 *   sleeper  sleeps 10 ms at a time in offcpu_sleep() (nanosleep), then
 *            writes a byte into a pipe;
 *   reader   blocks reading that pipe in offcpu_pipe_read(), so it waits
 *            on the sleeper;
 *   burner   spins in offcpu_burn() and never blocks.
 * Usage: offcpu SECONDS. Prints its pid, waits for a line on stdin (so an
 * agent can be started on that pid first), runs SECONDS, and prints the
 * nanoseconds the sleeper and the reader spent inside their blocking calls
 * (CLOCK_MONOTONIC around each call): "sleeper NS" and "reader NS".
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Global, so nm names them for the test. */
void offcpu_sleep(void);
ssize_t offcpu_pipe_read(void);
void offcpu_burn(void);

static double seconds = 5.0;
static volatile int stop;
static int pipefd[2];
static uint64_t sleeper_ns, reader_ns;
static volatile uint64_t sink;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

void __attribute__((noinline)) offcpu_sleep(void)
{
	struct timespec ts = { 0, 10 * 1000 * 1000 };
	uint64_t t0 = now_ns();

	nanosleep(&ts, NULL);
	sleeper_ns += now_ns() - t0;
}

/* Returns what read() returned: 0 once the sleeper has closed the pipe. */
ssize_t __attribute__((noinline)) offcpu_pipe_read(void)
{
	char c;
	uint64_t t0 = now_ns();
	ssize_t n = read(pipefd[0], &c, 1);

	reader_ns += now_ns() - t0;
	return n;
}

void __attribute__((noinline)) offcpu_burn(void)
{
	uint64_t x = 1;

	while (!stop)
		for (int i = 0; i < 100000; i++)
			x = x * 6364136223846793005ULL + 1442695040888963407ULL;
	sink = x;
}

static void *sleeper(void *arg)
{
	uint64_t end = now_ns() + (uint64_t)(seconds * 1e9);

	(void)arg;
	pthread_setname_np(pthread_self(), "sleeper");
	while (now_ns() < end) {
		offcpu_sleep();
		if (write(pipefd[1], "x", 1) != 1)
			break;
	}
	close(pipefd[1]);
	return NULL;
}

static void *reader(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "reader");
	while (offcpu_pipe_read() > 0)
		;
	return NULL;
}

static void *burner(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "burner");
	offcpu_burn();
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t t[3];
	char line[64];

	if (argc > 1)
		seconds = atof(argv[1]);
	if (pipe(pipefd) < 0) {
		perror("pipe");
		return 1;
	}
	printf("%d\n", (int)getpid());
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return 1;
	pthread_create(&t[0], NULL, sleeper, NULL);
	pthread_create(&t[1], NULL, reader, NULL);
	pthread_create(&t[2], NULL, burner, NULL);
	pthread_join(t[0], NULL);
	pthread_join(t[1], NULL);
	stop = 1;
	pthread_join(t[2], NULL);
	printf("sleeper %llu\nreader %llu\n", (unsigned long long)sleeper_ns, (unsigned long long)reader_ns);
	return 0;
}
