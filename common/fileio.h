/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Small file-system helpers: reading a whole small file (/proc and /sys files,
 * tokens, kubeconfigs, config references) and making a directory path.
 */
#ifndef SR_FILEIO_H
#define SR_FILEIO_H

#include <stddef.h>

/*
 * Reads path (relative to dirfd, or AT_FDCWD) into a malloc'd, NUL-terminated
 * buffer, until end of file: /proc files say size 0 and are read whole. Only a
 * regular file is read (opened O_NONBLOCK, so a FIFO put there cannot block
 * the caller): -EINVAL for anything else, -EFBIG past max bytes, else -errno.
 * Symlinks are followed: the path is the caller's (or the kernel's), not a
 * peer's; a path another party controls goes through common/fsopen.h.
 * ret_len may be NULL.
 */
int sr_read_fileat(int dirfd, const char *path, size_t max, char **ret_buf, size_t *ret_len);
int sr_read_file(const char *path, size_t max, char **ret_buf, size_t *ret_len);
/*
 * The same into the caller's buffer of size bytes (at most size - 1 read, then
 * a NUL): no allocation, for a file read at every event (/proc/PID/stat for
 * each new process). -EFBIG when the file holds more than size - 1 bytes.
 */
int sr_read_fileat_into(int dirfd, const char *path, char *buf, size_t size, size_t *ret_len);

/* mkdir -p with mode 0700 for each directory it makes: 0, or -ENAMETOOLONG / -errno. */
int sr_mkdir_p(const char *path);

#endif
