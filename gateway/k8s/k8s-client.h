/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Kubernetes API client: LIST + WATCH of pods (and, when extraction
 * needs them, namespaces, metadata-only ReplicaSets and nodes) into a
 * struct k8s_cache, on the gateway's libuv loop. HTTP is libcurl's multi
 * interface driven by libuv (curl_multi_socket_action from uv_poll and
 * uv_timer callbacks), so nothing blocks the loop and connections are
 * reused (HTTP/2 multiplexed when the server offers it).
 *
 * Per resource, the same state machine as client-go's reflector:
 *   LIST ?limit=N[&continue=T] page by page -> replace the cache's view;
 *   WATCH ?watch=1&resourceVersion=RV&allowWatchBookmarks=true&timeoutSeconds=[300,600)
 *     -> apply events, keep the newest RV (bookmarks included);
 *   the watch ends (server timeout)        -> WATCH again from RV;
 *   410 Gone, as status or ERROR event     -> LIST again (an expired continue token too);
 *   401                                    -> re-read the token, retry after backoff;
 *   any other failure or a dropped stream  -> retry after backoff (800 ms doubling
 *     to 30 s, with jitter; reset after 2 minutes without failure).
 * The bearer token file is re-read at least every token_reload (1 min) and
 * after every 401, since projected service account tokens rotate.
 */
#ifndef SR_GW_K8S_CLIENT_H
#define SR_GW_K8S_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "k8s-kubeconfig.h"
#include "k8s-object.h"

struct k8s_cache;

/* Defaults of struct k8s_client_options (0 there means these). */
#define K8S_DEFAULT_BACKOFF_INITIAL_NS	(800ull * 1000000ull)
#define K8S_DEFAULT_BACKOFF_MAX_NS	(30ull * 1000000000ull)
#define K8S_DEFAULT_BACKOFF_RESET_NS	(120ull * 1000000000ull)
#define K8S_DEFAULT_TOKEN_RELOAD_NS	(60ull * 1000000000ull)
#define K8S_DEFAULT_WATCH_TIMEOUT_MIN_S 300u
#define K8S_DEFAULT_WATCH_TIMEOUT_MAX_S 600u /* exclusive */
#define K8S_DEFAULT_LIST_LIMIT		500u
#define K8S_DEFAULT_REQUEST_TIMEOUT_NS	(60ull * 1000000000ull)
#define K8S_DEFAULT_EXPIRE_INTERVAL_NS	(15ull * 1000000000ull)

struct k8s_client_options {
	struct k8s_conn conn;	     /* copied */
	struct k8s_cache *cache;     /* filled by the client; owned by the caller */
	const struct k8s_keep *keep; /* which labels/annotations to store; may be NULL */
	bool watch[K8S_KIND_MAX];    /* which kinds to list/watch */

	/* Pod filters, as the Collector's filter: */
	char *namespace;      /* only this namespace's pods */
	char *field_selector; /* e.g. "spec.nodeName=node-1" */
	char *label_selector; /* e.g. "app=x,tier!=db" */
	/* Namespaces: e.g. "metadata.name=kube-system" when only the cluster UID is wanted. */
	char *namespace_field_selector;

	uint64_t backoff_initial_ns, backoff_max_ns, backoff_reset_ns;
	uint64_t token_reload_ns;
	uint32_t watch_timeout_min_s, watch_timeout_max_s;
	uint32_t list_limit;
	uint64_t request_timeout_ns;
	uint64_t expire_interval_ns; /* how often deleted pods past their grace are forgotten */

	/* Called once, when every watched kind has been listed completely. */
	void (*on_synced)(void *userdata);
	void *userdata;
};

struct k8s_client_stats {
	uint64_t lists;	  /* LIST requests (pages) completed */
	uint64_t watches; /* WATCH streams opened */
	uint64_t events;  /* watch events applied */
	uint64_t bookmarks;
	uint64_t relists;	/* LISTs started again after 410 Gone */
	uint64_t failures;	/* requests failed (network, HTTP status, bad data) */
	uint64_t unauthorized;	/* 401 answers */
	uint64_t token_reloads; /* token file reads */
	uint64_t bytes;		/* response bytes received */
	uint64_t skipped;	/* objects that were not usable records */
	bool synced;
};

struct k8s_client;

/* Returns NULL with errno and a message in errbuf. The loop must outlive the client. */
struct k8s_client *k8s_client_new(uv_loop_t *loop, const struct k8s_client_options *o, char *errbuf, size_t errsize);
/* Starts listing. Returns 0 or -errno. */
int k8s_client__start(struct k8s_client *c);
bool k8s_client__synced(const struct k8s_client *c);
void k8s_client__stats(const struct k8s_client *c, struct k8s_client_stats *ret);
/*
 * Aborts every transfer and closes every handle; cb runs (from the loop)
 * once all are closed, after which the client is freed. cb may be NULL.
 */
void k8s_client__close(struct k8s_client *c, void (*cb)(void *userdata), void *userdata);

#endif
