// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/fsopen.h"

#define BASE_FLAGS (O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)

/* A path deeper than this is not a file anyone maps; it bounds the walk. */
#define WALK_MAX_COMPONENTS 128

int sr_fs_openat_walk(int dirfd, const char *path, int extra_flags)
{
	char buf[PATH_MAX];
	char *save = NULL, *comp, *next;
	size_t len = strlen(path);
	int cur = -1, fd, r, depth = 0;

	if (len == 0)
		return -ENOENT;
	if (len >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, len + 1);

	comp = strtok_r(buf, "/", &save);
	if (!comp)
		return -EISDIR; /* "/" alone: the root itself is no file to read */
	for (;;) {
		next = strtok_r(NULL, "/", &save);
		if (strcmp(comp, ".") == 0) {
			if (!next) {
				r = -EISDIR;
				goto out;
			}
			comp = next;
			continue;
		}
		if (strcmp(comp, "..") == 0) {
			r = -EXDEV;
			goto out;
		}
		if (++depth > WALK_MAX_COMPONENTS) {
			r = -ELOOP;
			goto out;
		}
		if (!next)
			break;
		/* O_DIRECTORY with O_NOFOLLOW fails on a symlink: no link is ever followed. */
		fd = openat(cur >= 0 ? cur : dirfd, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0) {
			r = errno == ENOTDIR ? -ELOOP : -errno;
			goto out;
		}
		if (cur >= 0)
			close(cur);
		cur = fd;
		comp = next;
	}
	fd = openat(cur >= 0 ? cur : dirfd, comp, BASE_FLAGS | extra_flags);
	r = fd < 0 ? -errno : fd;
out:
	if (cur >= 0)
		close(cur);
	return r;
}

int sr_fs_openat(int dirfd, const char *path, enum sr_fs_scope scope, int extra_flags)
{
	struct open_how how = {
		.flags = (uint64_t)(BASE_FLAGS | extra_flags),
		.resolve = RESOLVE_NO_MAGICLINKS | (scope == SR_FS_IN_ROOT ? RESOLVE_IN_ROOT : RESOLVE_BENEATH),
	};
	long fd;

	if (!path || !*path)
		return -ENOENT;
	fd = syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
	if (fd >= 0)
		return (int)fd;
	if (errno != ENOSYS && errno != E2BIG && errno != EPERM)
		return -errno;
	/*
	 * No openat2 (before 5.6), or a seccomp filter that refuses it with EPERM
	 * as older container runtimes' default profiles did: walk instead. An
	 * absolute path under SR_FS_BENEATH is refused as openat2 would.
	 */
	if (scope == SR_FS_BENEATH && path[0] == '/')
		return -EXDEV;
	return sr_fs_openat_walk(dirfd, path, extra_flags);
}

int sr_fs_check_regular(int fd, uint64_t max_size, struct stat *ret_st)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	if (max_size && (uint64_t)st.st_size > max_size)
		return -EFBIG;
	if (ret_st)
		*ret_st = st;
	return 0;
}

int sr_fs_open_regular(int dirfd, const char *path, enum sr_fs_scope scope, uint64_t max_size, struct stat *ret_st)
{
	int fd = sr_fs_openat(dirfd, path, scope, 0), r;

	if (fd < 0)
		return fd;
	r = sr_fs_check_regular(fd, max_size, ret_st);
	if (r < 0) {
		close(fd);
		return r;
	}
	return fd;
}
