/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The `agent` receiver's requests (agent-private.h): the protocol's headers
 * (gw_agent_conn_ops, what the connection layer hands up), then a complete body is
 * gunzipped and processed by agent-ingest.c, on the loop when small and on
 * the receiver's decode thread when large; the loop then decides
 * de-duplication and admission, answers, accounts and emits the batch.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <nghttp2/nghttp2.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <uv.h>

#include "accounting.h"
#include "agent-dedupe.h"
#include "agent-ingest.h"
#include "agent-private.h"
#include "agent.h"
#include "common/gzip.h"
#include "common/log.h"
#include "common/macro.h"
#include "model.h"
#include "common/netaddr.h"
#include "runtime.h"
#include "common/units.h"

/* What a request with another Content-Type, or none, is told (415). */
#define CTYPE_MSG "content-type must be application/x-protobuf"

/* Shared by every receiver instance: per-request scratch epochs on shared stacks (loop thread). */
static uint64_t ingest_epoch;

/* ---- request processing ---- */

/* A request refused as it came while the pipeline admits again by its answer: retried after this long. */
#define AGENT_REOPENED_RETRY_MS 1000

static void hand_over_tables(struct gw_listener *rx, struct gw_ingest_result *res)
{
	for (size_t i = 0; i < GW_UPLOAD_REFUSAL_MAX; i++)
		agent_of(rx)->st.tables_refused[i] += res->tables_refused[i];
	memset(res->tables_refused, 0, sizeof(res->tables_refused));
	for (size_t i = 0; i < res->n_tables; i++) {
		agent_of(rx)->st.symbol_tables++;
		gw_runtime__symbol_table(rx->c->runtime, res->tables[i]);
		res->tables[i] = NULL;
	}
}

static void work_free(struct work *w)
{
	/* After hand_over_tables: the tables count as pending now, or were dropped. */
	if (w->upload_reserved)
		gw_runtime__symbol_table_done(w->rx->c->runtime, w->upload_reserved);
	w->rx->inflight_bytes -= w->cap;
	free(w->body);
	free(w->plain);
	gw_ingest_result_free(&w->res);
	free(w->token_node);
	free(w);
}

static void work_fail(struct work *w, int status, uint32_t retry_after_ms, const char *fmt, ...) SR_PRINTF(4, 5);

static void work_fail(struct work *w, int status, uint32_t retry_after_ms, const char *fmt, ...)
{
	va_list ap;

	w->status = status;
	w->retry_after_ms = retry_after_ms;
	va_start(ap, fmt);
	vsnprintf(w->msg, sizeof(w->msg), fmt, ap);
	va_end(ap);
}

/* The CPU-heavy part; touches nothing but w and the (thread-safe) stores. Any thread. */
static void work_run(struct work *w)
{
	char err[512];
	int e;

	if (w->gzip) {
		e = sr_gunzip(w->body, w->len, w->max_request_bytes, &w->plain, &w->plain_len);
		if (e == -EFBIG)
			return work_fail(w, 413, 0, "request body decompresses to more than max_request_bytes (%llu)",
					 (unsigned long long)w->max_request_bytes);
		if (e < 0)
			return work_fail(w, 400, 0, "request body is not valid gzip: %s", strerror(-e));
	}
	const uint8_t *body = w->plain ? w->plain : w->body ? w->body : (const uint8_t *)"";
	size_t len = w->plain ? w->plain_len : w->len;

	if (gw_ingest_header(body, len, &w->h, err, sizeof(err)) < 0)
		return work_fail(w, 400, 0, "cannot decode PushRequest: %s", err);
	if (w->h.protocol_version != GW_AGENT_PROTOCOL_VERSION) {
		if (w->h.protocol_version == 0)
			return work_fail(w, 400, 0,
					 "PushRequest.protocol_version is missing; this gateway speaks version %d",
					 GW_AGENT_PROTOCOL_VERSION);
		return work_fail(w, 400, 0,
				 "PushRequest.protocol_version %u is not supported; this gateway speaks version %d "
				 "(upgrade the older of agent and gateway)",
				 w->h.protocol_version, GW_AGENT_PROTOCOL_VERSION);
	}
	/*
	 * Refused anyway (the memory limiter is refusing): no work, no memory,
	 * no definitions interned for it. Its counts are what the refusal
	 * accounts; a resend of an answered request still gets its answer.
	 */
	if (w->closed) {
		if (gw_ingest_count_samples(body, len, &w->res.received, err, sizeof(err)) < 0)
			return work_fail(w, 400, 0, "invalid PushRequest: %s", err);
		return;
	}
	/*
	 * An upload with nothing else (how agents send them) waits at its agent
	 * while the symbolize processor has max_pending_uploads to add: told
	 * before it is decoded, so its retries cost little more than their
	 * transfer. (The runtime's admission is atomics, safe from here.)
	 */
	if (w->h.table_bytes && !w->h.n_samples) {
		uint32_t retry_ms = 0;

		if (gw_runtime__admit_symbol_tables(w->rx->c->runtime, w->h.table_bytes, &w->upload_reserved,
						    &retry_ms) < 0) {
			w->upload_deferred = true;
			return work_fail(
				w, 429, retry_ms,
				"the symbolizer has max_pending_uploads of symbol tables to add; retry after %u ms",
				retry_ms);
		}
	}
	/*
	 * Processed before de-duplication and admission are decided (on the loop,
	 * in work_finish): definitions are content-addressed, so interning them is
	 * harmless either way, and the samples only count if work_finish says so.
	 */
	e = gw_ingest_process(w->stores, &w->peer, body, len, w->epoch, &w->res, err, sizeof(err));
	if (e == -EPERM)
		return work_fail(w, 403, 0, "%s", err);
	if (e == -ENOMEM)
		return work_fail(w, 503, 1000, "the gateway is out of memory; retry later");
	if (e < 0)
		return work_fail(w, 400, 0, "invalid PushRequest: %s", err);
}

/* The loop part: what the request means for the pipeline and the agent. */
static void work_finish(struct work *w)
{
	struct gw_listener *rx = w->rx;
	struct gw_component *comp = rx->c;
	struct conn *c = w->conn;
	struct h2stream *s = NULL;
	uint32_t retry_ms = 0;

	agent_of(rx)->st.bytes_wire += w->len;
	agent_of(rx)->st.bytes_plain += w->plain ? w->plain_len : w->len;
	/* The stream may be gone (the agent reset it, the connection died) while decoding. */
	if (!c->handle_closed && !c->closing && nghttp2_session_get_stream_user_data(c->h2, w->stream_id) == w->s)
		s = w->s;
	if (w->status) {
		if (w->status == 400)
			rx->st.protocol_errors++;
		if (w->status == 403)
			agent_of(rx)->st.identity_refusals++;
		if (w->upload_deferred)
			agent_of(rx)->st.symbol_tables_deferred++;
		if (s)
			gw_net_respond_error(s, w->status, w->retry_after_ms, "%s", w->msg);
		goto out;
	}
	/*
	 * An agent that got no answer resends the same request; so a request
	 * whose stream is gone is not counted (and not remembered): its resend
	 * will be, once. Its symbol tables and definitions are kept.
	 */
	if (!s) {
		gw_ingest_result_release_asks(&w->res);
		hand_over_tables(rx, &w->res);
		goto out;
	}
	/* A resend of a request this replica answered: the same answer, counted once. */
	if (w->h.instance_id_len) {
		uint8_t *cached;
		size_t clen;
		if (gw_dedupe__lookup(agent_of(rx)->dedupe, w->h.instance_id, w->h.instance_id_len, w->h.sequence,
				      &cached, &clen) == 0) {
			agent_of(rx)->st.duplicates++;
			agent_of(rx)->st.duplicate_samples += w->res.received;
			/* Its definitions were taken; a symbol table in it goes to the symbolizer. The
			 * first answer is what the agent gets: what this processing asked for is not. */
			gw_ingest_result_release_asks(&w->res);
			hand_over_tables(rx, &w->res);
			gw_net_respond(s, 200, cached, clen, 0);
			goto out;
		}
	}
	if (gw_runtime__admit(comp->runtime, &retry_ms) < 0 || w->closed) {
		if (!retry_ms) /* closed when it came, open again now: soon */
			retry_ms = AGENT_REOPENED_RETRY_MS;
		gw_component_received(comp, w->res.received);
		gw_component_refused(comp, GW_REASON_RETRY_LATER, w->res.received);
		/* Its wanted_symbols are not delivered either: the next request (this resend, or another agent's) asks. */
		gw_ingest_result_release_asks(&w->res);
		/* Its tables answered asks (now spent): kept, as when the stream is gone, or the resend's are refused. */
		hand_over_tables(rx, &w->res);
		gw_net_respond_error(s, 429, retry_ms, "%s; retry after %u ms", gw_runtime__refusal(comp->runtime),
				     retry_ms);
		goto out;
	}
	gw_component_received(comp, w->res.received);
	if (w->res.refused_missing)
		gw_component_refused(comp, GW_REASON_MISSING_DEFINITION, w->res.refused_missing);
	agent_of(rx)->st.missing_stacks += w->res.missing_stacks;
	agent_of(rx)->st.missing_executables += w->res.missing_executables;
	agent_of(rx)->st.missing_kernels += w->res.missing_kernels;
	agent_of(rx)->st.missing_functions += w->res.missing_functions;
	agent_of(rx)->st.wanted += w->res.wanted;
	agent_of(rx)->st.probes += w->res.probes;
	agent_of(rx)->st.probes_pending += w->res.symbols_pending;
	agent_of(rx)->st.agent_drops.ring_buffer_full += w->res.drops.ring_buffer_full;
	agent_of(rx)->st.agent_drops.stack_errors += w->res.drops.stack_errors;
	agent_of(rx)->st.agent_drops.buffer_overflow += w->res.drops.buffer_overflow;
	agent_of(rx)->st.agent_drops.process_unknown += w->res.drops.process_unknown;
	hand_over_tables(rx, &w->res);
	if (w->h.instance_id_len)
		gw_dedupe__insert(agent_of(rx)->dedupe, w->h.instance_id, w->h.instance_id_len, w->h.sequence,
				  w->res.response, w->res.response_len);
	/* Answer before the pipeline runs: the response is final either way. */
	gw_net_respond(s, 200, w->res.response, w->res.response_len, 0);
	w->res.response = NULL;
	if (w->res.batch) {
		struct gw_profiles *b = w->res.batch;
		w->res.batch = NULL;
		gw_component_emit(comp, b);
	}
out:
	work_free(w);
}

/* ---- the decode thread ---- */

void gw_agent_job_run(struct gw_decode_job *j)
{
	work_run(SR_CONTAINER_OF(j, struct work, job));
}

/* Finishes (or, when discard, just frees) a job that came back from the decode thread. */
void gw_agent_job_returned(struct gw_decode_job *j, bool discard)
{
	struct work *w = SR_CONTAINER_OF(j, struct work, job);
	struct gw_listener *rx = w->rx;
	struct conn *c = w->conn;

	if (discard)
		work_free(w);
	else
		work_finish(w);
	rx->jobs--;
	if (--c->jobs == 0 && c->handle_closed)
		gw_net_conn_free(c); /* also re-checks gw_listener_maybe_done */
	else {
		if (!c->closing && !rx->destroyed)
			gw_net_conn_flush(c);
		gw_listener_maybe_done(rx);
	}
}

static void process_request(struct h2stream *s)
{
	struct conn *c = s->conn;
	struct gw_listener *rx = c->rx;
	struct gw_agent_rx *a = agent_of(rx);
	struct work *w = calloc(1, sizeof(*w));

	if (!w) {
		gw_net_respond_error(s, 503, 1000, "out of memory; retry later");
		return;
	}
	w->rx = rx;
	w->conn = c;
	w->s = s;
	w->stream_id = s->id;
	w->gzip = s->gzip;
	w->epoch = ++ingest_epoch;
	w->max_request_bytes = rx->cfg->max_request_bytes;
	w->stores = gw_runtime__stores(rx->c->runtime);
	gw_agent_work_peer(w, c, s);
	w->closed = !gw_runtime__admits(rx->c->runtime);
	/* The body moves to the work (still counted in inflight_bytes until it is freed). */
	w->body = s->body;
	w->len = s->len;
	w->cap = s->cap;
	s->body = NULL;
	s->len = s->cap = 0;
	s->processing = true;
	if (w->len <= (w->gzip ? GW_AGENT_INLINE_MAX_GZIP_BYTES : GW_AGENT_INLINE_MAX_BYTES) || !a->dec.started) {
		work_run(w);
		work_finish(w);
		return;
	}
	rx->jobs++;
	c->jobs++;
	gw_decode_thread_submit(&a->dec, &w->job);
}

/* ---- the protocol's headers (gw_agent_conn_ops) ---- */

static void on_header(struct h2stream *s, const uint8_t *name, size_t namelen, const uint8_t *value, size_t valuelen)
{
	if (gw_net_name_is(name, namelen, ":method")) {
		if (!gw_net_value_is(value, valuelen, "POST"))
			gw_net_stream_error(s, 405, "only POST " PUSH_PATH " is served");
	} else if (gw_net_name_is(name, namelen, ":path")) {
		if (!(valuelen == sizeof(PUSH_PATH) - 1 && memcmp(value, PUSH_PATH, valuelen) == 0))
			gw_net_stream_error(s, 404, "unknown path; the agent protocol is POST " PUSH_PATH);
	} else if (gw_net_name_is(name, namelen, "content-type")) {
		/* Media type without parameters, case-insensitive. */
		size_t n = 0;
		while (n < valuelen && value[n] != ';' && value[n] != ' ')
			n++;
		if (gw_net_value_is(value, n, "application/x-protobuf") ||
		    gw_net_value_is(value, n, "application/protobuf"))
			s->have_ctype = true;
		else
			gw_net_stream_error(s, 415, CTYPE_MSG);
	} else if (gw_net_name_is(name, namelen, "content-encoding")) {
		if (gw_net_value_is(value, valuelen, "gzip"))
			s->gzip = true;
		else if (!gw_net_value_is(value, valuelen, "identity"))
			gw_net_stream_error(s, 415, "content-encoding must be gzip or identity");
	}
}

/* An error as the agent protocol answers it: a PushResponse with the message and retry_after_ms. */
static void on_error(struct h2stream *s, int status, uint32_t retry_after_ms, const char *msg)
{
	uint8_t *body = NULL;
	size_t len = 0;

	if (gw_ingest_encode_error(retry_after_ms, msg, &body, &len) < 0)
		len = 0;
	gw_net_respond(s, status, body, len, retry_after_ms);
}

/* One token per node: the node an Authorization value's token speaks for. */
static char *node_token(struct gw_listener *rx, const uint8_t *value, size_t len)
{
	gw_agent_node_tokens_recheck(rx);
	return gw_agent_node_token_lookup(rx, value, len);
}

const struct gw_conn_ops gw_agent_conn_ops = {
	.header = on_header,
	.request = process_request,
	.error = on_error,
	.component = COMPONENT,
	.content_type_msg = CTYPE_MSG,
	.tls_accepted = gw_agent_conn_identity,
	.node_token = node_token,
	.release = gw_agent_release,
};
