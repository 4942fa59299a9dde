// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "elfinfo.h"
#include "parse-limits.h"

#ifndef NT_GNU_BUILD_ID
#define NT_GNU_BUILD_ID 3
#endif

static size_t align_up(size_t v, size_t a)
{
	return (v + a - 1) & ~(a - 1);
}

int agent_elf_note_build_id(const void *buf, size_t len, size_t align, uint8_t *ret_id)
{
	const uint8_t *p = buf;
	size_t off = 0;

	if (align != 8)
		align = 4;
	while (off < len) {
		uint32_t namesz, descsz, type;
		size_t name_off, desc_off, next;

		if (len - off < 12)
			return -EINVAL;
		memcpy(&namesz, p + off, 4);
		memcpy(&descsz, p + off + 4, 4);
		memcpy(&type, p + off + 8, 4);
		name_off = off + 12;
		if (namesz > len - name_off)
			return -EINVAL;
		desc_off = align_up(name_off + namesz, align);
		if (desc_off > len || descsz > len - desc_off)
			return -EINVAL;
		if (type == NT_GNU_BUILD_ID && namesz == 4 && memcmp(p + name_off, "GNU", 4) == 0 && descsz > 0) {
			size_t n = descsz < AGENT_BUILD_ID_MAX ? descsz : AGENT_BUILD_ID_MAX;
			memcpy(ret_id, p + desc_off, n);
			return (int)n;
		}
		next = align_up(desc_off + descsz, align);
		if (next <= off)
			return -EINVAL;
		off = next;
	}
	return 0;
}

/* Where read_elf() reads a note's bytes from: the file (fd >= 0) or memory. */
struct source {
	int fd;
	const uint8_t *mem;
	size_t len;
};

/*
 * The build ID from the notes at [off, off + size) of the file. Notes are
 * read here with one bounded pread rather than through libelf, which copies
 * a misaligned note of any size it declares (elf_getdata_rawchunk): a note
 * run that is misaligned for its alignment or larger than
 * AGENT_PARSE_MAX_NOTE_BYTES is refused and counted. The bytes are walked in
 * the host's order: the agent reads x86-64 and arm64 files on their own host.
 */
static void note_build_id(const struct source *src, uint64_t off, uint64_t size, uint64_t align,
			  struct agent_elf_info *ret)
{
	uint8_t *buf;
	size_t a = align == 8 ? 8 : 4;
	int n;

	if (ret->build_id_len || size == 0)
		return;
	if (off % a != 0 || size > AGENT_PARSE_MAX_NOTE_BYTES) {
		agent_parse_refused(AGENT_PARSE_NOTE);
		return;
	}
	buf = malloc((size_t)size);
	if (!buf)
		return;
	if (src->fd >= 0) {
		ssize_t got = pread(src->fd, buf, (size_t)size, (off_t)off);
		if (got != (ssize_t)size)
			goto out;
	} else {
		if (off > src->len || src->len - off < size)
			goto out;
		memcpy(buf, src->mem + off, (size_t)size);
	}
	n = agent_elf_note_build_id(buf, (size_t)size, a, ret->build_id);
	if (n > 0)
		ret->build_id_len = (size_t)n;
out:
	free(buf);
}

/* The NUL-terminated name in .gnu_debuglink (a name, 4-byte CRC after it): read bounded, as a note is. */
static void read_debuglink(const struct source *src, const GElf_Shdr *sh, struct agent_elf_info *ret)
{
	char buf[AGENT_DEBUGLINK_MAX];
	size_t want = sh->sh_size < sizeof(buf) ? (size_t)sh->sh_size : sizeof(buf);
	size_t n;

	if (want == 0 || (sh->sh_flags & SHF_COMPRESSED))
		return;
	if (src->fd >= 0) {
		if (pread(src->fd, buf, want, (off_t)sh->sh_offset) != (ssize_t)want)
			return;
	} else {
		if (sh->sh_offset > src->len || src->len - sh->sh_offset < want)
			return;
		memcpy(buf, src->mem + sh->sh_offset, want);
	}
	n = strnlen(buf, want);
	if (n < want)
		memcpy(ret->debuglink, buf, n + 1);
}

static int read_elf(Elf *elf, const struct source *src, struct agent_elf_info *ret)
{
	GElf_Ehdr ehdr;
	size_t phnum, shstrndx;
	Elf_Scn *scn = NULL;

	memset(ret, 0, sizeof(*ret));
	if (elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &ehdr))
		return -ENOEXEC;
	ret->type = ehdr.e_type;
	if (elf_getphdrnum(elf, &phnum) < 0)
		return -ENOEXEC;
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph))
			continue;
		if (ph.p_type == PT_LOAD && ret->n_segs < AGENT_ELF_MAX_LOAD) {
			ret->segs[ret->n_segs++] = (struct agent_elf_segment){
				.vaddr = ph.p_vaddr,
				.memsz = ph.p_memsz,
				.offset = ph.p_offset,
				.filesz = ph.p_filesz,
				.flags = ph.p_flags,
			};
		} else if (ph.p_type == PT_NOTE) {
			note_build_id(src, ph.p_offset, ph.p_filesz, ph.p_align, ret);
		}
	}
	if (elf_getshdrstrndx(elf, &shstrndx) < 0)
		return 0; /* no section headers: stripped to the bone, segments are enough */
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *name;

		if (!gelf_getshdr(scn, &sh))
			continue;
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!name)
			continue;
		if (sh.sh_type == SHT_NOTE && !(sh.sh_flags & SHF_COMPRESSED))
			note_build_id(src, sh.sh_offset, sh.sh_size, sh.sh_addralign, ret);
		else if (strcmp(name, ".gopclntab") == 0 || strcmp(name, ".go.buildinfo") == 0)
			ret->is_go = true;
		else if (strcmp(name, ".gnu_debuglink") == 0 && sh.sh_type != SHT_NOBITS)
			read_debuglink(src, &sh, ret);
	}
	return 0;
}

int agent_elf_read_fd(int fd, struct agent_elf_info *ret)
{
	struct source src = { .fd = fd };
	Elf *elf;
	int r;

	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOTSUP;
	r = agent_elf_preflight_fd(fd);
	if (r < 0)
		return r;
	/*
	 * Mapped, as before the parse limits: with ELF_C_READ the agent's
	 * identification of new mappings fell behind on a whole host (qsortdeep's
	 * stacks in agent-unwind ended without a mapping in about one run of two),
	 * and with the mapping it does not. What is read through libelf here is
	 * only the headers, checked by the preflight first; notes and the
	 * debuglink are read with bounded preads.
	 */
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf)
		return -ENOEXEC;
	r = read_elf(elf, &src, ret);
	elf_end(elf);
	return r;
}

int agent_elf_read_mem(const void *buf, size_t len, struct agent_elf_info *ret)
{
	char *copy;
	Elf *elf;
	int r;

	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOTSUP;
	r = agent_elf_preflight_mem(buf, len);
	if (r < 0)
		return r;
	/* elf_memory() wants a writable buffer it may convert in place. */
	copy = malloc(len ? len : 1);
	if (!copy)
		return -ENOMEM;
	memcpy(copy, buf, len);
	elf = elf_memory(copy, len);
	if (!elf) {
		free(copy);
		return -ENOEXEC;
	}
	r = read_elf(elf, &(struct source){ .fd = -1, .mem = buf, .len = len }, ret);
	elf_end(elf);
	free(copy);
	return r;
}

int agent_elf_offset_to_vaddr(const struct agent_elf_info *e, uint64_t file_off, uint64_t *ret_vaddr)
{
	const struct agent_elf_segment *hit = NULL;

	for (size_t i = 0; i < e->n_segs; i++) {
		const struct agent_elf_segment *s = &e->segs[i];
		if (file_off < s->offset || file_off - s->offset >= s->filesz)
			continue;
		/* Segments can share a page in the file; the executable one is what a code address is in. */
		if (!hit || ((s->flags & PF_X) && !(hit->flags & PF_X)))
			hit = s;
	}
	if (!hit)
		return -ENOENT;
	*ret_vaddr = hit->vaddr + (file_off - hit->offset);
	return 0;
}

int agent_content_hash_fd(int fd, uint64_t size, uint8_t ret_id[16])
{
	uint8_t buf[AGENT_CONTENT_HASH_CHUNK], le[8];
	XXH3_state_t *st = XXH3_createState();
	XXH128_canonical_t canon;
	uint64_t offs[2];
	int r = 0;

	if (!st)
		return -ENOMEM;
	XXH3_128bits_reset(st);
	offs[0] = 0;
	offs[1] = size > AGENT_CONTENT_HASH_CHUNK ? size - AGENT_CONTENT_HASH_CHUNK : 0;
	for (int i = 0; i < 2; i++) {
		size_t want = size < AGENT_CONTENT_HASH_CHUNK ? (size_t)size : AGENT_CONTENT_HASH_CHUNK;
		ssize_t n = pread(fd, buf, want, (off_t)offs[i]);
		if (n < 0) {
			r = -errno;
			goto out;
		}
		XXH3_128bits_update(st, buf, (size_t)n);
	}
	for (int i = 0; i < 8; i++)
		le[i] = (uint8_t)(size >> (8 * i));
	XXH3_128bits_update(st, le, sizeof(le));
	XXH128_canonicalFromHash(&canon, XXH3_128bits_digest(st));
	memcpy(ret_id, canon.digest, 16);
out:
	XXH3_freeState(st);
	return r;
}
