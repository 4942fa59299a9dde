// SPDX-License-Identifier: Apache-2.0
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

#include "common/fsopen.h"

/*
 * A tree that a hostile container could lay out:
 *   root/etc/ok          a regular file, "inside"
 *   root/fifo            a FIFO
 *   root/abs -> /etc     an absolute symlink to a directory (inside under IN_ROOT, refused by the walk)
 *   root/out -> ../secret a relative link out of root
 *   root/dirlink -> etc  a link to a directory
 *   secret               the file outside that must never be read
 */
struct tree {
	char dir[64];
	int root;
};

static int tree_setup(void **state)
{
	struct tree *t = calloc(1, sizeof(*t));
	char p[PATH_MAX];
	FILE *f;

	assert_non_null(t);
	snprintf(t->dir, sizeof(t->dir), "/tmp/sr-fsopen-XXXXXX");
	assert_non_null(mkdtemp(t->dir));
	snprintf(p, sizeof(p), "%s/root", t->dir);
	assert_int_equal(mkdir(p, 0700), 0);
	snprintf(p, sizeof(p), "%s/root/etc", t->dir);
	assert_int_equal(mkdir(p, 0700), 0);
	snprintf(p, sizeof(p), "%s/root/etc/ok", t->dir);
	assert_non_null(f = fopen(p, "w"));
	fputs("inside", f);
	fclose(f);
	snprintf(p, sizeof(p), "%s/secret", t->dir);
	assert_non_null(f = fopen(p, "w"));
	fputs("outside", f);
	fclose(f);
	snprintf(p, sizeof(p), "%s/root/fifo", t->dir);
	assert_int_equal(mkfifo(p, 0600), 0);
	snprintf(p, sizeof(p), "%s/root/abs", t->dir);
	assert_int_equal(symlink("/etc", p), 0);
	snprintf(p, sizeof(p), "%s/root/out", t->dir);
	assert_int_equal(symlink("../secret", p), 0);
	snprintf(p, sizeof(p), "%s/root/dirlink", t->dir);
	assert_int_equal(symlink("etc", p), 0);
	snprintf(p, sizeof(p), "%s/root", t->dir);
	t->root = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(t->root >= 0);
	*state = t;
	return 0;
}

static int tree_teardown(void **state)
{
	struct tree *t = *state;
	char cmd[128];

	close(t->root);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", t->dir);
	assert_int_equal(system(cmd), 0);
	free(t);
	return 0;
}

static void assert_reads(int fd, const char *want)
{
	char buf[32] = { 0 };

	assert_true(fd >= 0);
	assert_int_equal(read(fd, buf, sizeof(buf) - 1), (ssize_t)strlen(want));
	assert_string_equal(buf, want);
	close(fd);
}

static void test_in_root(void **state)
{
	struct tree *t = *state;

	assert_reads(sr_fs_openat(t->root, "/etc/ok", SR_FS_IN_ROOT, 0), "inside");
	assert_reads(sr_fs_openat(t->root, "etc/ok", SR_FS_IN_ROOT, 0), "inside");
	/* An absolute link resolves inside the root, never to the host's /etc. */
	assert_reads(sr_fs_openat(t->root, "abs/ok", SR_FS_IN_ROOT, 0), "inside");
	assert_int_equal(sr_fs_openat(t->root, "abs/passwd", SR_FS_IN_ROOT, 0), -ENOENT);
	/* ".." is clamped at the root: root/../secret is root/secret, which does not exist. */
	assert_int_equal(sr_fs_openat(t->root, "../secret", SR_FS_IN_ROOT, 0), -ENOENT);
	/* The last component is never followed (O_NOFOLLOW), inside or not. */
	assert_int_equal(sr_fs_openat(t->root, "out", SR_FS_IN_ROOT, 0), -ELOOP);
	assert_reads(sr_fs_openat(t->root, "dirlink/ok", SR_FS_IN_ROOT, 0), "inside");
}

static void test_beneath(void **state)
{
	struct tree *t = *state;

	assert_reads(sr_fs_openat(t->root, "etc/ok", SR_FS_BENEATH, 0), "inside");
	assert_int_equal(sr_fs_openat(t->root, "../secret", SR_FS_BENEATH, 0), -EXDEV);
	assert_int_equal(sr_fs_openat(t->root, "/etc/ok", SR_FS_BENEATH, 0), -EXDEV);
	assert_int_equal(sr_fs_openat(t->root, "etc/../../secret", SR_FS_BENEATH, 0), -EXDEV);
}

static void test_walk(void **state)
{
	struct tree *t = *state;

	assert_reads(sr_fs_openat_walk(t->root, "/etc/ok", 0), "inside");
	assert_reads(sr_fs_openat_walk(t->root, "./etc//ok", 0), "inside");
	assert_int_equal(sr_fs_openat_walk(t->root, "../secret", 0), -EXDEV);
	assert_int_equal(sr_fs_openat_walk(t->root, "etc/../../secret", 0), -EXDEV);
	/* The walk follows no link at all, not even one that stays inside. */
	assert_int_equal(sr_fs_openat_walk(t->root, "abs/ok", 0), -ELOOP);
	assert_int_equal(sr_fs_openat_walk(t->root, "dirlink/ok", 0), -ELOOP);
	assert_int_equal(sr_fs_openat_walk(t->root, "out", 0), -ELOOP);
	assert_int_equal(sr_fs_openat_walk(t->root, "/", 0), -EISDIR);
	assert_int_equal(sr_fs_openat_walk(t->root, "", 0), -ENOENT);
}

static void test_regular_only(void **state)
{
	struct tree *t = *state;
	struct stat st;
	int fd;

	/* A FIFO opens at once (O_NONBLOCK: no writer needed) and is then refused, never read. */
	assert_int_equal(sr_fs_open_regular(t->root, "fifo", SR_FS_IN_ROOT, 0, NULL), -EINVAL);
	assert_int_equal(sr_fs_open_regular(t->root, "etc", SR_FS_IN_ROOT, 0, NULL), -EINVAL);
	assert_int_equal(sr_fs_open_regular(t->root, "etc/ok", SR_FS_IN_ROOT, 3, NULL), -EFBIG);
	fd = sr_fs_open_regular(t->root, "etc/ok", SR_FS_IN_ROOT, 6, &st);
	assert_int_equal(st.st_size, 6);
	assert_reads(fd, "inside");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_in_root, tree_setup, tree_teardown),
		cmocka_unit_test_setup_teardown(test_beneath, tree_setup, tree_teardown),
		cmocka_unit_test_setup_teardown(test_walk, tree_setup, tree_teardown),
		cmocka_unit_test_setup_teardown(test_regular_only, tree_setup, tree_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
