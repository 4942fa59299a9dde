/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <elf.h>
#include <gelf.h>
#include <lzma.h>

#include "common/grow.h"
#include "elfsym.h"
#include "symtab.h"

/* xz decoder memory for .gnu_debugdata (the dictionary of `xz -9` is 64 MiB). */
#define DEBUGDATA_DECODER_MEMLIMIT (96u << 20)

static pthread_once_t elf_once = PTHREAD_ONCE_INIT;
static int elf_ok;

static void elf_init_once(void)
{
	elf_ok = elf_version(EV_CURRENT) != EV_NONE;
}

int gw_elf_init(void)
{
	pthread_once(&elf_once, elf_init_once);
	return elf_ok ? 0 : -ENOTSUP;
}

static Elf_Scn *find_section(Elf *elf, const char *name, GElf_Shdr *ret_shdr)
{
	size_t shstrndx;
	Elf_Scn *scn = NULL;

	if (elf_getshdrstrndx(elf, &shstrndx) < 0)
		return NULL;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr shdr;
		const char *n;
		if (!gelf_getshdr(scn, &shdr))
			continue;
		n = elf_strptr(elf, shstrndx, shdr.sh_name);
		if (n && strcmp(n, name) == 0) {
			if (ret_shdr)
				*ret_shdr = shdr;
			return scn;
		}
	}
	return NULL;
}

static Elf_Scn *find_section_type(Elf *elf, Elf64_Word type, GElf_Shdr *ret_shdr)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(elf, scn))) {
		if (gelf_getshdr(scn, ret_shdr) && ret_shdr->sh_type == type)
			return scn;
	}
	return NULL;
}

/* Section contents, NULL for NOBITS or unreadable sections. */
static Elf_Data *section_bytes(Elf_Scn *scn, const GElf_Shdr *shdr)
{
	Elf_Data *d;

	if (shdr->sh_type == SHT_NOBITS)
		return NULL;
	d = elf_rawdata(scn, NULL);
	if (!d || !d->d_buf || d->d_size == 0)
		return NULL;
	return d;
}

/* Adds the function symbols of one symbol table section. */
static int add_symbol_section(Elf *elf, Elf_Scn *scn, const GElf_Shdr *shdr, struct gw_symtab_builder *b)
{
	Elf_Data *data = elf_getdata(scn, NULL);
	size_t nsec = 0, count;
	uint8_t *exec_sec = NULL;
	int added = 0, r = 0;

	if (!data || shdr->sh_entsize == 0 || shdr->sh_type == SHT_NOBITS)
		return 0;
	count = data->d_size / shdr->sh_entsize;
	/* Which sections are executable, so untyped labels in code count as functions. */
	if (elf_getshdrnum(elf, &nsec) == 0 && nsec > 0 && nsec < (1u << 20)) {
		exec_sec = calloc(nsec, 1);
		if (!exec_sec)
			return -ENOMEM;
		for (size_t i = 1; i < nsec; i++) {
			GElf_Shdr s;
			Elf_Scn *sc = elf_getscn(elf, i);
			if (sc && gelf_getshdr(sc, &s) && (s.sh_flags & SHF_EXECINSTR))
				exec_sec[i] = 1;
		}
	}
	for (size_t i = 1; i < count; i++) {
		GElf_Sym sym;
		const char *name;
		unsigned type, bind, rank;

		if (!gelf_getsym(data, (int)i, &sym))
			continue;
		type = GELF_ST_TYPE(sym.st_info);
		bind = GELF_ST_BIND(sym.st_info);
		if (sym.st_shndx == SHN_UNDEF || sym.st_shndx == SHN_ABS || sym.st_value == 0)
			continue;
		if (type != STT_FUNC && type != STT_GNU_IFUNC &&
		    !(type == STT_NOTYPE && exec_sec && sym.st_shndx < nsec && exec_sec[sym.st_shndx]))
			continue;
		name = elf_strptr(elf, shdr->sh_link, sym.st_name);
		/* Mapping symbols ($x, $d) and assembler locals (.L) are not functions. */
		if (!name || !name[0] || name[0] == '$' || (name[0] == '.' && name[1] == 'L'))
			continue;
		rank = bind == STB_GLOBAL ? GW_SYMTAB_RANK_GLOBAL
					  : (bind == STB_WEAK ? GW_SYMTAB_RANK_WEAK : GW_SYMTAB_RANK_LOCAL);
		r = gw_symtab_builder__add(b, sym.st_value, sym.st_size, name, strlen(name), rank, type != STT_NOTYPE);
		if (r < 0)
			goto out;
		added++;
	}
	r = added;
out:
	free(exec_sec);
	return r;
}

/* Decompresses .gnu_debugdata (xz) into a malloc'd buffer of at most GW_ELF_MAX_DEBUGDATA bytes. */
static int xz_decompress(const uint8_t *in, size_t in_len, uint8_t **ret, size_t *ret_len)
{
	lzma_stream s = LZMA_STREAM_INIT;
	size_t cap = in_len * 4 < (1u << 20) ? (1u << 20) : in_len * 4;
	uint8_t *out = NULL;
	int r = -EBADMSG;

	if (cap > GW_ELF_MAX_DEBUGDATA)
		cap = GW_ELF_MAX_DEBUGDATA;
	if (lzma_stream_decoder(&s, DEBUGDATA_DECODER_MEMLIMIT, 0) != LZMA_OK)
		return -ENOMEM;
	out = malloc(cap);
	if (!out) {
		r = -ENOMEM;
		goto out;
	}
	s.next_in = in;
	s.avail_in = in_len;
	s.next_out = out;
	s.avail_out = cap;
	for (;;) {
		lzma_ret lr = lzma_code(&s, LZMA_FINISH);
		if (lr == LZMA_STREAM_END)
			break;
		if (lr != LZMA_OK && lr != LZMA_BUF_ERROR) {
			r = lr == LZMA_MEM_ERROR || lr == LZMA_MEMLIMIT_ERROR ? -ENOMEM : -EBADMSG;
			goto out;
		}
		if (s.avail_out > 0) /* no progress possible: truncated input */
			goto out;
		if (cap >= GW_ELF_MAX_DEBUGDATA) {
			r = -EFBIG;
			goto out;
		}
		size_t was = cap;

		if (sr_grow_max((void **)&out, &cap, cap + 1, 1, 1, GW_ELF_MAX_DEBUGDATA) < 0) {
			r = -ENOMEM;
			goto out;
		}
		s.next_out = out + was;
		s.avail_out = cap - was;
	}
	*ret = out;
	*ret_len = cap - s.avail_out;
	out = NULL;
	r = 0;
out:
	free(out);
	lzma_end(&s);
	return r;
}

static int add_debugdata(Elf *elf, struct gw_symtab_builder *b)
{
	GElf_Shdr shdr;
	Elf_Scn *scn = find_section(elf, ".gnu_debugdata", &shdr);
	Elf_Data *d;
	uint8_t *buf = NULL;
	size_t len = 0;
	Elf *inner;
	int r;

	if (!scn || !(d = section_bytes(scn, &shdr)))
		return -ENOENT;
	r = xz_decompress(d->d_buf, d->d_size, &buf, &len);
	if (r < 0)
		return r;
	inner = elf_memory((char *)buf, len);
	if (!inner || elf_kind(inner) != ELF_K_ELF) {
		r = -EBADMSG;
		goto out;
	}
	scn = find_section_type(inner, SHT_SYMTAB, &shdr);
	r = scn ? add_symbol_section(inner, scn, &shdr, b) : -ENOENT;
out:
	elf_end(inner);
	free(buf);
	return r;
}

static uint64_t section_addr(Elf *elf, const char *name)
{
	GElf_Shdr shdr;

	return find_section(elf, name, &shdr) ? shdr.sh_addr : 0;
}

/* Candidate pclntab magics, little-endian; the parser validates the rest. */
static bool go_magic_at(const uint8_t *p)
{
	return p[1] == 0xff && p[2] == 0xff && p[3] == 0xff &&
	       (p[0] == 0xfb || p[0] == 0xfa || p[0] == 0xf0 || p[0] == 0xf1) && p[4] == 0 && p[5] == 0 &&
	       (p[6] == 1 || p[6] == 2 || p[6] == 4) && (p[7] == 4 || p[7] == 8);
}

static int add_gopclntab(Elf *elf, struct gw_symtab_builder *b)
{
	static const char *const scan_sections[] = { ".data.rel.ro", ".rodata" };
	uint64_t text = section_addr(elf, ".text");
	GElf_Shdr shdr;
	Elf_Scn *scn = find_section(elf, ".gopclntab", &shdr);
	Elf_Data *d;

	/* PIE: the linker names it after the relro segment it moved to. */
	if (!scn)
		scn = find_section(elf, ".data.rel.ro.gopclntab", &shdr);

	if (scn) {
		size_t mark = gw_symtab_builder__count(b);
		int r;
		d = section_bytes(scn, &shdr);
		if (!d)
			return -ENOENT;
		r = gw_gopclntab_parse(d->d_buf, d->d_size, text, b);
		if (r < 0)
			gw_symtab_builder__rollback(b, mark);
		return r;
	}
	/* PIE and c-shared Go binaries keep the table inside .data.rel.ro: find it by its header. */
	for (size_t k = 0; k < sizeof(scan_sections) / sizeof(scan_sections[0]); k++) {
		scn = find_section(elf, scan_sections[k], &shdr);
		if (!scn || !(d = section_bytes(scn, &shdr)))
			continue;
		const uint8_t *p = d->d_buf;
		for (size_t off = 0; off + 64 <= d->d_size; off += 8) {
			if (!go_magic_at(p + off))
				continue;
			size_t mark = gw_symtab_builder__count(b);
			int r = gw_gopclntab_parse(p + off, d->d_size - off, text, b);
			if (r > 0)
				return r;
			/* A false match may have added entries before failing: forget them. */
			gw_symtab_builder__rollback(b, mark);
		}
	}
	return -ENOENT;
}

bool gw_elf_is_go(Elf *elf)
{
	return find_section(elf, ".go.buildinfo", NULL) || find_section(elf, ".gopclntab", NULL) ||
	       find_section(elf, ".data.rel.ro.gopclntab", NULL) || find_section(elf, ".note.go.buildid", NULL);
}

int gw_elf_symbols(Elf *elf, struct gw_symtab_builder *b, unsigned *ret_sources)
{
	GElf_Shdr shdr;
	Elf_Scn *scn;
	unsigned sources = 0;
	int total = 0, r;

	if (elf_kind(elf) != ELF_K_ELF)
		return -EBADMSG;
	scn = find_section_type(elf, SHT_SYMTAB, &shdr);
	if (scn && shdr.sh_type != SHT_NOBITS) {
		r = add_symbol_section(elf, scn, &shdr, b);
		if (r < 0)
			return r;
		if (r > 0)
			sources |= GW_SYMTAB_SRC_SYMTAB;
		total += r;
	}
	scn = find_section_type(elf, SHT_DYNSYM, &shdr);
	if (scn) {
		r = add_symbol_section(elf, scn, &shdr, b);
		if (r < 0)
			return r;
		if (r > 0)
			sources |= GW_SYMTAB_SRC_DYNSYM;
		total += r;
	}
	if (!(sources & GW_SYMTAB_SRC_SYMTAB)) {
		r = add_debugdata(elf, b);
		if (r > 0) {
			sources |= GW_SYMTAB_SRC_DEBUGDATA;
			total += r;
		} else if (r == -ENOMEM || r == -E2BIG) {
			return r;
		}
		if (gw_elf_is_go(elf)) {
			r = add_gopclntab(elf, b);
			if (r > 0) {
				sources |= GW_SYMTAB_SRC_GOPCLNTAB;
				total += r;
			} else if (r == -ENOMEM || r == -E2BIG) {
				return r;
			}
		}
	}
	if (ret_sources)
		*ret_sources = sources;
	return total;
}

int gw_elf_build_id(Elf *elf, uint8_t *buf, size_t size)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr shdr;
		Elf_Data *d;
		size_t off = 0, next, name_off, desc_off;
		GElf_Nhdr nh;

		if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != SHT_NOTE)
			continue;
		d = elf_getdata(scn, NULL);
		if (!d)
			continue;
		while ((next = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0) {
			off = next;
			if (nh.n_type != NT_GNU_BUILD_ID || nh.n_namesz != 4 ||
			    memcmp((const char *)d->d_buf + name_off, "GNU", 4) != 0)
				continue;
			if (nh.n_descsz == 0 || nh.n_descsz > GW_ELF_MAX_BUILD_ID)
				return -EBADMSG;
			if (nh.n_descsz > size)
				return -ENOBUFS;
			memcpy(buf, (const char *)d->d_buf + desc_off, nh.n_descsz);
			return (int)nh.n_descsz;
		}
	}
	return -ENOENT;
}

int gw_elf_debuglink(Elf *elf, char *buf, size_t size, uint32_t *ret_crc)
{
	GElf_Shdr shdr;
	Elf_Scn *scn = find_section(elf, ".gnu_debuglink", &shdr);
	Elf_Data *d;
	const char *p;
	size_t n;

	if (!scn || !(d = section_bytes(scn, &shdr)))
		return -ENOENT;
	p = d->d_buf;
	n = strnlen(p, d->d_size);
	/* Name, NUL, padding to 4, then the CRC32 of the debug file. */
	if (n == 0 || n >= d->d_size || n + 1 > size)
		return -EBADMSG;
	memcpy(buf, p, n + 1);
	size_t crc_off = (n + 4) & ~(size_t)3;
	if (ret_crc) {
		*ret_crc = 0;
		if (crc_off + 4 <= d->d_size)
			memcpy(ret_crc, p + crc_off, 4);
	}
	return 0;
}

bool gw_elf_has_dwarf(Elf *elf)
{
	GElf_Shdr shdr;
	Elf_Scn *scn = find_section(elf, ".debug_line", &shdr);

	if (!scn)
		scn = find_section(elf, ".zdebug_line", &shdr);
	return scn && shdr.sh_type != SHT_NOBITS && shdr.sh_size > 0;
}
