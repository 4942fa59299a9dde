// SPDX-License-Identifier: Apache-2.0
/*
 * What one mapping of a process answers: the mapping that holds an address,
 * its load bias, its file's path, and whether the file is still the one the
 * mapping was identified as. The list itself is kept by proc.c.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/search.h"
#include "container-open.h"
#include "proc.h"
#include "proc-private.h"

const struct agent_proc_map *agent_proc__find_map(const struct agent_proc *proc, uint64_t addr)
{
	size_t at = SR_PARTITION_POINT(proc->n_maps, i, proc->maps[i].start <= addr);

	return at > 0 && addr < proc->maps[at - 1].end ? &proc->maps[at - 1] : NULL;
}

int agent_proc_map__bias(const struct agent_proc_map *m, uint64_t *ret_bias)
{
	const struct agent_elf_info *e;

	if (!m->exe)
		return -ENOENT;
	e = &m->exe->elf;
	/* The segment the mapping was made for: its page-aligned file range holds the mapping's offset. */
	for (size_t i = 0; i < e->n_segs; i++) {
		const struct agent_elf_segment *s = &e->segs[i];
		if ((s->offset & ~0xfffULL) <= m->offset && m->offset < s->offset + s->filesz) {
			*ret_bias = m->start - m->offset + s->offset - s->vaddr;
			return 0;
		}
	}
	return -ENOENT;
}

int agent_proc_map__path(const struct agent_proc *proc, const struct agent_proc_map *m, char *ret, size_t cap)
{
	char link[96];
	ssize_t n;

	if (cap < 2)
		return -EINVAL;
	/* Known since the file was identified: no link to read for each runtime that asks (python, nodejs, java). */
	if (m->exe && m->exe->path) {
		n = (ssize_t)strlen(m->exe->path);
		if ((size_t)n >= cap)
			return -ENAMETOOLONG;
		memcpy(ret, m->exe->path, (size_t)n + 1);
		return 0;
	}
	agent_map_files_path(link, sizeof(link), proc->pid, m->start, m->end);
	n = readlink(link, ret, cap - 1);
	if (n < 0)
		return -errno;
	ret[n] = '\0';
	return 0;
}

bool agent_proc_map__current(const struct agent_proc *proc, const struct agent_proc_map *m)
{
	const uint64_t *key;
	char link[96];
	struct stat st;

	if (!m->exe)
		return false;
	key = agent_exe__key(m->exe);
	agent_map_files_path(link, sizeof(link), proc->pid, m->start, m->end);
	return stat(link, &st) == 0 && (uint64_t)st.st_dev == key[0] && (uint64_t)st.st_ino == key[1];
}
