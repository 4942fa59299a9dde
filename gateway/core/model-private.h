/* SPDX-License-Identifier: Apache-2.0 */
/* Shared between model.c and the stores (model-store.c, model-store-intern.c) only. */
#ifndef SR_GW_MODEL_PRIVATE_H
#define SR_GW_MODEL_PRIVATE_H

#include <string.h>

#include "model.h"

enum gw_obj_type {
	GW_OBJ_EXECUTABLE = 1,
	GW_OBJ_KERNEL,
	GW_OBJ_LOCATION, /* keys only: locations are not gw_objs (model.h) */
	GW_OBJ_STACK,
	GW_OBJ_FUNCTION,
};

void gw_obj_unref(struct gw_obj *o);

/* Bytes of s as copied by gw_scopy() (NULL counts as ""). */
static inline size_t gw_slen(const char *s)
{
	return s ? strlen(s) + 1 : 1;
}

/* Copies s (NULL as "") to *pos and advances it. */
static inline const char *gw_scopy(char **pos, const char *s)
{
	char *dst = *pos;
	size_t n = s ? strlen(s) : 0;
	if (n)
		memcpy(dst, s, n);
	dst[n] = '\0';
	*pos += n + 1;
	return dst;
}

/*
 * What an object costs beyond its own bytes: malloc's chunk header and
 * rounding (8 to 23 bytes on glibc) and its index slot (4 to 8 bytes: an
 * index doubles at two entries per bucket, model-store.c). Store charges are what
 * objects take, so that a bound is the memory it holds.
 */
#define GW_OBJ_OVERHEAD 32

/*
 * What a location without lines of its own is charged to its store: its
 * slot in the location table (no malloc header) and its share of the index
 * (4-byte entries, between 3/8 and 3/4 of them in use: 5 to 11 bytes).
 */
#define GW_LOCATION_BYTES (sizeof(struct gw_location) + 8)

/* A zeroed location in a free slot of the location table; NULL + errno. */
struct gw_location *gw_location_slot_alloc(void);
/* Gives l's slot back (l was from gw_location_slot_alloc(); nothing holds it any more). */
void gw_location_slot_free(struct gw_location *l);

/* Stacks up to this many bytes live in slabs by size class (stack-slabs.c); larger ones come from malloc. */
#define GW_STACK_SLAB_MAX 1024
/* bytes zeroed bytes for a stack; NULL + errno. */
void *gw_stack_slab_alloc(size_t bytes);
/* Gives back p, from gw_stack_slab_alloc(bytes) with the same bytes. */
void gw_stack_slab_free(void *p, size_t bytes);

/* have (NULL: none) holds the n lines of want, strings compared by content (NULL as ""). */
bool gw_lines__equal(const struct gw_lines *have, const struct gw_line *want, uint32_t n);

/* Each returns an object with one reference (the caller's), not indexed. */
struct gw_executable *gw_executable_new(const struct gw_executable_def *def);
struct gw_kernel *gw_kernel_new(const struct gw_kernel_def *def);
struct gw_location *gw_location_new(enum gw_frame_kind kind, uint64_t address, struct gw_executable *exe,
				    struct gw_kernel *kernel);
struct gw_function *gw_function_new(const struct gw_function_def *def);
/* An INTERPRETED or JIT location with its line set from function. */
struct gw_location *gw_function_location_new(enum gw_frame_kind kind, uint64_t address, struct gw_function *function,
					     uint32_t line);
/* Takes the locations' references, also on failure. */
struct gw_stack *gw_stack_new(const void *id, size_t id_len, bool truncated, struct gw_location **locations,
			      uint32_t n);

#endif
