// SPDX-License-Identifier: Apache-2.0
/* The watch-stream and LIST decoders and the pod record they build. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gateway/k8s/k8s-watch.h"

#define CID1 "1111111111111111111111111111111111111111111111111111111111111111"
#define CID2 "2222222222222222222222222222222222222222222222222222222222222222"
#define CID3 "3333333333333333333333333333333333333333333333333333333333333333"

static const char pod_json[] =
	"{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"web-7d4b9c-abcde\",\"namespace\":\"shop\","
	"\"uid\":\"0f0e-uid-1\",\"resourceVersion\":\"101\",\"labels\":{\"app.kubernetes.io/name\":\"web\","
	"\"pod-template-hash\":\"7d4b9c\",\"noise\":\"x\"},\"annotations\":{\"kubectl.kubernetes.io/last-applied\":"
	"\"{...}\"},\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":\"ReplicaSet\",\"name\":\"web-7d4b9c\","
	"\"uid\":\"rs-uid\",\"controller\":true}],\"managedFields\":[{\"manager\":\"kubelet\",\"fieldsV1\":{\"f:"
	"status\":"
	"{\"f:conditions\":{}}}}]},\"spec\":{\"nodeName\":\"node-1\",\"containers\":[{\"name\":\"app\",\"image\":"
	"\"registry:5000/shop/web:1.4.2\"},{\"name\":\"sidecar\",\"image\":\"envoy@sha256:abcd\"}],\"initContainers\":"
	"[{\"name\":\"init\",\"image\":\"busybox\"}]},\"status\":{\"podIP\":\"10.1.2.3\",\"startTime\":"
	"\"2026-11-21T07:00:00Z\",\"containerStatuses\":[{\"name\":\"app\",\"containerID\":\"containerd://" CID1 "\","
	"\"imageID\":\"registry:5000/shop/web@sha256:ffff\",\"restartCount\":2,\"lastState\":{\"terminated\":"
	"{\"containerID\":\"containerd://" CID3 "\"}}},{\"name\":\"sidecar\",\"containerID\":\"cri-o://" CID2 "\"}],"
	"\"initContainerStatuses\":[{\"name\":\"init\",\"containerID\":\"docker://"
	"4444444444444444444444444444444444444444444444444444444444444444\"}]}}";

struct collect {
	int n[5];
	char last_name[128];
	char last_rv[64];
	int error_code;
	struct k8s_pod *taken;
};

static int collect_cb(void *userdata, struct k8s_event *ev)
{
	struct collect *c = userdata;

	c->n[ev->type]++;
	if (ev->resource_version)
		snprintf(c->last_rv, sizeof(c->last_rv), "%s", ev->resource_version);
	if (ev->type == K8S_EVENT_ERROR)
		c->error_code = ev->error_code;
	if (ev->object.pod && ev->object.kind == K8S_KIND_POD) {
		snprintf(c->last_name, sizeof(c->last_name), "%s", ev->object.pod->name);
		if (!c->taken) {
			c->taken = ev->object.pod;
			ev->object.pod = NULL;
		}
	}
	return 0;
}

static char *event_line(const char *type, const char *obj)
{
	char *s;
	assert_true(asprintf(&s, "{\"type\":\"%s\",\"object\":%s}\n", type, obj) > 0);
	return s;
}

static void test_pod_record(void **state)
{
	struct k8s_watch_decoder *d = k8s_watch_decoder_new(K8S_KIND_POD, NULL, 0);
	struct collect c = { 0 };
	char *line = event_line("ADDED", pod_json);
	struct k8s_pod *p;

	assert_int_equal(k8s_watch_decoder__feed(d, line, strlen(line), collect_cb, &c), 0);
	assert_int_equal(c.n[K8S_EVENT_ADDED], 1);
	assert_string_equal(c.last_rv, "101");
	p = c.taken;
	assert_non_null(p);
	assert_string_equal(p->name, "web-7d4b9c-abcde");
	assert_string_equal(p->namespace, "shop");
	assert_string_equal(p->uid, "0f0e-uid-1");
	assert_string_equal(p->node_name, "node-1");
	assert_string_equal(p->ip, "10.1.2.3");
	assert_int_equal(p->owner_kind, K8S_OWNER_REPLICASET);
	assert_string_equal(p->owner_name, "web-7d4b9c");
	assert_int_equal(p->ncontainers, 3);
	assert_string_equal(p->containers[0].name, "app");
	assert_string_equal(p->containers[0].id, CID1);
	assert_string_equal(p->containers[0].last_id, CID3);
	assert_int_equal(p->containers[0].restart_count, 2);
	assert_string_equal(p->containers[0].image, "registry:5000/shop/web:1.4.2");
	assert_string_equal(p->containers[1].id, CID2);
	assert_true(p->containers[2].init);
	assert_string_equal(p->containers[2].id, "4444444444444444444444444444444444444444444444444444444444444444");
	/* No keep filter: every label is stored. */
	assert_int_equal(p->labels.n, 3);
	k8s_pod_free(p);
	free(line);
	k8s_watch_decoder_free(d);
}

static bool keep_only_app(void *ud, enum k8s_kind kind, const char *key)
{
	return strcmp(key, "app.kubernetes.io/name") == 0;
}

static void test_keep_filter(void **state)
{
	struct k8s_keep keep = { .label = keep_only_app, .annotation = keep_only_app };
	struct k8s_watch_decoder *d = k8s_watch_decoder_new(K8S_KIND_POD, &keep, 0);
	struct collect c = { 0 };
	char *line = event_line("MODIFIED", pod_json);

	assert_int_equal(k8s_watch_decoder__feed(d, line, strlen(line), collect_cb, &c), 0);
	assert_non_null(c.taken);
	assert_int_equal(c.taken->labels.n, 1);
	assert_string_equal(k8s_strmap__get(&c.taken->labels, "app.kubernetes.io/name"), "web");
	assert_int_equal(c.taken->annotations.n, 0);
	k8s_pod_free(c.taken);
	free(line);
	k8s_watch_decoder_free(d);
}

/* Every split of a two-event stream yields the same two events. */
static void test_chunking(void **state)
{
	char *a = event_line("ADDED", pod_json);
	char *b = event_line("BOOKMARK", "{\"kind\":\"Pod\",\"metadata\":{\"resourceVersion\":\"555\"}}");
	size_t la = strlen(a), lb = strlen(b);
	char *all = malloc(la + lb + 1);

	memcpy(all, a, la);
	memcpy(all + la, b, lb + 1);
	for (size_t cut = 0; cut <= la + lb; cut += 7) {
		struct k8s_watch_decoder *d = k8s_watch_decoder_new(K8S_KIND_POD, NULL, 0);
		struct collect c = { 0 };
		/* Byte by byte up to cut, then the rest at once. */
		for (size_t i = 0; i < cut; i++)
			assert_int_equal(k8s_watch_decoder__feed(d, all + i, 1, collect_cb, &c), 0);
		assert_int_equal(k8s_watch_decoder__feed(d, all + cut, la + lb - cut, collect_cb, &c), 0);
		assert_int_equal(c.n[K8S_EVENT_ADDED], 1);
		assert_int_equal(c.n[K8S_EVENT_BOOKMARK], 1);
		assert_string_equal(c.last_rv, "555");
		k8s_pod_free(c.taken);
		k8s_watch_decoder_free(d);
	}
	free(all);
	free(a);
	free(b);
}

static void test_error_event(void **state)
{
	struct k8s_watch_decoder *d = k8s_watch_decoder_new(K8S_KIND_POD, NULL, 0);
	struct collect c = { 0 };
	const char *s = "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
			"\"status\":\"Failure\",\"message\":\"too old resource version: 1 (5)\",\"reason\":\"Expired\","
			"\"code\":410}}\n";

	assert_int_equal(k8s_watch_decoder__feed(d, s, strlen(s), collect_cb, &c), 0);
	assert_int_equal(c.n[K8S_EVENT_ERROR], 1);
	assert_int_equal(c.error_code, 410);
	k8s_watch_decoder_free(d);
}

static void test_bad_input(void **state)
{
	struct k8s_watch_decoder *d = k8s_watch_decoder_new(K8S_KIND_POD, NULL, 64);
	struct collect c = { 0 };
	const char *notjson = "{\"type\":\"ADDED\",\"object\":{\n";
	const char *two = "{\"type\":\"BOOKMARK\",\"object\":{}} {\"a\":1}\n";
	const char *badtype = "{\"type\":\"EXPLODED\",\"object\":{}}\n";
	const char *nouid = "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"x\"}}}\n";
	char big[200];

	assert_int_equal(k8s_watch_decoder__feed(d, notjson, strlen(notjson), collect_cb, &c), -EBADMSG);
	assert_int_equal(k8s_watch_decoder__feed(d, two, strlen(two), collect_cb, &c), -EBADMSG);
	assert_int_equal(k8s_watch_decoder__feed(d, badtype, strlen(badtype), collect_cb, &c), -EBADMSG);
	/* Usable JSON but no uid: skipped, counted, stream goes on. */
	assert_int_equal(k8s_watch_decoder__feed(d, nouid, strlen(nouid), collect_cb, &c), 0);
	assert_int_equal(k8s_watch_decoder__skipped(d), 1);
	assert_int_equal(c.n[K8S_EVENT_ADDED], 0);
	/* Blank keep-alive lines are ignored. */
	assert_int_equal(k8s_watch_decoder__feed(d, "\n\r\n", 3, collect_cb, &c), 0);
	/* Over the line limit. */
	memset(big, 'x', sizeof(big));
	assert_int_equal(k8s_watch_decoder__feed(d, big, sizeof(big), collect_cb, &c), -EMSGSIZE);
	/* A last line without newline is decoded at the end. */
	const char *tail = "{\"type\":\"BOOKMARK\",\"object\":{}}";
	assert_int_equal(k8s_watch_decoder__feed(d, tail, strlen(tail), collect_cb, &c), 0);
	assert_int_equal(c.n[K8S_EVENT_BOOKMARK], 0);
	assert_int_equal(k8s_watch_decoder__finish(d, collect_cb, &c), 0);
	assert_int_equal(c.n[K8S_EVENT_BOOKMARK], 1);
	k8s_watch_decoder_free(d);
}

static void test_list(void **state)
{
	char *body;
	struct collect c = { 0 };
	struct k8s_list_meta meta;

	assert_true(asprintf(&body,
			     "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"900\","
			     "\"continue\":\"tok%%3D\"},\"items\":[%s,{\"metadata\":{}}]}",
			     pod_json) > 0);
	assert_int_equal(k8s_list_parse(K8S_KIND_POD, body, strlen(body), NULL, collect_cb, &c, &meta), 0);
	assert_int_equal(c.n[K8S_EVENT_ADDED], 1);
	assert_string_equal(meta.resource_version, "900");
	assert_string_equal(meta.continue_token, "tok%3D");
	assert_int_equal(meta.skipped, 1);
	k8s_list_meta_clear(&meta);
	k8s_pod_free(c.taken);
	free(body);

	const char *last =
		"{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"901\",\"continue\":\"\"},\"items\":null}";
	memset(&c, 0, sizeof(c));
	assert_int_equal(k8s_list_parse(K8S_KIND_POD, last, strlen(last), NULL, collect_cb, &c, &meta), 0);
	assert_null(meta.continue_token);
	assert_string_equal(meta.resource_version, "901");
	k8s_list_meta_clear(&meta);
	assert_int_equal(k8s_list_parse(K8S_KIND_POD, "[]", 2, NULL, collect_cb, &c, &meta), -EBADMSG);
	k8s_list_meta_clear(&meta);
}

struct rs_got {
	int n;
	char dep[32];
};

static int rs_cb(void *ud, struct k8s_event *ev)
{
	struct rs_got *g = ud;

	g->n++;
	snprintf(g->dep, sizeof(g->dep), "%s", ev->object.rs->deployment_name);
	return 0;
}

static void test_replicaset_metadata(void **state)
{
	const char *body = "{\"kind\":\"PartialObjectMetadataList\",\"apiVersion\":\"meta.k8s.io/v1\",\"metadata\":"
			   "{\"resourceVersion\":\"5\"},\"items\":[{\"kind\":\"PartialObjectMetadata\",\"metadata\":"
			   "{\"name\":\"web-7d4b9c\",\"namespace\":\"shop\",\"uid\":\"rs-uid\",\"ownerReferences\":"
			   "[{\"kind\":\"Deployment\",\"name\":\"web\",\"uid\":\"dep-uid\",\"controller\":true}]}}]}";
	struct k8s_list_meta meta;
	struct rs_got got = { 0 };

	assert_int_equal(k8s_list_parse(K8S_KIND_REPLICASET, body, strlen(body), NULL, rs_cb, &got, &meta), 0);
	assert_int_equal(got.n, 1);
	assert_string_equal(got.dep, "web");
	k8s_list_meta_clear(&meta);
}

static void test_status(void **state)
{
	char msg[64];
	const char *s = "{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":\"Unauthorized\",\"code\":401}";

	assert_int_equal(k8s_status_parse(s, strlen(s), msg, sizeof(msg)), 401);
	assert_string_equal(msg, "Unauthorized");
	assert_int_equal(k8s_status_parse("nope", 4, msg, sizeof(msg)), -EBADMSG);
}

static void test_container_id_strip(void **state)
{
	assert_string_equal(k8s_container_id_strip("containerd://abc"), "abc");
	assert_string_equal(k8s_container_id_strip("cri-o://abc"), "abc");
	assert_string_equal(k8s_container_id_strip("docker://abc"), "abc");
	assert_string_equal(k8s_container_id_strip("abc"), "abc");
	assert_null(k8s_container_id_strip("containerd://"));
	assert_null(k8s_container_id_strip(""));
	assert_null(k8s_container_id_strip(NULL));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pod_record),
		cmocka_unit_test(test_keep_filter),
		cmocka_unit_test(test_chunking),
		cmocka_unit_test(test_error_event),
		cmocka_unit_test(test_bad_input),
		cmocka_unit_test(test_list),
		cmocka_unit_test(test_replicaset_metadata),
		cmocka_unit_test(test_status),
		cmocka_unit_test(test_container_id_strip),
	};
	return cmocka_run_group_tests_name("k8s-watch", tests, NULL, NULL);
}
