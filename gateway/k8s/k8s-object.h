/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Compact records of the Kubernetes objects the gateway caches. A pod's JSON
 * is tens of kilobytes (managedFields, specs, probes); the record keeps only
 * what association and extraction use, and of the labels and annotations
 * only the keys some rule can read (struct k8s_keep). This is how the cache
 * stays small on large clusters (docs/kubernetes.md, "Memory").
 */
#ifndef SR_GW_K8S_OBJECT_H
#define SR_GW_K8S_OBJECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct json_object;
struct sr_kv;

enum k8s_kind {
	K8S_KIND_POD,
	K8S_KIND_NAMESPACE,
	K8S_KIND_REPLICASET,
	K8S_KIND_NODE,
	K8S_KIND_MAX,
};

const char *k8s_kind_to_string(enum k8s_kind kind);

/* Which label and annotation keys are worth storing. */
struct k8s_keep {
	/* Returns true when key (of a pod, namespace or node label/annotation) is used. */
	bool (*label)(void *userdata, enum k8s_kind kind, const char *key);
	bool (*annotation)(void *userdata, enum k8s_kind kind, const char *key);
	void *userdata;
};

struct k8s_strmap {
	struct sr_kv *v;
	uint32_t n;
};
const char *k8s_strmap__get(const struct k8s_strmap *m, const char *key);

/* A container ID as runtimes report it, without its "containerd://" style prefix. */
#define K8S_CONTAINER_ID_MAX 128

struct k8s_container {
	char *name;
	char *image;	/* spec image, "registry/repo:tag" or "@sha256:..." */
	char *image_id; /* status imageID: repo digest */
	char *id;	/* current container ID (prefix stripped), may be NULL */
	char *last_id;	/* previous run's ID (lastState.terminated), may be NULL */
	uint32_t restart_count;
	bool init;
};

enum k8s_owner_kind {
	K8S_OWNER_NONE,
	K8S_OWNER_REPLICASET,
	K8S_OWNER_STATEFULSET,
	K8S_OWNER_DAEMONSET,
	K8S_OWNER_JOB,
	K8S_OWNER_OTHER,
};

struct k8s_pod {
	char *uid;
	char *name;
	char *namespace;
	char *node_name;
	char *hostname;
	char *start_time; /* RFC 3339 as the API gives it */
	char *ip;
	char *resource_version;
	enum k8s_owner_kind owner_kind;
	char *owner_name;
	char *owner_uid;
	struct k8s_strmap labels;
	struct k8s_strmap annotations;
	struct k8s_container *containers;
	uint32_t ncontainers;
	bool host_network;
};

struct k8s_namespace {
	char *name;
	char *uid;
	struct k8s_strmap labels;
	struct k8s_strmap annotations;
};

struct k8s_replicaset {
	char *namespace;
	char *name;
	char *uid;
	char *deployment_name; /* owner Deployment, NULL if none */
	char *deployment_uid;
};

struct k8s_node {
	char *name;
	char *uid;
	struct k8s_strmap labels;
	struct k8s_strmap annotations;
};

/* One decoded object of any kind. */
struct k8s_object {
	enum k8s_kind kind;
	union {
		struct k8s_pod *pod;
		struct k8s_namespace *ns;
		struct k8s_replicaset *rs;
		struct k8s_node *node;
		void *ptr;
	};
};

/*
 * Builds the record of kind from a decoded API object. keep may be NULL
 * (store every label and annotation). Returns 0, -EINVAL when a required
 * field (metadata.name, metadata.uid) is missing or of the wrong type, or
 * -ENOMEM.
 */
int k8s_object_from_json(enum k8s_kind kind, struct json_object *obj, const struct k8s_keep *keep,
			 struct k8s_object *ret);
void k8s_object_clear(struct k8s_object *o);

void k8s_pod_free(struct k8s_pod *p);
void k8s_namespace_free(struct k8s_namespace *n);
void k8s_replicaset_free(struct k8s_replicaset *r);
void k8s_node_free(struct k8s_node *n);

/*
 * Strips a runtime prefix ("containerd://", "cri-o://", "docker://", any
 * "<scheme>://") and returns a pointer into id; NULL for an empty ID.
 */
const char *k8s_container_id_strip(const char *id);

/* Approximate heap bytes of a pod record, for the cache's memory metric. */
size_t k8s_pod__bytes(const struct k8s_pod *p);

#endif
