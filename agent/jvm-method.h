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
 * The line of bci in a method read by agent_jvm_method_read(): reads its
 * line number table (a page at a time, up to AGENT_JVM_MAX_LINETABLE).
 * The line, or 0 when unknown.
 */
int32_t agent_jvm_method_line(const struct agent_jvm_reader *r, const struct agent_jvm_method *m, uint32_t bci);

#endif
