// SPDX-License-Identifier: Apache-2.0
/*
 * Thread priorities and the CPUs there are (threads.h). On Linux the nice
 * value is per thread: setpriority(PRIO_PROCESS, tid) changes the calling
 * thread only, and raising it needs no privilege.
 */
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "macro.h"
#include "threads.h"

static _Thread_local bool background;

void gw_thread_background(void)
{
	pid_t tid;
	int nice;

	if (background)
		return;
	background = true;
	tid = gettid();
	errno = 0;
	nice = getpriority(PRIO_PROCESS, (id_t)tid);
	if (nice == -1 && errno != 0)
		return;
	(void)setpriority(PRIO_PROCESS, (id_t)tid, SR_MIN(nice + GW_BACKGROUND_NICE, 19));
}

/* The CPUs cpu.max in dir allows ("max": none, UINT_MAX). */
static unsigned cpu_max(const char *dir)
{
	char path[PATH_MAX], quota[32];
	unsigned long long period, q;
	unsigned n = UINT_MAX;
	FILE *f;

	if ((size_t)snprintf(path, sizeof(path), "%s/cpu.max", dir) >= sizeof(path) || !(f = fopen(path, "re")))
		return n;
	if (fscanf(f, "%31s %llu", quota, &period) == 2 && strcmp(quota, "max") != 0 && period > 0) {
		char *end;

		q = strtoull(quota, &end, 10);
		if (*end == '\0' && q > 0)
			n = (unsigned)SR_MIN((q + period - 1) / period, (unsigned long long)UINT_MAX);
	}
	fclose(f);
	return n;
}

unsigned gw_cpus_usable_in(const char *cgroup_dir, unsigned affinity)
{
	char dir[PATH_MAX];
	unsigned n = affinity ? affinity : 1;

	if (!cgroup_dir || !*cgroup_dir || strlen(cgroup_dir) >= sizeof(dir))
		return n;
	strcpy(dir, cgroup_dir);
	for (;;) { /* the cgroup and its ancestors, up to the mount point's */
		char *slash;

		n = SR_MIN(n, cpu_max(dir));
		slash = strrchr(dir, '/');
		if (!slash || strcmp(dir, "/sys/fs/cgroup") == 0 || slash == dir)
			break;
		*slash = '\0';
	}
	return n ? n : 1;
}

/* /sys/fs/cgroup plus the path of "0::PATH" in /proc/self/cgroup (cgroup v2), or "". */
static void own_cgroup(char *buf, size_t size)
{
	char line[PATH_MAX];
	FILE *f = fopen("/proc/self/cgroup", "re");

	buf[0] = '\0';
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "0::", 3) != 0)
			continue;
		line[strcspn(line, "\n")] = '\0';
		if ((size_t)snprintf(buf, size, "/sys/fs/cgroup%s", strcmp(line + 3, "/") == 0 ? "" : line + 3) >= size)
			buf[0] = '\0';
		break;
	}
	fclose(f);
}

unsigned gw_cpus_usable(void)
{
	static atomic_uint cached;
	unsigned n = atomic_load_explicit(&cached, memory_order_relaxed);
	char dir[PATH_MAX];
	cpu_set_t set;

	if (n)
		return n;
	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		n = (unsigned)CPU_COUNT(&set);
	if (!n) {
		long c = sysconf(_SC_NPROCESSORS_ONLN);
		n = c > 0 ? (unsigned)c : 1;
	}
	own_cgroup(dir, sizeof(dir));
	n = gw_cpus_usable_in(dir, n);
	atomic_store_explicit(&cached, n, memory_order_relaxed);
	return n;
}
