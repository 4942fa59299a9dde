// SPDX-License-Identifier: Apache-2.0
/* Reading the running kernel's identity from /sys and /proc (kernel.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "common/fileio.h"
#include "common/grow.h"
#include "kernel.h"
#include "util.h"

static void read_module_build_id(const char *root, struct agent_kernel_module *m)
{
	char path[4096], *buf = NULL;
	size_t len;
	int r;

	snprintf(path, sizeof(path), "%s/sys/module/%s/notes/.note.gnu.build-id", root, m->name);
	if (sr_read_file(path, 4096, &buf, &len) == 0) {
		r = agent_elf_note_build_id(buf, len, 4, m->build_id);
		if (r > 0)
			m->build_id_len = (size_t)r;
		free(buf);
	}
}

/*
 * _text (or _stext) and _etext: kallsyms is read in pieces until _etext is
 * seen (after the image's symbols, a few MiB in), not kept whole.
 */
static void read_text(const char *path, struct agent_kernel *k)
{
	struct agent_kernel_text_scan sc = { 0 };
	char buf[64 * 1024];
	size_t have = 0, total = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return;
	while (total < AGENT_KERNEL_MAX_KALLSYMS_BYTES) {
		ssize_t n = read(fd, buf + have, sizeof(buf) - have);
		char *last;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			agent_kernel_scan_text(&sc, buf, have); /* a last line without its newline */
			break;
		}
		have += (size_t)n;
		total += (size_t)n;
		last = memrchr(buf, '\n', have);
		if (!last) {
			have = 0; /* a line longer than the buffer is not one of ours */
			continue;
		}
		if (agent_kernel_scan_text(&sc, buf, (size_t)(last + 1 - buf)))
			break;
		have -= (size_t)(last + 1 - buf);
		memmove(buf, last + 1, have);
	}
	close(fd);
	if (agent_kernel_text_start(&sc) && sc.have_end && sc.end > agent_kernel_text_start(&sc)) {
		k->text_start = agent_kernel_text_start(&sc);
		k->text_end = sc.end;
	}
}

int agent_kernel_read(const char *root, struct agent_kernel *ret)
{
	char path[4096], *buf = NULL;
	size_t len;
	struct utsname u;
	int r;

	memset(ret, 0, sizeof(*ret));
	if (uname(&u) == 0)
		snprintf(ret->release, sizeof(ret->release), "%s", u.release);

	snprintf(path, sizeof(path), "%s/sys/kernel/notes", root);
	if (sr_read_file(path, 1 << 20, &buf, &len) == 0) {
		r = agent_elf_note_build_id(buf, len, 4, ret->build_id);
		if (r > 0)
			ret->build_id_len = (size_t)r;
		SR_FREE(buf);
	}
	snprintf(path, sizeof(path), "%s/proc/sys/kernel/random/boot_id", root);
	if (sr_read_file(path, 4096, &buf, &len) == 0) {
		while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == ' '))
			len--;
		snprintf(ret->boot_id, sizeof(ret->boot_id), "%.*s", (int)len, buf);
		SR_FREE(buf);
	}
	/* Without CAP_SYSLOG both read 0: every frame stays a runtime address. */
	snprintf(path, sizeof(path), "%s/proc/kallsyms", root);
	read_text(path, ret);
	snprintf(path, sizeof(path), "%s/proc/modules", root);
	if (sr_read_file(path, 16 << 20, &buf, &len) == 0) {
		r = agent_kernel_parse_modules(buf, len, &ret->modules, &ret->n_modules);
		SR_FREE(buf);
		if (r < 0)
			return r;
		ret->cap_modules = ret->n_modules;
		for (size_t i = 0; i < ret->n_modules; i++)
			read_module_build_id(root, &ret->modules[i]);
	}
	r = agent_kernel_finish(ret);
	if (r < 0)
		agent_kernel_done(ret);
	return r;
}

int agent_kernel_refresh_modules(struct agent_kernel *k, const char *root)
{
	struct agent_kernel_module *now = NULL;
	char path[4096], *buf = NULL;
	size_t len, n_now = 0, n_new = 0, n = k->n_modules, room;
	bool changed = false;
	bool *seen = NULL;
	int r;

	snprintf(path, sizeof(path), "%s/proc/modules", root);
	r = sr_read_file(path, 16 << 20, &buf, &len);
	if (r < 0)
		return r;
	r = agent_kernel_parse_modules(buf, len, &now, &n_now);
	free(buf);
	if (r < 0)
		return r;
	/* Room for every new module the bound below lets in. */
	room = n < AGENT_KERNEL_MAX_MODULES ? SR_MIN(n_now, AGENT_KERNEL_MAX_MODULES - n) : 0;
	seen = calloc(n + 1, sizeof(*seen));
	if (!seen || sr_grow((void **)&k->modules, &k->cap_modules, n + room, sizeof(*k->modules), 16) < 0) {
		free(seen);
		free(now);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n_now; i++) {
		size_t j;

		for (j = 0; j < n; j++) {
			const struct agent_kernel_module *m = &k->modules[j];
			if (!seen[j] && m->start == now[i].start && m->size == now[i].size &&
			    strcmp(m->name, now[i].name) == 0)
				break;
		}
		if (j < n) {
			seen[j] = true;
			continue;
		}
		/* New (or moved): a new index, so stacks that named the old one keep their meaning. */
		if (n + n_new >= AGENT_KERNEL_MAX_MODULES)
			continue;
		k->modules[n + n_new] = now[i];
		read_module_build_id(root, &k->modules[n + n_new]);
		agent_kernel_module_id(k, &k->modules[n + n_new]);
		n_new++;
		changed = true;
	}
	for (size_t j = 0; j < n; j++) {
		if (k->modules[j].live != seen[j])
			changed = true;
		k->modules[j].live = seen[j];
	}
	for (size_t j = n; j < n + n_new; j++)
		k->modules[j].live = true;
	k->n_modules = n + n_new;
	free(seen);
	free(now);
	if (!changed)
		return 0;
	r = agent_kernel_index_modules(k);
	return r < 0 ? r : 1;
}
