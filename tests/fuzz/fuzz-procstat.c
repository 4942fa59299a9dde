// SPDX-License-Identifier: Apache-2.0
/*
 * /proc/PID/stat parser: comm is the process's own (spaces, ')', newlines);
 * the parse reads only the bytes it is given and, when it succeeds, gives the
 * number that follows 19 fields after the last ')'.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/procstat.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint64_t ticks = 0;
	char *copy;

	if (size > 1 << 16)
		return 0;
	/* An exact-size heap copy: a read past its end is ASan's finding. */
	copy = malloc(size ? size : 1);
	if (!copy)
		return 0;
	memcpy(copy, data, size);
	if (agent_procstat_start_ticks(copy, size, &ticks) == 0 && !memchr(copy, ')', size))
		abort(); /* a success needs comm's closing ')' */
	free(copy);
	return 0;
}
