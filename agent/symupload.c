// SPDX-License-Identifier: Apache-2.0
/*
 * Symbol tables the gateway asked for (wanted_symbols): function symbols from
 * .symtab, .dynsym and MiniDebugInfo. MiniDebugInfo (.gnu_debugdata, as
 * Fedora and others ship it) is an xz-compressed ELF whose .symtab holds the
 * local function symbols a stripped binary lost; it complements .dynsym.
 * Go binaries stripped with -ldflags='-s -w' have none of these, but keep
 * .gopclntab (the runtime needs it for tracebacks): its function table is
 * read with the walker the gateway uses too (common/gopclntab.c, libc
 * only). Addresses are ELF virtual addresses (st_value), the same space frame
 * addresses of the agent protocol are in.
 *
 * A kernel's table is a kallsyms snapshot instead, cut to the address space
 * the kernel ID names (kernel.h): the image's symbols as offsets from _text,
 * a module's as offsets from its start, or the rest as this boot's runtime
 * addresses (KASLR included), whose ID covers the boot ID.
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <lzma.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <pb_decode.h>
#include <pb_encode.h>

#include "common/gopclntab.h"
#include "common/grow.h"
#include "common/macro.h"
#include "parse-limits.h"
#include "symupload.h"

struct sym {
	uint64_t addr, size;
	const char *name; /* points into an Elf's string table (or kallsyms text), valid while it is open */
	size_t name_len;
	const char *mod; /* kallsyms: the module name (without brackets), else NULL */
	size_t mod_len;
	unsigned rank; /* higher wins among aliases at one address: global and weak 2, local 0 */
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
	SRC_GOPCLNTAB = 8,
	SRC_KALLSYMS = 16,
};

static int syms_push(struct syms *s, const struct sym *x)
{
	int r;

	if (s->n >= AGENT_SYMUPLOAD_MAX_SYMBOLS)
		return -EFBIG;
	r = sr_grow((void **)&s->v, &s->cap, s->n + 1, sizeof(*s->v), 1024);
	if (r < 0)
		return r;
	s->v[s->n++] = *x;
	s->name_bytes += x->name_len + (x->mod ? x->mod_len + 3 : 0);
	return 0;
}

/* Appends the function symbols of every section of `type` in e. Returns the number found or -errno. */
static int collect(Elf *e, Elf64_Word type, struct syms *out)
{
	Elf_Scn *scn = NULL;
	int found = 0, r;

	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr shdr, strs_sh;
		Elf_Scn *strs;
		Elf_Data *data;
		size_t entsize, count;

		if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != type)
			continue;
		/* The table and its strings are read whole: both within max_section_bytes, or the file is refused. */
		r = agent_parse_section_data(scn, false, &data);
		if (r == 0 && (strs = elf_getscn(e, shdr.sh_link)) && gelf_getshdr(strs, &strs_sh))
			r = agent_parse_check_section(strs_sh.sh_size);
		if (r == -E2BIG)
			return r;
		entsize = gelf_fsize(e, ELF_T_SYM, 1, EV_CURRENT);
		if (r < 0 || !entsize)
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
			x.mod = NULL;
			x.mod_len = 0;
			x.rank = GELF_ST_BIND(sym.st_info) == STB_LOCAL ? 0 : 2;
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
			if (agent_parse_section_data(scn, false, &data) < 0)
				data = NULL;
			break;
		}
	}
	if (!data || !data->d_buf || !data->d_size)
		return NULL;
	/*
	 * The memory limit bounds the decoder's dictionary (an xz header may ask
	 * for up to 1.5 GiB); the output bound is ours. Past either, the file's
	 * MiniDebugInfo is refused and counted.
	 */
	if (lzma_stream_decoder(&z, AGENT_PARSE_MAX_XZ_MEMORY, 0) != LZMA_OK)
		return NULL;
	z.next_in = data->d_buf;
	z.avail_in = data->d_size;
	do {
		if (z.avail_out == 0) {
			size_t was = cap;

			if (cap >= AGENT_SYMUPLOAD_MAX_DEBUGDATA_BYTES) {
				agent_parse_refused(AGENT_PARSE_XZ);
				goto fail;
			}
			if (sr_grow_max((void **)&out, &cap, cap + 1, 1, 64 * 1024,
					AGENT_SYMUPLOAD_MAX_DEBUGDATA_BYTES) < 0)
				goto fail;
			z.next_out = out + was;
			z.avail_out = cap - was;
		}
		lr = lzma_code(&z, LZMA_FINISH);
	} while (lr == LZMA_OK);
	if (lr == LZMA_MEMLIMIT_ERROR)
		agent_parse_refused(AGENT_PARSE_XZ);
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

static size_t leading_underscores(const struct sym *x)
{
	size_t n = 0;

	while (n < x->name_len && x->name[n] == '_')
		n++;
	return n;
}

static int cmp_sym(const void *a, const void *b)
{
	const struct sym *x = a, *y = b;
	size_t ux, uy;
	int c;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	/*
	 * At one address prefer a global name (aliases: a local alias is usually
	 * an implementation detail), then the one with the fewest leading
	 * underscores, the shortest, the smallest: the gateway's own alias rule
	 * (gateway/symbolize/symtab.h), so the choice does not depend on input order.
	 */
	if (x->rank != y->rank)
		return x->rank > y->rank ? -1 : 1;
	ux = leading_underscores(x);
	uy = leading_underscores(y);
	if (ux != uy)
		return ux < uy ? -1 : 1;
	if (x->name_len != y->name_len)
		return x->name_len < y->name_len ? -1 : 1;
	c = memcmp(x->name, y->name, x->name_len);
	return c ? c : (x < y ? -1 : x > y);
}

/* The name as uploaded: kallsyms module symbols become "name [module]", as the gateway's parser names them. */
static char *dup_name(const struct sym *x)
{
	size_t len = x->name_len + (x->mod ? x->mod_len + 3 : 0);
	char *p = malloc(len + 1);

	if (!p)
		return NULL;
	memcpy(p, x->name, x->name_len);
	if (x->mod) {
		p[x->name_len] = ' ';
		p[x->name_len + 1] = '[';
		memcpy(p + x->name_len + 2, x->mod, x->mod_len);
		p[len - 1] = ']';
	}
	p[len] = '\0';
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

void agent_symtab_release(struct agent_symtab *t)
{
	for (size_t i = 0; t && i < t->n_parts; i++)
		pb_release(stackrelay_v1_SymbolTable_fields, &t->parts[i]);
	if (t) {
		free(t->parts);
		memset(t, 0, sizeof(*t));
	}
}

const stackrelay_v1_Symbol *agent_symtab__symbol(const struct agent_symtab *t, size_t i)
{
	if (i >= t->n_symbols)
		return NULL;
	return &t->parts[i / AGENT_SYMUPLOAD_PART_SYMBOLS].symbols[i % AGENT_SYMUPLOAD_PART_SYMBOLS];
}

/* Sorted, one symbol per address, into ret's parts (nanopb's 16-bit repeated counts). */
static int build_table(struct syms *all, unsigned sources, uint64_t max_bytes, struct agent_symtab *ret)
{
	size_t n = 0, size = 0;
	stackrelay_v1_SymbolTable *head;
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

	ret->parts = calloc((n + AGENT_SYMUPLOAD_PART_SYMBOLS - 1) / AGENT_SYMUPLOAD_PART_SYMBOLS, sizeof(*ret->parts));
	if (!ret->parts)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		stackrelay_v1_SymbolTable *part = &ret->parts[i / AGENT_SYMUPLOAD_PART_SYMBOLS];
		size_t k = i % AGENT_SYMUPLOAD_PART_SYMBOLS;
		stackrelay_v1_Symbol *s;

		if (k == 0) {
			size_t cnt = n - i < AGENT_SYMUPLOAD_PART_SYMBOLS ? n - i : AGENT_SYMUPLOAD_PART_SYMBOLS;

			part->symbols = calloc(cnt, sizeof(*part->symbols));
			if (!part->symbols)
				return -ENOMEM;
			ret->n_parts++;
		}
		s = &part->symbols[k];
		part->symbols_count = (pb_size_t)(k + 1);
		ret->n_symbols = i + 1;
		s->address = dup_u64(all->v[i].addr);
		s->name = dup_name(&all->v[i]);
		/* Unknown sizes stay unset: the gateway ends such a symbol at the next one. */
		if (all->v[i].size)
			s->size = dup_u64(all->v[i].size);
		if (!s->address || !s->name || (all->v[i].size && !s->size))
			return -ENOMEM;
	}
	head = &ret->parts[0];
	head->sources = calloc(5, sizeof(*head->sources));
	if (!head->sources)
		return -ENOMEM;
	if ((sources & SRC_SYMTAB) && (r = add_source(head, ".symtab")) < 0)
		return r;
	if ((sources & SRC_DYNSYM) && (r = add_source(head, ".dynsym")) < 0)
		return r;
	if ((sources & SRC_DEBUGDATA) && (r = add_source(head, ".gnu_debugdata")) < 0)
		return r;
	if ((sources & SRC_GOPCLNTAB) && (r = add_source(head, ".gopclntab")) < 0)
		return r;
	if ((sources & SRC_KALLSYMS) && (r = add_source(head, "kallsyms")) < 0)
		return r;
	for (size_t i = 0; i < ret->n_parts; i++) {
		size_t part_size = 0;

		if (!pb_get_encoded_size(&part_size, stackrelay_v1_SymbolTable_fields, &ret->parts[i]))
			return -EINVAL;
		size += part_size;
	}
	if (max_bytes && size > max_bytes)
		return -EFBIG;
	return 0;
}

int agent_symtab__encode(const struct agent_symtab *t, const uint8_t *id, size_t id_len, const char *error,
			 uint8_t **ret, size_t *ret_len)
{
	stackrelay_v1_SymbolTable head = stackrelay_v1_SymbolTable_init_zero;
	pb_bytes_array_t *idb = malloc(PB_BYTES_ARRAY_T_ALLOCSIZE(id_len));
	size_t total = 0, part_size;
	uint8_t *buf = NULL;
	pb_ostream_t os;
	int r = -EINVAL;

	if (!idb)
		return -ENOMEM;
	idb->size = (pb_size_t)id_len;
	memcpy(idb->bytes, id, id_len);
	head.executable_id = idb;
	head.error = error && error[0] ? (char *)error : NULL;
	/* The ID (and error) first, then the parts: one message on the wire, repeated fields appended. */
	if (!pb_get_encoded_size(&total, stackrelay_v1_SymbolTable_fields, &head))
		goto out;
	for (size_t i = 0; i < t->n_parts; i++) {
		if (!pb_get_encoded_size(&part_size, stackrelay_v1_SymbolTable_fields, &t->parts[i]))
			goto out;
		total += part_size;
	}
	buf = malloc(total ? total : 1);
	if (!buf) {
		r = -ENOMEM;
		goto out;
	}
	os = pb_ostream_from_buffer(buf, total);
	if (!pb_encode(&os, stackrelay_v1_SymbolTable_fields, &head))
		goto out;
	for (size_t i = 0; i < t->n_parts; i++)
		if (!pb_encode(&os, stackrelay_v1_SymbolTable_fields, &t->parts[i]))
			goto out;
	*ret = buf;
	*ret_len = os.bytes_written;
	buf = NULL;
	r = 0;
out:
	free(buf);
	free(idb);
	return r;
}

static int add_go_func(void *userdata, uint64_t addr, uint64_t size, const char *name, size_t len)
{
	struct sym x = {
		.addr = addr,
		.size = size,
		.name = name,
		.name_len = len < AGENT_SYMUPLOAD_MAX_NAME_BYTES ? len : AGENT_SYMUPLOAD_MAX_NAME_BYTES,
		.rank = 2,
	};

	if (addr == 0 || len == 0)
		return 0;
	return syms_push(userdata, &x);
}

/* A pclntab header (Go 1.2, 1.16, 1.18, 1.20 magics, pad, quantum, pointer size): gopclntab.c's own check. */
static bool go_magic_at(const uint8_t *p)
{
	return p[1] == 0xff && p[2] == 0xff && p[3] == 0xff &&
	       (p[0] == 0xfb || p[0] == 0xfa || p[0] == 0xf0 || p[0] == 0xf1) && p[4] == 0 && p[5] == 0 &&
	       (p[6] == 1 || p[6] == 2 || p[6] == 4) && (p[7] == 4 || p[7] == 8);
}

/* Walks one candidate table; a malformed one adds nothing. Returns the functions added, 0, or -EFBIG/-ENOMEM. */
static int walk_pclntab(const uint8_t *data, size_t len, uint64_t text, struct syms *out)
{
	size_t mark = out->n;
	int r = sr_gopclntab_walk(data, len, text, add_go_func, out);

	if (r == -EFBIG || r == -ENOMEM)
		return r;
	if (r == -E2BIG)
		return -EFBIG;
	if (r < 0) {
		/* Malformed or a format we do not know: forget what it added; the other sources still go. */
		out->name_bytes = 0;
		for (size_t i = 0; i < mark; i++)
			out->name_bytes += out->v[i].name_len;
		out->n = mark;
		return 0;
	}
	return r;
}

/*
 * The functions of a Go pclntab: .gopclntab, or .data.rel.ro.gopclntab where
 * the Go linker puts it in PIE layouts, or, in a Go binary (.go.buildinfo or
 * .note.go.buildid) without either, found by its header inside .data.rel.ro
 * or .rodata (c-shared and externally linked PIE builds), as the gateway's
 * reader does. Returns the number added, 0 when there is no (usable) table,
 * or -errno past a limit. Names point into the section data, valid while e is open.
 */
static int collect_gopclntab(Elf *e, struct syms *out)
{
	Elf_Scn *scn = NULL;
	Elf_Data *tab = NULL, *scan[2] = { NULL, NULL };
	uint64_t text = 0;
	size_t shstrndx;
	bool is_go = false;
	int r;

	if (elf_getshdrstrndx(e, &shstrndx) < 0)
		return 0;
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr shdr;
		const char *name;

		if (!gelf_getshdr(scn, &shdr))
			continue;
		name = elf_strptr(e, shstrndx, shdr.sh_name);
		if (!name)
			continue;
		if (strcmp(name, ".text") == 0)
			text = shdr.sh_addr;
		else if (strcmp(name, ".go.buildinfo") == 0 || strcmp(name, ".note.go.buildid") == 0)
			is_go = true;
		else if (shdr.sh_type != SHT_PROGBITS)
			continue;
		else if (!tab && (strcmp(name, ".gopclntab") == 0 || strcmp(name, ".data.rel.ro.gopclntab") == 0))
			r = agent_parse_section_data(scn, false, &tab);
		else if (strcmp(name, ".data.rel.ro") == 0)
			r = agent_parse_section_data(scn, false, &scan[0]);
		else if (strcmp(name, ".rodata") == 0)
			r = agent_parse_section_data(scn, false, &scan[1]);
		else
			continue;
		/* Read whole, as the table is walked: a section past max_section_bytes refuses the file. */
		if (r == -E2BIG)
			return r;
	}
	if (tab && tab->d_buf && tab->d_size)
		return walk_pclntab(tab->d_buf, tab->d_size, text, out);
	for (size_t k = 0; is_go && k < 2; k++) {
		const uint8_t *p;

		if (!scan[k] || !scan[k]->d_buf)
			continue;
		p = scan[k]->d_buf;
		/* The table is pointer-aligned; a false match walks to an error and adds nothing. */
		for (size_t off = 0; off + 64 <= scan[k]->d_size; off += 8) {
			if (!go_magic_at(p + off))
				continue;
			r = walk_pclntab(p + off, scan[k]->d_size - off, text, out);
			if (r != 0)
				return r;
		}
	}
	return 0;
}

static int extract(Elf *e, uint64_t max_bytes, struct agent_symtab *ret)
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
	if (mini && agent_elf_preflight_mem(mini, mini_size) == 0) {
		inner = elf_memory((char *)mini, mini_size);
		if (check_elf(inner) == 0) {
			r = collect(inner, SHT_SYMTAB, &all);
			if (r < 0)
				goto out;
			if (r > 0)
				sources |= SRC_DEBUGDATA;
		}
	}
	/* A Go binary's .symtab already names every function; stripped, only the pclntab still does. */
	if (!(sources & SRC_SYMTAB)) {
		r = collect_gopclntab(e, &all);
		if (r < 0)
			goto out;
		if (r > 0)
			sources |= SRC_GOPCLNTAB;
	}
	r = build_table(&all, sources, max_bytes, ret);
out:
	/* Names point into the ELF images: the table holds copies, so they can go now. */
	if (inner)
		elf_end(inner);
	free(mini);
	free(all.v);
	if (r < 0)
		agent_symtab_release(ret);
	return r < 0 ? r : 0;
}

int agent_symupload_extract_mem(const void *data, size_t size, uint64_t max_bytes, struct agent_symtab *ret)
{
	Elf *e;
	int r;

	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOTSUP;
	r = agent_elf_preflight_mem(data, size);
	if (r < 0)
		return r;
	e = elf_memory((char *)data, size);
	if (!e)
		return -ENOEXEC;
	r = extract(e, max_bytes, ret);
	elf_end(e);
	return r;
}

int agent_symupload_extract_fd(int fd, uint64_t max_bytes, struct agent_symtab *ret)
{
	Elf *e;
	int r;

	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOTSUP;
	r = agent_elf_preflight_fd(fd);
	if (r < 0)
		return r;
	/*
	 * ELF_C_READ reads with pread: a file truncated under us gives errors,
	 * not SIGBUS as a mapping would. Each section is read whole into memory
	 * of its size, which agent_parse_section_data() checks first.
	 */
	e = elf_begin(fd, ELF_C_READ, NULL);
	if (!e)
		return -ENOEXEC;
	r = extract(e, max_bytes, ret);
	elf_end(e);
	return r;
}

/* ---- kernel: kallsyms ---- */

static size_t min_size(size_t a, size_t b)
{
	return a < b ? a : b;
}

int agent_symupload_kallsyms_mem(const char *text, size_t len, const struct agent_kernel *k, int seg,
				 uint64_t max_bytes, struct agent_symtab *ret)
{
	struct syms all = { 0 };
	const char *p = text, *end = text + len;
	size_t text_lines = 0, visible = 0;
	int r;

	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p)), *line = p, *q, *name, *name_end;
		uint64_t addr = 0;
		int digits = 0;
		char type;

		if (!eol)
			eol = end;
		p = eol + 1;
		/* "ffffffff81000000 T _text" or "ffffffffc0a01000 t fn\t[module]": the gateway's format too. */
		for (q = line; q < eol && sr_hex_value(*q) >= 0 && digits <= 16; q++, digits++)
			addr = addr << 4 | (uint64_t)sr_hex_value(*q);
		if (digits == 0 || digits > 16 || eol - q < 4 || q[0] != ' ' || q[2] != ' ')
			continue;
		type = q[1];
		/* Functions only: t/T text, w/W weak (the kernel marks weak functions so). */
		if (type != 't' && type != 'T' && type != 'w' && type != 'W')
			continue;
		name = q + 3;
		for (name_end = name; name_end < eol && *name_end != '\t' && *name_end != ' '; name_end++)
			;
		if (name_end == name)
			continue;
		text_lines++;
		/* Without CAP_SYSLOG (kptr_restrict) every address reads 0: nothing to resolve with. */
		if (addr == 0)
			continue;
		visible++;
		/* Only the address space asked for, in its own addresses (kernel.h). */
		if (k && agent_kernel_locate(k, addr, &addr) != seg)
			continue;
		struct sym x = {
			.addr = addr,
			.name = name,
			.name_len = min_size((size_t)(name_end - name), (size_t)AGENT_SYMUPLOAD_MAX_NAME_BYTES),
			.rank = type == 't' ? 0 : 2,
		};
		const char *mod = memchr(name_end, '[', (size_t)(eol - name_end));
		const char *mod_end = mod ? memchr(mod, ']', (size_t)(eol - mod)) : NULL;
		if (mod && mod_end && mod_end - mod - 1 > 0 && mod_end - mod - 1 <= AGENT_SYMUPLOAD_MAX_MODULE_NAME) {
			x.mod = mod + 1;
			x.mod_len = (size_t)(mod_end - mod - 1);
		}
		r = syms_push(&all, &x);
		if (r < 0)
			goto out;
	}
	if (all.n == 0) {
		r = text_lines && !visible ? -EPERM : -ENODATA;
		goto out;
	}
	r = build_table(&all, SRC_KALLSYMS, max_bytes, ret);
out:
	free(all.v);
	if (r < 0)
		agent_symtab_release(ret);
	return r < 0 ? r : 0;
}

int agent_symupload_kallsyms(const char *path, const struct agent_kernel *k, int seg, uint64_t max_bytes,
			     struct agent_symtab *ret)
{
	char *buf = NULL;
	size_t len = 0, cap = 0;
	int fd, r;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	/* A procfs file has no size: read until EOF, within the bound. */
	for (;;) {
		ssize_t n;

		if (len == cap) {
			if (cap >= AGENT_SYMUPLOAD_MAX_KALLSYMS_BYTES) {
				r = -EFBIG;
				goto out;
			}
			if (sr_grow_max((void **)&buf, &cap, cap + 1, 1, 1024 * 1024,
					AGENT_SYMUPLOAD_MAX_KALLSYMS_BYTES) < 0) {
				r = -ENOMEM;
				goto out;
			}
		}
		n = read(fd, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = -errno;
			goto out;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	r = agent_symupload_kallsyms_mem(buf, len, k, seg, max_bytes, ret);
out:
	close(fd);
	free(buf);
	return r;
}
