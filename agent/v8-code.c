// SPDX-License-Identifier: Apache-2.0
/*
 * Optimized V8 frames (agent/v8.h, agent_v8_code_frames()): a pc's offset
 * in a Code object to the functions TurboFan inlined there and the lines
 * they run, through the Code's source position table and deoptimization
 * data. Every object's map is checked for its instance type before a field
 * of it is used; every count and index read is bounded.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "v8.h"
#include "v8-private.h"

/*
 * Code offsets past the position table's last entry taken as this Code's.
 * Farther, the pc is taken to lie in other code (a frame sampled in its
 * callee's prologue, before the callee's frame exists, or an older Code of
 * the same function still running): the frame keeps its first line.
 */
#define V8_CODE_TAIL 64
/* An entry of the deoptimization data's inlining positions: SourcePosition (8), function id (4), padding (4). */
#define V8_INLINING_POSITION_SIZE 16

/* 32-bit fields of a Code's raw data past its first instruction's address searched for the instruction size. */
#define V8_LEARN_SPAN 32

int agent_v8_learn_code_size(const struct agent_v8_meta *m, agent_v8_read_fn read, void *ctx, uint64_t code,
			     uint32_t *ret_off)
{
	struct agent_v8_reader r = { m, read, ctx };
	uint32_t raw[V8_LEARN_SPAN / 4], type;
	uint64_t start;
	int e;

	if (!m->has_code_positions)
		return -ENOENT;
	if ((e = agent_v8_type_of(&r, code, &type)) < 0)
		return e == -EINVAL ? -ENOENT : e;
	if (type != m->type_code)
		return -ENOENT;
	if ((e = agent_v8_read_u64(&r, agent_v8_untag(&r, code) + m->code_instruction_start, &start)) < 0 ||
	    (e = read(ctx, agent_v8_untag(&r, code) + m->code_instruction_start + 8, raw, sizeof(raw))) < 0)
		return e;
	for (size_t b = 0; b < AGENT_V8_LEARN_BUILTINS; b++) {
		uint64_t bias = start - m->builtins[b].addr;
		uint32_t found = 0, n = 0;

		/* The file's load bias: 0 for an executable linked at its address, else whole pages. */
		if (!m->builtins[b].size || start < m->builtins[b].addr || (bias & 4095) ||
		    m->builtins[b].size > UINT32_MAX)
			continue;
		for (uint32_t i = 0; i < V8_LEARN_SPAN / 4; i++) {
			if (raw[i] == (uint32_t)m->builtins[b].size) {
				found = m->code_instruction_start + 8 + 4 * i;
				n++;
			}
		}
		if (n == 1) {
			*ret_off = found;
			return 0;
		}
	}
	return -ENOENT;
}

/* Element index of the FixedArray-like array (FixedArray, WeakFixedArray) of len elements: a weak reference made strong. */
static int element(const struct agent_v8_reader *r, uint64_t array, int64_t len, int64_t index, uint64_t *ret)
{
	int e;

	if (index < 0 || index >= len)
		return -EINVAL;
	if ((e = agent_v8_read_u64(r, agent_v8_untag(r, array) + r->m->fixed_array_data + 8 * (uint64_t)index, ret)) <
	    0)
		return e;
	/* A weak reference carries tag binary 11. */
	if ((*ret & 3) == 3)
		*ret &= ~2ULL;
	return 0;
}

/* The SharedFunctionInfo at element index of array; -EINVAL when it is none. */
static int sfi_at(const struct agent_v8_reader *r, uint64_t array, int64_t len, int64_t index, uint64_t *ret)
{
	uint32_t type;
	int e;

	if ((e = element(r, array, len, index, ret)) < 0)
		return e;
	if ((e = agent_v8_type_of(r, *ret, &type)) < 0)
		return e;
	return type == r->m->type_sfi ? 0 : -EINVAL;
}

/* The 1-based line of script position pos in sfi's script; 0 when it cannot be read. */
static int32_t line_of(const struct agent_v8_reader *r, uint64_t sfi, int64_t pos)
{
	uint64_t script;
	int line;

	if (pos < 0 || agent_v8_read_typed(r, sfi, r->m->sfi_script_or_debug_info, r->m->type_script, &script) < 0)
		return 0;
	line = agent_v8_script_line(r, script, pos);
	return line > 0 ? line : 0;
}

/* The Code's own function, checked: its InstructionStream and first instruction are where the layout says. */
static int code_function(const struct agent_v8_reader *r, uint64_t code, uint64_t *ret_deopt, int64_t *ret_len,
			 uint64_t *ret_sfi)
{
	const struct agent_v8_meta *m = r->m;
	uint64_t istream, start;
	uint32_t type;
	int e;

	if ((e = agent_v8_type_of(r, code, &type)) < 0)
		return e;
	if (type != m->type_code)
		return -EINVAL;
	if ((e = agent_v8_read_typed(r, code, m->code_instruction_stream, m->type_instruction_stream, &istream)) < 0)
		return e == -ENOENT ? -EINVAL : e;
	if ((e = agent_v8_read_u64(r, agent_v8_untag(r, code) + m->code_instruction_start, &start)) < 0)
		return e;
	if (start != agent_v8_untag(r, istream) + m->istream_instruction_start)
		return -EINVAL;
	/* Optimized code's deoptimization data names its function; other code keeps no such array there. */
	if ((e = agent_v8_read_typed(r, code, m->code_deopt_data, m->type_fixed_array, ret_deopt)) < 0)
		return e == -ENOENT ? -EINVAL : e;
	if ((e = agent_v8_read_smi(r, *ret_deopt, m->fixed_array_length, ret_len)) < 0)
		return e;
	return sfi_at(r, *ret_deopt, *ret_len, m->deopt_sfi, ret_sfi);
}

/* The functions inlined at sp, innermost first, into ret (room for max); returns how many, or an error. */
static int inlined(const struct agent_v8_reader *r, uint64_t deopt, int64_t deopt_len,
		   struct agent_v8_source_position *sp, struct agent_v8_code_frame *ret, int max)
{
	const struct agent_v8_meta *m = r->m;
	uint64_t literals, positions;
	int64_t n_literals;
	uint8_t *inl = NULL;
	size_t n_inl = 0;
	uint32_t type;
	int n = 0, e;

	if ((e = element(r, deopt, deopt_len, m->deopt_literals, &literals)) < 0 ||
	    (e = agent_v8_type_of(r, literals, &type)) < 0 ||
	    (e = agent_v8_read_smi(r, literals, m->fixed_array_length, &n_literals)) < 0)
		return e;
	if ((e = element(r, deopt, deopt_len, m->deopt_inlining_positions, &positions)) < 0 ||
	    (e = agent_v8_type_of(r, positions, &type)) < 0)
		return e;
	if (type != m->type_byte_array)
		return -EINVAL;
	if ((e = agent_v8_byte_array(r, positions, &inl, &n_inl)) < 0)
		return e;
	while (sp->inlining_id >= 0 && n < max) {
		size_t at = (size_t)sp->inlining_id * V8_INLINING_POSITION_SIZE;
		int64_t raw;
		int32_t fid;

		if (at + V8_INLINING_POSITION_SIZE > n_inl) {
			e = -EINVAL;
			break;
		}
		memcpy(&raw, inl + at, sizeof(raw));
		memcpy(&fid, inl + at + 8, sizeof(fid));
		if ((e = sfi_at(r, literals, n_literals, fid, &ret[n].sfi)) < 0)
			break;
		ret[n].line = line_of(r, ret[n].sfi, sp->script_offset);
		n++;
		/* Where it was inlined: a position in its caller, itself inlined or the Code's own function. */
		if (!agent_v8_decode_position(raw, &sp->script_offset, &sp->inlining_id)) {
			e = -EINVAL;
			break;
		}
	}
	free(inl);
	return e < 0 ? e : n;
}

int agent_v8_code_frames(const struct agent_v8_meta *m, agent_v8_read_fn read, void *ctx, uint64_t code,
			 uint32_t offset, struct agent_v8_code_frame *ret, int max)
{
	struct agent_v8_reader r = { m, read, ctx };
	struct agent_v8_source_position sp;
	uint64_t deopt, table, sfi;
	int64_t deopt_len;
	uint8_t *tbl;
	size_t n_tbl;
	int n = 0, e;

	if (!m->has_code_positions || max < 1)
		return -ENOENT;
	if ((e = code_function(&r, code, &deopt, &deopt_len, &sfi)) < 0)
		return e;
	if ((e = agent_v8_read_typed(&r, code, m->code_source_positions, m->type_byte_array, &table)) < 0)
		return e;
	if ((e = agent_v8_byte_array(&r, table, &tbl, &n_tbl)) < 0)
		return e;
	e = agent_v8_source_position_at(tbl, n_tbl, offset, &sp);
	free(tbl);
	if (e < 0)
		return e;
	if (sp.script_offset < 0 || (int64_t)offset > sp.last_code_offset + V8_CODE_TAIL) {
		/* The function is known, its line is not. */
		ret[0].sfi = sfi;
		ret[0].line = 0;
		return 1;
	}
	if (sp.inlining_id >= 0) {
		/* Room for the Code's own function, last. */
		if ((n = inlined(&r, deopt, deopt_len, &sp, ret, max - 1)) < 0)
			return n;
		/* Deeper than max: the outer inlined functions are left out, the Code's own is kept. */
		if (sp.inlining_id >= 0)
			sp.script_offset = AGENT_V8_NO_POSITION;
	}
	ret[n].sfi = sfi;
	ret[n].line = line_of(&r, sfi, sp.script_offset);
	return n + 1;
}
