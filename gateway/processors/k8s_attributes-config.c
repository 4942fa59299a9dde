// SPDX-License-Identifier: Apache-2.0
/* k8s_attributes' configuration schema and checks (k8s_attributes-config.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "k8s_attributes-config.h"
#include "core/regex.h"

const char *const k8s_auth_type_names[] = { "serviceAccount", "kubeConfig", "none", NULL };

static const char *const filter_op_names[] = { "equals", "not-equals", "exists", "does-not-exist", NULL };

/* pod_association as in the Collector: rules tried in order, each a list of sources that must all be present. */

static const char *const assoc_from_names[] = { "resource_attribute", "connection", NULL };

static const struct sr_field selector_fields[] = {
	SR_FIELD_STR("key", struct selector_config, key, .required = true, .doc = "Label or field name."),
	SR_FIELD_STR("value", struct selector_config, value, .doc = "Value compared with (equals, not-equals)."),
	SR_FIELD_ENUMERATION("op", struct selector_config, op, filter_op_names, .def = "equals",
			     .doc = "equals, not-equals, exists or does-not-exist (the last two for labels only)."),
	SR_FIELD_END,
};

static const struct sr_field filter_fields[] = {
	SR_FIELD_STR("node", struct filter_config, node,
		     .doc = "Only pods on this node (fieldSelector spec.nodeName), e.g. \"${env:K8S_NODE_NAME}\"."),
	SR_FIELD_STR("node_from_env_var", struct filter_config, node_from_env_var,
		     .doc = "Name of an environment variable holding the node name (the Collector's spelling)."),
	SR_FIELD_STR("namespace", struct filter_config, namespace, .doc = "Only pods in this namespace."),
	SR_FIELD_MAPLIST("labels", struct filter_config, labels, n_labels, struct selector_config, selector_fields,
			 .doc = "Label selector terms, all of which must hold."),
	SR_FIELD_MAPLIST("fields", struct filter_config, fields, n_fields, struct selector_config, selector_fields,
			 .doc = "Field selector terms (equals / not-equals), all of which must hold."),
	SR_FIELD_END,
};

static const struct sr_field rule_fields[] = {
	SR_FIELD_STR("tag_name", struct k8s_field_rule_config, tag_name,
		     .doc = "Attribute to set; $1.. are key_regex groups. Default k8s.<from>.labels.<key> "
			    "(annotations: k8s.<from>.annotations.<key>)."),
	SR_FIELD_STR("key", struct k8s_field_rule_config, key, .doc = "The label/annotation key (or key_regex)."),
	SR_FIELD_STR("key_regex", struct k8s_field_rule_config, key_regex,
		     .doc = "Anchored RE2-style regular expression over keys (or key)."),
	SR_FIELD_ENUMERATION("from", struct k8s_field_rule_config, from, k8s_rule_from_names, .def = "pod",
			     .doc = "pod, namespace or node."),
	SR_FIELD_END,
};

static const struct sr_field extract_fields[] = {
	SR_FIELD_STRLIST("metadata", struct extract_config, metadata, n_metadata,
			 .def = "[k8s.namespace.name, k8s.pod.name, k8s.node.name, k8s.container.name, "
				"k8s.deployment.name, k8s.statefulset.name, k8s.daemonset.name, k8s.cronjob.name, "
				"k8s.job.name, service.name, service.namespace]",
			 .doc = "Attributes to extract (the Collector's names; docs/kubernetes.md lists all)."),
	SR_FIELD_MAPLIST("labels", struct extract_config, labels, n_labels, struct k8s_field_rule_config, rule_fields,
			 .doc = "Labels to copy into attributes."),
	SR_FIELD_MAPLIST("annotations", struct extract_config, annotations, n_annotations, struct k8s_field_rule_config,
			 rule_fields, .doc = "Annotations to copy into attributes."),
	SR_FIELD_BOOLEAN("otel_annotations", struct extract_config, otel_annotations, .def = "false",
			 .doc = "Pod annotations resource.opentelemetry.io/<key> become attribute <key>."),
	SR_FIELD_BOOLEAN("deployment_name_from_replicaset", struct extract_config, deployment_name_from_replicaset,
			 .def = "false",
			 .doc = "Derive k8s.deployment.name by trimming the ReplicaSet name instead of watching "
				"ReplicaSets."),
	SR_FIELD_END,
};

static const struct sr_field cache_fields[] = {
	SR_FIELD_U64("max_pods", struct cache_config, max_pods, .def = "65536", .min = 1, .max = 10000000,
		     .doc = "Pods held (live and recently deleted); past it new pods are not cached (counted)."),
	SR_FIELD_DUR("deleted_grace", struct cache_config, deleted_grace, .def = "2m",
		     .doc = "How long a deleted pod still labels late samples."),
	SR_FIELD_END,
};

static const struct sr_field assoc_source_fields[] = {
	SR_FIELD_ENUMERATION("from", struct assoc_source_config, from, assoc_from_names, .def = "resource_attribute",
			     .doc = "resource_attribute, or connection: the IP address of the peer that sent the data "
				    "(OTLP senders; never a stackrelay agent, which is not the workload)."),
	SR_FIELD_STR("name", struct assoc_source_config, name,
		     .doc = "resource_attribute: container.id, k8s.pod.uid, k8s.pod.ip, or host.name (matched as a pod "
			    "IP)."),
	SR_FIELD_END,
};

static const struct sr_field assoc_rule_fields[] = {
	SR_FIELD_MAPLIST("sources", struct assoc_rule_config, sources, n_sources, struct assoc_source_config,
			 assoc_source_fields, .min = 1, .max = 4, .doc = "Attributes identifying the pod."),
	SR_FIELD_END,
};

static const struct sr_field exclude_pod_fields[] = {
	SR_FIELD_STR("name", struct exclude_pod_config, name, .required = true,
		     .doc = "Regular expression (unanchored, as in the Collector) over pod names."),
	SR_FIELD_END,
};

static const struct sr_field exclude_fields[] = {
	SR_FIELD_MAPLIST("pods", struct exclude_config, pods, n_pods, struct exclude_pod_config, exclude_pod_fields,
			 .doc = "Pods whose resources are left unlabelled."),
	SR_FIELD_END,
};

const struct sr_field k8s_attributes_fields[] = {
	SR_FIELD_ENUMERATION("auth_type", struct k8s_attributes_config, auth_type, k8s_auth_type_names,
			     .def = "serviceAccount",
			     .doc = "serviceAccount (in a pod), kubeConfig (a kubeconfig file) or none (no "
				    "credentials, TLS still verified against the service account CA when present)."),
	SR_FIELD_STR("kube_config_path", struct k8s_attributes_config, kube_config_path,
		     .doc = "kubeConfig: the file; default $KUBECONFIG, then ~/.kube/config."),
	SR_FIELD_STR("context", struct k8s_attributes_config, context,
		     .doc = "kubeConfig: the context to use; default current-context."),
	SR_FIELD_STR("endpoint", struct k8s_attributes_config, endpoint,
		     .doc = "API server URL overriding the one from the environment or kubeconfig."),
	SR_FIELD_BOOLEAN("passthrough", struct k8s_attributes_config, passthrough, .def = "false",
			 .doc = "Do not contact the API server; pass batches on unchanged."),
	SR_FIELD_MAP("filter", struct k8s_attributes_config, filter, struct filter_config, filter_fields,
		     .doc = "Which pods to watch."),
	SR_FIELD_MAP("extract", struct k8s_attributes_config, extract, struct extract_config, extract_fields,
		     .doc = "What to add to each resource."),
	SR_FIELD_MAP("cache", struct k8s_attributes_config, cache, struct cache_config, cache_fields,
		     .doc = "Bounds of the pod cache."),
	SR_FIELD_BOOLEAN("wait_for_metadata", struct k8s_attributes_config, wait_for_metadata, .def = "true",
			 .doc = "Hold batches until the first complete list of pods instead of exporting them "
				"unlabeled."),
	SR_FIELD_DUR("wait_for_metadata_timeout", struct k8s_attributes_config, wait_for_metadata_timeout, .def = "10s",
		     .doc = "Longest hold; then batches go on with what is known (logged, counted)."),
	SR_FIELD_U64("wait_for_metadata_max_samples", struct k8s_attributes_config, wait_for_metadata_max_samples,
		     .def = "1000000", .min = 1, .max = 1000000000,
		     .doc = "Sample records held at most while waiting; past it the oldest batch goes on."),
	SR_FIELD_MAPLIST("pod_association", struct k8s_attributes_config, pod_association, n_pod_association,
			 struct assoc_rule_config, assoc_rule_fields, .max = 8,
			 .doc = "How a resource is matched to a pod, rules tried in order; default container.id, then "
				"k8s.pod.uid, then the connection."),
	SR_FIELD_MAP("exclude", struct k8s_attributes_config, exclude, struct exclude_config, exclude_fields,
		     .doc = "Pods not to label."),
	SR_FIELD_END,
};

/* Checks pod_association; fills keys (rule order) when not NULL. Returns the rule count or -EINVAL. */
int k8sattr_parse_association(const struct k8s_attributes_config *cfg, enum assoc_key *keys, char *err, size_t errsize)
{
	if (cfg->n_pod_association > K8SATTR_MAX_ASSOC) {
		snprintf(err, errsize, "pod_association: at most %d rules", K8SATTR_MAX_ASSOC);
		return -EINVAL;
	}
	for (uint32_t i = 0; i < cfg->n_pod_association; i++) {
		const struct assoc_rule_config *rule = &cfg->pod_association[i];
		/*
		 * A rule with several sources needs all of them to identify one
		 * pod; every key known here identifies a pod alone, so only
		 * single-source rules make sense.
		 */
		if (rule->n_sources != 1) {
			snprintf(err, errsize,
				 "pod_association[%u].sources: one source per rule (container.id, k8s.pod.uid, "
				 "k8s.pod.ip and the connection each identify a pod)",
				 i);
			return -EINVAL;
		}
		const struct assoc_source_config *src = &rule->sources[0];
		enum assoc_key key;
		if (src->from == 1) {
			/* The Collector ignores name here; so do we, unless it says something else. */
			if (src->name && *src->name && strcmp(src->name, "ip") != 0 &&
			    strcmp(src->name, "k8s.pod.ip") != 0) {
				snprintf(err, errsize,
					 "pod_association[%u].sources[0].name: \"%s\" does not apply to from: "
					 "connection (the peer's IP address is used)",
					 i, src->name);
				return -EINVAL;
			}
			key = ASSOC_CONNECTION;
		} else if (src->name && strcmp(src->name, "container.id") == 0) {
			key = ASSOC_CONTAINER_ID;
		} else if (src->name && strcmp(src->name, "k8s.pod.uid") == 0) {
			key = ASSOC_POD_UID;
		} else if (src->name && strcmp(src->name, "k8s.pod.ip") == 0) {
			key = ASSOC_POD_IP;
		} else if (src->name && strcmp(src->name, "host.name") == 0) {
			/* As in the Collector: a sender in a pod often names its host by the pod's IP. */
			key = ASSOC_HOST_NAME;
		} else {
			snprintf(err, errsize,
				 "pod_association[%u].sources[0].name: \"%s\" is not supported; use container.id, "
				 "k8s.pod.uid, k8s.pod.ip or host.name (or from: connection)",
				 i, src->name ? src->name : "");
			return -EINVAL;
		}
		if (keys)
			keys[i] = key;
	}
	return (int)cfg->n_pod_association;
}

static void selector_append(char *buf, size_t size, const char *term)
{
	size_t n = strlen(buf);

	snprintf(buf + n, size - n, "%s%s", n ? "," : "", term);
}

/* Builds fieldSelector and labelSelector strings as the Collector does from filter. */
int k8sattr_build_selectors(const struct filter_config *f, char *fsel, size_t fsize, char *lsel, size_t lsize,
			    char *err, size_t errsize)
{
	char term[1024];
	const char *node = f->node;

	fsel[0] = lsel[0] = '\0';
	if ((!node || !*node) && f->node_from_env_var && *f->node_from_env_var) {
		node = getenv(f->node_from_env_var);
		if (!node || !*node) {
			snprintf(err, errsize, "filter.node_from_env_var: environment variable %s is not set",
				 f->node_from_env_var);
			return -EINVAL;
		}
	}
	if (node && *node) {
		snprintf(term, sizeof(term), "spec.nodeName=%s", node);
		selector_append(fsel, fsize, term);
	}
	for (uint32_t i = 0; i < f->n_fields; i++) {
		const struct selector_config *s = &f->fields[i];
		if (s->op != OP_EQUALS && s->op != OP_NOT_EQUALS) {
			snprintf(err, errsize, "filter.fields[%u].op: only equals and not-equals apply to fields", i);
			return -EINVAL;
		}
		snprintf(term, sizeof(term), "%s%s%s", s->key,
			 s->op == OP_EQUALS ? "=" : "!=", s->value ? s->value : "");
		selector_append(fsel, fsize, term);
	}
	for (uint32_t i = 0; i < f->n_labels; i++) {
		const struct selector_config *s = &f->labels[i];
		switch (s->op) {
		case OP_EQUALS:
			snprintf(term, sizeof(term), "%s=%s", s->key, s->value ? s->value : "");
			break;
		case OP_NOT_EQUALS:
			snprintf(term, sizeof(term), "%s!=%s", s->key, s->value ? s->value : "");
			break;
		case OP_EXISTS:
			snprintf(term, sizeof(term), "%s", s->key);
			break;
		default:
			snprintf(term, sizeof(term), "!%s", s->key);
			break;
		}
		selector_append(lsel, lsize, term);
	}
	return 0;
}

struct k8s_extract *k8sattr_make_extract(const struct k8s_attributes_config *cfg, char *err, size_t errsize)
{
	struct k8s_extract_config x = {
		.metadata = cfg->extract.metadata,
		.metadata_count = cfg->extract.n_metadata,
		.metadata_set = true,
		.labels = cfg->extract.labels,
		.labels_count = cfg->extract.n_labels,
		.annotations = cfg->extract.annotations,
		.annotations_count = cfg->extract.n_annotations,
		.otel_annotations = cfg->extract.otel_annotations,
		.deployment_name_from_replicaset = cfg->extract.deployment_name_from_replicaset,
	};

	return k8s_extract_new(&x, err, errsize);
}

int k8s_attributes_validate(const void *config, const char *path, struct sr_diag *d)
{
	const struct k8s_attributes_config *cfg = config;
	char err[512], fs[4096], ls[4096];
	struct k8s_extract *x = k8sattr_make_extract(cfg, err, sizeof(err));
	struct filter_config f = cfg->filter;
	int r = 0;

	if (!x) {
		sr_diag_add(d, NULL, 0, 0, path, "extract.%s", err);
		r = -EINVAL;
	}
	k8s_extract_free(x);
	/* Selector syntax only (the env variable is checked at start, where it is read). */
	f.node_from_env_var = NULL;
	if (k8sattr_build_selectors(&f, fs, sizeof(fs), ls, sizeof(ls), err, sizeof(err)) < 0) {
		sr_diag_add(d, NULL, 0, 0, path, "%s", err);
		r = -EINVAL;
	}
	if (k8sattr_parse_association(cfg, NULL, err, sizeof(err)) < 0) {
		sr_diag_add(d, NULL, 0, 0, path, "%s", err);
		r = -EINVAL;
	}
	for (uint32_t i = 0; i < cfg->exclude.n_pods; i++) {
		struct gw_regex *re = gw_regex_new(cfg->exclude.pods[i].name, false, err, sizeof(err));
		if (!re) {
			sr_diag_add(d, NULL, 0, 0, path, "exclude.pods[%u].name: %s", i, err);
			r = -EINVAL;
		}
		gw_regex_free(re);
	}
	if (cfg->auth_type != AUTH_KUBECONFIG && (cfg->kube_config_path || cfg->context)) {
		sr_diag_add(d, NULL, 0, 0, path, "kube_config_path and context apply only with auth_type: kubeConfig");
		r = -EINVAL;
	}
	return r;
}

int k8sattr_load_conn(const struct k8s_attributes_config *cfg, struct k8s_conn *conn, char *err, size_t errsize)
{
	int r;

	switch (cfg->auth_type) {
	case AUTH_KUBECONFIG:
		r = k8s_conn_from_kubeconfig(cfg->kube_config_path, cfg->context, conn, err, errsize);
		break;
	case AUTH_NONE:
		r = k8s_conn_in_cluster(NULL, conn, err, errsize);
		if (r < 0 && cfg->endpoint && *cfg->endpoint) {
			memset(conn, 0, sizeof(*conn));
			r = 0;
		}
		/* No credentials, by request. */
		if (r == 0) {
			SR_FREE(conn->token_file);
			SR_FREE(conn->token);
		}
		break;
	default:
		r = k8s_conn_in_cluster(NULL, conn, err, errsize);
		break;
	}
	if (r < 0)
		return r;
	if (cfg->endpoint && *cfg->endpoint) {
		free(conn->server);
		conn->server = strdup(cfg->endpoint);
		if (!conn->server)
			return -ENOMEM;
		size_t n = strlen(conn->server);
		while (n && conn->server[n - 1] == '/')
			conn->server[--n] = '\0';
	}
	return 0;
}
