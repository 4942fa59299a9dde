/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Kernel glue: loads bpf/profile.bpf.c, opens one cpu-clock perf event per
 * online CPU in frequency mode, attaches the sampling program and the
 * exec/exit tracepoints, and hands each ring-buffer record to a callback.
 * Configured through rodata and map sizes before load (docs/style.md 3); libbpf's
 * own log goes to sr_log (component "libbpf").
 */
#ifndef SR_AGENT_SAMPLER_H
#define SR_AGENT_SAMPLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The ring buffer is rounded up to a power of two within these bounds. */
#define AGENT_RINGBUF_MIN_BYTES (64u * 1024)
#define AGENT_RINGBUF_MAX_BYTES (1024u * 1024 * 1024)
/* profiling.ring_buffer_size: auto: one second of samples on every CPU, within these bounds. */
#define AGENT_RINGBUF_AUTO_MS	     1000
#define AGENT_RINGBUF_AUTO_MIN_BYTES (1u * 1024 * 1024)
#define AGENT_RINGBUF_AUTO_MAX_BYTES (64u * 1024 * 1024)
/*
 * A sample wakes the agent only when it is its process's first (the
 * process's mappings must be read while it runs) or when 1/this of the ring
 * buffer is waiting (a mapping of a file not yet identified wakes it too);
 * otherwise the agent drains the buffer every AGENT_POLL_INTERVAL_MS. Each
 * drain can preempt a profiled program; mappings travel in the buffer ahead
 * of the samples that need them, so a slow drain loses nothing
 * (docs/agent.md).
 */
#define AGENT_RINGBUF_WAKEUP_FRACTION 4
/*
 * 1/this of the ring buffer is kept for process and mapping records: samples
 * stop (counted as ring_buffer_full) once the rest is full, so an agent that
 * falls behind loses samples, never the mappings later samples need.
 */
#define AGENT_RINGBUF_RECORD_RESERVE_FRACTION 8
#define AGENT_POLL_INTERVAL_MS		      1000
/* Entries of the pid and cgroup allowlists (BPF hash maps). */
#define AGENT_MAX_PID_FILTERS	 4096
#define AGENT_MAX_CGROUP_FILTERS 1024
/* Files the BPF side remembers as identified (mappings of others wake the agent). */
#define AGENT_KNOWN_FILES_MAX 16384

struct agent_sampler_opts {
	uint32_t frequency_hz;
	bool include_idle;
	bool include_kernel_threads;
	bool kernel_stacks;
	const uint32_t *pids; /* allowlist, or n_pids == 0 for all */
	size_t n_pids;
	const uint64_t *cgroup_ids; /* allowlist of cgroup v2 IDs (subtrees), or none */
	size_t n_cgroups;
	uint64_t ring_buffer_bytes;
	uint64_t max_processes; /* size of the BPF map of processes already sampled */
	bool table_unwinding;	/* profiling.unwinding: auto (agent/unwinder.c fills the tables) */
	bool track_mmaps;	/* report executable mappings as they are made (PROFILE_EVENT_MMAP) */
	int mapping_hook;	/* enum agent_mapping_hook (config.h): where, when track_mmaps */
	bool nodejs;		/* nodejs.enabled: name V8 frames (bpf/v8.bpf.h); needs table_unwinding */
	bool java;		/* java.enabled: walk HotSpot frames (bpf/hotspot.bpf.h); needs table_unwinding */
	bool python;		/* python.enabled: walk Python frames (bpf/pyframe.bpf.h); needs table_unwinding */
	bool off_cpu;		/* off_cpu.enabled: the scheduler hooks of bpf/offcpu.bpf.h */
	uint64_t off_cpu_min_block_ns;
	double off_cpu_probability;   /* (0, 1] */
	uint64_t off_cpu_max_per_sec; /* per CPU */
};

/* The maps agent/unwinder.c and the mapping tracker write (bpf/unwind.h, profile.bpf.c). */
struct agent_sampler_maps {
	int unwind_tables; /* table ID -> inner array of struct unwind_row */
	int unwind_procs;  /* tgid -> struct unwind_proc */
	int unwind_files;  /* struct unwind_file_key -> struct unwind_file */
	int known_files;   /* struct {dev, ino} -> u8: files identified */
	int py_procs;	   /* tgid -> struct py_proc (bpf/pyframe.h) */
	int v8_procs;	   /* tgid -> struct v8_proc (bpf/v8frame.h) */
	int hotspot_procs; /* tgid -> struct hotspot_proc (bpf/hotspot.h) */
};

/* Return < 0 to stop polling (the error is returned by agent_sampler__poll). */
typedef int (*agent_record_fn)(void *ctx, const void *data, size_t len);

struct agent_sampler;

/* NULL + errno; *ret_what names the step that failed (for the log). */
struct agent_sampler *agent_sampler_new(const struct agent_sampler_opts *o, agent_record_fn fn, void *ctx,
					const char **ret_what);
/* Consumes what is in the ring buffer, waiting at most timeout_ms; returns records consumed or -errno. */
int agent_sampler__poll(struct agent_sampler *s, int timeout_ms);
/* Sums of the per-CPU counters (enum profile_counter); per_cpu_lost (n_cpus entries) may be NULL. */
/* Reads whatever is in the ring buffer now, without waiting. Returns records read or -errno. */
int agent_sampler__consume(struct agent_sampler *s);
int agent_sampler__counters(struct agent_sampler *s, uint64_t *ret_totals, uint64_t *ret_per_cpu_lost);
int agent_sampler__n_cpus(const struct agent_sampler *s);   /* possible CPUs (per-CPU map width) */
int agent_sampler__n_events(const struct agent_sampler *s); /* perf events opened */
uint64_t agent_sampler__ringbuf_bytes(const struct agent_sampler *s);
/* Kernel memory taken up front by hash maps preallocated for a kernel before 6.1 (agent/kernel-probe.h); 0: none. */
uint64_t agent_sampler__prealloc_bytes(const struct agent_sampler *s);
void agent_sampler__maps(const struct agent_sampler *s, struct agent_sampler_maps *ret);
/* Where off-CPU waits end ("fentry/finish_task_switch"), or NULL when off_cpu is off. */
const char *agent_sampler__off_cpu_hook(const struct agent_sampler *s);
/* Whether the running kernel let the mapping tracker attach (fentry on uprobe_mmap). */
bool agent_sampler__tracks_mmaps(const struct agent_sampler *s);
/* The hook that reports mappings ("fexit/vm_mmap_pgoff", a tracepoint), or NULL. */
const char *agent_sampler__mmap_hook(const struct agent_sampler *s);
/* Detaches the perf events and tracepoints; what is in the ring buffer can still be polled. */
void agent_sampler__stop(struct agent_sampler *s);
void agent_sampler_free(struct agent_sampler *s);

/* Routes libbpf's messages to sr_log. Idempotent. */
void agent_libbpf_log_init(void);

/* Parses a CPU list like "0-3,5" into a bitmap of up to max CPUs; returns the count set or -EINVAL. */
int agent_parse_cpu_list(const char *s, bool *ret_cpus, size_t max);

#endif
