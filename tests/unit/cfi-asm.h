// SPDX-License-Identifier: Apache-2.0
/*
 * A small assembler of call frame information for the unwind table
 * builder's tests (test-agent-unwind-table*.c): .eh_frame and .debug_frame
 * entries (CIEs, FDEs, LEB128 operands, pc-relative pointers) written
 * instruction by instruction, a table built from them, and the rows it must
 * have.
 */
#ifndef SR_TESTS_CFI_ASM_H
#define SR_TESTS_CFI_ASM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

void put(struct buf *s, const void *p, size_t n);

void u8(struct buf *s, uint8_t v);

/* Little-endian fields of n bytes (x86-64's byte order). */
void uN(struct buf *s, uint64_t v, size_t n);

void patch(struct buf *s, size_t at, uint64_t v, size_t n);

void uleb(struct buf *s, uint64_t v);

void sleb(struct buf *s, int64_t v);

/* Instructions, named after what they do to the rules. */
void adv(struct buf *i, uint8_t delta);

void adv1(struct buf *i, uint8_t delta);

void adv2(struct buf *i, uint16_t delta);

void adv4(struct buf *i, uint32_t delta);

void def_cfa(struct buf *i, uint64_t reg, uint64_t off);

void def_cfa_offset(struct buf *i, uint64_t off);

void def_cfa_register(struct buf *i, uint64_t reg);

/* reg saved at CFA + factored * data alignment factor (-8 in these CIEs). */
void offset(struct buf *i, uint8_t reg, uint64_t factored);

void offset_extended(struct buf *i, uint64_t reg, uint64_t factored);

void op_reg(struct buf *i, uint8_t op, uint64_t reg);

void def_cfa_expression(struct buf *i, const uint8_t *e, size_t n);

/* The FDE encoding GCC uses on x86-64: DW_EH_PE_pcrel | DW_EH_PE_sdata4. */
#define PE_PCREL_SDATA4 0x1b

struct cie_ref {
	size_t off;
	bool z;		   /* FDEs carry an augmentation data length */
	uint8_t addr_size; /* .debug_frame's absolute addresses */
	bool dwarf64;
};

/* Opens an entry at the end of s; entry_end() patches its length. */
size_t entry_begin(struct buf *s, bool dwarf64);

void entry_end(struct buf *s, size_t at, bool dwarf64);

/* The rules every x86-64 CIE starts with: CFA = rsp + 8, return address at CFA - 8. */
void x86_64_initial(struct buf *s);

/*
 * An .eh_frame CIE of version 1 (code alignment 1, data alignment -8, return
 * address column ra) with the augmentation aug, the psABI's initial rules
 * and then extra's instructions.
 */
struct cie_ref eh_cie_ra(struct buf *s, const char *aug, uint64_t ra, const struct buf *extra);

struct cie_ref eh_cie(struct buf *s, const char *aug, const struct buf *extra);

/* An .eh_frame FDE for [begin, begin + range) with pc-relative sdata4 pointers. */
size_t eh_fde(struct buf *s, struct cie_ref c, uint64_t begin, uint32_t range, const struct buf *insns);

/* A .debug_frame CIE: 32- or 64-bit DWARF, version 1, 3 or 4, no augmentation. */
struct cie_ref df_cie(struct buf *s, bool dwarf64, uint8_t version, uint8_t addr_size);

/* A .debug_frame FDE: the CIE's section offset, then absolute addresses. */
void df_fde(struct buf *s, struct cie_ref c, uint64_t begin, uint64_t range, const struct buf *insns);

int build(const struct buf *eh, const struct buf *df, size_t max_rows, struct agent_unwind_table *t);

int build_eh(const struct buf *eh, struct agent_unwind_table *t);

/* What a row says, with its absolute address. */
struct want {
	uint64_t vaddr;
	uint8_t type;
	uint16_t cfa_off;
	int8_t rbp_off;
};

#define SAME  UNWIND_RBP_SAME
#define UNDEF UNWIND_RBP_UNDEFINED

void expect_rows(const struct agent_unwind_table *t, const struct want *w, size_t n);

#define EXPECT_ROWS(t, ...)                                                                                            \
	do {                                                                                                           \
		const struct want w_[] = { __VA_ARGS__ };                                                              \
		expect_rows((t), w_, sizeof(w_) / sizeof(w_[0]));                                                      \
	} while (0)

/* The rule at vaddr, through the lookup the agent's checks use. */
void expect_at(const struct agent_unwind_table *t, uint64_t vaddr, uint8_t type, uint16_t cfa_off, int8_t rbp_off);

/* push %rbp (1 byte); mov %rsp,%rbp (3 bytes): CFA = rsp+16, then rbp+16, rbp saved at CFA-16. */
void fp_prologue(struct buf *in);

/* An FDE of one rule: CFA = RSP + cfa_off over its range. */
void one_insn_fde(struct buf *eh, struct cie_ref c, uint64_t begin, uint32_t range, uint64_t cfa_off);

#endif
