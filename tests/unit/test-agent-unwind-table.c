// SPDX-License-Identifier: Apache-2.0
/*
 * The unwind table builder (agent/unwind-table.c) on hand-assembled call
 * frame information: a tiny assembler below writes .eh_frame and
 * .debug_frame entries (CIEs, FDEs, LEB128 operands, pc-relative pointers)
 * so each test states the instructions a compiler would emit and the rows
 * the BPF unwinder must get. Then malformed input (every cut of a good
 * section, bad lengths and pointers, limits), and real files: this test
 * binary and the libc it runs with.
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

#include "agent/unwind-table.h"

/* The instructions and operators the tests write (DWARF 5, 6.4.2 and 2.5). */
enum {
	CFA_nop = 0x00,
	CFA_set_loc = 0x01,
	CFA_advance_loc1 = 0x02,
	CFA_advance_loc2 = 0x03,
	CFA_advance_loc4 = 0x04,
	CFA_offset_extended = 0x05,
	CFA_restore_extended = 0x06,
	CFA_undefined = 0x07,
	CFA_same_value = 0x08,
	CFA_register = 0x09,
	CFA_remember_state = 0x0a,
	CFA_restore_state = 0x0b,
	CFA_def_cfa = 0x0c,
	CFA_def_cfa_register = 0x0d,
	CFA_def_cfa_offset = 0x0e,
	CFA_def_cfa_expression = 0x0f,
	CFA_expression = 0x10,
	CFA_GNU_window_save = 0x2d,
	CFA_advance_loc = 0x40,
	CFA_offset = 0x80,
	CFA_restore = 0xc0,
};

enum {
	OP_deref = 0x06,
	OP_and = 0x1a,
	OP_plus = 0x22,
	OP_shl = 0x24,
	OP_ge = 0x2a,
	OP_lit0 = 0x30,
	OP_breg0 = 0x70,
};

#define REG_RBP 6
#define REG_RSP 7
#define REG_R10 10
#define REG_RA	16

/* Where the synthetic .eh_frame is linked; its pointers are relative to it. */
#define EH_VADDR 0x400000

/* Bytes being assembled: a section, or an FDE's instructions. */
struct buf {
	uint8_t b[8192];
	size_t n;
	uint64_t vaddr;
};

static void put(struct buf *s, const void *p, size_t n)
{
	assert_true(s->n + n <= sizeof(s->b));
	memcpy(s->b + s->n, p, n);
	s->n += n;
}

static void u8(struct buf *s, uint8_t v)
{
	put(s, &v, 1);
}

/* Little-endian fields of n bytes (x86-64's byte order). */
static void uN(struct buf *s, uint64_t v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		u8(s, (uint8_t)(v >> (8 * i)));
}

static void patch(struct buf *s, size_t at, uint64_t v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		s->b[at + i] = (uint8_t)(v >> (8 * i));
}

static void uleb(struct buf *s, uint64_t v)
{
	do {
		uint8_t b = v & 0x7f;

		v >>= 7;
		u8(s, v ? b | 0x80 : b);
	} while (v);
}

static void sleb(struct buf *s, int64_t v)
{
	for (;;) {
		uint8_t b = v & 0x7f;

		v >>= 7; /* arithmetic: gcc and clang keep the sign */
		if ((v == 0 && !(b & 0x40)) || (v == -1 && (b & 0x40))) {
			u8(s, b);
			return;
		}
		u8(s, b | 0x80);
	}
}

/* Instructions, named after what they do to the rules. */
static void adv(struct buf *i, uint8_t delta)
{
	assert_true(delta < 64);
	u8(i, CFA_advance_loc | delta);
}

static void adv1(struct buf *i, uint8_t delta)
{
	u8(i, CFA_advance_loc1);
	u8(i, delta);
}

static void adv2(struct buf *i, uint16_t delta)
{
	u8(i, CFA_advance_loc2);
	uN(i, delta, 2);
}

static void adv4(struct buf *i, uint32_t delta)
{
	u8(i, CFA_advance_loc4);
	uN(i, delta, 4);
}

static void def_cfa(struct buf *i, uint64_t reg, uint64_t off)
{
	u8(i, CFA_def_cfa);
	uleb(i, reg);
	uleb(i, off);
}

static void def_cfa_offset(struct buf *i, uint64_t off)
{
	u8(i, CFA_def_cfa_offset);
	uleb(i, off);
}

static void def_cfa_register(struct buf *i, uint64_t reg)
{
	u8(i, CFA_def_cfa_register);
	uleb(i, reg);
}

/* reg saved at CFA + factored * data alignment factor (-8 in these CIEs). */
static void offset(struct buf *i, uint8_t reg, uint64_t factored)
{
	u8(i, CFA_offset | reg);
	uleb(i, factored);
}

static void offset_extended(struct buf *i, uint64_t reg, uint64_t factored)
{
	u8(i, CFA_offset_extended);
	uleb(i, reg);
	uleb(i, factored);
}

static void op_reg(struct buf *i, uint8_t op, uint64_t reg)
{
	u8(i, op);
	uleb(i, reg);
}

static void def_cfa_expression(struct buf *i, const uint8_t *e, size_t n)
{
	u8(i, CFA_def_cfa_expression);
	uleb(i, n);
	put(i, e, n);
}

/* The FDE encoding GCC uses on x86-64: DW_EH_PE_pcrel | DW_EH_PE_sdata4. */
#define PE_PCREL_SDATA4 0x1b

struct cie_ref {
	size_t off;
	bool z;		   /* FDEs carry an augmentation data length */
	uint8_t addr_size; /* .debug_frame's absolute addresses */
	bool dwarf64;
};

/* Opens an entry at the end of s; entry_end() patches its length. */
static size_t entry_begin(struct buf *s, bool dwarf64)
{
	size_t at = s->n;

	if (dwarf64) {
		uN(s, 0xffffffffu, 4);
		uN(s, 0, 8);
	} else {
		uN(s, 0, 4);
	}
	return at;
}

static void entry_end(struct buf *s, size_t at, bool dwarf64)
{
	if (dwarf64)
		patch(s, at + 4, s->n - (at + 12), 8);
	else
		patch(s, at, s->n - (at + 4), 4);
}

/* The rules every x86-64 CIE starts with: CFA = rsp + 8, return address at CFA - 8. */
static void x86_64_initial(struct buf *s)
{
	def_cfa(s, REG_RSP, 8);
	offset(s, REG_RA, 1);
}

/*
 * An .eh_frame CIE of version 1 (code alignment 1, data alignment -8, return
 * address column ra) with the augmentation aug, the psABI's initial rules
 * and then extra's instructions.
 */
static struct cie_ref eh_cie_ra(struct buf *s, const char *aug, uint64_t ra, const struct buf *extra)
{
	struct cie_ref c = { .off = s->n, .z = aug[0] == 'z' };
	size_t at = entry_begin(s, false), data_at;

	uN(s, 0, 4); /* CIE id */
	u8(s, 1);
	put(s, aug, strlen(aug) + 1);
	uleb(s, 1);
	sleb(s, -8);
	u8(s, (uint8_t)ra);
	if (c.z) {
		u8(s, 0); /* augmentation data length, patched below */
		data_at = s->n;
		for (const char *a = aug + 1; *a; a++) {
			if (*a == 'R' || *a == 'L') {
				u8(s, PE_PCREL_SDATA4);
			} else if (*a == 'P') {
				u8(s, PE_PCREL_SDATA4);
				uN(s, 0x1234, 4);
			}
		}
		s->b[data_at - 1] = (uint8_t)(s->n - data_at);
	}
	x86_64_initial(s);
	if (extra)
		put(s, extra->b, extra->n);
	entry_end(s, at, false);
	return c;
}

static struct cie_ref eh_cie(struct buf *s, const char *aug, const struct buf *extra)
{
	return eh_cie_ra(s, aug, REG_RA, extra);
}

/* An .eh_frame FDE for [begin, begin + range) with pc-relative sdata4 pointers. */
static size_t eh_fde(struct buf *s, struct cie_ref c, uint64_t begin, uint32_t range, const struct buf *insns)
{
	size_t at = entry_begin(s, false);

	uN(s, s->n - c.off, 4); /* the CIE pointer counts back from this field */
	uN(s, begin - (s->vaddr + s->n), 4);
	uN(s, range, 4);
	if (c.z)
		uleb(s, 0);
	if (insns)
		put(s, insns->b, insns->n);
	entry_end(s, at, false);
	return at;
}

/* A .debug_frame CIE: 32- or 64-bit DWARF, version 1, 3 or 4, no augmentation. */
static struct cie_ref df_cie(struct buf *s, bool dwarf64, uint8_t version, uint8_t addr_size)
{
	struct cie_ref c = { .off = s->n, .addr_size = addr_size, .dwarf64 = dwarf64 };
	size_t at = entry_begin(s, dwarf64);

	uN(s, ~(uint64_t)0, dwarf64 ? 8 : 4);
	u8(s, version);
	u8(s, 0); /* "" */
	if (version == 4) {
		u8(s, addr_size);
		u8(s, 0); /* segment selector size */
	}
	uleb(s, 1);
	sleb(s, -8);
	if (version == 1)
		u8(s, REG_RA);
	else
		uleb(s, REG_RA);
	x86_64_initial(s);
	entry_end(s, at, dwarf64);
	return c;
}

/* A .debug_frame FDE: the CIE's section offset, then absolute addresses. */
static void df_fde(struct buf *s, struct cie_ref c, uint64_t begin, uint64_t range, const struct buf *insns)
{
	size_t at = entry_begin(s, c.dwarf64);

	uN(s, c.off, c.dwarf64 ? 8 : 4);
	uN(s, begin, c.addr_size);
	uN(s, range, c.addr_size);
	if (insns)
		put(s, insns->b, insns->n);
	entry_end(s, at, c.dwarf64);
}

static int build(const struct buf *eh, const struct buf *df, size_t max_rows, struct agent_unwind_table *t)
{
	struct agent_unwind_sections s = { .is_64 = 1 };

	if (eh) {
		s.eh_frame = eh->b;
		s.eh_frame_len = eh->n;
		s.eh_frame_vaddr = eh->vaddr;
	}
	if (df) {
		s.debug_frame = df->b;
		s.debug_frame_len = df->n;
	}
	return agent_unwind_table_build(&s, max_rows, t);
}

static int build_eh(const struct buf *eh, struct agent_unwind_table *t)
{
	return build(eh, NULL, AGENT_UNWIND_MAX_ROWS_DEFAULT, t);
}

/* What a row says, with its absolute address. */
struct want {
	uint64_t vaddr;
	uint8_t type;
	uint16_t cfa_off;
	int8_t rbp_off;
};

#define SAME  UNWIND_RBP_SAME
#define UNDEF UNWIND_RBP_UNDEFINED

static void expect_rows(const struct agent_unwind_table *t, const struct want *w, size_t n)
{
	for (size_t i = 0; i < n && i < t->n_rows; i++) {
		const struct unwind_row *r = &t->rows[i];

		if (t->base + r->pc != w[i].vaddr || r->cfa_type != w[i].type || r->cfa_off != w[i].cfa_off ||
		    r->rbp_off != w[i].rbp_off)
			fail_msg("row %zu: got %#llx type %u off %u rbp %d, want %#llx type %u off %u rbp %d", i,
				 (unsigned long long)(t->base + r->pc), r->cfa_type, r->cfa_off, r->rbp_off,
				 (unsigned long long)w[i].vaddr, w[i].type, w[i].cfa_off, w[i].rbp_off);
	}
	assert_int_equal(t->n_rows, n);
}

#define EXPECT_ROWS(t, ...)                                                                                            \
	do {                                                                                                           \
		const struct want w_[] = { __VA_ARGS__ };                                                              \
		expect_rows((t), w_, sizeof(w_) / sizeof(w_[0]));                                                      \
	} while (0)

/* The rule at vaddr, through the lookup the agent's checks use. */
static void expect_at(const struct agent_unwind_table *t, uint64_t vaddr, uint8_t type, uint16_t cfa_off,
		      int8_t rbp_off)
{
	const struct unwind_row *r = agent_unwind_table__find(t, vaddr);

	if (!r)
		fail_msg("no row at %#llx", (unsigned long long)vaddr);
	if (r->cfa_type != type || r->cfa_off != cfa_off || r->rbp_off != rbp_off)
		fail_msg("at %#llx: got type %u off %u rbp %d, want type %u off %u rbp %d", (unsigned long long)vaddr,
			 r->cfa_type, r->cfa_off, r->rbp_off, type, cfa_off, rbp_off);
}

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

/* push %rbp (1 byte); mov %rsp,%rbp (3 bytes): CFA = rsp+16, then rbp+16, rbp saved at CFA-16. */
static void fp_prologue(struct buf *in)
{
	adv(in, 1);
	def_cfa_offset(in, 16);
	offset(in, REG_RBP, 2);
	adv(in, 3);
	def_cfa_register(in, REG_RBP);
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

static void one_insn_fde(struct buf *eh, struct cie_ref c, uint64_t begin, uint32_t range, uint64_t cfa_off)
{
	struct buf in = { 0 };

	if (cfa_off != 8)
		def_cfa_offset(&in, cfa_off);
	eh_fde(eh, c, begin, range, &in);
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
		cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_bad_framing),
		cmocka_unit_test(test_bad_cies),
		cmocka_unit_test(test_bad_instructions),
		cmocka_unit_test(test_remember_limit),
		cmocka_unit_test(test_limits),
		cmocka_unit_test(test_long_cie),
		cmocka_unit_test(test_entry_point),
		cmocka_unit_test(test_self),
		cmocka_unit_test(test_a64_frames),
		cmocka_unit_test(test_a64_other_rules),
		cmocka_unit_test(test_libc),
		cmocka_unit_test(test_not_elf),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
