/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The I/O-free decoder of OTLP profiles requests (docs/receivers.md, "OTLP
 * profiles: decoding, versions and limits"): one plain (already gunzipped)
 * protobuf ExportProfilesServiceRequest in OTLP v1.9 or v1.10 becomes a
 * batch of the internal model (core/model.h). Executables, locations and
 * stacks are interned into the gateway-wide stores the agent receiver uses,
 * so OTLP frames and agent frames share definitions and the symbolize
 * processor names both alike.
 *
 * Every index into the request's dictionary is bounds-checked, every table
 * and count is bounded by struct gw_otlp_limits, and malformed bytes are
 * reported with the field path and byte offset of the first problem. The
 * receiver (otlp.c) and the fuzz target (tests/fuzz/fuzz-otlp-decode.c)
 * drive it. Thread-safe for distinct results (the stores lock themselves).
 */
#ifndef SR_GW_OTLP_DECODE_H
#define SR_GW_OTLP_DECODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gw_stores;
struct gw_profiles;

/*
 * Which wire form a request is read as. v1.9 and v1.10 differ only in
 * Sample's field numbers (values / attribute_indices / link_index), so a
 * request can sometimes be read both ways: AUTO decides from the bytes only
 * when exactly one reading is well-formed (or both mean the same), and
 * otherwise answers GW_OTLP_DECODE_AMBIGUOUS, never a guess.
 */
enum gw_otlp_decode_version {
	GW_OTLP_DECODE_AUTO = 0,
	GW_OTLP_DECODE_V1_9,
	GW_OTLP_DECODE_V1_10,
};

/* "auto", "1.9", "1.10" (also "v1.9", "1.9.0", ...); 0 or -EINVAL. */
int gw_otlp_decode_version_from_string(const char *s, enum gw_otlp_decode_version *ret);
const char *gw_otlp_decode_version_to_string(enum gw_otlp_decode_version v);

/*
 * Bounds on what one request may hold. A zero member means its default
 * (GW_OTLP_DEFAULT_*). Counts past a limit make the request
 * GW_OTLP_DECODE_TOO_LARGE; nothing is accepted from it.
 */
struct gw_otlp_limits {
	uint32_t max_resource_profiles; /* ResourceProfiles messages */
	uint32_t max_profiles;		/* Profile messages, over all resources */
	uint64_t max_samples;		/* Sample messages, over all profiles */
	uint64_t max_sample_points;	/* values + timestamps elements, over all samples */
	uint32_t max_stack_depth;	/* locations in one Stack */
	uint32_t max_lines;		/* Line messages in one Location */
	uint32_t max_attrs;		/* attribute indices on one sample, profile, mapping or location;
					   KeyValues on one Resource */
	/* Dictionary table sizes (entries, the zero entry included). */
	uint32_t max_strings, max_attributes, max_mappings, max_locations, max_functions, max_links, max_stacks;
	uint32_t max_string_bytes; /* longest string kept; longer ones are cut (at a UTF-8 boundary) */
	uint32_t max_nesting;	   /* AnyValue array/kvlist nesting depth */
	/*
	 * Working memory of one decode (index tables, per-request caches), not
	 * counting the batch it builds (which the memory limiter accounts).
	 */
	uint64_t max_work_bytes;
};

#define GW_OTLP_DEFAULT_MAX_RESOURCE_PROFILES 4096
#define GW_OTLP_DEFAULT_MAX_PROFILES	      16384
#define GW_OTLP_DEFAULT_MAX_SAMPLES	      (1u << 20)
#define GW_OTLP_DEFAULT_MAX_SAMPLE_POINTS     (16u << 20)
#define GW_OTLP_DEFAULT_MAX_STACK_DEPTH	      1024 /* as GW_AGENT_MAX_FRAMES_PER_STACK */
#define GW_OTLP_DEFAULT_MAX_LINES	      64   /* inlined functions at one address */
#define GW_OTLP_DEFAULT_MAX_ATTRS	      256
#define GW_OTLP_DEFAULT_MAX_STRINGS	      (1u << 20)
#define GW_OTLP_DEFAULT_MAX_ATTRIBUTES	      (1u << 20)
#define GW_OTLP_DEFAULT_MAX_MAPPINGS	      (1u << 16)
#define GW_OTLP_DEFAULT_MAX_LOCATIONS	      (1u << 20)
#define GW_OTLP_DEFAULT_MAX_FUNCTIONS	      (1u << 20)
#define GW_OTLP_DEFAULT_MAX_LINKS	      (1u << 20)
#define GW_OTLP_DEFAULT_MAX_STACKS	      (1u << 20)
#define GW_OTLP_DEFAULT_MAX_STRING_BYTES      4096 /* as GW_AGENT_MAX_STRING_BYTES */
#define GW_OTLP_DEFAULT_MAX_NESTING	      8
#define GW_OTLP_DEFAULT_MAX_WORK_BYTES	      (256ULL << 20)

/* Fills every member with its default. */
void gw_otlp_limits_default(struct gw_otlp_limits *ret);

/*
 * What becomes of Sample.link_index (a trace and span the sample belongs
 * to). Every sample attribute is a series label downstream, and span IDs are
 * unique per request, so links are dropped by default and counted
 * (gw_otlp_decode_result.links_dropped).
 */
enum gw_otlp_links {
	GW_OTLP_LINKS_DROP = 0,
	GW_OTLP_LINKS_ATTRIBUTES, /* sample attributes trace.id and span.id, lower-case hex */
};

struct gw_otlp_decode_options {
	enum gw_otlp_decode_version version; /* the receiver's `version` setting; AUTO by default */
	const struct gw_otlp_limits *limits; /* NULL: defaults */
	enum gw_otlp_links links;
};

enum gw_otlp_decode_status {
	GW_OTLP_DECODE_OK = 0,	  /* decoded; some profiles may still be refused (rejected_profiles) */
	GW_OTLP_DECODE_INVALID,	  /* malformed: HTTP 400 / gRPC InvalidArgument */
	GW_OTLP_DECODE_TOO_LARGE, /* past a limit: HTTP 413 / gRPC ResourceExhausted */
	GW_OTLP_DECODE_AMBIGUOUS, /* AUTO could not tell v1.9 from v1.10: 400 / InvalidArgument */
	GW_OTLP_DECODE_NO_MEMORY, /* out of memory: 503 / Unavailable (retryable) */
};

const char *gw_otlp_decode_status_to_string(enum gw_otlp_decode_status s);

/* Longest message (NUL included). */
#define GW_OTLP_DECODE_MESSAGE_MAX 256

struct gw_otlp_decode_result {
	enum gw_otlp_decode_status status;
	/* The version the request was read as (V1_9 or V1_10); AUTO when not decided. */
	enum gw_otlp_decode_version version;
	bool version_detected; /* decided from the bytes, not set by the caller */
	/*
	 * The batch of accepted samples, the caller's reference (gw_profiles__unref,
	 * or take it and set this to NULL); NULL when nothing was accepted or the
	 * status is not OK. Every resource's peer_addr is unset: the receiver
	 * sets it (gw_resource__set_peer).
	 */
	struct gw_profiles *batch;
	/*
	 * Samples in the model's unit (gw_sample.count: CPU samples or off-CPU
	 * waits, as the accounting counts agent samples): in the request,
	 * accepted into batch, refused (received = accepted + refused on OK).
	 */
	uint64_t received, accepted, refused;
	/* Sample messages accepted (one gw_sample each). */
	uint64_t accepted_records;
	/*
	 * Profile messages refused whole (unsupported sample type, ...): the
	 * ExportProfilesPartialSuccess.rejected_profiles to answer; the first
	 * reason is in message.
	 */
	uint64_t rejected_profiles;
	/* Sample links dropped (GW_OTLP_LINKS_DROP), attribute values not representable (bytes, arrays, maps). */
	uint64_t links_dropped, attrs_dropped;
	/*
	 * Not OK: the first problem, naming the field path and byte offset
	 * ("resource_profiles[0].scope_profiles[1].profiles[0].samples[7].stack_index
	 * at byte 1234: 99 is out of range (stack_table has 12 entries)").
	 * OK: the reason for the first refused profile (partial_success.error_message),
	 * or "" when nothing was refused.
	 */
	char message[GW_OTLP_DECODE_MESSAGE_MAX];
};

/*
 * Decodes buf[0..len) (one plain ExportProfilesServiceRequest) into a new
 * batch. opts may be NULL (AUTO, default limits, links dropped). Returns
 * res->status. Nothing is accepted unless the status is OK; definitions
 * already interned stay (they are content-addressed and harmless).
 */
enum gw_otlp_decode_status gw_otlp_decode(struct gw_stores *stores, const uint8_t *buf, size_t len,
					  const struct gw_otlp_decode_options *opts, struct gw_otlp_decode_result *res);

/* Drops the batch if still held. NULL-safe. */
void gw_otlp_decode_result_fini(struct gw_otlp_decode_result *res);

#endif
