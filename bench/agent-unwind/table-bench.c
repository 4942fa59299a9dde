// SPDX-License-Identifier: Apache-2.0
/*
 * bench/agent-unwind's table driver: for each ELF file, what the agent's
 * table unwinder would build and load for it. The first build of a file is
 * timed on its own (cold when run.py dropped the page cache just before),
 * the next --repeat builds give the warm time (their minimum). With --load
 * (root) the table is then loaded with the agent's own agent_unwind_rows_map()
 * (one exactly sized, mmapable BPF array, filled with a memcpy), and the
 * kernel's own memlock figure for that map is read from its fdinfo, so the
 * bytes per row include what the kernel charges beyond the values.
 *
 * One JSON object per file on stdout (run.py reads them).
 * Usage: table-bench [--load] [--repeat N] FILE...
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <linux/bpf.h>

#include "unwind-table.h"
#include "unwinder.h"

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* One build from the file's path (the open is part of what the agent pays). Returns 0 or -errno. */
static int build_once(const char *path, struct agent_unwind_table *ret, double *ret_ms)
{
	double t0 = now_ms();
	int fd = open(path, O_RDONLY | O_CLOEXEC), r;

	if (fd < 0)
		return -errno;
	r = agent_unwind_table_build_fd(fd, AGENT_UNWIND_MAX_ROWS_DEFAULT, ret);
	close(fd);
	*ret_ms = now_ms() - t0;
	return r;
}

/* The kernel's "memlock:" line of a map fd: what it charges for the map, overhead included. */
static long long fd_memlock(int fd)
{
	char path[64], line[256];
	long long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "memlock: %lld", &v) == 1)
			break;
	fclose(f);
	return v;
}

/*
 * Loads the table with the agent's own code (agent_unwind_rows_map(), without
 * publishing it in a map of maps). Returns the map's memlock bytes, or -errno.
 */
static long long load_table(const struct agent_unwind_table *t, double *ret_ms)
{
	double t0 = now_ms();
	long long r;
	int fd = agent_unwind_rows_map(t);

	if (fd < 0)
		return fd;
	*ret_ms = now_ms() - t0;
	r = fd_memlock(fd);
	close(fd);
	return r;
}

static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			putchar('\\');
		putchar(*s);
	}
	putchar('"');
}

int main(int argc, char **argv)
{
	int repeat = 3, load = 0, i = 1, rc = 0;

	for (; i < argc && argv[i][0] == '-'; i++) {
		if (strcmp(argv[i], "--load") == 0)
			load = 1;
		else if (strcmp(argv[i], "--repeat") == 0 && i + 1 < argc)
			repeat = atoi(argv[++i]);
		else {
			fprintf(stderr, "usage: table-bench [--load] [--repeat N] FILE...\n");
			return 2;
		}
	}
	for (; i < argc; i++) {
		struct agent_unwind_table t = { 0 };
		double cold_ms, warm_ms = 0, ms, load_ms = 0;
		long long memlock = 0;
		struct stat st;
		int r;

		printf("{\"path\": ");
		json_str(argv[i]);
		r = build_once(argv[i], &t, &cold_ms);
		if (r < 0) {
			/* Files without CFI are expected in a sweep of /usr: say why and go on. */
			printf(", \"error\": ");
			json_str(strerror(-r));
			printf("}\n");
			continue;
		}
		for (int k = 0; k < repeat; k++) {
			struct agent_unwind_table again = { 0 };

			if (build_once(argv[i], &again, &ms) == 0 && (warm_ms == 0 || ms < warm_ms))
				warm_ms = ms;
			agent_unwind_table_done(&again);
		}
		if (load) {
			memlock = load_table(&t, &load_ms);
			if (memlock < 0)
				rc = 1;
		}
		printf(", \"file_bytes\": %lld, \"fdes\": %u, \"fdes_bad\": %u, \"from_debug_frame\": %u, "
		       "\"rows\": %zu, \"rows_unsupported\": %u, \"cold_ms\": %.3f, \"warm_ms\": %.3f, "
		       "\"load_ms\": %.3f, \"memlock\": %lld}\n",
		       stat(argv[i], &st) == 0 ? (long long)st.st_size : -1LL, t.stats.fdes, t.stats.fdes_bad,
		       t.stats.from_debug_frame, t.n_rows, t.stats.rows_unsupported, cold_ms, warm_ms, load_ms,
		       memlock);
		fflush(stdout);
		agent_unwind_table_done(&t);
	}
	return rc;
}
