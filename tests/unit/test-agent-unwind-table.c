// SPDX-License-Identifier: Apache-2.0
/*
 * The unwind table builder (agent/unwind-table.c) on hand-assembled call
 * frame information (the assembler is cfi-asm.c): each test states the
 * instructions a compiler would emit and the rows the BPF unwinder must get.
 * Then entry points and real files: this test binary and the libc it runs
 * with. Malformed input is test-agent-unwind-table-bad.c, AArch64 rules
 * test-agent-unwind-table-a64.c.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "cfi-asm.h"

/* push %rbp; push %rbx; sub $56,%rsp ... add; pop %rbx; pop %rbp; ret, in a 128 KiB function. */
static void test_rsp_cfa(void **state)
{
	struct buf eh = { .vaddr = EH_VADDR }, in = { 0 };
	struct agent_unwind_table t;
	struct cie_ref c;

	(void)state;
	c = eh_cie(&eh, "zR", NULL);
	adv(&in, 1);
	def_cfa_offset(&in, 16);
	offset(&in, REG_RBP, 2);
	adv1(&in, 3);
	def_cfa_offset(&in, 24);
	offset(&in, 3, 3); /* rbx: not tracked, changes no row */
	adv2(&in, 0x104);
	def_cfa_offset(&in, 80);
	adv4(&in, 0x10000);
	def_cfa_offset(&in, 24);
	adv(&in, 1);
	def_cfa_offset(&in, 16);
	adv(&in, 1);
	def_cfa_offset(&in, 8);
	u8(&in, CFA_restore | REG_RBP);
	u8(&in, CFA_nop);
	u8(&in, CFA_nop);
	eh_fde(&eh, c, 0x10000, 0x20000, &in);
	assert_int_equal(build_eh(&eh, &t), 0);
	EXPECT_ROWS(&t, { 0x10000, UNWIND_CFA_RSP, 8, SAME }, { 0x10001, UNWIND_CFA_RSP, 16, -2 },
		    { 0x10004, UNWIND_CFA_RSP, 24, -2 }, { 0x10108, UNWIND_CFA_RSP, 80, -2 },
		    { 0x20108, UNWIND_CFA_RSP, 24, -2 }, { 0x20109, UNWIND_CFA_RSP, 16, -2 },
		    { 0x2010a, UNWIND_CFA_RSP, 8, SAME }, { 0x30000, UNWIND_CFA_INVALID, 0, 0 });
	assert_int_equal(t.base, 0x10000);
	assert_int_equal(t.end, 0x30000);
	assert_int_equal(t.stats.fdes, 1);
	assert_int_equal(t.stats.fdes_bad, 0);
	assert_int_equal(t.stats.rows_unsupported, 0);
	assert_int_equal(t.stats.from_debug_frame, 0);
	agent_unwind_table_done(&t);
	assert_null(t.rows);
	agent_unwind_table_done(NULL);
}

/* push %rbp; mov %rsp,%rbp ... leave; ret: CFA on rbp, rbp saved at CFA - 16. */
static void test_rbp_cfa(void **state)
{
	struct buf eh = { .vaddr = EH_VADDR }, in = { 0 };
	struct agent_unwind_table t;
	struct cie_ref c;

	(void)state;
	c = eh_cie(&eh, "zR", NULL);
	fp_prologue(&in);
	adv(&in, 0x20);
	def_cfa(&in, REG_RSP, 8);
	eh_fde(&eh, c, 0x1000, 0x30, &in);
	assert_int_equal(build_eh(&eh, &t), 0);
	EXPECT_ROWS(&t, { 0x1000, UNWIND_CFA_RSP, 8, SAME }, { 0x1001, UNWIND_CFA_RSP, 16, -2 },
		    { 0x1004, UNWIND_CFA_RBP, 16, -2 }, { 0x1024, UNWIND_CFA_RSP, 8, -2 },
		    { 0x1030, UNWIND_CFA_INVALID, 0, 0 });
	agent_unwind_table_done(&t);
}

/* GCC's early return: remember_state before the epilogue, restore_state after the ret. */
static void test_remember_restore(void **state)
{
	struct buf eh = { .vaddr = EH_VADDR }, in = { 0 }, in2 = { 0 };
	struct agent_unwind_table t;
	struct cie_ref c;

	(void)state;
	c = eh_cie(&eh, "zR", NULL);
	adv(&in, 1);
	def_cfa_offset(&in, 16);
	offset(&in, REG_RBP, 2);
	adv(&in, 4);
	u8(&in, CFA_remember_state);
	def_cfa_offset(&in, 8);
	u8(&in, CFA_restore | REG_RBP);
	adv(&in, 1);
	u8(&in, CFA_restore_state);
	adv(&in, 4);
	eh_fde(&eh, c, 0x1000, 0x10, &in);
	/* The CFA register is restored too: rbp-based, then rsp for the epilogue, then rbp again. */
	fp_prologue(&in2);
	adv(&in2, 4);
	u8(&in2, CFA_remember_state);
	def_cfa(&in2, REG_RSP, 8);
	adv(&in2, 1);
	u8(&in2, CFA_restore_state);
	eh_fde(&eh, c, 0x2000, 0x10, &in2);
	assert_int_equal(build_eh(&eh, &t), 0);
	EXPECT_ROWS(&t, { 0x1000, UNWIND_CFA_RSP, 8, SAME }, { 0x1001, UNWIND_CFA_RSP, 16, -2 },
		    { 0x1005, UNWIND_CFA_RSP, 8, SAME }, { 0x1006, UNWIND_CFA_RSP, 16, -2 },
		    { 0x1010, UNWIND_CFA_INVALID, 0, 0 }, { 0x2000, UNWIND_CFA_RSP, 8, SAME },
		    { 0x2001, UNWIND_CFA_RSP, 16, -2 }, { 0x2004, UNWIND_CFA_RBP, 16, -2 },
		    { 0x2008, UNWIND_CFA_RSP, 8, -2 }, { 0x2009, UNWIND_CFA_RBP, 16, -2 },
		    { 0x2010, UNWIND_CFA_INVALID, 0, 0 });
	agent_unwind_table_done(&t);
}

/* DW_CFA_restore and restore_extended go back to the CIE's rule, not to "unspecified". */
static void test_restore_to_cie(void **state)
{
	struct buf eh = { .vaddr = EH_VADDR }, cie_in = { 0 }, in = { 0 };
	struct agent_unwind_table t;
	struct cie_ref c;

	(void)state;
	offset(&cie_in, REG_RBP, 3); /* an odd CIE: rbp at CFA - 24 from the start */
	c = eh_cie(&eh, "zR", &cie_in);
	offset(&in, REG_RBP, 2);
	adv(&in, 1);
	u8(&in, CFA_restore | REG_RBP);
	adv(&in, 1);
	offset_extended(&in, REG_RBP, 4);
	adv(&in, 1);
	op_reg(&in, CFA_restore_extended, REG_RBP);
	adv(&in, 1);
	op_reg(&in, CFA_undefined, REG_RA);
	adv(&in, 1);
	op_reg(&in, CFA_restore_extended, REG_RA);
	adv(&in, 1);
	op_reg(&in, CFA_same_value, REG_RBP);
	adv(&in, 1);
	op_reg(&in, CFA_undefined, REG_RBP);
	eh_fde(&eh, c, 0x1000, 0x10, &in);
	assert_int_equal(build_eh(&eh, &t), 0);
	EXPECT_ROWS(&t, { 0x1000, UNWIND_CFA_RSP, 8, -2 }, { 0x1001, UNWIND_CFA_RSP, 8, -3 },
		    { 0x1002, UNWIND_CFA_RSP, 8, -4 }, { 0x1003, UNWIND_CFA_RSP, 8, -3 },
		    { 0x1004, UNWIND_CFA_END, 0, 0 }, { 0x1005, UNWIND_CFA_RSP, 8, -3 },
		    { 0x1006, UNWIND_CFA_RSP, 8, SAME }, { 0x1007, UNWIND_CFA_RSP, 8, UNDEF },
		    { 0x1010, UNWIND_CFA_INVALID, 0, 0 });
	assert_int_equal(t.stats.rows_rbp_undefined, 1);
	agent_unwind_table_done(&t);
}

/* .plt: push; jmp, and the expression that tells the two apart by rip's low bits. */
static void plt_fde(struct buf *eh, struct cie_ref c, uint64_t begin, uint8_t threshold)
{
	const uint8_t expr[] = {
		OP_breg0 + REG_RSP,  8,	    0x80 /* breg16 */, 0,      OP_lit0 + 15, OP_and,
		OP_lit0 + threshold, OP_ge, OP_lit0 + 3,       OP_shl, OP_plus,
	};
	struct buf in = { 0 };

	def_cfa_offset(&in, 16);
	adv(&in, 6);
	def_cfa_offset(&in, 24);
	adv(&in, 10);
	def_cfa_expression(&in, expr, sizeof(expr));
	eh_fde(eh, c, begin, 0x40, &in);
}

static void test_plt(void **state)
{
	struct buf eh = { .vaddr = EH_VADDR };
	struct agent_unwind_table t;
	struct cie_ref c;

	(void)state;
	c = eh_cie(&eh, "zR", NULL);
	plt_fde(&eh, c, 0x1020, 11);
	plt_fde(&eh, c, 0x2000, 10);
	plt_fde(&eh, c, 0x3000, 12); /* no linker writes 12: still the same shape, so followed */
	assert_int_equal(build_eh(&eh, &t), 0);
	EXPECT_ROWS(&t, { 0x1020, UNWIND_CFA_RSP, 16, SAME }, { 0x1026, UNWIND_CFA_RSP, 24, SAME },
		    { 0x1030, UNWIND_CFA_PLT, 11, SAME }, { 0x1060, UNWIND_CFA_INVALID, 0, 0 },
		    { 0x2000, UNWIND_CFA_RSP, 16, SAME }, { 0x2006, UNWIND_CFA_RSP, 24, SAME },
		    { 0x2010, UNWIND_CFA_PLT, 10, SAME }, { 0x2040, UNWIND_CFA_INVALID, 0, 0 },
		    { 0x3000, UNWIND_CFA_RSP, 16, SAME }, { 0x3006, UNWIND_CFA_RSP, 24, SAME },
		    { 0x3010, UNWIND_CFA_PLT, 12, SAME }, { 0x3040, UNWIND_CFA_INVALID, 0, 0 });
	assert_int_equal(t.stats.rows_unsupported, 0);
	agent_unwind_table_done(&t);
}

/*
 * GCC's main with a realigned stack: lea 8(%rsp),%r10; and $-16,%rsp;
 * push -8(%r10); push %rbp; mov %rsp,%rbp; push %r10 ... The CFA is first
 * r10-based (unsupported), then read back through rbp.
 */
static void test_deref_rbp(void **state)
{
	static const uint8_t deref[] = { OP_breg0 + REG_RBP, 0x78 /* sleb -8 */, OP_deref };
	static const uint8_t rbp_expr[] = { OP_breg0 + REG_RBP, 0 };
	static const uint8_t other[] = { OP_breg0 + REG_RBP, 0x78, OP_deref, OP_lit0 };
	struct buf eh = { .vaddr = EH_VADDR }, in = { 0 };
	struct agent_unwind_table t;
	struct cie_ref c;

	(void)state;
	c = eh_cie(&eh, "zR", NULL);
	adv(&in, 5);
	def_cfa(&in, REG_R10, 0);
	adv(&in, 9);
	u8(&in, CFA_expression);
	uleb(&in, REG_RBP);
	uleb(&in, sizeof(rbp_expr));
	put(&in, rbp_expr, sizeof(rbp_expr));
	adv(&in, 4);
	def_cfa_expression(&in, deref, sizeof(deref));
	adv(&in, 0x20);
	def_cfa_expression(&in, other, sizeof(other)); /* any other expression: not followed */
	adv(&in, 2);
	def_cfa_offset(&in, 8); /* an offset without a register after an expression: unusable */
	adv(&in, 2);
	def_cfa(&in, REG_RSP, 8);
	eh_fde(&eh, c, 0x1000, 0x40, &in);
	assert_int_equal(build_eh(&eh, &t), 0);
	EXPECT_ROWS(&t, { 0x1000, UNWIND_CFA_RSP, 8, SAME }, { 0x1005, UNWIND_CFA_UNSUPPORTED, 0, 0 },
		    { 0x1012, UNWIND_CFA_DEREF_RBP, (uint16_t)-8, UNDEF }, { 0x1032, UNWIND_CFA_UNSUPPORTED, 0, 0 },
		    { 0x1036, UNWIND_CFA_RSP, 8, UNDEF }, { 0x1040, UNWIND_CFA_INVALID, 0, 0 });
	assert_int_equal((int16_t)t.rows[2].cfa_off, -8);
	/* At 0x1005, 0x100e (still r10), 0x1032 and 0x1034. */
	assert_int_equal(t.stats.rows_unsupported, 4);
	assert_int_equal(t.stats.rows_rbp_undefined, 2);
	agent_unwind_table_done(&t);
}

/* glibc's __restore_rt: a CIE with 'S'. And _start: the return address is undefined. */
static void test_signal_and_end(void **state)
{
	struct buf eh = { .vaddr = EH_VADDR }, in = { 0 }, start = { 0 };
	struct agent_unwind_table t;
	struct cie_ref sig, c;

	(void)state;
	sig = eh_cie(&eh, "zRS", NULL);
	c = eh_cie(&eh, "zR", NULL);
	adv(&in, 1);
	def_cfa_offset(&in, 16);
	offset(&in, REG_RBP, 2);
	adv(&in, 1);
	def_cfa(&in, REG_R10, 0);
	eh_fde(&eh, sig, 0x1000, 0x9, &in);
	op_reg(&start, CFA_undefined, REG_RA);
	adv(&start, 4);
	def_cfa_offset(&start, 16);
	eh_fde(&eh, c, 0x2000, 0x20, &start);
	assert_int_equal(build_eh(&eh, &t), 0);
	for (uint64_t pc = 0x1000; pc < 0x1009; pc++)
		expect_at(&t, pc, UNWIND_CFA_SIGNAL, 0, SAME);
	expect_at(&t, 0x1009, UNWIND_CFA_INVALID, 0, 0);
	for (uint64_t pc = 0x2000; pc < 0x2020; pc++)
		expect_at(&t, pc, UNWIND_CFA_END, 0, 0);
	assert_int_equal(t.stats.rows_unsupported, 0);
	agent_unwind_table_done(&t);
}

/* Frames of 64 KiB and more (rsp + 8 * cfa_off), and CFA rules the BPF side cannot follow. */
static void test_big_frames_and_other_registers(void **state)
{
	struct buf eh = { .vaddr = EH_VADDR }, in = { 0 };
	struct agent_unwind_table t;
	struct cie_ref c;

	(void)state;
	c = eh_cie(&eh, "zR", NULL);
	adv(&in, 1);
	def_cfa_offset(&in, 65600);
	adv(&in, 1);
	def_cfa_offset(&in, 65535);
	adv(&in, 1);
	def_cfa_offset(&in, 65536);
	adv(&in, 1);
	def_cfa_offset(&in, 65540); /* not a multiple of 8 */
	adv(&in, 1);
	def_cfa_offset(&in, 8 * 65535);
	adv(&in, 1);
	def_cfa_offset(&in, 8 * 65536); /* past 512 KiB */
	adv(&in, 1);
	def_cfa(&in, REG_R10, 0);
	adv(&in, 1);
	def_cfa(&in, REG_RBP, 65600); /* rbp-based has no x8 form */
	adv(&in, 1);
	u8(&in, 0x13); /* DW_CFA_def_cfa_offset_sf: -1 * -8 */
	sleb(&in, -1);
	eh_fde(&eh, c, 0x1000, 0x10, &in);
	assert_int_equal(build_eh(&eh, &t), 0);
	EXPECT_ROWS(&t, { 0x1000, UNWIND_CFA_RSP, 8, SAME }, { 0x1001, UNWIND_CFA_RSP_X8, 8200, SAME },
		    { 0x1002, UNWIND_CFA_RSP, 65535, SAME }, { 0x1003, UNWIND_CFA_RSP_X8, 8192, SAME },
		    { 0x1004, UNWIND_CFA_UNSUPPORTED, 0, 0 }, { 0x1005, UNWIND_CFA_RSP_X8, 65535, SAME },
		    { 0x1006, UNWIND_CFA_UNSUPPORTED, 0, 0 }, { 0x1009, UNWIND_CFA_RBP, 8, SAME },
		    { 0x1010, UNWIND_CFA_INVALID, 0, 0 });
	/* 0x1004, 0x1006, 0x1007 (r10) and 0x1008 (rbp + 65600): four rows the unwinder stops at. */
	assert_int_equal(t.stats.rows_unsupported, 4);
	agent_unwind_table_done(&t);
}

/* Gaps, adjacent FDEs that merge, empty FDEs, and the lookup at the table's edges. */
static void test_gaps_and_edges(void **state)
{
	struct buf eh = { .vaddr = EH_VADDR };
	struct agent_unwind_table t;
	struct cie_ref c;

	(void)state;
	c = eh_cie(&eh, "zR", NULL);
	one_insn_fde(&eh, c, 0x2000, 0x10, 16);
	one_insn_fde(&eh, c, 0x1000, 0x10, 8);
	one_insn_fde(&eh, c, 0x1010, 0x10, 8);	/* same rule as the one before: no row of its own */
	one_insn_fde(&eh, c, 0x500, 0, 8);	/* empty: skipped, and not the table's base */
	one_insn_fde(&eh, c, 0x2010, 0x10, 24); /* adjacent, no gap row */
	assert_int_equal(build_eh(&eh, &t), 0);
	EXPECT_ROWS(&t, { 0x1000, UNWIND_CFA_RSP, 8, SAME }, { 0x1020, UNWIND_CFA_INVALID, 0, 0 },
		    { 0x2000, UNWIND_CFA_RSP, 16, SAME }, { 0x2010, UNWIND_CFA_RSP, 24, SAME },
		    { 0x2020, UNWIND_CFA_INVALID, 0, 0 });
	assert_int_equal(t.base, 0x1000);
	assert_int_equal(t.end, 0x2020);
	assert_int_equal(t.stats.fdes, 5);
	assert_int_equal(t.stats.fdes_bad, 0);
	assert_null(agent_unwind_table__find(&t, 0));
	assert_null(agent_unwind_table__find(&t, 0xfff));
	expect_at(&t, 0x1000, UNWIND_CFA_RSP, 8, SAME);
	expect_at(&t, 0x101f, UNWIND_CFA_RSP, 8, SAME);
	expect_at(&t, 0x1020, UNWIND_CFA_INVALID, 0, 0);
	expect_at(&t, 0x1fff, UNWIND_CFA_INVALID, 0, 0);
	expect_at(&t, 0x201f, UNWIND_CFA_RSP, 24, SAME);
	expect_at(&t, 0x2020, UNWIND_CFA_INVALID, 0, 0);
	expect_at(&t, 0x2020 + 0x100000, UNWIND_CFA_INVALID, 0, 0);
	/* Past what a 32-bit row pc can hold: not this table's. */
	assert_null(agent_unwind_table__find(&t, t.base + 0x100000000ull));
	assert_null(agent_unwind_table__find(&t, UINT64_MAX));
	agent_unwind_table_done(&t);
	/* An empty table finds nothing. */
	assert_null(agent_unwind_table__find(&t, 0x1000));
}

/* Overlapping .eh_frame FDEs: the one that starts later holds from its start. */
static void test_overlap(void **state)
{
	struct buf eh = { .vaddr = EH_VADDR };
	struct agent_unwind_table t;
	struct cie_ref c;

	(void)state;
	c = eh_cie(&eh, "zR", NULL);
	one_insn_fde(&eh, c, 0x1000, 0x100, 16);
	one_insn_fde(&eh, c, 0x1080, 0x100, 24); /* runs past the first one's end */
	one_insn_fde(&eh, c, 0x2000, 0x100, 16);
	one_insn_fde(&eh, c, 0x2020, 0x20, 32); /* nested */
	assert_int_equal(build_eh(&eh, &t), 0);
	EXPECT_ROWS(&t, { 0x1000, UNWIND_CFA_RSP, 16, SAME }, { 0x1080, UNWIND_CFA_RSP, 24, SAME },
		    { 0x1180, UNWIND_CFA_INVALID, 0, 0 }, { 0x2000, UNWIND_CFA_RSP, 16, SAME },
		    { 0x2020, UNWIND_CFA_RSP, 32, SAME },
		    /* What the nested FDE cut off the outer one has lost its rows. */
		    { 0x2040, UNWIND_CFA_INVALID, 0, 0 });
	assert_int_equal(t.end, 0x2100);
	agent_unwind_table_done(&t);

	/*
	 * A nested FDE that cannot be run: from its start on, no rule, as for a
	 * good nested one. The outer rule before it must not stretch over the
	 * outer FDE's later rows (its epilogue at 0x1030 has another CFA).
	 */
	{
		struct buf outer = { 0 }, bad = { 0 };

		eh.n = 0;
		c = eh_cie(&eh, "zR", NULL);
		adv(&outer, 1);
		def_cfa_offset(&outer, 16);
		adv(&outer, 0x2f);
		def_cfa_offset(&outer, 8);
		eh_fde(&eh, c, 0x1000, 0x40, &outer);
		u8(&bad, CFA_restore_state);
		eh_fde(&eh, c, 0x1020, 0x8, &bad);
		assert_int_equal(build_eh(&eh, &t), 0);
		assert_int_equal(t.stats.fdes_bad, 1);
		EXPECT_ROWS(&t, { 0x1000, UNWIND_CFA_RSP, 8, SAME }, { 0x1001, UNWIND_CFA_RSP, 16, SAME },
			    { 0x1020, UNWIND_CFA_INVALID, 0, 0 });
		assert_int_equal(t.end, 0x1040);
		agent_unwind_table_done(&t);
		/* One that overlaps the end of the FDE before it. */
		eh.n = 0;
		c = eh_cie(&eh, "zR", NULL);
		eh_fde(&eh, c, 0x1000, 0x40, &outer);
		eh_fde(&eh, c, 0x1020, 0x40, &bad);
		assert_int_equal(build_eh(&eh, &t), 0);
		EXPECT_ROWS(&t, { 0x1000, UNWIND_CFA_RSP, 8, SAME }, { 0x1001, UNWIND_CFA_RSP, 16, SAME },
			    { 0x1020, UNWIND_CFA_INVALID, 0, 0 });
		assert_int_equal(t.end, 0x1060);
		agent_unwind_table_done(&t);
	}
}

/* .debug_frame: 32- and 64-bit DWARF, CIE versions 1, 3 and 4, absolute addresses. */
static void test_debug_frame(void **state)
{
	struct buf df = { 0 }, in = { 0 };
	struct agent_unwind_table t;
	struct cie_ref v1, v3, v4, v4_32;

	(void)state;
	adv(&in, 1);
	def_cfa_offset(&in, 16);
	offset(&in, REG_RBP, 2);
	v1 = df_cie(&df, false, 1, 8);
	v3 = df_cie(&df, true, 3, 8);
	v4 = df_cie(&df, true, 4, 8);
	v4_32 = df_cie(&df, false, 4, 4);
	df_fde(&df, v1, 0x401000, 0x10, &in);
	df_fde(&df, v3, 0x402000, 0x10, &in);
	df_fde(&df, v4, 0x403000, 0x10, &in);
	df_fde(&df, v4_32, 0x404000, 0x10, &in);
	df_fde(&df, v1, 0, 0x10, &in); /* discarded code (linked at 0): refused */
	assert_int_equal(build(NULL, &df, AGENT_UNWIND_MAX_ROWS_DEFAULT, &t), 0);
	assert_int_equal(t.stats.fdes, 5);
	assert_int_equal(t.stats.from_debug_frame, 5);
	assert_int_equal(t.stats.fdes_bad, 1);
	assert_int_equal(t.base, 0x401000);
	for (uint64_t f = 0x401000; f <= 0x404000; f += 0x1000) {
		expect_at(&t, f, UNWIND_CFA_RSP, 8, SAME);
		expect_at(&t, f + 1, UNWIND_CFA_RSP, 16, -2);
		expect_at(&t, f + 0xf, UNWIND_CFA_RSP, 16, -2);
		expect_at(&t, f + 0x10, UNWIND_CFA_INVALID, 0, 0);
	}
	assert_int_equal(t.n_rows, 12);
	agent_unwind_table_done(&t);
}

/* Both sections: .eh_frame's FDE wins wherever both cover a pc. */
static void test_eh_and_debug_frame(void **state)
{
	struct buf eh = { .vaddr = EH_VADDR }, df = { 0 }, deep = { 0 };
	struct agent_unwind_table t;
	struct cie_ref c, d;

	(void)state;
	def_cfa_offset(&deep, 64);
	c = eh_cie(&eh, "zR", NULL);
	one_insn_fde(&eh, c, 0x1000, 0x20, 16);
	one_insn_fde(&eh, c, 0x3010, 0x10, 24);
	d = df_cie(&df, false, 3, 8);
	df_fde(&df, d, 0x1000, 0x20, &deep); /* the same function: ignored */
	df_fde(&df, d, 0x2000, 0x20, &deep); /* only here */
	df_fde(&df, d, 0x3000, 0x20, &deep); /* straddles an .eh_frame FDE */
	assert_int_equal(build(&eh, &df, AGENT_UNWIND_MAX_ROWS_DEFAULT, &t), 0);
	assert_int_equal(t.stats.fdes, 5);
	assert_int_equal(t.stats.from_debug_frame, 3);
	assert_int_equal(t.stats.fdes_bad, 1);
	EXPECT_ROWS(&t, { 0x1000, UNWIND_CFA_RSP, 16, SAME }, { 0x1020, UNWIND_CFA_INVALID, 0, 0 },
		    { 0x2000, UNWIND_CFA_RSP, 64, SAME }, { 0x2020, UNWIND_CFA_INVALID, 0, 0 },
		    { 0x3000, UNWIND_CFA_RSP, 64, SAME }, { 0x3010, UNWIND_CFA_RSP, 24, SAME },
		    { 0x3020, UNWIND_CFA_INVALID, 0, 0 });
	agent_unwind_table_done(&t);
}

/*
 * An entry point without an FDE (ld.so's hand-written _start) is the
 * outermost frame: END up to the next FDE. One that an FDE covers keeps the
 * FDE's rule; one far from any FDE gets AGENT_UNWIND_ENTRY_SPAN bytes.
 */
static int build_with_entry(const struct buf *eh, uint64_t entry, struct agent_unwind_table *t)
{
	struct agent_unwind_sections s = { .is_64 = 1, .entry = entry };

	s.eh_frame = eh->b;
	s.eh_frame_len = eh->n;
	s.eh_frame_vaddr = eh->vaddr;
	return agent_unwind_table_build(&s, AGENT_UNWIND_MAX_ROWS_DEFAULT, t);
}

static void test_entry_point(void **state)
{
	struct buf eh = { .vaddr = EH_VADDR };
	struct agent_unwind_table t;
	struct cie_ref c;

	(void)state;
	c = eh_cie(&eh, "zR", NULL);
	one_insn_fde(&eh, c, 0x1000, 0x20, 16);
	one_insn_fde(&eh, c, 0x1080, 0x20, 16);
	assert_int_equal(build_with_entry(&eh, 0x1040, &t), 0);
	EXPECT_ROWS(&t, { 0x1000, UNWIND_CFA_RSP, 16, SAME }, { 0x1020, UNWIND_CFA_INVALID, 0, 0 },
		    { 0x1040, UNWIND_CFA_END, 0, 0 }, { 0x1080, UNWIND_CFA_RSP, 16, SAME },
		    { 0x10a0, UNWIND_CFA_INVALID, 0, 0 });
	assert_int_equal(t.stats.fdes_bad, 0);
	agent_unwind_table_done(&t);

	/* Covered by an FDE: its own rule stands. */
	assert_int_equal(build_with_entry(&eh, 0x1005, &t), 0);
	expect_at(&t, 0x1005, UNWIND_CFA_RSP, 16, SAME);
	expect_at(&t, 0x1040, UNWIND_CFA_INVALID, 0, 0);
	agent_unwind_table_done(&t);

	/* Below every FDE and far from them: the table starts there, the span is bounded. */
	assert_int_equal(build_with_entry(&eh, 0x400, &t), 0);
	assert_int_equal(t.base, 0x400);
	expect_at(&t, 0x400, UNWIND_CFA_END, 0, 0);
	expect_at(&t, 0x400 + AGENT_UNWIND_ENTRY_SPAN - 1, UNWIND_CFA_END, 0, 0);
	expect_at(&t, 0x400 + AGENT_UNWIND_ENTRY_SPAN, UNWIND_CFA_INVALID, 0, 0);
	expect_at(&t, 0x1000, UNWIND_CFA_RSP, 16, SAME);
	agent_unwind_table_done(&t);
}

/* Functions of this binary whose first byte must say "CFA = rsp + 8, rbp unchanged". */
static __attribute__((noinline)) int probe_a(int x)
{
	__asm__ volatile("" ::: "memory");
	return x * 3 + 1;
}

static __attribute__((noinline)) long probe_b(long *v, size_t n)
{
	long s = 0;

	for (size_t i = 0; i < n; i++)
		s += v[i] ^ probe_a((int)i);
	return s;
}

static __attribute__((noinline)) void probe_c(char *buf, size_t n)
{
	char local[256];

	snprintf(local, sizeof(local), "%ld", probe_b((long *)buf, n / sizeof(long)));
	memcpy(buf, local, n < sizeof(local) ? n : sizeof(local));
}

struct find_obj {
	const char *want; /* "" for the main program, else a substring of the path */
	char path[4096];
	uint64_t bias;
	bool found;
};

static int find_obj_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	struct find_obj *f = data;

	(void)size;
	if (f->want[0] ? !strstr(info->dlpi_name, f->want) : info->dlpi_name[0] != '\0')
		return 0;
	snprintf(f->path, sizeof(f->path), "%s", f->want[0] ? info->dlpi_name : "/proc/self/exe");
	f->bias = info->dlpi_addr;
	f->found = true;
	return 1;
}

/* A C function's first instruction in the rows of the architecture this test runs on. */
#if defined(__aarch64__)
#define ENTRY_TYPE (UNWIND_CFA_RSP | UNWIND_A64_RA_LR | UNWIND_A64_FP_SAME) /* CFA = SP, return address in LR */
#define ENTRY_OFF  0
#else
#define ENTRY_TYPE UNWIND_CFA_RSP /* CFA = RSP + 8: only the return address is on the stack */
#define ENTRY_OFF  8
#endif

static void test_self(void **state)
{
	const uintptr_t probes[] = { (uintptr_t)probe_a, (uintptr_t)probe_b, (uintptr_t)probe_c };
	struct find_obj self = { .want = "" };
	struct agent_unwind_table t;
	int fd;

	(void)state;
	dl_iterate_phdr(find_obj_cb, &self);
	assert_true(self.found);
	fd = open(self.path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(agent_unwind_table_build_fd(fd, AGENT_UNWIND_MAX_ROWS_DEFAULT, &t), 0);
	assert_true(t.n_rows > 10);
	assert_true(t.stats.fdes > 10);
	for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++) {
		uint64_t vaddr = probes[i] - self.bias;

		assert_true(vaddr >= t.base && vaddr < t.end);
		expect_at(&t, vaddr, ENTRY_TYPE, ENTRY_OFF, SAME);
	}
	assert_int_equal(t.arch, AGENT_UNWIND_ARCH_NATIVE);
	{
		/* Keep the probes alive and called. */
		char b[64] = { 0 };

		probe_c(b, sizeof(b));
	}

	/* The same file without section headers: PT_GNU_EH_FRAME leads to the same .eh_frame. */
	if (t.stats.from_debug_frame == 0) {
		struct agent_unwind_table t2;
		off_t size = lseek(fd, 0, SEEK_END);
		uint8_t *img = malloc((size_t)size);
		int mfd = memfd_create("unwind-noshdr", MFD_CLOEXEC);

		assert_non_null(img);
		assert_true(mfd >= 0);
		assert_int_equal(pread(fd, img, (size_t)size, 0), size);
		/* e_shoff, then e_shnum and e_shstrndx of an Elf64_Ehdr. */
		memset(img + 0x28, 0, 8);
		memset(img + 0x3c, 0, 4);
		assert_int_equal(write(mfd, img, (size_t)size), size);
		assert_int_equal(agent_unwind_table_build_fd(mfd, AGENT_UNWIND_MAX_ROWS_DEFAULT, &t2), 0);
		assert_int_equal(t2.n_rows, t.n_rows);
		assert_int_equal(t2.base, t.base);
		assert_memory_equal(t2.rows, t.rows, t.n_rows * sizeof(*t.rows));
		agent_unwind_table_done(&t2);

		/*
		 * Its eh_frame_ptr written datarel instead of pcrel (both sdata4): relative to the start of
		 * .eh_frame_hdr, not to the field, so 4 more. The same .eh_frame must be found.
		 */
		{
			Elf64_Ehdr eh;
			Elf64_Phdr ph;
			bool patched = false;

			memcpy(&eh, img, sizeof(eh));
			for (unsigned i = 0; i < eh.e_phnum && !patched; i++) {
				memcpy(&ph, img + eh.e_phoff + (size_t)i * eh.e_phentsize, sizeof(ph));
				if (ph.p_type == PT_GNU_EH_FRAME && img[ph.p_offset + 1] == 0x1b) {
					int32_t v;

					memcpy(&v, img + ph.p_offset + 4, 4);
					v += 4;
					memcpy(img + ph.p_offset + 4, &v, 4);
					img[ph.p_offset + 1] = 0x3b;
					patched = true;
				}
			}
			assert_true(patched);
			assert_int_equal(pwrite(mfd, img, (size_t)size, 0), size);
			assert_int_equal(agent_unwind_table_build_fd(mfd, AGENT_UNWIND_MAX_ROWS_DEFAULT, &t2), 0);
			assert_int_equal(t2.n_rows, t.n_rows);
			assert_int_equal(t2.base, t.base);
			assert_memory_equal(t2.rows, t.rows, t.n_rows * sizeof(*t.rows));
			agent_unwind_table_done(&t2);
		}
		close(mfd);
		free(img);
	}
	close(fd);
	agent_unwind_table_done(&t);
}

static void test_libc(void **state)
{
	static const char *const funcs[] = { "qsort", "getenv", "fclose" };
	struct find_obj libc = { .want = "libc.so" };
	struct agent_unwind_table t;
	void *h;
	int fd;

	(void)state;
	dl_iterate_phdr(find_obj_cb, &libc);
	if (!libc.found)
		skip();
	fd = open(libc.path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(agent_unwind_table_build_fd(fd, AGENT_UNWIND_MAX_ROWS_DEFAULT, &t), 0);
	close(fd);
	assert_true(t.n_rows > 1000);
	assert_int_equal(t.rows[t.n_rows - 1].cfa_type, UNWIND_CFA_INVALID);
	for (size_t i = 1; i < t.n_rows; i++)
		assert_true(t.rows[i - 1].pc < t.rows[i].pc);
	/*
	 * A C function's first instruction: only the return address is on the
	 * stack. The symbols are looked up in libc itself, not through the
	 * program, where a sanitizer's interceptor may stand in for them.
	 */
	h = dlopen(libc.path, RTLD_NOW | RTLD_NOLOAD);
	assert_non_null(h);
	for (size_t i = 0; i < sizeof(funcs) / sizeof(funcs[0]); i++) {
		void *f = dlsym(h, funcs[i]);

		assert_non_null(f);
		expect_at(&t, (uintptr_t)f - libc.bias, ENTRY_TYPE, ENTRY_OFF, SAME);
	}
	dlclose(h);
	agent_unwind_table_done(&t);
}

static void test_not_elf(void **state)
{
	static const char text[] = "#!/bin/sh\necho not an ELF file\n";
	struct agent_unwind_table t;
	int fd = memfd_create("unwind-not-elf", MFD_CLOEXEC);

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, sizeof(text) - 1), (ssize_t)(sizeof(text) - 1));
	assert_int_equal(agent_unwind_table_build_fd(fd, AGENT_UNWIND_MAX_ROWS_DEFAULT, &t), -ENOEXEC);
	assert_null(t.rows);
	close(fd);
	/* An empty file is not one either. */
	fd = memfd_create("unwind-empty", MFD_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(agent_unwind_table_build_fd(fd, AGENT_UNWIND_MAX_ROWS_DEFAULT, &t), -ENOEXEC);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rsp_cfa),
		cmocka_unit_test(test_rbp_cfa),
		cmocka_unit_test(test_remember_restore),
		cmocka_unit_test(test_restore_to_cie),
		cmocka_unit_test(test_plt),
		cmocka_unit_test(test_deref_rbp),
		cmocka_unit_test(test_signal_and_end),
		cmocka_unit_test(test_big_frames_and_other_registers),
		cmocka_unit_test(test_gaps_and_edges),
		cmocka_unit_test(test_overlap),
		cmocka_unit_test(test_debug_frame),
		cmocka_unit_test(test_eh_and_debug_frame),
		cmocka_unit_test(test_entry_point),
		cmocka_unit_test(test_self),
		cmocka_unit_test(test_libc),
		cmocka_unit_test(test_not_elf),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
