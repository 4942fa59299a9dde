/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A receiver's decode thread (decode-thread.c): requests too large to decode
 * on the loop without stalling every other connection (gunzip, decoding,
 * building the batch) are handed to one thread of the receiver's own (not
 * libuv's pool: symbolization fills it) and come back to the loop in the
 * order they finished, oldest first. The `agent` and `otlp` receivers each
 * have one. A job is the receiver's struct with a gw_decode_job in it.
 */
#ifndef SR_GW_DECODE_THREAD_H
#define SR_GW_DECODE_THREAD_H

#include <pthread.h>
#include <stdbool.h>

#include <uv.h>

struct gw_decode_job {
	struct gw_decode_job *next;
};

struct gw_decode_thread {
	/* On the thread: the CPU-heavy part of a job. */
	void (*run)(struct gw_decode_job *j);
	/* On the loop: a job back from the thread, to finish; or (discard: the receiver is going away) to free. */
	void (*returned)(struct gw_decode_job *j, bool discard);
	/* Its data is the owner's (the close callback of gw_decode_thread_stop reads it). */
	uv_async_t async;
	pthread_t thread;
	bool started, stop, lock_init, async_init;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct gw_decode_job *todo, *todo_tail, *done;
};

/*
 * Starts the thread (run and returned set). The async handle does not keep
 * the loop alive by itself: shutdown waits for jobs explicitly. 0 or -errno;
 * on failure, gw_decode_thread_stop() and _free() as after success.
 */
int gw_decode_thread_start(struct gw_decode_thread *d, uv_loop_t *loop);
/* Queues j for the thread (loop thread only). */
void gw_decode_thread_submit(struct gw_decode_thread *d, struct gw_decode_job *j);
/*
 * Joins the thread (after the job being decoded, bounded by the receiver's
 * size limits), gives back every job not finished with discard set, and
 * closes the async handle with close_cb (when it was opened).
 */
void gw_decode_thread_stop(struct gw_decode_thread *d, uv_close_cb close_cb);
/* Frees the lock, once the async handle is closed. */
void gw_decode_thread_free(struct gw_decode_thread *d);

#endif
