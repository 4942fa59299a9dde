/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Symbol tables for upload: the function symbols of an ELF file from .symtab,
 * .dynsym and the .symtab inside MiniDebugInfo (.gnu_debugdata, an xz
 * compressed ELF), merged, sorted by address and de-duplicated, as a
 * stackrelay.v1.SymbolTable (docs/agent-protocol.md, "Symbol upload").
 *
 * The file is untrusted (it comes from any container on the node): every
 * offset and size is checked, decompression is bounded.
 */
#ifndef SR_AGENT_SYMUPLOAD_H
#define SR_AGENT_SYMUPLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "stackrelay/v1/ingest.pb.h"

/* Decompressed .gnu_debugdata larger than this is refused. */
#define AGENT_SYMUPLOAD_MAX_DEBUGDATA_BYTES (64 * 1024 * 1024)
/* Symbols taken from one file at most (before the byte limit applies). */
#define AGENT_SYMUPLOAD_MAX_SYMBOLS (4 * 1024 * 1024)
/* Longer names are cut (C++ templates can be enormous). */
#define AGENT_SYMUPLOAD_MAX_NAME_BYTES 4096

/*
 * Fills ret (zeroed by the caller; release with pb_release(stackrelay_v1_SymbolTable_fields, ret))
 * with the symbols of the ELF image data[0..size). executable_id is left for the caller.
 * max_bytes bounds the encoded table. Returns 0, or:
 *   -ENOEXEC  not an ELF executable or shared object (or corrupt)
 *   -ENODATA  no function symbols in any symbol section
 *   -EFBIG    the table would exceed max_bytes
 *   -ENOMEM
 */
int agent_symupload_extract_mem(const void *data, size_t size, uint64_t max_bytes, stackrelay_v1_SymbolTable *ret);
/* Same, reading the file open on fd (not closed). -EIO and friends for read errors. */
int agent_symupload_extract_fd(int fd, uint64_t max_bytes, stackrelay_v1_SymbolTable *ret);

#endif
