// SPDX-License-Identifier: Apache-2.0
/*
 * The ProfilesDictionary of one OTLP request (otlp-dict-writer-private.h): strings,
 * functions, mappings, locations, stacks and attributes, each interned once
 * per request, and written as the request's dictionary field.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "core/model.h"
#include "common/macro.h"
#include "otlp-dict-writer-private.h"
#include "otlp-encode.h"
#include "common/pbwire.h"

#include "common/otlp-fields.h"
#include "common/search.h"

/* ---- an index map: hash → dictionary index, equality decided by the caller ---- */

/* ---- growable arrays ---- */

/* ---- the dictionary ---- */

void gw_otlp_dict_free(struct gw_otlp_dict *d)
{
	for (uint32_t i = 0; i < d->owned.n; i++)
		free(d->owned.v[i]);
	free(d->owned.v);
	free(d->strings.v);
	free(d->functions.v);
	free(d->mappings.v);
	free(d->lines.v);
	free(d->locations.v);
	free(d->stack_locs.v);
	free(d->stacks.v);
	free(d->pending.v);
	free(d->keys.v);
	free(d->keys_tmp.v);
	free(d->attrs.v);
	free(d->fn_by_name.v);
	gw_otlp_imap_free(&d->m_shared_lines);
	gw_otlp_imap_free(&d->m_strings);
	gw_otlp_imap_free(&d->m_functions);
	gw_otlp_imap_free(&d->m_mappings);
	gw_otlp_imap_free(&d->m_stacks);
	gw_otlp_imap_free(&d->m_attrs);
}

void gw_otlp_dict_reset(struct gw_otlp_dict *d)
{
	for (uint32_t i = 0; i < d->owned.n; i++)
		free(d->owned.v[i]);
	d->owned.n = 0;
	d->strings.n = d->functions.n = d->mappings.n = d->lines.n = d->locations.n = 0;
	d->stack_locs.n = d->stacks.n = d->attrs.n = d->fn_by_name.n = 0;
	d->pending.n = d->keys.n = d->keys_tmp.n = 0;
	gw_otlp_imap_reset(&d->m_shared_lines);
	gw_otlp_imap_reset(&d->m_strings);
	gw_otlp_imap_reset(&d->m_functions);
	gw_otlp_imap_reset(&d->m_mappings);
	gw_otlp_imap_reset(&d->m_stacks);
	gw_otlp_imap_reset(&d->m_attrs);
}

size_t gw_otlp_dict_bytes(const struct gw_otlp_dict *d)
{
	const struct gw_otlp_imap *maps[] = { &d->m_shared_lines, &d->m_strings, &d->m_functions,
					      &d->m_mappings,	  &d->m_stacks,	 &d->m_attrs };
	size_t b = (size_t)d->owned.cap * sizeof(*d->owned.v) + (size_t)d->strings.cap * sizeof(*d->strings.v) +
		   (size_t)d->functions.cap * sizeof(*d->functions.v) +
		   (size_t)d->mappings.cap * sizeof(*d->mappings.v) + (size_t)d->lines.cap * sizeof(*d->lines.v) +
		   (size_t)d->locations.cap * sizeof(*d->locations.v) +
		   (size_t)d->stack_locs.cap * sizeof(*d->stack_locs.v) + (size_t)d->stacks.cap * sizeof(*d->stacks.v) +
		   (size_t)d->pending.cap * sizeof(*d->pending.v) + (size_t)d->keys.cap * sizeof(*d->keys.v) +
		   (size_t)d->keys_tmp.cap * sizeof(*d->keys_tmp.v) + (size_t)d->attrs.cap * sizeof(*d->attrs.v) +
		   (size_t)d->fn_by_name.cap * sizeof(*d->fn_by_name.v);

	for (size_t i = 0; i < SR_ARRAY_SIZE(maps); i++)
		b += (size_t)maps[i]->cap * sizeof(struct gw_otlp_imap_slot);
	return b;
}

/* A bijection of the pointer's bits (xor-shifts and an odd multiplier): equal hashes are equal pointers. */
static uint64_t hash_ptr(const void *p)
{
	uint64_t x = (uint64_t)(uintptr_t)p;

	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	return x;
}

/* Returns the index of s (interned; s must outlive the encoding) or -errno. */
int64_t gw_otlp_dict_string(struct gw_otlp_dict *d, const char *s)
{
	size_t len;
	uint64_t h;
	uint32_t slot;
	struct gw_otlp_dict_string_entry *e;
	int r;

	if (!s || !*s)
		return 0;
	len = strlen(s);
	h = XXH3_64bits(s, len);
	r = gw_otlp_imap_prepare(&d->m_strings);
	if (r < 0)
		return r;
	GW_OTLP_IMAP_FIND(&d->m_strings, h, d->strings.v[idx].len == len && memcmp(d->strings.v[idx].s, s, len) == 0,
			  slot);
	if (gw_otlp_imap_at(&d->m_strings, slot))
		return gw_otlp_imap_at(&d->m_strings, slot) - 1;
	r = GW_OTLP_VEC_PUSH(d->strings, e);
	if (r < 0)
		return r;
	e->s = s;
	e->len = (uint32_t)len;
	gw_otlp_imap_set(&d->m_strings, slot, h, d->strings.n - 1);
	return d->strings.n - 1;
}

/* For strings we make: kept until the dictionary is freed. */
static int64_t dict_string_owned(struct gw_otlp_dict *d, char *s)
{
	char **slot;
	int64_t r;

	if (!s)
		return -ENOMEM;
	if (GW_OTLP_VEC_PUSH(d->owned, slot) < 0) {
		free(s);
		return -ENOMEM;
	}
	*slot = s;
	r = gw_otlp_dict_string(d, s);
	return r;
}

static int64_t dict_function(struct gw_otlp_dict *d, const struct gw_line *l)
{
	struct gw_otlp_dict_function_entry f;
	int64_t name, sys, file;
	uint64_t h = 0;
	uint32_t slot = 0, first;
	struct gw_otlp_dict_function_entry *e;
	int r;

	name = gw_otlp_dict_string(d, l->function);
	/* Without a linkage name the system name is the name: not hashed and looked up twice. */
	sys = l->system_name && *l->system_name ? gw_otlp_dict_string(d, l->system_name) : name;
	file = gw_otlp_dict_string(d, l->file);
	if (name < 0 || sys < 0 || file < 0)
		return -ENOMEM;
	/* Compared as bytes: the padding after filename must be zero too. */
	memset(&f, 0, sizeof(f));
	f.name = (int32_t)name;
	f.system_name = (int32_t)sys;
	f.filename = (int32_t)file;
	f.start_line = l->start_line;
	/* The first function of this name (otlp-dict-writer-private.h, fn_by_name); strings added since are past the array's end. */
	if ((uint32_t)name >= d->fn_by_name.n) {
		uint32_t n = d->strings.n;

		r = gw_otlp_vec_grow((void **)&d->fn_by_name.v, &d->fn_by_name.cap, sizeof(uint32_t), n);
		if (r < 0)
			return r;
		memset(d->fn_by_name.v + d->fn_by_name.n, 0, (size_t)(n - d->fn_by_name.n) * sizeof(uint32_t));
		d->fn_by_name.n = n;
	}
	first = d->fn_by_name.v[name];
	if (first && memcmp(&d->functions.v[first - 1], &f, sizeof(f)) == 0)
		return first - 1;
	if (first) { /* another function of this name: the map holds those */
		h = XXH3_64bits(&f, sizeof(f));
		r = gw_otlp_imap_prepare(&d->m_functions);
		if (r < 0)
			return r;
		GW_OTLP_IMAP_FIND(&d->m_functions, h, memcmp(&d->functions.v[idx], &f, sizeof(f)) == 0, slot);
		if (gw_otlp_imap_at(&d->m_functions, slot))
			return gw_otlp_imap_at(&d->m_functions, slot) - 1;
	}
	r = GW_OTLP_VEC_PUSH(d->functions, e);
	if (r < 0)
		return r;
	*e = f;
	if (first)
		gw_otlp_imap_set(&d->m_functions, slot, h, d->functions.n - 1);
	else
		d->fn_by_name.v[name] = d->functions.n;
	return d->functions.n - 1;
}

int64_t gw_otlp_dict_attr(struct gw_otlp_dict *d, const struct gw_attr *a)
{
	struct gw_otlp_dict_attr_entry x;
	int64_t k, s = 0;
	uint64_t h;
	uint32_t slot;
	struct gw_otlp_dict_attr_entry *e;
	int r;

	memset(&x, 0, sizeof(x)); /* padding too: the key is hashed as bytes */
	k = gw_otlp_dict_string(d, a->key);
	if (k < 0)
		return k;
	x.key = (int32_t)k;
	x.type = a->type;
	switch (a->type) {
	case GW_ATTR_STRING:
		s = gw_otlp_dict_string(d, a->v.s);
		if (s < 0)
			return s;
		x.str = (int32_t)s;
		break;
	case GW_ATTR_INT:
		x.v.i = a->v.i;
		break;
	case GW_ATTR_BOOL:
		x.v.b = a->v.b;
		break;
	case GW_ATTR_DOUBLE:
		x.v.d = a->v.d;
		break;
	}
	h = XXH3_64bits(&x, sizeof(x));
	r = gw_otlp_imap_prepare(&d->m_attrs);
	if (r < 0)
		return r;
	GW_OTLP_IMAP_FIND(&d->m_attrs, h, memcmp(&d->attrs.v[idx], &x, sizeof(x)) == 0, slot);
	if (gw_otlp_imap_at(&d->m_attrs, slot))
		return gw_otlp_imap_at(&d->m_attrs, slot) - 1;
	r = GW_OTLP_VEC_PUSH(d->attrs, e);
	if (r < 0)
		return r;
	*e = x;
	gw_otlp_imap_set(&d->m_attrs, slot, h, d->attrs.n - 1);
	return d->attrs.n - 1;
}

static char *hex_id(const struct gw_id *id)
{
	char *s = malloc(2 * GW_ID_MAX + 1);

	if (s)
		gw_id_to_hex(id, s, 2 * GW_ID_MAX + 1);
	return s;
}

static int64_t dict_mapping(struct gw_otlp_dict *d, const void *key, const char *filename, const struct gw_id *build_id)
{
	uint64_t h = hash_ptr(key);
	uint32_t slot;
	struct gw_otlp_dict_mapping_entry *e;
	int64_t fn, attr = 0;
	int r;

	r = gw_otlp_imap_prepare(&d->m_mappings);
	if (r < 0)
		return r;
	GW_OTLP_IMAP_FIND(&d->m_mappings, h, true, slot); /* hash_ptr() is a bijection */
	if (gw_otlp_imap_at(&d->m_mappings, slot))
		return gw_otlp_imap_at(&d->m_mappings, slot) - 1;
	fn = gw_otlp_dict_string(d, filename);
	if (fn < 0)
		return fn;
	if (build_id && build_id->len > 0) {
		struct gw_attr a = { .key = "process.executable.build_id.gnu", .type = GW_ATTR_STRING };
		char *hex = hex_id(build_id);
		int64_t hs = dict_string_owned(d, hex);

		if (hs < 0)
			return hs;
		a.v.s = d->strings.v[hs].s;
		attr = gw_otlp_dict_attr(d, &a);
		if (attr < 0)
			return attr;
	}
	r = GW_OTLP_VEC_PUSH(d->mappings, e);
	if (r < 0)
		return r;
	e->filename = (int32_t)fn;
	e->build_id_attr = (int32_t)attr;
	gw_otlp_imap_set(&d->m_mappings, slot, h, d->mappings.n - 1);
	return d->mappings.n - 1;
}

/*
 * profile.frame.type (OpenTelemetry semantic conventions) of a frame the
 * agent named: the interpreter's runtime ("cpython"), or for JIT code from a
 * perf map the runtime the process runs (jit_type), else the function's
 * runtime ("perf-map").
 */
static const char *frame_type(const struct gw_location *l, const char *jit_type)
{
	if (gw_location__kind(l) == GW_FRAME_JIT && jit_type)
		return jit_type;
	const struct gw_function *f = gw_location__function(l);

	return f->runtime[0] ? f->runtime : "unknown";
}

/* The JIT runtime a resource's process runs, from its executable's name (NULL: not known). */
const char *gw_otlp_jit_frame_type(const struct gw_resource *r)
{
	static const struct {
		const char *exe, *type;
	} known[] = {
		{ "node", "v8js" }, { "nodejs", "v8js" },   { "deno", "v8js" },	    { "bun", "jsc" },
		{ "java", "jvm" },  { "dotnet", "dotnet" }, { "beam.smp", "beam" }, { "luajit", "luajit" },
	};
	const char *exe = gw_resource__string(r, "process.executable.name");

	for (size_t i = 0; exe && i < SR_ARRAY_SIZE(known); i++)
		if (strcmp(exe, known[i].exe) == 0)
			return known[i].type;
	return NULL;
}

/*
 * Where lines start in the dictionary's line table. Shared lines (core/lines.c)
 * are added once per request; a location's own lines each time it is added.
 */
static int dict_lines(struct gw_otlp_dict *d, const struct gw_lines *lines, uint32_t *ret_first)
{
	uint64_t h = hash_ptr(lines);
	bool shared;
	uint32_t slot = 0, first = d->lines.n;
	int r;

	/* Looked up by pointer before lines are read: shared lines added already are not read again (a miss saved). */
	r = gw_otlp_imap_prepare(&d->m_shared_lines);
	if (r < 0)
		return r;
	GW_OTLP_IMAP_FIND(&d->m_shared_lines, h, true, slot); /* hash_ptr() is a bijection */
	if (gw_otlp_imap_at(&d->m_shared_lines, slot)) {
		*ret_first = gw_otlp_imap_at(&d->m_shared_lines, slot) - 1;
		return 0;
	}
	shared = lines->table != NULL;
	for (uint32_t i = 0; i < lines->n; i++) {
		int64_t f = dict_function(d, &lines->lines[i]);
		struct gw_otlp_dict_line_entry *dl;

		if (f < 0)
			return (int)f;
		r = GW_OTLP_VEC_PUSH(d->lines, dl);
		if (r < 0)
			return r;
		*dl = (struct gw_otlp_dict_line_entry){ (int32_t)f, lines->lines[i].line, lines->lines[i].column };
	}
	if (shared)
		gw_otlp_imap_set(&d->m_shared_lines, slot, h, first);
	*ret_first = first;
	return 0;
}

/* Adds l (in no stack resolved before: each location is added once, by gw_otlp_dict_resolve()). */
static int64_t dict_location(struct gw_otlp_dict *d, const struct gw_location *l, const char *jit_type)
{
	struct gw_otlp_dict_location_entry loc, *e;
	const struct gw_lines *lines;
	int64_t m = 0;
	int r;

	loc = (struct gw_otlp_dict_location_entry){ .address = l->address };
	if (gw_location__exe(l)) {
		const struct gw_executable *exe = gw_location__exe(l);
		const char *name = exe->path && *exe->path ? exe->path : exe->file_name;

		m = dict_mapping(d, exe, name, &exe->gnu_build_id);
	} else if (gw_location__kernel(l)) {
		m = dict_mapping(d, gw_location__kernel(l), gw_location__kernel(l)->mapping_name,
				 &gw_location__kernel(l)->build_id);
	}
	if (m < 0)
		return m;
	loc.mapping = (int32_t)m;
	if (gw_location__function(l)) {
		struct gw_attr a = { .key = "profile.frame.type",
				     .type = GW_ATTR_STRING,
				     .v.s = frame_type(l, jit_type) };
		int64_t ai = gw_otlp_dict_attr(d, &a);

		if (ai < 0)
			return ai;
		loc.frame_type_attr = (int32_t)ai;
	}
	lines = gw_location__lines(l);
	loc.first_line = d->lines.n;
	if (lines) {
		r = dict_lines(d, lines, &loc.first_line);
		if (r < 0)
			return r;
		loc.n_lines = lines->n;
	}
	r = GW_OTLP_VEC_PUSH(d->locations, e);
	if (r < 0)
		return r;
	*e = loc;
	return d->locations.n - 1;
}

/*
 * A stack is only noted here (no read of it): its locations are added by
 * gw_otlp_dict_resolve(), once the request's samples are all written.
 */
int64_t gw_otlp_dict_stack(struct gw_otlp_dict *d, const struct gw_stack *s, const char *jit_type)
{
	uint64_t h = hash_ptr(s);
	uint32_t slot;
	struct gw_otlp_dict_stack_entry *e;
	struct gw_otlp_dict_pending_entry *p;
	int r;

	r = gw_otlp_imap_prepare(&d->m_stacks);
	if (r < 0)
		return r;
	GW_OTLP_IMAP_FIND(&d->m_stacks, h, true, slot); /* hash_ptr() is a bijection */
	if (gw_otlp_imap_at(&d->m_stacks, slot))
		return gw_otlp_imap_at(&d->m_stacks, slot) - 1;
	r = gw_otlp_vec_grow((void **)&d->pending.v, &d->pending.cap, sizeof(*d->pending.v), d->stacks.n + 1);
	if (r < 0)
		return r;
	r = GW_OTLP_VEC_PUSH(d->stacks, e);
	if (r < 0)
		return r;
	*e = (struct gw_otlp_dict_stack_entry){ 0 };
	p = &d->pending.v[d->stacks.n - 1];
	*p = (struct gw_otlp_dict_pending_entry){ s, jit_type };
	d->pending.n = d->stacks.n;
	gw_otlp_imap_set(&d->m_stacks, slot, h, d->stacks.n - 1);
	return d->stacks.n - 1;
}

/* The stack whose locations hold position pos of stack_locs (stacks lie in order, none empty at pos). */
static uint32_t stack_at(const struct gw_otlp_dict *d, uint32_t pos)
{
	/* Stacks 1.. starting at or before pos: the last of them is stack `at` (stack 0 is none). */
	size_t at = SR_PARTITION_POINT(d->stacks.n ? d->stacks.n - 1 : 0, i, d->stacks.v[i + 1].first <= pos);

	return at > 0 ? (uint32_t)at : 1;
}

/*
 * Sorts keys[0..n) by their high 32 bits (a location's slot), keeping the
 * order of equal ones: least significant digit first, 11 bits a pass, as
 * many passes as the largest slot needs.
 */
#define RADIX_BITS 11
static void sort_by_slot(uint64_t *keys, uint64_t *tmp, uint32_t n, uint32_t max_slot)
{
	static const uint32_t mask = (1u << RADIX_BITS) - 1;
	uint32_t count[1u << RADIX_BITS];
	uint64_t *from = keys, *to = tmp;

	for (unsigned shift = 0; shift < 32 && (max_slot >> shift); shift += RADIX_BITS) {
		uint32_t sum = 0;

		memset(count, 0, sizeof(count));
		for (uint32_t i = 0; i < n; i++)
			count[(uint32_t)(from[i] >> (32 + shift)) & mask]++;
		for (uint32_t i = 0; i <= mask; i++) {
			uint32_t c = count[i];

			count[i] = sum;
			sum += c;
		}
		for (uint32_t i = 0; i < n; i++)
			to[count[(uint32_t)(from[i] >> (32 + shift)) & mask]++] = from[i];
		uint64_t *t = from;
		from = to;
		to = t;
	}
	if (from != keys)
		memcpy(keys, from, (size_t)n * sizeof(*keys));
}

/* How far ahead the stacks and locations are fetched: enough to cover a miss with the work of the ones before. */
#define AHEAD 8

int gw_otlp_dict_resolve(struct gw_otlp_dict *d)
{
	uint32_t n = 0, max_slot = 0;
	int r;

	/*
	 * Each stack's location slots, tagged with where they go in stack_locs:
	 * the stacks are read in order, each once, fetched ahead.
	 */
	for (uint32_t i = 1; i < d->stacks.n; i++) {
		const struct gw_stack *s = d->pending.v[i].s;

		if (i + AHEAD < d->stacks.n) {
			const char *ahead = (const char *)d->pending.v[i + AHEAD].s;

			__builtin_prefetch(ahead);
			__builtin_prefetch(ahead + 64);
			__builtin_prefetch(ahead + 128);
		}
		if ((uint64_t)n + s->n_locations > INT32_MAX)
			return -E2BIG;
		r = gw_otlp_vec_grow((void **)&d->keys.v, &d->keys.cap, sizeof(*d->keys.v), n + s->n_locations);
		if (r < 0)
			return r;
		d->stacks.v[i] = (struct gw_otlp_dict_stack_entry){ n, s->n_locations };
		const uint32_t *slots = gw_stack__slots(s);

		for (uint32_t j = 0; j < s->n_locations; j++, n++) {
			uint32_t slot = slots[j];

			max_slot |= slot;
			d->keys.v[n] = (uint64_t)slot << 32 | n;
		}
	}
	d->keys.n = n;
	if ((r = gw_otlp_vec_grow((void **)&d->keys_tmp.v, &d->keys_tmp.cap, sizeof(*d->keys_tmp.v), n)) < 0 ||
	    (r = gw_otlp_vec_grow((void **)&d->stack_locs.v, &d->stack_locs.cap, sizeof(*d->stack_locs.v), n)) < 0)
		return r;
	d->stack_locs.n = n;
	/*
	 * Then each location once, in the order of its slot: the location table
	 * is read forward, not at random as the stacks name its entries, and a
	 * location's index is found by the sort, not by a map of the request's
	 * locations (which outgrew the caches: a third of an encoding's time).
	 */
	sort_by_slot(d->keys.v, d->keys_tmp.v, n, max_slot);
	for (uint32_t a = 0, b; a < n; a = b) {
		uint32_t slot = (uint32_t)(d->keys.v[a] >> 32);
		const struct gw_location *l = gw_location__at(slot);
		const char *jit_type = NULL;
		int64_t li;

		for (b = a + 1; b < n && (uint32_t)(d->keys.v[b] >> 32) == slot; b++)
			;
		/*
		 * The location AHEAD places on, and the lines and their slot in the
		 * map of one fetched AHEAD / 2 places ago (its load a hit by now).
		 */
		if (b + AHEAD < n)
			__builtin_prefetch(gw_location__at((uint32_t)(d->keys.v[b + AHEAD] >> 32)));
		if (b + AHEAD / 2 < n) {
			const struct gw_lines *nl =
				gw_location__lines(gw_location__at((uint32_t)(d->keys.v[b + AHEAD / 2] >> 32)));

			if (nl) {
				__builtin_prefetch(nl);
				if (d->m_shared_lines.cap)
					__builtin_prefetch(&d->m_shared_lines.slots[(uint32_t)hash_ptr(nl) &
										    (d->m_shared_lines.cap - 1)]);
			}
		}
		/* The first stack naming a JIT frame says its runtime, as in the order the samples came. */
		if (gw_location__kind(l) == GW_FRAME_JIT)
			jit_type = d->pending.v[stack_at(d, (uint32_t)d->keys.v[a])].jit_type;
		li = dict_location(d, l, jit_type);
		if (li < 0)
			return (int)li;
		for (uint32_t c = a; c < b; c++)
			d->stack_locs.v[(uint32_t)d->keys.v[c]] = (int32_t)li;
	}
	return 0;
}

int gw_otlp_dict_init(struct gw_otlp_dict *d)
{
	struct gw_otlp_dict_string_entry *s;
	struct gw_otlp_dict_function_entry *f;
	struct gw_otlp_dict_mapping_entry *m;
	struct gw_otlp_dict_location_entry *l;
	struct gw_otlp_dict_stack_entry *st;
	struct gw_otlp_dict_attr_entry *a;

	/* Element 0 of every table: the zero value, so that index 0 means "unset". */
	if (GW_OTLP_VEC_PUSH(d->strings, s) < 0 || GW_OTLP_VEC_PUSH(d->functions, f) < 0 ||
	    GW_OTLP_VEC_PUSH(d->mappings, m) < 0 || GW_OTLP_VEC_PUSH(d->locations, l) < 0 ||
	    GW_OTLP_VEC_PUSH(d->stacks, st) < 0 || GW_OTLP_VEC_PUSH(d->attrs, a) < 0)
		return -ENOMEM;
	*s = (struct gw_otlp_dict_string_entry){ "", 0 };
	*f = (struct gw_otlp_dict_function_entry){ 0 };
	*m = (struct gw_otlp_dict_mapping_entry){ 0 };
	*l = (struct gw_otlp_dict_location_entry){ 0 };
	*st = (struct gw_otlp_dict_stack_entry){ 0 };
	memset(a, 0, sizeof(*a));
	return 0;
}

/*
 * The oneof of an AnyValue whose message is already begun. Attributes come
 * from the dictionary (strings by index) or straight from the model, so the
 * string is passed in; the other members are the same union either way.
 */
void gw_otlp_write_any_value_oneof(struct sr_pbw *w, enum gw_attr_type type, const char *str, size_t str_len, int64_t i,
				   bool bv, double dv)
{
	switch (type) {
	case GW_ATTR_STRING:
		/* A string value is always written, "" included: it says "string". */
		sr_pbw__bytes_always(w, SR_OTLP_C(AnyValue, string_value), str, str_len);
		break;
	case GW_ATTR_INT:
		sr_pbw__tag(w, SR_OTLP_C(AnyValue, int_value), SR_PB_VARINT);
		sr_pbw__varint(w, (uint64_t)i);
		break;
	case GW_ATTR_BOOL:
		sr_pbw__tag(w, SR_OTLP_C(AnyValue, bool_value), SR_PB_VARINT);
		sr_pbw__varint(w, bv);
		break;
	case GW_ATTR_DOUBLE: {
		uint64_t bits;

		/* Written even when 0.0: the member says "double". */
		memcpy(&bits, &dv, sizeof(bits));
		sr_pbw__tag(w, SR_OTLP_C(AnyValue, double_value), SR_PB_I64);
		sr_pbw__put_fixed64(w, bits);
		break;
	}
	}
}

static void write_any_value(struct sr_pbw *w, uint32_t field, const struct gw_otlp_dict *d,
			    const struct gw_otlp_dict_attr_entry *a)
{
	size_t m = sr_pbw__begin(w, field);
	const char *str = a->type == GW_ATTR_STRING ? d->strings.v[a->str].s : "";
	size_t str_len = a->type == GW_ATTR_STRING ? d->strings.v[a->str].len : 0;

	/* Only the member the type names is read: a bool read from an int's bytes is undefined. */
	gw_otlp_write_any_value_oneof(w, a->type, str, str_len, a->type == GW_ATTR_INT ? a->v.i : 0,
				      a->type == GW_ATTR_BOOL && a->v.b, a->type == GW_ATTR_DOUBLE ? a->v.d : 0);
	sr_pbw__end(w, m);
}

void gw_otlp_write_dictionary(struct sr_pbw *w, const struct gw_otlp_dict *d)
{
	size_t dm = sr_pbw__begin(w, SR_OTLP_REQ(dictionary));

	for (uint32_t i = 0; i < d->mappings.n; i++) {
		const struct gw_otlp_dict_mapping_entry *e = &d->mappings.v[i];
		size_t m = sr_pbw__begin(w, SR_OTLP_P(ProfilesDictionary, mapping_table));

		sr_pbw__int(w, SR_OTLP_P(Mapping, filename_strindex), e->filename);
		if (e->build_id_attr)
			sr_pbw__packed_i32(w, SR_OTLP_P(Mapping, attribute_indices), &e->build_id_attr, 1);
		sr_pbw__end(w, m);
	}
	for (uint32_t i = 0; i < d->locations.n; i++) {
		const struct gw_otlp_dict_location_entry *e = &d->locations.v[i];
		size_t m = sr_pbw__begin(w, SR_OTLP_P(ProfilesDictionary, location_table));

		sr_pbw__int(w, SR_OTLP_P(Location, mapping_index), e->mapping);
		sr_pbw__uint(w, SR_OTLP_P(Location, address), e->address);
		for (uint32_t j = 0; j < e->n_lines; j++) {
			const struct gw_otlp_dict_line_entry *l = &d->lines.v[e->first_line + j];
			size_t lm = sr_pbw__begin(w, SR_OTLP_P(Location, lines));

			sr_pbw__int(w, SR_OTLP_P(Line, function_index), l->function);
			sr_pbw__int(w, SR_OTLP_P(Line, line), l->line);
			sr_pbw__int(w, SR_OTLP_P(Line, column), l->column);
			sr_pbw__end(w, lm);
		}
		if (e->frame_type_attr)
			sr_pbw__packed_i32(w, SR_OTLP_P(Location, attribute_indices), &e->frame_type_attr, 1);
		sr_pbw__end(w, m);
	}
	for (uint32_t i = 0; i < d->functions.n; i++) {
		const struct gw_otlp_dict_function_entry *e = &d->functions.v[i];
		size_t m = sr_pbw__begin(w, SR_OTLP_P(ProfilesDictionary, function_table));

		sr_pbw__int(w, SR_OTLP_P(Function, name_strindex), e->name);
		sr_pbw__int(w, SR_OTLP_P(Function, system_name_strindex), e->system_name);
		sr_pbw__int(w, SR_OTLP_P(Function, filename_strindex), e->filename);
		sr_pbw__int(w, SR_OTLP_P(Function, start_line), e->start_line);
		sr_pbw__end(w, m);
	}
	/* link_table: only its zero element; we have no trace links. */
	sr_pbw__end(w, sr_pbw__begin(w, SR_OTLP_P(ProfilesDictionary, link_table)));
	for (uint32_t i = 0; i < d->strings.n; i++)
		sr_pbw__bytes_always(w, SR_OTLP_P(ProfilesDictionary, string_table), d->strings.v[i].s,
				     d->strings.v[i].len);
	for (uint32_t i = 0; i < d->attrs.n; i++) {
		const struct gw_otlp_dict_attr_entry *e = &d->attrs.v[i];
		size_t m = sr_pbw__begin(w, SR_OTLP_P(ProfilesDictionary, attribute_table));

		if (i > 0) {
			sr_pbw__int(w, SR_OTLP_P(KeyValueAndUnit, key_strindex), e->key);
			write_any_value(w, SR_OTLP_P(KeyValueAndUnit, value), d, e);
		}
		sr_pbw__end(w, m);
	}
	for (uint32_t i = 0; i < d->stacks.n; i++) {
		const struct gw_otlp_dict_stack_entry *e = &d->stacks.v[i];
		size_t m = sr_pbw__begin(w, SR_OTLP_P(ProfilesDictionary, stack_table));

		if (e->n)
			sr_pbw__packed_i32(w, SR_OTLP_P(Stack, location_indices), d->stack_locs.v + e->first, e->n);
		sr_pbw__end(w, m);
	}
	sr_pbw__end(w, dm);
}
