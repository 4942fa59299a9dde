// SPDX-License-Identifier: Apache-2.0
/*
 * The Node.js function cache (agent/nodejs.c) over objects built in this
 * process's own memory and read back with process_vm_readv: a function is
 * described once and then served from the cache while its head is the same;
 * an object replaced at the same address (another name: the garbage collector
 * moved or freed the function) is described anew, never given the old name;
 * an object that is no SharedFunctionInfo any more is refused; a full cache
 * is emptied; an optimized frame's Code names its function, and a process
 * whose Codes fail the layout's checks goes back to functions only; an
 * optimized frame's line not found is read again a bounded number of times.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <linux/types.h>

#include "v8-test-meta.h"
#include "agent/nodejs.h"
#include "agent/proc.h"
#include "agent/v8.h"
#include "bpf/v8frame.h"

/* The heap: 8-byte slots, objects at fixed slots. */
static uint64_t heap[256];
enum { MAP_SFI = 0, MAP_STR = 4, MAP_OTHER = 8, STR_A = 16, STR_B = 24, SFI = 40, SFI2 = 48 };

static uint64_t tagged(int slot)
{
	return (uint64_t)(uintptr_t)&heap[slot] + 1;
}

/* A sample's ustack value for the SFI at slot (bpf/v8frame.h), without a bytecode offset. */
static uint64_t frame(int slot)
{
	return V8_FRAME_FLAG | (tagged(slot) >> 3);
}

static void map(int slot, uint16_t type)
{
	memcpy((uint8_t *)&heap[slot] + m.map_instance_type, &type, sizeof(type));
}

static void str(int slot, const char *s)
{
	int32_t len = (int32_t)strlen(s);

	heap[slot] = tagged(MAP_STR);
	memcpy((uint8_t *)&heap[slot] + m.string_length, &len, sizeof(len));
	memcpy((uint8_t *)&heap[slot] + m.seq_one_byte_chars, s, (size_t)len);
}

static void sfi(int slot, int name)
{
	heap[slot] = tagged(MAP_SFI);
	heap[slot + 2] = tagged(name); /* name_or_scope_info at 16 */
	heap[slot + 4] = 0;	       /* script_or_debug_info at 32: a Smi, no script */
}

static struct agent_proc self(void)
{
	struct agent_proc p = { 0 };

	p.pid = (uint32_t)getpid();
	p.start_ns = 42;
	memcpy(p.key, &p.pid, 4);
	memcpy(p.key + 4, &p.start_ns, 8);
	return p;
}

static void setup_heap(void)
{
	memset(heap, 0, sizeof(heap));
	map(MAP_SFI, 262);
	map(MAP_STR, 8);
	map(MAP_OTHER, 300);
	str(STR_A, "alphaWork");
	str(STR_B, "betaWork");
	sfi(SFI, STR_A);
	sfi(SFI2, STR_B);
}

static void test_cached_while_same(void **state)
{
	struct agent_nodejs *n = agent_nodejs_new(-1, 0);
	struct agent_proc p = self();
	struct agent_nodejs_stats st;
	struct agent_js_frame f;

	(void)state;
	setup_heap();
	assert_non_null(n);
	assert_int_equal(agent_nodejs__add(n, &p, &m), 0);
	assert_int_equal(agent_nodejs__frame(n, &p, frame(SFI), &f), 0);
	assert_string_equal(f.name, "alphaWork");
	assert_string_equal(f.script, "");
	/* The string's characters change but the object's head does not: the cached name stands. */
	str(STR_A, "alphaXork");
	assert_int_equal(agent_nodejs__frame(n, &p, frame(SFI), &f), 0);
	assert_string_equal(f.name, "alphaWork");
	agent_nodejs__stats(n, &st);
	assert_int_equal(st.function_reads, 1);
	assert_int_equal(st.functions_cached, 1);
	/* Not a V8 frame, or a process the namer does not know. */
	assert_int_equal(agent_nodejs__frame(n, &p, tagged(SFI), &f), -ENOENT);
	p.start_ns++;
	memcpy(p.key + 4, &p.start_ns, 8);
	assert_int_equal(agent_nodejs__frame(n, &p, frame(SFI), &f), -ENOENT);
	agent_nodejs_free(n);
}

static void test_replaced_object_described_anew(void **state)
{
	struct agent_nodejs *n = agent_nodejs_new(-1, 0);
	struct agent_proc p = self();
	struct agent_nodejs_stats st;
	struct agent_js_frame f;

	(void)state;
	setup_heap();
	assert_int_equal(agent_nodejs__add(n, &p, &m), 0);
	assert_int_equal(agent_nodejs__frame(n, &p, frame(SFI), &f), 0);
	assert_string_equal(f.name, "alphaWork");
	/* Another function at the same address: its name slot differs, so it is read again. */
	sfi(SFI, STR_B);
	assert_int_equal(agent_nodejs__frame(n, &p, frame(SFI), &f), 0);
	assert_string_equal(f.name, "betaWork");
	/* Something else at the address (its map is another type's): refused, and forgotten. */
	heap[SFI] = tagged(MAP_OTHER);
	assert_int_equal(agent_nodejs__frame(n, &p, frame(SFI), &f), -ENOENT);
	agent_nodejs__stats(n, &st);
	assert_int_equal(st.function_reads, 3);
	assert_int_equal(st.function_read_errors, 1);
	assert_int_equal(st.functions_cached, 0);
	agent_nodejs_free(n);
}

static void test_full_cache_evicts(void **state)
{
	struct agent_nodejs *n = agent_nodejs_new(-1, 1);
	struct agent_proc p = self();
	struct agent_nodejs_stats st;
	struct agent_js_frame f;

	(void)state;
	setup_heap();
	assert_int_equal(agent_nodejs__add(n, &p, &m), 0);
	assert_int_equal(agent_nodejs__frame(n, &p, frame(SFI), &f), 0);
	assert_int_equal(agent_nodejs__frame(n, &p, frame(SFI2), &f), 0);
	assert_string_equal(f.name, "betaWork");
	agent_nodejs__stats(n, &st);
	assert_int_equal(st.evicted, 1);
	assert_int_equal(st.functions_cached, 1);
	agent_nodejs_free(n);
}

/* An optimized Code of SFI at slot 80 (bpf/v8frame.h's V8_FRAME_CODE), its InstructionStream, deoptimization data and one position. */
enum { MAP_CODE = 60, MAP_IS = 64, MAP_FA = 68, MAP_BA = 72, CODE = 80, IS = 100, DEOPT = 110, POS = 130 };

static void setup_code(void)
{
	int32_t size = 4096;

	map(MAP_CODE, 245);
	map(MAP_IS, 252);
	map(MAP_FA, 175);
	map(MAP_BA, 190);
	heap[CODE] = tagged(MAP_CODE);
	heap[CODE + 2] = tagged(DEOPT);
	heap[CODE + 3] = tagged(POS);
	heap[CODE + 4] = tagged(IS);
	heap[CODE + 5] = (uint64_t)(uintptr_t)&heap[IS] + 16;
	memcpy(&heap[CODE + 7], &size, sizeof(size));
	heap[IS] = tagged(MAP_IS);
	heap[IS + 1] = tagged(CODE);
	heap[DEOPT] = tagged(MAP_FA);
	heap[DEOPT + 1] = (uint64_t)9 << 32;
	heap[DEOPT + 2 + 6] = tagged(SFI);
	heap[POS] = tagged(MAP_BA);
	heap[POS + 1] = (uint64_t)2 << 32;
	/* Code offset 0 (delta 1 from -1) at script position 0 (SourcePosition 2), as zigzag VLQs. */
	memcpy(&heap[POS + 2], "\x02\x04", 2);
}

static uint64_t code_frame(int slot, uint32_t offset)
{
	return V8_FRAME_FLAG | V8_FRAME_CODE | (tagged(slot) >> 3) | (uint64_t)(offset + 1) << V8_FRAME_OFFSET_SHIFT;
}

static void test_optimized_frame_and_refused_layout(void **state)
{
	struct agent_nodejs *n = agent_nodejs_new(-1, 0);
	struct agent_proc p = self();
	struct agent_js_frame f[AGENT_NODEJS_MAX_FRAMES];
	struct agent_nodejs_stats st;

	(void)state;
	setup_heap();
	setup_code();
	assert_non_null(n);
	assert_int_equal(agent_nodejs__add(n, &p, &m), 0);
	/* The Code's function, by its deoptimization data. */
	assert_int_equal(agent_nodejs__frames(n, &p, code_frame(CODE, 3), f, AGENT_NODEJS_MAX_FRAMES), 1);
	assert_string_equal(f[0].name, "alphaWork");
	assert_int_equal(f[0].sfi, tagged(SFI));
	/* A function's frame goes through it too. */
	assert_int_equal(agent_nodejs__frames(n, &p, frame(SFI2), f, AGENT_NODEJS_MAX_FRAMES), 1);
	assert_string_equal(f[0].name, "betaWork");
	/* Its first instruction no longer where its InstructionStream says: refused, and never named. */
	heap[CODE + 5] += 8;
	for (int i = 0; i < 20; i++)
		assert_int_equal(agent_nodejs__frames(n, &p, code_frame(CODE, 3), f, AGENT_NODEJS_MAX_FRAMES), -ENOENT);
	agent_nodejs__stats(n, &st);
	/* Refused more often than read: the process's optimized frames go back to their functions. */
	assert_int_equal(st.code_layouts_refused, 1);
	agent_nodejs_free(n);
}

/* A script at slot 140 whose source (slot 150) puts script position 0 on line 1; no line ends. */
enum { MAP_SCRIPT = 76, SCRIPT = 140, SOURCE = 150 };

static void give_script(int sfi_slot)
{
	map(MAP_SCRIPT, 167);
	heap[SCRIPT] = tagged(MAP_SCRIPT);
	heap[SCRIPT + 1] = tagged(SOURCE);
	str(SOURCE, "function alphaWork() {}");
	heap[sfi_slot + 4] = tagged(SCRIPT);
}

static void test_optimized_line_read_again(void **state)
{
	struct agent_nodejs *n = agent_nodejs_new(-1, 0);
	struct agent_proc p = self();
	struct agent_js_frame f[AGENT_NODEJS_MAX_FRAMES];
	struct agent_nodejs_stats st;

	(void)state;
	setup_heap();
	setup_code();
	assert_int_equal(agent_nodejs__add(n, &p, &m), 0);
	/* The function has no script yet: its line is not found, the frame keeps the function's first line. */
	assert_int_equal(agent_nodejs__frames(n, &p, code_frame(CODE, 3), f, AGENT_NODEJS_MAX_FRAMES), 1);
	assert_string_equal(f[0].name, "alphaWork");
	assert_int_equal(f[0].line, f[0].start_line);
	/* As when a read met the script while the collector moved it: the next sample reads it again, and keeps it. */
	give_script(SFI);
	assert_int_equal(agent_nodejs__frames(n, &p, code_frame(CODE, 3), f, AGENT_NODEJS_MAX_FRAMES), 1);
	assert_int_equal(f[0].line, 1);
	for (int i = 0; i < 5; i++) {
		assert_int_equal(agent_nodejs__frames(n, &p, code_frame(CODE, 3), f, AGENT_NODEJS_MAX_FRAMES), 1);
		assert_int_equal(f[0].line, 1);
	}
	agent_nodejs__stats(n, &st);
	assert_int_equal(st.code_reads, 2);
	assert_int_equal(st.code_lines_unknown, 1);
	agent_nodejs_free(n);

	/* A line never found is read again a bounded number of times, then served as it is. */
	n = agent_nodejs_new(-1, 0);
	setup_heap();
	setup_code();
	assert_int_equal(agent_nodejs__add(n, &p, &m), 0);
	for (int i = 0; i < 20; i++) {
		assert_int_equal(agent_nodejs__frames(n, &p, code_frame(CODE, 3), f, AGENT_NODEJS_MAX_FRAMES), 1);
		assert_string_equal(f[0].name, "alphaWork");
	}
	agent_nodejs__stats(n, &st);
	assert_int_equal(st.code_reads, 4);
	assert_int_equal(st.code_lines_unknown, 4);
	agent_nodejs_free(n);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cached_while_same),
		cmocka_unit_test(test_replaced_object_described_anew),
		cmocka_unit_test(test_full_cache_evicts),
		cmocka_unit_test(test_optimized_frame_and_refused_layout),
		cmocka_unit_test(test_optimized_line_read_again),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
