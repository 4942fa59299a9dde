// SPDX-License-Identifier: Apache-2.0
/*
 * The old kernels' fallbacks (agent/kernel-probe.h): SR_AGENT_FORCE_FALLBACKS=1
 * selects them all whatever the kernel (the root tests rely on it), and the
 * memory figures the agent reports for them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "agent/kernel-probe.h"
#include "agent/memstats.h"

static void test_forced(void **state)
{
	struct agent_kernel_fallbacks fb;

	(void)state;
	assert_int_equal(setenv("SR_AGENT_FORCE_FALLBACKS", "1", 1), 0);
	agent_kernel_fallbacks(&fb);
	assert_true(fb.forced);
	assert_true(fb.prealloc_maps);
	assert_true(fb.mmap_args);
	/* Only "1" forces: a probe decides otherwise (as an unprivileged test, it cannot run: no fallback). */
	assert_int_equal(setenv("SR_AGENT_FORCE_FALLBACKS", "0", 1), 0);
	agent_kernel_fallbacks(&fb);
	assert_false(fb.forced);
	assert_int_equal(unsetenv("SR_AGENT_FORCE_FALLBACKS"), 0);
}

static void test_forced_off_cpu_hook(void **state)
{
	char sym[AGENT_KSYM_MAX] = "";
	const char *why = NULL;
	enum agent_off_cpu_hook h;

	(void)state;
	assert_int_equal(setenv("SR_AGENT_FORCE_FALLBACKS", "1", 1), 0);
	/* Forced, newer hooks are passed over even with BTF: a kprobe where the kernel has kprobes, else none. */
	h = agent_off_cpu_hook(NULL, sym, sizeof(sym), &why);
	assert_true(h == AGENT_OFF_CPU_KPROBE || h == AGENT_OFF_CPU_NONE);
	assert_non_null(why);
	if (h == AGENT_OFF_CPU_KPROBE)
		assert_memory_equal(sym, "finish_task_switch", 18);
	assert_int_equal(unsetenv("SR_AGENT_FORCE_FALLBACKS"), 0);
}

static void test_prealloc_bytes(void **state)
{
	(void)state;
	/* 48 bytes of element, key and value 8-aligned: a u32 -> 4120-byte value (struct unwind_proc). */
	assert_int_equal(agent_prealloc_bytes(1, 4, 4120), 48 + 8 + 4120);
	assert_int_equal(agent_prealloc_bytes(1024, 4, 1), 1024ULL * (48 + 8 + 8));
	assert_int_equal(agent_prealloc_bytes(0, 4, 4), 0);
}

static void test_ringbuf_bytes(void **state)
{
	(void)state;
	/* 4 MiB of data in 4 KiB pages: 1024 data pages, 3 of header, 3 + 2048 page pointers. */
	assert_int_equal(agent_memstats_ringbuf_bytes(4u << 20, 4096), (3 + 1024) * 4096ULL + (3 + 2048) * 8ULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_forced),
		cmocka_unit_test(test_forced_off_cpu_hook),
		cmocka_unit_test(test_prealloc_bytes),
		cmocka_unit_test(test_ringbuf_bytes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
