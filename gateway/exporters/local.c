// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xxhash.h>

#include "common/grow.h"
#include "core/model.h"
#include "local.h"

int gw_strtab_init(struct gw_strtab *t)
{
	*t = (struct gw_strtab){ 0 };
	return gw_strtab__intern(t, "") < 0 ? -ENOMEM : 0;
}

void gw_strtab_free(struct gw_strtab *t)
{
	for (uint32_t i = 0; i < t->n; i++)
		free(t->s[i]);
	free(t->s);
	free(t->len);
	free(t->slots);
	free(t->hashes);
	*t = (struct gw_strtab){ 0 };
}

static int grow_slots(struct gw_strtab *t)
{
	uint32_t cap = t->slot_cap ? t->slot_cap * 2 : 1024;
	uint32_t *s = calloc(cap, sizeof(*s));
	uint64_t *h = calloc(cap, sizeof(*h));

	if (!s || !h) {
		free(s);
		free(h);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < t->slot_cap; i++) {
		uint32_t j;

		if (!t->slots[i])
			continue;
		for (j = (uint32_t)t->hashes[i] & (cap - 1); s[j]; j = (j + 1) & (cap - 1))
			;
		s[j] = t->slots[i];
		h[j] = t->hashes[i];
	}
	free(t->slots);
	free(t->hashes);
	t->slots = s;
	t->hashes = h;
	t->slot_cap = cap;
	return 0;
}

int64_t gw_strtab__intern(struct gw_strtab *t, const char *s)
{
	size_t len = s ? strlen(s) : 0;
	uint64_t h = XXH3_64bits(s ? s : "", len);
	uint32_t j;

	if ((t->n + 1) * 2 > t->slot_cap && grow_slots(t) < 0)
		return -ENOMEM;
	for (j = (uint32_t)h & (t->slot_cap - 1); t->slots[j]; j = (j + 1) & (t->slot_cap - 1)) {
		uint32_t i = t->slots[j] - 1;

		if (t->hashes[j] == h && t->len[i] == len && memcmp(t->s[i], s ? s : "", len) == 0)
			return i;
	}
	if (t->n == t->cap) {
		/* Two arrays of one capacity: each grows from a copy of it, which both leave equal. */
		uint32_t cap_s = t->cap, cap_len = t->cap;

		if (sr_grow_u32((void **)&t->s, &cap_s, t->n + 1, sizeof(*t->s), 1024) < 0 ||
		    sr_grow_u32((void **)&t->len, &cap_len, t->n + 1, sizeof(*t->len), 1024) < 0)
			return -ENOMEM;
		t->cap = cap_len;
	}
	t->s[t->n] = strndup(s ? s : "", len);
	if (!t->s[t->n])
		return -ENOMEM;
	t->len[t->n] = (uint32_t)len;
	t->slots[j] = t->n + 1;
	t->hashes[j] = h;
	t->bytes += len + 1;
	return t->n++;
}

int gw_write_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len > 0) {
		ssize_t n = write(fd, p, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int gw_write_file_atomic(const char *path, const void *data, size_t len)
{
	char tmp[4096];
	int fd, r;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	r = gw_write_all(fd, data, len);
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r == 0 && rename(tmp, path) < 0)
		r = -errno;
	if (r < 0)
		unlink(tmp);
	return r;
}

void gw_location_fallback_name(const struct gw_location *l, char *buf, size_t size)
{
	switch (gw_location__kind(l)) {
	case GW_FRAME_USER: {
		const struct gw_executable *exe = gw_location__exe(l);

		snprintf(buf, size, "%s+0x%" PRIx64, exe && *exe->file_name ? exe->file_name : "[unknown]", l->address);
		break;
	}
	case GW_FRAME_KERNEL: {
		const struct gw_kernel *k = gw_location__kernel(l);

		snprintf(buf, size, "[%s] 0x%" PRIx64, k && *k->module ? k->module : "kernel", l->address);
		break;
	}
	case GW_FRAME_INTERPRETED:
	case GW_FRAME_JIT:
		snprintf(buf, size, "%s", gw_location__function(l) ? gw_location__function(l)->name : "[unknown]");
		break;
	default:
		snprintf(buf, size, "[unknown] 0x%" PRIx64, l->address);
		break;
	}
}
