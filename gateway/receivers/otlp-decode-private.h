/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the files of the OTLP profiles decoder share, and nothing else
 * includes: otlp-decode.c (the request, its resources, profiles and
 * samples), otlp-version.c (reading a sample in one version; which version),
 * otlp-dict.c (the ProfilesDictionary's tables, strings, attributes, links)
 * and otlp-frames.c (its mappings, functions, locations and stacks), entries
 * decoded lazily and once per request.
 */
#ifndef SR_GW_OTLP_DECODE_PRIVATE_H
#define SR_GW_OTLP_DECODE_PRIVATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/model.h"
#include "otlp-decode.h"
#include "common/pbwire.h"

/* The dictionary's tables, in ProfilesDictionary's field order. */
enum otlp_table {
	OT_MAPPING,
	OT_LOCATION,
	OT_FUNCTION,
	OT_LINK,
	OT_STRING,
	OT_ATTRIBUTE,
	OT_STACK,
	_OT_MAX,
};

/* Attribute keys the decoder gives a meaning to. */
enum otlp_attr_role {
	OA_PLAIN = 0,
	OA_THREAD_ID,	/* thread.id: gw_sample.tid */
	OA_THREAD_NAME, /* thread.name: gw_sample.thread_name */
	OA_PROCESS_PID, /* process.pid: gw_sample.pid */
	OA_FRAME_TYPE,	/* profile.frame.type on a location */
	OA_BUILD_ID_GNU,
	OA_BUILD_ID_HTLHASH,
};

struct otlp_attr {
	bool done;
	bool usable; /* a value the model can hold (not bytes, arrays, maps or nothing) */
	enum otlp_attr_role role;
	struct gw_attr a; /* strings in the batch */
};

struct otlp_mapping {
	bool done;
	struct gw_executable *exe; /* a reference, NULL without a build ID */
	const char *filename;	   /* in the batch, "" when none */
};

struct otlp_function {
	bool done;
	const char *name, *system_name, *file; /* in the batch */
	uint32_t start_line;
};

struct otlp_location {
	struct gw_location *l; /* a reference, NULL until interned */
	bool hashed;
	uint64_t hash[2]; /* what it is, independent of pointers (128 bits): stack IDs are made of these */
};

struct otlp_dec {
	struct gw_stores *stores;
	struct gw_otlp_limits lim;
	enum gw_otlp_links links;
	struct gw_otlp_decode_result *res;
	const uint8_t *base; /* offsets in messages count from here */
	size_t len;
	bool v19;

	/* Where the walk is, for messages: indices (-1: not inside) and the sample field being read. */
	int64_t rp, sp, pr, sa;
	const char *field;
	/* Or the dictionary entry being read (ctx_table < 0: none), which takes precedence. */
	int ctx_table;
	uint64_t ctx_index;
	char path[160];

	struct gw_profiles *batch;
	uint64_t work_bytes; /* working memory charged against lim.max_work_bytes */

	/* Every entry of every table as a slice of the request. */
	struct sr_pb_slice *entries[_OT_MAX];
	uint32_t n[_OT_MAX];
	const uint8_t *dict_at; /* where the dictionary starts (for messages) */

	/* Decoded entries, filled on first use. */
	const char **strings; /* in the batch */
	struct otlp_attr *attrs;
	struct otlp_mapping *mappings;
	struct otlp_function *functions;
	struct otlp_location *locations;
	struct gw_stack **stacks; /* references */
	bool *stack_done;
};

/*
 * Records the first problem (status st, at byte `at` of the request, a
 * message naming the field path) and returns the matching -errno: -EBADMSG
 * (INVALID), -E2BIG (TOO_LARGE), -ENOMEM (NO_MEMORY), -EPROTO (AMBIGUOUS).
 */
int otlp_fail(struct otlp_dec *d, enum gw_otlp_decode_status st, const uint8_t *at, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/*
 * what, or (NULL) where the decoder is: the dictionary entry being read
 * ("dictionary.location_table[12]") or else the sample field
 * ("resource_profiles[0]...samples[7].stack_index"). Formatted only when asked,
 * that is when a message is written.
 */
const char *otlp_what(struct otlp_dec *d, const char *what);
/* -ENOMEM through otlp_fail, naming what could not be allocated. */
int otlp_nomem(struct otlp_dec *d, const char *what);
/* Charges n bytes of working memory; -E2BIG past max_work_bytes. */
int otlp_charge(struct otlp_dec *d, uint64_t n, const uint8_t *at);

const char *otlp_table_name(enum otlp_table t);

struct sample_in {
	uint64_t stack;
	uint64_t link;
	const uint8_t *stack_at, *link_at, *start;
	uint64_t *attrs; /* d's buffer of lim.max_attrs */
	const uint8_t **attrs_at;
	uint32_t n_attrs;
	uint64_t n_values, values_sum;
	uint64_t n_ts, ts_min, ts_max;
	bool link_len; /* link_index arrived length-delimited (impossible for a single int32) */
};

/* Per-request buffers for one sample's attribute indices. */
struct sample_buf {
	uint64_t *attrs;
	const uint8_t **attrs_at;
};

/*
 * Reads one Sample (s, from the request) as version v19 or not, into *in
 * (its attribute indices into buf): 0 or -errno through otlp_fail.
 */
int otlp_read_sample(struct otlp_dec *d, struct sr_pb_slice s, bool v19, const struct sample_buf *buf,
		     struct sample_in *in);
/* version: auto: reads every sample both ways and picks the version (*ret_v19), or fails AMBIGUOUS. */
int otlp_detect_version(struct otlp_dec *d, const struct sample_buf *buf, bool *ret_v19);

/* Reads the dictionary message (dict, from the request) into the tables; 0 or -errno. */
int otlp_dict_scan(struct otlp_dec *d, struct sr_pb_slice dict);
void otlp_dict_free(struct otlp_dec *d);

/* Index i of table t, checked; 0 or -EBADMSG naming `what` (otlp_what). */
int otlp_check_index(struct otlp_dec *d, enum otlp_table t, uint64_t i, const char *what, const uint8_t *at);
/* A reader of entry i of table t. */
struct sr_pbr otlp_entry_reader(const struct otlp_dec *d, enum otlp_table t, uint32_t i);

/*
 * Each checks index i of a table (`what` names the referring field for the
 * message, at its byte offset) and returns the decoded entry through *ret: 0 or -errno.
 * Index 0 is the table's zero value: "" / an attribute to skip / no mapping.
 */
int otlp_dict_string(struct otlp_dec *d, uint64_t i, const char *what, const uint8_t *at, const char **ret);
int otlp_dict_attr(struct otlp_dec *d, uint64_t i, const char *what, const uint8_t *at, const struct otlp_attr **ret);
/* A new reference to the stack (index 0 without entries: the empty stack). */
int otlp_dict_stack(struct otlp_dec *d, uint64_t i, const char *what, const uint8_t *at, struct gw_stack **ret);
/* Index 0 / link without IDs: *ret_has false. trace/span as lower-case hex in the batch. */
int otlp_dict_link(struct otlp_dec *d, uint64_t i, const char *what, const uint8_t *at, bool *ret_has,
		   const char **ret_trace, const char **ret_span);

/*
 * Decodes an AnyValue message into a (strings in the batch); *ret_usable
 * false for kinds the model cannot hold. Nesting past lim.max_nesting is
 * -E2BIG. what: the field path for messages.
 */
int otlp_any_value(struct otlp_dec *d, struct sr_pb_slice v, const char *what, struct gw_attr *a, bool *ret_usable);
/* Which role a key plays. */
enum otlp_attr_role otlp_attr_role_of(const char *key);
/* A batch copy of a string field made valid UTF-8 and cut at lim.max_string_bytes; NULL + -ENOMEM. */
const char *otlp_batch_string(struct otlp_dec *d, struct sr_pb_slice s);

#endif
