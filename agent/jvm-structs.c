// SPDX-License-Identifier: Apache-2.0
/*
 * HotSpot's vmStructs tables, read through a bounded reader and decoded
 * (jvm-structs.h).
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "jvm-structs.h"

struct jvm_field {
	char *type;
	char *field;
	uint64_t value; /* offset, or address when static */
	bool is_static;
};

struct jvm_named {
	char *name;
	uint64_t value;
};

struct agent_jvm_tables {
	struct jvm_field *fields;
	size_t n_fields;
	struct jvm_named *types;
	size_t n_types;
	struct jvm_named *ints;
	size_t n_ints;
	struct jvm_named *longs;
	size_t n_longs;
};

static const char *const sym_names[AGENT_JVM_N_SYMS] = {
	[AGENT_JVM_SYM_STRUCTS] = "gHotSpotVMStructs",
	[AGENT_JVM_SYM_STRUCT_TYPE_NAME] = "gHotSpotVMStructEntryTypeNameOffset",
	[AGENT_JVM_SYM_STRUCT_FIELD_NAME] = "gHotSpotVMStructEntryFieldNameOffset",
	[AGENT_JVM_SYM_STRUCT_TYPE_STRING] = "gHotSpotVMStructEntryTypeStringOffset",
	[AGENT_JVM_SYM_STRUCT_IS_STATIC] = "gHotSpotVMStructEntryIsStaticOffset",
	[AGENT_JVM_SYM_STRUCT_OFFSET] = "gHotSpotVMStructEntryOffsetOffset",
	[AGENT_JVM_SYM_STRUCT_ADDRESS] = "gHotSpotVMStructEntryAddressOffset",
	[AGENT_JVM_SYM_STRUCT_STRIDE] = "gHotSpotVMStructEntryArrayStride",
	[AGENT_JVM_SYM_TYPES] = "gHotSpotVMTypes",
	[AGENT_JVM_SYM_TYPE_TYPE_NAME] = "gHotSpotVMTypeEntryTypeNameOffset",
	[AGENT_JVM_SYM_TYPE_SIZE] = "gHotSpotVMTypeEntrySizeOffset",
	[AGENT_JVM_SYM_TYPE_STRIDE] = "gHotSpotVMTypeEntryArrayStride",
	[AGENT_JVM_SYM_INTS] = "gHotSpotVMIntConstants",
	[AGENT_JVM_SYM_INT_NAME] = "gHotSpotVMIntConstantEntryNameOffset",
	[AGENT_JVM_SYM_INT_VALUE] = "gHotSpotVMIntConstantEntryValueOffset",
	[AGENT_JVM_SYM_INT_STRIDE] = "gHotSpotVMIntConstantEntryArrayStride",
	[AGENT_JVM_SYM_LONGS] = "gHotSpotVMLongConstants",
	[AGENT_JVM_SYM_LONG_NAME] = "gHotSpotVMLongConstantEntryNameOffset",
	[AGENT_JVM_SYM_LONG_VALUE] = "gHotSpotVMLongConstantEntryValueOffset",
	[AGENT_JVM_SYM_LONG_STRIDE] = "gHotSpotVMLongConstantEntryArrayStride",
};

const char *agent_jvm_sym_name(unsigned sym)
{
	return sym < AGENT_JVM_N_SYMS ? sym_names[sym] : NULL;
}

void agent_jvm_tables_free(struct agent_jvm_tables *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->n_fields; i++) {
		free(t->fields[i].type);
		free(t->fields[i].field);
	}
	for (size_t i = 0; i < t->n_types; i++)
		free(t->types[i].name);
	for (size_t i = 0; i < t->n_ints; i++)
		free(t->ints[i].name);
	for (size_t i = 0; i < t->n_longs; i++)
		free(t->longs[i].name);
	free(t->fields);
	free(t->types);
	free(t->ints);
	free(t->longs);
	free(t);
}

static int read_u64(const struct agent_jvm_reader *r, uint64_t addr, uint64_t *ret)
{
	return r->read(r->ctx, addr, ret, sizeof(*ret));
}

/*
 * A NUL-terminated name at addr, read a page piece at a time so that a name
 * near the end of a mapping is not lost to a read that crosses it. Only
 * printable ASCII is accepted: HotSpot's names are C identifiers and types.
 */
static int read_name(const struct agent_jvm_reader *r, uint64_t addr, char **ret)
{
	char buf[AGENT_JVM_MAX_NAME + 1];
	size_t have = 0;

	if (!addr)
		return -EINVAL;
	while (have < sizeof(buf)) {
		uint64_t at = addr + have;
		size_t n = 4096 - (size_t)(at & 4095);
		char *nul;
		int err;

		if (at < addr)
			return -EINVAL;
		if (n > sizeof(buf) - have)
			n = sizeof(buf) - have;
		err = r->read(r->ctx, at, buf + have, n);
		if (err < 0)
			return err;
		nul = memchr(buf + have, '\0', n);
		have += n;
		if (nul) {
			for (const char *c = buf; c < nul; c++)
				if (*c < 0x20 || *c > 0x7e)
					return -EINVAL;
			*ret = strdup(buf);
			return *ret ? 0 : -ENOMEM;
		}
	}
	return -EINVAL;
}

/* One table's shape: where it is, its stride, and where in an entry the fields are. */
struct table {
	uint64_t base;
	uint64_t stride;
	uint64_t off[6];
	size_t n_off;
	uint8_t width[6]; /* bytes of each field: 8, or 4 for the int constant's value and isStatic */
};

static int table_shape(const struct agent_jvm_reader *r, const uint64_t *syms, unsigned base_sym, unsigned first,
		       size_t n_off, unsigned stride_sym, struct table *ret)
{
	uint64_t ptr;
	int err;

	memset(ret, 0, sizeof(*ret));
	/* The table symbol is a pointer to the array. */
	err = read_u64(r, syms[base_sym], &ptr);
	if (err < 0)
		return err;
	ret->base = ptr;
	err = read_u64(r, syms[stride_sym], &ret->stride);
	if (err < 0)
		return err;
	for (size_t i = 0; i < n_off; i++) {
		err = read_u64(r, syms[first + i], &ret->off[i]);
		if (err < 0)
			return err;
		ret->width[i] = 8;
	}
	ret->n_off = n_off;
	/* The JVM fills these in during its start-up (vmStructs_init): zeros mean "not yet". */
	if (!ret->base || !ret->stride)
		return -EAGAIN;
	if (ret->stride > AGENT_JVM_MAX_STRIDE)
		return -EINVAL;
	return 0;
}

static int check_shape(struct table *t)
{
	for (size_t i = 0; i < t->n_off; i++)
		if (t->off[i] > t->stride || t->width[i] > t->stride - t->off[i])
			return -EINVAL;
	return 0;
}

/* Reads entry i of t into buf (t->stride bytes); the field j is then get(buf, t, j). */
static int read_entry(const struct agent_jvm_reader *r, const struct table *t, size_t i, uint8_t *buf)
{
	uint64_t at = t->base + i * t->stride;

	if (at < t->base)
		return -EINVAL;
	return r->read(r->ctx, at, buf, (size_t)t->stride);
}

static uint64_t get(const uint8_t *buf, const struct table *t, size_t j)
{
	uint64_t v = 0;

	if (t->width[j] == 4) {
		uint32_t w;

		memcpy(&w, buf + t->off[j], 4);
		return w;
	}
	memcpy(&v, buf + t->off[j], 8);
	return v;
}

static int read_structs(const struct agent_jvm_reader *r, const uint64_t *syms, struct agent_jvm_tables *t)
{
	uint8_t buf[AGENT_JVM_MAX_STRIDE];
	struct table s;
	size_t cap = 0;
	int err;

	/* type name, field name, type string, isStatic, offset, address */
	err = table_shape(r, syms, AGENT_JVM_SYM_STRUCTS, AGENT_JVM_SYM_STRUCT_TYPE_NAME, 6,
			  AGENT_JVM_SYM_STRUCT_STRIDE, &s);
	if (err < 0)
		return err;
	s.width[3] = 4; /* int32_t isStatic */
	err = check_shape(&s);
	if (err < 0)
		return err;
	for (size_t i = 0;; i++) {
		struct jvm_field *f;
		uint64_t type, field;

		if (i >= AGENT_JVM_MAX_ENTRIES)
			return -EINVAL;
		err = read_entry(r, &s, i, buf);
		if (err < 0)
			return err;
		type = get(buf, &s, 0);
		field = get(buf, &s, 1);
		/* The last entry has no names. */
		if (!type && !field)
			return 0;
		err = sr_grow((void **)&t->fields, &cap, t->n_fields + 1, sizeof(*t->fields), 256);
		if (err < 0)
			return err;
		f = &t->fields[t->n_fields];
		memset(f, 0, sizeof(*f));
		err = read_name(r, type, &f->type);
		if (err == 0)
			err = read_name(r, field, &f->field);
		if (err < 0) {
			free(f->type);
			free(f->field);
			return err;
		}
		f->is_static = get(buf, &s, 3) != 0;
		f->value = f->is_static ? get(buf, &s, 5) : get(buf, &s, 4);
		t->n_fields++;
	}
}

/* Types and constants: a name and a value (width bytes) per entry, ended by a NULL name. */
static int read_named(const struct agent_jvm_reader *r, const uint64_t *syms, unsigned base_sym, unsigned name_sym,
		      unsigned value_sym, unsigned stride_sym, uint8_t width, struct jvm_named **arr, size_t *n)
{
	uint8_t buf[AGENT_JVM_MAX_STRIDE];
	uint64_t value_off;
	struct table s;
	size_t cap = 0;
	int err;

	err = table_shape(r, syms, base_sym, name_sym, 1, stride_sym, &s);
	if (err < 0)
		return err;
	err = read_u64(r, syms[value_sym], &value_off);
	if (err < 0)
		return err;
	s.off[1] = value_off;
	s.width[1] = width;
	s.n_off = 2;
	err = check_shape(&s);
	if (err < 0)
		return err;
	for (size_t i = 0;; i++) {
		struct jvm_named *e;
		uint64_t name;

		if (i >= AGENT_JVM_MAX_ENTRIES)
			return -EINVAL;
		err = read_entry(r, &s, i, buf);
		if (err < 0)
			return err;
		name = get(buf, &s, 0);
		if (!name)
			return 0;
		err = sr_grow((void **)arr, &cap, *n + 1, sizeof(**arr), 256);
		if (err < 0)
			return err;
		e = &(*arr)[*n];
		e->name = NULL;
		err = read_name(r, name, &e->name);
		if (err < 0)
			return err;
		e->value = get(buf, &s, 1);
		(*n)++;
	}
}

struct agent_jvm_tables *agent_jvm_tables_read(const struct agent_jvm_reader *r, const uint64_t syms[AGENT_JVM_N_SYMS])
{
	struct agent_jvm_tables *t = calloc(1, sizeof(*t));
	int err;

	if (!t)
		return NULL;
	err = read_structs(r, syms, t);
	if (err == 0)
		err = read_named(r, syms, AGENT_JVM_SYM_TYPES, AGENT_JVM_SYM_TYPE_TYPE_NAME, AGENT_JVM_SYM_TYPE_SIZE,
				 AGENT_JVM_SYM_TYPE_STRIDE, 8, &t->types, &t->n_types);
	if (err == 0)
		err = read_named(r, syms, AGENT_JVM_SYM_INTS, AGENT_JVM_SYM_INT_NAME, AGENT_JVM_SYM_INT_VALUE,
				 AGENT_JVM_SYM_INT_STRIDE, 4, &t->ints, &t->n_ints);
	if (err == 0)
		err = read_named(r, syms, AGENT_JVM_SYM_LONGS, AGENT_JVM_SYM_LONG_NAME, AGENT_JVM_SYM_LONG_VALUE,
				 AGENT_JVM_SYM_LONG_STRIDE, 8, &t->longs, &t->n_longs);
	if (err < 0) {
		agent_jvm_tables_free(t);
		errno = -err;
		return NULL;
	}
	return t;
}

static const struct jvm_field *find_field(const struct agent_jvm_tables *t, const char *type, const char *field)
{
	for (size_t i = 0; i < t->n_fields; i++)
		if (!strcmp(t->fields[i].type, type) && !strcmp(t->fields[i].field, field))
			return &t->fields[i];
	return NULL;
}

static const struct jvm_named *find_named(const struct jvm_named *arr, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(arr[i].name, name))
			return &arr[i];
	return NULL;
}

int agent_jvm_tables__field(const struct agent_jvm_tables *t, const char *type, const char *field, uint64_t *ret)
{
	const struct jvm_field *f = find_field(t, type, field);

	if (!f)
		return -ENOENT;
	*ret = f->value;
	return 0;
}

int agent_jvm_tables__is_static(const struct agent_jvm_tables *t, const char *type, const char *field)
{
	const struct jvm_field *f = find_field(t, type, field);

	return f ? f->is_static : -ENOENT;
}

int agent_jvm_tables__size(const struct agent_jvm_tables *t, const char *type, uint64_t *ret)
{
	const struct jvm_named *e = find_named(t->types, t->n_types, type);

	if (!e)
		return -ENOENT;
	*ret = e->value;
	return 0;
}

int agent_jvm_tables__int(const struct agent_jvm_tables *t, const char *name, int64_t *ret)
{
	const struct jvm_named *e = find_named(t->ints, t->n_ints, name);

	if (!e)
		return -ENOENT;
	*ret = (int32_t)(uint32_t)e->value;
	return 0;
}

int agent_jvm_tables__long(const struct agent_jvm_tables *t, const char *name, uint64_t *ret)
{
	const struct jvm_named *e = find_named(t->longs, t->n_longs, name);

	if (!e)
		return -ENOENT;
	*ret = e->value;
	return 0;
}

void agent_jvm_tables__counts(const struct agent_jvm_tables *t, size_t ret[4])
{
	ret[0] = t->n_fields;
	ret[1] = t->n_types;
	ret[2] = t->n_ints;
	ret[3] = t->n_longs;
}

/* Where a layout value comes from: the first of up to three names that exists. */
enum spec_kind { FIELD, STATIC, SIZE, INT };

struct spec {
	uint8_t kind;	      /* enum spec_kind */
	uint8_t width;	      /* bytes of the layout member: 2 or 8 */
	size_t at;	      /* offsetof(struct agent_jvm_layout, ...) */
	const char *names[3]; /* "Type::field" for FIELD and STATIC, a type or constant name otherwise */
};

static const struct spec specs[] = {
	{ STATIC, 8, offsetof(struct agent_jvm_layout, codecache_heaps_addr), { "CodeCache::_heaps" } },
	{ STATIC, 8, offsetof(struct agent_jvm_layout, codecache_low_addr), { "CodeCache::_low_bound" } },
	{ STATIC, 8, offsetof(struct agent_jvm_layout, codecache_high_addr), { "CodeCache::_high_bound" } },
	{ FIELD,
	  2,
	  offsetof(struct agent_jvm_layout, growable_array_len),
	  { "GrowableArrayBase::_len", "GenericGrowableArray::_len" } },
	{ FIELD, 2, offsetof(struct agent_jvm_layout, growable_array_data), { "GrowableArray<int>::_data" } },
	{ FIELD, 2, offsetof(struct agent_jvm_layout, codeheap_memory), { "CodeHeap::_memory" } },
	{ FIELD, 2, offsetof(struct agent_jvm_layout, codeheap_segmap), { "CodeHeap::_segmap" } },
	{ FIELD, 2, offsetof(struct agent_jvm_layout, codeheap_log2_segment_size), { "CodeHeap::_log2_segment_size" } },
	{ FIELD, 2, offsetof(struct agent_jvm_layout, vspace_low), { "VirtualSpace::_low" } },
	{ FIELD, 2, offsetof(struct agent_jvm_layout, vspace_high), { "VirtualSpace::_high" } },
	{ SIZE, 2, offsetof(struct agent_jvm_layout, heapblock_size), { "HeapBlock" } },
	{ FIELD, 2, offsetof(struct agent_jvm_layout, heapblock_length), { "HeapBlock::Header::_length" } },
	{ FIELD, 2, offsetof(struct agent_jvm_layout, heapblock_used), { "HeapBlock::Header::_used" } },
	{ FIELD, 2, offsetof(struct agent_jvm_layout, codeblob_name), { "CodeBlob::_name" } },
	{ FIELD, 2, offsetof(struct agent_jvm_layout, codeblob_size), { "CodeBlob::_size" } },
	{ FIELD, 2, offsetof(struct agent_jvm_layout, codeblob_frame_size), { "CodeBlob::_frame_size" } },
	{ FIELD, 2, offsetof(struct agent_jvm_layout, codeblob_code_begin), { "CodeBlob::_code_begin" } },
	{ FIELD, 2, offsetof(struct agent_jvm_layout, codeblob_code_end), { "CodeBlob::_code_end" } },
	{ FIELD,
	  2,
	  offsetof(struct agent_jvm_layout, nmethod_method),
	  { "CompiledMethod::_method", "nmethod::_method" } },
	{ FIELD,
	  2,
	  offsetof(struct agent_jvm_layout, nmethod_scopes_data),
	  { "CompiledMethod::_scopes_data_begin", "nmethod::_scopes_data_begin" } },
	{ FIELD, 2, offsetof(struct agent_jvm_layout, nmethod_compile_id), { "nmethod::_compile_id" } },
	{ FIELD, 2, offsetof(struct agent_jvm_layout, nmethod_metadata_offset), { "nmethod::_metadata_offset" } },
	{ FIELD, 2, offsetof(struct agent_jvm_layout, nmethod_scopes_pcs_offset), { "nmethod::_scopes_pcs_offset" } },
	{ FIELD,
	  2,
	  offsetof(struct agent_jvm_layout, nmethod_dependencies_offset),
	  { "nmethod::_dependencies_offset" } },
	{ FIELD, 2, offsetof(struct agent_jvm_layout, nmethod_orig_pc_offset), { "nmethod::_orig_pc_offset" } },
	{ FIELD, 2, offsetof(struct agent_jvm_layout, pcdesc_pc_offset), { "PcDesc::_pc_offset" } },
	{ FIELD, 2, offsetof(struct agent_jvm_layout, pcdesc_scope_decode_offset), { "PcDesc::_scope_decode_offset" } },
	{ SIZE, 2, offsetof(struct agent_jvm_layout, pcdesc_size), { "PcDesc" } },
	{ FIELD, 2, offsetof(struct agent_jvm_layout, method_constmethod), { "Method::_constMethod" } },
	{ FIELD, 2, offsetof(struct agent_jvm_layout, constmethod_constants), { "ConstMethod::_constants" } },
	{ FIELD, 2, offsetof(struct agent_jvm_layout, constmethod_flags), { "ConstMethod::_flags" } },
	{ FIELD, 2, offsetof(struct agent_jvm_layout, constmethod_code_size), { "ConstMethod::_code_size" } },
	{ FIELD, 2, offsetof(struct agent_jvm_layout, constmethod_name_index), { "ConstMethod::_name_index" } },
	{ FIELD,
	  2,
	  offsetof(struct agent_jvm_layout, constmethod_signature_index),
	  { "ConstMethod::_signature_index" } },
	{ SIZE, 2, offsetof(struct agent_jvm_layout, constmethod_size), { "ConstMethod" } },
	{ INT,
	  2,
	  offsetof(struct agent_jvm_layout, constmethod_has_linenumber_table),
	  { "ConstMethod::_has_linenumber_table" } },
	{ FIELD, 2, offsetof(struct agent_jvm_layout, constantpool_pool_holder), { "ConstantPool::_pool_holder" } },
	{ FIELD,
	  2,
	  offsetof(struct agent_jvm_layout, constantpool_source_file_name_index),
	  { "ConstantPool::_source_file_name_index" } },
	{ FIELD, 2, offsetof(struct agent_jvm_layout, constantpool_length), { "ConstantPool::_length" } },
	{ SIZE, 2, offsetof(struct agent_jvm_layout, constantpool_size), { "ConstantPool" } },
	{ FIELD, 2, offsetof(struct agent_jvm_layout, klass_name), { "Klass::_name" } },
	{ FIELD, 2, offsetof(struct agent_jvm_layout, symbol_length), { "Symbol::_length" } },
	{ FIELD, 2, offsetof(struct agent_jvm_layout, symbol_body), { "Symbol::_body" } },
	{ INT,
	  2,
	  offsetof(struct agent_jvm_layout, interp_frame_sender_sp),
	  { "frame::interpreter_frame_sender_sp_offset" } },
	{ INT,
	  2,
	  offsetof(struct agent_jvm_layout, interp_frame_method),
	  { "frame::interpreter_frame_last_sp_offset" } },
	{ FIELD, 2, offsetof(struct agent_jvm_layout, javathread_anchor), { "JavaThread::_anchor" } },
	{ FIELD, 2, offsetof(struct agent_jvm_layout, anchor_last_java_sp), { "JavaFrameAnchor::_last_Java_sp" } },
	{ FIELD, 2, offsetof(struct agent_jvm_layout, anchor_last_java_pc), { "JavaFrameAnchor::_last_Java_pc" } },
	{ FIELD, 2, offsetof(struct agent_jvm_layout, anchor_last_java_fp), { "JavaFrameAnchor::_last_Java_fp" } },
};

/* Looks "Type::field" up; the type is everything before the last "::" (types such as HeapBlock::Header hold one). */
static const struct jvm_field *lookup(const struct agent_jvm_tables *t, const char *name)
{
	const char *sep = NULL;
	char type[AGENT_JVM_MAX_NAME + 1];

	for (const char *p = strstr(name, "::"); p; p = strstr(p + 2, "::"))
		sep = p;
	if (!sep || (size_t)(sep - name) >= sizeof(type))
		return NULL;
	memcpy(type, name, (size_t)(sep - name));
	type[sep - name] = '\0';
	return find_field(t, type, sep + 2);
}

static int spec_value(const struct agent_jvm_tables *t, const struct spec *s, const char *name, uint64_t *ret)
{
	const struct jvm_field *f;
	int64_t v;

	switch (s->kind) {
	case FIELD:
	case STATIC:
		f = lookup(t, name);
		if (!f || f->is_static != (s->kind == STATIC))
			return -ENOENT;
		*ret = f->value;
		return 0;
	case SIZE:
		return agent_jvm_tables__size(t, name, ret);
	default:
		if (agent_jvm_tables__int(t, name, &v) < 0)
			return -ENOENT;
		*ret = (uint64_t)v;
		return 0;
	}
}

int agent_jvm_layout_from(const struct agent_jvm_tables *t, struct agent_jvm_layout *ret, const char **ret_missing)
{
	memset(ret, 0, sizeof(*ret));
	*ret_missing = NULL;
	for (size_t i = 0; i < sizeof(specs) / sizeof(specs[0]); i++) {
		const struct spec *s = &specs[i];
		uint64_t v = 0;
		int err = -ENOENT;

		for (size_t n = 0; n < 3 && s->names[n] && err < 0; n++)
			err = spec_value(t, s, s->names[n], &v);
		/* An offset must fit its member; a signed constant is a small negative or positive number. */
		if (err == 0 && s->width == 2 && s->kind != INT && v > UINT16_MAX)
			err = -ERANGE;
		if (err == 0 && s->kind == INT && (int64_t)v != (int16_t)v)
			err = -ERANGE;
		if (err < 0) {
			*ret_missing = s->names[0];
			return -ENOTSUP;
		}
		if (s->width == 8)
			memcpy((uint8_t *)ret + s->at, &v, 8);
		else {
			uint16_t w = (uint16_t)v;

			memcpy((uint8_t *)ret + s->at, &w, 2);
		}
	}
	/*
	 * The tables give an interpreted frame's sender_sp and last_sp slots;
	 * x86-64's layout (frame_x86.hpp) has, below last_sp: method, mirror,
	 * mdp, cache, locals, bcp, one word each.
	 */
	ret->interp_frame_bcp = (int16_t)(ret->interp_frame_method - 6);
	ret->interp_frame_method = (int16_t)(ret->interp_frame_method - 1);
	if (ret->interp_frame_sender_sp != -1 || ret->interp_frame_method != -3) {
		*ret_missing = "frame::interpreter_frame_last_sp_offset";
		return -ENOTSUP;
	}
	/* A HeapBlock header smaller than a word or a PcDesc without room for its fields is not a layout to trust. */
	if (!ret->heapblock_size || ret->pcdesc_size < 8) {
		*ret_missing = !ret->heapblock_size ? "HeapBlock" : "PcDesc";
		return -ENOTSUP;
	}
	return 0;
}
