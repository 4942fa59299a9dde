// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <gelf.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "parse-limits.h"

const char *const agent_parse_refusal_names[AGENT_PARSE_REFUSAL__MAX] = {
	[AGENT_PARSE_HEADERS] = "headers",
	[AGENT_PARSE_SECTION_SIZE] = "section_size",
	[AGENT_PARSE_INFLATED_SIZE] = "inflated_size",
	[AGENT_PARSE_INFLATE_RATIO] = "inflate_ratio",
	[AGENT_PARSE_NOTE] = "note",
	[AGENT_PARSE_XZ] = "xz",
	[AGENT_PARSE_NOT_REGULAR] = "not_regular",
	[AGENT_PARSE_ESCAPE] = "path_escape",
	[AGENT_PARSE_IDENTITY] = "identity",
};

static struct agent_parse_limits limits = {
	.max_section_bytes = AGENT_PARSE_MAX_SECTION_BYTES_DEFAULT,
	.max_inflated_bytes = AGENT_PARSE_MAX_INFLATED_BYTES_DEFAULT,
};

static _Atomic uint64_t refusals[AGENT_PARSE_REFUSAL__MAX];

const struct agent_parse_limits *agent_parse_limits(void)
{
	return &limits;
}

void agent_parse_limits_set(const struct agent_parse_limits *l)
{
	if (l->max_section_bytes)
		limits.max_section_bytes = l->max_section_bytes;
	if (l->max_inflated_bytes)
		limits.max_inflated_bytes = l->max_inflated_bytes;
}

void agent_parse_refused(enum agent_parse_refusal why)
{
	if ((unsigned)why < AGENT_PARSE_REFUSAL__MAX)
		atomic_fetch_add_explicit(&refusals[why], 1, memory_order_relaxed);
}

void agent_parse_refusals(uint64_t ret[AGENT_PARSE_REFUSAL__MAX])
{
	for (int i = 0; i < AGENT_PARSE_REFUSAL__MAX; i++)
		ret[i] = atomic_load_explicit(&refusals[i], memory_order_relaxed);
}

static uint64_t rd(const uint8_t *p, size_t n, bool le)
{
	uint64_t v = 0;

	for (size_t i = 0; i < n; i++)
		v |= (uint64_t)p[le ? i : n - 1 - i] << (8 * (le ? i : n - 1 - i));
	return v;
}

/* Reads len bytes at off from a file (fd >= 0) or from mem; -ENOEXEC when they are not all there. */
static int read_at(int fd, const uint8_t *mem, uint64_t size, uint64_t off, void *buf, size_t len)
{
	ssize_t n;

	if (off > size || size - off < len)
		return -ENOEXEC;
	if (fd < 0) {
		memcpy(buf, mem + off, len);
		return 0;
	}
	n = pread(fd, buf, len, (off_t)off);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -ENOEXEC;
}

static int preflight(int fd, const uint8_t *mem, uint64_t size)
{
	uint8_t eh[64], sh0[64];
	uint64_t phoff, shoff, phnum, shnum, shstrndx, strsize;
	size_t phentsize, shentsize;
	bool is64, le;
	int r;

	r = read_at(fd, mem, size, 0, eh, 52);
	if (r < 0)
		return r;
	if (memcmp(eh, ELFMAG, SELFMAG) != 0 || (eh[EI_CLASS] != ELFCLASS32 && eh[EI_CLASS] != ELFCLASS64) ||
	    (eh[EI_DATA] != ELFDATA2LSB && eh[EI_DATA] != ELFDATA2MSB))
		return -ENOEXEC;
	is64 = eh[EI_CLASS] == ELFCLASS64;
	le = eh[EI_DATA] == ELFDATA2LSB;
	if (is64 && (r = read_at(fd, mem, size, 0, eh, 64)) < 0)
		return r;
	if (is64) {
		phoff = rd(eh + 32, 8, le);
		shoff = rd(eh + 40, 8, le);
		phnum = rd(eh + 56, 2, le);
		shnum = rd(eh + 60, 2, le);
		shstrndx = rd(eh + 62, 2, le);
		phentsize = sizeof(Elf64_Phdr);
		shentsize = sizeof(Elf64_Shdr);
	} else {
		phoff = rd(eh + 28, 4, le);
		shoff = rd(eh + 32, 4, le);
		phnum = rd(eh + 44, 2, le);
		shnum = rd(eh + 48, 2, le);
		shstrndx = rd(eh + 50, 2, le);
		phentsize = sizeof(Elf32_Phdr);
		shentsize = sizeof(Elf32_Shdr);
	}
	/* Counts too large for the ELF header are in section header 0: sh_size and sh_info. */
	if (shoff && (shnum == 0 || phnum == PN_XNUM || shstrndx == SHN_XINDEX)) {
		r = read_at(fd, mem, size, shoff, sh0, shentsize);
		if (r < 0)
			return r;
		if (shnum == 0)
			shnum = is64 ? rd(sh0 + 32, 8, le) : rd(sh0 + 20, 4, le);
		if (phnum == PN_XNUM)
			phnum = is64 ? rd(sh0 + 44, 4, le) : rd(sh0 + 28, 4, le);
		if (shstrndx == SHN_XINDEX)
			shstrndx = is64 ? rd(sh0 + 40, 4, le) : rd(sh0 + 24, 4, le);
	}
	if (phnum > AGENT_PARSE_MAX_PHDRS || shnum > AGENT_PARSE_MAX_SECTIONS) {
		agent_parse_refused(AGENT_PARSE_HEADERS);
		return -E2BIG;
	}
	if ((phnum && (phoff > size || (size - phoff) / phentsize < phnum)) ||
	    (shnum && (shoff > size || (size - shoff) / shentsize < shnum)))
		return -ENOEXEC;
	/* The section names: every elf_strptr() reads all of them into memory at once. */
	if (shnum && shstrndx && shstrndx < shnum) {
		r = read_at(fd, mem, size, shoff + shstrndx * shentsize, sh0, shentsize);
		if (r < 0)
			return r;
		strsize = is64 ? rd(sh0 + 32, 8, le) : rd(sh0 + 20, 4, le);
		r = agent_parse_check_section(strsize);
		if (r < 0)
			return r;
	}
	return 0;
}

int agent_elf_preflight_fd(int fd)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return -errno;
	return preflight(fd, NULL, (uint64_t)st.st_size);
}

int agent_elf_preflight_mem(const void *buf, size_t len)
{
	return preflight(-1, buf, len);
}

int agent_parse_check_section(uint64_t size)
{
	if (size > limits.max_section_bytes) {
		agent_parse_refused(AGENT_PARSE_SECTION_SIZE);
		return -E2BIG;
	}
	return 0;
}

int agent_parse_check_inflate(uint64_t ch_size, uint64_t csize)
{
	if (ch_size > limits.max_inflated_bytes) {
		agent_parse_refused(AGENT_PARSE_INFLATED_SIZE);
		return -E2BIG;
	}
	if (ch_size / AGENT_PARSE_MAX_INFLATE_RATIO > csize) {
		agent_parse_refused(AGENT_PARSE_INFLATE_RATIO);
		return -E2BIG;
	}
	return 0;
}

int agent_parse_section_data(Elf_Scn *scn, bool inflate, Elf_Data **ret_data)
{
	GElf_Shdr sh;
	GElf_Chdr ch;
	Elf_Data *d;
	int r;

	if (!gelf_getshdr(scn, &sh))
		return -EINVAL;
	if (sh.sh_type == SHT_NOBITS)
		return -ENODATA;
	r = agent_parse_check_section(sh.sh_size);
	if (r < 0)
		return r;
	if (sh.sh_flags & SHF_COMPRESSED) {
		if (!inflate)
			return -ENOTSUP;
		/* gelf_getchdr() reads the compressed bytes only (within the check above); elf_compress() then allocates ch_size. */
		if (!gelf_getchdr(scn, &ch))
			return -EINVAL;
		r = agent_parse_check_inflate(ch.ch_size, sh.sh_size);
		if (r < 0)
			return r;
		if (elf_compress(scn, 0, 0) < 0)
			return -EINVAL;
	}
	d = elf_getdata(scn, NULL);
	if (!d)
		return -EINVAL;
	*ret_data = d;
	return 0;
}
