// SPDX-License-Identifier: Apache-2.0
/*
 * bench/agent-unwind's stand-in for "a program": maps the executable
 * segments of the given ELF files (an executable and the libraries it
 * needs) as the dynamic loader would, then burns CPU for SPIN seconds so the
 * agent samples it, reads its mappings and builds a table for every file,
 * then sleeps HOLD seconds so the tables and its unwind_procs entry are
 * still there when run.py reads the kernel's map memory. Real programs
 * mostly exit at once when started without input; this keeps the mappings
 * (which is all the unwinder loads tables for) without running their code.
 *
 * Usage: mapspin SPIN HOLD FILE...
 */
#include <elf.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static volatile uint64_t sink;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Maps every PT_LOAD with PF_X of the file read-execute at its file offset; returns how many. */
static int map_exec_segments(const char *path)
{
	Elf64_Ehdr eh;
	Elf64_Phdr ph;
	long page = sysconf(_SC_PAGESIZE);
	int fd = open(path, O_RDONLY | O_CLOEXEC), n = 0;

	if (fd < 0)
		return 0;
	if (pread(fd, &eh, sizeof(eh), 0) != sizeof(eh) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_phentsize != sizeof(ph))
		goto out;
	for (int i = 0; i < eh.e_phnum; i++) {
		uint64_t off, len;

		if (pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + (uint64_t)i * sizeof(ph))) != sizeof(ph))
			break;
		if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X) || !ph.p_filesz)
			continue;
		off = ph.p_offset & ~((uint64_t)page - 1);
		len = ph.p_offset + ph.p_filesz - off;
		if (mmap(NULL, len, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, (off_t)off) != MAP_FAILED)
			n++;
	}
out:
	close(fd);
	return n;
}

int main(int argc, char **argv)
{
	double spin = argc > 2 ? atof(argv[1]) : 0, hold = argc > 2 ? atof(argv[2]) : 0, end;
	uint64_t x = 1;
	int n = 0;

	if (argc < 4) {
		fprintf(stderr, "usage: mapspin SPIN HOLD FILE...\n");
		return 2;
	}
	for (int i = 3; i < argc; i++)
		n += map_exec_segments(argv[i]);
	printf("%d %d\n", (int)getpid(), n);
	fflush(stdout);
	end = now() + spin;
	while (now() < end)
		for (int i = 0; i < 100000; i++)
			x = x * 6364136223846793005ULL + 1442695040888963407ULL;
	sink = x;
	/* Sleep in pieces so a SIGTERM from run.py ends it at once (the default action). */
	end = now() + hold;
	while (now() < end)
		usleep(100000);
	return 0;
}
