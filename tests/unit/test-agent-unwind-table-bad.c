// SPDX-License-Identifier: Apache-2.0
/*
 * The unwind table builder (agent/unwind-table.c) on malformed call frame
 * information: every cut of a good section, bad lengths, CIEs, pointers and
 * instructions, and its limits (rows, remembered states, long CIEs). Built
 * with cfi-asm.c; each case must be refused or bounded, never read past its
 * section.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cfi-asm.h"

/* A small but complete .eh_frame for the malformed-input tests: two CIEs, three FDEs. */
static void good_eh(struct buf *eh)
{
	struct buf in = { 0 };
	struct cie_ref c, c2;

	c = eh_cie(eh, "zR", NULL);
	fp_prologue(&in);
	u8(&in, CFA_remember_state);
	adv(&in, 8);
	def_cfa(&in, REG_RSP, 8);
	adv(&in, 1);
	u8(&in, CFA_restore_state);
	eh_fde(eh, c, 0x1000, 0x40, &in);
	c2 = eh_cie(eh, "zPLR", NULL);
	eh_fde(eh, c2, 0x1040, 0x40, &in);
	eh_fde(eh, c, 0x1100, 0x40, &in);
}

/* Every prefix of a good section, copied to a buffer of exactly that size so ASan sees overreads. */
static void test_truncated(void **state)
{
	struct buf eh = { .vaddr = EH_VADDR };
	struct agent_unwind_table t;

	(void)state;
	good_eh(&eh);
	assert_int_equal(build_eh(&eh, &t), 0);
	assert_int_equal(t.stats.fdes, 3);
	agent_unwind_table_done(&t);
	for (size_t cut = 0; cut < eh.n; cut++) {
		struct agent_unwind_sections s = { .eh_frame_vaddr = EH_VADDR, .eh_frame_len = cut, .is_64 = 1 };
		uint8_t *copy = malloc(cut ? cut : 1);
		int r;

		assert_non_null(copy);
		memcpy(copy, eh.b, cut);
		s.eh_frame = copy;
		r = agent_unwind_table_build(&s, AGENT_UNWIND_MAX_ROWS_DEFAULT, &t);
		assert_true(r == 0 || r == -EINVAL || r == -ENOENT);
		if (r == 0) {
			/* Whatever was read is a well-formed table. */
			assert_true(t.n_rows >= 2);
			assert_int_equal(t.rows[t.n_rows - 1].cfa_type, UNWIND_CFA_INVALID);
			for (size_t i = 1; i < t.n_rows; i++)
				assert_true(t.rows[i - 1].pc < t.rows[i].pc);
		} else {
			assert_null(t.rows);
			assert_int_equal(t.n_rows, 0);
		}
		agent_unwind_table_done(&t);
		free(copy);
	}
}

static void test_bad_framing(void **state)
{
	struct buf eh = { .vaddr = EH_VADDR }, in = { 0 };
	struct agent_unwind_table t;
	struct cie_ref c;
	size_t fde;

	(void)state;
	/* The CIE's length runs past the section: nothing can be read. */
	good_eh(&eh);
	patch(&eh, 0, eh.n, 4);
	assert_int_equal(build_eh(&eh, &t), -EINVAL);
	assert_null(t.rows);

	/* The last FDE's length runs past the end: the FDEs before it are kept. */
	eh.n = 0;
	c = eh_cie(&eh, "zR", NULL);
	one_insn_fde(&eh, c, 0x1000, 0x10, 16);
	fde = eh_fde(&eh, c, 0x2000, 0x10, NULL);
	patch(&eh, fde, 0x1000, 4);
	assert_int_equal(build_eh(&eh, &t), 0);
	assert_int_equal(t.stats.fdes, 1);
	EXPECT_ROWS(&t, { 0x1000, UNWIND_CFA_RSP, 16, SAME }, { 0x1010, UNWIND_CFA_INVALID, 0, 0 });
	agent_unwind_table_done(&t);

	/* A 64-bit length escape with a length past the end. */
	eh.n = 0;
	c = eh_cie(&eh, "zR", NULL);
	one_insn_fde(&eh, c, 0x1000, 0x10, 16);
	uN(&eh, 0xffffffffu, 4);
	uN(&eh, ~(uint64_t)0, 8);
	assert_int_equal(build_eh(&eh, &t), 0);
	assert_int_equal(t.n_rows, 2);
	agent_unwind_table_done(&t);

	/* A CIE pointer that counts back past the section's start: the walk stops there. */
	eh.n = 0;
	c = eh_cie(&eh, "zR", NULL);
	fde = eh_fde(&eh, c, 0x1000, 0x10, NULL);
	patch(&eh, fde + 4, fde + 5, 4);
	one_insn_fde(&eh, c, 0x2000, 0x10, 16);
	assert_int_equal(build_eh(&eh, &t), -EINVAL);
	assert_int_equal(t.stats.fdes, 0);

	/* A CIE pointer that lands on an FDE, not a CIE: that FDE is bad, the others stay. */
	eh.n = 0;
	c = eh_cie(&eh, "zR", NULL);
	one_insn_fde(&eh, c, 0x1000, 0x10, 16);
	fde = eh_fde(&eh, c, 0x2000, 0x10, NULL);
	patch(&eh, fde + 4, fde + 4 - (c.off + eh.b[c.off] + 4), 4); /* the first FDE */
	one_insn_fde(&eh, c, 0x3000, 0x10, 24);
	assert_int_equal(build_eh(&eh, &t), 0);
	assert_int_equal(t.stats.fdes, 3);
	assert_int_equal(t.stats.fdes_bad, 1);
	expect_at(&t, 0x1000, UNWIND_CFA_RSP, 16, SAME);
	expect_at(&t, 0x2000, UNWIND_CFA_INVALID, 0, 0);
	expect_at(&t, 0x3000, UNWIND_CFA_RSP, 24, SAME);
	agent_unwind_table_done(&t);

	/* .debug_frame: a CIE offset past the section. */
	{
		struct buf df = { 0 };
		struct cie_ref d = df_cie(&df, false, 1, 8);

		d.off = 0x10000;
		df_fde(&df, d, 0x1000, 0x10, &in);
		assert_int_equal(build(NULL, &df, AGENT_UNWIND_MAX_ROWS_DEFAULT, &t), -EINVAL);
	}
}

/* CIEs we cannot use: their FDEs are skipped and counted; with none left, -EINVAL. */
static void test_bad_cies(void **state)
{
	struct buf eh = { .vaddr = EH_VADDR };
	struct agent_unwind_table t;
	struct cie_ref c;

	(void)state;
	/* Version 2 does not exist; 5 is not ours. */
	for (uint8_t version = 2; version <= 5; version += 3) {
		eh.n = 0;
		c = eh_cie(&eh, "zR", NULL);
		eh.b[c.off + 8] = version;
		one_insn_fde(&eh, c, 0x1000, 0x10, 16);
		assert_int_equal(build_eh(&eh, &t), -EINVAL);
		assert_int_equal(t.stats.fdes, 1);
		assert_int_equal(t.stats.fdes_bad, 1);
	}
	/* An unknown augmentation without 'z': the FDE's layout is unknown. */
	eh.n = 0;
	c = eh_cie(&eh, "X", NULL);
	one_insn_fde(&eh, c, 0x1000, 0x10, 16);
	assert_int_equal(build_eh(&eh, &t), -EINVAL);
	/* With 'z' an unknown letter is skipped over. */
	eh.n = 0;
	c = eh_cie(&eh, "zRX", NULL);
	one_insn_fde(&eh, c, 0x1000, 0x10, 16);
	assert_int_equal(build_eh(&eh, &t), 0);
	expect_at(&t, 0x1000, UNWIND_CFA_RSP, 16, SAME);
	agent_unwind_table_done(&t);
	/* GCC 2's "eh" augmentation. */
	eh.n = 0;
	c = eh_cie(&eh, "eh", NULL);
	one_insn_fde(&eh, c, 0x1000, 0x10, 16);
	assert_int_equal(build_eh(&eh, &t), -EINVAL);
	/* A return address column that is not rip's. */
	eh.n = 0;
	c = eh_cie_ra(&eh, "zR", 15, NULL);
	one_insn_fde(&eh, c, 0x1000, 0x10, 16);
	assert_int_equal(build_eh(&eh, &t), -EINVAL);
	/* A return address saved anywhere but CFA - 8: every row is unsupported. */
	{
		struct buf in = { 0 };

		eh.n = 0;
		c = eh_cie(&eh, "zR", NULL);
		offset(&in, REG_RA, 2);
		adv(&in, 1);
		def_cfa_offset(&in, 16);
		eh_fde(&eh, c, 0x1000, 0x10, &in);
		assert_int_equal(build_eh(&eh, &t), 0);
		EXPECT_ROWS(&t, { 0x1000, UNWIND_CFA_UNSUPPORTED, 0, 0 }, { 0x1010, UNWIND_CFA_INVALID, 0, 0 });
		assert_int_equal(t.stats.rows_unsupported, 2);
		agent_unwind_table_done(&t);
	}
}

/* An FDE whose instructions cannot be run is skipped alone; its range gets no rule. */
static void test_bad_instructions(void **state)
{
	static const uint8_t bad_ops[] = { CFA_GNU_window_save, 0x3f, CFA_restore_state };
	struct buf eh = { .vaddr = EH_VADDR };
	struct agent_unwind_table t;
	struct cie_ref c;

	(void)state;
	for (size_t k = 0; k < sizeof(bad_ops); k++) {
		struct buf in = { 0 };

		eh.n = 0;
		c = eh_cie(&eh, "zR", NULL);
		one_insn_fde(&eh, c, 0x1000, 0x10, 16);
		adv(&in, 1);
		def_cfa_offset(&in, 16);
		u8(&in, bad_ops[k]);
		eh_fde(&eh, c, 0x1010, 0x10, &in);
		one_insn_fde(&eh, c, 0x1020, 0x10, 24);
		assert_int_equal(build_eh(&eh, &t), 0);
		assert_int_equal(t.stats.fdes, 3);
		assert_int_equal(t.stats.fdes_bad, 1);
		EXPECT_ROWS(&t, { 0x1000, UNWIND_CFA_RSP, 16, SAME }, { 0x1010, UNWIND_CFA_INVALID, 0, 0 },
			    { 0x1020, UNWIND_CFA_RSP, 24, SAME }, { 0x1030, UNWIND_CFA_INVALID, 0, 0 });
		agent_unwind_table_done(&t);
	}
	/* An instruction cut short by the FDE's end: a table, but one that says "stop" everywhere. */
	{
		struct buf in = { 0 };

		eh.n = 0;
		c = eh_cie(&eh, "zR", NULL);
		adv(&in, 1);
		u8(&in, CFA_def_cfa);
		eh_fde(&eh, c, 0x1000, 0x10, &in);
		assert_int_equal(build_eh(&eh, &t), 0);
		assert_int_equal(t.stats.fdes_bad, 1);
		EXPECT_ROWS(&t, { 0x1000, UNWIND_CFA_INVALID, 0, 0 });
		assert_int_equal(t.end, 0x1010);
		agent_unwind_table_done(&t);
	}
}

/* remember_state nests 16 deep; one more is refused rather than overflowing. */
static void test_remember_limit(void **state)
{
	struct buf eh = { .vaddr = EH_VADDR };
	struct agent_unwind_table t;
	struct cie_ref c;

	(void)state;
	for (int depth = 16; depth <= 17; depth++) {
		struct buf in = { 0 };

		eh.n = 0;
		c = eh_cie(&eh, "zR", NULL);
		for (int i = 0; i < depth; i++) {
			u8(&in, CFA_remember_state);
			def_cfa_offset(&in, 16 + 8 * (uint64_t)i);
		}
		adv(&in, 1);
		for (int i = 0; i < depth; i++)
			u8(&in, CFA_restore_state);
		eh_fde(&eh, c, 0x1000, 0x10, &in);
		if (depth == 16) {
			assert_int_equal(build_eh(&eh, &t), 0);
			EXPECT_ROWS(&t, { 0x1000, UNWIND_CFA_RSP, 136, SAME }, { 0x1001, UNWIND_CFA_RSP, 8, SAME },
				    { 0x1010, UNWIND_CFA_INVALID, 0, 0 });
			agent_unwind_table_done(&t);
		} else {
			assert_int_equal(build_eh(&eh, &t), 0);
			assert_int_equal(t.stats.fdes_bad, 1);
			EXPECT_ROWS(&t, { 0x1000, UNWIND_CFA_INVALID, 0, 0 });
			agent_unwind_table_done(&t);
		}
	}
}

/* max_rows is a hard limit; a section without FDEs is -ENOENT. */
static void test_limits(void **state)
{
	struct buf eh = { .vaddr = EH_VADDR };
	struct agent_unwind_table t;
	struct cie_ref c;

	(void)state;
	good_eh(&eh);
	assert_int_equal(build_eh(&eh, &t), 0);
	size_t need = t.n_rows;
	agent_unwind_table_done(&t);
	assert_int_equal(build(&eh, NULL, need, &t), 0);
	assert_int_equal(t.n_rows, need);
	agent_unwind_table_done(&t);
	assert_int_equal(build(&eh, NULL, need - 1, &t), -E2BIG);
	assert_null(t.rows);
	assert_int_equal(build(&eh, NULL, 1, &t), -E2BIG);
	assert_int_equal(build(&eh, NULL, 0, &t), -E2BIG);

	eh.n = 0;
	c = eh_cie(&eh, "zR", NULL);
	assert_int_equal(build_eh(&eh, &t), -ENOENT);
	one_insn_fde(&eh, c, 0x1000, 0, 16); /* only an empty one */
	assert_int_equal(build_eh(&eh, &t), -ENOENT);
	uN(&eh, 0, 4); /* the terminator crtend.o writes; what follows is not read */
	one_insn_fde(&eh, c, 0x2000, 0x10, 16);
	assert_int_equal(build_eh(&eh, &t), -ENOENT);
	assert_int_equal(build(NULL, NULL, AGENT_UNWIND_MAX_ROWS_DEFAULT, &t), -ENOENT);
}

/* A CIE with nops bytes of instructions (nops) shared by n_fdes FDEs; returns the build's result. */
static int build_long_cie(size_t nops, size_t n_fdes, struct agent_unwind_table *t)
{
	struct buf head = { 0 }, in = { 0 };
	struct agent_unwind_sections s = { .eh_frame_vaddr = EH_VADDR, .is_64 = 1 };
	uint8_t *sec;
	size_t len;
	int r;

	/* The CIE's fixed part, then the nops, assembled around struct buf's size. */
	uN(&head, 0, 4);
	u8(&head, 1);
	put(&head, "zR", 3);
	uleb(&head, 1);
	sleb(&head, -8);
	u8(&head, REG_RA);
	uleb(&head, 1);
	u8(&head, PE_PCREL_SDATA4);
	x86_64_initial(&head);
	adv(&in, 1);
	def_cfa_offset(&in, 16);
	sec = calloc(1, 4 + head.n + nops + n_fdes * 64);
	assert_non_null(sec);
	patch(&head, 0, 0, 4);
	uint32_t cie_len = (uint32_t)(head.n + nops);
	memcpy(sec, &cie_len, 4);
	memcpy(sec + 4, head.b, head.n);
	len = 4 + head.n + nops; /* the nops: calloc's zeros */
	for (size_t i = 0; i < n_fdes; i++) {
		struct buf fde = { .vaddr = EH_VADDR + len, .n = 0 };
		struct cie_ref c = { .off = 0, .z = true };

		/* eh_fde() counts the CIE pointer back from the FDE's offset in fde: shift it by len. */
		c.off = (size_t)0 - len;
		eh_fde(&fde, c, 0x100000 + 0x10 * i, 0x10, &in);
		memcpy(sec + len, fde.b, fde.n);
		len += fde.n;
	}
	s.eh_frame = sec;
	s.eh_frame_len = len;
	r = agent_unwind_table_build(&s, AGENT_UNWIND_MAX_ROWS_DEFAULT, t);
	free(sec);
	return r;
}

/*
 * Every FDE starts from its CIE's instructions. Up to
 * AGENT_UNWIND_MAX_CIE_INSNS they run once per CIE; past it the CIE is
 * refused at once. A megabyte of them shared by 4000 FDEs took minutes
 * before either, and would hit this test's timeout.
 */
static void test_long_cie(void **state)
{
	const size_t n_fdes = 4000;
	struct agent_unwind_table t;

	(void)state;
	assert_int_equal(build_long_cie(AGENT_UNWIND_MAX_CIE_INSNS - 16, n_fdes, &t), 0);
	assert_int_equal(t.stats.fdes, n_fdes);
	assert_int_equal(t.n_rows, 2 * n_fdes + 1);
	expect_at(&t, 0x100000, UNWIND_CFA_RSP, 8, SAME);
	expect_at(&t, 0x100000 + 0x10 * (n_fdes - 1) + 1, UNWIND_CFA_RSP, 16, SAME);
	agent_unwind_table_done(&t);

	assert_int_equal(build_long_cie(1u << 20, n_fdes, &t), -EINVAL);
	assert_int_equal(t.stats.fdes_bad, n_fdes);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_truncated),      cmocka_unit_test(test_bad_framing),
		cmocka_unit_test(test_bad_cies),       cmocka_unit_test(test_bad_instructions),
		cmocka_unit_test(test_remember_limit), cmocka_unit_test(test_limits),
		cmocka_unit_test(test_long_cie),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
