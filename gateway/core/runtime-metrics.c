/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The runtime's answers on the telemetry server (/metrics, /healthz,
 * /readyz) and the health_check extension's endpoint: the gateway's own
 * metrics (accounting, stores, pools, batches, readiness, the process's
 * figures from /proc/self and the allocator) and the extra collectors
 * components add (runtime.h).
 */
#include <dirent.h>
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "accounting.h"
#include "common/grow.h"
#include "common/version.h"
#include "heap.h"
#include "metrics.h"
#include "model.h"
#include "runtime-private.h"
#include "slot-pool.h"

/* One registered heap cache's bytes (gw_heap_caches_each's callback). */
static void heap_cache_metric(const char *name, size_t bytes, void *arg)
{
	char lbl[96] = "";

	gw_metrics_label(lbl, sizeof(lbl), "cache", name);
	gw_metrics__add(arg, "stackrelay_gateway_heap_cache_bytes", GW_METRIC_GAUGE,
			"Heap bytes kept for speed only, by cache (otlp_encoder: the OTLP encoder's dictionaries and "
			"arrays kept for the next requests, at most 48 MiB); freed above the memory_limiter's soft "
			"limit.",
			lbl, (double)bytes);
}

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
	gw_heap_caches_each(heap_cache_metric, w);
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

void gw_runtime_telemetry_handler(void *userdata, const char *path, int *ret_status, char **ret_body, size_t *ret_len,
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
	size_t n = rt->n_collectors;

	if (sr_grow((void **)&rt->collectors, &rt->cap_collectors, n + 1, sizeof(*rt->collectors), 4) < 0)
		return -ENOMEM;
	rt->collectors[rt->n_collectors++] = (struct gw_rt_collector){ fn, userdata };
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
void gw_runtime_health_handler(void *userdata, const char *path, int *ret_status, char **ret_body, size_t *ret_len,
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
