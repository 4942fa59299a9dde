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
 * Mappings come from the kernel as they are made (PROFILE_EVENT_MMAP, in
 * ring-buffer order before any sample that falls in them), so a process
 * that is gone before the agent looks still has them; /proc/PID/maps is
 * read for processes that predate the agent and when a frame misses.
 * A process's address space is named by its mm (the kernel's mm_struct):
 * a mapping of a new mm (exec) replaces the old image's.
 *
 * Files are reached through /proc/PID/map_files/START-END (deleted files,
 * other mount namespaces), falling back to /proc/PID/root/PATH. Executables
 * are identified once per (dev, inode, mtime, size) (struct agent_exe); a
 * mapping of a file identified before needs no file access at all.
 *
 * Limits: max_processes entries (least recently sampled retired first),
 * AGENT_EXE_CACHE_MAX identified files, AGENT_MAPS_MAX_BYTES of maps file.
 */
#ifndef SR_AGENT_PROC_H
#define SR_AGENT_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/types.h>

#include "cgroup.h"
#include "profile.h"
#include "elfinfo.h"
#include "definition-store.h"

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
/*
 * Each re-read that still misses the frame's address doubles the wait
 * before the next, up to AGENT_MAPS_REFRESH_MIN_NS << this (8 s): a process
 * whose stacks hold addresses no mapping will ever cover (a JIT without
 * frame pointers, such as QEMU's, walked by frame pointers) had its maps
 * and every file mapping in them read 4 times a second for its whole life.
 * A re-read that finds the address starts over. New mappings still come at
 * once from the mmap hook's records.
 */
#define AGENT_MAPS_REFRESH_BACKOFF_MAX 5
/* A process not sampled for this many windows is dropped (re-read if it shows up again). */
#define AGENT_PROC_IDLE_WINDOWS 6
/* An identified file no process mapped for this many windows is dropped from the cache. */
#define AGENT_FILE_IDLE_WINDOWS 6

struct agent_exe;

struct agent_proc_map {
	uint64_t start;
	uint64_t end;
	uint64_t offset;
	struct agent_exe *exe; /* NULL: anonymous, special, or not identifiable */
	bool anon;	       /* anonymous memory (no file, or [anon:NAME]): where JIT code lives */
};

/* Why a user frame could not be attributed (agent_procs_stats.unattributed). */
enum agent_unattributed {
	AGENT_UNATTR_NO_MAPPING = 0, /* no file mapping holds the address (JIT, anonymous, or never learned) */
	AGENT_UNATTR_PROC_GONE,	     /* the process exited before its mappings could be read */
	AGENT_UNATTR_FILE_GONE,	     /* the mapping is known but its file could not be opened */
	AGENT_UNATTR_NOT_ELF,	     /* the file is not an ELF we can read, or has no segment for the offset */
	AGENT_UNATTR_OTHER_IMAGE,    /* sampled inside execve, before the new image: the old image's frames */
	AGENT_UNATTR_ANONYMOUS,	     /* anonymous executable memory: JIT code (perf maps may name it) */
	AGENT_UNATTR__MAX,
};

struct agent_proc {
	uint8_t key[12]; /* pid (4) + start_boottime_ns (8) */
	uint32_t pid;
	uint64_t start_ns;
	char *exe_path;
	struct agent_cgroup_info cg;
	struct agent_proc_map *maps; /* sorted by start; room for cap_maps */
	size_t n_maps, cap_maps;
	bool maps_ok;	   /* maps were read for this process */
	bool exited;	   /* exit record seen, or /proc said it is gone */
	bool stale;	   /* exec seen: read everything again at the next sample */
	bool refresh_free; /* the image's first read: the loader may still have been mapping libraries */
	uint64_t maps_read_ns;
	uint8_t maps_fruitless; /* re-reads in a row that did not cover the missed address (the backoff) */
	uint64_t last_window;
	uint64_t mm;	     /* the address space the mappings belong to; 0: not known (read from /proc) */
	uint64_t maps_gen;   /* bumped whenever maps change; starts at 1 */
	uint64_t unwind_gen; /* maps_gen last given to the BPF unwinder (agent/unwinder.c) */
	bool info_ok;	     /* stat, exe and cgroup were read */
	bool unwind_queued;  /* waiting in agent/run.c's queue for the unwinder */
};

struct agent_procs_stats {
	uint64_t processes;
	uint64_t processes_bytes; /* heap they hold: entries, mappings, paths, the table */
	uint64_t executables_cached;
	uint64_t executables_bytes; /* heap the identified files hold, with the table */
	uint64_t maps_reads;
	uint64_t maps_read_errors;
	uint64_t elf_reads;
	uint64_t elf_errors;
	uint64_t retired_exited; /* exit record seen, or /proc said it is gone */
	uint64_t retired_idle;	 /* no sample nor event for AGENT_PROC_IDLE_WINDOWS windows */
	uint64_t files_dropped;	 /* identified files dropped: idle AGENT_FILE_IDLE_WINDOWS windows, or the cache full */
	uint64_t retired_limit;	 /* over profiling.max_processes */
	uint64_t mmap_events;
	uint64_t mmap_files_identified; /* files first identified from an mmap event */
	uint64_t mmap_files_gone;	/* ... that could not be opened any more */
	uint64_t forks_copied;		/* children given their parent's mappings */
	uint64_t unattributed[AGENT_UNATTR__MAX];
};

struct agent_procs;

struct agent_procs *agent_procs_new(struct agent_store *store, uint64_t max_processes);
/*
 * Called with each file newly identified, known (so BPF stops waking the
 * agent for it), and with each file dropped from the cache, not known.
 */
void agent_procs__on_file(struct agent_procs *p, void (*fn)(void *ctx, uint64_t dev, uint64_t ino, bool known),
			  void *ctx);
void agent_procs_free(struct agent_procs *p);

/* The entry for (pid, start), created (and /proc read) on first use. NULL only on ENOMEM. */
struct agent_proc *agent_procs__get(struct agent_procs *p, uint32_t pid, uint64_t start_ns, uint64_t window);
/* An exec: the process's image changed; its mappings, name and executable are read again at its next sample. */
void agent_procs__exec(struct agent_procs *p, uint32_t pid, uint64_t start_ns, uint64_t mm, uint64_t vdso,
		       uint64_t window);
/*
 * An executable mapping made by the process (PROFILE_EVENT_MMAP): replaces
 * what overlapped it, or everything when it belongs to a new image (mm).
 * Returns the process (NULL: out of memory).
 */
struct agent_proc *agent_procs__mmap(struct agent_procs *p, const struct profile_mmap_event *ev, uint64_t window);
/* A new process forked from a known one: it starts with a copy of its parent's mappings. */
void agent_procs__fork(struct agent_procs *p, const struct profile_fork_event *ev, uint64_t window);
/* The process's last thread exited: retire it at the next gc. */
void agent_procs__exit(struct agent_procs *p, uint32_t pid, uint64_t start_ns);
/*
 * Turns a user-space runtime address into a frame: (executable, ELF
 * vaddr) when a file-backed mapping holds it, else an UNKNOWN frame with
 * the raw address. Re-reads the maps (rate-limited) on a miss.
 */
/* Returns true when the address is in anonymous executable memory (ret is then an UNKNOWN frame). */
bool agent_procs__user_frame(struct agent_procs *p, struct agent_proc *proc, uint64_t addr, uint64_t now_ns,
			     struct agent_frame *ret);
/*
 * Whether a sample taken in address space mm can be attributed with the
 * mappings held (false: it was taken in execve before the new image, whose
 * mappings these are; its frames are counted as AGENT_UNATTR_OTHER_IMAGE).
 */
bool agent_proc__same_image(struct agent_procs *p, const struct agent_proc *proc, uint64_t mm, size_t n_frames);
/*
 * Retires exited, idle and over-limit entries; call after a window's batch
 * is built. fn (may be NULL) is told of each before it is freed.
 */
void agent_procs__gc(struct agent_procs *p, uint64_t window, void (*fn)(void *ctx, struct agent_proc *proc), void *ctx);
/* The mapping holding addr, or NULL. */
const struct agent_proc_map *agent_proc__find_map(const struct agent_proc *proc, uint64_t addr);
/* The load bias of a mapping: ELF vaddr = address - bias. Returns 0 or -ENOENT. */
int agent_proc_map__bias(const struct agent_proc_map *m, uint64_t *ret_bias);
/*
 * The path of the file mapped at m, NUL-terminated in ret (cap bytes): the
 * one kept when the file was identified (as the process that first mapped
 * it named it), else the target of the process's /proc/PID/map_files link.
 * 0 or -errno (-ENAMETOOLONG when it does not fit).
 */
int agent_proc_map__path(const struct agent_proc *proc, const struct agent_proc_map *m, char *ret, size_t cap);
/*
 * Whether the process still maps m's file there: the mappings the agent holds
 * for a process that predates it can outlive an exec (its new image's
 * mappings arrive without telling the old ones are gone), and a runtime that
 * is no longer there must not be walked.
 */
bool agent_proc_map__current(const struct agent_proc *proc, const struct agent_proc_map *m);
/* The file behind a mapping, for agent/unwinder.c: its identity key and ELF info, or NULL. */
const uint64_t *agent_exe__key(const struct agent_exe *e);
/* Whether e is the vDSO (no file: agent/unwinder.c reads the agent's own copy). */
bool agent_exe__is_vdso(const struct agent_exe *e);
void agent_procs__stats(struct agent_procs *p, struct agent_procs_stats *ret);

#endif
