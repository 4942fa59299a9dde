// SPDX-License-Identifier: Apache-2.0
/* /proc/PID/cgroup parser: a container ID is only ever 64 lowercase hex digits, a pod UID only 8-4-4-4-12. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/cgroup.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int lower_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct agent_cgroup_info info;
	int r;

	if (size > 1 << 20)
		return 0;
	r = agent_cgroup_parse((const char *)data, size, &info);
	if (r == 1) {
		if (strlen(info.container_id) != AGENT_CONTAINER_ID_LEN)
			abort();
		for (size_t i = 0; i < AGENT_CONTAINER_ID_LEN; i++)
			if (!lower_hex(info.container_id[i]))
				abort();
	} else if (info.container_id[0]) {
		abort();
	}
	if (info.pod_uid[0]) {
		if (strlen(info.pod_uid) != AGENT_POD_UID_LEN)
			abort();
		for (size_t i = 0; i < AGENT_POD_UID_LEN; i++)
			if ((i == 8 || i == 13 || i == 18 || i == 23) ? info.pod_uid[i] != '-'
								      : !lower_hex(info.pod_uid[i]))
				abort();
	}
	return 0;
}
