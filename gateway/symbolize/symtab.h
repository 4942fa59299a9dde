/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Compact symbol tables: the in-memory (and on-disk) form every symbol source
 * is turned into (ELF .symtab/.dynsym/.gnu_debugdata, Go .gopclntab, kernel
 * kallsyms, agent uploads).
 *
 * A table is four parallel arrays sorted by address (struct of arrays, so the
 * binary search touches only the 8-byte address array) and one string pool:
 *   addr[i]    start address (ELF virtual address, or runtime kernel address)
 *   size[i]    size in bytes, 0 = unknown (the symbol then reaches up to the
 *              next one, at most GW_SYMTAB_IMPLICIT_SIZE_MAX)
 *   name[i]    offset of the display (demangled) name in the pool
 *   sysname[i] offset of the name as stored in the binary (mangled)
 * That is 20 bytes per symbol plus the names.
 *
 * Aliases (several symbols at one address) are reduced to one when the table
 * is built: global and weak symbols beat local ones (a weak symbol is usually
 * the public name of a global implementation: glibc's read for __read), a
 * function beats an untyped symbol, a sized symbol beats an unsized one, then
 * the name with the fewest leading underscores, the shortest, the
 * lexicographically smallest wins, so the choice is deterministic whatever
 * the input order.
 *
 * Tables are immutable once built and safe to read from any thread.
 */
#ifndef SR_GW_SYMTAB_H
#define SR_GW_SYMTAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "demangle.h"

/* Most symbols one table may hold (uploads, ELF files, kallsyms). */
#define GW_SYMTAB_MAX_SYMBOLS (16u << 20)
/* Longest symbol name kept; longer names are cut (C++ templates can be huge). */
#define GW_SYMTAB_MAX_NAME 4096
/* How far a symbol without a size reaches when the next symbol is further away. */
#define GW_SYMTAB_IMPLICIT_SIZE_MAX (1u << 20)
/* Largest string pool (names) of one table. */
#define GW_SYMTAB_MAX_POOL (1ULL << 31)

/* Where a table came from (a bit set, kept in the table and on disk). */
enum {
	GW_SYMTAB_SRC_SYMTAB = 1u << 0,	   /* ELF .symtab */
	GW_SYMTAB_SRC_DYNSYM = 1u << 1,	   /* ELF .dynsym */
	GW_SYMTAB_SRC_DEBUGDATA = 1u << 2, /* ELF .gnu_debugdata (MiniDebugInfo) */
	GW_SYMTAB_SRC_GOPCLNTAB = 1u << 3, /* Go .gopclntab */
	GW_SYMTAB_SRC_KALLSYMS = 1u << 4,  /* kernel symbols */
	GW_SYMTAB_SRC_UPLOAD = 1u << 5,	   /* uploaded by an agent */
};

/* Alias ranks (higher wins) for gw_symtab_builder__add(). */
enum {
	GW_SYMTAB_RANK_LOCAL = 1,
	GW_SYMTAB_RANK_WEAK = 2,
	GW_SYMTAB_RANK_GLOBAL = 2,
};

struct gw_symtab;
struct gw_symtab_builder;

struct gw_symtab_hit {
	const char *name;    /* display name (demangled per the table's mode) */
	const char *sysname; /* name as in the binary */
	uint64_t start;	     /* symbol start address */
	uint64_t size;	     /* 0 when unknown */
};

struct gw_symtab_builder *gw_symtab_builder_new(void);
void gw_symtab_builder_free(struct gw_symtab_builder *b);
/*
 * Adds one symbol; name need not be NUL-terminated (len bytes). rank is one of
 * GW_SYMTAB_RANK_*; is_func says the symbol is typed as a function (preferred
 * over untyped aliases). Empty names are ignored (returns 0). Returns 0,
 * -E2BIG past GW_SYMTAB_MAX_SYMBOLS or GW_SYMTAB_MAX_POOL, -ENOMEM.
 */
int gw_symtab_builder__add(struct gw_symtab_builder *b, uint64_t addr, uint64_t size, const char *name, size_t len,
			   unsigned rank, bool is_func);
size_t gw_symtab_builder__count(const struct gw_symtab_builder *b);
/* Forgets every symbol added after the count was mark (a parse that failed half-way). */
void gw_symtab_builder__rollback(struct gw_symtab_builder *b, size_t mark);
/*
 * Sorts, reduces aliases, demangles names per mode and returns the table
 * (the builder is emptied and may be freed or reused). sources is a
 * GW_SYMTAB_SRC_* set kept for diagnostics. NULL + errno.
 */
struct gw_symtab *gw_symtab_builder__finish(struct gw_symtab_builder *b, enum gw_demangle_mode mode, unsigned sources);

void gw_symtab_free(struct gw_symtab *t);
size_t gw_symtab__count(const struct gw_symtab *t);
/* Heap bytes held by the table (arrays + pool). */
size_t gw_symtab__memory_bytes(const struct gw_symtab *t);
unsigned gw_symtab__sources(const struct gw_symtab *t);
enum gw_demangle_mode gw_symtab__demangle_mode(const struct gw_symtab *t);

/* Finds the symbol covering addr. 0 with *ret filled, -ENOENT when none does. */
int gw_symtab__lookup(const struct gw_symtab *t, uint64_t addr, struct gw_symtab_hit *ret);
/* The i-th symbol in address order (tests, re-demangling). */
int gw_symtab__get(const struct gw_symtab *t, size_t i, struct gw_symtab_hit *ret);

/*
 * Serialized form (the on-disk store): a header with magic, version, counts,
 * demangle mode, sources and an XXH64 checksum, then the arrays and the pool.
 * gw_symtab__serialize returns a malloc'd buffer.
 */
int gw_symtab__serialize(const struct gw_symtab *t, void **ret, size_t *ret_len);
/*
 * Parses and fully validates a serialized table (untrusted: lengths, sorted
 * addresses, offsets inside the pool, NUL-terminated names, checksum). When
 * mode differs from the stored one, names are demangled again from the
 * stored system names. NULL + errno (EBADMSG for anything malformed).
 */
struct gw_symtab *gw_symtab_deserialize(const void *buf, size_t len, enum gw_demangle_mode mode);

/*
 * Parses /proc/kallsyms text ("ffffffff81000000 T _text\t[module]") into b:
 * text symbols (t, T, w, W) only; module symbols are named "name [module]".
 * Lines that do not parse are skipped and counted in *ret_bad (may be NULL).
 * Returns the number of symbols added or -errno.
 */
int gw_kallsyms_parse(const char *text, size_t len, struct gw_symtab_builder *b, size_t *ret_bad);

/*
 * Parses a Go pclntab (the .gopclntab section, Go 1.2, 1.16, 1.18 and 1.20
 * formats) found at ELF virtual address pclntab_addr into b, one function
 * symbol per entry with its size up to the next entry. text_start is the
 * address of .text (used when the 1.18+ header's textStart is 0, as in PIE
 * files). Pure: data is untrusted. Returns the number of functions added,
 * -EBADMSG for a malformed table, -EPROTONOSUPPORT for an unknown version.
 */
int gw_gopclntab_parse(const uint8_t *data, size_t len, uint64_t text_start, struct gw_symtab_builder *b);

#endif
