/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A string-keyed hash map for the Kubernetes caches: chained buckets, grown
 * by doubling so lookups stay O(1) as the cluster grows. Keys are copied;
 * values are the caller's (the map never frees them).
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
