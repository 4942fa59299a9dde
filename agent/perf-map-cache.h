/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The perf maps of profiled processes, kept per process (docs/agent.md, "JIT
 * code: perf maps"; perf-map-parse.h parses one file's lines):
 * frames in anonymous memory are looked up in /tmp/perf-PID.map of their
 * process, read through /proc/PID/root (the process's mount namespace, PID
 * its own namespace's number), incrementally: the agent remembers how far it
 * read and reads what was appended when a sample hits an address not known
 * yet, at most every AGENT_PERF_MAP_CACHE_REREAD_NS per process.
 *
 * Limits (config perf_maps): bytes read per process, entries kept per
 * process, processes with a map at once (the least recently used one is
 * forgotten for a new one). A process's map is freed when it exits. Memory
 * is at most max_processes x (max_bytes_per_process + 24 bytes x
 * max_entries_per_process).
 *
 * Only the profiling thread calls these; no locking.
 */
#ifndef SR_AGENT_PERF_MAP_CACHE_H
#define SR_AGENT_PERF_MAP_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A miss re-reads the map at most this often per process; a process without a map is looked at again after RETRY. */
#define AGENT_PERF_MAP_CACHE_REREAD_NS (200ULL * 1000 * 1000)
#define AGENT_PERF_MAP_CACHE_RETRY_NS  (2ULL * 1000 * 1000 * 1000)
/* Bytes read from one map in one refresh (the rest waits for the next miss). */
#define AGENT_PERF_MAP_CACHE_READ_BYTES (4 * 1024 * 1024)

#define AGENT_PERF_MAP_CACHE_DEFAULT_MAX_BYTES	   (8 * 1024 * 1024)
#define AGENT_PERF_MAP_CACHE_DEFAULT_MAX_ENTRIES   65536
#define AGENT_PERF_MAP_CACHE_DEFAULT_MAX_PROCESSES 64

/* Why a frame in anonymous memory got no name (stackrelay_agent_jit_frames_total{result}). */
enum agent_jit_result {
	AGENT_JIT_NAMED = 0,	   /* found in the process's perf map */
	AGENT_JIT_NO_PERF_MAP,	   /* the process has no (readable) perf map */
	AGENT_JIT_NOT_IN_PERF_MAP, /* the map does not cover the address (yet) */
	AGENT_JIT_LIMIT,	   /* a limit stopped reading the map, or the function store is full */
	AGENT_JIT_DISABLED,	   /* perf_maps.enabled is false */
	AGENT_JIT__MAX,
};

struct agent_perf_map_cache_limits {
	uint64_t max_bytes_per_process;	  /* 0: AGENT_PERF_MAP_CACHE_DEFAULT_MAX_BYTES */
	uint64_t max_entries_per_process; /* 0: AGENT_PERF_MAP_CACHE_DEFAULT_MAX_ENTRIES */
	uint64_t max_processes;		  /* 0: AGENT_PERF_MAP_CACHE_DEFAULT_MAX_PROCESSES */
};

struct agent_perf_map_cache_stats {
	uint64_t processes; /* with a map (or looked for one) now */
	uint64_t entries;
	uint64_t bytes_read;	      /* in total */
	uint64_t reads;		      /* refreshes that read something */
	uint64_t bad_lines;	      /* in total */
	uint64_t processes_forgotten; /* for max_processes */
	uint64_t memory_bytes;	      /* held now (entries and names) */
};

struct agent_perf_map_cache;

/* proc_dir: "/proc" (tests point it at a directory laid out like it). NULL on ENOMEM. */
struct agent_perf_map_cache *agent_perf_map_cache_new(const struct agent_perf_map_cache_limits *limits,
						      const char *proc_dir);
void agent_perf_map_cache_free(struct agent_perf_map_cache *m);

/*
 * The name of the JIT code at addr in the process (pid, start_ns) or NULL
 * with *ret_why; the name (ret_len bytes, not NUL-terminated) is valid until
 * the next call. now_ns is CLOCK_MONOTONIC.
 */
const char *agent_perf_map_cache__lookup(struct agent_perf_map_cache *m, uint32_t pid, uint64_t start_ns, uint64_t addr,
					 uint64_t now_ns, size_t *ret_len, enum agent_jit_result *ret_why);
/* The process exited: its map is freed. */
void agent_perf_map_cache__exit(struct agent_perf_map_cache *m, uint32_t pid, uint64_t start_ns);
void agent_perf_map_cache__stats(const struct agent_perf_map_cache *m, struct agent_perf_map_cache_stats *ret);

#endif
