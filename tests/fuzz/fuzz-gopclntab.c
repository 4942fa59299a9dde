// SPDX-License-Identifier: Apache-2.0
/* Untrusted Go pclntab sections (1.2, 1.16, 1.18, 1.20 layouts). */
#include <stdint.h>
#include <stdlib.h>

#include "symtab.h"

/* A real pclntab is a few MiB at most; larger inputs only slow the fuzzer. */
#define FUZZ_MAX_INPUT (8u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gw_symtab_builder *b;
	struct gw_symtab *t;
	struct gw_symtab_hit hit;

	if (size > FUZZ_MAX_INPUT)
		return 0;
	b = gw_symtab_builder_new();
	if (!b)
		return 0;
	if (gw_gopclntab_parse(data, size, 0x401000, b) > 0) {
		t = gw_symtab_builder__finish(b, GW_DEMANGLE_NONE, GW_SYMTAB_SRC_GOPCLNTAB);
		if (t) {
			for (size_t i = 0; i < gw_symtab__count(t) && i < 256; i++) {
				gw_symtab__get(t, i, &hit);
				if (gw_symtab__lookup(t, hit.start, &hit) != 0)
					abort(); /* every symbol's start resolves */
			}
			gw_symtab_free(t);
		}
	}
	gw_symtab_builder_free(b);
	return 0;
}
