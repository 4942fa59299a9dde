// SPDX-License-Identifier: Apache-2.0
/*
 * HTTP POSTs on libuv: each request is one libcurl easy handle, run by the
 * libcurl-multi-on-libuv driver (core/curl-uv.c); this file gives requests
 * their meaning (headers, TLS, HTTP version) and captures the answer.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>
#include <uv.h>

#include "curl-uv.h"
#include "httpclient.h"
#include "common/grow.h"
#include "common/list.h"
#include "common/macro.h"

/* CURLOPT_UPLOAD_BUFFERSIZE's bounds (curl's own: 16 KiB to 2 MiB). */
#define HTTP_UPLOAD_BUFFER_MIN (16 * 1024)
#define HTTP_UPLOAD_BUFFER_MAX (2 * 1024 * 1024)

struct http_transfer {
	struct gw_curl_uv_xfer xfer; /* the driver's handle on this transfer */
	struct gw_http_client *client;
	struct sr_list_node node; /* in gw_http_client.transfers */
	CURL *easy;
	struct curl_slist *headers;
	gw_http_done_fn done;
	void *userdata;
	char *body; /* NUL-terminated; room for body_cap bytes */
	size_t body_len, body_cap;
	bool body_truncated;
	char retry_after[GW_HTTP_HEADER_VALUE_MAX];
	char content_type[GW_HTTP_HEADER_VALUE_MAX];
	char grpc_status[32];
	char grpc_message[GW_HTTP_HEADER_VALUE_MAX];
	char errbuf[CURL_ERROR_SIZE];
	uint64_t start_ns;
};

struct gw_http_client {
	struct gw_curl_uv *curl;
	struct sr_list transfers; /* in flight */
	size_t in_flight;
	bool closing;
	bool h2c_no_reuse; /* libcurl < 8.0.0 */
};

static void transfer_free(struct http_transfer *t)
{
	if (!t)
		return;
	curl_slist_free_all(t->headers);
	free(t->body);
	free(t);
}

static void transfer_finish(struct http_transfer *t, CURLcode code, bool aborted)
{
	struct gw_http_client *c = t->client;
	struct gw_http_response r = {
		.retry_after = t->retry_after,
		.content_type = t->content_type,
		.grpc_status = t->grpc_status,
		.grpc_message = t->grpc_message,
		.body = t->body ? t->body : "",
		.body_len = t->body_len,
		.body_truncated = t->body_truncated,
		.error = "",
	};

	sr_list__unlink(&c->transfers, &t->node);
	c->in_flight--;

	r.elapsed_ns = uv_hrtime() - t->start_ns;
	if (aborted) {
		r.result = GW_HTTP_ABORTED;
		r.error = "client closed";
	} else if (code == CURLE_OK) {
		r.result = GW_HTTP_OK;
		curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &r.status);
	} else {
		r.result = GW_HTTP_TRANSPORT;
		r.error = t->errbuf[0] ? t->errbuf : curl_easy_strerror(code);
		r.timed_out = code == CURLE_OPERATION_TIMEDOUT;
		curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &r.status);
	}
	gw_curl_uv__remove(c->curl, &t->xfer);
	curl_easy_cleanup(t->easy);
	t->easy = NULL;
	t->done(t->userdata, &r);
	transfer_free(t);
}

static void transfer_done(struct gw_curl_uv_xfer *x, CURLcode result)
{
	transfer_finish(SR_CONTAINER_OF(x, struct http_transfer, xfer), result, false);
}

static void client_closed(void *userdata)
{
	free(userdata);
}

struct gw_http_client *gw_http_client__new(uv_loop_t *loop)
{
	struct gw_http_client *c;

	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->curl = gw_curl_uv__new(loop);
	if (!c->curl) {
		int e = errno;

		free(c);
		errno = e;
		return NULL;
	}
	c->h2c_no_reuse = curl_version_info(CURLVERSION_NOW)->version_num < 0x080000;
	return c;
}

static size_t write_cb(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	struct http_transfer *t = userdata;
	size_t n = size * nmemb, room, take;

	room = GW_HTTP_RESPONSE_BODY_MAX - t->body_len;
	take = SR_MIN(n, room);
	if (take < n)
		t->body_truncated = true;
	if (take > 0) {
		if (sr_grow_max((void **)&t->body, &t->body_cap, t->body_len + take + 1, 1, 4096,
				GW_HTTP_RESPONSE_BODY_MAX + 1) < 0)
			return 0; /* curl fails the transfer with CURLE_WRITE_ERROR */
		memcpy(t->body + t->body_len, ptr, take);
		t->body_len += take;
		t->body[t->body_len] = '\0';
	}
	/* Swallow the rest: a huge error page must not fail the transfer. */
	return n;
}

static void capture(char *dst, size_t size, const char *v, size_t len)
{
	while (len > 0 && (*v == ' ' || *v == '\t')) {
		v++;
		len--;
	}
	while (len > 0 && (v[len - 1] == '\r' || v[len - 1] == '\n' || v[len - 1] == ' '))
		len--;
	len = SR_MIN(len, size - 1);
	memcpy(dst, v, len);
	dst[len] = '\0';
}

static size_t header_cb(char *buf, size_t size, size_t nitems, void *userdata)
{
	struct http_transfer *t = userdata;
	size_t n = size * nitems;
	static const struct {
		const char *name;
		size_t off, size;
	} wanted[] = {
		{ "retry-after:", offsetof(struct http_transfer, retry_after), GW_HTTP_HEADER_VALUE_MAX },
		{ "content-type:", offsetof(struct http_transfer, content_type), GW_HTTP_HEADER_VALUE_MAX },
		{ "grpc-status:", offsetof(struct http_transfer, grpc_status), 32 },
		{ "grpc-message:", offsetof(struct http_transfer, grpc_message), GW_HTTP_HEADER_VALUE_MAX },
	};

	/* A new status line (after a 100 Continue or a redirect) starts over. */
	if (n >= 5 && strncmp(buf, "HTTP/", 5) == 0) {
		t->retry_after[0] = t->content_type[0] = t->grpc_status[0] = t->grpc_message[0] = '\0';
		return n;
	}
	for (size_t i = 0; i < SR_ARRAY_SIZE(wanted); i++) {
		size_t l = strlen(wanted[i].name);

		if (n >= l && strncasecmp(buf, wanted[i].name, l) == 0)
			capture((char *)t + wanted[i].off, wanted[i].size, buf + l, n - l);
	}
	return n;
}

/* CURLOPT_SSLVERSION's bits for TLS 1.x (10 * major + minor), as a minimum or as a maximum. */
static long tls_version(int v, bool max)
{
	switch (v) {
	case 10:
		return max ? CURL_SSLVERSION_MAX_TLSv1_0 : CURL_SSLVERSION_TLSv1_0;
	case 11:
		return max ? CURL_SSLVERSION_MAX_TLSv1_1 : CURL_SSLVERSION_TLSv1_1;
	case 12:
		return max ? CURL_SSLVERSION_MAX_TLSv1_2 : CURL_SSLVERSION_TLSv1_2;
	case 13:
		return max ? CURL_SSLVERSION_MAX_TLSv1_3 : CURL_SSLVERSION_TLSv1_3;
	default:
		return max ? CURL_SSLVERSION_MAX_DEFAULT : CURL_SSLVERSION_DEFAULT;
	}
}

int gw_http_client__post(struct gw_http_client *c, const struct gw_http_request *req, gw_http_done_fn done,
			 void *userdata)
{
	struct http_transfer *t;
	int r;

	if (!c || !req || !req->url || !done)
		return -EINVAL;
	if (c->closing)
		return -ECANCELED;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->client = c;
	t->done = done;
	t->userdata = userdata;
	t->easy = curl_easy_init();
	if (!t->easy) {
		r = -ENOMEM;
		goto fail;
	}
	for (const char *const *h = req->headers; h && *h; h++) {
		struct curl_slist *n = curl_slist_append(t->headers, *h);

		if (!n) {
			r = -ENOMEM;
			goto fail;
		}
		t->headers = n;
	}
	/* libcurl adds "Expect: 100-continue" to big POSTs; a round trip for nothing. */
	{
		struct curl_slist *n = curl_slist_append(t->headers, "Expect:");

		if (!n) {
			r = -ENOMEM;
			goto fail;
		}
		t->headers = n;
	}

	curl_easy_setopt(t->easy, CURLOPT_URL, req->url);
	curl_easy_setopt(t->easy, CURLOPT_POST, 1L);
	curl_easy_setopt(t->easy, CURLOPT_POSTFIELDS, req->body);
	curl_easy_setopt(t->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
	/*
	 * curl sends at most one upload buffer per loop turn on the socket, 64 KiB
	 * by default: a 600 KB export took 10 turns. When the loop is slow (a
	 * replica under a storm of agent requests: turns of seconds), exports
	 * then time out half sent, and the backlog grows. A buffer the body's
	 * size (curl's bounds: 16 KiB to 2 MiB) sends it in one turn when the
	 * socket takes it.
	 */
	curl_easy_setopt(t->easy, CURLOPT_UPLOAD_BUFFERSIZE,
			 (long)SR_MIN(SR_MAX(req->body_len, (size_t)HTTP_UPLOAD_BUFFER_MIN),
				      (size_t)HTTP_UPLOAD_BUFFER_MAX));
	curl_easy_setopt(t->easy, CURLOPT_HTTPHEADER, t->headers);
	curl_easy_setopt(t->easy, CURLOPT_WRITEFUNCTION, write_cb);
	curl_easy_setopt(t->easy, CURLOPT_WRITEDATA, t);
	curl_easy_setopt(t->easy, CURLOPT_HEADERFUNCTION, header_cb);
	curl_easy_setopt(t->easy, CURLOPT_HEADERDATA, t);
	curl_easy_setopt(t->easy, CURLOPT_ERRORBUFFER, t->errbuf);
	curl_easy_setopt(t->easy, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(t->easy, CURLOPT_USERAGENT, "stackrelay-gateway");
	/* Only the schemes we mean; redirects are not followed (a 3xx is an answer). */
	curl_easy_setopt(t->easy, CURLOPT_PROTOCOLS_STR, "http,https");
	if (req->timeout_ns)
		curl_easy_setopt(t->easy, CURLOPT_TIMEOUT_MS, (long)SR_MAX(req->timeout_ns / 1000000, 1));
	switch (req->version) {
	case GW_HTTP_AUTO:
		curl_easy_setopt(t->easy, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
		break;
	case GW_HTTP_1_1:
		curl_easy_setopt(t->easy, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
		break;
	case GW_HTTP_2_PRIOR:
		curl_easy_setopt(t->easy, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE);
		/*
		 * libcurl before 8.0.0 fails requests on a reused h2c (prior
		 * knowledge, plaintext) connection with "Error in the HTTP2
		 * framing layer" (curl issue 10634; Debian 12 ships 7.88.1):
		 * there each request gets a connection of its own.
		 */
		if (c->h2c_no_reuse && strncasecmp(req->url, "http://", 7) == 0) {
			curl_easy_setopt(t->easy, CURLOPT_FRESH_CONNECT, 1L);
			curl_easy_setopt(t->easy, CURLOPT_FORBID_REUSE, 1L);
		}
		break;
	}
	if (req->tls) {
		if (req->tls->ca_file)
			curl_easy_setopt(t->easy, CURLOPT_CAINFO, req->tls->ca_file);
		if (req->tls->cert_file)
			curl_easy_setopt(t->easy, CURLOPT_SSLCERT, req->tls->cert_file);
		if (req->tls->key_file)
			curl_easy_setopt(t->easy, CURLOPT_SSLKEY, req->tls->key_file);
		if (req->tls->insecure_skip_verify) {
			curl_easy_setopt(t->easy, CURLOPT_SSL_VERIFYPEER, 0L);
			curl_easy_setopt(t->easy, CURLOPT_SSL_VERIFYHOST, 0L);
		}
		if (req->tls->min_version || req->tls->max_version)
			curl_easy_setopt(t->easy, CURLOPT_SSLVERSION,
					 tls_version(req->tls->min_version, false) |
						 tls_version(req->tls->max_version, true));
	}

	t->start_ns = uv_hrtime();
	r = gw_curl_uv__add(c->curl, &t->xfer, t->easy, transfer_done);
	if (r < 0)
		goto fail;
	sr_list__push_front(&c->transfers, &t->node);
	c->in_flight++;
	return 0;

fail:
	if (t->easy)
		curl_easy_cleanup(t->easy);
	transfer_free(t);
	return r;
}

size_t gw_http_client__in_flight(const struct gw_http_client *c)
{
	return c ? c->in_flight : 0;
}

void gw_http_client__close(struct gw_http_client *c)
{
	if (!c || c->closing)
		return;
	c->closing = true;
	while (c->transfers.head)
		transfer_finish(SR_CONTAINER_OF(c->transfers.head, struct http_transfer, node), CURLE_OK, true);
	/* The client's memory goes with the driver's, in its close callback. */
	gw_curl_uv__close(c->curl, client_closed, c);
}
