// SPDX-License-Identifier: Apache-2.0
/*
 * /proc/PID/maps lines look like
 *   55d4c1a00000-55d4c1a02000 r-xp 00002000 fd:01 1234567    /usr/bin/my prog (deleted)
 * The path runs to the end of the line and may hold spaces; the kernel
 * escapes only newlines in it (as \012). Input is untrusted bytes (it may be
 * cut anywhere, or not be a maps file at all), so every field is parsed by
 * hand with explicit bounds instead of sscanf.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "common/macro.h"
#include "common/search.h"
#include "procmaps.h"

struct cursor {
	const char *p;
	const char *end;
};

static int parse_hex(struct cursor *c, uint64_t *ret)
{
	uint64_t v = 0;
	size_t digits = 0;

	while (c->p < c->end && sr_hex_value(*c->p) >= 0) {
		if (digits == 16)
			return -EINVAL;
		v = (v << 4) | (uint64_t)sr_hex_value(*c->p);
		c->p++;
		digits++;
	}
	if (digits == 0)
		return -EINVAL;
	*ret = v;
	return 0;
}

static int parse_dec(struct cursor *c, uint64_t *ret)
{
	uint64_t v = 0;
	size_t digits = 0;

	while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
		uint64_t d = (uint64_t)(*c->p - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -EINVAL;
		v = v * 10 + d;
		c->p++;
		digits++;
	}
	if (digits == 0)
		return -EINVAL;
	*ret = v;
	return 0;
}

static int expect(struct cursor *c, char ch)
{
	if (c->p >= c->end || *c->p != ch)
		return -EINVAL;
	c->p++;
	return 0;
}

static int skip_spaces(struct cursor *c, bool required)
{
	const char *start = c->p;

	while (c->p < c->end && (*c->p == ' ' || *c->p == '\t'))
		c->p++;
	return required && c->p == start ? -EINVAL : 0;
}

int agent_procmaps_parse_line(const char *line, size_t len, struct agent_map *ret)
{
	static const char deleted[] = " (deleted)";
	struct cursor c = { line, line + len };
	struct agent_map m = { 0 };
	uint64_t v;
	const char *path;
	size_t plen;

	while (c.end > c.p && (c.end[-1] == '\n' || c.end[-1] == '\r'))
		c.end--;
	if (parse_hex(&c, &m.start) < 0 || expect(&c, '-') < 0 || parse_hex(&c, &m.end) < 0)
		return -EINVAL;
	/* The kernel never lists an empty or inverted range. */
	if (m.end <= m.start || skip_spaces(&c, true) < 0)
		return -EINVAL;
	if (c.end - c.p < 4)
		return -EINVAL;
	for (int i = 0; i < 4; i++) {
		static const char want[4] = { 'r', 'w', 'x', 'p' };
		char ch = c.p[i];
		if (i == 3) {
			if (ch == 's')
				m.perms |= AGENT_MAP_SHARED;
			else if (ch != 'p')
				return -EINVAL;
		} else if (ch == want[i]) {
			m.perms |= (uint8_t)(1u << i);
		} else if (ch != '-') {
			return -EINVAL;
		}
	}
	c.p += 4;
	if (skip_spaces(&c, true) < 0 || parse_hex(&c, &m.offset) < 0 || skip_spaces(&c, true) < 0)
		return -EINVAL;
	if (parse_hex(&c, &v) < 0 || v > UINT32_MAX || expect(&c, ':') < 0)
		return -EINVAL;
	m.dev_major = (uint32_t)v;
	if (parse_hex(&c, &v) < 0 || v > UINT32_MAX)
		return -EINVAL;
	m.dev_minor = (uint32_t)v;
	if (skip_spaces(&c, true) < 0 || parse_dec(&c, &m.inode) < 0)
		return -EINVAL;
	if (c.p < c.end && skip_spaces(&c, true) < 0)
		return -EINVAL;

	path = c.p;
	plen = (size_t)(c.end - c.p);
	if (plen == 0) {
		m.kind = AGENT_MAP_ANON;
		*ret = m;
		return 0;
	}
	if (plen >= sizeof(deleted) - 1 &&
	    memcmp(path + plen - (sizeof(deleted) - 1), deleted, sizeof(deleted) - 1) == 0) {
		m.deleted = true;
		plen -= sizeof(deleted) - 1;
	}
	if (path[0] == '[')
		m.kind = (plen == 6 && memcmp(path, "[vdso]", 6) == 0) ? AGENT_MAP_VDSO : AGENT_MAP_SPECIAL;
	else
		m.kind = AGENT_MAP_FILE;
	/* A path never holds a NUL byte: one means garbage. The line is not NUL-terminated, so no str* here. */
	if (memchr(path, '\0', plen))
		return -EINVAL;
	m.path = malloc(plen + 1);
	if (!m.path)
		return -ENOMEM;
	memcpy(m.path, path, plen);
	m.path[plen] = '\0';
	*ret = m;
	return 0;
}

static int cmp_start(const void *a, const void *b)
{
	const struct agent_map *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return 0;
}

int agent_procmaps_parse(const char *buf, size_t len, bool exec_only, struct agent_map **ret_maps, size_t *ret_n,
			 size_t *ret_bad)
{
	struct agent_map *maps = NULL;
	size_t n = 0, cap = 0, bad = 0;
	const char *p = buf, *end = buf + len;
	bool sorted = true;
	int r = 0;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *line_end = nl ? nl : end;
		struct agent_map m;

		if (line_end > p) {
			r = agent_procmaps_parse_line(p, (size_t)(line_end - p), &m);
			if (r == -ENOMEM)
				goto fail;
			if (r < 0) {
				bad++;
				r = 0;
			} else if (exec_only && !(m.perms & AGENT_MAP_EXEC)) {
				free(m.path);
			} else if (n == AGENT_PROCMAPS_MAX_ENTRIES) {
				free(m.path);
				r = -E2BIG;
				break;
			} else {
				r = sr_grow((void **)&maps, &cap, n + 1, sizeof(*maps), 64);
				if (r < 0) {
					free(m.path);
					goto fail;
				}
				if (n > 0 && m.start < maps[n - 1].start)
					sorted = false;
				maps[n++] = m;
			}
		}
		if (!nl)
			break;
		p = nl + 1;
	}
	if (!sorted)
		qsort(maps, n, sizeof(*maps), cmp_start);
	*ret_maps = maps;
	*ret_n = n;
	if (ret_bad)
		*ret_bad = bad;
	return r;
fail:
	agent_procmaps_free(maps, n);
	return r;
}

void agent_procmaps_free(struct agent_map *maps, size_t n)
{
	if (!maps)
		return;
	for (size_t i = 0; i < n; i++)
		free(maps[i].path);
	free(maps);
}

const struct agent_map *agent_procmaps_find(const struct agent_map *maps, size_t n, uint64_t addr)
{
	/* Last mapping with start <= addr; mappings do not overlap. */
	size_t at = SR_PARTITION_POINT(n, i, maps[i].start <= addr);

	return at > 0 && addr < maps[at - 1].end ? &maps[at - 1] : NULL;
}
