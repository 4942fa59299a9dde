/* SPDX-License-Identifier: Apache-2.0 */
/* Shared by symbolize.c (the component, on the loop) and symbolize-pass.c (a batch's pass, on a worker). */
#ifndef SR_GW_SYMBOLIZE_PRIVATE_H
#define SR_GW_SYMBOLIZE_PRIVATE_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "component.h"
#include "core/model.h"
#include "symbolize.h"

struct symbolize_config {
	char *cache_dir;
	char **debuginfod_urls;
	uint32_t n_debuginfod_urls;
	uint64_t debuginfod_timeout;
	uint64_t debuginfod_max_concurrency;
	uint64_t negative_cache_ttl;
	uint64_t memory_cache_size;
	uint64_t disk_cache_size;
	int demangle;
	uint64_t wait_for_symbols;
	uint64_t max_upload_bytes;
	uint64_t max_pending_uploads;
	uint64_t max_file_size;
	char **debug_dirs;
	uint32_t n_debug_dirs;
	bool lines;
};

struct job {
	uv_work_t work;
	struct sp *sp;
	struct gw_profiles *p;
	uint64_t deadline_ns;
	bool final;	  /* last pass: pass the batch on whatever is pending */
	unsigned pending; /* locations waiting for symbols after the pass */
	struct job *next; /* waiting list */
	/* per-pass counts, folded into the totals on the loop thread */
	uint64_t named, fallback, unsymbolized;
};

struct upload_job {
	uv_work_t work;
	struct sp *sp;
	struct gw_symbol_table *t;
	int result;
};

struct sp {
	struct gw_component *c;
	const struct symbolize_config *cfg;
	struct gw_symbolizer *sym;
	uv_async_t async;
	uv_timer_t timer;
	struct job *wait_head, *wait_tail;
	size_t n_waiting;
	size_t n_running; /* jobs and uploads on worker threads */
	unsigned handles_open;
	bool stopping;
	void (*done)(struct gw_component *c);
	/* totals (loop thread) */
	uint64_t named, fallback, unsymbolized;
	uint64_t batches_waited, batches_timed_out, batches_forced;
	uint64_t uploads_ok, uploads_bad;
};

static inline uint64_t gw_symbolize_now_ns(void)
{
	return uv_hrtime();
}

/* The pass over one batch (uv_queue_work's work callback): every location without lines gets them if it can. */
void gw_symbolize_work_cb(uv_work_t *w);

#endif
