// SPDX-License-Identifier: Apache-2.0
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#include "common/fileio.h"
#include "common/grow.h"
#include "common/macro.h"
#include "local.h"
#include "queue.h"

#define QUEUE_MAGIC  "SRQ1"
#define QUEUE_FORMAT 1
#define QUEUE_SUFFIX ".srq"

struct gw_queue {
	uint64_t max_bytes;
	char *dir; /* NULL: memory only */
	int dir_fd, lock_fd;
	struct gw_queue_item *head, *tail; /* waiting, oldest first */
	struct gw_queue_item *flying;	   /* popped, not done: a list through prev/next */
	size_t n_waiting, n_in_flight;
	uint64_t bytes, samples;
	uint64_t next_seq;
	char corrupt_path[PATH_MAX];
	/* The disk could not take an item: held items and why (docs/exporters.md, "Sending queue"). */
	int disk_error;
	uint64_t failed_bytes; /* size of the write that failed: what a probe must write */
	size_t n_held;
	uint64_t held_bytes;
};

#define QUEUE_PROBE_NAME ".probe.tmp"

static uint64_t item_bytes(const struct gw_queue *q, const struct gw_queue_item *it)
{
	return it->len + (q->dir ? GW_QUEUE_HEADER_SIZE + it->metadata_len : 0);
}

static void item_free(struct gw_queue_item *it)
{
	free(it->data);
	free(it->metadata);
	free(it);
}

static void put_u32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put_u64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_u32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get_u64(const uint8_t *p)
{
	return (uint64_t)get_u32(p) | (uint64_t)get_u32(p + 4) << 32;
}

static void list_append(struct gw_queue *q, struct gw_queue_item *it)
{
	it->prev = q->tail;
	it->next = NULL;
	if (q->tail)
		q->tail->next = it;
	else
		q->head = it;
	q->tail = it;
	q->n_waiting++;
}

static void list_prepend(struct gw_queue *q, struct gw_queue_item *it)
{
	it->next = q->head;
	it->prev = NULL;
	if (q->head)
		q->head->prev = it;
	else
		q->tail = it;
	q->head = it;
	q->n_waiting++;
}

static void list_remove(struct gw_queue *q, struct gw_queue_item *it)
{
	if (it->prev)
		it->prev->next = it->next;
	else
		q->head = it->next;
	if (it->next)
		it->next->prev = it->prev;
	else
		q->tail = it->prev;
	it->prev = it->next = NULL;
	q->n_waiting--;
}

static void flying_add(struct gw_queue *q, struct gw_queue_item *it)
{
	it->prev = NULL;
	it->next = q->flying;
	if (q->flying)
		q->flying->prev = it;
	q->flying = it;
	it->in_flight = true;
	q->n_in_flight++;
}

static void flying_remove(struct gw_queue *q, struct gw_queue_item *it)
{
	if (!it->in_flight)
		return;
	if (it->prev)
		it->prev->next = it->next;
	else
		q->flying = it->next;
	if (it->next)
		it->next->prev = it->prev;
	it->prev = it->next = NULL;
	it->in_flight = false;
	q->n_in_flight--;
}

static void item_name(char *buf, size_t size, uint64_t seq, bool tmp)
{
	if (tmp)
		snprintf(buf, size, ".%016" PRIx64 ".tmp", seq);
	else
		snprintf(buf, size, "%016" PRIx64 QUEUE_SUFFIX, seq);
}

/* The checksum of what follows the header: the metadata, then the payload. */
static uint32_t body_crc(const char *meta, uint32_t meta_len, const uint8_t *data, size_t len)
{
	uLong c = crc32(0, (const Bytef *)meta, meta_len);

	return (uint32_t)crc32(c, data, (uInt)len);
}

static void header_encode(uint8_t h[GW_QUEUE_HEADER_SIZE], uint32_t flags, uint64_t samples, const char *meta,
			  uint32_t meta_len, const uint8_t *data, size_t len)
{
	memcpy(h, QUEUE_MAGIC, 4);
	put_u32(h + 4, QUEUE_FORMAT);
	put_u32(h + 8, flags);
	put_u32(h + 12, meta_len);
	put_u64(h + 16, samples);
	put_u64(h + 24, len);
	put_u32(h + 32, body_crc(meta, meta_len, data, len));
	put_u32(h + 36, (uint32_t)crc32(0, h, 36));
}

/* 0 with the fields, or -EBADMSG. */
static int header_decode(const uint8_t h[GW_QUEUE_HEADER_SIZE], uint32_t *flags, uint64_t *samples, uint64_t *len,
			 uint32_t *meta_len, uint32_t *payload_crc)
{
	if (memcmp(h, QUEUE_MAGIC, 4) != 0 || get_u32(h + 4) != QUEUE_FORMAT ||
	    get_u32(h + 36) != (uint32_t)crc32(0, h, 36))
		return -EBADMSG;
	*flags = get_u32(h + 8);
	*meta_len = get_u32(h + 12);
	*samples = get_u64(h + 16);
	*len = get_u64(h + 24);
	*payload_crc = get_u32(h + 32);
	if (*len > GW_QUEUE_ITEM_MAX_BYTES || *meta_len > GW_QUEUE_METADATA_MAX)
		return -EBADMSG;
	return 0;
}

static int read_all(int fd, void *buf, size_t len)
{
	uint8_t *p = buf;

	while (len > 0) {
		ssize_t n = read(fd, p, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EBADMSG; /* short file */
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static void move_aside(struct gw_queue *q, const char *name)
{
	char to[NAME_MAX + 16];

	snprintf(to, sizeof(to), "%s.corrupt", name);
	if (renameat(q->dir_fd, name, q->dir_fd, to) == 0)
		snprintf(q->corrupt_path, sizeof(q->corrupt_path), "%s/%s", q->dir, to);
	else
		snprintf(q->corrupt_path, sizeof(q->corrupt_path), "%s/%s", q->dir, name);
	fsync(q->dir_fd);
}

static int cmp_seq(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int replay(struct gw_queue *q, struct gw_queue_replay *rep)
{
	DIR *d;
	struct dirent *de;
	uint64_t *seqs = NULL;
	size_t n = 0, cap = 0;
	int r = 0, dfd;

	dfd = dup(q->dir_fd);
	if (dfd < 0)
		return -errno;
	d = fdopendir(dfd);
	if (!d) {
		r = -errno;
		close(dfd);
		return r;
	}
	while ((de = readdir(d))) {
		const char *name = de->d_name;
		size_t l = strlen(name);
		char *end;
		uint64_t seq;

		if (name[0] == '.' && l > 4 && strcmp(name + l - 4, ".tmp") == 0) {
			/* Written but never renamed: the push never returned, nobody was told it is safe. */
			unlinkat(q->dir_fd, name, 0);
			rep->stale_tmp_files++;
			continue;
		}
		if (l != 16 + strlen(QUEUE_SUFFIX) || strcmp(name + 16, QUEUE_SUFFIX) != 0)
			continue;
		seq = strtoull(name, &end, 16);
		if (end != name + 16)
			continue;
		r = sr_grow((void **)&seqs, &cap, n + 1, sizeof(*seqs), 64);
		if (r < 0)
			goto out;
		seqs[n++] = seq;
	}
	if (n)
		qsort(seqs, n, sizeof(*seqs), cmp_seq);
	for (size_t i = 0; i < n; i++) {
		char name[64];
		uint8_t h[GW_QUEUE_HEADER_SIZE];
		uint32_t flags, crc, meta_len;
		uint64_t samples, len;
		struct stat st;
		struct gw_queue_item *it;
		char *meta = NULL;
		int fd;

		item_name(name, sizeof(name), seqs[i], false);
		fd = openat(q->dir_fd, name, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		/* The header and metadata now; the checksum is checked when the payload is read to be sent. */
		if (read_all(fd, h, sizeof(h)) < 0 || header_decode(h, &flags, &samples, &len, &meta_len, &crc) < 0 ||
		    fstat(fd, &st) < 0 || (uint64_t)st.st_size != len + GW_QUEUE_HEADER_SIZE + meta_len ||
		    (meta_len && (!(meta = calloc(1, meta_len + 1)) || read_all(fd, meta, meta_len) < 0 ||
				  strlen(meta) != meta_len))) {
			close(fd);
			free(meta);
			move_aside(q, name);
			rep->corrupt_files++;
			continue;
		}
		close(fd);
		it = calloc(1, sizeof(*it));
		if (!it) {
			free(meta);
			r = -ENOMEM;
			goto out;
		}
		it->metadata = meta;
		it->metadata_len = meta_len;
		it->seq = seqs[i];
		it->samples = samples;
		it->flags = flags;
		it->len = len;
		list_append(q, it);
		q->bytes += item_bytes(q, it);
		q->samples += samples;
		q->next_seq = SR_MAX(q->next_seq, seqs[i] + 1);
		rep->items++;
		rep->samples += samples;
		rep->bytes += item_bytes(q, it);
	}
out:
	free(seqs);
	closedir(d);
	return r;
}

struct gw_queue *gw_queue_open(const struct gw_queue_config *cfg, struct gw_queue_replay *ret_replay,
			       const char **ret_what)
{
	struct gw_queue_replay rep = { 0 };
	struct gw_queue *q;
	const char *what = "";
	int r;

	q = calloc(1, sizeof(*q));
	if (!q)
		return NULL;
	q->max_bytes = cfg->max_bytes;
	q->dir_fd = q->lock_fd = -1;
	q->next_seq = 1;
	if (cfg->storage_dir && *cfg->storage_dir) {
		q->dir = strdup(cfg->storage_dir);
		if (!q->dir) {
			r = -ENOMEM;
			goto fail;
		}
		what = "mkdir";
		r = sr_mkdir_p(q->dir);
		if (r < 0)
			goto fail;
		what = "open";
		q->dir_fd = open(q->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (q->dir_fd < 0) {
			r = -errno;
			goto fail;
		}
		what = "lock";
		q->lock_fd = openat(q->dir_fd, "lock", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		if (q->lock_fd < 0) {
			r = -errno;
			goto fail;
		}
		if (flock(q->lock_fd, LOCK_EX | LOCK_NB) < 0) {
			r = errno == EWOULDBLOCK ? -EBUSY : -errno;
			goto fail;
		}
		what = "replay";
		r = replay(q, &rep);
		if (r < 0)
			goto fail;
	}
	if (ret_replay)
		*ret_replay = rep;
	return q;
fail:
	if (ret_what)
		*ret_what = what;
	gw_queue_close(q);
	errno = -r;
	return NULL;
}

void gw_queue_close(struct gw_queue *q)
{
	struct gw_queue_item *it, *next;

	if (!q)
		return;
	for (it = q->head; it; it = next) {
		next = it->next;
		item_free(it);
	}
	/* Items still popped belong to nobody now (on disk they stay for the next open). */
	for (it = q->flying; it; it = next) {
		next = it->next;
		item_free(it);
	}
	if (q->lock_fd >= 0)
		close(q->lock_fd); /* releases the flock */
	if (q->dir_fd >= 0)
		close(q->dir_fd);
	free(q->dir);
	free(q);
}

static void hold(struct gw_queue *q, struct gw_queue_item *it)
{
	it->held = true;
	q->n_held++;
	q->held_bytes += item_bytes(q, it);
}

static void unhold(struct gw_queue *q, struct gw_queue_item *it)
{
	if (!it->held)
		return;
	it->held = false;
	q->n_held--;
	q->held_bytes -= item_bytes(q, it);
}

static int persist(struct gw_queue *q, const struct gw_queue_item *it, const uint8_t *data)
{
	char tmp[64], name[64];
	uint8_t h[GW_QUEUE_HEADER_SIZE];
	int fd, r;

	item_name(tmp, sizeof(tmp), it->seq, true);
	item_name(name, sizeof(name), it->seq, false);
	header_encode(h, it->flags, it->samples, it->metadata, it->metadata_len, data, it->len);
	fd = openat(q->dir_fd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	r = gw_write_all(fd, h, sizeof(h));
	if (r == 0 && it->metadata_len)
		r = gw_write_all(fd, it->metadata, it->metadata_len);
	if (r == 0)
		r = gw_write_all(fd, data, it->len);
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r == 0 && renameat(q->dir_fd, tmp, q->dir_fd, name) < 0)
		r = -errno;
	/* The rename is durable only once the directory is. */
	if (r == 0 && fsync(q->dir_fd) < 0)
		r = -errno;
	if (r < 0)
		unlinkat(q->dir_fd, tmp, 0);
	return r;
}

int gw_queue__push(struct gw_queue *q, uint8_t *data, size_t len, uint64_t samples, uint32_t flags,
		   const char *metadata)
{
	struct gw_queue_item *it;
	int r;

	if (len > GW_QUEUE_ITEM_MAX_BYTES || (metadata && strlen(metadata) > GW_QUEUE_METADATA_MAX)) {
		free(data);
		return -EFBIG;
	}
	it = calloc(1, sizeof(*it));
	if (!it || (metadata && !(it->metadata = strdup(metadata)))) {
		free(it);
		free(data);
		return -ENOMEM;
	}
	it->metadata_len = metadata ? (uint32_t)strlen(metadata) : 0;
	it->seq = q->next_seq++;
	it->samples = samples;
	it->flags = flags;
	it->len = len;
	r = 0;
	if (q->dir) {
		/* While the disk is failing, only retry_disk() tries it: a write per batch would fail alike, slowly. */
		r = q->disk_error ? q->disk_error : persist(q, it, data);
		if (r == 0) {
			/* On disk the bytes are read back when sent: memory holds only what is in flight. */
			free(data);
		} else {
			/* Taken upstream already: kept in memory, not dropped, until the disk takes it. */
			if (!q->disk_error) {
				q->disk_error = r;
				q->failed_bytes = item_bytes(q, it);
			}
			it->data = data;
			hold(q, it);
			r = GW_QUEUE_HELD;
		}
	} else {
		it->data = data;
	}
	list_append(q, it);
	q->bytes += item_bytes(q, it);
	q->samples += samples;
	return r;
}

/* Writes and deletes a probe file of q->failed_bytes: can the disk take a write like the one that failed? */
static int probe(struct gw_queue *q)
{
	static const uint8_t zeros[64 * 1024];
	uint64_t left = SR_MAX(q->failed_bytes, (uint64_t)1);
	int fd, r = 0;

	fd = openat(q->dir_fd, QUEUE_PROBE_NAME, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	while (r == 0 && left > 0) {
		size_t n = (size_t)SR_MIN(left, (uint64_t)sizeof(zeros));

		r = gw_write_all(fd, zeros, n);
		left -= n;
	}
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	if (close(fd) < 0 && r == 0)
		r = -errno;
	unlinkat(q->dir_fd, QUEUE_PROBE_NAME, 0);
	return r;
}

int gw_queue__retry_disk(struct gw_queue *q)
{
	bool wrote = false;
	int r;

	if (!q->dir || (!q->disk_error && !q->n_held))
		return 0;
	/* In flight first (the oldest), then waiting: a sender keeps its bytes, a waiting item reads them back. */
	for (int pass = 0; pass < 2; pass++) {
		for (struct gw_queue_item *it = pass ? q->head : q->flying; it; it = it->next) {
			if (!it->held)
				continue;
			r = persist(q, it, it->data);
			if (r < 0) {
				if (!q->disk_error)
					q->failed_bytes = item_bytes(q, it);
				q->disk_error = r;
				return r;
			}
			unhold(q, it);
			if (!it->in_flight)
				SR_FREE(it->data);
			wrote = true;
		}
	}
	if (!wrote) {
		r = probe(q);
		if (r < 0) {
			q->disk_error = r;
			return r;
		}
	}
	q->disk_error = 0;
	q->failed_bytes = 0;
	return 0;
}

/* Loads a disk item's payload; -EBADMSG when the file is not what its header says. */
static int load(struct gw_queue *q, struct gw_queue_item *it)
{
	char name[64];
	uint8_t h[GW_QUEUE_HEADER_SIZE];
	char meta[GW_QUEUE_METADATA_MAX + 1];
	uint32_t flags, crc, meta_len;
	uint64_t samples, len;
	int fd, r;

	item_name(name, sizeof(name), it->seq, false);
	fd = openat(q->dir_fd, name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	r = read_all(fd, h, sizeof(h));
	if (r == 0)
		r = header_decode(h, &flags, &samples, &len, &meta_len, &crc);
	if (r == 0 && (len != it->len || samples != it->samples || meta_len != it->metadata_len))
		r = -EBADMSG;
	/* The metadata read at open must be what the file still says (it names the tenant). */
	if (r == 0 && meta_len)
		r = read_all(fd, meta, meta_len);
	if (r == 0 && meta_len && memcmp(meta, it->metadata, meta_len) != 0)
		r = -EBADMSG;
	if (r == 0) {
		it->data = malloc(len ? len : 1);
		if (!it->data)
			r = -ENOMEM;
	}
	if (r == 0)
		r = read_all(fd, it->data, len);
	if (r == 0 && body_crc(meta, meta_len, it->data, len) != crc)
		r = -EBADMSG;
	close(fd);
	if (r < 0)
		SR_FREE(it->data);
	return r;
}

struct gw_queue_item *gw_queue__pop(struct gw_queue *q, uint64_t *ret_corrupt_samples, const char **ret_corrupt_path)
{
	struct gw_queue_item *it;

	while ((it = q->head)) {
		int r = 0;

		list_remove(q, it);
		if (q->dir && !it->data)
			r = load(q, it);
		if (r == 0 || r == -ENOMEM || r == -EMFILE || r == -ENFILE) {
			if (r != 0) {
				/* Out of memory or descriptors: try again later rather than call it corrupt. */
				list_prepend(q, it);
				return NULL;
			}
			flying_add(q, it);
			return it;
		}
		/* Unreadable or corrupt: move it aside, keep it, report it, go on. */
		{
			char name[64];

			item_name(name, sizeof(name), it->seq, false);
			move_aside(q, name);
		}
		if (ret_corrupt_samples)
			*ret_corrupt_samples += it->samples;
		if (ret_corrupt_path)
			*ret_corrupt_path = q->corrupt_path;
		q->bytes -= item_bytes(q, it);
		q->samples -= it->samples;
		item_free(it);
	}
	return NULL;
}

void gw_queue__done(struct gw_queue *q, struct gw_queue_item *it)
{
	if (!it)
		return;
	flying_remove(q, it);
	if (q->dir && !it->held) {
		char name[64];

		item_name(name, sizeof(name), it->seq, false);
		/* Not fsync'ed: a crash may resurrect a delivered item (at-least-once, never lost). */
		unlinkat(q->dir_fd, name, 0);
	}
	unhold(q, it);
	q->bytes -= item_bytes(q, it);
	q->samples -= it->samples;
	item_free(it);
}

void gw_queue__unpop(struct gw_queue *q, struct gw_queue_item *it)
{
	flying_remove(q, it);
	/* A held item has no file to read back from: its bytes stay. */
	if (q->dir && !it->held)
		SR_FREE(it->data);
	list_prepend(q, it);
}

struct gw_queue_item *gw_queue__take_oldest(struct gw_queue *q)
{
	struct gw_queue_item *it = q->head;

	if (it)
		list_remove(q, it);
	return it;
}

struct gw_queue_item *gw_queue__take_oldest_held(struct gw_queue *q)
{
	for (struct gw_queue_item *it = q->head; it; it = it->next) {
		if (it->held) {
			list_remove(q, it);
			return it;
		}
	}
	return NULL;
}

int gw_queue__disk_error(const struct gw_queue *q)
{
	return q->disk_error;
}

size_t gw_queue__held(const struct gw_queue *q)
{
	return q->n_held;
}

uint64_t gw_queue__held_bytes(const struct gw_queue *q)
{
	return q->held_bytes;
}

uint64_t gw_queue__bytes(const struct gw_queue *q)
{
	return q->bytes;
}

uint64_t gw_queue__max_bytes(const struct gw_queue *q)
{
	return q->max_bytes;
}

size_t gw_queue__waiting(const struct gw_queue *q)
{
	return q->n_waiting;
}

size_t gw_queue__in_flight(const struct gw_queue *q)
{
	return q->n_in_flight;
}

uint64_t gw_queue__samples(const struct gw_queue *q)
{
	return q->samples;
}

bool gw_queue__persistent(const struct gw_queue *q)
{
	return q->dir != NULL;
}
