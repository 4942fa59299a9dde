// SPDX-License-Identifier: Apache-2.0
/*
 * Untrusted ELF files (fetched from debuginfod, found in debug directories):
 * symbols (.symtab, .dynsym, .gnu_debugdata, .gopclntab), build ID,
 * .gnu_debuglink, and DWARF line lookups.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <libelf.h>

#include "dwarflines.h"
#include "elfsym.h"
#include "symtab.h"

/* ELF inputs beyond this size add nothing but time. */
#define FUZZ_MAX_INPUT (4u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gw_symtab_builder *b;
	struct gw_symtab *t = NULL;
	uint8_t bid[GW_ELF_MAX_BUILD_ID];
	char link[256];
	uint32_t crc;
	char *copy;
	Elf *elf;

	if (size < 16 || size > FUZZ_MAX_INPUT || gw_elf_init() < 0)
		return 0;
	/* elf_memory wants writable memory and may keep pointers into it. */
	copy = malloc(size);
	if (!copy)
		return 0;
	memcpy(copy, data, size);
	elf = elf_memory(copy, size);
	if (!elf)
		goto out;
	(void)gw_elf_build_id(elf, bid, sizeof(bid));
	(void)gw_elf_debuglink(elf, link, sizeof(link), &crc);
	(void)gw_elf_is_go(elf);
	b = gw_symtab_builder_new();
	if (b && gw_elf_symbols(elf, b, NULL) >= 0)
		t = gw_symtab_builder__finish(b, GW_DEMANGLE_FULL, 0);
	gw_symtab_builder_free(b);
	if (gw_elf_has_dwarf(elf)) {
		struct gw_dwarf *d = gw_dwarf_open(elf);
		if (d) {
			struct gw_dwarf_frame fr[GW_DWARF_MAX_FRAMES];
			for (size_t i = 0; t && i < gw_symtab__count(t) && i < 64; i++) {
				struct gw_symtab_hit hit;
				gw_symtab__get(t, i, &hit);
				(void)gw_dwarf__lookup(d, hit.start, fr, GW_DWARF_MAX_FRAMES);
				(void)gw_dwarf__lookup(d, hit.start + hit.size / 2, fr, GW_DWARF_MAX_FRAMES);
			}
			gw_dwarf_free(d);
		}
	}
	gw_symtab_free(t);
	elf_end(elf);
out:
	free(copy);
	return 0;
}
