// SPDX-License-Identifier: Apache-2.0
/*
 * The unwind table builder (agent/unwind-table.c) on arbitrary .eh_frame and
 * .debug_frame bytes, and on the whole input as an ELF file through libelf.
 *
 * Input: a flags byte, a little-endian u16 with the length of the .eh_frame
 * part (clamped to what is there), the .eh_frame bytes, then the
 * .debug_frame bytes. Each part is copied to a buffer of its own size so
 * that a read past either is an ASan error. The .eh_frame is linked at
 * FUZZ_EH_VADDR (flags bit 1: near the top of the address space instead, to
 * reach the wrap-around checks); tests/fuzz/corpus/unwind-table/ holds real
 * .eh_frame entries re-based to it. Flags bit 3 reads the CFI as AArch64's.
 *
 * Every table that comes out must be one the BPF unwinder can binary-search:
 * rows strictly sorted, known types, the last row INVALID, each row found at
 * its own address; a smaller max_rows only ever fails with -E2BIG. AArch64
 * bits (bpf/unwind.h) only in AArch64 tables, and only on rows with a CFA.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "agent/unwind-table.h"

#define FUZZ_EH_VADDR 0x10000000ull
/* Bigger inputs only slow the search down: real tables are built from files, this is about the parser. */
#define FUZZ_MAX_INPUT (64u << 10)
#define FUZZ_HEADER    3

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_table(int r, const struct agent_unwind_table *t, size_t max_rows)
{
	if (r < 0) {
		if (t->rows || t->n_rows)
			abort();
		return;
	}
	if (r != 0 || t->n_rows < 1 || t->n_rows > max_rows || !t->rows || t->end < t->base)
		abort();
	if (t->rows[t->n_rows - 1].cfa_type != UNWIND_CFA_INVALID || t->base + t->rows[t->n_rows - 1].pc > t->end)
		abort();
	for (size_t i = 0; i < t->n_rows; i++) {
		const struct unwind_row *row = &t->rows[i];
		uint8_t type = row->cfa_type & UNWIND_CFA_TYPE_MASK;

		if (type > UNWIND_CFA_UNSUPPORTED || (i > 0 && t->rows[i - 1].pc >= row->pc))
			abort();
		if (type != row->cfa_type &&
		    (t->arch != AGENT_UNWIND_ARCH_ARM64 ||
		     (type != UNWIND_CFA_RSP && type != UNWIND_CFA_RSP_X8 && type != UNWIND_CFA_RBP) ||
		     (row->cfa_type & UNWIND_A64_RA_MASK) == 0x30))
			abort();
		if (t->arch == AGENT_UNWIND_ARCH_ARM64 && (type == UNWIND_CFA_PLT || type == UNWIND_CFA_DEREF_RBP))
			abort();
		if (agent_unwind_table__find(t, t->base + row->pc) != row)
			abort();
		/* A row that says "stop" carries nothing else (the BPF side relies on no field of it). */
		if ((row->cfa_type == UNWIND_CFA_INVALID || row->cfa_type == UNWIND_CFA_END ||
		     row->cfa_type == UNWIND_CFA_UNSUPPORTED) &&
		    (row->cfa_off || row->rbp_off))
			abort();
	}
	if (t->rows[0].pc != 0 || (t->base > 0 && agent_unwind_table__find(t, t->base - 1)))
		abort();
}

static void from_fd(const uint8_t *data, size_t size)
{
	static int fd = -1;
	struct agent_unwind_table t;
	int r;

	if (fd < 0)
		fd = memfd_create("fuzz-unwind-table", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, 0) < 0 || pwrite(fd, data, size, 0) != (ssize_t)size)
		return;
	r = agent_unwind_table_build_fd(fd, AGENT_UNWIND_MAX_ROWS_DEFAULT, &t);
	check_table(r, &t, AGENT_UNWIND_MAX_ROWS_DEFAULT);
	agent_unwind_table_done(&t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct agent_unwind_sections s = { 0 };
	struct agent_unwind_table small, large;
	uint8_t *eh = NULL, *df = NULL;
	size_t eh_len, df_len, small_max;
	int r_small, r_large;

	if (size > FUZZ_MAX_INPUT)
		return 0;
	from_fd(data, size);
	if (size < FUZZ_HEADER)
		return 0;
	eh_len = (size_t)data[1] | (size_t)data[2] << 8;
	if (eh_len > size - FUZZ_HEADER)
		eh_len = size - FUZZ_HEADER;
	df_len = size - FUZZ_HEADER - eh_len;
	if (eh_len) {
		eh = malloc(eh_len);
		if (!eh)
			return 0;
		memcpy(eh, data + FUZZ_HEADER, eh_len);
	}
	if (df_len) {
		df = malloc(df_len);
		if (!df) {
			free(eh);
			return 0;
		}
		memcpy(df, data + FUZZ_HEADER + eh_len, df_len);
	}
	s.eh_frame = eh;
	s.eh_frame_len = eh_len;
	s.eh_frame_vaddr = data[0] & 2 ? UINT64_MAX - 0xfff : FUZZ_EH_VADDR;
	s.debug_frame = df;
	s.debug_frame_len = df_len;
	s.text_vaddr = FUZZ_EH_VADDR - 0x100000;
	s.data_vaddr = FUZZ_EH_VADDR + 0x100000;
	s.is_64 = !(data[0] & 1);
	s.arch = data[0] & 8 ? AGENT_UNWIND_ARCH_ARM64 : AGENT_UNWIND_ARCH_X86_64;
	/* 0 and 1 are refused outright; up to 17 rows cuts most real inputs short. */
	small_max = data[0] >> 4;
	if (data[0] & 4)
		small_max += 2;

	r_small = agent_unwind_table_build(&s, small_max, &small);
	check_table(r_small, &small, small_max);
	r_large = agent_unwind_table_build(&s, AGENT_UNWIND_MAX_ROWS_DEFAULT, &large);
	check_table(r_large, &large, AGENT_UNWIND_MAX_ROWS_DEFAULT);
	/* The limit changes whether a table fits, never what it holds or why it fails otherwise. */
	if (r_small == 0 &&
	    (r_large != 0 || small.n_rows != large.n_rows || small.base != large.base || small.end != large.end ||
	     memcmp(small.rows, large.rows, small.n_rows * sizeof(*small.rows)) ||
	     memcmp(&small.stats, &large.stats, sizeof(small.stats))))
		abort();
	if (r_small != 0 && r_small != -E2BIG && r_small != r_large)
		abort();
	if (r_large == -E2BIG)
		abort();
	agent_unwind_table_done(&small);
	agent_unwind_table_done(&large);
	free(eh);
	free(df);
	return 0;
}
