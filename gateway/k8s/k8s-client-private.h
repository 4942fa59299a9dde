/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the files of the Kubernetes API client share, and nothing else
 * includes: k8s-client.c (the client's lifetime: options, start, stats,
 * close), k8s-informer.c (per resource, the reflector's LIST/WATCH state
 * machine: pages, events, 410, backoff) and k8s-request.c (one HTTP request
 * to the API server: URL, token, TLS, and the response bytes).
 */
#ifndef SR_GW_K8S_CLIENT_PRIVATE_H
#define SR_GW_K8S_CLIENT_PRIVATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>
#include <uv.h>

#include "curl-uv.h"
#include "k8s-client.h"
#include "k8s-watch.h"

#define LOG_COMPONENT "k8s"

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

/* k8s-client.c */
void k8s_client_unref(struct k8s_client *c);

/* k8s-request.c */
void k8s_client_load_token(struct k8s_client *c, bool force);
void k8s_client_release_transfer(struct informer *inf);
int k8s_client_begin_transfer(struct informer *inf, bool watch, uint32_t timeout_s);
void k8s_client_status_detail(struct informer *inf, long code, char *buf, size_t size);

/* k8s-informer.c */
int k8s_client_on_watch_event(void *userdata, struct k8s_event *ev);
void k8s_client_start_list(struct informer *inf);
void k8s_client_maybe_report_synced(struct k8s_client *c);
void k8s_client_finish_transfer(struct informer *inf, CURLcode res);

#endif
