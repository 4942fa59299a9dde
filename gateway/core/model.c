/* SPDX-License-Identifier: Apache-2.0 */
/* The internal profile model (model.h): definitions and batches. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <xxhash.h>

#include "macro.h"
#include "model.h"
#include "model-private.h"

/* ---- IDs ---- */

int gw_id_set(struct gw_id *id, const void *bytes, size_t len)
{
	if (len > GW_ID_MAX)
		return -EINVAL;
	id->len = (uint8_t)len;
	if (len)
		memcpy(id->bytes, bytes, len);
	return 0;
}

bool gw_id_equal(const struct gw_id *a, const struct gw_id *b)
{
	return a->len == b->len && memcmp(a->bytes, b->bytes, a->len) == 0;
}

const char *gw_id_to_hex(const struct gw_id *id, char *buf, size_t size)
{
	static const char hex[] = "0123456789abcdef";
	size_t j = 0;

	if (size == 0)
		return buf;
	for (size_t i = 0; i < id->len && j + 2 < size; i++) {
		buf[j++] = hex[id->bytes[i] >> 4];
		buf[j++] = hex[id->bytes[i] & 15];
	}
	buf[j] = '\0';
	return buf;
}

/* ---- definitions ---- */

static size_t slen(const char *s)
{
	return s ? strlen(s) + 1 : 1;
}

/* Copies s (NULL as "") to *pos and advances it. */
static const char *scopy(char **pos, const char *s)
{
	char *dst = *pos;
	size_t n = s ? strlen(s) : 0;
	if (n)
		memcpy(dst, s, n);
	dst[n] = '\0';
	*pos += n + 1;
	return dst;
}

struct gw_executable *gw_executable_new(const struct gw_executable_def *def)
{
	size_t extra = slen(def->file_name) + slen(def->path) + slen(def->debuglink);
	struct gw_executable *e;
	char *pos;

	if (def->id_len == 0 || def->id_len > GW_ID_MAX || def->gnu_build_id_len > GW_ID_MAX) {
		errno = EINVAL;
		return NULL;
	}
	e = calloc(1, sizeof(*e) + extra);
	if (!e)
		return NULL;
	atomic_init(&e->obj.refs, 1);
	e->obj.type = GW_OBJ_EXECUTABLE;
	e->obj.bytes = (uint32_t)(sizeof(*e) + extra + 64 /* index overhead */);
	gw_id_set(&e->id, def->id, def->id_len);
	e->id_kind = def->id_kind;
	pos = (char *)(e + 1);
	e->file_name = scopy(&pos, def->file_name);
	e->path = scopy(&pos, def->path);
	e->debuglink = scopy(&pos, def->debuglink);
	e->file_size = def->file_size;
	if (def->gnu_build_id_len)
		gw_id_set(&e->gnu_build_id, def->gnu_build_id, def->gnu_build_id_len);
	else if (def->id_kind == GW_EXE_ID_GNU_BUILD_ID)
		e->gnu_build_id = e->id;
	e->is_go = def->is_go;
	atomic_init(&e->flags, 0);
	atomic_init(&e->symbolizer, NULL);
	atomic_init(&e->symbols_pending_until, 0);
	atomic_init(&e->symbols_asked_until, 0);
	return e;
}

static int module_cmp(const void *a, const void *b)
{
	const struct gw_kernel_module *x = a, *y = b;
	return x->start < y->start ? -1 : x->start > y->start;
}

struct gw_kernel *gw_kernel_new(const struct gw_kernel_def *def)
{
	size_t extra = slen(def->release) + slen(def->boot_id);
	struct gw_kernel_module *mods;
	struct gw_kernel *k;
	char *pos;

	if (def->id_len == 0 || def->id_len > GW_ID_MAX || def->build_id_len > GW_ID_MAX) {
		errno = EINVAL;
		return NULL;
	}
	for (uint32_t i = 0; i < def->n_modules; i++)
		extra += slen(def->modules[i].name);
	k = calloc(1, sizeof(*k) + def->n_modules * sizeof(*mods) + extra);
	if (!k)
		return NULL;
	atomic_init(&k->obj.refs, 1);
	k->obj.type = GW_OBJ_KERNEL;
	k->obj.bytes = (uint32_t)SR_MIN(sizeof(*k) + def->n_modules * sizeof(*mods) + extra + 64, UINT32_MAX);
	gw_id_set(&k->id, def->id, def->id_len);
	mods = (struct gw_kernel_module *)(k + 1);
	pos = (char *)(mods + def->n_modules);
	k->release = scopy(&pos, def->release);
	k->boot_id = scopy(&pos, def->boot_id);
	if (def->build_id_len)
		gw_id_set(&k->build_id, def->build_id, def->build_id_len);
	for (uint32_t i = 0; i < def->n_modules; i++) {
		mods[i] = def->modules[i];
		mods[i].name = scopy(&pos, def->modules[i].name);
	}
	qsort(mods, def->n_modules, sizeof(*mods), module_cmp);
	k->modules = mods;
	k->n_modules = def->n_modules;
	atomic_init(&k->symbolizer, NULL);
	atomic_init(&k->flags, 0);
	atomic_init(&k->symbols_pending_until, 0);
	atomic_init(&k->symbols_asked_until, 0);
	return k;
}

struct gw_location *gw_location_new(enum gw_frame_kind kind, uint64_t address, struct gw_executable *exe,
				    struct gw_kernel *kernel)
{
	struct gw_location *l = calloc(1, sizeof(*l));
	if (!l)
		return NULL;
	atomic_init(&l->obj.refs, 1);
	l->obj.type = GW_OBJ_LOCATION;
	l->obj.bytes = sizeof(*l) + 64;
	l->kind = kind;
	l->address = address;
	l->exe = gw_executable__ref(exe);
	l->kernel = gw_kernel__ref(kernel);
	atomic_init(&l->lines, NULL);
	return l;
}

struct gw_stack *gw_stack_new(const void *id, size_t id_len, bool truncated, struct gw_location **locations, uint32_t n)
{
	struct gw_stack *s;

	if (id_len == 0 || id_len > GW_ID_MAX)
		goto fail_einval;
	s = calloc(1, sizeof(*s) + n * sizeof(s->locations[0]));
	if (!s)
		goto fail;
	atomic_init(&s->obj.refs, 1);
	s->obj.type = GW_OBJ_STACK;
	s->obj.bytes = (uint32_t)SR_MIN(sizeof(*s) + n * sizeof(s->locations[0]) + 64, UINT32_MAX);
	gw_id_set(&s->id, id, id_len);
	s->truncated = truncated;
	s->n_locations = n;
	if (n)
		memcpy(s->locations, locations, n * sizeof(*locations));
	return s;

fail_einval:
	errno = EINVAL;
fail:
	for (uint32_t i = 0; i < n; i++)
		gw_location__unref(locations[i]);
	return NULL;
}

static void obj_free(struct gw_obj *o)
{
	switch (o->type) {
	case GW_OBJ_LOCATION: {
		struct gw_location *l = (struct gw_location *)o;
		gw_executable__unref(l->exe);
		gw_kernel__unref(l->kernel);
		gw_lines_free((struct gw_lines *)atomic_load(&l->lines));
		break;
	}
	case GW_OBJ_STACK: {
		struct gw_stack *s = (struct gw_stack *)o;
		for (uint32_t i = 0; i < s->n_locations; i++)
			gw_location__unref(s->locations[i]);
		break;
	}
	default:
		/* Executables and kernels are one allocation; the symbolizer's slot
		 * data is owned by the symbolizer (it keeps its own list). */
		break;
	}
	free(o);
}

void gw_obj_unref(struct gw_obj *o)
{
	if (!o)
		return;
	if (atomic_fetch_sub_explicit(&o->refs, 1, memory_order_acq_rel) == 1)
		obj_free(o);
}

static struct gw_obj *obj_ref(struct gw_obj *o)
{
	if (o)
		atomic_fetch_add_explicit(&o->refs, 1, memory_order_relaxed);
	return o;
}

struct gw_executable *gw_executable__ref(struct gw_executable *e)
{
	return e ? (obj_ref(&e->obj), e) : NULL;
}

void gw_executable__unref(struct gw_executable *e)
{
	if (e)
		gw_obj_unref(&e->obj);
}

struct gw_kernel *gw_kernel__ref(struct gw_kernel *k)
{
	return k ? (obj_ref(&k->obj), k) : NULL;
}

void gw_kernel__unref(struct gw_kernel *k)
{
	if (k)
		gw_obj_unref(&k->obj);
}

struct gw_location *gw_location__ref(struct gw_location *l)
{
	return l ? (obj_ref(&l->obj), l) : NULL;
}

void gw_location__unref(struct gw_location *l)
{
	if (l)
		gw_obj_unref(&l->obj);
}

struct gw_stack *gw_stack__ref(struct gw_stack *s)
{
	return s ? (obj_ref(&s->obj), s) : NULL;
}

void gw_stack__unref(struct gw_stack *s)
{
	if (s)
		gw_obj_unref(&s->obj);
}

void gw_executable__set_want_symbols(struct gw_executable *e, bool want)
{
	if (want)
		atomic_fetch_or_explicit(&e->flags, GW_EXE_WANT_SYMBOLS, memory_order_relaxed);
	else
		atomic_fetch_and_explicit(&e->flags, ~(unsigned)GW_EXE_WANT_SYMBOLS, memory_order_relaxed);
}

void gw_kernel__set_want_symbols(struct gw_kernel *k, bool want)
{
	if (want)
		atomic_fetch_or_explicit(&k->flags, GW_EXE_WANT_SYMBOLS, memory_order_relaxed);
	else
		atomic_fetch_and_explicit(&k->flags, ~(unsigned)GW_EXE_WANT_SYMBOLS, memory_order_relaxed);
}

/* ---- symbol lookup progress (shared by executables and kernels) ---- */

static uint64_t mono_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void lookup_set(atomic_uint *flags, atomic_uint_fast64_t *until, uint64_t pending_ns)
{
	atomic_fetch_or_explicit(flags, GW_EXE_SYMBOLS_LOOKED_UP, memory_order_relaxed);
	atomic_store_explicit(until, pending_ns ? mono_now_ns() + pending_ns : 0, memory_order_relaxed);
}

static void lookup_queued(atomic_uint *flags, atomic_uint_fast64_t *until, uint64_t pending_ns)
{
	uint_fast64_t expected = 0;

	/* Cheap for the common case (the receiver calls this per executable per request): one load. */
	if (atomic_load_explicit(flags, memory_order_relaxed) & GW_EXE_SYMBOLS_LOOKED_UP)
		return;
	/* Only the first time: a gateway without a symbolize processor must not report it pending forever. */
	atomic_compare_exchange_strong_explicit(until, &expected, mono_now_ns() + pending_ns, memory_order_relaxed,
						memory_order_relaxed);
}

static bool lookup_pending(const atomic_uint *flags, const atomic_uint_fast64_t *until)
{
	uint64_t t = atomic_load_explicit((atomic_uint_fast64_t *)until, memory_order_relaxed);

	if (!t || (atomic_load_explicit((atomic_uint *)flags, memory_order_relaxed) & GW_EXE_WANT_SYMBOLS))
		return false;
	return mono_now_ns() < t;
}

static bool ask_claim(atomic_uint_fast64_t *until, uint64_t ttl_ns)
{
	uint_fast64_t t = atomic_load_explicit(until, memory_order_relaxed);
	uint64_t now = mono_now_ns();

	if (t > now)
		return false;
	/* Two requests at once: the one whose exchange succeeds asks its agent. */
	return atomic_compare_exchange_strong_explicit(until, &t, now + ttl_ns, memory_order_relaxed,
						       memory_order_relaxed);
}

bool gw_executable__claim_ask(struct gw_executable *e, uint64_t ttl_ns)
{
	return ask_claim(&e->symbols_asked_until, ttl_ns);
}

void gw_executable__release_ask(struct gw_executable *e)
{
	atomic_store_explicit(&e->symbols_asked_until, 0, memory_order_relaxed);
}

bool gw_kernel__claim_ask(struct gw_kernel *k, uint64_t ttl_ns)
{
	return ask_claim(&k->symbols_asked_until, ttl_ns);
}

void gw_kernel__release_ask(struct gw_kernel *k)
{
	atomic_store_explicit(&k->symbols_asked_until, 0, memory_order_relaxed);
}

void gw_executable__set_lookup(struct gw_executable *e, uint64_t pending_ns)
{
	lookup_set(&e->flags, &e->symbols_pending_until, pending_ns);
}

void gw_executable__set_queued(struct gw_executable *e, uint64_t pending_ns)
{
	lookup_queued(&e->flags, &e->symbols_pending_until, pending_ns);
}

bool gw_executable__symbols_pending(const struct gw_executable *e)
{
	return lookup_pending(&e->flags, &e->symbols_pending_until);
}

void gw_kernel__set_lookup(struct gw_kernel *k, uint64_t pending_ns)
{
	lookup_set(&k->flags, &k->symbols_pending_until, pending_ns);
}

void gw_kernel__set_queued(struct gw_kernel *k, uint64_t pending_ns)
{
	lookup_queued(&k->flags, &k->symbols_pending_until, pending_ns);
}

bool gw_kernel__symbols_pending(const struct gw_kernel *k)
{
	return lookup_pending(&k->flags, &k->symbols_pending_until);
}

bool gw_slot__set_once(_Atomic(void *) *slot, void *v)
{
	void *expected = NULL;
	return atomic_compare_exchange_strong_explicit(slot, &expected, v, memory_order_acq_rel, memory_order_acquire);
}

/* ---- lines ---- */

struct gw_lines *gw_lines_new(const struct gw_line *lines, uint32_t n)
{
	size_t extra = 0;
	struct gw_lines *l;
	char *pos;

	for (uint32_t i = 0; i < n; i++)
		extra += slen(lines[i].function) + slen(lines[i].system_name) + slen(lines[i].file);
	l = malloc(sizeof(*l) + n * sizeof(l->lines[0]) + extra);
	if (!l)
		return NULL;
	l->n = n;
	pos = (char *)(l->lines + n);
	for (uint32_t i = 0; i < n; i++) {
		l->lines[i] = lines[i];
		l->lines[i].function = scopy(&pos, lines[i].function);
		l->lines[i].system_name = scopy(&pos, lines[i].system_name);
		l->lines[i].file = scopy(&pos, lines[i].file);
	}
	return l;
}

void gw_lines_free(struct gw_lines *l)
{
	free(l);
}

bool gw_location__set_lines(struct gw_location *l, struct gw_lines *lines)
{
	const struct gw_lines *expected = NULL;
	return atomic_compare_exchange_strong_explicit(&l->lines, &expected, lines, memory_order_acq_rel,
						       memory_order_acquire);
}

void gw_symbol_table_free(struct gw_symbol_table *t)
{
	if (!t)
		return;
	gw_executable__unref(t->exe);
	free(t);
}

/* ---- batches ---- */

/* Arena chunk size; larger strings get a chunk of their own. */
#define CHUNK_BYTES (16u * 1024u)

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

static int grow(struct gw_profiles *p, void **arr, uint32_t *cap, uint32_t need, size_t elem)
{
	uint32_t ncap;
	void *n;

	if (need <= *cap)
		return 0;
	ncap = *cap ? *cap : 4;
	while (ncap < need) {
		if (ncap > UINT32_MAX / 2)
			return -E2BIG;
		ncap *= 2;
	}
	n = realloc(*arr, (size_t)ncap * elem);
	if (!n)
		return -ENOMEM;
	mem_add(p, (int64_t)((size_t)(ncap - *cap) * elem));
	*arr = n;
	*cap = ncap;
	return 0;
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
	*r = (struct gw_resource){ .frequency_hz = frequency_hz, .profile_type = type };
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

int gw_resource__add_sample(struct gw_profiles *p, struct gw_resource *r, const struct gw_sample *s)
{
	struct gw_sample c = *s;
	int e;

	if (s->thread_name && !(c.thread_name = gw_profiles__strdup(p, s->thread_name)))
		return -ENOMEM;
	if (s->n_attrs) {
		struct gw_attr *a = gw_profiles__alloc(p, s->n_attrs * sizeof(*a));
		if (!a)
			return -ENOMEM;
		for (uint32_t i = 0; i < s->n_attrs; i++)
			if ((e = copy_attr(p, &a[i], &s->attrs[i])) < 0)
				return e;
		c.attrs = a;
	}
	c.stack = gw_stack__ref(s->stack);
	e = gw_resource__add_sample_owned(p, r, &c);
	if (e < 0)
		gw_stack__unref(c.stack);
	return e;
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

struct gw_profiles *gw_profiles__clone(const struct gw_profiles *p)
{
	struct gw_profiles *c = gw_profiles_new();
	int e = 0;

	if (!c)
		return NULL;
	c->route_pipeline = p->route_pipeline;
	c->route_stage = p->route_stage;
	c->created_ns = p->created_ns;
	for (uint32_t i = 0; i < p->n_resources; i++) {
		const struct gw_resource *r = &p->resources[i];
		struct gw_resource *nr =
			gw_profiles__add_typed_resource(c, r->attrs, r->n_attrs, r->frequency_hz, r->profile_type);
		if (!nr) {
			e = -errno;
			goto fail;
		}
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
