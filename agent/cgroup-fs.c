// SPDX-License-Identifier: Apache-2.0
/* The cgroup v2 mount and cgroup IDs (agent/cgroup-fs.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#include "common/fileio.h"
#include "cgroup-fs.h"

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

int agent_cgroup2_mount(char *buf, size_t size)
{
	char *mi = NULL, *line, *save = NULL;
	size_t len;
	int r = -ENOENT;

	if (sr_read_file("/proc/self/mountinfo", 4 << 20, &mi, &len) < 0)
		return -ENOENT;
	for (line = strtok_r(mi, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		/* id parent major:minor root mountpoint options [optional...] - fstype source superopts */
		char *sep = strstr(line, " - ");
		char mnt[4096];
		if (!sep || strncmp(sep + 3, "cgroup2 ", 8) != 0)
			continue;
		if (sscanf(line, "%*s %*s %*s %*s %4095s", mnt) == 1 && strlen(mnt) < size) {
			memcpy(buf, mnt, strlen(mnt) + 1);
			r = 0;
			break;
		}
	}
	free(mi);
	return r;
}

static int cgroup_id_of(const char *path, uint64_t *ret_id)
{
	struct statfs sfs;
	struct {
		struct file_handle fh;
		uint64_t id;
	} h;
	int mount_id;

	if (statfs(path, &sfs) < 0)
		return -errno;
	if ((unsigned long)sfs.f_type != CGROUP2_SUPER_MAGIC)
		return -ENOTDIR;
	/* A cgroup's ID is its kernfs node ID, which is the file handle (and st_ino on 64-bit). */
	h.fh.handle_bytes = sizeof(uint64_t);
	if (name_to_handle_at(AT_FDCWD, path, &h.fh, &mount_id, 0) == 0 && h.fh.handle_bytes == sizeof(uint64_t)) {
		memcpy(ret_id, h.fh.f_handle, sizeof(uint64_t));
		return 0;
	}
	struct stat st;
	if (stat(path, &st) < 0)
		return -errno;
	*ret_id = (uint64_t)st.st_ino;
	return 0;
}

int agent_cgroup_id(const char *spec, uint64_t *ret_id)
{
	static const char prefix[] = "/sys/fs/cgroup";
	char mnt[4096], path[8192];
	const char *rel = spec;
	int r;

	if (spec[0] == '/') {
		r = cgroup_id_of(spec, ret_id);
		if (r != -ENOTDIR && r != -ENOENT)
			return r;
		/* /sys/fs/cgroup/X on a hybrid host lives under the cgroup2 mount (e.g. .../unified/X). */
		if (strncmp(spec, prefix, sizeof(prefix) - 1) != 0)
			return r;
		rel = spec + sizeof(prefix) - 1;
	}
	while (*rel == '/')
		rel++;
	if (agent_cgroup2_mount(mnt, sizeof(mnt)) < 0)
		return -ENOENT;
	snprintf(path, sizeof(path), "%s/%s", mnt, rel);
	return cgroup_id_of(path, ret_id);
}
