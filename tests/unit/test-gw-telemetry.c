// SPDX-License-Identifier: Apache-2.0
/*
 * The telemetry server (gateway/telemetry/server.h) on the connection layer:
 * GET and HEAD of a path handed to the handler without its query, one
 * request per HTTP/1.1 connection, 405 for other methods, 400 for a
 * malformed head, 431 past GW_TELEMETRY_MAX_REQUEST_BYTES or
 * GW_TELEMETRY_MAX_HEADERS, 413 for a body, and GW_TELEMETRY_MAX_CONNECTIONS
 * at once, the oldest silent connection making room. A client thread speaks
 * over real sockets while the loop runs; the test ends with
 * uv_loop_close() == 0.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cmocka.h>
#include <uv.h>

#include "gateway/telemetry/server.h"
#include "common/macro.h"

struct world {
	uv_loop_t loop;
	uv_async_t done;
	struct gw_telemetry *t;
	int port;
	void (*client)(struct world *w);
	unsigned handled;
};

/* Answers "path=<path>" for every path but /missing (404). */
static void handler(void *userdata, const char *path, int *ret_status, char **ret_body, size_t *ret_len,
		    const char **ret_content_type)
{
	struct world *w = userdata;
	int n;

	w->handled++;
	*ret_status = strcmp(path, "/missing") == 0 ? 404 : 200;
	*ret_content_type = "text/plain; charset=utf-8";
	n = asprintf(ret_body, "path=%s\n", path);
	*ret_len = n < 0 ? 0 : (size_t)n;
}

static int dial(struct world *w)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)w->port) };
	struct timeval tv = { .tv_sec = 10 };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

/* Everything the server sends until it closes (it must close: one request per connection). */
static char *read_all(int fd)
{
	size_t len = 0, cap = 1 << 16;
	char *out = malloc(cap + 1);
	ssize_t n;

	assert_non_null(out);
	while ((n = read(fd, out + len, cap - len)) > 0)
		len += (size_t)n;
	assert_int_equal(n, 0); /* closed by the server, not timed out */
	out[len] = '\0';
	close(fd);
	return out;
}

static char *exchange(struct world *w, const char *req, size_t len)
{
	int fd = dial(w);
	assert_int_equal(write(fd, req, len), (ssize_t)len);
	return read_all(fd);
}

static void expect(struct world *w, const char *req, const char *status_line, const char *body)
{
	char *got = exchange(w, req, strlen(req));
	if (strncmp(got, status_line, strlen(status_line)) != 0)
		fail_msg("%s: got \"%.200s\", want \"%s\"", req, got, status_line);
	assert_non_null(strstr(got, "\r\nConnection: close\r\n"));
	if (body) {
		const char *b = strstr(got, "\r\n\r\n");
		assert_non_null(b);
		assert_string_equal(b + 4, body);
	}
	free(got);
}

static void *client_thread(void *arg)
{
	struct world *w = arg;
	w->client(w);
	uv_async_send(&w->done);
	return NULL;
}

static void on_done(uv_async_t *a)
{
	struct world *w = a->data;
	gw_telemetry_close(w->t);
	uv_close((uv_handle_t *)&w->done, NULL);
}

static void run(void (*client)(struct world *w), struct world *w)
{
	char err[256];
	pthread_t th;

	assert_int_equal(uv_loop_init(&w->loop), 0);
	w->t = gw_telemetry_new(&w->loop, "test", "127.0.0.1:0", handler, w, err, sizeof(err));
	assert_non_null(w->t);
	w->port = atoi(strrchr(gw_telemetry__address(w->t), ':') + 1);
	w->client = client;
	w->done.data = w;
	assert_int_equal(uv_async_init(&w->loop, &w->done, on_done), 0);
	assert_int_equal(pthread_create(&th, NULL, client_thread, w), 0);
	assert_int_equal(uv_run(&w->loop, UV_RUN_DEFAULT), 0);
	pthread_join(th, NULL);
	assert_int_equal(uv_loop_close(&w->loop), 0);
}

static void answers(struct world *w)
{
	expect(w, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.1 200 OK\r\n", "path=/metrics\n");
	/* The query is not the path's; HTTP/1.0 is answered as 1.1 answers. */
	expect(w, "GET /healthz?verbose=1 HTTP/1.0\r\n\r\n", "HTTP/1.1 200 OK\r\n", "path=/healthz\n");
	expect(w, "GET /missing HTTP/1.1\r\n\r\n", "HTTP/1.1 404 ", "path=/missing\n");
	/* HEAD: the length of the body a GET gets, and no body. */
	expect(w, "HEAD /readyz HTTP/1.1\r\n\r\n", "HTTP/1.1 200 OK\r\n", "");
	char *head = exchange(w, "HEAD /readyz HTTP/1.1\r\n\r\n", 25);
	assert_non_null(strstr(head, "\r\nContent-Length: 13\r\n"));
	free(head);
	/* A keep-alive client gets one answer and the end of the connection, however many it pipelines. */
	expect(w, "GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\n\r\n", "HTTP/1.1 200 OK\r\n", "path=/a\n");
}

static void test_answers(void **state)
{
	struct world w = { 0 };
	(void)state;
	run(answers, &w);
	assert_int_equal(w.handled, 6);
}

static void refusals(struct world *w)
{
	char req[GW_TELEMETRY_MAX_REQUEST_BYTES + 256];
	size_t n;

	expect(w, "POST /metrics HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.1 405 ", "only GET and HEAD\n");
	expect(w, "garbage\r\n\r\n", "HTTP/1.1 400 ", NULL);
	expect(w, "GET /metrics HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc", "HTTP/1.1 413 ", NULL);
	/* A path past GW_TELEMETRY_MAX_PATH_BYTES. */
	n = (size_t)snprintf(req, sizeof(req), "GET /%0*d HTTP/1.1\r\n\r\n", GW_TELEMETRY_MAX_PATH_BYTES, 0);
	assert_true(n < sizeof(req));
	expect(w, req, "HTTP/1.1 400 ", "request path too long\n");

	/* The head: GW_TELEMETRY_MAX_REQUEST_BYTES, then 431. */
	n = (size_t)snprintf(req, sizeof(req), "GET /m HTTP/1.1\r\nX: %0*d\r\n\r\n",
			     GW_TELEMETRY_MAX_REQUEST_BYTES - 24, 0);
	assert_int_equal(n, GW_TELEMETRY_MAX_REQUEST_BYTES);
	expect(w, req, "HTTP/1.1 200 OK\r\n", "path=/m\n");
	n = (size_t)snprintf(req, sizeof(req), "GET /m HTTP/1.1\r\nX: %0*d\r\n\r\n",
			     GW_TELEMETRY_MAX_REQUEST_BYTES - 23, 0);
	expect(w, req, "HTTP/1.1 431 ", NULL);

	/* Header lines: GW_TELEMETRY_MAX_HEADERS, then 431. */
	for (int extra = 0; extra < 2; extra++) {
		n = (size_t)snprintf(req, sizeof(req), "GET /h HTTP/1.1\r\n");
		for (int i = 0; i < GW_TELEMETRY_MAX_HEADERS + extra; i++)
			n += (size_t)snprintf(req + n, sizeof(req) - n, "H%d: v\r\n", i);
		n += (size_t)snprintf(req + n, sizeof(req) - n, "\r\n");
		assert_true(n < sizeof(req));
		expect(w, req, extra ? "HTTP/1.1 431 " : "HTTP/1.1 200 OK\r\n", extra ? NULL : "path=/h\n");
	}
}

/*
 * A head too large is answered 431 while the client still sends: the
 * connection lingers (FIN, then what comes is read and thrown away), so the
 * answer is not lost to a reset.
 */
static void linger(struct world *w)
{
	size_t n = GW_TELEMETRY_MAX_REQUEST_BYTES + 64 * 1024;
	char *req = malloc(n);
	char *got;
	int fd = dial(w);

	assert_non_null(req);
	memset(req, 'a', n);
	memcpy(req, "GET /m HTTP/1.1\r\nX: ", 21);
	assert_int_equal(write(fd, req, n), (ssize_t)n);
	assert_int_equal(shutdown(fd, SHUT_WR), 0);
	got = read_all(fd);
	assert_true(strncmp(got, "HTTP/1.1 431 ", 13) == 0);
	free(got);
	free(req);
}

static void test_linger(void **state)
{
	struct world w = { 0 };
	(void)state;
	run(linger, &w);
	assert_int_equal(w.handled, 0);
}

static void test_refusals(void **state)
{
	struct world w = { 0 };
	(void)state;
	run(refusals, &w);
	assert_int_equal(w.handled, 2);
}

/* GW_TELEMETRY_MAX_CONNECTIONS silent ones: the next connection is served, the oldest silent one closed. */
static void connections(struct world *w)
{
	int fds[GW_TELEMETRY_MAX_CONNECTIONS];
	char c;

	for (int i = 0; i < GW_TELEMETRY_MAX_CONNECTIONS; i++)
		fds[i] = dial(w);
	expect(w, "GET /metrics HTTP/1.1\r\n\r\n", "HTTP/1.1 200 OK\r\n", "path=/metrics\n");
	assert_int_equal(read(fds[0], &c, 1), 0); /* made room */
	for (int i = 0; i < GW_TELEMETRY_MAX_CONNECTIONS; i++)
		close(fds[i]);
}

static void test_connections(void **state)
{
	struct world w = { 0 };
	(void)state;
	run(connections, &w);
	assert_int_equal(w.handled, 1);
}

static void test_bad_address(void **state)
{
	uv_loop_t loop;
	char err[256] = "";

	(void)state;
	assert_int_equal(uv_loop_init(&loop), 0);
	assert_null(gw_telemetry_new(&loop, "test", "nowhere", handler, NULL, err, sizeof(err)));
	assert_int_equal(errno, EINVAL);
	assert_true(err[0] != '\0');
	assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
	assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_answers),	    cmocka_unit_test(test_refusals),	cmocka_unit_test(test_linger),
		cmocka_unit_test(test_connections), cmocka_unit_test(test_bad_address),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
