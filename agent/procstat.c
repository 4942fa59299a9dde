// SPDX-License-Identifier: Apache-2.0
/* /proc/PID/stat parsing (procstat.h); one pass, no allocation: done for every new process. */
#include <errno.h>
#include <string.h>

#include "agent/procstat.h"

int agent_procstat_start_ticks(const char *buf, size_t len, uint64_t *ret_ticks)
{
	const char *p = NULL, *end = buf + len;
	uint64_t v = 0;

	/* The last ')' closes comm, whatever comm holds. */
	for (const char *q = buf; q < end; q++)
		if (*q == ')')
			p = q;
	if (!p)
		return -EINVAL;
	p++;
	/* Past state(3) ... itrealvalue(21): 19 fields, each after one or more spaces. */
	for (int field = 3; field < 22; field++) {
		while (p < end && *p == ' ')
			p++;
		if (p == end || *p == '\0' || *p == '\n')
			return -EINVAL;
		while (p < end && *p != ' ' && *p != '\0' && *p != '\n')
			p++;
	}
	while (p < end && *p == ' ')
		p++;
	if (p == end || *p < '0' || *p > '9')
		return -EINVAL;
	for (; p < end && *p >= '0' && *p <= '9'; p++) {
		unsigned d = (unsigned)(*p - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -EINVAL; /* past 64 bits: not the kernel's */
		v = v * 10 + d;
	}
	if (p < end && *p != ' ' && *p != '\n' && *p != '\0')
		return -EINVAL;
	*ret_ticks = v;
	return 0;
}
