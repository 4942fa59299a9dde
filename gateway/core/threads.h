/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Thread priorities (threads.c). The gateway answers agents on its loop and
 * decode threads; batch work on libuv's thread pool (symbolizing, encoding
 * and compressing exports) can wait. When the gateway's CPU is short (a
 * container's CPU limit, a busy node), background work runs at a lower
 * priority, so that agents get their answers in time instead of timing out
 * and resending: what waits is the export, whose queue and the memory
 * limiter bound and push back.
 */
#ifndef SR_GW_THREADS_H
#define SR_GW_THREADS_H

/* How much nicer than the process a background thread runs (setpriority(2)). */
#define GW_BACKGROUND_NICE 10

/*
 * Makes the calling thread a background thread: its nice value (a new
 * thread starts at its creator's) grows by GW_BACKGROUND_NICE, to at most
 * 19, once per thread (a thread-local flag; later calls cost nothing). Best effort: a failure
 * leaves the priority as it was.
 */
void gw_thread_background(void);

#endif
