// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "common/config.h"
#include "k8s-object.h"

const char *k8s_kind_to_string(enum k8s_kind kind)
{
	switch (kind) {
	case K8S_KIND_POD:
		return "pod";
	case K8S_KIND_NAMESPACE:
		return "namespace";
	case K8S_KIND_REPLICASET:
		return "replicaset";
	case K8S_KIND_NODE:
		return "node";
	default:
		return "unknown";
	}
}

const char *k8s_strmap__get(const struct k8s_strmap *m, const char *key)
{
	for (uint32_t i = 0; i < m->n; i++)
		if (strcmp(m->v[i].key, key) == 0)
			return m->v[i].value;
	return NULL;
}

static void strmap_clear(struct k8s_strmap *m)
{
	for (uint32_t i = 0; i < m->n; i++) {
		free(m->v[i].key);
		free(m->v[i].value);
	}
	SR_FREE(m->v);
	m->n = 0;
}

static struct json_object *jget(struct json_object *o, const char *key)
{
	struct json_object *v = NULL;

	if (!o || !json_object_is_type(o, json_type_object))
		return NULL;
	if (!json_object_object_get_ex(o, key, &v))
		return NULL;
	return v;
}

/* A string member, or NULL when absent, null, or not a string. */
static const char *jstr(struct json_object *o, const char *key)
{
	struct json_object *v = jget(o, key);

	if (!v || !json_object_is_type(v, json_type_string))
		return NULL;
	return json_object_get_string(v);
}

/* strdup of a string member; NULL (not an error) when absent or empty. */
static int dup_str(struct json_object *o, const char *key, char **ret)
{
	const char *s = jstr(o, key);

	*ret = NULL;
	if (!s || !*s)
		return 0;
	*ret = strdup(s);
	return *ret ? 0 : -ENOMEM;
}

static int load_strmap(struct json_object *o, enum k8s_kind kind, const struct k8s_keep *keep, bool labels,
		       struct k8s_strmap *ret)
{
	size_t n = 0, i = 0;

	ret->v = NULL;
	ret->n = 0;
	if (!o || !json_object_is_type(o, json_type_object))
		return 0;
	json_object_object_foreach(o, k0, v0)
	{
		(void)k0;
		if (json_object_is_type(v0, json_type_string))
			n++;
	}
	if (n == 0)
		return 0;
	ret->v = calloc(n, sizeof(*ret->v));
	if (!ret->v)
		return -ENOMEM;
	json_object_object_foreach(o, k, v)
	{
		if (!json_object_is_type(v, json_type_string))
			continue;
		if (keep) {
			bool (*fn)(void *, enum k8s_kind, const char *) = labels ? keep->label : keep->annotation;
			if (fn && !fn(keep->userdata, kind, k))
				continue;
		}
		ret->v[i].key = strdup(k);
		ret->v[i].value = strdup(json_object_get_string(v));
		if (!ret->v[i].key || !ret->v[i].value) {
			free(ret->v[i].key);
			free(ret->v[i].value);
			ret->n = (uint32_t)i;
			strmap_clear(ret);
			return -ENOMEM;
		}
		i++;
	}
	ret->n = (uint32_t)i;
	if (i == 0)
		SR_FREE(ret->v);
	return 0;
}

const char *k8s_container_id_strip(const char *id)
{
	const char *p;

	if (!id)
		return NULL;
	p = strstr(id, "://");
	if (p)
		id = p + 3;
	return *id ? id : NULL;
}

static int dup_container_id(const char *raw, char **ret)
{
	const char *id = k8s_container_id_strip(raw);

	*ret = NULL;
	if (!id || strlen(id) >= K8S_CONTAINER_ID_MAX)
		return 0;
	*ret = strdup(id);
	return *ret ? 0 : -ENOMEM;
}

void k8s_pod_free(struct k8s_pod *p)
{
	if (!p)
		return;
	free(p->uid);
	free(p->name);
	free(p->namespace);
	free(p->node_name);
	free(p->hostname);
	free(p->start_time);
	free(p->ip);
	free(p->resource_version);
	free(p->owner_name);
	free(p->owner_uid);
	strmap_clear(&p->labels);
	strmap_clear(&p->annotations);
	for (uint32_t i = 0; i < p->ncontainers; i++) {
		free(p->containers[i].name);
		free(p->containers[i].image);
		free(p->containers[i].image_id);
		free(p->containers[i].id);
		free(p->containers[i].last_id);
	}
	free(p->containers);
	free(p);
}

void k8s_namespace_free(struct k8s_namespace *n)
{
	if (!n)
		return;
	free(n->name);
	free(n->uid);
	strmap_clear(&n->labels);
	strmap_clear(&n->annotations);
	free(n);
}

void k8s_replicaset_free(struct k8s_replicaset *r)
{
	if (!r)
		return;
	free(r->namespace);
	free(r->name);
	free(r->uid);
	free(r->deployment_name);
	free(r->deployment_uid);
	free(r);
}

void k8s_node_free(struct k8s_node *n)
{
	if (!n)
		return;
	free(n->name);
	free(n->uid);
	strmap_clear(&n->labels);
	strmap_clear(&n->annotations);
	free(n);
}

void k8s_object_clear(struct k8s_object *o)
{
	switch (o->kind) {
	case K8S_KIND_POD:
		k8s_pod_free(o->pod);
		break;
	case K8S_KIND_NAMESPACE:
		k8s_namespace_free(o->ns);
		break;
	case K8S_KIND_REPLICASET:
		k8s_replicaset_free(o->rs);
		break;
	case K8S_KIND_NODE:
		k8s_node_free(o->node);
		break;
	default:
		break;
	}
	o->ptr = NULL;
}

static enum k8s_owner_kind owner_kind_from_string(const char *k)
{
	if (!k)
		return K8S_OWNER_OTHER;
	if (strcmp(k, "ReplicaSet") == 0)
		return K8S_OWNER_REPLICASET;
	if (strcmp(k, "StatefulSet") == 0)
		return K8S_OWNER_STATEFULSET;
	if (strcmp(k, "DaemonSet") == 0)
		return K8S_OWNER_DAEMONSET;
	if (strcmp(k, "Job") == 0)
		return K8S_OWNER_JOB;
	return K8S_OWNER_OTHER;
}

/*
 * The owner that matters is the controller (controller: true); without one,
 * the first reference of a kind we know.
 */
static struct json_object *pick_owner(struct json_object *meta, const char *want_kind)
{
	struct json_object *refs = jget(meta, "ownerReferences");
	struct json_object *first = NULL;
	size_t n;

	if (!refs || !json_object_is_type(refs, json_type_array))
		return NULL;
	n = json_object_array_length(refs);
	for (size_t i = 0; i < n; i++) {
		struct json_object *r = json_object_array_get_idx(refs, i);
		struct json_object *c = jget(r, "controller");
		const char *kind = jstr(r, "kind");
		if (!jstr(r, "name"))
			continue;
		if (want_kind && (!kind || strcmp(kind, want_kind) != 0))
			continue;
		if (c && json_object_is_type(c, json_type_boolean) && json_object_get_boolean(c))
			return r;
		if (!first)
			first = r;
	}
	return first;
}

static int meta_required(struct json_object *meta, char **ret_name, char **ret_uid)
{
	int r;

	if (!jstr(meta, "name") || !*jstr(meta, "name") || !jstr(meta, "uid") || !*jstr(meta, "uid"))
		return -EINVAL;
	r = dup_str(meta, "name", ret_name);
	if (r < 0)
		return r;
	return dup_str(meta, "uid", ret_uid);
}

/* Fills containers from spec (names, images) and status (IDs); status entries match spec ones by name. */
static int load_containers(struct k8s_pod *p, struct json_object *spec, struct json_object *status)
{
	static const struct {
		const char *spec_key, *status_key;
		bool init;
	} lists[] = {
		{ "containers", "containerStatuses", false },
		{ "initContainers", "initContainerStatuses", true },
		{ "ephemeralContainers", "ephemeralContainerStatuses", false },
	};
	size_t total = 0;
	int r;

	for (size_t l = 0; l < SR_ARRAY_SIZE(lists); l++) {
		struct json_object *a = jget(spec, lists[l].spec_key);
		struct json_object *s = jget(status, lists[l].status_key);
		if (a && json_object_is_type(a, json_type_array))
			total += json_object_array_length(a);
		if (s && json_object_is_type(s, json_type_array))
			total += json_object_array_length(s);
	}
	if (total == 0)
		return 0;
	p->containers = calloc(total, sizeof(*p->containers));
	if (!p->containers)
		return -ENOMEM;

	for (size_t l = 0; l < SR_ARRAY_SIZE(lists); l++) {
		struct json_object *a = jget(spec, lists[l].spec_key);
		struct json_object *s = jget(status, lists[l].status_key);
		uint32_t first = p->ncontainers;

		if (a && json_object_is_type(a, json_type_array)) {
			size_t n = json_object_array_length(a);
			for (size_t i = 0; i < n; i++) {
				struct json_object *c = json_object_array_get_idx(a, i);
				struct k8s_container *kc = &p->containers[p->ncontainers];
				if (!jstr(c, "name"))
					continue;
				p->ncontainers++;
				kc->init = lists[l].init;
				if ((r = dup_str(c, "name", &kc->name)) < 0 ||
				    (r = dup_str(c, "image", &kc->image)) < 0)
					return r;
			}
		}
		if (!s || !json_object_is_type(s, json_type_array))
			continue;
		size_t n = json_object_array_length(s);
		for (size_t i = 0; i < n; i++) {
			struct json_object *cs = json_object_array_get_idx(s, i);
			const char *name = jstr(cs, "name");
			struct k8s_container *kc = NULL;
			struct json_object *rc;
			if (!name)
				continue;
			for (uint32_t j = first; j < p->ncontainers; j++)
				if (p->containers[j].name && strcmp(p->containers[j].name, name) == 0) {
					kc = &p->containers[j];
					break;
				}
			if (!kc) {
				/* Status without spec (metadata-only watches, odd servers): keep the ID. */
				kc = &p->containers[p->ncontainers++];
				kc->init = lists[l].init;
				if ((r = dup_str(cs, "name", &kc->name)) < 0)
					return r;
				if ((r = dup_str(cs, "image", &kc->image)) < 0)
					return r;
			}
			if (kc->id)
				continue; /* duplicate status entry */
			if ((r = dup_container_id(jstr(cs, "containerID"), &kc->id)) < 0)
				return r;
			if ((r = dup_str(cs, "imageID", &kc->image_id)) < 0)
				return r;
			rc = jget(cs, "restartCount");
			if (rc && json_object_is_type(rc, json_type_int) && json_object_get_int64(rc) > 0)
				kc->restart_count = (uint32_t)SR_MIN(json_object_get_int64(rc), (int64_t)UINT32_MAX);
			r = dup_container_id(jstr(jget(jget(cs, "lastState"), "terminated"), "containerID"),
					     &kc->last_id);
			if (r < 0)
				return r;
		}
	}
	return 0;
}

/* metadata.labels and metadata.annotations, filtered by what the kind keeps. */
static int load_labels_annotations(struct json_object *meta, enum k8s_kind kind, const struct k8s_keep *keep,
				   struct k8s_strmap *labels, struct k8s_strmap *annotations)
{
	int r = load_strmap(jget(meta, "labels"), kind, keep, true, labels);

	return r < 0 ? r : load_strmap(jget(meta, "annotations"), kind, keep, false, annotations);
}

static int pod_from_json(struct json_object *obj, const struct k8s_keep *keep, struct k8s_pod **ret)
{
	struct json_object *meta = jget(obj, "metadata"), *spec = jget(obj, "spec"), *status = jget(obj, "status");
	struct k8s_pod *p = calloc(1, sizeof(*p));
	struct json_object *owner, *hn;
	int r;

	if (!p)
		return -ENOMEM;
	if ((r = meta_required(meta, &p->name, &p->uid)) < 0)
		goto fail;
	if ((r = dup_str(meta, "namespace", &p->namespace)) < 0 ||
	    (r = dup_str(meta, "resourceVersion", &p->resource_version)) < 0)
		goto fail;
	if ((r = dup_str(spec, "nodeName", &p->node_name)) < 0 || (r = dup_str(spec, "hostname", &p->hostname)) < 0)
		goto fail;
	if ((r = dup_str(status, "startTime", &p->start_time)) < 0 || (r = dup_str(status, "podIP", &p->ip)) < 0)
		goto fail;
	hn = jget(spec, "hostNetwork");
	p->host_network = hn && json_object_is_type(hn, json_type_boolean) && json_object_get_boolean(hn);
	owner = pick_owner(meta, NULL);
	if (owner) {
		p->owner_kind = owner_kind_from_string(jstr(owner, "kind"));
		if ((r = dup_str(owner, "name", &p->owner_name)) < 0 || (r = dup_str(owner, "uid", &p->owner_uid)) < 0)
			goto fail;
	}
	if ((r = load_labels_annotations(meta, K8S_KIND_POD, keep, &p->labels, &p->annotations)) < 0)
		goto fail;
	if ((r = load_containers(p, spec, status)) < 0)
		goto fail;
	*ret = p;
	return 0;
fail:
	k8s_pod_free(p);
	return r;
}

static int namespace_from_json(struct json_object *obj, const struct k8s_keep *keep, struct k8s_namespace **ret)
{
	struct json_object *meta = jget(obj, "metadata");
	struct k8s_namespace *n = calloc(1, sizeof(*n));
	int r;

	if (!n)
		return -ENOMEM;
	if ((r = meta_required(meta, &n->name, &n->uid)) < 0 ||
	    (r = load_labels_annotations(meta, K8S_KIND_NAMESPACE, keep, &n->labels, &n->annotations)) < 0) {
		k8s_namespace_free(n);
		return r;
	}
	*ret = n;
	return 0;
}

static int node_from_json(struct json_object *obj, const struct k8s_keep *keep, struct k8s_node **ret)
{
	struct json_object *meta = jget(obj, "metadata");
	struct k8s_node *n = calloc(1, sizeof(*n));
	int r;

	if (!n)
		return -ENOMEM;
	if ((r = meta_required(meta, &n->name, &n->uid)) < 0 ||
	    (r = load_labels_annotations(meta, K8S_KIND_NODE, keep, &n->labels, &n->annotations)) < 0) {
		k8s_node_free(n);
		return r;
	}
	*ret = n;
	return 0;
}

static int replicaset_from_json(struct json_object *obj, struct k8s_replicaset **ret)
{
	struct json_object *meta = jget(obj, "metadata");
	struct k8s_replicaset *rs = calloc(1, sizeof(*rs));
	struct json_object *owner;
	int r;

	if (!rs)
		return -ENOMEM;
	if ((r = meta_required(meta, &rs->name, &rs->uid)) < 0)
		goto fail;
	if ((r = dup_str(meta, "namespace", &rs->namespace)) < 0)
		goto fail;
	owner = pick_owner(meta, "Deployment");
	if (owner) {
		if ((r = dup_str(owner, "name", &rs->deployment_name)) < 0 ||
		    (r = dup_str(owner, "uid", &rs->deployment_uid)) < 0)
			goto fail;
	}
	*ret = rs;
	return 0;
fail:
	k8s_replicaset_free(rs);
	return r;
}

int k8s_object_from_json(enum k8s_kind kind, struct json_object *obj, const struct k8s_keep *keep,
			 struct k8s_object *ret)
{
	ret->kind = kind;
	ret->ptr = NULL;
	if (!obj || !json_object_is_type(obj, json_type_object))
		return -EINVAL;
	switch (kind) {
	case K8S_KIND_POD:
		return pod_from_json(obj, keep, &ret->pod);
	case K8S_KIND_NAMESPACE:
		return namespace_from_json(obj, keep, &ret->ns);
	case K8S_KIND_REPLICASET:
		return replicaset_from_json(obj, &ret->rs);
	case K8S_KIND_NODE:
		return node_from_json(obj, keep, &ret->node);
	default:
		return -EINVAL;
	}
}

static size_t slen(const char *s)
{
	return s ? strlen(s) + 1 : 0;
}

size_t k8s_pod__bytes(const struct k8s_pod *p)
{
	size_t b = sizeof(*p);

	b += slen(p->uid) + slen(p->name) + slen(p->namespace) + slen(p->node_name) + slen(p->hostname);
	b += slen(p->start_time) + slen(p->ip) + slen(p->resource_version) + slen(p->owner_name) + slen(p->owner_uid);
	for (uint32_t i = 0; i < p->labels.n; i++)
		b += sizeof(struct sr_kv) + slen(p->labels.v[i].key) + slen(p->labels.v[i].value);
	for (uint32_t i = 0; i < p->annotations.n; i++)
		b += sizeof(struct sr_kv) + slen(p->annotations.v[i].key) + slen(p->annotations.v[i].value);
	for (uint32_t i = 0; i < p->ncontainers; i++) {
		const struct k8s_container *c = &p->containers[i];
		b += sizeof(*c) + slen(c->name) + slen(c->image) + slen(c->image_id) + slen(c->id) + slen(c->last_id);
	}
	return b;
}
