/* SPDX-License-Identifier: Apache-2.0 */
#ifndef SR_GW_AGENT_DEDUPE_H
#define SR_GW_AGENT_DEDUPE_H

#include <stddef.h>
#include <stdint.h>

/*
 * De-duplication of resent requests (same agent instance_id and sequence):
 * a bounded LRU of the responses given, so a resend after a lost response is
 * answered the same and not counted twice on this replica.
 */
struct gw_dedupe;
/*
 * max_entries 0: no de-duplication. max_per_instance: responses kept per
 * agent instance, its latest (an agent has one request outstanding and
 * resends only that one, so older answers of a live agent are never asked
 * for again); without it one agent's answers would fill the window.
 */
struct gw_dedupe *gw_dedupe_new(uint32_t max_entries, uint32_t max_per_instance, uint64_t max_bytes);
void gw_dedupe_free(struct gw_dedupe *d);
/* A copy of the stored response (malloc'd) or -ENOENT. */
int gw_dedupe__lookup(struct gw_dedupe *d, const uint8_t *instance_id, size_t id_len, uint64_t sequence, uint8_t **ret,
		      size_t *ret_len);
int gw_dedupe__insert(struct gw_dedupe *d, const uint8_t *instance_id, size_t id_len, uint64_t sequence,
		      const uint8_t *response, size_t len);
uint64_t gw_dedupe__entries(struct gw_dedupe *d);
/* Bytes held (what max_bytes bounds) and agent instances with remembered responses. */
uint64_t gw_dedupe__bytes(struct gw_dedupe *d);
uint64_t gw_dedupe__instances(struct gw_dedupe *d);
/* Responses forgotten for a bound: an agent's max_per_instance, max_entries or max_bytes. */
uint64_t gw_dedupe__evictions(struct gw_dedupe *d);

#endif
