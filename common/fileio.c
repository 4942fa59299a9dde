// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fileio.h"
#include "common/grow.h"

/* path opened for reading if it is a regular file (O_NONBLOCK: a FIFO put there cannot block): fd or -errno. */
static int open_regular(int dirfd, const char *path)
{
	struct stat st;
	int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		int r = -errno;
		close(fd);
		return r;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	return fd;
}

/* Reads until end of file or until cap bytes are in: the bytes read, or -errno. */
static ssize_t read_full(int fd, char *buf, size_t cap)
{
	size_t len = 0;

	while (len < cap) {
		ssize_t n = read(fd, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		len += (size_t)n;
	}
	return (ssize_t)len;
}

int sr_read_fileat(int dirfd, const char *path, size_t max, char **ret_buf, size_t *ret_len)
{
	size_t len = 0, cap = 4096;
	char *buf = NULL;
	int fd, r;

	fd = open_regular(dirfd, path);
	if (fd < 0)
		return fd;
	buf = malloc(cap);
	if (!buf) {
		r = -ENOMEM;
		goto fail;
	}
	for (;;) {
		ssize_t n = read_full(fd, buf + len, cap - len - 1);
		if (n < 0) {
			r = (int)n;
			goto fail;
		}
		len += (size_t)n;
		if (len + 1 < cap)
			break; /* end of file before the buffer filled */
		if (cap > max) {
			r = -EFBIG;
			goto fail;
		}
		if (sr_grow((void **)&buf, &cap, cap + 1, 1, 1) < 0) {
			r = -ENOMEM;
			goto fail;
		}
	}
	if (len > max) {
		r = -EFBIG;
		goto fail;
	}
	close(fd);
	buf[len] = '\0';
	*ret_buf = buf;
	if (ret_len)
		*ret_len = len;
	return 0;
fail:
	free(buf);
	close(fd);
	return r;
}

int sr_read_fileat_into(int dirfd, const char *path, char *buf, size_t size, size_t *ret_len)
{
	ssize_t n;
	char more;
	int fd;

	if (size == 0)
		return -EINVAL;
	fd = open_regular(dirfd, path);
	if (fd < 0)
		return fd;
	n = read_full(fd, buf, size - 1);
	/* Full: one byte more says whether the file goes on past the buffer. */
	if (n == (ssize_t)(size - 1) && read_full(fd, &more, 1) == 1)
		n = -EFBIG;
	close(fd);
	if (n < 0)
		return (int)n;
	buf[n] = '\0';
	if (ret_len)
		*ret_len = (size_t)n;
	return 0;
}

int sr_read_file(const char *path, size_t max, char **ret_buf, size_t *ret_len)
{
	return sr_read_fileat(AT_FDCWD, path, max, ret_buf, ret_len);
}

int sr_mkdir_p(const char *path)
{
	char buf[PATH_MAX];
	size_t len = strlen(path);

	if (len == 0 || len >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, len + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0700) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, 0700) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}
