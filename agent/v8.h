// SPDX-License-Identifier: Apache-2.0
/*
 * V8 (Node.js) metadata and function names, outside BPF (agent/nodejs.c
 * uses them for the frames bpf/v8.bpf.h records).
 *
 * agent_v8_meta_read() reads a node binary's postmortem metadata: the
 * v8dbg_* symbols V8's build emits (tools/gen-postmortem-metadata.py), each
 * an int holding a frame offset, an object field offset, a tag or an
 * instance type of that very build. Nothing here is hard-coded per version.
 *
 * agent_v8_describe() names a SharedFunctionInfo (what a JavaScript frame's
 * JSFunction points to) from the process's memory through a bounded reader:
 * every byte is untrusted, every object's type is checked against its map
 * before a field of it is used, and every length is bounded.
 *
 * agent_v8_line() gives the line an interpreted frame runs: its bytecode
 * offset, through the bytecode's source position table (decoded by
 * agent_v8_position_at(), a pure function), is a position in the script,
 * and the script's line ends (or its source) give the line.
 */
#ifndef SR_AGENT_V8_H
#define SR_AGENT_V8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <gelf.h>

/* Bytes of a function name or script name kept (longer ones are cut). */
#define AGENT_V8_MAX_NAME 256
/* Characters of a script's source scanned to turn a position into a line. */
#define AGENT_V8_MAX_SOURCE (4u << 20)
/* Pieces of a cons string followed. */
#define AGENT_V8_MAX_CONS 16
/* ScopeInfo slots scanned for the function name (past the context locals). */
#define AGENT_V8_SCOPE_SCAN 8
/* Bytes of a source position table decoded (positions of bytecode past them are not found). */
#define AGENT_V8_MAX_POSITIONS (256u << 10)
/* Entries of a script's line ends searched (a longer script is searched in its source). */
#define AGENT_V8_MAX_LINE_ENDS (16u << 20)

/* Builtins whose Code objects teach the instruction size's place (agent_v8_learn_code_size()). */
#define AGENT_V8_LEARN_BUILTINS 2

struct agent_v8_meta {
	/* Frame layout: offsets from a JavaScript frame's frame pointer. */
	int32_t off_fp_function;
	int32_t off_fp_context;
	int32_t off_fp_bytecode_array;
	int32_t off_fp_bytecode_offset;
	/* Tags. */
	uint32_t heap_object_tag;
	uint32_t heap_object_tag_mask;
	uint32_t smi_shift; /* SmiShiftSize + SmiTagSize: 32 on 64-bit builds without pointer compression */
	/* Field offsets (from the object's untagged address). */
	uint32_t heap_object_map;
	uint32_t map_instance_type;
	uint32_t js_function_shared;
	uint32_t sfi_name_or_scope_info;
	uint32_t sfi_script_or_debug_info;
	uint32_t script_name;
	uint32_t script_source;
	uint32_t string_length;
	uint32_t seq_one_byte_chars;
	uint32_t seq_two_byte_chars;
	uint32_t cons_first;
	uint32_t cons_second;
	uint32_t thin_actual;
	uint32_t scopeinfo_first_vars;
	uint32_t scopeinfo_ncontextlocals;
	/* Bytecode and line positions: used when has_positions (all found). */
	uint32_t sfi_function_data;
	uint32_t code_bytecode_or_interpreter_data; /* a baseline Code's BytecodeArray */
	uint32_t fixed_array_length;
	uint32_t fixed_array_data;
	uint32_t bytecode_data;
	/*
	 * Derived: BytecodeArray::source_position_table, not in the metadata;
	 * the third tagged field past the length (after the constant pool and
	 * the handler table), as V8 has laid it out since 7.x. Its value is
	 * type-checked (a ByteArray) before it is read.
	 */
	uint32_t bytecode_source_positions;
	uint32_t script_line_ends;
	/*
	 * Optimized code (has_code_positions): a frame's Code, its source
	 * positions and the functions inlined in it.
	 */
	uint32_t js_object_elements;
	uint32_t js_function_context;
	uint32_t js_function_feedback_cell;
	uint32_t js_function_prototype_or_initial_map;
	/*
	 * Derived: JSFunction::code, not in the metadata: the one tagged slot
	 * between JSObject's elements and prototype_or_initial_map that no
	 * JSFunction field of the metadata names. A frame's value there is used
	 * only when its deoptimization data names the frame's function.
	 */
	uint32_t js_function_code;
	uint32_t code_relocation_info;
	uint32_t code_deopt_data;
	uint32_t code_source_positions;
	uint32_t code_bytecode_offsets;
	/*
	 * Derived: Code::instruction_stream and Code::instruction_start, not in
	 * the metadata: the first slot past the Code's last tagged field of the
	 * metadata, then the next. Checked on every Code read: the first must
	 * hold an InstructionStream and the second its first instruction's
	 * address (InstructionStream::instruction_start, from the metadata).
	 */
	uint32_t code_instruction_stream;
	uint32_t code_instruction_start;
	uint32_t istream_instruction_start;
	/*
	 * Learned: Code::instruction_size, not in the metadata, from one of
	 * the process's builtins (agent_v8_learn_code_size()); 0 until then.
	 * The builtins' addresses and sizes come from the file's symbols.
	 */
	uint32_t code_instruction_size;
	struct {
		uint64_t addr;
		uint64_t size;
	} builtins[AGENT_V8_LEARN_BUILTINS];
	/* DeoptimizationData's elements (indices). */
	uint32_t deopt_literals;
	uint32_t deopt_sfi;
	uint32_t deopt_inlining_positions;
	/* Instance types and string type bits. */
	uint32_t type_js_function_first;
	uint32_t type_js_function_last; /* derived: the next exported type, minus one */
	uint32_t type_sfi;
	uint32_t type_script;
	uint32_t type_scope_info;
	uint32_t type_bytecode_array;
	uint32_t type_byte_array;
	uint32_t type_fixed_array;
	uint32_t type_code;
	uint32_t type_instruction_stream;
	uint32_t first_nonstring_type;
	uint32_t string_encoding_mask;
	uint32_t string_representation_mask;
	uint32_t one_byte_string_tag;
	uint32_t seq_string_tag;
	uint32_t cons_string_tag;
	uint32_t thin_string_tag;
	/* Derived: every field agent_v8_line() needs was found (and the frame's two bytecode slots are adjacent). */
	bool has_positions;
	/* Derived: every field agent_v8_code_frames() needs was found, and the derived slots were. */
	bool has_code_positions;
};

/* Reads len bytes of the process at addr into buf; returns 0 or -errno (a short read is an error). */
typedef int (*agent_v8_read_fn)(void *ctx, uint64_t addr, void *buf, size_t len);

struct agent_v8_function {
	char name[AGENT_V8_MAX_NAME];	/* "" for an anonymous function */
	char script[AGENT_V8_MAX_NAME]; /* the script's name (a path, or a node: URL), "" when unknown */
	uint32_t start_line;		/* 1-based line of the function's start, 0 when unknown */
	uint32_t start_pos;		/* the function's start position in its script (characters) */
};

/* V8's no-position value (kNoSourcePosition). */
#define AGENT_V8_NO_POSITION (-1)

/*
 * Fills ret from elf's v8dbg_* symbols (.symtab and .dynsym). Returns 0,
 * -ENOENT when the file has none (not a V8 build), -EINVAL when one the
 * walk needs is missing or out of range.
 */
int agent_v8_meta_read(Elf *elf, struct agent_v8_meta *ret);

/*
 * Names the SharedFunctionInfo at tagged pointer sfi. Returns 0, -EINVAL
 * when an object is not what the metadata says it must be (a moved or
 * collected object: the caller drops the frame's name rather than guess),
 * or the reader's error.
 */
int agent_v8_describe(const struct agent_v8_meta *m, agent_v8_read_fn read, void *ctx, uint64_t sfi,
		      struct agent_v8_function *ret);

/*
 * The script position (characters from its start) of code offset `offset`
 * in a V8 source position table of n bytes: the position of the last entry
 * at or before the offset, as V8's own lookup gives it. Returns 0 with
 * *ret_pos (AGENT_V8_NO_POSITION when no entry is at or before it), or
 * -EINVAL when the table is malformed (a number runs past its end or
 * overflows). Pure: the fuzzer's target.
 */
int agent_v8_position_at(const uint8_t *table, size_t n, uint32_t offset, int64_t *ret_pos);

/* An entry of an optimized Code's source position table. */
struct agent_v8_source_position {
	int64_t script_offset;	  /* characters from the script's start; AGENT_V8_NO_POSITION when none */
	int32_t inlining_id;	  /* the deoptimization data's inlining position, -1 when not inlined */
	int64_t last_code_offset; /* the table's last entry's code offset, -1 for an empty table */
};

/*
 * As agent_v8_position_at(), for an optimized Code's table: the entry at
 * or before code offset `offset` with the inlining id V8 keeps beside the
 * position, and the table's last code offset (the whole table is read).
 * Pure: the fuzzer's target.
 */
int agent_v8_source_position_at(const uint8_t *table, size_t n, uint32_t offset, struct agent_v8_source_position *ret);

/*
 * Learns where a Code keeps its instruction size from code, a Code object
 * of the process that should be a builtin's (a JSFunction's code slot the
 * BPF namer saw, bpf/v8frame.h): its first instruction must be one of the
 * file's builtins (m->builtins, at one page-aligned load bias), and exactly
 * one 32-bit field of its raw data past the first instruction's address
 * must hold that builtin's symbol size. Returns 0 with *ret_off, -ENOENT
 * when code is no such builtin, or the reader's error.
 */
int agent_v8_learn_code_size(const struct agent_v8_meta *m, agent_v8_read_fn read, void *ctx, uint64_t code,
			     uint32_t *ret_off);

/* Functions TurboFan inlines at one pc, and the function compiled, at most. */
#define AGENT_V8_MAX_INLINED 8

/* One function of an optimized frame: the innermost inlined one first, the Code's own function last. */
struct agent_v8_code_frame {
	uint64_t sfi; /* the SharedFunctionInfo's tagged address */
	int32_t line; /* 1-based, 0 when not known */
};

/*
 * The functions an optimized frame runs at code offset `offset` of the
 * Code at tagged pointer code (bpf/v8frame.h): the functions inlined
 * there, innermost first, then the Code's own, each with its line.
 * Returns how many (1 to max; one, the Code's own function at line 0, when
 * the offset lies past the Code's positions), -ENOENT when the metadata
 * lacks what it takes, -EINVAL when an
 * object is not what it must be (a Code collected or moved: the caller
 * drops the frame's name rather than guess), or the reader's error.
 */
int agent_v8_code_frames(const struct agent_v8_meta *m, agent_v8_read_fn read, void *ctx, uint64_t code,
			 uint32_t offset, struct agent_v8_code_frame *ret, int max);

/*
 * The 1-based line the interpreted frame of SharedFunctionInfo sfi runs at
 * bytecode offset `offset`. Returns the line, -ENOENT when the metadata or
 * the function lacks what it takes (no bytecode, no positions, no script,
 * an offset past the bytecode), -EINVAL when an object is not what the
 * metadata says it must be, or the reader's error.
 */
int agent_v8_line(const struct agent_v8_meta *m, agent_v8_read_fn read, void *ctx, uint64_t sfi, uint32_t offset);

#endif
