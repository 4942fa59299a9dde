/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Outbound HTTP for exporters: libcurl's multi-socket API driven from the
 * gateway's libuv loop (one uv_poll_t per socket curl opens, one uv_timer_t
 * for curl's timeouts), so requests never block the loop. libcurl brings
 * HTTP/1.1, HTTP/2 (ALPN on https://, prior knowledge on http://), TLS,
 * gzip-free uploads of our own bytes, and the proxy environment variables
 * (http_proxy, https_proxy, no_proxy) for free.
 *
 * Contract (libuv's): a post that returns an error never calls its callback;
 * one that returns 0 calls it exactly once, from the loop, even when the
 * client is closed first (then with GW_HTTP_ABORTED).
 */
#ifndef SR_GW_HTTPCLIENT_H
#define SR_GW_HTTPCLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

/* Response bodies are kept up to this many bytes (error messages, OTLP responses). */
#define GW_HTTP_RESPONSE_BODY_MAX (64 * 1024)
/* Longest captured value of an interesting response header. */
#define GW_HTTP_HEADER_VALUE_MAX 512

struct gw_http_client;

struct gw_http_tls {
	const char *ca_file;   /* NULL: the system store */
	const char *cert_file; /* client certificate (mTLS) */
	const char *key_file;
	bool insecure_skip_verify;
	/* Oldest and newest TLS version as 10 * major + minor (12 for 1.2); 0: the library's default. */
	int min_version, max_version;
};

enum gw_http_version {
	GW_HTTP_AUTO, /* HTTP/2 via ALPN on https://, HTTP/1.1 on http:// */
	GW_HTTP_1_1,
	GW_HTTP_2_PRIOR, /* h2c prior knowledge on http://, HTTP/2 only on https:// */
};

struct gw_http_request {
	const char *url;
	/* "Name: value" lines, NULL-terminated; copied by the post call. */
	const char *const *headers;
	/* Must stay valid until the callback. */
	const void *body;
	size_t body_len;
	uint64_t timeout_ns; /* whole transfer; 0: none */
	const struct gw_http_tls *tls;
	enum gw_http_version version;
};

enum gw_http_result {
	GW_HTTP_OK,	   /* a response was received (any status) */
	GW_HTTP_TRANSPORT, /* connect/TLS/reset/timeout: no complete response */
	GW_HTTP_ABORTED,   /* the client was closed first */
};

struct gw_http_response {
	enum gw_http_result result;
	long status;	   /* HTTP status, 0 without a response */
	const char *error; /* transport error text, "" when none */
	bool timed_out;
	const char *body; /* up to GW_HTTP_RESPONSE_BODY_MAX bytes, NUL-terminated */
	size_t body_len;
	bool body_truncated;
	/* Header (or HTTP/2 trailer) values, "" when absent. */
	const char *retry_after;
	const char *content_type;
	const char *grpc_status;
	const char *grpc_message;
	uint64_t elapsed_ns;
};

typedef void (*gw_http_done_fn)(void *userdata, const struct gw_http_response *resp);

/* NULL + errno on failure. */
struct gw_http_client *gw_http_client__new(uv_loop_t *loop);
/* 0 and the callback later, or -errno and never the callback. */
int gw_http_client__post(struct gw_http_client *c, const struct gw_http_request *req, gw_http_done_fn done,
			 void *userdata);
size_t gw_http_client__in_flight(const struct gw_http_client *c);
/*
 * Aborts transfers in flight (their callbacks run with GW_HTTP_ABORTED before
 * this returns), then closes the loop handles; the client is freed once the
 * last one is closed. NULL is fine.
 */
void gw_http_client__close(struct gw_http_client *c);

#endif
