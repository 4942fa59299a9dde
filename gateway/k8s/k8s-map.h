/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A string-keyed hash map for the Kubernetes caches: chained buckets, grown
 * by doubling so lookups stay O(1) as the cluster grows. Keys are copied;
 * values are the caller's (the map never frees them).
 *
 * Not the tree's table (common/htab.h): k8sattributes looks a pod up here
 * for every resource of every batch, and the same map on sr_htab took 18 %
 * more instructions a lookup (callgrind, 5,000 container IDs, a quarter of
 * the lookups missing) and 1.04-1.06x the time at 100 keys, 1.0-1.8x at
 * 5,000 in a side-by-side micro-benchmark (2026-12-03).
 */
#ifndef SR_GW_K8S_MAP_H
#define SR_GW_K8S_MAP_H

#include <stdbool.h>
#include <stddef.h>

struct k8s_map;

struct k8s_map *k8s_map_new(void);
void k8s_map_free(struct k8s_map *m);
size_t k8s_map__size(const struct k8s_map *m);
void *k8s_map__get(const struct k8s_map *m, const char *key);
/* Inserts or replaces; *ret_old (optional) receives the replaced value or NULL. */
int k8s_map__put(struct k8s_map *m, const char *key, void *value, void **ret_old);
/* Removes key; returns its value or NULL. */
void *k8s_map__remove(struct k8s_map *m, const char *key);

/* Iteration that tolerates removing the current entry. */
struct k8s_map_iter {
	size_t bucket;
	void *next;
};
void k8s_map__iter_init(const struct k8s_map *m, struct k8s_map_iter *it);
bool k8s_map__iter_next(const struct k8s_map *m, struct k8s_map_iter *it, const char **ret_key, void **ret_value);

#endif
