/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Encodes a batch of the internal model (core/model.h) as one OTLP
 * ExportProfilesServiceRequest (docs/exporters.md, "Encoding"):
 *
 *   - one ProfilesDictionary for the request, every table de-duplicated
 *     (strings, functions, mappings, locations, stacks, attributes) and
 *     element 0 of every table the zero value, as Pyroscope requires;
 *   - one ResourceProfiles per resource (per resource and pid when process
 *     attributes go on the resource), one ScopeProfiles ("stackrelay"), one
 *     CPU Profile: sample type samples/count, period type cpu/nanoseconds,
 *     period 1e9/frequency, time and duration from the agents' windows;
 *   - a Mapping per executable (process.executable.build_id.gnu attribute)
 *     and one per kernel; locations carry ELF addresses and, once
 *     symbolized, one Line per (inlined) function, innermost first.
 *
 * v1.10 and v1.9 differ only in Sample's field numbers. Pure: no I/O.
 */
#ifndef SR_GW_OTLP_ENCODE_H
#define SR_GW_OTLP_ENCODE_H

#include <stdbool.h>
#include <stdint.h>

struct gw_profiles;
struct sr_pbw;

enum gw_otlp_version {
	GW_OTLP_V1_10, /* Pyroscope >= 1.20, 2.x; Collector >= 0.148 */
	GW_OTLP_V1_9,  /* Pyroscope 1.18-1.19; Collector 0.140-0.147 */
};

/*
 * Where process.pid, thread.id and thread.name go. Every resource attribute
 * and every sample attribute becomes a Pyroscope series label, so pids and
 * tids multiply series; the default leaves them out.
 */
enum gw_otlp_process_attrs {
	GW_OTLP_PROCESS_ATTRS_NONE,	/* dropped; samples of equal stacks merge */
	GW_OTLP_PROCESS_ATTRS_SAMPLE,	/* all three as sample attributes */
	GW_OTLP_PROCESS_ATTRS_RESOURCE, /* process.pid on the resource, thread.* on samples */
};

struct gw_otlp_options {
	enum gw_otlp_version version;
	enum gw_otlp_process_attrs process_attrs;
	const char *scope_version; /* InstrumentationScope.version; NULL: none */
};

struct gw_otlp_stats {
	uint64_t samples;     /* Sample messages written */
	uint64_t total_count; /* sum of their values */
	uint32_t profiles;
	uint32_t strings, functions, mappings, locations, stacks, attributes;
};

/* Parses "1.10" / "1.9". */
int gw_otlp_version_from_string(const char *s, enum gw_otlp_version *ret);
const char *gw_otlp_version_to_string(enum gw_otlp_version v);

/* Appends the request to out. Returns 0 or -errno (-ENOMEM, -E2BIG for an index past INT32_MAX). */
int gw_otlp_encode(const struct gw_profiles *p, const struct gw_otlp_options *opts, struct sr_pbw *out,
		   struct gw_otlp_stats *ret_stats);
/* Bytes of dictionaries and arrays kept between requests (at most 48 MiB; freed by gw_heap_release_caches()). */
size_t gw_otlp_encode_kept_bytes(void);
/* Sets of those buffers kept (at most 4: one for each encoding that overlapped another lately). */
unsigned gw_otlp_encode_kept_sets(void);
/*
 * A set not taken for this long is freed when another is kept or by the
 * gateway's periodic heap trim: memory kept for encodings that overlapped
 * once goes back.
 */
#define GW_OTLP_ENCODE_KEEP_IDLE_NS (30ull * 1000000000ull)
/* Frees the sets kept before now_ns - GW_OTLP_ENCODE_KEEP_IDLE_NS (sr_now_ns()); how many. */
unsigned gw_otlp_encode_trim_kept(uint64_t now_ns);

/*
 * Splits an encoded request (as produced above, uncompressed) in two halves
 * of about equal samples, each a valid request with the same dictionary:
 * by ResourceProfiles when there are several, else by the samples of its
 * profiles. Each half's sample count (sum of values) is returned. -EINVAL on
 * malformed input, -ERANGE when it holds a single sample (cannot split).
 */
int gw_otlp_split(const uint8_t *req, size_t len, enum gw_otlp_version v, struct sr_pbw *ret_a, uint64_t *ret_a_count,
		  struct sr_pbw *ret_b, uint64_t *ret_b_count);

/* Sum of sample values in an encoded request; -EINVAL when malformed. */
int gw_otlp_count(const uint8_t *req, size_t len, enum gw_otlp_version v, uint64_t *ret_count);

#endif
