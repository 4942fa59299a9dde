// SPDX-License-Identifier: Apache-2.0
/*
 * The V8 SharedFunctionInfo decoder (agent/v8.c) over a memory image built
 * here as V8 11.3 (Node 20) lays objects out: the name from a ScopeInfo or
 * a plain string, the script's name, the start line from the source; a
 * wrong map (an object moved or collected) refused; a loop of cons strings
 * ended; the line of a bytecode offset, by the script's line ends and by its
 * source, and the source position table's decoder on hand-encoded tables;
 * and the metadata reader on Debian's node when it is installed.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "v8-test-meta.h"
#include "agent/v8.h"

#define BASE 0x10000u
#define SIZE 4096

static uint8_t img[SIZE];

static int read_img(void *ctx, uint64_t addr, void *buf, size_t len)
{
	(void)ctx;
	if (addr < BASE || addr - BASE > SIZE || len > SIZE - (addr - BASE))
		return -EFAULT;
	memcpy(buf, img + (addr - BASE), len);
	return 0;
}

static void put64(size_t off, uint64_t v)
{
	memcpy(img + off, &v, 8);
}

static uint64_t tag(size_t off)
{
	return BASE + off + 1;
}

static uint64_t smi(int64_t v)
{
	return (uint64_t)v << 32;
}

static uint64_t map(size_t off, uint16_t type)
{
	put64(off, tag(off));
	memcpy(img + off + 12, &type, 2);
	return tag(off);
}

static uint64_t seq(size_t off, uint64_t one_byte_map, const char *s)
{
	int32_t n = (int32_t)strlen(s);

	put64(off, one_byte_map);
	memcpy(img + off + 12, &n, 4);
	memcpy(img + off + 16, s, (size_t)n);
	return tag(off);
}

/* An SFI at 0x800 whose ScopeInfo (0x600) names it, of a Script (0x700) with a name and a source. */
static uint64_t build(void)
{
	uint64_t sfi_map, scope_map, script_map, str_map, name, path, src;
	uint64_t slots[8];

	memset(img, 0, sizeof(img));
	sfi_map = map(0x100, 262);
	scope_map = map(0x120, 261);
	script_map = map(0x140, 167);
	str_map = map(0x160, 8);
	name = seq(0x400, str_map, "alphaWork");
	path = seq(0x440, str_map, "/srv/app/hot.js");
	src = seq(0x500, str_map, "'use strict';\n\nfunction alphaWork(n) {\n  return n;\n}\n");
	/* flags, parameter count, no context locals, the name, its slot index, inferred name, start, end. */
	slots[0] = smi(1);
	slots[1] = smi(1);
	slots[2] = smi(0);
	slots[3] = name;
	slots[4] = smi(-1);
	slots[5] = map(0x1a0, 131); /* the inferred name: undefined (an Oddball) */
	slots[6] = smi(33);
	slots[7] = smi(51);
	put64(0x600, scope_map);
	for (size_t i = 0; i < 8; i++)
		put64(0x608 + 8 * i, slots[i]);
	put64(0x700, script_map);
	put64(0x708, src);
	put64(0x710, path);
	put64(0x800, sfi_map);
	put64(0x810, tag(0x600));
	put64(0x820, tag(0x700));
	return tag(0x800);
}

static void test_scope_info_name(void **state)
{
	struct agent_v8_function f;
	uint64_t sfi = build();

	(void)state;
	assert_int_equal(agent_v8_describe(&m, read_img, NULL, sfi, &f), 0);
	assert_string_equal(f.name, "alphaWork");
	assert_string_equal(f.script, "/srv/app/hot.js");
	assert_int_equal(f.start_pos, 33);
	assert_int_equal(f.start_line, 3);
}

static void test_string_name_and_cons(void **state)
{
	struct agent_v8_function f;
	uint64_t sfi = build(), str_map = tag(0x160), cons_map = map(0x180, 1);

	(void)state;
	/* An uncompiled function: name_or_scope_info is the name, here a cons string "be" + "ta". */
	put64(0x900, cons_map);
	put64(0x910, seq(0x940, str_map, "be"));
	put64(0x918, seq(0x980, str_map, "ta"));
	put64(0x810, tag(0x900));
	assert_int_equal(agent_v8_describe(&m, read_img, NULL, sfi, &f), 0);
	assert_string_equal(f.name, "beta");
	assert_int_equal(f.start_line, 0);
	/* A cons string that contains itself ends at AGENT_V8_MAX_CONS. */
	put64(0x910, tag(0x900));
	assert_int_equal(agent_v8_describe(&m, read_img, NULL, sfi, &f), -ELOOP);
}

static void test_moved_objects_refused(void **state)
{
	struct agent_v8_function f;
	uint64_t sfi = build();

	(void)state;
	/* Not an SFI any more (its map says a Script): refused, not guessed. */
	put64(0x800, tag(0x140));
	assert_int_equal(agent_v8_describe(&m, read_img, NULL, sfi, &f), -EINVAL);
	/* A Smi or an address outside the process. */
	assert_int_equal(agent_v8_describe(&m, read_img, NULL, smi(5), &f), -EINVAL);
	assert_int_equal(agent_v8_describe(&m, read_img, NULL, 0x7f0000000001ull, &f), -EFAULT);
	/* The script gone (a DebugInfo's map): the name stays, no script. */
	sfi = build();
	put64(0x820, tag(0x100));
	assert_int_equal(agent_v8_describe(&m, read_img, NULL, sfi, &f), 0);
	assert_string_equal(f.name, "alphaWork");
	assert_string_equal(f.script, "");
}

/* Debian's node 20: the values checked against a live process's objects (%DebugPrint). */
/*
 * A source position table (V8's encoding: per entry, the code offset's and
 * the position's deltas as zigzag VLQs, a non-statement's code delta as
 * -delta - 1; positions as SourcePosition values, (offset + 1) << 1):
 * code 0 -> position 33, code 5 -> 41, code 9 -> 45 (not a statement).
 */
static const uint8_t table[] = { 0x02, 0x88, 0x01, 0x0a, 0x20, 0x09, 0x10 };

static void test_position_table(void **state)
{
	static const uint8_t cut[] = { 0x02, 0x88 };
	int64_t pos;

	(void)state;
	assert_int_equal(agent_v8_position_at(table, sizeof(table), 0, &pos), 0);
	assert_int_equal(pos, 33);
	assert_int_equal(agent_v8_position_at(table, sizeof(table), 4, &pos), 0);
	assert_int_equal(pos, 33);
	assert_int_equal(agent_v8_position_at(table, sizeof(table), 5, &pos), 0);
	assert_int_equal(pos, 41);
	assert_int_equal(agent_v8_position_at(table, sizeof(table), 1000, &pos), 0);
	assert_int_equal(pos, 45);
	/* Empty: no entry at or before any offset. */
	assert_int_equal(agent_v8_position_at(table, 0, 3, &pos), 0);
	assert_int_equal(pos, AGENT_V8_NO_POSITION);
	/* A number that runs past the end. */
	assert_int_equal(agent_v8_position_at(cut, sizeof(cut), 3, &pos), -EINVAL);
}

/* build()'s function with 20 bytes of bytecode whose positions are table's, its script with line ends. */
static uint64_t build_bytecode(void)
{
	uint64_t sfi = build(), ends[] = { 13, 14, 38, 50, 52 };
	int32_t n = sizeof(table);

	put64(0x808, tag(0xa00));
	put64(0xa00, map(0x1c0, 191));
	put64(0xa08, smi(20));
	put64(0xa20, tag(0xb00));
	put64(0xb00, map(0x1e0, 190));
	put64(0xb08, smi(n));
	memcpy(img + 0xb10, table, sizeof(table));
	put64(0x738, tag(0xc00));
	put64(0xc00, map(0x200, 175));
	put64(0xc08, smi(5));
	for (size_t i = 0; i < 5; i++)
		put64(0xc10 + 8 * i, smi((int64_t)ends[i]));
	return sfi;
}

static void test_line_of_offset(void **state)
{
	uint64_t sfi = build_bytecode();

	(void)state;
	/* "function alphaWork(n) {" is line 3, "  return n;" line 4. */
	assert_int_equal(agent_v8_line(&m, read_img, NULL, sfi, 0), 3);
	assert_int_equal(agent_v8_line(&m, read_img, NULL, sfi, 7), 4);
	/* Past the bytecode. */
	assert_int_equal(agent_v8_line(&m, read_img, NULL, sfi, 20), -ENOENT);
	/* No line ends computed yet (undefined): the source is scanned. */
	put64(0x738, tag(0x1a0));
	assert_int_equal(agent_v8_line(&m, read_img, NULL, sfi, 7), 4);
	/* A baseline function: its Code holds the bytecode. */
	put64(0xd00, map(0x220, 245));
	put64(0xd10, tag(0xa00));
	put64(0x808, tag(0xd00));
	assert_int_equal(agent_v8_line(&m, read_img, NULL, sfi, 7), 4);
	/* No table built (undefined), or no bytecode (a Smi). */
	put64(0xa20, tag(0x1a0));
	assert_int_equal(agent_v8_line(&m, read_img, NULL, sfi, 7), -ENOENT);
	put64(0x808, smi(0));
	assert_int_equal(agent_v8_line(&m, read_img, NULL, sfi, 7), -ENOENT);
}

/* Appends v as a zigzag VLQ, V8's position table number. */
static size_t vlq(uint8_t *out, size_t n, int64_t v)
{
	uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);

	do {
		out[n++] = (uint8_t)((z & 0x7f) | (z > 0x7f ? 0x80 : 0));
		z >>= 7;
	} while (z);
	return n;
}

/* A SourcePosition: script offset, inlining id (-1: not inlined). */
static int64_t source_position(int64_t offset, int32_t inlining_id)
{
	return ((offset + 1) << 1) | ((int64_t)(inlining_id + 1) << 31);
}

/* An optimized Code's table: code 0 -> 33 (the Code's function), code 10 -> 45 in the function inlined as id 0. */
static size_t code_table(uint8_t *out)
{
	int64_t p0 = source_position(33, -1), p1 = source_position(45, 0);
	size_t n = 0;

	n = vlq(out, n, 1);
	n = vlq(out, n, p0);
	n = vlq(out, n, 10);
	return vlq(out, n, p1 - p0);
}

static void test_source_positions_inlined(void **state)
{
	struct agent_v8_source_position sp;
	uint8_t t[32];
	size_t n = code_table(t);

	(void)state;
	assert_int_equal(agent_v8_source_position_at(t, n, 3, &sp), 0);
	assert_int_equal(sp.script_offset, 33);
	assert_int_equal(sp.inlining_id, -1);
	assert_int_equal(sp.last_code_offset, 10);
	assert_int_equal(agent_v8_source_position_at(t, n, 10, &sp), 0);
	assert_int_equal(sp.script_offset, 45);
	assert_int_equal(sp.inlining_id, 0);
	/* The whole table is read: a number cut at its end is an error even past the offset. */
	assert_int_equal(agent_v8_source_position_at(t, n - 1, 3, &sp), -EINVAL);
}

/*
 * build_bytecode()'s function compiled by TurboFan: a Code (0xe00) with its
 * InstructionStream (0xe80), deoptimization data (0xf00) naming it and a
 * second function (0x880, same script) inlined as id 0, called at script
 * offset 20; positions as code_table().
 */
static uint64_t build_code(void)
{
	uint64_t sfi = build_bytecode(), code_map = map(0x220, 245), fa = map(0x200, 175), ba = map(0x1e0, 190);
	uint8_t t[32];
	int32_t n = (int32_t)code_table(t), fid = 0;
	int64_t caller = source_position(20, -1);

	put64(0x880, map(0x100, 262));
	put64(0x8a0, tag(0x700));
	put64(0xe00, code_map);
	put64(0xe10, tag(0xf00));
	put64(0xe18, tag(0xfa0));
	put64(0xe20, tag(0xe80));
	put64(0xe28, BASE + 0xe80 + 16);
	put64(0xe80, map(0x240, 252));
	put64(0xe88, tag(0xe00));
	put64(0xf00, fa);
	put64(0xf08, smi(9));
	put64(0xf10 + 8 * 2, tag(0xf60));
	put64(0xf10 + 8 * 6, sfi);
	put64(0xf10 + 8 * 7, tag(0xf80));
	/* The literals: the inlined function as a weak reference (tag binary 11). */
	put64(0xf60, fa);
	put64(0xf68, smi(1));
	put64(0xf70, tag(0x880) | 2);
	put64(0xf80, ba);
	put64(0xf88, smi(16));
	memcpy(img + 0xf90, &caller, 8);
	memcpy(img + 0xf98, &fid, 4);
	put64(0xfa0, ba);
	put64(0xfa8, smi(n));
	memcpy(img + 0xfb0, t, (size_t)n);
	return tag(0xe00);
}

static void test_code_frames(void **state)
{
	struct agent_v8_code_frame f[AGENT_V8_MAX_INLINED];
	uint64_t code = build_code();

	(void)state;
	/* Offset 3: the Code's own function at position 33, line 3. */
	assert_int_equal(agent_v8_code_frames(&m, read_img, NULL, code, 3, f, AGENT_V8_MAX_INLINED), 1);
	assert_int_equal(f[0].sfi, tag(0x800));
	assert_int_equal(f[0].line, 3);
	/* Offset 12: the inlined function at 45 (line 4), then its caller at 20 (line 3). */
	assert_int_equal(agent_v8_code_frames(&m, read_img, NULL, code, 12, f, AGENT_V8_MAX_INLINED), 2);
	assert_int_equal(f[0].sfi, tag(0x880));
	assert_int_equal(f[0].line, 4);
	assert_int_equal(f[1].sfi, tag(0x800));
	assert_int_equal(f[1].line, 3);
	/* Room for one: the Code's own function, without the inlined one's line. */
	assert_int_equal(agent_v8_code_frames(&m, read_img, NULL, code, 12, f, 1), 1);
	assert_int_equal(f[0].sfi, tag(0x800));
	assert_int_equal(f[0].line, 0);
	/* Far past the last position: another Code's pc; the function, no line. */
	assert_int_equal(agent_v8_code_frames(&m, read_img, NULL, code, 500, f, AGENT_V8_MAX_INLINED), 1);
	assert_int_equal(f[0].line, 0);
	/* An inlining id past the inlining positions. */
	put64(0xf88, smi(8));
	assert_int_equal(agent_v8_code_frames(&m, read_img, NULL, code, 12, f, AGENT_V8_MAX_INLINED), -EINVAL);
	put64(0xf88, smi(16));
	/* A literal that is no SharedFunctionInfo. */
	put64(0xf70, smi(3));
	assert_int_equal(agent_v8_code_frames(&m, read_img, NULL, code, 12, f, AGENT_V8_MAX_INLINED), -EINVAL);
	put64(0xf70, tag(0x880));
	/* The first instruction is not where the InstructionStream says: not this layout, or a moved Code. */
	put64(0xe28, BASE + 0xe80 + 24);
	assert_int_equal(agent_v8_code_frames(&m, read_img, NULL, code, 3, f, AGENT_V8_MAX_INLINED), -EINVAL);
	put64(0xe28, BASE + 0xe80 + 16);
	/* Deoptimization data that names no function (a builtin's or baseline code). */
	put64(0xf10 + 8 * 6, smi(0));
	assert_int_equal(agent_v8_code_frames(&m, read_img, NULL, code, 3, f, AGENT_V8_MAX_INLINED), -EINVAL);
	/* No Code at all. */
	assert_int_equal(agent_v8_code_frames(&m, read_img, NULL, tag(0x800), 3, f, AGENT_V8_MAX_INLINED), -EINVAL);
}

static void test_learn_code_size(void **state)
{
	struct agent_v8_meta learn = m;
	uint32_t off = 0, flags = 2;

	(void)state;
	memset(img, 0, sizeof(img));
	learn.code_instruction_size = 0;
	/* InterpreterEntryTrampoline's Code: no InstructionStream, its instructions in the binary. */
	put64(0xd40, map(0x220, 245));
	put64(0xd68, 0x18cfc40);
	memcpy(img + 0xd70, &flags, 4);
	put64(0xd78, 0x36c);
	assert_int_equal(agent_v8_learn_code_size(&learn, read_img, NULL, tag(0xd40), &off), 0);
	assert_int_equal(off, 56);
	/* Loaded at a page-aligned bias (a position-independent build). */
	put64(0xd68, 0x18cfc40 + 0x7f0000000000ull);
	assert_int_equal(agent_v8_learn_code_size(&learn, read_img, NULL, tag(0xd40), &off), 0);
	/* Not at a builtin's address. */
	put64(0xd68, 0x18cfc48);
	assert_int_equal(agent_v8_learn_code_size(&learn, read_img, NULL, tag(0xd40), &off), -ENOENT);
	/* The size twice: which field it is cannot be told. */
	put64(0xd68, 0x18cfc40);
	put64(0xd80, 0x36c);
	assert_int_equal(agent_v8_learn_code_size(&learn, read_img, NULL, tag(0xd40), &off), -ENOENT);
	/* No Code. */
	put64(0xd40, map(0x200, 175));
	assert_int_equal(agent_v8_learn_code_size(&learn, read_img, NULL, tag(0xd40), &off), -ENOENT);
}

static void test_meta_of_node(void **state)
{
	struct agent_v8_meta got;
	int fd = open("/usr/bin/node", O_RDONLY | O_CLOEXEC);
	Elf *elf;

	(void)state;
	if (fd < 0)
		skip();
	assert_int_not_equal(elf_version(EV_CURRENT), EV_NONE);
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	assert_non_null(elf);
	if (agent_v8_meta_read(elf, &got) == 0) {
		/* Layout facts every 64-bit V8 without pointer compression has. */
		assert_int_equal(got.off_fp_function, -16);
		assert_int_equal(got.smi_shift, 32);
		assert_true(got.type_js_function_last >= got.type_js_function_first);
		assert_int_not_equal(got.type_sfi, got.type_scope_info);
		/* Since V8 9.5: the frame's bytecode slots, the BytecodeArray's table before its bytecode. */
		assert_true(got.has_positions);
		assert_int_equal(got.off_fp_bytecode_array, got.off_fp_bytecode_offset + 8);
		assert_true(got.bytecode_source_positions + 8 <= got.bytecode_data);
		/* Node 20 (V8 11.3): the code slot is derived, the builtins to learn its size from are found. */
		if (got.has_code_positions) {
			assert_int_equal(got.js_function_code, 48);
			assert_int_equal(got.code_instruction_start, 40);
			assert_true(got.builtins[0].size > 0);
		}
	}
	elf_end(elf);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		/* Names. */
		cmocka_unit_test(test_scope_info_name),
		cmocka_unit_test(test_string_name_and_cons),
		cmocka_unit_test(test_moved_objects_refused),
		/* Lines. */
		cmocka_unit_test(test_position_table),
		cmocka_unit_test(test_line_of_offset),
		/* The metadata. */
		cmocka_unit_test(test_source_positions_inlined),
		cmocka_unit_test(test_code_frames),
		cmocka_unit_test(test_learn_code_size),
		cmocka_unit_test(test_meta_of_node),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
