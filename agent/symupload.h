/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Symbol tables for upload: the function symbols of an ELF file from .symtab,
 * .dynsym and the .symtab inside MiniDebugInfo (.gnu_debugdata, an xz
 * compressed ELF), or, for a Go binary without .symtab, from .gopclntab;
 * merged, sorted by address and de-duplicated, as a stackrelay.v1.SymbolTable
 * (docs/agent-protocol.md, "Symbol upload"). For a kernel ID: the function
 * symbols of /proc/kallsyms in the address space it names, module ones named
 * "name [module]".
 *
 * The file is untrusted (it comes from any container on the node): every
 * offset and size is checked, decompression is bounded.
 */
#ifndef SR_AGENT_SYMUPLOAD_H
#define SR_AGENT_SYMUPLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "kernel.h"
#include "stackrelay/v1/ingest.pb.h"

/*
 * Decompressed .gnu_debugdata larger than this is refused (counted as "xz",
 * parse-limits.h), as is one whose decoder needs more than
 * AGENT_PARSE_MAX_XZ_MEMORY.
 */
#define AGENT_SYMUPLOAD_MAX_DEBUGDATA_BYTES (32 * 1024 * 1024)
/* Symbols taken from one file at most (before the byte limit applies). */
#define AGENT_SYMUPLOAD_MAX_SYMBOLS (4 * 1024 * 1024)
/* Longer names are cut (C++ templates can be enormous). */
#define AGENT_SYMUPLOAD_MAX_NAME_BYTES 4096
/* /proc/kallsyms larger than this is refused. */
#define AGENT_SYMUPLOAD_MAX_KALLSYMS_BYTES AGENT_KERNEL_MAX_KALLSYMS_BYTES
/* Longest "[module]" name kept on a kallsyms line (the kernel's MODULE_NAME_LEN is 56). */
#define AGENT_SYMUPLOAD_MAX_MODULE_NAME 59
/* Where the running kernel's symbols are read. */
#define AGENT_SYMUPLOAD_KALLSYMS_PATH "/proc/kallsyms"

/*
 * nanopb counts a repeated field in 16 bits (pb_size_t: Debian's library is
 * built without PB_FIELD_32BIT), so a table is held in parts of at most this
 * many symbols; agent_symtab__encode() writes them back to back as ONE
 * SymbolTable message (protobuf appends the repeated fields of concatenated
 * messages), which is what the gateway receives. A kernel has ~100k-300k
 * text symbols, a large Go or C++ binary as many.
 */
#define AGENT_SYMUPLOAD_PART_SYMBOLS 65535

struct agent_symtab {
	stackrelay_v1_SymbolTable *parts; /* parts[0] carries the sources; none carries the ID */
	size_t n_parts;
	size_t n_symbols; /* sorted by address, unique addresses, across the parts */
};

/* Frees the parts and zeroes t (NULL-safe, idempotent). */
void agent_symtab_release(struct agent_symtab *t);
/* The i-th symbol in address order, or NULL past the end. */
const stackrelay_v1_Symbol *agent_symtab__symbol(const struct agent_symtab *t, size_t i);
/*
 * The body of one SymbolTable message: executable_id = id, error when
 * non-empty, then every part. *ret is malloc'd. 0, -ENOMEM, -EINVAL.
 */
int agent_symtab__encode(const struct agent_symtab *t, const uint8_t *id, size_t id_len, const char *error,
			 uint8_t **ret, size_t *ret_len);

/*
 * Fills ret (zeroed by the caller; release with agent_symtab_release())
 * with the symbols of the ELF image data[0..size). max_bytes bounds the
 * encoded table. Returns 0, or:
 *   -ENOEXEC  not an ELF executable or shared object (or corrupt)
 *   -ENODATA  no function symbols in any symbol section
 *   -EFBIG    the table would exceed max_bytes
 *   -ENOMEM
 */
int agent_symupload_extract_mem(const void *data, size_t size, uint64_t max_bytes, struct agent_symtab *ret);
/* Same, reading the file open on fd (not closed). -EIO and friends for read errors. */
int agent_symupload_extract_fd(int fd, uint64_t max_bytes, struct agent_symtab *ret);

/*
 * The running kernel's function symbols (types t, T, w, W) from kallsyms text
 * text[0..len), no sizes (the gateway ends a symbol at the next one), module
 * symbols named "name [module]", one name per address (global before local,
 * then the gateway's alias rule). With k, only those in address space seg
 * (kernel.h: AGENT_KSEG_IMAGE, AGENT_KSEG_RUNTIME or a module index), at its
 * addresses (offsets from _text or from the module's start); without k, every
 * symbol at its runtime address. Same ret and max_bytes contract as above.
 * Returns 0, or:
 *   -EPERM    every address reads 0 (kptr_restrict: the reader lacks CAP_SYSLOG)
 *   -ENODATA  no function symbol in the address space (or none at all)
 *   -EFBIG    the table would exceed max_bytes
 *   -ENOMEM
 */
int agent_symupload_kallsyms_mem(const char *text, size_t len, const struct agent_kernel *k, int seg,
				 uint64_t max_bytes, struct agent_symtab *ret);
/* Same, reading path (AGENT_SYMUPLOAD_KALLSYMS_PATH; tests use a fixture), at most
 * AGENT_SYMUPLOAD_MAX_KALLSYMS_BYTES (-EFBIG beyond). -errno of open/read otherwise. */
int agent_symupload_kallsyms(const char *path, const struct agent_kernel *k, int seg, uint64_t max_bytes,
			     struct agent_symtab *ret);

#endif
