// SPDX-License-Identifier: Apache-2.0
/*
 * ELF identity and address math: build-ID notes (4- and 8-byte aligned,
 * truncated), PT_LOAD-based file offset to virtual address for PIE, non-PIE
 * and prelinked layouts, a synthetic ELF read through libelf, the content
 * hash, and this test binary itself.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/elfinfo.h"
#include "agent/parse-limits.h"
#include "agent/unwind-table.h"

static size_t put_note(uint8_t *buf, size_t align, uint32_t type, const char *name, const uint8_t *desc,
		       uint32_t descsz)
{
	uint32_t namesz = (uint32_t)strlen(name) + 1;
	size_t off = 0;

	memcpy(buf + off, &namesz, 4);
	memcpy(buf + off + 4, &descsz, 4);
	memcpy(buf + off + 8, &type, 4);
	off += 12;
	memcpy(buf + off, name, namesz);
	off = (off + namesz + align - 1) & ~(align - 1);
	memcpy(buf + off, desc, descsz);
	off = (off + descsz + align - 1) & ~(align - 1);
	return off;
}

static void test_notes(void **state)
{
	uint8_t buf[256] = { 0 }, id[AGENT_BUILD_ID_MAX];
	static const uint8_t bid[20] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20 };
	size_t len;

	(void)state;
	/* An ABI tag first, then the build ID, 4-aligned. */
	len = put_note(buf, 4, 1, "GNU", (const uint8_t *)"\0\0\0\0\3\0\0\0\2\0\0\0\0\0\0\0", 16);
	len += put_note(buf + len, 4, 3, "GNU", bid, 20);
	assert_int_equal(agent_elf_note_build_id(buf, len, 4, id), 20);
	assert_memory_equal(id, bid, 20);
	/* Truncated anywhere inside: an error or nothing, never a read past the end. */
	for (size_t cut = 0; cut < len; cut++) {
		int r = agent_elf_note_build_id(buf, cut, 4, id);
		assert_true(r == -EINVAL || r == 0);
	}
	/* A build ID with another owner is not one. */
	memset(buf, 0, sizeof(buf));
	len = put_note(buf, 4, 3, "Go", bid, 20);
	assert_int_equal(agent_elf_note_build_id(buf, len, 4, id), 0);
	/* 8-byte alignment (PT_NOTE with p_align 8). */
	memset(buf, 0, sizeof(buf));
	len = put_note(buf, 8, 5, "GNU", bid, 12);
	len += put_note(buf + len, 8, 3, "GNU", bid, 16);
	assert_int_equal(agent_elf_note_build_id(buf, len, 8, id), 16);
	/* A huge descsz is rejected. */
	uint32_t huge = 0xfffffff0;
	memcpy(buf + 4, &huge, 4);
	assert_int_equal(agent_elf_note_build_id(buf, len, 8, id), -EINVAL);
}

static void test_offset_to_vaddr(void **state)
{
	struct agent_elf_info pie = { 0 }, nopie = { 0 }, prelinked = { 0 };
	uint64_t v;

	(void)state;
	/* A typical PIE: text at file offset 0x1000 maps at vaddr 0x1000. */
	pie.segs[0] =
		(struct agent_elf_segment){ .vaddr = 0, .memsz = 0x628, .offset = 0, .filesz = 0x628, .flags = PF_R };
	pie.segs[1] = (struct agent_elf_segment){
		.vaddr = 0x1000, .memsz = 0x2d5, .offset = 0x1000, .filesz = 0x2d5, .flags = PF_R | PF_X
	};
	pie.segs[2] = (struct agent_elf_segment){
		.vaddr = 0x3de8, .memsz = 0x260, .offset = 0x2de8, .filesz = 0x258, .flags = PF_R | PF_W
	};
	pie.n_segs = 3;
	assert_int_equal(agent_elf_offset_to_vaddr(&pie, 0x12b4, &v), 0);
	assert_int_equal(v, 0x12b4);
	assert_int_equal(agent_elf_offset_to_vaddr(&pie, 0x2df0, &v), 0);
	assert_int_equal(v, 0x3df0); /* data: vaddr differs from the offset */
	assert_int_equal(agent_elf_offset_to_vaddr(&pie, 0x9000, &v), -ENOENT);

	/* Non-PIE: vaddr base 0x400000. */
	nopie.segs[0] = (struct agent_elf_segment){
		.vaddr = 0x401000, .memsz = 0x2000, .offset = 0x1000, .filesz = 0x2000, .flags = PF_R | PF_X
	};
	nopie.n_segs = 1;
	assert_int_equal(agent_elf_offset_to_vaddr(&nopie, 0x1234, &v), 0);
	assert_int_equal(v, 0x401234);

	/* Prelinked library: text not page-aligned to its offset. */
	prelinked.segs[0] = (struct agent_elf_segment){
		.vaddr = 0x3a000000, .memsz = 0x1000, .offset = 0, .filesz = 0x1000, .flags = PF_R
	};
	prelinked.segs[1] = (struct agent_elf_segment){
		.vaddr = 0x3a001040, .memsz = 0x5000, .offset = 0x1040, .filesz = 0x5000, .flags = PF_R | PF_X
	};
	prelinked.n_segs = 2;
	assert_int_equal(agent_elf_offset_to_vaddr(&prelinked, 0x2000, &v), 0);
	assert_int_equal(v, 0x3a002000);
	/* The page both segments share in the file: the executable one wins. */
	prelinked.segs[0].filesz = 0x1048;
	assert_int_equal(agent_elf_offset_to_vaddr(&prelinked, 0x1044, &v), 0);
	assert_int_equal(v, 0x3a001044);
}

/* A minimal ELF64 file: header, two PT_LOAD, one PT_NOTE with a build ID. */
static size_t make_elf(uint8_t *buf, size_t size, bool with_note)
{
	Elf64_Ehdr *eh = (Elf64_Ehdr *)buf;
	Elf64_Phdr *ph = (Elf64_Phdr *)(buf + sizeof(*eh));
	static const uint8_t bid[20] = { 0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 };
	size_t note_off = sizeof(*eh) + 3 * sizeof(*ph), note_len;

	memset(buf, 0, size);
	memcpy(eh->e_ident, ELFMAG, SELFMAG);
	eh->e_ident[EI_CLASS] = ELFCLASS64;
	eh->e_ident[EI_DATA] = ELFDATA2LSB;
	eh->e_ident[EI_VERSION] = EV_CURRENT;
	eh->e_type = ET_DYN;
	eh->e_machine = EM_X86_64;
	eh->e_version = EV_CURRENT;
	eh->e_phoff = sizeof(*eh);
	eh->e_ehsize = sizeof(*eh);
	eh->e_phentsize = sizeof(*ph);
	eh->e_phnum = with_note ? 3 : 2;
	note_len = put_note(buf + note_off, 4, 3, "GNU", bid, 20);
	ph[0] = (Elf64_Phdr){ .p_type = PT_LOAD,
			      .p_flags = PF_R,
			      .p_offset = 0,
			      .p_vaddr = 0,
			      .p_filesz = 0x400,
			      .p_memsz = 0x400,
			      .p_align = 0x1000 };
	ph[1] = (Elf64_Phdr){ .p_type = PT_LOAD,
			      .p_flags = PF_R | PF_X,
			      .p_offset = 0x1000,
			      .p_vaddr = 0x1000,
			      .p_filesz = 0x100,
			      .p_memsz = 0x100,
			      .p_align = 0x1000 };
	ph[2] = (Elf64_Phdr){ .p_type = PT_NOTE,
			      .p_flags = PF_R,
			      .p_offset = note_off,
			      .p_vaddr = note_off,
			      .p_filesz = note_len,
			      .p_memsz = note_len,
			      .p_align = 4 };
	return 0x1100;
}

static void test_synthetic_elf(void **state)
{
	static uint8_t buf[0x1100];
	struct agent_elf_info e;
	uint64_t v;

	(void)state;
	make_elf(buf, sizeof(buf), true);
	assert_int_equal(agent_elf_read_mem(buf, sizeof(buf), &e), 0);
	assert_int_equal(e.type, ET_DYN);
	assert_int_equal(e.n_segs, 2);
	assert_int_equal(e.build_id_len, 20);
	assert_int_equal(e.build_id[0], 0xde);
	assert_int_equal(agent_elf_offset_to_vaddr(&e, 0x1010, &v), 0);
	assert_int_equal(v, 0x1010);
	make_elf(buf, sizeof(buf), false);
	assert_int_equal(agent_elf_read_mem(buf, sizeof(buf), &e), 0);
	assert_int_equal(e.build_id_len, 0);
	assert_int_equal(agent_elf_read_mem("not an elf file", 15, &e), -ENOEXEC);
}

/* Reads a file of the fuzz corpus (tests/fuzz/corpus/DIR/NAME) into a memfd. */
static int corpus_fd(const char *dir, const char *name)
{
	const char *fixtures = getenv("SR_TEST_FIXTURES");
	char path[4096], buf[65536];
	int in, fd;
	ssize_t n;

	if (!fixtures)
		return -1;
	snprintf(path, sizeof(path), "%s/../fuzz/corpus/%s/%s", fixtures, dir, name);
	in = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(in >= 0);
	fd = memfd_create(name, MFD_CLOEXEC);
	assert_true(fd >= 0);
	while ((n = read(in, buf, sizeof(buf))) > 0)
		assert_int_equal(write(fd, buf, (size_t)n), n);
	close(in);
	return fd;
}

/* A note run at an offset misaligned for its alignment is refused and counted, never copied. */
static void test_misaligned_note_refused(void **state)
{
	uint64_t before[AGENT_PARSE_REFUSAL__MAX], after[AGENT_PARSE_REFUSAL__MAX];
	struct agent_elf_info e;
	int fd;

	(void)state;
	fd = corpus_fd("elfnote", "misaligned-note");
	if (fd < 0)
		skip();
	agent_parse_refusals(before);
	assert_int_equal(agent_elf_read_fd(fd, &e), 0);
	assert_int_equal(e.build_id_len, 0);
	agent_parse_refusals(after);
	assert_int_equal(after[AGENT_PARSE_NOTE], before[AGENT_PARSE_NOTE] + 1);
	close(fd);
}

/* A compressed .debug_frame that declares (and would inflate to) 60 MB is refused before libelf allocates it. */
static void test_zlib_bomb_refused(void **state)
{
	uint64_t before[AGENT_PARSE_REFUSAL__MAX], after[AGENT_PARSE_REFUSAL__MAX];
	struct agent_unwind_table t;
	int fd;

	(void)state;
	fd = corpus_fd("unwind-table", "zlib-bomb-debug-frame");
	if (fd < 0)
		skip();
	agent_parse_refusals(before);
	assert_int_equal(agent_unwind_table_build_fd(fd, AGENT_UNWIND_MAX_ROWS_DEFAULT, &t), -ENOENT);
	agent_parse_refusals(after);
	assert_int_equal(after[AGENT_PARSE_INFLATED_SIZE], before[AGENT_PARSE_INFLATED_SIZE] + 1);
	close(fd);
}

/* Counts of headers past the limits, in the ELF header or in section header 0, are refused before elf_begin(). */
static void test_header_counts_refused(void **state)
{
	static uint8_t buf[0x1100];
	struct agent_elf_info e;
	Elf64_Ehdr *eh = (Elf64_Ehdr *)buf;

	(void)state;
	make_elf(buf, sizeof(buf), true);
	eh->e_phnum = AGENT_PARSE_MAX_PHDRS + 1;
	eh->e_phoff = 0;
	assert_int_equal(agent_elf_read_mem(buf, sizeof(buf), &e), -E2BIG);
	make_elf(buf, sizeof(buf), true);
	assert_int_equal(agent_elf_preflight_mem(buf, sizeof(buf)), 0);
}

static void test_self_and_hash(void **state)
{
	struct agent_elf_info e;
	uint8_t h1[16], h2[16];
	char path[] = "/tmp/sr-test-elf-XXXXXX";
	int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC), tfd;
	static uint8_t data[10000];

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(agent_elf_read_fd(fd, &e), 0);
	assert_true(e.n_segs >= 2);
	assert_true(e.build_id_len == 20); /* the toolchain's default --build-id=sha1 */
	close(fd);

	/* The content hash depends on the first and last 4 KiB and the size, not the middle. */
	tfd = mkstemp(path);
	assert_true(tfd >= 0);
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 7);
	assert_int_equal(write(tfd, data, sizeof(data)), (ssize_t)sizeof(data));
	assert_int_equal(agent_content_hash_fd(tfd, sizeof(data), h1), 0);
	assert_int_equal(pwrite(tfd, "X", 1, 5000), 1); /* the middle */
	assert_int_equal(agent_content_hash_fd(tfd, sizeof(data), h2), 0);
	assert_memory_equal(h1, h2, 16);
	assert_int_equal(pwrite(tfd, "X", 1, 9999), 1); /* the end */
	assert_int_equal(agent_content_hash_fd(tfd, sizeof(data), h2), 0);
	assert_memory_not_equal(h1, h2, 16);
	/* A file shorter than one chunk hashes too. */
	assert_int_equal(agent_content_hash_fd(tfd, 100, h2), 0);
	close(tfd);
	unlink(path);
}

static int open_fixture(const char *name)
{
	const char *dir = getenv("SR_TEST_FIXTURES");
	char path[4096];

	if (!dir)
		return -1;
	snprintf(path, sizeof(path), "%s/agent/%s", dir, name);
	return open(path, O_RDONLY | O_CLOEXEC);
}

/* Real files from the toolchain (tests/fixtures/agent); expected values from readelf -n / -l. */
static void test_fixtures(void **state)
{
	static const uint8_t sha1[20] = { 0x2b, 0x32, 0xc2, 0x8e, 0x6d, 0x31, 0xb9, 0x04, 0x04, 0x0e,
					  0x38, 0xee, 0x08, 0x24, 0x56, 0xeb, 0xe7, 0x96, 0x92, 0xf2 };
	static const uint8_t md5[16] = { 0xf1, 0x92, 0xb7, 0x62, 0x90, 0x4d, 0xc2, 0xe2,
					 0xf2, 0x95, 0x81, 0x8f, 0x81, 0xd2, 0xc0, 0xe2 };
	struct agent_elf_info e;
	uint8_t h[16];
	uint64_t v;
	int fd;

	(void)state;
	if (!getenv("SR_TEST_FIXTURES"))
		skip();
	/* Static non-PIE, sha1 build ID; text at 0x401000 from file offset 0x1000. */
	fd = open_fixture("elf-static-buildid");
	assert_true(fd >= 0);
	assert_int_equal(agent_elf_read_fd(fd, &e), 0);
	close(fd);
	assert_int_equal(e.type, ET_EXEC);
	assert_int_equal(e.build_id_len, 20);
	assert_memory_equal(e.build_id, sha1, 20);
	assert_int_equal(e.n_segs, 4);
	assert_int_equal(agent_elf_offset_to_vaddr(&e, 0x1002, &v), 0);
	assert_int_equal(v, 0x401002);
	/* Shared object, md5 build ID (16 bytes); data segment's vaddr differs from its offset. */
	fd = open_fixture("elf-shared-md5.so");
	assert_true(fd >= 0);
	assert_int_equal(agent_elf_read_fd(fd, &e), 0);
	close(fd);
	assert_int_equal(e.type, ET_DYN);
	assert_int_equal(e.build_id_len, 16);
	assert_memory_equal(e.build_id, md5, 16);
	assert_int_equal(agent_elf_offset_to_vaddr(&e, 0x2f60, &v), 0);
	assert_int_equal(v, 0x3f60);
	/* No build ID: the content hash is what identifies it, and it is stable. */
	fd = open_fixture("elf-static-nobuildid");
	assert_true(fd >= 0);
	assert_int_equal(agent_elf_read_fd(fd, &e), 0);
	assert_int_equal(e.build_id_len, 0);
	assert_int_equal(agent_content_hash_fd(fd, 12760, h), 0);
	uint8_t h2[16];
	assert_int_equal(agent_content_hash_fd(fd, 12760, h2), 0);
	assert_memory_equal(h, h2, 16);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_notes),
		cmocka_unit_test(test_offset_to_vaddr),
		cmocka_unit_test(test_synthetic_elf),
		cmocka_unit_test(test_self_and_hash),
		cmocka_unit_test(test_fixtures),
		cmocka_unit_test(test_misaligned_note_refused),
		cmocka_unit_test(test_zlib_bomb_refused),
		cmocka_unit_test(test_header_counts_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
