// SPDX-License-Identifier: Apache-2.0
/*
 * The definition store (definition-store.h): stacks, executables and
 * functions interned under their IDs, referenced, expired and evicted at
 * their bounds. Their definitions are read out by definition-store-lookup.c.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include "common/grow.h"
#include "common/htab.h"
#include "common/list.h"
#include "common/macro.h"
#include "definition-store-private.h"
#include "util.h"

static const void *stack_key(const void *v, size_t *len)
{
	*len = AGENT_STACK_ID_LEN;
	return ((const struct stack_entry *)v)->id;
}

static const void *exe_key(const void *v, size_t *len)
{
	const struct exe_entry *e = v;

	*len = e->id_len;
	return e->id;
}

struct agent_store *agent_store_new(uint64_t max_stacks)
{
	struct agent_store *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	pthread_mutex_init(&s->lock, NULL);
	sr_htab_ptrs_init(&s->stacks, stack_key);
	sr_htab_ptrs_init(&s->exes_by_id, exe_key);
	agent_functions_init(&s->funcs);
	s->max_stacks = max_stacks ? max_stacks : AGENT_STORE_DEFAULT_MAX_STACKS;
	return s;
}

static uint64_t exe_bytes(const struct exe_entry *e)
{
	return sizeof(*e) + (e->path ? strlen(e->path) : 0) + 64;
}

/* The live entry at index exe, or NULL (a kernel segment, out of range, or a freed slot). */
static struct exe_entry *exe_at(const struct agent_store *s, uint32_t exe)
{
	return exe < s->n_exes ? s->exes[exe] : NULL;
}

static void exe_free(struct exe_entry *e)
{
	if (!e)
		return;
	free(e->path);
	free(e->debuglink);
	free(e->seen_path);
	free(e);
}

void agent_store_free(struct agent_store *s)
{
	struct sr_list_node *n, *next;

	if (!s)
		return;
	for (n = s->lru.head; n; n = next) {
		next = n->next;
		free(SR_CONTAINER_OF(n, struct stack_entry, lru));
	}
	sr_htab_ptrs_done(&s->stacks);
	for (size_t i = 0; i < s->n_exes; i++)
		exe_free(s->exes[i]);
	free(s->exes);
	free(s->free_exes);
	sr_htab_ptrs_done(&s->exes_by_id);
	agent_kernel_done(&s->kernel);
	agent_functions_done(&s->funcs);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

int agent_store__set_kernel(struct agent_store *s, const struct agent_kernel *k)
{
	struct agent_kernel copy;
	int r = agent_kernel_copy(k, &copy);

	if (r < 0)
		return r;
	pthread_mutex_lock(&s->lock);
	agent_kernel_done(&s->kernel);
	s->kernel = copy;
	s->have_kernel = true;
	pthread_mutex_unlock(&s->lock);
	return 0;
}

bool agent_store__kernel_id(struct agent_store *s, uint8_t *ret_id)
{
	bool have;

	pthread_mutex_lock(&s->lock);
	have = s->have_kernel;
	if (have)
		memcpy(ret_id, s->kernel.id, AGENT_KERNEL_ID_LEN);
	pthread_mutex_unlock(&s->lock);
	return have;
}

int agent_store__kernel_copy(struct agent_store *s, struct agent_kernel *ret)
{
	int r = -ENOENT;

	memset(ret, 0, sizeof(*ret));
	pthread_mutex_lock(&s->lock);
	if (s->have_kernel)
		r = agent_kernel_copy(&s->kernel, ret);
	pthread_mutex_unlock(&s->lock);
	return r;
}

int64_t agent_store__add_exe(struct agent_store *s, const struct agent_exe_def *def)
{
	struct exe_entry *e;
	int64_t r;

	if (def->id_len == 0 || def->id_len > AGENT_BUILD_ID_MAX)
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	e = sr_htab_ptrs__get(&s->exes_by_id, def->id, def->id_len);
	if (e) {
		e->refs++;
		e->last_window = s->window;
		r = (int64_t)e->idx;
		goto out;
	}
	if (!s->n_free_exes) {
		if (s->n_exes >= AGENT_STORE_MAX_EXECUTABLES) {
			r = -ENOSPC;
			goto out;
		}
		r = sr_grow((void **)&s->exes, &s->cap_exes, s->n_exes + 1, sizeof(*s->exes), 64);
		if (r < 0)
			goto out;
		/* A slot freed later always fits: the list is as long as the table. */
		r = sr_grow((void **)&s->free_exes, &s->cap_free_exes, s->n_exes + 1, sizeof(*s->free_exes), 64);
		if (r < 0)
			goto out;
	}
	e = calloc(1, sizeof(*e));
	if (!e) {
		r = -ENOMEM;
		goto out;
	}
	memcpy(e->id, def->id, def->id_len);
	e->id_len = def->id_len;
	e->id_kind = def->id_kind;
	e->path = def->path ? strdup(def->path) : NULL;
	e->size = def->size;
	if (def->gnu_build_id_len && def->gnu_build_id_len <= AGENT_BUILD_ID_MAX) {
		memcpy(e->gnu_build_id, def->gnu_build_id, def->gnu_build_id_len);
		e->gnu_build_id_len = def->gnu_build_id_len;
	}
	e->debuglink = def->debuglink && def->debuglink[0] ? strdup(def->debuglink) : NULL;
	e->is_go = def->is_go;
	e->dev = def->dev;
	e->ino = def->ino;
	if (sr_htab_ptrs__put(&s->exes_by_id, e) < 0) {
		exe_free(e);
		r = -ENOMEM;
		goto out;
	}
	e->idx = s->n_free_exes ? s->free_exes[--s->n_free_exes] : (uint32_t)s->n_exes++;
	e->refs = 1;
	e->last_window = s->window;
	s->exes[e->idx] = e;
	r = (int64_t)e->idx;
	s->exe_bytes += exe_bytes(e);
out:
	pthread_mutex_unlock(&s->lock);
	return r;
}

void agent_store__exe_seen(struct agent_store *s, uint32_t exe, uint32_t pid, uint64_t start_ns, uint64_t map_start,
			   uint64_t map_end, const char *path)
{
	struct exe_entry *e;

	pthread_mutex_lock(&s->lock);
	e = exe_at(s, exe);
	if (e) {
		e->pid = pid;
		e->start_ns = start_ns;
		e->map_start = map_start;
		e->map_end = map_end;
		if (path && (!e->seen_path || strcmp(e->seen_path, path) != 0)) {
			char *p = strdup(path);
			if (p) {
				free(e->seen_path);
				e->seen_path = p;
			}
		}
	}
	pthread_mutex_unlock(&s->lock);
}

int agent_store_exe_id_locked(struct agent_store *s, uint32_t exe, uint8_t *ret_id)
{
	int seg = agent_exe_kernel_seg(exe);

	if (seg != AGENT_KSEG_NONE) {
		const uint8_t *id = s->have_kernel ? agent_kernel_seg_id(&s->kernel, seg) : NULL;
		if (!id)
			return -ENOENT;
		memcpy(ret_id, id, AGENT_KERNEL_ID_LEN);
		return AGENT_KERNEL_ID_LEN;
	}
	const struct exe_entry *e = exe_at(s, exe);

	if (!e)
		return 0;
	memcpy(ret_id, e->id, e->id_len);
	return (int)e->id_len;
}

int agent_store__exe_id(struct agent_store *s, uint32_t exe, uint8_t *ret_id)
{
	int r;

	pthread_mutex_lock(&s->lock);
	r = agent_store_exe_id_locked(s, exe, ret_id);
	pthread_mutex_unlock(&s->lock);
	return r;
}

int64_t agent_store__add_function(struct agent_store *s, const struct agent_function_def *def, uint64_t window)
{
	int64_t r;

	pthread_mutex_lock(&s->lock);
	r = agent_functions__add(&s->funcs, def, window);
	pthread_mutex_unlock(&s->lock);
	return r;
}

int agent_store_function_id_locked(struct agent_store *s, uint32_t fn, uint8_t *ret_id)
{
	const struct agent_function *f = agent_functions__at(&s->funcs, fn);

	if (!f)
		return -ENOENT;
	memcpy(ret_id, f->id, AGENT_FUNCTION_ID_LEN);
	return AGENT_FUNCTION_ID_LEN;
}

int agent_store__function_id(struct agent_store *s, uint32_t fn, uint8_t ret_id[AGENT_FUNCTION_ID_LEN])
{
	int r;

	pthread_mutex_lock(&s->lock);
	r = agent_store_function_id_locked(s, fn, ret_id);
	pthread_mutex_unlock(&s->lock);
	return r;
}

/*
 * The stack ID covers what a frame means, not how this agent stores it:
 * per frame its kind, the executable ID's length and bytes (for INTERPRETED
 * and JIT frames: the function ID's), the address as 8 little-endian bytes,
 * and for INTERPRETED and JIT frames the line as 4 little-endian bytes.
 * Equal stacks on different nodes hash equal.
 */
static void stack_id_locked(struct agent_store *s, const struct agent_frame *frames, size_t n,
			    uint8_t ret_id[AGENT_STACK_ID_LEN])
{
	XXH3_state_t st;
	XXH128_canonical_t canon;

	XXH3_INITSTATE(&st);
	XXH3_128bits_reset(&st);
	for (size_t i = 0; i < n; i++) {
		uint8_t buf[2 + AGENT_BUILD_ID_MAX + 8 + 4];
		bool fn = agent_frame_kind_has_function(frames[i].kind);
		int idlen = fn ? agent_store_function_id_locked(s, frames[i].exe, buf + 2)
			       : agent_store_exe_id_locked(s, frames[i].exe, buf + 2);
		size_t len;
		if (idlen < 0)
			idlen = 0;
		buf[0] = frames[i].kind;
		buf[1] = (uint8_t)idlen;
		for (int b = 0; b < 8; b++)
			buf[2 + idlen + b] = (uint8_t)(frames[i].address >> (8 * b));
		len = (size_t)(2 + idlen + 8);
		if (fn) {
			for (int b = 0; b < 4; b++)
				buf[len + b] = (uint8_t)(frames[i].line >> (8 * b));
			len += 4;
		}
		XXH3_128bits_update(&st, buf, len);
	}
	XXH128_canonicalFromHash(&canon, XXH3_128bits_digest(&st));
	memcpy(ret_id, canon.digest, AGENT_STACK_ID_LEN);
}

void agent_stack_id(struct agent_store *s, const struct agent_frame *frames, size_t n,
		    uint8_t ret_id[AGENT_STACK_ID_LEN])
{
	pthread_mutex_lock(&s->lock);
	stack_id_locked(s, frames, n, ret_id);
	pthread_mutex_unlock(&s->lock);
}

static void exe_unref_locked(struct agent_store *s, uint32_t exe)
{
	struct exe_entry *e = exe_at(s, exe);

	if (e && e->refs > 0) {
		e->refs--;
		e->last_window = s->window;
	}
}

void agent_store__put_exe(struct agent_store *s, uint32_t exe)
{
	pthread_mutex_lock(&s->lock);
	exe_unref_locked(s, exe);
	pthread_mutex_unlock(&s->lock);
}

size_t agent_store__trim_exes(struct agent_store *s, uint64_t window)
{
	size_t n = 0;

	pthread_mutex_lock(&s->lock);
	if (window > s->window)
		s->window = window;
	for (size_t i = 0; i < s->n_exes; i++) {
		struct exe_entry *e = s->exes[i];

		/*
		 * A frame of the window in flight may name an executable whose
		 * last reference went during that window: its index is reused
		 * only once that window's stacks are stored (and so referenced).
		 */
		if (!e || e->refs || e->last_window + AGENT_STORE_EXE_GRACE_WINDOWS > window)
			continue;
		sr_htab_ptrs__remove(&s->exes_by_id, e->id, e->id_len);
		s->exes[i] = NULL;
		s->free_exes[s->n_free_exes++] = (uint32_t)i;
		s->exe_bytes -= exe_bytes(e);
		exe_free(e);
		n++;
	}
	s->exes_freed += n;
	pthread_mutex_unlock(&s->lock);
	return n;
}

static void drop_stack_locked(struct agent_store *s, struct stack_entry *victim)
{
	sr_list__unlink(&s->lru, &victim->lru);
	sr_htab_ptrs__remove(&s->stacks, victim->id, AGENT_STACK_ID_LEN);
	for (size_t i = 0; i < victim->n; i++)
		if (agent_frame_kind_has_function(frame_kind(&victim->frames[i])))
			agent_functions__unref(&s->funcs, frame_exe(&victim->frames[i]));
		else
			exe_unref_locked(s, frame_exe(&victim->frames[i]));
	s->stack_bytes -= sizeof(*victim) + victim->n * sizeof(victim->frames[0]);
	free(victim);
}

size_t agent_store__expire_stacks(struct agent_store *s, uint64_t window)
{
	struct stack_entry *victim;
	size_t n = 0;

	pthread_mutex_lock(&s->lock);
	/* The list is in order of last use: the tail is the oldest. */
	while ((victim = SR_LIST_ENTRY(s->lru.tail, struct stack_entry, lru)) && victim->last_window < window) {
		drop_stack_locked(s, victim);
		n++;
	}
	s->expired += n;
	pthread_mutex_unlock(&s->lock);
	return n;
}

int agent_store__intern_stack(struct agent_store *s, const struct agent_frame *frames, size_t n, bool truncated,
			      uint64_t window, uint8_t ret_id[AGENT_STACK_ID_LEN])
{
	struct stack_entry *e;
	int r = 0;

	if (n > UINT16_MAX)
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	if (window > s->window)
		s->window = window;
	stack_id_locked(s, frames, n, ret_id);
	e = sr_htab_ptrs__get(&s->stacks, ret_id, AGENT_STACK_ID_LEN);
	if (e) {
		e->last_window = window;
		if (s->lru.head != &e->lru) {
			sr_list__unlink(&s->lru, &e->lru);
			sr_list__push_front(&s->lru, &e->lru);
		}
		goto out;
	}
	if (s->stacks.h.n >= s->max_stacks) {
		struct stack_entry *victim = SR_LIST_ENTRY(s->lru.tail, struct stack_entry, lru);
		if (!victim || victim->last_window >= window) {
			r = -ENOSPC;
			goto out;
		}
		drop_stack_locked(s, victim);
		s->evicted++;
	}
	e = malloc(sizeof(*e) + n * sizeof(e->frames[0]));
	if (!e) {
		r = -ENOMEM;
		goto out;
	}
	memcpy(e->id, ret_id, AGENT_STACK_ID_LEN);
	e->last_window = window;
	e->n = (uint16_t)n;
	e->truncated = truncated;
	for (size_t i = 0; i < n; i++)
		e->frames[i] = frame_pack(&frames[i]);
	if (sr_htab_ptrs__put(&s->stacks, e) < 0) {
		free(e);
		r = -ENOMEM;
		goto out;
	}
	sr_list__push_front(&s->lru, &e->lru);
	s->stack_bytes += sizeof(*e) + n * sizeof(e->frames[0]);
	for (size_t i = 0; i < n; i++) {
		struct exe_entry *x;

		if (agent_frame_kind_has_function(frames[i].kind))
			agent_functions__ref(&s->funcs, frames[i].exe);
		else if ((x = exe_at(s, frames[i].exe))) {
			x->refs++;
			x->last_window = window;
		}
	}
out:
	pthread_mutex_unlock(&s->lock);
	return r;
}

void agent_store__stats(struct agent_store *s, struct agent_store_stats *ret)
{
	pthread_mutex_lock(&s->lock);
	ret->stacks = s->stacks.h.n;
	ret->stacks_evicted = s->evicted;
	ret->stacks_expired = s->expired;
	ret->executables = s->n_exes - s->n_free_exes;
	ret->executables_freed = s->exes_freed;
	ret->functions = s->funcs.n;
	ret->functions_evicted = s->funcs.evicted;
	ret->stacks_bytes = s->stack_bytes + s->stacks.h.cap * s->stacks.h.elem;
	ret->executables_bytes = s->exe_bytes + s->exes_by_id.h.cap * s->exes_by_id.h.elem +
				 s->cap_exes * sizeof(s->exes[0]) + s->cap_free_exes * sizeof(s->free_exes[0]);
	ret->functions_bytes = s->funcs.bytes;
	ret->bytes = ret->stacks_bytes + ret->executables_bytes + ret->functions_bytes;
	pthread_mutex_unlock(&s->lock);
}
