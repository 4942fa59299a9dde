// SPDX-License-Identifier: Apache-2.0
/*
 * The agent's /metrics page (Prometheus text format): the snapshot of the
 * loop's counters taken under its lock (agent_run_render_metrics()), and the
 * page rendered from it.
 */
#include <inttypes.h>
#include <malloc.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/fileio.h"
#include "common/version.h"
#include "agent.h"
#include "memstats.h"
#include "java.h"
#include "nodejs.h"
#include "privs.h"
#include "parse-limits.h"
#include "proc.h"
#include "python.h"
#include "profile.h"
#include "run.h"
#include "run-private.h"
#include "agent/config.h"
#include "agent/otlp-export.h"
#include "definition-store.h"
#include "unwinder.h"
#include "util.h"

static uint64_t rss_bytes(void)
{
	char *buf = NULL;
	size_t len;
	unsigned long long pages = 0;

	if (sr_read_file("/proc/self/statm", 4096, &buf, &len) == 0) {
		if (sscanf(buf, "%*u %llu", &pages) != 1)
			pages = 0;
		free(buf);
	}
	return pages * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* The agent's memory itemized: resident pages by kind, and its BPF maps' kernel memory by map. */
static void render_build_info(FILE *f)
{
	fprintf(f,
		"# HELP stackrelay_build_info The build: version, commit (git describe), the agent protocol and the "
		"OTLP profiles versions it speaks; always 1.\n"
		"# TYPE stackrelay_build_info gauge\n"
		"stackrelay_build_info{version=\"%s\",commit=\"%s\",agent_protocol=\"%s\",otlp_profiles=\"%s\"} 1\n",
		sr_version(), sr_git_describe(), SR_AGENT_PROTOCOL_VERSION, SR_OTLP_PROFILES_VERSIONS);
}

static void render_memory(FILE *f)
{
	struct agent_rss rss;
	struct agent_bpf_map_mem maps[48];
	size_t n = 0;

	if (agent_memstats_rss(&rss) == 0)
		fprintf(f,
			"# HELP stackrelay_agent_resident_bytes Resident memory of the agent by kind: BPF map pages "
			"mapped into it (the ring buffer, twice), anonymous memory (heap), files (code).\n"
			"# TYPE stackrelay_agent_resident_bytes gauge\n"
			"stackrelay_agent_resident_bytes{kind=\"bpf_maps\"} %" PRIu64 "\n"
			"stackrelay_agent_resident_bytes{kind=\"anonymous\"} %" PRIu64 "\n"
			"stackrelay_agent_resident_bytes{kind=\"files\"} %" PRIu64 "\n",
			rss.bpf_maps, rss.anonymous, rss.files);
	if (agent_memstats_bpf_maps(maps, sizeof(maps) / sizeof(maps[0]), &n) == 0 && n) {
		fprintf(f, "# HELP stackrelay_agent_bpf_map_bytes Kernel memory of the agent's BPF maps (memlock), by "
			   "map name.\n"
			   "# TYPE stackrelay_agent_bpf_map_bytes gauge\n");
		for (size_t i = 0; i < n; i++)
			fprintf(f, "stackrelay_agent_bpf_map_bytes{map=\"%s\"} %" PRIu64 "\n", maps[i].name,
				maps[i].bytes);
	}
}

/* Files and paths a parser or an open refused, by reason (parse-limits.h). */
static void render_parse_refusals(FILE *f)
{
	uint64_t n[AGENT_PARSE_REFUSAL__MAX];

	agent_parse_refusals(n);
	fprintf(f, "# HELP stackrelay_agent_parse_refused_total Files refused by a parser's limits or an open of a "
		   "container's path, by reason.\n"
		   "# TYPE stackrelay_agent_parse_refused_total counter\n");
	for (int i = 0; i < AGENT_PARSE_REFUSAL__MAX; i++)
		fprintf(f, "stackrelay_agent_parse_refused_total{reason=\"%s\"} %" PRIu64 "\n",
			agent_parse_refusal_names[i], n[i]);
}

/* One stackrelay_agent_cache_<what>{cache} gauge: the field at off of every cache (skip_zero: caches without one). */
static void cache_family(FILE *f, const struct agent_run_metrics *m, const char *what, const char *help, size_t off,
			 bool skip_zero)
{
	fprintf(f, "# HELP stackrelay_agent_cache_%s %s\n# TYPE stackrelay_agent_cache_%s gauge\n", what, help, what);
	for (size_t i = 0; i < m->n_caches; i++) {
		uint64_t v;

		memcpy(&v, (const char *)&m->caches[i] + off, sizeof(v));
		if (v || !skip_zero)
			fprintf(f, "stackrelay_agent_cache_%s{cache=\"%s\"} %" PRIu64 "\n", what, m->caches[i].name, v);
	}
}

static void render_unwinding(FILE *f, const struct agent_run_metrics *m)
{
	static const char *const ends[] = {
		[PROFILE_CNT_UNWIND_END_COMPLETE] = "complete",
		[PROFILE_CNT_UNWIND_END_NO_TABLE] = "no_table",
		[PROFILE_CNT_UNWIND_END_NO_MAPPING] = "no_mapping",
		[PROFILE_CNT_UNWIND_END_EVICTED] = "table_evicted",
		[PROFILE_CNT_UNWIND_END_NO_RULE] = "unsupported_rule",
		[PROFILE_CNT_UNWIND_END_READ_FAULT] = "read_fault",
		[PROFILE_CNT_UNWIND_END_NO_CFI] = "no_cfi",
		[PROFILE_CNT_UNWIND_END_JVM] = "jvm",
		[PROFILE_CNT_UNWIND_END_DEPTH] = "depth",
	};
	static const char *const unattributed[AGENT_UNATTR__MAX] = {
		[AGENT_UNATTR_NO_MAPPING] = "no_mapping",     [AGENT_UNATTR_PROC_GONE] = "process_gone",
		[AGENT_UNATTR_FILE_GONE] = "file_unreadable", [AGENT_UNATTR_NOT_ELF] = "not_elf",
		[AGENT_UNATTR_OTHER_IMAGE] = "other_image",   [AGENT_UNATTR_ANONYMOUS] = "anonymous",
	};

	fprintf(f, "# HELP stackrelay_agent_frames_unattributed_by_reason_total User frames not attributed to a file, "
		   "by reason.\n"
		   "# TYPE stackrelay_agent_frames_unattributed_by_reason_total counter\n");
	for (int i = 0; i < AGENT_UNATTR__MAX; i++)
		fprintf(f, "stackrelay_agent_frames_unattributed_by_reason_total{reason=\"%s\"} %" PRIu64 "\n",
			unattributed[i], m->procs->unattributed[i]);
	fprintf(f,
		"# HELP stackrelay_agent_samples_in_exec_total Samples taken inside execve, kept with their kernel "
		"stack only.\n"
		"# TYPE stackrelay_agent_samples_in_exec_total counter\n"
		"stackrelay_agent_samples_in_exec_total %" PRIu64 "\n",
		m->bpf[PROFILE_CNT_USTACK_IN_EXEC]);
	fprintf(f,
		"# HELP stackrelay_agent_mmap_events_total Executable file mappings reported by the kernel.\n"
		"# TYPE stackrelay_agent_mmap_events_total counter\n"
		"stackrelay_agent_mmap_events_total %" PRIu64 "\n"
		"# HELP stackrelay_agent_mmap_files_total Files first met in a mapping event, by outcome.\n"
		"# TYPE stackrelay_agent_mmap_files_total counter\n"
		"stackrelay_agent_mmap_files_total{outcome=\"identified\"} %" PRIu64 "\n"
		"stackrelay_agent_mmap_files_total{outcome=\"gone\"} %" PRIu64 "\n",
		m->procs->mmap_events, m->procs->mmap_files_identified, m->procs->mmap_files_gone);
	fprintf(f,
		"# HELP stackrelay_agent_unwind_stacks_total User stacks by how they were unwound.\n"
		"# TYPE stackrelay_agent_unwind_stacks_total counter\n"
		"stackrelay_agent_unwind_stacks_total{method=\"table\"} %" PRIu64 "\n"
		"stackrelay_agent_unwind_stacks_total{method=\"fp\"} %" PRIu64 "\n"
		"# HELP stackrelay_agent_unwind_frames_total Frames of table-unwound stacks, by how each was stepped.\n"
		"# TYPE stackrelay_agent_unwind_frames_total counter\n"
		"stackrelay_agent_unwind_frames_total{method=\"table\"} %" PRIu64 "\n"
		"stackrelay_agent_unwind_frames_total{method=\"fp\"} %" PRIu64 "\n",
		m->bpf[PROFILE_CNT_UNWIND_STACKS], m->bpf[PROFILE_CNT_UNWIND_FP_STACKS],
		m->bpf[PROFILE_CNT_UNWIND_TABLE_FRAMES], m->bpf[PROFILE_CNT_UNWIND_FP_FRAMES]);
	fprintf(f, "# HELP stackrelay_agent_unwind_stops_total Why table-unwound stacks ended.\n"
		   "# TYPE stackrelay_agent_unwind_stops_total counter\n");
	for (int i = PROFILE_CNT_UNWIND_END_COMPLETE; i <= PROFILE_CNT_UNWIND_END_DEPTH; i++)
		fprintf(f, "stackrelay_agent_unwind_stops_total{reason=\"%s\"} %" PRIu64 "\n", ends[i], m->bpf[i]);
	if (m->python)
		fprintf(f,
			"# HELP stackrelay_agent_python_stacks_total Table-unwound samples of Python processes, by "
			"whether the thread's current Python frame was found.\n"
			"# TYPE stackrelay_agent_python_stacks_total counter\n"
			"stackrelay_agent_python_stacks_total{result=\"found\"} %" PRIu64 "\n"
			"stackrelay_agent_python_stacks_total{result=\"no_thread_state\"} %" PRIu64 "\n"
			"stackrelay_agent_python_stacks_total{result=\"no_frame\"} %" PRIu64 "\n"
			"# HELP stackrelay_agent_python_frames_total Python frames recorded in BPF.\n"
			"# TYPE stackrelay_agent_python_frames_total counter\n"
			"stackrelay_agent_python_frames_total %" PRIu64 "\n"
			"# HELP stackrelay_agent_python_processes_total Python processes given to the BPF walker.\n"
			"# TYPE stackrelay_agent_python_processes_total counter\n"
			"stackrelay_agent_python_processes_total %" PRIu64 "\n"
			"# HELP stackrelay_agent_python_unsupported_total Interpreters of a version without a layout.\n"
			"# TYPE stackrelay_agent_python_unsupported_total counter\n"
			"stackrelay_agent_python_unsupported_total %" PRIu64 "\n"
			"# HELP stackrelay_agent_python_code_objects Code objects cached "
			"(python.max_code_objects).\n"
			"# TYPE stackrelay_agent_python_code_objects gauge\n"
			"stackrelay_agent_python_code_objects %" PRIu64 "\n"
			"# HELP stackrelay_agent_python_code_reads_total Code objects read into the cache.\n"
			"# TYPE stackrelay_agent_python_code_reads_total counter\n"
			"stackrelay_agent_python_code_reads_total %" PRIu64 "\n"
			"# HELP stackrelay_agent_python_unnamed_frames_total Python frames that could not be named "
			"(not "
			"a code object, or the process was gone before it was read).\n"
			"# TYPE stackrelay_agent_python_unnamed_frames_total counter\n"
			"stackrelay_agent_python_unnamed_frames_total %" PRIu64 "\n",
			m->bpf[PROFILE_CNT_PY_STACKS], m->bpf[PROFILE_CNT_PY_NO_THREAD],
			m->bpf[PROFILE_CNT_PY_NO_FRAME], m->bpf[PROFILE_CNT_PY_FRAMES], m->python->processes,
			m->python->unsupported, m->python->codes_cached, m->python->code_reads,
			m->python->code_read_errors);
	if (m->nodejs)
		fprintf(f,
			"# HELP stackrelay_agent_nodejs_frames_total JavaScript frames recorded in BPF, by whether "
			"the agent named them (unnamed: no SharedFunctionInfo there any more, or the process was "
			"gone before it was read).\n"
			"# TYPE stackrelay_agent_nodejs_frames_total counter\n"
			"stackrelay_agent_nodejs_frames_total{result=\"recorded\"} %" PRIu64 "\n"
			"stackrelay_agent_nodejs_frames_total{result=\"unnamed\"} %" PRIu64 "\n"
			"# HELP stackrelay_agent_nodejs_processes_total Node.js processes given to the BPF namer.\n"
			"# TYPE stackrelay_agent_nodejs_processes_total counter\n"
			"stackrelay_agent_nodejs_processes_total %" PRIu64 "\n"
			"# HELP stackrelay_agent_nodejs_unsupported_total node binaries whose V8 metadata lacks what "
			"the namer needs.\n"
			"# TYPE stackrelay_agent_nodejs_unsupported_total counter\n"
			"stackrelay_agent_nodejs_unsupported_total %" PRIu64 "\n"
			"# HELP stackrelay_agent_nodejs_functions Functions cached (nodejs.max_functions).\n"
			"# TYPE stackrelay_agent_nodejs_functions gauge\n"
			"stackrelay_agent_nodejs_functions %" PRIu64 "\n"
			"# HELP stackrelay_agent_nodejs_function_reads_total Functions described from process "
			"memory, by result.\n"
			"# TYPE stackrelay_agent_nodejs_function_reads_total counter\n"
			"stackrelay_agent_nodejs_function_reads_total{result=\"read\"} %" PRIu64 "\n"
			"stackrelay_agent_nodejs_function_reads_total{result=\"error\"} %" PRIu64 "\n"
			"# HELP stackrelay_agent_nodejs_line_reads_total Lines of interpreted frames' bytecode "
			"offsets read from process memory, by result (error: the frame keeps its function's first "
			"line).\n"
			"# TYPE stackrelay_agent_nodejs_line_reads_total counter\n"
			"stackrelay_agent_nodejs_line_reads_total{result=\"read\"} %" PRIu64 "\n"
			"stackrelay_agent_nodejs_line_reads_total{result=\"error\"} %" PRIu64 "\n"
			"# HELP stackrelay_agent_nodejs_code_reads_total Optimized frames' pc offsets mapped to "
			"functions and lines from process memory, by result (no_line: past the code's positions, "
			"the frame keeps its function's first line; error: no optimized code there).\n"
			"# TYPE stackrelay_agent_nodejs_code_reads_total counter\n"
			"stackrelay_agent_nodejs_code_reads_total{result=\"read\"} %" PRIu64 "\n"
			"stackrelay_agent_nodejs_code_reads_total{result=\"no_line\"} %" PRIu64 "\n"
			"stackrelay_agent_nodejs_code_reads_total{result=\"error\"} %" PRIu64 "\n"
			"# HELP stackrelay_agent_nodejs_inlined_frames_total Frames of functions TurboFan inlined, "
			"exported as frames of their own.\n"
			"# TYPE stackrelay_agent_nodejs_inlined_frames_total counter\n"
			"stackrelay_agent_nodejs_inlined_frames_total %" PRIu64 "\n"
			"# HELP stackrelay_agent_nodejs_code_layouts_total Node.js processes that taught where V8 "
			"keeps a Code's instruction size (learned, from a builtin they run; until then their "
			"optimized frames carry their function's first line), and those whose Codes then failed "
			"the layout's checks (refused: their optimized frames are named by function again).\n"
			"# TYPE stackrelay_agent_nodejs_code_layouts_total counter\n"
			"stackrelay_agent_nodejs_code_layouts_total{result=\"learned\"} %" PRIu64 "\n"
			"stackrelay_agent_nodejs_code_layouts_total{result=\"refused\"} %" PRIu64 "\n",
			m->bpf[PROFILE_CNT_V8_FRAMES], m->run->v8_unnamed_frames, m->nodejs->processes,
			m->nodejs->unsupported, m->nodejs->functions_cached, m->nodejs->function_reads,
			m->nodejs->function_read_errors, m->nodejs->line_reads, m->nodejs->line_read_errors,
			m->nodejs->code_reads - m->nodejs->code_read_errors - m->nodejs->code_lines_unknown,
			m->nodejs->code_lines_unknown, m->nodejs->code_read_errors, m->nodejs->inlined_frames,
			m->nodejs->code_layouts_learned, m->nodejs->code_layouts_refused);
	if (m->n_caches) {
		cache_family(f, m, "entries",
			     "Entries each of the agent's caches holds now (one that stays at its limit is full, not "
			     "leaking).",
			     offsetof(struct agent_cache_gauge, entries), false);
		cache_family(f, m, "limit", "The bound of each cache, in entries.",
			     offsetof(struct agent_cache_gauge, limit), true);
		cache_family(f, m, "bytes",
			     "Memory each cache holds now, with its own tables (heap; for unwind_tables, the kernel's "
			     "BPF map memory).",
			     offsetof(struct agent_cache_gauge, bytes), false);
	}
	fprintf(f,
		"# HELP stackrelay_agent_heap_bytes malloc's one arena, which every thread of the agent allocates "
		"from: in use, and held but free.\n"
		"# TYPE stackrelay_agent_heap_bytes gauge\n"
		"stackrelay_agent_heap_bytes{state=\"in_use\"} %" PRIu64 "\n"
		"stackrelay_agent_heap_bytes{state=\"free\"} %" PRIu64 "\n",
		m->heap_in_use, m->heap_free);
	if (m->java)
		fprintf(f,
			"# HELP stackrelay_agent_java_frames_total Java frames: recorded in BPF (one a compiled or "
			"interpreted frame), exported (inlined methods are frames of their own), or recorded but "
			"not named (the code or method was gone before it was read).\n"
			"# TYPE stackrelay_agent_java_frames_total counter\n"
			"stackrelay_agent_java_frames_total{result=\"recorded\"} %" PRIu64 "\n"
			"stackrelay_agent_java_frames_total{result=\"exported\"} %" PRIu64 "\n"
			"stackrelay_agent_java_frames_total{result=\"unnamed\"} %" PRIu64 "\n"
			"# HELP stackrelay_agent_java_processes_total JVMs given to the BPF walker.\n"
			"# TYPE stackrelay_agent_java_processes_total counter\n"
			"stackrelay_agent_java_processes_total %" PRIu64 "\n"
			"# HELP stackrelay_agent_java_not_understood_total JVMs whose layout tables lack what the "
			"walker needs (their stacks are unwound as native code).\n"
			"# TYPE stackrelay_agent_java_not_understood_total counter\n"
			"stackrelay_agent_java_not_understood_total %" PRIu64 "\n"
			"# HELP stackrelay_agent_java_methods Java methods named in the cache (java.max_methods).\n"
			"# TYPE stackrelay_agent_java_methods gauge\n"
			"stackrelay_agent_java_methods %" PRIu64 "\n"
			"# HELP stackrelay_agent_java_method_reads_total Methods read from JVMs' memory, by result.\n"
			"# TYPE stackrelay_agent_java_method_reads_total counter\n"
			"stackrelay_agent_java_method_reads_total{result=\"read\"} %" PRIu64 "\n"
			"stackrelay_agent_java_method_reads_total{result=\"error\"} %" PRIu64 "\n"
			"# HELP stackrelay_agent_java_compiled_stale_total Compiled frames whose code was freed or "
			"replaced before the agent read it.\n"
			"# TYPE stackrelay_agent_java_compiled_stale_total counter\n"
			"stackrelay_agent_java_compiled_stale_total %" PRIu64 "\n",
			m->bpf[PROFILE_CNT_JVM_FRAMES], m->run->java_frames, m->run->java_unnamed_frames,
			m->java->processes, m->java->not_understood, m->java->methods_cached, m->java->method_reads,
			m->java->method_read_errors, m->java->compiled_stale);
	if (!m->unwinder)
		return;
	fprintf(f,
		"# HELP stackrelay_agent_unwind_tables Unwind tables loaded in the kernel.\n"
		"# TYPE stackrelay_agent_unwind_tables gauge\n"
		"stackrelay_agent_unwind_tables %" PRIu64 "\n"
		"# HELP stackrelay_agent_unwind_table_bytes Kernel memory of the loaded tables "
		"(profiling.unwind_table_memory bounds it).\n"
		"# TYPE stackrelay_agent_unwind_table_bytes gauge\n"
		"stackrelay_agent_unwind_table_bytes %" PRIu64 "\n"
		"# HELP stackrelay_agent_unwind_table_rows Rows of the loaded tables.\n"
		"# TYPE stackrelay_agent_unwind_table_rows gauge\n"
		"stackrelay_agent_unwind_table_rows %" PRIu64 "\n"
		"# HELP stackrelay_agent_unwind_tables_built_total Tables built from .eh_frame/.debug_frame.\n"
		"# TYPE stackrelay_agent_unwind_tables_built_total counter\n"
		"stackrelay_agent_unwind_tables_built_total %" PRIu64 "\n"
		"# HELP stackrelay_agent_unwind_tables_evicted_total Tables evicted to stay within memory.\n"
		"# TYPE stackrelay_agent_unwind_tables_evicted_total counter\n"
		"stackrelay_agent_unwind_tables_evicted_total %" PRIu64 "\n"
		"# HELP stackrelay_agent_unwind_build_seconds_total Time spent building and loading tables.\n"
		"# TYPE stackrelay_agent_unwind_build_seconds_total counter\n"
		"stackrelay_agent_unwind_build_seconds_total %.6f\n"
		"# HELP stackrelay_agent_unwind_mappings_truncated_total Mappings past the per-process limit.\n"
		"# TYPE stackrelay_agent_unwind_mappings_truncated_total counter\n"
		"stackrelay_agent_unwind_mappings_truncated_total %" PRIu64 "\n",
		m->unwinder->tables, m->unwinder->table_bytes, m->unwinder->table_rows, m->unwinder->tables_built,
		m->unwinder->tables_evicted, (double)m->unwinder->build_ns / 1e9, m->unwinder->mappings_truncated);
	fprintf(f, "# HELP stackrelay_agent_unwind_no_table_total Files left to frame pointers, by reason.\n"
		   "# TYPE stackrelay_agent_unwind_no_table_total counter\n");
	for (int i = 0; i < AGENT_UNWIND_NT__MAX; i++)
		fprintf(f, "stackrelay_agent_unwind_no_table_total{reason=\"%s\"} %" PRIu64 "\n",
			agent_unwind_no_table_names[i], m->unwinder->no_table[i]);
}

/* Off-CPU waits (bpf/offcpu.bpf.h): recorded, skipped by reason, lost, and their time. */
static void render_off_cpu(FILE *f, const struct agent_run_metrics *m)
{
	static const char *const skipped[] = {
		[PROFILE_CNT_OFF_CPU_SKIP_IDLE] = "idle",
		[PROFILE_CNT_OFF_CPU_SKIP_KTHREAD] = "kernel_thread",
		[PROFILE_CNT_OFF_CPU_SKIP_PID] = "pid",
		[PROFILE_CNT_OFF_CPU_SKIP_CGROUP] = "cgroup",
		[PROFILE_CNT_OFF_CPU_SKIP_PROBABILITY] = "probability",
		[PROFILE_CNT_OFF_CPU_SKIP_SHORT] = "min_block",
		[PROFILE_CNT_OFF_CPU_SKIP_RATE] = "rate",
		[PROFILE_CNT_OFF_CPU_SKIP_NO_STORAGE] = "no_storage",
	};

	fprintf(f,
		"# HELP stackrelay_agent_off_cpu_events_total Off-CPU waits whose stacks BPF took (off_cpu).\n"
		"# TYPE stackrelay_agent_off_cpu_events_total counter\n"
		"stackrelay_agent_off_cpu_events_total %" PRIu64 "\n"
		"# HELP stackrelay_agent_off_cpu_lost_total Off-CPU waits lost because the ring buffer was full.\n"
		"# TYPE stackrelay_agent_off_cpu_lost_total counter\n"
		"stackrelay_agent_off_cpu_lost_total %" PRIu64 "\n"
		"# HELP stackrelay_agent_off_cpu_seconds_total Off-CPU time aggregated (scaled by 1/probability).\n"
		"# TYPE stackrelay_agent_off_cpu_seconds_total counter\n"
		"stackrelay_agent_off_cpu_seconds_total %.9f\n",
		m->bpf[PROFILE_CNT_OFF_CPU_EVENTS], m->bpf[PROFILE_CNT_OFF_CPU_LOST_RINGBUF],
		(double)m->run->off_cpu_ns / 1e9);
	fprintf(f, "# HELP stackrelay_agent_off_cpu_skipped_total Context switches or waits skipped in BPF, by "
		   "reason.\n"
		   "# TYPE stackrelay_agent_off_cpu_skipped_total counter\n");
	for (int i = PROFILE_CNT_OFF_CPU_SKIP_IDLE; i <= PROFILE_CNT_OFF_CPU_SKIP_NO_STORAGE; i++)
		fprintf(f, "stackrelay_agent_off_cpu_skipped_total{reason=\"%s\"} %" PRIu64 "\n", skipped[i],
			m->bpf[i]);
}

static void render_jit(FILE *f, const struct agent_run_metrics *m)
{
	static const char *const results[AGENT_JIT__MAX] = {
		[AGENT_JIT_NAMED] = "named",
		[AGENT_JIT_NO_PERF_MAP] = "no_perf_map",
		[AGENT_JIT_NOT_IN_PERF_MAP] = "not_in_perf_map",
		[AGENT_JIT_LIMIT] = "limit",
		[AGENT_JIT_DISABLED] = "disabled",
	};
	const struct agent_perf_map_cache_stats *p = m->perfmaps;

	fprintf(f, "# HELP stackrelay_agent_jit_frames_total Frames in anonymous executable memory (JIT code), by "
		   "whether a perf map named them; the others stay unnamed.\n"
		   "# TYPE stackrelay_agent_jit_frames_total counter\n");
	for (int i = 0; i < AGENT_JIT__MAX; i++)
		fprintf(f, "stackrelay_agent_jit_frames_total{result=\"%s\"} %" PRIu64 "\n", results[i],
			m->run->jit_frames[i]);
	if (!p)
		return;
	fprintf(f,
		"# HELP stackrelay_agent_perf_map_processes Processes whose perf maps are held (or looked for).\n"
		"# TYPE stackrelay_agent_perf_map_processes gauge\n"
		"stackrelay_agent_perf_map_processes %" PRIu64 "\n"
		"# HELP stackrelay_agent_perf_map_entries Perf map entries held.\n"
		"# TYPE stackrelay_agent_perf_map_entries gauge\n"
		"stackrelay_agent_perf_map_entries %" PRIu64 "\n"
		"# HELP stackrelay_agent_perf_map_memory_bytes Memory the perf maps take.\n"
		"# TYPE stackrelay_agent_perf_map_memory_bytes gauge\n"
		"stackrelay_agent_perf_map_memory_bytes %" PRIu64 "\n"
		"# HELP stackrelay_agent_perf_map_read_bytes_total Bytes of perf maps read.\n"
		"# TYPE stackrelay_agent_perf_map_read_bytes_total counter\n"
		"stackrelay_agent_perf_map_read_bytes_total %" PRIu64 "\n"
		"# HELP stackrelay_agent_perf_map_bad_lines_total Perf map lines skipped: not START SIZE NAME, or too "
		"long.\n"
		"# TYPE stackrelay_agent_perf_map_bad_lines_total counter\n"
		"stackrelay_agent_perf_map_bad_lines_total %" PRIu64 "\n"
		"# HELP stackrelay_agent_perf_map_processes_forgotten_total Perf maps dropped for "
		"perf_maps.max_processes.\n"
		"# TYPE stackrelay_agent_perf_map_processes_forgotten_total counter\n"
		"stackrelay_agent_perf_map_processes_forgotten_total %" PRIu64 "\n",
		p->processes, p->entries, p->memory_bytes, p->bytes_read, p->bad_lines, p->processes_forgotten);
}

/* The capabilities the agent holds now (read live: they are the metrics thread's, like every thread's). */
static void render_privileges(FILE *f, const struct agent_run_metrics *m)
{
	static const char *const sets[] = { "effective", "permitted", "bounding" };
	struct agent_privs p;

	fprintf(f,
		"# HELP stackrelay_agent_privileges_dropped 1 when the agent dropped the capabilities only setup "
		"needs and set no_new_privs; 0 with --keep-privileges.\n"
		"# TYPE stackrelay_agent_privileges_dropped gauge\n"
		"stackrelay_agent_privileges_dropped %d\n",
		m->privileges_dropped ? 1 : 0);
	if (agent_privs_read(&p) < 0)
		return;
	fprintf(f, "# HELP stackrelay_agent_capability The agent's capabilities while it profiles: one series per "
		   "capability in each set.\n"
		   "# TYPE stackrelay_agent_capability gauge\n");
	for (size_t i = 0; i < sizeof(sets) / sizeof(sets[0]); i++) {
		uint64_t caps = i == 0 ? p.effective : i == 1 ? p.permitted : p.bounding;

		for (int bit = 0; bit < 64; bit++) {
			const char *name = agent_privs_name(bit);

			if ((caps & AGENT_CAP(bit)) && name)
				fprintf(f, "stackrelay_agent_capability{set=\"%s\",capability=\"%s\"} 1\n", sets[i],
					name);
		}
	}
	fprintf(f,
		"# HELP stackrelay_agent_no_new_privs 1 when no_new_privs is set: no execve can gain privileges.\n"
		"# TYPE stackrelay_agent_no_new_privs gauge\n"
		"stackrelay_agent_no_new_privs %d\n",
		p.no_new_privs ? 1 : 0);
}

void agent_run_metrics_render(FILE *f, const struct agent_run_metrics *m)
{
	static const char *const filtered[] = {
		[PROFILE_CNT_FILTERED_IDLE] = "idle",
		[PROFILE_CNT_FILTERED_KTHREAD] = "kernel_thread",
		[PROFILE_CNT_FILTERED_PID] = "pid",
		[PROFILE_CNT_FILTERED_CGROUP] = "cgroup",
	};
	struct rusage ru;
	double cpu = 0;

	if (getrusage(RUSAGE_SELF, &ru) == 0)
		cpu = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
		      ru.ru_stime.tv_usec / 1e6;
	fprintf(f,
		"# HELP stackrelay_agent_samples_total Samples the BPF program took (after filters).\n"
		"# TYPE stackrelay_agent_samples_total counter\n"
		"stackrelay_agent_samples_total %" PRIu64 "\n",
		m->bpf[PROFILE_CNT_SAMPLES]);
	fprintf(f, "# HELP stackrelay_agent_samples_filtered_total Samples skipped in BPF, by filter.\n"
		   "# TYPE stackrelay_agent_samples_filtered_total counter\n");
	for (int i = PROFILE_CNT_FILTERED_IDLE; i <= PROFILE_CNT_FILTERED_CGROUP; i++)
		fprintf(f, "stackrelay_agent_samples_filtered_total{filter=\"%s\"} %" PRIu64 "\n", filtered[i],
			m->bpf[i]);
	fprintf(f,
		"# HELP stackrelay_agent_samples_lost_total Samples lost because the ring buffer was full, per CPU.\n"
		"# TYPE stackrelay_agent_samples_lost_total counter\n");
	for (int i = 0; i < m->n_cpus; i++)
		fprintf(f, "stackrelay_agent_samples_lost_total{cpu=\"%d\"} %" PRIu64 "\n", i,
			m->bpf_lost_per_cpu ? m->bpf_lost_per_cpu[i] : 0);
	fprintf(f,
		"# HELP stackrelay_agent_stack_errors_total bpf_get_stack() failures, by stack.\n"
		"# TYPE stackrelay_agent_stack_errors_total counter\n"
		"stackrelay_agent_stack_errors_total{stack=\"kernel\"} %" PRIu64 "\n"
		"stackrelay_agent_stack_errors_total{stack=\"user\"} %" PRIu64 "\n",
		m->bpf[PROFILE_CNT_KSTACK_ERR], m->bpf[PROFILE_CNT_USTACK_ERR]);
	fprintf(f,
		"# HELP stackrelay_agent_task_events_lost_total Exec/exit records lost (ring buffer full).\n"
		"# TYPE stackrelay_agent_task_events_lost_total counter\n"
		"stackrelay_agent_task_events_lost_total %" PRIu64 "\n",
		m->bpf[PROFILE_CNT_TASK_EVENTS_LOST]);
	render_off_cpu(f, m);
	fprintf(f,
		"# HELP stackrelay_agent_samples_exported_total Sample counts handed to output/sender.\n"
		"# TYPE stackrelay_agent_samples_exported_total counter\n"
		"stackrelay_agent_samples_exported_total %" PRIu64 "\n",
		m->run->samples_exported);
	fprintf(f,
		"# HELP stackrelay_agent_samples_dropped_total Samples dropped in user space, by reason.\n"
		"# TYPE stackrelay_agent_samples_dropped_total counter\n"
		"stackrelay_agent_samples_dropped_total{reason=\"stack_error\"} %" PRIu64 "\n"
		"stackrelay_agent_samples_dropped_total{reason=\"overflow\"} %" PRIu64 "\n",
		m->run->dropped_stack_errors, m->run->dropped_overflow);
	fprintf(f,
		"# HELP stackrelay_agent_frames_unattributed_total User frames not in any file mapping (JIT, "
		"anonymous, process gone).\n"
		"# TYPE stackrelay_agent_frames_unattributed_total counter\n"
		"stackrelay_agent_frames_unattributed_total %" PRIu64 "\n",
		m->run->frames_unattributed);
	fprintf(f,
		"# HELP stackrelay_agent_processes Processes in the mapping cache.\n"
		"# TYPE stackrelay_agent_processes gauge\n"
		"stackrelay_agent_processes %" PRIu64 "\n"
		"# HELP stackrelay_agent_executables_cached Files identified (by dev, inode, mtime).\n"
		"# TYPE stackrelay_agent_executables_cached gauge\n"
		"stackrelay_agent_executables_cached %" PRIu64 "\n"
		"# HELP stackrelay_agent_executables_dropped_total Identified files dropped from the cache: no process "
		"mapped them for 6 windows, or it was full (8192); their next mapping identifies them again.\n"
		"# TYPE stackrelay_agent_executables_dropped_total counter\n"
		"stackrelay_agent_executables_dropped_total %" PRIu64 "\n"
		"# HELP stackrelay_agent_maps_reads_total /proc/PID/maps reads.\n"
		"# TYPE stackrelay_agent_maps_reads_total counter\n"
		"stackrelay_agent_maps_reads_total %" PRIu64 "\n"
		"# HELP stackrelay_agent_elf_reads_total ELF files read to identify them.\n"
		"# TYPE stackrelay_agent_elf_reads_total counter\n"
		"stackrelay_agent_elf_reads_total %" PRIu64 "\n",
		m->procs->processes, m->procs->executables_cached, m->procs->files_dropped, m->procs->maps_reads,
		m->procs->elf_reads);
	fprintf(f,
		"# HELP stackrelay_agent_processes_retired_total Processes dropped from the mapping cache, by why: "
		"exited (exit record, or /proc said it is gone), idle (nothing for 6 windows), limit "
		"(profiling.max_processes).\n"
		"# TYPE stackrelay_agent_processes_retired_total counter\n"
		"stackrelay_agent_processes_retired_total{reason=\"exited\"} %" PRIu64 "\n"
		"stackrelay_agent_processes_retired_total{reason=\"idle\"} %" PRIu64 "\n"
		"stackrelay_agent_processes_retired_total{reason=\"limit\"} %" PRIu64 "\n"
		"# HELP stackrelay_agent_task_events_total Exec and exit records read from the ring buffer.\n"
		"# TYPE stackrelay_agent_task_events_total counter\n"
		"stackrelay_agent_task_events_total{type=\"exec\"} %" PRIu64 "\n"
		"stackrelay_agent_task_events_total{type=\"exit\"} %" PRIu64 "\n",
		m->procs->retired_exited, m->procs->retired_idle, m->procs->retired_limit, m->run->execs,
		m->run->exits);
	fprintf(f,
		"# HELP stackrelay_agent_store_stacks Stack definitions held.\n"
		"# TYPE stackrelay_agent_store_stacks gauge\n"
		"stackrelay_agent_store_stacks %" PRIu64 "\n"
		"# HELP stackrelay_agent_store_stacks_evicted_total Stack definitions evicted (max_stacks).\n"
		"# TYPE stackrelay_agent_store_stacks_evicted_total counter\n"
		"stackrelay_agent_store_stacks_evicted_total %" PRIu64 "\n"
		"# HELP stackrelay_agent_store_stacks_expired_total Stack definitions dropped unused for 6 windows, "
		"once nothing queued referred to them.\n"
		"# TYPE stackrelay_agent_store_stacks_expired_total counter\n"
		"stackrelay_agent_store_stacks_expired_total %" PRIu64 "\n"
		"# HELP stackrelay_agent_store_executables Executable definitions held.\n"
		"# TYPE stackrelay_agent_store_executables gauge\n"
		"stackrelay_agent_store_executables %" PRIu64 "\n"
		"# HELP stackrelay_agent_store_executables_freed_total Executable definitions freed once no cached "
		"file nor stored stack named them.\n"
		"# TYPE stackrelay_agent_store_executables_freed_total counter\n"
		"stackrelay_agent_store_executables_freed_total %" PRIu64 "\n"
		"# HELP stackrelay_agent_store_bytes Approximate heap bytes of the definition store.\n"
		"# TYPE stackrelay_agent_store_bytes gauge\n"
		"stackrelay_agent_store_bytes %" PRIu64 "\n",
		m->store->stacks, m->store->stacks_evicted, m->store->stacks_expired, m->store->executables,
		m->store->executables_freed, m->store->bytes);
	fprintf(f,
		"# HELP stackrelay_agent_windows_total Report windows flushed.\n"
		"# TYPE stackrelay_agent_windows_total counter\n"
		"stackrelay_agent_windows_total %" PRIu64 "\n"
		"# HELP stackrelay_agent_heap_trims_total Times the heap's free pages were given back to the system "
		"(at most once a window, when more than 8 MiB of it was free).\n"
		"# TYPE stackrelay_agent_heap_trims_total counter\n"
		"stackrelay_agent_heap_trims_total %" PRIu64 "\n",
		m->run->windows, m->run->heap_trims);
	fprintf(f,
		"# HELP process_cpu_seconds_total User and system CPU time of the agent.\n"
		"# TYPE process_cpu_seconds_total counter\n"
		"process_cpu_seconds_total %.3f\n"
		"# HELP process_resident_memory_bytes Resident memory of the agent.\n"
		"# TYPE process_resident_memory_bytes gauge\n"
		"process_resident_memory_bytes %" PRIu64 "\n",
		cpu, rss_bytes());
	if (m->sender) {
		fprintf(f,
			"# HELP stackrelay_agent_sender_samples_accepted_total Sample counts the gateway accepted.\n"
			"# TYPE stackrelay_agent_sender_samples_accepted_total counter\n"
			"stackrelay_agent_sender_samples_accepted_total %" PRIu64 "\n"
			"# HELP stackrelay_agent_sender_samples_dropped_total Sample counts the sender dropped.\n"
			"# TYPE stackrelay_agent_sender_samples_dropped_total counter\n"
			"stackrelay_agent_sender_samples_dropped_total %" PRIu64 "\n"
			"# HELP stackrelay_agent_sender_buffered_bytes Bytes waiting to be sent.\n"
			"# TYPE stackrelay_agent_sender_buffered_bytes gauge\n"
			"stackrelay_agent_sender_buffered_bytes %" PRIu64 "\n",
			m->sender->samples_accepted, m->sender->samples_dropped, m->sender->buffered_bytes);
	}
	render_unwinding(f, m);
	render_jit(f, m);
	render_memory(f);
	render_build_info(f);
	render_privileges(f, m);
	render_parse_refusals(f);
}

/* The caches that grow with processes, files and code, with their bounds (under the loop's lock). */
static size_t cache_gauges(const struct run_ctx *c, const struct agent_sender_stats *ss, struct agent_cache_gauge *g,
			   size_t cap)
{
	const struct agent_config *cfg = c->cfg;
	size_t n = 0;

#define GAUGE(nm, e, l, b)                                                                                             \
	do {                                                                                                           \
		if (n < cap)                                                                                           \
			g[n++] = (struct agent_cache_gauge){ nm, (e), (l), (b) };                                      \
	} while (0)
	GAUGE("processes", c->procs_stats.processes,
	      cfg->profiling.max_processes ? cfg->profiling.max_processes : AGENT_DEFAULT_MAX_PROCESSES,
	      c->procs_stats.processes_bytes);
	GAUGE("files", c->procs_stats.executables_cached, AGENT_EXE_CACHE_MAX, c->procs_stats.executables_bytes);
	GAUGE("stacks", c->store_stats.stacks, cfg->profiling.max_stacks, c->store_stats.stacks_bytes);
	GAUGE("executables", c->store_stats.executables, AGENT_STORE_MAX_EXECUTABLES, c->store_stats.executables_bytes);
	GAUGE("functions", c->store_stats.functions, AGENT_FUNCTIONS_MAX, c->store_stats.functions_bytes);
	if (c->unwinder)
		GAUGE("unwind_tables", c->unwinder_stats.tables, 0, c->unwinder_stats.table_bytes);
	if (c->perfmaps)
		GAUGE("perf_map_entries", c->perfmaps_stats.entries, 0, c->perfmaps_stats.memory_bytes);
	if (c->python)
		GAUGE("python_code_objects", c->python_stats.codes_cached, cfg->python.max_code_objects,
		      c->python_stats.codes_bytes);
	if (c->nodejs) {
		GAUGE("nodejs_functions", c->nodejs_stats.functions_cached, cfg->nodejs.max_functions,
		      c->nodejs_stats.functions_bytes);
		GAUGE("nodejs_code_objects", c->nodejs_stats.codes_cached, AGENT_NODEJS_MAX_CODES,
		      c->nodejs_stats.codes_bytes);
	}
	if (c->java) {
		GAUGE("java_methods", c->java_stats.methods_cached, cfg->java.max_methods, c->java_stats.methods_bytes);
		GAUGE("java_compiled_pcs", c->java_stats.pcs_cached, AGENT_JAVA_MAX_PCS, c->java_stats.pcs_bytes);
		GAUGE("java_stub_pcs", c->java_stats.stubs_cached, AGENT_JAVA_MAX_STUBS, c->java_stats.stubs_bytes);
	}
	if (ss) {
		GAUGE("sender_sent_ids", ss->sent_ids, ss->sent_ids_limit, ss->sent_ids_bytes);
		GAUGE("sender_symbol_ids", ss->symbol_ids, ss->symbol_ids_limit, ss->symbol_ids_bytes);
	}
#undef GAUGE
	return n;
}

void agent_run_render_metrics(void *ctx, FILE *f)
{
	struct run_ctx *c = ctx;
	struct agent_run_metrics m = { 0 };
	struct agent_sender_stats ss;
	struct agent_cache_gauge caches[20];
	struct mallinfo2 mi = mallinfo2();

	pthread_mutex_lock(&c->lock);
	m.bpf = c->bpf;
	m.bpf_lost_per_cpu = c->bpf_lost_per_cpu;
	m.n_cpus = c->n_cpus;
	m.run = &c->stats_snap;
	m.procs = &c->procs_stats;
	m.store = &c->store_stats;
	m.unwinder = c->unwinder ? &c->unwinder_stats : NULL;
	m.python = c->python ? &c->python_stats : NULL;
	m.nodejs = c->nodejs ? &c->nodejs_stats : NULL;
	m.java = c->java ? &c->java_stats : NULL;
	m.perfmaps = c->perfmaps ? &c->perfmaps_stats : NULL;
	m.privileges_dropped = c->privileges_dropped;
	if (c->sender) {
		agent_sender__stats(c->sender, &ss);
		m.sender = &ss;
	}
	m.caches = caches;
	m.n_caches = cache_gauges(c, m.sender, caches, SR_ARRAY_SIZE(caches));
	m.heap_in_use = mi.uordblks + mi.hblkhd;
	m.heap_free = mi.fordblks;
	agent_run_metrics_render(f, &m);
	if (c->otlp)
		agent_otlp_exporter__render_metrics(c->otlp, f);
	pthread_mutex_unlock(&c->lock);
}
