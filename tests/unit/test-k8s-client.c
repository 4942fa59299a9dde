// SPDX-License-Identifier: Apache-2.0
/*
 * The Kubernetes client against tests/fakes/fake-kube-apiserver.js (Node.js,
 * TLS with a test CA made by the openssl CLI): paginated lists, watches with
 * ADDED/MODIFIED/DELETED/BOOKMARK, a mid-stream 410 ERROR, an expired
 * continue token, 401 until the token file is rotated, abrupt disconnects,
 * and the node/namespace/label filters. Skipped (77) without node or openssl.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <uv.h>

#include "gateway/k8s/k8s-cache.h"
#include "gateway/k8s/k8s-client.h"

#define MS 1000000ull

struct fake {
	pid_t pid;
	int in_fd;
	FILE *out;
	int port;
	char dir[64];
};

static char fake_script[4096];
static bool fake_http2; /* the next fake serves HTTP/2 (ALPN h2) */

static void write_file(const char *dir, const char *name, const char *text)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static char *read_line(struct fake *f, char *buf, size_t size)
{
	struct pollfd p = { .fd = fileno(f->out), .events = POLLIN };

	/* Bounded: the fake answers each command at once. */
	if (poll(&p, 1, 20000) <= 0)
		fail_msg("fake-kube-apiserver did not answer");
	return fgets(buf, (int)size, f->out);
}

static void fake_start(struct fake *f, const char *state_json, const char *accepted_token)
{
	int in[2], out[2];
	char line[256], state[128];

	snprintf(f->dir, sizeof(f->dir), "/tmp/sr-fake-kube-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	write_file(f->dir, "state.json", state_json);
	write_file(f->dir, "accepted-token", accepted_token);
	write_file(f->dir, "token", accepted_token);
	snprintf(state, sizeof(state), "%s/state.json", f->dir);
	assert_int_equal(pipe2(in, O_CLOEXEC), 0);
	assert_int_equal(pipe2(out, O_CLOEXEC), 0);
	f->pid = fork();
	assert_true(f->pid >= 0);
	if (f->pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		execlp("node", "node", fake_script, "--dir", f->dir, "--state", state, fake_http2 ? "--http2" : "--",
		       (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	f->in_fd = in[1];
	f->out = fdopen(out[0], "r");
	assert_non_null(read_line(f, line, sizeof(line)));
	assert_int_equal(sscanf(line, "ready %d", &f->port), 1);
}

/* Sends a command; returns its answer line in a static buffer. */
static const char *fake_cmd(struct fake *f, const char *json)
{
	static char line[4096];
	size_t n = strlen(json);

	assert_int_equal(write(f->in_fd, json, n), (ssize_t)n);
	assert_int_equal(write(f->in_fd, "\n", 1), 1);
	assert_non_null(read_line(f, line, sizeof(line)));
	assert_true(strncmp(line, "ok ", 3) == 0);
	return line;
}

static void fake_stop(struct fake *f)
{
	int status;
	char cmd[128];

	close(f->in_fd); /* the fake exits when stdin closes */
	waitpid(f->pid, &status, 0);
	fclose(f->out);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
	assert_int_equal(system(cmd), 0);
}

/* ---- running the loop until something holds ---- */

struct harness {
	uv_loop_t loop;
	uv_timer_t check;
	struct k8s_cache *cache;
	struct k8s_client *client;
	struct fake fake;
	bool (*pred)(struct harness *h, const void *arg);
	const void *arg;
	uint64_t deadline;
	bool timed_out;
	int synced_calls;
};

static void on_check(uv_timer_t *t)
{
	struct harness *h = t->data;

	if (h->pred && h->pred(h, h->arg)) {
		uv_stop(&h->loop);
		return;
	}
	if (uv_hrtime() > h->deadline) {
		h->timed_out = true;
		uv_stop(&h->loop);
	}
}

static void run_until(struct harness *h, bool (*pred)(struct harness *, const void *), const void *arg,
		      const char *what)
{
	h->pred = pred;
	h->arg = arg;
	h->timed_out = false;
	h->deadline = uv_hrtime() + 20000 * MS;
	uv_run(&h->loop, UV_RUN_DEFAULT);
	if (h->timed_out)
		fail_msg("timed out waiting for: %s", what);
}

static void on_synced(void *ud)
{
	struct harness *h = ud;

	h->synced_calls++;
}

static void harness_start(struct harness *h, const char *state, const char *token, const char *client_token,
			  void (*tweak)(struct k8s_client_options *o))
{
	struct k8s_client_options o = { 0 };
	char server[64], ca[128], tokfile[128], err[256];

	memset(h, 0, sizeof(*h));
	fake_start(&h->fake, state, token);
	if (client_token)
		write_file(h->fake.dir, "token", client_token);
	assert_int_equal(uv_loop_init(&h->loop), 0);
	uv_timer_init(&h->loop, &h->check);
	h->check.data = h;
	uv_timer_start(&h->check, on_check, 5, 5);
	h->cache = k8s_cache_new(&(struct k8s_cache_limits){ .deleted_grace_ns = 3600000 * MS });
	assert_non_null(h->cache);
	snprintf(server, sizeof(server), "https://127.0.0.1:%d", h->fake.port);
	snprintf(ca, sizeof(ca), "%s/ca.crt", h->fake.dir);
	snprintf(tokfile, sizeof(tokfile), "%s/token", h->fake.dir);
	o.conn.server = server;
	o.conn.ca_file = ca;
	o.conn.token_file = tokfile;
	o.cache = h->cache;
	o.watch[K8S_KIND_POD] = true;
	o.backoff_initial_ns = 50 * MS;
	o.backoff_max_ns = 200 * MS;
	o.watch_timeout_min_s = 2;
	o.watch_timeout_max_s = 4;
	o.list_limit = 2;
	o.on_synced = on_synced;
	o.userdata = h;
	if (tweak)
		tweak(&o);
	h->client = k8s_client_new(&h->loop, &o, err, sizeof(err));
	if (!h->client)
		fail_msg("k8s_client_new: %s", err);
	assert_int_equal(k8s_client__start(h->client), 0);
}

static void harness_stop(struct harness *h)
{
	k8s_client__close(h->client, NULL, NULL);
	uv_close((uv_handle_t *)&h->check, NULL);
	uv_run(&h->loop, UV_RUN_DEFAULT);
	/* Every handle the client opened is closed: a leak fails here. */
	assert_int_equal(uv_loop_close(&h->loop), 0);
	k8s_cache_free(h->cache);
	fake_stop(&h->fake);
}

static bool is_synced(struct harness *h, const void *arg)
{
	return k8s_client__synced(h->client);
}

static bool has_container(struct harness *h, const void *arg)
{
	return k8s_cache__pod_by_container(h->cache, arg, NULL) != NULL;
}

static bool lacks_uid(struct harness *h, const void *arg)
{
	struct k8s_cache_stats st;

	k8s_cache__stats(h->cache, &st);
	return st.pods_deleted > 0;
}

static bool stat_at_least(struct harness *h, const void *arg)
{
	const uint64_t *want = arg; /* [offset into stats, value] */
	struct k8s_client_stats st;

	k8s_client__stats(h->client, &st);
	return *(uint64_t *)((char *)&st + want[0]) >= want[1];
}

#define WAIT_STAT(h, field, v)                                                                                         \
	do {                                                                                                           \
		uint64_t w_[2] = { offsetof(struct k8s_client_stats, field), (v) };                                    \
		run_until((h), stat_at_least, w_, #field " >= " #v);                                                   \
	} while (0)

static const char state5[] =
	"{\"pods\":["
	"{\"metadata\":{\"name\":\"web-5d9f-a\",\"namespace\":\"shop\",\"uid\":\"p1\",\"labels\":{\"pod-template-"
	"hash\":"
	"\"5d9f\"},\"ownerReferences\":[{\"kind\":\"ReplicaSet\",\"name\":\"web-5d9f\",\"uid\":\"rs1\",\"controller\":"
	"true}]},"
	"\"spec\":{\"nodeName\":\"n1\",\"containers\":[{\"name\":\"app\",\"image\":\"web:1\"}]},\"status\":{"
	"\"containerStatuses\":[{\"name\":\"app\",\"containerID\":\"containerd://"
	"aaaa000000000000000000000000000000000000000000000000000000000001\"}]}},"
	"{\"metadata\":{\"name\":\"b\",\"namespace\":\"shop\",\"uid\":\"p2\"},\"spec\":{\"nodeName\":\"n2\"}},"
	"{\"metadata\":{\"name\":\"c\",\"namespace\":\"other\",\"uid\":\"p3\",\"labels\":{\"team\":\"x\"}},\"spec\":{"
	"\"nodeName\":\"n1\"}},"
	"{\"metadata\":{\"name\":\"d\",\"namespace\":\"other\",\"uid\":\"p4\"},\"spec\":{\"nodeName\":\"n2\"}},"
	"{\"metadata\":{\"name\":\"e\",\"namespace\":\"kube-system\",\"uid\":\"p5\"},\"spec\":{\"nodeName\":\"n1\"}}],"
	"\"namespaces\":[{\"metadata\":{\"name\":\"kube-system\",\"uid\":\"cluster-uid-1\"}},{\"metadata\":{\"name\":"
	"\"shop\",\"uid\":\"ns-shop\",\"labels\":{\"env\":\"prod\"}}}],"
	"\"replicasets\":[{\"metadata\":{\"name\":\"web-5d9f\",\"namespace\":\"shop\",\"uid\":\"rs1\","
	"\"ownerReferences\":"
	"[{\"kind\":\"Deployment\",\"name\":\"web\",\"uid\":\"dep1\",\"controller\":true}]},\"spec\":{\"replicas\":1}}]"
	"}";

static void watch_all(struct k8s_client_options *o)
{
	o->watch[K8S_KIND_NAMESPACE] = true;
	o->watch[K8S_KIND_REPLICASET] = true;
}

static void test_list_and_watch(void **state)
{
	struct harness h;
	struct k8s_client_stats st;
	struct k8s_cache_stats cs;
	const struct k8s_replicaset *rs;

	harness_start(&h, state5, "tok-1", NULL, watch_all);
	run_until(&h, is_synced, NULL, "initial sync");
	assert_int_equal(h.synced_calls, 1);
	k8s_cache__stats(h.cache, &cs);
	assert_int_equal(cs.pods, 5);
	assert_int_equal(cs.namespaces, 2);
	assert_int_equal(cs.replicasets, 1);
	k8s_client__stats(h.client, &st);
	/* 5 pods at limit 2 are 3 pages; plus one page each of namespaces and ReplicaSets. */
	assert_int_equal(st.lists, 5);
	assert_non_null(k8s_cache__pod_by_container(
		h.cache, "aaaa000000000000000000000000000000000000000000000000000000000001", NULL));
	rs = k8s_cache__replicaset(h.cache, "shop", "web-5d9f");
	assert_non_null(rs);
	assert_string_equal(rs->deployment_name, "web");
	assert_string_equal(k8s_cache__cluster_uid(h.cache), "cluster-uid-1");

	fake_cmd(&h.fake,
		 "{\"op\":\"add\",\"object\":{\"metadata\":{\"name\":\"new\",\"namespace\":\"shop\",\"uid\":\"p6\"},"
		 "\"status\":{\"initContainerStatuses\":[{\"name\":\"init\",\"containerID\":\"cri-o://"
		 "bbbb000000000000000000000000000000000000000000000000000000000002\"}]}}}");
	run_until(&h, has_container, "bbbb000000000000000000000000000000000000000000000000000000000002", "ADDED pod");
	fake_cmd(&h.fake,
		 "{\"op\":\"modify\",\"object\":{\"metadata\":{\"name\":\"new\",\"namespace\":\"shop\",\"uid\":"
		 "\"p6\"},\"status\":{\"containerStatuses\":[{\"name\":\"app\",\"containerID\":\"containerd://"
		 "cccc000000000000000000000000000000000000000000000000000000000003\"}]}}}");
	run_until(&h, has_container, "cccc000000000000000000000000000000000000000000000000000000000003",
		  "MODIFIED pod");
	fake_cmd(&h.fake,
		 "{\"op\":\"delete\",\"object\":{\"metadata\":{\"name\":\"new\",\"namespace\":\"shop\",\"uid\":"
		 "\"p6\"}}}");
	run_until(&h, lacks_uid, NULL, "DELETED pod");
	fake_cmd(&h.fake, "{\"op\":\"bookmark\"}");
	WAIT_STAT(&h, bookmarks, 1);
	/* The watch ends at timeoutSeconds (2-4 s here) and is opened again from the last RV, without a relist. */
	WAIT_STAT(&h, watches, 6);
	k8s_client__stats(h.client, &st);
	assert_int_equal(st.relists, 0);
	assert_int_equal(st.failures, 0);
	fake_cmd(&h.fake,
		 "{\"op\":\"add\",\"object\":{\"metadata\":{\"name\":\"late\",\"namespace\":\"shop\",\"uid\":\"p7\"},"
		 "\"status\":{\"containerStatuses\":[{\"name\":\"app\",\"containerID\":\"containerd://"
		 "dddd000000000000000000000000000000000000000000000000000000000004\"}]}}}");
	run_until(&h, has_container, "dddd000000000000000000000000000000000000000000000000000000000004",
		  "pod after rewatch");
	harness_stop(&h);
}

static void test_relist_on_410(void **state)
{
	struct harness h;
	struct k8s_client_stats st;

	harness_start(&h, state5, "tok-1", NULL, NULL);
	/* The first continue token the client receives has expired by the time it uses it. */
	fake_cmd(&h.fake, "{\"op\":\"expire-next-continue\"}");
	run_until(&h, is_synced, NULL, "sync after an expired continue token");
	k8s_client__stats(h.client, &st);
	assert_int_equal(st.relists, 1);
	fake_cmd(&h.fake, "{\"op\":\"error410\"}");
	WAIT_STAT(&h, relists, 2);
	fake_cmd(&h.fake,
		 "{\"op\":\"add\",\"object\":{\"metadata\":{\"name\":\"after\",\"namespace\":\"shop\",\"uid\":\"p8\"},"
		 "\"status\":{\"containerStatuses\":[{\"name\":\"app\",\"containerID\":\"containerd://"
		 "eeee000000000000000000000000000000000000000000000000000000000005\"}]}}}");
	run_until(&h, has_container, "eeee000000000000000000000000000000000000000000000000000000000005",
		  "pod after relist");
	k8s_client__stats(h.client, &st);
	assert_int_equal(st.failures, 0);
	assert_int_equal(h.synced_calls, 1);
	harness_stop(&h);
}

static void test_unauthorized_until_rotated(void **state)
{
	struct harness h;
	struct k8s_client_stats st;
	char path[128];

	harness_start(&h, state5, "tok-new", "tok-old", NULL);
	WAIT_STAT(&h, unauthorized, 2);
	assert_false(k8s_client__synced(h.client));
	/* Rotation: the kubelet writes the new token; the client re-reads it after a 401. */
	snprintf(path, sizeof(path), "%s", h.fake.dir);
	write_file(path, "token", "tok-new\n");
	run_until(&h, is_synced, NULL, "sync after token rotation");
	k8s_client__stats(h.client, &st);
	assert_true(st.token_reloads >= 3);
	harness_stop(&h);
}

static void test_disconnect(void **state)
{
	struct harness h;
	struct k8s_client_stats st;

	harness_start(&h, state5, "tok-1", NULL, NULL);
	run_until(&h, is_synced, NULL, "initial sync");
	WAIT_STAT(&h, watches, 1);
	fake_cmd(&h.fake, "{\"op\":\"disconnect\"}");
	WAIT_STAT(&h, failures, 1);
	WAIT_STAT(&h, watches, 2);
	fake_cmd(&h.fake,
		 "{\"op\":\"add\",\"object\":{\"metadata\":{\"name\":\"x\",\"namespace\":\"shop\",\"uid\":\"p9\"},"
		 "\"status\":{\"containerStatuses\":[{\"name\":\"app\",\"containerID\":\"containerd://"
		 "ffff000000000000000000000000000000000000000000000000000000000006\"}]}}}");
	run_until(&h, has_container, "ffff000000000000000000000000000000000000000000000000000000000006",
		  "pod after reconnect");
	k8s_client__stats(h.client, &st);
	/* A dropped stream resumes from the last resourceVersion: no relist. */
	assert_int_equal(st.relists, 0);
	harness_stop(&h);
}

static void node_filter(struct k8s_client_options *o)
{
	o->field_selector = (char *)"spec.nodeName=n1";
	o->label_selector = (char *)"team";
	o->namespace = (char *)"other";
}

static void test_filters(void **state)
{
	struct harness h;
	struct k8s_cache_stats cs;

	harness_start(&h, state5, "tok-1", NULL, node_filter);
	run_until(&h, is_synced, NULL, "initial sync");
	k8s_cache__stats(h.cache, &cs);
	assert_int_equal(cs.pods, 1);
	assert_non_null(k8s_cache__pod_by_uid(h.cache, "p3"));
	harness_stop(&h);
}

/* RBAC without ReplicaSets: pods alone make the client synced; ReplicaSets keep being retried. */
static void test_forbidden_optional_kind(void **state)
{
	struct harness h;
	struct k8s_cache_stats cs;

	harness_start(&h, state5, "tok-1", NULL, watch_all);
	fake_cmd(&h.fake, "{\"op\":\"forbid\",\"resource\":\"replicasets\"}");
	run_until(&h, is_synced, NULL, "sync without ReplicaSets");
	k8s_cache__stats(h.cache, &cs);
	assert_int_equal(cs.pods, 5);
	assert_int_equal(cs.replicasets, 0);
	assert_int_equal(cs.namespaces, 2);
	WAIT_STAT(&h, failures, 2);
	harness_stop(&h);
}

static bool got_bytes(struct harness *h, const void *arg)
{
	struct k8s_client_stats st;

	k8s_client__stats(h->client, &st);
	return st.bytes > 0;
}

/* Closing at any point (request in flight, page being decoded on a worker) closes every handle. */
static void test_close_while_listing(void **state)
{
	struct harness h;

	harness_start(&h, state5, "tok-1", NULL, watch_all);
	harness_stop(&h); /* before any I/O */
	harness_start(&h, state5, "tok-1", NULL, watch_all);
	run_until(&h, got_bytes, NULL, "the first response bytes");
	harness_stop(&h); /* a page may be on the worker now */
}

/* The real apiserver speaks HTTP/2: lists and every watch share one connection, a reset stream is retried. */
static void test_http2(void **state)
{
	struct harness h;
	struct k8s_client_stats st;
	const char *line;
	int h2 = -1, http1 = -1;

	fake_http2 = true;
	harness_start(&h, state5, "tok-1", NULL, watch_all);
	fake_http2 = false;
	run_until(&h, is_synced, NULL, "initial sync over HTTP/2");
	WAIT_STAT(&h, watches, 3);
	fake_cmd(&h.fake, "{\"op\":\"disconnect\"}");
	WAIT_STAT(&h, failures, 1);
	fake_cmd(&h.fake, "{\"op\":\"add\",\"object\":{\"metadata\":{\"name\":\"h2\",\"namespace\":\"shop\",\"uid\":"
			  "\"p10\"},\"status\":{\"containerStatuses\":[{\"name\":\"app\",\"containerID\":"
			  "\"containerd://1010000000000000000000000000000000000000000000000000000000000010\"}]}}}");
	run_until(&h, has_container, "1010000000000000000000000000000000000000000000000000000000000010",
		  "pod after a reset stream");
	line = fake_cmd(&h.fake, "{\"op\":\"stats\"}");
	const char *req = strstr(line, "\"requests\":");
	assert_non_null(req);
	assert_int_equal(sscanf(req, "\"requests\":{\"h2\":%d,\"http1\":%d}", &h2, &http1), 2);
	assert_true(h2 >= 8);
	assert_int_equal(http1, 0);
	k8s_client__stats(h.client, &st);
	assert_int_equal(st.relists, 0);
	harness_stop(&h);
}

static void test_unreachable(void **state)
{
	/* Nothing listens: the client retries with backoff and never claims to be synced. */
	struct harness h;
	struct k8s_client_options o = { 0 };
	char err[128];

	memset(&h, 0, sizeof(h));
	assert_int_equal(uv_loop_init(&h.loop), 0);
	uv_timer_init(&h.loop, &h.check);
	h.check.data = &h;
	uv_timer_start(&h.check, on_check, 5, 5);
	h.cache = k8s_cache_new(NULL);
	o.conn.server = (char *)"https://127.0.0.1:1";
	o.cache = h.cache;
	o.watch[K8S_KIND_POD] = true;
	o.backoff_initial_ns = 20 * MS;
	o.backoff_max_ns = 40 * MS;
	h.client = k8s_client_new(&h.loop, &o, err, sizeof(err));
	assert_non_null(h.client);
	assert_int_equal(k8s_client__start(h.client), 0);
	WAIT_STAT(&h, failures, 3);
	assert_false(k8s_client__synced(h.client));
	k8s_client__close(h.client, NULL, NULL);
	uv_close((uv_handle_t *)&h.check, NULL);
	uv_run(&h.loop, UV_RUN_DEFAULT);
	assert_int_equal(uv_loop_close(&h.loop), 0);
	k8s_cache_free(h.cache);
}

int main(void)
{
	const char *fixtures = getenv("SR_TEST_FIXTURES");
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_list_and_watch),
		cmocka_unit_test(test_relist_on_410),
		cmocka_unit_test(test_unauthorized_until_rotated),
		cmocka_unit_test(test_disconnect),
		cmocka_unit_test(test_filters),
		cmocka_unit_test(test_forbidden_optional_kind),
		cmocka_unit_test(test_close_while_listing),
		cmocka_unit_test(test_http2),
		cmocka_unit_test(test_unreachable),
	};

	signal(SIGPIPE, SIG_IGN);
	if (system("node --version >/dev/null 2>&1") != 0 || system("openssl version >/dev/null 2>&1") != 0) {
		printf("SKIP: node and openssl are needed for the fake API server\n");
		return 77;
	}
	snprintf(fake_script, sizeof(fake_script), "%s/../fakes/fake-kube-apiserver.js",
		 fixtures ? fixtures : "tests/fixtures");
	if (access(fake_script, R_OK) < 0) {
		printf("SKIP: %s not found (set SR_TEST_FIXTURES)\n", fake_script);
		return 77;
	}
	if (getenv("SR_TEST_FILTER"))
		cmocka_set_test_filter(getenv("SR_TEST_FILTER"));
	return cmocka_run_group_tests_name("k8s-client", tests, NULL, NULL);
}
