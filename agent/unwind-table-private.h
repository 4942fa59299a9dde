/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The unwind table builder's insides, shared by unwind-table.c (the two
 * passes over the FDEs, the public API), unwind-table-cfi.c (entries and
 * CIEs), unwind-table-rows.c (call frame instructions run into rows) and
 * unwind-table-elf.c (the sections of an ELF file), and nothing else.
 *
 * The byte reader is here, static inline: the instruction loop calls it for
 * every byte, and every file reads with it.
 */
#ifndef SR_AGENT_UNWIND_TABLE_PRIVATE_H
#define SR_AGENT_UNWIND_TABLE_PRIVATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "unwind-table.h"

/* DWARF register numbers of x86-64 (psABI figure 3.36). */
#define DW_REG_RBP 6
#define DW_REG_RSP 7
#define DW_REG_RA  16

/* And of AArch64 (DWARF for the Arm 64-bit Architecture, 4.1): FP, LR (the return address column) and SP. */
#define DW_REG_A64_FP 29
#define DW_REG_A64_LR 30
#define DW_REG_A64_SP 31

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

/* CIEs parsed and kept while the FDEs are run; most files have one to four. */
#define CIE_CACHE 16

struct reader {
	const uint8_t *p;
	const uint8_t *end;
	bool err;
};

static inline uint64_t rd_bytes(struct reader *r, size_t n)
{
	uint64_t v = 0;

	if (r->err || (size_t)(r->end - r->p) < n) {
		r->err = true;
		r->p = r->end;
		return 0;
	}
	/* Little-endian: x86-64 and AArch64 (the callers check the ELF's machine and data encoding). */
	for (size_t i = 0; i < n; i++)
		v |= (uint64_t)r->p[i] << (8 * i);
	r->p += n;
	return v;
}

static inline uint8_t rd_u8(struct reader *r)
{
	return (uint8_t)rd_bytes(r, 1);
}

/* A LEB128 number, sign-extended when is_signed; at most 10 bytes (64 bits), else an error. */
static inline uint64_t rd_leb(struct reader *r, bool is_signed)
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

static inline uint64_t rd_uleb(struct reader *r)
{
	return rd_leb(r, false);
}

static inline int64_t rd_sleb(struct reader *r)
{
	return (int64_t)rd_leb(r, true);
}

static inline void rd_skip(struct reader *r, uint64_t n)
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
	struct reg_rule rbp; /* the frame pointer: RBP, or AArch64's FP (x29) */
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
	bool usable; /* parsed, and its return address column is its architecture's */
	/* The architecture's registers (agent_unwind_sections.arch): frame pointer, stack pointer, return address. */
	uint8_t fp_reg, sp_reg, ra_reg;
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

/* unwind-table-cfi.c */
/* Reads a pointer in encoding enc; field_vaddr is where the field itself is linked (for pcrel). */
uint64_t agent_unwind_rd_encoded(struct reader *r, uint8_t enc, uint8_t addr_size, const struct section *sec,
				 const struct agent_unwind_sections *s, bool with_base);
/*
 * Reads an entry's header at off: its length and, for an FDE, where its CIE
 * is. Returns 1 for a CIE, 2 for an FDE, 0 at the end of the section, -EINVAL when
 * malformed. ret_body is where the entry's content starts after the ID field.
 */
int agent_unwind_read_entry(const struct section *sec, size_t off, size_t *ret_next, struct reader *ret_body,
			    size_t *ret_cie_off);
/* Parses the CIE at off into c. Returns 0, or -EINVAL for a CIE that cannot be used (c->usable false). */
int agent_unwind_parse_cie(const struct agent_unwind_sections *s, const struct section *sec, size_t off, struct cie *c);

/* unwind-table-rows.c */
/*
 * Appends a row for pc: within the FDE being run a later rule at the same
 * address replaces the earlier, and a rule equal to the last row's adds
 * nothing. Returns 0, -E2BIG past max_rows, or -ENOMEM.
 */
int agent_unwind_push_row(struct builder *b, uint64_t pc, struct unwind_row row);
/*
 * Runs call frame instructions over st. With emit, a row is appended for the
 * state before every advance of the location and for the state at the end;
 * locations at or past end are not emitted. Returns 0, -EINVAL for an
 * instruction that cannot be decoded, or agent_unwind_push_row()'s error.
 */
int agent_unwind_run_insns(struct builder *b, const struct cie *c, const uint8_t *p, const uint8_t *pend,
			   struct cfa_state *st, const struct cfa_state *initial, uint64_t loc, uint64_t end,
			   bool emit);

#endif
