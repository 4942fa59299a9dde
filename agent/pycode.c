// SPDX-License-Identifier: Apache-2.0
/*
 * CPython layouts per version and the decoders of what the agent reads from
 * a Python process (pycode.h). Pure functions over bytes: every length and
 * offset is checked against the buffer, nothing is trusted.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "pycode.h"

/*
 * Offsets per version, x86-64 (LP64), from CPython's headers at each
 * release's tag:
 *   _PyRuntimeState   Include/internal/pycore_pystate.h (3.8), pycore_runtime.h (3.9+)
 *   PyInterpreterState Include/internal/pycore_interp.h (3.9+; 3.8: pycore_pystate.h)
 *   PyThreadState     Include/cpython/pystate.h
 *   PyFrameObject     Include/frameobject.h (3.8, 3.9), Include/cpython/frameobject.h (3.10)
 *   _PyInterpreterFrame Include/internal/pycore_frame.h (3.11+), _PyCFrame Include/cpython/pystate.h
 *   PyCodeObject      Include/code.h (3.8), Include/cpython/code.h (3.9+)
 *   PyASCIIObject, PyCompactUnicodeObject Include/cpython/unicodeobject.h
 * Every row was compared with offsetof over that release's own headers
 * (Py_BUILD_CORE; pyenv's 3.8.18, 3.9.18, 3.10.13, 3.12.1, 3.13.0 and
 * Debian's 3.11.2), the 3.11 row in every build where the headers are
 * installed (tests/unit/test-agent-pyoffsets.c), and each version against a
 * live interpreter (tests/integration/agent-python.py). The agent accepts a code object only
 * when its ob_type is PyCode_Type, so a wrong offset names nothing rather
 * than something wrong.
 */
static const struct agent_py_layout layouts[] = {
	{
		.version = AGENT_PY_VERSION(3, 8),
		.bpf = {
			/* int preinitializing..initialized (4), PyThreadState *finalizing, interpreters {mutex, head} */
			.runtime_interp_head = 32,
			.interp_threads_head = 8, /* struct _is { next; tstate_head; } */
			.tstate_next = 8,
			.tstate_thread_id = 176,
			.tstate_frame = 24, /* struct _frame *frame */
			.cframe_current = PY_OFF_NONE,
			.frame_code = 32,     /* PyObject_VAR_HEAD (24), f_back, f_code */
			.frame_previous = 24, /* f_back */
			.frame_instr = 104,   /* int f_lasti, after f_gen */
			.frame_entry = PY_OFF_NONE,
			.code_adaptive = PY_OFF_NONE,
			.entry_kind = PY_ENTRY_PER_FRAME,
			.instr_kind = PY_INSTR_LASTI_BYTES,
		},
		.code_filename = 104,
		.code_name = 112,
		.code_qualname = PY_OFF_NONE,
		.code_firstlineno = 40,
		.code_linetable = 120, /* co_lnotab */
		.linetable_kind = AGENT_PY_LNOTAB,
		.unicode_ascii_size = 48,
		.unicode_compact_size = 72,
	},
	{
		/* 3.9: the 3.8 layouts (the runtime's _finalizing became an atomic address of the same size). */
		.version = AGENT_PY_VERSION(3, 9),
		.bpf = {
			.runtime_interp_head = 32,
			.interp_threads_head = 8,
			.tstate_next = 8,
			.tstate_thread_id = 176,
			.tstate_frame = 24,
			.cframe_current = PY_OFF_NONE,
			.frame_code = 32,
			.frame_previous = 24,
			.frame_instr = 104,
			.frame_entry = PY_OFF_NONE,
			.code_adaptive = PY_OFF_NONE,
			.entry_kind = PY_ENTRY_PER_FRAME,
			.instr_kind = PY_INSTR_LASTI_BYTES,
		},
		.code_filename = 104,
		.code_name = 112,
		.code_qualname = PY_OFF_NONE,
		.code_firstlineno = 40,
		.code_linetable = 120,
		.linetable_kind = AGENT_PY_LNOTAB,
		.unicode_ascii_size = 48,
		.unicode_compact_size = 72,
	},
	{
		.version = AGENT_PY_VERSION(3, 10),
		.bpf = {
			.runtime_interp_head = 32,
			.interp_threads_head = 8,
			.tstate_next = 8,
			/* frame 24, recursion_depth, recursion_headroom, stackcheck_counter, tracing, CFrame *cframe 48, ... as 3.9 after */
			.tstate_thread_id = 176,
			.tstate_frame = 24,
			.cframe_current = PY_OFF_NONE,
			.frame_code = 32,
			.frame_previous = 24,
			/* f_valuestack 64, f_trace 72, int f_stackdepth 80, 2 chars, f_gen 88, f_lasti 96 */
			.frame_instr = 96,
			.frame_entry = PY_OFF_NONE,
			.code_adaptive = PY_OFF_NONE,
			.entry_kind = PY_ENTRY_PER_FRAME,
			.instr_kind = PY_INSTR_LASTI_UNITS,
		},
		.code_filename = 104,
		.code_name = 112,
		.code_qualname = PY_OFF_NONE,
		.code_firstlineno = 40,
		.code_linetable = 120, /* co_linetable took co_lnotab's place */
		.linetable_kind = AGENT_PY_LINETABLE310,
		.unicode_ascii_size = 48,
		.unicode_compact_size = 72,
	},
	{
		.version = AGENT_PY_VERSION(3, 11),
		.bpf = {
			/* int _initialized..initialized (5), _finalizing 24, interpreters {mutex 32, head 40} */
			.runtime_interp_head = 40,
			.interp_threads_head = 16, /* next, threads {next_unique_id, head} */
			.tstate_next = 8,
			.tstate_thread_id = 152,
			.tstate_frame = 56,   /* _PyCFrame *cframe */
			.cframe_current = 8,  /* _PyCFrame { use_tracing (int), current_frame } */
			.frame_code = 32,     /* f_func, f_globals, f_builtins, f_locals, f_code */
			.frame_previous = 48, /* frame_obj 40, previous 48 */
			.frame_instr = 56,    /* _Py_CODEUNIT *prev_instr */
			.frame_entry = 68,    /* int stacktop 64, bool is_entry 68, char owner 69 */
			.code_adaptive = 184,
			.entry_kind = PY_ENTRY_IS_ENTRY,
			.instr_kind = PY_INSTR_PTR,
		},
		.code_filename = 112,
		.code_name = 120,
		.code_qualname = 128,
		.code_firstlineno = 72,
		.code_linetable = 136,
		.linetable_kind = AGENT_PY_LOCATIONS,
		.unicode_ascii_size = 48,
		.unicode_compact_size = 72,
	},
	{
		.version = AGENT_PY_VERSION(3, 12),
		.bpf = {
			.runtime_interp_head = 40,
			/* next, id, id_refcount, requires_idref, id_mutex, _initialized, finalizing,
			 * monitoring_version 48, last_restart_version 56, threads {next_unique_id 64, head 72} */
			.interp_threads_head = 72,
			.tstate_next = 8,
			/* current_exception replaced curexc_type/value/traceback: 16 bytes less than 3.11 */
			.tstate_thread_id = 136,
			.tstate_frame = 56,
			.cframe_current = 0, /* _PyCFrame { current_frame, previous } */
			.frame_code = 0,     /* f_code, previous, f_funcobj, f_globals, f_builtins, f_locals, frame_obj */
			.frame_previous = 8,
			.frame_instr = 56, /* prev_instr */
			.frame_entry = 70, /* stacktop 64, uint16_t return_offset 68, char owner 70 */
			.code_adaptive = 192,
			.entry_kind = PY_ENTRY_SHIM,
			.instr_kind = PY_INSTR_PTR,
		},
		.code_filename = 112,
		.code_name = 120,
		.code_qualname = 128,
		.code_firstlineno = 68,
		.code_linetable = 136,
		.linetable_kind = AGENT_PY_LOCATIONS,
		.unicode_ascii_size = 40, /* wstr is gone */
		.unicode_compact_size = 56,
	},
	{
		/* 3.13 (the default build; the free-threaded one, python3.13t, is refused by name) */
		.version = AGENT_PY_VERSION(3, 13),
		.bpf = {
			/* _Py_DebugOffsets debug_offsets comes first now: interpreters.head at 632 */
			.runtime_interp_head = 632,
			/* struct _ceval_state ceval (with its pending calls) comes first: threads.head at 7344 */
			.interp_threads_head = 7344,
			.tstate_next = 8,
			.tstate_thread_id = 152,
			.tstate_frame = 72, /* _PyInterpreterFrame *current_frame: _PyCFrame is gone */
			.cframe_current = PY_OFF_NONE,
			.frame_code = 0, /* f_executable: the code object for Python frames */
			.frame_previous = 8,
			.frame_instr = 56, /* instr_ptr */
			.frame_entry = 70, /* owner */
			.code_adaptive = 200, /* co_executors 152 moved the rest down by 8 */
			.entry_kind = PY_ENTRY_SHIM,
			.instr_kind = PY_INSTR_PTR,
		},
		.code_filename = 112,
		.code_name = 120,
		.code_qualname = 128,
		.code_firstlineno = 68,
		.code_linetable = 136,
		.linetable_kind = AGENT_PY_LOCATIONS,
		.unicode_ascii_size = 40,
		.unicode_compact_size = 56,
	},
};

const struct agent_py_layout *agent_py_layout(uint16_t version)
{
	for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++)
		if (layouts[i].version == version)
			return &layouts[i];
	return NULL;
}

static uint64_t le64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* A pointer field at off, if the buffer holds it. */
static int field64(const uint8_t *buf, size_t len, uint16_t off, uint64_t *ret)
{
	if (off == PY_OFF_NONE || (size_t)off + 8 > len)
		return -EINVAL;
	*ret = le64(buf + off);
	return 0;
}

int agent_py_code_parse(const struct agent_py_layout *l, const uint8_t *buf, size_t len, struct agent_py_code *ret)
{
	uint16_t name = l->code_qualname != PY_OFF_NONE ? l->code_qualname : l->code_name;

	memset(ret, 0, sizeof(*ret));
	if (len < 16 || (size_t)l->code_firstlineno + 4 > len)
		return -EINVAL;
	ret->type = le64(buf + 8);
	ret->firstlineno = (int32_t)le32(buf + l->code_firstlineno);
	if (field64(buf, len, l->code_filename, &ret->filename) < 0 || field64(buf, len, name, &ret->name) < 0 ||
	    field64(buf, len, l->code_linetable, &ret->linetable) < 0)
		return -EINVAL;
	return 0;
}

int agent_py_str_header(const struct agent_py_layout *l, uint64_t addr, const uint8_t *buf, size_t len,
			struct agent_py_str *ret)
{
	uint32_t state;
	uint8_t kind;

	memset(ret, 0, sizeof(*ret));
	if (len < 36)
		return -EINVAL;
	ret->length = le64(buf + 16);
	state = le32(buf + 32);
	kind = (state >> 2) & 7;
	/* PyUnicode_1BYTE_KIND .. 4BYTE_KIND; compact, so the characters follow the header. */
	if (!((state >> 5) & 1) || (kind != 1 && kind != 2 && kind != 4) || (ret->length >> 40))
		return -EINVAL;
	ret->kind = kind;
	ret->ascii = (state >> 6) & 1;
	if (ret->ascii && kind != 1)
		return -EINVAL;
	ret->data = addr + (ret->ascii ? l->unicode_ascii_size : l->unicode_compact_size);
	return 0;
}

static size_t put_utf8(uint32_t c, char *out)
{
	if ((c >= 0xd800 && c <= 0xdfff) || c > 0x10ffff)
		c = 0xfffd;
	if (c < 0x80) {
		out[0] = (char)c;
		return 1;
	}
	if (c < 0x800) {
		out[0] = (char)(0xc0 | c >> 6);
		out[1] = (char)(0x80 | (c & 0x3f));
		return 2;
	}
	if (c < 0x10000) {
		out[0] = (char)(0xe0 | c >> 12);
		out[1] = (char)(0x80 | ((c >> 6) & 0x3f));
		out[2] = (char)(0x80 | (c & 0x3f));
		return 3;
	}
	out[0] = (char)(0xf0 | c >> 18);
	out[1] = (char)(0x80 | ((c >> 12) & 0x3f));
	out[2] = (char)(0x80 | ((c >> 6) & 0x3f));
	out[3] = (char)(0x80 | (c & 0x3f));
	return 4;
}

size_t agent_py_str_utf8(const uint8_t *chars, size_t n, uint8_t kind, char *out, size_t cap)
{
	size_t w = 0;
	char tmp[4];

	if (cap == 0)
		return 0;
	for (size_t i = 0; i < n; i++) {
		uint32_t c;
		size_t k;

		if (kind == 1)
			c = chars[i];
		else if (kind == 2)
			c = (uint32_t)chars[2 * i] | (uint32_t)chars[2 * i + 1] << 8;
		else
			c = le32(chars + 4 * i);
		k = put_utf8(c, tmp);
		if (w + k + 1 > cap)
			break;
		memcpy(out + w, tmp, k);
		w += k;
	}
	out[w] = '\0';
	return w;
}

int agent_py_bytes_header(uint64_t addr, const uint8_t *buf, size_t len, uint64_t *ret_data, uint64_t *ret_size)
{
	int64_t size;

	if (len < 24)
		return -EINVAL;
	size = (int64_t)le64(buf + 16);
	if (size < 0)
		return -EINVAL;
	*ret_data = addr + AGENT_PY_BYTES_HEAD;
	*ret_size = (uint64_t)size;
	return 0;
}

/* 3.8, 3.9 (Objects/lnotab_notes.txt): byte offsets; the line of the last entry at or before offset. */
static int32_t line_lnotab(int32_t line, const uint8_t *t, size_t len, uint32_t offset)
{
	uint64_t addr = 0;

	for (size_t i = 0; i + 1 < len; i += 2) {
		addr += t[i];
		if (addr > offset)
			break;
		line += (int8_t)t[i + 1];
	}
	return line;
}

/* 3.10 (Objects/lnotab_notes.txt): (bytes, line delta) ranges; a delta of -128 is a range without a line. */
static int32_t line_310(int32_t line, const uint8_t *t, size_t len, uint32_t offset)
{
	uint64_t end = 0, target = (uint64_t)offset * 2;

	for (size_t i = 0; i + 1 < len; i += 2) {
		uint64_t start = end;
		int8_t ld = (int8_t)t[i + 1];

		end = start + t[i];
		if (ld != -128)
			line += ld;
		if (target >= start && target < end)
			return ld == -128 ? 0 : line;
	}
	return 0;
}

/* One varint of the location table: 6 bits a byte, bit 6 says more follow. -1 when it runs off the table. */
static int varint(const uint8_t *t, size_t len, size_t *pos, uint32_t *ret)
{
	uint32_t v = 0;
	unsigned shift = 0;
	uint8_t b;

	do {
		if (*pos >= len || shift > 28)
			return -EINVAL;
		b = t[(*pos)++];
		v |= (uint32_t)(b & 63) << shift;
		shift += 6;
	} while (b & 64);
	*ret = v;
	return 0;
}

static int svarint(const uint8_t *t, size_t len, size_t *pos, int32_t *ret)
{
	uint32_t v;

	if (varint(t, len, pos, &v) < 0)
		return -EINVAL;
	*ret = (v & 1) ? -(int32_t)(v >> 1) : (int32_t)(v >> 1);
	return 0;
}

/*
 * 3.11+ (Objects/locations.md): entries of 1-8 code units; the first byte
 * has bit 7 set, the entry's kind in bits 3-6 and its length - 1 in bits
 * 0-2. Kind 15: no location; 14: long form (signed line delta, then end
 * line, column and end column as varints); 13: line delta only; 10-12: one
 * line, delta kind - 10, two column bytes; 0-9: same line, one column byte.
 */
static int32_t line_locations(int32_t line, const uint8_t *t, size_t len, uint32_t offset)
{
	uint64_t addr = 0;
	size_t pos = 0;

	while (pos < len) {
		uint8_t b = t[pos++];
		unsigned code = (b >> 3) & 15, length = (b & 7) + 1;
		int32_t delta = 0;
		uint32_t skip;
		bool none = false;

		if (!(b & 0x80))
			return 0;
		switch (code) {
		case 15:
			none = true;
			break;
		case 14:
			if (svarint(t, len, &pos, &delta) < 0 || varint(t, len, &pos, &skip) < 0 ||
			    varint(t, len, &pos, &skip) < 0 || varint(t, len, &pos, &skip) < 0)
				return 0;
			break;
		case 13:
			if (svarint(t, len, &pos, &delta) < 0)
				return 0;
			break;
		case 10:
		case 11:
		case 12:
			delta = (int32_t)code - 10;
			pos += 2;
			break;
		default:
			pos += 1;
			break;
		}
		if (pos > len)
			return 0;
		line += delta;
		if (offset < addr + length)
			return none ? 0 : line;
		addr += length;
	}
	return 0;
}

int32_t agent_py_line(uint8_t kind, int32_t firstlineno, const uint8_t *table, size_t len, uint32_t offset)
{
	int32_t line;

	switch (kind) {
	case AGENT_PY_LNOTAB:
		line = line_lnotab(firstlineno, table, len, offset);
		break;
	case AGENT_PY_LINETABLE310:
		line = line_310(firstlineno, table, len, offset);
		break;
	case AGENT_PY_LOCATIONS:
		line = line_locations(firstlineno, table, len, offset);
		break;
	default:
		return 0;
	}
	return line > 0 ? line : 0;
}
