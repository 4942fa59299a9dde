// SPDX-License-Identifier: Apache-2.0
/*
 * The V8 SharedFunctionInfo decoder (agent/v8.c) on any bytes: the input is
 * a process's memory at FUZZ_BASE, its first four bytes the offset of the
 * tagged SharedFunctionInfo pointer to name, the next four (when there are
 * eight) a bytecode offset whose line is looked up. The metadata is Node
 * 20's (V8 11.3, as agent_v8_meta_read() reads it from Debian's node).
 * Nothing may be read outside the image, a cycle of cons strings or objects
 * must end, the names stay terminated and printable within their buffers,
 * and a line is positive or an error. The source position table's decoder
 * also runs on the whole input as a table, and the same pointer is taken
 * for an optimized Code (its frames at the offset) and a builtin's Code
 * (the instruction size's place learned from it).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/v8.h"

#define FUZZ_BASE 0x10000u

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct image {
	const uint8_t *p;
	size_t n;
};

static int read_image(void *ctx, uint64_t addr, void *buf, size_t len)
{
	const struct image *im = ctx;

	if (addr < FUZZ_BASE || addr - FUZZ_BASE > im->n || len > im->n - (addr - FUZZ_BASE))
		return -EFAULT;
	memcpy(buf, im->p + (addr - FUZZ_BASE), len);
	return 0;
}

static const struct agent_v8_meta node20 = {
	.off_fp_function = -16,
	.off_fp_context = -8,
	.off_fp_bytecode_array = -32,
	.off_fp_bytecode_offset = -40,
	.heap_object_tag = 1,
	.heap_object_tag_mask = 3,
	.smi_shift = 32,
	.heap_object_map = 0,
	.map_instance_type = 12,
	.js_function_shared = 24,
	.sfi_name_or_scope_info = 16,
	.sfi_script_or_debug_info = 32,
	.script_name = 16,
	.script_source = 8,
	.string_length = 12,
	.seq_one_byte_chars = 16,
	.seq_two_byte_chars = 16,
	.cons_first = 16,
	.cons_second = 24,
	.thin_actual = 16,
	.scopeinfo_first_vars = 3,
	.scopeinfo_ncontextlocals = 2,
	.sfi_function_data = 8,
	.code_bytecode_or_interpreter_data = 16,
	.fixed_array_length = 8,
	.fixed_array_data = 16,
	.bytecode_data = 54,
	.bytecode_source_positions = 32,
	.script_line_ends = 56,
	.type_js_function_first = 2066,
	.type_js_function_last = 2096,
	.type_sfi = 262,
	.type_script = 167,
	.type_scope_info = 261,
	.type_bytecode_array = 191,
	.type_byte_array = 190,
	.type_fixed_array = 175,
	.type_code = 245,
	.first_nonstring_type = 128,
	.string_encoding_mask = 8,
	.string_representation_mask = 7,
	.one_byte_string_tag = 8,
	.seq_string_tag = 0,
	.cons_string_tag = 1,
	.thin_string_tag = 5,
	.has_positions = true,
	.js_object_elements = 16,
	.js_function_context = 32,
	.js_function_feedback_cell = 40,
	.js_function_prototype_or_initial_map = 56,
	.js_function_code = 48,
	.code_relocation_info = 8,
	.code_deopt_data = 16,
	.code_source_positions = 24,
	.code_bytecode_offsets = 24,
	.code_instruction_stream = 32,
	.code_instruction_start = 40,
	.istream_instruction_start = 16,
	.code_instruction_size = 56,
	.builtins = { { 0x18cfc40, 0x36c }, { 0x18d0e40, 0x35c } },
	.deopt_literals = 2,
	.deopt_sfi = 6,
	.deopt_inlining_positions = 7,
	.type_instruction_stream = 252,
	.has_code_positions = true,
};

static void check_text(const char *s, size_t cap)
{
	size_t n = strnlen(s, cap);

	if (n >= cap)
		abort();
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] >= 0x7f)
			abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct image im = { data, size };
	struct agent_v8_code_frame cf[AGENT_V8_MAX_INLINED];
	struct agent_v8_source_position sp;
	struct agent_v8_function f;
	uint32_t off, bc = 0, learned;
	int64_t pos;
	int line, n;

	if (size < 4 || size > 1 << 20)
		return 0;
	memcpy(&off, data, 4);
	if (size >= 8)
		memcpy(&bc, data + 4, 4);
	if (agent_v8_describe(&node20, read_image, &im, (uint64_t)FUZZ_BASE + off, &f) == 0) {
		check_text(f.name, sizeof(f.name));
		check_text(f.script, sizeof(f.script));
	}
	line = agent_v8_line(&node20, read_image, &im, (uint64_t)FUZZ_BASE + off, bc);
	if (line == 0)
		abort();
	if (agent_v8_position_at(data, size, bc, &pos) == 0 && pos < AGENT_V8_NO_POSITION)
		abort();
	if (agent_v8_source_position_at(data, size, bc, &sp) == 0 &&
	    (sp.script_offset < AGENT_V8_NO_POSITION || sp.inlining_id < -1 || sp.last_code_offset < -1))
		abort();
	/* The same pointer as an optimized Code, the offset as a pc offset. */
	n = agent_v8_code_frames(&node20, read_image, &im, (uint64_t)FUZZ_BASE + off, bc, cf, AGENT_V8_MAX_INLINED);
	if (n == 0 || n > AGENT_V8_MAX_INLINED)
		abort();
	for (int i = 0; i < n; i++)
		if (cf[i].line < 0)
			abort();
	if (agent_v8_learn_code_size(&node20, read_image, &im, (uint64_t)FUZZ_BASE + off, &learned) == 0 &&
	    learned < node20.code_instruction_start + 8)
		abort();
	return 0;
}
