// SPDX-License-Identifier: Apache-2.0
/* Container and pod identity from /proc/PID/cgroup: every line shape docs/agent.md lists, and what is not a container. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "agent/cgroup.h"

#define CID  "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define CID2 "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
#define UID  "8f6a1c2e-3b4d-4e5f-9a0b-1c2d3e4f5a6b"
#define UID_ "8f6a1c2e_3b4d_4e5f_9a0b_1c2d3e4f5a6b"

struct row {
	const char *file;
	int want;
	const char *cid;
	const char *pod;
};

static const struct row rows[] = {
	/* containerd, systemd driver, cgroup v2 */
	{ "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_ ".slice/cri-containerd-" CID
	  ".scope\n",
	  1, CID, UID },
	/* cgroupfs driver, v2 */
	{ "0::/kubepods/besteffort/pod" UID "/" CID "\n", 1, CID, UID },
	/* cri-o */
	{ "0::/kubepods/besteffort/pod" UID "/crio-" CID "\n", 1, CID, UID },
	{ "0::/kubepods.slice/kubepods-pod" UID_ ".slice/crio-" CID ".scope\n", 1, CID, UID },
	/* docker with systemd */
	{ "0::/system.slice/docker-" CID ".scope\n", 1, CID, "" },
	/* cgroup v1, cgroupfs */
	{ "11:memory:/kubepods/besteffort/pod" UID "/" CID "\n", 1, CID, UID },
	/* v1 name=systemd */
	{ "1:name=systemd:/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" UID_
	  ".slice/cri-containerd-" CID ".scope\n",
	  1, CID, UID },
	/* containerd's systemd cgroup on v1, colon-separated */
	{ "11:cpu,cpuacct:/system.slice/containerd.service/kubepods-besteffort-pod" UID_ ".slice:cri-containerd:" CID
	  "\n",
	  1, CID, UID },
	/* podman */
	{ "0::/machine.slice/libpod-" CID ".scope/container\n", 1, CID, "" },
	/* a container that made its own sub-cgroup: the deepest ID wins */
	{ "0::/kubepods/burstable/pod" UID "/" CID "/" CID2 "\n", 1, CID2, UID },
	{ "0::/kubepods/burstable/pod" UID "/" CID "/init.scope\n", 1, CID, UID },
	/* a whole hybrid-host file: the v2 line is preferred over a v1 line */
	{ "12:pids:/kubepods/besteffort/pod" UID "/" CID2 "\n4:memory:/process_api/883c27388724f9a169ee5e39341cfeeb\n"
	  "0::/kubepods/besteffort/pod" UID "/" CID "\n",
	  1, CID, UID },
	/* v1 only knows the container (v2 at root) */
	{ "4:memory:/kubepods/besteffort/pod" UID "/" CID "\n0::/\n", 1, CID, UID },
	/* pod cgroup, no container (the pause process's parent) */
	{ "0::/kubepods/besteffort/pod" UID "\n", 0, "", UID },
	/* not containers */
	{ "0::/\n", 0, "", "" },
	{ "4:memory:/process_api/883c27388724f9a169ee5e39341cfeeb\n0::/\n", 0, "", "" },
	{ "0::/user.slice/user-1000.slice/session-2.scope\n", 0, "", "" },
	{ "0::/system.slice/containerd.service\n", 0, "", "" },
	/* 63 and 65 hex digits, uppercase hex: not IDs */
	{ "0::/docker/" CID "0\n", 0, "", "" },
	{ "0::/docker/0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF\n", 0, "", "" },
	{ "0::/system.slice/docker-" CID ".scopex\n", 0, "", "" },
	{ "0::/system.slice/crio-conmon-" CID ".scope\n", 0, "", "" },
	/* pod-ish names that are not UIDs */
	{ "0::/kubepods/besteffort/podnotauid/" CID "\n", 1, CID, "" },
	/* no trailing newline, CRLF-free last line */
	{ "0::/kubepods/besteffort/pod" UID "/" CID, 1, CID, UID },
	{ "", 0, "", "" },
};

static void test_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct agent_cgroup_info info;
		int r = agent_cgroup_parse(rows[i].file, strlen(rows[i].file), &info);
		if (r != rows[i].want || strcmp(info.container_id, rows[i].cid) != 0 ||
		    strcmp(info.pod_uid, rows[i].pod) != 0)
			fail_msg("row %zu: %s\n got r=%d cid=%s pod=%s", i, rows[i].file, r, info.container_id,
				 info.pod_uid);
	}
}

static void test_garbage(void **state)
{
	struct agent_cgroup_info info;
	static const char junk[] = "this is not a cgroup file";

	(void)state;
	assert_int_equal(agent_cgroup_parse(junk, sizeof(junk) - 1, &info), -EINVAL);
	assert_string_equal(info.container_id, "");
	/* Embedded NUL bytes end nothing early and find nothing. */
	static const char nul[] = "0::/\0/docker-" CID ".scope";
	assert_int_equal(agent_cgroup_parse(nul, sizeof(nul) - 1, &info), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table),
		cmocka_unit_test(test_garbage),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
