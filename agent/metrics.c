// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "macro.h"
#include "metrics.h"

struct agent_metrics_server {
	int fd;
	int stop_pipe[2];
	int port;
	pthread_t thread;
	bool started;
	agent_metrics_render_fn fn;
	void *ctx;
};

static int split_address(const char *address, char *host, size_t hsize, char *port, size_t psize)
{
	const char *colon;

	if (address[0] == '[') {
		const char *end = strchr(address, ']');
		if (!end || end[1] != ':' || (size_t)(end - address - 1) >= hsize)
			return -EINVAL;
		memcpy(host, address + 1, (size_t)(end - address - 1));
		host[end - address - 1] = '\0';
		colon = end + 1;
	} else {
		colon = strrchr(address, ':');
		if (!colon || (size_t)(colon - address) >= hsize)
			return -EINVAL;
		memcpy(host, address, (size_t)(colon - address));
		host[colon - address] = '\0';
	}
	if (!colon[1] || strlen(colon + 1) >= psize)
		return -EINVAL;
	strcpy(port, colon + 1);
	return 0;
}

static void write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		struct pollfd p = { fd, POLLOUT, 0 };
		ssize_t n;
		if (poll(&p, 1, AGENT_METRICS_IO_TIMEOUT_MS) <= 0)
			return;
		n = send(fd, buf, len, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return;
		}
		buf += n;
		len -= (size_t)n;
	}
}

static void respond(int fd, const char *status, const char *ctype, const char *body, size_t blen)
{
	char head[256];
	int n = snprintf(head, sizeof(head),
			 "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n", status,
			 ctype, blen);

	write_all(fd, head, (size_t)n);
	if (blen)
		write_all(fd, body, blen);
}

static void serve(struct agent_metrics_server *s, int fd)
{
	char req[AGENT_METRICS_MAX_REQUEST + 1];
	size_t len = 0;

	/* Read until the end of the headers; the body of a GET is ignored. */
	while (len < AGENT_METRICS_MAX_REQUEST) {
		struct pollfd p = { fd, POLLIN, 0 };
		ssize_t n;
		if (poll(&p, 1, AGENT_METRICS_IO_TIMEOUT_MS) <= 0)
			return;
		n = recv(fd, req + len, AGENT_METRICS_MAX_REQUEST - len, 0);
		if (n <= 0)
			return;
		len += (size_t)n;
		req[len] = '\0';
		if (strstr(req, "\r\n\r\n") || strstr(req, "\n\n"))
			break;
	}
	req[len] = '\0';
	if (strncmp(req, "GET /metrics ", 13) == 0 || strncmp(req, "GET /metrics?", 13) == 0) {
		char *body = NULL;
		size_t blen = 0;
		FILE *f = open_memstream(&body, &blen);
		if (!f) {
			respond(fd, "500 Internal Server Error", "text/plain", "", 0);
			return;
		}
		s->fn(s->ctx, f);
		fclose(f);
		respond(fd, "200 OK", "text/plain; version=0.0.4; charset=utf-8", body, blen);
		free(body);
	} else if (strncmp(req, "GET ", 4) == 0 || strncmp(req, "HEAD ", 5) == 0) {
		static const char nf[] = "not found: the metrics are at /metrics\n";
		respond(fd, "404 Not Found", "text/plain", nf, sizeof(nf) - 1);
	} else {
		respond(fd, "405 Method Not Allowed", "text/plain", "", 0);
	}
}

static void *thread_main(void *arg)
{
	struct agent_metrics_server *s = arg;

	for (;;) {
		struct pollfd p[2] = { { s->fd, POLLIN, 0 }, { s->stop_pipe[0], POLLIN, 0 } };
		int c;

		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[1].revents)
			break;
		if (!(p[0].revents & POLLIN))
			continue;
		c = accept4(s->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (c < 0)
			continue;
		serve(s, c);
		close(c);
	}
	return NULL;
}

struct agent_metrics_server *agent_metrics_server_new(const char *address, agent_metrics_render_fn fn, void *ctx)
{
	struct agent_metrics_server *s;
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE };
	struct addrinfo *res = NULL;
	char host[256], port[32];
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	int one = 1, r;

	if (split_address(address, host, sizeof(host), port, sizeof(port)) < 0) {
		errno = EINVAL;
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->fd = -1;
	s->stop_pipe[0] = s->stop_pipe[1] = -1;
	s->fn = fn;
	s->ctx = ctx;
	r = getaddrinfo(host[0] ? host : NULL, port, &hints, &res);
	if (r != 0) {
		r = -EADDRNOTAVAIL;
		goto fail;
	}
	s->fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s->fd < 0) {
		r = -errno;
		goto fail;
	}
	setsockopt(s->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(s->fd, res->ai_addr, res->ai_addrlen) < 0 || listen(s->fd, 16) < 0) {
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
	r = -pthread_create(&s->thread, NULL, thread_main, s);
	if (r < 0)
		goto fail;
	s->started = true;
	freeaddrinfo(res);
	return s;
fail:
	if (res)
		freeaddrinfo(res);
	agent_metrics_server_free(s);
	errno = -r;
	return NULL;
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
	if (s->fd >= 0)
		close(s->fd);
	if (s->stop_pipe[0] >= 0)
		close(s->stop_pipe[0]);
	if (s->stop_pipe[1] >= 0)
		close(s->stop_pipe[1]);
	free(s);
}
