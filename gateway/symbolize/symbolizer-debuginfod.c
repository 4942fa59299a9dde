/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The symbolizer's debuginfod fetches (symbolizer-private.h): the queue of
 * executables to fetch, the fetch threads (libdebuginfod: debuginfo, else the
 * executable, by build ID, each bounded by debuginfod_timeout and aborted at
 * shutdown), what a fetched file leaves in the disk store, and the
 * environment libdebuginfod reads its settings from.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <elfutils/debuginfod.h>

#include "common/clock.h"
#include "disk-store.h"
#include "symbolize.h"
#include "symbolizer-private.h"
#include "symtab.h"

/* ---- debuginfod ---- */

struct fetch_ctx {
	struct gw_symbolizer *s;
	uint64_t deadline_ns;
};

static int fetch_progress(debuginfod_client *c, long a, long b)
{
	struct fetch_ctx *ctx = debuginfod_get_user_data(c);

	/* Non-zero aborts the transfer: at shutdown, or past our own deadline. */
	return atomic_load(&ctx->s->stopping) || sr_now_ns() > ctx->deadline_ns;
}

static void fetch_one(struct gw_symbolizer *s, debuginfod_client *c, struct fetch_ctx *ctx, const uint8_t *id,
		      size_t id_len, const uint8_t *bid, size_t bid_len)
{
	struct gw_sym_handle *h = NULL;
	char hex[2 * ID_MAX + 1], stored[PATH_MAX];
	char *path = NULL;
	int fd;

	STAT_INC(s, debuginfod_fetches);
	ctx->deadline_ns = sr_now_ns() + s->cfg.debuginfod_timeout_ns;
	fd = debuginfod_find_debuginfo(c, bid, (int)bid_len, &path);
	if (fd < 0 && !atomic_load(&s->stopping) && sr_now_ns() < ctx->deadline_ns) {
		free(path);
		path = NULL;
		fd = debuginfod_find_executable(c, bid, (int)bid_len, &path);
	}
	if (fd >= 0) {
		int r = gw_sym_handle_from_fd(s, fd, NULL, bid, bid_len, &h);
		if (r == 0 && s->store) {
			gw_sym_hex(id, id_len, hex, sizeof(hex));
			if (path && h->dw == NULL) {
				/* Names only: the table is all we keep; libdebuginfod's copy is dropped. */
				(void)unlink(path);
			} else if (path) {
				(void)gw_disk_store__adopt_debug(s->store, hex, path, stored, sizeof(stored));
			}
			void *buf;
			size_t len;
			if (h->tab && gw_symtab__serialize(h->tab, &buf, &len) == 0) {
				(void)gw_disk_store__write_table(s->store, GW_DISK_STORE_TRUSTED, hex, buf, len);
				free(buf);
			}
		}
	}
	free(path);
	if (h)
		STAT_INC(s, debuginfod_ok);
	else
		STAT_INC(s, debuginfod_failed);

	/* The entry may have changed meanwhile (an upload made it READY, then it was evicted). */
	pthread_mutex_lock(&s->lock);
	struct entry *e = gw_sym_map_find(s, id, id_len, gw_sym_id_hash(id, id_len));
	/* What debuginfod found outranks an agent's upload that came meanwhile. */
	if (e && (e->state == E_FETCHING || (h && e->state == E_READY && e->h && e->h->from_upload))) {
		if (h)
			gw_sym_set_ready(s, e, h);
		else
			gw_sym_set_wanted(s, e, sr_now_ns());
		h = NULL;
	}
	pthread_mutex_unlock(&s->lock);
	gw_sym_handle__release(h);
	gw_sym_notify(s);
}

void *gw_sym_fetch_thread(void *arg)
{
	struct gw_symbolizer *s = arg;
	struct fetch_ctx ctx = { .s = s };
	debuginfod_client *c = debuginfod_begin();

	if (c) {
		debuginfod_set_user_data(c, &ctx);
		debuginfod_set_progressfn(c, fetch_progress);
	}
	for (;;) {
		struct entry *e;
		uint8_t id[ID_MAX], bid[ID_MAX];
		size_t id_len, bid_len;

		pthread_mutex_lock(&s->lock);
		while (!atomic_load(&s->stopping) && !s->q_head)
			pthread_cond_wait(&s->fetch_cond, &s->lock);
		if (atomic_load(&s->stopping)) {
			pthread_mutex_unlock(&s->lock);
			break;
		}
		e = s->q_head;
		s->q_head = e->qnext;
		if (!s->q_head)
			s->q_tail = NULL;
		e->qnext = NULL;
		s->q_len--;
		if (!c) {
			/* No client (out of memory at start): everything goes to the agent. */
			gw_sym_set_wanted(s, e, sr_now_ns());
			pthread_mutex_unlock(&s->lock);
			gw_sym_notify(s);
			continue;
		}
		id_len = e->id_len;
		bid_len = e->build_id_len;
		memcpy(id, e->id, id_len);
		memcpy(bid, e->build_id, bid_len);
		pthread_mutex_unlock(&s->lock);
		fetch_one(s, c, &ctx, id, id_len, bid, bid_len);
	}
	if (c)
		debuginfod_end(c);
	return NULL;
}

bool gw_sym_enqueue_fetch(struct gw_symbolizer *s, struct entry *e)
{
	if (s->n_threads == 0 || e->build_id_len == 0 || s->q_len >= GW_SYM_FETCH_QUEUE_MAX)
		return false;
	e->state = E_FETCHING;
	e->qnext = NULL;
	if (s->q_tail)
		s->q_tail->qnext = e;
	else
		s->q_head = e;
	s->q_tail = e;
	s->q_len++;
	pthread_cond_signal(&s->fetch_cond);
	return true;
}

char *gw_sym_join_urls(const char *const *urls, size_t n)
{
	size_t len = 1;
	char *out;

	for (size_t i = 0; i < n; i++)
		len += strlen(urls[i]) + 1;
	out = calloc(1, len);
	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		if (i)
			strcat(out, " ");
		strcat(out, urls[i]);
	}
	return out;
}

/*
 * libdebuginfod reads its settings from the environment only (elfutils 0.188
 * has no API for URLs or timeouts), so they are set here, once, when the
 * processor is created on the main thread before any worker thread reads
 * the environment.
 */
int gw_sym_setup_debuginfod_env(struct gw_symbolizer *s)
{
	char buf[64];
	uint64_t secs = (s->cfg.debuginfod_timeout_ns + NSEC_PER_SEC - 1) / NSEC_PER_SEC;

	if (setenv(DEBUGINFOD_URLS_ENV_VAR, s->debuginfod_urls, 1) < 0)
		return -errno;
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)(secs ? secs : 1));
	if (setenv(DEBUGINFOD_TIMEOUT_ENV_VAR, buf, 1) < 0 || setenv(DEBUGINFOD_MAXTIME_ENV_VAR, buf, 1) < 0)
		return -errno;
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)s->cfg.max_file_bytes);
	if (setenv(DEBUGINFOD_MAXSIZE_ENV_VAR, buf, 1) < 0)
		return -errno;
	/* libdebuginfod's own download cache: under cache_dir, else a temporary directory (its
	 * default, ~/.cache, is often read-only in containers). */
	char path[PATH_MAX];
	const char *tmpdir = getenv("TMPDIR");
	if (s->cache_dir)
		snprintf(path, sizeof(path), "%s/debuginfod-client", s->cache_dir);
	else
		snprintf(path, sizeof(path), "%s/stackrelay-debuginfod-client", tmpdir && tmpdir[0] ? tmpdir : "/tmp");
	if (setenv(DEBUGINFOD_CACHE_PATH_ENV_VAR, path, 1) < 0)
		return -errno;
	return 0;
}
