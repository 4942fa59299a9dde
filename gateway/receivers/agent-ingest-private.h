/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the files of PushRequest processing share, and nothing else includes:
 * agent-ingest.c (the request, its samples, the response), agent-defs.c (its
 * definitions) and agent-strings.c (its strings and ID sets).
 */
#ifndef SR_GW_AGENT_INGEST_PRIVATE_H
#define SR_GW_AGENT_INGEST_PRIVATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/htab.h"
#include "model.h"
#include "common/pbwire.h"

struct gw_stores;
struct gw_ingest_result;

/*
 * A malformed request: errbuf says what, and where (the offset of reader rd in
 * the body; a failed read leaves the reader at the bad item).
 */
#define FAIL(rd, fmt, ...)                                                                                             \
	do {                                                                                                           \
		snprintf(errbuf, errsize, fmt " (at byte %zu)", ##__VA_ARGS__, sr_pbr__offset(rd));                    \
		e = -EBADMSG;                                                                                          \
		goto out;                                                                                              \
	} while (0)

/* The same into a caller buffer of GW_AGENT_MAX_STRING_BYTES + 1; returns buf. */
const char *gw_ingest_cstr(char *buf, struct sr_pb_slice s);

/*
 * A set of byte strings (slices into the body or the batch), open
 * addressing. The receiver's per-sample lookups of stacks and thread names
 * keep a table of their own rather than the tree's (common/htab.h): with
 * these sets and the resource table below on the tree's table, the
 * receiver's request processing took 2.5 % more instructions (callgrind,
 * ingest-bench) and timed 4 % faster to 22 % slower over three runs of
 * ingest-bench on the shared machine (2026-12-02), past the 3 % a shared
 * helper may cost here. The resource table alone costs 0.4 % (below), and is
 * on the tree's table.
 */
struct gw_bytes_set {
	struct gw_bytes_set_entry {
		uint64_t h;
		const uint8_t *p;
		size_t n;
		const void *value;
		bool used;
	} * e;
	size_t cap, n;
};

void gw_bytes_set__free(struct gw_bytes_set *s);
/* Finds or inserts (p, n) with hash h; *ret_found says which; returns the entry or NULL (ENOMEM). */
struct gw_bytes_set_entry *gw_bytes_set__put(struct gw_bytes_set *s, uint64_t h, const uint8_t *p, size_t n,
					     bool *ret_found);

/* A list of IDs for the response, de-duplicated. */
struct gw_idlist {
	struct gw_bytes_set set;
	struct sr_pb_slice *v;
	size_t n, cap;
};

/* Adds an ID (a slice that must outlive the list) unless it is listed: 0 or -ENOMEM. */
int gw_idlist__add(struct gw_idlist *l, const uint8_t *p, size_t n);
void gw_idlist__free(struct gw_idlist *l);

/* What decoding a request's definitions reads and adds to. */
struct gw_ingest_defs {
	struct gw_stores *stores;
	struct gw_ingest_result *res; /* symbol tables go to res->tables */
	/* Executables, kernels and functions a stack refers to that the stores lack (PushResponse.missing_*). */
	struct gw_idlist missing_exes, missing_kernels, missing_functions;
	uint64_t symbols; /* symbols in this request's tables so far (GW_AGENT_MAX_SYMBOLS_PER_REQUEST) */
	/*
	 * The request's stacks by ID (the samples' lookups, NULL: none): a stack
	 * it defines goes in with a reference, so its samples find it even when
	 * the store evicted it meanwhile (a store smaller than one request's
	 * stacks would otherwise never accept them).
	 */
	struct gw_bytes_set *stacks;
	/* Who sent it (gw_ingest_identity): a table is taken only as the answer to an ask recorded for it. */
	uint64_t identity;
};

/*
 * Each decodes one definition (r reads its message) and interns it: 0, or
 * -EBADMSG with errbuf saying what and where, or -ENOMEM.
 */
int gw_ingest_parse_executable(struct gw_stores *stores, struct sr_pbr r, char *errbuf, size_t errsize);
int gw_ingest_parse_kernel(struct gw_stores *stores, struct sr_pbr r, char *errbuf, size_t errsize);
int gw_ingest_parse_function(struct gw_stores *stores, struct sr_pbr r, char *errbuf, size_t errsize);
/* A stack whose executable or kernel is missing is not stored; the IDs go to defs->missing_*. */
int gw_ingest_parse_stack(struct gw_ingest_defs *defs, struct sr_pbr r, char *errbuf, size_t errsize);
/* The table goes to defs->res->tables, unless its executable or kernel was evicted meanwhile. */
int gw_ingest_parse_symbol_table(struct gw_ingest_defs *defs, struct sr_pbr r, char *errbuf, size_t errsize);

/* ---- one request (agent-ingest.c, agent-samples.c) ---- */

/* Resource identity of a sample: process, executable, container, pod (slices into the body). */
struct rkey {
	struct sr_pb_slice process_name, exe_path, container_id, pod_uid;
	enum gw_profile_type type;
};

/*
 * The batch's resource for each identity: slots of the tree's table
 * (common/htab.h). Measured against the open addressing it replaced,
 * ingest-bench's request processing ran 0.4 % more instructions (callgrind,
 * gw_ingest_process, --iterations 10) and 0.99x the records/s (8 alternating
 * runs of --iterations 400, 0.91-1.06x, 2026-12-03).
 */
struct rslot {
	uint64_t h; /* the table's hash */
	struct rkey k;
	uint32_t idx;
};

struct gw_ingest_ctx {
	struct gw_stores *stores;
	struct gw_ingest_defs defs; /* the same stores and res; missing executables and kernels */
	uint64_t epoch;
	struct gw_idlist missing_stacks, wanted;
	struct gw_idlist probed; /* probe_symbols, de-duplicated */
	struct gw_ingest_result *res;
	/* resources of the batch by identity */
	struct sr_htab resources; /* of rslot; all zero: empty */
	struct gw_bytes_set thread_names;
	struct sr_pb_slice host_name, node_name;
	struct sr_pb_slice known_kernel; /* a kernel ID found in the store during this request */
	/*
	 * What the first lookup of each stack and kernel ID found (stacks: a
	 * reference held here, or NULL: missing). A request sees
	 * one answer per ID even while other requests store and evict: the
	 * response lists an ID as missing only if none of its samples was
	 * accepted, or the agent's resend would export them twice.
	 */
	struct gw_bytes_set stacks_seen;
	struct gw_bytes_set kernels_seen; /* value non-NULL: found */
	/*
	 * Accepted samples (each holding its stack's reference) and their
	 * resource's index, placed in their resources once all are counted
	 * (gw_ingest_place_samples()): each resource's array is then allocated
	 * once, at its size, instead of doubling from 4 as its samples come.
	 */
	struct gw_ingest_pending {
		struct gw_sample s;
		uint32_t resource;
	} * pending;
	uint32_t n_pending, cap_pending;
	uint32_t frequency_hz;
	bool definitions_only;
};

/* A Sample as decoded (slices into the body). */
struct gw_ingest_sample {
	struct sr_pb_slice stack_id, thread_name, process_name, exe_path, container_id, pod_uid, kernel_id;
	uint64_t pid, tid, count, start, end, start_ticks;
	uint64_t profile_type, off_cpu_nanos; /* stackrelay_v1_ProfileType */
};

/* Decodes one Sample: 0, or -EBADMSG with errbuf saying what and where. */
int gw_ingest_parse_sample(struct sr_pbr r, struct gw_ingest_sample *in, char *errbuf, size_t errsize);
/* Accepts the sample for c->res->batch (c->pending) or refuses it (listing what is missing): 0 or -ENOMEM. */
int gw_ingest_add_sample(struct gw_ingest_ctx *c, const struct gw_ingest_sample *in);
/* Moves the accepted samples into their resources: 0, or -ENOMEM (those not moved are released). */
int gw_ingest_place_samples(struct gw_ingest_ctx *c);
/* Releases the samples not moved (an error before gw_ingest_place_samples()) and the array. */
void gw_ingest_pending_free(struct gw_ingest_ctx *c);
/* Lists x (or k) in wanted_symbols when this agent is the one to ask for its table: 0 or -ENOMEM. */
int gw_ingest_ask_for(struct gw_ingest_ctx *c, struct gw_executable *x, struct gw_kernel *k);

#endif
