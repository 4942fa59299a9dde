/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An identified file's entry, shared by the files that keep processes:
 * proc.c (the cache of processes and of the files they map) and proc-map.c
 * (what one mapping of a process answers), and nothing else.
 */
#ifndef SR_AGENT_PROC_PRIVATE_H
#define SR_AGENT_PROC_PRIVATE_H

#include <stdint.h>

#include "proc.h"

struct agent_exe {
	uint64_t key[4]; /* dev, ino, mtime_ns, size */
	struct agent_elf_info elf;
	int64_t store_idx; /* < 0: not identifiable */
	uint32_t refs;
	uint64_t last_window; /* the last window a process mapped it in */
	char *path;	      /* as the process that first mapped it names it; NULL for the vDSO */
};

#endif
