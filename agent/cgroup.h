/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Container and pod identity from /proc/PID/cgroup: a pure function over the
 * file's bytes (tests/unit/test-agent-cgroup.c, tests/fuzz/fuzz-cgroup.c).
 */
#ifndef SR_AGENT_CGROUP_H
#define SR_AGENT_CGROUP_H

#include <stddef.h>

#define AGENT_CONTAINER_ID_LEN 64
#define AGENT_POD_UID_LEN      36

struct agent_cgroup_info {
	char container_id[AGENT_CONTAINER_ID_LEN + 1]; /* 64 lowercase hex digits, or "" */
	char pod_uid[AGENT_POD_UID_LEN + 1];	       /* 8-4-4-4-12 with dashes, or "" */
};

/*
 * Recognises containerd, cri-o, docker and podman container cgroups under
 * both the systemd (".slice"/".scope") and cgroupfs drivers, on cgroup v2
 * ("0::") and v1 lines; the v2 line is preferred. Only an exact 64-hex
 * container ID in a known shape counts, so e.g. "/process_api/<32hex>" is not
 * a container. Returns 1 when a container ID was found, 0 when none (pod_uid
 * may still be set), -EINVAL for input that is not a cgroup file.
 */
int agent_cgroup_parse(const char *buf, size_t len, struct agent_cgroup_info *ret);

/* Parses one cgroup path (the part after "ID:controllers:"); returns 1 found, 0 not. */
int agent_cgroup_parse_path(const char *path, size_t len, struct agent_cgroup_info *ret);

#endif
