/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The process and mapping cache of the sampling thread.
 *
 * A process is keyed by (pid, start time): the BPF program reports the
 * thread group leader's start_boottime with every record, so a reused PID is
 * a new key and never inherits the old process's mappings. Entries are made
 * at exec (the exec tracepoint wakes the agent at once) or at a process's
 * first sample, whichever comes first, and retired after its exit record
 * once the window that used it is flushed.
 *
 * Files are reached through /proc/PID/map_files/START-END (deleted files,
 * other mount namespaces), falling back to /proc/PID/root/PATH. Executables
 * are identified once per (dev, inode, mtime, size) (struct agent_exe).
 *
 * Limits: max_processes entries (least recently sampled retired first),
 * AGENT_EXE_CACHE_MAX identified files, AGENT_MAPS_MAX_BYTES of maps file.
 */
#ifndef SR_AGENT_PROC_H
#define SR_AGENT_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cgroup.h"
#include "elfinfo.h"
#include "store.h"

#define AGENT_EXE_CACHE_MAX	    8192
#define AGENT_MAPS_MAX_BYTES	    (16u << 20)
#define AGENT_DEFAULT_MAX_PROCESSES 8192
/*
 * A process whose frames miss its mappings has them re-read at most this
 * often, except once after an image's first read: that read may have come
 * while the dynamic loader was still mapping libraries. A second has proved
 * too long: when the re-read also came before the loader finished, a third
 * of a 3-second process's samples lost their library frames.
 */
#define AGENT_MAPS_REFRESH_MIN_NS (250ULL * 1000 * 1000)
/* ... and this often while none of its mappings is known. */
#define AGENT_MAPS_RETRY_EMPTY_NS (100ULL * 1000 * 1000)
/* A process not sampled for this many windows is dropped (re-read if it shows up again). */
#define AGENT_PROC_IDLE_WINDOWS 6

struct agent_exe;

struct agent_proc_map {
	uint64_t start;
	uint64_t end;
	uint64_t offset;
	struct agent_exe *exe; /* NULL: anonymous, special, or not identifiable */
};

struct agent_proc {
	uint8_t key[12]; /* pid (4) + start_boottime_ns (8) */
	uint32_t pid;
	uint64_t start_ns;
	char *exe_path;
	struct agent_cgroup_info cg;
	struct agent_proc_map *maps;
	size_t n_maps;
	bool maps_ok;	   /* maps were read for this process */
	bool exited;	   /* exit record seen, or /proc said it is gone */
	bool stale;	   /* exec seen: read everything again at the next sample */
	bool refresh_free; /* the image's first read: the loader may still have been mapping libraries */
	uint64_t maps_read_ns;
	uint64_t last_window;
};

struct agent_procs_stats {
	uint64_t processes;
	uint64_t executables_cached;
	uint64_t maps_reads;
	uint64_t maps_read_errors;
	uint64_t elf_reads;
	uint64_t elf_errors;
	uint64_t processes_retired;
};

struct agent_procs;

struct agent_procs *agent_procs_new(struct agent_store *store, uint64_t max_processes);
void agent_procs_free(struct agent_procs *p);

/* The entry for (pid, start), created (and /proc read) on first use. NULL only on ENOMEM. */
struct agent_proc *agent_procs__get(struct agent_procs *p, uint32_t pid, uint64_t start_ns, uint64_t window);
/* An exec: the process's image changed; its mappings, name and executable are read again at its next sample. */
void agent_procs__exec(struct agent_procs *p, uint32_t pid, uint64_t start_ns, uint64_t window);
/* The process's last thread exited: retire it at the next gc. */
void agent_procs__exit(struct agent_procs *p, uint32_t pid, uint64_t start_ns);
/*
 * Turns a user-space runtime address into a frame: (executable, ELF
 * vaddr) when a file-backed mapping holds it, else an UNKNOWN frame with
 * the raw address. Re-reads the maps (rate-limited) on a miss.
 */
void agent_procs__user_frame(struct agent_procs *p, struct agent_proc *proc, uint64_t addr, uint64_t now_ns,
			     struct agent_frame *ret);
/* Retires exited, idle and over-limit entries; call after a window's batch is built. */
void agent_procs__gc(struct agent_procs *p, uint64_t window);
void agent_procs__stats(struct agent_procs *p, struct agent_procs_stats *ret);

#endif
