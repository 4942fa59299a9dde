/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the agent needs from an ELF file: its GNU build ID, its PT_LOAD
 * segments (to turn a mapping's file offset into an ELF virtual address),
 * .gnu_debuglink and whether it is a Go binary. Read with libelf; the note
 * walker and the address math are pure functions (tests/fuzz/fuzz-elfnote.c).
 */
#ifndef SR_AGENT_ELFINFO_H
#define SR_AGENT_ELFINFO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Longest build ID kept; GNU ld writes 20 bytes (sha1), lld may write 8 or 16. */
#define AGENT_BUILD_ID_MAX 32
/* PT_LOAD segments kept per file; real files have 2-6. */
#define AGENT_ELF_MAX_LOAD 32
/* Bytes hashed from each end of a file without a build ID. */
#define AGENT_CONTENT_HASH_CHUNK 4096
#define AGENT_DEBUGLINK_MAX	 256

struct agent_elf_segment {
	uint64_t vaddr;
	uint64_t memsz;
	uint64_t offset;
	uint64_t filesz;
	uint32_t flags; /* PF_X | PF_W | PF_R */
};

struct agent_elf_info {
	uint8_t build_id[AGENT_BUILD_ID_MAX];
	size_t build_id_len; /* 0: none */
	struct agent_elf_segment segs[AGENT_ELF_MAX_LOAD];
	size_t n_segs;
	uint16_t type; /* ET_EXEC, ET_DYN, ... */
	bool is_go;
	char debuglink[AGENT_DEBUGLINK_MAX];
};

/*
 * Walks a run of ELF notes (a PT_NOTE segment, a SHT_NOTE section, or
 * /sys/kernel/notes) in the host's byte order for NT_GNU_BUILD_ID with owner
 * "GNU". align is 4 or 8 (the segment's alignment). Returns the ID length
 * copied into ret_id (at most AGENT_BUILD_ID_MAX), 0 when there is none,
 * -EINVAL for notes that run past the buffer.
 */
int agent_elf_note_build_id(const void *buf, size_t len, size_t align, uint8_t *ret_id);

/* Reads an ELF file open at fd. Returns 0, -ENOEXEC when it is not ELF, -errno. */
int agent_elf_read_fd(int fd, struct agent_elf_info *ret);
/* The same over bytes in memory (the buffer is not modified). */
int agent_elf_read_mem(const void *buf, size_t len, struct agent_elf_info *ret);

/*
 * The ELF virtual address of the byte at file offset file_off, from the
 * PT_LOAD segment that holds it. For a mapping, file_off = addr - start +
 * map offset. Right for PIE, non-PIE, shared libraries and prelinked files,
 * because it never assumes the load bias. Returns 0 or -ENOENT when no
 * segment holds the offset.
 */
int agent_elf_offset_to_vaddr(const struct agent_elf_info *e, uint64_t file_off, uint64_t *ret_vaddr);

/*
 * 16-byte content hash of a file without a build ID: XXH3-128 over its first
 * and last AGENT_CONTENT_HASH_CHUNK bytes and its size (8 bytes, little
 * endian). Returns 0 or -errno.
 */
int agent_content_hash_fd(int fd, uint64_t size, uint8_t ret_id[16]);

#endif
