// SPDX-License-Identifier: Apache-2.0
/*
 * Thread priorities (threads.h). On Linux the nice value is per thread:
 * setpriority(PRIO_PROCESS, tid) changes the calling thread only, and
 * raising it needs no privilege.
 */
#include <errno.h>
#include <stdbool.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/macro.h"
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
