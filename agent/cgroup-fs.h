/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The host's cgroup v2 filesystem: where it is mounted, and the ID of a
 * cgroup the config names (what the BPF filters compare with
 * bpf_get_current_cgroup_id()).
 */
#ifndef SR_AGENT_CGROUP_FS_H
#define SR_AGENT_CGROUP_FS_H

#include <stddef.h>
#include <stdint.h>

/*
 * A cgroup given in the config (absolute, or relative to the cgroup v2
 * mount) to its cgroup ID. Finds the cgroup2 mount in /proc/self/mountinfo,
 * so hybrid hosts (/sys/fs/cgroup/unified) work. Returns 0 or -errno.
 */
int agent_cgroup_id(const char *spec, uint64_t *ret_id);
/* Where cgroup2 is mounted (into buf), 0 or -ENOENT. */
int agent_cgroup2_mount(char *buf, size_t size);

#endif
