// SPDX-License-Identifier: Apache-2.0
/*
 * V8 postmortem metadata and SharedFunctionInfo names (agent/v8.h).
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "v8.h"
#include "v8-private.h"

/* ScopeInfo keeps up to this many context local names inline (V8's kScopeInfoMaxInlinedLocalNamesSize). */
#define V8_MAX_INLINED_LOCALS 75
/* Chunk a string is read in. */
#define V8_CHUNK 512

enum meta_kind { META_I32, META_U32 };

struct meta_field {
	const char *name;
	size_t off;
	bool required;
	enum meta_kind kind;
};

#define F(sym, field, req)                                                                                             \
	{                                                                                                              \
		"v8dbg_" sym, offsetof(struct agent_v8_meta, field), req, META_U32                                     \
	}
#define FI(sym, field, req)                                                                                            \
	{                                                                                                              \
		"v8dbg_" sym, offsetof(struct agent_v8_meta, field), req, META_I32                                     \
	}

static const struct meta_field fields[] = {
	FI("off_fp_function", off_fp_function, true),
	FI("off_fp_context", off_fp_context, true),
	FI("off_fp_bytecode_array", off_fp_bytecode_array, false),
	FI("off_fp_bytecode_offset", off_fp_bytecode_offset, false),
	F("HeapObjectTag", heap_object_tag, true),
	F("HeapObjectTagMask", heap_object_tag_mask, true),
	F("SmiShiftSize", smi_shift, true),
	F("class_HeapObject__map__Map", heap_object_map, true),
	F("class_Map__instance_type__uint16_t", map_instance_type, true),
	F("class_JSFunction__shared__SharedFunctionInfo", js_function_shared, true),
	F("class_SharedFunctionInfo__name_or_scope_info__Object", sfi_name_or_scope_info, true),
	F("class_SharedFunctionInfo__script_or_debug_info__HeapObject", sfi_script_or_debug_info, true),
	F("class_Script__name__Object", script_name, true),
	F("class_Script__source__Object", script_source, true),
	F("class_String__length__int32_t", string_length, true),
	F("class_SeqOneByteString__chars__char", seq_one_byte_chars, true),
	F("class_SeqTwoByteString__chars__char", seq_two_byte_chars, true),
	F("class_ConsString__first__String", cons_first, true),
	F("class_ConsString__second__String", cons_second, true),
	F("class_ThinString__actual__String", thin_actual, true),
	F("scopeinfo_idx_first_vars", scopeinfo_first_vars, true),
	F("scopeinfo_idx_ncontextlocals", scopeinfo_ncontextlocals, true),
	F("type_JSFunction__JS_FUNCTION_TYPE", type_js_function_first, true),
	F("type_SharedFunctionInfo__SHARED_FUNCTION_INFO_TYPE", type_sfi, true),
	F("type_Script__SCRIPT_TYPE", type_script, true),
	F("type_ScopeInfo__SCOPE_INFO_TYPE", type_scope_info, true),
	F("FirstNonstringType", first_nonstring_type, true),
	F("StringEncodingMask", string_encoding_mask, true),
	F("StringRepresentationMask", string_representation_mask, true),
	F("OneByteStringTag", one_byte_string_tag, true),
	F("SeqStringTag", seq_string_tag, false),
	F("ConsStringTag", cons_string_tag, true),
	F("ThinStringTag", thin_string_tag, true),
	/* Lines of interpreted frames (has_positions). */
	F("class_SharedFunctionInfo__function_data__Object", sfi_function_data, false),
	F("class_Code__bytecode_or_interpreter_data__HeapObject", code_bytecode_or_interpreter_data, false),
	F("class_FixedArrayBase__length__SMI", fixed_array_length, false),
	F("class_FixedArray__data__uintptr_t", fixed_array_data, false),
	F("class_BytecodeArray__data__uintptr_t", bytecode_data, false),
	F("class_Script__line_ends__Object", script_line_ends, false),
	F("type_BytecodeArray__BYTECODE_ARRAY_TYPE", type_bytecode_array, false),
	F("type_ByteArray__BYTE_ARRAY_TYPE", type_byte_array, false),
	F("type_FixedArray__FIXED_ARRAY_TYPE", type_fixed_array, false),
	F("type_Code__CODE_TYPE", type_code, false),
	/* Optimized code (has_code_positions). */
	F("class_JSObject__elements__Object", js_object_elements, false),
	F("class_JSFunction__context__Context", js_function_context, false),
	F("class_JSFunction__raw_feedback_cell__FeedbackCell", js_function_feedback_cell, false),
	F("class_JSFunction__prototype_or_initial_map__HeapObject", js_function_prototype_or_initial_map, false),
	F("class_Code__relocation_info__ByteArray", code_relocation_info, false),
	F("class_Code__deoptimization_data__FixedArray", code_deopt_data, false),
	F("class_Code__source_position_table__ByteArray", code_source_positions, false),
	F("class_Code__bytecode_offset_table__ByteArray", code_bytecode_offsets, false),
	F("class_InstructionStream__instruction_start__uintptr_t", istream_instruction_start, false),
	F("DeoptimizationDataLiteralArrayIndex", deopt_literals, false),
	F("DeoptimizationDataSharedFunctionInfoIndex", deopt_sfi, false),
	F("DeoptimizationDataInliningPositionsIndex", deopt_inlining_positions, false),
	F("type_InstructionStream__INSTRUCTION_STREAM_TYPE", type_instruction_stream, false),
};

/* What agent_v8_line() needs besides the names' fields (the baseline Code's is optional). */
static const char *const position_fields[] = {
	"v8dbg_off_fp_bytecode_array",
	"v8dbg_off_fp_bytecode_offset",
	"v8dbg_class_SharedFunctionInfo__function_data__Object",
	"v8dbg_class_FixedArrayBase__length__SMI",
	"v8dbg_class_FixedArray__data__uintptr_t",
	"v8dbg_class_BytecodeArray__data__uintptr_t",
	"v8dbg_class_Script__line_ends__Object",
	"v8dbg_type_BytecodeArray__BYTECODE_ARRAY_TYPE",
	"v8dbg_type_ByteArray__BYTE_ARRAY_TYPE",
	"v8dbg_type_FixedArray__FIXED_ARRAY_TYPE",
};

/* What agent_v8_code_frames() needs besides the lines' fields. */
static const char *const code_fields[] = {
	"v8dbg_class_JSObject__elements__Object",
	"v8dbg_class_JSFunction__context__Context",
	"v8dbg_class_JSFunction__raw_feedback_cell__FeedbackCell",
	"v8dbg_class_JSFunction__prototype_or_initial_map__HeapObject",
	"v8dbg_class_Code__relocation_info__ByteArray",
	"v8dbg_class_Code__deoptimization_data__FixedArray",
	"v8dbg_class_Code__source_position_table__ByteArray",
	"v8dbg_class_InstructionStream__instruction_start__uintptr_t",
	"v8dbg_DeoptimizationDataLiteralArrayIndex",
	"v8dbg_DeoptimizationDataSharedFunctionInfoIndex",
	"v8dbg_DeoptimizationDataInliningPositionsIndex",
	"v8dbg_type_Code__CODE_TYPE",
	"v8dbg_type_InstructionStream__INSTRUCTION_STREAM_TYPE",
};

#define N_FIELDS (sizeof(fields) / sizeof(fields[0]))

/*
 * Builtins a JSFunction's code slot holds most often: an interpreted
 * function's (the interpreter's entry) and one not compiled yet.
 */
static const char *const learn_builtins[AGENT_V8_LEARN_BUILTINS] = { "InterpreterEntryTrampoline", "CompileLazy" };

/* A symbol's int: from its section's bytes, or 0 in .bss (the metadata script leaves zeros there). */
static int read_sym_i32(Elf *elf, const GElf_Sym *sym, int32_t *ret)
{
	Elf_Scn *scn = elf_getscn(elf, sym->st_shndx);
	Elf_Data *d;
	GElf_Shdr sh;

	if (sym->st_size != 4 || !scn || !gelf_getshdr(scn, &sh))
		return -EINVAL;
	if (sh.sh_type == SHT_NOBITS) {
		*ret = 0;
		return 0;
	}
	if (sym->st_value < sh.sh_addr || sym->st_value - sh.sh_addr + 4 > sh.sh_size)
		return -EINVAL;
	d = elf_getdata(scn, NULL);
	if (!d || !d->d_buf || sym->st_value - sh.sh_addr + 4 > d->d_size)
		return -EINVAL;
	memcpy(ret, (const uint8_t *)d->d_buf + (sym->st_value - sh.sh_addr), 4);
	return 0;
}

static bool found_named(const bool *found, const char *name)
{
	for (size_t k = 0; k < N_FIELDS; k++)
		if (!strcmp(fields[k].name, name))
			return found[k];
	return false;
}

/* The derived slots of optimized code's layout (agent/v8.h), when the metadata has what they are derived from. */
static void code_layout(const bool *found, struct agent_v8_meta *m)
{
	const uint32_t named[] = { m->js_function_shared, m->js_function_context, m->js_function_feedback_cell };
	/* The Code's tagged fields of the metadata, then its InstructionStream and first instruction's address. */
	const uint32_t code[] = { m->code_relocation_info, m->code_deopt_data, m->code_source_positions,
				  m->code_bytecode_offsets, m->code_bytecode_or_interpreter_data };
	uint32_t last_tagged = 0, free_slot = 0, n_free = 0;

	m->has_code_positions = m->has_positions;
	for (size_t i = 0; i < sizeof(code_fields) / sizeof(code_fields[0]); i++)
		if (!found_named(found, code_fields[i]))
			m->has_code_positions = false;
	/* A file's values are untrusted: the slots searched and kept (in 16 bits on the BPF side) are bounded first. */
	for (size_t i = 0; i < sizeof(code) / sizeof(code[0]); i++)
		if (code[i] > 0x400)
			m->has_code_positions = false;
	if (m->js_object_elements % 8 || m->js_object_elements > 0x400 ||
	    m->js_function_prototype_or_initial_map > 0x400 || m->deopt_sfi > 0x1000 || m->deopt_literals > 0x1000 ||
	    m->deopt_inlining_positions > 0x1000 || m->istream_instruction_start > 0x1000)
		m->has_code_positions = false;
	if (!m->has_code_positions)
		return;
	/* JSFunction's tagged slots past JSObject's header: the one the metadata does not name is the code. */
	for (uint32_t off = m->js_object_elements + 8; off < m->js_function_prototype_or_initial_map; off += 8) {
		bool is_named = false;

		for (size_t i = 0; i < sizeof(named) / sizeof(named[0]); i++)
			is_named |= named[i] == off;
		if (!is_named) {
			free_slot = off;
			n_free++;
		}
	}
	for (size_t i = 0; i < sizeof(code) / sizeof(code[0]); i++)
		last_tagged = code[i] > last_tagged ? code[i] : last_tagged;
	m->js_function_code = free_slot;
	m->code_instruction_stream = last_tagged + 8;
	m->code_instruction_start = last_tagged + 16;
	if (n_free != 1)
		m->has_code_positions = false;
}

int agent_v8_meta_read(Elf *elf, struct agent_v8_meta *ret)
{
	bool found[N_FIELDS] = { false };
	uint32_t next_type = UINT32_MAX;
	int32_t types[1024];
	size_t n_types = 0, seen = 0;
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;

	memset(ret, 0, sizeof(*ret));
	while ((scn = elf_nextscn(elf, scn))) {
		Elf_Data *d;
		size_t n;

		if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) || !sh.sh_entsize)
			continue;
		d = elf_getdata(scn, NULL);
		if (!d)
			continue;
		n = sh.sh_size / sh.sh_entsize;
		for (size_t i = 0; i < n; i++) {
			const char *name;
			GElf_Sym sym;
			int32_t v;

			if (!gelf_getsym(d, (int)i, &sym) || sym.st_shndx == SHN_UNDEF)
				continue;
			name = elf_strptr(elf, sh.sh_link, sym.st_name);
			if (name && !strncmp(name, "Builtins_", 9)) {
				for (size_t k = 0; k < AGENT_V8_LEARN_BUILTINS; k++) {
					if (!strcmp(name + 9, learn_builtins[k]) && sym.st_size > 0) {
						ret->builtins[k].addr = sym.st_value;
						ret->builtins[k].size = sym.st_size;
					}
				}
				continue;
			}
			if (!name || strncmp(name, "v8dbg_", 6) != 0 || read_sym_i32(elf, &sym, &v) < 0)
				continue;
			seen++;
			if (!strncmp(name, "v8dbg_type_", 11) && n_types < sizeof(types) / sizeof(types[0]))
				types[n_types++] = v;
			for (size_t k = 0; k < N_FIELDS; k++) {
				if (found[k] || strcmp(name, fields[k].name) != 0)
					continue;
				if (fields[k].kind == META_I32)
					memcpy((uint8_t *)ret + fields[k].off, &v, 4);
				else if (v >= 0)
					memcpy((uint8_t *)ret + fields[k].off, &v, 4);
				else
					return -EINVAL;
				found[k] = true;
			}
		}
	}
	if (!seen)
		return -ENOENT;
	for (size_t k = 0; k < N_FIELDS; k++)
		if (fields[k].required && !found[k])
			return -EINVAL;
	ret->has_positions = true;
	for (size_t i = 0; i < sizeof(position_fields) / sizeof(position_fields[0]); i++)
		if (!found_named(found, position_fields[i]))
			ret->has_positions = false;
	if (!found_named(found, "v8dbg_class_Code__bytecode_or_interpreter_data__HeapObject") ||
	    !found_named(found, "v8dbg_type_Code__CODE_TYPE"))
		ret->type_code = 0;
	/* Constant pool, handler table, source position table: the third tagged field past the length. */
	ret->bytecode_source_positions = ret->fixed_array_length + 3 * 8;
	/* The frame namer reads the offset and the array in one read; the table's slot lies before the bytecode. */
	if (ret->off_fp_bytecode_array != ret->off_fp_bytecode_offset + 8 || ret->off_fp_bytecode_offset >= 0 ||
	    ret->off_fp_bytecode_offset < -256 || ret->bytecode_source_positions + 8 > ret->bytecode_data ||
	    ret->bytecode_data > 0xffff || ret->fixed_array_data > 0xffff)
		ret->has_positions = false;
	code_layout(found, ret);
	/*
	 * JSFunction's subclasses (class constructors, the builtin
	 * constructors) take the instance types right after JS_FUNCTION_TYPE,
	 * and only the first is exported: the range ends before the next
	 * exported type.
	 */
	for (size_t i = 0; i < n_types; i++)
		if (types[i] > (int32_t)ret->type_js_function_first && (uint32_t)types[i] < next_type)
			next_type = (uint32_t)types[i];
	ret->type_js_function_last = next_type == UINT32_MAX ? ret->type_js_function_first : next_type - 1;
	/* A Smi's value is above its tag bit and the shift: 32 on 64-bit builds without pointer compression. */
	ret->smi_shift += 1;
	if (ret->smi_shift != 32 || ret->heap_object_tag_mask != 3 || ret->heap_object_tag != 1 ||
	    ret->off_fp_function >= 0 || ret->off_fp_function < -256 || ret->string_representation_mask > 0xff ||
	    ret->first_nonstring_type > 0xffff)
		return -EINVAL;
	return 0;
}

bool agent_v8_is_object(const struct agent_v8_reader *r, uint64_t tagged)
{
	return (tagged & r->m->heap_object_tag_mask) == r->m->heap_object_tag;
}

uint64_t agent_v8_untag(const struct agent_v8_reader *r, uint64_t tagged)
{
	return tagged - r->m->heap_object_tag;
}

int agent_v8_read_u64(const struct agent_v8_reader *r, uint64_t addr, uint64_t *ret)
{
	return r->read(r->ctx, addr, ret, sizeof(*ret));
}

/* The instance type of a tagged object, read through its map; -EINVAL when it is no object. */
int agent_v8_type_of(const struct agent_v8_reader *r, uint64_t tagged, uint32_t *ret)
{
	uint64_t map;
	uint16_t t;
	int e;

	if (!agent_v8_is_object(r, tagged))
		return -EINVAL;
	if ((e = agent_v8_read_u64(r, agent_v8_untag(r, tagged) + r->m->heap_object_map, &map)) < 0)
		return e;
	if (!agent_v8_is_object(r, map))
		return -EINVAL;
	if ((e = r->read(r->ctx, agent_v8_untag(r, map) + r->m->map_instance_type, &t, sizeof(t))) < 0)
		return e;
	*ret = t;
	return 0;
}

bool agent_v8_smi_value(const struct agent_v8_reader *r, uint64_t v, int64_t *ret)
{
	if (v & 1)
		return false;
	*ret = (int64_t)v >> r->m->smi_shift;
	return true;
}

/* What a string walk does with each piece of characters (one byte each; two-byte ones are narrowed). */
typedef bool (*visit_fn)(void *vctx, const char *s, size_t n);

/* Visits up to limit characters of the string; returns 0 or -errno. */
static int walk_string(const struct agent_v8_reader *r, uint64_t tagged, size_t limit, visit_fn visit, void *vctx,
		       int depth)
{
	const struct agent_v8_meta *m = r->m;
	uint32_t type, repr;
	uint64_t base, p;
	int32_t len;
	int e;

	if (depth > AGENT_V8_MAX_CONS)
		return -ELOOP;
	if ((e = agent_v8_type_of(r, tagged, &type)) < 0)
		return e;
	if (type >= m->first_nonstring_type)
		return -EINVAL;
	base = agent_v8_untag(r, tagged);
	repr = type & m->string_representation_mask;
	if (repr == m->thin_string_tag) {
		if ((e = agent_v8_read_u64(r, base + m->thin_actual, &p)) < 0)
			return e;
		return walk_string(r, p, limit, visit, vctx, depth + 1);
	}
	if (repr == m->cons_string_tag) {
		uint64_t first, second;

		if ((e = agent_v8_read_u64(r, base + m->cons_first, &first)) < 0 ||
		    (e = agent_v8_read_u64(r, base + m->cons_second, &second)) < 0)
			return e;
		if ((e = walk_string(r, first, limit, visit, vctx, depth + 1)) < 0)
			return e;
		return walk_string(r, second, limit, visit, vctx, depth + 1);
	}
	if (repr != m->seq_string_tag)
		return -EOPNOTSUPP; /* external and sliced strings: not read (yet) */
	if ((e = r->read(r->ctx, base + m->string_length, &len, sizeof(len))) < 0)
		return e;
	if (len < 0)
		return -EINVAL;
	if ((size_t)len > limit)
		len = (int32_t)limit;
	for (int32_t off = 0; off < len;) {
		char buf[V8_CHUNK];
		size_t n = (size_t)(len - off) < sizeof(buf) ? (size_t)(len - off) : sizeof(buf);

		if ((type & m->string_encoding_mask) == m->one_byte_string_tag) {
			e = r->read(r->ctx, base + m->seq_one_byte_chars + (uint64_t)off, buf, n);
		} else {
			uint16_t wide[V8_CHUNK / 2];

			n = n > V8_CHUNK / 2 ? V8_CHUNK / 2 : n;
			e = r->read(r->ctx, base + m->seq_two_byte_chars + 2 * (uint64_t)off, wide, 2 * n);
			for (size_t i = 0; e == 0 && i < n; i++)
				buf[i] = wide[i] < 0x80 ? (char)wide[i] : '?';
		}
		if (e < 0)
			return e;
		if (!visit(vctx, buf, n))
			return 0;
		off += (int32_t)n;
	}
	return 0;
}

struct copy_ctx {
	char *out;
	size_t cap;
	size_t n;
};

static bool copy_visit(void *vctx, const char *s, size_t n)
{
	struct copy_ctx *c = vctx;

	for (size_t i = 0; i < n && c->n + 1 < c->cap; i++)
		c->out[c->n++] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?';
	c->out[c->n] = '\0';
	return c->n + 1 < c->cap;
}

static int copy_string(const struct agent_v8_reader *r, uint64_t tagged, char *out, size_t cap)
{
	struct copy_ctx c = { out, cap, 0 };

	out[0] = '\0';
	return walk_string(r, tagged, cap - 1, copy_visit, &c, 0);
}

struct line_ctx {
	uint32_t pos; /* characters left before the position */
	uint32_t line;
	bool done;
};

static bool line_visit(void *vctx, const char *s, size_t n)
{
	struct line_ctx *c = vctx;

	for (size_t i = 0; i < n; i++) {
		if (c->pos == 0) {
			c->done = true;
			return false;
		}
		c->pos--;
		if (s[i] == '\n')
			c->line++;
	}
	return true;
}

/* The function's name and position from its ScopeInfo (its layout is not in the metadata: see below). */
static int from_scope_info(const struct agent_v8_reader *r, uint64_t scope, struct agent_v8_function *ret)
{
	const struct agent_v8_meta *m = r->m;
	uint64_t base = agent_v8_untag(r, scope), v, locals_v;
	int64_t locals, a, b;
	uint32_t slot, type;
	int e;

	if ((e = agent_v8_read_u64(r, base + 8 + 8 * (uint64_t)m->scopeinfo_ncontextlocals, &locals_v)) < 0)
		return e;
	if (!agent_v8_smi_value(r, locals_v, &locals) || locals < 0 || locals > 4096)
		return -EINVAL;
	/*
	 * Past the header (flags, parameter count, context local count) come
	 * the context locals' names and infos (names in a hash table past
	 * V8_MAX_INLINED_LOCALS), then optional slots whose presence the
	 * flags' bits say, in a layout that changes between V8 versions and is
	 * not in the metadata: the function's name is the first string among
	 * the next few slots, and its start and end positions the first two
	 * Smis after it with start < end. Checked on V8 11.3 (Node 20).
	 */
	slot = m->scopeinfo_first_vars + (locals > V8_MAX_INLINED_LOCALS ? 1 : 2 * (uint32_t)locals);
	for (uint32_t i = 0; i < AGENT_V8_SCOPE_SCAN; i++, slot++) {
		if ((e = agent_v8_read_u64(r, base + 8 + 8 * (uint64_t)slot, &v)) < 0)
			return e;
		if (agent_v8_is_object(r, v) && agent_v8_type_of(r, v, &type) == 0 && type < m->first_nonstring_type) {
			e = copy_string(r, v, ret->name, sizeof(ret->name));
			if (e < 0 && e != -EOPNOTSUPP)
				return e;
			/* Past the name's slot index (a Smi, -1 when the name has no variable). */
			slot += 2;
			break;
		}
	}
	for (uint32_t i = 0; i < AGENT_V8_SCOPE_SCAN; i++, slot++) {
		uint64_t w;

		if ((e = agent_v8_read_u64(r, base + 8 + 8 * (uint64_t)slot, &v)) < 0 ||
		    (e = agent_v8_read_u64(r, base + 8 + 8 * (uint64_t)(slot + 1), &w)) < 0)
			return e;
		if (agent_v8_smi_value(r, v, &a) && agent_v8_smi_value(r, w, &b) && a >= 0 && a < b && b <= INT32_MAX) {
			ret->start_pos = (uint32_t)a;
			return 0;
		}
	}
	return 0;
}

int agent_v8_describe(const struct agent_v8_meta *m, agent_v8_read_fn read, void *ctx, uint64_t sfi,
		      struct agent_v8_function *ret)
{
	struct agent_v8_reader r = { m, read, ctx };
	uint64_t nos, sod, name, source;
	uint32_t type;
	int e;

	memset(ret, 0, sizeof(*ret));
	if ((e = agent_v8_type_of(&r, sfi, &type)) < 0)
		return e;
	if (type != m->type_sfi)
		return -EINVAL;
	if ((e = agent_v8_read_u64(&r, agent_v8_untag(&r, sfi) + m->sfi_name_or_scope_info, &nos)) < 0)
		return e;
	if (agent_v8_is_object(&r, nos) && agent_v8_type_of(&r, nos, &type) == 0) {
		if (type == m->type_scope_info)
			e = from_scope_info(&r, nos, ret);
		else if (type < m->first_nonstring_type)
			e = copy_string(&r, nos, ret->name, sizeof(ret->name));
		if (e < 0 && e != -EOPNOTSUPP)
			return e;
	}
	if ((e = agent_v8_read_u64(&r, agent_v8_untag(&r, sfi) + m->sfi_script_or_debug_info, &sod)) < 0)
		return e;
	/* A DebugInfo (a debugger attached) in place of the script: no script name. */
	if (agent_v8_type_of(&r, sod, &type) < 0 || type != m->type_script)
		return 0;
	if (agent_v8_read_u64(&r, agent_v8_untag(&r, sod) + m->script_name, &name) == 0)
		(void)copy_string(&r, name, ret->script, sizeof(ret->script));
	if (ret->start_pos && agent_v8_read_u64(&r, agent_v8_untag(&r, sod) + m->script_source, &source) == 0) {
		struct line_ctx lc = { .pos = ret->start_pos, .line = 1 };

		if (walk_string(&r, source, AGENT_V8_MAX_SOURCE, line_visit, &lc, 0) == 0 && (lc.done || lc.pos == 0))
			ret->start_line = lc.line;
	}
	return 0;
}

/* One zigzag VLQ number of a source position table (7 bits a byte, low first, bit 7: more follow). */
static int decode_int(const uint8_t *p, size_t n, size_t *i, int64_t *ret)
{
	uint64_t v = 0;
	unsigned shift = 0;
	uint8_t b;

	do {
		if (*i >= n || shift > 63)
			return -EINVAL;
		b = p[(*i)++];
		v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
	} while (b & 0x80);
	*ret = (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
	return 0;
}

/* The entry at or before offset; to_end: read on to the last entry (its code offset), else stop past offset. */
static int scan_positions(const uint8_t *table, size_t n, uint32_t offset, bool to_end,
			  struct agent_v8_source_position *ret)
{
	/* Entries are deltas from the previous one; the first from code offset -1 (the function's entry), position 0. */
	int64_t code = -1, raw = 0, d;
	size_t i = 0;
	int e;

	ret->script_offset = AGENT_V8_NO_POSITION;
	ret->inlining_id = -1;
	ret->last_code_offset = -1;
	while (i < n) {
		if ((e = decode_int(table, n, &i, &d)) < 0)
			return e;
		/* The sign of the code offset's delta says whether the entry is a statement: -delta - 1 when not. */
		d = d >= 0 ? d : -(d + 1);
		if (d > INT32_MAX || code + d > INT32_MAX)
			return -EINVAL;
		code += d;
		if ((e = decode_int(table, n, &i, &d)) < 0)
			return e;
		if ((d > 0 && raw > INT64_MAX - d) || (d < 0 && raw < INT64_MIN - d))
			return -EINVAL;
		if (code > (int64_t)offset && !to_end)
			break;
		raw += d;
		ret->last_code_offset = code;
		if (code > (int64_t)offset)
			continue;
		if (!agent_v8_decode_position(raw, &ret->script_offset, &ret->inlining_id)) {
			ret->script_offset = AGENT_V8_NO_POSITION;
			ret->inlining_id = -1;
		}
	}
	return 0;
}

int agent_v8_source_position_at(const uint8_t *table, size_t n, uint32_t offset, struct agent_v8_source_position *ret)
{
	return scan_positions(table, n, offset, true, ret);
}

int agent_v8_position_at(const uint8_t *table, size_t n, uint32_t offset, int64_t *ret_pos)
{
	struct agent_v8_source_position sp;
	int e = scan_positions(table, n, offset, false, &sp);

	*ret_pos = e == 0 ? sp.script_offset : AGENT_V8_NO_POSITION;
	return e;
}

/* A Smi field of the object at tagged pointer obj. */
int agent_v8_read_smi(const struct agent_v8_reader *r, uint64_t obj, uint32_t off, int64_t *ret)
{
	uint64_t v;
	int e;

	if ((e = agent_v8_read_u64(r, agent_v8_untag(r, obj) + off, &v)) < 0)
		return e;
	return agent_v8_smi_value(r, v, ret) ? 0 : -EINVAL;
}

/* The tagged field at off of obj, when it is an object of type want. */
int agent_v8_read_typed(const struct agent_v8_reader *r, uint64_t obj, uint32_t off, uint32_t want, uint64_t *ret)
{
	uint32_t type;
	int e;

	if ((e = agent_v8_read_u64(r, agent_v8_untag(r, obj) + off, ret)) < 0)
		return e;
	if ((e = agent_v8_type_of(r, *ret, &type)) < 0)
		return e == -EINVAL ? -ENOENT : e;
	return type == want ? 0 : -ENOENT;
}

int agent_v8_byte_array(const struct agent_v8_reader *r, uint64_t array, uint8_t **ret, size_t *ret_len)
{
	const struct agent_v8_meta *m = r->m;
	int64_t len;
	uint8_t *buf;
	int e;

	*ret = NULL;
	*ret_len = 0;
	if ((e = agent_v8_read_smi(r, array, m->fixed_array_length, &len)) < 0)
		return e;
	if (len <= 0)
		return -ENOENT;
	if (len > AGENT_V8_MAX_POSITIONS)
		len = AGENT_V8_MAX_POSITIONS;
	buf = malloc((size_t)len);
	if (!buf)
		return -ENOMEM;
	/* A ByteArray's bytes follow the same header as a FixedArray's elements (map, length). */
	e = r->read(r->ctx, agent_v8_untag(r, array) + m->fixed_array_data, buf, (size_t)len);
	if (e < 0) {
		free(buf);
		return e;
	}
	*ret = buf;
	*ret_len = (size_t)len;
	return 0;
}

/* The bytecode's source position table, decoded at offset: a script position, or -ENOENT. */
static int bytecode_position(const struct agent_v8_reader *r, uint64_t bytecode, uint32_t offset, int64_t *ret)
{
	const struct agent_v8_meta *m = r->m;
	uint64_t table;
	int64_t len;
	uint8_t *buf;
	size_t n;
	int e;

	if ((e = agent_v8_read_smi(r, bytecode, m->fixed_array_length, &len)) < 0)
		return e;
	if (len < 0 || offset >= len)
		return -ENOENT;
	/* Undefined until V8 builds it, an exception when that failed. */
	if ((e = agent_v8_read_typed(r, bytecode, m->bytecode_source_positions, m->type_byte_array, &table)) < 0)
		return e;
	if ((e = agent_v8_byte_array(r, table, &buf, &n)) < 0)
		return e;
	e = agent_v8_position_at(buf, n, offset, ret);
	free(buf);
	if (e == 0 && *ret < 0)
		e = -ENOENT;
	return e;
}

/* The 1-based line of script position pos: by the script's line ends, or by its source when V8 has none yet. */
int agent_v8_script_line(const struct agent_v8_reader *r, uint64_t script, int64_t pos)
{
	const struct agent_v8_meta *m = r->m;
	struct line_ctx lc = { .line = 1 };
	uint64_t ends, source;
	int64_t n, lo = 0, hi, v;
	int e;

	if (pos > INT32_MAX)
		return -ENOENT;
	if (agent_v8_read_typed(r, script, m->script_line_ends, m->type_fixed_array, &ends) == 0 &&
	    agent_v8_read_smi(r, ends, m->fixed_array_length, &n) == 0 && n > 0 && n <= AGENT_V8_MAX_LINE_ENDS) {
		/* The first line whose end (its newline's position) is at or past pos. */
		hi = n;
		while (lo < hi) {
			int64_t mid = lo + (hi - lo) / 2;
			uint64_t w;

			if ((e = agent_v8_read_u64(r, agent_v8_untag(r, ends) + m->fixed_array_data + 8 * (uint64_t)mid,
						   &w)) < 0)
				return e;
			if (!agent_v8_smi_value(r, w, &v))
				return -EINVAL;
			if (v < pos)
				lo = mid + 1;
			else
				hi = mid;
		}
		return lo < INT32_MAX ? (int)lo + 1 : -ENOENT;
	}
	if ((e = agent_v8_read_u64(r, agent_v8_untag(r, script) + m->script_source, &source)) < 0)
		return e;
	lc.pos = (uint32_t)pos;
	if ((e = walk_string(r, source, AGENT_V8_MAX_SOURCE, line_visit, &lc, 0)) < 0)
		return e;
	return lc.done || lc.pos == 0 ? (int)lc.line : -ENOENT;
}

int agent_v8_line(const struct agent_v8_meta *m, agent_v8_read_fn read, void *ctx, uint64_t sfi, uint32_t offset)
{
	struct agent_v8_reader r = { m, read, ctx };
	uint64_t data, script;
	uint32_t type;
	int64_t pos;
	int e;

	if (!m->has_positions)
		return -ENOENT;
	if ((e = agent_v8_type_of(&r, sfi, &type)) < 0)
		return e;
	if (type != m->type_sfi)
		return -EINVAL;
	if ((e = agent_v8_read_u64(&r, agent_v8_untag(&r, sfi) + m->sfi_function_data, &data)) < 0)
		return e;
	if ((e = agent_v8_type_of(&r, data, &type)) < 0)
		return e == -EINVAL ? -ENOENT : e;
	/* A function with baseline (Sparkplug) code keeps that Code there, and its bytecode in it. */
	if (m->type_code && type == m->type_code) {
		if ((e = agent_v8_read_typed(&r, data, m->code_bytecode_or_interpreter_data, m->type_bytecode_array,
					     &data)) < 0)
			return e;
	} else if (type != m->type_bytecode_array) {
		return -ENOENT;
	}
	if ((e = bytecode_position(&r, data, offset, &pos)) < 0)
		return e;
	if ((e = agent_v8_read_typed(&r, sfi, m->sfi_script_or_debug_info, m->type_script, &script)) < 0)
		return e;
	return agent_v8_script_line(&r, script, pos);
}
