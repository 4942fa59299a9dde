// SPDX-License-Identifier: Apache-2.0
/*
 * The table unwinder's C++ workload, built -O2 -fomit-frame-pointer: a
 * chain of LEVELS functions of its own (level8 ... level1) under main, and
 * at its bottom two kinds of work that alternate:
 *   - mix_round(): a hot loop in mix(), which is always_inline, so its code
 *     and its samples belong to mix_round's frame (no frame of its own);
 *   - catch_round(): throws and catches exceptions in a loop, so samples
 *     land in libstdc++ and libgcc_s's unwinder (_Unwind_RaiseException,
 *     the personality routine) and in the landing pads, some of which GCC
 *     moves to .cold parts of their functions.
 * level4's body is an always_inline function too: level3's caller is
 * level4 with stage()'s code inlined in it.
 *
 * Every function of the chain does work after its call (no tail calls), so
 * each frame's caller is the one the source says: the test lists the
 * call edges and checks every unwound stack against them.
 *
 * Usage: cxxunwind SECONDS (of its own CPU time). Prints its pid first.
 */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))

static volatile uint64_t sink;

struct boom {
	uint64_t value;
};

/* The hot function: inlined into mix_round, it has no frame of its own. */
static inline __attribute__((always_inline)) uint64_t mix(uint64_t x)
{
	for (int i = 0; i < 200000; i++) {
		x ^= x >> 31;
		x *= 0x9e3779b97f4a7c15ULL;
		x ^= x << 17;
	}
	return x;
}

extern "C" NOINLINE uint64_t mix_round(uint64_t seed)
{
	uint64_t v = mix(seed);

	sink += v;
	return v;
}

extern "C" NOINLINE void thrower(uint64_t v)
{
	if (v != UINT64_MAX)
		throw boom{ v };
	sink += v;
}

extern "C" NOINLINE uint64_t catch_round(uint64_t seed)
{
	uint64_t sum = 0;

	for (int i = 0; i < 200; i++) {
		try {
			thrower(seed + (uint64_t)i);
		} catch (const boom &b) {
			sum += b.value;
		}
	}
	sink += sum;
	return sum;
}

extern "C" NOINLINE uint64_t level1(uint64_t s)
{
	uint64_t v = (s & 1) ? catch_round(s) : mix_round(s);

	sink += v;
	return v + 1;
}

#define LEVEL(n, callee)                                                                                               \
	extern "C" NOINLINE uint64_t level##n(uint64_t s)                                                              \
	{                                                                                                              \
		uint64_t v = callee(s + (n));                                                                          \
		sink += v;                                                                                             \
		return v ^ (n);                                                                                        \
	}

LEVEL(2, level1)
LEVEL(3, level2)

/* level4's body: inlined, so level3's caller is level4. */
static inline __attribute__((always_inline)) uint64_t stage(uint64_t s)
{
	volatile uint64_t local[4] = { s, s + 1, s + 2, s + 3 };
	uint64_t v = level3(local[s & 3]);

	sink += local[0];
	return v;
}

extern "C" NOINLINE uint64_t level4(uint64_t s)
{
	uint64_t v = stage(s);

	sink += v;
	return v + 4;
}

LEVEL(5, level4)
LEVEL(6, level5)
LEVEL(7, level6)
LEVEL(8, level7)

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 5;
	struct timespec start, now;
	uint64_t round = 0;

	printf("%d\n", (int)getpid());
	fflush(stdout);
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &start);
	do {
		sink += level8(round++);
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
	} while ((double)(now.tv_sec - start.tv_sec) + (double)(now.tv_nsec - start.tv_nsec) / 1e9 < seconds);
	printf("rounds=%llu\n", (unsigned long long)round);
	return 0;
}
