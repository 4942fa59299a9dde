// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <yaml.h>

#include "common/fileio.h"
#include "common/macro.h"
#include "k8s-kubeconfig.h"

void k8s_conn_clear(struct k8s_conn *c)
{
	free(c->server);
	free(c->ca_file);
	free(c->ca_data);
	if (c->token)
		explicit_bzero(c->token, strlen(c->token));
	free(c->token);
	free(c->token_file);
	free(c->cert_file);
	free(c->key_file);
	free(c->cert_data);
	if (c->key_data)
		explicit_bzero(c->key_data, c->key_len);
	free(c->key_data);
	free(c->namespace);
	memset(c, 0, sizeof(*c));
}

int k8s_read_file(const char *path, char **ret, size_t *ret_len)
{
	return sr_read_file(path, K8S_CONFIG_FILE_MAX, ret, ret_len);
}

static char *trim_dup(const char *s)
{
	size_t n;

	while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')
		s++;
	n = strlen(s);
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n' || s[n - 1] == '\r'))
		n--;
	return strndup(s, n);
}

int k8s_conn_in_cluster(const char *sa_dir, struct k8s_conn *ret, char *errbuf, size_t errsize)
{
	const char *host = getenv("KUBERNETES_SERVICE_HOST"), *port = getenv("KUBERNETES_SERVICE_PORT");
	char path[4096];
	size_t n;

	memset(ret, 0, sizeof(*ret));
	if (!sa_dir)
		sa_dir = K8S_SERVICEACCOUNT_DIR;
	if (!host || !*host || !port || !*port) {
		snprintf(errbuf, errsize,
			 "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set: not running "
			 "in a pod (use auth_type: kubeConfig outside a cluster)");
		return -ENOENT;
	}
	n = strlen(host) + strlen(port) + 16;
	ret->server = malloc(n);
	if (!ret->server)
		return -ENOMEM;
	/* An IPv6 service host needs brackets in a URL. */
	if (strchr(host, ':'))
		snprintf(ret->server, n, "https://[%s]:%s", host, port);
	else
		snprintf(ret->server, n, "https://%s:%s", host, port);
	snprintf(path, sizeof(path), "%s/token", sa_dir);
	if (access(path, R_OK) < 0) {
		int e = errno;
		snprintf(errbuf, errsize, "service account token %s: %s", path, strerror(e));
		k8s_conn_clear(ret);
		return -e;
	}
	ret->token_file = strdup(path);
	snprintf(path, sizeof(path), "%s/ca.crt", sa_dir);
	if (access(path, R_OK) < 0) {
		int e = errno;
		snprintf(errbuf, errsize, "service account CA %s: %s", path, strerror(e));
		k8s_conn_clear(ret);
		return -e;
	}
	ret->ca_file = strdup(path);
	snprintf(path, sizeof(path), "%s/namespace", sa_dir);
	char *ns = NULL;
	if (k8s_read_file(path, &ns, NULL) == 0) {
		ret->namespace = trim_dup(ns);
		free(ns);
	}
	if (!ret->token_file || !ret->ca_file) {
		k8s_conn_clear(ret);
		return -ENOMEM;
	}
	return 0;
}

/* libyaml document helpers. */
static yaml_node_t *ymap_get(yaml_document_t *doc, yaml_node_t *map, const char *key)
{
	if (!map || map->type != YAML_MAPPING_NODE)
		return NULL;
	for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
		yaml_node_t *k = yaml_document_get_node(doc, p->key);
		if (k && k->type == YAML_SCALAR_NODE && strcmp((const char *)k->data.scalar.value, key) == 0)
			return yaml_document_get_node(doc, p->value);
	}
	return NULL;
}

static const char *yscalar(yaml_node_t *n)
{
	if (!n || n->type != YAML_SCALAR_NODE)
		return NULL;
	return (const char *)n->data.scalar.value;
}

/* The entry of a named list ("clusters", "users", "contexts") whose name is name: its `inner` mapping. */
static yaml_node_t *named_entry(yaml_document_t *doc, yaml_node_t *root, const char *list, const char *inner,
				const char *name)
{
	yaml_node_t *seq = ymap_get(doc, root, list);

	if (!seq || seq->type != YAML_SEQUENCE_NODE)
		return NULL;
	for (yaml_node_item_t *i = seq->data.sequence.items.start; i < seq->data.sequence.items.top; i++) {
		yaml_node_t *e = yaml_document_get_node(doc, *i);
		const char *n = yscalar(ymap_get(doc, e, "name"));
		if (n && strcmp(n, name) == 0)
			return ymap_get(doc, e, inner);
	}
	return NULL;
}

static int b64_decode(const char *in, char **ret, size_t *ret_len)
{
	size_t n = 0, len = strlen(in);
	char *clean = malloc(len + 1), *out = NULL;
	int dec;

	if (!clean)
		return -ENOMEM;
	for (size_t i = 0; i < len; i++)
		if (in[i] != '\n' && in[i] != '\r' && in[i] != ' ' && in[i] != '\t')
			clean[n++] = in[i];
	clean[n] = '\0';
	if (n % 4) {
		free(clean);
		return -EINVAL;
	}
	out = malloc(n / 4 * 3 + 1);
	if (!out) {
		free(clean);
		return -ENOMEM;
	}
	dec = EVP_DecodeBlock((unsigned char *)out, (const unsigned char *)clean, (int)n);
	if (dec < 0) {
		free(clean);
		free(out);
		return -EINVAL;
	}
	/* EVP_DecodeBlock counts the padding as zero bytes. */
	if (n >= 1 && clean[n - 1] == '=')
		dec--;
	if (n >= 2 && clean[n - 2] == '=')
		dec--;
	out[dec] = '\0';
	free(clean);
	*ret = out;
	*ret_len = (size_t)dec;
	return 0;
}

static char *resolve_path(const char *dir, const char *p)
{
	char *s;

	if (p[0] == '/' || !dir)
		return strdup(p);
	if (asprintf(&s, "%s/%s", dir, p) < 0)
		return NULL;
	return s;
}

int k8s_conn_from_kubeconfig(const char *path, const char *context, struct k8s_conn *ret, char *errbuf, size_t errsize)
{
	yaml_parser_t parser;
	yaml_document_t doc;
	yaml_node_t *root, *ctx, *cluster, *user;
	char *text = NULL, *dir = NULL, *home_path = NULL;
	const char *cur, *cname, *uname, *v;
	size_t len;
	int r;
	bool have_doc = false;

	memset(ret, 0, sizeof(*ret));
	if (!path || !*path) {
		path = getenv("KUBECONFIG");
		if (path && strchr(path, ':')) {
			snprintf(errbuf, errsize, "KUBECONFIG lists several files; set kube_config_path to one");
			return -EINVAL;
		}
		if (!path || !*path) {
			const char *home = getenv("HOME");
			if (!home || asprintf(&home_path, "%s/.kube/config", home) < 0) {
				snprintf(errbuf, errsize, "no kubeconfig: set kube_config_path, KUBECONFIG or HOME");
				return -ENOENT;
			}
			path = home_path;
		}
	}
	r = k8s_read_file(path, &text, &len);
	if (r < 0) {
		snprintf(errbuf, errsize, "kubeconfig %s: %s", path, strerror(-r));
		free(home_path);
		return r;
	}
	char *pathcopy = strdup(path);
	if (pathcopy) {
		dir = strdup(dirname(pathcopy));
		free(pathcopy);
	}
	if (!yaml_parser_initialize(&parser)) {
		r = -ENOMEM;
		goto out;
	}
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	if (!yaml_parser_load(&parser, &doc)) {
		snprintf(errbuf, errsize, "kubeconfig %s:%zu:%zu: %s", path, parser.problem_mark.line + 1,
			 parser.problem_mark.column + 1, parser.problem ? parser.problem : "YAML error");
		yaml_parser_delete(&parser);
		r = -EINVAL;
		goto out;
	}
	yaml_parser_delete(&parser);
	have_doc = true;
	root = yaml_document_get_root_node(&doc);
	if (!root || root->type != YAML_MAPPING_NODE) {
		snprintf(errbuf, errsize, "kubeconfig %s: not a mapping", path);
		r = -EINVAL;
		goto out;
	}
	cur = context && *context ? context : yscalar(ymap_get(&doc, root, "current-context"));
	if (!cur || !*cur) {
		snprintf(errbuf, errsize, "kubeconfig %s: no current-context and no context configured", path);
		r = -EINVAL;
		goto out;
	}
	ctx = named_entry(&doc, root, "contexts", "context", cur);
	if (!ctx) {
		snprintf(errbuf, errsize, "kubeconfig %s: context \"%s\" not found", path, cur);
		r = -EINVAL;
		goto out;
	}
	cname = yscalar(ymap_get(&doc, ctx, "cluster"));
	uname = yscalar(ymap_get(&doc, ctx, "user"));
	if ((v = yscalar(ymap_get(&doc, ctx, "namespace"))))
		ret->namespace = strdup(v);
	cluster = cname ? named_entry(&doc, root, "clusters", "cluster", cname) : NULL;
	if (!cluster) {
		snprintf(errbuf, errsize, "kubeconfig %s: cluster \"%s\" of context \"%s\" not found", path,
			 cname ? cname : "", cur);
		r = -EINVAL;
		goto out;
	}
	v = yscalar(ymap_get(&doc, cluster, "server"));
	if (!v || !*v) {
		snprintf(errbuf, errsize, "kubeconfig %s: clusters[%s].cluster.server is missing", path, cname);
		r = -EINVAL;
		goto out;
	}
	ret->server = strdup(v);
	if (ret->server) {
		size_t n = strlen(ret->server);
		while (n && ret->server[n - 1] == '/')
			ret->server[--n] = '\0';
	}
	if ((v = yscalar(ymap_get(&doc, cluster, "certificate-authority-data")))) {
		if ((r = b64_decode(v, &ret->ca_data, &ret->ca_len)) < 0) {
			snprintf(errbuf, errsize,
				 "kubeconfig %s: clusters[%s].cluster.certificate-authority-data: not "
				 "base64",
				 path, cname);
			goto out;
		}
	} else if ((v = yscalar(ymap_get(&doc, cluster, "certificate-authority")))) {
		ret->ca_file = resolve_path(dir, v);
	}
	v = yscalar(ymap_get(&doc, cluster, "insecure-skip-tls-verify"));
	ret->insecure = v && strcmp(v, "true") == 0;

	user = uname ? named_entry(&doc, root, "users", "user", uname) : NULL;
	if (uname && !user) {
		snprintf(errbuf, errsize, "kubeconfig %s: user \"%s\" of context \"%s\" not found", path, uname, cur);
		r = -EINVAL;
		goto out;
	}
	if (user) {
		if (ymap_get(&doc, user, "exec") || ymap_get(&doc, user, "auth-provider")) {
			snprintf(errbuf, errsize,
				 "kubeconfig %s: users[%s] uses an exec/auth-provider plugin, which "
				 "stackrelay does not run; use a token, tokenFile or client certificate",
				 path, uname);
			r = -EINVAL;
			goto out;
		}
		if ((v = yscalar(ymap_get(&doc, user, "token"))))
			ret->token = strdup(v);
		if ((v = yscalar(ymap_get(&doc, user, "tokenFile"))))
			ret->token_file = resolve_path(dir, v);
		if ((v = yscalar(ymap_get(&doc, user, "client-certificate-data")))) {
			if ((r = b64_decode(v, &ret->cert_data, &ret->cert_len)) < 0) {
				snprintf(errbuf, errsize,
					 "kubeconfig %s: users[%s].user.client-certificate-data: not "
					 "base64",
					 path, uname);
				goto out;
			}
		} else if ((v = yscalar(ymap_get(&doc, user, "client-certificate")))) {
			ret->cert_file = resolve_path(dir, v);
		}
		if ((v = yscalar(ymap_get(&doc, user, "client-key-data")))) {
			if ((r = b64_decode(v, &ret->key_data, &ret->key_len)) < 0) {
				snprintf(errbuf, errsize, "kubeconfig %s: users[%s].user.client-key-data: not base64",
					 path, uname);
				goto out;
			}
		} else if ((v = yscalar(ymap_get(&doc, user, "client-key")))) {
			ret->key_file = resolve_path(dir, v);
		}
		if ((ret->cert_file || ret->cert_data) != (ret->key_file || ret->key_data)) {
			snprintf(errbuf, errsize,
				 "kubeconfig %s: users[%s]: a client certificate needs its key (and "
				 "the other way round)",
				 path, uname);
			r = -EINVAL;
			goto out;
		}
	}
	if (!ret->server) {
		r = -ENOMEM;
		goto out;
	}
	r = 0;
out:
	if (have_doc)
		yaml_document_delete(&doc);
	if (r < 0)
		k8s_conn_clear(ret);
	free(text);
	free(dir);
	free(home_path);
	return r;
}
