// SPDX-License-Identifier: Apache-2.0
/* sr_parse_endpoint (common/netaddr.h): the listen addresses of the agent and the gateway. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/netaddr.h"

static const char *parse_fmt(const char *s, char *out, size_t size)
{
	struct sockaddr_storage ss;
	char err[256] = "";

	assert_int_equal(sr_parse_endpoint(s, &ss, err, sizeof(err)), 0);
	return sr_sockaddr_format((struct sockaddr *)&ss, out, size);
}

static void test_forms(void **state)
{
	char buf[64];

	assert_string_equal(parse_fmt("127.0.0.1:9464", buf, sizeof(buf)), "127.0.0.1:9464");
	assert_string_equal(parse_fmt("[::1]:9464", buf, sizeof(buf)), "[::1]:9464");
	/* No host: every IPv4 interface; port 0: any free port. */
	assert_string_equal(parse_fmt(":9464", buf, sizeof(buf)), "0.0.0.0:9464");
	assert_string_equal(parse_fmt("0.0.0.0:0", buf, sizeof(buf)), "0.0.0.0:0");
	parse_fmt("localhost:80", buf, sizeof(buf));
	assert_true(strcmp(buf, "127.0.0.1:80") == 0 || strcmp(buf, "[::1]:80") == 0);
}

static void test_errors(void **state)
{
	struct sockaddr_storage ss;
	char err[256];

	assert_int_equal(sr_parse_endpoint("", &ss, err, sizeof(err)), -EINVAL);
	assert_int_equal(sr_parse_endpoint("127.0.0.1", &ss, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "port is required"));
	assert_int_equal(sr_parse_endpoint("[::1]9464", &ss, err, sizeof(err)), -EINVAL);
	assert_int_equal(sr_parse_endpoint("127.0.0.1:65536", &ss, err, sizeof(err)), -EINVAL);
	assert_int_equal(sr_parse_endpoint("127.0.0.1:http", &ss, err, sizeof(err)), -EINVAL);
	assert_int_equal(sr_parse_endpoint("127.0.0.1:", &ss, err, sizeof(err)), -EINVAL);
	assert_int_equal(sr_parse_endpoint("no-such-host.invalid:1", &ss, err, sizeof(err)), -EADDRNOTAVAIL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_forms),
		cmocka_unit_test(test_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
