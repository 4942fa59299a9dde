/* SPDX-License-Identifier: Apache-2.0 */
/* Counters of the profiling loop (run.c, run-record.c), exported as metrics. */
#ifndef SR_AGENT_RUN_H
#define SR_AGENT_RUN_H

#include <stdint.h>
#include <stdio.h>

#include "perf-map-cache.h"

/* The main arena's free bytes above which a window's end gives them back (run.c, trim_heap()). */
#define AGENT_HEAP_TRIM_BYTES (8u << 20)

struct agent_run_stats {
	uint64_t samples_received;
	uint64_t samples_aggregated;
	uint64_t off_cpu_ns; /* nanoseconds off CPU aggregated (scaled by 1 / off_cpu.probability) */
	uint64_t samples_exported;
	uint64_t dropped_stack_errors;
	uint64_t dropped_overflow;
	uint64_t frames_unattributed;
	uint64_t v8_unnamed_frames;	     /* V8 frames recorded in BPF that could not be named */
	uint64_t java_unnamed_frames;	     /* Java frames recorded in BPF that could not be named */
	uint64_t java_frames;		     /* Java frames exported (inlined methods are frames of their own) */
	uint64_t jit_frames[AGENT_JIT__MAX]; /* frames in anonymous executable memory, by result */
	uint64_t bad_records;
	uint64_t execs;
	uint64_t exits;
	uint64_t windows;
	uint64_t heap_trims; /* malloc_trim() calls (run.c, trim_heap()) */
};

/* What /metrics shows, taken under the loop's lock (run.c). Pointers may be NULL where noted. */
struct agent_python_stats;
struct agent_nodejs_stats;
struct agent_java_stats;

struct agent_cache_gauge {
	const char *name;
	uint64_t entries;
	uint64_t limit; /* 0: bounded otherwise (docs/agent.md, "Memory") */
	uint64_t bytes; /* memory it holds: the heap's, or the kernel's for unwind_tables */
};

struct agent_run_metrics {
	const uint64_t *bpf;		  /* PROFILE_CNT__MAX */
	const uint64_t *bpf_lost_per_cpu; /* n_cpus, may be NULL */
	int n_cpus;
	const struct agent_run_stats *run;
	const struct agent_procs_stats *procs;
	const struct agent_store_stats *store;
	const struct agent_unwinder_stats *unwinder;	   /* NULL: table unwinding off */
	const struct agent_perf_map_cache_stats *perfmaps; /* NULL: perf_maps.enabled false */
	const struct agent_sender_stats *sender;	   /* NULL: no sender */
	const struct agent_python_stats *python;	   /* NULL: python.enabled off */
	const struct agent_nodejs_stats *nodejs;	   /* NULL: nodejs.enabled off */
	const struct agent_java_stats *java;		   /* NULL: java.enabled off */
	bool privileges_dropped;			   /* false: --keep-privileges */
	/* What each cache that grows with processes, files and code holds now, and its bound. */
	const struct agent_cache_gauge *caches;
	size_t n_caches;
	uint64_t heap_in_use; /* malloc's bytes in use (mallinfo2: arena and mmapped) */
	uint64_t heap_free;   /* ... held by malloc but free */
};

void agent_run_metrics_render(FILE *f, const struct agent_run_metrics *m);

#endif
