/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Source lines and inlined frames from DWARF with libdw.
 *
 * The compile units' address ranges are indexed once when the file is opened
 * (from DW_AT_low_pc/high_pc/ranges, so binaries built without
 * .debug_aranges, GCC's default since 11, work), then each lookup finds the
 * CU by binary search, the line in its line table, and the chain of
 * DW_TAG_inlined_subroutine scopes around the address.
 *
 * A handle is used by one thread at a time (libdw's lazily built CU state
 * is not thread-safe): the symbolizer serializes lookups with a mutex.
 */
#ifndef SR_GW_DWARFLINES_H
#define SR_GW_DWARFLINES_H

#include <stddef.h>
#include <stdint.h>

#include <libelf.h>

/* Most frames one address expands into (inlining depth kept, outermost wins). */
#define GW_DWARF_MAX_FRAMES 16

struct gw_dwarf;

/* Strings point into the debug file's data and stay valid while the handle is open. */
struct gw_dwarf_frame {
	const char *name;   /* linkage (mangled) name when present, else DW_AT_name; NULL if none */
	const char *file;   /* source file, NULL if unknown */
	uint32_t line;	    /* 0 when unknown */
	uint32_t column;    /* 0 when unknown */
	uint32_t decl_line; /* the function's DW_AT_decl_line, 0 when unknown */
};

/* Opens DWARF of elf (which must outlive the handle). NULL + errno (ENODATA: no DWARF). */
struct gw_dwarf *gw_dwarf_open(Elf *elf);
void gw_dwarf_free(struct gw_dwarf *d);
/* Heap bytes of the CU index (libdw's own lazily built state is not counted). */
size_t gw_dwarf__index_bytes(const struct gw_dwarf *d);

/*
 * Frames at addr, innermost (most deeply inlined) first, the last one being
 * the enclosing out-of-line function. Returns the number of frames (>= 1),
 * or -ENOENT when no CU covers addr.
 */
int gw_dwarf__lookup(struct gw_dwarf *d, uint64_t addr, struct gw_dwarf_frame *frames, size_t max);

#endif
