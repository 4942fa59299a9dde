// SPDX-License-Identifier: Apache-2.0
/*
 * Prints the unwind table agent/unwind-table.c builds for an ELF file, one
 * row a line: "vaddr type cfa_off rbp_off" (vaddr in hex, the rest decimal,
 * as bpf/unwind.h defines them; an AArch64 table's type has UNWIND_A64_* in
 * its high bits). unwind-table-readelf.py compares it with what binutils'
 * readelf makes of the same CFI, unwind-table-arm64.py with llvm-dwarfdump's
 * reading of AArch64 files: implementations that share no code with ours.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agent/unwind-table.h"

int main(int argc, char **argv)
{
	struct agent_unwind_table t;
	int fd, r;

	if (argc != 2) {
		fprintf(stderr, "usage: %s ELF-FILE\n", argv[0]);
		return 2;
	}
	fd = open(argv[1], O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "unwind-table-dump: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	r = agent_unwind_table_build_fd(fd, AGENT_UNWIND_MAX_ROWS_DEFAULT, &t);
	close(fd);
	if (r < 0) {
		fprintf(stderr, "unwind-table-dump: %s: no table: %s\n", argv[1], strerror(-r));
		return 1;
	}
	/* A header line the reader can tell from rows: the table's range and its counters. */
	printf("# base %llx end %llx rows %zu fdes %u fdes_bad %u rows_unsupported %u from_debug_frame %u arch %s\n",
	       (unsigned long long)t.base, (unsigned long long)t.end, t.n_rows, t.stats.fdes, t.stats.fdes_bad,
	       t.stats.rows_unsupported, t.stats.from_debug_frame,
	       t.arch == AGENT_UNWIND_ARCH_ARM64 ? "arm64" : "x86_64");
	for (size_t i = 0; i < t.n_rows; i++) {
		const struct unwind_row *row = &t.rows[i];

		printf("%llx %u %u %d\n", (unsigned long long)(t.base + row->pc), row->cfa_type, row->cfa_off,
		       row->rbp_off);
	}
	agent_unwind_table_done(&t);
	return fflush(stdout) == 0 ? 0 : 1;
}
