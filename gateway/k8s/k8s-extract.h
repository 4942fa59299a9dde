/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What k8s_attributes writes onto a resource once it found the pod: the
 * Collector's extract.metadata names, extract.labels / extract.annotations
 * rules, otel_annotations, and the service.* inference (docs/kubernetes.md
 * gives the precedence). An attribute that is already set and non-empty is
 * never overwritten.
 */
#ifndef SR_GW_K8S_EXTRACT_H
#define SR_GW_K8S_EXTRACT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "k8s-object.h"

struct k8s_cache;

/* Every metadata name accepted in extract.metadata, in one table. */
enum k8s_meta {
	K8S_META_NAMESPACE_NAME,
	K8S_META_POD_NAME,
	K8S_META_POD_UID,
	K8S_META_POD_HOSTNAME,
	K8S_META_POD_START_TIME,
	K8S_META_POD_IP,
	K8S_META_DEPLOYMENT_NAME,
	K8S_META_DEPLOYMENT_UID,
	K8S_META_REPLICASET_NAME,
	K8S_META_REPLICASET_UID,
	K8S_META_DAEMONSET_NAME,
	K8S_META_DAEMONSET_UID,
	K8S_META_STATEFULSET_NAME,
	K8S_META_STATEFULSET_UID,
	K8S_META_JOB_NAME,
	K8S_META_JOB_UID,
	K8S_META_CRONJOB_NAME,
	K8S_META_NODE_NAME,
	K8S_META_NODE_UID,
	K8S_META_CLUSTER_UID,
	K8S_META_CONTAINER_NAME,
	K8S_META_CONTAINER_ID,
	K8S_META_CONTAINER_IMAGE_NAME,
	K8S_META_CONTAINER_IMAGE_TAG,
	K8S_META_CONTAINER_IMAGE_REPO_DIGESTS,
	K8S_META_CONTAINER_RESTART_COUNT,
	K8S_META_SERVICE_NAME,
	K8S_META_SERVICE_NAMESPACE,
	K8S_META_SERVICE_VERSION,
	K8S_META_SERVICE_INSTANCE_ID,
	K8S_META__MAX,
};

/* Attribute names, indexed by enum k8s_meta; NULL-terminated. */
extern const char *const k8s_meta_names[];
/* The default extract.metadata (NULL-terminated). */
extern const char *const k8s_meta_default[];

enum k8s_rule_from {
	K8S_FROM_POD,
	K8S_FROM_NAMESPACE,
	K8S_FROM_NODE,
};
extern const char *const k8s_rule_from_names[]; /* "pod", "namespace", "node", NULL */

/* One extract.labels / extract.annotations entry as configured. */
struct k8s_field_rule_config {
	/* Attribute to write; $1.. refer to key_regex groups; default k8s.<from>.labels.<key>. */
	char *tag_name;
	char *key;	 /* exact key, or */
	char *key_regex; /* anchored RE2-style regex over keys */
	int from;	 /* enum k8s_rule_from */
};

struct k8s_extract_config {
	char **metadata; /* NULL: k8s_meta_default */
	uint32_t metadata_count;
	bool metadata_set; /* metadata given (even empty) */
	struct k8s_field_rule_config *labels;
	uint32_t labels_count;
	struct k8s_field_rule_config *annotations;
	uint32_t annotations_count;
	bool otel_annotations;
	bool deployment_name_from_replicaset;
};

struct k8s_extract;

/* Returns NULL with errno EINVAL and errbuf naming the key ("metadata[2]: unknown name \"k8s.foo\""). */
struct k8s_extract *k8s_extract_new(const struct k8s_extract_config *cfg, char *errbuf, size_t errsize);
void k8s_extract_free(struct k8s_extract *x);

/* Which labels and annotations the cache must keep for these rules. */
const struct k8s_keep *k8s_extract__keep(const struct k8s_extract *x);
bool k8s_extract__wants(const struct k8s_extract *x, enum k8s_meta m);
/* Whether namespaces / nodes / ReplicaSets need watching for what is extracted. */
bool k8s_extract__needs_namespaces(const struct k8s_extract *x);
/* True when namespaces are needed only for k8s.cluster.uid (kube-system alone is enough). */
bool k8s_extract__needs_only_cluster_uid(const struct k8s_extract *x);
bool k8s_extract__needs_nodes(const struct k8s_extract *x);
bool k8s_extract__needs_replicasets(const struct k8s_extract *x);

/* Access to the attributes being enriched (a resource of the internal model, or a test's list). */
struct k8s_attr_io {
	/* The current value of key, or NULL. */
	const char *(*get)(void *userdata, const char *key);
	/* Sets key (copying); called only when the current value is absent or empty. */
	int (*set)(void *userdata, const char *key, const char *value);
	void *userdata;
};

/*
 * Writes the pod's attributes (and the container's, when known) through io.
 * cache supplies namespaces, ReplicaSets, nodes and the cluster UID.
 * Returns the number of attributes set, or -ENOMEM.
 */
int k8s_extract__apply(const struct k8s_extract *x, const struct k8s_cache *cache, const struct k8s_pod *pod,
		       const struct k8s_container *ctr, const struct k8s_attr_io *io);

/* The workload that owns the pod, as extraction sees it. */
struct k8s_workload {
	const char *deployment_name, *deployment_uid;
	const char *replicaset_name, *replicaset_uid;
	const char *statefulset_name, *statefulset_uid;
	const char *daemonset_name, *daemonset_uid;
	const char *job_name, *job_uid;
	char cronjob_name[256];
	char deployment_buf[256];
};
void k8s_workload_resolve(const struct k8s_pod *pod, const struct k8s_cache *cache, bool from_replicaset_name,
			  struct k8s_workload *ret);

/*
 * Splits an image reference ("reg:5000/a/b:1.2@sha256:..") into name and
 * tag ("latest" when there is neither tag nor digest, "" when only a digest).
 */
void k8s_image_split(const char *image, char *name, size_t namesize, char *tag, size_t tagsize);

#endif
