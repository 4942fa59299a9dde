/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unwind tables from an executable's .eh_frame (and .debug_frame): for every
 * pc, how to find the caller's frame (bpf/unwind.h says what a row holds).
 * Pure code over bytes: the section bytes are untrusted input, so every read
 * is bounds-checked, every loop bounded, and tests/fuzz/fuzz-unwind-table.c
 * drives it (docs/style.md 11, 13). No BPF, no /proc: agent/unwinder.c loads the
 * result into the kernel.
 */
#ifndef SR_AGENT_UNWIND_TABLE_H
#define SR_AGENT_UNWIND_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include <linux/types.h>

#include "unwind.h"

/*
 * Bytes of a CIE's initial instructions; a CIE with more is refused (its FDEs
 * are counted in fdes_bad). GCC and clang emit 3 to 10.
 */
#define AGENT_UNWIND_MAX_CIE_INSNS 512

/* Bytes after an uncovered entry point taken as the outermost frame (ld.so's entry code is 64). */
#define AGENT_UNWIND_ENTRY_SPAN 256

/* Rows one table may have; libLLVM-14 needs about 1 million. */
#define AGENT_UNWIND_MAX_ROWS_DEFAULT (4u << 20)

/*
 * The instruction set whose call frame information a table is built from,
 * and so how its rows read (bpf/unwind.h). Zero is x86-64.
 */
enum agent_unwind_arch {
	AGENT_UNWIND_ARCH_X86_64 = 0,
	AGENT_UNWIND_ARCH_ARM64 = 1, /* AArch64 */
};

/* The architecture this agent runs on: the only one whose tables its BPF unwinder can follow. */
#if defined(__aarch64__)
#define AGENT_UNWIND_ARCH_NATIVE AGENT_UNWIND_ARCH_ARM64
#else
#define AGENT_UNWIND_ARCH_NATIVE AGENT_UNWIND_ARCH_X86_64
#endif

struct agent_unwind_stats {
	uint32_t fdes;		   /* FDEs read */
	uint32_t fdes_bad;	   /* FDEs skipped: malformed, or a CIE we cannot use */
	uint32_t rows_unsupported; /* rows whose CFA rule we cannot follow (UNWIND_CFA_UNSUPPORTED) */
	uint32_t rows_rbp_undefined;
	uint32_t from_debug_frame; /* FDEs that came from .debug_frame */
};

struct agent_unwind_table {
	uint64_t base; /* ELF vaddr that row pc 0 stands for */
	uint64_t end;  /* first vaddr past the last row's range */
	struct unwind_row *rows;
	size_t n_rows;
	enum agent_unwind_arch arch; /* how the rows read */
	struct agent_unwind_stats stats;
};

/* The bytes the builder reads, with the virtual addresses they were linked at. */
struct agent_unwind_sections {
	const uint8_t *eh_frame; /* may be NULL */
	size_t eh_frame_len;
	uint64_t eh_frame_vaddr;    /* for pc-relative pointer encodings */
	const uint8_t *debug_frame; /* may be NULL */
	size_t debug_frame_len;
	uint64_t text_vaddr;	     /* for DW_EH_PE_textrel (rare) */
	uint64_t data_vaddr;	     /* for DW_EH_PE_datarel: .got's address on x86-64 */
	int is_64;		     /* 1: ELFCLASS64 */
	enum agent_unwind_arch arch; /* whose registers the CFI names (the ELF's e_machine) */
	/*
	 * The ELF's entry point (e_entry), or 0. Where no FDE covers it (the
	 * dynamic loader's _start and _dl_start_user, hand-written without CFI)
	 * it is the outermost frame: it gets an UNWIND_CFA_END row up to the
	 * next FDE, at most AGENT_UNWIND_ENTRY_SPAN bytes.
	 */
	uint64_t entry;
};

/*
 * Builds the table from section bytes. Returns 0; -ENOENT when neither
 * section has a usable FDE; -EINVAL when the bytes are malformed past
 * recovery (an FDE that fails alone is skipped and counted instead); -E2BIG
 * when more than max_rows rows would be needed; -ENOMEM; -ENOEXEC for an
 * arch that is not one of enum agent_unwind_arch.
 */
int agent_unwind_table_build(const struct agent_unwind_sections *s, size_t max_rows, struct agent_unwind_table *ret);

/*
 * Finds the sections in an ELF file open at fd (read with libelf) and
 * builds, for the architecture the file's e_machine names (ret->arch; the
 * caller checks it is the one it can use). Returns as above, or -ENOEXEC
 * when the file is not a 64-bit little-endian x86-64 or AArch64 ELF.
 */
int agent_unwind_table_build_fd(int fd, size_t max_rows, struct agent_unwind_table *ret);

/* The row that holds vaddr, or NULL (for tests and the agent's checks; BPF does its own search). */
const struct unwind_row *agent_unwind_table__find(const struct agent_unwind_table *t, uint64_t vaddr);

void agent_unwind_table_done(struct agent_unwind_table *t);

#endif
