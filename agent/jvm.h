/* SPDX-License-Identifier: Apache-2.0 */
/*
 * HotSpot JVMs: recognising libjvm.so (its gHotSpotVM* exports) and reading
 * a running JVM's layout tables (agent/jvm-structs.h) from its memory with
 * process_vm_readv.
 */
#ifndef SR_AGENT_JVM_H
#define SR_AGENT_JVM_H

#include <stdint.h>

#include "jvm-method.h"
#include "jvm-structs.h"

/*
 * The ELF virtual addresses of the enum agent_jvm_sym symbols in the open
 * file fd (.dynsym). 0, -ENOENT when one is missing (not a libjvm.so the
 * agent understands), -EINVAL for a file that is not ELF.
 */
int agent_jvm_file_syms(int fd, uint64_t ret_vaddr[AGENT_JVM_N_SYMS]);

/*
 * Reads the tables of the JVM in process pid whose libjvm.so is loaded at
 * bias (run-time address minus ELF virtual address). NULL + errno as
 * agent_jvm_tables_read(): EAGAIN while the JVM is starting.
 */
struct agent_jvm_tables *agent_jvm_tables_of(uint32_t pid, uint64_t bias, const uint64_t vaddr[AGENT_JVM_N_SYMS]);

/* libjvm builds whose layout is kept (by build ID; a JDK upgrade adds one). */
#define AGENT_JVM_MAX_BUILDS 64
/*
 * Named Method*s kept (all JVMs together; agent/proc-cache.h: the least
 * recently used is evicted, a retired process's go with it).
 * An entry is 112 bytes, its names ~70 for a java.* method, with malloc's
 * overhead and its hash slot about 230 bytes: 32768 entries take about
 * 7.5 MiB. Only methods that samples meet are named.
 */
#define AGENT_JVM_DEFAULT_MAX_METHODS 32768

struct agent_jvm_stats {
	uint64_t processes;	     /* JVMs whose layout is known */
	uint64_t not_understood;     /* JVMs whose tables lack something the agent needs: unwound as native */
	uint64_t starting;	     /* attempts while a JVM had not filled in its tables yet */
	uint64_t builds;	     /* libjvm builds read */
	uint64_t methods_cached;     /* Method*s named in the cache now */
	uint64_t methods_bytes;	     /* heap they hold, with the cache's tables */
	uint64_t method_reads;	     /* Method*s read from JVMs */
	uint64_t method_read_errors; /* ... that could not be read or were not methods */
	uint64_t evicted;	     /* least recently used methods dropped for new ones */
};

/* A Java frame, named. The strings live in the agent_jvm cache until its next call. */
struct agent_jvm_named {
	const char *klass; /* java.lang.String */
	const char *name;  /* indexOf */
	const char *file;  /* String.java, "" when unknown */
	int32_t line;	   /* 0: unknown */
};

struct agent_jvm;

/* max_methods: 0 for AGENT_JVM_DEFAULT_MAX_METHODS. NULL + errno. */
struct agent_jvm *agent_jvm_new(uint64_t max_methods);
void agent_jvm_free(struct agent_jvm *j);

/*
 * A JVM process (key: pid + start time, as agent_proc.key) whose libjvm.so
 * is open at fd and loaded at bias: reads the build's layout the first time
 * a build is seen (by build ID), then keeps the layout relocated for the
 * process. 0; -EAGAIN while the JVM is starting (call again later);
 * -ENOTSUP when the tables are not understood (remembered for the build,
 * counted once per process); -ENOENT when the file is not a libjvm.so;
 * -errno.
 */
int agent_jvm__add(struct agent_jvm *j, const uint8_t key[12], uint32_t pid, int fd, uint64_t bias);
/* The process's layout (static addresses relocated for it), or NULL when it is not a known JVM. */
const struct agent_jvm_layout *agent_jvm__layout(const struct agent_jvm *j, const uint8_t key[12]);
/* The process is gone: its layout and named methods are released. */
void agent_jvm__forget(struct agent_jvm *j, const uint8_t key[12]);
/*
 * Names the Method* at method of the process, with the line of bci (-1 or
 * out of range: 0). Cached by (process, Method*), and the cached entry is
 * checked on every use against what the Method* points to now (its
 * ConstMethod, holder class and name Symbol), so a method freed with its
 * class and another allocated at its address is never named after the old
 * one. 0, -ENOENT (not a known JVM, or not a method there now), -errno.
 */
int agent_jvm__method(struct agent_jvm *j, const uint8_t key[12], uint64_t method, int32_t bci,
		      struct agent_jvm_named *ret);
void agent_jvm__stats(const struct agent_jvm *j, struct agent_jvm_stats *ret);

#endif
