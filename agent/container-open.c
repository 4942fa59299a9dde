// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include "common/fsopen.h"
#include "container-open.h"
#include "parse-limits.h"

void agent_map_files_path(char *ret, size_t cap, uint32_t pid, uint64_t start, uint64_t end)
{
	snprintf(ret, cap, "/proc/%u/map_files/%llx-%llx", pid, (unsigned long long)start, (unsigned long long)end);
}

int agent_open_map_file(uint32_t pid, uint64_t start, uint64_t end, struct stat *ret_st)
{
	char path[96];
	struct stat st, fst;
	int fd, r;

	agent_map_files_path(path, sizeof(path), pid, start, end);
	/*
	 * A map_files entry is a magic link: open() does not resolve a name
	 * the container controls but reopens the mapped file itself, so
	 * RESOLVE_NO_MAGICLINKS would refuse exactly what is wanted here, and
	 * no rename in the container changes what it points to. What can
	 * change is the mapping (unmapped, another file mapped at the same
	 * range): stat() first so nothing but a regular file is opened (a
	 * device's open() can act), O_NONBLOCK so nothing blocks in any case,
	 * and fstat() after to check the descriptor is still that file.
	 */
	if (stat(path, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode)) {
		agent_parse_refused(AGENT_PARSE_NOT_REGULAR);
		return -EINVAL;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	r = sr_fs_check_regular(fd, 0, &fst);
	if (r == 0 && (fst.st_dev != st.st_dev || fst.st_ino != st.st_ino))
		r = -ESTALE;
	if (r < 0) {
		agent_parse_refused(r == -ESTALE ? AGENT_PARSE_IDENTITY : AGENT_PARSE_NOT_REGULAR);
		close(fd);
		return r;
	}
	if (ret_st)
		*ret_st = fst;
	return fd;
}

int agent_open_in_root(uint32_t pid, const char *path, uint64_t dev, uint64_t ino, struct stat *ret_st)
{
	char root_path[64];
	struct stat st;
	int root, fd;

	if (pid)
		snprintf(root_path, sizeof(root_path), "/proc/%u/root", pid);
	else
		snprintf(root_path, sizeof(root_path), "/");
	root = open(root_path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return -errno;
	/* A path from /proc/PID/maps is the kernel's resolved name: a symlink at its end was put there since. */
	fd = sr_fs_open_regular(root, path, SR_FS_IN_ROOT, 0, &st);
	close(root);
	if (fd == -EXDEV || fd == -ELOOP)
		agent_parse_refused(AGENT_PARSE_ESCAPE);
	else if (fd == -EINVAL)
		agent_parse_refused(AGENT_PARSE_NOT_REGULAR);
	if (fd < 0)
		return fd;
	if ((dev && (uint64_t)st.st_dev != dev) || (ino && (uint64_t)st.st_ino != ino)) {
		agent_parse_refused(AGENT_PARSE_IDENTITY);
		close(fd);
		return -ESTALE;
	}
	if (ret_st)
		*ret_st = st;
	return fd;
}
