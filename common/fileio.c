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

int sr_read_fileat(int dirfd, const char *path, size_t max, char **ret_buf, size_t *ret_len)
{
	size_t len = 0, cap = 4096;
	char *buf = NULL;
	struct stat st;
	int fd, r;

	fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		r = -errno;
		goto fail;
	}
	if (!S_ISREG(st.st_mode)) {
		r = -EINVAL;
		goto fail;
	}
	buf = malloc(cap);
	if (!buf) {
		r = -ENOMEM;
		goto fail;
	}
	for (;;) {
		ssize_t n;
		if (len + 1 >= cap) {
			if (cap > max) {
				r = -EFBIG;
				goto fail;
			}
			if (sr_grow((void **)&buf, &cap, cap + 1, 1, 1) < 0) {
				r = -ENOMEM;
				goto fail;
			}
		}
		n = read(fd, buf + len, cap - len - 1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			goto fail;
		}
		if (n == 0)
			break;
		len += (size_t)n;
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
