/* SPDX-License-Identifier: Apache-2.0 */
/* A receiver's decode thread (decode-thread.h). */
#include <errno.h>
#include <stddef.h>

#include "common/macro.h"
#include "decode-thread.h"

static void *thread_main(void *arg)
{
	struct gw_decode_thread *d = arg;

	pthread_mutex_lock(&d->lock);
	for (;;) {
		while (!d->stop && !d->todo)
			pthread_cond_wait(&d->cond, &d->lock);
		if (d->stop)
			break;
		struct gw_decode_job *j = d->todo;
		d->todo = j->next;
		if (!d->todo)
			d->todo_tail = NULL;
		pthread_mutex_unlock(&d->lock);
		d->run(j);
		pthread_mutex_lock(&d->lock);
		j->next = d->done;
		d->done = j;
		uv_async_send(&d->async);
	}
	pthread_mutex_unlock(&d->lock);
	return NULL;
}

/* On the loop: what the thread finished, oldest first. */
static void on_done(uv_async_t *a)
{
	struct gw_decode_thread *d = SR_CONTAINER_OF(a, struct gw_decode_thread, async);
	struct gw_decode_job *list, *rev = NULL;

	pthread_mutex_lock(&d->lock);
	list = d->done;
	d->done = NULL;
	pthread_mutex_unlock(&d->lock);
	while (list) {
		struct gw_decode_job *next = list->next;
		list->next = rev;
		rev = list;
		list = next;
	}
	while (rev) {
		struct gw_decode_job *next = rev->next;
		d->returned(rev, false);
		rev = next;
	}
}

int gw_decode_thread_start(struct gw_decode_thread *d, uv_loop_t *loop)
{
	int r;

	pthread_mutex_init(&d->lock, NULL);
	pthread_cond_init(&d->cond, NULL);
	d->lock_init = true;
	if ((r = uv_async_init(loop, &d->async, on_done)) < 0)
		return r;
	d->async_init = true;
	uv_unref((uv_handle_t *)&d->async);
	if ((r = pthread_create(&d->thread, NULL, thread_main, d)) != 0)
		return -r;
	d->started = true;
	return 0;
}

void gw_decode_thread_submit(struct gw_decode_thread *d, struct gw_decode_job *j)
{
	j->next = NULL;
	pthread_mutex_lock(&d->lock);
	if (d->todo_tail)
		d->todo_tail->next = j;
	else
		d->todo = j;
	d->todo_tail = j;
	pthread_cond_signal(&d->cond);
	pthread_mutex_unlock(&d->lock);
}

void gw_decode_thread_stop(struct gw_decode_thread *d, uv_close_cb close_cb)
{
	if (d->started) {
		pthread_mutex_lock(&d->lock);
		d->stop = true;
		pthread_cond_broadcast(&d->cond);
		pthread_mutex_unlock(&d->lock);
		pthread_join(d->thread, NULL);
		d->started = false;
	}
	for (struct gw_decode_job *lists[2] = { d->todo, d->done }, **l = lists; l < lists + 2; l++)
		for (struct gw_decode_job *j = *l, *next; j; j = next) {
			next = j->next;
			d->returned(j, true);
		}
	d->todo = d->todo_tail = d->done = NULL;
	if (d->async_init && !uv_is_closing((uv_handle_t *)&d->async))
		uv_close((uv_handle_t *)&d->async, close_cb);
}

void gw_decode_thread_free(struct gw_decode_thread *d)
{
	if (d->lock_init) {
		pthread_mutex_destroy(&d->lock);
		pthread_cond_destroy(&d->cond);
		d->lock_init = false;
	}
}
