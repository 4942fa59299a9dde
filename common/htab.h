/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The tree's hash table (docs/style.md 20): open addressing with linear
 * probing over slots of a size the owner chooses, each beginning with its
 * key's 64-bit hash. What follows the hash is the owner's: a pointer to a
 * value that holds the key (sr_htab_ptrs below), or the key and value
 * themselves. The owner hashes its keys and says when a slot holds a key
 * (eq); the table keeps the hashes, so growing never calls back.
 *
 * At most 3/4 of the slots are in use (live or deleted); a removal leaves a
 * tombstone, which a later insertion reuses and a rehash drops. Not
 * thread-safe: owners lock.
 */
#ifndef SR_HTAB_H
#define SR_HTAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* True when slot (its hash equal to the key's) holds key. */
typedef bool (*sr_htab_eq_fn)(const void *slot, const void *key);

struct sr_htab {
	unsigned char *slots;
	size_t cap;  /* slots: a power of two, or 0 */
	size_t n;    /* live */
	size_t used; /* live + deleted */
	size_t elem; /* bytes per slot */
	sr_htab_eq_fn eq;
};

/* The first member of every slot: 0 empty, 1 deleted; a key's hash is stored as 2 and up. */
#define SR_HTAB_EMPTY	0
#define SR_HTAB_DELETED 1

/* elem: bytes per slot, a multiple of 8 that starts with the uint64_t hash. */
void sr_htab_init(struct sr_htab *h, size_t elem, sr_htab_eq_fn eq);
/* Frees the slots (not what they point to); the table can be used again. */
void sr_htab_done(struct sr_htab *h);
/* Empties the table, keeping its slots. */
void sr_htab__clear(struct sr_htab *h);
/* A byte string's hash (XXH3), for owners without a hash of their own. */
uint64_t sr_htab_hash(const void *p, size_t len);

/* The slot holding key, whose hash is hash, or NULL. */
void *sr_htab__get(const struct sr_htab *h, uint64_t hash, const void *key);

/*
 * The same, inline, with the owner's eq (the table's own): for hot paths,
 * where the compiler can then inline eq into the probe.
 */
static inline void *sr_htab__find(const struct sr_htab *h, uint64_t hash, const void *key, sr_htab_eq_fn eq)
{
	size_t mask = h->cap - 1;

	if (!h->cap)
		return NULL;
	hash = hash < 2 ? hash + 2 : hash;
	/* At most 3/4 of the slots are used: an empty one ends every probe. */
	for (size_t i = hash & mask;; i = (i + 1) & mask) {
		uint64_t *s = (uint64_t *)(void *)(h->slots + i * h->elem);

		if (*s == SR_HTAB_EMPTY)
			return NULL;
		if (*s == hash && eq(s, key))
			return s;
	}
}
/*
 * A slot for a key that is not in the table (the owner knows it is not):
 * its hash set, the rest zeroed, for the owner to fill. 0, or -ENOMEM or
 * -EOVERFLOW with the table as it was. A slot pointer is valid until the
 * next add or put.
 */
int sr_htab__add(struct sr_htab *h, uint64_t hash, void **ret_slot);
/* The slot holding key (returns 0), or a new one for it as sr_htab__add() makes (returns 1); or -errno. */
int sr_htab__put(struct sr_htab *h, uint64_t hash, const void *key, void **ret_slot);
/* Removes the entry in slot (one sr_htab__get() or __next() returned). */
void sr_htab__del(struct sr_htab *h, void *slot);
/* Iterate: for (size_t i = 0; (s = sr_htab__next(h, &i));) — a __del() of s meanwhile is fine, an add is not. */
void *sr_htab__next(const struct sr_htab *h, size_t *iter);

/*
 * The typed use: pointers to values whose key is a byte string inside them
 * (key_of says where), so an entry costs 16 bytes of table plus the value.
 */
typedef const void *(*sr_htab_key_fn)(const void *value, size_t *ret_len);

struct sr_htab_ptr {
	uint64_t hash;
	void *value;
};

struct sr_htab_ptrs {
	struct sr_htab h;
	sr_htab_key_fn key_of;
};

void sr_htab_ptrs_init(struct sr_htab_ptrs *p, sr_htab_key_fn key_of);
/* Frees the table, not the values. */
void sr_htab_ptrs_done(struct sr_htab_ptrs *p);
void *sr_htab_ptrs__get(const struct sr_htab_ptrs *p, const void *key, size_t len);
/* Adds value (its key must not be present). Returns 0 or -ENOMEM. */
int sr_htab_ptrs__put(struct sr_htab_ptrs *p, void *value);
/* Removes and returns the value with this key, or NULL. */
void *sr_htab_ptrs__remove(struct sr_htab_ptrs *p, const void *key, size_t len);
/* Iterate: for (size_t i = 0; (v = sr_htab_ptrs__next(p, &i));) — no puts or removes meanwhile. */
void *sr_htab_ptrs__next(const struct sr_htab_ptrs *p, size_t *iter);

#endif
