// SPDX-License-Identifier: Apache-2.0
/* /proc/PID/maps parser: any bytes must parse or be skipped, and lookups stay inside what parsed. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/procmaps.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct agent_map *m = NULL, one;
	size_t n = 0, bad = 0;

	if (size > 1 << 20)
		return 0;
	for (int exec_only = 0; exec_only < 2; exec_only++) {
		if (agent_procmaps_parse((const char *)data, size, exec_only, &m, &n, &bad) < 0 && !m)
			continue;
		for (size_t i = 0; i < n; i++) {
			if (m[i].end <= m[i].start)
				abort();
			if (i > 0 && m[i].start < m[i - 1].start)
				abort();
			if (m[i].path && strlen(m[i].path) > size)
				abort();
			/* Real maps never overlap; on overlapping input a hit must still hold the address. */
			const struct agent_map *hit = agent_procmaps_find(m, n, m[i].start);
			if (hit && (hit->start > m[i].start || hit->end <= m[i].start))
				abort();
		}
		agent_procmaps_free(m, n);
		m = NULL;
		n = 0;
	}
	if (agent_procmaps_parse_line((const char *)data, size, &one) == 0)
		free(one.path);
	return 0;
}
