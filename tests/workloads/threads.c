// SPDX-License-Identifier: Apache-2.0
/*
 * Multi-threaded workload: NTHREADS threads, each named "worker-N" and
 * spinning in its own function (worker_0, worker_1, worker_2), so a test can
 * check per-thread attribution (tid, thread name, leaf function).
 * Usage: threads SECONDS (of each worker's own CPU time). Prints "pid tid0 tid1 tid2" first.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define NTHREADS 3

static double seconds = 5.0;
static pid_t tids[NTHREADS];
static pthread_barrier_t ready;
static volatile uint64_t sink;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

void worker_0(void);
void worker_1(void);
void worker_2(void);

#define WORKER(n)                                                                                                      \
	void __attribute__((noinline)) worker_##n(void)                                                                \
	{                                                                                                              \
		uint64_t x = n;                                                                                        \
		double end = now() + seconds;                                                                          \
		while (now() < end)                                                                                    \
			for (int i = 0; i < 100000; i++)                                                               \
				x = x * 6364136223846793005ULL + 1442695040888963407ULL;                               \
		sink = x;                                                                                              \
	}
WORKER(0)
WORKER(1)
WORKER(2)

static void *run(void *arg)
{
	long n = (long)arg;
	char name[16];

	snprintf(name, sizeof(name), "worker-%ld", n);
	pthread_setname_np(pthread_self(), name);
	tids[n] = (pid_t)syscall(SYS_gettid);
	pthread_barrier_wait(&ready);
	pthread_barrier_wait(&ready);
	if (n == 0)
		worker_0();
	else if (n == 1)
		worker_1();
	else
		worker_2();
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t t[NTHREADS];

	if (argc > 1)
		seconds = atof(argv[1]);
	pthread_barrier_init(&ready, NULL, NTHREADS + 1);
	for (long i = 0; i < NTHREADS; i++)
		pthread_create(&t[i], NULL, run, (void *)i);
	pthread_barrier_wait(&ready);
	printf("%d", (int)getpid());
	for (int i = 0; i < NTHREADS; i++)
		printf(" %d", (int)tids[i]);
	printf("\n");
	fflush(stdout);
	pthread_barrier_wait(&ready);
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(t[i], NULL);
	return 0;
}
