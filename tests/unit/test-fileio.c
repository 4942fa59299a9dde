// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <fcntl.h>
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

#include "common/fileio.h"

/* /proc files say size 0: they are read to their end. */
static void test_proc_file(void **state)
{
	char *buf = NULL;
	size_t len = 0;

	(void)state;
	assert_int_equal(sr_read_file("/proc/self/stat", 8192, &buf, &len), 0);
	assert_true(len > 10);
	assert_int_equal(strlen(buf), len);
	free(buf);
	assert_int_equal(sr_read_file("/proc/self/maps", 16, &buf, &len), -EFBIG);
}

/* A FIFO is refused at once (no writer is needed to open it), a directory too. */
static void test_not_regular(void **state)
{
	char dir[] = "/tmp/sr-fileio-XXXXXX", fifo[64], file[64], *buf = NULL;
	FILE *f;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	assert_int_equal(sr_read_file(fifo, 4096, &buf, NULL), -EINVAL);
	assert_int_equal(sr_read_file(dir, 4096, &buf, NULL), -EINVAL);
	assert_int_equal(sr_read_file("/nonexistent/x", 4096, &buf, NULL), -ENOENT);
	snprintf(file, sizeof(file), "%s/file", dir);
	assert_non_null(f = fopen(file, "w"));
	fputs("token\n", f);
	fclose(f);
	assert_int_equal(sr_read_fileat(AT_FDCWD, file, 6, &buf, NULL), 0);
	assert_string_equal(buf, "token\n");
	free(buf);
	assert_int_equal(sr_read_file(file, 5, &buf, NULL), -EFBIG);
	unlink(fifo);
	unlink(file);
	rmdir(dir);
}

/* Into the caller's buffer: whole when it fits (size - 1 bytes and a NUL), -EFBIG when the file goes on. */
static void test_into(void **state)
{
	char dir[] = "/tmp/sr-fileio-XXXXXX", file[64], buf[8];
	size_t len = 99;
	FILE *f;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(file, sizeof(file), "%s/file", dir);
	assert_non_null(f = fopen(file, "w"));
	fputs("token\n", f);
	fclose(f);
	assert_int_equal(sr_read_fileat_into(AT_FDCWD, file, buf, sizeof(buf), &len), 0);
	assert_string_equal(buf, "token\n");
	assert_int_equal(len, 6);
	assert_int_equal(sr_read_fileat_into(AT_FDCWD, file, buf, 7, &len), 0); /* exactly size - 1 */
	assert_string_equal(buf, "token\n");
	assert_int_equal(sr_read_fileat_into(AT_FDCWD, file, buf, 6, &len), -EFBIG);
	assert_int_equal(sr_read_fileat_into(AT_FDCWD, file, buf, 0, &len), -EINVAL);
	assert_int_equal(sr_read_fileat_into(AT_FDCWD, dir, buf, sizeof(buf), &len), -EINVAL);
	assert_int_equal(sr_read_fileat_into(AT_FDCWD, "/nonexistent/x", buf, sizeof(buf), NULL), -ENOENT);
	/* A /proc file (size 0) is read to its end; a longer one does not fit. */
	char stat_buf[1024];
	assert_int_equal(sr_read_fileat_into(AT_FDCWD, "/proc/self/stat", stat_buf, sizeof(stat_buf), &len), 0);
	assert_true(len > 10);
	assert_int_equal(strlen(stat_buf), len);
	assert_int_equal(sr_read_fileat_into(AT_FDCWD, "/proc/self/maps", buf, sizeof(buf), NULL), -EFBIG);
	unlink(file);
	rmdir(dir);
}

/* mkdir -p: each missing level made with mode 0700, existing ones accepted, a file in the way refused. */
static void test_mkdir_p(void **state)
{
	char dir[] = "/tmp/sr-fileio-XXXXXX", deep[96], file[96], under[128];
	struct stat st;
	FILE *f;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(deep, sizeof(deep), "%s/a/b/c", dir);
	assert_int_equal(sr_mkdir_p(deep), 0);
	assert_int_equal(stat(deep, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0700);
	assert_int_equal(sr_mkdir_p(deep), 0); /* already there */
	snprintf(file, sizeof(file), "%s/file", dir);
	assert_non_null(f = fopen(file, "w"));
	fclose(f);
	snprintf(under, sizeof(under), "%s/sub", file);
	assert_int_equal(sr_mkdir_p(under), -ENOTDIR);
	assert_int_equal(sr_mkdir_p(""), -ENAMETOOLONG);
	unlink(file);
	rmdir(deep);
	snprintf(deep, sizeof(deep), "%s/a/b", dir);
	rmdir(deep);
	snprintf(deep, sizeof(deep), "%s/a", dir);
	rmdir(deep);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_proc_file),
		cmocka_unit_test(test_not_regular),
		cmocka_unit_test(test_into),
		cmocka_unit_test(test_mkdir_p),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
