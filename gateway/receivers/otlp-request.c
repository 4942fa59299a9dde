/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The `otlp` receiver's requests (otlp-private.h): the headers of OTLP/gRPC
 * and OTLP/HTTP calls, a complete body unframed (gRPC length prefix) and
 * gunzipped within the protocol's size limit, decoded (otlp-decode.h),
 * admitted, accounted, answered (ExportProfilesServiceResponse with
 * partial_success, or an error: google.rpc.Status over HTTP, grpc-status and
 * grpc-message over gRPC) and emitted.
 */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accounting.h"
#include "common/grow.h"
#include "common/gzip.h"
#include "common/log.h"
#include "common/macro.h"
#include "model.h"
#include "otlp-json.h"
#include "otlp-private.h"
#include "common/pbwire.h"
#include "runtime.h"

/* What a request with another Content-Type, or none, is told (415). */
#define GRPC_CTYPE_MSG "content-type must be application/grpc (protobuf)"
#define HTTP_CTYPE_MSG "content-type must be application/x-protobuf or application/json"

static struct otlp_listener *listener_of(struct h2stream *s)
{
	return (struct otlp_listener *)s->conn->rx; /* rx is its first member */
}

/* The media type of a content-type value, without parameters. */
static size_t media_type_len(const uint8_t *v, size_t len)
{
	size_t n = 0;
	while (n < len && v[n] != ';' && v[n] != ' ')
		n++;
	return n;
}

/* ---- headers ---- */

/*
 * include_metadata: every header but pseudo-headers (and authorization and
 * content-length, which never reach here), as "name: value\n" with the name
 * lowercase (HTTP/1.1 names may come in any case). Bounded: the whole list
 * is at most max_header_list_bytes. A value with a line break is left out.
 */
static void keep_metadata(struct h2stream *s, const uint8_t *name, size_t namelen, const uint8_t *value,
			  size_t valuelen)
{
	size_t need = namelen + valuelen + 3;
	char *m;

	if (!listener_of(s)->include_metadata || namelen == 0 || name[0] == ':' || memchr(value, '\n', valuelen) ||
	    memchr(value, '\r', valuelen) || memchr(value, '\0', valuelen) || memchr(name, ':', namelen))
		return;
	if (sr_grow((void **)&s->metadata, &s->metadata_cap, s->metadata_len + need + 1, 1, 256) < 0)
		return; /* out of memory: the batch goes without this header */
	m = s->metadata + s->metadata_len;
	for (size_t i = 0; i < namelen; i++)
		m[i] = (char)tolower(name[i]);
	m[namelen] = ':';
	m[namelen + 1] = ' ';
	memcpy(m + namelen + 2, value, valuelen);
	m[namelen + 2 + valuelen] = '\n';
	m[need] = '\0';
	s->metadata_len += need;
}

static void grpc_header(struct h2stream *s, const uint8_t *name, size_t namelen, const uint8_t *value, size_t valuelen)
{
	keep_metadata(s, name, namelen, value, valuelen);
	if (gw_net_name_is(name, namelen, ":method")) {
		if (!gw_net_value_is(value, valuelen, "POST"))
			gw_net_stream_error(s, 405, "gRPC calls are POST");
	} else if (gw_net_name_is(name, namelen, ":path")) {
		if (!(valuelen == sizeof(OTLP_GRPC_PATH) - 1 && memcmp(value, OTLP_GRPC_PATH, valuelen) == 0))
			gw_net_stream_error(s, 404, "unknown method; this server implements " OTLP_GRPC_PATH);
	} else if (gw_net_name_is(name, namelen, "content-type")) {
		size_t n = media_type_len(value, valuelen);
		if (gw_net_value_is(value, n, "application/grpc") ||
		    gw_net_value_is(value, n, "application/grpc+proto"))
			s->have_ctype = true;
		else
			gw_net_stream_error(s, 415, GRPC_CTYPE_MSG);
	} else if (gw_net_name_is(name, namelen, "grpc-encoding")) {
		if (gw_net_value_is(value, valuelen, "gzip"))
			s->proto_flags |= OTLP_F_GRPC_ENCODING;
		else if (!gw_net_value_is(value, valuelen, "identity"))
			gw_net_stream_error(s, 415, "grpc-encoding must be gzip or identity");
	}
}

static void http_header(struct h2stream *s, const uint8_t *name, size_t namelen, const uint8_t *value, size_t valuelen)
{
	keep_metadata(s, name, namelen, value, valuelen);
	if (gw_net_name_is(name, namelen, ":method")) {
		if (!gw_net_value_is(value, valuelen, "POST"))
			gw_net_stream_error(s, 405, "only POST " OTLP_HTTP_PATH " is served");
	} else if (gw_net_name_is(name, namelen, ":path")) {
		if (!(valuelen == sizeof(OTLP_HTTP_PATH) - 1 && memcmp(value, OTLP_HTTP_PATH, valuelen) == 0))
			gw_net_stream_error(s, 404, "unknown path; OTLP profiles are POST " OTLP_HTTP_PATH);
	} else if (gw_net_name_is(name, namelen, "content-type")) {
		size_t n = media_type_len(value, valuelen);
		if (gw_net_value_is(value, n, "application/x-protobuf") ||
		    gw_net_value_is(value, n, "application/protobuf"))
			s->have_ctype = true;
		else if (gw_net_value_is(value, n, "application/json")) {
			s->have_ctype = true;
			s->proto_flags |= OTLP_F_JSON;
		} else
			gw_net_stream_error(s, 415, HTTP_CTYPE_MSG);
	} else if (gw_net_name_is(name, namelen, "content-encoding")) {
		if (gw_net_value_is(value, valuelen, "gzip"))
			s->gzip = true;
		else if (!gw_net_value_is(value, valuelen, "identity"))
			gw_net_stream_error(s, 415, "content-encoding must be gzip or identity");
	}
}

/* ---- answers ---- */

/* The gRPC status code an HTTP status of ours stands for. */
static int grpc_code(int status)
{
	switch (status) {
	case 200:
		return 0; /* OK */
	case 400:
		return 3; /* INVALID_ARGUMENT */
	case 401:
		return 16; /* UNAUTHENTICATED */
	case 404:
	case 405:
	case 415:
		return 12; /* UNIMPLEMENTED */
	case 408:
		return 4; /* DEADLINE_EXCEEDED */
	case 413:
	case 431:
		return 8; /* RESOURCE_EXHAUSTED (431: request headers too large) */
	case 429:
	case 503:
		return 14; /* UNAVAILABLE: retryable */
	default:
		return 13; /* INTERNAL */
	}
}

/* grpc-message is percent-encoded (gRPC over HTTP/2: printable ASCII but '%' as is). */
static void percent_encode(const char *in, char *out, size_t size)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;
	for (; *in && o + 4 < size; in++) {
		unsigned char ch = (unsigned char)*in;
		if (ch >= 0x20 && ch <= 0x7e && ch != '%')
			out[o++] = (char)ch;
		else {
			out[o++] = '%';
			out[o++] = hex[ch >> 4];
			out[o++] = hex[ch & 15];
		}
	}
	out[o] = '\0';
}

/* A JSON string's contents (no quotes), cut to fit. */
static void json_escape(const char *in, char *out, size_t size)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;
	for (; *in && o + 7 < size; in++) {
		unsigned char ch = (unsigned char)*in;
		if (ch == '"' || ch == '\\') {
			out[o++] = '\\';
			out[o++] = (char)ch;
		} else if (ch < 0x20) {
			memcpy(out + o, "\\u00", 4);
			o += 4;
			out[o++] = hex[ch >> 4];
			out[o++] = hex[ch & 15];
		} else
			out[o++] = (char)ch;
	}
	out[o] = '\0';
}

static void respond_json(struct h2stream *s, int status, const char *json, uint32_t retry_after_ms)
{
	char *body = strdup(json);
	gw_net_respond_ex(s, status, "application/json", (uint8_t *)body, body ? strlen(body) : 0, retry_after_ms, NULL,
			  NULL);
}

static void otlp_error(struct h2stream *s, int status, uint32_t retry_after_ms, const char *msg)
{
	struct otlp_listener *l = listener_of(s);
	struct sr_pbw w = { 0 };

	if (status == 400)
		l->st.invalid++;
	else if (status == 413)
		l->st.too_large++;

	if (l->proto == OTLP_GRPC) {
		char code[8], enc[1024];
		snprintf(code, sizeof(code), "%d", grpc_code(status));
		percent_encode(msg, enc, sizeof(enc));
		/* gRPC errors are trailers-only answers with HTTP status 200. */
		gw_net_respond_ex(s, 200, "application/grpc", NULL, 0, 0, code, enc);
		s->conn->rx->statuses[ST_200]--; /* counted by what it means, below */
		for (size_t i = 0; i < SR_ARRAY_SIZE(status_codes); i++)
			if (status_codes[i] == status)
				s->conn->rx->statuses[i]++;
		return;
	}
	if (s->proto_flags & OTLP_F_JSON) {
		char buf[1200];
		int n = snprintf(buf, sizeof(buf), "{\"code\":%d,\"message\":\"", grpc_code(status));
		json_escape(msg, buf + n, sizeof(buf) - (size_t)n - 2);
		strcat(buf, "\"}");
		respond_json(s, status, buf, retry_after_ms);
		return;
	}
	/* OTLP/HTTP: a google.rpc.Status (code, message). */
	sr_pbw__uint(&w, 1, (uint64_t)grpc_code(status));
	sr_pbw__string(&w, 2, msg);
	if (sr_pbw__error(&w)) {
		sr_pbw__free(&w);
		w.buf = NULL;
		w.len = 0;
	}
	gw_net_respond_ex(s, status, "application/x-protobuf", w.buf, w.len, retry_after_ms, NULL, NULL);
}

/* ExportProfilesServiceResponse { partial_success = 1 { rejected_profiles = 1; error_message = 2 } } */
static int encode_response(const struct gw_otlp_decode_result *res, bool grpc, uint8_t **ret, size_t *ret_len)
{
	struct sr_pbw w = { 0 };
	if (grpc)
		sr_pbw__raw(&w, "\0\0\0\0\0", 5); /* uncompressed, length filled in below */
	if (res->rejected_profiles || res->message[0]) {
		size_t m = sr_pbw__begin(&w, 1);
		sr_pbw__int(&w, 1, (int64_t)res->rejected_profiles);
		sr_pbw__string(&w, 2, res->message);
		sr_pbw__end(&w, m);
	}
	if (sr_pbw__error(&w)) {
		sr_pbw__free(&w);
		return -ENOMEM;
	}
	if (grpc) {
		if (!w.buf && !sr_pbw__reserve(&w, 5))
			return -ENOMEM;
		uint32_t n = (uint32_t)(w.len - 5);
		w.buf[1] = (uint8_t)(n >> 24);
		w.buf[2] = (uint8_t)(n >> 16);
		w.buf[3] = (uint8_t)(n >> 8);
		w.buf[4] = (uint8_t)n;
	}
	*ret = w.buf;
	*ret_len = w.len;
	return 0;
}

/* ---- requests ---- */

/*
 * One request's body and what decoding it produced. Made on the loop; the
 * CPU-heavy part (job_run: gRPC framing, gunzip, JSON, decoding) runs on the
 * loop for small bodies and on the receiver's decode thread for large ones;
 * job_finish (admission, accounting, the answer, emitting) on the loop.
 */
struct otlp_job {
	struct gw_decode_job job; /* on the decode thread's lists */
	struct otlp_listener *l;
	struct conn *conn;
	struct h2stream *s; /* still the stream's only if gw_net_stream_alive() says so at finish */
	int32_t stream_id;
	uint8_t *body;
	size_t len, cap;
	bool gzip;
	uint32_t proto_flags;
	struct gw_stores *stores;
	struct gw_otlp_decode_options dopts;
	/* results */
	int status; /* 0: decoded into res; otherwise answer status with msg */
	uint32_t retry_after_ms;
	size_t plain_len;
	char msg[512];
	struct gw_otlp_decode_result res;
};

static void job_fail(struct otlp_job *j, int status, const char *fmt, ...) SR_PRINTF(3, 4);

static void job_fail(struct otlp_job *j, int status, const char *fmt, ...)
{
	va_list ap;

	j->status = status;
	j->retry_after_ms = status == 503 ? 1000 : 0;
	va_start(ap, fmt);
	vsnprintf(j->msg, sizeof(j->msg), fmt, ap);
	va_end(ap);
}

/*
 * The plain ExportProfilesServiceRequest bytes of the body into *plain (the
 * body itself or a malloc'd *owned): gRPC framing removed, gzip undone
 * within the protocol's limit. 0, or -1 with the job failed.
 */
static int unwrap(struct otlp_job *j, const uint8_t **plain, size_t *plain_len, uint8_t **owned)
{
	struct otlp_listener *l = j->l;
	const uint8_t *body = j->body ? j->body : (const uint8_t *)"";
	size_t len = j->len;
	bool gz = j->gzip;
	int e;

	if (l->proto == OTLP_GRPC) {
		if (len < 5) {
			job_fail(j, 400, "gRPC message prefix truncated (%zu of 5 bytes)", len);
			return -1;
		}
		uint32_t n = (uint32_t)body[1] << 24 | (uint32_t)body[2] << 16 | (uint32_t)body[3] << 8 | body[4];
		if (body[0] > 1) {
			job_fail(j, 400, "gRPC message flag %u is not 0 or 1", body[0]);
			return -1;
		}
		if ((size_t)n != len - 5) {
			job_fail(j, 400,
				 "gRPC message length %u does not match the %zu bytes sent (one message per call)", n,
				 len - 5);
			return -1;
		}
		if (body[0] == 1 && !(j->proto_flags & OTLP_F_GRPC_ENCODING)) {
			job_fail(j, 400, "gRPC message compressed without grpc-encoding");
			return -1;
		}
		gz = body[0] == 1;
		body += 5;
		len -= 5;
	}
	*plain = body;
	*plain_len = len;
	if (!gz)
		return 0;
	e = sr_gunzip(body, len, l->max_body, owned, plain_len);
	if (e == -EFBIG)
		job_fail(j, 413, "request decompresses to more than %s (%llu bytes)",
			 l->proto == OTLP_GRPC ? "max_recv_msg_size_mib" : "max_request_body_size",
			 (unsigned long long)l->max_body);
	else if (e == -ENOMEM)
		job_fail(j, 503, "out of memory; retry later");
	else if (e < 0)
		job_fail(j, 400, "request is not valid gzip (%s)",
			 e == -EBADMSG ? "corrupt or truncated" : strerror(-e));
	else
		*plain = *owned;
	return e < 0 ? -1 : 0;
}

/* The CPU-heavy part; touches nothing but j and the (thread-safe) stores. Any thread. */
static void job_run(struct otlp_job *j)
{
	const uint8_t *plain = NULL;
	uint8_t *owned = NULL;
	size_t plain_len = 0;

	if (unwrap(j, &plain, &plain_len, &owned) < 0)
		goto out;
	j->plain_len = plain_len;
	if (j->proto_flags & OTLP_F_JSON) {
		/* JSON names the same fields alike in both versions: read as the configured one (auto: v1.10). */
		struct gw_otlp_json_limits jl = { .max_input_bytes = j->l->max_body,
						  .max_output_bytes = j->l->max_body };
		struct sr_pbw pb = { 0 };
		char err[400];
		j->dopts.version = j->dopts.version == GW_OTLP_DECODE_V1_9 ? GW_OTLP_DECODE_V1_9 : GW_OTLP_DECODE_V1_10;
		int e = gw_otlp_json_transcode(plain, plain_len,
					       j->dopts.version == GW_OTLP_DECODE_V1_9 ? GW_OTLP_V1_9 : GW_OTLP_V1_10,
					       &jl, &pb, err, sizeof(err));
		if (e < 0) {
			sr_pbw__free(&pb);
			job_fail(j, e == -EMSGSIZE ? 413 : e == -ENOMEM ? 503 : 400, "invalid OTLP/JSON: %s", err);
			goto out;
		}
		free(owned);
		owned = pb.buf;
		plain = pb.buf ? pb.buf : (const uint8_t *)"";
		plain_len = pb.len;
	}
	switch (gw_otlp_decode(j->stores, plain, plain_len, &j->dopts, &j->res)) {
	case GW_OTLP_DECODE_OK:
		break;
	case GW_OTLP_DECODE_TOO_LARGE:
		job_fail(j, 413, "%s", j->res.message);
		break;
	case GW_OTLP_DECODE_NO_MEMORY:
		job_fail(j, 503, "the gateway is out of memory; retry later");
		break;
	default: /* INVALID, AMBIGUOUS */
		job_fail(j, 400, "%s", j->res.message);
		break;
	}
out:
	free(owned);
}

static void job_free(struct otlp_job *j)
{
	j->l->rx.inflight_bytes -= j->cap;
	free(j->body);
	gw_otlp_decode_result_fini(&j->res);
	free(j);
}

/* The loop part: what the request means for the pipeline and the sender. */
static void job_finish(struct otlp_job *j)
{
	struct otlp_listener *l = j->l;
	struct gw_component *comp = l->o->c;
	struct gw_otlp_decode_result *res = &j->res;
	struct h2stream *s = NULL;
	uint8_t *resp = NULL;
	size_t resp_len = 0;
	uint32_t retry_ms;

	l->st.bytes_wire += j->len;
	l->st.bytes_plain += j->plain_len;
	/* The stream may be gone (the client reset it, the connection died) while decoding. */
	if (gw_net_stream_alive(j->conn, j->stream_id, j->s))
		s = j->s;
	if (j->status) {
		if (s)
			gw_net_respond_error(s, j->status, j->retry_after_ms, "%s", j->msg);
		return;
	}
	/* Nobody waits for the answer: not taken (the sender resends), its definitions stay. */
	if (!s)
		return;
	if (gw_runtime__admit(comp->runtime, &retry_ms) < 0) {
		gw_component_received(comp, res->received);
		gw_component_refused(comp, GW_REASON_RETRY_LATER, res->received);
		gw_net_respond_error(s, l->proto == OTLP_GRPC ? 503 : 429, retry_ms, "%s; retry after %u ms",
				     gw_runtime__refusal(comp->runtime), retry_ms);
		return;
	}
	gw_component_received(comp, res->received);
	if (res->refused)
		gw_component_refused(comp, GW_REASON_BAD_REQUEST, res->refused);
	l->st.rejected_profiles += res->rejected_profiles;
	l->st.links_dropped += res->links_dropped;
	l->st.attrs_dropped += res->attrs_dropped;
	if (res->batch && s->metadata && gw_profiles__set_metadata(res->batch, s->metadata, NULL) < 0) {
		/* Without its tenant the batch could go to the wrong one: not taken, the client resends. */
		gw_component_refused(comp, GW_REASON_RETRY_LATER, res->accepted);
		gw_net_respond_error(s, 503, 1000, "out of memory; retry later");
		return;
	}
	if (res->batch) {
		gw_profiles_foreach_resource(res->batch, r)
		{
			if (j->conn->peer_addr[0] && gw_resource__set_peer(res->batch, r, j->conn->peer_addr) < 0)
				break; /* out of memory: k8s_attributes then cannot match by peer */
		}
	}
	if (encode_response(res, l->proto == OTLP_GRPC, &resp, &resp_len) < 0) {
		/* Too little memory to answer: not taken, the client resends. */
		gw_component_refused(comp, GW_REASON_RETRY_LATER, res->accepted);
		gw_net_respond_error(s, 503, 1000, "out of memory; retry later");
		return;
	}
	/* Answer before the pipeline runs: the answer is final either way. */
	if (l->proto == OTLP_GRPC)
		gw_net_respond_ex(s, 200, "application/grpc", resp, resp_len, 0, "0", NULL);
	else if (j->proto_flags & OTLP_F_JSON) {
		char buf[700], esc[600];
		free(resp);
		json_escape(res->message, esc, sizeof(esc));
		if (res->rejected_profiles || res->message[0])
			snprintf(buf, sizeof(buf),
				 "{\"partialSuccess\":{\"rejectedProfiles\":\"%llu\",\"errorMessage\":\"%s\"}}",
				 (unsigned long long)res->rejected_profiles, esc);
		else
			snprintf(buf, sizeof(buf), "{}");
		respond_json(s, 200, buf, 0);
	} else
		gw_net_respond_ex(s, 200, "application/x-protobuf", resp, resp_len, 0, NULL, NULL);
	if (res->batch) {
		struct gw_profiles *b = res->batch;
		res->batch = NULL;
		gw_component_emit(comp, b);
	}
}

/* ---- the decode thread ---- */

void gw_otlp_job_run(struct gw_decode_job *j)
{
	job_run(SR_CONTAINER_OF(j, struct otlp_job, job));
}

/* A job back from the decode thread: finished, or (discard: the receiver is going away) just freed. */
void gw_otlp_job_returned(struct gw_decode_job *dj, bool discard)
{
	struct otlp_job *j = SR_CONTAINER_OF(dj, struct otlp_job, job);
	struct gw_listener *rx = &j->l->rx;
	struct conn *c = j->conn;

	if (!discard)
		job_finish(j);
	job_free(j);
	rx->jobs--;
	if (--c->jobs == 0 && c->handle_closed)
		gw_net_conn_free(c); /* also re-checks gw_listener_maybe_done */
	else {
		if (!discard && !c->closing && !rx->destroyed)
			gw_net_conn_flush(c);
		gw_listener_maybe_done(rx);
	}
}

static void otlp_request(struct h2stream *s)
{
	struct otlp_listener *l = listener_of(s);
	struct otlp_rx *o = l->o;
	struct conn *c = s->conn;
	struct otlp_job *j = calloc(1, sizeof(*j));

	if (!j) {
		gw_net_respond_error(s, 503, 1000, "out of memory; retry later");
		return;
	}
	j->l = l;
	j->conn = c;
	j->s = s;
	j->stream_id = s->id;
	j->gzip = s->gzip;
	j->proto_flags = s->proto_flags;
	j->stores = gw_runtime__stores(o->c->runtime);
	j->dopts = o->dopts;
	/* The body moves to the job (still counted in inflight_bytes until it is freed). */
	j->body = s->body;
	j->len = s->len;
	j->cap = s->cap;
	s->body = NULL;
	s->len = s->cap = 0;
	s->processing = true;
	if (j->len <= GW_AGENT_INLINE_MAX_BYTES || !o->dec.started) {
		job_run(j);
		job_finish(j);
		job_free(j);
		return;
	}
	l->rx.jobs++;
	c->jobs++;
	gw_decode_thread_submit(&o->dec, &j->job);
}

const struct gw_conn_ops gw_otlp_grpc_ops = {
	.header = grpc_header,
	.request = otlp_request,
	.error = otlp_error,
	.http1 = false,
	.component = OTLP_COMPONENT,
	.content_type_msg = GRPC_CTYPE_MSG,
	.too_large_msg = "request exceeds max_recv_msg_size_mib",
};

const struct gw_conn_ops gw_otlp_http_ops = {
	.header = http_header,
	.request = otlp_request,
	.error = otlp_error,
	.http1 = true,
	.component = OTLP_COMPONENT,
	.content_type_msg = HTTP_CTYPE_MSG,
	.too_large_msg = "request body exceeds max_request_body_size",
};
