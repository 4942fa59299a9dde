/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The internal profile model's batches (model.h, "batches"): resources,
 * samples, the string arena, filtering, merging and cloning. The
 * definitions they reference live in model.c and model-store.c.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <xxhash.h>

#include "common/grow.h"
#include "common/macro.h"
#include "model.h"

/* Arena chunk size; larger strings get a chunk of their own. */
#define CHUNK_BYTES (16u * 1024u)
/* gw_profiles__fit() shrinks sample arrays up to this size. */
#define GW_PROFILES_FIT_MAX_BYTES (64u * 1024u)

struct gw_profiles_chunk {
	struct gw_profiles_chunk *next;
	size_t size, used;
	_Alignas(8) unsigned char data[];
};

static atomic_uint_fast64_t live_bytes;
static atomic_uint_fast64_t live_count;

uint64_t gw_profiles_live_bytes(void)
{
	return atomic_load_explicit(&live_bytes, memory_order_relaxed);
}

uint64_t gw_profiles_live_count(void)
{
	return atomic_load_explicit(&live_count, memory_order_relaxed);
}

static void mem_add(struct gw_profiles *p, int64_t delta)
{
	p->mem_bytes += (uint64_t)delta;
	atomic_fetch_add_explicit(&live_bytes, (uint64_t)delta, memory_order_relaxed);
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

struct gw_profiles *gw_profiles_new(void)
{
	struct gw_profiles *p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	atomic_init(&p->refs, 1);
	p->created_ns = now_ns();
	atomic_fetch_add_explicit(&live_count, 1, memory_order_relaxed);
	mem_add(p, sizeof(*p));
	return p;
}

struct gw_profiles *gw_profiles__ref(struct gw_profiles *p)
{
	if (p)
		atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed);
	return p;
}

static void profiles_free(struct gw_profiles *p)
{
	for (uint32_t i = 0; i < p->n_resources; i++) {
		struct gw_resource *r = &p->resources[i];
		for (uint32_t j = 0; j < r->n_samples; j++)
			gw_stack__unref(r->samples[j].stack);
		free(r->samples);
		free(r->attrs);
	}
	free(p->resources);
	free(p->res_index);
	while (p->chunks) {
		struct gw_profiles_chunk *c = p->chunks;
		p->chunks = c->next;
		free(c);
	}
	atomic_fetch_sub_explicit(&live_bytes, p->mem_bytes, memory_order_relaxed);
	atomic_fetch_sub_explicit(&live_count, 1, memory_order_relaxed);
	free(p);
}

void gw_profiles__unref(struct gw_profiles *p)
{
	if (p && atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) == 1)
		profiles_free(p);
}

void *gw_profiles__alloc(struct gw_profiles *p, size_t size)
{
	struct gw_profiles_chunk *c = p->chunks;
	size_t need = (size + 7) & ~(size_t)7;
	void *ret;

	if (need < size) {
		errno = ENOMEM;
		return NULL;
	}
	if (!c || c->size - c->used < need) {
		size_t sz = SR_MAX(need, (size_t)CHUNK_BYTES);
		c = malloc(sizeof(*c) + sz);
		if (!c)
			return NULL;
		c->size = sz;
		c->used = 0;
		mem_add(p, (int64_t)(sizeof(*c) + sz));
		if (p->chunks && sz > CHUNK_BYTES) {
			/* A big one-off: keep the current chunk for small strings. */
			c->next = p->chunks->next;
			p->chunks->next = c;
		} else {
			c->next = p->chunks;
			p->chunks = c;
		}
	}
	ret = c->data + c->used;
	c->used += need;
	memset(ret, 0, size);
	return ret;
}

const char *gw_profiles__strndup(struct gw_profiles *p, const char *s, size_t n)
{
	char *d;
	if (!s)
		return NULL;
	d = gw_profiles__alloc(p, n + 1);
	if (!d)
		return NULL;
	memcpy(d, s, n);
	d[n] = '\0';
	return d;
}

const char *gw_profiles__strdup(struct gw_profiles *p, const char *s)
{
	return s ? gw_profiles__strndup(p, s, strlen(s)) : NULL;
}

/*
 * sr_grow_u32() with the batch's memory account kept: every byte the arrays
 * gain is counted. The account is a shared atomic, so a push that fits must
 * return before touching it.
 */
static int grow(struct gw_profiles *p, void **arr, uint32_t *cap, uint32_t need, size_t elem)
{
	uint32_t was = *cap;
	int r;

	if (need <= was)
		return 0;
	r = sr_grow_realloc_u32(arr, cap, need, elem, 4);
	if (r == 0)
		mem_add(p, (int64_t)((size_t)(*cap - was) * elem));
	return r;
}

static int copy_attr(struct gw_profiles *p, struct gw_attr *dst, const struct gw_attr *src)
{
	*dst = *src;
	dst->key = gw_profiles__strdup(p, src->key ? src->key : "");
	if (!dst->key)
		return -ENOMEM;
	if (src->type == GW_ATTR_STRING) {
		dst->v.s = gw_profiles__strdup(p, src->v.s ? src->v.s : "");
		if (!dst->v.s)
			return -ENOMEM;
	}
	return 0;
}

struct gw_resource *gw_profiles__add_resource(struct gw_profiles *p, const struct gw_attr *attrs, uint32_t n,
					      uint32_t frequency_hz)
{
	return gw_profiles__add_typed_resource(p, attrs, n, frequency_hz, GW_PROFILE_CPU);
}

const char *gw_profile_type_name(enum gw_profile_type type)
{
	return type == GW_PROFILE_OFF_CPU ? "off_cpu" : "cpu";
}

struct gw_resource *gw_profiles__add_typed_resource(struct gw_profiles *p, const struct gw_attr *attrs, uint32_t n,
						    uint32_t frequency_hz, enum gw_profile_type type)
{
	struct gw_resource *r;
	int e;

	e = grow(p, (void **)&p->resources, &p->cap_resources, p->n_resources + 1, sizeof(*p->resources));
	if (e < 0)
		goto fail;
	r = &p->resources[p->n_resources];
	*r = (struct gw_resource){ .frequency_hz = frequency_hz, .profile_type = type, .start_ns = UINT64_MAX };
	if (n) {
		e = grow(p, (void **)&r->attrs, &r->cap_attrs, n, sizeof(*r->attrs));
		if (e < 0)
			goto fail;
		for (uint32_t i = 0; i < n; i++) {
			e = copy_attr(p, &r->attrs[i], &attrs[i]);
			if (e < 0) {
				free(r->attrs);
				goto fail;
			}
		}
		r->n_attrs = n;
	}
	p->n_resources++;
	p->res_index_valid = false;
	return r;
fail:
	errno = -e;
	return NULL;
}

const struct gw_attr *gw_resource__attr(const struct gw_resource *r, const char *key)
{
	for (uint32_t i = 0; i < r->n_attrs; i++)
		if (strcmp(r->attrs[i].key, key) == 0)
			return &r->attrs[i];
	return NULL;
}

const char *gw_resource__string(const struct gw_resource *r, const char *key)
{
	const struct gw_attr *a = gw_resource__attr(r, key);
	return a && a->type == GW_ATTR_STRING ? a->v.s : NULL;
}

int gw_resource__set_attr(struct gw_profiles *p, struct gw_resource *r, const struct gw_attr *a)
{
	struct gw_attr copy;
	int e = copy_attr(p, &copy, a);
	if (e < 0)
		return e;
	r->attrs_hash = 0;
	p->res_index_valid = false;
	for (uint32_t i = 0; i < r->n_attrs; i++) {
		if (strcmp(r->attrs[i].key, a->key) == 0) {
			r->attrs[i] = copy;
			return 0;
		}
	}
	e = grow(p, (void **)&r->attrs, &r->cap_attrs, r->n_attrs + 1, sizeof(*r->attrs));
	if (e < 0)
		return e;
	r->attrs[r->n_attrs++] = copy;
	return 0;
}

int gw_resource__set_string(struct gw_profiles *p, struct gw_resource *r, const char *key, const char *value)
{
	return gw_resource__set_attr(p, r, &(struct gw_attr){ .key = key, .type = GW_ATTR_STRING, .v.s = value });
}

int gw_resource__set_int(struct gw_profiles *p, struct gw_resource *r, const char *key, int64_t value)
{
	return gw_resource__set_attr(p, r, &(struct gw_attr){ .key = key, .type = GW_ATTR_INT, .v.i = value });
}

int gw_resource__set_peer(struct gw_profiles *p, struct gw_resource *r, const char *addr)
{
	const char *copy = NULL;
	if (addr && !(copy = gw_profiles__strdup(p, addr)))
		return -ENOMEM;
	r->peer_addr = copy;
	return 0;
}

int gw_resource__remove_attr(struct gw_resource *r, const char *key)
{
	for (uint32_t i = 0; i < r->n_attrs; i++) {
		if (strcmp(r->attrs[i].key, key) == 0) {
			memmove(&r->attrs[i], &r->attrs[i + 1], (r->n_attrs - i - 1) * sizeof(r->attrs[0]));
			r->n_attrs--;
			r->attrs_hash = 0;
			return 1;
		}
	}
	return 0;
}

int gw_resource__add_sample_owned(struct gw_profiles *p, struct gw_resource *r, const struct gw_sample *s)
{
	int e = grow(p, (void **)&r->samples, &r->cap_samples, r->n_samples + 1, sizeof(*r->samples));
	if (e < 0)
		return e;
	r->samples[r->n_samples++] = *s;
	r->total_count += s->count;
	p->total_count += s->count;
	p->n_samples++;
	return 0;
}

int gw_resource__reserve_samples(struct gw_profiles *p, struct gw_resource *r, uint32_t n)
{
	struct gw_sample *v;

	if (n > UINT32_MAX - r->n_samples)
		return -E2BIG;
	if (r->n_samples + n <= r->cap_samples)
		return 0;
	/* Exact fit, not grow.h: the caller counted the samples, so doubling would only leave slack. */
	v = realloc(r->samples, (size_t)(r->n_samples + n) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	mem_add(p, (int64_t)((size_t)(r->n_samples + n - r->cap_samples) * sizeof(*v)));
	r->samples = v;
	r->cap_samples = r->n_samples + n;
	return 0;
}

int gw_resource__add_sample(struct gw_profiles *p, struct gw_resource *r, const struct gw_sample *s)
{
	struct gw_sample c = *s;
	int e;

	if (s->thread_name && !(c.thread_name = gw_profiles__strdup(p, s->thread_name)))
		return -ENOMEM;
	if (gw_sample__n_attrs(s)) {
		struct gw_sample_attrs *a = gw_profiles__alloc(p, sizeof(*a) + s->attrs->n * sizeof(a->v[0]));
		if (!a)
			return -ENOMEM;
		for (uint32_t i = 0; i < s->attrs->n; i++)
			if ((e = copy_attr(p, &a->v[i], &s->attrs->v[i])) < 0)
				return e;
		a->n = s->attrs->n;
		c.attrs = a;
	}
	c.stack = gw_stack__ref(s->stack);
	e = gw_resource__add_sample_owned(p, r, &c);
	if (e < 0)
		gw_stack__unref(c.stack);
	return e;
}

void gw_profiles__fit(struct gw_profiles *p)
{
	for (uint32_t i = 0; i < p->n_resources; i++) {
		struct gw_resource *r = &p->resources[i];
		struct gw_sample *n;

		/*
		 * Small arrays only: a fleet's requests make many of them, whose
		 * slack is resident heap. A big one's slack is mostly pages never
		 * written, and shrinking it costs a remap.
		 */
		if (!r->n_samples || r->cap_samples == r->n_samples ||
		    (size_t)r->cap_samples * sizeof(*r->samples) > GW_PROFILES_FIT_MAX_BYTES)
			continue;
		/* Shrinking keeps the block where it is (glibc splits it), or fails harmlessly. */
		n = realloc(r->samples, (size_t)r->n_samples * sizeof(*r->samples));
		if (!n)
			continue;
		mem_add(p, -(int64_t)((size_t)(r->cap_samples - r->n_samples) * sizeof(*r->samples)));
		r->samples = n;
		r->cap_samples = r->n_samples;
	}
}

uint64_t gw_profiles__filter(struct gw_profiles *p,
			     bool (*keep)(const struct gw_resource *r, const struct gw_sample *s, void *userdata),
			     void *userdata)
{
	uint64_t removed = 0;
	uint32_t out_r = 0;

	for (uint32_t i = 0; i < p->n_resources; i++) {
		struct gw_resource *r = &p->resources[i];
		uint32_t out = 0;
		for (uint32_t j = 0; j < r->n_samples; j++) {
			struct gw_sample *s = &r->samples[j];
			if (keep(r, s, userdata)) {
				r->samples[out++] = *s;
				continue;
			}
			removed += s->count;
			r->total_count -= s->count;
			p->total_count -= s->count;
			p->n_samples--;
			gw_stack__unref(s->stack);
		}
		r->n_samples = out;
		if (out == 0) {
			free(r->samples);
			free(r->attrs);
			continue;
		}
		p->resources[out_r++] = *r;
	}
	if (out_r != p->n_resources)
		p->res_index_valid = false;
	p->n_resources = out_r;
	return removed;
}

/* Order-independent hash of a resource's attributes and frequency. */
static uint64_t attr_hash(const struct gw_attr *a)
{
	uint64_t seed = XXH3_64bits_withSeed(a->key, strlen(a->key), a->type);
	switch (a->type) {
	case GW_ATTR_STRING:
		return XXH3_64bits_withSeed(a->v.s, strlen(a->v.s), seed);
	case GW_ATTR_INT:
		return XXH3_64bits_withSeed(&a->v.i, sizeof(a->v.i), seed);
	case GW_ATTR_BOOL:
		return XXH3_64bits_withSeed(&a->v.b, sizeof(a->v.b), seed);
	case GW_ATTR_DOUBLE:
		return XXH3_64bits_withSeed(&a->v.d, sizeof(a->v.d), seed);
	}
	return seed;
}

static uint64_t resource_hash(struct gw_resource *r)
{
	if (!r->attrs_hash) {
		uint64_t h = 0x9e3779b97f4a7c15ULL ^ r->frequency_hz ^ ((uint64_t)r->profile_type << 32);
		for (uint32_t i = 0; i < r->n_attrs; i++)
			h += attr_hash(&r->attrs[i]);
		r->attrs_hash = h ? h : 1;
	}
	return r->attrs_hash;
}

static bool attr_equal(const struct gw_attr *a, const struct gw_attr *b)
{
	if (a->type != b->type || strcmp(a->key, b->key) != 0)
		return false;
	switch (a->type) {
	case GW_ATTR_STRING:
		return strcmp(a->v.s, b->v.s) == 0;
	case GW_ATTR_INT:
		return a->v.i == b->v.i;
	case GW_ATTR_BOOL:
		return a->v.b == b->v.b;
	case GW_ATTR_DOUBLE:
		return a->v.d == b->v.d;
	}
	return false;
}

static bool resource_equal(struct gw_resource *a, struct gw_resource *b)
{
	if (a->frequency_hz != b->frequency_hz || a->profile_type != b->profile_type || a->n_attrs != b->n_attrs ||
	    resource_hash(a) != resource_hash(b))
		return false;
	for (uint32_t i = 0; i < a->n_attrs; i++) {
		const struct gw_attr *o = gw_resource__attr(b, a->attrs[i].key);
		if (!o || !attr_equal(&a->attrs[i], o))
			return false;
	}
	return true;
}

/*
 * The merge's index of resources: 4-byte resource numbers, charged to the
 * batch's bytes (mem_add) and rebuilt whole for a merge; the tree's table
 * (common/htab.h) would keep a 64-bit hash beside each and charge 4 times
 * the bytes for what resource_hash() already caches.
 */
#define NO_RES UINT32_MAX

static int index_insert(struct gw_profiles *p, uint32_t idx)
{
	uint64_t h = resource_hash(&p->resources[idx]);
	uint32_t mask = p->res_index_cap - 1;
	for (uint32_t i = (uint32_t)h & mask;; i = (i + 1) & mask) {
		if (p->res_index[i] == NO_RES) {
			p->res_index[i] = idx;
			return 0;
		}
	}
}

static int index_rebuild(struct gw_profiles *p, uint32_t want)
{
	uint32_t cap = 16;
	while (cap < want * 2) {
		if (cap > UINT32_MAX / 4)
			return -E2BIG;
		cap *= 2;
	}
	/* Not grow.h: the table is resized (up or down) to the power of two the load wants, then refilled. */
	if (cap != p->res_index_cap) {
		uint32_t *n = realloc(p->res_index, cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		mem_add(p, ((int64_t)cap - (int64_t)p->res_index_cap) * (int64_t)sizeof(*n));
		p->res_index = n;
		p->res_index_cap = cap;
	}
	memset(p->res_index, 0xff, cap * sizeof(*p->res_index));
	for (uint32_t i = 0; i < p->n_resources; i++)
		index_insert(p, i);
	p->res_index_valid = true;
	return 0;
}

static struct gw_resource *index_find(struct gw_profiles *p, struct gw_resource *like)
{
	uint64_t h = resource_hash(like);
	uint32_t mask = p->res_index_cap - 1;
	for (uint32_t i = (uint32_t)h & mask; p->res_index[i] != NO_RES; i = (i + 1) & mask) {
		struct gw_resource *r = &p->resources[p->res_index[i]];
		if (resource_equal(r, like))
			return r;
	}
	return NULL;
}

int gw_profiles__merge(struct gw_profiles *dst, struct gw_profiles *src)
{
	uint32_t new_res = 0;
	int e;

	if (dst == src)
		return -EINVAL;
	if (dst->route_pipeline != src->route_pipeline || dst->route_stage != src->route_stage)
		return -EXDEV;
	/* Batches of different tenants (metadata_keys) must never share a request. */
	if (!!dst->metadata != !!src->metadata || (dst->metadata && strcmp(dst->metadata, src->metadata) != 0))
		return -EXDEV;
	if (atomic_load(&src->refs) > 1) {
		/* Shared: merge a private copy instead of stealing its memory. */
		struct gw_profiles *c = gw_profiles__clone(src);
		if (!c)
			return -errno;
		e = gw_profiles__merge(dst, c);
		if (e < 0) {
			gw_profiles__unref(c);
			return e;
		}
		gw_profiles__unref(src);
		return 0;
	}
	/* Reserve everything first, so that nothing below can fail half-way. */
	if (!dst->res_index_valid || dst->res_index_cap < (dst->n_resources + src->n_resources) * 2) {
		e = index_rebuild(dst, dst->n_resources + src->n_resources);
		if (e < 0)
			return e;
	}
	for (uint32_t i = 0; i < src->n_resources; i++) {
		struct gw_resource *r = index_find(dst, &src->resources[i]);
		if (r) {
			e = grow(dst, (void **)&r->samples, &r->cap_samples, r->n_samples + src->resources[i].n_samples,
				 sizeof(*r->samples));
			if (e < 0)
				return e;
		} else
			new_res++;
	}
	e = grow(dst, (void **)&dst->resources, &dst->cap_resources, dst->n_resources + new_res,
		 sizeof(*dst->resources));
	if (e < 0)
		return e;

	for (uint32_t i = 0; i < src->n_resources; i++) {
		struct gw_resource *sr = &src->resources[i];
		struct gw_resource *r = index_find(dst, sr);
		/* A resource equal to an earlier one of src found that one, which
		 * has no reserved room: grow now, or keep it apart (room for it as a
		 * new resource was reserved above). */
		if (r && grow(dst, (void **)&r->samples, &r->cap_samples, r->n_samples + sr->n_samples,
			      sizeof(*r->samples)) < 0)
			r = NULL;
		if (r) {
			memcpy(r->samples + r->n_samples, sr->samples, sr->n_samples * sizeof(*sr->samples));
			r->n_samples += sr->n_samples;
			r->total_count += sr->total_count;
			gw_resource__cover(r, sr->start_ns, sr->end_ns);
			free(sr->samples);
			free(sr->attrs);
		} else {
			dst->resources[dst->n_resources] = *sr;
			index_insert(dst, dst->n_resources);
			dst->n_resources++;
		}
	}
	dst->total_count += src->total_count;
	dst->n_samples += src->n_samples;
	/* The arena chunks (strings of src's samples and attributes) move too. */
	if (src->chunks) {
		struct gw_profiles_chunk *tail = src->chunks;
		while (tail->next)
			tail = tail->next;
		if (dst->chunks) {
			tail->next = dst->chunks->next;
			dst->chunks->next = src->chunks;
		} else
			dst->chunks = src->chunks;
		src->chunks = NULL;
	}
	/* Move the memory estimate with the data. */
	uint64_t moved = src->mem_bytes - sizeof(*src);
	dst->mem_bytes += moved;
	src->mem_bytes -= moved;
	src->n_resources = 0;
	free(src->resources);
	src->resources = NULL;
	src->cap_resources = 0;
	free(src->res_index);
	src->res_index = NULL;
	src->total_count = src->n_samples = 0;
	if (dst->created_ns > src->created_ns)
		dst->created_ns = src->created_ns;
	gw_profiles__unref(src);
	return 0;
}

static const char *arena_strdup(struct gw_profiles *p, const char *s)
{
	size_t n = strlen(s) + 1;
	char *d = gw_profiles__alloc(p, n);

	if (d)
		memcpy(d, s, n);
	return d;
}

int gw_profiles__set_metadata(struct gw_profiles *p, const char *client_metadata, const char *metadata)
{
	const char *c = client_metadata ? arena_strdup(p, client_metadata) : NULL;
	const char *m = metadata ? arena_strdup(p, metadata) : NULL;

	if ((client_metadata && !c) || (metadata && !m))
		return -ENOMEM;
	p->client_metadata = c;
	p->metadata = m;
	return 0;
}

struct gw_profiles *gw_profiles__clone(const struct gw_profiles *p)
{
	struct gw_profiles *c = gw_profiles_new();
	int e = 0;

	if (!c)
		return NULL;
	c->route_pipeline = p->route_pipeline;
	c->route_stage = p->route_stage;
	c->created_ns = p->created_ns;
	if ((e = gw_profiles__set_metadata(c, p->client_metadata, p->metadata)) < 0)
		goto fail;
	for (uint32_t i = 0; i < p->n_resources; i++) {
		const struct gw_resource *r = &p->resources[i];
		struct gw_resource *nr =
			gw_profiles__add_typed_resource(c, r->attrs, r->n_attrs, r->frequency_hz, r->profile_type);
		if (!nr) {
			e = -errno;
			goto fail;
		}
		if ((e = gw_resource__set_peer(c, nr, r->peer_addr)) < 0)
			goto fail;
		nr->start_ns = r->start_ns;
		nr->end_ns = r->end_ns;
		e = grow(c, (void **)&nr->samples, &nr->cap_samples, r->n_samples, sizeof(*nr->samples));
		if (e < 0)
			goto fail;
		for (uint32_t j = 0; j < r->n_samples; j++)
			if ((e = gw_resource__add_sample(c, nr, &r->samples[j])) < 0)
				goto fail;
	}
	return c;
fail:
	gw_profiles__unref(c);
	errno = -e;
	return NULL;
}

int gw_profiles__make_writable(struct gw_profiles **pp)
{
	struct gw_profiles *c;
	if (atomic_load(&(*pp)->refs) <= 1)
		return 0;
	c = gw_profiles__clone(*pp);
	if (!c)
		return -errno;
	gw_profiles__unref(*pp);
	*pp = c;
	return 0;
}

int gw_profiles__check(const struct gw_profiles *p)
{
	uint64_t total = 0, n = 0;
	for (uint32_t i = 0; i < p->n_resources; i++) {
		const struct gw_resource *r = &p->resources[i];
		uint64_t rt = 0;
		for (uint32_t j = 0; j < r->n_samples; j++) {
			if (!r->samples[j].stack || atomic_load(&r->samples[j].stack->obj.refs) == 0)
				return -EUCLEAN;
			rt += r->samples[j].count;
		}
		if (rt != r->total_count)
			return -EUCLEAN;
		total += rt;
		n += r->n_samples;
	}
	return total == p->total_count && n == p->n_samples ? 0 : -EUCLEAN;
}
