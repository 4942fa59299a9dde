/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The unwind table of an ELF file (unwind-table-private.h): .eh_frame,
 * .debug_frame (inflated when compressed) and the addresses their pointers
 * are relative to, found with libelf; without section headers, .eh_frame is
 * reached through PT_GNU_EH_FRAME. The ELF's machine (x86-64 or AArch64)
 * says whose registers the CFI names. The bytes go to agent_unwind_table_build().
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gelf.h>
#include <libelf.h>

#include "parse-limits.h"
#include "unwind-table-private.h"

/* len bytes at off of the file, in a malloc()ed buffer; NULL when they cannot all be read. */
static uint8_t *read_range(int fd, uint64_t off, size_t len)
{
	uint8_t *buf = malloc(len ? len : 1);

	if (buf && pread(fd, buf, len, (off_t)off) != (ssize_t)len) {
		free(buf);
		buf = NULL;
	}
	return buf;
}

/*
 * A file without section headers still has PT_GNU_EH_FRAME, whose header
 * points at .eh_frame; the section runs to its terminator, within the
 * PT_LOAD segment that holds it. Both are read with pread, the second
 * within max_section_bytes; *ret_owned is the buffer to free.
 */
static int sections_from_phdrs(Elf *elf, int fd, struct agent_unwind_sections *s, uint8_t **ret_owned)
{
	size_t n;
	GElf_Phdr ph, hdr_ph = { 0 };
	bool have_hdr = false;
	uint8_t hdr[32];

	if (elf_getphdrnum(elf, &n) < 0)
		return -ENOENT;
	for (size_t i = 0; i < n; i++)
		if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_GNU_EH_FRAME) {
			hdr_ph = ph;
			have_hdr = true;
		}
	if (!have_hdr || hdr_ph.p_filesz < 8)
		return -ENOENT;
	{
		/* The header's first field pointer is at byte 4: 8 bytes at most with any encoding. */
		size_t hdr_len = hdr_ph.p_filesz < sizeof(hdr) ? (size_t)hdr_ph.p_filesz : sizeof(hdr);
		const struct section hs = { hdr, hdr_len, hdr_ph.p_vaddr, true };
		struct reader r = { hs.base, hs.base + hs.len, false };
		uint8_t version, enc;
		/* In .eh_frame_hdr, DW_EH_PE_datarel is relative to the start of .eh_frame_hdr itself (LSB). */
		struct agent_unwind_sections hdr_bases = *s;
		uint64_t eh_vaddr;

		if (pread(fd, hdr, hdr_len, (off_t)hdr_ph.p_offset) != (ssize_t)hdr_len)
			return -ENOENT;
		version = rd_u8(&r);
		enc = rd_u8(&r);
		hdr_bases.data_vaddr = hdr_ph.p_vaddr;
		rd_u8(&r);
		rd_u8(&r);
		if (version != 1 || enc == DW_EH_PE_omit)
			return -ENOENT;
		eh_vaddr = agent_unwind_rd_encoded(&r, enc, 8, &hs, &hdr_bases, true);
		if (r.err)
			return -ENOENT;
		for (size_t i = 0; i < n; i++) {
			uint64_t len;

			if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD || eh_vaddr < ph.p_vaddr ||
			    eh_vaddr - ph.p_vaddr >= ph.p_filesz)
				continue;
			len = ph.p_filesz - (eh_vaddr - ph.p_vaddr);
			if (agent_parse_check_section(len) < 0)
				return -E2BIG;
			*ret_owned = read_range(fd, ph.p_offset + (eh_vaddr - ph.p_vaddr), (size_t)len);
			if (!*ret_owned)
				return -ENOENT;
			s->eh_frame = *ret_owned;
			s->eh_frame_len = (size_t)len;
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
	size_t shstrndx;
	uint8_t *owned = NULL;
	Elf *elf;
	int r;

	memset(ret, 0, sizeof(*ret));
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOEXEC;
	r = agent_elf_preflight_fd(fd);
	if (r < 0)
		return r;
	/*
	 * ELF_C_READ: libelf reads each section asked for with pread into memory
	 * of its size, which agent_parse_section_data() checks first. A mapping
	 * (ELF_C_READ_MMAP) would cost no copy but raise SIGBUS in the agent
	 * when the file is truncated under it.
	 */
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf)
		return -ENOEXEC;
	if (elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh) ||
	    (eh.e_machine != EM_X86_64 && eh.e_machine != EM_AARCH64) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_ident[EI_DATA] != ELFDATA2LSB || (eh.e_type != ET_EXEC && eh.e_type != ET_DYN)) {
		r = -ENOEXEC;
		goto out;
	}
	s.arch = eh.e_machine == EM_AARCH64 ? AGENT_UNWIND_ARCH_ARM64 : AGENT_UNWIND_ARCH_X86_64;
	s.entry = eh.e_entry;
	if (elf_getshdrstrndx(elf, &shstrndx) == 0) {
		while ((scn = elf_nextscn(elf, scn))) {
			const char *name;
			Elf_Data *d;

			if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS ||
			    !(name = elf_strptr(elf, shstrndx, sh.sh_name)))
				continue;
			if (strcmp(name, ".eh_frame") == 0) {
				r = agent_parse_section_data(scn, false, &d);
				if (r == -E2BIG)
					goto out;
				if (r == 0 && d->d_buf) {
					s.eh_frame = d->d_buf;
					s.eh_frame_len = d->d_size;
					s.eh_frame_vaddr = sh.sh_addr;
				}
			} else if (strcmp(name, ".debug_frame") == 0) {
				/*
				 * Compressed (SHF_COMPRESSED) debug sections are inflated in
				 * memory, after their declared size is checked: a section
				 * over the limits is left out, .eh_frame still serves.
				 */
				if (agent_parse_section_data(scn, true, &d) == 0 && d->d_buf) {
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
	if (!s.eh_frame && !s.debug_frame) {
		r = sections_from_phdrs(elf, fd, &s, &owned);
		if (r == -E2BIG)
			goto out;
	}
	if (!s.eh_frame && !s.debug_frame) {
		r = -ENOENT;
		goto out;
	}
	r = agent_unwind_table_build(&s, max_rows, ret);
out:
	elf_end(elf);
	free(owned);
	return r;
}
