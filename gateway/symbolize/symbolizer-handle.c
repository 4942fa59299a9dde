/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The symbolizer's handles (symbolizer-private.h): the symbols of one
 * executable, built from an ELF file (its symbol table, and its DWARF kept
 * open for lines while under GW_SYM_MAX_OPEN_DWARF) or given a table, with
 * their memory charge; reference-counted, so an entry can be evicted while a
 * worker thread still resolves with its handle; and resolving an address to
 * a function name, or to source lines with inlined frames.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dwarflines.h"
#include "elfsym.h"
#include "symbolize.h"
#include "symbolizer-private.h"
#include "symtab.h"

/* ---- handles ---- */

static void handle_free(struct gw_sym_handle *h)
{
	if (!h)
		return;
	if (h->dw && h->open_dwarf)
		atomic_fetch_sub(h->open_dwarf, 1);
	gw_dwarf_free(h->dw);
	if (h->elf)
		elf_end(h->elf);
	if (h->fd >= 0)
		close(h->fd);
	gw_symtab_free(h->tab);
	pthread_mutex_destroy(&h->dw_lock);
	free(h);
}

struct gw_sym_handle *gw_sym_handle_new(void)
{
	struct gw_sym_handle *h = calloc(1, sizeof(*h));

	if (!h)
		return NULL;
	atomic_init(&h->refs, 1);
	h->fd = -1;
	pthread_mutex_init(&h->dw_lock, NULL);
	return h;
}

struct gw_sym_handle *gw_sym_handle_ref(struct gw_sym_handle *h)
{
	atomic_fetch_add_explicit(&h->refs, 1, memory_order_relaxed);
	return h;
}

void gw_sym_handle__release(struct gw_sym_handle *h)
{
	if (h && atomic_fetch_sub_explicit(&h->refs, 1, memory_order_acq_rel) == 1)
		handle_free(h);
}

size_t gw_sym_handle__symbol_count(const struct gw_sym_handle *h)
{
	return h->tab ? gw_symtab__count(h->tab) : 0;
}

int gw_sym_handle__symbol_at(const struct gw_sym_handle *h, size_t i, uint64_t *ret_start, uint64_t *ret_size)
{
	struct gw_symtab_hit hit;

	if (!h->tab || gw_symtab__get(h->tab, i, &hit) < 0)
		return -ENOENT;
	*ret_start = hit.start;
	*ret_size = hit.size;
	return 0;
}

bool gw_sym_handle__has_lines(const struct gw_sym_handle *h)
{
	return h->dw != NULL;
}

void gw_sym_handle_account(struct gw_sym_handle *h, uint64_t file_size)
{
	h->bytes = sizeof(*h) + (h->tab ? gw_symtab__memory_bytes(h->tab) : 0);
	/*
	 * libdw's parsed state (abbreviations, line tables of the CUs touched)
	 * is not measurable from outside; charge the CU index plus 1/16 of the
	 * debug file as an estimate. The file itself is mapped, not copied.
	 */
	if (h->dw)
		h->bytes += gw_dwarf__index_bytes(h->dw) + file_size / 16;
}

/*
 * Builds a handle from an open ELF file (fd is taken over). tab, when given,
 * is used instead of reading symbols again (taken over too). expect, when
 * given, must equal the file's build ID: fetched and found files are
 * untrusted and may be the wrong one.
 */
int gw_sym_handle_from_fd(struct gw_symbolizer *s, int fd, struct gw_symtab *tab, const uint8_t *expect,
			  size_t expect_len, struct gw_sym_handle **ret)
{
	struct gw_sym_handle *h = gw_sym_handle_new();
	struct gw_symtab_builder *b = NULL;
	struct stat sb;
	int r;

	if (!h) {
		close(fd);
		gw_symtab_free(tab);
		return -ENOMEM;
	}
	h->fd = fd;
	h->tab = tab;
	h->mode = s->cfg.demangle;
	if ((r = gw_elf_init()) < 0)
		goto fail;
	if (fstat(fd, &sb) < 0) {
		r = -errno;
		goto fail;
	}
	if (!S_ISREG(sb.st_mode) || (uint64_t)sb.st_size > s->cfg.max_file_bytes) {
		r = -EFBIG;
		goto fail;
	}
	h->elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!h->elf || elf_kind(h->elf) != ELF_K_ELF) {
		r = -EBADMSG;
		goto fail;
	}
	if (expect && expect_len > 0) {
		uint8_t bid[GW_ELF_MAX_BUILD_ID];
		int n = gw_elf_build_id(h->elf, bid, sizeof(bid));
		if (n != (int)expect_len || memcmp(bid, expect, expect_len) != 0) {
			r = -ESTALE;
			goto fail;
		}
	}
	if (!h->tab) {
		unsigned sources = 0;
		b = gw_symtab_builder_new();
		if (!b) {
			r = -ENOMEM;
			goto fail;
		}
		r = gw_elf_symbols(h->elf, b, &sources);
		if (r < 0)
			goto fail;
		h->tab = gw_symtab_builder__finish(b, s->cfg.demangle, sources);
		if (!h->tab) {
			r = -errno;
			goto fail;
		}
	}
	/* Past GW_SYM_MAX_OPEN_DWARF files kept open for lines, more executables get names only. */
	if (!s->cfg.no_lines && gw_elf_has_dwarf(h->elf) &&
	    atomic_fetch_add(&s->open_dwarf, 1) < GW_SYM_MAX_OPEN_DWARF) {
		h->dw = gw_dwarf_open(h->elf); /* no usable DWARF is not an error: names remain */
		if (h->dw)
			h->open_dwarf = &s->open_dwarf;
		else
			atomic_fetch_sub(&s->open_dwarf, 1);
	} else if (!s->cfg.no_lines && gw_elf_has_dwarf(h->elf)) {
		atomic_fetch_sub(&s->open_dwarf, 1);
	}
	if (!h->dw) {
		elf_end(h->elf);
		h->elf = NULL;
		close(h->fd);
		h->fd = -1;
	}
	if (gw_symtab__count(h->tab) == 0 && !h->dw) {
		r = -ENODATA;
		goto fail;
	}
	gw_sym_handle_account(h, (uint64_t)sb.st_size);
	gw_symtab_builder_free(b);
	*ret = h;
	return 0;
fail:
	gw_symtab_builder_free(b);
	handle_free(h);
	return r;
}

int gw_sym_handle_from_path(struct gw_symbolizer *s, const char *path, struct gw_symtab *tab, const uint8_t *expect,
			    size_t expect_len, struct gw_sym_handle **ret)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		gw_symtab_free(tab);
		return -errno;
	}
	return gw_sym_handle_from_fd(s, fd, tab, expect, expect_len, ret);
}

/* ---- resolving ---- */

static const char *arena_dup(struct gw_sym_result *r, const char *str)
{
	size_t l = strlen(str) + 1;
	char *p;

	if (r->arena_len + l > sizeof(r->arena))
		return NULL;
	p = r->arena + r->arena_len;
	memcpy(p, str, l);
	r->arena_len += l;
	return p;
}

/* Display name of a DWARF name: demangled into the result's arena when it fits. */
static const char *display_name(struct gw_sym_handle *h, struct gw_sym_result *r, const char *raw)
{
	char *dm = gw_demangle(raw, h->mode);
	const char *out = raw;

	if (dm) {
		const char *p = arena_dup(r, dm);
		if (p)
			out = p;
		free(dm);
	}
	return out;
}

int gw_sym_handle__function(struct gw_sym_handle *h, uint64_t addr, const char **ret_name, const char **ret_system_name)
{
	struct gw_symtab_hit hit;

	if (!h->tab || gw_symtab__lookup(h->tab, addr, &hit) < 0)
		return -ENOENT;
	*ret_name = hit.name;
	*ret_system_name = hit.sysname;
	return 0;
}

int gw_sym_handle__resolve(struct gw_sym_handle *h, uint64_t addr, struct gw_sym_result *r)
{
	struct gw_symtab_hit hit;
	bool have = h->tab && gw_symtab__lookup(h->tab, addr, &hit) == 0;

	r->n = 0;
	r->arena_len = 0;
	r->symbol_start = have ? hit.start : 0;
	if (h->dw) {
		struct gw_dwarf_frame fr[GW_SYM_MAX_LINES];
		int n;

		pthread_mutex_lock(&h->dw_lock);
		n = gw_dwarf__lookup(h->dw, addr, fr, GW_SYM_MAX_LINES);
		for (int i = 0; i < n; i++) {
			struct gw_sym_line *l = &r->lines[r->n++];
			bool outermost = i == n - 1;
			*l = (struct gw_sym_line){
				.file = fr[i].file,
				.line = fr[i].line,
				.column = fr[i].column,
				.start_line = fr[i].decl_line,
			};
			/* The out-of-line function keeps the symbol table's name, so a frame is named the
			 * same whether or not DWARF was at hand; inlined ones only DWARF knows. */
			if (outermost && have) {
				l->function = hit.name;
				l->system_name = hit.sysname;
			} else if (fr[i].name) {
				l->system_name = fr[i].name;
				l->function = display_name(h, r, fr[i].name);
			} else {
				l->function = l->system_name = "";
			}
		}
		pthread_mutex_unlock(&h->dw_lock);
		if (n > 0 && (have || r->lines[r->n - 1].function[0])) {
			return (int)r->n;
		}
		r->n = 0;
		r->arena_len = 0;
	}
	if (!have)
		return -ENOENT;
	r->lines[0] = (struct gw_sym_line){ .function = hit.name, .system_name = hit.sysname };
	r->n = 1;
	return 1;
}
