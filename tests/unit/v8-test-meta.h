/* SPDX-License-Identifier: Apache-2.0 */
/* The V8 layout the unit tests build their fake heaps with (V8 11.3's offsets, made up where the namer does not care). */
#ifndef SR_TESTS_V8_TEST_META_H
#define SR_TESTS_V8_TEST_META_H

#include "agent/v8.h"

static const struct agent_v8_meta m = {
	.off_fp_function = -16,
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
};

#endif
