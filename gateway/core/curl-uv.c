// SPDX-License-Identifier: Apache-2.0
/*
 * libcurl multi-socket on libuv (see curl-uv.h). curl calls socket_cb to
 * say which events it wants on a socket and timer_cb to say when it wants
 * to be woken; libuv calls on_poll and on_timer, which hand the events to
 * curl_multi_socket_action() and then collect the finished transfers.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include <curl/curl.h>
#include <uv.h>

#include "common/list.h"
#include "common/macro.h"
#include "curl-uv.h"

struct curl_uv_socket {
	uv_poll_t poll;
	curl_socket_t fd;
	struct gw_curl_uv *d;
	struct sr_list_node node; /* in gw_curl_uv.sockets */
};

struct gw_curl_uv {
	uv_loop_t *loop;
	CURLM *multi;
	uv_timer_t timer;
	struct sr_list sockets; /* watched, so close() closes what curl did not hand back */
	/* Open libuv handles (the timer, the sockets); the driver is freed at 0 after close. */
	unsigned handles;
	bool closing;
	void (*close_cb)(void *userdata);
	void *close_userdata;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_result;

static void curl_init_once(void)
{
	curl_init_result = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static void driver_unref(struct gw_curl_uv *d)
{
	void (*cb)(void *);
	void *userdata;

	if (--d->handles > 0)
		return;
	cb = d->close_cb;
	userdata = d->close_userdata;
	free(d);
	if (cb)
		cb(userdata);
}

static void timer_closed(uv_handle_t *h)
{
	driver_unref(h->data);
}

static void socket_closed(uv_handle_t *h)
{
	struct curl_uv_socket *s = SR_CONTAINER_OF((uv_poll_t *)h, struct curl_uv_socket, poll);
	struct gw_curl_uv *d = s->d;

	free(s);
	driver_unref(d);
}

static void socket_unwatch(struct gw_curl_uv *d, struct curl_uv_socket *s)
{
	uv_poll_stop(&s->poll);
	sr_list__unlink(&d->sockets, &s->node);
	uv_close((uv_handle_t *)&s->poll, socket_closed);
}

static void check_multi_info(struct gw_curl_uv *d)
{
	CURLMsg *msg;
	int pending;

	/* A callback may close the driver: d->multi is NULL then, and the loop ends. */
	while (d->multi && (msg = curl_multi_info_read(d->multi, &pending))) {
		struct gw_curl_uv_xfer *x = NULL;

		if (msg->msg != CURLMSG_DONE)
			continue;
		curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&x);
		if (x && x->done)
			x->done(x, msg->data.result);
	}
}

static void on_poll(uv_poll_t *p, int status, int events)
{
	struct curl_uv_socket *s = SR_CONTAINER_OF(p, struct curl_uv_socket, poll);
	struct gw_curl_uv *d = s->d;
	int flags = 0, running;

	if (status < 0)
		flags = CURL_CSELECT_ERR;
	if (events & UV_READABLE)
		flags |= CURL_CSELECT_IN;
	if (events & UV_WRITABLE)
		flags |= CURL_CSELECT_OUT;
	curl_multi_socket_action(d->multi, s->fd, flags, &running);
	check_multi_info(d);
}

static void on_timer(uv_timer_t *t)
{
	struct gw_curl_uv *d = t->data;
	int running;

	curl_multi_socket_action(d->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	check_multi_info(d);
}

static int socket_cb(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp)
{
	struct gw_curl_uv *d = userp;
	struct curl_uv_socket *s = socketp;
	int events = 0;

	(void)easy;
	if (what == CURL_POLL_REMOVE) {
		if (s) {
			curl_multi_assign(d->multi, fd, NULL);
			socket_unwatch(d, s);
		}
		return 0;
	}
	if (!s) {
		s = calloc(1, sizeof(*s));
		if (!s)
			return -1;
		s->fd = fd;
		s->d = d;
		if (uv_poll_init_socket(d->loop, &s->poll, fd) < 0) {
			free(s);
			return -1;
		}
		d->handles++;
		sr_list__push_front(&d->sockets, &s->node);
		curl_multi_assign(d->multi, fd, s);
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
	struct gw_curl_uv *d = userp;

	(void)multi;
	if (timeout_ms < 0)
		uv_timer_stop(&d->timer);
	else
		/* 0 means "now", but curl must not be re-entered from here: next loop turn. */
		uv_timer_start(&d->timer, on_timer, (uint64_t)timeout_ms, 0);
	return 0;
}

struct gw_curl_uv *gw_curl_uv__new(uv_loop_t *loop)
{
	struct gw_curl_uv *d;

	pthread_once(&curl_once, curl_init_once);
	if (curl_init_result != CURLE_OK) {
		errno = curl_init_result == CURLE_OUT_OF_MEMORY ? ENOMEM : EIO;
		return NULL;
	}
	d = calloc(1, sizeof(*d));
	if (!d)
		return NULL;
	d->loop = loop;
	d->multi = curl_multi_init();
	if (!d->multi) {
		free(d);
		errno = ENOMEM;
		return NULL;
	}
	uv_timer_init(loop, &d->timer);
	d->timer.data = d;
	d->handles = 1;
	curl_multi_setopt(d->multi, CURLMOPT_SOCKETFUNCTION, socket_cb);
	curl_multi_setopt(d->multi, CURLMOPT_SOCKETDATA, d);
	curl_multi_setopt(d->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
	curl_multi_setopt(d->multi, CURLMOPT_TIMERDATA, d);
	/* Several requests to one backend share connections (HTTP/2: one connection). */
	curl_multi_setopt(d->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
	return d;
}

int gw_curl_uv__add(struct gw_curl_uv *d, struct gw_curl_uv_xfer *x, CURL *easy, gw_curl_uv_done_fn done)
{
	if (!d || !x || !easy || !done)
		return -EINVAL;
	if (d->closing)
		return -ECANCELED;
	x->done = done;
	x->easy = easy;
	curl_easy_setopt(easy, CURLOPT_PRIVATE, x);
	if (curl_multi_add_handle(d->multi, easy) != CURLM_OK) {
		x->easy = NULL;
		return -ENOMEM;
	}
	return 0;
}

void gw_curl_uv__remove(struct gw_curl_uv *d, struct gw_curl_uv_xfer *x)
{
	if (!d || !x || !x->easy)
		return;
	if (d->multi)
		curl_multi_remove_handle(d->multi, x->easy);
	x->easy = NULL;
}

void gw_curl_uv__close(struct gw_curl_uv *d, void (*close_cb)(void *userdata), void *userdata)
{
	if (!d || d->closing)
		return;
	d->closing = true;
	d->close_cb = close_cb;
	d->close_userdata = userdata;
	/* Without easy handles curl releases its sockets here (CURL_POLL_REMOVE). */
	curl_multi_cleanup(d->multi);
	d->multi = NULL;
	/* Whatever curl did not hand back (idle kept-alive connections) is closed now. */
	while (d->sockets.head)
		socket_unwatch(d, SR_CONTAINER_OF(d->sockets.head, struct curl_uv_socket, node));
	uv_timer_stop(&d->timer);
	uv_close((uv_handle_t *)&d->timer, timer_closed);
}
