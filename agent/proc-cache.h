/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The runtimes' name caches (Python code objects, V8 functions, Java methods
 * and compiled pcs): entries read from one process's memory, keyed by that
 * process (agent_proc.key) and an address in it. One cache type for all of
 * them, with the two properties a host's process churn needs:
 * - bounded: at most max entries; a new one evicts the least recently used;
 * - owned: a retired process's entries are released with it
 *   (agent_pcache__forget()), so names of processes long gone never fill it.
 * The caller's entry embeds struct agent_pcache_entry as its first member,
 * sets its bytes (the heap it holds) before putting it, and the cache keeps
 * the sum (agent_pcache__bytes(), stackrelay_agent_cache_bytes); the cache
 * frees entries through free_fn. Not thread-safe: the sampling
 * thread owns it.
 */
#ifndef SR_AGENT_PROC_CACHE_H
#define SR_AGENT_PROC_CACHE_H

#include <stdint.h>

#include "common/list.h"
#include "common/htab.h"

/* A key: the process's key (pid, start time: 12 bytes), then the address (8). */
#define AGENT_PCACHE_KEY 20

struct agent_pcache_entry {
	uint8_t key[AGENT_PCACHE_KEY];
	struct sr_list_node lru;   /* the cache's use order, most recent first */
	struct sr_list_node owned; /* its process's entries */
	uint32_t bytes;		   /* heap the entry holds, with what it points to (set by the caller) */
};

struct agent_pcache {
	struct sr_htab_ptrs entries; /* struct agent_pcache_entry by key */
	struct sr_htab_ptrs owners;  /* a process's entries, by its key */
	struct sr_list lru;
	uint64_t n;
	uint64_t n_owners;
	uint64_t bytes; /* the entries' own count (agent_pcache_entry.bytes) */
	uint64_t max;
	uint64_t evicted; /* least recently used entries dropped for new ones */
	void (*free_fn)(struct agent_pcache_entry *e);
};

/* max: at least 1. */
void agent_pcache_init(struct agent_pcache *c, uint64_t max, void (*free_fn)(struct agent_pcache_entry *e));
/* Frees every entry. */
void agent_pcache_done(struct agent_pcache *c);
/* The entry of key (AGENT_PCACHE_KEY bytes), made the most recently used; NULL when absent. */
struct agent_pcache_entry *agent_pcache__get(struct agent_pcache *c, const uint8_t *key);
/* Adds e (its key set, not present); evicts the least recently used entry when full. 0 or -ENOMEM (e not added). */
int agent_pcache__put(struct agent_pcache *c, struct agent_pcache_entry *e);
/* Removes and frees e. */
void agent_pcache__drop(struct agent_pcache *c, struct agent_pcache_entry *e);
/* Removes and frees every entry of the process whose key (12 bytes) this is. */
void agent_pcache__forget(struct agent_pcache *c, const uint8_t *proc_key);
/* Heap bytes the cache holds: its entries, their owners and its tables. */
uint64_t agent_pcache__bytes(const struct agent_pcache *c);

#endif
