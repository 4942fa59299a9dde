// SPDX-License-Identifier: Apache-2.0
/*
 * Symbol tables the gateway asked for (wanted_symbols): function symbols from
 * .symtab, .dynsym and MiniDebugInfo. MiniDebugInfo (.gnu_debugdata, as
 * Fedora and others ship it) is an xz-compressed ELF whose .symtab holds the
 * local function symbols a stripped binary lost; it complements .dynsym.
 * Addresses are ELF virtual addresses (st_value), the same space frame
 * addresses of the agent protocol are in.
 */
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <lzma.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <pb_decode.h>
#include <pb_encode.h>

#include "symupload.h"

struct sym {
	uint64_t addr, size;
	const char *name; /* points into an Elf's string table, valid while it is open */
	size_t name_len;
	bool global;
};

struct syms {
	struct sym *v;
	size_t n, cap;
	uint64_t name_bytes;
};

enum source {
	SRC_SYMTAB = 1,
	SRC_DYNSYM = 2,
	SRC_DEBUGDATA = 4,
};

static int syms_push(struct syms *s, const struct sym *x)
{
	if (s->n >= AGENT_SYMUPLOAD_MAX_SYMBOLS)
		return -EFBIG;
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 1024;
		struct sym *p = realloc(s->v, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		s->v = p;
		s->cap = cap;
	}
	s->v[s->n++] = *x;
	s->name_bytes += x->name_len;
	return 0;
}

/* Appends the function symbols of every section of `type` in e. Returns the number found or -errno. */
static int collect(Elf *e, Elf64_Word type, struct syms *out)
{
	Elf_Scn *scn = NULL;
	int found = 0, r;

	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr shdr;
		Elf_Data *data;
		size_t entsize, count;

		if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != type)
			continue;
		data = elf_getdata(scn, NULL);
		entsize = gelf_fsize(e, ELF_T_SYM, 1, EV_CURRENT);
		if (!data || !entsize)
			continue;
		count = data->d_size / entsize;
		for (size_t i = 0; i < count; i++) {
			GElf_Sym sym;
			struct sym x;
			int t;

			if (!gelf_getsym(data, (int)i, &sym))
				break;
			t = GELF_ST_TYPE(sym.st_info);
			if ((t != STT_FUNC && t != STT_GNU_IFUNC) || sym.st_shndx == SHN_UNDEF || sym.st_value == 0)
				continue;
			x.name = elf_strptr(e, shdr.sh_link, sym.st_name);
			if (!x.name || !*x.name)
				continue;
			x.name_len = strnlen(x.name, AGENT_SYMUPLOAD_MAX_NAME_BYTES);
			x.addr = sym.st_value;
			x.size = sym.st_size;
			x.global = GELF_ST_BIND(sym.st_info) == STB_GLOBAL;
			r = syms_push(out, &x);
			if (r < 0)
				return r;
			found++;
		}
	}
	return found;
}

static int check_elf(Elf *e)
{
	GElf_Ehdr ehdr;

	if (!e || elf_kind(e) != ELF_K_ELF || !gelf_getehdr(e, &ehdr))
		return -ENOEXEC;
	/* Relocatable objects hold section offsets, not addresses; core files no symbols. */
	if (ehdr.e_type != ET_EXEC && ehdr.e_type != ET_DYN)
		return -ENOEXEC;
	return 0;
}

/* The xz-compressed .gnu_debugdata image, decompressed into a malloc()ed buffer, or NULL. */
static uint8_t *debugdata(Elf *e, size_t *ret_size)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;
	lzma_stream z = LZMA_STREAM_INIT;
	uint8_t *out = NULL;
	size_t cap = 0;
	Elf_Data *data = NULL;
	lzma_ret lr;

	if (elf_getshdrstrndx(e, &shstrndx) < 0)
		return NULL;
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr shdr;
		const char *name;

		if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != SHT_PROGBITS)
			continue;
		name = elf_strptr(e, shstrndx, shdr.sh_name);
		if (name && strcmp(name, ".gnu_debugdata") == 0) {
			data = elf_getdata(scn, NULL);
			break;
		}
	}
	if (!data || !data->d_buf || !data->d_size)
		return NULL;
	/* The memory limit bounds the decoder's dictionary; the output bound is ours. */
	if (lzma_stream_decoder(&z, 256ULL * 1024 * 1024, 0) != LZMA_OK)
		return NULL;
	z.next_in = data->d_buf;
	z.avail_in = data->d_size;
	do {
		if (z.avail_out == 0) {
			size_t ncap = cap ? cap * 2 : 64 * 1024;
			uint8_t *p;

			if (cap >= AGENT_SYMUPLOAD_MAX_DEBUGDATA_BYTES)
				goto fail;
			if (ncap > AGENT_SYMUPLOAD_MAX_DEBUGDATA_BYTES)
				ncap = AGENT_SYMUPLOAD_MAX_DEBUGDATA_BYTES;
			p = realloc(out, ncap);
			if (!p)
				goto fail;
			out = p;
			z.next_out = out + cap;
			z.avail_out = ncap - cap;
			cap = ncap;
		}
		lr = lzma_code(&z, LZMA_FINISH);
	} while (lr == LZMA_OK);
	if (lr != LZMA_STREAM_END)
		goto fail;
	*ret_size = (size_t)z.total_out;
	lzma_end(&z);
	return out;
fail:
	lzma_end(&z);
	free(out);
	return NULL;
}

static int cmp_sym(const void *a, const void *b)
{
	const struct sym *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	/* At one address prefer a global name (aliases: a local alias is usually an implementation detail). */
	if (x->global != y->global)
		return x->global ? -1 : 1;
	return strcmp(x->name, y->name);
}

static char *dup_name(const struct sym *x)
{
	char *p = malloc(x->name_len + 1);

	if (p) {
		memcpy(p, x->name, x->name_len);
		p[x->name_len] = '\0';
	}
	return p;
}

static uint64_t *dup_u64(uint64_t v)
{
	uint64_t *p = malloc(sizeof(*p));

	if (p)
		*p = v;
	return p;
}

static int add_source(stackrelay_v1_SymbolTable *t, const char *name)
{
	t->sources[t->sources_count] = strdup(name);
	if (!t->sources[t->sources_count])
		return -ENOMEM;
	t->sources_count++;
	return 0;
}

/* Sorted, one symbol per address, into ret. */
static int build_table(struct syms *all, unsigned sources, uint64_t max_bytes, stackrelay_v1_SymbolTable *ret)
{
	size_t n = 0, size = 0;
	int r;

	if (all->n == 0)
		return -ENODATA;
	/* Cheap lower bound first: names alone over the limit means the exact size is too. */
	if (max_bytes && all->name_bytes > max_bytes * 2)
		return -EFBIG;
	qsort(all->v, all->n, sizeof(*all->v), cmp_sym);
	for (size_t i = 0; i < all->n; i++)
		if (n == 0 || all->v[n - 1].addr != all->v[i].addr)
			all->v[n++] = all->v[i];
	all->n = n;

	ret->symbols = calloc(n, sizeof(*ret->symbols));
	ret->sources = calloc(3, sizeof(*ret->sources));
	if (!ret->symbols || !ret->sources)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		stackrelay_v1_Symbol *s = &ret->symbols[i];

		ret->symbols_count = (pb_size_t)(i + 1);
		s->address = dup_u64(all->v[i].addr);
		s->name = dup_name(&all->v[i]);
		/* Unknown sizes stay unset: the gateway ends such a symbol at the next one. */
		if (all->v[i].size)
			s->size = dup_u64(all->v[i].size);
		if (!s->address || !s->name || (all->v[i].size && !s->size))
			return -ENOMEM;
	}
	if ((sources & SRC_SYMTAB) && (r = add_source(ret, ".symtab")) < 0)
		return r;
	if ((sources & SRC_DYNSYM) && (r = add_source(ret, ".dynsym")) < 0)
		return r;
	if ((sources & SRC_DEBUGDATA) && (r = add_source(ret, ".gnu_debugdata")) < 0)
		return r;
	if (!pb_get_encoded_size(&size, stackrelay_v1_SymbolTable_fields, ret))
		return -EINVAL;
	if (max_bytes && size > max_bytes)
		return -EFBIG;
	return 0;
}

static int extract(Elf *e, uint64_t max_bytes, stackrelay_v1_SymbolTable *ret)
{
	struct syms all = { 0 };
	unsigned sources = 0;
	uint8_t *mini = NULL;
	size_t mini_size = 0;
	Elf *inner = NULL;
	int r;

	r = check_elf(e);
	if (r < 0)
		return r;
	r = collect(e, SHT_SYMTAB, &all);
	if (r < 0)
		goto out;
	if (r > 0)
		sources |= SRC_SYMTAB;
	r = collect(e, SHT_DYNSYM, &all);
	if (r < 0)
		goto out;
	if (r > 0)
		sources |= SRC_DYNSYM;
	/* MiniDebugInfo is only there when the file was stripped; a corrupt one is skipped, not fatal. */
	mini = debugdata(e, &mini_size);
	if (mini) {
		inner = elf_memory((char *)mini, mini_size);
		if (check_elf(inner) == 0) {
			r = collect(inner, SHT_SYMTAB, &all);
			if (r < 0)
				goto out;
			if (r > 0)
				sources |= SRC_DEBUGDATA;
		}
	}
	r = build_table(&all, sources, max_bytes, ret);
out:
	/* Names point into the ELF images: the table holds copies, so they can go now. */
	if (inner)
		elf_end(inner);
	free(mini);
	free(all.v);
	if (r < 0) {
		pb_release(stackrelay_v1_SymbolTable_fields, ret);
		memset(ret, 0, sizeof(*ret));
	}
	return r < 0 ? r : 0;
}

int agent_symupload_extract_mem(const void *data, size_t size, uint64_t max_bytes, stackrelay_v1_SymbolTable *ret)
{
	Elf *e;
	int r;

	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOTSUP;
	e = elf_memory((char *)data, size);
	if (!e)
		return -ENOEXEC;
	r = extract(e, max_bytes, ret);
	elf_end(e);
	return r;
}

int agent_symupload_extract_fd(int fd, uint64_t max_bytes, stackrelay_v1_SymbolTable *ret)
{
	Elf *e;
	int r;

	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOTSUP;
	/* ELF_C_READ reads with pread: a file truncated under us gives errors, not SIGBUS as a mapping would. */
	e = elf_begin(fd, ELF_C_READ, NULL);
	if (!e)
		return -ENOEXEC;
	r = extract(e, max_bytes, ret);
	elf_end(e);
	return r;
}
