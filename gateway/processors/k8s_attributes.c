// SPDX-License-Identifier: Apache-2.0
/*
 * k8s_attributes: labels every resource with the pod it came from
 * (docs/kubernetes.md). The Kubernetes client (gateway/k8s) keeps a cache of
 * pods, namespaces, ReplicaSets and nodes up to date by LIST+WATCH on the
 * gateway's loop; this file only associates and extracts, synchronously:
 * a lookup is a few hash probes. Its configuration is k8s_attributes-config.c.
 *
 * Association (pod_association, rules in order): by default the resource's
 * container.id (runtime prefix stripped), else its k8s.pod.uid (the agent
 * reads both from the cgroup path), else the IP address of the peer that sent
 * it (OTLP senders; agents' resources carry no peer). A resource
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
#include "common/config.h"
#include "core/metrics.h"
#include "core/model.h"
#include "core/runtime.h"
#include "k8s-cache.h"
#include "k8s-client.h"
#include "k8s-extract.h"
#include "k8s_attributes-config.h"
#include "common/log.h"
#include "core/regex.h"

/* A logfmt value for messages that may hold quotes (kubeconfig names, regexes). */
#define Q(s) sr_log_quote((s), (char[600]){ 0 }, 600)

#define COMPONENT "k8s_attributes"

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
	uint64_t resources, unmatched, exe_service_names;
	uint64_t matched[ASSOC_HOST_NAME + 1]; /* by enum assoc_key */
	uint64_t released_unsynced, held_overflow;
	void (*done)(struct gw_component *c);
	unsigned pending; /* handles closing */
	bool destroyed;
	enum assoc_key assoc[K8SATTR_MAX_ASSOC];
	size_t n_assoc;
	struct gw_regex **exclude;
	size_t n_exclude;
	uint64_t excluded;
};

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
			switch (kp->assoc[i]) {
			case ASSOC_CONTAINER_ID:
				pod = k8s_cache__pod_by_container(kp->cache, gw_resource__string(r, "container.id"),
								  &ct);
				break;
			case ASSOC_POD_UID:
				pod = k8s_cache__pod_by_uid(kp->cache, gw_resource__string(r, "k8s.pod.uid"));
				break;
			case ASSOC_POD_IP:
				pod = k8s_cache__pod_by_ip(kp->cache, gw_resource__string(r, "k8s.pod.ip"));
				break;
			case ASSOC_CONNECTION:
				pod = k8s_cache__pod_by_ip(kp->cache, r->peer_addr);
				break;
			case ASSOC_HOST_NAME:
				pod = k8s_cache__pod_by_ip(kp->cache, gw_resource__string(r, "host.name"));
				break;
			}
			if (pod)
				kp->matched[kp->assoc[i]]++;
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
	G("pod_ips_indexed", "Pod IPs in the association index (pods on the host network excluded).", cs.ips);
	G("namespaces", "Namespaces in the cache.", cs.namespaces);
	G("replicasets", "ReplicaSets in the cache.", cs.replicasets);
	G("nodes", "Nodes in the cache.", cs.nodes);
	G("cache_bytes", "Approximate heap bytes of cached pod records.", cs.bytes);
	G("synced", "1 once every watched kind was listed completely.", kp->synced ? 1 : 0);
	G("held_samples", "Sample records held waiting for the first sync.", kp->held_samples);
	C("lookups_total", "Association lookups (container ID, pod UID, pod IP).", cs.lookups);
	C("lookup_misses_total", "Association lookups that found no pod.", cs.misses);
	C("pods_refused_total", "Pods not cached because cache.max_pods was reached.", cs.pods_refused);
	C("pods_evicted_total", "Deleted pods dropped before their grace ended, to make room.", cs.pods_evicted);
	C("resources_total", "Resources seen.", kp->resources);
	C("resources_unmatched_total", "Resources that matched no pod.", kp->unmatched);
	C("resources_matched_container_id_total", "Resources matched by container.id.",
	  kp->matched[ASSOC_CONTAINER_ID]);
	C("resources_matched_pod_uid_total", "Resources matched by k8s.pod.uid.", kp->matched[ASSOC_POD_UID]);
	C("resources_matched_pod_ip_total", "Resources matched by k8s.pod.ip.", kp->matched[ASSOC_POD_IP]);
	C("resources_matched_connection_total", "Resources matched by the sender's IP address.",
	  kp->matched[ASSOC_CONNECTION]);
	C("resources_matched_host_name_total", "Resources matched by a pod IP in host.name.",
	  kp->matched[ASSOC_HOST_NAME]);
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
	kp->extract = k8sattr_make_extract(cfg, err, sizeof(err));
	if (!kp->extract) {
		int r = -errno;
		sr_log_error(COMPONENT, "invalid extract configuration", "id=%s error=%s", c->id, Q(err));
		free(kp);
		return r;
	}
	if (cfg->n_pod_association) {
		int n = k8sattr_parse_association(cfg, kp->assoc, err, sizeof(err));
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
		kp->assoc[2] = ASSOC_CONNECTION;
		kp->n_assoc = 3;
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
	r = k8sattr_build_selectors(&cfg->filter, fsel, sizeof(fsel), lsel, sizeof(lsel), err, sizeof(err));
	if (r < 0) {
		sr_log_error(COMPONENT, "invalid filter", "id=%s error=%s", c->id, Q(err));
		return r;
	}
	r = k8sattr_load_conn(cfg, &o.conn, err, sizeof(err));
	if (r < 0) {
		sr_log_error(COMPONENT, "cannot configure the Kubernetes API client", "id=%s auth_type=%s error=%s",
			     c->id, k8s_auth_type_names[cfg->auth_type], Q(err));
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
		    c->id, o.conn.server, k8s_auth_type_names[cfg->auth_type], fsel, lsel, o.watch[K8S_KIND_NAMESPACE],
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
	       "inferred service.name to every resource, associated by container.id, k8s.pod.uid or the sender's "
	       "address; names and "
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
