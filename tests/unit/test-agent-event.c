// SPDX-License-Identifier: Apache-2.0
/* Ring-buffer record decoding and CPU lists. */
#include <errno.h>
#include <linux/types.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "agent/event.h"
#include "agent/sampler.h"

static void test_event_decode(void **state)
{
	struct profile_sample *s = calloc(1, sizeof(*s));
	struct profile_task_event t = { 0 };
	struct agent_event ev;

	(void)state;
	s->hdr.type = PROFILE_EVENT_SAMPLE;
	s->hdr.pid = 42;
	memcpy(s->hdr.comm, "0123456789abcdef", 16); /* no NUL: the copy adds one */
	s->kstack_len = 3 * 8;
	s->ustack_len = -14; /* -EFAULT */
	assert_int_equal(agent_event_decode(s, sizeof(*s), &ev), 0);
	assert_int_equal(ev.type, PROFILE_EVENT_SAMPLE);
	assert_int_equal(ev.n_kstack, 3);
	assert_int_equal(ev.n_ustack, 0);
	assert_int_equal(ev.ustack_err, -14);
	assert_string_equal(ev.comm, "0123456789abcdef");
	/* Short records and lengths beyond the arrays are refused; a record may end after its user frames. */
	assert_int_equal(agent_event_decode(s, offsetof(struct profile_sample, ustack) - 1, &ev), -EBADMSG);
	assert_int_equal(agent_event_decode(s, offsetof(struct profile_sample, ustack), &ev), 0);
	s->ustack_len = 2 * 8;
	assert_int_equal(agent_event_decode(s, offsetof(struct profile_sample, ustack) + 2 * 8, &ev), 0);
	assert_int_equal(ev.n_ustack, 2);
	assert_int_equal(agent_event_decode(s, offsetof(struct profile_sample, ustack) + 2 * 8 - 1, &ev), -EBADMSG);
	s->ustack_len = -14;
	assert_int_equal(agent_event_decode(s, 3, &ev), -EBADMSG);
	s->kstack_len = (PROFILE_MAX_STACK_DEPTH + 1) * 8;
	assert_int_equal(agent_event_decode(s, sizeof(*s), &ev), 0);
	assert_int_equal(ev.n_kstack, 0);
	assert_int_equal(ev.kstack_err, -EBADMSG);
	/* An off-CPU wait is a sample record with its time. */
	s->hdr.type = PROFILE_EVENT_OFF_CPU;
	s->kstack_len = 2 * 8;
	s->off_cpu_ns = 12345678;
	assert_int_equal(agent_event_decode(s, sizeof(*s), &ev), 0);
	assert_int_equal(ev.type, PROFILE_EVENT_OFF_CPU);
	assert_ptr_equal(ev.sample, s);
	assert_int_equal(ev.n_kstack, 2);
	assert_int_equal(agent_event_decode(s, offsetof(struct profile_sample, ustack) - 1, &ev), -EBADMSG);
	s->hdr.type = 99;
	assert_int_equal(agent_event_decode(s, sizeof(*s), &ev), -EBADMSG);
	t.hdr.type = PROFILE_EVENT_EXIT;
	assert_int_equal(agent_event_decode(&t, sizeof(t), &ev), 0);
	assert_int_equal(ev.type, PROFILE_EVENT_EXIT);
	assert_null(ev.sample);
	free(s);
}

static void test_cpu_list(void **state)
{
	bool cpus[16];

	(void)state;
	assert_int_equal(agent_parse_cpu_list("0-3,5\n", cpus, 16), 5);
	assert_true(cpus[3] && !cpus[4] && cpus[5]);
	assert_int_equal(agent_parse_cpu_list("0", cpus, 16), 1);
	assert_int_equal(agent_parse_cpu_list("0-63", cpus, 16), 16); /* clipped to the bitmap */
	assert_int_equal(agent_parse_cpu_list("3-1", cpus, 16), -EINVAL);
	assert_int_equal(agent_parse_cpu_list("a", cpus, 16), -EINVAL);
	assert_int_equal(agent_parse_cpu_list("1;2", cpus, 16), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_event_decode),
		cmocka_unit_test(test_cpu_list),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
