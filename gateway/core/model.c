/* SPDX-License-Identifier: Apache-2.0 */
/* The internal profile model (model.h): definitions. Batches are in batch.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <xxhash.h>

#include "common/macro.h"
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

struct gw_executable *gw_executable_new(const struct gw_executable_def *def)
{
	size_t extra = gw_slen(def->file_name) + gw_slen(def->path) + gw_slen(def->debuglink);
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
	e->obj.bytes = (uint32_t)(sizeof(*e) + extra + GW_OBJ_OVERHEAD);
	gw_id_set(&e->id, def->id, def->id_len);
	e->id_kind = def->id_kind;
	pos = (char *)(e + 1);
	e->file_name = gw_scopy(&pos, def->file_name);
	e->path = gw_scopy(&pos, def->path);
	e->debuglink = gw_scopy(&pos, def->debuglink);
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
	atomic_init(&e->symbols_asked_of, 0);
	atomic_init(&e->symbols_answer_until, 0);
	return e;
}

static int module_cmp(const void *a, const void *b)
{
	const struct gw_kernel_module *x = a, *y = b;
	return x->start < y->start ? -1 : x->start > y->start;
}

struct gw_kernel *gw_kernel_new(const struct gw_kernel_def *def)
{
	bool is_module = def->addressing == GW_KERNEL_MODULE_OFFSET && def->module && def->module[0];
	size_t extra = gw_slen(def->release) + gw_slen(def->boot_id) + (is_module ? 2 * gw_slen(def->module) + 2 : 0);
	struct gw_kernel_module *mods;
	struct gw_kernel *k;
	char *pos;

	if (def->id_len == 0 || def->id_len > GW_ID_MAX || def->build_id_len > GW_ID_MAX) {
		errno = EINVAL;
		return NULL;
	}
	for (uint32_t i = 0; i < def->n_modules; i++)
		extra += gw_slen(def->modules[i].name);
	k = calloc(1, sizeof(*k) + def->n_modules * sizeof(*mods) + extra);
	if (!k)
		return NULL;
	atomic_init(&k->obj.refs, 1);
	k->obj.type = GW_OBJ_KERNEL;
	k->obj.bytes =
		(uint32_t)SR_MIN(sizeof(*k) + def->n_modules * sizeof(*mods) + extra + GW_OBJ_OVERHEAD, UINT32_MAX);
	gw_id_set(&k->id, def->id, def->id_len);
	mods = (struct gw_kernel_module *)(k + 1);
	pos = (char *)(mods + def->n_modules);
	k->release = gw_scopy(&pos, def->release);
	k->boot_id = gw_scopy(&pos, def->boot_id);
	k->addressing = def->addressing;
	if (is_module) {
		k->module = gw_scopy(&pos, def->module);
		/* "[name]", as perf names a module's mapping. */
		k->mapping_name = pos;
		pos += sprintf(pos, "[%s]", def->module) + 1;
	} else {
		k->module = "";
		k->mapping_name = "[kernel.kallsyms]";
	}
	if (def->build_id_len)
		gw_id_set(&k->build_id, def->build_id, def->build_id_len);
	for (uint32_t i = 0; i < def->n_modules; i++) {
		mods[i] = def->modules[i];
		mods[i].name = gw_scopy(&pos, def->modules[i].name);
	}
	qsort(mods, def->n_modules, sizeof(*mods), module_cmp);
	k->modules = mods;
	k->n_modules = def->n_modules;
	atomic_init(&k->symbolizer, NULL);
	atomic_init(&k->flags, 0);
	atomic_init(&k->symbols_pending_until, 0);
	atomic_init(&k->symbols_asked_until, 0);
	atomic_init(&k->symbols_asked_of, 0);
	atomic_init(&k->symbols_answer_until, 0);
	return k;
}

struct gw_location *gw_location_new(enum gw_frame_kind kind, uint64_t address, struct gw_executable *exe,
				    struct gw_kernel *kernel)
{
	struct gw_location *l = gw_location_slot_alloc();
	if (!l)
		return NULL;
	atomic_init(&l->refs, 1);
	l->sub = (uint8_t)kind;
	l->lru_next = GW_SLOT_NONE;
	l->address = address;
	if (kind == GW_FRAME_USER)
		l->in.exe = gw_executable__ref(exe);
	else if (kind == GW_FRAME_KERNEL)
		l->in.kernel = gw_kernel__ref(kernel);
	atomic_init(&l->lines, NULL);
	return l;
}

struct gw_function *gw_function_new(const struct gw_function_def *def)
{
	size_t extra = gw_slen(def->runtime) + gw_slen(def->name) + gw_slen(def->file_name);
	struct gw_function *f;
	char *pos;

	if (def->id_len == 0 || def->id_len > GW_ID_MAX || !def->name || !def->name[0]) {
		errno = EINVAL;
		return NULL;
	}
	f = calloc(1, sizeof(*f) + extra);
	if (!f)
		return NULL;
	atomic_init(&f->obj.refs, 1);
	f->obj.type = GW_OBJ_FUNCTION;
	f->obj.bytes = (uint32_t)SR_MIN(sizeof(*f) + extra + GW_OBJ_OVERHEAD, UINT32_MAX);
	gw_id_set(&f->id, def->id, def->id_len);
	pos = (char *)(f + 1);
	f->runtime = gw_scopy(&pos, def->runtime);
	f->name = gw_scopy(&pos, def->name);
	f->file_name = gw_scopy(&pos, def->file_name);
	f->start_line = def->start_line;
	return f;
}

struct gw_location *gw_function_location_new(enum gw_frame_kind kind, uint64_t address, struct gw_function *function,
					     uint32_t line)
{
	struct gw_line ln = { .function = function->name,
			      .file = function->file_name,
			      .line = line,
			      .start_line = function->start_line };
	struct gw_lines *lines = gw_lines_new(&ln, 1);
	struct gw_location *l;

	if (!lines)
		return NULL;
	l = gw_location_new(kind, address, NULL, NULL);
	if (!l) {
		gw_lines_free(lines);
		return NULL;
	}
	l->in.function = gw_function__ref(function);
	l->flags = GW_LOCATION_OWN_LINES; /* charged with its location, from the start */
	atomic_store_explicit(&l->lines, lines, memory_order_release);
	return l;
}

/* What a stack of n frames and an ID of id_len bytes takes. */
static size_t stack_bytes(uint32_t n, size_t id_len)
{
	return sizeof(struct gw_stack) + (id_len + 3) / 4 * 4 + n * sizeof(uint32_t);
}

struct gw_stack *gw_stack_new(const void *id, size_t id_len, bool truncated, struct gw_location **locations, uint32_t n)
{
	struct gw_stack *s;

	if (id_len == 0 || id_len > GW_ID_MAX)
		goto fail_einval;
	s = gw_stack_slab_alloc(stack_bytes(n, id_len));
	if (!s)
		goto fail;
	atomic_init(&s->obj.refs, 1);
	s->obj.type = GW_OBJ_STACK;
	/*
	 * In a slab, its slot (8-byte classes, no header) and its index share (an
	 * 8-byte bucket for one or two entries); from malloc, its header too. Not
	 * GW_OBJ_OVERHEAD for all: at a million stacks, 24 bytes each too many
	 * made the stacks store's bound hold 20 MiB less than it said.
	 */
	if (stack_bytes(n, id_len) <= GW_STACK_SLAB_MAX)
		s->obj.bytes = (uint32_t)((stack_bytes(n, id_len) + 7) / 8 * 8 + 8);
	else
		s->obj.bytes = (uint32_t)SR_MIN(stack_bytes(n, id_len) + GW_OBJ_OVERHEAD, UINT32_MAX);
	s->truncated = truncated;
	s->n_locations = n;
	s->id_len = (uint8_t)id_len;
	memcpy(s->words, id, id_len);
	for (uint32_t i = 0; i < n; i++) /* the caller's references, now the stack's */
		s->words[(id_len + 3) / 4 + i] = gw_location__slot(locations[i]);
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
	case GW_OBJ_STACK: {
		struct gw_stack *s = (struct gw_stack *)o;
		for (uint32_t i = 0; i < s->n_locations; i++)
			gw_location__unref(gw_stack__location(s, i));
		gw_stack_slab_free(s, stack_bytes(s->n_locations, s->id_len));
		return;
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

struct gw_function *gw_function__ref(struct gw_function *f)
{
	return f ? (obj_ref(&f->obj), f) : NULL;
}

void gw_function__unref(struct gw_function *f)
{
	if (f)
		gw_obj_unref(&f->obj);
}

struct gw_location *gw_location__ref(struct gw_location *l)
{
	if (l)
		atomic_fetch_add_explicit(&l->refs, 1, memory_order_relaxed);
	return l;
}

void gw_location__unref(struct gw_location *l)
{
	if (!l || atomic_fetch_sub_explicit(&l->refs, 1, memory_order_acq_rel) != 1)
		return;
	gw_executable__unref(gw_location__exe(l));
	gw_kernel__unref(gw_location__kernel(l));
	gw_function__unref(gw_location__function(l));
	gw_lines_free((struct gw_lines *)atomic_load(&l->lines));
	gw_location_slot_free(l);
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

static void ask_record(atomic_uint_fast64_t *of, atomic_uint_fast64_t *until, uint64_t identity, uint64_t answer_ns)
{
	/* The deadline first: an upload that reads the new identity with the old deadline is at worst refused. */
	atomic_store_explicit(until, 0, memory_order_relaxed);
	atomic_store_explicit(of, identity, memory_order_release);
	atomic_store_explicit(until, mono_now_ns() + answer_ns, memory_order_release);
}

static bool ask_answered(atomic_uint_fast64_t *of, atomic_uint_fast64_t *until, uint64_t identity)
{
	uint_fast64_t who = identity;

	if (!identity || atomic_load_explicit(until, memory_order_acquire) <= mono_now_ns())
		return false;
	/* Once: a second upload of the same agent for the same ask is not an answer. */
	return atomic_compare_exchange_strong_explicit(of, &who, 0, memory_order_acq_rel, memory_order_relaxed);
}

static void ask_forget(atomic_uint_fast64_t *asked_until, atomic_uint_fast64_t *of, atomic_uint_fast64_t *until)
{
	atomic_store_explicit(asked_until, 0, memory_order_relaxed);
	atomic_store_explicit(until, 0, memory_order_relaxed);
	atomic_store_explicit(of, 0, memory_order_relaxed);
}

bool gw_executable__claim_ask(struct gw_executable *e, uint64_t ttl_ns)
{
	return ask_claim(&e->symbols_asked_until, ttl_ns);
}

void gw_executable__release_ask(struct gw_executable *e)
{
	ask_forget(&e->symbols_asked_until, &e->symbols_asked_of, &e->symbols_answer_until);
}

bool gw_kernel__claim_ask(struct gw_kernel *k, uint64_t ttl_ns)
{
	return ask_claim(&k->symbols_asked_until, ttl_ns);
}

void gw_kernel__release_ask(struct gw_kernel *k)
{
	ask_forget(&k->symbols_asked_until, &k->symbols_asked_of, &k->symbols_answer_until);
}

void gw_executable__record_ask(struct gw_executable *e, uint64_t identity, uint64_t answer_ns)
{
	ask_record(&e->symbols_asked_of, &e->symbols_answer_until, identity, answer_ns);
}

bool gw_executable__answered(struct gw_executable *e, uint64_t identity)
{
	return ask_answered(&e->symbols_asked_of, &e->symbols_answer_until, identity);
}

void gw_kernel__record_ask(struct gw_kernel *k, uint64_t identity, uint64_t answer_ns)
{
	ask_record(&k->symbols_asked_of, &k->symbols_answer_until, identity, answer_ns);
}

bool gw_kernel__answered(struct gw_kernel *k, uint64_t identity)
{
	return ask_answered(&k->symbols_asked_of, &k->symbols_answer_until, identity);
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
