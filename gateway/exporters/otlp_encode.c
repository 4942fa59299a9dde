// SPDX-License-Identifier: Apache-2.0
/*
 * OTLP profiles requests written from the gateway's model (otlp_encode.h):
 * the dictionary and the profiles. Reading them back for 413 splits and
 * counts is otlp_split.c.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "core/model.h"
#include "macro.h"
#include "otlp_encode.h"
#include "pbwire.h"

#include "otlp_fields.h"

#define SCOPE_NAME	    "stackrelay"
#define KERNEL_MAPPING_NAME "[kernel.kallsyms]"

int gw_otlp_version_from_string(const char *s, enum gw_otlp_version *ret)
{
	if (!s)
		return -EINVAL;
	if (strcmp(s, "1.10") == 0 || strcmp(s, "1.10.0") == 0)
		*ret = GW_OTLP_V1_10;
	else if (strcmp(s, "1.9") == 0 || strcmp(s, "1.9.0") == 0)
		*ret = GW_OTLP_V1_9;
	else
		return -EINVAL;
	return 0;
}

const char *gw_otlp_version_to_string(enum gw_otlp_version v)
{
	return v == GW_OTLP_V1_9 ? "1.9" : "1.10";
}

/* ---- an index map: hash → dictionary index, equality decided by the caller ---- */

struct imap {
	uint64_t *hashes;
	uint32_t *slots; /* index + 1; 0 empty */
	uint32_t cap, n;
};

static void imap_free(struct imap *m)
{
	free(m->hashes);
	free(m->slots);
	*m = (struct imap){ 0 };
}

static int imap_grow(struct imap *m)
{
	uint32_t cap = m->cap ? m->cap * 2 : 256;
	uint64_t *h = calloc(cap, sizeof(*h));
	uint32_t *s = calloc(cap, sizeof(*s));

	if (!h || !s) {
		free(h);
		free(s);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < m->cap; i++) {
		uint32_t j;

		if (!m->slots[i])
			continue;
		for (j = (uint32_t)m->hashes[i] & (cap - 1); s[j]; j = (j + 1) & (cap - 1))
			;
		h[j] = m->hashes[i];
		s[j] = m->slots[i];
	}
	free(m->hashes);
	free(m->slots);
	m->hashes = h;
	m->slots = s;
	m->cap = cap;
	return 0;
}

/* Finds the slot for hash whose entry eq() accepts, or the empty slot where it belongs. */
#define IMAP_FIND(m, hash, eq_expr, ret_slot)                                                                          \
	do {                                                                                                           \
		uint32_t j_ = (uint32_t)(hash) & ((m)->cap - 1);                                                       \
		for (;; j_ = (j_ + 1) & ((m)->cap - 1)) {                                                              \
			if (!(m)->slots[j_])                                                                           \
				break;                                                                                 \
			if ((m)->hashes[j_] == (hash)) {                                                               \
				uint32_t idx = (m)->slots[j_] - 1;                                                     \
				if (eq_expr)                                                                           \
					break;                                                                         \
			}                                                                                              \
		}                                                                                                      \
		(ret_slot) = j_;                                                                                       \
	} while (0)

static int imap_prepare(struct imap *m)
{
	/* Keep the load under 1/2 so probes stay short. */
	if ((m->n + 1) * 2 > m->cap)
		return imap_grow(m);
	return 0;
}

static void imap_set(struct imap *m, uint32_t slot, uint64_t hash, uint32_t idx)
{
	m->hashes[slot] = hash;
	m->slots[slot] = idx + 1;
	m->n++;
}

/* ---- growable arrays ---- */

#define VEC(type)                                                                                                      \
	struct {                                                                                                       \
		type *v;                                                                                               \
		uint32_t n, cap;                                                                                       \
	}

static int vec_grow(void **v, uint32_t *cap, size_t elem, uint32_t need)
{
	uint32_t c = *cap ? *cap : 64;
	void *nv;

	if (need <= *cap)
		return 0;
	if (need > INT32_MAX)
		return -E2BIG;
	while (c < need)
		c = c > UINT32_MAX / 2 ? need : c * 2;
	nv = realloc(*v, (size_t)c * elem);
	if (!nv)
		return -ENOMEM;
	*v = nv;
	*cap = c;
	return 0;
}

#define VEC_PUSH(vec, ret)                                                                                             \
	({                                                                                                             \
		int r_ = vec_grow((void **)&(vec).v, &(vec).cap, sizeof(*(vec).v), (vec).n + 1);                       \
		if (r_ == 0)                                                                                           \
			(ret) = &(vec).v[(vec).n++];                                                                   \
		r_;                                                                                                    \
	})

/* ---- the dictionary ---- */

struct d_string {
	const char *s;
	uint32_t len;
};

struct d_function {
	int32_t name, system_name, filename;
	int64_t start_line;
};

struct d_mapping {
	const void *key; /* gw_executable* or gw_kernel* */
	int32_t filename;
	int32_t build_id_attr;
};

struct d_line {
	int32_t function;
	int64_t line, column;
};

struct d_location {
	const struct gw_location *key;
	int32_t mapping;
	int32_t frame_type_attr; /* profile.frame.type of interpreted and JIT frames; 0: none */
	uint64_t address;
	uint32_t first_line, n_lines;
};

struct d_stack {
	const struct gw_stack *key;
	uint32_t first, n;
};

struct d_attr {
	int32_t key;
	enum gw_attr_type type;
	int32_t str; /* GW_ATTR_STRING */
	union {
		int64_t i;
		bool b;
		double d;
	} v;
};

struct dict {
	VEC(struct d_string) strings;
	VEC(struct d_function) functions;
	VEC(struct d_mapping) mappings;
	VEC(struct d_line) lines;
	VEC(struct d_location) locations;
	VEC(int32_t) stack_locs;
	VEC(struct d_stack) stacks;
	VEC(struct d_attr) attrs;
	struct imap m_strings, m_functions, m_mappings, m_locations, m_stacks, m_attrs;
	/* Strings we formatted ourselves (hex build IDs, numbers), freed at the end. */
	VEC(char *) owned;
};

static void dict_free(struct dict *d)
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
	free(d->attrs.v);
	imap_free(&d->m_strings);
	imap_free(&d->m_functions);
	imap_free(&d->m_mappings);
	imap_free(&d->m_locations);
	imap_free(&d->m_stacks);
	imap_free(&d->m_attrs);
}

static uint64_t hash_ptr(const void *p)
{
	uint64_t x = (uint64_t)(uintptr_t)p;

	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	return x;
}

/* Returns the index of s (interned; s must outlive the encoding) or -errno. */
static int64_t dict_string(struct dict *d, const char *s)
{
	size_t len;
	uint64_t h;
	uint32_t slot;
	struct d_string *e;
	int r;

	if (!s || !*s)
		return 0;
	len = strlen(s);
	h = XXH3_64bits(s, len);
	r = imap_prepare(&d->m_strings);
	if (r < 0)
		return r;
	IMAP_FIND(&d->m_strings, h, d->strings.v[idx].len == len && memcmp(d->strings.v[idx].s, s, len) == 0, slot);
	if (d->m_strings.slots[slot])
		return d->m_strings.slots[slot] - 1;
	r = VEC_PUSH(d->strings, e);
	if (r < 0)
		return r;
	e->s = s;
	e->len = (uint32_t)len;
	imap_set(&d->m_strings, slot, h, d->strings.n - 1);
	return d->strings.n - 1;
}

/* For strings we make: kept until the dictionary is freed. */
static int64_t dict_string_owned(struct dict *d, char *s)
{
	char **slot;
	int64_t r;

	if (!s)
		return -ENOMEM;
	if (VEC_PUSH(d->owned, slot) < 0) {
		free(s);
		return -ENOMEM;
	}
	*slot = s;
	r = dict_string(d, s);
	return r;
}

static int64_t dict_function(struct dict *d, const struct gw_line *l)
{
	struct d_function f;
	int64_t name, sys, file;
	uint64_t h;
	uint32_t slot;
	struct d_function *e;
	int r;

	name = dict_string(d, l->function);
	sys = dict_string(d, l->system_name && *l->system_name ? l->system_name : l->function);
	file = dict_string(d, l->file);
	if (name < 0 || sys < 0 || file < 0)
		return -ENOMEM;
	f = (struct d_function){ (int32_t)name, (int32_t)sys, (int32_t)file, l->start_line };
	h = XXH3_64bits(&f, sizeof(f));
	r = imap_prepare(&d->m_functions);
	if (r < 0)
		return r;
	IMAP_FIND(&d->m_functions, h, memcmp(&d->functions.v[idx], &f, sizeof(f)) == 0, slot);
	if (d->m_functions.slots[slot])
		return d->m_functions.slots[slot] - 1;
	r = VEC_PUSH(d->functions, e);
	if (r < 0)
		return r;
	*e = f;
	imap_set(&d->m_functions, slot, h, d->functions.n - 1);
	return d->functions.n - 1;
}

static int64_t dict_attr(struct dict *d, const struct gw_attr *a)
{
	struct d_attr x;
	int64_t k, s = 0;
	uint64_t h;
	uint32_t slot;
	struct d_attr *e;
	int r;

	memset(&x, 0, sizeof(x)); /* padding too: the key is hashed as bytes */
	k = dict_string(d, a->key);
	if (k < 0)
		return k;
	x.key = (int32_t)k;
	x.type = a->type;
	switch (a->type) {
	case GW_ATTR_STRING:
		s = dict_string(d, a->v.s);
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
	r = imap_prepare(&d->m_attrs);
	if (r < 0)
		return r;
	IMAP_FIND(&d->m_attrs, h, memcmp(&d->attrs.v[idx], &x, sizeof(x)) == 0, slot);
	if (d->m_attrs.slots[slot])
		return d->m_attrs.slots[slot] - 1;
	r = VEC_PUSH(d->attrs, e);
	if (r < 0)
		return r;
	*e = x;
	imap_set(&d->m_attrs, slot, h, d->attrs.n - 1);
	return d->attrs.n - 1;
}

static char *hex_id(const struct gw_id *id)
{
	char *s = malloc(2 * GW_ID_MAX + 1);

	if (s)
		gw_id_to_hex(id, s, 2 * GW_ID_MAX + 1);
	return s;
}

static int64_t dict_mapping(struct dict *d, const void *key, const char *filename, const struct gw_id *build_id)
{
	uint64_t h = hash_ptr(key);
	uint32_t slot;
	struct d_mapping *e;
	int64_t fn, attr = 0;
	int r;

	r = imap_prepare(&d->m_mappings);
	if (r < 0)
		return r;
	IMAP_FIND(&d->m_mappings, h, d->mappings.v[idx].key == key, slot);
	if (d->m_mappings.slots[slot])
		return d->m_mappings.slots[slot] - 1;
	fn = dict_string(d, filename);
	if (fn < 0)
		return fn;
	if (build_id && build_id->len > 0) {
		struct gw_attr a = { .key = "process.executable.build_id.gnu", .type = GW_ATTR_STRING };
		char *hex = hex_id(build_id);
		int64_t hs = dict_string_owned(d, hex);

		if (hs < 0)
			return hs;
		a.v.s = d->strings.v[hs].s;
		attr = dict_attr(d, &a);
		if (attr < 0)
			return attr;
	}
	r = VEC_PUSH(d->mappings, e);
	if (r < 0)
		return r;
	e->key = key;
	e->filename = (int32_t)fn;
	e->build_id_attr = (int32_t)attr;
	imap_set(&d->m_mappings, slot, h, d->mappings.n - 1);
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
	if (l->kind == GW_FRAME_JIT && jit_type)
		return jit_type;
	return l->function->runtime[0] ? l->function->runtime : "unknown";
}

/* The JIT runtime a resource's process runs, from its executable's name (NULL: not known). */
static const char *jit_frame_type(const struct gw_resource *r)
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

static int64_t dict_location(struct dict *d, const struct gw_location *l, const char *jit_type)
{
	uint64_t h = hash_ptr(l);
	uint32_t slot;
	struct d_location loc, *e;
	const struct gw_lines *lines;
	int64_t m = 0;
	int r;

	r = imap_prepare(&d->m_locations);
	if (r < 0)
		return r;
	/* Found by pointer: a location already in the dictionary is not read (a cache miss saved). */
	IMAP_FIND(&d->m_locations, h, d->locations.v[idx].key == l, slot);
	if (d->m_locations.slots[slot])
		return d->m_locations.slots[slot] - 1;
	loc = (struct d_location){ .key = l, .address = l->address };

	if (l->kind == GW_FRAME_USER && l->exe) {
		const char *name = l->exe->path && *l->exe->path ? l->exe->path : l->exe->file_name;

		m = dict_mapping(d, l->exe, name, &l->exe->gnu_build_id);
	} else if (l->kind == GW_FRAME_KERNEL && l->kernel) {
		m = dict_mapping(d, l->kernel, KERNEL_MAPPING_NAME, &l->kernel->build_id);
	}
	if (m < 0)
		return m;
	loc.mapping = (int32_t)m;
	if (gw_frame_kind_has_function(l->kind) && l->function) {
		struct gw_attr a = { .key = "profile.frame.type",
				     .type = GW_ATTR_STRING,
				     .v.s = frame_type(l, jit_type) };
		int64_t ai = dict_attr(d, &a);

		if (ai < 0)
			return ai;
		loc.frame_type_attr = (int32_t)ai;
	}
	lines = gw_location__lines(l);
	loc.first_line = d->lines.n;
	for (uint32_t i = 0; lines && i < lines->n; i++) {
		int64_t f = dict_function(d, &lines->lines[i]);
		struct d_line *dl;

		if (f < 0)
			return f;
		r = VEC_PUSH(d->lines, dl);
		if (r < 0)
			return r;
		*dl = (struct d_line){ (int32_t)f, lines->lines[i].line, lines->lines[i].column };
		loc.n_lines++;
	}
	r = VEC_PUSH(d->locations, e);
	if (r < 0)
		return r;
	*e = loc;
	imap_set(&d->m_locations, slot, h, d->locations.n - 1);
	return d->locations.n - 1;
}

static int64_t dict_stack(struct dict *d, const struct gw_stack *s, const char *jit_type)
{
	uint64_t h = hash_ptr(s);
	uint32_t slot;
	struct d_stack *e;
	uint32_t first;
	int r;

	r = imap_prepare(&d->m_stacks);
	if (r < 0)
		return r;
	IMAP_FIND(&d->m_stacks, h, d->stacks.v[idx].key == s, slot);
	if (d->m_stacks.slots[slot])
		return d->m_stacks.slots[slot] - 1;
	r = vec_grow((void **)&d->stack_locs.v, &d->stack_locs.cap, sizeof(int32_t), d->stack_locs.n + s->n_locations);
	if (r < 0)
		return r;
	first = d->stack_locs.n;
	for (uint32_t i = 0; i < s->n_locations; i++) {
		int64_t li;

		/* Locations are scattered over the store: start the next loads early. */
		if (i + 2 < s->n_locations)
			__builtin_prefetch(s->locations[i + 2]);
		li = dict_location(d, s->locations[i], jit_type);

		if (li < 0)
			return li;
		d->stack_locs.v[d->stack_locs.n++] = (int32_t)li;
	}
	r = VEC_PUSH(d->stacks, e);
	if (r < 0)
		return r;
	*e = (struct d_stack){ s, first, s->n_locations };
	imap_set(&d->m_stacks, slot, h, d->stacks.n - 1);
	return d->stacks.n - 1;
}

static int dict_init(struct dict *d)
{
	struct d_string *s;
	struct d_function *f;
	struct d_mapping *m;
	struct d_location *l;
	struct d_stack *st;
	struct d_attr *a;

	/* Element 0 of every table: the zero value, so that index 0 means "unset". */
	if (VEC_PUSH(d->strings, s) < 0 || VEC_PUSH(d->functions, f) < 0 || VEC_PUSH(d->mappings, m) < 0 ||
	    VEC_PUSH(d->locations, l) < 0 || VEC_PUSH(d->stacks, st) < 0 || VEC_PUSH(d->attrs, a) < 0)
		return -ENOMEM;
	*s = (struct d_string){ "", 0 };
	*f = (struct d_function){ 0 };
	*m = (struct d_mapping){ 0 };
	*l = (struct d_location){ 0 };
	*st = (struct d_stack){ 0 };
	memset(a, 0, sizeof(*a));
	return 0;
}

/*
 * The oneof of an AnyValue whose message is already begun. Attributes come
 * from the dictionary (strings by index) or straight from the model, so the
 * string is passed in; the other members are the same union either way.
 */
static void write_any_value_oneof(struct sr_pbw *w, enum gw_attr_type type, const char *str, size_t str_len, int64_t i,
				  bool bv, double dv)
{
	switch (type) {
	case GW_ATTR_STRING:
		/* A string value is always written, "" included: it says "string". */
		sr_pbw__bytes_always(w, C(AnyValue, string_value), str, str_len);
		break;
	case GW_ATTR_INT:
		sr_pbw__tag(w, C(AnyValue, int_value), SR_PB_VARINT);
		sr_pbw__varint(w, (uint64_t)i);
		break;
	case GW_ATTR_BOOL:
		sr_pbw__tag(w, C(AnyValue, bool_value), SR_PB_VARINT);
		sr_pbw__varint(w, bv);
		break;
	case GW_ATTR_DOUBLE: {
		uint64_t bits;

		/* Written even when 0.0: the member says "double". */
		memcpy(&bits, &dv, sizeof(bits));
		sr_pbw__tag(w, C(AnyValue, double_value), SR_PB_I64);
		sr_pbw__put_fixed64(w, bits);
		break;
	}
	}
}

static void write_any_value(struct sr_pbw *w, uint32_t field, const struct dict *d, const struct d_attr *a)
{
	size_t m = sr_pbw__begin(w, field);
	const char *str = a->type == GW_ATTR_STRING ? d->strings.v[a->str].s : "";
	size_t str_len = a->type == GW_ATTR_STRING ? d->strings.v[a->str].len : 0;

	/* Only the member the type names is read: a bool read from an int's bytes is undefined. */
	write_any_value_oneof(w, a->type, str, str_len, a->type == GW_ATTR_INT ? a->v.i : 0,
			      a->type == GW_ATTR_BOOL && a->v.b, a->type == GW_ATTR_DOUBLE ? a->v.d : 0);
	sr_pbw__end(w, m);
}

static void write_dictionary(struct sr_pbw *w, const struct dict *d)
{
	size_t dm = sr_pbw__begin(w, REQ(dictionary));

	for (uint32_t i = 0; i < d->mappings.n; i++) {
		const struct d_mapping *e = &d->mappings.v[i];
		size_t m = sr_pbw__begin(w, P(ProfilesDictionary, mapping_table));

		sr_pbw__int(w, P(Mapping, filename_strindex), e->filename);
		if (e->build_id_attr)
			sr_pbw__packed_i32(w, P(Mapping, attribute_indices), &e->build_id_attr, 1);
		sr_pbw__end(w, m);
	}
	for (uint32_t i = 0; i < d->locations.n; i++) {
		const struct d_location *e = &d->locations.v[i];
		size_t m = sr_pbw__begin(w, P(ProfilesDictionary, location_table));

		sr_pbw__int(w, P(Location, mapping_index), e->mapping);
		sr_pbw__uint(w, P(Location, address), e->address);
		for (uint32_t j = 0; j < e->n_lines; j++) {
			const struct d_line *l = &d->lines.v[e->first_line + j];
			size_t lm = sr_pbw__begin(w, P(Location, lines));

			sr_pbw__int(w, P(Line, function_index), l->function);
			sr_pbw__int(w, P(Line, line), l->line);
			sr_pbw__int(w, P(Line, column), l->column);
			sr_pbw__end(w, lm);
		}
		if (e->frame_type_attr)
			sr_pbw__packed_i32(w, P(Location, attribute_indices), &e->frame_type_attr, 1);
		sr_pbw__end(w, m);
	}
	for (uint32_t i = 0; i < d->functions.n; i++) {
		const struct d_function *e = &d->functions.v[i];
		size_t m = sr_pbw__begin(w, P(ProfilesDictionary, function_table));

		sr_pbw__int(w, P(Function, name_strindex), e->name);
		sr_pbw__int(w, P(Function, system_name_strindex), e->system_name);
		sr_pbw__int(w, P(Function, filename_strindex), e->filename);
		sr_pbw__int(w, P(Function, start_line), e->start_line);
		sr_pbw__end(w, m);
	}
	/* link_table: only its zero element; we have no trace links. */
	sr_pbw__end(w, sr_pbw__begin(w, P(ProfilesDictionary, link_table)));
	for (uint32_t i = 0; i < d->strings.n; i++)
		sr_pbw__bytes_always(w, P(ProfilesDictionary, string_table), d->strings.v[i].s, d->strings.v[i].len);
	for (uint32_t i = 0; i < d->attrs.n; i++) {
		const struct d_attr *e = &d->attrs.v[i];
		size_t m = sr_pbw__begin(w, P(ProfilesDictionary, attribute_table));

		if (i > 0) {
			sr_pbw__int(w, P(KeyValueAndUnit, key_strindex), e->key);
			write_any_value(w, P(KeyValueAndUnit, value), d, e);
		}
		sr_pbw__end(w, m);
	}
	for (uint32_t i = 0; i < d->stacks.n; i++) {
		const struct d_stack *e = &d->stacks.v[i];
		size_t m = sr_pbw__begin(w, P(ProfilesDictionary, stack_table));

		if (e->n)
			sr_pbw__packed_i32(w, P(Stack, location_indices), d->stack_locs.v + e->first, e->n);
		sr_pbw__end(w, m);
	}
	sr_pbw__end(w, dm);
}

/* ---- profiles ---- */

struct pending_sample {
	int32_t stack;
	uint32_t first_attr, n_attrs; /* into enc.sample_attrs */
	uint64_t count;
	uint64_t off_cpu_ns; /* GW_PROFILE_OFF_CPU: the value exported */
};

struct enc {
	const struct gw_otlp_options *o;
	struct dict d;
	struct sr_pbw *w;
	VEC(struct pending_sample) samples;
	VEC(int32_t) sample_attrs;
	VEC(uint32_t) order; /* sample indices of a resource, grouped by pid */
	struct imap merge;   /* stack index → pending sample, per profile */
	struct gw_otlp_stats st;
	int32_t str_samples, str_count, str_cpu, str_nanoseconds;
};

static void write_key_value(struct sr_pbw *w, uint32_t field, const struct gw_attr *a)
{
	size_t m = sr_pbw__begin(w, field), vm;
	const char *str = a->type == GW_ATTR_STRING && a->v.s ? a->v.s : "";

	sr_pbw__string(w, C(KeyValue, key), a->key);
	vm = sr_pbw__begin(w, C(KeyValue, value));
	write_any_value_oneof(w, a->type, str, strlen(str), a->type == GW_ATTR_INT ? a->v.i : 0,
			      a->type == GW_ATTR_BOOL && a->v.b, a->type == GW_ATTR_DOUBLE ? a->v.d : 0);
	sr_pbw__end(w, vm);
	sr_pbw__end(w, m);
}

static int sample_attr(struct enc *e, const struct gw_attr *a)
{
	int64_t idx = dict_attr(&e->d, a);
	int32_t *slot;

	if (idx < 0)
		return (int)idx;
	if (VEC_PUSH(e->sample_attrs, slot) < 0)
		return -ENOMEM;
	*slot = (int32_t)idx;
	return 0;
}

static void write_value_type(struct sr_pbw *w, uint32_t field, int32_t type, int32_t unit)
{
	size_t m = sr_pbw__begin(w, field);

	sr_pbw__int(w, P(ValueType, type_strindex), type);
	sr_pbw__int(w, P(ValueType, unit_strindex), unit);
	sr_pbw__end(w, m);
}

/* Writes one ResourceProfiles for r's samples order[from..to). pid_attr: with process.pid on the resource. */
static int encode_resource(struct enc *e, const struct gw_resource *r, uint32_t from, uint32_t to, bool pid_attr)
{
	struct sr_pbw *w = e->w;
	const struct gw_otlp_options *o = e->o;
	bool v19 = o->version == GW_OTLP_V1_9;
	uint64_t t_min = UINT64_MAX, t_max = 0;
	bool merge = o->process_attrs == GW_OTLP_PROCESS_ATTRS_NONE;
	bool off_cpu = r->profile_type == GW_PROFILE_OFF_CPU;
	const char *jit_type = jit_frame_type(r);
	size_t rm, resm, sm, pm, scm;
	int ret;

	e->samples.n = 0;
	e->sample_attrs.n = 0;
	if (merge) {
		free(e->merge.hashes);
		free(e->merge.slots);
		e->merge = (struct imap){ 0 };
	}
	for (uint32_t k = from; k < to; k++) {
		const struct gw_sample *s = &r->samples[e->order.v[k]];
		int64_t stack = dict_stack(&e->d, s->stack, jit_type);
		struct pending_sample *ps;
		bool has_attrs = s->n_attrs > 0;

		if (stack < 0)
			return (int)stack;
		t_min = SR_MIN(t_min, s->start_ns);
		t_max = SR_MAX(t_max, s->end_ns);
		if (merge && !has_attrs) {
			uint64_t h = (uint64_t)stack * 0x9E3779B97F4A7C15ULL;
			uint32_t slot;

			ret = imap_prepare(&e->merge);
			if (ret < 0)
				return ret;
			IMAP_FIND(&e->merge, h, e->samples.v[idx].stack == stack && e->samples.v[idx].n_attrs == 0,
				  slot);
			if (e->merge.slots[slot]) {
				e->samples.v[e->merge.slots[slot] - 1].count += s->count;
				e->samples.v[e->merge.slots[slot] - 1].off_cpu_ns += s->off_cpu_ns;
				continue;
			}
			ret = VEC_PUSH(e->samples, ps);
			if (ret < 0)
				return ret;
			imap_set(&e->merge, slot, h, e->samples.n - 1);
		} else {
			ret = VEC_PUSH(e->samples, ps);
			if (ret < 0)
				return ret;
		}
		*ps = (struct pending_sample){ .stack = (int32_t)stack,
					       .first_attr = e->sample_attrs.n,
					       .count = s->count,
					       .off_cpu_ns = s->off_cpu_ns };
		if (o->process_attrs == GW_OTLP_PROCESS_ATTRS_SAMPLE) {
			struct gw_attr a = { .key = "process.pid", .type = GW_ATTR_INT, .v.i = s->pid };

			ret = sample_attr(e, &a);
			if (ret < 0)
				return ret;
		}
		if (o->process_attrs != GW_OTLP_PROCESS_ATTRS_NONE) {
			struct gw_attr a = { .key = "thread.id", .type = GW_ATTR_INT, .v.i = s->tid };

			ret = sample_attr(e, &a);
			if (ret == 0 && s->thread_name && *s->thread_name) {
				a = (struct gw_attr){ .key = "thread.name",
						      .type = GW_ATTR_STRING,
						      .v.s = s->thread_name };
				ret = sample_attr(e, &a);
			}
			if (ret < 0)
				return ret;
		}
		for (uint32_t i = 0; i < s->n_attrs; i++) {
			ret = sample_attr(e, &s->attrs[i]);
			if (ret < 0)
				return ret;
		}
		/* e->samples may have moved: re-find ps. */
		ps = &e->samples.v[e->samples.n - 1];
		ps->n_attrs = e->sample_attrs.n - ps->first_attr;
	}
	if (e->samples.n == 0)
		return 0;

	rm = sr_pbw__begin(w, REQ(resource_profiles));
	resm = sr_pbw__begin(w, P(ResourceProfiles, resource));
	for (uint32_t i = 0; i < r->n_attrs; i++)
		write_key_value(w, RES(attributes), &r->attrs[i]);
	if (pid_attr) {
		struct gw_attr a = { .key = "process.pid",
				     .type = GW_ATTR_INT,
				     .v.i = r->samples[e->order.v[from]].pid };

		write_key_value(w, RES(attributes), &a);
	}
	sr_pbw__end(w, resm);
	sm = sr_pbw__begin(w, P(ResourceProfiles, scope_profiles));
	scm = sr_pbw__begin(w, P(ScopeProfiles, scope));
	sr_pbw__string(w, C(InstrumentationScope, name), SCOPE_NAME);
	sr_pbw__string(w, C(InstrumentationScope, version), o->scope_version);
	sr_pbw__end(w, scm);
	pm = sr_pbw__begin(w, P(ScopeProfiles, profiles));
	/*
	 * Off-CPU: one value, nanoseconds, and no period: Pyroscope's OTLP
	 * conversion names exactly that shape (off_cpu/nanoseconds, no period
	 * type) its off_cpu profile type; see docs/exporters.md.
	 */
	if (off_cpu) {
		int64_t t = dict_string(&e->d, "off_cpu");

		if (t < 0)
			return (int)t;
		write_value_type(w, P(Profile, sample_type), (int32_t)t, e->str_nanoseconds);
	} else {
		write_value_type(w, P(Profile, sample_type), e->str_samples, e->str_count);
	}
	for (uint32_t i = 0; i < e->samples.n; i++) {
		const struct pending_sample *ps = &e->samples.v[i];
		size_t m = sr_pbw__begin(w, P(Profile, samples));
		uint64_t value = off_cpu ? ps->off_cpu_ns : ps->count;
		size_t vm;

		sr_pbw__int(w, v19 ? S9(stack_index) : S10(stack_index), ps->stack);
		if (v19) {
			vm = sr_pbw__begin(w, S9(values));
			sr_pbw__varint(w, value);
			sr_pbw__end(w, vm);
			if (ps->n_attrs)
				sr_pbw__packed_i32(w, S9(attribute_indices), e->sample_attrs.v + ps->first_attr,
						   ps->n_attrs);
		} else {
			if (ps->n_attrs)
				sr_pbw__packed_i32(w, S10(attribute_indices), e->sample_attrs.v + ps->first_attr,
						   ps->n_attrs);
			vm = sr_pbw__begin(w, S10(values));
			sr_pbw__varint(w, value);
			sr_pbw__end(w, vm);
		}
		sr_pbw__end(w, m);
		e->st.samples++;
		e->st.total_count += ps->count;
	}
	sr_pbw__fixed64(w, P(Profile, time_unix_nano), t_min);
	sr_pbw__uint(w, P(Profile, duration_nano), t_max > t_min ? t_max - t_min : 0);
	if (!off_cpu) {
		write_value_type(w, P(Profile, period_type), e->str_cpu, e->str_nanoseconds);
		sr_pbw__int(w, P(Profile, period), r->frequency_hz ? (int64_t)(1000000000ULL / r->frequency_hz) : 0);
	}
	sr_pbw__end(w, pm);
	sr_pbw__end(w, sm);
	sr_pbw__end(w, rm);
	e->st.profiles++;
	return sr_pbw__error(w);
}

static int by_pid(const void *a, const void *b, void *userdata)
{
	const struct gw_resource *res = userdata;
	uint32_t pa = res->samples[*(const uint32_t *)a].pid;
	uint32_t pb = res->samples[*(const uint32_t *)b].pid;

	if (pa != pb)
		return pa < pb ? -1 : 1;
	return *(const uint32_t *)a < *(const uint32_t *)b ? -1 : 1;
}

int gw_otlp_encode(const struct gw_profiles *p, const struct gw_otlp_options *opts, struct sr_pbw *out,
		   struct gw_otlp_stats *ret_stats)
{
	struct enc e = { .o = opts, .w = out };
	int64_t s[4];
	int r;

	r = dict_init(&e.d);
	if (r < 0)
		goto out;
	s[0] = dict_string(&e.d, "samples");
	s[1] = dict_string(&e.d, "count");
	s[2] = dict_string(&e.d, "cpu");
	s[3] = dict_string(&e.d, "nanoseconds");
	if (s[0] < 0 || s[1] < 0 || s[2] < 0 || s[3] < 0) {
		r = -ENOMEM;
		goto out;
	}
	e.str_samples = (int32_t)s[0];
	e.str_count = (int32_t)s[1];
	e.str_cpu = (int32_t)s[2];
	e.str_nanoseconds = (int32_t)s[3];

	for (uint32_t ri = 0; ri < p->n_resources; ri++) {
		const struct gw_resource *res = &p->resources[ri];

		r = vec_grow((void **)&e.order.v, &e.order.cap, sizeof(uint32_t), res->n_samples);
		if (r < 0)
			goto out;
		e.order.n = res->n_samples;
		for (uint32_t i = 0; i < res->n_samples; i++)
			e.order.v[i] = i;
		if (opts->process_attrs != GW_OTLP_PROCESS_ATTRS_RESOURCE) {
			r = encode_resource(&e, res, 0, res->n_samples, false);
			if (r < 0)
				goto out;
			continue;
		}
		/* One ResourceProfiles per pid. */
		qsort_r(e.order.v, e.order.n, sizeof(uint32_t), by_pid, (void *)res);
		for (uint32_t from = 0, to; from < e.order.n; from = to) {
			uint32_t pid = res->samples[e.order.v[from]].pid;

			for (to = from + 1; to < e.order.n && res->samples[e.order.v[to]].pid == pid; to++)
				;
			r = encode_resource(&e, res, from, to, true);
			if (r < 0)
				goto out;
		}
	}
	write_dictionary(out, &e.d);
	r = sr_pbw__error(out);
	if (r < 0)
		goto out;
	e.st.strings = e.d.strings.n;
	e.st.functions = e.d.functions.n;
	e.st.mappings = e.d.mappings.n;
	e.st.locations = e.d.locations.n;
	e.st.stacks = e.d.stacks.n;
	e.st.attributes = e.d.attrs.n;
	if (ret_stats)
		*ret_stats = e.st;
out:
	dict_free(&e.d);
	free(e.samples.v);
	free(e.sample_attrs.v);
	free(e.order.v);
	imap_free(&e.merge);
	return r;
}
