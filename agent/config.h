/* SPDX-License-Identifier: Apache-2.0 */
/* The agent's configuration file (docs/configuration.md, "Agent"). */
#ifndef SR_AGENT_CONFIG_H
#define SR_AGENT_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "common/config.h"

struct agent_tls_config {
	char *ca_file;
	char *cert_file;
	char *key_file;
	char *server_name;
	bool insecure_skip_verify;
};

struct agent_gateway_config {
	char *endpoint;
	struct agent_tls_config tls;
	char *bearer_token_file;
	int compression; /* index into agent_compression_names */
	uint64_t timeout_ns;
	uint64_t max_connection_age_ns;
	uint64_t buffer_bytes;
	uint64_t flush_timeout_ns;
	uint64_t max_symbol_upload_bytes;
	uint64_t symbol_reupload_after_ns;
};

/* otlp: the agent's own OTLP export (docs/agent.md, "Sending OTLP"); off while endpoint is empty. */
struct agent_otlp_retry_config {
	bool enabled;
	uint64_t initial_interval_ns;
	uint64_t max_interval_ns;
	uint64_t max_elapsed_time_ns;
};

struct agent_otlp_config {
	char *endpoint;
	struct sr_kv *headers;
	uint32_t n_headers;
	struct agent_tls_config tls;
	int compression;   /* index into agent_compression_names */
	int proto_version; /* index into agent_otlp_version_names: enum agent_otlp_version */
	uint64_t timeout_ns;
	uint64_t buffer_bytes;
	uint64_t flush_timeout_ns;
	struct agent_otlp_retry_config retry;
};

struct agent_profiling_config {
	uint64_t frequency_hz;
	uint64_t report_interval_ns;
	char **pids;
	uint32_t n_pids;
	char **cgroups;
	uint32_t n_cgroups;
	bool include_idle;
	bool include_kernel_threads;
	bool kernel_stacks;
	uint64_t ring_buffer_bytes;
	uint64_t max_processes;
	uint64_t max_stacks;
	int unwinding; /* index into agent_unwinding_names */
	uint64_t unwind_table_bytes;
	uint64_t max_section_bytes;  /* parse-limits.h */
	uint64_t max_inflated_bytes; /* parse-limits.h */
	int mapping_hook;	     /* index into agent_mapping_hook_names */
};

enum agent_unwinding { AGENT_UNWIND_AUTO = 0, AGENT_UNWIND_FP = 1 };
/* How new executable mappings are watched (agent/sampler.c tries them in this order under auto). */
enum agent_mapping_hook {
	AGENT_HOOK_AUTO = 0,
	AGENT_HOOK_FEXIT,
	AGENT_HOOK_TRACEPOINT,
	AGENT_HOOK_KRETPROBE,
	AGENT_HOOK_SYS_EXIT,
	AGENT_HOOK_NONE,
};

/* off_cpu: where threads wait (docs/agent.md, "Off-CPU profiling"). */
struct agent_off_cpu_config {
	bool enabled;
	uint64_t min_block_ns;
	double probability;
	uint64_t max_events_per_second; /* per CPU */
};

/* python: CPython frames by name (docs/agent.md, "Runtimes: Python frames by name"). */
struct agent_python_config {
	bool enabled;
	uint64_t max_code_objects;
};

/* nodejs: V8 JavaScript frames by name (docs/agent.md, "Runtimes: Node.js frames by name"). */
struct agent_nodejs_config {
	bool enabled;
	uint64_t max_functions;
};

/* java: HotSpot Java frames by name (docs/agent.md, "Runtimes: Java frames by name"). */
struct agent_java_config {
	bool enabled;
	uint64_t max_methods;
};

/* perf_maps: names of JIT code from /tmp/perf-PID.map (docs/agent.md, "JIT code: perf maps"). */
struct agent_perf_maps_config {
	bool enabled;
	uint64_t max_bytes_per_process;
	uint64_t max_entries_per_process;
	uint64_t max_processes;
};

struct agent_telemetry_config {
	char *metrics_address;
	int log_level; /* enum sr_log_level */
};

struct agent_config {
	char *node_name;
	struct agent_gateway_config gateway;
	struct agent_otlp_config otlp;
	struct agent_profiling_config profiling;
	struct agent_off_cpu_config off_cpu;
	struct agent_python_config python;
	struct agent_nodejs_config nodejs;
	struct agent_java_config java;
	struct agent_perf_maps_config perf_maps;
	char *output;
	struct agent_telemetry_config telemetry;
};

extern const char *const agent_compression_names[];
extern const char *const agent_otlp_version_names[];
extern const char *const agent_unwinding_names[];
extern const char *const agent_mapping_hook_names[];
extern const struct sr_field agent_config_fields[];

#endif
