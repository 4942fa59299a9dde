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

#include "agent-ingest-private.h"
#include "agent-ingest.h"
#include "macro.h"

/*
 * Copies a string field as valid UTF-8 (other bytes become '?', because OTLP
 * strings must be UTF-8 and backends reject anything else), cut at max bytes.
 */
size_t gw_utf8_copy(char *dst, const uint8_t *s, size_t n, size_t max)
{
	size_t i = 0, o = 0;
	n = SR_MIN(n, max);
	while (i < n) {
		uint8_t c = s[i];
		size_t len = c < 0x80		  ? 1
			     : (c & 0xe0) == 0xc0 ? 2
			     : (c & 0xf0) == 0xe0 ? 3
			     : (c & 0xf8) == 0xf0 ? 4
						  : 0;
		bool ok = len > 0 && i + len <= n && !(len == 2 && c < 0xc2) && !(c == 0 && len == 1);
		for (size_t k = 1; ok && k < len; k++)
			ok = (s[i + k] & 0xc0) == 0x80;
		if (ok && len == 3) {
			uint32_t cp = ((c & 0x0fu) << 12) | ((s[i + 1] & 0x3fu) << 6) | (s[i + 2] & 0x3fu);
			ok = cp >= 0x800 && (cp < 0xd800 || cp > 0xdfff);
		} else if (ok && len == 4) {
			uint32_t cp = ((c & 0x07u) << 18) | ((s[i + 1] & 0x3fu) << 12) | ((s[i + 2] & 0x3fu) << 6) |
				      (s[i + 3] & 0x3fu);
			ok = cp >= 0x10000 && cp <= 0x10ffff;
		}
		if (!ok) {
			dst[o++] = '?';
			i++;
			continue;
		}
		memcpy(dst + o, s + i, len);
		o += len;
		i += len;
	}
	dst[o] = '\0';
	return o;
}

/* A NUL-terminated UTF-8 copy in a caller buffer of GW_AGENT_MAX_STRING_BYTES + 1. */
const char *gw_ingest_cstr(char *buf, struct sr_pb_slice s)
{
	gw_utf8_copy(buf, s.p, s.n, GW_AGENT_MAX_STRING_BYTES);
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
	if (!gw_bytes_set__put(&l->set, XXH3_64bits(p, n), p, n, &found))
		return -ENOMEM;
	if (found)
		return 0;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		struct sr_pb_slice *nv = realloc(l->v, cap * sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		l->v = nv;
		l->cap = cap;
	}
	l->v[l->n++] = (struct sr_pb_slice){ p, n };
	return 0;
}

void gw_idlist__free(struct gw_idlist *l)
{
	gw_bytes_set__free(&l->set);
	free(l->v);
}
