/* SPDX-License-Identifier: Apache-2.0 */
/*
 * PushRequest processing (agent-ingest.h): the header, the order fields are
 * taken in, probes, and the PushResponse; definitions are decoded in
 * agent-defs.c, samples go into the batch in agent-samples.c.
 * Untrusted input: every length is checked against what is left of its
 * enclosing message before use, every count is bounded, nothing recurses on
 * input, and no allocation is larger than a small multiple of the (already
 * bounded) body.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pb_encode.h>
#include <xxhash.h>

#include "stackrelay/v1/ingest.pb.h"
#include "stackrelay/v1/types.pb.h"

#include "agent-ingest-private.h"
#include "agent-ingest.h"
#include "common/macro.h"
#include "model.h"
#include "common/pbwire.h"

const char *const gw_upload_refusal_names[GW_UPLOAD_REFUSAL_MAX] = {
	[GW_UPLOAD_NOT_ASKED] = "not_asked",
	[GW_UPLOAD_ERROR_NOT_ASKED] = "error_not_asked",
	[GW_UPLOAD_UNKNOWN] = "unknown_executable",
};

/* ---- who sent it ---- */

uint64_t gw_ingest_identity(const struct gw_ingest_peer *peer, const uint8_t *instance_id, size_t instance_id_len)
{
	const char *principal = peer && peer->principal ? peer->principal : "";
	uint64_t seed = XXH3_64bits(principal, strlen(principal)), h;

	/* A process's instance ID outlives its connections; without one, the connection is the agent. */
	if (instance_id_len)
		h = XXH3_64bits_withSeed(instance_id, instance_id_len, seed);
	else {
		uint64_t serial = peer ? peer->conn_serial : 0;
		h = XXH3_64bits_withSeed(&serial, sizeof(serial), ~seed);
	}
	return h ? h : 1;
}

/* Is s one of the names the peer may speak for? */
static bool peer_binds(const struct gw_ingest_peer *peer, struct sr_pb_slice s)
{
	for (size_t i = 0; i < peer->n_node_names; i++)
		if (strlen(peer->node_names[i]) == s.n && memcmp(peer->node_names[i], s.p, s.n) == 0)
			return true;
	return false;
}

/* ---- header ---- */

int gw_ingest_header(const uint8_t *body, size_t len, struct gw_ingest_header *ret, char *errbuf, size_t errsize)
{
	struct sr_pbr r = sr_pbr_of(body, len);
	uint32_t f, wt;
	uint64_t v;
	struct sr_pb_slice s;
	int e = 0;

	memset(ret, 0, sizeof(*ret));
	while (r.p < r.end) {
		if ((e = sr_pbr__tag(&r, &f, &wt)) < 0)
			FAIL(&r, "PushRequest: bad field key");
		switch (f) {
		case stackrelay_v1_PushRequest_protocol_version_tag:
			if ((e = sr_pbr__field_varint(&r, wt, &v)) < 0)
				FAIL(&r, "PushRequest.protocol_version: malformed");
			ret->protocol_version = v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
			break;
		case stackrelay_v1_PushRequest_sequence_tag:
			if ((e = sr_pbr__field_varint(&r, wt, &ret->sequence)) < 0)
				FAIL(&r, "PushRequest.sequence: malformed");
			break;
		case stackrelay_v1_PushRequest_sampling_frequency_hz_tag:
			if ((e = sr_pbr__field_varint(&r, wt, &v)) < 0)
				FAIL(&r, "PushRequest.sampling_frequency_hz: malformed");
			ret->frequency_hz = v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
			break;
		case stackrelay_v1_PushRequest_agent_tag: {
			if ((e = sr_pbr__field_bytes(&r, wt, &s)) < 0)
				FAIL(&r, "PushRequest.agent: malformed");
			struct sr_pbr a = sr_pbr__sub(&r, s);
			while (a.p < a.end) {
				struct sr_pb_slice t = { 0 };
				if ((e = sr_pbr__tag(&a, &f, &wt)) < 0)
					FAIL(&a, "AgentInfo: bad field key");
				if (f == stackrelay_v1_AgentInfo_instance_id_tag) {
					if ((e = sr_pbr__field_bytes(&a, wt, &t)) < 0 || t.n > GW_ID_MAX)
						FAIL(&a, "AgentInfo.instance_id: malformed or longer than %d bytes",
						     GW_ID_MAX);
					ret->instance_id = t.p;
					ret->instance_id_len = t.n;
				} else if ((e = sr_pbr__skip(&a, wt)) < 0)
					FAIL(&a, "AgentInfo: malformed field %u", f);
			}
			break;
		}
		case stackrelay_v1_PushRequest_samples_tag:
			if ((e = sr_pbr__field_bytes(&r, wt, &s)) < 0)
				FAIL(&r, "PushRequest.samples: malformed");
			ret->n_samples++;
			break;
		case stackrelay_v1_PushRequest_symbol_tables_tag:
			if ((e = sr_pbr__field_bytes(&r, wt, &s)) < 0)
				FAIL(&r, "PushRequest.symbol_tables: malformed");
			ret->table_bytes += s.n;
			break;
		default:
			if ((e = sr_pbr__skip(&r, wt)) < 0)
				FAIL(&r, "PushRequest: malformed field %u", f);
		}
	}
out:
	return e;
}

static int parse_drops(struct gw_ingest_ctx *c, struct sr_pbr r, char *errbuf, size_t errsize)
{
	uint32_t f, wt;
	uint64_t v;
	int e = 0;
	while (r.p < r.end) {
		if ((e = sr_pbr__tag(&r, &f, &wt)) < 0)
			FAIL(&r, "DropCounters: bad field key");
		if (wt != SR_PB_VARINT) {
			if ((e = sr_pbr__skip(&r, wt)) < 0)
				FAIL(&r, "DropCounters: malformed field %u", f);
			continue;
		}
		if ((e = sr_pbr__varint(&r, &v)) < 0)
			FAIL(&r, "DropCounters: malformed field %u", f);
		switch (f) {
		case stackrelay_v1_DropCounters_ring_buffer_full_tag:
			c->res->drops.ring_buffer_full += v;
			break;
		case stackrelay_v1_DropCounters_stack_errors_tag:
			c->res->drops.stack_errors += v;
			break;
		case stackrelay_v1_DropCounters_buffer_overflow_tag:
			c->res->drops.buffer_overflow += v;
			break;
		case stackrelay_v1_DropCounters_process_unknown_tag:
			c->res->drops.process_unknown += v;
			break;
		}
	}
out:
	return e;
}

/* ---- response ---- */

static bool enc_ids(pb_ostream_t *os, uint32_t tag, const struct gw_idlist *l)
{
	for (size_t i = 0; i < l->n; i++)
		if (!pb_encode_tag(os, PB_WT_STRING, tag) || !pb_encode_string(os, l->v[i].p, l->v[i].n))
			return false;
	return true;
}

static bool enc_varint(pb_ostream_t *os, uint32_t tag, uint64_t v)
{
	return v == 0 || (pb_encode_tag(os, PB_WT_VARINT, tag) && pb_encode_varint(os, v));
}

struct resp {
	uint64_t accepted;
	uint32_t retry_after_ms;
	uint32_t symbols_pending;
	const char *error;
	const struct gw_idlist *stacks, *exes, *kernels, *functions, *wanted;
};

static bool enc_response(pb_ostream_t *os, const struct resp *r)
{
	if (!enc_varint(os, stackrelay_v1_PushResponse_protocol_version_tag, GW_AGENT_PROTOCOL_VERSION) ||
	    !enc_varint(os, stackrelay_v1_PushResponse_accepted_samples_tag, r->accepted))
		return false;
	if ((r->stacks && !enc_ids(os, stackrelay_v1_PushResponse_missing_stacks_tag, r->stacks)) ||
	    (r->exes && !enc_ids(os, stackrelay_v1_PushResponse_missing_executables_tag, r->exes)) ||
	    (r->kernels && !enc_ids(os, stackrelay_v1_PushResponse_missing_kernels_tag, r->kernels)) ||
	    (r->functions && !enc_ids(os, stackrelay_v1_PushResponse_missing_functions_tag, r->functions)) ||
	    (r->wanted && !enc_ids(os, stackrelay_v1_PushResponse_wanted_symbols_tag, r->wanted)))
		return false;
	if (!enc_varint(os, stackrelay_v1_PushResponse_retry_after_ms_tag, r->retry_after_ms) ||
	    !enc_varint(os, stackrelay_v1_PushResponse_symbols_pending_tag, r->symbols_pending))
		return false;
	if (r->error && *r->error &&
	    (!pb_encode_tag(os, PB_WT_STRING, stackrelay_v1_PushResponse_error_tag) ||
	     !pb_encode_string(os, (const pb_byte_t *)r->error, strlen(r->error))))
		return false;
	return true;
}

static int encode_response(const struct resp *r, uint8_t **ret, size_t *ret_len)
{
	pb_ostream_t sizing = PB_OSTREAM_SIZING;
	pb_ostream_t os;
	uint8_t *buf;

	if (!enc_response(&sizing, r))
		return -EINVAL;
	buf = malloc(sizing.bytes_written ? sizing.bytes_written : 1);
	if (!buf)
		return -ENOMEM;
	os = pb_ostream_from_buffer(buf, sizing.bytes_written);
	if (!enc_response(&os, r)) {
		free(buf);
		return -EINVAL;
	}
	*ret = buf;
	*ret_len = os.bytes_written;
	return 0;
}

int gw_ingest_encode_error(uint32_t retry_after_ms, const char *error, uint8_t **ret, size_t *ret_len)
{
	struct resp r = { .retry_after_ms = retry_after_ms, .error = error };
	return encode_response(&r, ret, ret_len);
}

/* ---- the request ---- */

/* Calls fn with a reader of every top-level field numbered tag (length-delimited). */
static int each_field(struct sr_pbr r, uint32_t tag,
		      int (*fn)(struct gw_ingest_ctx *c, struct sr_pbr m, char *errbuf, size_t errsize),
		      struct gw_ingest_ctx *c, char *errbuf, size_t errsize)
{
	uint32_t f, wt;
	struct sr_pb_slice s;
	int e;

	while (r.p < r.end) {
		if (sr_pbr__tag(&r, &f, &wt) < 0) {
			snprintf(errbuf, errsize, "PushRequest: bad field key (at byte %zu)", sr_pbr__offset(&r));
			return -EBADMSG;
		}
		if (f != tag) {
			if (sr_pbr__skip(&r, wt) < 0) {
				snprintf(errbuf, errsize, "PushRequest: malformed field %u (at byte %zu)", f,
					 sr_pbr__offset(&r));
				return -EBADMSG;
			}
			continue;
		}
		if (sr_pbr__field_bytes(&r, wt, &s) < 0) {
			snprintf(errbuf, errsize, "PushRequest: field %u is not length-delimited (at byte %zu)", f,
				 sr_pbr__offset(&r));
			return -EBADMSG;
		}
		if ((e = fn(c, sr_pbr__sub(&r, s), errbuf, errsize)) < 0)
			return e;
	}
	return 0;
}

static int do_executable(struct gw_ingest_ctx *c, struct sr_pbr m, char *errbuf, size_t errsize)
{
	c->res->defined_executables++;
	return gw_ingest_parse_executable(c->stores, m, errbuf, errsize);
}

static int do_kernel(struct gw_ingest_ctx *c, struct sr_pbr m, char *errbuf, size_t errsize)
{
	c->res->defined_kernels++;
	return gw_ingest_parse_kernel(c->stores, m, errbuf, errsize);
}

static int do_function(struct gw_ingest_ctx *c, struct sr_pbr m, char *errbuf, size_t errsize)
{
	c->res->defined_functions++;
	return gw_ingest_parse_function(c->stores, m, errbuf, errsize);
}

static int do_stack(struct gw_ingest_ctx *c, struct sr_pbr m, char *errbuf, size_t errsize)
{
	c->res->defined_stacks++;
	return gw_ingest_parse_stack(&c->defs, m, errbuf, errsize);
}

static int do_symbol_table(struct gw_ingest_ctx *c, struct sr_pbr m, char *errbuf, size_t errsize)
{
	return gw_ingest_parse_symbol_table(&c->defs, m, errbuf, errsize);
}

static int do_agent(struct gw_ingest_ctx *c, struct sr_pbr r, char *errbuf, size_t errsize)
{
	uint32_t f, wt;
	int e = 0;
	while (r.p < r.end) {
		struct sr_pb_slice t = { 0 };
		if ((e = sr_pbr__tag(&r, &f, &wt)) < 0)
			FAIL(&r, "AgentInfo: bad field key");
		if (f == stackrelay_v1_AgentInfo_host_name_tag) {
			if ((e = sr_pbr__field_bytes(&r, wt, &t)) < 0)
				FAIL(&r, "AgentInfo.host_name: malformed");
			c->host_name = t;
		} else if (f == stackrelay_v1_AgentInfo_node_name_tag) {
			if ((e = sr_pbr__field_bytes(&r, wt, &t)) < 0)
				FAIL(&r, "AgentInfo.node_name: malformed");
			c->node_name = t;
		} else if ((e = sr_pbr__skip(&r, wt)) < 0)
			FAIL(&r, "AgentInfo: malformed field %u", f);
	}
out:
	return e;
}

static int do_sample(struct gw_ingest_ctx *c, struct sr_pbr m, char *errbuf, size_t errsize)
{
	struct gw_ingest_sample in;
	int e = gw_ingest_parse_sample(m, &in, errbuf, errsize);
	if (e < 0)
		return e;
	if (in.count == 0)
		return 0;
	if (c->res->received + in.count < c->res->received) {
		snprintf(errbuf, errsize, "Sample.count: the sum of counts overflows 64 bits");
		return -EBADMSG;
	}
	c->res->received += in.count;
	return gw_ingest_add_sample(c, &in);
}

/*
 * One probed ID (docs/agent-protocol.md, "Symbol probes"): listed in
 * wanted_symbols when the symbolizer wants the agent's table, counted in
 * symbols_pending while a lookup is still going on. An ID this gateway does
 * not know is neither: it holds no frames in it.
 */
static int do_probe(struct gw_ingest_ctx *c, struct sr_pbr m, char *errbuf, size_t errsize)
{
	struct sr_pb_slice s = { m.p, sr_pbr__remaining(&m) };
	struct gw_executable *x;
	struct gw_kernel *k = NULL;
	bool wanted, pending, dup;
	size_t before = c->probed.n;
	int e;

	if (s.n == 0 || s.n > GW_ID_MAX) {
		snprintf(errbuf, errsize, "PushRequest.probe_symbols: an ID is empty or longer than %d bytes",
			 GW_ID_MAX);
		return -EBADMSG;
	}
	if ((e = gw_idlist__add(&c->probed, s.p, s.n)) < 0)
		return e;
	dup = c->probed.n == before;
	if (dup)
		return 0;
	if (c->probed.n > GW_AGENT_MAX_PROBES_PER_REQUEST) {
		snprintf(errbuf, errsize, "PushRequest.probe_symbols: more than %d IDs in one request",
			 GW_AGENT_MAX_PROBES_PER_REQUEST);
		return -EBADMSG;
	}
	x = gw_stores__executable(c->stores, s.p, s.n);
	if (x) {
		wanted = gw_executable__wants_symbols(x);
		pending = gw_executable__symbols_pending(x);
	} else if ((k = gw_stores__kernel(c->stores, s.p, s.n))) {
		wanted = gw_kernel__wants_symbols(k);
		pending = gw_kernel__symbols_pending(k);
	} else {
		return 0;
	}
	e = 0;
	if (wanted) {
		/*
		 * Not listed (a full list, or another agent is uploading it): pending,
		 * so the agent asks again after a while, and uploads it then if the
		 * other agent never did.
		 */
		if ((e = gw_ingest_ask_for(c, x, k)) == 0)
			c->res->symbols_pending++;
	} else if (pending) {
		c->res->symbols_pending++;
	}
	gw_executable__unref(x);
	gw_kernel__unref(k);
	return e < 0 ? e : 0;
}

static int process(struct gw_stores *stores, const struct gw_ingest_peer *peer, const uint8_t *body, size_t len,
		   uint64_t epoch, bool definitions_only, struct gw_ingest_result *res, char *errbuf, size_t errsize)
{
	struct sr_pbr r = sr_pbr_of(body, len);
	struct gw_ingest_ctx c = { .stores = stores,
				   .defs = { .stores = stores, .res = res },
				   .epoch = epoch,
				   .res = res,
				   .definitions_only = definitions_only };
	c.defs.stacks = &c.stacks_seen;
	struct gw_ingest_header h;
	int e;

	memset(res, 0, sizeof(*res));
	if ((e = gw_ingest_header(body, len, &h, errbuf, errsize)) < 0)
		return e;
	c.frequency_hz = h.frequency_hz;
	c.defs.identity = gw_ingest_identity(peer, h.instance_id, h.instance_id_len);
	res->batch = gw_profiles_new();
	if (!res->batch) {
		e = -ENOMEM;
		goto fail;
	}
	/* Definitions before their users, whatever the order on the wire. */
	if ((e = each_field(r, stackrelay_v1_PushRequest_agent_tag, do_agent, &c, errbuf, errsize)) < 0)
		goto fail;
	/* A bound peer speaks for its own node only: checked before anything of the request is taken. */
	if (peer && peer->bind) {
		struct sr_pb_slice node = c.node_name.n ? c.node_name : c.host_name;
		char name[GW_AGENT_MAX_STRING_BYTES + 1];
		if (!peer_binds(peer, node)) {
			snprintf(errbuf, errsize,
				 "AgentInfo.%s \"%s\" is not a node this client may speak for (its %s names %s%s%s)",
				 c.node_name.n ? "node_name" : "host_name", gw_ingest_cstr(name, node),
				 peer->principal ? "certificate or token" : "credentials",
				 peer->n_node_names ? "\"" : "no node", peer->n_node_names ? peer->node_names[0] : "",
				 peer->n_node_names ? "\"" : "");
			e = -EPERM;
			goto fail;
		}
	}
	if ((e = each_field(r, stackrelay_v1_PushRequest_executables_tag, do_executable, &c, errbuf, errsize)) < 0 ||
	    (e = each_field(r, stackrelay_v1_PushRequest_kernels_tag, do_kernel, &c, errbuf, errsize)) < 0 ||
	    (e = each_field(r, stackrelay_v1_PushRequest_functions_tag, do_function, &c, errbuf, errsize)) < 0 ||
	    (e = each_field(r, stackrelay_v1_PushRequest_stacks_tag, do_stack, &c, errbuf, errsize)) < 0 ||
	    (e = each_field(r, stackrelay_v1_PushRequest_symbol_tables_tag, do_symbol_table, &c, errbuf, errsize)) <
		    0 ||
	    (e = each_field(r, stackrelay_v1_PushRequest_drops_tag, parse_drops, &c, errbuf, errsize)) < 0 ||
	    (!definitions_only &&
	     (e = each_field(r, stackrelay_v1_PushRequest_samples_tag, do_sample, &c, errbuf, errsize)) < 0) ||
	    (!definitions_only &&
	     (e = each_field(r, stackrelay_v1_PushRequest_probe_symbols_tag, do_probe, &c, errbuf, errsize)) < 0))
		goto fail;
	if ((e = gw_ingest_place_samples(&c)) < 0)
		goto fail;
	if (res->batch)
		gw_profiles__fit(res->batch); /* it waits in the pipeline as it is */
	res->probes = c.probed.n;
	res->missing_stacks = c.missing_stacks.n;
	res->missing_executables = c.defs.missing_exes.n;
	res->missing_kernels = c.defs.missing_kernels.n;
	res->missing_functions = c.defs.missing_functions.n;
	res->wanted = c.wanted.n;
	{
		struct resp rs = {
			.accepted = res->accepted,
			.symbols_pending = (uint32_t)SR_MIN(res->symbols_pending, (uint64_t)UINT32_MAX),
			.stacks = &c.missing_stacks,
			.exes = &c.defs.missing_exes,
			.kernels = &c.defs.missing_kernels,
			.functions = &c.defs.missing_functions,
			.wanted = &c.wanted,
		};
		if ((e = encode_response(&rs, &res->response, &res->response_len)) < 0)
			goto fail;
	}
	if (res->batch->n_samples == 0) {
		gw_profiles__unref(res->batch);
		res->batch = NULL;
	}
	e = 0;
	goto out;
fail:
	if (e == -ENOMEM)
		snprintf(errbuf, errsize, "out of memory processing the request");
	gw_ingest_result_release_asks(res);
	gw_ingest_result_free(res);
out:
	gw_ingest_pending_free(&c);
	gw_idlist__free(&c.missing_stacks);
	gw_idlist__free(&c.defs.missing_exes);
	gw_idlist__free(&c.defs.missing_kernels);
	gw_idlist__free(&c.defs.missing_functions);
	gw_idlist__free(&c.wanted);
	gw_idlist__free(&c.probed);
	sr_htab_done(&c.resources);
	gw_bytes_set__free(&c.thread_names);
	for (size_t i = 0; i < c.stacks_seen.cap; i++)
		if (c.stacks_seen.e[i].used && c.stacks_seen.e[i].value)
			gw_stack__unref((struct gw_stack *)c.stacks_seen.e[i].value);
	gw_bytes_set__free(&c.stacks_seen);
	gw_bytes_set__free(&c.kernels_seen);
	return e;
}

int gw_ingest_process(struct gw_stores *stores, const struct gw_ingest_peer *peer, const uint8_t *body, size_t len,
		      uint64_t epoch, struct gw_ingest_result *res, char *errbuf, size_t errsize)
{
	return process(stores, peer, body, len, epoch, false, res, errbuf, errsize);
}

int gw_ingest_process_definitions(struct gw_stores *stores, const struct gw_ingest_peer *peer, const uint8_t *body,
				  size_t len, uint64_t epoch, struct gw_ingest_result *res, char *errbuf,
				  size_t errsize)
{
	return process(stores, peer, body, len, epoch, true, res, errbuf, errsize);
}

void gw_ingest_result_release_asks(struct gw_ingest_result *res)
{
	for (size_t i = 0; i < res->n_asked_exes; i++)
		gw_executable__release_ask(res->asked_exes[i]);
	for (size_t i = 0; i < res->n_asked_kernels; i++)
		gw_kernel__release_ask(res->asked_kernels[i]);
}

void gw_ingest_result_free(struct gw_ingest_result *res)
{
	for (size_t i = 0; i < res->n_asked_exes; i++)
		gw_executable__unref(res->asked_exes[i]);
	free(res->asked_exes);
	for (size_t i = 0; i < res->n_asked_kernels; i++)
		gw_kernel__unref(res->asked_kernels[i]);
	free(res->asked_kernels);
	gw_profiles__unref(res->batch);
	for (size_t i = 0; i < res->n_tables; i++)
		gw_symbol_table_free(res->tables[i]);
	free(res->tables);
	free(res->response);
	memset(res, 0, sizeof(*res));
}

static int count_one(struct gw_ingest_ctx *c, struct sr_pbr m, char *errbuf, size_t errsize)
{
	struct gw_ingest_sample in;
	int e = gw_ingest_parse_sample(m, &in, errbuf, errsize);
	if (e < 0)
		return e;
	if (c->res->received + in.count < c->res->received)
		return -EBADMSG;
	c->res->received += in.count;
	return 0;
}

int gw_ingest_count_samples(const uint8_t *body, size_t len, uint64_t *ret, char *errbuf, size_t errsize)
{
	struct gw_ingest_result res = { 0 };
	struct gw_ingest_ctx c = { .defs = { .res = &res }, .res = &res };
	int e = each_field(sr_pbr_of(body, len), stackrelay_v1_PushRequest_samples_tag, count_one, &c, errbuf, errsize);
	*ret = res.received;
	return e;
}
