// SPDX-License-Identifier: Apache-2.0
/*
 * libcurl multi-socket on libuv, after curl's docs/examples/multi-uv.c: curl
 * tells us which sockets to watch (socket callback) and when to wake it
 * (timer callback); we tell it what happened with curl_multi_socket_action().
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>
#include <uv.h>

#include "httpclient.h"
#include "macro.h"

struct http_socket {
	uv_poll_t poll;
	curl_socket_t fd;
	struct gw_http_client *client;
	struct http_socket *prev, *next; /* watched sockets, for close */
};

struct http_transfer {
	struct gw_http_client *client;
	struct http_transfer *prev, *next;
	CURL *easy;
	struct curl_slist *headers;
	gw_http_done_fn done;
	void *userdata;
	char *body;
	size_t body_len;
	bool body_truncated;
	char retry_after[GW_HTTP_HEADER_VALUE_MAX];
	char content_type[GW_HTTP_HEADER_VALUE_MAX];
	char grpc_status[32];
	char grpc_message[GW_HTTP_HEADER_VALUE_MAX];
	char errbuf[CURL_ERROR_SIZE];
	uint64_t start_ns;
};

struct gw_http_client {
	uv_loop_t *loop;
	CURLM *multi;
	uv_timer_t timer;
	struct http_transfer *transfers; /* in flight, a list */
	struct http_socket *sockets;	 /* watched, a list */
	size_t in_flight;
	/* Open libuv handles (the timer, sockets being closed); freed at 0. */
	unsigned handles;
	bool closing;
	bool h2c_no_reuse; /* libcurl < 8.0.0 */
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_result;

static void curl_init_once(void)
{
	curl_init_result = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static void client_unref(struct gw_http_client *c)
{
	if (--c->handles == 0)
		free(c);
}

static void handle_closed(uv_handle_t *h)
{
	struct gw_http_client *c = h->data;
	client_unref(c);
}

static void socket_closed(uv_handle_t *h);

static void socket_unwatch(struct gw_http_client *c, struct http_socket *s)
{
	uv_poll_stop(&s->poll);
	if (s->prev)
		s->prev->next = s->next;
	else
		c->sockets = s->next;
	if (s->next)
		s->next->prev = s->prev;
	uv_close((uv_handle_t *)&s->poll, socket_closed);
}

static void socket_closed(uv_handle_t *h)
{
	struct http_socket *s = SR_CONTAINER_OF((uv_poll_t *)h, struct http_socket, poll);
	struct gw_http_client *c = s->client;

	free(s);
	client_unref(c);
}

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

	if (t->prev)
		t->prev->next = t->next;
	else
		c->transfers = t->next;
	if (t->next)
		t->next->prev = t->prev;
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
	curl_multi_remove_handle(c->multi, t->easy);
	curl_easy_cleanup(t->easy);
	t->easy = NULL;
	t->done(t->userdata, &r);
	transfer_free(t);
}

static void check_multi_info(struct gw_http_client *c)
{
	CURLMsg *msg;
	int pending;

	while ((msg = curl_multi_info_read(c->multi, &pending))) {
		struct http_transfer *t = NULL;

		if (msg->msg != CURLMSG_DONE)
			continue;
		curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&t);
		if (t)
			transfer_finish(t, msg->data.result, false);
	}
}

static void on_poll(uv_poll_t *p, int status, int events)
{
	struct http_socket *s = SR_CONTAINER_OF(p, struct http_socket, poll);
	struct gw_http_client *c = s->client;
	int flags = 0, running;

	if (status < 0)
		flags = CURL_CSELECT_ERR;
	if (events & UV_READABLE)
		flags |= CURL_CSELECT_IN;
	if (events & UV_WRITABLE)
		flags |= CURL_CSELECT_OUT;
	curl_multi_socket_action(c->multi, s->fd, flags, &running);
	check_multi_info(c);
}

static void on_timer(uv_timer_t *t)
{
	struct gw_http_client *c = t->data;
	int running;

	curl_multi_socket_action(c->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	check_multi_info(c);
}

static int socket_cb(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp)
{
	struct gw_http_client *c = userp;
	struct http_socket *s = socketp;
	int events = 0;

	if (what == CURL_POLL_REMOVE) {
		if (s) {
			curl_multi_assign(c->multi, fd, NULL);
			socket_unwatch(c, s);
		}
		return 0;
	}
	if (!s) {
		s = calloc(1, sizeof(*s));
		if (!s)
			return -1;
		s->fd = fd;
		s->client = c;
		if (uv_poll_init_socket(c->loop, &s->poll, fd) < 0) {
			free(s);
			return -1;
		}
		c->handles++;
		s->next = c->sockets;
		if (s->next)
			s->next->prev = s;
		c->sockets = s;
		curl_multi_assign(c->multi, fd, s);
	}
	if (what & CURL_POLL_IN)
		events |= UV_READABLE;
	if (what & CURL_POLL_OUT)
		events |= UV_WRITABLE;
	uv_poll_start(&s->poll, events, on_poll);
	return 0;
}

static int timer_cb(CURLM *multi, long timeout_ms, void *userp)
{
	struct gw_http_client *c = userp;

	if (timeout_ms < 0)
		uv_timer_stop(&c->timer);
	else
		/* 0 means "now", but curl must not be re-entered from here: next loop turn. */
		uv_timer_start(&c->timer, on_timer, (uint64_t)timeout_ms, 0);
	return 0;
}

struct gw_http_client *gw_http_client__new(uv_loop_t *loop)
{
	struct gw_http_client *c;

	pthread_once(&curl_once, curl_init_once);
	if (curl_init_result != CURLE_OK) {
		errno = ENOMEM;
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->loop = loop;
	c->h2c_no_reuse = curl_version_info(CURLVERSION_NOW)->version_num < 0x080000;
	c->multi = curl_multi_init();
	if (!c->multi) {
		free(c);
		errno = ENOMEM;
		return NULL;
	}
	uv_timer_init(loop, &c->timer);
	c->timer.data = c;
	c->handles = 1;
	curl_multi_setopt(c->multi, CURLMOPT_SOCKETFUNCTION, socket_cb);
	curl_multi_setopt(c->multi, CURLMOPT_SOCKETDATA, c);
	curl_multi_setopt(c->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
	curl_multi_setopt(c->multi, CURLMOPT_TIMERDATA, c);
	/* Several requests to one backend share connections (HTTP/2: one connection). */
	curl_multi_setopt(c->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
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
		char *b = realloc(t->body, t->body_len + take + 1);

		if (!b)
			return 0; /* curl fails the transfer with CURLE_WRITE_ERROR */
		memcpy(b + t->body_len, ptr, take);
		t->body_len += take;
		b[t->body_len] = '\0';
		t->body = b;
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
	curl_easy_setopt(t->easy, CURLOPT_HTTPHEADER, t->headers);
	curl_easy_setopt(t->easy, CURLOPT_WRITEFUNCTION, write_cb);
	curl_easy_setopt(t->easy, CURLOPT_WRITEDATA, t);
	curl_easy_setopt(t->easy, CURLOPT_HEADERFUNCTION, header_cb);
	curl_easy_setopt(t->easy, CURLOPT_HEADERDATA, t);
	curl_easy_setopt(t->easy, CURLOPT_ERRORBUFFER, t->errbuf);
	curl_easy_setopt(t->easy, CURLOPT_PRIVATE, t);
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
	}

	t->start_ns = uv_hrtime();
	if (curl_multi_add_handle(c->multi, t->easy) != CURLM_OK) {
		r = -ENOMEM;
		goto fail;
	}
	t->next = c->transfers;
	if (t->next)
		t->next->prev = t;
	c->transfers = t;
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
	while (c->transfers)
		transfer_finish(c->transfers, CURLE_OK, true);
	/* Removing the last easy handles made curl release its sockets (CURL_POLL_REMOVE). */
	curl_multi_cleanup(c->multi);
	c->multi = NULL;
	/* Whatever curl did not hand back (idle kept-alive connections) is closed now. */
	while (c->sockets)
		socket_unwatch(c, c->sockets);
	uv_timer_stop(&c->timer);
	uv_close((uv_handle_t *)&c->timer, handle_closed);
}
