// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>
#include <uv.h>

#include "common/log.h"
#include "common/macro.h"
#include "curl-uv.h"
#include "k8s-cache.h"
#include "k8s-client.h"
#include "k8s-watch.h"

#define LOG_COMPONENT "k8s"
/* A watch that ends cleanly sooner than this is treated as a failure (no busy loop on a broken proxy). */
#define K8S_WATCH_MIN_HEALTHY_NS (1ull * 1000000000ull)
/* The largest error body kept for the log message. */
#define K8S_ERROR_BODY_MAX 4096u

enum inf_state {
	INF_IDLE,
	INF_LISTING,
	INF_WATCHING,
	INF_BACKOFF,
};

struct k8s_client;

struct informer {
	struct k8s_client *client;
	enum k8s_kind kind;
	const char *path;   /* "/api/v1/pods" (namespace inserted when filtered) */
	const char *accept; /* NULL: application/json */
	bool enabled;
	enum inf_state state;
	bool synced;
	bool listing_started; /* first page of the current relist seen */

	struct gw_curl_uv_xfer xfer; /* the driver's handle on the transfer */
	CURL *easy;
	struct curl_slist *headers;
	char *url;
	char *body;
	size_t body_len, body_cap;
	struct k8s_watch_decoder *decoder;
	int stream_error; /* set by the write callback: why the stream was cut */
	bool relist;	  /* 410 seen: LIST next */
	uint64_t started_ns;
	uint64_t events_this_watch;

	char *rv; /* resourceVersion to watch from */
	char *continue_token;

	/* A LIST page is decoded on a worker thread (a 500-pod page is megabytes of JSON). */
	uv_work_t work;
	bool parsing;
	char *page_body; /* the page being decoded, owned by the work until it is done */
	size_t page_len;
	struct k8s_object *page_objs;
	size_t page_n, page_cap;
	struct k8s_list_meta page_meta;
	int page_r;

	uv_timer_t timer; /* backoff */
	uint64_t backoff_ns;
	uint64_t last_failure_ns;
};

struct k8s_client {
	uv_loop_t *loop;
	struct k8s_client_options o;
	struct gw_curl_uv *curl; /* runs the list and watch transfers on the loop */
	uv_timer_t expire_timer;
	struct informer inf[K8S_KIND_MAX];
	char *token;
	uint64_t token_loaded_ns;
	char *pod_path; /* with the namespace filter */
	struct k8s_client_stats stats;
	bool synced_reported;
	uint64_t rng; /* xorshift state for jitter, seeded per process */
	bool closing;
	/* Open handles (timers, the curl driver, a page being decoded); the client is freed at 0 after close. */
	unsigned open_handles;
	void (*close_cb)(void *userdata);
	void *close_userdata;
};

/* CLOCK_MONOTONIC nanoseconds (the cache's grace periods and the backoff use the same clock). */
static uint64_t now_ns(const struct k8s_client *c)
{
	(void)c;
	return uv_hrtime();
}

/*
 * Jitter must differ between gateways started together (rand() without a
 * seed gives every process the same sequence): xorshift64 seeded from the
 * clock and the pid.
 */
static uint64_t next_random(struct k8s_client *c)
{
	uint64_t x = c->rng;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	c->rng = x;
	return x;
}

static char *xstrdup(const char *s)
{
	return s ? strdup(s) : NULL;
}

static void start_list(struct informer *inf);
static void start_watch(struct informer *inf);

/* ---- token ---- */

static void load_token(struct k8s_client *c, bool force)
{
	char *t = NULL;
	int r;

	if (!c->o.conn.token_file)
		return;
	if (!force && c->token && now_ns(c) - c->token_loaded_ns < c->o.token_reload_ns)
		return;
	c->token_loaded_ns = now_ns(c);
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

/* ---- lifetime ---- */

/* One of the things close() waits for is done; the last one frees the client. */
static void client_unref(struct k8s_client *c)
{
	if (--c->open_handles == 0 && c->closing) {
		void (*cb)(void *) = c->close_cb;
		void *ud = c->close_userdata;
		free(c);
		if (cb)
			cb(ud);
	}
}

static void on_handle_closed(uv_handle_t *h)
{
	client_unref(h->data);
}

static void on_curl_closed(void *userdata)
{
	client_unref(userdata);
}

/* ---- requests ---- */

static void finish_transfer(struct informer *inf, CURLcode res);

static void on_transfer_done(struct gw_curl_uv_xfer *x, CURLcode res)
{
	finish_transfer(SR_CONTAINER_OF(x, struct informer, xfer), res);
}

static void release_transfer(struct informer *inf)
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
	if (inf->body_len + n + 1 > inf->body_cap) {
		size_t cap = inf->body_cap ? inf->body_cap : 65536;
		while (cap < inf->body_len + n + 1)
			cap *= 2;
		char *b = realloc(inf->body, cap);
		if (!b)
			return -ENOMEM;
		inf->body = b;
		inf->body_cap = cap;
	}
	memcpy(inf->body + inf->body_len, data, n);
	inf->body_len += n;
	inf->body[inf->body_len] = '\0';
	return 0;
}

static int on_watch_event(void *userdata, struct k8s_event *ev)
{
	struct informer *inf = userdata;
	struct k8s_client *c = inf->client;
	int r;

	switch (ev->type) {
	case K8S_EVENT_ERROR:
		if (ev->error_code == 410) {
			inf->relist = true;
			return -ESTALE;
		}
		char q[300];
		sr_log_warn(LOG_COMPONENT, "watch stream reported an error; reconnecting",
			    "resource=%s code=%d message=%s", k8s_kind_to_string(inf->kind), ev->error_code,
			    sr_log_quote(ev->error_message ? ev->error_message : "", q, sizeof(q)));
		return -EPROTO;
	case K8S_EVENT_BOOKMARK:
		c->stats.bookmarks++;
		break;
	default:
		r = k8s_cache__apply(c->o.cache, ev, now_ns(c));
		if (r < 0)
			return r;
		c->stats.events++;
		inf->events_this_watch++;
		break;
	}
	if (ev->resource_version && *ev->resource_version) {
		char *rv = strdup(ev->resource_version);
		if (rv) {
			free(inf->rv);
			inf->rv = rv;
		}
	}
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
		r = k8s_watch_decoder__feed(inf->decoder, data, n, on_watch_event, inf);
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

static int begin_transfer(struct informer *inf, bool watch, uint32_t timeout_s)
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
	load_token(c, false);
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
	inf->started_ns = now_ns(c);
	if (watch)
		k8s_watch_decoder__reset(inf->decoder);
	r = gw_curl_uv__add(c->curl, &inf->xfer, e, on_transfer_done);
	/* -ENOMEM there is curl refusing the handle, reported as before as an I/O failure. */
	return r == -ENOMEM ? -EIO : r;
}

static void on_backoff_timer(uv_timer_t *t)
{
	struct informer *inf = SR_CONTAINER_OF(t, struct informer, timer);

	if (inf->client->closing)
		return;
	if (inf->rv && inf->synced)
		start_watch(inf);
	else
		start_list(inf);
}

/* Schedules the next attempt after the current backoff; doubles it. */
static void fail_and_retry(struct informer *inf, const char *what, const char *detail)
{
	struct k8s_client *c = inf->client;
	uint64_t now = now_ns(c), delay;
	char dbuf[32], qbuf[400];

	c->stats.failures++;
	release_transfer(inf);
	if (inf->last_failure_ns && now - inf->last_failure_ns > c->o.backoff_reset_ns)
		inf->backoff_ns = c->o.backoff_initial_ns;
	inf->last_failure_ns = now;
	/* Jitter up to +100%, as client-go, so that many gateways do not retry in step. */
	delay = inf->backoff_ns + next_random(c) % (inf->backoff_ns + 1);
	if (delay > c->o.backoff_max_ns)
		delay = c->o.backoff_max_ns;
	inf->backoff_ns = SR_MIN(inf->backoff_ns * 2, c->o.backoff_max_ns);
	inf->state = INF_BACKOFF;
	snprintf(dbuf, sizeof(dbuf), "%" PRIu64 "ms", delay / 1000000);
	sr_log_warn(LOG_COMPONENT, "Kubernetes API request failed; retrying",
		    "resource=%s request=%s error=%s retry_in=%s", k8s_kind_to_string(inf->kind), what,
		    sr_log_quote(detail, qbuf, sizeof(qbuf)), dbuf);
	uv_timer_start(&inf->timer, on_backoff_timer, delay / 1000000, 0);
}

static void start_list(struct informer *inf)
{
	int r;

	release_transfer(inf);
	inf->state = INF_LISTING;
	r = begin_transfer(inf, false, 0);
	if (r < 0)
		fail_and_retry(inf, "list", strerror(-r));
}

static void start_watch(struct informer *inf)
{
	struct k8s_client *c = inf->client;
	uint32_t span = c->o.watch_timeout_max_s - c->o.watch_timeout_min_s;
	uint32_t t = c->o.watch_timeout_min_s + (span ? (uint32_t)(next_random(c) % span) : 0);
	int r;

	release_transfer(inf);
	inf->state = INF_WATCHING;
	c->stats.watches++;
	r = begin_transfer(inf, true, t);
	if (r < 0)
		fail_and_retry(inf, "watch", strerror(-r));
}

static void maybe_report_synced(struct k8s_client *c)
{
	if (c->synced_reported)
		return;
	for (int k = 0; k < K8S_KIND_MAX; k++)
		if (c->inf[k].enabled && !c->inf[k].synced)
			return;
	c->synced_reported = true;
	c->stats.synced = true;
	if (c->o.on_synced)
		c->o.on_synced(c->o.userdata);
}

static void status_detail(struct informer *inf, long code, char *buf, size_t size)
{
	char msg[256] = "";

	if (inf->body_len)
		k8s_status_parse(inf->body, inf->body_len, msg, sizeof(msg));
	snprintf(buf, size, "HTTP %ld%s%s", code, msg[0] ? ": " : "", msg);
}

/* Worker thread: decodes the page into records; nothing of the client but the informer's page is touched. */
static int collect_item(void *userdata, struct k8s_event *ev)
{
	struct informer *inf = userdata;

	if (inf->page_n == inf->page_cap) {
		size_t cap = inf->page_cap ? inf->page_cap * 2 : 256;
		struct k8s_object *o = realloc(inf->page_objs, cap * sizeof(*o));
		if (!o)
			return -ENOMEM;
		inf->page_objs = o;
		inf->page_cap = cap;
	}
	inf->page_objs[inf->page_n++] = ev->object;
	ev->object.ptr = NULL;
	return 0;
}

static void parse_page_work(uv_work_t *w)
{
	struct informer *inf = w->data;

	inf->page_r = k8s_list_parse(inf->kind, inf->page_body, inf->page_len, inf->client->o.keep, collect_item, inf,
				     &inf->page_meta);
}

static void parse_page_done(uv_work_t *w, int status);

static void finish_list(struct informer *inf, CURLcode res, long code)
{
	struct k8s_client *c = inf->client;
	char detail[320];
	int r;

	if (res != CURLE_OK) {
		snprintf(detail, sizeof(detail), "%s",
			 inf->stream_error ? strerror(-inf->stream_error) : curl_easy_strerror(res));
		fail_and_retry(inf, "list", detail);
		return;
	}
	if (code == 410 && inf->continue_token) {
		/* The continue token expired between pages: start the list over. */
		SR_FREE(inf->continue_token);
		inf->listing_started = false;
		c->stats.relists++;
		start_list(inf);
		return;
	}
	if (code != 200) {
		if (code == 401) {
			c->stats.unauthorized++;
			load_token(c, true);
		}
		status_detail(inf, code, detail, sizeof(detail));
		SR_FREE(inf->continue_token);
		inf->listing_started = false;
		if (code == 403 && inf->kind != K8S_KIND_POD && !inf->synced) {
			/*
			 * RBAC without this optional kind (the chart can leave out
			 * namespaces or ReplicaSets): pods alone are enough to be
			 * ready; extraction falls back (pod-template-hash trim)
			 * and the list keeps being retried at the backoff pace.
			 */
			sr_log_error(LOG_COMPONENT,
				     "forbidden to list an optional resource; continuing without it "
				     "(grant list/watch in the ClusterRole to get its attributes)",
				     "resource=%s", k8s_kind_to_string(inf->kind));
			inf->synced = true;
			maybe_report_synced(c);
		}
		fail_and_retry(inf, "list", detail);
		return;
	}
	/* Hand the body to a worker: decoding must not stall the loop. */
	inf->page_body = inf->body;
	inf->page_len = inf->body_len;
	inf->body = NULL;
	inf->body_len = inf->body_cap = 0;
	release_transfer(inf);
	inf->page_n = 0;
	inf->page_r = 0;
	memset(&inf->page_meta, 0, sizeof(inf->page_meta));
	inf->work.data = inf;
	r = uv_queue_work(c->loop, &inf->work, parse_page_work, parse_page_done);
	if (r < 0) {
		SR_FREE(inf->page_body);
		fail_and_retry(inf, "list", uv_strerror(r));
		return;
	}
	inf->parsing = true;
	c->open_handles++; /* close() waits for the work */
}

static void free_page(struct informer *inf)
{
	for (size_t i = 0; i < inf->page_n; i++)
		k8s_object_clear(&inf->page_objs[i]);
	SR_FREE(inf->page_objs);
	inf->page_n = inf->page_cap = 0;
	SR_FREE(inf->page_body);
	k8s_list_meta_clear(&inf->page_meta);
}

static void parse_page_done(uv_work_t *w, int status)
{
	struct informer *inf = w->data;
	struct k8s_client *c = inf->client;
	struct k8s_list_meta meta;
	uint64_t now = now_ns(c);
	int r = status < 0 ? status : inf->page_r;

	inf->parsing = false;
	if (c->closing) {
		free_page(inf);
		/* The last thing close() waited for frees the client. */
		client_unref(c);
		return;
	}
	c->open_handles--;
	c->stats.lists++;
	c->stats.skipped += inf->page_meta.skipped;
	if (r < 0) {
		free_page(inf);
		SR_FREE(inf->continue_token);
		inf->listing_started = false;
		fail_and_retry(inf, "list", r == -EBADMSG ? "response is not a Kubernetes list" : strerror(-r));
		return;
	}
	if (!inf->listing_started) {
		k8s_cache__resync_begin(c->o.cache, inf->kind);
		inf->listing_started = true;
	}
	for (size_t i = 0; i < inf->page_n; i++) {
		struct k8s_event ev = { .type = K8S_EVENT_ADDED, .object = inf->page_objs[i] };
		/* -ENOMEM drops this object only; the next relist brings it back. */
		(void)k8s_cache__apply(c->o.cache, &ev, now);
		inf->page_objs[i] = ev.object;
	}
	meta = inf->page_meta;
	memset(&inf->page_meta, 0, sizeof(inf->page_meta));
	free_page(inf);
	free(inf->continue_token);
	inf->continue_token = meta.continue_token;
	meta.continue_token = NULL;
	if (inf->continue_token) {
		k8s_list_meta_clear(&meta);
		start_list(inf);
		return;
	}
	k8s_cache__resync_end(c->o.cache, inf->kind, now_ns(c));
	inf->listing_started = false;
	free(inf->rv);
	inf->rv = meta.resource_version;
	meta.resource_version = NULL;
	k8s_list_meta_clear(&meta);
	if (!inf->synced) {
		inf->synced = true;
		sr_log_info(LOG_COMPONENT, "listed", "resource=%s", k8s_kind_to_string(inf->kind));
	}
	maybe_report_synced(c);
	start_watch(inf);
}

static void finish_watch(struct informer *inf, CURLcode res, long code)
{
	struct k8s_client *c = inf->client;
	char detail[320];

	if (inf->relist || code == 410) {
		c->stats.relists++;
		sr_log_info(LOG_COMPONENT, "resourceVersion expired (410 Gone); listing again", "resource=%s",
			    k8s_kind_to_string(inf->kind));
		SR_FREE(inf->rv);
		start_list(inf);
		return;
	}
	if (res == CURLE_OK && code == 200) {
		int r = k8s_watch_decoder__finish(inf->decoder, on_watch_event, inf);
		if (inf->relist) {
			c->stats.relists++;
			SR_FREE(inf->rv);
			start_list(inf);
			return;
		}
		if (r == 0 && now_ns(c) - inf->started_ns >= K8S_WATCH_MIN_HEALTHY_NS) {
			/* The server ended the watch at timeoutSeconds: carry on from the last RV. */
			start_watch(inf);
			return;
		}
		fail_and_retry(inf, "watch", r < 0 ? "bad watch event" : "watch ended immediately");
		return;
	}
	if (res != CURLE_OK) {
		snprintf(detail, sizeof(detail), "%s",
			 inf->stream_error == -EBADMSG ? "bad watch event"
			 : inf->stream_error	       ? strerror(-inf->stream_error)
						       : curl_easy_strerror(res));
		fail_and_retry(inf, "watch", detail);
		return;
	}
	if (code == 401) {
		c->stats.unauthorized++;
		load_token(c, true);
	}
	status_detail(inf, code, detail, sizeof(detail));
	fail_and_retry(inf, "watch", detail);
}

static void finish_transfer(struct informer *inf, CURLcode res)
{
	long code = 0;

	curl_easy_getinfo(inf->easy, CURLINFO_RESPONSE_CODE, &code);
	if (inf->state == INF_LISTING)
		finish_list(inf, res, code);
	else if (inf->state == INF_WATCHING)
		finish_watch(inf, res, code);
}

static void on_expire_timer(uv_timer_t *t)
{
	struct k8s_client *c = t->data;

	k8s_cache__expire(c->o.cache, now_ns(c));
}

/* ---- lifecycle ---- */

static void options_clear(struct k8s_client_options *o)
{
	k8s_conn_clear(&o->conn);
	free(o->namespace);
	free(o->field_selector);
	free(o->namespace_field_selector);
	free(o->label_selector);
}

static int conn_copy(const struct k8s_conn *s, struct k8s_conn *d)
{
	memset(d, 0, sizeof(*d));
	d->server = xstrdup(s->server);
	d->ca_file = xstrdup(s->ca_file);
	d->token = xstrdup(s->token);
	d->token_file = xstrdup(s->token_file);
	d->cert_file = xstrdup(s->cert_file);
	d->key_file = xstrdup(s->key_file);
	d->namespace = xstrdup(s->namespace);
	d->insecure = s->insecure;
	if (s->ca_data && (d->ca_data = malloc(s->ca_len + 1))) {
		memcpy(d->ca_data, s->ca_data, s->ca_len);
		d->ca_len = s->ca_len;
	}
	if (s->cert_data && (d->cert_data = malloc(s->cert_len + 1))) {
		memcpy(d->cert_data, s->cert_data, s->cert_len);
		d->cert_len = s->cert_len;
	}
	if (s->key_data && (d->key_data = malloc(s->key_len + 1))) {
		memcpy(d->key_data, s->key_data, s->key_len);
		d->key_len = s->key_len;
	}
	if (!d->server || (s->ca_file && !d->ca_file) || (s->token && !d->token) || (s->token_file && !d->token_file) ||
	    (s->ca_data && !d->ca_data) || (s->cert_data && !d->cert_data) || (s->key_data && !d->key_data) ||
	    (s->cert_file && !d->cert_file) || (s->key_file && !d->key_file))
		return -ENOMEM;
	return 0;
}

struct k8s_client *k8s_client_new(uv_loop_t *loop, const struct k8s_client_options *o, char *errbuf, size_t errsize)
{
	static const char *const paths[K8S_KIND_MAX] = {
		[K8S_KIND_POD] = "/api/v1/pods",
		[K8S_KIND_NAMESPACE] = "/api/v1/namespaces",
		[K8S_KIND_REPLICASET] = "/apis/apps/v1/replicasets",
		[K8S_KIND_NODE] = "/api/v1/nodes",
	};
	struct k8s_client *c;
	int r = -ENOMEM;

	if (!o->cache || !o->conn.server) {
		snprintf(errbuf, errsize, "no cache or no server");
		errno = EINVAL;
		return NULL;
	}
	if (strncmp(o->conn.server, "https://", 8) != 0 && strncmp(o->conn.server, "http://", 7) != 0) {
		snprintf(errbuf, errsize, "server \"%s\" is not an http(s) URL", o->conn.server);
		errno = EINVAL;
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		goto nomem;
	c->loop = loop;
	c->rng = (uv_hrtime() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)c) | 1;
	c->o = *o;
	c->o.namespace = xstrdup(o->namespace);
	c->o.field_selector = xstrdup(o->field_selector);
	c->o.namespace_field_selector = xstrdup(o->namespace_field_selector);
	c->o.label_selector = xstrdup(o->label_selector);
	r = conn_copy(&o->conn, &c->o.conn);
	if (r < 0)
		goto fail_opts;
#define DEF(f, v)                                                                                                      \
	if (!c->o.f)                                                                                                   \
		c->o.f = (v);
	DEF(backoff_initial_ns, K8S_DEFAULT_BACKOFF_INITIAL_NS);
	DEF(backoff_max_ns, K8S_DEFAULT_BACKOFF_MAX_NS);
	DEF(backoff_reset_ns, K8S_DEFAULT_BACKOFF_RESET_NS);
	DEF(token_reload_ns, K8S_DEFAULT_TOKEN_RELOAD_NS);
	DEF(watch_timeout_min_s, K8S_DEFAULT_WATCH_TIMEOUT_MIN_S);
	DEF(watch_timeout_max_s, K8S_DEFAULT_WATCH_TIMEOUT_MAX_S);
	DEF(list_limit, K8S_DEFAULT_LIST_LIMIT);
	DEF(request_timeout_ns, K8S_DEFAULT_REQUEST_TIMEOUT_NS);
	DEF(expire_interval_ns, K8S_DEFAULT_EXPIRE_INTERVAL_NS);
#undef DEF
	if (c->o.watch_timeout_max_s <= c->o.watch_timeout_min_s)
		c->o.watch_timeout_max_s = c->o.watch_timeout_min_s + 1;
	if (c->o.namespace && *c->o.namespace) {
		char *esc = curl_easy_escape(NULL, c->o.namespace, 0);
		if (!esc || asprintf(&c->pod_path, "/api/v1/namespaces/%s/pods", esc) < 0)
			c->pod_path = NULL;
		curl_free(esc);
	} else {
		c->pod_path = strdup(paths[K8S_KIND_POD]);
	}
	if (!c->pod_path)
		goto fail_opts;

	for (int k = 0; k < K8S_KIND_MAX; k++) {
		struct informer *inf = &c->inf[k];
		inf->client = c;
		inf->kind = (enum k8s_kind)k;
		inf->path = paths[k];
		inf->enabled = o->watch[k];
		inf->backoff_ns = c->o.backoff_initial_ns;
		if (k == K8S_KIND_REPLICASET)
			/* Metadata only: the owner references are all we read, at a fraction of the bytes. */
			inf->accept =
				"application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
		inf->decoder = k8s_watch_decoder_new(inf->kind, c->o.keep, 0);
		if (!inf->decoder)
			goto fail_decoders;
	}
	/*
	 * Last, as it opens a libuv handle that only the loop can close: nothing
	 * fails after it. One connection carries every watch when the server
	 * speaks HTTP/2 (the driver multiplexes).
	 */
	c->curl = gw_curl_uv__new(loop);
	if (!c->curl) {
		r = -errno;
		goto fail_decoders;
	}
	uv_timer_init(loop, &c->expire_timer);
	c->expire_timer.data = c;
	c->open_handles = 2; /* the curl driver and the expire timer */
	for (int k = 0; k < K8S_KIND_MAX; k++) {
		uv_timer_init(loop, &c->inf[k].timer);
		c->inf[k].timer.data = c; /* every handle's data is the client (on_handle_closed) */
		c->open_handles++;
	}
	return c;

fail_decoders:
	for (int k = 0; k < K8S_KIND_MAX; k++)
		k8s_watch_decoder_free(c->inf[k].decoder);
fail_opts:
	free(c->pod_path);
	options_clear(&c->o);
	free(c);
	if (r == -EIO) {
		snprintf(errbuf, errsize, "curl_global_init failed");
		errno = EIO;
		return NULL;
	}
nomem:
	snprintf(errbuf, errsize, "out of memory");
	errno = ENOMEM;
	return NULL;
}

int k8s_client__start(struct k8s_client *c)
{
	/* Namespaces and ReplicaSets first, so pods listed next get deployment names at once. */
	static const enum k8s_kind order[] = { K8S_KIND_NAMESPACE, K8S_KIND_REPLICASET, K8S_KIND_NODE, K8S_KIND_POD };
	bool any = false;

	load_token(c, true);
	for (size_t i = 0; i < SR_ARRAY_SIZE(order); i++)
		if (c->inf[order[i]].enabled) {
			any = true;
			start_list(&c->inf[order[i]]);
		}
	uv_timer_start(&c->expire_timer, on_expire_timer, c->o.expire_interval_ns / 1000000,
		       c->o.expire_interval_ns / 1000000);
	if (!any)
		maybe_report_synced(c);
	return 0;
}

bool k8s_client__synced(const struct k8s_client *c)
{
	return c->synced_reported;
}

void k8s_client__stats(const struct k8s_client *c, struct k8s_client_stats *ret)
{
	*ret = c->stats;
}

void k8s_client__close(struct k8s_client *c, void (*cb)(void *userdata), void *userdata)
{
	if (!c)
		return;
	c->closing = true;
	c->close_cb = cb;
	c->close_userdata = userdata;
	for (int k = 0; k < K8S_KIND_MAX; k++) {
		/* A page being decoded stays with its work; parse_page_done frees it. */
		release_transfer(&c->inf[k]);
		k8s_watch_decoder_free(c->inf[k].decoder);
		c->inf[k].decoder = NULL;
		free(c->inf[k].rv);
		free(c->inf[k].continue_token);
		uv_timer_stop(&c->inf[k].timer);
		uv_close((uv_handle_t *)&c->inf[k].timer, on_handle_closed);
	}
	/* Every transfer is released: the driver closes its sockets and timer, then on_curl_closed. */
	gw_curl_uv__close(c->curl, on_curl_closed, c);
	c->curl = NULL;
	uv_timer_stop(&c->expire_timer);
	uv_close((uv_handle_t *)&c->expire_timer, on_handle_closed);
	if (c->token) {
		explicit_bzero(c->token, strlen(c->token));
		free(c->token);
		c->token = NULL;
	}
	free(c->pod_path);
	c->pod_path = NULL;
	options_clear(&c->o);
}
