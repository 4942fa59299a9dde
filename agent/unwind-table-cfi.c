/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The unwind table builder's reading of DWARF call frame information
 * (unwind-table-private.h): pointers in .eh_frame's encodings, the header of
 * each entry (CIE or FDE, 32- or 64-bit DWARF, .eh_frame's or .debug_frame's
 * CIE pointers) and the CIEs themselves, augmentation included, for x86-64
 * and AArch64 (the registers a CIE's rules name). Untrusted
 * bytes: every read is bounds-checked and a CIE we cannot follow is refused.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "unwind-table-private.h"

/* Reads a pointer in encoding enc; field_vaddr is where the field itself is linked (for pcrel). */
uint64_t agent_unwind_rd_encoded(struct reader *r, uint8_t enc, uint8_t addr_size, const struct section *sec,
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
 * is. Returns 1 for a CIE, 2 for an FDE, 0 at the end of the section, -EINVAL when
 * malformed. ret_body is where the entry's content starts after the ID field.
 */
int agent_unwind_read_entry(const struct section *sec, size_t off, size_t *ret_next, struct reader *ret_body,
			    size_t *ret_cie_off)
{
	struct reader r = { sec->base + off, sec->base + sec->len, false };
	uint64_t len = rd_bytes(&r, 4), id;
	size_t id_size = 4;
	const uint8_t *id_pos;

	if (r.err)
		return off == sec->len ? 0 : -EINVAL;
	if (len == 0) /* the terminator .eh_frame ends with (crtend.o) */
		return 0;
	if (len == 0xffffffffu) {
		len = rd_bytes(&r, 8);
		/* 64-bit DWARF: .debug_frame's IDs grow to 8 bytes; .eh_frame's stay 4. */
		if (!sec->is_eh)
			id_size = 8;
	}
	if (r.err || len > (uint64_t)(r.end - r.p) || len < id_size)
		return -EINVAL;
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
			return -EINVAL;
		*ret_cie_off = (size_t)(id_pos - sec->base) - (size_t)id;
		return 2;
	}
	if (id == (id_size == 8 ? ~(uint64_t)0 : 0xffffffffu))
		return 1;
	if (id >= sec->len)
		return -EINVAL;
	*ret_cie_off = (size_t)id;
	return 2;
}

int agent_unwind_parse_cie(const struct agent_unwind_sections *s, const struct section *sec, size_t off, struct cie *c)
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
	if (s->arch == AGENT_UNWIND_ARCH_ARM64) {
		c->fp_reg = DW_REG_A64_FP;
		c->sp_reg = DW_REG_A64_SP;
		c->ra_reg = DW_REG_A64_LR;
	} else if (s->arch == AGENT_UNWIND_ARCH_X86_64) {
		c->fp_reg = DW_REG_RBP;
		c->sp_reg = DW_REG_RSP;
		c->ra_reg = DW_REG_RA;
	} else {
		return -EINVAL;
	}
	if (agent_unwind_read_entry(sec, off, &next, &r, &unused) != 1)
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
				agent_unwind_rd_encoded(&a, enc, c->addr_size, sec, s, false);
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
	c->usable = ra == c->ra_reg && c->caf > 0;
	return c->usable ? 0 : -EINVAL;
}
