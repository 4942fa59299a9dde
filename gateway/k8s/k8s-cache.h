/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the gateway knows about the cluster: pods (with an index by every
 * container ID, init containers included, by pod UID and by pod IP), namespaces,
 * ReplicaSets (for Deployment names) and nodes. Fed by the client's LIST and
 * WATCH events; read by k8s_attributes. Single-threaded (the loop thread).
 *
 * The index is always built, whatever is extracted (the Collector leaves it
 * empty unless a container attribute is asked for, so container.id lookups
 * silently fail). Deleted pods stay for deleted_grace so that samples
 * taken just before a pod ended, and still in flight, are labelled.
 */
#ifndef SR_GW_K8S_CACHE_H
#define SR_GW_K8S_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "k8s-object.h"
#include "k8s-watch.h"

/* Default bounds (k8s_attributes.cache.*). */
#define K8S_CACHE_DEFAULT_MAX_PODS	   65536u
#define K8S_CACHE_DEFAULT_DELETED_GRACE_NS (120ull * 1000000000ull)

struct k8s_cache_limits {
	size_t max_pods; /* pods held, live and deleted; 0: default */
	uint64_t deleted_grace_ns;
};

struct k8s_cache_stats {
	uint64_t pods;	       /* held, live + deleted-in-grace */
	uint64_t pods_deleted; /* of which deleted, kept for the grace period */
	uint64_t containers;   /* container IDs indexed */
	uint64_t ips;	       /* pod IPs indexed */
	uint64_t namespaces, replicasets, nodes;
	uint64_t bytes;		  /* approximate heap of pod records */
	uint64_t lookups, misses; /* association attempts and failures */
	uint64_t pods_refused;	  /* pods not stored because max_pods was reached */
	uint64_t pods_evicted;	  /* deleted pods dropped before their grace ended, to make room */
};

struct k8s_cache;

struct k8s_cache *k8s_cache_new(const struct k8s_cache_limits *limits);
void k8s_cache_free(struct k8s_cache *c);

/*
 * Applies one event (ADDED, MODIFIED, DELETED) and takes the record from
 * ev->object (leaving it NULL). now_ns: CLOCK_MONOTONIC. Returns 0 or -ENOMEM.
 */
int k8s_cache__apply(struct k8s_cache *c, struct k8s_event *ev, uint64_t now_ns);

/*
 * A relist replaces the cache's view of a kind: begin, apply every listed
 * object, end. end treats what was not listed as deleted at now_ns.
 */
void k8s_cache__resync_begin(struct k8s_cache *c, enum k8s_kind kind);
void k8s_cache__resync_end(struct k8s_cache *c, enum k8s_kind kind, uint64_t now_ns);

/* Forgets deleted pods whose grace period ended. */
void k8s_cache__expire(struct k8s_cache *c, uint64_t now_ns);

/*
 * Association. container_id may carry a runtime prefix ("containerd://");
 * ret_container (optional) receives the matching container. Counts lookups
 * and misses.
 */
const struct k8s_pod *k8s_cache__pod_by_container(struct k8s_cache *c, const char *container_id,
						  const struct k8s_container **ret_container);
const struct k8s_pod *k8s_cache__pod_by_uid(struct k8s_cache *c, const char *uid);
/* By status.podIP; pods on the host network are not indexed (they share the node's address). */
const struct k8s_pod *k8s_cache__pod_by_ip(struct k8s_cache *c, const char *ip);

const struct k8s_namespace *k8s_cache__namespace(const struct k8s_cache *c, const char *name);
const struct k8s_replicaset *k8s_cache__replicaset(const struct k8s_cache *c, const char *ns, const char *name);
const struct k8s_node *k8s_cache__node(const struct k8s_cache *c, const char *name);
/* The kube-system namespace's UID, which the Collector reports as k8s.cluster.uid. */
const char *k8s_cache__cluster_uid(const struct k8s_cache *c);

void k8s_cache__stats(const struct k8s_cache *c, struct k8s_cache_stats *ret);

#endif
