// SPDX-License-Identifier: Apache-2.0
/*
 * The unwind table builder (agent/unwind-table.c) on AArch64 call frame
 * information, hand-assembled with cfi-asm.c: GCC's frames (leaf, frame
 * record, pointer authentication, alloca) and the rules the BPF unwinder
 * cannot follow.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "cfi-asm.h"

/* AArch64 (DWARF for the Arm 64-bit Architecture): FP, LR and SP, and a CIE as GCC writes it. */
#define A64_FP 29
#define A64_LR 30
#define A64_SP 31

/* "zR", code alignment 4, data alignment -8, return address column ra; CFA = SP, LR unspecified. */
static struct cie_ref a64_cie(struct buf *s, uint64_t ra)
{
	struct cie_ref c = { .off = s->n, .z = true };
	size_t at = entry_begin(s, false);

	uN(s, 0, 4);
	u8(s, 1);
	put(s, "zR", 3);
	uleb(s, 4);
	sleb(s, -8);
	u8(s, (uint8_t)ra);
	u8(s, 1);
	u8(s, PE_PCREL_SDATA4);
	def_cfa(s, A64_SP, 0);
	entry_end(s, at, false);
	return c;
}

static int build_arch(const struct buf *eh, enum agent_unwind_arch arch, struct agent_unwind_table *t)
{
	struct agent_unwind_sections s = {
		.eh_frame = eh->b, .eh_frame_len = eh->n, .eh_frame_vaddr = eh->vaddr, .is_64 = 1, .arch = arch
	};

	return agent_unwind_table_build(&s, AGENT_UNWIND_MAX_ROWS_DEFAULT, t);
}

#define A64(cfa, ra, fp) ((uint8_t)((cfa) | (ra) | (fp)))

/*
 * GCC's AArch64 frames: a leaf (the return address stays in LR), the frame
 * record pushed by stp x29, x30, [sp, -32]! with pointer authentication
 * around it, a 4 KiB frame whose record is at its bottom, and an alloca
 * frame whose CFA moves to FP. Code alignment 4: every advance is
 * instructions.
 */
static void test_a64_frames(void **state)
{
	struct buf eh = { .vaddr = EH_VADDR }, leaf = { 0 }, rec = { 0 }, big = { 0 }, var = { 0 };
	struct agent_unwind_table t;
	struct cie_ref c;

	(void)state;
	c = a64_cie(&eh, A64_LR);
	u8(&leaf, CFA_nop);
	eh_fde(&eh, c, 0x1000, 0x20, &leaf);
	/* paciasp; stp x29, x30, [sp, -32]!; ...; ldp; autiasp; ret */
	u8(&rec, CFA_GNU_window_save); /* DW_CFA_AARCH64_negate_ra_state */
	adv(&rec, 1);
	def_cfa_offset(&rec, 32);
	offset(&rec, A64_FP, 4);
	offset(&rec, A64_LR, 3);
	adv(&rec, 10);
	u8(&rec, CFA_restore | A64_LR);
	u8(&rec, CFA_restore | A64_FP);
	def_cfa_offset(&rec, 0);
	adv(&rec, 1);
	u8(&rec, CFA_GNU_window_save);
	eh_fde(&eh, c, 0x1020, 0x30, &rec);
	/* sub sp, sp, #4128; stp x29, x30, [sp] (GCC 12 without frame pointers keeps LR at the bottom too) */
	adv(&big, 2);
	def_cfa_offset(&big, 4128);
	offset_extended(&big, A64_LR, 514); /* CFA - 4112: 2 slots above SP */
	adv(&big, 8);
	offset_extended(&big, A64_FP, 515); /* CFA - 4120: below LR's slot */
	eh_fde(&eh, c, 0x1050, 0x40, &big);
	/* stp x29, x30, [sp, -32]!; mov x29, sp: the CFA follows FP */
	adv(&var, 1);
	def_cfa_offset(&var, 32);
	offset(&var, A64_FP, 4);
	offset(&var, A64_LR, 3);
	adv(&var, 1);
	def_cfa_register(&var, A64_FP);
	eh_fde(&eh, c, 0x1090, 0x20, &var);
	assert_int_equal(build_arch(&eh, AGENT_UNWIND_ARCH_ARM64, &t), 0);
	assert_int_equal(t.arch, AGENT_UNWIND_ARCH_ARM64);
	EXPECT_ROWS(&t, { 0x1000, A64(UNWIND_CFA_RSP, UNWIND_A64_RA_LR, UNWIND_A64_FP_SAME), 0, 0 },
		    { 0x1024, A64(UNWIND_CFA_RSP, UNWIND_A64_RA_CFA, UNWIND_A64_FP_PAIR), 32, -3 },
		    { 0x104c, A64(UNWIND_CFA_RSP, UNWIND_A64_RA_LR, UNWIND_A64_FP_SAME), 0, 0 },
		    { 0x1058, A64(UNWIND_CFA_RSP, UNWIND_A64_RA_BASE, UNWIND_A64_FP_SAME), 4128, 2 },
		    { 0x1078, A64(UNWIND_CFA_RSP, UNWIND_A64_RA_BASE, UNWIND_A64_FP_PAIR), 4128, 2 },
		    { 0x1090, A64(UNWIND_CFA_RSP, UNWIND_A64_RA_LR, UNWIND_A64_FP_SAME), 0, 0 },
		    { 0x1094, A64(UNWIND_CFA_RSP, UNWIND_A64_RA_CFA, UNWIND_A64_FP_PAIR), 32, -3 },
		    { 0x1098, A64(UNWIND_CFA_RBP, UNWIND_A64_RA_CFA, UNWIND_A64_FP_PAIR), 32, -3 },
		    { 0x10b0, UNWIND_CFA_INVALID, 0, 0 });
	assert_int_equal(t.stats.fdes_bad, 0);
	assert_int_equal(t.stats.rows_unsupported, 0);
	assert_int_equal(t.stats.rows_rbp_undefined, 0);
	agent_unwind_table_done(&t);
	/* The same bytes read as x86-64: column 30 is no return address there, every CIE is refused. */
	assert_int_equal(build_arch(&eh, AGENT_UNWIND_ARCH_X86_64, &t), -EINVAL);
	assert_int_equal(t.stats.fdes_bad, 4);
	assert_int_equal(build_arch(&eh, (enum agent_unwind_arch)7, &t), -ENOEXEC);
}

/*
 * The AArch64 rules a row holds otherwise: FP saved while the return
 * address is still in LR, FP saved away from LR (lost, counted), the
 * return address moved to another register (unsupported), _start's
 * undefined LR (the end), and an x86-64 CIE's return address column.
 */
static void test_a64_other_rules(void **state)
{
	struct buf eh = { .vaddr = EH_VADDR }, a = { 0 }, b = { 0 }, start = { 0 }, x86 = { 0 };
	struct agent_unwind_table t;
	struct cie_ref c, c86;

	(void)state;
	c = a64_cie(&eh, A64_LR);
	c86 = a64_cie(&eh, REG_RA);
	adv(&a, 1);
	def_cfa_offset(&a, 16);
	offset(&a, A64_FP, 2); /* FP alone at CFA - 16 */
	adv(&a, 1);
	offset(&a, A64_LR, 1); /* then LR at CFA - 8: the pair */
	adv(&a, 1);
	offset(&a, A64_FP, 6); /* FP far from LR */
	adv(&a, 1);
	op_reg(&a, CFA_register, A64_LR);
	uleb(&a, 9); /* LR's value in x9 */
	eh_fde(&eh, c, 0x2000, 0x20, &a);
	adv(&b, 1);
	def_cfa(&b, 19, 16); /* the CFA in a register the unwinder does not have */
	eh_fde(&eh, c, 0x2020, 0x10, &b);
	adv(&start, 1);
	op_reg(&start, CFA_undefined, A64_LR);
	eh_fde(&eh, c, 0x2030, 0x10, &start);
	adv(&x86, 1);
	eh_fde(&eh, c86, 0x2040, 0x10, &x86);
	assert_int_equal(build_arch(&eh, AGENT_UNWIND_ARCH_ARM64, &t), 0);
	EXPECT_ROWS(&t, { 0x2000, A64(UNWIND_CFA_RSP, UNWIND_A64_RA_LR, UNWIND_A64_FP_SAME), 0, 0 },
		    { 0x2004, A64(UNWIND_CFA_RSP, UNWIND_A64_RA_LR, UNWIND_A64_FP_CFA), 16, -2 },
		    { 0x2008, A64(UNWIND_CFA_RSP, UNWIND_A64_RA_CFA, UNWIND_A64_FP_PAIR), 16, -1 },
		    { 0x200c, A64(UNWIND_CFA_RSP, UNWIND_A64_RA_CFA, UNWIND_A64_FP_UNDEFINED), 16, -1 },
		    { 0x2010, UNWIND_CFA_UNSUPPORTED, 0, 0 },
		    { 0x2020, A64(UNWIND_CFA_RSP, UNWIND_A64_RA_LR, UNWIND_A64_FP_SAME), 0, 0 },
		    { 0x2024, UNWIND_CFA_UNSUPPORTED, 0, 0 },
		    { 0x2030, A64(UNWIND_CFA_RSP, UNWIND_A64_RA_LR, UNWIND_A64_FP_SAME), 0, 0 },
		    { 0x2034, UNWIND_CFA_END, 0, 0 }, { 0x2040, UNWIND_CFA_INVALID, 0, 0 });
	assert_int_equal(t.stats.fdes, 4);
	assert_int_equal(t.stats.fdes_bad, 1);
	assert_int_equal(t.stats.rows_unsupported, 2);
	assert_int_equal(t.stats.rows_rbp_undefined, 1);
	agent_unwind_table_done(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_a64_frames),
		cmocka_unit_test(test_a64_other_rules),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
