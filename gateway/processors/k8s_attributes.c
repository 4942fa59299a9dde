// SPDX-License-Identifier: Apache-2.0
/*
 * k8s_attributes: labels every resource with the pod it came from
 * (docs/kubernetes.md). The Kubernetes client (gateway/k8s) keeps a cache of
 * pods, namespaces, ReplicaSets and nodes up to date by LIST+WATCH on the
 * gateway's loop; this file only associates and extracts, synchronously:
 * a lookup is two hash probes.
 *
 * Association: the resource's container.id (runtime prefix stripped), else
 * its k8s.pod.uid (the agent reads both from the cgroup path). A resource
 * that matches nothing keeps its attributes; with service.name extracted, it
 * gets service.name = process.executable.name (a host process).
 *
 * wait_for_metadata: until the first complete LIST, batches are held (at most
 * wait_for_metadata_max_samples sample records) instead of being exported
 * without labels; after wait_for_metadata_timeout, or past the bound, they
 * go on with what is known, counted.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "component.h"
#include "config.h"
#include "core/metrics.h"
#include "core/model.h"
#include "core/runtime.h"
#include "k8s-cache.h"
#include "k8s-client.h"
#include "k8s-extract.h"
#include "log.h"
#include "relabel-regex.h"

/* A logfmt value for messages that may hold quotes (kubeconfig names, regexes). */
#define Q(s) sr_log_quote((s), (char[600]){ 0 }, 600)

#define COMPONENT "k8s_attributes"

enum auth_type {
	AUTH_SERVICE_ACCOUNT,
	AUTH_KUBECONFIG,
	AUTH_NONE,
};
static const char *const auth_type_names[] = { "serviceAccount", "kubeConfig", "none", NULL };

enum filter_op {
	OP_EQUALS,
	OP_NOT_EQUALS,
	OP_EXISTS,
	OP_DOES_NOT_EXIST,
};
static const char *const filter_op_names[] = { "equals", "not-equals", "exists", "does-not-exist", NULL };

struct selector_config {
	char *key;
	char *value;
	int op;
};

struct filter_config {
	char *node;
	char *node_from_env_var;
	char *namespace;
	struct selector_config *labels;
	uint32_t n_labels;
	struct selector_config *fields;
	uint32_t n_fields;
};

struct extract_config {
	char **metadata;
	uint32_t n_metadata;
	struct k8s_field_rule_config *labels;
	uint32_t n_labels;
	struct k8s_field_rule_config *annotations;
	uint32_t n_annotations;
	bool otel_annotations;
	bool deployment_name_from_replicaset;
};

struct cache_config {
	uint64_t max_pods;
	uint64_t deleted_grace;
};

/* pod_association as in the Collector: rules tried in order, each a list of sources that must all be present. */
struct assoc_source_config {
	int from; /* index into assoc_from_names */
	char *name;
};

struct assoc_rule_config {
	struct assoc_source_config *sources;
	uint32_t n_sources;
};

static const char *const assoc_from_names[] = { "resource_attribute", "connection", NULL };

struct exclude_pod_config {
	char *name;
};

struct exclude_config {
	struct exclude_pod_config *pods;
	uint32_t n_pods;
};

struct k8s_attributes_config {
	int auth_type;
	char *kube_config_path;
	char *context;
	char *endpoint;
	bool passthrough;
	struct filter_config filter;
	struct extract_config extract;
	struct cache_config cache;
	bool wait_for_metadata;
	uint64_t wait_for_metadata_timeout;
	uint64_t wait_for_metadata_max_samples;
	struct assoc_rule_config *pod_association;
	uint32_t n_pod_association;
	struct exclude_config exclude;
};

static const struct sr_field selector_fields[] = {
	SR_FIELD_STR("key", struct selector_config, key, .required = true, .doc = "Label or field name."),
	SR_FIELD_STR("value", struct selector_config, value, .doc = "Value compared with (equals, not-equals)."),
	SR_FIELD_ENUMERATION("op", struct selector_config, op, filter_op_names, .def = "equals",
			     .doc = "equals, not-equals, exists or does-not-exist (the last two for labels only)."),
	SR_FIELD_END,
};

static const struct sr_field filter_fields[] = {
	SR_FIELD_STR("node", struct filter_config, node,
		     .doc = "Only pods on this node (fieldSelector spec.nodeName), e.g. \"${env:K8S_NODE_NAME}\"."),
	SR_FIELD_STR("node_from_env_var", struct filter_config, node_from_env_var,
		     .doc = "Name of an environment variable holding the node name (the Collector's spelling)."),
	SR_FIELD_STR("namespace", struct filter_config, namespace, .doc = "Only pods in this namespace."),
	SR_FIELD_MAPLIST("labels", struct filter_config, labels, n_labels, struct selector_config, selector_fields,
			 .doc = "Label selector terms, all of which must hold."),
	SR_FIELD_MAPLIST("fields", struct filter_config, fields, n_fields, struct selector_config, selector_fields,
			 .doc = "Field selector terms (equals / not-equals), all of which must hold."),
	SR_FIELD_END,
};

static const struct sr_field rule_fields[] = {
	SR_FIELD_STR("tag_name", struct k8s_field_rule_config, tag_name,
		     .doc = "Attribute to set; $1.. are key_regex groups. Default k8s.<from>.labels.<key> "
			    "(annotations: k8s.<from>.annotations.<key>)."),
	SR_FIELD_STR("key", struct k8s_field_rule_config, key, .doc = "The label/annotation key (or key_regex)."),
	SR_FIELD_STR("key_regex", struct k8s_field_rule_config, key_regex,
		     .doc = "Anchored RE2-style regular expression over keys (or key)."),
	SR_FIELD_ENUMERATION("from", struct k8s_field_rule_config, from, k8s_rule_from_names, .def = "pod",
			     .doc = "pod, namespace or node."),
	SR_FIELD_END,
};

static const struct sr_field extract_fields[] = {
	SR_FIELD_STRLIST("metadata", struct extract_config, metadata, n_metadata,
			 .def = "[k8s.namespace.name, k8s.pod.name, k8s.node.name, k8s.container.name, "
				"k8s.deployment.name, k8s.statefulset.name, k8s.daemonset.name, k8s.cronjob.name, "
				"k8s.job.name, service.name, service.namespace]",
			 .doc = "Attributes to extract (the Collector's names; docs/kubernetes.md lists all)."),
	SR_FIELD_MAPLIST("labels", struct extract_config, labels, n_labels, struct k8s_field_rule_config, rule_fields,
			 .doc = "Labels to copy into attributes."),
	SR_FIELD_MAPLIST("annotations", struct extract_config, annotations, n_annotations, struct k8s_field_rule_config,
			 rule_fields, .doc = "Annotations to copy into attributes."),
	SR_FIELD_BOOLEAN("otel_annotations", struct extract_config, otel_annotations, .def = "false",
			 .doc = "Pod annotations resource.opentelemetry.io/<key> become attribute <key>."),
	SR_FIELD_BOOLEAN("deployment_name_from_replicaset", struct extract_config, deployment_name_from_replicaset,
			 .def = "false",
			 .doc = "Derive k8s.deployment.name by trimming the ReplicaSet name instead of watching "
				"ReplicaSets."),
	SR_FIELD_END,
};

static const struct sr_field cache_fields[] = {
	SR_FIELD_U64("max_pods", struct cache_config, max_pods, .def = "65536", .min = 1, .max = 10000000,
		     .doc = "Pods held (live and recently deleted); past it new pods are not cached (counted)."),
	SR_FIELD_DUR("deleted_grace", struct cache_config, deleted_grace, .def = "2m",
		     .doc = "How long a deleted pod still labels late samples."),
	SR_FIELD_END,
};

static const struct sr_field assoc_source_fields[] = {
	SR_FIELD_ENUMERATION("from", struct assoc_source_config, from, assoc_from_names, .def = "resource_attribute",
			     .doc = "resource_attribute (connection is not applicable: agents are not the workloads)."),
	SR_FIELD_STR("name", struct assoc_source_config, name, .doc = "container.id or k8s.pod.uid."),
	SR_FIELD_END,
};

static const struct sr_field assoc_rule_fields[] = {
	SR_FIELD_MAPLIST("sources", struct assoc_rule_config, sources, n_sources, struct assoc_source_config,
			 assoc_source_fields, .min = 1, .max = 4, .doc = "Attributes identifying the pod."),
	SR_FIELD_END,
};

static const struct sr_field exclude_pod_fields[] = {
	SR_FIELD_STR("name", struct exclude_pod_config, name, .required = true,
		     .doc = "Regular expression (unanchored, as in the Collector) over pod names."),
	SR_FIELD_END,
};

static const struct sr_field exclude_fields[] = {
	SR_FIELD_MAPLIST("pods", struct exclude_config, pods, n_pods, struct exclude_pod_config, exclude_pod_fields,
			 .doc = "Pods whose resources are left unlabelled."),
	SR_FIELD_END,
};

static const struct sr_field k8s_attributes_fields[] = {
	SR_FIELD_ENUMERATION("auth_type", struct k8s_attributes_config, auth_type, auth_type_names,
			     .def = "serviceAccount",
			     .doc = "serviceAccount (in a pod), kubeConfig (a kubeconfig file) or none (no "
				    "credentials, TLS still verified against the service account CA when present)."),
	SR_FIELD_STR("kube_config_path", struct k8s_attributes_config, kube_config_path,
		     .doc = "kubeConfig: the file; default $KUBECONFIG, then ~/.kube/config."),
	SR_FIELD_STR("context", struct k8s_attributes_config, context,
		     .doc = "kubeConfig: the context to use; default current-context."),
	SR_FIELD_STR("endpoint", struct k8s_attributes_config, endpoint,
		     .doc = "API server URL overriding the one from the environment or kubeconfig."),
	SR_FIELD_BOOLEAN("passthrough", struct k8s_attributes_config, passthrough, .def = "false",
			 .doc = "Do not contact the API server; pass batches on unchanged."),
	SR_FIELD_MAP("filter", struct k8s_attributes_config, filter, struct filter_config, filter_fields,
		     .doc = "Which pods to watch."),
	SR_FIELD_MAP("extract", struct k8s_attributes_config, extract, struct extract_config, extract_fields,
		     .doc = "What to add to each resource."),
	SR_FIELD_MAP("cache", struct k8s_attributes_config, cache, struct cache_config, cache_fields,
		     .doc = "Bounds of the pod cache."),
	SR_FIELD_BOOLEAN("wait_for_metadata", struct k8s_attributes_config, wait_for_metadata, .def = "true",
			 .doc = "Hold batches until the first complete list of pods instead of exporting them "
				"unlabeled."),
	SR_FIELD_DUR("wait_for_metadata_timeout", struct k8s_attributes_config, wait_for_metadata_timeout, .def = "10s",
		     .doc = "Longest hold; then batches go on with what is known (logged, counted)."),
	SR_FIELD_U64("wait_for_metadata_max_samples", struct k8s_attributes_config, wait_for_metadata_max_samples,
		     .def = "1000000", .min = 1, .max = 1000000000,
		     .doc = "Sample records held at most while waiting; past it the oldest batch goes on."),
	SR_FIELD_MAPLIST("pod_association", struct k8s_attributes_config, pod_association, n_pod_association,
			 struct assoc_rule_config, assoc_rule_fields, .max = 8,
			 .doc = "How a resource is matched to a pod, rules tried in order; default container.id, then "
				"k8s.pod.uid."),
	SR_FIELD_MAP("exclude", struct k8s_attributes_config, exclude, struct exclude_config, exclude_fields,
		     .doc = "Pods not to label."),
	SR_FIELD_END,
};

enum assoc_key {
	ASSOC_CONTAINER_ID,
	ASSOC_POD_UID,
};

/* Checks pod_association; fills keys (rule order) when not NULL. Returns the rule count or -EINVAL. */
static int parse_association(const struct k8s_attributes_config *cfg, enum assoc_key *keys, char *err, size_t errsize)
{
	for (uint32_t i = 0; i < cfg->n_pod_association; i++) {
		const struct assoc_rule_config *rule = &cfg->pod_association[i];
		/*
		 * A rule with several sources needs all of them to identify one
		 * pod; the two keys known here each identify a pod alone, so only
		 * single-source rules make sense.
		 */
		if (rule->n_sources != 1) {
			snprintf(err, errsize,
				 "pod_association[%u].sources: one source per rule (container.id or "
				 "k8s.pod.uid each identify a pod)",
				 i);
			return -EINVAL;
		}
		const struct assoc_source_config *src = &rule->sources[0];
		if (src->from != 0) {
			snprintf(err, errsize,
				 "pod_association[%u].sources[0].from: connection does not apply (the "
				 "agent's address is not the workload's); use resource_attribute",
				 i);
			return -EINVAL;
		}
		if (src->name && strcmp(src->name, "container.id") == 0) {
			if (keys)
				keys[i] = ASSOC_CONTAINER_ID;
		} else if (src->name && strcmp(src->name, "k8s.pod.uid") == 0) {
			if (keys)
				keys[i] = ASSOC_POD_UID;
		} else {
			snprintf(err, errsize,
				 "pod_association[%u].sources[0].name: \"%s\" is not supported; the agent "
				 "sends container.id and k8s.pod.uid",
				 i, src->name ? src->name : "");
			return -EINVAL;
		}
	}
	return (int)cfg->n_pod_association;
}

struct held {
	struct gw_profiles *p;
	struct held *next;
};

struct k8sp {
	struct gw_component *c;
	const struct k8s_attributes_config *cfg;
	struct k8s_extract *extract;
	struct k8s_cache *cache;
	struct k8s_client *client;
	uv_timer_t wait_timer;
	bool timer_open;
	bool synced;
	bool waiting;
	struct held *held_head, **held_tail;
	uint64_t held_samples;
	/* Counters for /metrics. */
	uint64_t resources, matched_container, matched_uid, unmatched, exe_service_names;
	uint64_t released_unsynced, held_overflow;
	void (*done)(struct gw_component *c);
	unsigned pending; /* handles closing */
	bool destroyed;
	enum assoc_key assoc[8];
	size_t n_assoc;
	struct gw_regex **exclude;
	size_t n_exclude;
	uint64_t excluded;
};

static void selector_append(char *buf, size_t size, const char *term)
{
	size_t n = strlen(buf);

	snprintf(buf + n, size - n, "%s%s", n ? "," : "", term);
}

/* Builds fieldSelector and labelSelector strings as the Collector does from filter. */
static int build_selectors(const struct filter_config *f, char *fsel, size_t fsize, char *lsel, size_t lsize, char *err,
			   size_t errsize)
{
	char term[1024];
	const char *node = f->node;

	fsel[0] = lsel[0] = '\0';
	if ((!node || !*node) && f->node_from_env_var && *f->node_from_env_var) {
		node = getenv(f->node_from_env_var);
		if (!node || !*node) {
			snprintf(err, errsize, "filter.node_from_env_var: environment variable %s is not set",
				 f->node_from_env_var);
			return -EINVAL;
		}
	}
	if (node && *node) {
		snprintf(term, sizeof(term), "spec.nodeName=%s", node);
		selector_append(fsel, fsize, term);
	}
	for (uint32_t i = 0; i < f->n_fields; i++) {
		const struct selector_config *s = &f->fields[i];
		if (s->op != OP_EQUALS && s->op != OP_NOT_EQUALS) {
			snprintf(err, errsize, "filter.fields[%u].op: only equals and not-equals apply to fields", i);
			return -EINVAL;
		}
		snprintf(term, sizeof(term), "%s%s%s", s->key,
			 s->op == OP_EQUALS ? "=" : "!=", s->value ? s->value : "");
		selector_append(fsel, fsize, term);
	}
	for (uint32_t i = 0; i < f->n_labels; i++) {
		const struct selector_config *s = &f->labels[i];
		switch (s->op) {
		case OP_EQUALS:
			snprintf(term, sizeof(term), "%s=%s", s->key, s->value ? s->value : "");
			break;
		case OP_NOT_EQUALS:
			snprintf(term, sizeof(term), "%s!=%s", s->key, s->value ? s->value : "");
			break;
		case OP_EXISTS:
			snprintf(term, sizeof(term), "%s", s->key);
			break;
		default:
			snprintf(term, sizeof(term), "!%s", s->key);
			break;
		}
		selector_append(lsel, lsize, term);
	}
	return 0;
}

static struct k8s_extract *make_extract(const struct k8s_attributes_config *cfg, char *err, size_t errsize)
{
	struct k8s_extract_config x = {
		.metadata = cfg->extract.metadata,
		.metadata_count = cfg->extract.n_metadata,
		.metadata_set = true,
		.labels = cfg->extract.labels,
		.labels_count = cfg->extract.n_labels,
		.annotations = cfg->extract.annotations,
		.annotations_count = cfg->extract.n_annotations,
		.otel_annotations = cfg->extract.otel_annotations,
		.deployment_name_from_replicaset = cfg->extract.deployment_name_from_replicaset,
	};

	return k8s_extract_new(&x, err, errsize);
}

static int k8s_attributes_validate(const void *config, const char *path, struct sr_diag *d)
{
	const struct k8s_attributes_config *cfg = config;
	char err[512], fs[4096], ls[4096];
	struct k8s_extract *x = make_extract(cfg, err, sizeof(err));
	struct filter_config f = cfg->filter;
	int r = 0;

	if (!x) {
		sr_diag_add(d, NULL, 0, 0, path, "extract.%s", err);
		r = -EINVAL;
	}
	k8s_extract_free(x);
	/* Selector syntax only (the env variable is checked at start, where it is read). */
	f.node_from_env_var = NULL;
	if (build_selectors(&f, fs, sizeof(fs), ls, sizeof(ls), err, sizeof(err)) < 0) {
		sr_diag_add(d, NULL, 0, 0, path, "%s", err);
		r = -EINVAL;
	}
	if (parse_association(cfg, NULL, err, sizeof(err)) < 0) {
		sr_diag_add(d, NULL, 0, 0, path, "%s", err);
		r = -EINVAL;
	}
	for (uint32_t i = 0; i < cfg->exclude.n_pods; i++) {
		struct gw_regex *re = gw_regex_new(cfg->exclude.pods[i].name, false, err, sizeof(err));
		if (!re) {
			sr_diag_add(d, NULL, 0, 0, path, "exclude.pods[%u].name: %s", i, err);
			r = -EINVAL;
		}
		gw_regex_free(re);
	}
	if (cfg->auth_type != AUTH_KUBECONFIG && (cfg->kube_config_path || cfg->context)) {
		sr_diag_add(d, NULL, 0, 0, path, "kube_config_path and context apply only with auth_type: kubeConfig");
		r = -EINVAL;
	}
	return r;
}

/* ---- attribute access on a resource of the model ---- */

struct res_io {
	struct gw_profiles *p;
	struct gw_resource *r;
};

static const char *res_get(void *ud, const char *key)
{
	struct res_io *io = ud;
	const struct gw_attr *a = gw_resource__attr(io->r, key);

	/* A non-string attribute counts as set: never overwritten. */
	if (a && a->type != GW_ATTR_STRING)
		return "(set)";
	return a ? a->v.s : NULL;
}

static int res_set(void *ud, const char *key, const char *value)
{
	struct res_io *io = ud;

	return gw_resource__set_string(io->p, io->r, key, value);
}

static bool excluded(const struct k8sp *kp, const struct k8s_pod *pod)
{
	for (size_t i = 0; i < kp->n_exclude; i++)
		if (gw_regex__match(kp->exclude[i], pod->name, NULL) > 0)
			return true;
	return false;
}

static int enrich(struct k8sp *kp, struct gw_profiles *p)
{
	gw_profiles_foreach_resource(p, r)
	{
		struct res_io rio = { .p = p, .r = r };
		struct k8s_attr_io io = { .get = res_get, .set = res_set, .userdata = &rio };
		const struct k8s_container *ct = NULL;
		const struct k8s_pod *pod;
		int e;

		kp->resources++;
		pod = NULL;
		for (size_t i = 0; i < kp->n_assoc && !pod; i++) {
			if (kp->assoc[i] == ASSOC_CONTAINER_ID) {
				pod = k8s_cache__pod_by_container(kp->cache, gw_resource__string(r, "container.id"),
								  &ct);
				kp->matched_container += pod != NULL;
			} else {
				pod = k8s_cache__pod_by_uid(kp->cache, gw_resource__string(r, "k8s.pod.uid"));
				kp->matched_uid += pod != NULL;
			}
		}
		if (pod && excluded(kp, pod)) {
			/* Excluded pods are left as they are (not even named after the executable). */
			kp->excluded++;
			continue;
		}
		if (pod) {
			e = k8s_extract__apply(kp->extract, kp->cache, pod, ct, &io);
			if (e < 0)
				return e;
			continue;
		}
		kp->unmatched++;
		/* Not in a pod (or not known): a host process is named after its executable. */
		if (k8s_extract__wants(kp->extract, K8S_META_SERVICE_NAME)) {
			const char *cur = res_get(&rio, "service.name");
			const char *exe = gw_resource__string(r, "process.executable.name");
			if ((!cur || !*cur) && exe && *exe) {
				if ((e = gw_resource__set_string(p, r, "service.name", exe)) < 0)
					return e;
				kp->exe_service_names++;
			}
		}
	}
	return 0;
}

static int process_and_emit(struct k8sp *kp, struct gw_profiles *p)
{
	int r = gw_profiles__make_writable(&p);

	if (r < 0 || (r = enrich(kp, p)) < 0) {
		/* Out of memory mid-way: what was set stays; the batch still goes on. */
		sr_log_warn(COMPONENT, "could not label a batch completely; passing it on", "id=%s error=\"%s\"",
			    kp->c->id, strerror(-r));
	}
	return gw_component_emit(kp->c, p);
}

static void release_held(struct k8sp *kp)
{
	struct held *h;

	while ((h = kp->held_head)) {
		kp->held_head = h->next;
		if (!kp->held_head)
			kp->held_tail = &kp->held_head;
		kp->held_samples -= h->p->n_samples;
		process_and_emit(kp, h->p);
		free(h);
	}
	kp->waiting = false;
	if (kp->timer_open)
		uv_timer_stop(&kp->wait_timer);
}

static void on_synced(void *userdata)
{
	struct k8sp *kp = userdata;
	struct k8s_cache_stats st;

	kp->synced = true;
	k8s_cache__stats(kp->cache, &st);
	sr_log_info(COMPONENT, "pod metadata synced",
		    "id=%s pods=%" PRIu64 " namespaces=%" PRIu64 " replicasets=%" PRIu64 " held_samples=%" PRIu64,
		    kp->c->id, st.pods, st.namespaces, st.replicasets, kp->held_samples);
	gw_component_set_ready(kp->c, true);
	release_held(kp);
}

static void on_wait_timeout(uv_timer_t *t)
{
	struct k8sp *kp = t->data;

	if (kp->synced || !kp->waiting)
		return;
	sr_log_error(COMPONENT,
		     "pod metadata not synced within wait_for_metadata_timeout; passing held batches on "
		     "with what is known (check API server access and RBAC: list/watch pods)",
		     "id=%s held_samples=%" PRIu64, kp->c->id, kp->held_samples);
	kp->released_unsynced += kp->held_samples;
	release_held(kp);
	/* Not ready is not a reason to hold forever; /readyz turns 200 so the gateway takes traffic. */
	gw_component_set_ready(kp->c, true);
}

static void metrics_cb(struct gw_metrics_writer *w, void *userdata)
{
	struct k8sp *kp = userdata;
	struct k8s_cache_stats cs;
	struct k8s_client_stats ks = { 0 };
	char l[256] = "";

	gw_metrics_label(l, sizeof(l), "component", kp->c->id);
	k8s_cache__stats(kp->cache, &cs);
	if (kp->client)
		k8s_client__stats(kp->client, &ks);
#define G(name, help, v) gw_metrics__add(w, "stackrelay_gateway_k8s_" name, GW_METRIC_GAUGE, help, l, (double)(v))
#define C(name, help, v) gw_metrics__add(w, "stackrelay_gateway_k8s_" name, GW_METRIC_COUNTER, help, l, (double)(v))
	G("pods", "Pods in the cache, live and deleted-in-grace.", cs.pods);
	G("pods_deleted", "Deleted pods kept for late samples.", cs.pods_deleted);
	G("containers_indexed", "Container IDs in the association index.", cs.containers);
	G("namespaces", "Namespaces in the cache.", cs.namespaces);
	G("replicasets", "ReplicaSets in the cache.", cs.replicasets);
	G("nodes", "Nodes in the cache.", cs.nodes);
	G("cache_bytes", "Approximate heap bytes of cached pod records.", cs.bytes);
	G("synced", "1 once every watched kind was listed completely.", kp->synced ? 1 : 0);
	G("held_samples", "Sample records held waiting for the first sync.", kp->held_samples);
	C("lookups_total", "Association lookups (container ID, pod UID).", cs.lookups);
	C("lookup_misses_total", "Association lookups that found no pod.", cs.misses);
	C("pods_refused_total", "Pods not cached because cache.max_pods was reached.", cs.pods_refused);
	C("pods_evicted_total", "Deleted pods dropped before their grace ended, to make room.", cs.pods_evicted);
	C("resources_total", "Resources seen.", kp->resources);
	C("resources_unmatched_total", "Resources that matched no pod.", kp->unmatched);
	C("resources_excluded_total", "Resources of pods matched by exclude.pods, left unlabelled.", kp->excluded);
	C("released_unsynced_samples_total", "Held samples passed on unsynced (timeout or bound).",
	  kp->released_unsynced);
	C("api_lists_total", "LIST pages received.", ks.lists);
	C("api_watches_total", "WATCH streams opened.", ks.watches);
	C("api_events_total", "Watch events applied.", ks.events);
	C("api_relists_total", "LISTs started again after 410 Gone.", ks.relists);
	C("api_failures_total", "API requests that failed (retried with backoff).", ks.failures);
	C("api_unauthorized_total", "401 answers (the token is re-read).", ks.unauthorized);
	C("api_bytes_total", "Response bytes from the API server.", ks.bytes);
#undef G
#undef C
}

static void free_exclude(struct k8sp *kp)
{
	for (size_t i = 0; i < kp->n_exclude; i++)
		gw_regex_free(kp->exclude[i]);
	SR_FREE(kp->exclude);
	kp->n_exclude = 0;
}

static int k8s_attributes_create(struct gw_component *c)
{
	const struct k8s_attributes_config *cfg = c->config;
	struct k8sp *kp = calloc(1, sizeof(*kp));
	char err[512];

	if (!kp)
		return -ENOMEM;
	kp->c = c;
	kp->cfg = cfg;
	kp->held_tail = &kp->held_head;
	kp->extract = make_extract(cfg, err, sizeof(err));
	if (!kp->extract) {
		int r = -errno;
		sr_log_error(COMPONENT, "invalid extract configuration", "id=%s error=%s", c->id, Q(err));
		free(kp);
		return r;
	}
	if (cfg->n_pod_association) {
		int n = parse_association(cfg, kp->assoc, err, sizeof(err));
		if (n < 0) {
			sr_log_error(COMPONENT, "invalid pod_association", "id=%s error=%s", c->id, Q(err));
			k8s_extract_free(kp->extract);
			free(kp);
			return n;
		}
		kp->n_assoc = (size_t)n;
	} else {
		kp->assoc[0] = ASSOC_CONTAINER_ID;
		kp->assoc[1] = ASSOC_POD_UID;
		kp->n_assoc = 2;
	}
	if (cfg->exclude.n_pods) {
		kp->exclude = calloc(cfg->exclude.n_pods, sizeof(*kp->exclude));
		for (uint32_t i = 0; kp->exclude && i < cfg->exclude.n_pods; i++, kp->n_exclude++) {
			kp->exclude[i] = gw_regex_new(cfg->exclude.pods[i].name, false, err, sizeof(err));
			if (!kp->exclude[i])
				break;
		}
		if (!kp->exclude || kp->n_exclude != cfg->exclude.n_pods) {
			sr_log_error(COMPONENT, "invalid exclude.pods", "id=%s error=%s", c->id,
				     Q(kp->exclude ? err : "out of memory"));
			free_exclude(kp);
			k8s_extract_free(kp->extract);
			free(kp);
			return -EINVAL;
		}
	}
	kp->cache = k8s_cache_new(&(struct k8s_cache_limits){ .max_pods = cfg->cache.max_pods,
							      .deleted_grace_ns = cfg->cache.deleted_grace });
	if (!kp->cache) {
		free_exclude(kp);
		k8s_extract_free(kp->extract);
		free(kp);
		return -ENOMEM;
	}
	c->state = kp;
	return 0;
}

static int load_conn(const struct k8s_attributes_config *cfg, struct k8s_conn *conn, char *err, size_t errsize)
{
	int r;

	switch (cfg->auth_type) {
	case AUTH_KUBECONFIG:
		r = k8s_conn_from_kubeconfig(cfg->kube_config_path, cfg->context, conn, err, errsize);
		break;
	case AUTH_NONE:
		r = k8s_conn_in_cluster(NULL, conn, err, errsize);
		if (r < 0 && cfg->endpoint && *cfg->endpoint) {
			memset(conn, 0, sizeof(*conn));
			r = 0;
		}
		/* No credentials, by request. */
		if (r == 0) {
			SR_FREE(conn->token_file);
			SR_FREE(conn->token);
		}
		break;
	default:
		r = k8s_conn_in_cluster(NULL, conn, err, errsize);
		break;
	}
	if (r < 0)
		return r;
	if (cfg->endpoint && *cfg->endpoint) {
		free(conn->server);
		conn->server = strdup(cfg->endpoint);
		if (!conn->server)
			return -ENOMEM;
		size_t n = strlen(conn->server);
		while (n && conn->server[n - 1] == '/')
			conn->server[--n] = '\0';
	}
	return 0;
}

static int k8s_attributes_start(struct gw_component *c)
{
	struct k8sp *kp = c->state;
	const struct k8s_attributes_config *cfg = kp->cfg;
	struct k8s_client_options o = { 0 };
	char err[512], fsel[4096], lsel[4096];
	uv_loop_t *loop = gw_runtime__loop(c->runtime);
	int r;

	gw_runtime__add_metrics(c->runtime, metrics_cb, kp);
	if (cfg->passthrough) {
		sr_log_info(COMPONENT, "passthrough: batches pass unchanged, the API server is not contacted", "id=%s",
			    c->id);
		kp->synced = true;
		return 0;
	}
	r = build_selectors(&cfg->filter, fsel, sizeof(fsel), lsel, sizeof(lsel), err, sizeof(err));
	if (r < 0) {
		sr_log_error(COMPONENT, "invalid filter", "id=%s error=%s", c->id, Q(err));
		return r;
	}
	r = load_conn(cfg, &o.conn, err, sizeof(err));
	if (r < 0) {
		sr_log_error(COMPONENT, "cannot configure the Kubernetes API client", "id=%s auth_type=%s error=%s",
			     c->id, auth_type_names[cfg->auth_type], Q(err));
		k8s_conn_clear(&o.conn);
		return r;
	}
	o.cache = kp->cache;
	o.keep = k8s_extract__keep(kp->extract);
	o.watch[K8S_KIND_POD] = true;
	o.watch[K8S_KIND_NAMESPACE] = k8s_extract__needs_namespaces(kp->extract);
	/* For k8s.cluster.uid alone, one namespace is enough: a cluster may have thousands. */
	if (k8s_extract__needs_only_cluster_uid(kp->extract))
		o.namespace_field_selector = (char *)"metadata.name=kube-system";
	o.watch[K8S_KIND_REPLICASET] = k8s_extract__needs_replicasets(kp->extract);
	o.watch[K8S_KIND_NODE] = k8s_extract__needs_nodes(kp->extract);
	o.namespace = cfg->filter.namespace;
	o.field_selector = fsel;
	o.label_selector = lsel;
	o.on_synced = on_synced;
	o.userdata = kp;
	kp->client = k8s_client_new(loop, &o, err, sizeof(err));
	if (!kp->client) {
		r = -errno;
		sr_log_error(COMPONENT, "cannot create the Kubernetes API client", "id=%s error=%s", c->id, Q(err));
		k8s_conn_clear(&o.conn);
		return r;
	}
	if (cfg->wait_for_metadata) {
		kp->waiting = true;
		gw_component_set_ready(c, false);
		uv_timer_init(loop, &kp->wait_timer);
		kp->wait_timer.data = kp;
		kp->timer_open = true;
		uv_timer_start(&kp->wait_timer, on_wait_timeout, SR_MAX(cfg->wait_for_metadata_timeout / 1000000, 1),
			       0);
	}
	sr_log_info(COMPONENT, "watching the Kubernetes API",
		    "id=%s server=%s auth_type=%s field_selector=\"%s\" label_selector=\"%s\" namespaces=%d "
		    "replicasets=%d nodes=%d",
		    c->id, o.conn.server, auth_type_names[cfg->auth_type], fsel, lsel, o.watch[K8S_KIND_NAMESPACE],
		    o.watch[K8S_KIND_REPLICASET], o.watch[K8S_KIND_NODE]);
	k8s_conn_clear(&o.conn);
	return k8s_client__start(kp->client);
}

static int k8s_attributes_consume(struct gw_component *c, struct gw_profiles *p)
{
	struct k8sp *kp = c->state;

	if (kp->cfg->passthrough)
		return gw_component_emit(c, p);
	if (kp->waiting) {
		struct held *h = malloc(sizeof(*h));
		if (h) {
			h->p = p;
			h->next = NULL;
			*kp->held_tail = h;
			kp->held_tail = &h->next;
			kp->held_samples += p->n_samples;
			/* Over the bound: the oldest goes on now, labelled with what is known. */
			while (kp->held_samples > kp->cfg->wait_for_metadata_max_samples && kp->held_head != h) {
				struct held *o = kp->held_head;
				kp->held_head = o->next;
				kp->held_samples -= o->p->n_samples;
				kp->released_unsynced += o->p->n_samples;
				kp->held_overflow++;
				process_and_emit(kp, o->p);
				free(o);
			}
			return 0;
		}
	}
	return process_and_emit(kp, p);
}

/*
 * Handles (the wait timer, the client's) close asynchronously. pending
 * counts those still closing; the last one calls done (shutdown) and frees
 * the state once destroy has been called.
 */
static void maybe_finish(struct k8sp *kp)
{
	if (kp->pending)
		return;
	if (kp->done) {
		void (*done)(struct gw_component *) = kp->done;
		kp->done = NULL;
		done(kp->c);
	}
	if (kp->destroyed) {
		/* Only now: a LIST page decoded on a worker reads the extraction rules until the client is closed. */
		k8s_cache_free(kp->cache);
		k8s_extract_free(kp->extract);
		free_exclude(kp);
		free(kp);
	}
}

static void wait_timer_closed(uv_handle_t *h)
{
	struct k8sp *kp = h->data;

	kp->pending--;
	maybe_finish(kp);
}

static void client_closed(void *userdata)
{
	struct k8sp *kp = userdata;

	kp->pending--;
	maybe_finish(kp);
}

/* Starts closing what is open; maybe_finish runs when it is closed. */
static void close_handles(struct k8sp *kp)
{
	if (kp->timer_open) {
		kp->timer_open = false;
		kp->pending++;
		uv_close((uv_handle_t *)&kp->wait_timer, wait_timer_closed);
	}
	if (kp->client) {
		struct k8s_client *cl = kp->client;
		kp->client = NULL;
		kp->pending++;
		k8s_client__close(cl, client_closed, kp);
	}
}

static void k8s_attributes_shutdown(struct gw_component *c, void (*done)(struct gw_component *c))
{
	struct k8sp *kp = c->state;

	/* Whatever is held goes on now, labelled with what the cache knows. */
	if (kp->waiting) {
		kp->released_unsynced += kp->held_samples;
		release_held(kp);
	}
	kp->done = done;
	kp->pending++; /* not finished while still in here */
	close_handles(kp);
	kp->pending--;
	maybe_finish(kp);
}

static void k8s_attributes_destroy(struct gw_component *c)
{
	struct k8sp *kp = c->state;
	struct held *h;

	if (!kp)
		return;
	c->state = NULL;
	if (c->runtime)
		gw_runtime__remove_metrics(c->runtime, metrics_cb, kp);
	while ((h = kp->held_head)) {
		kp->held_head = h->next;
		gw_component_drop(c, h->p, "shutdown");
		free(h);
	}
	kp->done = NULL;
	/* After a failed start, shutdown was not called: close here. The client no longer touches the cache. */
	close_handles(kp);
	kp->destroyed = true;
	maybe_finish(kp);
}

const struct gw_component_type gw_processor_k8s_attributes = {
	.name = "k8s_attributes",
	.kind = GW_PROCESSOR,
	.doc = "Adds Kubernetes metadata (namespace, pod, container, owner workload, labels, annotations) and an "
	       "inferred service.name to every resource, associated by container.id or k8s.pod.uid; names and "
	       "semantics follow the OTel Collector's k8sattributes processor (docs/kubernetes.md).",
	.config_fields = k8s_attributes_fields,
	.config_size = sizeof(struct k8s_attributes_config),
	.validate = k8s_attributes_validate,
	.create = k8s_attributes_create,
	.start = k8s_attributes_start,
	.consume = k8s_attributes_consume,
	.shutdown = k8s_attributes_shutdown,
	.destroy = k8s_attributes_destroy,
};
