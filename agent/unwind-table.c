// SPDX-License-Identifier: Apache-2.0
/*
 * The unwind table builder: DWARF call frame information (.eh_frame, the
 * LSB's variant of it, and .debug_frame) turned into the sorted rows of
 * bpf/unwind.h. A parser of our own over the section bytes rather than
 * libdw's CFI reader: libdw answers "the rule at this pc", one query at a
 * time, where the table needs every row of every FDE in one linear pass.
 *
 * Two passes: the first walks the section(s) and collects each FDE's range;
 * the FDEs are sorted by address; the second runs each FDE's instructions
 * (after its CIE's) and appends a row wherever the rule changes. Gaps between
 * FDEs get a row of UNWIND_CFA_INVALID, so a pc that no FDE covers never
 * borrows its neighbour's rule.
 *
 * Untrusted input: every read is bounds-checked, lengths are checked before
 * use, loops run over bytes that exist, the remember/restore stack is
 * bounded, and the row count is bounded by the caller's max_rows.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <gelf.h>
#include <libelf.h>

#include "unwind-table.h"

/* DWARF register numbers of x86-64 (psABI figure 3.36). */
#define DW_REG_RBP 6
#define DW_REG_RSP 7
#define DW_REG_RA  16

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

/* Pointer encodings of .eh_frame (LSB, "DWARF Exception Header Encoding"). */
enum {
	DW_EH_PE_absptr = 0x00,
	DW_EH_PE_uleb128 = 0x01,
	DW_EH_PE_udata2 = 0x02,
	DW_EH_PE_udata4 = 0x03,
	DW_EH_PE_udata8 = 0x04,
	DW_EH_PE_sleb128 = 0x09,
	DW_EH_PE_sdata2 = 0x0a,
	DW_EH_PE_sdata4 = 0x0b,
	DW_EH_PE_sdata8 = 0x0c,
	DW_EH_PE_pcrel = 0x10,
	DW_EH_PE_textrel = 0x20,
	DW_EH_PE_datarel = 0x30,
	DW_EH_PE_funcrel = 0x40,
	DW_EH_PE_aligned = 0x50,
	DW_EH_PE_indirect = 0x80,
	DW_EH_PE_omit = 0xff,
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
/* CIEs parsed and kept while the FDEs are run; most files have one to four. */
#define CIE_CACHE 16

struct reader {
	const uint8_t *p;
	const uint8_t *end;
	bool err;
};

static uint64_t rd_bytes(struct reader *r, size_t n)
{
	uint64_t v = 0;

	if (r->err || (size_t)(r->end - r->p) < n) {
		r->err = true;
		r->p = r->end;
		return 0;
	}
	/* Little-endian: x86-64 only (the callers check the ELF's machine). */
	for (size_t i = 0; i < n; i++)
		v |= (uint64_t)r->p[i] << (8 * i);
	r->p += n;
	return v;
}

static uint8_t rd_u8(struct reader *r)
{
	return (uint8_t)rd_bytes(r, 1);
}

/* A LEB128 number, sign-extended when is_signed; at most 10 bytes (64 bits), else an error. */
static uint64_t rd_leb(struct reader *r, bool is_signed)
{
	uint64_t v = 0;

	for (unsigned shift = 0; !r->err; shift += 7) {
		uint8_t b;

		if (r->p >= r->end || shift > 63) {
			r->err = true;
			break;
		}
		b = *r->p++;
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			shift += 7;
			if (is_signed && shift < 64 && (b & 0x40))
				v |= ~(uint64_t)0 << shift;
			return v;
		}
	}
	return 0;
}

static uint64_t rd_uleb(struct reader *r)
{
	return rd_leb(r, false);
}

static int64_t rd_sleb(struct reader *r)
{
	return (int64_t)rd_leb(r, true);
}

static void rd_skip(struct reader *r, uint64_t n)
{
	if (r->err || (uint64_t)(r->end - r->p) < n) {
		r->err = true;
		r->p = r->end;
		return;
	}
	r->p += n;
}

/* The section the entries come from, and what its pointers are relative to. */
struct section {
	const uint8_t *base;
	size_t len;
	uint64_t vaddr;
	bool is_eh; /* .eh_frame (else .debug_frame) */
};

/* The rule of a register we track. */
enum rule_kind { RULE_UNSPEC, RULE_UNDEF, RULE_SAME, RULE_OFFSET, RULE_OTHER };

struct reg_rule {
	uint8_t kind;
	int64_t off; /* RULE_OFFSET: saved at CFA + off */
};

struct cfa_state {
	bool cfa_expr; /* the CFA is an expression (else register + offset) */
	uint64_t cfa_reg;
	int64_t cfa_off;
	const uint8_t *expr;
	size_t expr_len;
	struct reg_rule rbp;
	struct reg_rule ra;
};

struct cie {
	size_t off; /* offset in its section: the cache key */
	const struct section *sec;
	uint64_t caf; /* code alignment factor */
	int64_t daf;  /* data alignment factor */
	uint8_t fde_enc;
	uint8_t addr_size;
	bool has_z;
	bool signal;
	bool usable; /* parsed, and its return address column is x86-64's */
	const uint8_t *insns;
	const uint8_t *insns_end;
	/*
	 * The rules its instructions set, run once rather than for each of its
	 * FDEs: a CIE's instructions are untrusted too, and running them again
	 * for every FDE made the build quadratic in the section's size (one
	 * CIE of 1 MiB of nops and 50,000 FDEs took minutes).
	 */
	bool initial_done;
	int initial_ret;
	struct cfa_state initial;
};

struct fde {
	uint64_t begin;
	uint64_t end;
	const struct section *sec;
	size_t off; /* of the FDE's length field */
	size_t cie_off;
	bool entry; /* not an FDE: the uncovered entry point's outermost-frame range (sec is NULL) */
};

struct builder {
	const struct agent_unwind_sections *s;
	struct agent_unwind_stats *stats;
	struct fde *fdes;
	size_t n_fdes, cap_fdes;
	struct cie cies[CIE_CACHE];
	size_t n_cies, next_cie;
	struct unwind_row *rows;
	size_t n_rows, cap_rows, max_rows;
	uint64_t base;
	size_t fde_first_row; /* rows from here on belong to the FDE being run */
	bool too_big;
	bool oom;
};

/* Reads a pointer in encoding enc; field_vaddr is where the field itself is linked (for pcrel). */
static uint64_t rd_encoded(struct reader *r, uint8_t enc, uint8_t addr_size, const struct section *sec,
			   const struct agent_unwind_sections *s, bool with_base)
{
	uint64_t field_vaddr = sec->vaddr + (uint64_t)(r->p - sec->base), v, base = 0;

	if ((enc & 0x70) == DW_EH_PE_aligned) {
		size_t mis = (size_t)(r->p - sec->base) % addr_size;

		if (mis)
			rd_skip(r, addr_size - mis);
		enc = DW_EH_PE_absptr;
		field_vaddr = 0;
	}
	switch (enc & 0x0f) {
	case DW_EH_PE_absptr:
		v = rd_bytes(r, addr_size);
		break;
	case DW_EH_PE_uleb128:
		v = rd_uleb(r);
		break;
	case DW_EH_PE_udata2:
		v = rd_bytes(r, 2);
		break;
	case DW_EH_PE_udata4:
		v = rd_bytes(r, 4);
		break;
	case DW_EH_PE_udata8:
		v = rd_bytes(r, 8);
		break;
	case DW_EH_PE_sleb128:
		v = (uint64_t)rd_sleb(r);
		break;
	case DW_EH_PE_sdata2:
		v = (uint64_t)(int64_t)(int16_t)rd_bytes(r, 2);
		break;
	case DW_EH_PE_sdata4:
		v = (uint64_t)(int64_t)(int32_t)rd_bytes(r, 4);
		break;
	case DW_EH_PE_sdata8:
		v = rd_bytes(r, 8);
		break;
	default:
		r->err = true;
		return 0;
	}
	if (!with_base)
		return v;
	switch (enc & 0x70) {
	case DW_EH_PE_absptr:
		break;
	case DW_EH_PE_pcrel:
		base = field_vaddr;
		break;
	case DW_EH_PE_textrel:
		base = s->text_vaddr;
		break;
	case DW_EH_PE_datarel:
		base = s->data_vaddr;
		break;
	default:
		/* funcrel has no function to be relative to here. */
		r->err = true;
		return 0;
	}
	/* An indirect pointer would need the process's memory: never used for an FDE's range. */
	if (enc & DW_EH_PE_indirect)
		r->err = true;
	v += base;
	if (addr_size == 4)
		v &= 0xffffffffu;
	return v;
}

/*
 * Reads an entry's header at off: its length and, for an FDE, where its CIE
 * is. Returns 1 for a CIE, 2 for an FDE, 0 at the end of the section, -1 when
 * malformed. ret_body is where the entry's content starts after the ID field.
 */
static int read_entry(const struct section *sec, size_t off, size_t *ret_next, struct reader *ret_body,
		      size_t *ret_cie_off)
{
	struct reader r = { sec->base + off, sec->base + sec->len, false };
	uint64_t len = rd_bytes(&r, 4), id;
	size_t id_size = 4;
	const uint8_t *id_pos;

	if (r.err)
		return off == sec->len ? 0 : -1;
	if (len == 0) /* the terminator .eh_frame ends with (crtend.o) */
		return 0;
	if (len == 0xffffffffu) {
		len = rd_bytes(&r, 8);
		/* 64-bit DWARF: .debug_frame's IDs grow to 8 bytes; .eh_frame's stay 4. */
		if (!sec->is_eh)
			id_size = 8;
	}
	if (r.err || len > (uint64_t)(r.end - r.p) || len < id_size)
		return -1;
	*ret_next = (size_t)(r.p - sec->base) + (size_t)len;
	ret_body->end = r.p + len;
	id_pos = r.p;
	id = rd_bytes(&r, id_size);
	ret_body->p = r.p;
	ret_body->err = false;
	if (sec->is_eh) {
		if (id == 0)
			return 1;
		/* The CIE pointer counts back from the field itself. */
		if (id > (uint64_t)(id_pos - sec->base))
			return -1;
		*ret_cie_off = (size_t)(id_pos - sec->base) - (size_t)id;
		return 2;
	}
	if (id == (id_size == 8 ? ~(uint64_t)0 : 0xffffffffu))
		return 1;
	if (id >= sec->len)
		return -1;
	*ret_cie_off = (size_t)id;
	return 2;
}

static int parse_cie(const struct agent_unwind_sections *s, const struct section *sec, size_t off, struct cie *c)
{
	struct reader r;
	size_t next, unused;
	const char *aug;
	size_t aug_len;
	uint8_t version;
	uint64_t ra;

	memset(c, 0, sizeof(*c));
	c->off = off;
	c->sec = sec;
	c->addr_size = s->is_64 ? 8 : 4;
	if (read_entry(sec, off, &next, &r, &unused) != 1)
		return -EINVAL;
	version = rd_u8(&r);
	if (r.err || (version != 1 && version != 3 && version != 4))
		return -EINVAL;
	aug = (const char *)r.p;
	aug_len = strnlen(aug, (size_t)(r.end - r.p));
	if (aug_len == (size_t)(r.end - r.p))
		return -EINVAL;
	r.p += aug_len + 1;
	/* "eh" (GCC before 3.0) puts a pointer here whose size we cannot trust: refuse the CIE. */
	if (strstr(aug, "eh"))
		return -EINVAL;
	if (version == 4) {
		c->addr_size = rd_u8(&r);
		if (rd_u8(&r) != 0 || (c->addr_size != 4 && c->addr_size != 8))
			return -EINVAL;
	}
	c->caf = rd_uleb(&r);
	c->daf = rd_sleb(&r);
	ra = version == 1 ? rd_u8(&r) : rd_uleb(&r);
	c->fde_enc = sec->is_eh ? 0 : DW_EH_PE_absptr;
	if (aug[0] == 'z') {
		uint64_t alen = rd_uleb(&r);
		struct reader a = { r.p, r.p, r.err };

		if (r.err || alen > (uint64_t)(r.end - r.p))
			return -EINVAL;
		a.end = r.p + alen;
		c->has_z = true;
		for (size_t i = 1; i < aug_len && !a.err; i++) {
			switch (aug[i]) {
			case 'L':
				rd_u8(&a);
				break;
			case 'P': {
				uint8_t enc = rd_u8(&a);
				rd_encoded(&a, enc, c->addr_size, sec, s, false);
				break;
			}
			case 'R':
				c->fde_enc = rd_u8(&a);
				break;
			case 'S':
				c->signal = true;
				break;
			default:
				/* Unknown letters: 'z' says how long the data is, so what follows can be skipped. */
				i = aug_len;
				break;
			}
		}
		if (a.err)
			return -EINVAL;
		r.p += alen;
	} else if (aug[0] != '\0') {
		/* Without 'z' an unknown augmentation leaves the FDE's layout unknown. */
		return -EINVAL;
	}
	/*
	 * Every FDE starts from its CIE's instructions, and a file can rotate
	 * through more CIEs than the cache holds: long ones would make the build
	 * quadratic. Compilers emit a few bytes.
	 */
	if (r.err || r.end - r.p > AGENT_UNWIND_MAX_CIE_INSNS)
		return -EINVAL;
	c->insns = r.p;
	c->insns_end = r.end;
	c->usable = ra == DW_REG_RA && c->caf > 0;
	return c->usable ? 0 : -EINVAL;
}

static struct cie *get_cie(struct builder *b, const struct section *sec, size_t off)
{
	struct cie *c;

	for (size_t i = 0; i < b->n_cies; i++)
		if (b->cies[i].off == off && b->cies[i].sec == sec)
			return b->cies[i].usable ? &b->cies[i] : NULL;
	if (b->n_cies < CIE_CACHE) {
		c = &b->cies[b->n_cies++];
	} else {
		c = &b->cies[b->next_cie];
		b->next_cie = (b->next_cie + 1) % CIE_CACHE;
	}
	if (parse_cie(b->s, sec, off, c) < 0)
		c->usable = false;
	return c->usable ? c : NULL;
}

/* Reads an FDE's range (first pass). Returns 0, 1 to skip it (empty), or -EINVAL. */
static int read_fde_range(struct builder *b, const struct section *sec, struct reader *r, size_t cie_off, struct fde *f)
{
	const struct cie *c = get_cie(b, sec, cie_off);
	uint64_t range;

	if (!c)
		return -EINVAL;
	f->begin = rd_encoded(r, c->fde_enc, c->addr_size, sec, b->s, true);
	range = rd_encoded(r, c->fde_enc & 0x0f, c->addr_size, sec, b->s, false);
	if (r->err)
		return -EINVAL;
	if (range == 0)
		return 1;
	/* Nothing real is linked at 0; .debug_frame keeps FDEs of discarded code there. */
	if (f->begin == 0 || range > UINT32_MAX || f->begin + range < f->begin)
		return -EINVAL;
	f->end = f->begin + range;
	return 0;
}

static int add_fde(struct builder *b, const struct fde *f)
{
	if (b->n_fdes == b->cap_fdes) {
		size_t cap = b->cap_fdes ? 2 * b->cap_fdes : 256;
		struct fde *n = realloc(b->fdes, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		b->fdes = n;
		b->cap_fdes = cap;
	}
	b->fdes[b->n_fdes++] = *f;
	return 0;
}

/* First pass over one section: every FDE's range. Returns 0, -EINVAL when the section's framing breaks, or -ENOMEM. */
static int collect(struct builder *b, const struct section *sec)
{
	size_t off = 0;

	while (off < sec->len) {
		struct reader body;
		size_t next = 0, cie_off = 0;
		struct fde f = { .sec = sec, .off = off };
		int kind = read_entry(sec, off, &next, &body, &cie_off), r;

		if (kind == 0)
			break;
		if (kind < 0)
			/* The framing is lost: what came before is good, nothing after can be found. */
			return b->n_fdes ? 0 : -EINVAL;
		if (kind == 2) {
			b->stats->fdes++;
			if (!sec->is_eh)
				b->stats->from_debug_frame++;
			f.cie_off = cie_off;
			r = read_fde_range(b, sec, &body, cie_off, &f);
			if (r < 0)
				b->stats->fdes_bad++;
			else if (r == 0 && add_fde(b, &f) < 0)
				return -ENOMEM;
		}
		off = next;
	}
	return 0;
}

static int fde_cmp(const void *a, const void *b)
{
	const struct fde *x = a, *y = b;

	if (x->begin != y->begin)
		return x->begin < y->begin ? -1 : 1;
	/* At the same address .eh_frame's FDE comes first (it is what the program's own unwinder uses). */
	if (!x->sec || !y->sec)
		return x->sec ? 1 : y->sec ? -1 : 0;
	if (x->sec->is_eh != y->sec->is_eh)
		return x->sec->is_eh ? -1 : 1;
	return x->off < y->off ? -1 : (x->off > y->off);
}

static struct reg_rule *tracked(struct cfa_state *st, uint64_t reg)
{
	if (reg == DW_REG_RBP)
		return &st->rbp;
	if (reg == DW_REG_RA)
		return &st->ra;
	return NULL;
}

/* DW_CFA_restore: the register's rule as the CIE left it. */
static void restore_rule(struct cfa_state *st, const struct cfa_state *initial, uint64_t reg)
{
	struct reg_rule *rule = tracked(st, reg);

	if (rule)
		*rule = reg == DW_REG_RBP ? initial->rbp : initial->ra;
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

/* The PLT's CFA: rsp + 8 + ((rip & 15) >= N) << 3. Returns N, or -1 for any other expression. */
static int match_plt(const uint8_t *e, size_t len)
{
	static const uint8_t head[] = { DW_OP_breg0 + DW_REG_RSP, 8, DW_OP_bregx_rip, 0, DW_OP_lit0 + 15, DW_OP_and };
	static const uint8_t tail[] = { DW_OP_ge, DW_OP_lit0 + 3, DW_OP_shl, DW_OP_plus };

	if (len != sizeof(head) + 1 + sizeof(tail) || memcmp(e, head, sizeof(head)) != 0 ||
	    memcmp(e + sizeof(head) + 1, tail, sizeof(tail)) != 0)
		return -1;
	if (e[sizeof(head)] < DW_OP_lit0 || e[sizeof(head)] > DW_OP_lit0 + 31)
		return -1;
	return e[sizeof(head)] - DW_OP_lit0;
}

/* GCC's realigned frame: CFA = *(rbp + k). Returns 0 and k, or -1. */
static int match_deref_rbp(const uint8_t *e, size_t len, int16_t *ret_k)
{
	struct reader r = { e, e + len, false };
	int64_t k;

	if (len < 3 || rd_u8(&r) != DW_OP_breg0 + DW_REG_RBP)
		return -1;
	k = rd_sleb(&r);
	if (r.err || r.p + 1 != r.end || *r.p != DW_OP_deref || k < INT16_MIN || k > INT16_MAX)
		return -1;
	*ret_k = (int16_t)k;
	return 0;
}

/* The row a state stands for. */
static struct unwind_row to_row(struct builder *b, const struct cie *c, const struct cfa_state *st)
{
	struct unwind_row row = { 0 };
	int16_t k;
	int n;

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
	if (row.cfa_type != UNWIND_CFA_INVALID && !(st->ra.kind == RULE_OFFSET && st->ra.off == -8))
		row.cfa_type = UNWIND_CFA_INVALID;
	if (row.cfa_type == UNWIND_CFA_INVALID) {
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

static int push_row(struct builder *b, uint64_t pc, struct unwind_row row)
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
	if (b->n_rows == b->cap_rows) {
		size_t cap = b->cap_rows ? 2 * b->cap_rows : 1024;
		struct unwind_row *n;

		if (cap > b->max_rows)
			cap = b->max_rows;
		n = realloc(b->rows, cap * sizeof(*n));
		if (!n) {
			b->oom = true;
			return -ENOMEM;
		}
		b->rows = n;
		b->cap_rows = cap;
	}
	b->rows[b->n_rows++] = row;
	return 0;
}

/*
 * Runs call frame instructions over st. With emit, a row is appended for the
 * state before every advance of the location and for the state at the end;
 * locations at or past end are not emitted. Returns 0, -EINVAL for an
 * instruction that cannot be decoded, or push_row()'s error.
 */
static int run_insns(struct builder *b, const struct cie *c, const uint8_t *p, const uint8_t *pend,
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
			if ((rule = tracked(st, low)))
				*rule = (struct reg_rule){ RULE_OFFSET, off };
			continue;
		case DW_CFA_restore:
			restore_rule(st, initial, low);
			continue;
		default:
			break;
		}
		switch (op) {
		case DW_CFA_nop:
			break;
		case DW_CFA_set_loc:
			newloc = rd_encoded(&r, c->fde_enc, c->addr_size, c->sec, b->s, true);
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
			if ((rule = tracked(st, reg)))
				*rule = (struct reg_rule){ RULE_OFFSET, off };
			break;
		case DW_CFA_offset_extended_sf:
			reg = rd_uleb(&r);
			off = scaled(&r, rd_sleb(&r), c->daf);
			if ((rule = tracked(st, reg)))
				*rule = (struct reg_rule){ RULE_OFFSET, off };
			break;
		case DW_CFA_GNU_negative_offset_extended:
			reg = rd_uleb(&r);
			off = scaled(&r, -uleb_as_s64(&r), c->daf);
			if ((rule = tracked(st, reg)))
				*rule = (struct reg_rule){ RULE_OFFSET, off };
			break;
		case DW_CFA_restore_extended:
			restore_rule(st, initial, rd_uleb(&r));
			break;
		case DW_CFA_undefined:
		case DW_CFA_same_value:
			reg = rd_uleb(&r);
			if ((rule = tracked(st, reg)))
				*rule = (struct reg_rule){ op == DW_CFA_undefined ? RULE_UNDEF : RULE_SAME, 0 };
			break;
		case DW_CFA_register:
			reg = rd_uleb(&r);
			rd_uleb(&r);
			if ((rule = tracked(st, reg)))
				*rule = (struct reg_rule){ RULE_OTHER, 0 };
			break;
		case DW_CFA_val_offset:
		case DW_CFA_val_offset_sf:
			reg = rd_uleb(&r);
			if (op == DW_CFA_val_offset)
				rd_uleb(&r);
			else
				rd_sleb(&r);
			if ((rule = tracked(st, reg)))
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
			if ((rule = tracked(st, reg)))
				*rule = (struct reg_rule){ RULE_OTHER, 0 };
			break;
		}
		case DW_CFA_GNU_args_size:
			rd_uleb(&r);
			break;
		case DW_CFA_GNU_window_save:
			/* SPARC's, and AArch64's return address signing: not x86-64's. */
			return -EINVAL;
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
		if (emit && newloc != loc && loc < end && (ret = push_row(b, loc, to_row(b, c, st))) < 0)
			return ret;
		loc = newloc;
	}
	if (r.err)
		return -EINVAL;
	if (emit && loc < end && (ret = push_row(b, loc, to_row(b, c, st))) < 0)
		return ret;
	return 0;
}

/* Second pass for one FDE: its rows, appended. */
static int run_fde(struct builder *b, const struct fde *f)
{
	struct cie *c = get_cie(b, f->sec, f->cie_off);
	struct cfa_state initial, st;
	struct reader body;
	size_t next, cie_off;

	if (!c || read_entry(f->sec, f->off, &next, &body, &cie_off) != 2)
		return -EINVAL;
	/* The CIE's instructions set the rules every FDE starts from (and DW_CFA_restore returns to). */
	if (!c->initial_done) {
		c->initial = (struct cfa_state){ .cfa_reg = UINT64_MAX };
		c->initial_ret = run_insns(b, c, c->insns, c->insns_end, &c->initial, &c->initial, 0, 0, false);
		c->initial_done = true;
	}
	if (c->initial_ret < 0)
		return c->initial_ret;
	initial = c->initial;
	rd_encoded(&body, c->fde_enc, c->addr_size, f->sec, b->s, true);
	rd_encoded(&body, c->fde_enc & 0x0f, c->addr_size, f->sec, b->s, false);
	if (c->has_z)
		rd_skip(&body, rd_uleb(&body));
	if (body.err)
		return -EINVAL;
	st = initial;
	return run_insns(b, c, body.p, body.end, &st, &initial, f->begin, f->end, true);
}

/*
 * An entry point that no FDE covers is where the kernel started the
 * program: nothing called it, so a stack that reaches it is complete. Adds
 * its range (to the next FDE, at most AGENT_UNWIND_ENTRY_SPAN bytes) to the
 * sorted FDEs. Returns 0 or -ENOMEM.
 */
static int add_entry(struct builder *b, uint64_t entry)
{
	struct fde f = { .begin = entry, .entry = true };
	size_t lo = 0, hi = b->n_fdes;
	int r;

	if (!entry)
		return 0;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (b->fdes[mid].begin <= entry)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* fdes[lo - 1] is the last to start at or before it; FDEs nest rarely, so check the few before. */
	for (size_t i = lo; i > 0 && i + 8 > lo; i--)
		if (b->fdes[i - 1].end > entry)
			return 0;
	f.end = entry + AGENT_UNWIND_ENTRY_SPAN;
	if (lo < b->n_fdes && b->fdes[lo].begin < f.end)
		f.end = b->fdes[lo].begin;
	if ((r = add_fde(b, &f)) < 0)
		return r;
	qsort(b->fdes, b->n_fdes, sizeof(*b->fdes), fde_cmp);
	return 0;
}

static void builder_done(struct builder *b)
{
	free(b->fdes);
	free(b->rows);
}

int agent_unwind_table_build(const struct agent_unwind_sections *s, size_t max_rows, struct agent_unwind_table *ret)
{
	struct builder b = { .s = s, .max_rows = max_rows };
	struct section secs[2];
	size_t n_secs = 0;
	uint64_t cursor = 0;
	const struct unwind_row invalid = { 0 }, end_row = { .cfa_type = UNWIND_CFA_END };
	bool broken = false;
	int r = 0;

	memset(ret, 0, sizeof(*ret));
	b.stats = &ret->stats;
	if (max_rows < 2)
		return -E2BIG;
	if (s->eh_frame && s->eh_frame_len)
		secs[n_secs++] = (struct section){ s->eh_frame, s->eh_frame_len, s->eh_frame_vaddr, true };
	if (s->debug_frame && s->debug_frame_len)
		secs[n_secs++] = (struct section){ s->debug_frame, s->debug_frame_len, 0, false };
	for (size_t i = 0; i < n_secs; i++) {
		r = collect(&b, &secs[i]);
		if (r == -ENOMEM)
			goto fail;
		/* One broken section does not spoil the other. */
		broken |= r == -EINVAL;
	}
	if (b.n_fdes == 0) {
		/* Bytes that do not frame as entries are malformed, not "no CFI". */
		r = ret->stats.fdes_bad || broken ? -EINVAL : -ENOENT;
		goto fail;
	}
	qsort(b.fdes, b.n_fdes, sizeof(*b.fdes), fde_cmp);
	if ((r = add_entry(&b, s->entry)) < 0)
		goto fail;
	b.base = b.fdes[0].begin;
	for (size_t i = 0; i < b.n_fdes; i++) {
		const struct fde *f = &b.fdes[i];
		size_t before = b.n_rows;

		if (f->end - b.base > UINT32_MAX) {
			/* Rows hold 32-bit offsets: code 4 GiB past the first FDE is not covered. */
			ret->stats.fdes_bad++;
			continue;
		}
		if (i > 0 && f->begin < cursor) {
			/* Overlap: .debug_frame yields to what is already there; a later .eh_frame FDE wins. */
			if (f->entry || !f->sec->is_eh) {
				ret->stats.fdes_bad += !f->entry;
				continue;
			}
			while (b.n_rows > 0 && b.rows[b.n_rows - 1].pc >= (uint32_t)(f->begin - b.base))
				b.n_rows--;
			before = b.n_rows;
		} else if (i > 0 && f->begin > cursor) {
			b.fde_first_row = b.n_rows;
			if ((r = push_row(&b, cursor, invalid)) < 0)
				goto fail;
			before = b.n_rows;
		}
		b.fde_first_row = b.n_rows;
		r = f->entry ? push_row(&b, f->begin, end_row) : run_fde(&b, f);
		if (r == -E2BIG || r == -ENOMEM)
			goto fail;
		if (r < 0) {
			/*
			 * This FDE alone is bad: its range gets no rule. From its
			 * start, also when it overlaps the FDE before: that one's
			 * rows from here on are gone, and its last row kept must
			 * not stretch over them.
			 */
			ret->stats.fdes_bad++;
			b.n_rows = before;
			b.fde_first_row = b.n_rows;
			if ((r = push_row(&b, f->begin, invalid)) < 0)
				goto fail;
		}
		if (f->end > cursor || i == 0) {
			cursor = f->end;
		} else if (f->end < cursor) {
			/* Nested in the FDE before it: what is left of that one has lost its rows. */
			b.fde_first_row = b.n_rows;
			if ((r = push_row(&b, f->end, invalid)) < 0)
				goto fail;
		}
	}
	b.fde_first_row = b.n_rows;
	if ((r = push_row(&b, cursor, invalid)) < 0)
		goto fail;
	ret->base = b.base;
	ret->end = cursor;
	ret->rows = b.rows;
	ret->n_rows = b.n_rows;
	b.rows = NULL;
	builder_done(&b);
	return 0;
fail:
	builder_done(&b);
	if (r == 0)
		r = -EINVAL;
	ret->rows = NULL;
	ret->n_rows = 0;
	return r;
}

const struct unwind_row *agent_unwind_table__find(const struct agent_unwind_table *t, uint64_t vaddr)
{
	size_t lo = 0, hi = t->n_rows;
	uint64_t rel;

	if (!t->n_rows || vaddr < t->base || vaddr - t->base > UINT32_MAX)
		return NULL;
	rel = vaddr - t->base;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (t->rows[mid].pc <= rel)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? &t->rows[lo - 1] : NULL;
}

void agent_unwind_table_done(struct agent_unwind_table *t)
{
	if (!t)
		return;
	free(t->rows);
	t->rows = NULL;
	t->n_rows = 0;
}

/*
 * A file without section headers still has PT_GNU_EH_FRAME, whose header
 * points at .eh_frame; the section runs to its terminator, within the
 * PT_LOAD segment that holds it.
 */
static int sections_from_phdrs(Elf *elf, const uint8_t *raw, size_t raw_len, struct agent_unwind_sections *s)
{
	size_t n;
	GElf_Phdr ph, hdr_ph = { 0 };
	bool have_hdr = false;

	if (elf_getphdrnum(elf, &n) < 0)
		return -ENOENT;
	for (size_t i = 0; i < n; i++)
		if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_GNU_EH_FRAME) {
			hdr_ph = ph;
			have_hdr = true;
		}
	if (!have_hdr || hdr_ph.p_offset > raw_len || raw_len - hdr_ph.p_offset < 8)
		return -ENOENT;
	{
		const struct section hs = { raw + hdr_ph.p_offset, raw_len - hdr_ph.p_offset, hdr_ph.p_vaddr, true };
		struct reader r = { hs.base, hs.base + hs.len, false };
		uint8_t version = rd_u8(&r), enc = rd_u8(&r);
		uint64_t eh_vaddr;

		rd_u8(&r);
		rd_u8(&r);
		if (version != 1 || enc == DW_EH_PE_omit)
			return -ENOENT;
		eh_vaddr = rd_encoded(&r, enc, 8, &hs, s, true);
		if (r.err)
			return -ENOENT;
		for (size_t i = 0; i < n; i++) {
			if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD || eh_vaddr < ph.p_vaddr ||
			    eh_vaddr - ph.p_vaddr >= ph.p_filesz)
				continue;
			if (ph.p_offset > raw_len || ph.p_filesz > raw_len - ph.p_offset)
				return -ENOENT;
			s->eh_frame = raw + ph.p_offset + (eh_vaddr - ph.p_vaddr);
			s->eh_frame_len = (size_t)(ph.p_filesz - (eh_vaddr - ph.p_vaddr));
			s->eh_frame_vaddr = eh_vaddr;
			return 0;
		}
	}
	return -ENOENT;
}

int agent_unwind_table_build_fd(int fd, size_t max_rows, struct agent_unwind_table *ret)
{
	struct agent_unwind_sections s = { .is_64 = 1 };
	Elf_Scn *scn = NULL;
	GElf_Ehdr eh;
	GElf_Shdr sh;
	size_t shstrndx, raw_len = 0;
	const uint8_t *raw;
	Elf *elf;
	int r;

	memset(ret, 0, sizeof(*ret));
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOEXEC;
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf)
		return -ENOEXEC;
	if (elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh) || eh.e_machine != EM_X86_64 ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB ||
	    (eh.e_type != ET_EXEC && eh.e_type != ET_DYN)) {
		r = -ENOEXEC;
		goto out;
	}
	raw = (const uint8_t *)elf_rawfile(elf, &raw_len);
	s.entry = eh.e_entry;
	if (elf_getshdrstrndx(elf, &shstrndx) == 0) {
		while ((scn = elf_nextscn(elf, scn))) {
			const char *name;
			Elf_Data *d;

			if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS ||
			    !(name = elf_strptr(elf, shstrndx, sh.sh_name)))
				continue;
			if (strcmp(name, ".eh_frame") == 0) {
				if ((d = elf_getdata(scn, NULL)) && d->d_buf) {
					s.eh_frame = d->d_buf;
					s.eh_frame_len = d->d_size;
					s.eh_frame_vaddr = sh.sh_addr;
				}
			} else if (strcmp(name, ".debug_frame") == 0) {
				/* Compressed (SHF_COMPRESSED) debug sections are inflated in memory. */
				if ((sh.sh_flags & SHF_COMPRESSED) && elf_compress(scn, 0, 0) < 0)
					continue;
				if ((d = elf_getdata(scn, NULL)) && d->d_buf) {
					s.debug_frame = d->d_buf;
					s.debug_frame_len = d->d_size;
				}
			} else if (strcmp(name, ".text") == 0) {
				s.text_vaddr = sh.sh_addr;
			} else if (strcmp(name, ".got") == 0) {
				s.data_vaddr = sh.sh_addr;
			}
		}
	}
	if (!s.eh_frame && !s.debug_frame && raw)
		sections_from_phdrs(elf, raw, raw_len, &s);
	if (!s.eh_frame && !s.debug_frame) {
		r = -ENOENT;
		goto out;
	}
	r = agent_unwind_table_build(&s, max_rows, ret);
out:
	elf_end(elf);
	return r;
}
