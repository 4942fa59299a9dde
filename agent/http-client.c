// SPDX-License-Identifier: Apache-2.0
/*
 * The agent's HTTP clients' shared settings (http-client.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/http-client.h"
#include "common/log.h"

static bool set(const char *s)
{
	return s && *s;
}

static int check_file(const char *section, const char *what, const char *path, char *err, size_t size)
{
	int e;

	if (!set(path) || access(path, R_OK) == 0)
		return 0;
	e = errno;
	snprintf(err, size, "%s.tls.%s %s: %s", section, what, path, strerror(e));
	return -e;
}

int agent_http_check_tls(const char *section, const char *endpoint, const struct agent_tls_config *tls, bool https,
			 char *err, size_t size)
{
	int r;

	if (!https && (set(tls->ca_file) || set(tls->cert_file) || set(tls->key_file))) {
		snprintf(err, size, "%s.tls is set but %s.endpoint %s is http:// (use https://)", section, section,
			 endpoint);
		return -EINVAL;
	}
	if (set(tls->cert_file) != set(tls->key_file)) {
		snprintf(err, size, "%s.tls.cert_file and %s.tls.key_file go together (client certificate)", section,
			 section);
		return -EINVAL;
	}
	if ((r = check_file(section, "ca_file", tls->ca_file, err, size)) < 0 ||
	    (r = check_file(section, "cert_file", tls->cert_file, err, size)) < 0 ||
	    (r = check_file(section, "key_file", tls->key_file, err, size)) < 0)
		return r;
	return 0;
}

int agent_http_server_name(const char *section, CURLU *u, const char *server_name, struct curl_slist **ret, char *err,
			   size_t size)
{
	char *host = NULL, *port = NULL, *entry = NULL;
	int r = -EINVAL;

	*ret = NULL;
	if (curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) != CURLUE_OK) {
		snprintf(err, size, "%s.endpoint is not a URL", section);
		goto out;
	}
	if (curl_url_set(u, CURLUPART_HOST, server_name, 0) != CURLUE_OK) {
		snprintf(err, size, "%s.tls.server_name %s is not a valid host name", section, server_name);
		goto out;
	}
	if (asprintf(&entry, "%s:%s:%s:%s", server_name, port, host, port) < 0) {
		entry = NULL;
		r = -ENOMEM;
		goto out;
	}
	*ret = curl_slist_append(NULL, entry);
	r = *ret ? 0 : -ENOMEM;
out:
	free(entry);
	curl_free(host);
	curl_free(port);
	return r;
}

void agent_http_set_connection(CURL *easy, const struct agent_tls_config *tls, bool https)
{
	/* One connection: a fresh one replaces the old, which curl then closes. */
	curl_easy_setopt(easy, CURLOPT_MAXCONNECTS, 1L);
	curl_easy_setopt(easy, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, https ? "https" : "http");
	/* --log-level trace: libcurl's own account of connections, TLS and HTTP/2 on stderr. */
	if (sr_log_max_level >= SR_LOG_TRACE)
		curl_easy_setopt(easy, CURLOPT_VERBOSE, 1L);
	if (!https)
		return;
	if (set(tls->ca_file))
		curl_easy_setopt(easy, CURLOPT_CAINFO, tls->ca_file);
	if (set(tls->cert_file)) {
		curl_easy_setopt(easy, CURLOPT_SSLCERT, tls->cert_file);
		curl_easy_setopt(easy, CURLOPT_SSLKEY, tls->key_file);
	}
	if (tls->insecure_skip_verify) {
		curl_easy_setopt(easy, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(easy, CURLOPT_SSL_VERIFYHOST, 0L);
	}
}
