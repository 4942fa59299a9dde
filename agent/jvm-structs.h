/* SPDX-License-Identifier: Apache-2.0 */
/*
 * HotSpot's own description of its memory layout: the four tables libjvm.so
 * exports for the serviceability agent (gHotSpotVMStructs: field offsets and
 * static addresses; gHotSpotVMTypes: type sizes; gHotSpotVMIntConstants and
 * gHotSpotVMLongConstants), read from a JVM process's memory and decoded.
 * The layout of a table entry is itself exported (gHotSpotVMStructEntry*Offset,
 * ...ArrayStride), so nothing here assumes a JDK version.
 *
 * Every byte comes from another process and is untrusted: reads go through a
 * caller's bounded reader, each table has at most AGENT_JVM_MAX_ENTRIES
 * entries, each name at most AGENT_JVM_MAX_NAME bytes. No I/O here: the
 * caller reads (agent/jvm.c with process_vm_readv; tests/fuzz/fuzz-jvm-structs.c
 * from a buffer).
 */
#ifndef SR_AGENT_JVM_STRUCTS_H
#define SR_AGENT_JVM_STRUCTS_H

#include <stddef.h>
#include <stdint.h>

/* Entries read from one table at most (OpenJDK 17 has about 2,700 structs, 1,200 types). */
#define AGENT_JVM_MAX_ENTRIES 16384
/* Longest type, field or constant name read; a longer one makes the table malformed. */
#define AGENT_JVM_MAX_NAME 128
/* Largest entry stride accepted (17's struct entry is 48 bytes). */
#define AGENT_JVM_MAX_STRIDE 256

/* The exported symbols the tables are found by, in the order agent_jvm_tables_read() takes their addresses. */
enum agent_jvm_sym {
	AGENT_JVM_SYM_STRUCTS,
	AGENT_JVM_SYM_STRUCT_TYPE_NAME,
	AGENT_JVM_SYM_STRUCT_FIELD_NAME,
	AGENT_JVM_SYM_STRUCT_TYPE_STRING,
	AGENT_JVM_SYM_STRUCT_IS_STATIC,
	AGENT_JVM_SYM_STRUCT_OFFSET,
	AGENT_JVM_SYM_STRUCT_ADDRESS,
	AGENT_JVM_SYM_STRUCT_STRIDE,
	AGENT_JVM_SYM_TYPES,
	AGENT_JVM_SYM_TYPE_TYPE_NAME,
	AGENT_JVM_SYM_TYPE_SIZE,
	AGENT_JVM_SYM_TYPE_STRIDE,
	AGENT_JVM_SYM_INTS,
	AGENT_JVM_SYM_INT_NAME,
	AGENT_JVM_SYM_INT_VALUE,
	AGENT_JVM_SYM_INT_STRIDE,
	AGENT_JVM_SYM_LONGS,
	AGENT_JVM_SYM_LONG_NAME,
	AGENT_JVM_SYM_LONG_VALUE,
	AGENT_JVM_SYM_LONG_STRIDE,
	AGENT_JVM_N_SYMS,
};

/* The symbol's name (gHotSpotVMStructs, ...), NULL past the end. */
const char *agent_jvm_sym_name(unsigned sym);

/* Reads exactly len bytes at addr of the JVM's memory: 0 or -errno. */
struct agent_jvm_reader {
	int (*read)(void *ctx, uint64_t addr, void *buf, size_t len);
	void *ctx;
};

struct agent_jvm_tables;

/*
 * Reads and decodes the four tables; syms holds the run-time address of each
 * enum agent_jvm_sym symbol. NULL + errno: EAGAIN when the JVM has not
 * filled them in yet (it does early in its start-up), EINVAL when they are
 * malformed (a stride too small or too big, too many entries, a name too long
 * or not text), EFAULT or another reader error when memory cannot be read,
 * ENOMEM.
 */
struct agent_jvm_tables *agent_jvm_tables_read(const struct agent_jvm_reader *r, const uint64_t syms[AGENT_JVM_N_SYMS]);
void agent_jvm_tables_free(struct agent_jvm_tables *t);

/* A field's offset in its type (for a static field: its address). 0 or -ENOENT. */
int agent_jvm_tables__field(const struct agent_jvm_tables *t, const char *type, const char *field, uint64_t *ret);
/* Whether the field exists and is static (1), exists and is not (0), or -ENOENT. */
int agent_jvm_tables__is_static(const struct agent_jvm_tables *t, const char *type, const char *field);
/* sizeof(type). 0 or -ENOENT. */
int agent_jvm_tables__size(const struct agent_jvm_tables *t, const char *type, uint64_t *ret);
/* An int constant (sign-extended) or a long constant. 0 or -ENOENT. */
int agent_jvm_tables__int(const struct agent_jvm_tables *t, const char *name, int64_t *ret);
int agent_jvm_tables__long(const struct agent_jvm_tables *t, const char *name, uint64_t *ret);
/* Entries decoded: structs, types, int and long constants. */
void agent_jvm_tables__counts(const struct agent_jvm_tables *t, size_t ret[4]);

/*
 * What the unwinder and the namer need of one JVM build. Offsets are in
 * bytes from the start of the object named; *_addr are static addresses in
 * the process (relocated: they hold for the process the tables were read
 * from, not for another process of the same build).
 */
struct agent_jvm_layout {
	/* CodeCache and its heaps */
	uint64_t codecache_heaps_addr; /* CodeCache::_heaps: the address of a GrowableArray<CodeHeap*>* */
	uint64_t codecache_low_addr;   /* CodeCache::_low_bound, _high_bound: where the bounds are kept */
	uint64_t codecache_high_addr;
	uint16_t growable_array_len;  /* GrowableArrayBase::_len (GenericGrowableArray before 17) */
	uint16_t growable_array_data; /* GrowableArray<int>::_data */
	uint16_t codeheap_memory;     /* CodeHeap::_memory, a VirtualSpace */
	uint16_t codeheap_segmap;     /* CodeHeap::_segmap, a VirtualSpace of one byte per segment */
	uint16_t codeheap_log2_segment_size;
	uint16_t vspace_low; /* VirtualSpace::_low, _high */
	uint16_t vspace_high;
	uint16_t heapblock_size;   /* sizeof(HeapBlock): a blob starts this far after its segment */
	uint16_t heapblock_length; /* HeapBlock::Header::_length (segments), _used */
	uint16_t heapblock_used;
	/* CodeBlob, CompiledMethod, nmethod */
	uint16_t codeblob_name; /* a char*: "Interpreter", "nmethod", a stub's name */
	uint16_t codeblob_size;
	uint16_t codeblob_frame_size; /* in words */
	uint16_t codeblob_code_begin;
	uint16_t codeblob_code_end;
	uint16_t nmethod_method;      /* CompiledMethod::_method (nmethod::_method where there is no CompiledMethod) */
	uint16_t nmethod_scopes_data; /* CompiledMethod::_scopes_data_begin, an address */
	uint16_t nmethod_compile_id;
	uint16_t nmethod_metadata_offset;     /* from the nmethod's start: the Method*s of inlined scopes */
	uint16_t nmethod_scopes_pcs_offset;   /* the PcDescs */
	uint16_t nmethod_dependencies_offset; /* where the PcDescs end */
	uint16_t nmethod_orig_pc_offset;
	uint16_t pcdesc_pc_offset; /* PcDesc::_pc_offset, _scope_decode_offset */
	uint16_t pcdesc_scope_decode_offset;
	uint16_t pcdesc_size;
	/* Method, ConstMethod, ConstantPool, Klass, Symbol */
	uint16_t method_constmethod;
	uint16_t constmethod_constants;
	uint16_t constmethod_flags; /* a u2 of _has_* bits */
	uint16_t constmethod_code_size;
	uint16_t constmethod_name_index;
	uint16_t constmethod_signature_index;
	uint16_t constmethod_size;		   /* sizeof(ConstMethod): the bytecodes follow it */
	uint16_t constmethod_has_linenumber_table; /* the flag's bit */
	uint16_t constantpool_pool_holder;
	uint16_t constantpool_source_file_name_index;
	uint16_t constantpool_length; /* an int: the slots */
	uint16_t constantpool_size;   /* sizeof(ConstantPool): the slots follow it */
	uint16_t klass_name;
	uint16_t symbol_length;
	uint16_t symbol_body;
	/* An interpreted frame, in words from its fp (x86-64's frame layout, anchored on the table's constants) */
	int16_t interp_frame_sender_sp;
	int16_t interp_frame_method;
	int16_t interp_frame_bcp;
	/* A thread's last Java frame while it runs native code */
	uint16_t javathread_anchor;
	uint16_t anchor_last_java_sp;
	uint16_t anchor_last_java_pc;
	uint16_t anchor_last_java_fp;
};

/*
 * Picks the layout out of the tables. 0, or -ENOTSUP with *ret_missing
 * naming the first entry that is missing or does not fit ("nmethod::_method").
 */
int agent_jvm_layout_from(const struct agent_jvm_tables *t, struct agent_jvm_layout *ret, const char **ret_missing);

#endif
