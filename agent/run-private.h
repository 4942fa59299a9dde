/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The profiling loop's state, shared by run.c (the loop: setup, polling, the
 * unwinder queue, windows, shutdown), run-record.c (one ring-buffer record
 * into the current window), run-metrics.c (the /metrics snapshot and page)
 * and run-setup.c (filters and privileges), and nothing else.
 */
#ifndef SR_AGENT_RUN_PRIVATE_H
#define SR_AGENT_RUN_PRIVATE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "kernel.h"
#include "output.h"
#include "perf-map-cache.h"
#include "proc.h"
#include "profile.h"
#include "java.h"
#include "nodejs.h"
#include "python.h"
#include "run.h"
#include "definition-store.h"
#include "agent/otlp-encode.h"
#include "unwinder.h"

struct agent_agg;
struct agent_config;
struct agent_metrics_server;
struct agent_sampler;
struct agent_sender;
struct agent_otlp_exporter;
struct agent_otlp_knames;

struct run_ctx {
	const struct agent_config *cfg;
	struct agent_store *store;
	struct agent_procs *procs;
	struct agent_perf_map_cache *perfmaps; /* NULL: perf_maps.enabled false */
	struct agent_perf_map_cache_stats perfmaps_stats;
	struct agent_agg *agg;
	struct agent_sampler *sampler;
	struct agent_output *out;
	struct agent_sender *sender;
	struct agent_otlp_exporter *otlp; /* NULL: otlp.endpoint empty */
	struct agent_otlp_meta otlp_meta;
	struct agent_otlp_knames *otlp_knames; /* kernel frame names for OTLP; NULL without kernel stacks */
	struct agent_metrics_server *metrics;
	struct agent_info info;
	bool have_kernel;
	uint8_t kernel_id[AGENT_KERNEL_ID_LEN]; /* the image's (kernel.h), which samples name */
	struct agent_kernel kernel;		/* where kernel frames lie; the loop thread's */
	long clk_tck;
	double off_cpu_scale; /* 1 / off_cpu.probability */
	uint64_t window;
	uint64_t window_start_unix;
	uint64_t now_mono;
	/* This window's user-space drops. */
	uint64_t win_stack_errors, win_overflow;
	uint64_t bpf_lost_reported; /* ring-buffer losses already put in a batch */

	pthread_mutex_t lock;		   /* guards stats for the metrics thread */
	struct agent_run_stats stats;	   /* the loop's own; the loop thread only */
	struct agent_run_stats stats_snap; /* copy for the metrics thread */
	uint64_t bpf[PROFILE_CNT__MAX];
	uint64_t *bpf_lost_per_cpu;
	int n_cpus;
	struct agent_store_stats store_stats;
	struct agent_procs_stats procs_stats;
	struct agent_unwinder *unwinder; /* NULL: profiling.unwinding fp, or the kernel cannot */
	struct agent_unwinder_stats unwinder_stats;
	struct agent_python *python; /* NULL: python.enabled off, or no table unwinding */
	struct agent_python_stats python_stats;
	struct agent_nodejs *nodejs; /* NULL: nodejs.enabled off, or no table unwinding */
	struct agent_nodejs_stats nodejs_stats;
	struct agent_java *java; /* NULL: java.enabled off, or no table unwinding */
	struct agent_java_stats java_stats;
	int known_files_fd;
	bool privileges_dropped; /* the capabilities only setup needs are gone (privs.h) */
	/* Processes whose mappings the unwinder has not seen yet (FIFO; see agent_run_queue_unwinder()). */
	struct agent_proc **unwind_queue;
	size_t unwind_head, unwind_n, unwind_cap;
};

/* run.c */
uint64_t agent_run_clock_ns(clockid_t id);
/*
 * Queues a sampled process whose mappings the unwinder has not seen yet;
 * the loop gives them to it between ring-buffer drains.
 */
void agent_run_queue_unwinder(struct run_ctx *c, struct agent_proc *proc);

/* run-record.c */
/* The ring buffer's callback: one record (a sample, an exec, fork, mmap or exit) into c. */
int agent_run_on_record(void *ctx, const void *data, size_t len);

/* run-metrics.c */
/* The metrics server's callback: the loop's counters, snapshotted under c->lock, as the /metrics page. */
void agent_run_render_metrics(void *ctx, FILE *f);

/* run-setup.c */
/* profiling.pids (strings) and profiling.cgroups (paths) to what the BPF maps hold; errors logged. */
int agent_run_resolve_filters(const struct agent_config *cfg, uint32_t **ret_pids, uint64_t **ret_cgroups);
/* Drops the capabilities only setup needed (all kept with keep_all, logged); sets c->privileges_dropped. */
int agent_run_drop_privileges(struct run_ctx *c, bool keep_all);

#endif
