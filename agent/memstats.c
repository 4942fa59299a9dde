// SPDX-License-Identifier: Apache-2.0
/*
 * What the agent's memory is made of, for /metrics: its resident pages by
 * kind (BPF map pages mapped into it, anonymous memory, files) from
 * /proc/self/smaps, and the kernel memory of every BPF map it holds, summed
 * by map name, from the map's own info and /proc/self/fdinfo (memlock).
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "common/fileio.h"
#include "memstats.h"
#include "util.h"

/* smaps of an agent is a few hundred lines; fdinfo a few. */
#define SMAPS_MAX  (4u << 20)
#define FDINFO_MAX 4096

int agent_memstats_rss(struct agent_rss *ret)
{
	char *buf = NULL, *line, *save = NULL;
	size_t len;
	int kind = 1, r;

	memset(ret, 0, sizeof(*ret));
	r = sr_read_file("/proc/self/smaps", SMAPS_MAX, &buf, &len);
	if (r < 0)
		return r;
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char first[64] = "", name[64] = "";
		unsigned long long kb;
		size_t fl;

		if (sscanf(line, "%63s", first) != 1)
			continue;
		fl = strlen(first);
		if (fl && first[fl - 1] != ':') {
			/* A mapping's header, "start-end perms offset dev inode [name]": the kind of what follows. */
			if (sscanf(line, "%*s %*s %*s %*s %*s %63s", name) != 1)
				name[0] = '\0';
			kind = !strncmp(name, "anon_inode:bpf", 14) ? 0 : name[0] == '/' ? 2 : 1;
		} else if (sscanf(line, "Rss: %llu kB", &kb) == 1) {
			uint64_t b = (uint64_t)kb * 1024;
			ret->total += b;
			if (kind == 0)
				ret->bpf_maps += b;
			else if (kind == 2)
				ret->files += b;
			else
				ret->anonymous += b;
		}
	}
	free(buf);
	return 0;
}

static uint64_t fdinfo_memlock(int fd)
{
	char path[64], *buf = NULL, *p;
	size_t len;
	unsigned long long v = 0;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	if (sr_read_file(path, FDINFO_MAX, &buf, &len) < 0)
		return 0;
	p = strstr(buf, "memlock:");
	if (!p || sscanf(p, "memlock: %llu", &v) != 1)
		v = 0;
	free(buf);
	return v;
}

/*
 * What the map holds in kernel memory. fdinfo's memlock says so from 6.4 on;
 * before, it is key and value sizes times entries, which is 0 for a ring
 * buffer (no key, no value): there it is computed as 6.4 does, the data
 * pages, three pages of positions and header, and the page pointers of the
 * data mapped twice.
 */
uint64_t agent_memstats_ringbuf_bytes(uint64_t data_bytes, uint64_t page_size)
{
	uint64_t data = data_bytes / page_size;

	return (3 + data) * page_size + (3 + 2 * data) * sizeof(void *);
}

static uint64_t map_bytes(int fd, const struct bpf_map_info *info)
{
	uint64_t v = fdinfo_memlock(fd);

	if (v || info->type != BPF_MAP_TYPE_RINGBUF)
		return v;
	return agent_memstats_ringbuf_bytes(info->max_entries, (uint64_t)sysconf(_SC_PAGESIZE));
}

int agent_memstats_bpf_maps(struct agent_bpf_map_mem *out, size_t max, size_t *ret_n)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	size_t n = 0;

	*ret_n = 0;
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		char path[64], target[64];
		struct bpf_map_info info;
		uint32_t ilen = sizeof(info);
		ssize_t tl;
		int fd;
		size_t i;

		if (de->d_name[0] == '.')
			continue;
		fd = atoi(de->d_name);
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		tl = readlink(path, target, sizeof(target) - 1);
		if (tl <= 0)
			continue;
		target[tl] = '\0';
		if (strcmp(target, "anon_inode:bpf-map") != 0)
			continue;
		memset(&info, 0, sizeof(info));
		if (bpf_obj_get_info_by_fd(fd, &info, &ilen) != 0)
			continue;
		for (i = 0; i < n && strcmp(out[i].name, info.name) != 0; i++)
			;
		if (i == n) {
			if (n == max)
				i = max - 1; /* the last slot collects what does not fit */
			else {
				snprintf(out[n].name, sizeof(out[n].name), "%s", info.name[0] ? info.name : "unnamed");
				out[n].bytes = 0;
				out[n].maps = 0;
				n++;
			}
		}
		out[i].bytes += map_bytes(fd, &info);
		out[i].maps++;
	}
	closedir(d);
	*ret_n = n;
	return 0;
}
