// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include "common/grow.h"
#include "functions.h"
#include "common/macro.h"

static const void *function_key(const void *v, size_t *len)
{
	*len = AGENT_FUNCTION_ID_LEN;
	return ((const struct agent_function *)v)->id;
}

static size_t cut_len(const char *s, size_t max)
{
	return s ? strnlen(s, max) : 0;
}

static void put_le32(uint8_t b[4], uint32_t v)
{
	for (int i = 0; i < 4; i++)
		b[i] = (uint8_t)(v >> (8 * i));
}

static void hash_str(XXH3_state_t *st, const char *s, size_t len)
{
	uint8_t b[4];

	put_le32(b, (uint32_t)len);
	XXH3_128bits_update(st, b, sizeof(b));
	if (len)
		XXH3_128bits_update(st, s, len);
}

void agent_function_id(const struct agent_function_def *def, uint8_t ret[AGENT_FUNCTION_ID_LEN])
{
	XXH3_state_t st;
	XXH128_canonical_t canon;
	uint8_t b[4];

	XXH3_INITSTATE(&st);
	XXH3_128bits_reset(&st);
	hash_str(&st, def->runtime, cut_len(def->runtime, AGENT_FUNCTION_RUNTIME_MAX));
	hash_str(&st, def->name, cut_len(def->name, AGENT_FUNCTION_NAME_MAX));
	hash_str(&st, def->file_name, cut_len(def->file_name, AGENT_FUNCTION_FILE_MAX));
	put_le32(b, def->start_line);
	XXH3_128bits_update(&st, b, sizeof(b));
	XXH128_canonicalFromHash(&canon, XXH3_128bits_digest(&st));
	memcpy(ret, canon.digest, AGENT_FUNCTION_ID_LEN);
}

void agent_functions_init(struct agent_functions *f)
{
	memset(f, 0, sizeof(*f));
	sr_htab_ptrs_init(&f->by_id, function_key);
	f->max_n = AGENT_FUNCTIONS_MAX;
	f->max_bytes = AGENT_FUNCTIONS_MAX_BYTES;
}

void agent_functions_done(struct agent_functions *f)
{
	for (size_t i = 0; i < f->n_slots; i++)
		free(f->slots[i]);
	free(f->slots);
	free(f->free_idx);
	sr_htab_ptrs_done(&f->by_id);
	memset(f, 0, sizeof(*f));
}

struct agent_function *agent_functions__at(const struct agent_functions *f, uint32_t index)
{
	return index < f->n_slots ? f->slots[index] : NULL;
}

struct agent_function *agent_functions__get(const struct agent_functions *f, const uint8_t *id, size_t len)
{
	if (len != AGENT_FUNCTION_ID_LEN)
		return NULL;
	return sr_htab_ptrs__get(&f->by_id, id, len);
}

static void touch(struct agent_functions *f, struct agent_function *fn, uint64_t window)
{
	fn->last_window = window;
	if (f->lru.head != &fn->lru) {
		sr_list__unlink(&f->lru, &fn->lru);
		sr_list__push_front(&f->lru, &fn->lru);
	}
}

/* The least recently used function that may go, or NULL. Scans past referenced ones. */
static struct agent_function *victim(struct agent_functions *f, uint64_t window)
{
	for (struct sr_list_node *n = f->lru.tail; n; n = n->prev) {
		struct agent_function *fn = SR_CONTAINER_OF(n, struct agent_function, lru);

		if (fn->last_window >= window)
			return NULL; /* the rest is newer still */
		if (!fn->refs)
			return fn;
	}
	return NULL;
}

static void evict(struct agent_functions *f, struct agent_function *fn)
{
	sr_list__unlink(&f->lru, &fn->lru);
	sr_htab_ptrs__remove(&f->by_id, fn->id, AGENT_FUNCTION_ID_LEN);
	f->slots[fn->index] = NULL;
	f->free_idx[f->n_free++] = fn->index;
	f->n--;
	f->bytes -= fn->bytes;
	f->evicted++;
	free(fn);
}

static int take_index(struct agent_functions *f, uint32_t *ret)
{
	if (f->n_free) {
		*ret = f->free_idx[--f->n_free];
		return 0;
	}
	if (f->n_slots >= f->max_n)
		return -ENOSPC;
	if (f->n_slots == f->cap_slots) {
		/* Two arrays of one capacity: each grows from a copy of it, which both leave equal. */
		size_t cap_slots = f->cap_slots, cap_free = f->cap_slots;

		if (sr_grow((void **)&f->slots, &cap_slots, f->n_slots + 1, sizeof(*f->slots), 64) < 0 ||
		    sr_grow((void **)&f->free_idx, &cap_free, f->n_slots + 1, sizeof(*f->free_idx), 64) < 0)
			return -ENOMEM;
		f->cap_slots = cap_free;
	}
	f->slots[f->n_slots] = NULL;
	*ret = (uint32_t)f->n_slots++;
	return 0;
}

int64_t agent_functions__add(struct agent_functions *f, const struct agent_function_def *def, uint64_t window)
{
	uint8_t id[AGENT_FUNCTION_ID_LEN];
	struct agent_function *fn;
	size_t lr, ln, lf, bytes;
	uint32_t index;
	int r;

	if (!def->runtime || !def->runtime[0] || !def->name || !def->name[0])
		return -EINVAL;
	agent_function_id(def, id);
	fn = sr_htab_ptrs__get(&f->by_id, id, sizeof(id));
	if (fn) {
		touch(f, fn, window);
		return fn->index;
	}
	lr = cut_len(def->runtime, AGENT_FUNCTION_RUNTIME_MAX);
	ln = cut_len(def->name, AGENT_FUNCTION_NAME_MAX);
	lf = cut_len(def->file_name, AGENT_FUNCTION_FILE_MAX);
	bytes = sizeof(*fn) + lr + ln + lf + 3 + sizeof(struct sr_htab_ptr) * 2;
	while (f->n && (f->n >= f->max_n || f->bytes + bytes > f->max_bytes)) {
		struct agent_function *v = victim(f, window);

		if (!v)
			return -ENOSPC;
		evict(f, v);
	}
	r = take_index(f, &index);
	if (r < 0)
		return r;
	fn = malloc(sizeof(*fn) + lr + ln + lf + 3);
	if (!fn)
		goto nomem;
	memset(fn, 0, sizeof(*fn));
	memcpy(fn->id, id, sizeof(id));
	fn->index = index;
	fn->start_line = def->start_line;
	fn->runtime = (char *)(fn + 1);
	fn->name = fn->runtime + lr + 1;
	fn->file_name = fn->name + ln + 1;
	memcpy(fn->runtime, def->runtime, lr);
	fn->runtime[lr] = '\0';
	memcpy(fn->name, def->name, ln);
	fn->name[ln] = '\0';
	if (lf)
		memcpy(fn->file_name, def->file_name, lf);
	fn->file_name[lf] = '\0';
	fn->bytes = bytes;
	if (sr_htab_ptrs__put(&f->by_id, fn) < 0) {
		free(fn);
		goto nomem;
	}
	f->slots[index] = fn;
	f->n++;
	f->bytes += bytes;
	fn->last_window = window;
	sr_list__push_front(&f->lru, &fn->lru);
	return index;
nomem:
	f->free_idx[f->n_free++] = index;
	return -ENOMEM;
}

void agent_functions__ref(struct agent_functions *f, uint32_t index)
{
	struct agent_function *fn = agent_functions__at(f, index);

	if (fn)
		fn->refs++;
}

void agent_functions__unref(struct agent_functions *f, uint32_t index)
{
	struct agent_function *fn = agent_functions__at(f, index);

	if (fn && fn->refs)
		fn->refs--;
}
