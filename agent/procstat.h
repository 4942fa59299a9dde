/* SPDX-License-Identifier: Apache-2.0 */
/*
 * /proc/PID/stat parsing: a pure function over bytes, so unit tests and the
 * fuzzer (tests/fuzz/fuzz-procstat.c) drive it without a process. The comm
 * field is the process's own choice (prctl(PR_SET_NAME)): it may hold spaces
 * and ')', so the fields are counted from the last ')'.
 */
#ifndef SR_AGENT_PROCSTAT_H
#define SR_AGENT_PROCSTAT_H

#include <stddef.h>
#include <stdint.h>

/*
 * The process's start time in clock ticks since boot (field 22, starttime),
 * from len bytes of /proc/PID/stat (no NUL needed): 0, or -EINVAL when the
 * bytes are not a stat line that far.
 */
int agent_procstat_start_ticks(const char *buf, size_t len, uint64_t *ret_ticks);

#endif
