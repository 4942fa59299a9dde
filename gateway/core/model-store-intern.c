/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What each kind of definition is keyed by, and how it is looked up and
 * interned in the stores (model-store.c keeps the stores themselves: index,
 * recency list, bounds, and what holds what).
 */
#include <errno.h>
#include <string.h>

#include <xxhash.h>

#include "model.h"
#include "model-private.h"
#include "model-store-private.h"

static void key_for_id(struct key *k, enum gw_obj_type type, const void *id, size_t len)
{
	*k = (struct key){ .type = type, .id = id, .id_len = len };
	k->hash = XXH3_64bits_withSeed(id, len, type);
}

/* A location's key; preset ones add their lines (the caller's, until interned). */
static void key_for_location(struct key *k, enum gw_frame_kind kind, uint64_t address, const void *owner, uint32_t line,
			     bool preset, const struct gw_line *lines, uint32_t n)
{
	*k = (struct key){ .type = GW_OBJ_LOCATION,
			   .kind = kind,
			   .address = address,
			   .owner = owner,
			   .line = line,
			   .preset = preset,
			   .lines = lines,
			   .n_lines = n };
	k->hash = gw_location_hash(kind, address, owner, line, preset, lines, n);
}

struct gw_executable *gw_stores__executable(struct gw_stores *s, const void *id, size_t id_len)
{
	struct key k;
	if (id_len == 0 || id_len > GW_ID_MAX)
		return NULL;
	key_for_id(&k, GW_OBJ_EXECUTABLE, id, id_len);
	return (struct gw_executable *)gw_store_lookup(s, GW_STORE_EXECUTABLES, &k);
}

struct gw_kernel *gw_stores__kernel(struct gw_stores *s, const void *id, size_t id_len)
{
	struct key k;
	if (id_len == 0 || id_len > GW_ID_MAX)
		return NULL;
	key_for_id(&k, GW_OBJ_KERNEL, id, id_len);
	return (struct gw_kernel *)gw_store_lookup(s, GW_STORE_KERNELS, &k);
}

struct gw_stack *gw_stores__stack(struct gw_stores *s, const void *id, size_t id_len)
{
	struct key k;
	if (id_len == 0 || id_len > GW_ID_MAX)
		return NULL;
	key_for_id(&k, GW_OBJ_STACK, id, id_len);
	return (struct gw_stack *)gw_store_lookup(s, GW_STORE_STACKS, &k);
}

struct gw_executable *gw_stores__intern_executable(struct gw_stores *s, const struct gw_executable_def *def)
{
	struct gw_executable *e;
	struct key k;

	if (def->id_len == 0 || def->id_len > GW_ID_MAX) {
		errno = EINVAL;
		return NULL;
	}
	key_for_id(&k, GW_OBJ_EXECUTABLE, def->id, def->id_len);
	e = (struct gw_executable *)gw_store_lookup(s, GW_STORE_EXECUTABLES, &k);
	if (e)
		return e;
	e = gw_executable_new(def);
	if (!e)
		return NULL;
	return (struct gw_executable *)gw_store_insert(s, GW_STORE_EXECUTABLES, &k, &e->obj);
}

struct gw_kernel *gw_stores__intern_kernel(struct gw_stores *s, const struct gw_kernel_def *def)
{
	struct gw_kernel *kn;
	struct key k;

	if (def->id_len == 0 || def->id_len > GW_ID_MAX) {
		errno = EINVAL;
		return NULL;
	}
	key_for_id(&k, GW_OBJ_KERNEL, def->id, def->id_len);
	kn = (struct gw_kernel *)gw_store_lookup(s, GW_STORE_KERNELS, &k);
	if (kn)
		return kn;
	kn = gw_kernel_new(def);
	if (!kn)
		return NULL;
	return (struct gw_kernel *)gw_store_insert(s, GW_STORE_KERNELS, &k, &kn->obj);
}

struct gw_location *gw_stores__intern_location(struct gw_stores *s, enum gw_frame_kind kind, uint64_t address,
					       struct gw_executable *exe, struct gw_kernel *kernel)
{
	struct gw_location *l;
	const void *owner;
	struct key k;

	if ((kind == GW_FRAME_USER && (!exe || kernel)) || (kind == GW_FRAME_KERNEL && (!kernel || exe)) ||
	    (kind == GW_FRAME_UNKNOWN && (exe || kernel)) || (unsigned)kind > GW_FRAME_KERNEL) {
		errno = EINVAL;
		return NULL;
	}
	owner = exe ? (const void *)exe : (const void *)kernel;
	key_for_location(&k, kind, address, owner, 0, false, NULL, 0);
	l = gw_store_lookup_location(s, &k);
	if (l)
		return l;
	l = gw_location_new(kind, address, exe, kernel);
	if (!l)
		return NULL;
	return gw_store_insert_location(s, &k, l);
}

struct gw_location *gw_stores__intern_location_lines(struct gw_stores *s, enum gw_frame_kind kind, uint64_t address,
						     struct gw_executable *exe, struct gw_kernel *kernel,
						     const struct gw_line *lines, uint32_t n)
{
	struct gw_location *l;
	struct gw_lines *gl;
	struct key k;

	if ((kind == GW_FRAME_USER && (!exe || kernel)) || (kind == GW_FRAME_KERNEL && (!kernel || exe)) ||
	    (kind == GW_FRAME_UNKNOWN && (exe || kernel)) || (unsigned)kind > GW_FRAME_KERNEL || (n && !lines)) {
		errno = EINVAL;
		return NULL;
	}
	key_for_location(&k, kind, address, exe ? (const void *)exe : (const void *)kernel, 0, true, lines, n);
	l = gw_store_lookup_location(s, &k);
	if (l)
		return l;
	gl = gw_lines_new(lines, n);
	if (!gl)
		return NULL;
	l = gw_location_new(kind, address, exe, kernel);
	if (!l) {
		gw_lines_free(gl);
		return NULL;
	}
	/* Not shared yet: no other thread can race this. Its lines are charged with it. */
	l->sub |= GW_LOCATION_PRESET;
	l->flags |= GW_LOCATION_OWN_LINES;
	gw_location__set_lines(l, gl);
	return gw_store_insert_location(s, &k, l);
}

struct gw_function *gw_stores__function(struct gw_stores *s, const void *id, size_t id_len)
{
	struct key k;
	if (id_len == 0 || id_len > GW_ID_MAX)
		return NULL;
	key_for_id(&k, GW_OBJ_FUNCTION, id, id_len);
	return (struct gw_function *)gw_store_lookup(s, GW_STORE_FUNCTIONS, &k);
}

struct gw_function *gw_stores__intern_function(struct gw_stores *s, const struct gw_function_def *def)
{
	struct gw_function *f;
	struct key k;

	if (def->id_len == 0 || def->id_len > GW_ID_MAX) {
		errno = EINVAL;
		return NULL;
	}
	key_for_id(&k, GW_OBJ_FUNCTION, def->id, def->id_len);
	f = (struct gw_function *)gw_store_lookup(s, GW_STORE_FUNCTIONS, &k);
	if (f)
		return f;
	f = gw_function_new(def);
	if (!f)
		return NULL;
	return (struct gw_function *)gw_store_insert(s, GW_STORE_FUNCTIONS, &k, &f->obj);
}

struct gw_location *gw_stores__intern_function_location(struct gw_stores *s, enum gw_frame_kind kind, uint64_t address,
							struct gw_function *function, uint32_t line)
{
	struct gw_location *l;
	struct key k;

	if (!gw_frame_kind_has_function(kind) || !function) {
		errno = EINVAL;
		return NULL;
	}
	key_for_location(&k, kind, address, function, line, false, NULL, 0);
	l = gw_store_lookup_location(s, &k);
	if (l)
		return l;
	l = gw_function_location_new(kind, address, function, line);
	if (!l)
		return NULL;
	return gw_store_insert_location(s, &k, l);
}

struct gw_stack *gw_stores__intern_stack(struct gw_stores *s, const void *id, size_t id_len, bool truncated,
					 struct gw_location **locations, uint32_t n)
{
	struct gw_stack *st;
	struct key k;

	if (id_len == 0 || id_len > GW_ID_MAX) {
		for (uint32_t i = 0; i < n; i++)
			gw_location__unref(locations[i]);
		errno = EINVAL;
		return NULL;
	}
	key_for_id(&k, GW_OBJ_STACK, id, id_len);
	st = (struct gw_stack *)gw_store_lookup(s, GW_STORE_STACKS, &k);
	if (st) {
		for (uint32_t i = 0; i < n; i++)
			gw_location__unref(locations[i]);
		return st;
	}
	st = gw_stack_new(id, id_len, truncated, locations, n);
	if (!st)
		return NULL;
	return (struct gw_stack *)gw_store_insert(s, GW_STORE_STACKS, &k, &st->obj);
}
