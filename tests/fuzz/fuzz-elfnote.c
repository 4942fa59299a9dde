// SPDX-License-Identifier: Apache-2.0
/*
 * ELF reader: the note walker over raw bytes (as /sys/kernel/notes gives
 * them), and the whole file through libelf (segments, notes, sections), from
 * memory and from a file (the agent's path: bounded preads of the notes),
 * then the address math on whatever segments came out.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "agent/elfinfo.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const struct agent_elf_info *e)
{
	uint64_t v;

	if (e->n_segs > AGENT_ELF_MAX_LOAD || e->build_id_len > AGENT_BUILD_ID_MAX ||
	    strnlen(e->debuglink, sizeof(e->debuglink)) == sizeof(e->debuglink))
		abort();
	for (size_t i = 0; i < e->n_segs; i++) {
		if (e->segs[i].filesz && agent_elf_offset_to_vaddr(e, e->segs[i].offset, &v) < 0)
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int fd = -1;
	uint8_t id[AGENT_BUILD_ID_MAX];
	struct agent_elf_info e;
	int r;

	if (size > 4 << 20)
		return 0;
	for (size_t align = 4; align <= 8; align += 4) {
		r = agent_elf_note_build_id(data, size, align, id);
		if (r > AGENT_BUILD_ID_MAX)
			abort();
	}
	if (agent_elf_read_mem(data, size, &e) == 0)
		check(&e);
	if (fd < 0)
		fd = memfd_create("fuzz-elfnote", MFD_CLOEXEC);
	if (fd >= 0 && ftruncate(fd, 0) == 0 && pwrite(fd, data, size, 0) == (ssize_t)size &&
	    agent_elf_read_fd(fd, &e) == 0)
		check(&e);
	return 0;
}
