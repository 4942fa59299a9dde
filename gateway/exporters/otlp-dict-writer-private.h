/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The ProfilesDictionary of one OTLP request being written (otlp-dict-writer.c), and
 * the index maps and growable arrays the encoder shares with it. Private to
 * the exporters (otlp-encode.c).
 */
#ifndef SR_GW_OTLP_DICT_WRITER_PRIVATE_H
#define SR_GW_OTLP_DICT_WRITER_PRIVATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "core/model.h"
#include "common/pbwire.h"

/* ---- an index map: hash → dictionary index, equality decided by the caller ---- */

/*
 * A slot keeps its hash beside its index: a probe reads one cache line, and
 * a map keyed by pointer (whose hash, hash_ptr(), is a bijection) needs no
 * other read to know it found its key. Maps of a big request's locations
 * outgrow the caches, so that is one miss a lookup instead of three.
 */
struct gw_otlp_imap_slot {
	uint64_t hash;
	uint32_t idx1; /* index + 1; 0 empty */
};

struct gw_otlp_imap {
	struct gw_otlp_imap_slot *slots;
	uint32_t cap, n;
};

static inline int gw_otlp_imap_grow(struct gw_otlp_imap *m)
{
	uint32_t cap = m->cap ? m->cap * 2 : 256;
	struct gw_otlp_imap_slot *s = calloc(cap, sizeof(*s));

	if (!s)
		return -ENOMEM;
	for (uint32_t i = 0; i < m->cap; i++) {
		uint32_t j;

		if (!m->slots[i].idx1)
			continue;
		for (j = (uint32_t)m->slots[i].hash & (cap - 1); s[j].idx1; j = (j + 1) & (cap - 1))
			;
		s[j] = m->slots[i];
	}
	free(m->slots);
	m->slots = s;
	m->cap = cap;
	return 0;
}

static inline void gw_otlp_imap_free(struct gw_otlp_imap *m)
{
	free(m->slots);
	*m = (struct gw_otlp_imap){ 0 };
}

/* Empties m for another use, keeping its slots unless its last use filled under an eighth of them. */
static inline void gw_otlp_imap_reset(struct gw_otlp_imap *m)
{
	if (m->cap > 4096 && (size_t)m->n * 8 < m->cap) {
		gw_otlp_imap_free(m);
		return;
	}
	if (m->slots)
		memset(m->slots, 0, (size_t)m->cap * sizeof(*m->slots));
	m->n = 0;
}

/* Finds the slot for hash whose entry eq() accepts (idx: the entry's index), or the empty slot where it belongs. */
#define GW_OTLP_IMAP_FIND(m, hash_, eq_expr, ret_slot)                                                                 \
	do {                                                                                                           \
		uint32_t j_ = (uint32_t)(hash_) & ((m)->cap - 1);                                                      \
		for (;; j_ = (j_ + 1) & ((m)->cap - 1)) {                                                              \
			if (!(m)->slots[j_].idx1)                                                                      \
				break;                                                                                 \
			if ((m)->slots[j_].hash == (hash_)) {                                                          \
				uint32_t idx = (m)->slots[j_].idx1 - 1;                                                \
				(void)idx;                                                                             \
				if (eq_expr)                                                                           \
					break;                                                                         \
			}                                                                                              \
		}                                                                                                      \
		(ret_slot) = j_;                                                                                       \
	} while (0)

/* The index + 1 of the entry in slot (from GW_OTLP_IMAP_FIND), 0 when the slot is empty. */
static inline uint32_t gw_otlp_imap_at(const struct gw_otlp_imap *m, uint32_t slot)
{
	return m->slots[slot].idx1;
}

static inline int gw_otlp_imap_prepare(struct gw_otlp_imap *m)
{
	/* Keep the load under 1/2 so probes stay short. */
	if ((m->n + 1) * 2 > m->cap)
		return gw_otlp_imap_grow(m);
	return 0;
}

static inline void gw_otlp_imap_set(struct gw_otlp_imap *m, uint32_t slot, uint64_t hash, uint32_t idx)
{
	m->slots[slot] = (struct gw_otlp_imap_slot){ hash, idx + 1 };
	m->n++;
}

/* ---- growable arrays ---- */

#define GW_OTLP_VEC(type)                                                                                              \
	struct {                                                                                                       \
		type *v;                                                                                               \
		uint32_t n, cap;                                                                                       \
	}

/* OTLP indexes are int32: a table never holds more. */
static inline int gw_otlp_vec_grow(void **v, uint32_t *cap, size_t elem, uint32_t need)
{
	if (need > INT32_MAX)
		return -E2BIG;
	return sr_grow_u32(v, cap, need, elem, 64);
}

#define GW_OTLP_VEC_PUSH(vec, ret)                                                                                     \
	({                                                                                                             \
		int r_ = gw_otlp_vec_grow((void **)&(vec).v, &(vec).cap, sizeof(*(vec).v), (vec).n + 1);               \
		/* Set on failure too (NULL): the compiler then knows it is set after every push. */                   \
		(ret) = r_ == 0 ? &(vec).v[(vec).n++] : NULL;                                                          \
		r_;                                                                                                    \
	})

/* ---- the dictionary ---- */

struct gw_otlp_dict_string_entry {
	const char *s;
	uint32_t len;
};

struct gw_otlp_dict_function_entry {
	int32_t name, system_name, filename;
	int64_t start_line;
};

/* Mappings, locations and stacks are found by pointer (their maps' hash is the key: otlp-dict-writer.c, hash_ptr()). */
struct gw_otlp_dict_mapping_entry {
	int32_t filename;
	int32_t build_id_attr;
};

struct gw_otlp_dict_line_entry {
	int32_t function;
	int64_t line, column;
};

struct gw_otlp_dict_location_entry {
	int32_t mapping;
	int32_t frame_type_attr; /* profile.frame.type of interpreted and JIT frames; 0: none */
	uint64_t address;
	uint32_t first_line, n_lines;
};

struct gw_otlp_dict_stack_entry {
	uint32_t first, n;
};

/* A stack noted by gw_otlp_dict_stack(), its locations added by gw_otlp_dict_resolve(). */
struct gw_otlp_dict_pending_entry {
	const struct gw_stack *s;
	const char *jit_type;
};

struct gw_otlp_dict_attr_entry {
	int32_t key;
	enum gw_attr_type type;
	int32_t str; /* GW_ATTR_STRING */
	union {
		int64_t i;
		bool b;
		double d;
	} v;
};

struct gw_otlp_dict {
	GW_OTLP_VEC(struct gw_otlp_dict_string_entry) strings;
	GW_OTLP_VEC(struct gw_otlp_dict_function_entry) functions;
	GW_OTLP_VEC(struct gw_otlp_dict_mapping_entry) mappings;
	GW_OTLP_VEC(struct gw_otlp_dict_line_entry) lines;
	GW_OTLP_VEC(struct gw_otlp_dict_location_entry) locations;
	GW_OTLP_VEC(int32_t) stack_locs;
	GW_OTLP_VEC(struct gw_otlp_dict_stack_entry) stacks;
	GW_OTLP_VEC(struct gw_otlp_dict_pending_entry) pending; /* beside stacks, index for index */
	/* gw_otlp_dict_resolve()'s scratch: a location's slot << 32 | its place in stack_locs. */
	GW_OTLP_VEC(uint64_t) keys;
	GW_OTLP_VEC(uint64_t) keys_tmp;
	GW_OTLP_VEC(struct gw_otlp_dict_attr_entry) attrs;
	/*
	 * Functions are found by name first: fn_by_name[name's string index] is
	 * the index + 1 of the first function added with that name (0: none),
	 * and m_functions holds only the others (same name, other file, start
	 * line or system name). Most names have one function, so most lookups
	 * read a small dense array instead of probing a map the size of the
	 * request's functions, which outgrows the caches.
	 */
	GW_OTLP_VEC(uint32_t) fn_by_name;
	struct gw_otlp_imap m_strings, m_functions, m_mappings, m_stacks, m_attrs;
	/* Shared lines (core/lines.c) already in `lines`: the map's index is where they start. */
	struct gw_otlp_imap m_shared_lines;
	/* Strings we formatted ourselves (hex build IDs, numbers), freed at the end. */
	GW_OTLP_VEC(char *) owned;
};

/* Element 0 of every table is the zero value. 0 or -ENOMEM. d is zeroed or reset. */
int gw_otlp_dict_init(struct gw_otlp_dict *d);
void gw_otlp_dict_free(struct gw_otlp_dict *d);
/* Empties d for the next request, keeping its memory (gw_otlp_dict_init() again before use). */
void gw_otlp_dict_reset(struct gw_otlp_dict *d);
/* The bytes d has allocated (capacities, not use). */
size_t gw_otlp_dict_bytes(const struct gw_otlp_dict *d);
/* Each returns the index of its entry (added when new) or -errno; s, a and st must outlive the encoding. */
int64_t gw_otlp_dict_string(struct gw_otlp_dict *d, const char *s);
int64_t gw_otlp_dict_attr(struct gw_otlp_dict *d, const struct gw_attr *a);
int64_t gw_otlp_dict_stack(struct gw_otlp_dict *d, const struct gw_stack *st, const char *jit_type);
/*
 * Adds the locations of the stacks noted (and their mappings, lines,
 * functions and strings): once, after the last gw_otlp_dict_stack(),
 * before gw_otlp_write_dictionary(). 0 or -errno.
 */
int gw_otlp_dict_resolve(struct gw_otlp_dict *d);
/* The profile.frame.type of a resource's JIT frames (from its perf-map runtime), or NULL. */
const char *gw_otlp_jit_frame_type(const struct gw_resource *r);
/* An AnyValue's oneof, its message already begun. */
void gw_otlp_write_any_value_oneof(struct sr_pbw *w, enum gw_attr_type type, const char *str, size_t str_len, int64_t i,
				   bool bv, double dv);
/* The request's dictionary field (its stacks resolved: gw_otlp_dict_resolve()). */
void gw_otlp_write_dictionary(struct sr_pbw *w, const struct gw_otlp_dict *d);

#endif
