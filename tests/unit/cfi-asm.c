// SPDX-License-Identifier: Apache-2.0
/* The call frame information assembler of cfi-asm.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cfi-asm.h"

void put(struct buf *s, const void *p, size_t n)
{
	assert_true(s->n + n <= sizeof(s->b));
	memcpy(s->b + s->n, p, n);
	s->n += n;
}

void u8(struct buf *s, uint8_t v)
{
	put(s, &v, 1);
}

/* Little-endian fields of n bytes (x86-64's byte order). */
void uN(struct buf *s, uint64_t v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		u8(s, (uint8_t)(v >> (8 * i)));
}

void patch(struct buf *s, size_t at, uint64_t v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		s->b[at + i] = (uint8_t)(v >> (8 * i));
}

void uleb(struct buf *s, uint64_t v)
{
	do {
		uint8_t b = v & 0x7f;

		v >>= 7;
		u8(s, v ? b | 0x80 : b);
	} while (v);
}

void sleb(struct buf *s, int64_t v)
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
void adv(struct buf *i, uint8_t delta)
{
	assert_true(delta < 64);
	u8(i, CFA_advance_loc | delta);
}

void adv1(struct buf *i, uint8_t delta)
{
	u8(i, CFA_advance_loc1);
	u8(i, delta);
}

void adv2(struct buf *i, uint16_t delta)
{
	u8(i, CFA_advance_loc2);
	uN(i, delta, 2);
}

void adv4(struct buf *i, uint32_t delta)
{
	u8(i, CFA_advance_loc4);
	uN(i, delta, 4);
}

void def_cfa(struct buf *i, uint64_t reg, uint64_t off)
{
	u8(i, CFA_def_cfa);
	uleb(i, reg);
	uleb(i, off);
}

void def_cfa_offset(struct buf *i, uint64_t off)
{
	u8(i, CFA_def_cfa_offset);
	uleb(i, off);
}

void def_cfa_register(struct buf *i, uint64_t reg)
{
	u8(i, CFA_def_cfa_register);
	uleb(i, reg);
}

/* reg saved at CFA + factored * data alignment factor (-8 in these CIEs). */
void offset(struct buf *i, uint8_t reg, uint64_t factored)
{
	u8(i, CFA_offset | reg);
	uleb(i, factored);
}

void offset_extended(struct buf *i, uint64_t reg, uint64_t factored)
{
	u8(i, CFA_offset_extended);
	uleb(i, reg);
	uleb(i, factored);
}

void op_reg(struct buf *i, uint8_t op, uint64_t reg)
{
	u8(i, op);
	uleb(i, reg);
}

void def_cfa_expression(struct buf *i, const uint8_t *e, size_t n)
{
	u8(i, CFA_def_cfa_expression);
	uleb(i, n);
	put(i, e, n);
}

/* Opens an entry at the end of s; entry_end() patches its length. */
size_t entry_begin(struct buf *s, bool dwarf64)
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

void entry_end(struct buf *s, size_t at, bool dwarf64)
{
	if (dwarf64)
		patch(s, at + 4, s->n - (at + 12), 8);
	else
		patch(s, at, s->n - (at + 4), 4);
}

/* The rules every x86-64 CIE starts with: CFA = rsp + 8, return address at CFA - 8. */
void x86_64_initial(struct buf *s)
{
	def_cfa(s, REG_RSP, 8);
	offset(s, REG_RA, 1);
}

/*
 * An .eh_frame CIE of version 1 (code alignment 1, data alignment -8, return
 * address column ra) with the augmentation aug, the psABI's initial rules
 * and then extra's instructions.
 */
struct cie_ref eh_cie_ra(struct buf *s, const char *aug, uint64_t ra, const struct buf *extra)
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

struct cie_ref eh_cie(struct buf *s, const char *aug, const struct buf *extra)
{
	return eh_cie_ra(s, aug, REG_RA, extra);
}

/* An .eh_frame FDE for [begin, begin + range) with pc-relative sdata4 pointers. */
size_t eh_fde(struct buf *s, struct cie_ref c, uint64_t begin, uint32_t range, const struct buf *insns)
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
struct cie_ref df_cie(struct buf *s, bool dwarf64, uint8_t version, uint8_t addr_size)
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
void df_fde(struct buf *s, struct cie_ref c, uint64_t begin, uint64_t range, const struct buf *insns)
{
	size_t at = entry_begin(s, c.dwarf64);

	uN(s, c.off, c.dwarf64 ? 8 : 4);
	uN(s, begin, c.addr_size);
	uN(s, range, c.addr_size);
	if (insns)
		put(s, insns->b, insns->n);
	entry_end(s, at, c.dwarf64);
}

int build(const struct buf *eh, const struct buf *df, size_t max_rows, struct agent_unwind_table *t)
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

int build_eh(const struct buf *eh, struct agent_unwind_table *t)
{
	return build(eh, NULL, AGENT_UNWIND_MAX_ROWS_DEFAULT, t);
}

void expect_rows(const struct agent_unwind_table *t, const struct want *w, size_t n)
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

/* The rule at vaddr, through the lookup the agent's checks use. */
void expect_at(const struct agent_unwind_table *t, uint64_t vaddr, uint8_t type, uint16_t cfa_off, int8_t rbp_off)
{
	const struct unwind_row *r = agent_unwind_table__find(t, vaddr);

	if (!r)
		fail_msg("no row at %#llx", (unsigned long long)vaddr);
	if (r->cfa_type != type || r->cfa_off != cfa_off || r->rbp_off != rbp_off)
		fail_msg("at %#llx: got type %u off %u rbp %d, want type %u off %u rbp %d", (unsigned long long)vaddr,
			 r->cfa_type, r->cfa_off, r->rbp_off, type, cfa_off, rbp_off);
}

/* push %rbp (1 byte); mov %rsp,%rbp (3 bytes): CFA = rsp+16, then rbp+16, rbp saved at CFA-16. */
void fp_prologue(struct buf *in)
{
	adv(in, 1);
	def_cfa_offset(in, 16);
	offset(in, REG_RBP, 2);
	adv(in, 3);
	def_cfa_register(in, REG_RBP);
}

/* An FDE of one rule: CFA = RSP + cfa_off over its range. */
void one_insn_fde(struct buf *eh, struct cie_ref c, uint64_t begin, uint32_t range, uint64_t cfa_off)
{
	struct buf in = { 0 };

	if (cfa_off != 8)
		def_cfa_offset(&in, cfa_off);
	eh_fde(eh, c, begin, range, &in);
}
