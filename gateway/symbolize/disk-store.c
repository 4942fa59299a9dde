/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/fileio.h"
#include "common/grow.h"
#include "disk-store.h"

struct file {
	char *path;
	uint64_t size;
	int64_t mtime; /* nanoseconds: the LRU clock */
};

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

struct gw_disk_store {
	char *dir;
	uint64_t max_bytes;
	uint64_t bytes;
	pthread_mutex_t lock;
	struct file *files;
	size_t n_files, cap_files;
	unsigned tmp_seq;
};

static int track(struct gw_disk_store *st, const char *path, uint64_t size, int64_t mtime)
{
	for (size_t i = 0; i < st->n_files; i++) {
		if (strcmp(st->files[i].path, path) == 0) {
			st->bytes -= st->files[i].size;
			st->files[i].size = size;
			st->files[i].mtime = mtime;
			st->bytes += size;
			return 0;
		}
	}
	int r = sr_grow((void **)&st->files, &st->cap_files, st->n_files + 1, sizeof(*st->files), 64);

	if (r < 0)
		return r;
	char *p = strdup(path);
	if (!p)
		return -ENOMEM;
	st->files[st->n_files++] = (struct file){ .path = p, .size = size, .mtime = mtime };
	st->bytes += size;
	return 0;
}

static void touch(struct gw_disk_store *st, const char *path)
{
	int64_t now = now_ns();

	/* mtime is the LRU clock: refreshed on use so hot files survive eviction. */
	(void)utimensat(AT_FDCWD, path, NULL, 0);
	for (size_t i = 0; i < st->n_files; i++) {
		if (strcmp(st->files[i].path, path) == 0) {
			st->files[i].mtime = now;
			return;
		}
	}
}

static int file_cmp(const void *a, const void *b)
{
	const struct file *x = a, *y = b;

	return x->mtime < y->mtime ? -1 : (x->mtime > y->mtime);
}

/* Deletes the oldest files until the store fits, keeping keep (the file just written). */
static void evict(struct gw_disk_store *st, const char *keep)
{
	if (st->bytes <= st->max_bytes)
		return;
	qsort(st->files, st->n_files, sizeof(*st->files), file_cmp);
	size_t w = 0;
	for (size_t i = 0; i < st->n_files; i++) {
		struct file *f = &st->files[i];
		if (st->bytes > st->max_bytes && strcmp(f->path, keep) != 0) {
			(void)unlink(f->path);
			st->bytes -= f->size;
			free(f->path);
			continue;
		}
		st->files[w++] = *f;
	}
	st->n_files = w;
}

static void scan(struct gw_disk_store *st, const char *sub)
{
	char path[PATH_MAX];
	DIR *top;
	struct dirent *de;

	snprintf(path, sizeof(path), "%s/%s", st->dir, sub);
	top = opendir(path);
	if (!top)
		return;
	while ((de = readdir(top))) {
		char d2[PATH_MAX];
		DIR *inner;
		struct dirent *fe;
		if (de->d_name[0] == '.' || strlen(de->d_name) != 2)
			continue;
		if ((size_t)snprintf(d2, sizeof(d2), "%s/%s", path, de->d_name) >= sizeof(d2))
			continue;
		inner = opendir(d2);
		if (!inner)
			continue;
		while ((fe = readdir(inner))) {
			char fp[PATH_MAX];
			struct stat sb;
			if (fe->d_name[0] == '.')
				continue;
			if ((size_t)snprintf(fp, sizeof(fp), "%s/%s", d2, fe->d_name) >= sizeof(fp))
				continue;
			if (lstat(fp, &sb) == 0 && S_ISREG(sb.st_mode)) {
				/* Leftover temporaries of a crash are garbage. */
				if (strstr(fe->d_name, ".tmp."))
					(void)unlink(fp);
				else
					(void)track(st, fp, (uint64_t)sb.st_size,
						    (int64_t)sb.st_mtim.tv_sec * 1000000000LL + sb.st_mtim.tv_nsec);
			}
		}
		closedir(inner);
	}
	closedir(top);
}

struct gw_disk_store *gw_disk_store_new(const char *dir, uint64_t max_bytes)
{
	struct gw_disk_store *st = calloc(1, sizeof(*st));
	char path[PATH_MAX];
	int r = -ENOMEM;

	if (!st)
		goto fail;
	pthread_mutex_init(&st->lock, NULL);
	st->max_bytes = max_bytes;
	st->dir = strdup(dir);
	if (!st->dir)
		goto fail;
	snprintf(path, sizeof(path), "%s/symtab", dir);
	if ((r = sr_mkdir_p(path)) < 0)
		goto fail;
	snprintf(path, sizeof(path), "%s/.build-id", dir);
	if ((r = sr_mkdir_p(path)) < 0)
		goto fail;
	scan(st, "symtab");
	scan(st, ".build-id");
	evict(st, "");
	return st;
fail:
	gw_disk_store_free(st);
	errno = -r;
	return NULL;
}

void gw_disk_store_free(struct gw_disk_store *st)
{
	if (!st)
		return;
	for (size_t i = 0; i < st->n_files; i++)
		free(st->files[i].path);
	free(st->files);
	free(st->dir);
	pthread_mutex_destroy(&st->lock);
	free(st);
}

static int entry_path(struct gw_disk_store *st, const char *sub, const char *hex, const char *suffix, char *buf,
		      size_t size, bool mkdirs)
{
	size_t hl = strlen(hex);

	if (hl < 3 || strspn(hex, "0123456789abcdef") != hl)
		return -EINVAL;
	if ((size_t)snprintf(buf, size, "%s/%s/%.2s", st->dir, sub, hex) >= size)
		return -ENAMETOOLONG;
	if (mkdirs && mkdir(buf, 0700) < 0 && errno != EEXIST)
		return -errno;
	if ((size_t)snprintf(buf, size, "%s/%s/%.2s/%s%s", st->dir, sub, hex, hex + 2, suffix) >= size)
		return -ENAMETOOLONG;
	return 0;
}

static const char *table_suffix(enum gw_disk_store_source src)
{
	return src == GW_DISK_STORE_UPLOAD ? ".upload.sym" : ".sym";
}

int gw_disk_store__read_table(struct gw_disk_store *st, enum gw_disk_store_source src, const char *hex, size_t max_len,
			      void **ret, size_t *ret_len)
{
	char path[PATH_MAX];
	struct stat sb;
	void *buf = NULL;
	int fd, r;

	r = entry_path(st, "symtab", hex, table_suffix(src), path, sizeof(path), false);
	if (r < 0)
		return r;
	/* Only a regular file: whatever else sits in cache_dir (a FIFO) must not hang a worker. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &sb) < 0) {
		r = -errno;
		goto out;
	}
	if (!S_ISREG(sb.st_mode)) {
		r = -EINVAL;
		goto out;
	}
	if ((uint64_t)sb.st_size > max_len) {
		r = -EFBIG;
		goto out;
	}
	buf = malloc((size_t)sb.st_size + 1);
	if (!buf) {
		r = -ENOMEM;
		goto out;
	}
	size_t got = 0;
	while (got < (size_t)sb.st_size) {
		ssize_t n = read(fd, (char *)buf + got, (size_t)sb.st_size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			r = n < 0 ? -errno : -EIO;
			goto out;
		}
		got += (size_t)n;
	}
	pthread_mutex_lock(&st->lock);
	touch(st, path);
	pthread_mutex_unlock(&st->lock);
	*ret = buf;
	*ret_len = got;
	buf = NULL;
	r = 0;
out:
	free(buf);
	close(fd);
	return r;
}

int gw_disk_store__write_table(struct gw_disk_store *st, enum gw_disk_store_source src, const char *hex,
			       const void *buf, size_t len)
{
	char path[PATH_MAX], tmp[PATH_MAX + 32];
	int fd, r;

	pthread_mutex_lock(&st->lock);
	r = entry_path(st, "symtab", hex, table_suffix(src), path, sizeof(path), true);
	if (r < 0)
		goto out;
	snprintf(tmp, sizeof(tmp), "%s.tmp.%d.%u", path, (int)getpid(), st->tmp_seq++);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		r = -errno;
		goto out;
	}
	for (size_t off = 0; off < len;) {
		ssize_t n = write(fd, (const char *)buf + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			r = n < 0 ? -errno : -EIO;
			close(fd);
			(void)unlink(tmp);
			goto out;
		}
		off += (size_t)n;
	}
	close(fd);
	if (rename(tmp, path) < 0) {
		r = -errno;
		(void)unlink(tmp);
		goto out;
	}
	r = track(st, path, len, now_ns());
	evict(st, path);
out:
	pthread_mutex_unlock(&st->lock);
	return r;
}

int gw_disk_store__debug_path(struct gw_disk_store *st, const char *hex, char *buf, size_t size)
{
	int r = entry_path(st, ".build-id", hex, ".debug", buf, size, false);

	if (r < 0)
		return r;
	if (access(buf, R_OK) < 0)
		return -errno;
	pthread_mutex_lock(&st->lock);
	touch(st, buf);
	pthread_mutex_unlock(&st->lock);
	return 0;
}

static int copy_file(const char *src, const char *dst)
{
	char chunk[65536];
	int in = open(src, O_RDONLY | O_CLOEXEC), out = -1, r = 0;

	if (in < 0)
		return -errno;
	out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (out < 0) {
		r = -errno;
		goto done;
	}
	for (;;) {
		ssize_t n = read(in, chunk, sizeof(chunk));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = -errno;
			break;
		}
		if (n == 0)
			break;
		for (ssize_t off = 0; off < n;) {
			ssize_t w = write(out, chunk + off, (size_t)(n - off));
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				r = w < 0 ? -errno : -EIO;
				goto done;
			}
			off += w;
		}
	}
done:
	if (out >= 0)
		close(out);
	close(in);
	return r;
}

int gw_disk_store__adopt_debug(struct gw_disk_store *st, const char *hex, const char *src, char *buf, size_t size)
{
	char tmp[PATH_MAX + 32];
	struct stat sb;
	int r;

	pthread_mutex_lock(&st->lock);
	r = entry_path(st, ".build-id", hex, ".debug", buf, size, true);
	if (r < 0)
		goto out;
	if (rename(src, buf) < 0) {
		/* Another file system: copy to a temporary, then rename. */
		snprintf(tmp, sizeof(tmp), "%s.tmp.%d.%u", buf, (int)getpid(), st->tmp_seq++);
		r = copy_file(src, tmp);
		if (r < 0 || rename(tmp, buf) < 0) {
			r = r < 0 ? r : -errno;
			(void)unlink(tmp);
			goto out;
		}
	}
	/* A renamed download keeps the debuginfod client's mode: debug files stay private to the gateway. */
	if (chmod(buf, 0600) < 0 || stat(buf, &sb) < 0) {
		r = -errno;
		goto out;
	}
	r = track(st, buf, (uint64_t)sb.st_size, now_ns());
	evict(st, buf);
out:
	pthread_mutex_unlock(&st->lock);
	return r;
}

uint64_t gw_disk_store__bytes(struct gw_disk_store *st)
{
	uint64_t b;

	pthread_mutex_lock(&st->lock);
	b = st->bytes;
	pthread_mutex_unlock(&st->lock);
	return b;
}
