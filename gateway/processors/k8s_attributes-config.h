/* SPDX-License-Identifier: Apache-2.0 */
/*
 * k8s_attributes' configuration (private to the processor): the schema, its
 * checks, and what is derived from it (API selectors, the extract rules,
 * the association rules, the API connection).
 */
#ifndef SR_GW_K8S_ATTRIBUTES_CONFIG_H
#define SR_GW_K8S_ATTRIBUTES_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/config.h"
#include "k8s-client.h"
#include "k8s-extract.h"

enum auth_type {
	AUTH_SERVICE_ACCOUNT,
	AUTH_KUBECONFIG,
	AUTH_NONE,
};

enum filter_op {
	OP_EQUALS,
	OP_NOT_EQUALS,
	OP_EXISTS,
	OP_DOES_NOT_EXIST,
};

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

struct assoc_source_config {
	int from; /* index into assoc_from_names */
	char *name;
};

struct assoc_rule_config {
	struct assoc_source_config *sources;
	uint32_t n_sources;
};

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

/* What identifies a resource's pod (pod_association sources). */
enum assoc_key {
	ASSOC_CONTAINER_ID, /* resource attribute container.id */
	ASSOC_POD_UID,	    /* resource attribute k8s.pod.uid */
	ASSOC_POD_IP,	    /* resource attribute k8s.pod.ip */
	ASSOC_CONNECTION,   /* the address of the peer that sent it (gw_resource.peer_addr) */
	ASSOC_HOST_NAME,    /* resource attribute host.name holding a pod IP, as OTLP senders in pods set it */
};

extern const char *const k8s_auth_type_names[];
extern const struct sr_field k8s_attributes_fields[];

/* Most pod_association rules. */
#define K8SATTR_MAX_ASSOC 8

/* Checks pod_association; fills keys (rule order) when not NULL. Returns the rule count or -EINVAL. */
int k8sattr_parse_association(const struct k8s_attributes_config *cfg, enum assoc_key *keys, char *err, size_t errsize);
/* Builds fieldSelector and labelSelector strings as the Collector does from filter. */
int k8sattr_build_selectors(const struct filter_config *f, char *fsel, size_t fsize, char *lsel, size_t lsize,
			    char *err, size_t errsize);
struct k8s_extract *k8sattr_make_extract(const struct k8s_attributes_config *cfg, char *err, size_t errsize);
int k8sattr_load_conn(const struct k8s_attributes_config *cfg, struct k8s_conn *conn, char *err, size_t errsize);
/* The component's validate(): every check that needs no API server. */
int k8s_attributes_validate(const void *config, const char *path, struct sr_diag *d);

#endif
