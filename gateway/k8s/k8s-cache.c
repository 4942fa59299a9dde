// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/macro.h"
#include "k8s-cache.h"
#include "k8s-map.h"

struct pod_entry {
	struct k8s_pod *pod;
	uint64_t deleted_at; /* 0: live */
	uint32_t gen;
};

struct obj_entry {
	void *obj;
	uint32_t gen;
};

struct k8s_cache {
	struct k8s_cache_limits limits;
	struct k8s_map *pods;	     /* uid -> pod_entry */
	struct k8s_map *containers;  /* container id -> pod_entry */
	struct k8s_map *ips;	     /* pod IP -> pod_entry (pods on the host network excluded) */
	struct k8s_map *namespaces;  /* name -> obj_entry(k8s_namespace) */
	struct k8s_map *replicasets; /* "ns/name" -> obj_entry(k8s_replicaset) */
	struct k8s_map *nodes;	     /* name -> obj_entry(k8s_node) */
	uint32_t gen[K8S_KIND_MAX];
	uint64_t deleted;
	uint64_t bytes;
	uint64_t lookups, misses, refused, evicted;
};

struct k8s_cache *k8s_cache_new(const struct k8s_cache_limits *limits)
{
	struct k8s_cache *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	if (limits)
		c->limits = *limits;
	if (!c->limits.max_pods)
		c->limits.max_pods = K8S_CACHE_DEFAULT_MAX_PODS;
	c->pods = k8s_map_new();
	c->containers = k8s_map_new();
	c->ips = k8s_map_new();
	c->namespaces = k8s_map_new();
	c->replicasets = k8s_map_new();
	c->nodes = k8s_map_new();
	if (!c->pods || !c->containers || !c->ips || !c->namespaces || !c->replicasets || !c->nodes) {
		k8s_cache_free(c);
		errno = ENOMEM;
		return NULL;
	}
	return c;
}

static void free_objs(struct k8s_map *m, enum k8s_kind kind)
{
	struct k8s_map_iter it;
	const char *k;
	void *v;

	if (!m)
		return;
	k8s_map__iter_init(m, &it);
	while (k8s_map__iter_next(m, &it, &k, &v)) {
		struct obj_entry *e = v;
		struct k8s_object o = { .kind = kind, .ptr = e->obj };
		k8s_object_clear(&o);
		free(e);
	}
	k8s_map_free(m);
}

void k8s_cache_free(struct k8s_cache *c)
{
	struct k8s_map_iter it;
	const char *k;
	void *v;

	if (!c)
		return;
	if (c->pods) {
		k8s_map__iter_init(c->pods, &it);
		while (k8s_map__iter_next(c->pods, &it, &k, &v)) {
			struct pod_entry *e = v;
			k8s_pod_free(e->pod);
			free(e);
		}
		k8s_map_free(c->pods);
	}
	k8s_map_free(c->containers);
	k8s_map_free(c->ips);
	free_objs(c->namespaces, K8S_KIND_NAMESPACE);
	free_objs(c->replicasets, K8S_KIND_REPLICASET);
	free_objs(c->nodes, K8S_KIND_NODE);
	free(c);
}

static void unindex_pod(struct k8s_cache *c, struct pod_entry *e)
{
	for (uint32_t i = 0; i < e->pod->ncontainers; i++) {
		const char *ids[2] = { e->pod->containers[i].id, e->pod->containers[i].last_id };
		for (int j = 0; j < 2; j++)
			if (ids[j] && k8s_map__get(c->containers, ids[j]) == e)
				k8s_map__remove(c->containers, ids[j]);
	}
	if (e->pod->ip && k8s_map__get(c->ips, e->pod->ip) == e)
		k8s_map__remove(c->ips, e->pod->ip);
}

/*
 * A pod's IP names it only while it is not on the host network (those share
 * the node's address). An address is reused once a pod ends: a live pod
 * takes it from a deleted one, never the other way round.
 */
static int index_ip(struct k8s_cache *c, struct pod_entry *e)
{
	struct pod_entry *old;

	if (!e->pod->ip || !*e->pod->ip || e->pod->host_network)
		return 0;
	old = k8s_map__get(c->ips, e->pod->ip);
	if (old && old != e && e->deleted_at && !old->deleted_at)
		return 0;
	return k8s_map__put(c->ips, e->pod->ip, e, NULL);
}

static int index_pod(struct k8s_cache *c, struct pod_entry *e)
{
	for (uint32_t i = 0; i < e->pod->ncontainers; i++) {
		const char *ids[2] = { e->pod->containers[i].id, e->pod->containers[i].last_id };
		for (int j = 0; j < 2; j++) {
			void *old = NULL;
			if (!ids[j])
				continue;
			/* A current ID wins over a previous run's ID held by another entry. */
			if (j == 1 && k8s_map__get(c->containers, ids[j]))
				continue;
			int r = k8s_map__put(c->containers, ids[j], e, &old);
			if (r < 0)
				return r;
		}
	}
	return index_ip(c, e);
}

static void drop_pod(struct k8s_cache *c, struct pod_entry *e)
{
	unindex_pod(c, e);
	k8s_map__remove(c->pods, e->pod->uid);
	if (e->deleted_at)
		c->deleted--;
	c->bytes -= k8s_pod__bytes(e->pod);
	k8s_pod_free(e->pod);
	free(e);
}

static void mark_deleted(struct k8s_cache *c, struct pod_entry *e, uint64_t now_ns)
{
	if (e->deleted_at)
		return;
	e->deleted_at = now_ns ? now_ns : 1;
	c->deleted++;
}

/* Makes room for one pod by dropping the deleted pod closest to expiry. */
static bool evict_one(struct k8s_cache *c)
{
	struct k8s_map_iter it;
	struct pod_entry *oldest = NULL;
	const char *k;
	void *v;

	if (!c->deleted)
		return false;
	k8s_map__iter_init(c->pods, &it);
	while (k8s_map__iter_next(c->pods, &it, &k, &v)) {
		struct pod_entry *e = v;
		if (e->deleted_at && (!oldest || e->deleted_at < oldest->deleted_at))
			oldest = e;
	}
	if (!oldest)
		return false;
	drop_pod(c, oldest);
	c->evicted++;
	return true;
}

static int apply_pod(struct k8s_cache *c, struct k8s_event *ev, uint64_t now_ns)
{
	struct k8s_pod *p = ev->object.pod;
	struct pod_entry *e = k8s_map__get(c->pods, p->uid);
	int r;

	if (ev->type == K8S_EVENT_DELETED) {
		if (!e)
			return 0;
		/* The final state may carry container IDs the last update did not. */
		unindex_pod(c, e);
		c->bytes -= k8s_pod__bytes(e->pod);
		k8s_pod_free(e->pod);
		e->pod = p;
		ev->object.pod = NULL;
		c->bytes += k8s_pod__bytes(p);
		mark_deleted(c, e, now_ns);
		return index_pod(c, e);
	}
	if (e) {
		unindex_pod(c, e);
		c->bytes -= k8s_pod__bytes(e->pod);
		k8s_pod_free(e->pod);
		e->pod = p;
		ev->object.pod = NULL;
		c->bytes += k8s_pod__bytes(p);
		e->gen = c->gen[K8S_KIND_POD];
		if (e->deleted_at) {
			/* Seen again after a relist missed it: live after all. */
			e->deleted_at = 0;
			c->deleted--;
		}
		return index_pod(c, e);
	}
	if (k8s_map__size(c->pods) >= c->limits.max_pods && !evict_one(c)) {
		c->refused++;
		return 0;
	}
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->pod = p;
	e->gen = c->gen[K8S_KIND_POD];
	r = k8s_map__put(c->pods, p->uid, e, NULL);
	if (r < 0) {
		free(e);
		return r;
	}
	ev->object.pod = NULL;
	c->bytes += k8s_pod__bytes(p);
	return index_pod(c, e);
}

static const char *obj_key(enum k8s_kind kind, void *obj, char *buf, size_t size)
{
	switch (kind) {
	case K8S_KIND_NAMESPACE:
		return ((struct k8s_namespace *)obj)->name;
	case K8S_KIND_NODE:
		return ((struct k8s_node *)obj)->name;
	case K8S_KIND_REPLICASET: {
		struct k8s_replicaset *rs = obj;
		snprintf(buf, size, "%s/%s", rs->namespace ? rs->namespace : "", rs->name);
		return buf;
	}
	default:
		return NULL;
	}
}

static struct k8s_map *obj_map(struct k8s_cache *c, enum k8s_kind kind)
{
	switch (kind) {
	case K8S_KIND_NAMESPACE:
		return c->namespaces;
	case K8S_KIND_NODE:
		return c->nodes;
	case K8S_KIND_REPLICASET:
		return c->replicasets;
	default:
		return NULL;
	}
}

static void free_obj_entry(enum k8s_kind kind, struct obj_entry *e)
{
	struct k8s_object o = { .kind = kind, .ptr = e->obj };

	k8s_object_clear(&o);
	free(e);
}

static int apply_obj(struct k8s_cache *c, struct k8s_event *ev)
{
	enum k8s_kind kind = ev->object.kind;
	struct k8s_map *m = obj_map(c, kind);
	char buf[600];
	const char *key = obj_key(kind, ev->object.ptr, buf, sizeof(buf));
	struct obj_entry *e;

	if (!m || !key)
		return -EINVAL;
	if (ev->type == K8S_EVENT_DELETED) {
		e = k8s_map__remove(m, key);
		if (e)
			free_obj_entry(kind, e);
		return 0;
	}
	e = k8s_map__get(m, key);
	if (e) {
		struct k8s_object old = { .kind = kind, .ptr = e->obj };
		k8s_object_clear(&old);
		e->obj = ev->object.ptr;
		e->gen = c->gen[kind];
		ev->object.ptr = NULL;
		return 0;
	}
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->obj = ev->object.ptr;
	e->gen = c->gen[kind];
	int r = k8s_map__put(m, key, e, NULL);
	if (r < 0) {
		free(e);
		return r;
	}
	ev->object.ptr = NULL;
	return 0;
}

int k8s_cache__apply(struct k8s_cache *c, struct k8s_event *ev, uint64_t now_ns)
{
	if (!ev->object.ptr)
		return 0;
	if (ev->type != K8S_EVENT_ADDED && ev->type != K8S_EVENT_MODIFIED && ev->type != K8S_EVENT_DELETED)
		return 0;
	if (ev->object.kind == K8S_KIND_POD)
		return apply_pod(c, ev, now_ns);
	return apply_obj(c, ev);
}

void k8s_cache__resync_begin(struct k8s_cache *c, enum k8s_kind kind)
{
	if ((unsigned)kind < K8S_KIND_MAX)
		c->gen[kind]++;
}

void k8s_cache__resync_end(struct k8s_cache *c, enum k8s_kind kind, uint64_t now_ns)
{
	struct k8s_map_iter it;
	const char *k;
	void *v;

	if (kind == K8S_KIND_POD) {
		k8s_map__iter_init(c->pods, &it);
		while (k8s_map__iter_next(c->pods, &it, &k, &v)) {
			struct pod_entry *e = v;
			if (e->gen != c->gen[kind])
				mark_deleted(c, e, now_ns);
		}
		return;
	}
	struct k8s_map *m = obj_map(c, kind);
	if (!m)
		return;
	k8s_map__iter_init(m, &it);
	while (k8s_map__iter_next(m, &it, &k, &v)) {
		struct obj_entry *e = v;
		if (e->gen == c->gen[kind])
			continue;
		k8s_map__remove(m, k);
		free_obj_entry(kind, e);
	}
}

void k8s_cache__expire(struct k8s_cache *c, uint64_t now_ns)
{
	struct k8s_map_iter it;
	const char *k;
	void *v;

	if (!c->deleted)
		return;
	k8s_map__iter_init(c->pods, &it);
	while (k8s_map__iter_next(c->pods, &it, &k, &v)) {
		struct pod_entry *e = v;
		uint64_t grace = c->limits.deleted_grace_ns;
		if (e->deleted_at && now_ns >= e->deleted_at && now_ns - e->deleted_at >= grace)
			drop_pod(c, e);
	}
}

const struct k8s_pod *k8s_cache__pod_by_container(struct k8s_cache *c, const char *container_id,
						  const struct k8s_container **ret_container)
{
	const char *id = k8s_container_id_strip(container_id);
	struct pod_entry *e;

	if (ret_container)
		*ret_container = NULL;
	/* An empty ID never matches (the Collector can match "" to a random pod). */
	if (!id)
		return NULL;
	c->lookups++;
	e = k8s_map__get(c->containers, id);
	if (!e) {
		c->misses++;
		return NULL;
	}
	if (ret_container)
		for (uint32_t i = 0; i < e->pod->ncontainers; i++) {
			const struct k8s_container *ct = &e->pod->containers[i];
			if ((ct->id && strcmp(ct->id, id) == 0) || (ct->last_id && strcmp(ct->last_id, id) == 0)) {
				*ret_container = ct;
				break;
			}
		}
	return e->pod;
}

const struct k8s_pod *k8s_cache__pod_by_uid(struct k8s_cache *c, const char *uid)
{
	struct pod_entry *e;

	if (!uid || !*uid)
		return NULL;
	c->lookups++;
	e = k8s_map__get(c->pods, uid);
	if (!e) {
		c->misses++;
		return NULL;
	}
	return e->pod;
}

const struct k8s_pod *k8s_cache__pod_by_ip(struct k8s_cache *c, const char *ip)
{
	struct pod_entry *e;

	if (!ip || !*ip)
		return NULL;
	c->lookups++;
	e = k8s_map__get(c->ips, ip);
	if (!e) {
		c->misses++;
		return NULL;
	}
	return e->pod;
}

static void *obj_get(struct k8s_map *m, const char *key)
{
	struct obj_entry *e = key ? k8s_map__get(m, key) : NULL;

	return e ? e->obj : NULL;
}

const struct k8s_namespace *k8s_cache__namespace(const struct k8s_cache *c, const char *name)
{
	return obj_get(c->namespaces, name);
}

const struct k8s_replicaset *k8s_cache__replicaset(const struct k8s_cache *c, const char *ns, const char *name)
{
	char key[600];

	if (!name)
		return NULL;
	snprintf(key, sizeof(key), "%s/%s", ns ? ns : "", name);
	return obj_get(c->replicasets, key);
}

const struct k8s_node *k8s_cache__node(const struct k8s_cache *c, const char *name)
{
	return obj_get(c->nodes, name);
}

const char *k8s_cache__cluster_uid(const struct k8s_cache *c)
{
	const struct k8s_namespace *ns = k8s_cache__namespace(c, "kube-system");

	return ns ? ns->uid : NULL;
}

void k8s_cache__stats(const struct k8s_cache *c, struct k8s_cache_stats *ret)
{
	memset(ret, 0, sizeof(*ret));
	ret->pods = k8s_map__size(c->pods);
	ret->pods_deleted = c->deleted;
	ret->containers = k8s_map__size(c->containers);
	ret->ips = k8s_map__size(c->ips);
	ret->namespaces = k8s_map__size(c->namespaces);
	ret->replicasets = k8s_map__size(c->replicasets);
	ret->nodes = k8s_map__size(c->nodes);
	ret->bytes = c->bytes;
	ret->lookups = c->lookups;
	ret->misses = c->misses;
	ret->pods_refused = c->refused;
	ret->pods_evicted = c->evicted;
}
