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
	free(s->e);
	*s = (struct gw_bytes_set){ 0 };
}

struct gw_bytes_set_entry *gw_bytes_set__put(struct gw_bytes_set *s, uint64_t h, const uint8_t *p, size_t n,
					     bool *ret_found)
{
	if ((s->n + 1) * 2 > s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 64;
		struct gw_bytes_set_entry *ne = calloc(cap, sizeof(*ne));
		if (!ne)
			return NULL;
		for (size_t i = 0; i < s->cap; i++) {
			if (!s->e[i].used)
				continue;
			size_t j = s->e[i].h & (cap - 1);
			while (ne[j].used)
				j = (j + 1) & (cap - 1);
			ne[j] = s->e[i];
		}
		free(s->e);
		s->e = ne;
		s->cap = cap;
	}
	size_t j = h & (s->cap - 1);
	while (s->e[j].used) {
		if (s->e[j].h == h && s->e[j].n == n && memcmp(s->e[j].p, p, n) == 0) {
			*ret_found = true;
			return &s->e[j];
		}
		j = (j + 1) & (s->cap - 1);
	}
	s->e[j] = (struct gw_bytes_set_entry){ .h = h, .p = p, .n = n, .used = true };
	s->n++;
	*ret_found = false;
	return &s->e[j];
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
