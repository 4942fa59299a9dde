// SPDX-License-Identifier: Apache-2.0
/* The shared library of the uselib workload: all the CPU time is spent in lib_work(). */
#include <stdint.h>

uint64_t lib_work(uint64_t x, uint64_t n);

uint64_t __attribute__((noinline)) lib_work(uint64_t x, uint64_t n)
{
	/* On the stack, so GCC gives this leaf a frame pointer (see alphabeta.c). */
	volatile uint64_t acc = x;

	for (uint64_t i = 0; i < n; i++)
		acc = acc * 6364136223846793005ULL + 1442695040888963407ULL;
	return acc;
}
