/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The exporters' HTTP client (gateway/exporters/httpclient.c) sends a
 * request body in few loop turns. curl sends one upload buffer per turn on
 * the socket; at its default 64 KiB a 1.5 MB export took 24 turns, so a
 * replica whose loop turns took seconds (a storm of agent requests) timed
 * its exports out half sent. The server here is a thread with plain
 * sockets: it reads the request whole and answers 200.
 */
#include <arpa/inet.h>
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
#include <unistd.h>

#include <cmocka.h>
#include <uv.h>

#include "exporters/httpclient.h"

#define BODY_BYTES (1536 * 1024)

struct server {
	int fd;
	int port;
	size_t body_read;
};

/* Reads one request (headers, then Content-Length bytes) and answers 200. */
static void *serve_one(void *p)
{
	struct server *s = p;
	char buf[65536];
	size_t have = 0, want = 0, head = 0;
	int c = accept(s->fd, NULL, NULL);

	if (c < 0)
		return NULL;
	for (;;) {
		ssize_t n = read(c, buf + (head ? 0 : have), head ? sizeof(buf) : sizeof(buf) - 1 - have);

		if (n <= 0)
			break;
		if (!head) {
			char *end, *cl;

			have += (size_t)n;
			buf[have] = '\0';
			end = strstr(buf, "\r\n\r\n");
			if (!end)
				continue;
			cl = strcasestr(buf, "content-length:");
			want = cl ? strtoul(cl + strlen("content-length:"), NULL, 10) : 0;
			head = (size_t)(end + 4 - buf);
			s->body_read = have - head;
		} else {
			s->body_read += (size_t)n;
		}
		if (s->body_read >= want)
			break;
	}
	if (head && s->body_read >= want) {
		static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";

		if (write(c, ok, sizeof(ok) - 1) < 0)
			perror("write");
	}
	close(c);
	return NULL;
}

static unsigned long turns;
static bool finished;
static long status;

static void on_check(uv_check_t *h)
{
	(void)h;
	turns++;
	usleep(2000); /* a loop busy with other work */
}

static void on_done(void *userdata, const struct gw_http_response *resp)
{
	(void)userdata;
	status = resp->result == GW_HTTP_OK ? resp->status : -1;
	finished = true;
}

static void test_body_in_few_turns(void **state)
{
	struct server s = { 0 };
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);
	pthread_t th;
	uv_loop_t loop;
	uv_check_t check;
	struct gw_http_client *c;
	char url[64];
	char *body = malloc(BODY_BYTES);
	struct gw_http_request req = { .url = url,
				       .body = body,
				       .body_len = BODY_BYTES,
				       .timeout_ns = 30ULL * 1000000000ULL,
				       .version = GW_HTTP_1_1 };

	(void)state;
	assert_non_null(body);
	memset(body, 'x', BODY_BYTES);
	s.fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(s.fd >= 0);
	assert_int_equal(bind(s.fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(s.fd, 1), 0);
	assert_int_equal(getsockname(s.fd, (struct sockaddr *)&a, &alen), 0);
	s.port = ntohs(a.sin_port);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/v1development/profiles", s.port);
	assert_int_equal(pthread_create(&th, NULL, serve_one, &s), 0);

	assert_int_equal(uv_loop_init(&loop), 0);
	assert_int_equal(uv_check_init(&loop, &check), 0);
	assert_int_equal(uv_check_start(&check, on_check), 0);
	c = gw_http_client__new(&loop);
	assert_non_null(c);
	assert_int_equal(gw_http_client__post(c, &req, on_done, NULL), 0);
	while (!finished && turns < 1000)
		uv_run(&loop, UV_RUN_ONCE);
	assert_true(finished);
	assert_int_equal(status, 200);
	assert_int_equal(s.body_read, BODY_BYTES);
	/* Connect, send, answer: a handful of turns; 64 KiB a turn would take 24 for the body alone. */
	print_message("%lu loop turns for %d bytes\n", turns, BODY_BYTES);
	assert_true(turns <= 10);

	uv_check_stop(&check);
	uv_close((uv_handle_t *)&check, NULL);
	gw_http_client__close(c);
	uv_run(&loop, UV_RUN_DEFAULT);
	assert_int_equal(uv_loop_close(&loop), 0);
	pthread_join(th, NULL);
	close(s.fd);
	free(body);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_body_in_few_turns),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
