// SPDX-License-Identifier: Apache-2.0
/*
 * HotSpot JVMs: libjvm.so's exports and a JVM's tables read from its memory
 * (jvm.h).
 */
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <string.h>
#include <sys/uio.h>

#include "jvm.h"

int agent_jvm_file_syms(int fd, uint64_t ret_vaddr[AGENT_JVM_N_SYMS])
{
	Elf *elf;
	Elf_Scn *scn = NULL;
	unsigned found = 0;
	GElf_Shdr sh;

	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf)
		return -EINVAL;
	memset(ret_vaddr, 0, AGENT_JVM_N_SYMS * sizeof(*ret_vaddr));
	while ((scn = elf_nextscn(elf, scn))) {
		Elf_Data *d;
		size_t n;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM || !sh.sh_entsize)
			continue;
		d = elf_getdata(scn, NULL);
		if (!d)
			continue;
		n = sh.sh_size / sh.sh_entsize;
		for (size_t i = 0; i < n; i++) {
			GElf_Sym sym;
			const char *name;

			if (!gelf_getsym(d, (int)i, &sym) || sym.st_shndx == SHN_UNDEF || !sym.st_value)
				continue;
			name = elf_strptr(elf, sh.sh_link, sym.st_name);
			if (!name || strncmp(name, "gHotSpotVM", 10))
				continue;
			for (unsigned s = 0; s < AGENT_JVM_N_SYMS; s++) {
				if (!ret_vaddr[s] && !strcmp(name, agent_jvm_sym_name(s))) {
					ret_vaddr[s] = sym.st_value;
					found++;
				}
			}
		}
	}
	elf_end(elf);
	return found == AGENT_JVM_N_SYMS ? 0 : -ENOENT;
}

int agent_jvm_peek(uint32_t pid, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = { buf, len }, remote = { (void *)(uintptr_t)addr, len };
	ssize_t n = process_vm_readv((pid_t)pid, &local, 1, &remote, 1, 0);

	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EFAULT;
}

static int peek_cb(void *ctx, uint64_t addr, void *buf, size_t len)
{
	return agent_jvm_peek((uint32_t)(uintptr_t)ctx, addr, buf, len);
}

struct agent_jvm_tables *agent_jvm_tables_of(uint32_t pid, uint64_t bias, const uint64_t vaddr[AGENT_JVM_N_SYMS])
{
	struct agent_jvm_reader r = { peek_cb, (void *)(uintptr_t)pid };
	uint64_t syms[AGENT_JVM_N_SYMS];

	for (unsigned s = 0; s < AGENT_JVM_N_SYMS; s++)
		syms[s] = vaddr[s] + bias;
	return agent_jvm_tables_read(&r, syms);
}
