// SPDX-License-Identifier: Apache-2.0
/* The runtimes' table of file verdicts: found by key, and started again when full. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "agent/file-verdicts.h"

struct verdict {
	uint64_t key[4];
	int what;
};

static struct verdict *verdict(uint64_t ino, int what)
{
	struct verdict *v = calloc(1, sizeof(*v));

	assert_non_null(v);
	v->key[0] = 8;
	v->key[1] = ino;
	v->key[2] = 1700000000000000000ULL;
	v->key[3] = 4096;
	v->what = what;
	return v;
}

static void test_found_by_key(void **state)
{
	struct agent_file_verdicts t;
	struct verdict *a = verdict(1, 10), *probe = verdict(1, 0);
	struct verdict *got;

	(void)state;
	agent_file_verdicts_init(&t, 4);
	assert_null(agent_file_verdicts__get(&t, probe->key));
	assert_int_equal(agent_file_verdicts__add(&t, a), 0);
	got = agent_file_verdicts__get(&t, probe->key);
	assert_ptr_equal(got, a);
	assert_int_equal(got->what, 10);
	probe->key[2]++; /* another mtime: another file */
	assert_null(agent_file_verdicts__get(&t, probe->key));
	free(probe);
	agent_file_verdicts_done(&t);
}

static void test_starts_again_when_full(void **state)
{
	struct agent_file_verdicts t;
	struct verdict *probe = verdict(0, 0);

	(void)state;
	agent_file_verdicts_init(&t, 3);
	for (uint64_t i = 1; i <= 3; i++)
		assert_int_equal(agent_file_verdicts__add(&t, verdict(i, (int)i)), 0);
	assert_int_equal(agent_file_verdicts__count(&t), 3);
	/* The fourth file empties the table first: new files are still examined, old ones again. */
	assert_int_equal(agent_file_verdicts__add(&t, verdict(4, 4)), 0);
	assert_int_equal(agent_file_verdicts__count(&t), 1);
	probe->key[1] = 1;
	assert_null(agent_file_verdicts__get(&t, probe->key));
	probe->key[1] = 4;
	assert_non_null(agent_file_verdicts__get(&t, probe->key));
	free(probe);
	agent_file_verdicts_done(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_found_by_key),
		cmocka_unit_test(test_starts_again_when_full),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
