/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The budget every parser of a file or memory another party controls works
 * within (docs/security.md, "The agent against hostile files"): an ELF file
 * a container maps, its notes, unwind and symbol sections, compressed
 * sections and MiniDebugInfo. A file past a limit is refused, not parsed in
 * part, and the refusal is counted by reason on /metrics.
 *
 * The limits bound memory and, because every parser is linear in the bytes
 * it reads, time: no parser allocates or reads in proportion to a size a
 * file declares beyond them, so a sparse file's holes cost nothing.
 */
#ifndef SR_AGENT_PARSE_LIMITS_H
#define SR_AGENT_PARSE_LIMITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <libelf.h>

/*
 * Bytes of one section read into memory (.eh_frame, .symtab, .dynsym,
 * .gopclntab, a compressed section's compressed bytes). libxul's .symtab, the
 * largest seen, is 20 MiB.
 */
#define AGENT_PARSE_MAX_SECTION_BYTES_DEFAULT (64ull << 20)
/* Bytes one compressed section (.debug_frame, ELFCOMPRESS_ZLIB/ZSTD) may inflate to. */
#define AGENT_PARSE_MAX_INFLATED_BYTES_DEFAULT (32ull << 20)
/*
 * Inflated size over compressed size a section may declare; DWARF call frame
 * information compresses 3 to 8 times, a zlib bomb about 1,000 times.
 */
#define AGENT_PARSE_MAX_INFLATE_RATIO 64
/* Bytes of one note segment or section read: a build ID note is 36 bytes. */
#define AGENT_PARSE_MAX_NOTE_BYTES (64u << 10)
/*
 * Program and section headers one file may have. libelf allocates a
 * descriptor for every section at elf_begin(), so a sparse file declaring
 * millions would cost gigabytes before any section is read; linked files
 * have a dozen program headers and under a hundred sections.
 */
#define AGENT_PARSE_MAX_PHDRS	 1024
#define AGENT_PARSE_MAX_SECTIONS 16384
/*
 * Memory the xz decoder of MiniDebugInfo (.gnu_debugdata) may use: its
 * dictionary. xz -9 needs 65 MiB, the -6 that distributions use 9 MiB.
 */
#define AGENT_PARSE_MAX_XZ_MEMORY (16ull << 20)

/* Why a file was refused (agent_parse_refusals()). */
enum agent_parse_refusal {
	AGENT_PARSE_HEADERS = 0,   /* more program or section headers than allowed, or headers past the file */
	AGENT_PARSE_SECTION_SIZE,  /* a section larger than max_section_bytes */
	AGENT_PARSE_INFLATED_SIZE, /* a compressed section that would inflate past max_inflated_bytes */
	AGENT_PARSE_INFLATE_RATIO, /* ... or more than AGENT_PARSE_MAX_INFLATE_RATIO times its compressed size */
	AGENT_PARSE_NOTE,	   /* a note segment or section misaligned, or larger than AGENT_PARSE_MAX_NOTE_BYTES */
	AGENT_PARSE_XZ,		   /* MiniDebugInfo that needs more decoder memory or inflates past its cap */
	AGENT_PARSE_NOT_REGULAR,   /* a path that is not a regular file (a FIFO, a device, a directory) */
	AGENT_PARSE_ESCAPE,	   /* a path whose resolution leaves the container's root, or a symlink */
	AGENT_PARSE_IDENTITY,	   /* a file reopened by path that is not the one identified (swapped) */
	AGENT_PARSE_REFUSAL__MAX,
};

extern const char *const agent_parse_refusal_names[AGENT_PARSE_REFUSAL__MAX];

struct agent_parse_limits {
	uint64_t max_section_bytes;
	uint64_t max_inflated_bytes;
};

/* The limits in force: the defaults until agent_parse_limits_set(). */
const struct agent_parse_limits *agent_parse_limits(void);
/* Sets them at startup, before any parser runs; a 0 field keeps its default. */
void agent_parse_limits_set(const struct agent_parse_limits *l);

/* Counts one refusal (any thread). */
void agent_parse_refused(enum agent_parse_refusal why);
/* Copies the counts so far into ret. */
void agent_parse_refusals(uint64_t ret[AGENT_PARSE_REFUSAL__MAX]);

/*
 * Checks an ELF file open at fd before libelf sees it: the identification,
 * and the program and section header counts (including the extended counts
 * in section header 0) and their tables within the file's size. Returns 0;
 * -ENOEXEC when it is not a 32- or 64-bit ELF file; -E2BIG (counted) past a
 * limit; -errno from pread.
 */
int agent_elf_preflight_fd(int fd);
/* The same over bytes in memory. */
int agent_elf_preflight_mem(const void *buf, size_t len);

/*
 * Checks a section of size bytes before it is read into memory: -E2BIG
 * (counted) when it is larger than max_section_bytes.
 */
int agent_parse_check_section(uint64_t size);

/*
 * Checks what a compressed section declares before anything inflates it
 * (libelf allocates ch_size bytes first): -E2BIG (counted) when ch_size
 * passes max_inflated_bytes or AGENT_PARSE_MAX_INFLATE_RATIO times csize.
 */
int agent_parse_check_inflate(uint64_t ch_size, uint64_t csize);

/*
 * A section's bytes within the limits: its size checked before libelf reads
 * it, and a SHF_COMPRESSED section's Chdr checked before it is inflated
 * (with inflate; without, a compressed section is refused with -ENOTSUP,
 * uncounted). Returns 0 with *ret_data (possibly empty), -E2BIG (counted),
 * -ENODATA for SHT_NOBITS, -EINVAL when libelf cannot read it.
 */
int agent_parse_section_data(Elf_Scn *scn, bool inflate, Elf_Data **ret_data);

#endif
