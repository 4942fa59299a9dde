// SPDX-License-Identifier: Apache-2.0
/*
 * The kernel's layout (kernel.h): parsing what /proc shows of its text and
 * modules, making the IDs of its address spaces, and locating a frame in
 * them. Pure functions, no I/O (kernel.c reads the files): the sender's symbol
 * upload cuts kallsyms with them too.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include "common/grow.h"
#include "common/macro.h"
#include "common/search.h"
#include "kernel.h"

int agent_kernel_parse_modules(const char *buf, size_t len, struct agent_kernel_module **ret, size_t *ret_n)
{
	struct agent_kernel_module *mods = NULL;
	size_t n = 0, cap = 0;
	const char *p = buf, *end = buf + len;

	while (p < end && n < AGENT_KERNEL_MAX_MODULES) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;
		char line[512], name[AGENT_MODULE_NAME_MAX], state[32];
		unsigned long long size, addr;
		size_t ll = (size_t)(le - p);

		if (ll < sizeof(line)) {
			memcpy(line, p, ll);
			line[ll] = '\0';
			/* name size refcount deps state address [taint] */
			if (sscanf(line, "%63s %llu %*d %*s %31s %llx", name, &size, state, &addr) == 4) {
				int gr = sr_grow((void **)&mods, &cap, n + 1, sizeof(*mods), 64);

				if (gr < 0) {
					free(mods);
					return gr;
				}
				memset(&mods[n], 0, sizeof(mods[n]));
				memcpy(mods[n].name, name, strlen(name) + 1);
				mods[n].start = addr;
				mods[n].size = size;
				mods[n].live = true;
				n++;
			}
		}
		if (!nl)
			break;
		p = nl + 1;
	}
	*ret = mods;
	*ret_n = n;
	return 0;
}

bool agent_kernel_scan_text(struct agent_kernel_text_scan *sc, const char *buf, size_t len)
{
	const char *p = buf, *end = buf + len;

	/* _etext follows _text and _stext: seen it, the scan is done (kallsyms orders the image by address). */
	while (p < end && !sc->have_end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p)), *q = p;
		uint64_t addr = 0;
		int digits = 0;

		if (!eol)
			eol = end;
		for (; q < eol && sr_hex_value(*q) >= 0 && digits <= 16; q++, digits++)
			addr = addr << 4 | (uint64_t)sr_hex_value(*q);
		/* "ffffffff81000000 T _text": any type letter, the name alone (no "[module]"). */
		if (digits > 0 && digits <= 16 && eol - q >= 4 && q[0] == ' ' && q[2] == ' ') {
			size_t nl = (size_t)(eol - (q + 3));
			if (!sc->have_start && nl == 5 && memcmp(q + 3, "_text", 5) == 0) {
				sc->start = addr;
				sc->have_start = true;
			} else if (!sc->have_stext && nl == 6 && memcmp(q + 3, "_stext", 6) == 0) {
				sc->stext = addr;
				sc->have_stext = true;
			} else if (!sc->have_end && nl == 6 && memcmp(q + 3, "_etext", 6) == 0) {
				sc->end = addr;
				sc->have_end = true;
			}
		}
		p = eol + 1;
	}
	return sc->have_end && (sc->have_start || sc->have_stext);
}

bool agent_kernel_parse_text(const char *buf, size_t len, uint64_t *ret_start, uint64_t *ret_end)
{
	struct agent_kernel_text_scan sc = { 0 };

	uint64_t start;

	agent_kernel_scan_text(&sc, buf, len);
	start = agent_kernel_text_start(&sc);
	/* Hidden addresses (kptr_restrict) read 0. */
	if (!start || !sc.have_end || sc.end <= start)
		return false;
	*ret_start = start;
	*ret_end = sc.end;
	return true;
}

static void hash_id(uint8_t ret[AGENT_KERNEL_ID_LEN], const char *what, const void *a, size_t alen, const void *b,
		    size_t blen, const void *c, size_t clen)
{
	XXH3_state_t st;
	XXH128_canonical_t canon;

	XXH3_INITSTATE(&st);
	XXH3_128bits_reset(&st);
	XXH3_128bits_update(&st, what, strlen(what) + 1);
	XXH3_128bits_update(&st, a, alen);
	if (blen)
		XXH3_128bits_update(&st, b, blen);
	if (clen)
		XXH3_128bits_update(&st, c, clen);
	XXH128_canonicalFromHash(&canon, XXH3_128bits_digest(&st));
	memcpy(ret, canon.digest, AGENT_KERNEL_ID_LEN);
}

void agent_kernel_module_id(const struct agent_kernel *k, struct agent_kernel_module *m)
{
	uint8_t size[8];

	if (m->build_id_len) {
		hash_id(m->id, "module", m->build_id, m->build_id_len, NULL, 0, NULL, 0);
		return;
	}
	/* No build ID: this kernel build's module of this name and size. */
	for (int i = 0; i < 8; i++)
		size[i] = (uint8_t)(m->size >> (8 * i));
	hash_id(m->id, "module", k->id, AGENT_KERNEL_ID_LEN, m->name, strlen(m->name) + 1, size, sizeof(size));
}

static int cmp_start(const void *a, const void *b, void *ud)
{
	const struct agent_kernel_module *m = ud;
	uint64_t x = m[*(const uint32_t *)a].start, y = m[*(const uint32_t *)b].start;

	return x < y ? -1 : x > y;
}

int agent_kernel_index_modules(struct agent_kernel *k)
{
	uint32_t *idx = NULL;
	size_t n = 0;

	if (k->n_modules) {
		idx = malloc(k->n_modules * sizeof(*idx));
		if (!idx)
			return -ENOMEM;
	}
	for (size_t i = 0; i < k->n_modules; i++)
		if (k->modules[i].live && k->modules[i].start && k->modules[i].size)
			idx[n++] = (uint32_t)i;
	if (n > 1)
		qsort_r(idx, n, sizeof(*idx), cmp_start, k->modules);
	free(k->by_start);
	k->by_start = idx;
	k->n_by_start = n;
	return 0;
}

int agent_kernel_finish(struct agent_kernel *k)
{
	/* The runtime ID is what every kernel ID was before image offsets: the same kernel after a reboot differs. */
	if (k->build_id_len)
		hash_id(k->runtime_id, "runtime", k->build_id, k->build_id_len, k->boot_id, strlen(k->boot_id), NULL,
			0);
	else
		hash_id(k->runtime_id, "runtime", k->release, strlen(k->release) + 1, k->boot_id, strlen(k->boot_id),
			NULL, 0);
	if (!agent_kernel_relative(k))
		memcpy(k->id, k->runtime_id, AGENT_KERNEL_ID_LEN);
	else if (k->build_id_len)
		hash_id(k->id, "image", k->build_id, k->build_id_len, NULL, 0, NULL, 0);
	else /* a release names no build: offsets hold for this boot only */
		hash_id(k->id, "image", k->release, strlen(k->release) + 1, k->boot_id, strlen(k->boot_id), NULL, 0);
	for (size_t i = 0; i < k->n_modules; i++)
		agent_kernel_module_id(k, &k->modules[i]);
	return agent_kernel_index_modules(k);
}

const struct agent_kernel_module *agent_kernel_module_at(const struct agent_kernel *k, uint64_t addr)
{
	/* The last module starting at or below addr. */
	size_t at = SR_PARTITION_POINT(k->n_by_start, i, k->modules[k->by_start[i]].start <= addr);

	if (at > 0) {
		const struct agent_kernel_module *m = &k->modules[k->by_start[at - 1]];
		if (addr - m->start < m->size)
			return m;
	}
	return NULL;
}

int agent_kernel_locate(const struct agent_kernel *k, uint64_t addr, uint64_t *ret_addr)
{
	const struct agent_kernel_module *m;

	if (!agent_kernel_relative(k)) {
		*ret_addr = addr;
		return AGENT_KSEG_RUNTIME;
	}
	if (addr >= k->text_start && addr < k->text_end) {
		*ret_addr = addr - k->text_start;
		return AGENT_KSEG_IMAGE;
	}
	m = agent_kernel_module_at(k, addr);
	if (m) {
		*ret_addr = addr - m->start;
		return (int)(m - k->modules);
	}
	*ret_addr = addr;
	return AGENT_KSEG_RUNTIME;
}

const uint8_t *agent_kernel_seg_id(const struct agent_kernel *k, int seg)
{
	if (seg == AGENT_KSEG_IMAGE)
		return k->id;
	if (seg == AGENT_KSEG_RUNTIME)
		return k->runtime_id;
	if (seg >= 0 && (size_t)seg < k->n_modules)
		return k->modules[seg].id;
	return NULL;
}

int agent_kernel_seg_of_id(const struct agent_kernel *k, const uint8_t *id, size_t len)
{
	if (len != AGENT_KERNEL_ID_LEN)
		return AGENT_KSEG_NONE;
	/* Without image offsets both IDs are equal, and every frame is a runtime address. */
	if (memcmp(id, k->runtime_id, len) == 0)
		return AGENT_KSEG_RUNTIME;
	if (memcmp(id, k->id, len) == 0)
		return AGENT_KSEG_IMAGE;
	for (size_t i = 0; i < k->n_modules; i++)
		if (memcmp(id, k->modules[i].id, len) == 0)
			return (int)i;
	return AGENT_KSEG_NONE;
}

int agent_kernel_copy(const struct agent_kernel *k, struct agent_kernel *ret)
{
	*ret = *k;
	ret->modules = NULL;
	ret->cap_modules = k->n_modules;
	ret->by_start = NULL;
	if (k->n_modules) {
		ret->modules = malloc(k->n_modules * sizeof(*ret->modules));
		ret->by_start = malloc((k->n_by_start ? k->n_by_start : 1) * sizeof(*ret->by_start));
		if (!ret->modules || !ret->by_start) {
			agent_kernel_done(ret);
			return -ENOMEM;
		}
		memcpy(ret->modules, k->modules, k->n_modules * sizeof(*ret->modules));
		memcpy(ret->by_start, k->by_start, k->n_by_start * sizeof(*ret->by_start));
	}
	return 0;
}

void agent_kernel_done(struct agent_kernel *k)
{
	if (!k)
		return;
	free(k->modules);
	free(k->by_start);
	k->modules = NULL;
	k->by_start = NULL;
	k->n_modules = k->cap_modules = 0;
	k->n_by_start = 0;
}
