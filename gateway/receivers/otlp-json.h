/* SPDX-License-Identifier: Apache-2.0 */
/*
 * OTLP/JSON to protobuf, free of I/O (docs/receivers.md, "OTLP/JSON"): an
 * ExportProfilesServiceRequest body sent with `Content-Type:
 * application/json` becomes the protobuf bytes of the same message, written
 * with common/pbwire.h, so that the one protobuf decoder of the otlp receiver
 * serves both encodings.
 *
 * The JSON is read by a bounded streaming parser that writes protobuf as it
 * goes (no tree is built): memory is the output buffer plus a stack as deep
 * as the nesting limit. The messages of each proto version (v1.9, v1.10) are
 * field tables (JSON name, proto name, number, type), so the versions differ
 * in data only. Both versions name every field alike, so JSON needs no
 * version detection: the version only picks the field numbers written (a
 * receiver that detects versions can transcode and decode as v1.10).
 *
 * The rules are the OTLP specification's "JSON Protobuf Encoding" on top of
 * proto3's JSON mapping: field names in lowerCamelCase or as in the .proto
 * file; traceId, spanId (and profileId when it is 32 hex digits) as hex,
 * other bytes as base64 (standard or URL-safe, padding optional); 64-bit
 * integers as decimal strings or numbers; 32-bit integers as numbers or
 * decimal strings; doubles as numbers or "NaN", "Infinity", "-Infinity";
 * null as the field's default; unknown fields skipped. A field given twice
 * in one object (by either name), two members of one oneof, invalid UTF-8,
 * out-of-range numbers and wrong JSON types are errors.
 */
#ifndef SR_GW_OTLP_JSON_H
#define SR_GW_OTLP_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "exporters/otlp-encode.h" /* enum gw_otlp_version: the gateway's one list of OTLP versions */

struct sr_pbw;

/*
 * The resources one request may use. A zero member takes its default below;
 * max_depth is capped at GW_OTLP_JSON_MAX_DEPTH_CAP (the parser recurses).
 */
struct gw_otlp_json_limits {
	size_t max_input_bytes;	   /* the JSON body (after gunzip) */
	unsigned max_depth;	   /* nesting of JSON objects and arrays, the outermost object being 1 */
	size_t max_array_elements; /* elements of any one JSON array */
	size_t max_output_bytes;   /* the protobuf written */
};

/* Defaults: the receiver's usual request bound, protobuf's nesting limit. */
#define GW_OTLP_JSON_DEFAULT_MAX_INPUT_BYTES	(64ULL << 20)
#define GW_OTLP_JSON_DEFAULT_MAX_DEPTH		64
#define GW_OTLP_JSON_DEFAULT_MAX_ARRAY_ELEMENTS (4u << 20)
#define GW_OTLP_JSON_DEFAULT_MAX_OUTPUT_BYTES	(64ULL << 20)
#define GW_OTLP_JSON_MAX_DEPTH_CAP		512

/*
 * Transcodes json[0, len), a JSON ExportProfilesServiceRequest of proto
 * version `version` (GW_OTLP_V1_9: profiles_v1_9.proto, GW_OTLP_V1_10:
 * profiles.proto), appending its protobuf encoding to out (an empty or
 * partly written sr_pbw; on failure out->len is back where it was, its
 * buffer is kept for the caller to free). limits may be NULL (all defaults).
 *
 * Returns 0, or:
 *   -EBADMSG   the body is not valid JSON or not a valid message;
 *   -EMSGSIZE  a limit was exceeded (input, depth, array elements, output):
 *              OTLP/HTTP's 413, gRPC's RESOURCE_EXHAUSTED;
 *   -EINVAL    version is not one of the above;
 *   -ENOMEM    out could not grow.
 * On failure errbuf (when errsize > 0) holds one line of printable UTF-8
 * (cut to errsize) naming the JSON path of the problem, its byte offset and
 * what was wrong, e.g.
 *   resourceProfiles[0].scopeProfiles[1].profiles[0].samples[3].stackIndex
 *   (byte 1234): 4294967296 is out of range for int32
 */
int gw_otlp_json_transcode(const void *json, size_t len, enum gw_otlp_version version,
			   const struct gw_otlp_json_limits *limits, struct sr_pbw *out, char *errbuf, size_t errsize);

#endif
