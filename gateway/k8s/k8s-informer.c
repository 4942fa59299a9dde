/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Kubernetes API client's informers (k8s-client-private.h), one per
 * resource, running the state machine of client-go's reflector described in
 * k8s-client.h: LIST page by page (each page decoded on a worker thread,
 * then applied to the cache on the loop), WATCH from the last
 * resourceVersion, LIST again on 410 Gone, retries after a jittered, doubling
 * backoff, and the one report that every watched kind is listed.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <uv.h>

#include "common/clock.h"
#include "common/grow.h"
#include "common/log.h"
#include "common/macro.h"
#include "k8s-cache.h"
#include "k8s-client-private.h"
#include "k8s-client.h"
#include "k8s-watch.h"

/* A watch that ends cleanly sooner than this is treated as a failure (no busy loop on a broken proxy). */
#define K8S_WATCH_MIN_HEALTHY_NS (1ull * 1000000000ull)

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

static void start_watch(struct informer *inf);

int k8s_client_on_watch_event(void *userdata, struct k8s_event *ev)
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
		r = k8s_cache__apply(c->o.cache, ev, sr_now_ns());
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

static void on_backoff_timer(uv_timer_t *t)
{
	struct informer *inf = SR_CONTAINER_OF(t, struct informer, timer);

	if (inf->client->closing)
		return;
	if (inf->rv && inf->synced)
		start_watch(inf);
	else
		k8s_client_start_list(inf);
}

/* Schedules the next attempt after the current backoff; doubles it. */
static void fail_and_retry(struct informer *inf, const char *what, const char *detail)
{
	struct k8s_client *c = inf->client;
	uint64_t now = sr_now_ns(), delay;
	char dbuf[32], qbuf[400];

	c->stats.failures++;
	k8s_client_release_transfer(inf);
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

void k8s_client_start_list(struct informer *inf)
{
	int r;

	k8s_client_release_transfer(inf);
	inf->state = INF_LISTING;
	r = k8s_client_begin_transfer(inf, false, 0);
	if (r < 0)
		fail_and_retry(inf, "list", strerror(-r));
}

static void start_watch(struct informer *inf)
{
	struct k8s_client *c = inf->client;
	uint32_t span = c->o.watch_timeout_max_s - c->o.watch_timeout_min_s;
	uint32_t t = c->o.watch_timeout_min_s + (span ? (uint32_t)(next_random(c) % span) : 0);
	int r;

	k8s_client_release_transfer(inf);
	inf->state = INF_WATCHING;
	c->stats.watches++;
	r = k8s_client_begin_transfer(inf, true, t);
	if (r < 0)
		fail_and_retry(inf, "watch", strerror(-r));
}

void k8s_client_maybe_report_synced(struct k8s_client *c)
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

/* Worker thread: decodes the page into records; nothing of the client but the informer's page is touched. */
static int collect_item(void *userdata, struct k8s_event *ev)
{
	struct informer *inf = userdata;
	int r = sr_grow((void **)&inf->page_objs, &inf->page_cap, inf->page_n + 1, sizeof(*inf->page_objs), 256);

	if (r < 0)
		return r;
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
		k8s_client_start_list(inf);
		return;
	}
	if (code != 200) {
		if (code == 401) {
			c->stats.unauthorized++;
			k8s_client_load_token(c, true);
		}
		k8s_client_status_detail(inf, code, detail, sizeof(detail));
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
			k8s_client_maybe_report_synced(c);
		}
		fail_and_retry(inf, "list", detail);
		return;
	}
	/* Hand the body to a worker: decoding must not stall the loop. */
	inf->page_body = inf->body;
	inf->page_len = inf->body_len;
	inf->body = NULL;
	inf->body_len = inf->body_cap = 0;
	k8s_client_release_transfer(inf);
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
	uint64_t now = sr_now_ns();
	int r = status < 0 ? status : inf->page_r;

	inf->parsing = false;
	if (c->closing) {
		free_page(inf);
		/* The last thing close() waited for frees the client. */
		k8s_client_unref(c);
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
		k8s_client_start_list(inf);
		return;
	}
	k8s_cache__resync_end(c->o.cache, inf->kind, sr_now_ns());
	inf->listing_started = false;
	free(inf->rv);
	inf->rv = meta.resource_version;
	meta.resource_version = NULL;
	k8s_list_meta_clear(&meta);
	if (!inf->synced) {
		inf->synced = true;
		sr_log_info(LOG_COMPONENT, "listed", "resource=%s", k8s_kind_to_string(inf->kind));
	}
	k8s_client_maybe_report_synced(c);
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
		k8s_client_start_list(inf);
		return;
	}
	if (res == CURLE_OK && code == 200) {
		int r = k8s_watch_decoder__finish(inf->decoder, k8s_client_on_watch_event, inf);
		if (inf->relist) {
			c->stats.relists++;
			SR_FREE(inf->rv);
			k8s_client_start_list(inf);
			return;
		}
		if (r == 0 && sr_now_ns() - inf->started_ns >= K8S_WATCH_MIN_HEALTHY_NS) {
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
		k8s_client_load_token(c, true);
	}
	k8s_client_status_detail(inf, code, detail, sizeof(detail));
	fail_and_retry(inf, "watch", detail);
}

void k8s_client_finish_transfer(struct informer *inf, CURLcode res)
{
	long code = 0;

	curl_easy_getinfo(inf->easy, CURLINFO_RESPONSE_CODE, &code);
	if (inf->state == INF_LISTING)
		finish_list(inf, res, code);
	else if (inf->state == INF_WATCHING)
		finish_watch(inf, res, code);
}
