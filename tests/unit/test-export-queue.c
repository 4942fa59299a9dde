// SPDX-License-Identifier: Apache-2.0
/*
 * The sending queue: memory accounting, and the disk queue's crash safety —
 * replay after reopen (as after kill -9), stale temporary files, corrupt
 * files moved aside and kept, and the directory lock — and a disk that
 * cannot take a write: items held in memory, retried, the disk taken back.
 */
#include <dirent.h>
#include <fcntl.h>
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "exporters/queue.h"

static uint8_t *blob(size_t n, uint8_t fill)
{
	uint8_t *b = malloc(n);

	memset(b, fill, n);
	return b;
}

static void test_memory(void **state)
{
	struct gw_queue_config cfg = { .max_bytes = 1000 };
	struct gw_queue *q = gw_queue_open(&cfg, NULL, NULL);
	struct gw_queue_item *a, *b;

	assert_non_null(q);
	assert_false(gw_queue__persistent(q));
	assert_int_equal(gw_queue__push(q, blob(100, 1), 100, 10, GW_QUEUE_GZIP, NULL), 0);
	assert_int_equal(gw_queue__push(q, blob(200, 2), 200, 20, 0, NULL), 0);
	assert_int_equal(gw_queue__bytes(q), 300);
	assert_int_equal(gw_queue__samples(q), 30);
	assert_int_equal(gw_queue__waiting(q), 2);
	a = gw_queue__pop(q, NULL, NULL);
	assert_non_null(a);
	assert_int_equal(a->samples, 10);
	assert_int_equal(a->flags, GW_QUEUE_GZIP);
	assert_int_equal(a->data[99], 1);
	assert_int_equal(gw_queue__in_flight(q), 1);
	/* In-flight bytes still count: the bound is on everything held. */
	assert_int_equal(gw_queue__bytes(q), 300);
	gw_queue__unpop(q, a);
	a = gw_queue__pop(q, NULL, NULL);
	assert_int_equal(a->samples, 10); /* back at the head */
	b = gw_queue__take_oldest(q);
	assert_int_equal(b->samples, 20);
	gw_queue__done(q, b);
	gw_queue__done(q, a);
	assert_int_equal(gw_queue__bytes(q), 0);
	assert_null(gw_queue__pop(q, NULL, NULL));
	gw_queue_close(q);
}

static int count_files(const char *dir, const char *suffix)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	assert_non_null(d);
	while ((de = readdir(d))) {
		size_t l = strlen(de->d_name), s = strlen(suffix);

		if (l >= s && strcmp(de->d_name + l - s, suffix) == 0)
			n++;
	}
	closedir(d);
	return n;
}

static void test_persistent(void **state)
{
	char dir[] = "/tmp/sr-queue-test-XXXXXX";
	char sub[64], path[128];
	struct gw_queue_config cfg = { .max_bytes = 1 << 20, .storage_dir = sub };
	struct gw_queue_replay rep;
	struct gw_queue *q, *q2;
	struct gw_queue_item *it;
	const char *what = NULL, *corrupt_path = NULL;
	uint64_t corrupt = 0;
	int fd;

	assert_non_null(mkdtemp(dir));
	snprintf(sub, sizeof(sub), "%s/a/b", dir); /* created with parents */
	q = gw_queue_open(&cfg, &rep, &what);
	assert_non_null(q);
	assert_true(gw_queue__persistent(q));
	assert_int_equal(rep.items, 0);
	for (int i = 0; i < 5; i++)
		assert_int_equal(gw_queue__push(q, blob(1000 + i, (uint8_t)i), 1000 + i, 100 + i, GW_QUEUE_OTLP_V1_9,
						i == 1 ? "X-Scope-OrgID: tenant-b\n" : NULL),
				 0);
	assert_int_equal(count_files(sub, ".srq"), 5);
	/* Item 2 carries its tenant (metadata), on disk too. */
	assert_int_equal(gw_queue__bytes(q), 5 * (1000 + GW_QUEUE_HEADER_SIZE) + 10 + 24);

	/* A second process (here: a second open) cannot use the same directory. */
	assert_null(gw_queue_open(&cfg, NULL, &what));
	assert_int_equal(errno, EBUSY);
	assert_string_equal(what, "lock");

	/* Deliver the first one; pop the second and "crash" with it in flight. */
	it = gw_queue__pop(q, NULL, NULL);
	assert_int_equal(it->samples, 100);
	assert_int_equal(it->len, 1000);
	assert_int_equal(it->data[500], 0);
	gw_queue__done(q, it);
	it = gw_queue__pop(q, NULL, NULL);
	assert_int_equal(it->samples, 101);
	/* A push that died before its rename, and garbage written over item 4. */
	snprintf(path, sizeof(path), "%s/.00000000000000ff.tmp", sub);
	fd = open(path, O_WRONLY | O_CREAT, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "partial", 7), 7);
	close(fd);
	snprintf(path, sizeof(path), "%s/0000000000000004.srq", sub);
	fd = open(path, O_WRONLY);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, "XXXX", 4, GW_QUEUE_HEADER_SIZE + 10), 4); /* payload: checksum catches it */
	close(fd);
	gw_queue_close(q); /* no done() for the in-flight item: as if killed */

	q2 = gw_queue_open(&cfg, &rep, NULL);
	assert_non_null(q2);
	assert_int_equal(rep.items, 4); /* 2 (in flight at the crash), 3, 4, 5 */
	assert_int_equal(rep.samples, 101 + 102 + 103 + 104);
	assert_int_equal(rep.stale_tmp_files, 1);
	assert_int_equal(rep.corrupt_files, 0); /* the header is fine; the payload is checked when sent */
	assert_int_equal(count_files(sub, ".tmp"), 0);
	it = gw_queue__pop(q2, &corrupt, &corrupt_path);
	assert_int_equal(it->samples, 101);
	assert_int_equal(it->flags, GW_QUEUE_OTLP_V1_9);
	assert_int_equal(it->data[999], 1);
	assert_string_equal(it->metadata, "X-Scope-OrgID: tenant-b\n");
	gw_queue__done(q2, it);
	it = gw_queue__pop(q2, &corrupt, &corrupt_path);
	assert_int_equal(it->samples, 102);
	gw_queue__done(q2, it);
	/* Item 4 is corrupt: moved aside, reported, skipped; item 5 comes next. */
	it = gw_queue__pop(q2, &corrupt, &corrupt_path);
	assert_non_null(it);
	assert_int_equal(it->samples, 104);
	assert_int_equal(corrupt, 103);
	assert_non_null(corrupt_path);
	assert_non_null(strstr(corrupt_path, "0000000000000004.srq.corrupt"));
	assert_int_equal(count_files(sub, ".corrupt"), 1);
	gw_queue__done(q2, it);
	assert_int_equal(gw_queue__waiting(q2), 0);
	assert_int_equal(gw_queue__bytes(q2), 0);
	assert_int_equal(count_files(sub, ".srq"), 0);

	/* A truncated file is caught by the header check at replay. */
	assert_int_equal(gw_queue__push(q2, blob(50, 7), 50, 5, 0, NULL), 0);
	gw_queue_close(q2);
	snprintf(path, sizeof(path), "%s/0000000000000006.srq", sub);
	assert_int_equal(truncate(path, 60), 0);
	q2 = gw_queue_open(&cfg, &rep, NULL);
	assert_non_null(q2);
	assert_int_equal(rep.items, 0);
	assert_int_equal(rep.corrupt_files, 1);
	assert_int_equal(count_files(sub, ".corrupt"), 2);
	/* Sequence numbers go on after the highest seen, never reusing a name. */
	assert_int_equal(gw_queue__push(q2, blob(10, 1), 10, 1, 0, NULL), 0);
	snprintf(path, sizeof(path), "%s/0000000000000001.srq", sub);
	assert_int_equal(access(path, F_OK), 0);
	gw_queue_close(q2);

	{
		char cmd[256];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		assert_int_equal(system(cmd), 0);
	}
}

/*
 * Writes beyond RLIMIT_FSIZE fail with EFBIG (SIGXFSZ ignored): a disk that
 * cannot take a write, for any user, the way a full one (ENOSPC) does.
 */
static void limit_file_size(rlim_t bytes)
{
	struct rlimit rl;

	assert_int_equal(getrlimit(RLIMIT_FSIZE, &rl), 0);
	rl.rlim_cur = bytes == RLIM_INFINITY ? rl.rlim_max : bytes;
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &rl), 0);
}

static void test_disk_failure(void **state)
{
	char dir[] = "/tmp/sr-queue-test-XXXXXX";
	struct gw_queue_config cfg = { .max_bytes = 1 << 20, .storage_dir = dir };
	struct gw_queue_replay rep;
	struct gw_queue *q;
	struct gw_queue_item *a, *b;
	const uint64_t item = 100 + GW_QUEUE_HEADER_SIZE;

	signal(SIGXFSZ, SIG_IGN);
	assert_non_null(mkdtemp(dir));
	q = gw_queue_open(&cfg, &rep, NULL);
	assert_non_null(q);
	assert_int_equal(gw_queue__push(q, blob(100, 1), 100, 10, 0, NULL), 0);
	assert_int_equal(gw_queue__retry_disk(q), 0); /* not failing: nothing to do */

	/* The disk fails: the item is kept in memory, queued and counted, not dropped. */
	limit_file_size(64);
	assert_int_equal(gw_queue__push(q, blob(100, 2), 100, 20, GW_QUEUE_GZIP, NULL), GW_QUEUE_HELD);
	assert_int_equal(gw_queue__disk_error(q), -EFBIG);
	assert_int_equal(gw_queue__held(q), 1);
	assert_int_equal(gw_queue__held_bytes(q), item);
	assert_int_equal(gw_queue__bytes(q), 2 * item);
	assert_int_equal(gw_queue__samples(q), 30);
	assert_int_equal(count_files(dir, ".srq"), 1);
	assert_int_equal(count_files(dir, ".tmp"), 0); /* the failed write left nothing behind */
	/* While failing, later items are held without touching the disk. */
	assert_int_equal(gw_queue__push(q, blob(100, 3), 100, 30, 0, NULL), GW_QUEUE_HELD);
	assert_int_equal(gw_queue__held(q), 2);
	assert_int_equal(gw_queue__retry_disk(q), -EFBIG);
	assert_int_equal(gw_queue__held(q), 2);

	/* Held items are sent like the others, from memory, in order; unpop keeps their bytes. */
	a = gw_queue__pop(q, NULL, NULL);
	assert_int_equal(a->samples, 10);
	b = gw_queue__pop(q, NULL, NULL);
	assert_int_equal(b->samples, 20);
	assert_true(b->held);
	assert_int_equal(b->data[99], 2);
	gw_queue__unpop(q, b);
	assert_non_null(b->data);
	gw_queue__done(q, a);
	b = gw_queue__pop(q, NULL, NULL);
	assert_int_equal(b->data[0], 2);
	gw_queue__done(q, b); /* delivered from memory */
	assert_int_equal(gw_queue__held(q), 1);
	assert_int_equal(gw_queue__bytes(q), item);

	/*
	 * Space again: the held item, in flight, is written (with its place in
	 * the order) and keeps its bytes for its sender; the disk is taken back.
	 */
	b = gw_queue__pop(q, NULL, NULL);
	assert_true(b->held);
	limit_file_size(RLIM_INFINITY);
	assert_int_equal(gw_queue__retry_disk(q), 0);
	assert_int_equal(gw_queue__disk_error(q), 0);
	assert_int_equal(gw_queue__held(q), 0);
	assert_int_equal(gw_queue__held_bytes(q), 0);
	assert_int_equal(count_files(dir, ".srq"), 1);
	assert_false(b->held);
	assert_int_equal(b->data[10], 3);
	gw_queue__unpop(q, b); /* on disk now: its bytes are read back when sent */
	assert_null(b->data);
	assert_int_equal(gw_queue__push(q, blob(100, 4), 100, 40, 0, NULL), 0);
	gw_queue_close(q);
	q = gw_queue_open(&cfg, &rep, NULL);
	assert_non_null(q);
	assert_int_equal(rep.items, 2);
	assert_int_equal(rep.samples, 70);
	a = gw_queue__pop(q, NULL, NULL);
	assert_int_equal(a->samples, 30);
	assert_int_equal(a->data[50], 3);
	gw_queue__done(q, a);

	/*
	 * Nothing held (all delivered) while failing: the probe writes as much
	 * as the write that failed, and leaves no file.
	 */
	limit_file_size(64);
	assert_int_equal(gw_queue__push(q, blob(100, 5), 100, 50, 0, NULL), GW_QUEUE_HELD);
	a = gw_queue__take_oldest_held(q);
	assert_non_null(a);
	assert_int_equal(a->samples, 50);
	gw_queue__done(q, a);
	assert_null(gw_queue__take_oldest_held(q)); /* the one on disk is not held */
	assert_int_equal(gw_queue__held(q), 0);
	assert_int_equal(gw_queue__retry_disk(q), -EFBIG);
	assert_int_equal(count_files(dir, ".tmp"), 0);
	limit_file_size(item + 1);
	assert_int_equal(gw_queue__retry_disk(q), 0); /* a probe of item bytes fits now */
	assert_int_equal(gw_queue__disk_error(q), 0);
	assert_int_equal(count_files(dir, ".tmp"), 0);
	limit_file_size(RLIM_INFINITY);
	gw_queue_close(q);

	{
		char cmd[256];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		assert_int_equal(system(cmd), 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_memory),
		cmocka_unit_test(test_persistent),
		cmocka_unit_test(test_disk_failure),
	};

	return cmocka_run_group_tests_name("export-queue", tests, NULL, NULL);
}
