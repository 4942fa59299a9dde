// SPDX-License-Identifier: Apache-2.0
/*
 * agent_run(): the profiling loop. One thread polls the ring buffer and turns
 * each sample into a content-addressed stack right away (the process may be
 * gone a moment later), counts it into the current window, and once per
 * report interval hands the window to --output and/or the sender.
 *
 * Accounting: every sample the BPF program accepted ends up in exactly one
 * of: a window's counts, DropCounters.ring_buffer_full (lost in the kernel),
 * stack_errors (no frame at all), buffer_overflow (window or stack store
 * full). The totals are logged at exit and exported as metrics.
 *
 * What one ring-buffer record does is in run-record.c; the state both files
 * share is struct run_ctx (run-private.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <linux/types.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "agent.h"
#include "aggregate.h"
#include "common/grow.h"
#include "agent/config.h"
#include "kernel.h"
#include "common/log.h"
#include "metrics.h"
#include "output.h"
#include "agent/otlp-export.h"
#include "agent/otlp-kernel-names.h"
#include "symupload.h"
#include "parse-limits.h"
#include "perf-map-cache.h"
#include "proc.h"
#include "profile.h"
#include "python.h"
#include "run-private.h"
#include "run.h"
#include "sampler.h"
#include "definition-store.h"
#include "common/units.h"
#include "unwinder.h"
#include "util.h"

#define DEFAULT_REPORT_INTERVAL_NS (10 * SR_NSEC_PER_SEC)

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
}

uint64_t agent_run_clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * SR_NSEC_PER_SEC + (uint64_t)ts.tv_nsec;
}

/*
 * A sampled process's mappings go to the BPF unwinder when they changed; its
 * next samples use them. Not at once: building a new file's table takes
 * milliseconds (libLLVM's, tens), and a record handler that builds tables
 * holds back the records behind it, among them the mmap records of processes
 * that may exit before the agent reads their files. So the process is queued,
 * and sync_queued() builds between ring-buffer drains. Until then its stacks
 * are unwound by frame pointers (counted: stackrelay_agent_unwind_stacks_total{method="fp"}).
 */
void agent_run_queue_unwinder(struct run_ctx *c, struct agent_proc *proc)
{
	if (!c->unwinder || !proc || proc->exited || proc->unwind_queued || proc->unwind_gen == proc->maps_gen)
		return;
	if (c->unwind_head > 0 && c->unwind_n == c->unwind_cap) {
		memmove(c->unwind_queue, c->unwind_queue + c->unwind_head,
			(c->unwind_n - c->unwind_head) * sizeof(*c->unwind_queue));
		c->unwind_n -= c->unwind_head;
		c->unwind_head = 0;
	}
	/* Out of memory: this process stays on frame pointers until its next sample tries again. */
	if (sr_grow((void **)&c->unwind_queue, &c->unwind_cap, c->unwind_n + 1, sizeof(*c->unwind_queue), 64) < 0)
		return;
	c->unwind_queue[c->unwind_n++] = proc;
	proc->unwind_queued = true;
}

/*
 * Time one call of sync_queued() may take: under heavy process churn every
 * ring-buffer read queues more processes, and a loop that ran until the
 * queue was empty never came back to flush the window (no samples sent, no
 * process retired: the agent's memory grew with every process started).
 */
#define AGENT_SYNC_BUDGET_NS (100ULL * 1000 * 1000)

/*
 * Gives queued processes to the unwinder, reading the ring buffer after each
 * (which may queue more), for at most AGENT_SYNC_BUDGET_NS; what is left
 * waits for the next turn of the loop.
 */
static void sync_queued(struct run_ctx *c)
{
	uint64_t deadline = agent_run_clock_ns(CLOCK_MONOTONIC) + AGENT_SYNC_BUDGET_NS;

	while (c->unwind_head < c->unwind_n && agent_run_clock_ns(CLOCK_MONOTONIC) < deadline) {
		struct agent_proc *proc = c->unwind_queue[c->unwind_head++];
		int r;

		proc->unwind_queued = false;
		if (!proc->exited) {
			r = agent_unwinder__sync(c->unwinder, proc);
			if (r < 0)
				sr_log_debug("agent",
					     "cannot give a process's mappings to the unwinder; its stacks use frame "
					     "pointers",
					     "pid=%u error=\"%s\"", proc->pid, strerror(-r));
			if (c->python) {
				r = agent_python__sync(c->python, proc);
				if (r < 0 && r != -ENOENT && r != -ENOTSUP)
					sr_log_debug("agent", "cannot give a Python process to the frame walker",
						     "pid=%u error=\"%s\"", proc->pid, strerror(-r));
			}
			if (c->java) {
				r = agent_java__sync(c->java, proc);
				if (r < 0 && r != -ENOENT && r != -ENOTSUP && r != -EAGAIN)
					sr_log_debug("agent", "cannot give a JVM to the Java frame walker",
						     "pid=%u error=\"%s\"", proc->pid, strerror(-r));
			}
			if (c->nodejs) {
				r = agent_nodejs__sync(c->nodejs, proc);
				if (r < 0 && r != -ENOENT && r != -ENOTSUP)
					sr_log_debug("agent", "cannot give a Node.js process to the frame namer",
						     "pid=%u error=\"%s\"", proc->pid, strerror(-r));
			}
		}
		if (agent_sampler__consume(c->sampler) < 0)
			break;
	}
	if (c->unwind_head == c->unwind_n)
		c->unwind_head = c->unwind_n = 0;
}

/* Before processes are retired: the queue must not outlive them (they are queued again at their next sample). */
static void clear_unwind_queue(struct run_ctx *c)
{
	for (size_t i = c->unwind_head; i < c->unwind_n; i++)
		c->unwind_queue[i]->unwind_queued = false;
	c->unwind_head = c->unwind_n = 0;
}

static void forget_proc(void *ctx, struct agent_proc *proc)
{
	struct run_ctx *c = ctx;

	if (c->unwinder)
		agent_unwinder__forget(c->unwinder, proc);
	if (c->python)
		agent_python__forget(c->python, proc);
	if (c->nodejs)
		agent_nodejs__forget(c->nodejs, proc);
	if (c->java)
		agent_java__forget(c->java, proc);
}

/* A file the agent identified: its mappings stop waking the agent; one it forgot: they wake it again. */
static void file_known(void *ctx, uint64_t dev, uint64_t ino, bool known)
{
	struct run_ctx *c = ctx;
	uint64_t key[2] = { dev, ino };
	uint8_t one = 1;

	if (c->known_files_fd < 0)
		return;
	if (known)
		bpf_map_update_elem(c->known_files_fd, key, &one, BPF_ANY);
	else
		bpf_map_delete_elem(c->known_files_fd, key);
}

/* Refreshes what the metrics endpoint shows. */
static void update_stats(struct run_ctx *c)
{
	uint64_t bpf[PROFILE_CNT__MAX] = { 0 };
	uint64_t *per_cpu = calloc((size_t)c->n_cpus + 1, sizeof(uint64_t));

	if (c->sampler)
		agent_sampler__counters(c->sampler, bpf, per_cpu);
	pthread_mutex_lock(&c->lock);
	memcpy(c->bpf, bpf, sizeof(bpf));
	if (per_cpu && c->bpf_lost_per_cpu)
		memcpy(c->bpf_lost_per_cpu, per_cpu, (size_t)c->n_cpus * sizeof(uint64_t));
	free(per_cpu);
	c->stats_snap = c->stats;
	agent_store__stats(c->store, &c->store_stats);
	agent_procs__stats(c->procs, &c->procs_stats);
	if (c->perfmaps)
		agent_perf_map_cache__stats(c->perfmaps, &c->perfmaps_stats);
	if (c->unwinder)
		agent_unwinder__stats(c->unwinder, &c->unwinder_stats);
	if (c->python)
		agent_python__stats(c->python, &c->python_stats);
	if (c->nodejs)
		agent_nodejs__stats(c->nodejs, &c->nodejs_stats);
	if (c->java)
		agent_java__stats(c->java, &c->java_stats);
	pthread_mutex_unlock(&c->lock);
}

/*
 * What retired processes and expired stacks freed goes back to the system
 * (glibc keeps free heap pages otherwise, and RSS stays at its high-water
 * mark after a burst): at most once a window, when the main arena holds more
 * than AGENT_HEAP_TRIM_BYTES free.
 */
static void trim_heap(struct run_ctx *c)
{
	struct mallinfo2 mi = mallinfo2();

	if (mi.fordblks >= AGENT_HEAP_TRIM_BYTES) {
		malloc_trim(0);
		c->stats.heap_trims++;
	}
}

static int flush_window(struct run_ctx *c, uint64_t end_unix)
{
	struct agent_batch b;
	uint64_t bpf[PROFILE_CNT__MAX] = { 0 }, lost;
	int r;

	if (c->sampler)
		agent_sampler__counters(c->sampler, bpf, NULL);
	/* Modules loaded or unloaded since: their frames go to the right module (a moved one gets a new index). */
	if (c->have_kernel && agent_kernel_relative(&c->kernel) && agent_kernel_refresh_modules(&c->kernel, "") > 0)
		(void)agent_store__set_kernel(c->store, &c->kernel);
	/* Off-CPU waits lost in the ring buffer are samples lost like any other. */
	lost = bpf[PROFILE_CNT_LOST_RINGBUF] + bpf[PROFILE_CNT_OFF_CPU_LOST_RINGBUF] - c->bpf_lost_reported;
	r = agent_agg__flush(c->agg, c->window_start_unix, end_unix, c->have_kernel ? c->kernel_id : NULL,
			     AGENT_KERNEL_ID_LEN, (uint32_t)c->cfg->profiling.frequency_hz, c->clk_tck, &b);
	if (r < 0)
		return r;
	c->bpf_lost_reported += lost;
	if (lost)
		b.drops.ring_buffer_full = agent_pb_u64(lost);
	if (c->win_stack_errors)
		b.drops.stack_errors = agent_pb_u64(c->win_stack_errors);
	if (c->win_overflow)
		b.drops.buffer_overflow = agent_pb_u64(c->win_overflow);
	c->win_stack_errors = c->win_overflow = 0;
	c->stats.windows++;
	c->stats.samples_exported += b.total_count;

	if (c->out && (b.n_samples || lost)) {
		r = agent_output__write(c->out, c->store, &b);
		if (r < 0)
			sr_log_error("agent", "cannot write output; samples of this window are lost", "error=\"%s\"",
				     strerror(-r));
	}
	/*
	 * Stacks of processes that are gone: dropped once unused for
	 * AGENT_STORE_KEEP_WINDOWS windows and older than every window still
	 * queued (the sender looks definitions up when it sends, and a stack
	 * last used before the oldest queued window is in none of them). While
	 * the gateway is away they stay, up to profiling.max_stacks.
	 */
	if (c->window >= AGENT_STORE_KEEP_WINDOWS) {
		uint64_t before = c->window - AGENT_STORE_KEEP_WINDOWS;

		if (c->sender) {
			struct agent_sender_stats ss;

			agent_sender__stats(c->sender, &ss);
			before = SR_MIN(before, ss.oldest_window);
		}
		agent_store__expire_stacks(c->store, before);
	}
	b.window = c->window;
	/* Encoded now, while the store has every definition the window names; before the sender takes the samples. */
	if (c->otlp && b.n_samples) {
		r = agent_otlp_exporter__submit(c->otlp, c->store, &b);
		if (r < 0)
			sr_log_error("agent", "cannot encode OTLP; samples of this window are dropped and counted",
				     "error=\"%s\"", strerror(-r));
	}
	if (c->sender && (b.n_samples || b.drops.ring_buffer_full || b.drops.stack_errors || b.drops.buffer_overflow))
		agent_sender__submit(c->sender, &b);
	agent_batch_free(&b);
	sr_log_debug("agent", "window flushed", "window=%" PRIu64 " samples=%" PRIu64, c->window,
		     c->stats.samples_exported);
	clear_unwind_queue(c);
	agent_procs__gc(c->procs, c->window + 1, forget_proc, c);
	/* Executables of files no process maps and no stored stack names any more. */
	agent_store__trim_exes(c->store, c->window);
	trim_heap(c);
	c->window++;
	c->window_start_unix = end_unix;
	return 0;
}

int agent_run(const struct agent_config *cfg, const struct agent_run_opts *opts)
{
	const struct agent_profiling_config *pc = &cfg->profiling;
	struct run_ctx c = { .known_files_fd = -1 };
	struct sigaction sa = { 0 }, old_int, old_term;
	uint32_t *pids = NULL;
	uint64_t *cgroups = NULL, interval, start_mono, next_flush, deadline = 0;
	uint64_t last_stats = 0;
	const char *what = NULL;
	int r;

	/*
	 * Table builds allocate and free arrays of megabytes. glibc raises its
	 * mmap threshold after freeing such a block, and from then on keeps
	 * them in the heap, which it does not give back: pin the threshold so
	 * they stay mmaps and go back to the kernel when freed (agent RSS in
	 * agent-check-metrics: 36 MiB without, 25 MiB with).
	 */
	mallopt(M_MMAP_THRESHOLD, 256 * 1024);
	/*
	 * One arena for every thread: the sender's requests copy thousands of
	 * definitions at a time, and in an arena of its own their freed pages
	 * stayed resident (10-12 MiB under churn) where trim_heap() neither
	 * counted nor returned them. In the main arena they are counted
	 * (stackrelay_agent_heap_bytes) and given back with the rest; the
	 * threads allocate rarely enough not to contend (bench/README.md,
	 * "Agent memory under churn": 39.3-39.8 MiB against 45-48.5 MiB over
	 * the same four minutes of churn).
	 */
	mallopt(M_ARENA_MAX, 1);
	/* Before any parser runs: every file a process maps is read within these (parse-limits.h). */
	agent_parse_limits_set(&(struct agent_parse_limits){
		.max_section_bytes = pc->max_section_bytes,
		.max_inflated_bytes = pc->max_inflated_bytes,
	});
	if (pc->frequency_hz < 1 || pc->frequency_hz > 1000) {
		sr_log_error("agent", "profiling.frequency must be 1-1000", "value=%" PRIu64, pc->frequency_hz);
		return -EINVAL;
	}
	if (!(cfg->off_cpu.probability > 0 && cfg->off_cpu.probability <= 1)) {
		sr_log_error("agent", "off_cpu.probability must be above 0 and at most 1", "value=%g",
			     cfg->off_cpu.probability);
		return -EINVAL;
	}
	c.cfg = cfg;
	c.off_cpu_scale = 1.0 / cfg->off_cpu.probability;
	pthread_mutex_init(&c.lock, NULL);
	c.clk_tck = sysconf(_SC_CLK_TCK);
	agent_info_init(&c.info, cfg->node_name && cfg->node_name[0] ? cfg->node_name : NULL);
	if (!c.info.node_name)
		c.info.node_name = c.info.host_name;

	if (agent_in_child_pid_namespace() > 0)
		sr_log_warn("agent",
			    "running in a child PID namespace: sampled PIDs will not match /proc; "
			    "run with hostPID",
			    "%s", "");
	r = agent_run_resolve_filters(cfg, &pids, &cgroups);
	if (r < 0)
		goto out;
	c.store = agent_store_new(pc->max_stacks);
	c.procs = c.store ? agent_procs_new(c.store, pc->max_processes) : NULL;
	c.agg = agent_agg_new(0);
	if (cfg->perf_maps.enabled) {
		struct agent_perf_map_cache_limits pl = {
			.max_bytes_per_process = cfg->perf_maps.max_bytes_per_process,
			.max_entries_per_process = cfg->perf_maps.max_entries_per_process,
			.max_processes = cfg->perf_maps.max_processes,
		};

		c.perfmaps = agent_perf_map_cache_new(&pl, NULL);
		if (!c.perfmaps) {
			r = -ENOMEM;
			goto out;
		}
	}
	if (!c.store || !c.procs || !c.agg) {
		r = -ENOMEM;
		goto out;
	}
	r = agent_kernel_read("", &c.kernel);
	if (r == 0) {
		r = agent_store__set_kernel(c.store, &c.kernel);
		if (r == 0) {
			c.have_kernel = true;
			memcpy(c.kernel_id, c.kernel.id, sizeof(c.kernel_id));
		}
		if (!c.kernel.build_id_len)
			sr_log_warn("agent",
				    "kernel has no build ID in /sys/kernel/notes; its ID uses the release and boot",
				    "release=%s", c.kernel.release);
		if (!agent_kernel_relative(&c.kernel))
			sr_log_warn("agent",
				    "kernel text address hidden (kptr_restrict); kernel frames are sent as this boot's "
				    "addresses and stay unnamed",
				    "hint=\"grant CAP_SYSLOG\"");
	}
	if (r < 0)
		goto out;

	if (opts->output) {
		c.out = agent_output_open(opts->output, &c.info);
		if (!c.out) {
			r = -errno;
			sr_log_error("agent", "cannot open output file", "path=\"%s\" error=\"%s\"", opts->output,
				     strerror(errno));
			goto out;
		}
	}

	struct agent_sampler_opts so = {
		.frequency_hz = (uint32_t)pc->frequency_hz,
		.include_idle = pc->include_idle,
		.include_kernel_threads = pc->include_kernel_threads,
		.kernel_stacks = pc->kernel_stacks,
		.pids = pids,
		.n_pids = pc->n_pids,
		.cgroup_ids = cgroups,
		.n_cgroups = pc->n_cgroups,
		.ring_buffer_bytes = pc->ring_buffer_bytes,
		.max_processes = pc->max_processes,
		.table_unwinding = pc->unwinding == AGENT_UNWIND_AUTO,
		.track_mmaps = pc->mapping_hook != AGENT_HOOK_NONE,
		.mapping_hook = pc->mapping_hook,
		.python = cfg->python.enabled,
		.nodejs = cfg->nodejs.enabled,
		.java = cfg->java.enabled,
		.off_cpu = cfg->off_cpu.enabled,
		.off_cpu_min_block_ns = cfg->off_cpu.min_block_ns,
		.off_cpu_probability = cfg->off_cpu.probability,
		.off_cpu_max_per_sec = cfg->off_cpu.max_events_per_second,
	};
	c.sampler = agent_sampler_new(&so, agent_run_on_record, &c, &what);
	/* A mapping hook the operator named and the kernel refuses is theirs to change, not ours to work around. */
	if (!c.sampler && so.table_unwinding && !(what && strstr(what, "profiling.mapping_hook"))) {
		/* Old kernels (before 5.10's sized inner maps, 5.17's bpf_find_vma): frame pointers still work. */
		sr_log_warn("agent", "table unwinding cannot load on this kernel; unwinding by frame pointers",
			    "step=\"%s\" error=\"%s\"", what ? what : "?", strerror(errno));
		so.table_unwinding = false;
		c.sampler = agent_sampler_new(&so, agent_run_on_record, &c, &what);
	}
	if (!c.sampler) {
		r = -errno;
		sr_log_error("agent", "cannot start BPF sampling; run --check for what is missing",
			     "step=\"%s\" error=\"%s\"", what ? what : "?", strerror(errno));
		goto out;
	}
	c.n_cpus = agent_sampler__n_cpus(c.sampler);
	{
		struct agent_sampler_maps sm;

		agent_sampler__maps(c.sampler, &sm);
		c.known_files_fd = sm.known_files;
		agent_procs__on_file(c.procs, file_known, &c);
		if (so.table_unwinding) {
			struct agent_unwinder_opts uo = {
				.tables_fd = sm.unwind_tables,
				.procs_fd = sm.unwind_procs,
				.files_fd = sm.unwind_files,
				.max_bytes = pc->unwind_table_bytes,
			};
			c.unwinder = agent_unwinder_new(&uo);
			if (!c.unwinder) {
				r = -errno;
				goto out;
			}
			if (so.python) {
				c.python = agent_python_new(sm.py_procs, cfg->python.max_code_objects);
				if (!c.python) {
					r = -errno;
					goto out;
				}
			}
			if (so.nodejs) {
				c.nodejs = agent_nodejs_new(sm.v8_procs, cfg->nodejs.max_functions);
				if (!c.nodejs) {
					r = -errno;
					goto out;
				}
			}
			if (so.java) {
				c.java = agent_java_new(sm.hotspot_procs, cfg->java.max_methods);
				if (!c.java) {
					r = -errno;
					goto out;
				}
			}
		}
	}
	c.bpf_lost_per_cpu = calloc((size_t)c.n_cpus, sizeof(uint64_t));
	if (!c.bpf_lost_per_cpu) {
		r = -ENOMEM;
		goto out;
	}

	/* Bound now, served from a thread started after the drop (threads keep the capabilities they start with). */
	if (cfg->telemetry.metrics_address && cfg->telemetry.metrics_address[0]) {
		c.metrics = agent_metrics_server_new(cfg->telemetry.metrics_address, agent_run_render_metrics, &c);
		if (!c.metrics) {
			r = -errno;
			sr_log_error("agent", "cannot serve metrics", "address=%s error=\"%s\"",
				     cfg->telemetry.metrics_address, strerror(errno));
			goto out;
		}
	}
	r = agent_run_drop_privileges(&c, opts->keep_privileges);
	if (r < 0)
		goto out;
	if (opts->send) {
		c.sender = agent_sender_new(cfg, c.store);
		if (!c.sender) {
			r = -errno;
			sr_log_error("agent", "cannot create the sender", "error=\"%s\"", strerror(errno));
			goto out;
		}
	}
	if (cfg->otlp.endpoint && cfg->otlp.endpoint[0]) {
		char err[256];

		c.otlp_meta = (struct agent_otlp_meta){ .version = cfg->otlp.proto_version,
							.host_name = c.info.host_name,
							.scope_version = c.info.version };
		/* OTLP consumers have no kernel symbols: the agent names kernel frames itself, as the OTel profiler does. */
		if (c.have_kernel && cfg->profiling.kernel_stacks) {
			c.otlp_knames = agent_otlp_knames_new(AGENT_SYMUPLOAD_KALLSYMS_PATH, &c.kernel);
			c.otlp_meta.kernel_name = agent_otlp_knames__lookup;
			c.otlp_meta.kernel_name_ctx = c.otlp_knames;
			if (!c.otlp_knames)
				c.otlp_meta.kernel_name = NULL;
		}
		c.otlp = agent_otlp_exporter_new(&cfg->otlp, &c.otlp_meta, err, sizeof(err));
		if (!c.otlp) {
			r = -errno;
			sr_log_error("agent", "cannot start the OTLP export", "endpoint=%s error=\"%s\"",
				     cfg->otlp.endpoint, err);
			goto out;
		}
		sr_log_info("agent", "sending OTLP profiles", "endpoint=%s proto_version=%s", cfg->otlp.endpoint,
			    agent_otlp_version_names[cfg->otlp.proto_version]);
	}
	if (c.metrics) {
		r = agent_metrics_server__start(c.metrics);
		if (r < 0) {
			sr_log_error("agent", "cannot serve metrics", "address=%s error=\"%s\"",
				     cfg->telemetry.metrics_address, strerror(-r));
			goto out;
		}
		sr_log_info("agent", "serving metrics", "address=%s port=%d", cfg->telemetry.metrics_address,
			    agent_metrics_server__port(c.metrics));
	}

	stop_requested = 0;
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);

	interval = pc->report_interval_ns ? pc->report_interval_ns : DEFAULT_REPORT_INTERVAL_NS;
	start_mono = agent_run_clock_ns(CLOCK_MONOTONIC);
	next_flush = start_mono + interval;
	if (opts->duration_ns)
		deadline = start_mono + opts->duration_ns;
	c.window_start_unix = agent_run_clock_ns(CLOCK_REALTIME);
	sr_log_info("agent", "profiling",
		    "cpus=%d perf_events=%d frequency_hz=%" PRIu64 " ring_buffer_bytes=%" PRIu64
		    " report_interval_ms=%" PRIu64
		    " pid_filters=%u cgroup_filters=%u mmap_hook=%s prealloc_map_bytes=%" PRIu64,
		    c.n_cpus, agent_sampler__n_events(c.sampler), pc->frequency_hz,
		    agent_sampler__ringbuf_bytes(c.sampler), (uint64_t)(interval / SR_NSEC_PER_MSEC), pc->n_pids,
		    pc->n_cgroups, agent_sampler__mmap_hook(c.sampler) ? agent_sampler__mmap_hook(c.sampler) : "none",
		    agent_sampler__prealloc_bytes(c.sampler));
	if (cfg->off_cpu.enabled)
		sr_log_info("agent", "off-CPU profiling",
			    "hook=%s min_block_us=%" PRIu64 " probability=%g max_events_per_second_per_cpu=%" PRIu64,
			    agent_sampler__off_cpu_hook(c.sampler) ? agent_sampler__off_cpu_hook(c.sampler) : "none",
			    cfg->off_cpu.min_block_ns / 1000, cfg->off_cpu.probability,
			    cfg->off_cpu.max_events_per_second);
	if (pc->mapping_hook == AGENT_HOOK_AUTO && agent_sampler__mmap_hook(c.sampler) &&
	    !strcmp(agent_sampler__mmap_hook(c.sampler), "tp_btf/sys_exit"))
		sr_log_warn("agent",
			    "mappings are watched at the raw system-call exit, which runs for every system call "
			    "(about 0.1-0.2 us each); mount tracefs at /sys/kernel/tracing, or allow BPF trampolines, "
			    "for a hook that runs only for mmap (docs/agent.md)",
			    "mmap_hook=tp_btf/sys_exit");

	while (!stop_requested) {
		uint64_t now = agent_run_clock_ns(CLOCK_MONOTONIC), wake = next_flush;
		int timeout;

		if (deadline && now >= deadline)
			break;
		if (deadline && deadline < wake)
			wake = deadline;
		timeout = wake > now
				  ? (int)SR_MIN((wake - now) / SR_NSEC_PER_MSEC + 1, (uint64_t)AGENT_POLL_INTERVAL_MS)
				  : 0;
		/* Processes still queued for the unwinder (sync_queued()'s budget ran out): no waiting. */
		if (c.unwind_head < c.unwind_n)
			timeout = 0;
		c.now_mono = now;
		r = agent_sampler__poll(c.sampler, timeout);
		if (r < 0) {
			sr_log_error("agent", "ring buffer poll failed", "error=\"%s\"", strerror(-r));
			break;
		}
		r = 0;
		if (c.unwinder)
			sync_queued(&c);
		now = agent_run_clock_ns(CLOCK_MONOTONIC);
		if (now >= next_flush) {
			flush_window(&c, agent_run_clock_ns(CLOCK_REALTIME));
			next_flush += interval;
			if (next_flush <= now)
				next_flush = now + interval;
		}
		if (now - last_stats >= SR_NSEC_PER_SEC) {
			update_stats(&c);
			last_stats = now;
		}
	}

	/* Stop sampling, drain what the kernel already wrote, flush the last window. */
	agent_sampler__stop(c.sampler);
	c.now_mono = agent_run_clock_ns(CLOCK_MONOTONIC);
	while (agent_sampler__poll(c.sampler, 0) > 0)
		;
	flush_window(&c, agent_run_clock_ns(CLOCK_REALTIME));
	update_stats(&c);
	if (c.sender) {
		int fr = agent_sender__flush(c.sender, cfg->gateway.flush_timeout_ns);
		if (fr < 0)
			sr_log_warn("agent", "sender flush incomplete; unsent samples are counted as dropped",
				    "error=\"%s\"", strerror(-fr));
	}
	if (c.otlp) {
		struct agent_otlp_stats os;
		int fr = agent_otlp_exporter__flush(c.otlp, cfg->otlp.flush_timeout_ns);

		if (fr < 0)
			sr_log_warn("agent", "OTLP flush incomplete; unsent samples are counted as dropped",
				    "error=\"%s\"", strerror(-fr));
		agent_otlp_exporter__stats(c.otlp, &os);
		sr_log_info("agent", "OTLP export",
			    "samples_submitted=%" PRIu64 " samples_sent=%" PRIu64 " dropped_buffer_full=%" PRIu64
			    " dropped_rejected=%" PRIu64 " dropped_retries_exhausted=%" PRIu64
			    " dropped_definition_lost=%" PRIu64 " requests_ok=%" PRIu64 " requests_failed=%" PRIu64,
			    os.samples_submitted, os.samples_sent, os.dropped_buffer_full, os.dropped_rejected,
			    os.dropped_retries_exhausted, os.dropped_definition_lost, os.requests_ok,
			    os.requests_failed);
	}
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	sr_log_info("agent", "profiling stopped",
		    "samples_taken=%" PRIu64 " samples_exported=%" PRIu64 " lost_ring_buffer=%" PRIu64
		    " dropped_stack_errors=%" PRIu64 " dropped_overflow=%" PRIu64 " filtered=%" PRIu64
		    " maps_reads=%" PRIu64 " windows=%" PRIu64 " unattributed_no_mapping=%" PRIu64
		    " unattributed_process_gone=%" PRIu64 " unattributed_file_unreadable=%" PRIu64
		    " unattributed_not_elf=%" PRIu64 " unattributed_other_image=%" PRIu64 " off_cpu_events=%" PRIu64
		    " off_cpu_ns=%" PRIu64 " off_cpu_skipped_short=%" PRIu64 " off_cpu_skipped_probability=%" PRIu64
		    " off_cpu_skipped_rate=%" PRIu64,
		    /* Off-CPU waits are samples too: taken = exported + dropped holds for both. */
		    c.bpf[PROFILE_CNT_SAMPLES] + c.bpf[PROFILE_CNT_OFF_CPU_EVENTS], c.stats.samples_exported,
		    c.bpf[PROFILE_CNT_LOST_RINGBUF] + c.bpf[PROFILE_CNT_OFF_CPU_LOST_RINGBUF],
		    c.stats.dropped_stack_errors, c.stats.dropped_overflow,
		    c.bpf[PROFILE_CNT_FILTERED_IDLE] + c.bpf[PROFILE_CNT_FILTERED_KTHREAD] +
			    c.bpf[PROFILE_CNT_FILTERED_PID] + c.bpf[PROFILE_CNT_FILTERED_CGROUP],
		    c.procs_stats.maps_reads, c.stats.windows, c.procs_stats.unattributed[AGENT_UNATTR_NO_MAPPING],
		    c.procs_stats.unattributed[AGENT_UNATTR_PROC_GONE],
		    c.procs_stats.unattributed[AGENT_UNATTR_FILE_GONE],
		    c.procs_stats.unattributed[AGENT_UNATTR_NOT_ELF],
		    c.procs_stats.unattributed[AGENT_UNATTR_OTHER_IMAGE], c.bpf[PROFILE_CNT_OFF_CPU_EVENTS],
		    c.stats.off_cpu_ns, c.bpf[PROFILE_CNT_OFF_CPU_SKIP_SHORT],
		    c.bpf[PROFILE_CNT_OFF_CPU_SKIP_PROBABILITY], c.bpf[PROFILE_CNT_OFF_CPU_SKIP_RATE]);
	if (c.python) {
		agent_python__stats(c.python, &c.python_stats);
		sr_log_info("agent", "python frames",
			    "stacks_found=%" PRIu64 " no_thread_state=%" PRIu64 " no_frame=%" PRIu64 " frames=%" PRIu64
			    " processes=%" PRIu64 " unsupported=%" PRIu64 " code_objects=%" PRIu64
			    " code_reads=%" PRIu64 " unnamed_frames=%" PRIu64,
			    c.bpf[PROFILE_CNT_PY_STACKS], c.bpf[PROFILE_CNT_PY_NO_THREAD],
			    c.bpf[PROFILE_CNT_PY_NO_FRAME], c.bpf[PROFILE_CNT_PY_FRAMES], c.python_stats.processes,
			    c.python_stats.unsupported, c.python_stats.codes_cached, c.python_stats.code_reads,
			    c.python_stats.code_read_errors);
	}
	if (c.nodejs) {
		agent_nodejs__stats(c.nodejs, &c.nodejs_stats);
		sr_log_info("agent", "nodejs frames",
			    "frames=%" PRIu64 " unnamed_frames=%" PRIu64 " processes=%" PRIu64 " unsupported=%" PRIu64
			    " functions=%" PRIu64 " function_reads=%" PRIu64 " read_errors=%" PRIu64
			    " line_reads=%" PRIu64 " line_read_errors=%" PRIu64 " code_reads=%" PRIu64
			    " code_read_errors=%" PRIu64 " code_lines_unknown=%" PRIu64 " inlined_frames=%" PRIu64
			    " code_layouts_learned=%" PRIu64 " code_layouts_refused=%" PRIu64,
			    c.bpf[PROFILE_CNT_V8_FRAMES], c.stats.v8_unnamed_frames, c.nodejs_stats.processes,
			    c.nodejs_stats.unsupported, c.nodejs_stats.functions_cached, c.nodejs_stats.function_reads,
			    c.nodejs_stats.function_read_errors, c.nodejs_stats.line_reads,
			    c.nodejs_stats.line_read_errors, c.nodejs_stats.code_reads, c.nodejs_stats.code_read_errors,
			    c.nodejs_stats.code_lines_unknown, c.nodejs_stats.inlined_frames,
			    c.nodejs_stats.code_layouts_learned, c.nodejs_stats.code_layouts_refused);
	}
	if (c.java) {
		agent_java__stats(c.java, &c.java_stats);
		sr_log_info("agent", "java frames",
			    "frames_recorded=%" PRIu64 " frames_exported=%" PRIu64 " unnamed_frames=%" PRIu64
			    " processes=%" PRIu64 " not_understood=%" PRIu64 " methods=%" PRIu64
			    " method_reads=%" PRIu64 " read_errors=%" PRIu64 " compiled_stale=%" PRIu64,
			    c.bpf[PROFILE_CNT_JVM_FRAMES], c.stats.java_frames, c.stats.java_unnamed_frames,
			    c.java_stats.processes, c.java_stats.not_understood, c.java_stats.methods_cached,
			    c.java_stats.method_reads, c.java_stats.method_read_errors, c.java_stats.compiled_stale);
	}
	/* The same counters as /metrics' stackrelay_agent_unwind_*: a --duration run has no scrape. */
	if (c.unwinder)
		sr_log_info("agent", "unwinding stopped",
			    "stacks_table=%" PRIu64 " stacks_fp=%" PRIu64 " frames_table=%" PRIu64 " frames_fp=%" PRIu64
			    " end_complete=%" PRIu64 " end_no_table=%" PRIu64 " end_no_mapping=%" PRIu64
			    " end_table_evicted=%" PRIu64 " end_unsupported_rule=%" PRIu64 " end_read_fault=%" PRIu64
			    " end_no_cfi=%" PRIu64 " end_jvm=%" PRIu64 " end_depth=%" PRIu64 " tables_built=%" PRIu64,
			    c.bpf[PROFILE_CNT_UNWIND_STACKS], c.bpf[PROFILE_CNT_UNWIND_FP_STACKS],
			    c.bpf[PROFILE_CNT_UNWIND_TABLE_FRAMES], c.bpf[PROFILE_CNT_UNWIND_FP_FRAMES],
			    c.bpf[PROFILE_CNT_UNWIND_END_COMPLETE], c.bpf[PROFILE_CNT_UNWIND_END_NO_TABLE],
			    c.bpf[PROFILE_CNT_UNWIND_END_NO_MAPPING], c.bpf[PROFILE_CNT_UNWIND_END_EVICTED],
			    c.bpf[PROFILE_CNT_UNWIND_END_NO_RULE], c.bpf[PROFILE_CNT_UNWIND_END_READ_FAULT],
			    c.bpf[PROFILE_CNT_UNWIND_END_NO_CFI], c.bpf[PROFILE_CNT_UNWIND_END_JVM],
			    c.bpf[PROFILE_CNT_UNWIND_END_DEPTH], c.unwinder_stats.tables_built);
out:
	agent_metrics_server_free(c.metrics);
	agent_sampler_free(c.sampler);
	agent_unwinder_free(c.unwinder);
	agent_python_free(c.python);
	agent_nodejs_free(c.nodejs);
	agent_java_free(c.java);
	free(c.unwind_queue);
	if (c.sender)
		agent_sender_free(c.sender);
	agent_otlp_exporter_free(c.otlp);
	agent_otlp_knames_free(c.otlp_knames);
	if (c.out) {
		int cr = agent_output_close(c.out);
		if (cr < 0 && r == 0) {
			sr_log_error("agent", "writing the output file failed", "path=\"%s\" error=\"%s\"",
				     opts->output, strerror(-cr));
			r = cr;
		}
	}
	agent_agg_free(c.agg);
	agent_procs_free(c.procs);
	agent_perf_map_cache_free(c.perfmaps);
	agent_store_free(c.store);
	agent_kernel_done(&c.kernel);
	free(c.bpf_lost_per_cpu);
	free(pids);
	free(cgroups);
	pthread_mutex_destroy(&c.lock);
	return r;
}
