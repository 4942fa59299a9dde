/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Inside the OTLP/JSON transcoder (otlp-json.h): the message tables
 * (otlp-json-schema.c), the JSON scanner that reads one value of a type
 * (otlp-json-scan.c) and the state the walker (otlp-json.c) passes to both.
 */
#ifndef SR_GW_OTLP_JSON_PRIVATE_H
#define SR_GW_OTLP_JSON_PRIVATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "otlp-json.h"

struct sr_pbw;

enum gw_oj_type {
	J_STRING,
	J_BYTES, /* base64 */
	J_HEX,	 /* trace and span IDs */
	J_ID,	 /* profile IDs: hex when 32 hex digits, base64 otherwise */
	J_BOOL,
	J_INT32,
	J_UINT32,
	J_INT64,
	J_UINT64,
	J_FIXED64,
	J_DOUBLE,
	J_MESSAGE,
};

enum { F_REPEATED = 1, F_ONEOF = 2 };

struct gw_oj_msg;

struct gw_oj_field {
	const char *json;  /* lowerCamelCase, as proto3's JSON mapping names it */
	const char *proto; /* as in the .proto file */
	uint32_t number;
	uint8_t type, flags;
	const struct gw_oj_msg *msg; /* J_MESSAGE */
};

struct gw_oj_msg {
	const char *name;
	const struct gw_oj_field *fields;
	unsigned n; /* at most 32: seen fields are a bit mask */
};

/* ExportProfilesServiceRequest of each version. */
extern const struct gw_oj_msg gw_oj_request_v9, gw_oj_request_v10;

/* One step of the path to the value being read: a member name or an array index. */
struct gw_oj_seg {
	const char *name; /* NULL: index */
	size_t len;
	size_t index;
};

struct gw_oj_ctx {
	const uint8_t *p, *start, *end;
	struct sr_pbw *w;
	size_t out_start;
	struct gw_otlp_json_limits lim;
	unsigned depth;
	struct gw_oj_seg *path;
	unsigned npath;
	char *errbuf;
	size_t errsize;
};

/* What the value at p is, for "expected X, got Y". */
const char *gw_oj_what_is(const struct gw_oj_ctx *c, const uint8_t *p);
/* Writes "<path> (byte N): <message>" into the error buffer (byte: at's offset) and returns rc. */
__attribute__((format(printf, 4, 5))) int gw_oj_fail(struct gw_oj_ctx *c, int rc, const uint8_t *at, const char *fmt,
						     ...);
void gw_oj_skip_ws(struct gw_oj_ctx *c);
/* The literal word (true, false, null) at c->p, passed. */
int gw_oj_literal(struct gw_oj_ctx *c, const char *word);
/* The writer's sticky error, or the output limit, as an error at `at`. */
int gw_oj_out_check(struct gw_oj_ctx *c, const uint8_t *at);
/* A JSON string at c->p, decoded, validated and appended to the writer at [*ret_at, w->len). */
int gw_oj_string(struct gw_oj_ctx *c, size_t *ret_at);
/* Passes a JSON number at c->p; its span in *ret, *ret_n. */
int gw_oj_number_span(struct gw_oj_ctx *c, const uint8_t **ret, size_t *ret_n);
/* A number or numeric string for an integer or double field, as the 64 bits protobuf writes. */
int gw_oj_numeric(struct gw_oj_ctx *c, unsigned type, uint64_t *ret);
/* Decode b[0, n) in place; the bytes, or -1 when it is not hex (base64). */
long gw_oj_hex_decode(uint8_t *b, size_t n);
long gw_oj_base64_decode(uint8_t *b, size_t n);

#endif
