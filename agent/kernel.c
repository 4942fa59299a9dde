// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <xxhash.h>

#include "kernel.h"
#include "util.h"

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
				if (n == cap) {
					size_t ncap = cap ? cap * 2 : 64;
					struct agent_kernel_module *nm = realloc(mods, ncap * sizeof(*mods));
					if (!nm) {
						free(mods);
						return -ENOMEM;
					}
					mods = nm;
					cap = ncap;
				}
				memset(&mods[n], 0, sizeof(mods[n]));
				memcpy(mods[n].name, name, strlen(name) + 1);
				mods[n].start = addr;
				mods[n].size = size;
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

const struct agent_kernel_module *agent_kernel_module_at(const struct agent_kernel *k, uint64_t addr)
{
	for (size_t i = 0; i < k->n_modules; i++) {
		const struct agent_kernel_module *m = &k->modules[i];
		if (m->start && addr >= m->start && addr - m->start < m->size)
			return m;
	}
	return NULL;
}

int agent_kernel_read(const char *root, struct agent_kernel *ret)
{
	char path[4096], *buf = NULL;
	size_t len;
	struct utsname u;
	XXH3_state_t *st;
	XXH128_canonical_t canon;
	int r;

	memset(ret, 0, sizeof(*ret));
	if (uname(&u) == 0)
		snprintf(ret->release, sizeof(ret->release), "%s", u.release);

	snprintf(path, sizeof(path), "%s/sys/kernel/notes", root);
	if (agent_read_file(path, 1 << 20, &buf, &len) == 0) {
		r = agent_elf_note_build_id(buf, len, 4, ret->build_id);
		if (r > 0)
			ret->build_id_len = (size_t)r;
		SR_FREE(buf);
	}
	snprintf(path, sizeof(path), "%s/proc/sys/kernel/random/boot_id", root);
	if (agent_read_file(path, 4096, &buf, &len) == 0) {
		while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == ' '))
			len--;
		snprintf(ret->boot_id, sizeof(ret->boot_id), "%.*s", (int)len, buf);
		SR_FREE(buf);
	}
	snprintf(path, sizeof(path), "%s/proc/modules", root);
	if (agent_read_file(path, 16 << 20, &buf, &len) == 0) {
		r = agent_kernel_parse_modules(buf, len, &ret->modules, &ret->n_modules);
		SR_FREE(buf);
		if (r < 0)
			return r;
		for (size_t i = 0; i < ret->n_modules; i++) {
			struct agent_kernel_module *m = &ret->modules[i];
			snprintf(path, sizeof(path), "%s/sys/module/%s/notes/.note.gnu.build-id", root, m->name);
			if (agent_read_file(path, 4096, &buf, &len) == 0) {
				r = agent_elf_note_build_id(buf, len, 4, m->build_id);
				if (r > 0)
					m->build_id_len = (size_t)r;
				SR_FREE(buf);
			}
		}
	}

	st = XXH3_createState();
	if (!st)
		return -ENOMEM;
	XXH3_128bits_reset(st);
	if (ret->build_id_len)
		XXH3_128bits_update(st, ret->build_id, ret->build_id_len);
	else
		XXH3_128bits_update(st, ret->release, strlen(ret->release));
	XXH3_128bits_update(st, ret->boot_id, strlen(ret->boot_id));
	XXH128_canonicalFromHash(&canon, XXH3_128bits_digest(st));
	memcpy(ret->id, canon.digest, sizeof(ret->id));
	XXH3_freeState(st);
	return 0;
}

void agent_kernel_done(struct agent_kernel *k)
{
	if (!k)
		return;
	free(k->modules);
	k->modules = NULL;
	k->n_modules = 0;
}
