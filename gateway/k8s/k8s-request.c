/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Kubernetes API client's requests (k8s-client-private.h): one LIST or
 * WATCH of one resource as a libcurl transfer on the client's curl-uv driver:
 * the URL (namespace, selectors, paging, watch parameters), the bearer token
 * (re-read from its file), TLS and timeouts; the response bytes go to the
 * watch decoder, or are kept as a LIST page or an error body. What a finished
 * transfer means is decided in k8s-informer.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <uv.h>

#include "common/clock.h"
#include "common/grow.h"
#include "common/log.h"
#include "common/macro.h"
#include "curl-uv.h"
#include "k8s-client-private.h"
#include "k8s-client.h"
#include "k8s-watch.h"

/* The largest error body kept for the log message. */
#define K8S_ERROR_BODY_MAX 4096u

/* ---- token ---- */

void k8s_client_load_token(struct k8s_client *c, bool force)
{
	char *t = NULL;
	int r;

	if (!c->o.conn.token_file)
		return;
	if (!force && c->token && sr_now_ns() - c->token_loaded_ns < c->o.token_reload_ns)
		return;
	c->token_loaded_ns = sr_now_ns();
	c->stats.token_reloads++;
	r = k8s_read_file(c->o.conn.token_file, &t, NULL);
	if (r < 0) {
		sr_log_warn(LOG_COMPONENT, "cannot read the service account token; keeping the previous one",
			    "file=%s error=\"%s\"", c->o.conn.token_file, strerror(-r));
		return;
	}
	size_t n = strlen(t);
	while (n && (t[n - 1] == '\n' || t[n - 1] == '\r' || t[n - 1] == ' '))
		t[--n] = '\0';
	if (c->token) {
		explicit_bzero(c->token, strlen(c->token));
		free(c->token);
	}
	c->token = t;
}

/* ---- requests ---- */

static void on_transfer_done(struct gw_curl_uv_xfer *x, CURLcode res)
{
	k8s_client_finish_transfer(SR_CONTAINER_OF(x, struct informer, xfer), res);
}

void k8s_client_release_transfer(struct informer *inf)
{
	if (inf->easy) {
		gw_curl_uv__remove(inf->client->curl, &inf->xfer);
		curl_easy_cleanup(inf->easy);
		inf->easy = NULL;
	}
	curl_slist_free_all(inf->headers);
	inf->headers = NULL;
	SR_FREE(inf->url);
	SR_FREE(inf->body);
	inf->body_len = inf->body_cap = 0;
}

static int body_append(struct informer *inf, const char *data, size_t n, size_t max)
{
	if (inf->body_len + n > max)
		return -EMSGSIZE;
	if (sr_grow((void **)&inf->body, &inf->body_cap, inf->body_len + n + 1, 1, 65536) < 0)
		return -ENOMEM;
	memcpy(inf->body + inf->body_len, data, n);
	inf->body_len += n;
	inf->body[inf->body_len] = '\0';
	return 0;
}

static size_t on_write(char *data, size_t size, size_t nmemb, void *userdata)
{
	struct informer *inf = userdata;
	size_t n = size * nmemb;
	long code = 0;
	int r;

	inf->client->stats.bytes += n;
	curl_easy_getinfo(inf->easy, CURLINFO_RESPONSE_CODE, &code);
	if (inf->state == INF_WATCHING && code == 200) {
		r = k8s_watch_decoder__feed(inf->decoder, data, n, k8s_client_on_watch_event, inf);
		if (r < 0) {
			inf->stream_error = r;
			return 0; /* aborts the transfer: CURLE_WRITE_ERROR */
		}
		return n;
	}
	r = body_append(inf, data, n, code == 200 ? K8S_LIST_MAX_PAGE_BYTES : K8S_ERROR_BODY_MAX);
	if (r < 0) {
		if (code != 200)
			return n; /* an error body is only for the message: cut it */
		inf->stream_error = r;
		return 0;
	}
	return n;
}

static int append_param(char *buf, size_t size, size_t *len, const char *key, const char *value)
{
	char *esc = curl_easy_escape(NULL, value, 0);
	int n;

	if (!esc)
		return -ENOMEM;
	n = snprintf(buf + *len, size - *len, "%s%s=%s", strchr(buf, '?') ? "&" : "?", key, esc);
	curl_free(esc);
	if (n < 0 || (size_t)n >= size - *len)
		return -E2BIG;
	*len += (size_t)n;
	return 0;
}

int k8s_client_begin_transfer(struct informer *inf, bool watch, uint32_t timeout_s)
{
	struct k8s_client *c = inf->client;
	const struct k8s_conn *k = &c->o.conn;
	char url[8192], hdr[8192];
	size_t len;
	int r;

	len = (size_t)snprintf(url, sizeof(url), "%s%s", k->server,
			       inf->kind == K8S_KIND_POD ? c->pod_path : inf->path);
	if (len >= sizeof(url))
		return -E2BIG;
	if (inf->kind == K8S_KIND_POD) {
		if (c->o.field_selector && *c->o.field_selector &&
		    (r = append_param(url, sizeof(url), &len, "fieldSelector", c->o.field_selector)) < 0)
			return r;
		if (c->o.label_selector && *c->o.label_selector &&
		    (r = append_param(url, sizeof(url), &len, "labelSelector", c->o.label_selector)) < 0)
			return r;
	}
	if (inf->kind == K8S_KIND_NAMESPACE && c->o.namespace_field_selector && *c->o.namespace_field_selector &&
	    (r = append_param(url, sizeof(url), &len, "fieldSelector", c->o.namespace_field_selector)) < 0)
		return r;
	if (watch) {
		char t[16];
		snprintf(t, sizeof(t), "%u", timeout_s);
		if ((r = append_param(url, sizeof(url), &len, "watch", "1")) < 0 ||
		    (r = append_param(url, sizeof(url), &len, "allowWatchBookmarks", "true")) < 0 ||
		    (r = append_param(url, sizeof(url), &len, "timeoutSeconds", t)) < 0 ||
		    (inf->rv && (r = append_param(url, sizeof(url), &len, "resourceVersion", inf->rv)) < 0))
			return r;
	} else {
		char l[16];
		snprintf(l, sizeof(l), "%u", c->o.list_limit);
		if ((r = append_param(url, sizeof(url), &len, "limit", l)) < 0 ||
		    (inf->continue_token &&
		     (r = append_param(url, sizeof(url), &len, "continue", inf->continue_token)) < 0))
			return r;
	}
	inf->url = strdup(url);
	inf->easy = curl_easy_init();
	if (!inf->url || !inf->easy)
		return -ENOMEM;

	snprintf(hdr, sizeof(hdr), "Accept: %s", inf->accept ? inf->accept : "application/json");
	inf->headers = curl_slist_append(inf->headers, hdr);
	k8s_client_load_token(c, false);
	const char *token = c->token ? c->token : k->token;
	if (token && *token) {
		snprintf(hdr, sizeof(hdr), "Authorization: Bearer %s", token);
		struct curl_slist *h = curl_slist_append(inf->headers, hdr);
		explicit_bzero(hdr, sizeof(hdr));
		if (!h)
			return -ENOMEM;
		inf->headers = h;
	}
	if (!inf->headers)
		return -ENOMEM;

	CURL *e = inf->easy;
	curl_easy_setopt(e, CURLOPT_URL, inf->url);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, inf->headers);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, inf);
	curl_easy_setopt(e, CURLOPT_USERAGENT, "stackrelay-gateway k8s_attributes");
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, "");
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "https,http");
	curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
	/* A watch lasts timeoutSeconds; the server ends it. The guard catches a silent half-open connection. */
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS,
			 (long)(watch ? ((uint64_t)timeout_s + 60) * 1000 : c->o.request_timeout_ns / 1000000));
	if (k->ca_data) {
		struct curl_blob b = { .data = k->ca_data, .len = k->ca_len, .flags = CURL_BLOB_NOCOPY };
		curl_easy_setopt(e, CURLOPT_CAINFO_BLOB, &b);
	} else if (k->ca_file) {
		curl_easy_setopt(e, CURLOPT_CAINFO, k->ca_file);
	}
	if (k->insecure) {
		curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	if (k->cert_data) {
		struct curl_blob b = { .data = k->cert_data, .len = k->cert_len, .flags = CURL_BLOB_NOCOPY };
		curl_easy_setopt(e, CURLOPT_SSLCERT_BLOB, &b);
		curl_easy_setopt(e, CURLOPT_SSLCERTTYPE, "PEM");
	} else if (k->cert_file) {
		curl_easy_setopt(e, CURLOPT_SSLCERT, k->cert_file);
	}
	if (k->key_data) {
		struct curl_blob b = { .data = k->key_data, .len = k->key_len, .flags = CURL_BLOB_NOCOPY };
		curl_easy_setopt(e, CURLOPT_SSLKEY_BLOB, &b);
		curl_easy_setopt(e, CURLOPT_SSLKEYTYPE, "PEM");
	} else if (k->key_file) {
		curl_easy_setopt(e, CURLOPT_SSLKEY, k->key_file);
	}

	inf->stream_error = 0;
	inf->relist = false;
	inf->events_this_watch = 0;
	inf->started_ns = sr_now_ns();
	if (watch)
		k8s_watch_decoder__reset(inf->decoder);
	r = gw_curl_uv__add(c->curl, &inf->xfer, e, on_transfer_done);
	/* -ENOMEM there is curl refusing the handle, reported as before as an I/O failure. */
	return r == -ENOMEM ? -EIO : r;
}

void k8s_client_status_detail(struct informer *inf, long code, char *buf, size_t size)
{
	char msg[256] = "";

	if (inf->body_len)
		k8s_status_parse(inf->body, inf->body_len, msg, sizeof(msg));
	snprintf(buf, size, "HTTP %ld%s%s", code, msg[0] ? ": " : "", msg);
}
