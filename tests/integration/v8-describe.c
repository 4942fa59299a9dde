// SPDX-License-Identifier: Apache-2.0
/*
 * v8-describe PID SFI...: reads the node binary's V8 metadata (/proc/PID/exe)
 * and names each tagged SharedFunctionInfo address (hex) of the live process
 * with agent_v8_describe(), through process_vm_readv. For
 * tests/integration/agent-v8-names.py, which gets the addresses from node's
 * own %DebugPrint. Prints "name<TAB>script<TAB>line" per address, or
 * "error<TAB>..." when it cannot.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "agent/v8.h"

static int read_mem(void *ctx, uint64_t addr, void *buf, size_t len)
{
	pid_t pid = *(pid_t *)ctx;
	struct iovec local = { buf, len }, remote = { (void *)(uintptr_t)addr, len };
	ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);

	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EIO;
}

int main(int argc, char **argv)
{
	struct agent_v8_meta m;
	char exe[64];
	pid_t pid;
	Elf *elf;
	int fd, r;

	if (argc < 3) {
		fprintf(stderr, "usage: v8-describe PID SFI...\n");
		return 2;
	}
	pid = (pid_t)atoi(argv[1]);
	snprintf(exe, sizeof(exe), "/proc/%d/exe", pid);
	fd = open(exe, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || elf_version(EV_CURRENT) == EV_NONE || !(elf = elf_begin(fd, ELF_C_READ_MMAP, NULL))) {
		fprintf(stderr, "v8-describe: cannot read %s\n", exe);
		return 1;
	}
	r = agent_v8_meta_read(elf, &m);
	if (r < 0) {
		fprintf(stderr, "v8-describe: no usable V8 metadata in %s: %s\n", exe, strerror(-r));
		return 1;
	}
	printf("# js_function_types %u-%u sfi %u scope_info %u off_fp_function %d\n", m.type_js_function_first,
	       m.type_js_function_last, m.type_sfi, m.type_scope_info, m.off_fp_function);
	for (int i = 2; i < argc; i++) {
		struct agent_v8_function f;

		r = agent_v8_describe(&m, read_mem, &pid, strtoull(argv[i], NULL, 16), &f);
		if (r < 0)
			printf("error\t%s\n", strerror(-r));
		else
			printf("%s\t%s\t%u\n", f.name, f.script, f.start_line);
	}
	elf_end(elf);
	close(fd);
	return 0;
}
