/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Go's pclntab reader on its own, with no dependency but libc: the agent
 * uploads the functions of stripped Go binaries with it (their .symtab is
 * gone, .gopclntab stays because the Go runtime needs it), and the gateway's
 * gw_gopclntab_parse() (gateway/symbolize/symtab.h) feeds the same walk into
 * a symbol table.
 */
#ifndef SR_GOPCLNTAB_H
#define SR_GOPCLNTAB_H

#include <stddef.h>
#include <stdint.h>

/* Most functions accepted from one table (Kubernetes' biggest binaries have ~100k). */
#define SR_GOPCLNTAB_MAX_FUNCS (16u << 20)
/* Longest function name accepted. */
#define SR_GOPCLNTAB_MAX_NAME 4096

/* Called once per function in table order; name is not NUL-terminated (len bytes). <0 stops the walk. */
typedef int (*sr_gopclntab_fn)(void *userdata, uint64_t addr, uint64_t size, const char *name, size_t len);

/*
 * Walks a pclntab (the .gopclntab section bytes; Go 1.2, 1.16, 1.18 and 1.20
 * layouts, little-endian). text_start is the .text address, used when the
 * 1.18+ header's textStart is 0 (PIE). Pure and bounds-checked: data is
 * untrusted. Returns the number of functions, -EBADMSG for a malformed
 * table, -EPROTONOSUPPORT for an unknown magic, -E2BIG past
 * SR_GOPCLNTAB_MAX_FUNCS, or what fn returned when it stopped the walk.
 */
int sr_gopclntab_walk(const uint8_t *data, size_t len, uint64_t text_start, sr_gopclntab_fn fn, void *userdata);

#endif
