/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The unwind table of an ELF file (unwind-table-private.h): .eh_frame,
 * .debug_frame (inflated when compressed) and the addresses their pointers
 * are relative to, found with libelf; without section headers, .eh_frame is
 * reached through PT_GNU_EH_FRAME. The bytes go to agent_unwind_table_build().
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include <gelf.h>
#include <libelf.h>

#include "unwind-table-private.h"

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
		/* In .eh_frame_hdr, DW_EH_PE_datarel is relative to the start of .eh_frame_hdr itself (LSB). */
		struct agent_unwind_sections hdr_bases = *s;
		uint64_t eh_vaddr;

		hdr_bases.data_vaddr = hdr_ph.p_vaddr;
		rd_u8(&r);
		rd_u8(&r);
		if (version != 1 || enc == DW_EH_PE_omit)
			return -ENOENT;
		eh_vaddr = agent_unwind_rd_encoded(&r, enc, 8, &hs, &hdr_bases, true);
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
