// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/http1.h"
#include "common/macro.h"
#include "common/netaddr.h"
#include "metrics.h"

/* One connection: reading its request head, then writing its response. */
struct client {
	int fd; /* -1: a free slot */
	uint64_t deadline_ms;
	size_t len;
	char req[AGENT_METRICS_MAX_REQUEST];
	char *out; /* the response once the request is read */
	size_t out_len, out_off;
};

struct agent_metrics_server {
	int fd;
	int stop_pipe[2];
	int port;
	pthread_t thread;
	bool started;
	agent_metrics_render_fn fn;
	void *ctx;
	struct client clients[AGENT_METRICS_MAX_CLIENTS];
	uint64_t accept_after_ms; /* accept(2) failed (out of fds?): not before then */
};

/* How long accepting pauses after accept(2) fails for want of a resource, instead of spinning on it. */
#define METRICS_ACCEPT_BACKOFF_MS 100

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void client_close(struct client *c)
{
	if (c->fd >= 0)
		close(c->fd);
	free(c->out);
	c->fd = -1;
	c->out = NULL;
	c->len = c->out_len = c->out_off = 0;
}

/* The response, whole, to be written as the socket takes it. */
static void respond(struct client *c, int status, const char *ctype, const char *body, size_t blen)
{
	char head[256];
	int n = snprintf(head, sizeof(head),
			 "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
			 status, sr_http1_reason_phrase(status), ctype, blen);

	c->out = malloc((size_t)n + blen);
	if (!c->out) {
		client_close(c);
		return;
	}
	memcpy(c->out, head, (size_t)n);
	if (blen)
		memcpy(c->out + n, body, blen);
	c->out_len = (size_t)n + blen;
	c->out_off = 0;
}

/*
 * What request heads are held to (common/http1.h). A bare LF ends a line too:
 * a request typed by hand (nc) is answered.
 */
static const struct sr_http1_limits head_limits = {
	.max_head_bytes = AGENT_METRICS_MAX_REQUEST,
	.max_headers = AGENT_METRICS_MAX_HEADERS,
	.bare_lf = true,
};

/* A complete request head: its response. */
static void handle_request(struct agent_metrics_server *s, struct client *c, const struct sr_http1_request *req)
{
	bool get = req->method.len == 3 && memcmp(req->method.p, "GET", 3) == 0;
	bool head = req->method.len == 4 && memcmp(req->method.p, "HEAD", 4) == 0;

	if (get && req->path.len == 8 && memcmp(req->path.p, "/metrics", 8) == 0) {
		char *body = NULL;
		size_t blen = 0;
		FILE *f = open_memstream(&body, &blen);
		if (!f) {
			respond(c, 500, "text/plain", "", 0);
			return;
		}
		s->fn(s->ctx, f);
		fclose(f);
		respond(c, 200, "text/plain; version=0.0.4; charset=utf-8", body, blen);
		free(body);
	} else if (get || head) {
		static const char nf[] = "not found: the metrics are at /metrics\n";
		respond(c, 404, "text/plain", nf, sizeof(nf) - 1);
	} else {
		respond(c, 405, "text/plain", "", 0);
	}
}

/* Reads what the socket has; the body of a GET is ignored. */
static void client_read(struct agent_metrics_server *s, struct client *c)
{
	for (;;) {
		struct sr_http1_request req;
		ssize_t n = recv(c->fd, c->req + c->len, sizeof(c->req) - c->len, 0);
		int r;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0) {
			client_close(c);
			return;
		}
		c->len += (size_t)n;
		r = sr_http1_parse(c->req, c->len, &head_limits, &req);
		if (r > 0) {
			handle_request(s, c, &req);
			return;
		}
		if (r < 0) {
			char msg[128];
			int len = snprintf(msg, sizeof(msg), "%s\n", req.reason);
			respond(c, req.status, "text/plain", msg, (size_t)SR_MIN(len, (int)sizeof(msg) - 1));
			return;
		}
	}
}

/* Writes what the socket takes; closes once all is written. */
static void client_write(struct client *c)
{
	while (c->out_off < c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n < 0)
			break;
		c->out_off += (size_t)n;
	}
	client_close(c);
}

static void accept_clients(struct agent_metrics_server *s, uint64_t now)
{
	for (size_t i = 0; i < AGENT_METRICS_MAX_CLIENTS; i++) {
		struct client *c = &s->clients[i];

		if (c->fd >= 0)
			continue;
		c->fd = accept4(s->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (c->fd < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
				s->accept_after_ms = now + METRICS_ACCEPT_BACKOFF_MS;
			return;
		}
		c->deadline_ms = now + AGENT_METRICS_DEADLINE_MS;
	}
}

/*
 * One poll over the listening socket (while a slot is free), the stop pipe
 * and every client, woken by the nearest deadline: a client that stalls
 * costs its slot until its deadline, never another client's turn.
 */
static void *thread_main(void *arg)
{
	struct agent_metrics_server *s = arg;

	for (;;) {
		struct pollfd p[2 + AGENT_METRICS_MAX_CLIENTS];
		struct client *owner[2 + AGENT_METRICS_MAX_CLIENTS] = { NULL };
		uint64_t now = now_ms(), next = UINT64_MAX;
		bool free_slot = false;
		nfds_t n = 2;
		int timeout;

		p[0] = (struct pollfd){ s->stop_pipe[0], POLLIN, 0 };
		for (size_t i = 0; i < AGENT_METRICS_MAX_CLIENTS; i++) {
			struct client *c = &s->clients[i];

			if (c->fd >= 0 && now >= c->deadline_ms)
				client_close(c);
			if (c->fd < 0) {
				free_slot = true;
				continue;
			}
			next = SR_MIN(next, c->deadline_ms);
			owner[n] = c;
			p[n++] = (struct pollfd){ c->fd, c->out ? POLLOUT : POLLIN, 0 };
		}
		/* All slots busy: new connections wait in the backlog. */
		if (free_slot && now < s->accept_after_ms) {
			free_slot = false;
			next = SR_MIN(next, s->accept_after_ms);
		}
		p[1] = (struct pollfd){ free_slot ? s->fd : -1, POLLIN, 0 };
		timeout = next == UINT64_MAX ? -1 : (int)(next - now);
		if (poll(p, n, timeout) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[0].revents)
			break;
		for (nfds_t i = 2; i < n; i++) {
			struct client *c = owner[i];

			if (!p[i].revents)
				continue;
			if (!c->out)
				client_read(s, c);
			/* A response made just now is written at once: the socket usually takes it whole. */
			if (c->fd >= 0 && c->out)
				client_write(c);
		}
		if (p[1].revents & POLLIN)
			accept_clients(s, now_ms());
	}
	return NULL;
}

struct agent_metrics_server *agent_metrics_server_new(const char *address, agent_metrics_render_fn fn, void *ctx)
{
	struct agent_metrics_server *s;
	struct sockaddr_storage addr, ss;
	socklen_t sl = sizeof(ss);
	char err[256];
	int one = 1, r;

	/* -EINVAL for a malformed address, -EADDRNOTAVAIL for a host that does not resolve. */
	r = sr_parse_endpoint(address, &addr, err, sizeof(err));
	if (r < 0) {
		errno = -r;
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->fd = -1;
	s->stop_pipe[0] = s->stop_pipe[1] = -1;
	s->fn = fn;
	s->ctx = ctx;
	for (size_t i = 0; i < AGENT_METRICS_MAX_CLIENTS; i++)
		s->clients[i].fd = -1;
	s->fd = socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s->fd < 0) {
		r = -errno;
		goto fail;
	}
	setsockopt(s->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(s->fd, (struct sockaddr *)&addr,
		 addr.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in)) < 0 ||
	    listen(s->fd, 16) < 0) {
		r = -errno;
		goto fail;
	}
	if (getsockname(s->fd, (struct sockaddr *)&ss, &sl) == 0)
		s->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
							 : ((struct sockaddr_in *)&ss)->sin_port);
	if (pipe2(s->stop_pipe, O_CLOEXEC) < 0) {
		r = -errno;
		goto fail;
	}
	return s;
fail:
	agent_metrics_server_free(s);
	errno = -r;
	return NULL;
}

int agent_metrics_server__start(struct agent_metrics_server *s)
{
	int r = -pthread_create(&s->thread, NULL, thread_main, s);

	if (r < 0)
		return r;
	s->started = true;
	return 0;
}

int agent_metrics_server__port(const struct agent_metrics_server *s)
{
	return s->port;
}

void agent_metrics_server_free(struct agent_metrics_server *s)
{
	if (!s)
		return;
	if (s->started) {
		char c = 1;
		if (write(s->stop_pipe[1], &c, 1) < 0) {
			/* The pipe is ours and empty; a failed write leaves join to hang, so cancel instead. */
			pthread_cancel(s->thread);
		}
		pthread_join(s->thread, NULL);
	}
	for (size_t i = 0; i < AGENT_METRICS_MAX_CLIENTS; i++)
		client_close(&s->clients[i]);
	if (s->fd >= 0)
		close(s->fd);
	if (s->stop_pipe[0] >= 0)
		close(s->stop_pipe[0]);
	if (s->stop_pipe[1] >= 0)
		close(s->stop_pipe[1]);
	free(s);
}
