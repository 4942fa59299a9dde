/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The agent receiver's node tokens (auth.node_tokens_file, agent-identity.c):
 * the file's format and its refusals (a token shared by two nodes, a line
 * that is not "<node> <token>", an empty file), and that a token names its
 * node and nothing else does. Certificates are covered by
 * tests/integration/gw-hostile-peers.js (real TLS).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "receivers/agent-private.h"

static char path[] = "/tmp/sr-test-node-tokens.XXXXXX";

static void write_file(const char *text)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static char *lookup(struct gw_listener *rx, const char *header)
{
	return gw_agent_node_token_lookup(rx, (const uint8_t *)header, strlen(header));
}

static void test_node_tokens(void **state)
{
	struct gw_listener_config cfg = { .auth = { .node_tokens_file = path } };
	struct gw_agent_rx a = { .rx.cfg = &cfg };
	struct gw_listener *rx = &a.rx;
	char err[512] = "";
	char *node;
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	close(fd);
	write_file("# node token\n\nnode-a  tok-a\nnode-b\ttok-b\n");
	assert_int_equal(gw_agent_node_tokens_load(rx, err, sizeof(err)), 0);
	node = lookup(rx, "Bearer tok-a");
	assert_string_equal(node, "node-a");
	free(node);
	node = lookup(rx, "bearer tok-b");
	assert_string_equal(node, "node-b");
	free(node);
	assert_null(lookup(rx, "Bearer tok-"));
	assert_null(lookup(rx, "Bearer tok-a "));
	assert_null(lookup(rx, "tok-a"));
	assert_null(lookup(rx, "Bearer node-a"));

	/* Refusals keep the tokens loaded before. */
	write_file("node-a tok-a\nnode-b tok-a\n");
	assert_int_equal(gw_agent_node_tokens_load(rx, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "line 2"));
	assert_non_null(strstr(err, "node-a"));
	write_file("node-a tok-a extra\n");
	assert_int_equal(gw_agent_node_tokens_load(rx, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "line 1"));
	write_file("node-a\n");
	assert_int_equal(gw_agent_node_tokens_load(rx, err, sizeof(err)), -EINVAL);
	write_file("# nothing\n");
	assert_int_equal(gw_agent_node_tokens_load(rx, err, sizeof(err)), -EINVAL);
	node = lookup(rx, "Bearer tok-b");
	assert_string_equal(node, "node-b");
	free(node);

	unlink(path);
	assert_int_equal(gw_agent_node_tokens_load(rx, err, sizeof(err)), -ENOENT);
	gw_agent_node_tokens_free(rx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_node_tokens),
	};
	return cmocka_run_group_tests_name("gw-agent-identity", tests, NULL, NULL);
}
