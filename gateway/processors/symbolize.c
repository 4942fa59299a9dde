// SPDX-License-Identifier: Apache-2.0
/*
 * symbolize: gives every location of a batch its lines (function, file, line,
 * inlined frames) with the symbolizer library (gateway/symbolize,
 * docs/symbolization.md).
 *
 * A batch is symbolized on a libuv worker thread (uv_queue_work, the pass in
 * symbolize-pass.c): loading a
 * symbol table or walking DWARF takes milliseconds to seconds. Locations are
 * shared definitions: their lines are set once, atomically, for every batch
 * that references them, so a hot location is symbolized once.
 *
 * Frames whose symbols are on their way (a debuginfod fetch, or an upload the
 * agent was asked for through wanted_symbols) hold their batch for at most
 * wait_for_symbols; the batch is symbolized again whenever symbols arrive and
 * passed on when nothing is pending any more or the wait is over. Locations
 * still without symbols then are exported without lines (unsymbolized, so a
 * later batch can still name them once the symbols are there); locations that
 * can never be named (no symbol covers the address, or the agent reported it
 * cannot read the file) get one line named "<binary>+0x<address>". Nothing is
 * dropped here; every outcome is counted (metrics below).
 *
 * Kernel frames are named from a kallsyms snapshot the agent uploads on
 * request, exactly like an executable's table: a kernel ID without a table is
 * flagged (gw_kernel__set_want_symbols), the receiver lists it in
 * wanted_symbols, the table arrives keyed by the kernel ID (which includes the
 * boot ID, so KASLR offsets never mix) and batches wait for it as above.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "component.h"
#include "common/config.h"
#include "core/metrics.h"
#include "core/model.h"
#include "core/runtime.h"
#include "common/log.h"
#include "symbolize-private.h"
#include "symbolize.h"

/* Batches held waiting for symbols at once; past it the oldest is passed on as it is. */
#define SYMBOLIZE_MAX_WAITING_BATCHES 1024

static const struct sr_field symbolize_fields[] = {
	SR_FIELD_STR(
		"cache_dir", struct symbolize_config, cache_dir, .def = "",
		.doc = "Directory of the on-disk symbol store (tables, debug files fetched from debuginfod); "
		       "empty keeps symbols in memory only, so they are fetched or uploaded again after a restart."),
	SR_FIELD_STRLIST("debuginfod_urls", struct symbolize_config, debuginfod_urls, n_debuginfod_urls, .min = 0,
			 .max = 32,
			 .doc = "debuginfod servers asked for debug info by GNU build ID. Empty: the DEBUGINFOD_URLS "
				"environment variable when set, else no debuginfod."),
	SR_FIELD_DUR("debuginfod_timeout", struct symbolize_config, debuginfod_timeout, .def = "30s",
		     .min = 1000000000LL, .max = 3600000000000LL,
		     .doc = "Time limit of one debuginfod lookup (all servers, download included)."),
	SR_FIELD_U64("debuginfod_max_concurrency", struct symbolize_config, debuginfod_max_concurrency, .def = "2",
		     .min = 1, .max = 64, .doc = "debuginfod lookups at once (each runs on its own thread)."),
	SR_FIELD_DUR("negative_cache_ttl", struct symbolize_config, negative_cache_ttl, .def = "10m",
		     .min = 1000000000LL, .max = 604800000000000LL,
		     .doc = "How long a failed debuginfod lookup, or an agent's \"cannot read\", is remembered "
			    "before trying again."),
	SR_FIELD_BYTES("memory_cache_size", struct symbolize_config, memory_cache_size, .def = "256MiB", .min = 1048576,
		       .max = 1LL << 40, .doc = "Memory for loaded symbol tables and DWARF indexes (LRU)."),
	SR_FIELD_BYTES("disk_cache_size", struct symbolize_config, disk_cache_size, .def = "2GiB", .min = 1048576,
		       .max = 1LL << 50, .doc = "Disk space of cache_dir (least recently used files are deleted)."),
	SR_FIELD_ENUMERATION("demangle", struct symbolize_config, demangle, gw_demangle_mode_names, .def = "templates",
			     .doc = "C++ and Rust names: none, simplified (no parameters or template arguments), "
				    "templates (no parameters), full (everything but clone suffixes)."),
	SR_FIELD_DUR("wait_for_symbols", struct symbolize_config, wait_for_symbols, .def = "10s", .min = 0,
		     .max = 300000000000LL,
		     .doc = "How long a batch may wait for symbols on their way (debuginfod, agent upload) "
			    "before it is passed on with those frames unsymbolized. 0: never wait."),
	SR_FIELD_BYTES("max_upload_bytes", struct symbolize_config, max_upload_bytes, .def = "64MiB", .min = 1024,
		       .max = 1LL << 32,
		       .doc = "Largest symbol table accepted from an agent (24 bytes per symbol plus names)."),
	SR_FIELD_BYTES("max_pending_uploads", struct symbolize_config, max_pending_uploads, .def = "256MiB",
		       .min = 1048576, .max = 1LL << 40,
		       .doc = "Memory of uploaded symbol tables waiting to be added; beyond it agents' uploads are "
			      "answered 429 with retry_after_ms (they retry; no sample waits on it). One table is "
			      "always taken when none waits."),
	SR_FIELD_BYTES("max_file_size", struct symbolize_config, max_file_size, .def = "4GiB", .min = 4096,
		       .max = 1LL << 40, .doc = "Largest ELF or debug file opened or downloaded."),
	SR_FIELD_STRLIST("debug_dirs", struct symbolize_config, debug_dirs, n_debug_dirs, .def = "[/usr/lib/debug]",
			 .min = 0, .max = 32,
			 .doc = "Directories in the /usr/lib/debug layout (.build-id/xx/rest.debug, and "
				".gnu_debuglink names) searched for debug files."),
	SR_FIELD_BOOLEAN("lines", struct symbolize_config, lines, .def = "true",
			 .doc = "Read DWARF for file, line and inlined frames when debug info is available; "
				"false gives function names only."),
	SR_FIELD_END,
};

/* ---- the loop side ---- */

static void run_job(struct sp *sp, struct job *job);

static void finish_job(struct sp *sp, struct job *job)
{
	int r = gw_component_emit(sp->c, job->p);

	if (r < 0)
		sr_log_debug("symbolize", "next stage refused a batch", "id=%s error=%s", sp->c->id, strerror(-r));
	free(job);
}

static void maybe_done(struct sp *sp)
{
	if (sp->stopping && sp->done && sp->n_running == 0 && sp->n_waiting == 0) {
		void (*done)(struct gw_component * c) = sp->done;
		sp->done = NULL;
		uv_timer_stop(&sp->timer);
		done(sp->c);
	}
}

static void wait_push(struct sp *sp, struct job *job)
{
	job->next = NULL;
	if (sp->wait_tail)
		sp->wait_tail->next = job;
	else
		sp->wait_head = job;
	sp->wait_tail = job;
	sp->n_waiting++;
}

static struct job *wait_pop(struct sp *sp)
{
	struct job *j = sp->wait_head;

	if (j) {
		sp->wait_head = j->next;
		if (!sp->wait_head)
			sp->wait_tail = NULL;
		sp->n_waiting--;
		j->next = NULL;
	}
	return j;
}

static void timer_cb(uv_timer_t *t);

static void rearm(struct sp *sp)
{
	uint64_t now = gw_symbolize_now_ns(), first = UINT64_MAX;

	for (struct job *j = sp->wait_head; j; j = j->next)
		if (j->deadline_ns < first)
			first = j->deadline_ns;
	if (first == UINT64_MAX) {
		uv_timer_stop(&sp->timer);
		return;
	}
	uint64_t ms = first > now ? (first - now + 999999) / 1000000 : 0;
	uv_timer_start(&sp->timer, timer_cb, ms, 0);
}

static void after_work_cb(uv_work_t *w, int status)
{
	struct job *job = SR_CONTAINER_OF(w, struct job, work);
	struct sp *sp = job->sp;
	uint64_t now = gw_symbolize_now_ns();

	sp->n_running--;
	sp->named += job->named;
	sp->fallback += job->fallback;
	sp->unsymbolized += job->unsymbolized;
	job->named = job->fallback = job->unsymbolized = 0;
	if (status == 0 && job->pending > 0 && !job->final && !sp->stopping) {
		if (now < job->deadline_ns) {
			if (sp->n_waiting >= SYMBOLIZE_MAX_WAITING_BATCHES) {
				/* Too many waiting: the oldest goes on now, with a last pass. */
				struct job *old = wait_pop(sp);
				sp->batches_forced++;
				old->final = true;
				run_job(sp, old);
			}
			sp->batches_waited++;
			wait_push(sp, job);
			rearm(sp);
			return;
		}
		/* The wait is over: one last pass names what did arrive, then on it goes. */
		sp->batches_timed_out++;
		job->final = true;
		run_job(sp, job);
		return;
	}
	finish_job(sp, job);
	maybe_done(sp);
}

static void run_job(struct sp *sp, struct job *job)
{
	int r;

	sp->n_running++;
	r = uv_queue_work(gw_runtime__loop(sp->c->runtime), &job->work, gw_symbolize_work_cb, after_work_cb);
	if (r < 0) {
		/* Cannot happen with valid arguments; pass the batch on unsymbolized rather than lose it. */
		sp->n_running--;
		finish_job(sp, job);
	}
}

/* Symbols arrived (or failed) somewhere: give every waiting batch another pass. */
static void async_cb(uv_async_t *a)
{
	struct sp *sp = a->data;
	struct job *j;

	while ((j = wait_pop(sp)))
		run_job(sp, j);
	rearm(sp);
}

static void timer_cb(uv_timer_t *t)
{
	struct sp *sp = t->data;
	uint64_t now = gw_symbolize_now_ns();
	struct job *keep_head = NULL, *keep_tail = NULL, *j;
	size_t kept = 0;

	while ((j = wait_pop(sp))) {
		if (j->deadline_ns <= now) {
			sp->batches_timed_out++;
			j->final = true;
			run_job(sp, j);
		} else {
			j->next = NULL;
			if (keep_tail)
				keep_tail->next = j;
			else
				keep_head = j;
			keep_tail = j;
			kept++;
		}
	}
	sp->wait_head = keep_head;
	sp->wait_tail = keep_tail;
	sp->n_waiting = kept;
	rearm(sp);
}

static void notify_cb(void *userdata)
{
	struct sp *sp = userdata;

	/* Any thread; uv_async_send coalesces bursts into one callback. */
	uv_async_send(&sp->async);
}

/* ---- uploads ---- */

static void upload_work_cb(uv_work_t *w)
{
	struct upload_job *u = SR_CONTAINER_OF(w, struct upload_job, work);
	struct gw_symbol_table *t = u->t;

	/* A kernel's table (exe NULL) is keyed by the kernel ID, which includes the boot: KASLR is per boot. */
	const struct gw_id *id = t->exe ? &t->exe->id : &t->id;

	u->result = gw_symbolizer__add_upload(u->sp->sym, id->bytes, id->len, t->symbols, t->n_symbols, t->error);
}

static void upload_after_cb(uv_work_t *w, int status)
{
	struct upload_job *u = SR_CONTAINER_OF(w, struct upload_job, work);
	struct sp *sp = u->sp;

	sp->n_running--;
	gw_runtime__symbol_table_done(sp->c->runtime, u->t->bytes);
	if (status == 0 && u->result == 0) {
		sp->uploads_ok++;
	} else {
		char hex[2 * GW_ID_MAX + 1];
		sp->uploads_bad++;
		const struct gw_id *id = u->t->exe ? &u->t->exe->id : &u->t->id;
		sr_log_warn("symbolize", "symbol table upload rejected", "id=%s executable=%s file=%s error=%s",
			    sp->c->id, gw_id_to_hex(id, hex, sizeof(hex)),
			    u->t->exe ? u->t->exe->file_name : "[kernel]",
			    strerror(u->result < 0 ? -u->result : EINVAL));
	}
	gw_symbol_table_free(u->t);
	free(u);
	maybe_done(sp);
}

static void on_symbol_table(struct gw_symbol_table *t, void *userdata)
{
	struct sp *sp = userdata;
	struct upload_job *u;

	u = (!t->exe && !t->id.len) || sp->stopping ? NULL : calloc(1, sizeof(*u));
	if (!u) {
		/* Not added after all: the runtime counted it as pending when it handed it over. */
		gw_runtime__symbol_table_done(sp->c->runtime, t->bytes);
		gw_symbol_table_free(t);
		return;
	}
	u->sp = sp;
	u->t = t;
	sp->n_running++;
	/* Building a table (sorting, demangling) is CPU work: off the loop. */
	if (uv_queue_work(gw_runtime__loop(sp->c->runtime), &u->work, upload_work_cb, upload_after_cb) < 0) {
		sp->n_running--;
		gw_runtime__symbol_table_done(sp->c->runtime, t->bytes);
		gw_symbol_table_free(t);
		free(u);
	}
}

/* ---- metrics ---- */

static void metrics_cb(struct gw_metrics_writer *w, void *userdata)
{
	struct sp *sp = userdata;
	struct gw_symbolizer_stats st;
	char l[256] = "", lr[320];

	gw_symbolizer__stats(sp->sym, &st);
	gw_metrics_label(l, sizeof(l), "component", sp->c->id);
#define C(name, help, v)                                                                                               \
	gw_metrics__add(w, "stackrelay_gateway_symbolize_" name, GW_METRIC_COUNTER, help, l, (double)(v))
#define G(name, help, v) gw_metrics__add(w, "stackrelay_gateway_symbolize_" name, GW_METRIC_GAUGE, help, l, (double)(v))
	static const char *const outcome_help =
		"Locations by symbolization outcome: named, fallback (<binary>+0x<address>), unsymbolized "
		"(exported without lines).";
	const struct {
		const char *name;
		uint64_t v;
	} outcomes[] = { { "named", sp->named }, { "fallback", sp->fallback }, { "unsymbolized", sp->unsymbolized } };
	for (size_t i = 0; i < sizeof(outcomes) / sizeof(outcomes[0]); i++) {
		snprintf(lr, sizeof(lr), "%s,outcome=\"%s\"", l, outcomes[i].name);
		gw_metrics__add(w, "stackrelay_gateway_symbolize_locations_total", GW_METRIC_COUNTER, outcome_help, lr,
				(double)outcomes[i].v);
	}
	C("batches_waited_total", "Batches held waiting for symbols.", sp->batches_waited);
	C("batches_wait_timeouts_total", "Batches passed on after wait_for_symbols with symbols still missing.",
	  sp->batches_timed_out);
	C("batches_wait_overflow_total", "Batches passed on early because too many were waiting.", sp->batches_forced);
	G("batches_waiting", "Batches waiting for symbols now.", sp->n_waiting);
	C("cache_hits_total", "Symbol lookups served from memory.", st.memory_hits);
	C("cache_misses_total", "Symbol lookups not in memory.", st.memory_misses);
	C("disk_hits_total", "Symbol sources found in cache_dir or debug_dirs.", st.disk_hits);
	C("cache_evictions_total", "Symbol sources evicted from memory.", st.evictions);
	G("cache_bytes", "Memory held by loaded symbol sources.", st.memory_bytes);
	G("cache_entries", "Executables known to the symbolizer.", st.memory_entries);
	G("disk_bytes", "Bytes in cache_dir.", st.disk_bytes);
	C("debuginfod_requests_total", "debuginfod lookups.", st.debuginfod_fetches);
	C("debuginfod_failures_total", "debuginfod lookups that found nothing usable (or timed out).",
	  st.debuginfod_failed);
	G("debuginfod_queue", "Executables waiting for a debuginfod lookup.", st.fetch_queue);
	C("uploads_total", "Symbol tables uploaded by agents and accepted.", st.uploads_accepted);
	C("uploads_rejected_total", "Symbol tables uploaded by agents and rejected (over a limit, malformed).",
	  st.uploads_rejected);
	C("upload_errors_total", "Agents' reports that they cannot read an executable.", st.upload_errors);
	C("uploads_outranked_total",
	  "Symbol tables uploaded by agents and not taken: a debug file, the store or debuginfod named it already.",
	  st.uploads_outranked);
	C("debug_paths_refused_dot_dot_total",
	  "debug_dirs lookups refused before opening: the agent's path or .gnu_debuglink has a \".\" or \"..\" "
	  "component.",
	  st.debug_paths_dot_dot);
	C("debug_paths_refused_escaping_total",
	  "debug_dirs lookups refused: the file (or a link on its way) leads out of its debug directory.",
	  st.debug_paths_escaping);
	G("uploads_pending_bytes", "Uploaded symbol tables waiting to be added (max_pending_uploads bounds them).",
	  gw_runtime__symbol_tables_pending(sp->c->runtime));
#undef C
#undef G
}

/* ---- the component ---- */

static int symbolize_create(struct gw_component *c)
{
	struct sp *sp = calloc(1, sizeof(*sp));

	if (!sp)
		return -ENOMEM;
	sp->c = c;
	sp->cfg = c->config;
	c->state = sp;
	return 0;
}

static int symbolize_start(struct gw_component *c)
{
	struct sp *sp = c->state;
	const struct symbolize_config *cfg = sp->cfg;
	uv_loop_t *loop = gw_runtime__loop(c->runtime);
	int r;

	/* I/O happens here, not in create: cache_dir is created and scanned, fetch threads start. */
	sp->sym = gw_symbolizer_new(&(struct gw_symbolizer_config){
		.cache_dir = cfg->cache_dir,
		.debuginfod_urls = (const char *const *)cfg->debuginfod_urls,
		.n_debuginfod_urls = cfg->n_debuginfod_urls,
		.debuginfod_timeout_ns = cfg->debuginfod_timeout,
		.debuginfod_max_concurrency = (unsigned)cfg->debuginfod_max_concurrency,
		.negative_cache_ttl_ns = cfg->negative_cache_ttl,
		.memory_cache_bytes = cfg->memory_cache_size,
		.disk_cache_bytes = cfg->disk_cache_size,
		.demangle = (enum gw_demangle_mode)cfg->demangle,
		.max_upload_bytes = cfg->max_upload_bytes,
		.max_file_bytes = cfg->max_file_size,
		.debug_dirs = (const char *const *)cfg->debug_dirs,
		.n_debug_dirs = cfg->n_debug_dirs,
		.no_lines = !cfg->lines,
		/* An executable stays "pending" for agents at most as long as a batch may wait. */
		.wanted_timeout_ns = cfg->wait_for_symbols ? cfg->wait_for_symbols : 1,
		.notify = notify_cb,
		.notify_userdata = sp,
	});
	if (!sp->sym) {
		r = -errno;
		sr_log_error("symbolize", "cannot set up the symbolizer", "id=%s cache_dir=%s error=%s", c->id,
			     cfg->cache_dir ? cfg->cache_dir : "", strerror(errno));
		return r;
	}
	r = uv_async_init(loop, &sp->async, async_cb);
	if (r < 0)
		return r;
	sp->async.data = sp;
	sp->handles_open++;
	r = uv_timer_init(loop, &sp->timer);
	if (r < 0)
		return r;
	sp->timer.data = sp;
	sp->handles_open++;
	/* Neither keeps the loop alive: work in flight does (uv_queue_work), and shutdown waits for it. */
	uv_unref((uv_handle_t *)&sp->async);
	uv_unref((uv_handle_t *)&sp->timer);
	gw_runtime__set_symbol_table_handler(c->runtime, on_symbol_table, sp->cfg->max_pending_uploads, sp);
	gw_runtime__add_metrics(c->runtime, metrics_cb, sp);
	const char *urls = gw_symbolizer__debuginfod_urls(sp->sym);
	sr_log_info("symbolize", "symbolizer ready", "id=%s demangle=%s debuginfod=%s cache_dir=%s", c->id,
		    gw_demangle_mode_to_string((enum gw_demangle_mode)cfg->demangle), urls[0] ? urls : "off",
		    cfg->cache_dir && cfg->cache_dir[0] ? cfg->cache_dir : "(memory only)");
	return 0;
}

static int symbolize_consume(struct gw_component *c, struct gw_profiles *p)
{
	struct sp *sp = c->state;
	struct job *job = calloc(1, sizeof(*job));

	if (!job) {
		/* No memory even for the job: pass the batch on unsymbolized rather than drop it. */
		return gw_component_emit(c, p);
	}
	job->sp = sp;
	job->p = p;
	job->deadline_ns = gw_symbolize_now_ns() + sp->cfg->wait_for_symbols;
	job->final = sp->cfg->wait_for_symbols == 0 || sp->stopping;
	run_job(sp, job);
	return 0;
}

static void symbolize_shutdown(struct gw_component *c, void (*done)(struct gw_component *c))
{
	struct sp *sp = c->state;
	struct job *j;

	sp->stopping = true;
	sp->done = done;
	gw_runtime__set_symbol_table_handler(c->runtime, NULL, 0, NULL);
	/* Flush: every waiting batch gets its last pass now. */
	while ((j = wait_pop(sp))) {
		j->final = true;
		run_job(sp, j);
	}
	maybe_done(sp);
}

static void close_cb(uv_handle_t *h)
{
	struct sp *sp = h->data;

	if (--sp->handles_open == 0)
		free(sp);
}

static void symbolize_destroy(struct gw_component *c)
{
	struct sp *sp = c->state;
	struct job *j;

	if (!sp)
		return;
	c->state = NULL;
	if (c->runtime && sp->sym)
		gw_runtime__remove_metrics(c->runtime, metrics_cb, sp);
	while ((j = wait_pop(sp))) {
		gw_component_drop(c, j->p, "shutdown");
		free(j);
	}
	gw_symbolizer_free(sp->sym);
	sp->sym = NULL;
	if (sp->handles_open == 0) {
		free(sp);
		return;
	}
	unsigned n = sp->handles_open;
	uv_close((uv_handle_t *)&sp->async, close_cb);
	if (n > 1)
		uv_close((uv_handle_t *)&sp->timer, close_cb);
}

const struct gw_component_type gw_processor_symbolize = {
	.name = "symbolize",
	.kind = GW_PROCESSOR,
	.doc = "Names every frame: native code from the disk store, debug directories, debuginfod or symbol "
	       "tables uploaded by agents (ELF .symtab/.dynsym/MiniDebugInfo, Go .gopclntab), kernel frames from "
	       "the agents' kallsyms, DWARF file/line/inlined frames when debug info is available, C++ and Rust "
	       "names demangled (docs/symbolization.md).",
	.config_fields = symbolize_fields,
	.config_size = sizeof(struct symbolize_config),
	.create = symbolize_create,
	.start = symbolize_start,
	.consume = symbolize_consume,
	.shutdown = symbolize_shutdown,
	.destroy = symbolize_destroy,
};
