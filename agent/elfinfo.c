// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "elfinfo.h"

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

static void note_build_id(Elf_Data *d, size_t align, struct agent_elf_info *ret)
{
	int n;

	if (ret->build_id_len || !d || !d->d_buf)
		return;
	n = agent_elf_note_build_id(d->d_buf, d->d_size, align, ret->build_id);
	if (n > 0)
		ret->build_id_len = (size_t)n;
}

static int read_elf(Elf *elf, struct agent_elf_info *ret)
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
		} else if (ph.p_type == PT_NOTE && !ret->build_id_len && ph.p_filesz > 0) {
			/* ELF_T_NHDR(8) makes libelf convert the note headers to host byte order. */
			Elf_Type t = ph.p_align == 8 ? ELF_T_NHDR8 : ELF_T_NHDR;
			note_build_id(elf_getdata_rawchunk(elf, (int64_t)ph.p_offset, ph.p_filesz, t),
				      ph.p_align == 8 ? 8 : 4, ret);
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
		if (sh.sh_type == SHT_NOTE && !ret->build_id_len)
			note_build_id(elf_getdata(scn, NULL), sh.sh_addralign == 8 ? 8 : 4, ret);
		else if (strcmp(name, ".gopclntab") == 0 || strcmp(name, ".go.buildinfo") == 0)
			ret->is_go = true;
		else if (strcmp(name, ".gnu_debuglink") == 0 && sh.sh_type != SHT_NOBITS) {
			Elf_Data *d = elf_getdata(scn, NULL);
			if (d && d->d_buf && d->d_size > 0) {
				size_t n = strnlen(d->d_buf, d->d_size);
				if (n < d->d_size && n < sizeof(ret->debuglink))
					memcpy(ret->debuglink, d->d_buf, n + 1);
			}
		}
	}
	return 0;
}

int agent_elf_read_fd(int fd, struct agent_elf_info *ret)
{
	Elf *elf;
	int r;

	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOTSUP;
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf)
		return -ENOEXEC;
	r = read_elf(elf, ret);
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
	r = read_elf(elf, ret);
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
