/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ELF symbol extraction with libelf: .symtab, .dynsym, .gnu_debugdata
 * (MiniDebugInfo: an xz-compressed ELF holding a .symtab, as Fedora and
 * others ship), and Go's .gopclntab for stripped Go binaries. Also the
 * identity helpers: GNU build ID and .gnu_debuglink.
 *
 * Only function symbols are kept (STT_FUNC, STT_GNU_IFUNC, and untyped
 * symbols inside executable sections), at their ELF virtual addresses.
 */
#ifndef SR_GW_ELFSYM_H
#define SR_GW_ELFSYM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <libelf.h>

struct gw_symtab_builder;

/* Largest decompressed .gnu_debugdata accepted (an xz bomb stops here). */
#define GW_ELF_MAX_DEBUGDATA (128u << 20)
/* Longest GNU build ID accepted (SHA-1 is 20 bytes; some linkers use 16 or 32). */
#define GW_ELF_MAX_BUILD_ID 64

/* Calls elf_version() once; thread-safe. Returns 0 or -ENOTSUP. */
int gw_elf_init(void);

/*
 * Adds the symbols of elf to b: .symtab when present, .dynsym always, and
 * .gnu_debugdata's .symtab or .gopclntab when there is no .symtab.
 * *ret_sources gets the GW_SYMTAB_SRC_* bits used. Returns the number of
 * symbols added, or -errno (-EBADMSG for a malformed file).
 */
int gw_elf_symbols(Elf *elf, struct gw_symtab_builder *b, unsigned *ret_sources);

/* The NT_GNU_BUILD_ID note: its length, -ENOENT when absent, -ENOBUFS if > size. */
int gw_elf_build_id(Elf *elf, uint8_t *buf, size_t size);

/* The .gnu_debuglink file name (NUL-terminated into buf) and CRC; -ENOENT when absent. */
int gw_elf_debuglink(Elf *elf, char *buf, size_t size, uint32_t *ret_crc);

/* True when elf has DWARF line information (.debug_line with contents). */
bool gw_elf_has_dwarf(Elf *elf);

/* True when elf is a Go binary (.go.buildinfo, .gopclntab or .note.go.buildid). */
bool gw_elf_is_go(Elf *elf);

#endif
