// SPDX-License-Identifier: Apache-2.0
/*
 * agent/container-open.c: a path swapped for a FIFO is refused without
 * blocking, a symlink at the end of a path is not followed, a file that is
 * not the one identified is refused; each counted by reason. Also the
 * map_files path on the test's own mappings.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/container-open.h"
#include "agent/parse-limits.h"

static char dir[] = "/tmp/sr-container-open-XXXXXX";

static uint64_t refusals(enum agent_parse_refusal why)
{
	uint64_t n[AGENT_PARSE_REFUSAL__MAX];

	agent_parse_refusals(n);
	return n[why];
}

static void path_in(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", dir, name);
}

static void test_regular_file(void **state)
{
	char path[256];
	struct stat st;
	int fd;

	(void)state;
	path_in(path, sizeof(path), "file");
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "x", 1), 1);
	assert_int_equal(fstat(fd, &st), 0);
	close(fd);
	fd = agent_open_in_root(0, path, st.st_dev, st.st_ino, NULL);
	assert_true(fd >= 0);
	close(fd);
	/* Another file than the one identified: refused. */
	{
		uint64_t before = refusals(AGENT_PARSE_IDENTITY);
		assert_int_equal(agent_open_in_root(0, path, st.st_dev, st.st_ino + 1, NULL), -ESTALE);
		assert_int_equal(refusals(AGENT_PARSE_IDENTITY), before + 1);
	}
}

/* The sender's case: a FIFO where the file was. A blocking open() would never return (no writer). */
static void test_fifo_refused_without_blocking(void **state)
{
	char path[256];
	uint64_t before = refusals(AGENT_PARSE_NOT_REGULAR);

	(void)state;
	path_in(path, sizeof(path), "fifo");
	assert_int_equal(mkfifo(path, 0600), 0);
	assert_int_equal(agent_open_in_root(0, path, 0, 0, NULL), -EINVAL);
	assert_int_equal(refusals(AGENT_PARSE_NOT_REGULAR), before + 1);
}

static void test_symlink_not_followed(void **state)
{
	char path[256];
	uint64_t before = refusals(AGENT_PARSE_ESCAPE);

	(void)state;
	path_in(path, sizeof(path), "link");
	assert_int_equal(symlink("/etc/passwd", path), 0);
	assert_int_equal(agent_open_in_root(0, path, 0, 0, NULL), -ELOOP);
	assert_int_equal(refusals(AGENT_PARSE_ESCAPE), before + 1);
}

static void test_map_file(void **state)
{
	char path[256];
	struct stat st, mst;
	void *p;
	int fd, mfd;

	(void)state;
	path_in(path, sizeof(path), "mapped");
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 4096), 0);
	assert_int_equal(fstat(fd, &st), 0);
	p = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
	assert_true(p != MAP_FAILED);
	mfd = agent_open_map_file((uint32_t)getpid(), (uint64_t)(uintptr_t)p, (uint64_t)(uintptr_t)p + 4096, &mst);
	if (mfd == -EPERM || mfd == -EACCES) {
		/* map_files needs CAP_SYS_ADMIN on older kernels. */
		munmap(p, 4096);
		close(fd);
		skip();
	}
	assert_true(mfd >= 0);
	assert_int_equal(mst.st_ino, st.st_ino);
	close(mfd);
	munmap(p, 4096);
	close(fd);
}

static int setup(void **state)
{
	(void)state;
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	const char *names[] = { "file", "fifo", "link", "mapped" };
	char path[256];

	(void)state;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		path_in(path, sizeof(path), names[i]);
		unlink(path);
	}
	return rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_regular_file),
		cmocka_unit_test(test_fifo_refused_without_blocking),
		cmocka_unit_test(test_symlink_not_followed),
		cmocka_unit_test(test_map_file),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
