// SPDX-License-Identifier: Apache-2.0
/*
 * The sender's transport: libcurl's easy interface on the sender thread, one
 * connection kept and reused (HTTP/2 prior knowledge for http://, ALPN h2
 * for https://). libcurl brings TLS, mTLS and connection handling that the
 * agent would otherwise have to write on top of nghttp2 (docs/dependencies.md).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <unistd.h>

#include <curl/curl.h>
#include <zlib.h>

#include "config.h"
#include "agent/http-client.h"
#include "common/grow.h"
#include "common/gzip.h"
#include "common/log.h"
#include "sender-parts-private.h"
#include "sr-config.h"
#include "common/units.h"

struct http {
	CURL *easy;
	char *url;
	struct curl_slist *connect_to;
	uint64_t conn_opened; /* bumped by sockopt_cb for every new connection */
	/*
	 * libcurl before 8.0.0 fails every request on a reused h2c (prior
	 * knowledge) connection with "Error in the HTTP2 framing layer" (curl
	 * issue 10634, fixed in 8.0.0; Debian 12 ships 7.88.1). There each request
	 * gets its own connection; the sender still treats the series as one
	 * connection for definitions, because the gateway's store is shared by
	 * its connections (a replica that lacks something answers missing_*).
	 */
	bool no_reuse;
	bool first_done;
	char errbuf[CURL_ERROR_SIZE];
	/* The transfer in progress. */
	uint8_t *rbuf;
	size_t rlen, rcap;
	bool too_large;
	const struct agent_sender_http_request *cur;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_result;

static void curl_init(void)
{
	curl_init_result = curl_global_init(CURL_GLOBAL_DEFAULT);
}

int agent_sender_gzip(const uint8_t *in, size_t len, uint8_t **ret, size_t *ret_len)
{
	return sr_gzip(in, len, Z_DEFAULT_COMPRESSION, ret, ret_len);
}

static size_t write_cb(char *data, size_t size, size_t nmemb, void *userdata)
{
	struct http *h = userdata;
	size_t n = size * nmemb;

	if (h->rlen + n > AGENT_SENDER_MAX_RESPONSE_BYTES) {
		h->too_large = true;
		return 0; /* aborts the transfer */
	}
	if (sr_grow((void **)&h->rbuf, &h->rcap, h->rlen + n, 1, 4096) < 0)
		return 0;
	memcpy(h->rbuf + h->rlen, data, n);
	h->rlen += n;
	return n;
}

static int xferinfo_cb(void *userdata, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow)
{
	struct http *h = userdata;

	return h->cur && h->cur->should_abort && h->cur->should_abort(h->cur->abort_ctx);
}

static int sockopt_cb(void *userdata, curl_socket_t fd, curlsocktype purpose)
{
	struct http *h = userdata;

	if (purpose == CURLSOCKTYPE_IPCXN)
		h->conn_opened++;
	return CURL_SOCKOPT_OK;
}

static int http_post(void *userdata, const struct agent_sender_http_request *req, struct agent_sender_http_result *ret)
{
	struct http *h = userdata;
	struct curl_slist *headers = NULL, *tmp;
	uint64_t opened = h->conn_opened;
	char *auth = NULL;
	curl_off_t retry_after = 0;
	CURLcode cc;
	int r = 0;

	memset(ret, 0, sizeof(*ret));
	h->rbuf = NULL;
	h->rlen = h->rcap = 0;
	h->too_large = false;
	h->errbuf[0] = '\0';
	h->cur = req;

	tmp = curl_slist_append(headers, "Content-Type: application/x-protobuf");
	headers = tmp ? tmp : headers;
	if (req->gzip && (tmp = curl_slist_append(headers, "Content-Encoding: gzip")))
		headers = tmp;
	/* No "Expect: 100-continue" round trip. */
	if ((tmp = curl_slist_append(headers, "Expect:")))
		headers = tmp;
	if (req->token && *req->token) {
		if (asprintf(&auth, "Authorization: Bearer %s", req->token) < 0) {
			r = -ENOMEM;
			snprintf(ret->error, sizeof(ret->error), "out of memory");
			goto out;
		}
		if ((tmp = curl_slist_append(headers, auth)))
			headers = tmp;
	}
	curl_easy_setopt(h->easy, CURLOPT_HTTPHEADER, headers);
	curl_easy_setopt(h->easy, CURLOPT_POSTFIELDS, (const char *)req->body);
	curl_easy_setopt(h->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->len);
	curl_easy_setopt(h->easy, CURLOPT_FRESH_CONNECT, req->fresh_connection ? 1L : 0L);

	cc = curl_easy_perform(h->easy);
	ret->new_connection = h->conn_opened != opened;
	if (h->no_reuse)
		ret->new_connection = req->fresh_connection || !h->first_done;
	h->first_done = h->first_done || cc == CURLE_OK;
	if (cc != CURLE_OK) {
		if (h->too_large)
			snprintf(ret->error, sizeof(ret->error), "response larger than %d bytes",
				 AGENT_SENDER_MAX_RESPONSE_BYTES);
		else if (cc == CURLE_ABORTED_BY_CALLBACK)
			snprintf(ret->error, sizeof(ret->error), "aborted (flush timeout or shutdown)");
		else
			snprintf(ret->error, sizeof(ret->error), "%.100s%s%.140s", curl_easy_strerror(cc),
				 h->errbuf[0] ? ": " : "", h->errbuf);
		r = cc == CURLE_OPERATION_TIMEDOUT ? -ETIMEDOUT : cc == CURLE_COULDNT_CONNECT ? -ECONNREFUSED : -EIO;
		goto out;
	}
	curl_easy_getinfo(h->easy, CURLINFO_RESPONSE_CODE, &ret->status);
	if (curl_easy_getinfo(h->easy, CURLINFO_RETRY_AFTER, &retry_after) == CURLE_OK && retry_after > 0)
		ret->retry_after_ns = (uint64_t)retry_after * SR_NSEC_PER_SEC;
	ret->body = h->rbuf;
	ret->body_len = h->rlen;
	h->rbuf = NULL;
out:
	curl_easy_setopt(h->easy, CURLOPT_HTTPHEADER, NULL);
	curl_slist_free_all(headers);
	free(auth);
	free(h->rbuf);
	h->rbuf = NULL;
	h->cur = NULL;
	return r;
}

static void http_free(void *userdata)
{
	struct http *h = userdata;

	if (!h)
		return;
	if (h->easy)
		curl_easy_cleanup(h->easy);
	curl_slist_free_all(h->connect_to);
	free(h->url);
	free(h);
}

/* URL of the Push method, and for tls.server_name the connect-to mapping that keeps the real address. */
static int build_url(struct http *h, const struct agent_gateway_config *cfg, bool tls, char *err, size_t size)
{
	CURLU *u = curl_url();
	char *host = NULL, *path = NULL, *url = NULL;
	size_t plen;
	int r = -EINVAL;

	if (!u)
		return -ENOMEM;
	if (curl_url_set(u, CURLUPART_URL, cfg->endpoint, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK) {
		snprintf(err, size, "gateway.endpoint %s is not a URL (http://HOST:PORT or https://HOST:PORT)",
			 cfg->endpoint);
		goto out;
	}
	if (curl_url_get(u, CURLUPART_PATH, &path, 0) != CURLUE_OK)
		goto out;
	/* A path prefix is kept (a reverse proxy may route on it); the method path is appended. */
	plen = strlen(path);
	while (plen > 0 && path[plen - 1] == '/')
		path[--plen] = '\0';
	if (asprintf(&url, "%s%s", path, AGENT_PUSH_PATH) < 0 || curl_url_set(u, CURLUPART_PATH, url, 0) != CURLUE_OK) {
		r = -ENOMEM;
		goto out;
	}
	free(url);
	url = NULL;
	/* Verify and send SNI for server_name while connecting to the endpoint's address. */
	if (tls && cfg->tls.server_name && *cfg->tls.server_name &&
	    (r = agent_http_server_name("gateway", u, cfg->tls.server_name, &h->connect_to, err, size)) < 0)
		goto out;
	r = -EINVAL;
	if (curl_url_get(u, CURLUPART_URL, &url, 0) != CURLUE_OK)
		goto out;
	h->url = strdup(url);
	r = h->url ? 0 : -ENOMEM;
out:
	curl_free(host);
	curl_free(path);
	curl_free(url);
	curl_url_cleanup(u);
	return r;
}

int agent_sender_http_new(const struct agent_gateway_config *cfg, struct agent_sender_transport *ret, char *err,
			  size_t size)
{
	const struct agent_tls_config *tls = &cfg->tls;
	curl_version_info_data *vi;
	struct http *h = NULL;
	bool https;
	uint64_t timeout_ms, connect_ms;
	int r;

	err[0] = '\0';
	pthread_once(&curl_once, curl_init);
	if (curl_init_result != CURLE_OK) {
		snprintf(err, size, "libcurl initialisation failed: %s", curl_easy_strerror(curl_init_result));
		return -EIO;
	}
	vi = curl_version_info(CURLVERSION_NOW);
	if (!(vi->features & CURL_VERSION_HTTP2)) {
		snprintf(err, size, "libcurl %s was built without HTTP/2 (install Debian's libcurl4)", vi->version);
		return -ENOTSUP;
	}
	if (!cfg->endpoint || !*cfg->endpoint) {
		snprintf(err, size, "gateway.endpoint is empty");
		return -EINVAL;
	}
	if (strncmp(cfg->endpoint, "https://", 8) == 0) {
		https = true;
	} else if (strncmp(cfg->endpoint, "http://", 7) == 0) {
		https = false;
	} else {
		snprintf(err, size, "gateway.endpoint %s must start with http:// (h2c) or https:// (TLS)",
			 cfg->endpoint);
		return -EINVAL;
	}
	r = agent_http_check_tls("gateway", cfg->endpoint, tls, https, err, size);
	if (r < 0)
		return r;

	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->easy = curl_easy_init();
	if (!h->easy) {
		r = -ENOMEM;
		goto fail;
	}
	r = build_url(h, cfg, https, err, size);
	if (r < 0)
		goto fail;

	timeout_ms = cfg->timeout_ns / SR_NSEC_PER_MSEC;
	if (!timeout_ms)
		timeout_ms = 10000;
	connect_ms = timeout_ms < 10000 ? timeout_ms : 10000;
	curl_easy_setopt(h->easy, CURLOPT_URL, h->url);
	curl_easy_setopt(h->easy, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h->easy, CURLOPT_HTTP_VERSION,
			 https ? (long)CURL_HTTP_VERSION_2TLS : (long)CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE);
	curl_easy_setopt(h->easy, CURLOPT_POST, 1L);
	curl_easy_setopt(h->easy, CURLOPT_USERAGENT, "stackrelay-agent/" SR_VERSION);
	curl_easy_setopt(h->easy, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
	curl_easy_setopt(h->easy, CURLOPT_CONNECTTIMEOUT_MS, (long)connect_ms);
	curl_easy_setopt(h->easy, CURLOPT_WRITEFUNCTION, write_cb);
	curl_easy_setopt(h->easy, CURLOPT_WRITEDATA, h);
	curl_easy_setopt(h->easy, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(h->easy, CURLOPT_XFERINFOFUNCTION, xferinfo_cb);
	curl_easy_setopt(h->easy, CURLOPT_XFERINFODATA, h);
	curl_easy_setopt(h->easy, CURLOPT_SOCKOPTFUNCTION, sockopt_cb);
	curl_easy_setopt(h->easy, CURLOPT_SOCKOPTDATA, h);
	curl_easy_setopt(h->easy, CURLOPT_ERRORBUFFER, h->errbuf);
	h->no_reuse = !https && vi->version_num < 0x080000;
	if (h->no_reuse) {
		curl_easy_setopt(h->easy, CURLOPT_FORBID_REUSE, 1L);
		sr_log_info("sender", "this libcurl cannot reuse h2c connections; one connection per request",
			    "libcurl=%s see=https://github.com/curl/curl/issues/10634", vi->version);
	}
	agent_http_set_connection(h->easy, tls, https);
	if (h->connect_to)
		curl_easy_setopt(h->easy, CURLOPT_CONNECT_TO, h->connect_to);
	ret->userdata = h;
	ret->post = http_post;
	ret->free = http_free;
	return 0;
fail:
	http_free(h);
	return r;
}
