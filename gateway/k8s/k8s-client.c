// SPDX-License-Identifier: Apache-2.0
/*
 * The Kubernetes API client (k8s-client.h): options and their defaults;
 * creating, starting and closing the client; its stats; and the handles and
 * work that close() waits for before freeing it. Each resource's LIST/WATCH
 * runs in k8s-informer.c, each HTTP request in k8s-request.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>
#include <uv.h>

#include "common/clock.h"
#include "common/macro.h"
#include "curl-uv.h"
#include "k8s-cache.h"
#include "k8s-client-private.h"
#include "k8s-client.h"
#include "k8s-watch.h"

static char *xstrdup(const char *s)
{
	return s ? strdup(s) : NULL;
}

/* ---- lifetime ---- */

/* One of the things close() waits for is done; the last one frees the client. */
void k8s_client_unref(struct k8s_client *c)
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
	k8s_client_unref(h->data);
}

static void on_curl_closed(void *userdata)
{
	k8s_client_unref(userdata);
}

static void on_expire_timer(uv_timer_t *t)
{
	struct k8s_client *c = t->data;

	k8s_cache__expire(c->o.cache, sr_now_ns());
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

	k8s_client_load_token(c, true);
	for (size_t i = 0; i < SR_ARRAY_SIZE(order); i++)
		if (c->inf[order[i]].enabled) {
			any = true;
			k8s_client_start_list(&c->inf[order[i]]);
		}
	uv_timer_start(&c->expire_timer, on_expire_timer, c->o.expire_interval_ns / 1000000,
		       c->o.expire_interval_ns / 1000000);
	if (!any)
		k8s_client_maybe_report_synced(c);
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
		k8s_client_release_transfer(&c->inf[k]);
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
