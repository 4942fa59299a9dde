// SPDX-License-Identifier: Apache-2.0
/*
 * The Kubernetes watch-stream and LIST decoders (gateway/k8s/k8s-watch.h) on
 * arbitrary bytes. The first byte picks the kind and mode; the rest is fed
 * to the watch decoder in pieces whose sizes come from the input too (bytes
 * arrive in arbitrary chunks on the wire), then parsed as one LIST page.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "gateway/k8s/k8s-cache.h"
#include "gateway/k8s/k8s-watch.h"

#define FUZZ_MAX_INPUT (1u << 20)

static bool keep_some(void *ud, enum k8s_kind kind, const char *key)
{
	return key[0] && (key[0] & 1);
}

static int apply_cb(void *userdata, struct k8s_event *ev)
{
	struct k8s_cache *c = userdata;

	if (ev->type == K8S_EVENT_ERROR)
		return ev->error_code == 410 ? -ESTALE : 0;
	/* Through the cache too: the records must be well formed for indexing and freeing. */
	return k8s_cache__apply(c, ev, 1) == -ENOMEM ? -ENOMEM : 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct k8s_keep keep = { .label = keep_some, .annotation = keep_some };
	struct k8s_watch_decoder *d;
	struct k8s_cache *c;
	struct k8s_list_meta meta;
	enum k8s_kind kind;
	size_t off = 1, chunk;

	if (size < 1 || size > FUZZ_MAX_INPUT)
		return 0;
	kind = (enum k8s_kind)(data[0] % K8S_KIND_MAX);
	c = k8s_cache_new(&(struct k8s_cache_limits){ .max_pods = 64 });
	d = k8s_watch_decoder_new(kind, (data[0] & 0x80) ? &keep : NULL, 1u << 16);
	if (!c || !d)
		goto out;
	chunk = 1 + (data[0] >> 4 & 7) * 13;
	while (off < size) {
		size_t n = size - off < chunk ? size - off : chunk;
		if (k8s_watch_decoder__feed(d, data + off, n, apply_cb, c) < 0)
			k8s_watch_decoder__reset(d);
		off += n;
	}
	k8s_watch_decoder__finish(d, apply_cb, c);
	k8s_cache__expire(c, 1000000000000ull);
	if (k8s_list_parse(kind, data + 1, size - 1, NULL, apply_cb, c, &meta) >= 0)
		k8s_cache__resync_end(c, kind, 2);
	k8s_list_meta_clear(&meta);
	(void)k8s_cache__pod_by_container(c, "containerd://0123", NULL);
out:
	k8s_watch_decoder_free(d);
	k8s_cache_free(c);
	return 0;
}
