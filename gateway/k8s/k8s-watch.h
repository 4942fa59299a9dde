/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Decoders of what the Kubernetes API server sends, as pure functions over
 * bytes (docs/style.md 11): the client's transfer callbacks hand them whatever
 * arrived, and unit tests and the fuzzer (tests/fuzz/fuzz-k8s-watch.c) drive
 * them without a network.
 *
 * A watch response is a stream of JSON objects, one per line:
 *   {"type":"ADDED","object":{...Pod...}}
 *   {"type":"BOOKMARK","object":{"kind":"Pod","metadata":{"resourceVersion":"12345"}}}
 *   {"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired",...}}
 * Bytes arrive in arbitrary pieces; the decoder keeps the partial line, up to
 * max_event_bytes (K8S_WATCH_MAX_EVENT_BYTES by default).
 */
#ifndef SR_GW_K8S_WATCH_H
#define SR_GW_K8S_WATCH_H

#include <stddef.h>
#include <stdint.h>

#include "k8s-object.h"

/* Largest single watch event or list page accepted: a pod is ~10-50 KiB. */
#define K8S_WATCH_MAX_EVENT_BYTES (8u << 20)
#define K8S_LIST_MAX_PAGE_BYTES	  (64u << 20)
/* JSON nesting accepted (managedFields of a pod go ~15 deep). */
#define K8S_JSON_MAX_DEPTH 64

enum k8s_event_type {
	K8S_EVENT_ADDED,
	K8S_EVENT_MODIFIED,
	K8S_EVENT_DELETED,
	K8S_EVENT_BOOKMARK,
	K8S_EVENT_ERROR,
};

const char *k8s_event_type_to_string(enum k8s_event_type t);

struct k8s_event {
	enum k8s_event_type type;
	/* ADDED/MODIFIED/DELETED: the record; the callback may take it (set .ptr = NULL). */
	struct k8s_object object;
	/* metadata.resourceVersion of the object (all but ERROR); may be NULL. */
	const char *resource_version;
	/* ERROR: the Status code (410 means the resourceVersion is too old) and message. */
	int error_code;
	const char *error_message;
};

/* Returns 0 to continue, or a negative errno that stops decoding and is returned by feed. */
typedef int (*k8s_event_cb)(void *userdata, struct k8s_event *ev);

struct k8s_watch_decoder;

/* keep may be NULL; it must outlive the decoder. */
struct k8s_watch_decoder *k8s_watch_decoder_new(enum k8s_kind kind, const struct k8s_keep *keep,
						size_t max_event_bytes);
void k8s_watch_decoder_free(struct k8s_watch_decoder *d);
/*
 * Consumes len bytes and calls cb for every complete event. Returns 0, the
 * callback's error, -EMSGSIZE when a line exceeds the limit, or -EBADMSG for
 * a line that is not a JSON watch event. Objects that are valid JSON but not
 * usable records (no uid) are skipped and counted.
 */
int k8s_watch_decoder__feed(struct k8s_watch_decoder *d, const void *data, size_t len, k8s_event_cb cb, void *userdata);
/* End of stream: decodes a last line without newline. */
int k8s_watch_decoder__finish(struct k8s_watch_decoder *d, k8s_event_cb cb, void *userdata);
/* Events skipped because their object was unusable. */
uint64_t k8s_watch_decoder__skipped(const struct k8s_watch_decoder *d);
/* Drops any partial line (new stream). */
void k8s_watch_decoder__reset(struct k8s_watch_decoder *d);

/* What a LIST page says besides its items. */
struct k8s_list_meta {
	char *resource_version;
	char *continue_token; /* NULL on the last page */
	uint64_t skipped;     /* items without a usable record */
};

/*
 * Decodes one LIST response page (a v1 PodList, NamespaceList, ... or a
 * PartialObjectMetadataList): calls cb with an ADDED event per usable item.
 * Returns 0, -EBADMSG for a body that is not a list, or the callback's error.
 * ret->resource_version and ret->continue_token are malloc'd (free them with
 * k8s_list_meta_clear) even on error.
 */
int k8s_list_parse(enum k8s_kind kind, const void *body, size_t len, const struct k8s_keep *keep, k8s_event_cb cb,
		   void *userdata, struct k8s_list_meta *ret);
void k8s_list_meta_clear(struct k8s_list_meta *m);

/*
 * The code and message of a Status body (what the server answers with 4xx
 * and 5xx): returns the code or -EBADMSG. message is copied into msgbuf.
 */
int k8s_status_parse(const void *body, size_t len, char *msgbuf, size_t msgsize);

#endif
