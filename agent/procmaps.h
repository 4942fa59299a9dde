/* SPDX-License-Identifier: Apache-2.0 */
/*
 * /proc/PID/maps parsing: a pure function over bytes, so unit tests and the
 * fuzzer (tests/fuzz/fuzz-procmaps.c) drive it without a process.
 */
#ifndef SR_AGENT_PROCMAPS_H
#define SR_AGENT_PROCMAPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* vm.max_map_count's default is 65530; a maps file with more lines is cut here (and reported). */
#define AGENT_PROCMAPS_MAX_ENTRIES 65536

enum agent_map_kind {
	AGENT_MAP_FILE = 0, /* backed by a file: path is set */
	AGENT_MAP_ANON,	    /* no path: heap, JIT, anonymous mmap */
	AGENT_MAP_VDSO,	    /* [vdso] */
	AGENT_MAP_SPECIAL,  /* another [name]: [heap], [stack], [vsyscall], [vvar], [anon:...] */
};

#define AGENT_MAP_READ	 0x1
#define AGENT_MAP_WRITE	 0x2
#define AGENT_MAP_EXEC	 0x4
#define AGENT_MAP_SHARED 0x8

struct agent_map {
	uint64_t start;
	uint64_t end;
	uint64_t offset;
	uint64_t inode;
	uint32_t dev_major;
	uint32_t dev_minor;
	uint8_t perms;
	uint8_t kind; /* enum agent_map_kind */
	bool deleted; /* the path ended in " (deleted)", which is stripped */
	char *path;   /* file path or [name]; NULL for anonymous */
};

/*
 * Parses one line (no trailing newline needed) into ret; ret->path is
 * allocated. Returns 0, -EINVAL for a malformed line, -ENOMEM.
 */
int agent_procmaps_parse_line(const char *line, size_t len, struct agent_map *ret);

/*
 * Parses a whole maps file. Lines that do not parse are skipped and counted
 * in *ret_bad (if not NULL). With exec_only, only executable mappings are
 * kept (what frame attribution needs). The result is sorted by start.
 * Returns 0 or -ENOMEM; -E2BIG (with the first AGENT_PROCMAPS_MAX_ENTRIES
 * entries still returned) when there were more.
 */
int agent_procmaps_parse(const char *buf, size_t len, bool exec_only, struct agent_map **ret_maps, size_t *ret_n,
			 size_t *ret_bad);
void agent_procmaps_free(struct agent_map *maps, size_t n);

/* The mapping containing addr in a sorted array, or NULL. */
const struct agent_map *agent_procmaps_find(const struct agent_map *maps, size_t n, uint64_t addr);

#endif
