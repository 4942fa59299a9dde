// SPDX-License-Identifier: Apache-2.0
/* The pod cache, its association index, extraction rules, service.* inference and kubeconfig loading. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <json-c/json.h>

#include "common/config.h"
#include "gateway/k8s/k8s-cache.h"
#include "gateway/k8s/k8s-extract.h"
#include "gateway/k8s/k8s-kubeconfig.h"
#include "gateway/processors/relabel-rules.h"

#define SEC 1000000000ull
/* Config structs hold char * (libcyaml fills them); tests point them at literals. */
#define S(x) ((char *)(x))

static char cid_buf[8][65];

static const char *cid(int n)
{
	memset(cid_buf[n], '0' + n, 64);
	cid_buf[n][64] = '\0';
	return cid_buf[n];
}

/* A pod in namespace ns owned by owner_kind/owner_name, with container "app" = cid(c1) and init "init" = cid(c2). */
static struct k8s_pod *make_pod(const char *ns, const char *name, const char *uid, const char *owner_kind,
				const char *owner_name, const char *extra_meta, int c1, int c2)
{
	char *json;
	struct json_object *o;
	struct k8s_object obj;

	assert_true(
		asprintf(&json,
			 "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"%s\",\"uid\":\"%s\"%s%s%s%s%s%s},"
			 "\"spec\":{\"nodeName\":\"node-1\",\"containers\":[{\"name\":\"app\",\"image\":"
			 "\"ghcr.io/acme/app:2.1\"}],\"initContainers\":[{\"name\":\"init\",\"image\":\"busybox\"}]},"
			 "\"status\":{\"containerStatuses\":[{\"name\":\"app\",\"containerID\":\"containerd://%s\"}],"
			 "\"initContainerStatuses\":[{\"name\":\"init\",\"containerID\":\"containerd://%s\"}]}}",
			 name, ns, uid, owner_kind ? ",\"ownerReferences\":[{\"kind\":\"" : "",
			 owner_kind ? owner_kind : "", owner_kind ? "\",\"name\":\"" : "", owner_kind ? owner_name : "",
			 owner_kind ? "\",\"uid\":\"owner-uid\",\"controller\":true}]" : "",
			 extra_meta ? extra_meta : "", cid(c1), cid(c2)) > 0);
	o = json_tokener_parse(json);
	assert_non_null(o);
	assert_int_equal(k8s_object_from_json(K8S_KIND_POD, o, NULL, &obj), 0);
	json_object_put(o);
	free(json);
	return obj.pod;
}

static void apply(struct k8s_cache *c, enum k8s_event_type type, enum k8s_kind kind, void *rec, uint64_t now)
{
	struct k8s_event ev = { .type = type, .object = { .kind = kind, .ptr = rec } };

	assert_int_equal(k8s_cache__apply(c, &ev, now), 0);
	k8s_object_clear(&ev.object);
}

static void test_association(void **state)
{
	struct k8s_cache *c = k8s_cache_new(NULL);
	const struct k8s_container *ct;
	const struct k8s_pod *p;
	struct k8s_cache_stats st;
	char prefixed[100];

	apply(c, K8S_EVENT_ADDED, K8S_KIND_POD, make_pod("ns", "a", "uid-a", NULL, NULL, NULL, 1, 2), 1);
	p = k8s_cache__pod_by_container(c, cid(1), &ct);
	assert_non_null(p);
	assert_string_equal(p->name, "a");
	assert_string_equal(ct->name, "app");
	/* Init containers are indexed too. */
	p = k8s_cache__pod_by_container(c, cid(2), &ct);
	assert_non_null(p);
	assert_string_equal(ct->name, "init");
	assert_true(ct->init);
	/* A runtime prefix on the lookup key is stripped. */
	snprintf(prefixed, sizeof(prefixed), "cri-o://%s", cid(1));
	assert_non_null(k8s_cache__pod_by_container(c, prefixed, NULL));
	/* Empty IDs never match anything. */
	assert_null(k8s_cache__pod_by_container(c, "", NULL));
	assert_null(k8s_cache__pod_by_container(c, NULL, NULL));
	assert_null(k8s_cache__pod_by_container(c, cid(3), NULL));
	assert_non_null(k8s_cache__pod_by_uid(c, "uid-a"));
	k8s_cache__stats(c, &st);
	assert_int_equal(st.pods, 1);
	assert_int_equal(st.containers, 2);
	assert_int_equal(st.lookups, 5);
	assert_int_equal(st.misses, 1);

	/* An update with a restarted container moves the index. */
	apply(c, K8S_EVENT_MODIFIED, K8S_KIND_POD, make_pod("ns", "a", "uid-a", NULL, NULL, NULL, 3, 2), 2);
	assert_null(k8s_cache__pod_by_container(c, cid(1), NULL));
	assert_non_null(k8s_cache__pod_by_container(c, cid(3), NULL));
	k8s_cache_free(c);
}

/* A pod with no containers, status.podIP ip and spec.hostNetwork hostnet. */
static struct k8s_pod *make_ip_pod(const char *uid, const char *ip, bool hostnet)
{
	char json[512];
	struct json_object *o;
	struct k8s_object obj;

	snprintf(json, sizeof(json),
		 "{\"metadata\":{\"name\":\"p-%s\",\"namespace\":\"ns\",\"uid\":\"%s\"},"
		 "\"spec\":{\"nodeName\":\"node-1\",\"hostNetwork\":%s},\"status\":{\"podIP\":\"%s\"}}",
		 uid, uid, hostnet ? "true" : "false", ip);
	o = json_tokener_parse(json);
	assert_non_null(o);
	assert_int_equal(k8s_object_from_json(K8S_KIND_POD, o, NULL, &obj), 0);
	json_object_put(o);
	return obj.pod;
}

static void test_association_by_ip(void **state)
{
	struct k8s_cache_limits l = { .deleted_grace_ns = 60 * SEC };
	struct k8s_cache *c = k8s_cache_new(&l);
	struct k8s_cache_stats st;
	const struct k8s_pod *p;

	apply(c, K8S_EVENT_ADDED, K8S_KIND_POD, make_ip_pod("a", "10.1.0.5", false), 1 * SEC);
	/* Pods on the host network share the node's address: never indexed. */
	apply(c, K8S_EVENT_ADDED, K8S_KIND_POD, make_ip_pod("h", "192.168.0.10", true), 1 * SEC);
	p = k8s_cache__pod_by_ip(c, "10.1.0.5");
	assert_non_null(p);
	assert_string_equal(p->uid, "a");
	assert_null(k8s_cache__pod_by_ip(c, "192.168.0.10"));
	assert_null(k8s_cache__pod_by_ip(c, ""));
	assert_null(k8s_cache__pod_by_ip(c, NULL));
	k8s_cache__stats(c, &st);
	assert_int_equal(st.ips, 1);

	/* A deleted pod keeps its address for late data until a live pod takes it. */
	apply(c, K8S_EVENT_DELETED, K8S_KIND_POD, make_ip_pod("a", "10.1.0.5", false), 2 * SEC);
	assert_string_equal(k8s_cache__pod_by_ip(c, "10.1.0.5")->uid, "a");
	apply(c, K8S_EVENT_ADDED, K8S_KIND_POD, make_ip_pod("b", "10.1.0.5", false), 3 * SEC);
	assert_string_equal(k8s_cache__pod_by_ip(c, "10.1.0.5")->uid, "b");
	/* The deleted pod's final update and expiry leave the live pod's entry alone. */
	apply(c, K8S_EVENT_DELETED, K8S_KIND_POD, make_ip_pod("a", "10.1.0.5", false), 4 * SEC);
	assert_string_equal(k8s_cache__pod_by_ip(c, "10.1.0.5")->uid, "b");
	k8s_cache__expire(c, 100 * SEC);
	assert_string_equal(k8s_cache__pod_by_ip(c, "10.1.0.5")->uid, "b");

	/* A changed address moves the index. */
	apply(c, K8S_EVENT_MODIFIED, K8S_KIND_POD, make_ip_pod("b", "10.1.0.6", false), 101 * SEC);
	assert_null(k8s_cache__pod_by_ip(c, "10.1.0.5"));
	assert_string_equal(k8s_cache__pod_by_ip(c, "10.1.0.6")->uid, "b");
	k8s_cache__stats(c, &st);
	assert_int_equal(st.ips, 1);
	k8s_cache_free(c);
}

static void test_deleted_grace(void **state)
{
	struct k8s_cache_limits l = { .deleted_grace_ns = 60 * SEC };
	struct k8s_cache *c = k8s_cache_new(&l);
	struct k8s_cache_stats st;

	apply(c, K8S_EVENT_ADDED, K8S_KIND_POD, make_pod("ns", "a", "uid-a", NULL, NULL, NULL, 1, 2), 1 * SEC);
	apply(c, K8S_EVENT_DELETED, K8S_KIND_POD, make_pod("ns", "a", "uid-a", NULL, NULL, NULL, 1, 2), 10 * SEC);
	/* Late samples still match during the grace period. */
	k8s_cache__expire(c, 50 * SEC);
	assert_non_null(k8s_cache__pod_by_container(c, cid(1), NULL));
	k8s_cache__stats(c, &st);
	assert_int_equal(st.pods_deleted, 1);
	k8s_cache__expire(c, 71 * SEC);
	assert_null(k8s_cache__pod_by_container(c, cid(1), NULL));
	k8s_cache__stats(c, &st);
	assert_int_equal(st.pods, 0);
	assert_int_equal(st.containers, 0);
	assert_int_equal(st.bytes, 0);
	k8s_cache_free(c);
}

static void test_resync(void **state)
{
	struct k8s_cache_limits l = { .deleted_grace_ns = 60 * SEC };
	struct k8s_cache *c = k8s_cache_new(&l);

	apply(c, K8S_EVENT_ADDED, K8S_KIND_POD, make_pod("ns", "a", "uid-a", NULL, NULL, NULL, 1, 2), SEC);
	apply(c, K8S_EVENT_ADDED, K8S_KIND_POD, make_pod("ns", "b", "uid-b", NULL, NULL, NULL, 3, 4), SEC);
	/* A relist that no longer has "a": it is deleted (with grace), "b" stays live. */
	k8s_cache__resync_begin(c, K8S_KIND_POD);
	apply(c, K8S_EVENT_ADDED, K8S_KIND_POD, make_pod("ns", "b", "uid-b", NULL, NULL, NULL, 3, 4), 2 * SEC);
	k8s_cache__resync_end(c, K8S_KIND_POD, 2 * SEC);
	k8s_cache__expire(c, 100 * SEC);
	assert_null(k8s_cache__pod_by_uid(c, "uid-a"));
	assert_non_null(k8s_cache__pod_by_uid(c, "uid-b"));
	k8s_cache_free(c);
}

static void test_max_pods(void **state)
{
	struct k8s_cache_limits l = { .max_pods = 2, .deleted_grace_ns = 600 * SEC };
	struct k8s_cache *c = k8s_cache_new(&l);
	struct k8s_cache_stats st;

	apply(c, K8S_EVENT_ADDED, K8S_KIND_POD, make_pod("ns", "a", "uid-a", NULL, NULL, NULL, 1, 2), SEC);
	apply(c, K8S_EVENT_ADDED, K8S_KIND_POD, make_pod("ns", "b", "uid-b", NULL, NULL, NULL, 3, 4), SEC);
	apply(c, K8S_EVENT_ADDED, K8S_KIND_POD, make_pod("ns", "c", "uid-c", NULL, NULL, NULL, 5, 6), SEC);
	k8s_cache__stats(c, &st);
	assert_int_equal(st.pods, 2);
	assert_int_equal(st.pods_refused, 1);
	/* A deleted pod makes room (evicted before its grace ends). */
	apply(c, K8S_EVENT_DELETED, K8S_KIND_POD, make_pod("ns", "a", "uid-a", NULL, NULL, NULL, 1, 2), 2 * SEC);
	apply(c, K8S_EVENT_ADDED, K8S_KIND_POD, make_pod("ns", "c", "uid-c", NULL, NULL, NULL, 5, 6), 3 * SEC);
	k8s_cache__stats(c, &st);
	assert_int_equal(st.pods, 2);
	assert_int_equal(st.pods_evicted, 1);
	assert_non_null(k8s_cache__pod_by_uid(c, "uid-c"));
	k8s_cache_free(c);
}

/* ---- extraction ---- */

static const char *io_get(void *ud, const char *key)
{
	return gw_labels__get(ud, key);
}

static int io_set(void *ud, const char *key, const char *value)
{
	return gw_labels__set(ud, key, value);
}

static struct k8s_extract *extract_new(const char *const *meta, struct k8s_field_rule_config *labels, uint32_t nl,
				       struct k8s_field_rule_config *ann, uint32_t na, bool otel)
{
	struct k8s_extract_config cfg = { 0 };
	char err[256];
	uint32_t n = 0;
	struct k8s_extract *x;

	if (meta) {
		while (meta[n])
			n++;
		cfg.metadata = (char **)meta;
		cfg.metadata_count = n;
		cfg.metadata_set = true;
	}
	cfg.labels = labels;
	cfg.labels_count = nl;
	cfg.annotations = ann;
	cfg.annotations_count = na;
	cfg.otel_annotations = otel;
	x = k8s_extract_new(&cfg, err, sizeof(err));
	if (!x)
		fail_msg("extract: %s", err);
	return x;
}

static void run_extract(struct k8s_extract *x, struct k8s_cache *c, const char *container_id, struct gw_labels *ls)
{
	const struct k8s_container *ct;
	const struct k8s_pod *p = k8s_cache__pod_by_container(c, container_id, &ct);
	struct k8s_attr_io io = { .get = io_get, .set = io_set, .userdata = ls };

	assert_non_null(p);
	assert_true(k8s_extract__apply(x, c, p, ct, &io) >= 0);
}

static void expect(const struct gw_labels *ls, const char *key, const char *value)
{
	const char *v = gw_labels__get(ls, key);

	if (!value) {
		if (v)
			fail_msg("%s=%s, expected absent", key, v);
		return;
	}
	if (!v || strcmp(v, value) != 0)
		fail_msg("%s=%s, expected %s", key, v ? v : "(absent)", value);
}

static void test_deployment_names(void **state)
{
	struct k8s_cache *c = k8s_cache_new(NULL);
	struct k8s_extract *x = extract_new(NULL, NULL, 0, NULL, 0, false);
	struct gw_labels ls = { 0 };
	struct k8s_replicaset *rs = calloc(1, sizeof(*rs));

	/* From the ReplicaSet's owner... */
	rs->namespace = strdup("shop");
	rs->name = strdup("checkout-5f7b");
	rs->uid = strdup("rs-uid");
	rs->deployment_name = strdup("checkout");
	apply(c, K8S_EVENT_ADDED, K8S_KIND_REPLICASET, rs, SEC);
	apply(c, K8S_EVENT_ADDED, K8S_KIND_POD,
	      make_pod("shop", "checkout-5f7b-xyz", "u1", "ReplicaSet", "checkout-5f7b", NULL, 1, 2), SEC);
	run_extract(x, c, cid(1), &ls);
	expect(&ls, "k8s.deployment.name", "checkout");
	expect(&ls, "k8s.namespace.name", "shop");
	expect(&ls, "k8s.pod.name", "checkout-5f7b-xyz");
	expect(&ls, "k8s.container.name", "app");
	expect(&ls, "k8s.node.name", "node-1");
	expect(&ls, "service.name", "checkout");
	expect(&ls, "service.namespace", "shop");
	/* Not in the default set: per-pod unique values. */
	expect(&ls, "k8s.pod.uid", NULL);
	gw_labels_clear(&ls);

	/* ...or, without the ReplicaSet, by trimming the pod-template-hash. */
	apply(c, K8S_EVENT_ADDED, K8S_KIND_POD,
	      make_pod("shop", "cart-6c8d9-abc", "u2", "ReplicaSet", "cart-6c8d9",
		       ",\"labels\":{\"pod-template-hash\":\"6c8d9\"}", 3, 4),
	      SEC);
	run_extract(x, c, cid(3), &ls);
	expect(&ls, "k8s.deployment.name", "cart");
	gw_labels_clear(&ls);

	/* A bare ReplicaSet without the hash label is no Deployment. */
	apply(c, K8S_EVENT_ADDED, K8S_KIND_POD, make_pod("shop", "rs-x-1", "u3", "ReplicaSet", "rs-x", NULL, 5, 6),
	      SEC);
	run_extract(x, c, cid(5), &ls);
	expect(&ls, "k8s.deployment.name", NULL);
	expect(&ls, "service.name", "rs-x");
	gw_labels_clear(&ls);

	/* CronJob from its Job's name. */
	apply(c, K8S_EVENT_ADDED, K8S_KIND_POD,
	      make_pod("batch", "report-28911520-q", "u4", "Job", "report-28911520", NULL, 7, 0), SEC);
	run_extract(x, c, cid(7), &ls);
	expect(&ls, "k8s.job.name", "report-28911520");
	expect(&ls, "k8s.cronjob.name", "report");
	expect(&ls, "service.name", "report");
	gw_labels_clear(&ls);
	k8s_extract_free(x);
	k8s_cache_free(c);
}

static void test_service_name_precedence(void **state)
{
	static const struct {
		const char *meta;
		const char *owner_kind, *owner;
		const char *want;
	} cases[] = {
		{ ",\"annotations\":{\"resource.opentelemetry.io/service.name\":\"A\",\"pyroscope.io/"
		  "service_name\":\"B\"},"
		  "\"labels\":{\"app.kubernetes.io/name\":\"C\"}",
		  "StatefulSet", "db", "A" },
		{ ",\"annotations\":{\"pyroscope.io/service_name\":\"B\"},\"labels\":{\"app.kubernetes.io/name\":\"C\","
		  "\"app.kubernetes.io/instance\":\"D\"}",
		  "StatefulSet", "db", "B" },
		{ ",\"labels\":{\"app.kubernetes.io/name\":\"C\",\"app.kubernetes.io/instance\":\"D\"}", "StatefulSet",
		  "db", "C" },
		{ ",\"labels\":{\"app.kubernetes.io/instance\":\"D\"}", "StatefulSet", "db", "D" },
		{ NULL, "StatefulSet", "db", "db" },
		{ NULL, "DaemonSet", "agent", "agent" },
		{ NULL, NULL, NULL, "lonely-pod" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct k8s_cache *c = k8s_cache_new(NULL);
		struct k8s_extract *x = extract_new(NULL, NULL, 0, NULL, 0, false);
		struct gw_labels ls = { 0 };

		apply(c, K8S_EVENT_ADDED, K8S_KIND_POD,
		      make_pod("ns", "lonely-pod", "u", cases[i].owner_kind, cases[i].owner, cases[i].meta, 1, 2), SEC);
		run_extract(x, c, cid(1), &ls);
		expect(&ls, "service.name", cases[i].want);
		gw_labels_clear(&ls);
		k8s_extract_free(x);
		k8s_cache_free(c);
	}
}

static void test_never_overwrite_and_service_attrs(void **state)
{
	/* clang-format off */
	static const char *const meta[] = {
		"k8s.pod.name", "k8s.pod.uid", "service.name", "service.version", "service.instance.id",
		"container.image.name", "container.image.tag", "container.id", "k8s.cluster.uid", NULL,
	};
	/* clang-format on */
	struct k8s_cache *c = k8s_cache_new(NULL);
	struct k8s_extract *x = extract_new(meta, NULL, 0, NULL, 0, true);
	struct gw_labels ls = { 0 };
	struct k8s_namespace *ks = calloc(1, sizeof(*ks));

	ks->name = strdup("kube-system");
	ks->uid = strdup("cluster-1234");
	apply(c, K8S_EVENT_ADDED, K8S_KIND_NAMESPACE, ks, SEC);
	apply(c, K8S_EVENT_ADDED, K8S_KIND_POD,
	      make_pod("ns", "p", "u", NULL, NULL,
		       ",\"annotations\":{\"resource.opentelemetry.io/deployment.environment.name\":\"prod\"}", 1, 2),
	      SEC);
	gw_labels__set(&ls, "service.name", "from-sdk");
	gw_labels__set(&ls, "k8s.pod.name", ""); /* empty: may be filled */
	run_extract(x, c, cid(1), &ls);
	expect(&ls, "service.name", "from-sdk");
	expect(&ls, "k8s.pod.name", "p");
	expect(&ls, "k8s.pod.uid", "u");
	expect(&ls, "service.version", "2.1");
	expect(&ls, "service.instance.id", "ns.p.app");
	expect(&ls, "container.image.name", "ghcr.io/acme/app");
	expect(&ls, "container.image.tag", "2.1");
	expect(&ls, "container.id", cid(1));
	expect(&ls, "k8s.cluster.uid", "cluster-1234");
	expect(&ls, "deployment.environment.name", "prod");
	expect(&ls, "k8s.namespace.name", NULL);
	gw_labels_clear(&ls);
	k8s_extract_free(x);
	k8s_cache_free(c);
}

static void test_label_rules(void **state)
{
	struct k8s_field_rule_config labels[] = {
		{ .tag_name = S("team"), .key = S("acme.io/team"), .from = K8S_FROM_POD },
		{ .tag_name = S("k.$1"),
		  .key_regex = S("app\\.kubernetes\\.io/(part-of|component)"),
		  .from = K8S_FROM_POD },
		{ .key = S("tier"), .from = K8S_FROM_POD },
		{ .tag_name = S("ns_env"), .key = S("env"), .from = K8S_FROM_NAMESPACE },
	};
	struct k8s_field_rule_config ann[] = {
		{ .key_regex = S("doc\\..*"), .from = K8S_FROM_POD },
	};
	struct k8s_cache *c = k8s_cache_new(NULL);
	struct k8s_extract *x = extract_new(NULL, labels, 4, ann, 1, false);
	const struct k8s_keep *keep = k8s_extract__keep(x);
	struct gw_labels ls = { 0 };
	struct k8s_namespace *ns = calloc(1, sizeof(*ns));
	struct json_object *o;
	struct k8s_object obj;

	/* Only what rules read is kept. */
	assert_true(keep->label(keep->userdata, K8S_KIND_POD, "acme.io/team"));
	assert_true(keep->label(keep->userdata, K8S_KIND_POD, "app.kubernetes.io/name"));
	assert_false(keep->label(keep->userdata, K8S_KIND_POD, "env"));
	assert_true(keep->label(keep->userdata, K8S_KIND_NAMESPACE, "env"));
	assert_false(keep->annotation(keep->userdata, K8S_KIND_POD, "kubectl.kubernetes.io/last-applied"));
	assert_true(k8s_extract__needs_namespaces(x));
	assert_false(k8s_extract__needs_nodes(x));

	ns->name = strdup("ns");
	ns->uid = strdup("ns-uid");
	ns->labels.v = calloc(1, sizeof(struct sr_kv));
	ns->labels.v[0].key = strdup("env");
	ns->labels.v[0].value = strdup("staging");
	ns->labels.n = 1;
	apply(c, K8S_EVENT_ADDED, K8S_KIND_NAMESPACE, ns, SEC);
	o = json_tokener_parse(
		"{\"metadata\":{\"name\":\"p\",\"namespace\":\"ns\",\"uid\":\"u\",\"labels\":{"
		"\"acme.io/team\":\"core\",\"app.kubernetes.io/part-of\":\"shop\",\"tier\":\"web\","
		"\"other\":\"x\"},\"annotations\":{\"doc.url\":\"http://x\",\"zzz\":\"y\"}},"
		"\"status\":{\"containerStatuses\":[{\"name\":\"app\",\"containerID\":\"docker://abc\"}]}}");
	assert_int_equal(k8s_object_from_json(K8S_KIND_POD, o, keep, &obj), 0);
	json_object_put(o);
	assert_null(k8s_strmap__get(&obj.pod->labels, "other"));
	apply(c, K8S_EVENT_ADDED, K8S_KIND_POD, obj.pod, SEC);
	run_extract(x, c, "abc", &ls);
	expect(&ls, "team", "core");
	expect(&ls, "k.part-of", "shop");
	expect(&ls, "k8s.pod.labels.tier", "web");
	expect(&ls, "k8s.pod.annotations.doc.url", "http://x");
	expect(&ls, "ns_env", "staging");
	expect(&ls, "k8s.pod.labels.other", NULL);
	gw_labels_clear(&ls);
	k8s_extract_free(x);
	k8s_cache_free(c);
}

static void test_extract_config_errors(void **state)
{
	struct k8s_extract_config cfg = { 0 };
	char *bad_meta[] = { S("k8s.pod.name"), S("k8s.pod.nmae") };
	struct k8s_field_rule_config both = { .key = S("a"), .key_regex = S("b") };
	struct k8s_field_rule_config badre = { .key_regex = S("(x") };
	char err[256];

	cfg.metadata = bad_meta;
	cfg.metadata_count = 2;
	assert_null(k8s_extract_new(&cfg, err, sizeof(err)));
	assert_string_equal(err, "metadata[1]: unknown name \"k8s.pod.nmae\" (docs/kubernetes.md lists them)");
	memset(&cfg, 0, sizeof(cfg));
	cfg.labels = &both;
	cfg.labels_count = 1;
	assert_null(k8s_extract_new(&cfg, err, sizeof(err)));
	assert_string_equal(err, "labels[0]: exactly one of key and key_regex is required");
	cfg.labels = NULL;
	cfg.labels_count = 0;
	cfg.annotations = &badre;
	cfg.annotations_count = 1;
	assert_null(k8s_extract_new(&cfg, err, sizeof(err)));
	assert_true(strncmp(err, "annotations[0].key_regex: missing closing parenthesis", 52) == 0);
}

static void test_image_split(void **state)
{
	static const char *const cases[][3] = {
		{ "nginx", "nginx", "latest" },
		{ "nginx:1.25", "nginx", "1.25" },
		{ "registry:5000/a/b", "registry:5000/a/b", "latest" },
		{ "registry:5000/a/b:v2", "registry:5000/a/b", "v2" },
		{ "a/b@sha256:abc", "a/b", "" },
		{ "a/b:1.0@sha256:abc", "a/b", "1.0" },
	};
	char name[128], tag[64];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		k8s_image_split(cases[i][0], name, sizeof(name), tag, sizeof(tag));
		assert_string_equal(name, cases[i][1]);
		assert_string_equal(tag, cases[i][2]);
	}
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void test_kubeconfig(void **state)
{
	char dir[] = "/tmp/sr-kubeconfig-XXXXXX", path[256], err[256];
	struct k8s_conn conn;

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/config", dir);
	/* "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==" is "-----BEGIN CERTIFICATE-----\n". */
	write_file(path, "apiVersion: v1\nkind: Config\ncurrent-context: dev\n"
			 "clusters:\n- name: other\n  cluster: {server: https://wrong}\n"
			 "- name: c1\n  cluster:\n    server: https://127.0.0.1:6443/\n"
			 "    certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==\n"
			 "contexts:\n- name: dev\n  context: {cluster: c1, user: u1, namespace: shop}\n"
			 "- name: prod\n  context: {cluster: c1, user: u2}\n"
			 "users:\n- name: u1\n  user:\n    tokenFile: token\n"
			 "- name: u2\n  user:\n    client-certificate: certs/c.pem\n    client-key: /abs/k.pem\n"
			 "- name: u3\n  user:\n    exec: {command: aws}\n");
	assert_int_equal(k8s_conn_from_kubeconfig(path, NULL, &conn, err, sizeof(err)), 0);
	assert_string_equal(conn.server, "https://127.0.0.1:6443");
	assert_int_equal(conn.ca_len, 28);
	assert_memory_equal(conn.ca_data, "-----BEGIN CERTIFICATE-----\n", 28);
	char want[300];
	snprintf(want, sizeof(want), "%s/token", dir);
	assert_string_equal(conn.token_file, want);
	assert_string_equal(conn.namespace, "shop");
	k8s_conn_clear(&conn);

	assert_int_equal(k8s_conn_from_kubeconfig(path, "prod", &conn, err, sizeof(err)), 0);
	snprintf(want, sizeof(want), "%s/certs/c.pem", dir);
	assert_string_equal(conn.cert_file, want);
	assert_string_equal(conn.key_file, "/abs/k.pem");
	k8s_conn_clear(&conn);

	assert_int_equal(k8s_conn_from_kubeconfig(path, "nope", &conn, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "context \"nope\" not found"));

	write_file(path,
		   "current-context: x\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\n"
		   "clusters:\n- name: c\n  cluster: {server: https://h}\nusers:\n- name: u\n  user:\n    exec: {}\n");
	assert_int_equal(k8s_conn_from_kubeconfig(path, NULL, &conn, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "exec/auth-provider plugin"));
	write_file(path, "a: [b\n");
	assert_int_equal(k8s_conn_from_kubeconfig(path, NULL, &conn, err, sizeof(err)), -EINVAL);
	unlink(path);
	rmdir(dir);
	snprintf(path, sizeof(path), "%s/missing", dir);
	assert_int_equal(k8s_conn_from_kubeconfig(path, NULL, &conn, err, sizeof(err)), -ENOENT);
}

static void test_in_cluster(void **state)
{
	char dir[] = "/tmp/sr-sa-XXXXXX", path[256], err[256];
	struct k8s_conn conn;

	assert_non_null(mkdtemp(dir));
	unsetenv("KUBERNETES_SERVICE_HOST");
	assert_int_equal(k8s_conn_in_cluster(dir, &conn, err, sizeof(err)), -ENOENT);
	setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
	setenv("KUBERNETES_SERVICE_PORT", "443", 1);
	assert_int_equal(k8s_conn_in_cluster(dir, &conn, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "token"));
	snprintf(path, sizeof(path), "%s/token", dir);
	write_file(path, "t\n");
	snprintf(path, sizeof(path), "%s/ca.crt", dir);
	write_file(path, "x");
	snprintf(path, sizeof(path), "%s/namespace", dir);
	write_file(path, "monitoring\n");
	assert_int_equal(k8s_conn_in_cluster(dir, &conn, err, sizeof(err)), 0);
	assert_string_equal(conn.server, "https://[fd00::1]:443");
	assert_string_equal(conn.namespace, "monitoring");
	k8s_conn_clear(&conn);
	unlink(path);
	snprintf(path, sizeof(path), "%s/token", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/ca.crt", dir);
	unlink(path);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_association),
		cmocka_unit_test(test_association_by_ip),
		cmocka_unit_test(test_deleted_grace),
		cmocka_unit_test(test_resync),
		cmocka_unit_test(test_max_pods),
		cmocka_unit_test(test_deployment_names),
		cmocka_unit_test(test_service_name_precedence),
		cmocka_unit_test(test_never_overwrite_and_service_attrs),
		cmocka_unit_test(test_label_rules),
		cmocka_unit_test(test_extract_config_errors),
		cmocka_unit_test(test_image_split),
		cmocka_unit_test(test_kubeconfig),
		cmocka_unit_test(test_in_cluster),
	};
	return cmocka_run_group_tests_name("k8s-cache", tests, NULL, NULL);
}
