/* SPDX-License-Identifier: Apache-2.0 */
/* Shared between store.c (the stores) and store-intern.c (what each kind is keyed by). */
#ifndef SR_GW_STORE_PRIVATE_H
#define SR_GW_STORE_PRIVATE_H

#include "model.h"
#include "model-private.h"

/* A definition's key: its ID, or a location's (kind, address, owner, line, preset lines). */
struct key {
	enum gw_obj_type type;
	uint64_t hash;
	const void *id;
	size_t id_len;
	/* locations */
	enum gw_frame_kind kind;
	uint64_t address;
	const void *owner;
	uint32_t line;
	/* preset locations: their lines are part of the key */
	bool preset;
	const struct gw_line *lines;
	uint32_t n_lines;
};

/* A new reference to the indexed object equal to k, or NULL. */
struct gw_obj *gw_store_lookup(struct gw_stores *s, enum gw_store_kind kind, const struct key *k);
/*
 * Inserts o unless an equal object got in first (o is then dropped);
 * returns the object to use, with the caller's reference.
 */
struct gw_obj *gw_store_insert(struct gw_stores *s, enum gw_store_kind kind, const struct key *k, struct gw_obj *o);

#endif
