/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Kernel glue of the table unwinder: builds each executable's table once
 * (agent/unwind-table.c), loads it as its own BPF array in unwind_tables,
 * and writes every sampled process's executable mappings into unwind_procs
 * (bpf/unwind.h) whenever they change.
 *
 * Tables are keyed by the file (dev, inode, mtime, size), so one table
 * serves every process and container that maps the file. They are built on
 * the sampling thread at a process's first sample (libc takes about a
 * millisecond), and evicted least recently used first beyond
 * profiling.unwind_table_memory; a stack that needs an evicted table stops
 * there and is counted until its process's mappings are written again.
 */
#ifndef SR_AGENT_UNWINDER_H
#define SR_AGENT_UNWINDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct agent_proc;

struct agent_unwinder_opts {
	int tables_fd;	    /* the unwind_tables map of maps */
	int procs_fd;	    /* the unwind_procs map */
	int files_fd;	    /* the unwind_files map (tables by file, for the BPF side's own mapping updates) */
	uint64_t max_bytes; /* table memory (rows * 8 plus each map's overhead) */
	size_t max_rows;    /* rows one table may have */
};

/* Why an executable has no table (agent_unwinder_stats.no_table). */
enum agent_unwind_no_table {
	AGENT_UNWIND_NT_NO_CFI = 0, /* neither .eh_frame nor .debug_frame */
	AGENT_UNWIND_NT_FOREIGN,    /* not an ELF of the agent's architecture ("not_x86_64", "not_arm64") */
	AGENT_UNWIND_NT_MALFORMED,  /* the sections did not parse */
	AGENT_UNWIND_NT_TOO_BIG,    /* more rows than max_rows, or bigger than max_bytes */
	AGENT_UNWIND_NT_UNREADABLE, /* the file could not be opened (process gone) */
	AGENT_UNWIND_NT_KERNEL,	    /* the kernel refused the map */
	AGENT_UNWIND_NT__MAX,
};

struct agent_unwinder_stats {
	uint64_t tables;      /* loaded now */
	uint64_t table_bytes; /* their memory */
	uint64_t table_rows;
	uint64_t tables_built;
	uint64_t tables_evicted;
	uint64_t build_ns; /* time spent building and loading, in all */
	uint64_t no_table[AGENT_UNWIND_NT__MAX];
	uint64_t procs_written;
	uint64_t mappings_truncated; /* mappings past UNWIND_MAX_MAPPINGS in one process */
};

struct agent_unwind_table;

/*
 * A BPF array holding t's rows as unwind_tables' inner maps are: exactly
 * sized, mmapable (filled with one memcpy), then frozen. Its fd, or -errno.
 */
int agent_unwind_rows_map(const struct agent_unwind_table *t);

/* NULL + errno. */
struct agent_unwinder *agent_unwinder_new(const struct agent_unwinder_opts *o);
void agent_unwinder_free(struct agent_unwinder *u);

/* Writes the process's mappings (building missing tables) when they changed since the last call. 0 or -errno. */
int agent_unwinder__sync(struct agent_unwinder *u, struct agent_proc *proc);
/* The process is retired: drop its mappings from BPF (unless its PID already names a newer process). */
void agent_unwinder__forget(struct agent_unwinder *u, const struct agent_proc *proc);
void agent_unwinder__stats(struct agent_unwinder *u, struct agent_unwinder_stats *ret);

extern const char *const agent_unwind_no_table_names[AGENT_UNWIND_NT__MAX];

#endif
