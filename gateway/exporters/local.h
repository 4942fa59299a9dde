/* SPDX-License-Identifier: Apache-2.0 */
/* What the local exporters (file, pprof, flamegraph) share. */
#ifndef SR_GW_LOCAL_H
#define SR_GW_LOCAL_H

#include <stddef.h>
#include <stdint.h>

struct gw_location;

/*
 * A string interner owning its copies: index 0 is "". Its index is open
 * addressing of its own, not the tree's table (common/htab.h): the pprof and
 * flame graph exporters intern every frame's name, and on sr_htab an intern
 * took 8.5 % more instructions (callgrind, 20,000 names) and 1.04-1.17x the
 * time over 500 and 20,000 names in a side-by-side micro-benchmark
 * (2026-12-03).
 */
struct gw_strtab {
	char **s;
	uint32_t *len;
	uint32_t n, cap;
	uint32_t *slots; /* index + 1; 0 empty */
	uint64_t *hashes;
	uint32_t slot_cap;
	uint64_t bytes; /* of the copies */
};

int gw_strtab_init(struct gw_strtab *t);
void gw_strtab_free(struct gw_strtab *t);
/* Index of s (copied on first sight), or -ENOMEM. */
int64_t gw_strtab__intern(struct gw_strtab *t, const char *s);

/*
 * Writes data to path atomically: a temporary file in the same directory,
 * then rename(), so readers see the old or the new file, never half of one.
 */
/* write(2) until all of buf is written (EINTR retried); 0 or -errno. */
int gw_write_all(int fd, const void *buf, size_t len);
int gw_write_file_atomic(const char *path, const void *data, size_t len);

/* A name for a location without lines: "app+0x1a2b", "[kernel] 0xffff...", "[unknown] 0x7f..". */
void gw_location_fallback_name(const struct gw_location *l, char *buf, size_t size);

#endif
