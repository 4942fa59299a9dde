/* SPDX-License-Identifier: GPL-2.0 OR Apache-2.0 */
/*
 * The table unwinder's step over an AArch64 row (bpf/unwind.h, UNWIND_A64_*),
 * included by unwind.bpf.h in arm64 builds only. Where x86-64 reads the
 * return address at CFA - 8, AArch64 finds it where the row says: still in
 * LR (a leaf function, a prologue or an epilogue: only the frame that was
 * interrupted, or that a signal frame restored, has its LR), or saved near
 * the CFA or near the SP or FP the CFA is computed from. FP is saved beside
 * it (stp x29, x30) or alone. Return addresses lose their pointer
 * authentication bits.
 *
 * Loaded and run on Debian 12's arm64 6.1 kernel, emulated (docs/platforms.md).
 */
#ifndef SR_BPF_UNWIND_A64_BPF_H
#define SR_BPF_UNWIND_A64_BPF_H

/*
 * Pointer authentication puts a signature in a return address's bits above
 * the virtual address. User addresses have 48 bits (52 only with
 * CONFIG_ARM64_VA_BITS_52 and a process that asks for them): keep those.
 */
#define UNWIND_A64_VA_MASK ((1ULL << 48) - 1)
/*
 * The signal frame at SP in __kernel_rt_sigreturn (struct rt_sigframe):
 * siginfo (128 bytes), then the ucontext, whose uc_mcontext is at 176
 * (uc_flags, uc_link, uc_stack, uc_sigmask and its padding to 128 bytes,
 * aligned to 16); in it fault_address, then regs[0..30], sp and pc.
 */
#define UNWIND_A64_SIGFRAME_X29 (128 + 176 + 8 + 8 * 29)

/* Moves st to the caller through an AArch64 row; returns 0, or the PROFILE_CNT_UNWIND_END_* that ends the stack. */
static __always_inline int unwind_row_step_a64(struct unwind_scratch_state *st, const struct unwind_row *row)
{
	__u8 type = row->cfa_type & UNWIND_CFA_TYPE_MASK, ra_rule = row->cfa_type & UNWIND_A64_RA_MASK;
	__u8 fp_rule = row->cfa_type & UNWIND_A64_FP_MASK;
	__u64 base, cfa, ra, ra_at = 0;

	switch (type) {
	case UNWIND_CFA_RSP:
		base = st->rsp;
		cfa = base + row->cfa_off;
		break;
	case UNWIND_CFA_RSP_X8:
		base = st->rsp;
		cfa = base + ((__u64)row->cfa_off << 3);
		break;
	case UNWIND_CFA_RBP:
		if (!st->rbp_valid)
			return PROFILE_CNT_UNWIND_END_NO_RULE;
		base = st->rbp;
		cfa = base + row->cfa_off;
		break;
	case UNWIND_CFA_SIGNAL: {
		/* x29, x30, sp, pc of the interrupted code: go on from them, the pc exact, LR live. */
		__u64 regs[4];

		if (bpf_probe_read_user(regs, sizeof(regs), (const void *)(st->rsp + UNWIND_A64_SIGFRAME_X29)))
			return PROFILE_CNT_UNWIND_END_READ_FAULT;
		st->rbp = regs[0];
		st->lr = regs[1] & UNWIND_A64_VA_MASK;
		st->rsp = regs[2];
		st->rip = regs[3];
		st->rbp_valid = 1;
		st->return_address = 0;
		st->table_frames++;
		return st->rip ? 0 : PROFILE_CNT_UNWIND_END_COMPLETE;
	}
	case UNWIND_CFA_END:
		return PROFILE_CNT_UNWIND_END_COMPLETE;
	case UNWIND_CFA_INVALID:
		return unwind_fp_step(st, PROFILE_CNT_UNWIND_END_NO_CFI);
	default:
		return PROFILE_CNT_UNWIND_END_NO_RULE;
	}
	/* A leaf's CFA is its SP (nothing pushed): the caller's frame is at or above this one. */
	if (cfa < st->rsp)
		return PROFILE_CNT_UNWIND_END_NO_RULE;
	switch (ra_rule) {
	case UNWIND_A64_RA_LR:
		/*
		 * LR is this frame's only where its pc is exact (the frame a
		 * sample or a signal interrupted); above, it holds whatever the
		 * last call left.
		 */
		if (st->return_address)
			return PROFILE_CNT_UNWIND_END_NO_RULE;
		ra = st->lr;
		break;
	case UNWIND_A64_RA_CFA:
		ra_at = cfa + 8 * (__s64)row->rbp_off;
		break;
	case UNWIND_A64_RA_BASE:
		ra_at = base + 8 * (__s64)row->rbp_off;
		break;
	default:
		return PROFILE_CNT_UNWIND_END_NO_RULE;
	}
	if (ra_at) {
		/* A frame that saved its return address has moved the stack: the same CFA again would loop. */
		if (cfa == st->rsp || bpf_probe_read_user(&ra, sizeof(ra), (const void *)ra_at))
			return cfa == st->rsp ? PROFILE_CNT_UNWIND_END_NO_RULE : PROFILE_CNT_UNWIND_END_READ_FAULT;
	}
	switch (fp_rule) {
	case UNWIND_A64_FP_SAME:
		break;
	case UNWIND_A64_FP_PAIR:
		if (bpf_probe_read_user(&st->rbp, sizeof(st->rbp), (const void *)(ra_at - 8)))
			return PROFILE_CNT_UNWIND_END_READ_FAULT;
		st->rbp_valid = 1;
		break;
	case UNWIND_A64_FP_CFA:
		if (bpf_probe_read_user(&st->rbp, sizeof(st->rbp), (const void *)(cfa + 8 * (__s64)row->rbp_off)))
			return PROFILE_CNT_UNWIND_END_READ_FAULT;
		st->rbp_valid = 1;
		break;
	default:
		st->rbp_valid = 0;
		break;
	}
	ra &= UNWIND_A64_VA_MASK;
	st->rsp = cfa;
	st->rip = ra;
	st->return_address = 1;
	st->table_frames++;
	return ra ? 0 : PROFILE_CNT_UNWIND_END_COMPLETE;
}

#endif
