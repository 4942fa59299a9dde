/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A small open-addressing hash table of pointers. Keys are byte strings that
 * live inside the values (key_of returns them), so an entry costs 16 bytes
 * of table plus the value. Not thread-safe; owners lock.
 */
#ifndef SR_AGENT_HTAB_H
#define SR_AGENT_HTAB_H

#include <stddef.h>
#include <stdint.h>

typedef const void *(*agent_htab_key_fn)(const void *value, size_t *ret_len);

struct agent_htab_slot {
	uint64_t hash; /* 0: empty, 1: deleted (real hashes are forced >= 2) */
	void *value;
};

struct agent_htab {
	struct agent_htab_slot *slots;
	size_t cap; /* power of two, or 0 */
	size_t n;
	size_t used; /* n + deleted */
	agent_htab_key_fn key_of;
};

void agent_htab_init(struct agent_htab *h, agent_htab_key_fn key_of);
/* Frees the table, not the values. */
void agent_htab_done(struct agent_htab *h);
uint64_t agent_htab_hash(const void *key, size_t len);
void *agent_htab__get(const struct agent_htab *h, const void *key, size_t len);
/* Adds value (its key must not be present). Returns 0 or -ENOMEM. */
int agent_htab__put(struct agent_htab *h, void *value);
/* Removes and returns the value with this key, or NULL. */
void *agent_htab__remove(struct agent_htab *h, const void *key, size_t len);
/* Iterate: for (size_t i = 0; (v = agent_htab__next(h, &i));) — no puts or removes meanwhile. */
void *agent_htab__next(const struct agent_htab *h, size_t *iter);

#endif
