// SPDX-License-Identifier: Apache-2.0
/*
 * Symbol extraction from untrusted ELF bytes (agent/symupload.c): any file
 * in any container can be asked for. Also covers the xz decoding of
 * .gnu_debugdata and the nested ELF inside it.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <pb_decode.h>

#include "symupload.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	stackrelay_v1_SymbolTable t;

	/* Real executables are larger, but every parser path is reachable well below this. */
	if (size > 4 * 1024 * 1024)
		return 0;
	memset(&t, 0, sizeof(t));
	if (agent_symupload_extract_mem(data, size, 1 << 20, &t) == 0)
		pb_release(stackrelay_v1_SymbolTable_fields, &t);
	return 0;
}
