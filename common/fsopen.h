/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Opening files that another party controls: a container's root, a debug
 * directory an upload names a path under. A plain open() of such a path
 * follows symlinks out of the tree, blocks on a FIFO and reads a device; these
 * functions refuse all three.
 */
#ifndef SR_FSOPEN_H
#define SR_FSOPEN_H

#include <stdint.h>
#include <sys/stat.h>

enum sr_fs_scope {
	/*
	 * The path is resolved as if dirfd were "/": absolute symlinks and ".."
	 * stay inside it (a container's /proc/PID/root). Magic links such as
	 * /proc/self/fd/N are refused.
	 */
	SR_FS_IN_ROOT,
	/* Nothing may leave dirfd: "..", absolute paths and symlinks that point out are refused. */
	SR_FS_BENEATH,
};

/*
 * Opens path below dirfd read-only with O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK
 * (plus extra_flags) under scope, with openat2(2); on kernels without it,
 * with sr_fs_openat_walk(). Returns the fd or -errno (-EXDEV for a path that
 * would leave the tree).
 */
int sr_fs_openat(int dirfd, const char *path, enum sr_fs_scope scope, int extra_flags);

/*
 * The fallback for kernels before 5.6: one component at a time with
 * O_NOFOLLOW, so no symlink is followed at all (stricter than openat2 with
 * RESOLVE_IN_ROOT, which follows links that stay inside), and ".." is refused
 * with -EXDEV. A leading "/" means dirfd. Exported for tests.
 */
int sr_fs_openat_walk(int dirfd, const char *path, int extra_flags);

/*
 * fstat()s fd and accepts a regular file of at most max_size bytes (0: any
 * size): -EINVAL for anything else (FIFO, socket, device, directory), -EFBIG
 * when larger. ret_st may be NULL.
 */
int sr_fs_check_regular(int fd, uint64_t max_size, struct stat *ret_st);

/* sr_fs_openat() and then sr_fs_check_regular(); the fd is closed on refusal. */
int sr_fs_open_regular(int dirfd, const char *path, enum sr_fs_scope scope, uint64_t max_size, struct stat *ret_st);

#endif
