/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CPython's memory layout, per version, and the pure decoders the agent
 * runs over bytes read from a Python process: a code object's fields, a
 * str or bytes object, and a code object's line table (3.8-3.9 co_lnotab,
 * 3.10 co_linetable, 3.11+ the location table). No I/O here: agent/python.c
 * reads the bytes; tests/unit/test-agent-pycode.c and
 * tests/fuzz/fuzz-pycode.c feed them directly.
 */
#ifndef SR_AGENT_PYCODE_H
#define SR_AGENT_PYCODE_H

#include <stddef.h>
#include <stdint.h>

#include <linux/types.h>

#include "pyframe.h"

/* PY_VERSION_HEX's top half: 0x030b for 3.11. */
#define AGENT_PY_VERSION(major, minor) ((uint16_t)((major) << 8 | (minor)))

/* Longest qualified name or file name kept (longer ones are cut, with "..." appended). */
#define AGENT_PY_MAX_NAME 256
/* Largest line table read from a code object; a bigger one gives line 0 (its function's first line is kept). */
#define AGENT_PY_MAX_LINETABLE (64u * 1024)

enum agent_py_linetable_kind {
	AGENT_PY_LNOTAB = 1,   /* 3.8, 3.9: co_lnotab, (bytecode delta, line delta) byte pairs */
	AGENT_PY_LINETABLE310, /* 3.10: co_linetable, (bytecode delta, line delta) pairs, -128 = no line */
	AGENT_PY_LOCATIONS,    /* 3.11+: co_linetable, the location table (Objects/locations.md) */
};

/*
 * Everything the agent and the BPF walker need of one CPython version. The
 * BPF half is struct py_proc_offsets (bpf/pyframe.h); this adds what only
 * the agent reads (the code object, strings).
 */
struct agent_py_layout {
	uint16_t version;
	struct py_proc_offsets bpf;
	/* PyCodeObject */
	uint16_t code_filename;
	uint16_t code_name;
	uint16_t code_qualname; /* PY_OFF_NONE before 3.11: co_name is used */
	uint16_t code_firstlineno;
	uint16_t code_linetable; /* co_lnotab (3.8, 3.9) or co_linetable */
	uint8_t linetable_kind;	 /* enum agent_py_linetable_kind */
	/* sizeof(PyASCIIObject) and sizeof(PyCompactUnicodeObject): where a compact str's characters start */
	uint16_t unicode_ascii_size;
	uint16_t unicode_compact_size;
};

/* The layout of version (AGENT_PY_VERSION), or NULL when it is not supported. */
const struct agent_py_layout *agent_py_layout(uint16_t version);

/* The bytes agent_py_code_parse() needs from the start of a code object. */
#define AGENT_PY_CODE_HEAD 208

struct agent_py_code {
	uint64_t type;	    /* ob_type: must be PyCode_Type's address */
	uint64_t filename;  /* a str object's address */
	uint64_t name;	    /* co_qualname from 3.11, else co_name */
	uint64_t linetable; /* a bytes object's address */
	int32_t firstlineno;
};

/* Decodes a code object's head (len bytes from its start). 0, or -EINVAL when len is too short for the layout. */
int agent_py_code_parse(const struct agent_py_layout *l, const uint8_t *buf, size_t len, struct agent_py_code *ret);

/* The bytes agent_py_str_header() needs from a str object's start. */
#define AGENT_PY_STR_HEAD 80

struct agent_py_str {
	uint64_t data;	 /* where the characters are (an address in the process) */
	uint64_t length; /* in characters */
	uint8_t kind;	 /* bytes per character: 1, 2 or 4 */
	uint8_t ascii;
};

/*
 * Decodes a str object's header (at address addr; buf holds its first len
 * bytes). Only compact strs (all that code objects hold) are accepted.
 * 0, or -EINVAL naming nothing more: not a compact str, or a kind that is not 1, 2 or 4.
 */
int agent_py_str_header(const struct agent_py_layout *l, uint64_t addr, const uint8_t *buf, size_t len,
			struct agent_py_str *ret);

/*
 * Turns a str's characters (kind bytes each, n characters) into UTF-8 in
 * out (cap bytes, at least 4), NUL-terminated; cut at a character boundary
 * when it does not fit. Surrogates and invalid code points become U+FFFD.
 * Returns the bytes written (without the NUL).
 */
size_t agent_py_str_utf8(const uint8_t *chars, size_t n, uint8_t kind, char *out, size_t cap);

/* A bytes object: its ob_size (at 16) and where its bytes are (at 32); -EINVAL for a negative size. */
#define AGENT_PY_BYTES_HEAD 32
int agent_py_bytes_header(uint64_t addr, const uint8_t *buf, size_t len, uint64_t *ret_data, uint64_t *ret_size);

/*
 * The source line of the instruction at offset (in code units of 2 bytes
 * from 3.10, bytes before: as the BPF walker records it) in a code object
 * whose first line is firstlineno and whose line table is table. Returns
 * the line, or 0 when the table has no line for it (or is malformed).
 */
int32_t agent_py_line(uint8_t kind, int32_t firstlineno, const uint8_t *table, size_t len, uint32_t offset);

#endif
