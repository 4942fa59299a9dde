/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The byte strings of one PushRequest (agent-ingest-private.h): copies made
 * valid UTF-8, and the sets and ID lists that de-duplicate them while the
 * request is processed.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "common/grow.h"
#include "agent-ingest-private.h"
#include "agent-ingest.h"
#include "common/macro.h"
#include "utf8.h"

/* A NUL-terminated UTF-8 copy in a caller buffer of GW_AGENT_MAX_STRING_BYTES + 1. */
const char *gw_ingest_cstr(char *buf, struct sr_pb_slice s)
{
	sr_utf8_copy(buf, s.p, s.n, GW_AGENT_MAX_STRING_BYTES);
	return buf;
}

void gw_bytes_set__free(struct gw_bytes_set *s)
{
	sr_htab_done(&s->t);
}

static bool entry_eq(const void *slot, const void *key)
{
	const struct gw_bytes_set_entry *e = slot;
	const struct sr_pb_slice *k = key;

	return e->n == k->n && (k->n == 0 || memcmp(e->p, k->p, k->n) == 0);
}

struct gw_bytes_set_entry *gw_bytes_set__put(struct gw_bytes_set *s, uint64_t h, const uint8_t *p, size_t n,
					     bool *ret_found)
{
	struct sr_pb_slice k = { p, n };
	struct gw_bytes_set_entry *e;
	int r;

	if (!s->t.elem) /* a zeroed set: its table is set up at the first put */
		sr_htab_init(&s->t, sizeof(*e), entry_eq);
	e = sr_htab__find(&s->t, h, &k, entry_eq); /* per sample: eq inlined */
	*ret_found = e != NULL;
	if (e)
		return e;
	r = sr_htab__add(&s->t, h, (void **)&e);
	if (r < 0)
		return NULL;
	e->p = p;
	e->n = n;
	return e;
}

int gw_idlist__add(struct gw_idlist *l, const uint8_t *p, size_t n)
{
	bool found;
	int r;

	if (!gw_bytes_set__put(&l->set, XXH3_64bits(p, n), p, n, &found))
		return -ENOMEM;
	if (found)
		return 0;
	r = sr_grow((void **)&l->v, &l->cap, l->n + 1, sizeof(*l->v), 16);
	if (r < 0)
		return r;
	l->v[l->n++] = (struct sr_pb_slice){ p, n };
	return 0;
}

void gw_idlist__free(struct gw_idlist *l)
{
	gw_bytes_set__free(&l->set);
	free(l->v);
}
