// SPDX-License-Identifier: Apache-2.0
/*
 * ELF reader: the note walker over raw bytes (as /sys/kernel/notes gives
 * them), and the whole file through libelf (segments, notes, sections),
 * then the address math on whatever segments came out.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/elfinfo.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t id[AGENT_BUILD_ID_MAX];
	struct agent_elf_info e;
	uint64_t v;
	int r;

	if (size > 4 << 20)
		return 0;
	for (size_t align = 4; align <= 8; align += 4) {
		r = agent_elf_note_build_id(data, size, align, id);
		if (r > AGENT_BUILD_ID_MAX)
			abort();
	}
	if (agent_elf_read_mem(data, size, &e) == 0) {
		if (e.n_segs > AGENT_ELF_MAX_LOAD || e.build_id_len > AGENT_BUILD_ID_MAX ||
		    strnlen(e.debuglink, sizeof(e.debuglink)) == sizeof(e.debuglink))
			abort();
		for (size_t i = 0; i < e.n_segs; i++) {
			if (e.segs[i].filesz && agent_elf_offset_to_vaddr(&e, e.segs[i].offset, &v) < 0)
				abort();
		}
	}
	return 0;
}
