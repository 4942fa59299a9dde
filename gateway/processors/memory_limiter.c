// SPDX-License-Identifier: Apache-2.0
/*
 * memory_limiter (docs/processors.md, "memory_limiter"): keeps the gateway's
 * real memory (its RSS) under a limit, with the Collector's semantics:
 *
 *   soft limit = limit - spike limit. Above it, receivers refuse new data
 *   with "retry later" (agents back off and keep their data), until the RSS
 *   is back under it. Data already inside the pipeline flows on.
 *   When the RSS stays above it with no data in the pipeline, refusing
 *   cannot help: that is reported (gw_memlim_stuck__check()).
 *   hard limit = limit. Above it, batches reaching this processor are
 *   dropped (counted, reason memory_limit), the exporters' memory queues
 *   shed their oldest requests (gw_runtime__shed, counted with the same
 *   reason) until what they freed covers the excess, and freed memory is
 *   returned to the system, so the process stays near the limit under any
 *   load. Each check sheds at most rss - limit (+1) bytes; the next check
 *   measures again.
 *
 * The limit is limit_mib, or limit_percentage of the cgroup's limit (in a
 * container) or of the host's memory; likewise the spike limit.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "component.h"
#include "common/config.h"
#include "core/accounting.h"
#include "core/heap.h"
#include "core/metrics.h"
#include "core/model.h"
#include "core/runtime.h"
#include "common/log.h"
#include "common/macro.h"
#include "memory_limiter.h"

/* A cgroup "limit" this large means no limit (v1 reports 2^63 rounded to pages). */
#define MEM_UNLIMITED_BYTES (1ULL << 60)
/* Agents are told to come back after at least this long. */
#define MEM_MIN_RETRY_AFTER_MS 1000

struct memlim_config {
	uint64_t check_interval;
	uint64_t limit_mib;
	uint64_t spike_limit_mib;
	uint64_t limit_percentage;
	uint64_t spike_limit_percentage;
};

static const struct sr_field memlim_fields[] = {
	SR_FIELD_DUR("check_interval", struct memlim_config, check_interval, .def = "1s",
		     .doc = "How often the process's RSS is measured."),
	SR_FIELD_U64("limit_mib", struct memlim_config, limit_mib, .def = "0",
		     .doc = "Hard limit in MiB; 0: use limit_percentage.", .min = 0, .max = 16777216),
	SR_FIELD_U64("spike_limit_mib", struct memlim_config, spike_limit_mib, .def = "0",
		     .doc = "Headroom below the hard limit; above limit - spike receivers refuse new data. "
			    "0: 20% of the limit (spike_limit_percentage when set).",
		     .min = 0, .max = 16777216),
	SR_FIELD_U64("limit_percentage", struct memlim_config, limit_percentage, .def = "0",
		     .doc = "Hard limit as a percentage of the cgroup's memory limit, or of the host's memory "
			    "outside a container.",
		     .min = 0, .max = 100),
	SR_FIELD_U64("spike_limit_percentage", struct memlim_config, spike_limit_percentage, .def = "0",
		     .doc = "Spike limit as a percentage of the same total.", .min = 0, .max = 100),
	SR_FIELD_END,
};

static int memlim_validate(const void *config, const char *path, struct sr_diag *d)
{
	const struct memlim_config *cfg = config;
	int r = 0;

	if (!cfg->limit_mib && !cfg->limit_percentage) {
		sr_diag_add(d, NULL, 0, 0, path, "set limit_mib or limit_percentage");
		r = -EINVAL;
	}
	if (cfg->limit_mib && cfg->limit_percentage) {
		sr_diag_add(d, NULL, 0, 0, path, "limit_mib and limit_percentage exclude each other");
		r = -EINVAL;
	}
	if (cfg->limit_mib && cfg->spike_limit_mib >= cfg->limit_mib) {
		sr_diag_add(d, NULL, 0, 0, path, "spike_limit_mib (%" PRIu64 ") must be below limit_mib (%" PRIu64 ")",
			    cfg->spike_limit_mib, cfg->limit_mib);
		r = -EINVAL;
	}
	if (cfg->limit_percentage && cfg->spike_limit_percentage >= cfg->limit_percentage) {
		sr_diag_add(d, NULL, 0, 0, path, "spike_limit_percentage must be below limit_percentage");
		r = -EINVAL;
	}
	if (cfg->check_interval == 0) {
		sr_diag_add(d, NULL, 0, 0, path, "check_interval must be > 0");
		r = -EINVAL;
	}
	return r;
}

/* ---- measuring ---- */

int64_t (*gw_mem_rss_reader)(void) = gw_mem_rss_bytes;

int64_t gw_mem_rss_bytes(void)
{
	unsigned long long size, resident;
	FILE *f = fopen("/proc/self/statm", "re");
	int n;

	if (!f)
		return -errno;
	n = fscanf(f, "%llu %llu", &size, &resident);
	fclose(f);
	if (n != 2)
		return -EIO;
	return (int64_t)(resident * (unsigned long long)sysconf(_SC_PAGESIZE));
}

/* Reads one number (or "max") from a file; 0 ok, -errno. */
static int read_limit(const char *root, const char *path, uint64_t *ret)
{
	char p[4096], buf[64];
	FILE *f;
	char *end;

	snprintf(p, sizeof(p), "%s%s", root, path);
	f = fopen(p, "re");
	if (!f)
		return -errno;
	if (!fgets(buf, sizeof(buf), f)) {
		fclose(f);
		return -EIO;
	}
	fclose(f);
	if (strncmp(buf, "max", 3) == 0) {
		*ret = UINT64_MAX;
		return 0;
	}
	errno = 0;
	*ret = strtoull(buf, &end, 10);
	if (errno || end == buf)
		return -EINVAL;
	return 0;
}

/* The cgroup path of a hierarchy from /proc/self/cgroup: v2 ("0::") when controller is NULL. */
static int own_cgroup(const char *root, const char *controller, char *ret, size_t size)
{
	char p[4096], line[4096];
	FILE *f;
	int r = -ENOENT;

	snprintf(p, sizeof(p), "%s/proc/self/cgroup", root);
	f = fopen(p, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		bool match = false;

		if (!c2)
			continue;
		line[strcspn(line, "\n")] = '\0';
		*c1 = '\0';
		*c2 = '\0';
		if (!controller) {
			match = strcmp(line, "0") == 0 && c1[1] == '\0';
		} else {
			char *save = NULL;

			for (char *tok = strtok_r(c1 + 1, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
				if (strcmp(tok, controller) == 0)
					match = true;
		}
		if (match) {
			snprintf(ret, size, "%s", c2 + 1);
			r = 0;
			break;
		}
	}
	fclose(f);
	return r;
}

int64_t gw_mem_total_bytes(const char *root, const char **ret_source)
{
	char cg[2048], path[4200];
	uint64_t v;

	/* cgroup v2: our cgroup's memory.max, else the mount root's (a container's namespace root). */
	if (own_cgroup(root, NULL, cg, sizeof(cg)) == 0) {
		snprintf(path, sizeof(path), "/sys/fs/cgroup%s/memory.max", strcmp(cg, "/") == 0 ? "" : cg);
		if ((read_limit(root, path, &v) == 0 || read_limit(root, "/sys/fs/cgroup/memory.max", &v) == 0) &&
		    v < MEM_UNLIMITED_BYTES) {
			*ret_source = "cgroup2";
			return (int64_t)v;
		}
	}
	if (own_cgroup(root, "memory", cg, sizeof(cg)) == 0) {
		snprintf(path, sizeof(path), "/sys/fs/cgroup/memory%s/memory.limit_in_bytes",
			 strcmp(cg, "/") == 0 ? "" : cg);
		if ((read_limit(root, path, &v) == 0 ||
		     read_limit(root, "/sys/fs/cgroup/memory/memory.limit_in_bytes", &v) == 0) &&
		    v < MEM_UNLIMITED_BYTES) {
			*ret_source = "cgroup1";
			return (int64_t)v;
		}
	}
	{
		char p[4096], line[256];
		FILE *f;
		unsigned long long kb = 0;

		snprintf(p, sizeof(p), "%s/proc/meminfo", root);
		f = fopen(p, "re");
		if (!f)
			return -errno;
		while (fgets(line, sizeof(line), f))
			if (sscanf(line, "MemTotal: %llu kB", &kb) == 1)
				break;
		fclose(f);
		if (!kb)
			return -EIO;
		*ret_source = "meminfo";
		return (int64_t)(kb * 1024);
	}
}

/* ---- the processor ---- */

enum memlim_state { MEM_OK, MEM_SOFT, MEM_HARD };

struct memlim {
	struct gw_component *c;
	const struct memlim_config *cfg;
	uv_timer_t timer;
	bool timer_open, destroyed;
	uint64_t limit, soft;
	int64_t rss;
	enum memlim_state state;
	uint64_t refusals, drops;
	uint64_t shed_bytes;
	uint64_t trimmed_bytes; /* RSS the trims above the soft limit gave back */
	struct gw_memlim_stuck stuck_state;
	uint64_t stuck;
	bool fit_checked; /* the stores' bounds against the soft limit (on_check) */
};

bool gw_memlim_stuck__check(struct gw_memlim_stuck *s, bool above, bool quiescent)
{
	if (!above) {
		*s = (struct gw_memlim_stuck){ 0 };
		return false;
	}
	s->checks = quiescent ? s->checks + 1 : 0;
	if (s->reported || s->checks < GW_MEMLIM_STUCK_CHECKS)
		return false;
	s->reported = true;
	return true;
}

bool gw_memlim_stores_fit(uint64_t stores_limit_bytes, uint64_t soft_limit_bytes)
{
	return stores_limit_bytes <= soft_limit_bytes / 4 * 3;
}

/* A stuck limiter is reported once per episode, with what holds the memory (see gw_memlim_stuck__check()). */
static void report_stuck(struct memlim *m, uint64_t rss)
{
	m->stuck++;
	sr_log_warn(
		m->c->id,
		"memory stays above the soft limit with no data in the pipeline: refusing cannot lower it, so every "
		"request is refused; raise limit_mib, or lower receivers.agent.stores",
		"rss_bytes=%" PRIu64 " soft_limit_bytes=%" PRIu64 " stores_bytes=%" PRIu64, rss, m->soft,
		gw_stores__bytes(gw_runtime__stores(m->c->runtime)));
}

static const char *state_name(enum memlim_state s)
{
	return s == MEM_HARD ? "hard" : s == MEM_SOFT ? "soft" : "ok";
}

static void measure(struct memlim *m)
{
	int64_t rss = gw_mem_rss_reader(), after;
	enum memlim_state s;
	uint64_t freed = 0;

	if (rss < 0)
		return; /* keep the last state: better than guessing */
	/*
	 * Above the soft limit, first give back what is only kept: the caches
	 * (the encoder's dictionaries) and free pages: the heap's (freed
	 * batches and request bodies, the holes churning connections leave)
	 * and the slot pools' (evicted stacks and locations), then decide on
	 * what is left. An RSS read before the trim counts memory the process
	 * no longer uses, and refusing for it only delays the agents for a
	 * check interval.
	 */
	if ((uint64_t)rss >= m->soft) {
		gw_heap_release_caches();
		gw_heap_trim();
		after = gw_mem_rss_reader();
		if (after >= 0) {
			m->trimmed_bytes += after < rss ? (uint64_t)(rss - after) : 0;
			rss = after;
		}
	}
	m->rss = rss;
	s = (uint64_t)rss >= m->limit ? MEM_HARD : (uint64_t)rss >= m->soft ? MEM_SOFT : MEM_OK;
	if (s == MEM_HARD) {
		/*
		 * The oldest queued requests go first (they are the stalest data
		 * and the first the backend would have refused); enough of them to
		 * bring the RSS under the limit if the freed bytes leave the process.
		 */
		freed = gw_runtime__shed(m->c->runtime, (uint64_t)rss - m->limit + 1, "memory_limit");
		if (freed) {
			m->shed_bytes += freed;
			sr_log_warn(m->c->id, "memory above the hard limit: dropped the oldest queued requests",
				    "rss_bytes=%" PRId64 " limit_bytes=%" PRIu64 " freed_bytes=%" PRIu64, rss, m->limit,
				    freed);
		}
	}
	if (gw_memlim_stuck__check(&m->stuck_state, s != MEM_OK,
				   s != MEM_OK &&
					   gw_accounting__check(gw_runtime__accounting(m->c->runtime), true) == 0))
		report_stuck(m, (uint64_t)rss);
	if (freed)
		gw_heap_trim(); /* what the exporters shed goes back to the system */
	if (s != m->state) {
		if (s > m->state)
			sr_log_warn(m->c->id,
				    s == MEM_HARD ? "memory above the hard limit: dropping batches"
						  : "memory above the soft limit: refusing new data",
				    "rss_bytes=%" PRId64 " soft_limit_bytes=%" PRIu64 " limit_bytes=%" PRIu64, rss,
				    m->soft, m->limit);
		else
			sr_log_info(m->c->id, "memory back under a limit", "state=%s rss_bytes=%" PRId64, state_name(s),
				    rss);
		m->state = s;
	}
}

static void on_check(uv_timer_t *t)
{
	struct memlim *m = t->data;

	/* At the first check, when every component has started (the agent receivers set the stores' bounds). */
	if (!m->fit_checked) {
		uint64_t stores = gw_stores__limit_bytes(gw_runtime__stores(m->c->runtime));

		m->fit_checked = true;
		if (!gw_memlim_stores_fit(stores, m->soft))
			sr_log_warn(
				m->c->id,
				"the definition stores, once full, take more than 3/4 of the soft limit: the "
				"limiter will refuse most data, or all of it; lower receivers.agent.stores, or raise "
				"limit_mib",
				"stores_limit_bytes=%" PRIu64 " soft_limit_bytes=%" PRIu64, stores, m->soft);
	}
	measure(m);
}

static int admission(struct gw_component *c, uint32_t *ret_retry_after_ms, const char **ret_why)
{
	struct memlim *m = c->state;

	if (m->state == MEM_OK)
		return 0;
	if (!ret_retry_after_ms)
		return -EBUSY; /* only asked */
	m->refusals++;
	*ret_retry_after_ms = (uint32_t)SR_MAX(m->cfg->check_interval / 1000000 * 2, (uint64_t)MEM_MIN_RETRY_AFTER_MS);
	if (ret_why)
		*ret_why = "the gateway is over its memory limit";
	return -EBUSY;
}

static int memlim_consume(struct gw_component *c, struct gw_profiles *p)
{
	struct memlim *m = c->state;

	if (m->state == MEM_HARD) {
		m->drops++;
		gw_component_drop(c, p, "memory_limit");
		return 0;
	}
	return gw_component_emit(c, p);
}

static void memlim_metrics(struct gw_metrics_writer *w, void *userdata)
{
	struct memlim *m = userdata;
	char l[256] = "";

	gw_metrics_label(l, sizeof(l), "processor", m->c->id);
	gw_metrics__add(w, "stackrelay_gateway_memory_rss_bytes", GW_METRIC_GAUGE,
			"Resident memory of the gateway at the last check.", l, (double)m->rss);
	gw_metrics__add(w, "stackrelay_gateway_memory_limit_bytes", GW_METRIC_GAUGE, "The memory_limiter's hard limit.",
			l, (double)m->limit);
	gw_metrics__add(w, "stackrelay_gateway_memory_soft_limit_bytes", GW_METRIC_GAUGE,
			"The memory_limiter's soft limit (limit - spike).", l, (double)m->soft);
	gw_metrics__add(w, "stackrelay_gateway_memory_limiter_state", GW_METRIC_GAUGE,
			"0 under the soft limit, 1 above it (refusing), 2 above the hard limit (dropping).", l,
			(double)m->state);
	gw_metrics__add(w, "stackrelay_gateway_memory_limiter_refusals_total", GW_METRIC_COUNTER,
			"Receiver requests refused because memory was above the soft limit.", l, (double)m->refusals);
	gw_metrics__add(w, "stackrelay_gateway_memory_limiter_dropped_batches_total", GW_METRIC_COUNTER,
			"Batches dropped because memory was above the hard limit.", l, (double)m->drops);
	gw_metrics__add(w, "stackrelay_gateway_memory_limiter_shed_bytes_total", GW_METRIC_COUNTER,
			"Bytes of queued requests the exporters dropped (oldest first) above the hard limit.", l,
			(double)m->shed_bytes);
	gw_metrics__add(w, "stackrelay_gateway_memory_limiter_trimmed_bytes_total", GW_METRIC_COUNTER,
			"RSS given back by releasing caches and free heap pages above the soft limit, before deciding.",
			l, (double)m->trimmed_bytes);
	gw_metrics__add(
		w, "stackrelay_gateway_memory_limiter_stuck_total", GW_METRIC_COUNTER,
		"Times the RSS stayed above the soft limit with no data in the pipeline (every request refused).", l,
		(double)m->stuck);
}

static int memlim_create(struct gw_component *c)
{
	const struct memlim_config *cfg = c->config;
	struct memlim *m = calloc(1, sizeof(*m));
	const char *source = "limit_mib";
	uint64_t spike;

	if (!m)
		return -ENOMEM;
	m->c = c;
	m->cfg = cfg;
	if (cfg->limit_mib) {
		m->limit = cfg->limit_mib << 20;
		spike = cfg->spike_limit_mib ? cfg->spike_limit_mib << 20 : m->limit / 5;
	} else {
		int64_t total = gw_mem_total_bytes("", &source);

		if (total < 0) {
			sr_log_error(c->id, "cannot tell how much memory there is for limit_percentage", "error=%s",
				     strerror((int)-total));
			free(m);
			return (int)total;
		}
		m->limit = (uint64_t)total / 100 * cfg->limit_percentage;
		spike = cfg->spike_limit_percentage ? (uint64_t)total / 100 * cfg->spike_limit_percentage
						    : m->limit / 5;
	}
	m->soft = m->limit > spike ? m->limit - spike : 0;
	c->state = m;
	sr_log_info(c->id, "memory limits", "limit_bytes=%" PRIu64 " soft_limit_bytes=%" PRIu64 " from=%s", m->limit,
		    m->soft, source);
	return 0;
}

static const char *const memlim_drops[] = { "memory_limit", NULL };

static int memlim_start(struct gw_component *c)
{
	struct memlim *m = c->state;
	uint64_t ms = SR_MAX(m->cfg->check_interval / 1000000, (uint64_t)1);
	int r;

	gw_component_declare_drops(c, memlim_drops);
	uv_timer_init(gw_runtime__loop(c->runtime), &m->timer);
	m->timer.data = m;
	m->timer_open = true;
	measure(m);
	uv_timer_start(&m->timer, on_check, ms, ms);
	r = gw_runtime__set_admission(c->runtime, c, admission);
	if (r < 0)
		return r;
	gw_runtime__add_metrics(c->runtime, memlim_metrics, m);
	return 0;
}

static void memlim_shutdown(struct gw_component *c, void (*done)(struct gw_component *c))
{
	struct memlim *m = c->state;

	uv_timer_stop(&m->timer);
	done(c);
}

static void timer_closed(uv_handle_t *h)
{
	free(h->data);
}

static void memlim_destroy(struct gw_component *c)
{
	struct memlim *m = c->state;

	if (!m)
		return;
	c->state = NULL;
	if (c->runtime)
		gw_runtime__remove_metrics(c->runtime, memlim_metrics, m);
	if (m->timer_open) {
		uv_timer_stop(&m->timer);
		uv_close((uv_handle_t *)&m->timer, timer_closed);
	} else {
		free(m);
	}
}

const struct gw_component_type gw_processor_memory_limiter = {
	.name = "memory_limiter",
	.kind = GW_PROCESSOR,
	.doc = "Keeps the gateway's RSS under limit_mib (or limit_percentage of the cgroup/host memory): above "
	       "limit - spike receivers answer 'retry later'; above the limit batches are dropped and the exporters' "
	       "queues shed their oldest requests, counted.",
	.config_fields = memlim_fields,
	.config_size = sizeof(struct memlim_config),
	.collector_note = "limits apply to the process's RSS, everything the gateway holds, not to a Go heap: set "
			  "them nearer the container's limit (docs/otel-collector-migration.md)",
	.validate = memlim_validate,
	.create = memlim_create,
	.start = memlim_start,
	.consume = memlim_consume,
	.shutdown = memlim_shutdown,
	.destroy = memlim_destroy,
};
