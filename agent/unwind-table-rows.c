/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The unwind table builder's rows (unwind-table-private.h): call frame
 * instructions run over the state a CIE left, and each state turned into a
 * row of bpf/unwind.h (a CFA rule the BPF unwinder can follow, where the
 * caller's RBP was saved; on AArch64 also where the return address is) and
 * appended wherever the rule changes. The
 * remember/restore stack is bounded, and an operand that overflows makes the
 * rule unusable instead of wrapping.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "unwind-table-private.h"

/* Call frame instructions (DWARF 5 section 6.4.2, plus the GNU ones GCC emits). */
enum {
	DW_CFA_nop = 0x00,
	DW_CFA_set_loc = 0x01,
	DW_CFA_advance_loc1 = 0x02,
	DW_CFA_advance_loc2 = 0x03,
	DW_CFA_advance_loc4 = 0x04,
	DW_CFA_offset_extended = 0x05,
	DW_CFA_restore_extended = 0x06,
	DW_CFA_undefined = 0x07,
	DW_CFA_same_value = 0x08,
	DW_CFA_register = 0x09,
	DW_CFA_remember_state = 0x0a,
	DW_CFA_restore_state = 0x0b,
	DW_CFA_def_cfa = 0x0c,
	DW_CFA_def_cfa_register = 0x0d,
	DW_CFA_def_cfa_offset = 0x0e,
	DW_CFA_def_cfa_expression = 0x0f,
	DW_CFA_expression = 0x10,
	DW_CFA_offset_extended_sf = 0x11,
	DW_CFA_def_cfa_sf = 0x12,
	DW_CFA_def_cfa_offset_sf = 0x13,
	DW_CFA_val_offset = 0x14,
	DW_CFA_val_offset_sf = 0x15,
	DW_CFA_val_expression = 0x16,
	DW_CFA_GNU_window_save = 0x2d,
	DW_CFA_GNU_args_size = 0x2e,
	DW_CFA_GNU_negative_offset_extended = 0x2f,
	/* The high two bits carry the opcode, the low six an operand. */
	DW_CFA_advance_loc = 0x40,
	DW_CFA_offset = 0x80,
	DW_CFA_restore = 0xc0,
};

/* DWARF expression operators the two recognised expressions use. */
enum {
	DW_OP_deref = 0x06,
	DW_OP_and = 0x1a,
	DW_OP_plus = 0x22,
	DW_OP_shl = 0x24,
	DW_OP_ge = 0x2a,
	DW_OP_lit0 = 0x30,
	DW_OP_breg0 = 0x70,
	DW_OP_bregx_rip = 0x80, /* DW_OP_breg16 */
};

/* remember_state nesting; GCC nests one or two deep. */
#define CFA_STATE_STACK 16

static struct reg_rule *tracked(const struct cie *c, struct cfa_state *st, uint64_t reg)
{
	if (reg == c->fp_reg)
		return &st->rbp;
	if (reg == c->ra_reg)
		return &st->ra;
	return NULL;
}

/* DW_CFA_restore: the register's rule as the CIE left it. */
static void restore_rule(const struct cie *c, struct cfa_state *st, const struct cfa_state *initial, uint64_t reg)
{
	struct reg_rule *rule = tracked(c, st, reg);

	if (rule)
		*rule = reg == c->fp_reg ? initial->rbp : initial->ra;
}

/*
 * An operand times the data alignment factor. The operands are untrusted:
 * a product that does not fit marks the rule unusable instead of wrapping.
 */
static int64_t scaled(struct reader *r, int64_t v, int64_t daf)
{
	int64_t out;

	if (__builtin_mul_overflow(v, daf, &out)) {
		r->err = true;
		return 0;
	}
	return out;
}

static int64_t uleb_as_s64(struct reader *r)
{
	uint64_t v = rd_uleb(r);

	if (v > INT64_MAX) {
		r->err = true;
		return 0;
	}
	return (int64_t)v;
}

/* The PLT's CFA: rsp + 8 + ((rip & 15) >= N) << 3. Returns N, or -ENOENT for any other expression. */
static int match_plt(const uint8_t *e, size_t len)
{
	static const uint8_t head[] = { DW_OP_breg0 + DW_REG_RSP, 8, DW_OP_bregx_rip, 0, DW_OP_lit0 + 15, DW_OP_and };
	static const uint8_t tail[] = { DW_OP_ge, DW_OP_lit0 + 3, DW_OP_shl, DW_OP_plus };

	if (len != sizeof(head) + 1 + sizeof(tail) || memcmp(e, head, sizeof(head)) != 0 ||
	    memcmp(e + sizeof(head) + 1, tail, sizeof(tail)) != 0)
		return -ENOENT;
	if (e[sizeof(head)] < DW_OP_lit0 || e[sizeof(head)] > DW_OP_lit0 + 31)
		return -ENOENT;
	return e[sizeof(head)] - DW_OP_lit0;
}

/* GCC's realigned frame: CFA = *(rbp + k). Returns 0 and k, or -ENOENT. */
static int match_deref_rbp(const uint8_t *e, size_t len, int16_t *ret_k)
{
	struct reader r = { e, e + len, false };
	int64_t k;

	if (len < 3 || rd_u8(&r) != DW_OP_breg0 + DW_REG_RBP)
		return -ENOENT;
	k = rd_sleb(&r);
	if (r.err || r.p + 1 != r.end || *r.p != DW_OP_deref || k < INT16_MIN || k > INT16_MAX)
		return -ENOENT;
	*ret_k = (int16_t)k;
	return 0;
}

/* A rule saved at CFA + off, as a slot of 8 bytes that fits rbp_off (never 0, never UNWIND_RBP_UNDEFINED). */
static bool slot8(int64_t off, int8_t *ret)
{
	if (off == 0 || off % 8 != 0 || off / 8 < -127 || off / 8 > 127)
		return false;
	*ret = (int8_t)(off / 8);
	return true;
}

static struct unwind_row unsupported(struct builder *b)
{
	struct unwind_row row = { .cfa_type = UNWIND_CFA_UNSUPPORTED };

	b->stats->rows_unsupported++;
	return row;
}

/*
 * An AArch64 state as a row (bpf/unwind.h, UNWIND_A64_*): the CFA from SP
 * or FP, the return address still in LR or saved near either end of the
 * frame, and FP saved beside it, or alone while LR holds the return address.
 */
static struct unwind_row to_row_a64(struct builder *b, const struct cie *c, const struct cfa_state *st)
{
	struct unwind_row row = { 0 };
	int64_t cfa_bytes;
	uint8_t ra, fp;
	int8_t slot = 0, fp_slot;

	if (st->ra.kind == RULE_UNDEF) {
		row.cfa_type = UNWIND_CFA_END;
		return row;
	}
	if (c->signal) {
		row.cfa_type = UNWIND_CFA_SIGNAL;
		return row;
	}
	if (st->cfa_expr || (st->cfa_reg != DW_REG_A64_SP && st->cfa_reg != DW_REG_A64_FP) || st->cfa_off < 0)
		return unsupported(b);
	cfa_bytes = st->cfa_off;
	if (cfa_bytes <= UINT16_MAX) {
		row.cfa_type = st->cfa_reg == DW_REG_A64_SP ? UNWIND_CFA_RSP : UNWIND_CFA_RBP;
		row.cfa_off = (uint16_t)cfa_bytes;
	} else if (st->cfa_reg == DW_REG_A64_SP && cfa_bytes % 8 == 0 && cfa_bytes / 8 <= UINT16_MAX) {
		row.cfa_type = UNWIND_CFA_RSP_X8;
		row.cfa_off = (uint16_t)(cfa_bytes / 8);
	} else {
		return unsupported(b);
	}
	switch (st->ra.kind) {
	case RULE_UNSPEC:
	case RULE_SAME:
		/* The ABI leaves LR's rule unspecified: the return address has not left the register. */
		ra = UNWIND_A64_RA_LR;
		break;
	case RULE_OFFSET:
		if (slot8(st->ra.off, &slot))
			ra = UNWIND_A64_RA_CFA;
		else if (slot8(cfa_bytes + st->ra.off, &slot))
			ra = UNWIND_A64_RA_BASE;
		else
			return unsupported(b);
		break;
	default:
		return unsupported(b);
	}
	switch (st->rbp.kind) {
	case RULE_UNSPEC:
	case RULE_SAME:
		fp = UNWIND_A64_FP_SAME;
		break;
	case RULE_OFFSET:
		if (ra != UNWIND_A64_RA_LR && st->rbp.off == st->ra.off - 8) {
			fp = UNWIND_A64_FP_PAIR;
			break;
		}
		if (ra == UNWIND_A64_RA_LR && slot8(st->rbp.off, &fp_slot)) {
			fp = UNWIND_A64_FP_CFA;
			slot = fp_slot;
			break;
		}
		/* fall through */
	default:
		fp = UNWIND_A64_FP_UNDEFINED;
		b->stats->rows_rbp_undefined++;
		break;
	}
	row.cfa_type |= ra | fp;
	row.rbp_off = slot;
	return row;
}

/* The row a state stands for. */
static struct unwind_row to_row(struct builder *b, const struct cie *c, const struct cfa_state *st)
{
	struct unwind_row row = { 0 };
	int16_t k;
	int n;

	if (c->ra_reg == DW_REG_A64_LR)
		return to_row_a64(b, c, st);
	if (st->ra.kind == RULE_UNDEF) {
		row.cfa_type = UNWIND_CFA_END;
		return row;
	}
	if (c->signal) {
		row.cfa_type = UNWIND_CFA_SIGNAL;
		return row;
	}
	if (!st->cfa_expr) {
		if ((st->cfa_reg == DW_REG_RSP || st->cfa_reg == DW_REG_RBP) && st->cfa_off >= 0 &&
		    st->cfa_off <= UINT16_MAX) {
			row.cfa_type = st->cfa_reg == DW_REG_RSP ? UNWIND_CFA_RSP : UNWIND_CFA_RBP;
			row.cfa_off = (uint16_t)st->cfa_off;
		} else if (st->cfa_reg == DW_REG_RSP && st->cfa_off > 0 && st->cfa_off % 8 == 0 &&
			   st->cfa_off / 8 <= UINT16_MAX) {
			row.cfa_type = UNWIND_CFA_RSP_X8;
			row.cfa_off = (uint16_t)(st->cfa_off / 8);
		}
	} else if ((n = match_plt(st->expr, st->expr_len)) >= 0) {
		row.cfa_type = UNWIND_CFA_PLT;
		row.cfa_off = (uint16_t)n;
	} else if (match_deref_rbp(st->expr, st->expr_len, &k) == 0) {
		row.cfa_type = UNWIND_CFA_DEREF_RBP;
		row.cfa_off = (uint16_t)k;
	}
	/* The x86-64 unwinder reads the return address at CFA - 8, always. */
	if (row.cfa_type == UNWIND_CFA_INVALID || !(st->ra.kind == RULE_OFFSET && st->ra.off == -8))
		row.cfa_type = UNWIND_CFA_UNSUPPORTED;
	if (row.cfa_type == UNWIND_CFA_UNSUPPORTED) {
		row.cfa_off = 0;
		b->stats->rows_unsupported++;
		return row;
	}
	switch (st->rbp.kind) {
	case RULE_UNSPEC:
	case RULE_SAME:
		row.rbp_off = UNWIND_RBP_SAME;
		break;
	case RULE_OFFSET:
		if (st->rbp.off % 8 == 0 && st->rbp.off / 8 >= -127 && st->rbp.off / 8 <= 127 && st->rbp.off != 0) {
			row.rbp_off = (int8_t)(st->rbp.off / 8);
			break;
		}
		/* fall through */
	default:
		row.rbp_off = UNWIND_RBP_UNDEFINED;
		b->stats->rows_rbp_undefined++;
		break;
	}
	return row;
}

static bool same_rule(const struct unwind_row *a, const struct unwind_row *b)
{
	return a->cfa_type == b->cfa_type && a->cfa_off == b->cfa_off && a->rbp_off == b->rbp_off;
}

int agent_unwind_push_row(struct builder *b, uint64_t pc, struct unwind_row row)
{
	row.pc = (uint32_t)(pc - b->base);
	if (b->n_rows > b->fde_first_row && b->rows[b->n_rows - 1].pc == row.pc) {
		/* Two rules at one address (an advance of 0): the later one holds. */
		b->n_rows--;
	}
	if (b->n_rows > 0 && same_rule(&b->rows[b->n_rows - 1], &row))
		return 0;
	if (b->n_rows == b->max_rows) {
		b->too_big = true;
		return -E2BIG;
	}
	if (sr_grow_max((void **)&b->rows, &b->cap_rows, b->n_rows + 1, sizeof(*b->rows), 1024, b->max_rows) < 0) {
		b->oom = true;
		return -ENOMEM;
	}
	b->rows[b->n_rows++] = row;
	return 0;
}

/*
 * Runs call frame instructions over st. With emit, a row is appended for the
 * state before every advance of the location and for the state at the end;
 * locations at or past end are not emitted. Returns 0, -EINVAL for an
 * instruction that cannot be decoded, or agent_unwind_push_row()'s error.
 */
int agent_unwind_run_insns(struct builder *b, const struct cie *c, const uint8_t *p, const uint8_t *pend,
			   struct cfa_state *st, const struct cfa_state *initial, uint64_t loc, uint64_t end, bool emit)
{
	struct reader r = { p, pend, false };
	struct cfa_state stack[CFA_STATE_STACK];
	size_t depth = 0;
	int ret;

	while (r.p < r.end && !r.err) {
		uint8_t op = rd_u8(&r), low = op & 0x3f;
		uint64_t reg, delta = 0, newloc = loc;
		struct reg_rule *rule;
		int64_t off;

		switch (op & 0xc0) {
		case DW_CFA_advance_loc:
			delta = low;
			goto advance;
		case DW_CFA_offset:
			off = scaled(&r, uleb_as_s64(&r), c->daf);
			if ((rule = tracked(c, st, low)))
				*rule = (struct reg_rule){ RULE_OFFSET, off };
			continue;
		case DW_CFA_restore:
			restore_rule(c, st, initial, low);
			continue;
		default:
			break;
		}
		switch (op) {
		case DW_CFA_nop:
			break;
		case DW_CFA_set_loc:
			newloc = agent_unwind_rd_encoded(&r, c->fde_enc, c->addr_size, c->sec, b->s, true);
			if (r.err || newloc < loc)
				return -EINVAL;
			goto moved;
		case DW_CFA_advance_loc1:
			delta = rd_bytes(&r, 1);
			goto advance;
		case DW_CFA_advance_loc2:
			delta = rd_bytes(&r, 2);
			goto advance;
		case DW_CFA_advance_loc4:
			delta = rd_bytes(&r, 4);
			goto advance;
		case DW_CFA_offset_extended:
			reg = rd_uleb(&r);
			off = scaled(&r, uleb_as_s64(&r), c->daf);
			if ((rule = tracked(c, st, reg)))
				*rule = (struct reg_rule){ RULE_OFFSET, off };
			break;
		case DW_CFA_offset_extended_sf:
			reg = rd_uleb(&r);
			off = scaled(&r, rd_sleb(&r), c->daf);
			if ((rule = tracked(c, st, reg)))
				*rule = (struct reg_rule){ RULE_OFFSET, off };
			break;
		case DW_CFA_GNU_negative_offset_extended:
			reg = rd_uleb(&r);
			off = scaled(&r, -uleb_as_s64(&r), c->daf);
			if ((rule = tracked(c, st, reg)))
				*rule = (struct reg_rule){ RULE_OFFSET, off };
			break;
		case DW_CFA_restore_extended:
			restore_rule(c, st, initial, rd_uleb(&r));
			break;
		case DW_CFA_undefined:
		case DW_CFA_same_value:
			reg = rd_uleb(&r);
			if ((rule = tracked(c, st, reg)))
				*rule = (struct reg_rule){ op == DW_CFA_undefined ? RULE_UNDEF : RULE_SAME, 0 };
			break;
		case DW_CFA_register:
			reg = rd_uleb(&r);
			rd_uleb(&r);
			if ((rule = tracked(c, st, reg)))
				*rule = (struct reg_rule){ RULE_OTHER, 0 };
			break;
		case DW_CFA_val_offset:
		case DW_CFA_val_offset_sf:
			reg = rd_uleb(&r);
			if (op == DW_CFA_val_offset)
				rd_uleb(&r);
			else
				rd_sleb(&r);
			if ((rule = tracked(c, st, reg)))
				*rule = (struct reg_rule){ RULE_OTHER, 0 };
			break;
		case DW_CFA_remember_state:
			if (depth == CFA_STATE_STACK)
				return -EINVAL;
			stack[depth++] = *st;
			break;
		case DW_CFA_restore_state:
			if (depth == 0)
				return -EINVAL;
			/* The CFA rule is restored too (DWARF 5; GCC relies on it). */
			*st = stack[--depth];
			break;
		case DW_CFA_def_cfa:
			st->cfa_reg = rd_uleb(&r);
			st->cfa_off = uleb_as_s64(&r);
			st->cfa_expr = false;
			break;
		case DW_CFA_def_cfa_sf:
			st->cfa_reg = rd_uleb(&r);
			st->cfa_off = scaled(&r, rd_sleb(&r), c->daf);
			st->cfa_expr = false;
			break;
		case DW_CFA_def_cfa_register:
			st->cfa_reg = rd_uleb(&r);
			/* Only a register rule has a register to change; after an expression the rule is unusable. */
			if (st->cfa_expr)
				st->cfa_reg = UINT64_MAX;
			st->cfa_expr = false;
			break;
		case DW_CFA_def_cfa_offset:
			st->cfa_off = uleb_as_s64(&r);
			if (st->cfa_expr)
				st->cfa_reg = UINT64_MAX;
			st->cfa_expr = false;
			break;
		case DW_CFA_def_cfa_offset_sf:
			st->cfa_off = scaled(&r, rd_sleb(&r), c->daf);
			if (st->cfa_expr)
				st->cfa_reg = UINT64_MAX;
			st->cfa_expr = false;
			break;
		case DW_CFA_def_cfa_expression: {
			uint64_t len = rd_uleb(&r);

			if (r.err || len > (uint64_t)(r.end - r.p))
				return -EINVAL;
			st->cfa_expr = true;
			st->expr = r.p;
			st->expr_len = (size_t)len;
			r.p += len;
			break;
		}
		case DW_CFA_expression:
		case DW_CFA_val_expression: {
			uint64_t len;

			reg = rd_uleb(&r);
			len = rd_uleb(&r);
			rd_skip(&r, len);
			if ((rule = tracked(c, st, reg)))
				*rule = (struct reg_rule){ RULE_OTHER, 0 };
			break;
		}
		case DW_CFA_GNU_args_size:
			rd_uleb(&r);
			break;
		case DW_CFA_GNU_window_save:
			/*
			 * On AArch64, DW_CFA_AARCH64_negate_ra_state: the return
			 * address is signed (pointer authentication) from here.
			 * The rule that finds it does not change, and the BPF
			 * unwinder strips those bits from every return address.
			 * Elsewhere SPARC's register windows: not x86-64's.
			 */
			if (c->ra_reg != DW_REG_A64_LR)
				return -EINVAL;
			break;
		default:
			return -EINVAL;
		}
		continue;
	advance:
		if (r.err)
			return -EINVAL;
		if (delta > UINT32_MAX / c->caf || __builtin_add_overflow(loc, delta * c->caf, &newloc))
			return -EINVAL;
	moved:
		if (emit && newloc != loc && loc < end && (ret = agent_unwind_push_row(b, loc, to_row(b, c, st))) < 0)
			return ret;
		loc = newloc;
	}
	if (r.err)
		return -EINVAL;
	if (emit && loc < end && (ret = agent_unwind_push_row(b, loc, to_row(b, c, st))) < 0)
		return ret;
	return 0;
}
