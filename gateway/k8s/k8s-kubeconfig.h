/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Where the API server is and how to authenticate to it: in-cluster (the
 * service account mounted into every pod) or a kubeconfig file.
 */
#ifndef SR_GW_K8S_KUBECONFIG_H
#define SR_GW_K8S_KUBECONFIG_H

#include <stdbool.h>
#include <stddef.h>

#define K8S_SERVICEACCOUNT_DIR "/var/run/secrets/kubernetes.io/serviceaccount"
/* Largest kubeconfig, token or certificate file read. */
#define K8S_CONFIG_FILE_MAX (1u << 20)

struct k8s_conn {
	char *server;  /* "https://10.0.0.1:443", no trailing slash */
	char *ca_file; /* PEM bundle to verify the server, or */
	char *ca_data; /* the PEM itself (certificate-authority-data) */
	size_t ca_len;
	bool insecure;		    /* insecure-skip-tls-verify: true */
	char *token;		    /* static bearer token, or */
	char *token_file;	    /* a file re-read as tokens rotate */
	char *cert_file, *key_file; /* client certificate (PEM files), or */
	char *cert_data, *key_data; /* inline */
	size_t cert_len, key_len;
	char *namespace; /* the context's namespace, informational */
};

void k8s_conn_clear(struct k8s_conn *c);

/*
 * In-cluster: KUBERNETES_SERVICE_HOST/PORT from the environment, token and
 * ca.crt from sa_dir (NULL: K8S_SERVICEACCOUNT_DIR). Returns 0, or -ENOENT /
 * -EINVAL with errbuf saying what is missing.
 */
int k8s_conn_in_cluster(const char *sa_dir, struct k8s_conn *ret, char *errbuf, size_t errsize);

/*
 * Reads a kubeconfig (path NULL: $KUBECONFIG, then ~/.kube/config) and the
 * context (NULL or "": current-context). Supports server,
 * certificate-authority(-data), insecure-skip-tls-verify, token, tokenFile,
 * client-certificate(-data) + client-key(-data). Relative file names are
 * relative to the kubeconfig's directory. exec and auth-provider plugins are
 * refused with a message. Returns 0, -ENOENT or -EINVAL (errbuf says which key).
 */
int k8s_conn_from_kubeconfig(const char *path, const char *context, struct k8s_conn *ret, char *errbuf, size_t errsize);

/* Reads a whole small file (limit K8S_CONFIG_FILE_MAX), NUL-terminated. */
int k8s_read_file(const char *path, char **ret, size_t *ret_len);

#endif
