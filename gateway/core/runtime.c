/* SPDX-License-Identifier: Apache-2.0 */
/* The pipeline runtime (runtime.h). */
#include <dirent.h>
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "accounting.h"
#include "common/log.h"
#include "common/macro.h"
#include "metrics.h"
#include "model.h"
#include "runtime.h"
#include "slot-pool.h"
#include "telemetry.h"
#include "common/version.h"

struct rt_comp {
	struct gw_component *c;
	bool created, started, shutdown_called, done, ready;
	int layer; /* shutdown order: receivers 0, processors 1 + position, exporters last */
};

struct collector {
	gw_metrics_fn fn;
	void *userdata;
};

struct admission {
	struct gw_component *c;
	gw_admission_fn fn;
};

struct shedder {
	struct gw_component *c;
	gw_shed_fn fn;
};

struct gw_runtime {
	uv_loop_t *loop;
	struct rt_comp *comps;
	size_t n_comps;
	const struct gw_pipeline_def *pipes;
	size_t n_pipes;
	char *metrics_address;
	bool metrics_off;
	char *health_address, *health_path;
	struct gw_telemetry *health;
	uint64_t shutdown_timeout_ns;
	struct gw_stores *stores;
	struct gw_accounting *acct;
	struct admission *admission;
	size_t n_admission;
	const char *refusal; /* why the last gw_runtime__admit() refused */
	gw_symbol_table_fn sym_fn;
	void *sym_ud;
	/* Upload admission, read by receivers' decode threads. */
	_Atomic uint64_t sym_max_pending, sym_pending;
	struct collector *collectors;
	size_t n_collectors;
	struct shedder *shedders;
	size_t n_shedders;
	struct gw_telemetry *telemetry;
	bool started, shutting_down, finished;
	int max_layer, layer;
	uv_timer_t shutdown_timer;
	bool timer_init;
	void (*done)(struct gw_runtime *rt, bool timed_out, void *userdata);
	void *done_ud;
	uint64_t emit_errors;
	time_t start_time_s;
};

static struct rt_comp *find(struct gw_runtime *rt, const struct gw_component *c)
{
	for (size_t i = 0; i < rt->n_comps; i++)
		if (rt->comps[i].c == c)
			return &rt->comps[i];
	return NULL;
}

struct gw_runtime *gw_runtime_new(const struct gw_runtime_config *cfg)
{
	struct gw_runtime *rt = calloc(1, sizeof(*rt));
	int e = ENOMEM;

	if (!rt)
		return NULL;
	rt->loop = cfg->loop;
	rt->start_time_s = time(NULL);
	rt->pipes = cfg->pipelines;
	rt->n_pipes = cfg->n_pipelines;
	rt->shutdown_timeout_ns = cfg->shutdown_timeout_ns ? cfg->shutdown_timeout_ns
							   : GW_RUNTIME_DEFAULT_SHUTDOWN_TIMEOUT_NS;
	if (cfg->metrics_address && *cfg->metrics_address && !(rt->metrics_address = strdup(cfg->metrics_address)))
		goto fail;
	rt->metrics_off = cfg->metrics_off;
	if (cfg->health_address && (!(rt->health_address = strdup(cfg->health_address)) ||
				    !(rt->health_path = strdup(cfg->health_path ? cfg->health_path : "/"))))
		goto fail;
	rt->comps = calloc(cfg->n_components ? cfg->n_components : 1, sizeof(*rt->comps));
	rt->stores = gw_stores_new(cfg->store_limits);
	rt->acct = gw_accounting_new();
	if (!rt->comps || !rt->stores || !rt->acct)
		goto fail;
	rt->n_comps = cfg->n_components;
	for (size_t i = 0; i < cfg->n_components; i++) {
		struct gw_component *c = cfg->components[i];
		rt->comps[i] = (struct rt_comp){ .c = c, .ready = true };
		c->runtime = rt;
		gw_accounting__declare(rt->acct, c->id, c->type->kind == GW_EXPORTER);
	}
	/* Shutdown layers: a processor goes after everything upstream of it in
	 * any pipeline, exporters after every processor. */
	for (size_t p = 0; p < rt->n_pipes; p++) {
		for (size_t i = 0; i < rt->pipes[p].n_processors; i++) {
			struct rt_comp *rc = find(rt, rt->pipes[p].processors[i]);
			if (!rc) {
				e = EINVAL;
				goto fail;
			}
			rc->layer = SR_MAX(rc->layer, (int)i + 1);
			rt->max_layer = SR_MAX(rt->max_layer, (int)i + 1);
		}
		for (size_t i = 0; i < rt->pipes[p].n_receivers; i++)
			if (!find(rt, rt->pipes[p].receivers[i])) {
				e = EINVAL;
				goto fail;
			}
		for (size_t i = 0; i < rt->pipes[p].n_exporters; i++)
			if (!find(rt, rt->pipes[p].exporters[i])) {
				e = EINVAL;
				goto fail;
			}
	}
	rt->max_layer++;
	for (size_t i = 0; i < rt->n_comps; i++)
		if (rt->comps[i].c->type->kind == GW_EXPORTER)
			rt->comps[i].layer = rt->max_layer;
	return rt;
fail:
	gw_runtime_free(rt);
	errno = e;
	return NULL;
}

uv_loop_t *gw_runtime__loop(struct gw_runtime *rt)
{
	return rt->loop;
}

struct gw_stores *gw_runtime__stores(struct gw_runtime *rt)
{
	return rt->stores;
}

struct gw_accounting *gw_runtime__accounting(struct gw_runtime *rt)
{
	return rt->acct;
}

const char *gw_runtime__metrics_address(struct gw_runtime *rt)
{
	return rt->telemetry ? gw_telemetry__address(rt->telemetry) : NULL;
}

bool gw_runtime__ready(struct gw_runtime *rt)
{
	if (!rt->started || rt->shutting_down)
		return false;
	for (size_t i = 0; i < rt->n_comps; i++)
		if (!rt->comps[i].ready)
			return false;
	return true;
}

void gw_component_set_ready(struct gw_component *c, bool ready)
{
	struct rt_comp *rc = c->runtime ? find(c->runtime, c) : NULL;
	if (rc)
		rc->ready = ready;
}

/* ---- telemetry ---- */

/* The usual process_* families, from /proc/self (Prometheus client conventions). */
static void process_metrics(struct gw_metrics_writer *w, struct gw_runtime *rt)
{
	long page = sysconf(_SC_PAGESIZE), ticks = sysconf(_SC_CLK_TCK);
	unsigned long long vsize = 0, rss = 0, utime = 0, stime = 0;
	FILE *f = fopen("/proc/self/stat", "re");

	if (f) {
		char buf[1024];
		size_t n = fread(buf, 1, sizeof(buf) - 1, f);
		buf[n] = '\0';
		fclose(f);
		/* Fields after the command name, which may contain spaces: skip to the last ')'. */
		const char *p = strrchr(buf, ')');
		if (p && sscanf(p + 2,
				"%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %*d %*d "
				"%*u %llu %llu",
				&utime, &stime, &vsize, &rss) == 4) {
			gw_metrics__add(w, "process_cpu_seconds_total", GW_METRIC_COUNTER,
					"User and system CPU time spent in seconds.", NULL,
					ticks > 0 ? (double)(utime + stime) / (double)ticks : 0);
			gw_metrics__add(w, "process_resident_memory_bytes", GW_METRIC_GAUGE,
					"Resident memory size in bytes.", NULL, (double)rss * (double)page);
			gw_metrics__add(w, "process_virtual_memory_bytes", GW_METRIC_GAUGE,
					"Virtual memory size in bytes.", NULL, (double)vsize);
		}
	}
	/*
	 * The allocator's view: bytes in live allocations against freed bytes it
	 * still holds (RSS above the first is fragmentation or caches, not data).
	 */
	struct mallinfo2 mi = mallinfo2();
	static const char heap_help[] =
		"Heap bytes by state: in_use (live allocations, mmapped ones included), free (freed, still held).";
	gw_metrics__add(w, "stackrelay_gateway_heap_bytes", GW_METRIC_GAUGE, heap_help, "state=\"in_use\"",
			(double)(mi.uordblks + mi.hblkhd));
	gw_metrics__add(w, "stackrelay_gateway_heap_bytes", GW_METRIC_GAUGE, heap_help, "state=\"free\"",
			(double)mi.fordblks);
	gw_metrics__add(w, "process_start_time_seconds", GW_METRIC_GAUGE,
			"Start time of the process since the Unix epoch in seconds.", NULL, (double)rt->start_time_s);
	char info[256] = "";
	gw_metrics_label(info, sizeof(info), "version", sr_version());
	gw_metrics_label(info, sizeof(info), "commit", sr_git_describe());
	gw_metrics_label(info, sizeof(info), "agent_protocol", SR_AGENT_PROTOCOL_VERSION);
	gw_metrics_label(info, sizeof(info), "otlp_profiles", SR_OTLP_PROFILES_VERSIONS);
	gw_metrics__add(w, "stackrelay_build_info", GW_METRIC_GAUGE,
			"The build: version, commit (git describe), the agent protocol and the OTLP profiles "
			"versions it speaks; always 1.",
			info, 1);
	DIR *d = opendir("/proc/self/fd");
	if (d) {
		unsigned n = 0;
		while (readdir(d))
			n++;
		closedir(d);
		gw_metrics__add(w, "process_open_fds", GW_METRIC_GAUGE, "Number of open file descriptors.", NULL,
				(double)(n > 2 ? n - 3 : 0)); /* ".", "..", and the directory's own fd */
	}
}

static void builtin_metrics(struct gw_metrics_writer *w, struct gw_runtime *rt)
{
	uint64_t lines_charged = 0; /* the stacks store's stats tell, read once in the loop */

	gw_accounting__write_metrics(rt->acct, w);
	for (int k = 0; k < _GW_STORE_MAX; k++) {
		struct gw_store_stats st;
		char lbl[64] = "";
		gw_stores__stats(rt->stores, k, &st);
		if (k == GW_STORE_STACKS)
			lines_charged = st.lines_bytes;
		gw_metrics_label(lbl, sizeof(lbl), "store", gw_store_kind_to_string(k));
		gw_metrics__add(w, "stackrelay_gateway_store_entries", GW_METRIC_GAUGE,
				"Definitions in the gateway-wide store.", lbl, (double)st.entries);
		gw_metrics__add(w, "stackrelay_gateway_store_bytes", GW_METRIC_GAUGE,
				"Bytes charged to the store (bounded by its limit).", lbl, (double)st.bytes);
		gw_metrics__add(w, "stackrelay_gateway_store_limit_bytes", GW_METRIC_GAUGE, "The store's byte limit.",
				lbl, (double)st.limit_bytes);
		gw_metrics__add(w, "stackrelay_gateway_store_index_bytes", GW_METRIC_GAUGE,
				"Bytes of the store's index (its entries' charges include their share).", lbl,
				(double)st.index_bytes);
		gw_metrics__add(w, "stackrelay_gateway_store_hits_total", GW_METRIC_COUNTER,
				"Lookups that found the definition.", lbl, (double)st.hits);
		gw_metrics__add(w, "stackrelay_gateway_store_misses_total", GW_METRIC_COUNTER,
				"Lookups that did not find the definition.", lbl, (double)st.misses);
		gw_metrics__add(w, "stackrelay_gateway_store_evictions_total", GW_METRIC_COUNTER,
				"Definitions evicted to stay under the limit (agents resend them when used).", lbl,
				(double)st.evictions);
		if (k != GW_STORE_STACKS)
			gw_metrics__add(
				w, "stackrelay_gateway_store_held_bytes", GW_METRIC_GAUGE,
				"Bytes of definitions stored ones hold (locations of stored stacks; executables, "
				"kernels and functions of stored locations): never evicted while held, charged "
				"to the stacks store's bound (its store_bytes includes them).",
				lbl, (double)st.held_bytes);
		gw_metrics__add(w, "stackrelay_gateway_store_second_chances_total", GW_METRIC_COUNTER,
				"Cold definitions kept because something still referenced them (moved to the hot end "
				"instead of evicted).",
				lbl, (double)st.second_chances);
		gw_metrics__add(w, "stackrelay_gateway_store_rescues_total", GW_METRIC_COUNTER,
				"Cold definitions found again since they last reached the cold end, moved to the hot "
				"end instead of evicted (a hit only marks an entry; eviction spares marked ones once).",
				lbl, (double)st.rescued);
	}
	{
		struct gw_lines_table_stats ls;

		gw_lines_table__stats(gw_stores__lines(rt->stores), &ls);
		gw_metrics__add(w, "stackrelay_gateway_shared_lines", GW_METRIC_GAUGE,
				"Symbolized lines shared by locations (every address of a function named by its symbol "
				"shares one copy).",
				NULL, (double)ls.entries);
		gw_metrics__add(w, "stackrelay_gateway_shared_lines_bytes", GW_METRIC_GAUGE,
				"Bytes of the shared lines.", NULL, (double)ls.bytes);
		gw_metrics__add(w, "stackrelay_gateway_shared_lines_charged_bytes", GW_METRIC_GAUGE,
				"Bytes of the shared lines that stored locations hold, with their overhead: charged "
				"once, to the stacks store's bound (its store_bytes includes them).",
				NULL, (double)lines_charged);
		gw_metrics__add(w, "stackrelay_gateway_shared_lines_hits_total", GW_METRIC_COUNTER,
				"Symbolized locations given lines another location already had.", NULL,
				(double)ls.hits);
	}
	{
		static const char *const slots_help =
			"Slots of the location table: live (locations alive, in stores or batches) and allocated "
			"(mapped; free ones are reused lowest first).";
		static const char *const pool_help[2] = {
			"Bytes of the stack slabs: in live stacks' slots, mapped, and in resident pages (pages whose "
			"slots are all free go back to the system at each trim).",
			"Bytes of the location table: in live locations' slots, mapped, and in resident pages (pages "
			"whose slots are all free go back to the system at each trim).",
		};
		static const char *const pool_metric[2] = { "stackrelay_gateway_stack_slab_bytes",
							    "stackrelay_gateway_location_slot_bytes" };
		static const char *const pool_label[2] = { "pool=\"stacks\"", "pool=\"locations\"" };
		struct gw_slot_pool_stats ps[2];
		uint64_t live, capacity;

		gw_location_slots__stats(&live, &capacity);
		gw_metrics__add(w, "stackrelay_gateway_location_slots", GW_METRIC_GAUGE, slots_help, "state=\"live\"",
				(double)live);
		gw_metrics__add(w, "stackrelay_gateway_location_slots", GW_METRIC_GAUGE, slots_help,
				"state=\"allocated\"", (double)capacity);
		gw_stack_slabs__stats(&ps[0]);
		gw_location_slots__bytes(&ps[1]);
		for (int i = 0; i < 2; i++) {
			gw_metrics__add(w, pool_metric[i], GW_METRIC_GAUGE, pool_help[i], "state=\"live\"",
					(double)ps[i].live);
			gw_metrics__add(w, pool_metric[i], GW_METRIC_GAUGE, pool_help[i], "state=\"mapped\"",
					(double)ps[i].mapped);
			gw_metrics__add(w, pool_metric[i], GW_METRIC_GAUGE, pool_help[i], "state=\"resident\"",
					(double)ps[i].resident);
		}
		for (int i = 0; i < 2; i++)
			gw_metrics__add(w, "stackrelay_gateway_slot_pages_returned_bytes_total", GW_METRIC_COUNTER,
					"Bytes of stack slab and location table pages given back to the system "
					"(their slots all free).",
					pool_label[i], (double)ps[i].returned);
	}
	gw_metrics__add(w, "stackrelay_gateway_batches_bytes", GW_METRIC_GAUGE,
			"Estimated heap bytes of every batch alive in the pipelines.", NULL,
			(double)gw_profiles_live_bytes());
	gw_metrics__add(w, "stackrelay_gateway_batches", GW_METRIC_GAUGE, "Batches alive in the pipelines.", NULL,
			(double)gw_profiles_live_count());
	gw_metrics__add(w, "stackrelay_gateway_ready", GW_METRIC_GAUGE, "1 when /readyz answers 200.", NULL,
			gw_runtime__ready(rt) ? 1 : 0);
	process_metrics(w, rt);
}

static void telemetry_handler(void *userdata, const char *path, int *ret_status, char **ret_body, size_t *ret_len,
			      const char **ret_content_type)
{
	struct gw_runtime *rt = userdata;
	const char *msg;

	*ret_content_type = "text/plain; charset=utf-8";
	if (strcmp(path, "/metrics") == 0 && !rt->metrics_off) {
		struct gw_metrics_writer *w = gw_metrics_writer_new();
		if (!w)
			goto fail;
		builtin_metrics(w, rt);
		for (size_t i = 0; i < rt->n_collectors; i++)
			rt->collectors[i].fn(w, rt->collectors[i].userdata);
		int r = gw_metrics_writer__render(w, ret_body, ret_len);
		gw_metrics_writer_free(w);
		if (r < 0)
			goto fail;
		*ret_status = 200;
		*ret_content_type = "text/plain; version=0.0.4; charset=utf-8";
		return;
	}
	if (strcmp(path, "/healthz") == 0) {
		*ret_status = 200;
		msg = "ok\n";
	} else if (strcmp(path, "/readyz") == 0) {
		bool ready = gw_runtime__ready(rt);
		*ret_status = ready ? 200 : 503;
		msg = ready ? "ready\n" : rt->shutting_down ? "shutting down\n" : "not ready\n";
	} else {
		*ret_status = 404;
		msg = "not found: try /metrics, /healthz, /readyz\n";
	}
	*ret_body = strdup(msg);
	*ret_len = *ret_body ? strlen(msg) : 0;
	return;
fail:
	*ret_status = 500;
	*ret_body = NULL;
	*ret_len = 0;
}

int gw_runtime__add_metrics(struct gw_runtime *rt, gw_metrics_fn fn, void *userdata)
{
	struct collector *n = realloc(rt->collectors, (rt->n_collectors + 1) * sizeof(*n));
	if (!n)
		return -ENOMEM;
	rt->collectors = n;
	rt->collectors[rt->n_collectors++] = (struct collector){ fn, userdata };
	return 0;
}

void gw_runtime__remove_metrics(struct gw_runtime *rt, gw_metrics_fn fn, void *userdata)
{
	for (size_t i = 0; i < rt->n_collectors; i++) {
		if (rt->collectors[i].fn == fn && rt->collectors[i].userdata == userdata) {
			memmove(&rt->collectors[i], &rt->collectors[i + 1],
				(rt->n_collectors - i - 1) * sizeof(rt->collectors[0]));
			rt->n_collectors--;
			return;
		}
	}
}

/*
 * The health_check extension's answer, as the Collector's: 200 with a JSON
 * status while the pipelines run, 503 while starting or shutting down.
 */
static void health_handler(void *userdata, const char *path, int *ret_status, char **ret_body, size_t *ret_len,
			   const char **ret_content_type)
{
	struct gw_runtime *rt = userdata;
	const char *msg;

	*ret_content_type = "application/json";
	if (strcmp(path, rt->health_path) != 0) {
		*ret_status = 404;
		*ret_content_type = "text/plain; charset=utf-8";
		msg = "not found\n";
	} else if (gw_runtime__ready(rt)) {
		*ret_status = 200;
		msg = "{\"status\":\"Server available\"}\n";
	} else {
		*ret_status = 503;
		msg = "{\"status\":\"Server not available\"}\n";
	}
	*ret_body = strdup(msg);
	*ret_len = *ret_body ? strlen(msg) : 0;
	if (!*ret_body)
		*ret_status = 500;
}

/* ---- start ---- */

static const enum gw_component_kind start_order[] = { GW_EXPORTER, GW_PROCESSOR, GW_RECEIVER };

int gw_runtime__start(struct gw_runtime *rt)
{
	int r;

	if (rt->metrics_address) {
		char err[256] = "";
		rt->telemetry =
			gw_telemetry_new(rt->loop, rt->metrics_address, telemetry_handler, rt, err, sizeof(err));
		if (!rt->telemetry) {
			r = -errno;
			sr_log_error("gateway", "cannot start the telemetry server", "address=%s error=\"%s\"",
				     rt->metrics_address, err);
			return r;
		}
		sr_log_info("gateway", "telemetry server listening", "address=%s",
			    gw_telemetry__address(rt->telemetry));
	}
	if (rt->health_address) {
		char err[256] = "";
		rt->health = gw_telemetry_new(rt->loop, rt->health_address, health_handler, rt, err, sizeof(err));
		if (!rt->health) {
			r = -errno;
			sr_log_error("gateway", "cannot start the health_check extension", "address=%s error=\"%s\"",
				     rt->health_address, err);
			return r;
		}
		sr_log_info("gateway", "health_check listening", "address=%s path=%s",
			    gw_telemetry__address(rt->health), rt->health_path);
	}
	/* Downstream first, so nothing flows into a component that is not running. */
	for (size_t k = 0; k < SR_ARRAY_SIZE(start_order); k++) {
		for (size_t i = 0; i < rt->n_comps; i++) {
			struct rt_comp *rc = &rt->comps[i];
			if (rc->c->type->kind != start_order[k])
				continue;
			if (rc->c->type->create && (r = rc->c->type->create(rc->c)) < 0) {
				sr_log_error("gateway", "cannot create component", "component=%s error=\"%s\"",
					     rc->c->id, strerror(-r));
				return r;
			}
			rc->created = true;
		}
	}
	for (size_t k = 0; k < SR_ARRAY_SIZE(start_order); k++) {
		for (size_t i = 0; i < rt->n_comps; i++) {
			struct rt_comp *rc = &rt->comps[i];
			if (rc->c->type->kind != start_order[k])
				continue;
			if (rc->c->type->start && (r = rc->c->type->start(rc->c)) < 0) {
				sr_log_error("gateway", "cannot start component", "component=%s error=\"%s\"",
					     rc->c->id, strerror(-r));
				return r;
			}
			rc->started = true;
		}
	}
	rt->started = true;
	return 0;
}

/* ---- routing ---- */

static int deliver_one(struct gw_runtime *rt, struct gw_component *c, struct gw_profiles *p)
{
	uint64_t total = p->total_count;
	struct rt_comp *rc = find(rt, c);
	int r;

	gw_accounting__add(rt->acct, c->id, GW_COUNT_RECEIVED, NULL, total);
	if (!rc || !rc->started || rc->done || !c->type->consume) {
		/* Stopped already (shutdown timed out upstream): nothing can take it. */
		gw_accounting__add(rt->acct, c->id, GW_COUNT_DROPPED, GW_REASON_SHUTDOWN, total);
		gw_profiles__unref(p);
		return -ESHUTDOWN;
	}
	r = c->type->consume(c, p);
	if (r < 0) {
		rt->emit_errors++;
		sr_log_debug("gateway", "component failed to consume a batch", "component=%s error=\"%s\"", c->id,
			     strerror(-r));
	}
	return r;
}

/* Sends p (owned) to stage p->route_stage of pipeline p->route_pipeline. */
static int deliver(struct gw_runtime *rt, struct gw_profiles *p)
{
	const struct gw_pipeline_def *pd = &rt->pipes[p->route_pipeline];
	int r = 0, e;

	if (p->route_stage < pd->n_processors)
		return deliver_one(rt, pd->processors[p->route_stage], p);
	if (pd->n_exporters == 0) {
		gw_profiles__unref(p);
		return -ENOENT;
	}
	/* Exporters share the batch read-only. */
	for (size_t i = 0; i < pd->n_exporters; i++) {
		struct gw_profiles *q = i + 1 == pd->n_exporters ? p : gw_profiles__ref(p);
		e = deliver_one(rt, pd->exporters[i], q);
		if (e < 0 && r == 0)
			r = e;
	}
	return r;
}

static bool pipeline_has_receiver(const struct gw_pipeline_def *pd, const struct gw_component *c)
{
	for (size_t i = 0; i < pd->n_receivers; i++)
		if (pd->receivers[i] == c)
			return true;
	return false;
}

int gw_component_emit(struct gw_component *c, struct gw_profiles *p)
{
	struct gw_runtime *rt = c->runtime;
	uint64_t total = p->total_count;
	int r = 0, e;

	if (!rt) {
		gw_profiles__unref(p);
		return -EINVAL;
	}
	switch (c->type->kind) {
	case GW_RECEIVER: {
		size_t n = 0, seen = 0;
		for (size_t i = 0; i < rt->n_pipes; i++)
			n += pipeline_has_receiver(&rt->pipes[i], c);
		if (n == 0) {
			gw_accounting__add(rt->acct, c->id, GW_COUNT_RECEIVED, NULL, 0);
			gw_accounting__add(rt->acct, c->id, GW_COUNT_DROPPED, GW_REASON_NO_ROUTE, total);
			gw_profiles__unref(p);
			return -ENOENT;
		}
		gw_accounting__add(rt->acct, c->id, GW_COUNT_ACCEPTED, NULL, total);
		for (size_t i = 0; i < rt->n_pipes; i++) {
			struct gw_profiles *q;
			if (!pipeline_has_receiver(&rt->pipes[i], c))
				continue;
			/* Each pipeline changes its batch: a private copy for all but the last. */
			q = ++seen == n ? p : gw_profiles__clone(p);
			if (!q) {
				const struct gw_pipeline_def *pd = &rt->pipes[i];
				struct gw_component *first = pd->n_processors  ? pd->processors[0]
							     : pd->n_exporters ? pd->exporters[0]
									       : c;
				gw_accounting__add(rt->acct, first->id, GW_COUNT_RECEIVED, NULL, total);
				gw_accounting__add(rt->acct, first->id, GW_COUNT_DROPPED, "out_of_memory", total);
				r = -ENOMEM;
				continue;
			}
			q->route_pipeline = (uint32_t)i;
			q->route_stage = 0;
			e = deliver(rt, q);
			if (e < 0 && r == 0)
				r = e;
		}
		return r;
	}
	case GW_PROCESSOR:
		gw_accounting__add(rt->acct, c->id, GW_COUNT_ACCEPTED, NULL, total);
		if (p->route_pipeline >= rt->n_pipes) {
			gw_profiles__unref(p);
			return -EINVAL;
		}
		p->route_stage++;
		return deliver(rt, p);
	case GW_EXPORTER:
		break;
	}
	gw_profiles__unref(p);
	return -EINVAL;
}

void gw_component_drop(struct gw_component *c, struct gw_profiles *p, const char *reason)
{
	if (c->runtime)
		gw_accounting__add(c->runtime->acct, c->id, GW_COUNT_DROPPED, reason, p->total_count);
	gw_profiles__unref(p);
}

void gw_component_drop_samples(struct gw_component *c, const char *reason, uint64_t samples)
{
	if (c->runtime)
		gw_accounting__add(c->runtime->acct, c->id, GW_COUNT_DROPPED, reason, samples);
}

void gw_component_received(struct gw_component *c, uint64_t samples)
{
	if (c->runtime)
		gw_accounting__add(c->runtime->acct, c->id, GW_COUNT_RECEIVED, NULL, samples);
}

void gw_component_refused(struct gw_component *c, const char *reason, uint64_t samples)
{
	if (c->runtime)
		gw_accounting__add(c->runtime->acct, c->id, GW_COUNT_REFUSED, reason, samples);
}

void gw_component_exported(struct gw_component *c, uint64_t samples)
{
	if (c->runtime)
		gw_accounting__add(c->runtime->acct, c->id, GW_COUNT_EXPORTED, NULL, samples);
}

/* ---- shedding queued data (memory_limiter above its hard limit) ---- */

int gw_runtime__add_shedder(struct gw_runtime *rt, struct gw_component *c, gw_shed_fn fn)
{
	struct shedder *n = realloc(rt->shedders, (rt->n_shedders + 1) * sizeof(*n));

	if (!n)
		return -ENOMEM;
	rt->shedders = n;
	rt->shedders[rt->n_shedders++] = (struct shedder){ c, fn };
	return 0;
}

void gw_runtime__remove_shedder(struct gw_runtime *rt, struct gw_component *c)
{
	for (size_t i = 0; i < rt->n_shedders; i++) {
		if (rt->shedders[i].c == c) {
			memmove(&rt->shedders[i], &rt->shedders[i + 1],
				(rt->n_shedders - i - 1) * sizeof(rt->shedders[0]));
			rt->n_shedders--;
			return;
		}
	}
}

uint64_t gw_runtime__shed(struct gw_runtime *rt, uint64_t bytes, const char *reason)
{
	uint64_t freed = 0;
	bool progress = true;

	/* One oldest item per component per round, so several exporters give up their queues alike. */
	while (freed < bytes && progress) {
		progress = false;
		for (size_t i = 0; i < rt->n_shedders && freed < bytes; i++) {
			uint64_t n = rt->shedders[i].fn(rt->shedders[i].c, reason);

			if (n) {
				freed += n;
				progress = true;
			}
		}
	}
	return freed;
}

/* ---- admission, symbol tables ---- */

int gw_runtime__set_admission(struct gw_runtime *rt, struct gw_component *c, gw_admission_fn fn)
{
	for (size_t i = 0; i < rt->n_admission; i++) {
		if (rt->admission[i].c == c) {
			rt->admission[i].fn = fn;
			return 0;
		}
	}
	struct admission *n = realloc(rt->admission, (rt->n_admission + 1) * sizeof(*n));
	if (!n)
		return -ENOMEM;
	rt->admission = n;
	rt->admission[rt->n_admission++] = (struct admission){ c, fn };
	return 0;
}

int gw_runtime__admit(struct gw_runtime *rt, uint32_t *ret_retry_after_ms)
{
	uint32_t worst = 0;
	int r = 0;

	for (size_t i = 0; i < rt->n_admission; i++) {
		uint32_t ms = 0;
		const char *why = NULL;

		if (!rt->admission[i].fn)
			continue;
		if (rt->admission[i].fn(rt->admission[i].c, &ms, &why) < 0) {
			/* The check that asks for the longest wait names the refusal. */
			if (r == 0 || ms > worst)
				rt->refusal = why ? why : rt->admission[i].c->id;
			r = -EBUSY;
			worst = SR_MAX(worst, ms);
		}
	}
	if (ret_retry_after_ms)
		*ret_retry_after_ms = r < 0 ? SR_MAX(worst, 1u) : 0;
	return r;
}

const char *gw_runtime__refusal(struct gw_runtime *rt)
{
	return rt->refusal ? rt->refusal : "the gateway is not taking data";
}

bool gw_runtime__admits(struct gw_runtime *rt)
{
	for (size_t i = 0; i < rt->n_admission; i++)
		if (rt->admission[i].fn && rt->admission[i].fn(rt->admission[i].c, NULL, NULL) < 0)
			return false;
	return true;
}

void gw_runtime__set_symbol_table_handler(struct gw_runtime *rt, gw_symbol_table_fn fn, uint64_t max_pending,
					  void *userdata)
{
	rt->sym_fn = fn;
	rt->sym_ud = userdata;
	atomic_store(&rt->sym_max_pending, fn ? max_pending : 0);
}

void gw_runtime__symbol_table_done(struct gw_runtime *rt, uint64_t bytes)
{
	atomic_fetch_sub(&rt->sym_pending, bytes);
}

uint64_t gw_runtime__symbol_tables_pending(struct gw_runtime *rt)
{
	return atomic_load(&rt->sym_pending);
}

int gw_runtime__admit_symbol_tables(struct gw_runtime *rt, uint64_t bytes, uint64_t *ret_reserved,
				    uint32_t *ret_retry_after_ms)
{
	uint64_t max = atomic_load(&rt->sym_max_pending), pending = atomic_load(&rt->sym_pending);

	*ret_reserved = 0;
	if (!max)
		return 0;
	/*
	 * Taken uploads count as pending from here, not from when they are
	 * handed over: receivers decode one upload after another, and the next
	 * one's check must see the one still on its way.
	 */
	do {
		if (pending && pending + bytes > max) {
			/*
			 * Adding a table takes tens of ms, so the backlog drains in
			 * seconds: 2 s, up to 4 s the fuller it is, so that a burst
			 * of uploads is not sent (and inflated) over and over meanwhile.
			 */
			*ret_retry_after_ms = GW_SYMBOL_UPLOAD_RETRY_MS +
					      (uint32_t)(GW_SYMBOL_UPLOAD_RETRY_MS * SR_MIN(pending, max) / max);
			return -EAGAIN;
		}
	} while (!atomic_compare_exchange_weak(&rt->sym_pending, &pending, pending + bytes));
	*ret_reserved = bytes;
	return 0;
}

void gw_runtime__symbol_table(struct gw_runtime *rt, struct gw_symbol_table *t)
{
	if (rt->sym_fn) {
		atomic_fetch_add(&rt->sym_pending, t->bytes);
		rt->sym_fn(t, rt->sym_ud);
	} else
		gw_symbol_table_free(t);
}

/* ---- shutdown ---- */

static void shutdown_layer(struct gw_runtime *rt);

static const enum gw_component_kind destroy_order[] = { GW_RECEIVER, GW_PROCESSOR, GW_EXPORTER };

/* Receivers first: they feed the others. */
static void destroy_all(struct gw_runtime *rt)
{
	for (size_t k = 0; k < SR_ARRAY_SIZE(destroy_order); k++)
		for (size_t i = 0; i < rt->n_comps; i++) {
			struct rt_comp *rc = &rt->comps[i];
			if (rc->c->type->kind != destroy_order[k] || !rc->created)
				continue;
			rc->created = false;
			rc->started = false;
			rc->done = true;
			if (rc->c->type->destroy)
				rc->c->type->destroy(rc->c);
		}
}

static void finish(struct gw_runtime *rt, bool timed_out)
{
	if (rt->finished)
		return;
	rt->finished = true;
	if (rt->timer_init)
		uv_timer_stop(&rt->shutdown_timer);
	if (timed_out) {
		sr_log_warn("gateway", "shutdown timed out; components still busy are stopped now", "timeout_ms=%llu",
			    (unsigned long long)(rt->shutdown_timeout_ns / 1000000ULL));
		destroy_all(rt);
	}
	/* Nothing more to serve: let the loop end. */
	gw_telemetry_close(rt->telemetry);
	rt->telemetry = NULL;
	gw_telemetry_close(rt->health);
	rt->health = NULL;
	if (rt->done)
		rt->done(rt, timed_out, rt->done_ud);
}

static void component_done(struct gw_component *c)
{
	struct gw_runtime *rt = c->runtime;
	struct rt_comp *rc = find(rt, c);

	if (!rc || rc->done)
		return;
	rc->done = true;
	if (rt->finished)
		return;
	for (size_t i = 0; i < rt->n_comps; i++)
		if (rt->comps[i].layer == rt->layer && rt->comps[i].shutdown_called && !rt->comps[i].done)
			return;
	rt->layer++;
	shutdown_layer(rt);
}

static void shutdown_layer(struct gw_runtime *rt)
{
	while (rt->layer <= rt->max_layer) {
		bool pending = false;
		for (size_t i = 0; i < rt->n_comps; i++) {
			struct rt_comp *rc = &rt->comps[i];
			if (rc->layer != rt->layer || rc->shutdown_called)
				continue;
			rc->shutdown_called = true;
			if (!rc->started || !rc->c->type->shutdown) {
				rc->done = true;
				continue;
			}
			pending = true;
		}
		/* Call after marking the whole layer, so a synchronous done() sees it. */
		for (size_t i = 0; i < rt->n_comps; i++) {
			struct rt_comp *rc = &rt->comps[i];
			if (rc->layer == rt->layer && rc->shutdown_called && !rc->done && rc->started &&
			    rc->c->type->shutdown) {
				int layer = rt->layer;
				rc->c->type->shutdown(rc->c, component_done);
				if (rt->layer != layer || rt->finished)
					return; /* done() moved on already */
			}
		}
		if (pending) {
			for (size_t i = 0; i < rt->n_comps; i++)
				if (rt->comps[i].layer == rt->layer && !rt->comps[i].done)
					return; /* component_done continues */
		}
		rt->layer++;
	}
	finish(rt, false);
}

static void on_shutdown_timeout(uv_timer_t *t)
{
	finish(t->data, true);
}

void gw_runtime__shutdown(struct gw_runtime *rt, void (*done)(struct gw_runtime *rt, bool timed_out, void *userdata),
			  void *userdata)
{
	if (rt->shutting_down)
		return;
	rt->shutting_down = true;
	rt->done = done;
	rt->done_ud = userdata;
	sr_log_info("gateway", "shutting down: receivers stop, batches are flushed", "timeout_ms=%llu",
		    (unsigned long long)(rt->shutdown_timeout_ns / 1000000ULL));
	uv_timer_init(rt->loop, &rt->shutdown_timer);
	rt->shutdown_timer.data = rt;
	rt->timer_init = true;
	uv_timer_start(&rt->shutdown_timer, on_shutdown_timeout, rt->shutdown_timeout_ns / 1000000ULL, 0);
	rt->layer = 0;
	shutdown_layer(rt);
}

static void free_after_close(uv_handle_t *h)
{
	free(h->data);
}

void gw_runtime_free(struct gw_runtime *rt)
{
	if (!rt)
		return;
	destroy_all(rt);
	gw_telemetry_close(rt->telemetry);
	gw_telemetry_close(rt->health);
	gw_stores_free(rt->stores);
	gw_accounting_free(rt->acct);
	free(rt->collectors);
	free(rt->admission);
	free(rt->shedders);
	free(rt->comps);
	free(rt->metrics_address);
	free(rt->health_address);
	free(rt->health_path);
	if (rt->timer_init) {
		/* The timer is embedded: free the runtime when it is closed. */
		rt->shutdown_timer.data = rt;
		uv_close((uv_handle_t *)&rt->shutdown_timer, free_after_close);
		return;
	}
	free(rt);
}
