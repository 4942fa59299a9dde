/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Types shared by the table unwinder in profile.bpf.c and the agent, which
 * builds the tables from .eh_frame / .debug_frame (agent/unwind-table.c) and
 * loads them (agent/unwinder.c). Fixed-width types only (docs/style.md 1).
 *
 * On x86-64 the rules name RSP, RBP and RIP, and the return address is
 * always at CFA - 8 (the x86-64 psABI's CIE rule; a table whose CIE says
 * otherwise is refused when it is built). Tables built from AArch64 files
 * use the same rows with SP (x31) for RSP and FP (x29) for RBP, and say
 * where the return address is in cfa_type's high bits (UNWIND_A64_* below).
 *
 * A table is one executable's rows sorted by pc. A row holds from its pc up
 * to the next row's pc; pc is relative to the table's base (the lowest ELF
 * virtual address covered), so a row is 8 bytes for any file under 4 GiB of
 * text. Addresses that no FDE covers get a row of type UNWIND_CFA_INVALID:
 * code without CFI (V8's embedded builtins, hand-written assembly), which
 * the BPF side crosses by its frame pointers; a rule that exists but that
 * the unwinder cannot follow is UNWIND_CFA_UNSUPPORTED, where it stops.
 */
#ifndef SR_BPF_UNWIND_H
#define SR_BPF_UNWIND_H

/* How the CFA (the caller's stack pointer before the call) is found. */
enum unwind_cfa_type {
	UNWIND_CFA_INVALID = 0, /* no FDE covers this pc: follow the frame pointers (counted when they break) */
	UNWIND_CFA_RSP = 1,	/* CFA = RSP + cfa_off */
	UNWIND_CFA_RBP = 2,	/* CFA = RBP + cfa_off */
	/*
	 * The PLT's expression: CFA = RSP + 8 + ((RIP & 15) >= cfa_off ? 8 : 0)
	 * (cfa_off is the threshold, 11 for .plt and 10 for some .plt.sec).
	 */
	UNWIND_CFA_PLT = 3,
	/* CFA = *(RBP + (__s16)cfa_off): GCC's stack realignment in main and threads' entry points. */
	UNWIND_CFA_DEREF_RBP = 4,
	/*
	 * A signal frame (CIE augmentation "S", glibc's __restore_rt): the
	 * interrupted registers are in the ucontext at RSP; the unwinder reads
	 * RIP, RSP and RBP from uc_mcontext and goes on from there.
	 */
	UNWIND_CFA_SIGNAL = 5,
	/* The outermost frame (the return address rule is "undefined", as in _start): the stack is complete. */
	UNWIND_CFA_END = 6,
	/* CFA = RSP + 8 * cfa_off: frames of 64 KiB and more (CPython has some), up to 512 KiB. */
	UNWIND_CFA_RSP_X8 = 7,
	/*
	 * An FDE covers this pc but its rule is one the unwinder cannot follow
	 * (a CFA in another register, another expression, the return address
	 * elsewhere than CFA - 8): stop (counted). Its code keeps no frame
	 * pointers to fall back on, or it would not need the rule.
	 */
	UNWIND_CFA_UNSUPPORTED = 8,
};

/*
 * AArch64 rows (a table built from an AArch64 file; the agent loads only
 * tables of its own architecture). cfa_type's low four bits are the type
 * above: UNWIND_CFA_RSP, _RSP_X8 and _RBP with SP and FP, _SIGNAL, _END,
 * _INVALID and _UNSUPPORTED (never _PLT or _DEREF_RBP). Its high four bits
 * say where the return address and the caller's FP are, since the return
 * address is not at a fixed place: it stays in LR (x30) until a function
 * saves it, and leaf functions never do; GCC saves it with FP (stp x29, x30)
 * at the bottom of the frame, clang at the top. rbp_off is then the slot of
 * the saved return address in 8-byte units (RA_CFA, RA_BASE), or FP's
 * (RA_LR with FP_CFA), else 0. A return address may carry pointer
 * authentication bits (DW_CFA_AARCH64_negate_ra_state): an AArch64 unwinder
 * strips them from every return address it reads (the BPF unwinder follows
 * x86-64 rows only so far: docs/platforms.md).
 *
 * x86-64 rows keep these bits 0.
 */
#define UNWIND_CFA_TYPE_MASK 0x0f
#define UNWIND_A64_RA_MASK   0x30
#define UNWIND_A64_RA_LR     0x00 /* still in LR: a leaf function, a prologue or an epilogue (the first frame only) */
#define UNWIND_A64_RA_CFA    0x10 /* at CFA + 8 * rbp_off */
/* At B + 8 * rbp_off, B the register the CFA is computed from (CFA minus cfa_off's bytes): GCC's frames of 1 KiB and more. */
#define UNWIND_A64_RA_BASE	0x20
#define UNWIND_A64_FP_MASK	0xc0
#define UNWIND_A64_FP_SAME	0x00 /* FP keeps its value in the caller */
#define UNWIND_A64_FP_PAIR	0x40 /* saved in the slot below the return address's (stp x29, x30) */
#define UNWIND_A64_FP_UNDEFINED 0x80 /* cannot be recovered here */
#define UNWIND_A64_FP_CFA	0xc0 /* at CFA + 8 * rbp_off, with the return address in LR */

/* rbp_off values that are not an offset. */
#define UNWIND_RBP_SAME	     0	    /* RBP keeps its value in the caller */
#define UNWIND_RBP_UNDEFINED (-128) /* RBP cannot be recovered (saved in a register or by an expression) */

struct unwind_row {
	__u32 pc;      /* relative to the table's base */
	__u16 cfa_off; /* bytes added to the register (UNWIND_CFA_RSP/RBP), or as enum unwind_cfa_type says */
	__u8 cfa_type; /* enum unwind_cfa_type (AArch64: with UNWIND_A64_* in the high bits) */
	__s8 rbp_off; /* the caller's RBP is at CFA + 8 * rbp_off, or UNWIND_RBP_SAME / UNWIND_RBP_UNDEFINED (AArch64: above) */
};

/*
 * What the BPF unwinder knows of a process: its executable mappings, sorted by
 * start, each with its table (or none: then frame pointers are followed).
 * Written by the agent (agent/unwinder.c) into the unwind_procs map, keyed by
 * tgid; start_boottime_ns tells a reused PID apart.
 */
/* A power of two: the BPF side masks indices with it. */
#define UNWIND_MAX_MAPPINGS 128
/* Tables loaded at once (entries of the unwind_tables map of maps). */
#define UNWIND_MAX_TABLES 8192
/* Binary search steps: enough for UNWIND_MAX_MAPPINGS and for 2^24 rows. */
#define UNWIND_MAPPING_STEPS 8
#define UNWIND_ROW_STEPS     24

struct unwind_mapping {
	__u64 start;
	__u64 end;
	__u64 bias;	/* row pc = address - bias (the load bias plus the table's base) */
	__u32 table_id; /* 0: no table, follow frame pointers */
	__u32 n_rows;
};

struct unwind_proc {
	__u64 start_boottime_ns;
	__u64 mm; /* the address space (mm_struct) the mappings belong to; 0: not known */
	__u32 n;
	__u32 pad;
	struct unwind_mapping m[UNWIND_MAX_MAPPINGS];
};

/*
 * A loaded table by file (unwind_files), so the BPF side can add a mapping
 * of that file to its process's list itself, from the mapping record, the
 * moment the mapping is made: a process that lives 50 ms is unwound with
 * tables from its first sample, without waiting for the agent. The key is
 * the file's identity as the mapping record carries it (profile.h).
 */
struct unwind_file_key {
	__u64 dev;
	__u64 ino;
	__u64 mtime_ns;
	__u64 size;
};

struct unwind_file {
	__u64 offset;	/* the file offset of the mapping bias_off holds for (the text segment's) */
	__u64 bias_off; /* a mapping at offset, starting at S: unwind_mapping.bias = S - bias_off */
	__u32 table_id;
	__u32 n_rows;
};

#endif
