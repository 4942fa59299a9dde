/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Naming a HotSpot Method*: the pure decoders (class names, the compressed
 * line number table) and the reads that go with them. A Java frame's name
 * is "package.Class.method" — the class's binary name with dots, nested
 * classes keeping their '$' (java.util.HashMap$Node.find), no signature —
 * the form JFR prints and Java profilers show; its file is the class's
 * SourceFile attribute (Hot.java), its line comes from the bytecode index.
 *
 * Everything read from the JVM is untrusted: names are cut at
 * AGENT_JVM_MAX_SYMBOL bytes and made valid UTF-8, the line table is read
 * up to AGENT_JVM_MAX_LINETABLE bytes.
 */
#ifndef SR_AGENT_JVM_METHOD_H
#define SR_AGENT_JVM_METHOD_H

#include <stddef.h>
#include <stdint.h>

#include "jvm-structs.h"

/* Longest class, method or file name kept (longer ones are cut). */
#define AGENT_JVM_MAX_SYMBOL 256
/* Largest compressed line number table read; a longer one gives line 0 past its first bytes. */
#define AGENT_JVM_MAX_LINETABLE (16u * 1024)

/*
 * A class's internal name (java/lang/String, as its Klass's Symbol holds it)
 * as "java.lang.String" in out (cap bytes, at least 2), NUL-terminated,
 * valid UTF-8. Returns the bytes written.
 */
size_t agent_jvm_class_name(const uint8_t *sym, size_t len, char *out, size_t cap);

/*
 * The source line of bytecode index bci from a method's compressed line
 * number table (HotSpot's CompressedLineNumberReadStream: a byte
 * (bci delta << 3 | line delta), or 0xff and two signed UNSIGNED5 numbers,
 * up to a 0 byte): the line of the last entry at or before bci, 0 when
 * there is none or the table is malformed.
 */
int32_t agent_jvm_line(const uint8_t *table, size_t len, uint32_t bci);

/* A Method*, named. */
struct agent_jvm_method {
	char klass[AGENT_JVM_MAX_SYMBOL + 4];
	char name[AGENT_JVM_MAX_SYMBOL + 4];
	char file[AGENT_JVM_MAX_SYMBOL + 4]; /* "" when the class has no SourceFile */
	/* What the name was read from: the same Method* with other values is another method. */
	uint64_t const_method;
	uint64_t holder;
	uint64_t name_symbol;
	uint64_t line_table; /* its address, 0 when the method has none */
	uint16_t code_size;
};

/*
 * Reads the names of the Method* at method through r (the JVM's memory,
 * with the layout of its build). 0, -EINVAL when what is there does not
 * look like a method (an index outside its constant pool, a name that is
 * not text), or the reader's error.
 */
int agent_jvm_method_read(const struct agent_jvm_reader *r, const struct agent_jvm_layout *l, uint64_t method,
			  struct agent_jvm_method *ret);

/*
 * What a Method* points to now: its ConstMethod, holder class and name
 * Symbol (the fields of struct agent_jvm_method that say which method it
 * is). 0, -EINVAL, or the reader's error.
 */
int agent_jvm_method_ids(const struct agent_jvm_reader *r, const struct agent_jvm_layout *l, uint64_t method,
			 uint64_t *ret_const_method, uint64_t *ret_holder, uint64_t *ret_name_symbol);

/*
 * The line of bci in a method read by agent_jvm_method_read(): reads its
 * line number table (a page at a time, up to AGENT_JVM_MAX_LINETABLE).
 * The line, or 0 when unknown.
 */
int32_t agent_jvm_method_line(const struct agent_jvm_reader *r, const struct agent_jvm_method *m, uint32_t bci);
/* The same from the table's address and the method's code size (struct agent_jvm_method's line_table, code_size). */
int32_t agent_jvm_line_at(const struct agent_jvm_reader *r, uint64_t line_table, uint16_t code_size, uint32_t bci);

/* Inlined scopes followed at most from one pc (C2's MaxInlineLevel is 15). */
#define AGENT_JVM_MAX_SCOPES 32
/* PcDescs searched at most in one nmethod (a large C2 method has a few thousand). */
#define AGENT_JVM_MAX_PCDESCS 65536

/* One scope of a compiled frame: which method (an index into the nmethod's metadata, 1-based) and where in it. */
struct agent_jvm_scope {
	uint32_t method_index; /* 0: none */
	int32_t bci;	       /* -1: the method's entry (InvocationEntryBci) */
	uint32_t sender;       /* the decode offset of the scope this one is inlined into, 0 for the outermost */
};

/*
 * Decodes the scope at decode_offset of an nmethod's scopes data (len
 * bytes): its sender's offset, metadata index and bci, three UNSIGNED5
 * numbers (ScopeDesc::decode_body). 0 or -EINVAL.
 */
int agent_jvm_scope_decode(const uint8_t *data, size_t len, uint32_t decode_offset, struct agent_jvm_scope *ret);

/* A frame of a compiled method: its Method* and bci, innermost first. */
struct agent_jvm_frame {
	uint64_t method;
	int32_t bci;
};

/*
 * The Java frames of pc in the nmethod at nmethod (inlined ones first, the
 * nmethod's own method last), up to max: the scopes of the first PcDesc at
 * or after pc (the debug information a sampled pc reaches next; a return
 * address has its own). Returns how many, -ENOENT when the nmethod has no
 * PcDesc there, -EINVAL when its PcDescs or scopes make no sense, or the
 * reader's error.
 */
int agent_jvm_nmethod_frames(const struct agent_jvm_reader *r, const struct agent_jvm_layout *l, uint64_t nmethod,
			     uint64_t pc, struct agent_jvm_frame *ret, int max);

#endif
