// SPDX-License-Identifier: Apache-2.0
/*
 * The frame shapes whose AArch64 call frame information the unwind table
 * builder must read (tests/integration/unwind-table-arm64.py cross-compiles
 * it with and without frame pointers, and with pointer authentication):
 *
 *   leaf_mix()    a leaf: never saves LR, the return address stays in it
 *   small_frame() saves LR (and FP) next to the CFA or at the frame's bottom
 *   big_frame()   a frame over 1 KiB: GCC saves LR at its bottom, far from the CFA
 *   var_frame()   alloca: the CFA is FP-based where GCC keeps a frame pointer
 *
 * The test reads the file only; running it (on arm64) prints a checksum.
 */
#include <alloca.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static volatile unsigned long sink;

__attribute__((noinline)) unsigned long leaf_mix(unsigned long x)
{
	return (x * 0x9e3779b97f4a7c15ul) ^ (x >> 29);
}

__attribute__((noinline)) unsigned long small_frame(unsigned long x)
{
	unsigned long a[8];

	for (int i = 0; i < 8; i++)
		a[i] = leaf_mix(x + (unsigned long)i);
	sink = a[x % 8];
	return a[(x + 3) % 8] + leaf_mix(a[1]);
}

__attribute__((noinline)) unsigned long big_frame(unsigned long x)
{
	unsigned char buf[4096];

	memset(buf, (int)x, sizeof(buf));
	for (unsigned long i = 0; i < x % 64; i++)
		buf[(i * 61) % sizeof(buf)] += (unsigned char)small_frame(i);
	sink = buf[x % sizeof(buf)];
	return buf[(x * 7) % sizeof(buf)] + small_frame(x);
}

__attribute__((noinline)) unsigned long var_frame(unsigned long n)
{
	unsigned char *p = alloca(n % 512 + 16);

	memset(p, (int)n, n % 512 + 16);
	sink = p[n % 16];
	return p[(n / 3) % 16] + big_frame(n);
}

int main(int argc, char **argv)
{
	unsigned long n = argc > 1 ? strtoul(argv[1], NULL, 10) : 1000;

	printf("%lu\n", var_frame(n));
	return 0;
}
