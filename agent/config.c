// SPDX-License-Identifier: Apache-2.0
/* The agent's configuration schema: the single source of its defaults and docs. */
#include <stddef.h>

#include "agent/config.h"

const char *const agent_compression_names[] = { "gzip", "none", NULL };
/* Indices are enum agent_otlp_version (otlp-encode.h). */
const char *const agent_otlp_version_names[] = { "1.10", "1.9", NULL };
const char *const agent_unwinding_names[] = { "auto", "fp", NULL };
const char *const agent_mapping_hook_names[] = { "auto", "fexit", "tracepoint", "kretprobe", "sys_exit", "none", NULL };
static const char *const log_level_names[] = { "error", "warn", "info", "debug", "trace", NULL };

static const struct sr_field tls_fields[] = {
	SR_FIELD_STR("ca_file", struct agent_tls_config, ca_file,
		     .doc = "CA bundle (PEM) that signs the server's certificate; empty: the system's CAs."),
	SR_FIELD_STR("cert_file", struct agent_tls_config, cert_file,
		     .doc = "Client certificate (PEM) for mTLS; needs key_file."),
	SR_FIELD_STR("key_file", struct agent_tls_config, key_file, .doc = "Private key (PEM) of cert_file."),
	SR_FIELD_STR("server_name", struct agent_tls_config, server_name,
		     .doc = "Name to verify in the server's certificate (and send as SNI); empty: the endpoint's "
			    "host."),
	SR_FIELD_BOOLEAN("insecure_skip_verify", struct agent_tls_config, insecure_skip_verify, .def = "false",
			 .doc = "Do not verify the server's certificate. For tests only."),
	SR_FIELD_END,
};

static const struct sr_field gateway_fields[] = {
	SR_FIELD_STR("endpoint", struct agent_gateway_config, endpoint, .def = "http://127.0.0.1:7480",
		     .doc = "Gateway URL: http:// for HTTP/2 without TLS (h2c), https:// for HTTP/2 over TLS."),
	SR_FIELD_MAP("tls", struct agent_gateway_config, tls, struct agent_tls_config, tls_fields,
		     .doc = "TLS settings for https:// endpoints."),
	SR_FIELD_STR("bearer_token_file", struct agent_gateway_config, bearer_token_file,
		     .doc = "File holding a bearer token sent as `Authorization: Bearer`; re-read every minute."),
	SR_FIELD_ENUMERATION("compression", struct agent_gateway_config, compression, agent_compression_names,
			     .def = "gzip", .doc = "Request body compression."),
	SR_FIELD_DUR("timeout", struct agent_gateway_config, timeout_ns, .def = "10s", .min = 100 * 1000000LL,
		     .max = 600 * 1000000000LL, .doc = "Time one request may take before it is abandoned and retried."),
	SR_FIELD_DUR("max_connection_age", struct agent_gateway_config, max_connection_age_ns, .def = "10m",
		     .doc = "Reconnect after this long so agents spread over gateway replicas behind a load "
			    "balancer; 0 keeps one connection."),
	SR_FIELD_BYTES("buffer_size", struct agent_gateway_config, buffer_bytes, .def = "64MiB", .min = 64 * 1024,
		       .max = 16LL << 30,
		       .doc = "Memory held for unsent samples (about each sample's struct plus twice its encoded size) "
			      "while the gateway is slow or away; beyond it the oldest are dropped and counted."),
	SR_FIELD_DUR("flush_timeout", struct agent_gateway_config, flush_timeout_ns, .def = "30s",
		     .doc = "On exit, how long to keep sending what is buffered, missing definitions and wanted "
			    "symbols."),
	SR_FIELD_BYTES("max_symbol_upload_size", struct agent_gateway_config, max_symbol_upload_bytes, .def = "8MiB",
		       .min = 4096, .max = 1LL << 30,
		       .doc = "Largest symbol table uploaded for one executable; keep it below the gateway receiver's "
			      "max_request_bytes (32MiB)."),
	SR_FIELD_DUR("symbol_reupload_after", struct agent_gateway_config, symbol_reupload_after_ns, .def = "1m",
		     .max = 24 * 3600 * 1000000000LL,
		     .doc = "A symbol table a gateway wants again (another replica, a restart, an eviction) is "
			    "uploaded again once this has passed since the last upload, then after twice that, "
			    "and so on up to once an hour; 0 uploads each table once per agent lifetime."),
	SR_FIELD_END,
};

static const struct sr_field otlp_retry_fields[] = {
	SR_FIELD_BOOLEAN("enabled", struct agent_otlp_retry_config, enabled, .def = "true",
			 .doc = "Retry requests that failed retryably (connection errors, timeouts, 429, 500, 502, "
				"503, 504); false: such a request is dropped and counted."),
	SR_FIELD_DUR("initial_interval", struct agent_otlp_retry_config, initial_interval_ns, .def = "5s",
		     .min = 10 * 1000000LL, .max = 600 * 1000000000LL,
		     .doc = "Wait before the first retry; each next wait is 1.5 times longer, drawn within +-50%, "
			    "and a Retry-After header (seconds or an HTTP date, at most 5m) replaces it."),
	SR_FIELD_DUR("max_interval", struct agent_otlp_retry_config, max_interval_ns, .def = "30s",
		     .min = 10 * 1000000LL, .max = 3600 * 1000000000LL, .doc = "Longest wait between attempts."),
	SR_FIELD_DUR("max_elapsed_time", struct agent_otlp_retry_config, max_elapsed_time_ns, .def = "5m",
		     .max = 24 * 3600 * 1000000000LL,
		     .doc = "A request still failing this long after its first attempt is dropped and counted; 0: "
			    "retried until the buffer needs its room."),
	SR_FIELD_END,
};

static const struct sr_field otlp_fields[] = {
	SR_FIELD_STR("endpoint", struct agent_otlp_config, endpoint,
		     .doc = "OTLP/HTTP endpoint (an OpenTelemetry Collector's otlp receiver, port 4318, Pyroscope, "
			    "port 4040, or a stackrelay gateway's otlp receiver): http:// or https://; "
			    "/v1development/profiles is appended. Empty: no OTLP export. Set, it replaces the "
			    "gateway unless gateway.endpoint (or --gateway) is set too."),
	SR_FIELD_STRMAP("headers", struct agent_otlp_config, headers, n_headers, .min = 0, .max = 64,
			.doc = "Headers sent with every request, e.g. Authorization or X-Scope-OrgID (a Pyroscope "
			       "tenant); values may use ${env:NAME} and ${file:PATH}."),
	SR_FIELD_MAP("tls", struct agent_otlp_config, tls, struct agent_tls_config, tls_fields,
		     .doc = "TLS settings for https:// endpoints."),
	SR_FIELD_ENUMERATION("compression", struct agent_otlp_config, compression, agent_compression_names,
			     .def = "gzip", .doc = "Request body compression (Content-Encoding)."),
	SR_FIELD_ENUMERATION("proto_version", struct agent_otlp_config, proto_version, agent_otlp_version_names,
			     .def = "1.10",
			     .doc = "OTLP profiles version: 1.10 (v1.10.0: Collector 0.148 and later, Pyroscope 1.20 "
				    "and later) or 1.9 (v1.9.0: Collector 0.140-0.147, Pyroscope 1.18-1.19)."),
	SR_FIELD_DUR("timeout", struct agent_otlp_config, timeout_ns, .def = "10s", .min = 100 * 1000000LL,
		     .max = 600 * 1000000000LL, .doc = "Time one request may take before it counts as failed."),
	SR_FIELD_BYTES("buffer_size", struct agent_otlp_config, buffer_bytes, .def = "32MiB", .min = 64 * 1024,
		       .max = 16LL << 30,
		       .doc = "Encoded requests held while the endpoint is slow or away; beyond it the oldest "
			      "waiting request is dropped and its samples counted "
			      "(stackrelay_agent_otlp_samples_dropped_total{reason=\"buffer_full\"})."),
	SR_FIELD_DUR("flush_timeout", struct agent_otlp_config, flush_timeout_ns, .def = "30s",
		     .doc = "On exit, how long to keep sending what is queued."),
	SR_FIELD_MAP("retry_on_failure", struct agent_otlp_config, retry, struct agent_otlp_retry_config,
		     otlp_retry_fields, .doc = "Retries with backoff, as the Collector's exporters do."),
	SR_FIELD_END,
};

static const struct sr_field profiling_fields[] = {
	SR_FIELD_U64("frequency", struct agent_profiling_config, frequency_hz, .def = "19", .min = 1, .max = 1000,
		     .doc = "Samples per second per CPU. 19 Hz avoids lockstep with periodic work."),
	SR_FIELD_DUR("report_interval", struct agent_profiling_config, report_interval_ns, .def = "10s",
		     .min = 1000000000LL, .max = 600 * 1000000000LL,
		     .doc = "Samples are aggregated and sent once per interval."),
	SR_FIELD_STRLIST("pids", struct agent_profiling_config, pids, n_pids, .min = 0, .max = 1024,
			 .doc = "Only profile these process IDs (empty: every process)."),
	SR_FIELD_STRLIST("cgroups", struct agent_profiling_config, cgroups, n_cgroups, .min = 0, .max = 1024,
			 .doc = "Only profile processes in these cgroup v2 directories (absolute, or relative to "
				"/sys/fs/cgroup); empty: every cgroup."),
	SR_FIELD_BOOLEAN("include_idle", struct agent_profiling_config, include_idle, .def = "false",
			 .doc = "Also record the idle task (pid 0)."),
	SR_FIELD_BOOLEAN("include_kernel_threads", struct agent_profiling_config, include_kernel_threads, .def = "true",
			 .doc = "Record kernel threads (kworker, ksoftirqd, ...)."),
	SR_FIELD_BOOLEAN("kernel_stacks", struct agent_profiling_config, kernel_stacks, .def = "true",
			 .doc = "Record kernel stacks as well as user stacks."),
	SR_FIELD_BYTES("ring_buffer_size", struct agent_profiling_config, ring_buffer_bytes, .def = "auto",
		       .min = 256 * 1024, .max = 1LL << 30, .auto_zero = true,
		       .doc = "BPF ring buffer shared by all CPUs (rounded up to a power of two); samples that "
			      "do not fit are counted as lost. auto: one second of samples at the frequency on "
			      "every CPU, 1MiB to 64MiB (1MiB at 19 Hz on up to 25 CPUs)."),
	SR_FIELD_U64("max_processes", struct agent_profiling_config, max_processes, .def = "32768", .min = 16,
		     .max = 4194304, .doc = "Processes whose mappings are cached at once."),
	SR_FIELD_U64("max_stacks", struct agent_profiling_config, max_stacks, .def = "50000", .min = 1024,
		     .max = 100000000,
		     .doc = "Distinct stacks whose definitions are kept for resending (about 450 bytes each at 25 "
			    "frames, so the default stays near 22 MiB)."),
	SR_FIELD_ENUMERATION("unwinding", struct agent_profiling_config, unwinding, agent_unwinding_names,
			     .def = "auto",
			     .doc = "How user stacks are unwound. auto: with tables built from each executable's "
				    ".eh_frame where the kernel allows it (x86-64), by frame pointers where a file has "
				    "no table; fp: frame pointers only (stacks through code built without them stop "
				    "early)."),
	SR_FIELD_BYTES("unwind_table_memory", struct agent_profiling_config, unwind_table_bytes, .def = "64MiB",
		       .min = 1 << 20, .max = 16LL << 30,
		       .doc = "Kernel memory for unwind tables (8 bytes a row; libc needs about 0.3 MiB, "
			      "libLLVM about 10 MiB). Least recently used tables are evicted beyond it."),
	SR_FIELD_BYTES("max_section_size", struct agent_profiling_config, max_section_bytes, .def = "64MiB",
		       .min = 1 << 20, .max = 1LL << 30,
		       .doc = "Largest section of a mapped file the agent reads into memory (.eh_frame, .symtab, "
			      ".dynsym, .gopclntab, a compressed section's bytes); a file with a larger one is "
			      "refused and counted (stackrelay_agent_parse_refused_total, docs/security.md)."),
	SR_FIELD_BYTES("max_inflated_size", struct agent_profiling_config, max_inflated_bytes, .def = "32MiB",
		       .min = 1 << 20, .max = 1LL << 30,
		       .doc = "Largest size a compressed section (.debug_frame) may inflate to, checked against what "
			      "its header declares before anything is inflated; also refused: more than 64 times "
			      "its compressed size."),
	SR_FIELD_ENUMERATION(
		"mapping_hook", struct agent_profiling_config, mapping_hook, agent_mapping_hook_names, .def = "auto",
		.doc = "Where new executable mappings are watched. auto: the first the kernel allows of "
		       "fexit (vm_mmap_pgoff's return), tracepoint (syscalls/sys_exit_mmap; needs tracefs "
		       "mounted), kretprobe (vm_mmap_pgoff), sys_exit (the raw system-call exit "
		       "tracepoint: runs for every system call, about 0.1-0.2 us each); none: mappings are "
		       "read from /proc only (short-lived processes lose frames). Naming one uses only it."),
	SR_FIELD_END,
};

static const struct sr_field off_cpu_fields[] = {
	SR_FIELD_BOOLEAN("enabled", struct agent_off_cpu_config, enabled, .def = "false",
			 .doc = "Record where threads wait as well as where they run: a second profile, off-CPU time "
				"in nanoseconds, with the stack each thread left the CPU from (the same filters and "
				"unwinding as CPU samples)."),
	SR_FIELD_DUR("min_block", struct agent_off_cpu_config, min_block_ns, .def = "1ms", .min = 0,
		     .max = 3600 * 1000000000LL,
		     .doc = "Waits shorter than this are counted and skipped before any stack is taken."),
	SR_FIELD_DBL("probability", struct agent_off_cpu_config, probability, .def = "1", .min = 0, .max = 1,
		     .doc = "Share of context switches whose wait is measured (above 0, at most 1), drawn when "
			    "the thread leaves the CPU; the times recorded are scaled by 1/probability."),
	SR_FIELD_U64("max_events_per_second", struct agent_off_cpu_config, max_events_per_second, .def = "500",
		     .min = 1, .max = 1000000,
		     .doc = "Waits whose stacks are taken per second on each CPU at most; more are counted and "
			    "skipped."),
	SR_FIELD_END,
};

static const struct sr_field nodejs_fields[] = {
	SR_FIELD_BOOLEAN("enabled", struct agent_nodejs_config, enabled, .def = "true",
			 .doc = "Name the JavaScript frames of Node.js processes (function, script, the "
				"function's first line) from the node binary's V8 metadata, without flags. Needs "
				"table unwinding (profiling.unwinding: auto)."),
	SR_FIELD_U64("max_functions", struct agent_nodejs_config, max_functions, .def = "65536", .min = 1024,
		     .max = 16 * 1024 * 1024,
		     .doc = "JavaScript functions whose names and lines are kept (about 750 bytes each); at the "
			    "bound the least recently used is dropped, and a process's functions go when it exits."),
	SR_FIELD_END,
};

static const struct sr_field java_fields[] = {
	SR_FIELD_BOOLEAN("enabled", struct agent_java_config, enabled, .def = "true",
			 .doc = "Unwind and name the Java frames of HotSpot JVMs (interpreted and compiled, inlined "
				"methods as frames of their own; package.Class.method, file, line) from the JVM's "
				"own layout tables, without flags or a JVM agent. Needs table unwinding "
				"(profiling.unwinding: auto)."),
	SR_FIELD_U64("max_methods", struct agent_java_config, max_methods, .def = "32768", .min = 1024,
		     .max = 16 * 1024 * 1024,
		     .doc = "Java methods whose names are kept (about 230 bytes each); at the bound the least "
			    "recently used is dropped, and a process's methods go when it exits."),
	SR_FIELD_END,
};

static const struct sr_field python_fields[] = {
	SR_FIELD_BOOLEAN("enabled", struct agent_python_config, enabled, .def = "true",
			 .doc = "Name the Python frames of CPython 3.8-3.13 processes (function, file, line), "
				"between the native frames around them. Needs table unwinding "
				"(profiling.unwinding: auto)."),
	SR_FIELD_U64("max_code_objects", struct agent_python_config, max_code_objects, .def = "65536", .min = 1024,
		     .max = 16 * 1024 * 1024,
		     .doc = "Python code objects whose names and line tables are kept (about 300 bytes each "
			    "plus the line table); at the bound the least recently used is dropped, and a "
			    "process's code objects go when it exits."),
	SR_FIELD_END,
};

static const struct sr_field perf_maps_fields[] = {
	SR_FIELD_BOOLEAN("enabled", struct agent_perf_maps_config, enabled, .def = "true",
			 .doc = "Name frames in anonymous executable memory (JIT code) from the process's "
				"/tmp/perf-PID.map, read inside its mount namespace: Node.js --perf-basic-prof, JVM "
				"perf-map agents, .NET DOTNET_PerfMapEnabled=1. Frames the map does not cover stay "
				"unnamed."),
	SR_FIELD_BYTES("max_bytes_per_process", struct agent_perf_maps_config, max_bytes_per_process, .def = "8MiB",
		       .min = 4096, .max = 1LL << 30,
		       .doc = "Bytes of one process's perf map read at most (maps only grow); past it the process's "
			      "later JIT code stays unnamed."),
	SR_FIELD_U64("max_entries_per_process", struct agent_perf_maps_config, max_entries_per_process, .def = "65536",
		     .min = 16, .max = 16777216,
		     .doc = "Perf map entries kept per process (24 bytes each plus the name)."),
	SR_FIELD_U64("max_processes", struct agent_perf_maps_config, max_processes, .def = "64", .min = 1, .max = 65536,
		     .doc = "Processes whose perf maps are kept at once; the least recently sampled one is "
			    "forgotten for another. Memory is at most max_processes x (max_bytes_per_process + 24 "
			    "bytes x max_entries_per_process)."),
	SR_FIELD_END,
};

static const struct sr_field metrics_fields[] = {
	SR_FIELD_STR("address", struct agent_telemetry_config, metrics_address,
		     .doc = "host:port to serve Prometheus metrics on; empty: no metrics endpoint."),
	SR_FIELD_END,
};

static const struct sr_field logs_fields[] = {
	SR_FIELD_ENUMERATION("level", struct agent_telemetry_config, log_level, log_level_names, .def = "info",
			     .doc = "Least severe level logged (--log-level overrides)."),
	SR_FIELD_END,
};

/*
 * telemetry.metrics.address and telemetry.logs.level are nested in YAML
 * (as in the gateway and the Collector) but flat in the struct: each nested
 * table describes the same struct with its own offsets.
 */
static const struct sr_field telemetry_fields[] = {
	{ .key = "metrics",
	  .kind = SR_FIELD_MAPPING,
	  .offset = 0,
	  .elem_size = sizeof(struct agent_telemetry_config),
	  .fields = metrics_fields,
	  .doc = "Prometheus metrics of the agent itself." },
	{ .key = "logs",
	  .kind = SR_FIELD_MAPPING,
	  .offset = 0,
	  .elem_size = sizeof(struct agent_telemetry_config),
	  .fields = logs_fields,
	  .doc = "Logging." },
	SR_FIELD_END,
};

const struct sr_field agent_config_fields[] = {
	SR_FIELD_STR("node_name", struct agent_config, node_name, .def = "${env:NODE_NAME:-}",
		     .doc = "Name of this node as Kubernetes knows it; empty: the host name."),
	SR_FIELD_MAP("gateway", struct agent_config, gateway, struct agent_gateway_config, gateway_fields,
		     .doc = "Where and how samples are sent."),
	SR_FIELD_MAP("otlp", struct agent_config, otlp, struct agent_otlp_config, otlp_fields,
		     .doc = "OTLP profiles sent by the agent itself, as the OpenTelemetry eBPF profiler sends them "
			    "(native frames unsymbolized, with build IDs; Python, Java and JavaScript frames named)."),
	SR_FIELD_MAP("profiling", struct agent_config, profiling, struct agent_profiling_config, profiling_fields,
		     .doc = "What is sampled and how often."),
	SR_FIELD_MAP("off_cpu", struct agent_config, off_cpu, struct agent_off_cpu_config, off_cpu_fields,
		     .doc = "Off-CPU profiling: how long threads wait, and where."),
	SR_FIELD_MAP("python", struct agent_config, python, struct agent_python_config, python_fields,
		     .doc = "CPython frames by name."),
	SR_FIELD_MAP("nodejs", struct agent_config, nodejs, struct agent_nodejs_config, nodejs_fields,
		     .doc = "Node.js (V8) JavaScript frames by name."),
	SR_FIELD_MAP("java", struct agent_config, java, struct agent_java_config, java_fields,
		     .doc = "HotSpot (Java) frames unwound and named."),
	SR_FIELD_MAP("perf_maps", struct agent_config, perf_maps, struct agent_perf_maps_config, perf_maps_fields,
		     .doc = "JIT code named from perf maps."),
	SR_FIELD_STR("output", struct agent_config, output,
		     .doc = "Also write every request as varint-delimited stackrelay.v1.PushRequest to this file."),
	SR_FIELD_MAP("telemetry", struct agent_config, telemetry, struct agent_telemetry_config, telemetry_fields,
		     .doc = "The agent's own metrics and logs."),
	SR_FIELD_END,
};
