// SPDX-License-Identifier: Apache-2.0
/*
 * The gateway's files on disk are private to it whatever the umask it is
 * started with: the symbol cache (cache_dir) and the disk queue
 * (sending_queue.storage) create directories 0700 and files 0600. Each
 * test runs with umask 000, the most permissive, so only the modes the
 * code asks for count.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "exporters/queue.h"
#include "symbolize/disk-store.h"

static char tmpl[] = "/tmp/sr-file-modes.XXXXXX";

static int setup(void **state)
{
	(void)state;
	strcpy(tmpl + strlen(tmpl) - 6, "XXXXXX");
	if (!mkdtemp(tmpl))
		return -1;
	umask(0);
	return 0;
}

static void rm_rf(const char *path)
{
	struct stat sb;
	DIR *d;
	struct dirent *de;
	char sub[PATH_MAX];

	if (lstat(path, &sb) < 0)
		return;
	if (S_ISDIR(sb.st_mode) && (d = opendir(path))) {
		while ((de = readdir(d))) {
			if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
				continue;
			snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name);
			rm_rf(sub);
		}
		closedir(d);
		rmdir(path);
		return;
	}
	unlink(path);
}

static int teardown(void **state)
{
	(void)state;
	umask(022);
	rm_rf(tmpl);
	return 0;
}

/* Fails naming the path and both modes, so a failure says which file is wrong. */
static void assert_mode(const char *path, mode_t want)
{
	struct stat sb;

	if (stat(path, &sb) < 0)
		fail_msg("stat %s: %s", path, strerror(errno));
	if ((sb.st_mode & 07777) != want)
		fail_msg("%s has mode %04o, expected %04o", path, (unsigned)(sb.st_mode & 07777), (unsigned)want);
}

/* Every entry under dir (recursively): directories dir_mode, files file_mode; returns the files seen. */
static int assert_tree(const char *dir, mode_t dir_mode, mode_t file_mode)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char sub[PATH_MAX];
	struct stat sb;
	int files = 0;

	assert_non_null(d);
	assert_mode(dir, dir_mode);
	while ((de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", dir, de->d_name);
		assert_int_equal(lstat(sub, &sb), 0);
		if (S_ISDIR(sb.st_mode)) {
			files += assert_tree(sub, dir_mode, file_mode);
		} else {
			assert_mode(sub, file_mode);
			files++;
		}
	}
	closedir(d);
	return files;
}

static void test_symbol_cache(void **state)
{
	char dir[PATH_MAX], src[PATH_MAX], stored[PATH_MAX];
	static const char table[] = "a symbol table";
	struct gw_disk_store *st;
	int fd;

	(void)state;
	/* Parents the store creates are private too. */
	snprintf(dir, sizeof(dir), "%s/cache/stackrelay", tmpl);
	st = gw_disk_store_new(dir, 1 << 20);
	assert_non_null(st);
	assert_int_equal(gw_disk_store__write_table(st, GW_DISK_STORE_TRUSTED, "abcdef0123", table, sizeof(table)), 0);
	assert_int_equal(gw_disk_store__write_table(st, GW_DISK_STORE_UPLOAD, "abcdef0123", table, sizeof(table)), 0);
	/* A debuginfod download arrives with its client's mode (here 0666). */
	snprintf(src, sizeof(src), "%s/download", tmpl);
	fd = open(src, O_WRONLY | O_CREAT | O_TRUNC, 0666);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "ELF", 3), 3);
	close(fd);
	assert_mode(src, 0666);
	assert_int_equal(gw_disk_store__adopt_debug(st, "0123456789", src, stored, sizeof(stored)), 0);
	gw_disk_store_free(st);

	snprintf(src, sizeof(src), "%s/cache", tmpl);
	assert_int_equal(assert_tree(src, 0700, 0600), 3);
}

static void test_disk_queue(void **state)
{
	char dir[PATH_MAX];
	struct gw_queue_config cfg = { .max_bytes = 1 << 20, .storage_dir = dir };
	struct gw_queue *q;
	uint8_t *data = malloc(64);

	(void)state;
	assert_non_null(data);
	memset(data, 7, 64);
	snprintf(dir, sizeof(dir), "%s/lib/queue", tmpl);
	q = gw_queue_open(&cfg, NULL, NULL);
	assert_non_null(q);
	assert_int_equal(gw_queue__push(q, data, 64, 1, 0, NULL), 0);
	gw_queue_close(q);

	snprintf(dir, sizeof(dir), "%s/lib", tmpl);
	/* The lock file and the queued item. */
	assert_true(assert_tree(dir, 0700, 0600) >= 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_symbol_cache, setup, teardown),
		cmocka_unit_test_setup_teardown(test_disk_queue, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
