/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Answers on the receivers' connections (gateway/net/conn.h): an HTTP/2
 * response with its body, Retry-After and gRPC trailers, or the HTTP/1.1
 * answer through net/h1.c; errors logged once a minute at warn level and
 * answered in the receiver's own encoding; counted by status.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nghttp2/nghttp2.h>

#include "gateway/net/h1.h"
#include "gateway/net/conn.h"
#include "component.h"
#include "common/log.h"
#include "common/macro.h"

static void count_status(struct gw_listener *rx, int status)
{
	for (size_t i = 0; i < SR_ARRAY_SIZE(status_codes); i++)
		if (status_codes[i] == status) {
			rx->statuses[i]++;
			return;
		}
	rx->statuses[ST_500]++;
}

static ssize_t resp_read(nghttp2_session *session, int32_t stream_id, uint8_t *buf, size_t length, uint32_t *data_flags,
			 nghttp2_data_source *source, void *user_data)
{
	struct h2stream *s = source->ptr;
	size_t n = SR_MIN(length, s->resp_len - s->resp_off);
	if (n)
		memcpy(buf, s->resp + s->resp_off, n);
	s->resp_off += n;
	if (s->resp_off == s->resp_len) {
		*data_flags |= NGHTTP2_DATA_FLAG_EOF;
		if (s->grpc_status[0]) {
			nghttp2_nv trl[2] = {
				{ (uint8_t *)"grpc-status", (uint8_t *)s->grpc_status, 11, strlen(s->grpc_status),
				  NGHTTP2_NV_FLAG_NONE },
				{ (uint8_t *)"grpc-message", (uint8_t *)(s->grpc_message ? s->grpc_message : ""), 12,
				  s->grpc_message ? strlen(s->grpc_message) : 0, NGHTTP2_NV_FLAG_NONE },
			};
			if (nghttp2_submit_trailer(session, stream_id, trl, s->grpc_message ? 2 : 1) == 0)
				*data_flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
		}
	}
	return (ssize_t)n;
}

#define NV(n, v)                                                                                                       \
	{                                                                                                              \
		(uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v), NGHTTP2_NV_FLAG_NO_COPY_NAME                 \
	}

/* Answers s with status and an encoded PushResponse (taken). */
void gw_net_respond(struct h2stream *s, int status, uint8_t *body, size_t len, uint32_t retry_after_ms)
{
	gw_net_respond_ex(s, status, "application/x-protobuf", body, len, retry_after_ms, NULL, NULL);
}

void gw_net_respond_ex(struct h2stream *s, int status, const char *content_type, uint8_t *body, size_t len,
		       uint32_t retry_after_ms, const char *grpc_status, const char *grpc_message)
{
	struct conn *c = s->conn;
	nghttp2_data_provider prd = { .source.ptr = s, .read_callback = resp_read };
	nghttp2_nv nva[6];
	size_t n = 0;

	if (s->responded) {
		free(body);
		return;
	}
	s->responded = true;
	count_status(c->rx, status);
	gw_duration_histogram__observe(&c->rx->request_duration, (double)(uv_hrtime() - s->started_ns) / 1e9);
	/* The request body is no longer needed. */
	c->rx->inflight_bytes -= s->cap;
	free(s->body);
	s->body = NULL;
	s->len = s->cap = 0;
	if (c->h1) {
		gw_h1_respond(s, status, content_type, body, len, retry_after_ms);
		return;
	}
	if (s->head_only && !grpc_status) {
		free(body); /* the answer to HEAD: headers only, the length that of the body a GET gets */
		body = NULL;
	} else {
		s->resp = body;
		s->resp_len = len;
	}
	snprintf(s->status_s, sizeof(s->status_s), "%d", status);
	snprintf(s->len_s, sizeof(s->len_s), "%zu", len);
	nva[n++] = (nghttp2_nv)NV(":status", s->status_s);
	nva[n++] = (nghttp2_nv)NV("content-type", content_type);
	if (!grpc_status)
		nva[n++] = (nghttp2_nv)NV("content-length", s->len_s);
	if (retry_after_ms) {
		/* Retry-After has whole seconds; the body has the exact milliseconds. */
		snprintf(s->retry_s, sizeof(s->retry_s), "%u", (retry_after_ms + 999) / 1000);
		nva[n++] = (nghttp2_nv)NV("retry-after", s->retry_s);
	}
	if (grpc_status) {
		snprintf(s->grpc_status, sizeof(s->grpc_status), "%s", grpc_status);
		s->grpc_message = grpc_message && *grpc_message ? strdup(grpc_message) : NULL;
		if (!body) { /* trailers-only */
			nva[n++] = (nghttp2_nv)NV("grpc-status", s->grpc_status);
			if (s->grpc_message)
				nva[n++] = (nghttp2_nv)NV("grpc-message", s->grpc_message);
		}
	}
	if (nghttp2_submit_response(c->h2, s->id, nva, n, !body && (grpc_status || s->head_only) ? NULL : &prd) != 0)
		nghttp2_submit_rst_stream(c->h2, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_INTERNAL_ERROR);
}

void gw_net_respond_error(struct h2stream *s, int status, uint32_t retry_after_ms, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* Bad requests mean an incompatible or broken agent: worth a warning, at most once a minute. */
	struct gw_listener *rx = s->conn->rx;
	const char *comp = rx->ops->component;
	if (s->responded)
		return;
	if (status == 400 && (rx->last_warn_ms == 0 || gw_net_now_ms(rx) - rx->last_warn_ms >= 60000)) {
		rx->last_warn_ms = gw_net_now_ms(rx);
		sr_log_warn(comp, "refusing an invalid request (further ones are logged at debug for a minute)",
			    "id=%s peer=%s status=%d error=\"%s\"", rx->c->id, s->conn->peer, status, msg);
	} else
		sr_log_debug(comp, "request refused", "id=%s peer=%s status=%d error=\"%s\"", rx->c->id, s->conn->peer,
			     status, msg);
	rx->ops->error(s, status, retry_after_ms, msg);
}
