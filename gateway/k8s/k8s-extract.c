// SPDX-License-Identifier: Apache-2.0
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "common/macro.h"
#include "k8s-cache.h"
#include "k8s-extract.h"
#include "core/regex.h"

const char *const k8s_meta_names[] = {
	[K8S_META_NAMESPACE_NAME] = "k8s.namespace.name",
	[K8S_META_POD_NAME] = "k8s.pod.name",
	[K8S_META_POD_UID] = "k8s.pod.uid",
	[K8S_META_POD_HOSTNAME] = "k8s.pod.hostname",
	[K8S_META_POD_START_TIME] = "k8s.pod.start_time",
	[K8S_META_POD_IP] = "k8s.pod.ip",
	[K8S_META_DEPLOYMENT_NAME] = "k8s.deployment.name",
	[K8S_META_DEPLOYMENT_UID] = "k8s.deployment.uid",
	[K8S_META_REPLICASET_NAME] = "k8s.replicaset.name",
	[K8S_META_REPLICASET_UID] = "k8s.replicaset.uid",
	[K8S_META_DAEMONSET_NAME] = "k8s.daemonset.name",
	[K8S_META_DAEMONSET_UID] = "k8s.daemonset.uid",
	[K8S_META_STATEFULSET_NAME] = "k8s.statefulset.name",
	[K8S_META_STATEFULSET_UID] = "k8s.statefulset.uid",
	[K8S_META_JOB_NAME] = "k8s.job.name",
	[K8S_META_JOB_UID] = "k8s.job.uid",
	[K8S_META_CRONJOB_NAME] = "k8s.cronjob.name",
	[K8S_META_NODE_NAME] = "k8s.node.name",
	[K8S_META_NODE_UID] = "k8s.node.uid",
	[K8S_META_CLUSTER_UID] = "k8s.cluster.uid",
	[K8S_META_CONTAINER_NAME] = "k8s.container.name",
	[K8S_META_CONTAINER_ID] = "container.id",
	[K8S_META_CONTAINER_IMAGE_NAME] = "container.image.name",
	[K8S_META_CONTAINER_IMAGE_TAG] = "container.image.tag",
	[K8S_META_CONTAINER_IMAGE_REPO_DIGESTS] = "container.image.repo_digests",
	[K8S_META_CONTAINER_RESTART_COUNT] = "k8s.container.restart_count",
	[K8S_META_SERVICE_NAME] = "service.name",
	[K8S_META_SERVICE_NAMESPACE] = "service.namespace",
	[K8S_META_SERVICE_VERSION] = "service.version",
	[K8S_META_SERVICE_INSTANCE_ID] = "service.instance.id",
	[K8S_META__MAX] = NULL,
};

/*
 * Unlike the Collector's default, no per-pod unique values (uid, start
 * time): every resource attribute becomes a Pyroscope series label, and a
 * label that changes with every pod restart multiplies series.
 */
const char *const k8s_meta_default[] = {
	"k8s.namespace.name",  "k8s.pod.name",	       "k8s.node.name",	     "k8s.container.name",
	"k8s.deployment.name", "k8s.statefulset.name", "k8s.daemonset.name", "k8s.cronjob.name",
	"k8s.job.name",	       "service.name",	       "service.namespace",  NULL,
};

const char *const k8s_rule_from_names[] = { "pod", "namespace", "node", NULL };

#define ANN_OTEL_PREFIX		"resource.opentelemetry.io/"
#define ANN_PYROSCOPE_SERVICE	"pyroscope.io/service_name"
#define LABEL_APP_NAME		"app.kubernetes.io/name"
#define LABEL_APP_INSTANCE	"app.kubernetes.io/instance"
#define LABEL_APP_VERSION	"app.kubernetes.io/version"
#define LABEL_POD_TEMPLATE_HASH "pod-template-hash"

struct field_rule {
	char *tag_name;
	char *key;
	struct gw_regex *key_regex;
	enum k8s_rule_from from;
};

struct k8s_extract {
	bool meta[K8S_META__MAX];
	struct field_rule *labels;
	size_t nlabels;
	struct field_rule *annotations;
	size_t nannotations;
	bool otel_annotations;
	bool deployment_from_rs_name;
	struct k8s_keep keep;
};

static bool rule_matches_key(const struct field_rule *r, const char *key)
{
	if (r->key)
		return strcmp(r->key, key) == 0;
	return r->key_regex && gw_regex__match(r->key_regex, key, NULL) > 0;
}

static enum k8s_rule_from kind_to_from(enum k8s_kind kind)
{
	switch (kind) {
	case K8S_KIND_NAMESPACE:
		return K8S_FROM_NAMESPACE;
	case K8S_KIND_NODE:
		return K8S_FROM_NODE;
	default:
		return K8S_FROM_POD;
	}
}

static bool keep_label(void *userdata, enum k8s_kind kind, const char *key)
{
	const struct k8s_extract *x = userdata;
	enum k8s_rule_from from = kind_to_from(kind);

	if (kind == K8S_KIND_POD && (strcmp(key, LABEL_APP_NAME) == 0 || strcmp(key, LABEL_APP_INSTANCE) == 0 ||
				     strcmp(key, LABEL_APP_VERSION) == 0 || strcmp(key, LABEL_POD_TEMPLATE_HASH) == 0))
		return true;
	for (size_t i = 0; i < x->nlabels; i++)
		if (x->labels[i].from == from && rule_matches_key(&x->labels[i], key))
			return true;
	return false;
}

static bool keep_annotation(void *userdata, enum k8s_kind kind, const char *key)
{
	const struct k8s_extract *x = userdata;
	enum k8s_rule_from from = kind_to_from(kind);

	if (kind == K8S_KIND_POD &&
	    (strncmp(key, ANN_OTEL_PREFIX, strlen(ANN_OTEL_PREFIX)) == 0 || strcmp(key, ANN_PYROSCOPE_SERVICE) == 0))
		return true;
	for (size_t i = 0; i < x->nannotations; i++)
		if (x->annotations[i].from == from && rule_matches_key(&x->annotations[i], key))
			return true;
	return false;
}

static void free_rules(struct field_rule *r, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(r[i].tag_name);
		free(r[i].key);
		gw_regex_free(r[i].key_regex);
	}
	free(r);
}

void k8s_extract_free(struct k8s_extract *x)
{
	if (!x)
		return;
	free_rules(x->labels, x->nlabels);
	free_rules(x->annotations, x->nannotations);
	free(x);
}

static int compile_rules(const struct k8s_field_rule_config *cfg, uint32_t n, const char *section,
			 struct field_rule **ret, size_t *ret_n, char *errbuf, size_t errsize)
{
	struct field_rule *rules;
	char rerr[160];

	*ret = NULL;
	*ret_n = 0;
	if (n == 0)
		return 0;
	rules = calloc(n, sizeof(*rules));
	if (!rules)
		return -ENOMEM;
	*ret = rules;
	for (uint32_t i = 0; i < n; i++) {
		const struct k8s_field_rule_config *c = &cfg[i];
		struct field_rule *r = &rules[i];
		*ret_n = i + 1;
		bool has_key = c->key && *c->key, has_re = c->key_regex && *c->key_regex;
		if (has_key == has_re) {
			snprintf(errbuf, errsize, "%s[%u]: exactly one of key and key_regex is required", section, i);
			return -EINVAL;
		}
		if (c->from < K8S_FROM_POD || c->from > K8S_FROM_NODE) {
			snprintf(errbuf, errsize, "%s[%u].from: must be pod, namespace or node", section, i);
			return -EINVAL;
		}
		r->from = (enum k8s_rule_from)c->from;
		if (has_key && !(r->key = strdup(c->key)))
			return -ENOMEM;
		if (c->tag_name && *c->tag_name && !(r->tag_name = strdup(c->tag_name)))
			return -ENOMEM;
		if (has_re) {
			r->key_regex = gw_regex_new(c->key_regex, true, rerr, sizeof(rerr));
			if (!r->key_regex) {
				int e = errno;
				snprintf(errbuf, errsize, "%s[%u].key_regex: %s", section, i, rerr);
				return -e;
			}
		}
	}
	return 0;
}

struct k8s_extract *k8s_extract_new(const struct k8s_extract_config *cfg, char *errbuf, size_t errsize)
{
	struct k8s_extract *x = calloc(1, sizeof(*x));
	int r;

	if (errsize)
		errbuf[0] = '\0';
	if (!x) {
		errno = ENOMEM;
		return NULL;
	}
	if (cfg->metadata_set || cfg->metadata_count) {
		for (uint32_t i = 0; i < cfg->metadata_count; i++) {
			size_t m;
			for (m = 0; m < K8S_META__MAX; m++)
				if (strcmp(cfg->metadata[i], k8s_meta_names[m]) == 0)
					break;
			if (m == K8S_META__MAX) {
				snprintf(errbuf, errsize,
					 "metadata[%u]: unknown name \"%s\" (docs/kubernetes.md lists them)", i,
					 cfg->metadata[i]);
				r = -EINVAL;
				goto fail;
			}
			x->meta[m] = true;
		}
	} else {
		for (size_t i = 0; k8s_meta_default[i]; i++)
			for (size_t m = 0; m < K8S_META__MAX; m++)
				if (strcmp(k8s_meta_default[i], k8s_meta_names[m]) == 0)
					x->meta[m] = true;
	}
	r = compile_rules(cfg->labels, cfg->labels_count, "labels", &x->labels, &x->nlabels, errbuf, errsize);
	if (r < 0)
		goto fail;
	r = compile_rules(cfg->annotations, cfg->annotations_count, "annotations", &x->annotations, &x->nannotations,
			  errbuf, errsize);
	if (r < 0)
		goto fail;
	x->otel_annotations = cfg->otel_annotations;
	x->deployment_from_rs_name = cfg->deployment_name_from_replicaset;
	x->keep.label = keep_label;
	x->keep.annotation = keep_annotation;
	x->keep.userdata = x;
	return x;
fail:
	if (r == -ENOMEM)
		snprintf(errbuf, errsize, "out of memory");
	k8s_extract_free(x);
	errno = -r;
	return NULL;
}

const struct k8s_keep *k8s_extract__keep(const struct k8s_extract *x)
{
	return &x->keep;
}

bool k8s_extract__wants(const struct k8s_extract *x, enum k8s_meta m)
{
	return (unsigned)m < K8S_META__MAX && x->meta[m];
}

static bool rules_from(const struct field_rule *r, size_t n, enum k8s_rule_from from)
{
	for (size_t i = 0; i < n; i++)
		if (r[i].from == from)
			return true;
	return false;
}

bool k8s_extract__needs_namespaces(const struct k8s_extract *x)
{
	return x->meta[K8S_META_CLUSTER_UID] || rules_from(x->labels, x->nlabels, K8S_FROM_NAMESPACE) ||
	       rules_from(x->annotations, x->nannotations, K8S_FROM_NAMESPACE);
}

bool k8s_extract__needs_only_cluster_uid(const struct k8s_extract *x)
{
	return x->meta[K8S_META_CLUSTER_UID] && !rules_from(x->labels, x->nlabels, K8S_FROM_NAMESPACE) &&
	       !rules_from(x->annotations, x->nannotations, K8S_FROM_NAMESPACE);
}

bool k8s_extract__needs_nodes(const struct k8s_extract *x)
{
	return x->meta[K8S_META_NODE_UID] || rules_from(x->labels, x->nlabels, K8S_FROM_NODE) ||
	       rules_from(x->annotations, x->nannotations, K8S_FROM_NODE);
}

bool k8s_extract__needs_replicasets(const struct k8s_extract *x)
{
	if (x->deployment_from_rs_name)
		return false;
	return x->meta[K8S_META_DEPLOYMENT_NAME] || x->meta[K8S_META_DEPLOYMENT_UID] || x->meta[K8S_META_SERVICE_NAME];
}

void k8s_image_split(const char *image, char *name, size_t namesize, char *tag, size_t tagsize)
{
	const char *at, *slash, *colon;
	size_t len;

	if (namesize)
		name[0] = '\0';
	if (tagsize)
		tag[0] = '\0';
	if (!image || !*image)
		return;
	at = strchr(image, '@');
	len = at ? (size_t)(at - image) : strlen(image);
	slash = memrchr(image, '/', len);
	colon = memrchr(image, ':', len);
	/* A colon before the last slash is a registry port, not a tag. */
	if (colon && slash && colon < slash)
		colon = NULL;
	if (colon) {
		snprintf(tag, tagsize, "%.*s", (int)(len - (size_t)(colon - image) - 1), colon + 1);
		len = (size_t)(colon - image);
	} else if (!at) {
		snprintf(tag, tagsize, "latest");
	}
	snprintf(name, namesize, "%.*s", (int)len, image);
}

/* "<name>-<digits>" as Jobs created by CronJobs are named; the CronJob's name. */
static bool cronjob_from_job(const char *job, char *buf, size_t size)
{
	const char *dash = strrchr(job, '-');

	if (!dash || dash == job || !dash[1])
		return false;
	for (const char *p = dash + 1; *p; p++)
		if (!isdigit((unsigned char)*p))
			return false;
	snprintf(buf, size, "%.*s", (int)(dash - job), job);
	return true;
}

void k8s_workload_resolve(const struct k8s_pod *pod, const struct k8s_cache *cache, bool from_replicaset_name,
			  struct k8s_workload *w)
{
	memset(w, 0, sizeof(*w));
	switch (pod->owner_kind) {
	case K8S_OWNER_REPLICASET: {
		const struct k8s_replicaset *rs =
			from_replicaset_name || !cache ? NULL
						       : k8s_cache__replicaset(cache, pod->namespace, pod->owner_name);
		w->replicaset_name = pod->owner_name;
		w->replicaset_uid = pod->owner_uid;
		if (rs) {
			w->deployment_name = rs->deployment_name;
			w->deployment_uid = rs->deployment_uid;
			break;
		}
		/*
		 * Without the ReplicaSet (by choice, or not synced yet): a
		 * Deployment names its ReplicaSets "<deployment>-<pod-template-hash>".
		 */
		const char *hash = k8s_strmap__get(&pod->labels, LABEL_POD_TEMPLATE_HASH);
		size_t n = strlen(pod->owner_name), h = hash ? strlen(hash) : 0;
		if (hash && h && n > h + 1 && pod->owner_name[n - h - 1] == '-' &&
		    strcmp(pod->owner_name + n - h, hash) == 0 && n - h - 1 < sizeof(w->deployment_buf)) {
			snprintf(w->deployment_buf, sizeof(w->deployment_buf), "%.*s", (int)(n - h - 1),
				 pod->owner_name);
			w->deployment_name = w->deployment_buf;
		}
		break;
	}
	case K8S_OWNER_STATEFULSET:
		w->statefulset_name = pod->owner_name;
		w->statefulset_uid = pod->owner_uid;
		break;
	case K8S_OWNER_DAEMONSET:
		w->daemonset_name = pod->owner_name;
		w->daemonset_uid = pod->owner_uid;
		break;
	case K8S_OWNER_JOB:
		w->job_name = pod->owner_name;
		w->job_uid = pod->owner_uid;
		if (!cronjob_from_job(pod->owner_name, w->cronjob_name, sizeof(w->cronjob_name)))
			w->cronjob_name[0] = '\0';
		break;
	default:
		break;
	}
}

struct setter {
	const struct k8s_attr_io *io;
	int count;
	int err;
};

static void put(struct setter *s, const char *key, const char *value)
{
	const char *cur;
	int r;

	if (s->err || !value || !*value)
		return;
	cur = s->io->get(s->io->userdata, key);
	if (cur && *cur)
		return;
	r = s->io->set(s->io->userdata, key, value);
	if (r < 0)
		s->err = r;
	else
		s->count++;
}

static void apply_rules(const struct field_rule *rules, size_t n, enum k8s_rule_from from, const struct k8s_strmap *src,
			const char *kind_word, struct setter *s)
{
	for (size_t i = 0; i < n; i++) {
		const struct field_rule *r = &rules[i];
		if (r->from != from)
			continue;
		for (uint32_t j = 0; j < src->n && !s->err; j++) {
			const char *key = src->v[j].key;
			struct gw_regex_match m;
			char def[512];
			if (r->key) {
				if (strcmp(r->key, key) != 0)
					continue;
				if (!r->tag_name) {
					snprintf(def, sizeof(def), "k8s.%s.%s.%s", k8s_rule_from_names[from], kind_word,
						 key);
					put(s, def, src->v[j].value);
				} else {
					put(s, r->tag_name, src->v[j].value);
				}
				continue;
			}
			if (gw_regex__match(r->key_regex, key, &m) <= 0)
				continue;
			if (!r->tag_name) {
				snprintf(def, sizeof(def), "k8s.%s.%s.%s", k8s_rule_from_names[from], kind_word, key);
				put(s, def, src->v[j].value);
				continue;
			}
			char *tag = NULL;
			int e = gw_regex__expand(r->key_regex, &m, r->tag_name, &tag);
			if (e < 0) {
				s->err = e;
				break;
			}
			put(s, tag, src->v[j].value);
			free(tag);
		}
	}
}

static const char *first_nonempty(const char *const *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] && *v[i])
			return v[i];
	return NULL;
}

int k8s_extract__apply(const struct k8s_extract *x, const struct k8s_cache *cache, const struct k8s_pod *pod,
		       const struct k8s_container *ctr, const struct k8s_attr_io *io)
{
	struct setter s = { .io = io };
	struct k8s_workload w;
	char image_name[512], image_tag[256], buf[1024];
	const bool *m = x->meta;
	const struct k8s_namespace *ns = cache ? k8s_cache__namespace(cache, pod->namespace) : NULL;
	const struct k8s_node *node = cache ? k8s_cache__node(cache, pod->node_name) : NULL;

	k8s_workload_resolve(pod, cache, x->deployment_from_rs_name, &w);
	k8s_image_split(ctr ? ctr->image : NULL, image_name, sizeof(image_name), image_tag, sizeof(image_tag));

	/*
	 * The pod's own resource.opentelemetry.io/ annotations come first:
	 * they are what the workload's owner said explicitly.
	 */
	if (x->otel_annotations)
		for (uint32_t i = 0; i < pod->annotations.n; i++) {
			const char *k = pod->annotations.v[i].key;
			if (strncmp(k, ANN_OTEL_PREFIX, strlen(ANN_OTEL_PREFIX)) == 0 && k[strlen(ANN_OTEL_PREFIX)])
				put(&s, k + strlen(ANN_OTEL_PREFIX), pod->annotations.v[i].value);
		}

	if (m[K8S_META_SERVICE_NAME]) {
		/* Precedence: docs/kubernetes.md, "service.name". */
		const char *c[] = {
			k8s_strmap__get(&pod->annotations, ANN_OTEL_PREFIX "service.name"),
			k8s_strmap__get(&pod->annotations, ANN_PYROSCOPE_SERVICE),
			k8s_strmap__get(&pod->labels, LABEL_APP_NAME),
			k8s_strmap__get(&pod->labels, LABEL_APP_INSTANCE),
			w.deployment_name,
			w.replicaset_name,
			w.statefulset_name,
			w.daemonset_name,
			w.cronjob_name[0] ? w.cronjob_name : NULL,
			w.job_name,
			pod->name,
		};
		put(&s, "service.name", first_nonempty(c, SR_ARRAY_SIZE(c)));
	}
	if (m[K8S_META_SERVICE_NAMESPACE]) {
		const char *c[] = { k8s_strmap__get(&pod->annotations, ANN_OTEL_PREFIX "service.namespace"),
				    pod->namespace };
		put(&s, "service.namespace", first_nonempty(c, SR_ARRAY_SIZE(c)));
	}
	if (m[K8S_META_SERVICE_VERSION]) {
		/* A tag, not a digest: "sha256:..." says nothing a human calls a version. */
		const char *tag =
			image_tag[0] && !strchr(image_tag, ':') && strcmp(image_tag, "latest") != 0 ? image_tag : NULL;
		const char *c[] = { k8s_strmap__get(&pod->annotations, ANN_OTEL_PREFIX "service.version"),
				    k8s_strmap__get(&pod->labels, LABEL_APP_VERSION), tag };
		put(&s, "service.version", first_nonempty(c, SR_ARRAY_SIZE(c)));
	}
	if (m[K8S_META_SERVICE_INSTANCE_ID]) {
		const char *a = k8s_strmap__get(&pod->annotations, ANN_OTEL_PREFIX "service.instance.id");
		if (a && *a) {
			put(&s, "service.instance.id", a);
		} else if (pod->namespace && ctr && ctr->name) {
			snprintf(buf, sizeof(buf), "%s.%s.%s", pod->namespace, pod->name, ctr->name);
			put(&s, "service.instance.id", buf);
		}
	}

	if (m[K8S_META_NAMESPACE_NAME])
		put(&s, "k8s.namespace.name", pod->namespace);
	if (m[K8S_META_POD_NAME])
		put(&s, "k8s.pod.name", pod->name);
	if (m[K8S_META_POD_UID])
		put(&s, "k8s.pod.uid", pod->uid);
	if (m[K8S_META_POD_HOSTNAME])
		put(&s, "k8s.pod.hostname", pod->hostname ? pod->hostname : pod->name);
	if (m[K8S_META_POD_START_TIME])
		put(&s, "k8s.pod.start_time", pod->start_time);
	if (m[K8S_META_POD_IP])
		put(&s, "k8s.pod.ip", pod->ip);
	if (m[K8S_META_DEPLOYMENT_NAME])
		put(&s, "k8s.deployment.name", w.deployment_name);
	if (m[K8S_META_DEPLOYMENT_UID])
		put(&s, "k8s.deployment.uid", w.deployment_uid);
	if (m[K8S_META_REPLICASET_NAME])
		put(&s, "k8s.replicaset.name", w.replicaset_name);
	if (m[K8S_META_REPLICASET_UID])
		put(&s, "k8s.replicaset.uid", w.replicaset_uid);
	if (m[K8S_META_DAEMONSET_NAME])
		put(&s, "k8s.daemonset.name", w.daemonset_name);
	if (m[K8S_META_DAEMONSET_UID])
		put(&s, "k8s.daemonset.uid", w.daemonset_uid);
	if (m[K8S_META_STATEFULSET_NAME])
		put(&s, "k8s.statefulset.name", w.statefulset_name);
	if (m[K8S_META_STATEFULSET_UID])
		put(&s, "k8s.statefulset.uid", w.statefulset_uid);
	if (m[K8S_META_JOB_NAME])
		put(&s, "k8s.job.name", w.job_name);
	if (m[K8S_META_JOB_UID])
		put(&s, "k8s.job.uid", w.job_uid);
	if (m[K8S_META_CRONJOB_NAME] && w.cronjob_name[0])
		put(&s, "k8s.cronjob.name", w.cronjob_name);
	if (m[K8S_META_NODE_NAME])
		put(&s, "k8s.node.name", pod->node_name);
	if (m[K8S_META_NODE_UID] && node)
		put(&s, "k8s.node.uid", node->uid);
	if (m[K8S_META_CLUSTER_UID] && cache)
		put(&s, "k8s.cluster.uid", k8s_cache__cluster_uid(cache));
	if (ctr) {
		if (m[K8S_META_CONTAINER_NAME])
			put(&s, "k8s.container.name", ctr->name);
		if (m[K8S_META_CONTAINER_ID])
			put(&s, "container.id", ctr->id);
		if (m[K8S_META_CONTAINER_IMAGE_NAME])
			put(&s, "container.image.name", image_name);
		if (m[K8S_META_CONTAINER_IMAGE_TAG])
			put(&s, "container.image.tag", image_tag);
		if (m[K8S_META_CONTAINER_IMAGE_REPO_DIGESTS] && ctr->image_id) {
			const char *d = k8s_container_id_strip(ctr->image_id);
			/* Only a real "repo@sha256:..." is a repo digest, not a bare image ID. */
			if (d && strchr(d, '@'))
				put(&s, "container.image.repo_digests", d);
		}
		if (m[K8S_META_CONTAINER_RESTART_COUNT]) {
			snprintf(buf, sizeof(buf), "%u", ctr->restart_count);
			put(&s, "k8s.container.restart_count", buf);
		}
	}

	apply_rules(x->labels, x->nlabels, K8S_FROM_POD, &pod->labels, "labels", &s);
	apply_rules(x->annotations, x->nannotations, K8S_FROM_POD, &pod->annotations, "annotations", &s);
	if (ns) {
		apply_rules(x->labels, x->nlabels, K8S_FROM_NAMESPACE, &ns->labels, "labels", &s);
		apply_rules(x->annotations, x->nannotations, K8S_FROM_NAMESPACE, &ns->annotations, "annotations", &s);
	}
	if (node) {
		apply_rules(x->labels, x->nlabels, K8S_FROM_NODE, &node->labels, "labels", &s);
		apply_rules(x->annotations, x->nannotations, K8S_FROM_NODE, &node->annotations, "annotations", &s);
	}
	return s.err ? s.err : s.count;
}
