/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Java processes (java.enabled): recognises a HotSpot JVM by the libjvm.so
 * among its mappings (its gHotSpotVM* exports, agent/jvm.h), gives the BPF
 * walker the layout of that build and where the process's code heaps are
 * (hotspot_procs, bpf/hotspot.h), and turns the Java frames samples bring
 * back into methods:
 * - an interpreted frame is its Method* and bytecode index;
 * - a compiled frame is its pc: the nmethod that holds it (found through
 *   the code heap's segment map, its compile ID checked against the one
 *   the walker saw) and its debug information at that pc give the methods
 *   inlined there, innermost first, each with its bytecode index.
 * Methods are named by agent_jvm__method(), whose cache checks each entry
 * against the JVM's memory on every use.
 *
 * A JVM's tables are filled in during its start-up: a process found while
 * they are empty is tried again when its samples arrive, at most every
 * AGENT_JAVA_RETRY_NS, up to AGENT_JAVA_MAX_TRIES times.
 *
 * Limits: AGENT_JAVA_MAX_FILES files examined (by dev, inode, mtime, size),
 * max_methods methods named (agent/jvm.h), AGENT_JVM_MAX_SCOPES frames from
 * one pc.
 */
#ifndef SR_AGENT_JAVA_H
#define SR_AGENT_JAVA_H

#include <stdint.h>

#include "jvm-method.h"

struct agent_proc;

#define AGENT_JAVA_MAX_FILES 1024
#define AGENT_JAVA_RETRY_NS  (500ULL * 1000 * 1000)
#define AGENT_JAVA_MAX_TRIES 120
/* Compiled pcs whose frames are kept, and stub pcs whose names are (all JVMs together; the least recently used evicted). */
#define AGENT_JAVA_MAX_PCS   32768
#define AGENT_JAVA_MAX_STUBS 4096

struct agent_java_stats {
	uint64_t processes;	     /* JVMs given to the BPF walker */
	uint64_t not_understood;     /* JVMs whose tables lack what the walk needs: unwound as native */
	uint64_t starting;	     /* tries while a JVM had not filled in its tables yet */
	uint64_t methods_cached;     /* Method*s named in the cache now */
	uint64_t methods_bytes;	     /* heap they hold, with the cache's tables */
	uint64_t method_reads;	     /* Method*s read from JVMs */
	uint64_t method_read_errors; /* ... that could not be read or were not methods */
	uint64_t compiled_stale;     /* compiled frames whose code was freed or replaced before it was read */
	uint64_t evicted;	     /* least recently used methods, pcs and stubs dropped for new ones */
	uint64_t stubs_named;	     /* frames in the JVM's own code (stubs, adapters) named by their blob */
	uint64_t pcs_cached;	     /* compiled pcs whose frames are cached now (AGENT_JAVA_MAX_PCS) */
	uint64_t stubs_cached;	     /* stub pcs whose names are cached now (AGENT_JAVA_MAX_STUBS) */
	uint64_t pcs_bytes;	     /* heap the compiled pcs' frames hold, with the cache's tables */
	uint64_t stubs_bytes;	     /* heap the stub names hold, with the cache's tables */
};

struct agent_java;

/* procs_fd: the hotspot_procs map (< 0: none, as in tests). max_methods: 0 for the default. NULL + errno. */
struct agent_java *agent_java_new(int procs_fd, uint64_t max_methods);
void agent_java_free(struct agent_java *j);

/*
 * Looks for libjvm.so in the process's mappings (files examined once) and,
 * when its tables are understood and filled in, writes its hotspot_procs
 * entry. Call when its mappings changed. 0, -ENOENT (not a JVM), -EAGAIN
 * (starting: tried again from agent_java__retry()), -ENOTSUP (tables not
 * understood), -errno.
 */
int agent_java__sync(struct agent_java *j, const struct agent_proc *proc);
/* A sample of proc arrived at now (CLOCK_MONOTONIC ns): a JVM still starting is tried again, rate-limited. */
void agent_java__retry(struct agent_java *j, const struct agent_proc *proc, uint64_t now);
/* The process is retired. */
void agent_java__forget(struct agent_java *j, const struct agent_proc *proc);

/*
 * The Java frames of a ustack value with HOTSPOT_FRAME_FLAG: up to max, the
 * innermost first (a compiled pc gives its inlined methods, then its own).
 * Returns how many (≥ 1), or -ENOENT when it cannot be resolved (not a
 * known JVM, the code is gone or replaced).
 */
int agent_java__frames(struct agent_java *j, const struct agent_proc *proc, uint64_t value, struct agent_jvm_frame *ret,
		       int max);

/* A Java frame, named. The strings live in the cache until the next call. */
struct agent_java_named {
	const char *name; /* "java.util.HashMap.get": the class's binary name, '.', the method */
	const char *file; /* "HashMap.java", "" when unknown */
	int32_t line;	  /* 0: unknown */
};

/* Names one frame of agent_java__frames(). 0 or -ENOENT. */
int agent_java__name(struct agent_java *j, const struct agent_proc *proc, const struct agent_jvm_frame *f,
		     struct agent_java_named *ret);
/*
 * The name of the JVM code blob that holds addr when it is not Java code
 * (the walker records those as pcs): "StubRoutines (1)", "I2C/C2I
 * adapters", "Interpreter". NULL when addr is not in the process's code
 * heaps or the blob's name cannot be read. Cached per process and address
 * (such blobs live as long as the JVM); the string lasts until the next call.
 */
const char *agent_java__stub(struct agent_java *j, const struct agent_proc *proc, uint64_t addr);
void agent_java__stats(struct agent_java *j, struct agent_java_stats *ret);

#endif
