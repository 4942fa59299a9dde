// SPDX-License-Identifier: Apache-2.0
/*
 * Symbol extraction from untrusted ELF bytes (agent/symupload.c): any file
 * in any container can be asked for. Also covers the xz decoding of
 * .gnu_debugdata and the nested ELF inside it, the Go .gopclntab walk of
 * binaries without .symtab, the encoding of the parts into one SymbolTable,
 * and the same bytes read as kallsyms text: whole, and cut into the kernel
 * address spaces (agent/kernel-layout.c) that the same bytes, read as
 * kallsyms and as /proc/modules, describe.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <pb_decode.h>

#include "symupload.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct agent_symtab t;
	static const uint8_t id[20] = { 1, 2, 3 };
	uint8_t *buf;
	size_t len;

	/* Real executables are larger, but every parser path is reachable well below this. */
	if (size > 4 * 1024 * 1024)
		return 0;
	memset(&t, 0, sizeof(t));
	if (agent_symupload_extract_mem(data, size, 1 << 20, &t) == 0 &&
	    agent_symtab__encode(&t, id, sizeof(id), NULL, &buf, &len) == 0)
		free(buf);
	agent_symtab_release(&t);
	if (agent_symupload_kallsyms_mem((const char *)data, size, NULL, 0, 1 << 20, &t) == 0 &&
	    agent_symtab__encode(&t, id, sizeof(id), NULL, &buf, &len) == 0)
		free(buf);
	agent_symtab_release(&t);

	struct agent_kernel k = { .release = "6.1.0-fuzz", .boot_id = "b" };
	agent_kernel_parse_text((const char *)data, size, &k.text_start, &k.text_end);
	if (agent_kernel_parse_modules((const char *)data, size, &k.modules, &k.n_modules) == 0 &&
	    agent_kernel_finish(&k) == 0) {
		for (int seg = AGENT_KSEG_RUNTIME; seg < (int)k.n_modules && seg < 4; seg++) {
			if (agent_symupload_kallsyms_mem((const char *)data, size, &k, seg, 1 << 20, &t) == 0 &&
			    agent_symtab__encode(&t, agent_kernel_seg_id(&k, seg), AGENT_KERNEL_ID_LEN, NULL, &buf,
						 &len) == 0)
				free(buf);
			agent_symtab_release(&t);
		}
	}
	agent_kernel_done(&k);
	return 0;
}
