// SPDX-License-Identifier: Apache-2.0
/* Which capabilities the agent keeps after setup, their names, and the drop itself (in a child process). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/privs.h"

#define C(x) AGENT_CAP(AGENT_CAP_##x)

/* What Kubernetes' chart and the systemd unit grant (charts/stackrelay values, packaging/systemd). */
static const uint64_t granted = C(BPF) | C(PERFMON) | C(SYS_PTRACE) | C(CHECKPOINT_RESTORE) | C(SYS_RESOURCE) |
				C(DAC_READ_SEARCH) | C(SYSLOG);
static const uint64_t running = C(BPF) | C(SYS_PTRACE) | C(CHECKPOINT_RESTORE) | C(DAC_READ_SEARCH) | C(SYSLOG);

static void test_wanted_root(void **state)
{
	struct agent_privs_needs n = { .kernel_symbols = true };
	const char *admin_for = "x";

	(void)state;
	/* Root: every capability of a 6.x kernel (0-40). */
	assert_int_equal(agent_privs_wanted((UINT64_C(1) << 41) - 1, &n, &admin_for), running);
	assert_null(admin_for);
}

static void test_wanted_granted(void **state)
{
	struct agent_privs_needs n = { .kernel_symbols = true };
	const char *admin_for;

	(void)state;
	assert_int_equal(agent_privs_wanted(granted, &n, &admin_for), running);
	assert_null(admin_for);
	/* No kernel frames: kallsyms and /proc/modules are never read again. */
	n.kernel_symbols = false;
	assert_int_equal(agent_privs_wanted(granted, &n, &admin_for), running & ~C(SYSLOG));
	/* Only what is held can be kept. */
	assert_int_equal(agent_privs_wanted(C(BPF) | C(PERFMON), &n, &admin_for), C(BPF));
	assert_int_equal(agent_privs_wanted(0, &n, &admin_for), 0);
	assert_null(admin_for);
}

static void test_wanted_sys_admin(void **state)
{
	struct agent_privs_needs n = { .kernel_symbols = true };
	const char *admin_for;
	uint64_t held = C(SYS_ADMIN) | C(BPF) | C(PERFMON) | C(SYS_PTRACE) | C(DAC_READ_SEARCH) | C(SYSLOG);

	(void)state;
	/* SYS_ADMIN without CHECKPOINT_RESTORE: the only way into /proc/PID/map_files. */
	assert_int_equal(agent_privs_wanted(held, &n, &admin_for), (held & ~C(PERFMON)));
	assert_non_null(admin_for);
	assert_non_null(strstr(admin_for, "map_files"));
	/* SYS_ADMIN without BPF: the only way to create unwind tables. */
	held = C(SYS_ADMIN) | C(CHECKPOINT_RESTORE);
	assert_int_equal(agent_privs_wanted(held, &n, &admin_for), held);
	assert_non_null(strstr(admin_for, "bpf()"));
	/* With both narrow ones, SYS_ADMIN goes. */
	assert_int_equal(agent_privs_wanted(granted | C(SYS_ADMIN), &n, &admin_for), running);
	assert_null(admin_for);
}

static void test_names(void **state)
{
	char buf[256], small[12];

	(void)state;
	agent_privs_names(running, buf, sizeof(buf));
	assert_string_equal(buf, "CAP_DAC_READ_SEARCH,CAP_SYS_PTRACE,CAP_SYSLOG,CAP_BPF,CAP_CHECKPOINT_RESTORE");
	agent_privs_names(0, buf, sizeof(buf));
	assert_string_equal(buf, "none");
	agent_privs_names(AGENT_CAP(63), buf, sizeof(buf));
	assert_string_equal(buf, "cap_63");
	/* Cut at a whole name, never mid-way. */
	agent_privs_names(running, small, sizeof(small));
	assert_string_equal(small, "");
	assert_string_equal(agent_privs_name(AGENT_CAP_PERFMON), "perfmon");
	assert_null(agent_privs_name(63));
}

/* The drop for real, in a child: afterwards the sets hold exactly what was kept, and no_new_privs is set. */
static void test_drop(void **state)
{
	struct agent_privs before;
	pid_t pid;
	int status;

	(void)state;
	assert_int_equal(agent_privs_read(&before), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		uint64_t keep = before.permitted & (C(DAC_READ_SEARCH) | C(SYS_PTRACE));
		struct agent_privs after;
		bool bounding;

		if (agent_privs_drop(keep, &bounding) < 0 || agent_privs_read(&after) < 0)
			_exit(1);
		if (after.effective != keep || after.permitted != keep || after.inheritable || after.ambient ||
		    !after.no_new_privs)
			_exit(2);
		/* Root (CAP_SETPCAP) also empties the bounding set of the rest. */
		if (bounding != !!(before.effective & C(SETPCAP)) || (bounding && (after.bounding & ~keep)))
			_exit(3);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_wanted_root),
		cmocka_unit_test(test_wanted_granted),
		cmocka_unit_test(test_wanted_sys_admin),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_drop),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
