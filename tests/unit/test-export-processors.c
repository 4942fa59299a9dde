// SPDX-License-Identifier: Apache-2.0
/*
 * The batch and memory_limiter processors, and the local exporters (file,
 * pprof, flamegraph), in the real runtime: a source receiver emits synthetic
 * batches, a capture exporter records what comes out of a processor, the
 * local exporters' files are read back; accounting must balance. Memory measurement against fake /proc and
 * /sys trees (cgroup v2, v1, none).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <json-c/json.h>
#include <pb_decode.h>
#include <uv.h>
#include <zlib.h>

#include "common/gzip.h"
#include "component.h"
#include "common/config.h"
#include "core/accounting.h"
#include "core/model.h"
#include "core/runtime.h"
#include "common/log.h"
#include "processors/memory_limiter.h"
#include "exporters/exporthelper.h"
#include "test-export-util.h"

#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb.h"

extern const struct gw_component_type gw_processor_batch;
extern const struct gw_component_type gw_processor_memory_limiter;
extern const struct gw_component_type gw_exporter_file;
extern const struct gw_component_type gw_exporter_pprof;
extern const struct gw_component_type gw_exporter_flamegraph;

/* ---- source and capture ---- */

struct source {
	uv_timer_t timer;
	unsigned next, n_batches, n_resources, n_samples;
	bool functions; /* emit xt_function_batch() (interpreted and JIT frames) instead */
	/* When set, batch i carries client_metadata[i % n_metadata] as a receiver's include_metadata would. */
	const char *const *client_metadata;
	unsigned n_metadata;
	bool selected; /* set them as an earlier batch processor's selection (gw_profiles.metadata) instead */
	uint64_t emitted;
	unsigned refused;
};

#define CAP_MAX_META 8

struct capture {
	unsigned batches;
	uint64_t samples, records, max_records;
	/* Samples by the metadata batches left with ("" for none). */
	char *meta[CAP_MAX_META];
	uint64_t meta_samples[CAP_MAX_META];
	unsigned meta_batches[CAP_MAX_META];
};

static struct source *src_state;
static struct capture cap;

static void tick(uv_timer_t *t)
{
	struct gw_component *c = t->data;
	struct source *s = c->state;
	uint32_t ms;
	uint64_t total;
	struct gw_profiles *p;

	if (s->next >= s->n_batches)
		return;
	if (gw_runtime__admit(c->runtime, &ms) < 0) {
		s->refused++;
		s->next++; /* an agent would retry; here the batch is simply not sent */
		uv_timer_start(&s->timer, tick, 1, 0);
		return;
	}
	p = s->functions
		    ? xt_function_batch(gw_runtime__stores(c->runtime), "node", &total)
		    : xt_batch(gw_runtime__stores(c->runtime), 200 + s->next, s->n_resources, s->n_samples, &total);
	assert_non_null(p);
	if (s->n_metadata)
		assert_int_equal(
			s->selected ? gw_profiles__set_metadata(p, NULL, s->client_metadata[s->next % s->n_metadata])
				    : gw_profiles__set_metadata(p, s->client_metadata[s->next % s->n_metadata], NULL),
			0);
	s->next++;
	s->emitted += total;
	gw_component_received(c, total);
	gw_component_emit(c, p);
	uv_timer_start(&s->timer, tick, 1, 0);
}

static int src_create(struct gw_component *c)
{
	c->state = src_state;
	return 0;
}

static int src_start(struct gw_component *c)
{
	struct source *s = c->state;

	uv_timer_init(gw_runtime__loop(c->runtime), &s->timer);
	s->timer.data = c;
	uv_timer_start(&s->timer, tick, 1, 0);
	return 0;
}

static void src_shutdown(struct gw_component *c, void (*done)(struct gw_component *c))
{
	uv_timer_stop(&((struct source *)c->state)->timer);
	done(c);
}

static void src_destroy(struct gw_component *c)
{
	uv_close((uv_handle_t *)&((struct source *)c->state)->timer, NULL);
}

static const struct gw_component_type src_type = {
	.name = "xt_source",
	.kind = GW_RECEIVER,
	.create = src_create,
	.start = src_start,
	.shutdown = src_shutdown,
	.destroy = src_destroy,
};

static int cap_consume(struct gw_component *c, struct gw_profiles *p)
{
	assert_int_equal(gw_profiles__check(p), 0);
	cap.batches++;
	cap.samples += p->total_count;
	cap.records += p->n_samples;
	if (p->n_samples > cap.max_records)
		cap.max_records = p->n_samples;
	for (unsigned i = 0; i < CAP_MAX_META; i++) {
		const char *m = p->metadata ? p->metadata : "";

		if (!cap.meta[i])
			assert_non_null(cap.meta[i] = strdup(m));
		if (strcmp(cap.meta[i], m) == 0) {
			cap.meta_samples[i] += p->total_count;
			cap.meta_batches[i]++;
			break;
		}
	}
	gw_component_exported(c, p->total_count);
	gw_profiles__unref(p);
	return 0;
}

static const struct gw_component_type cap_type = {
	.name = "xt_capture",
	.kind = GW_EXPORTER,
	.consume = cap_consume,
};

/* ---- running ---- */

struct run {
	uv_loop_t loop;
	struct gw_runtime *rt;
	uv_timer_t check;
	bool done;
	uint64_t dropped;
};

static void on_done(struct gw_runtime *rt, bool timed_out, void *userdata)
{
	struct run *r = userdata;

	r->done = true;
}

static void on_check(uv_timer_t *t)
{
	struct run *r = t->data;

	if (src_state->next >= src_state->n_batches) {
		uv_timer_stop(t);
		gw_runtime__shutdown(r->rt, on_done, r);
	}
}

static void *load(const struct gw_component_type *type, const char *yaml)
{
	struct sr_diag *d = sr_diag_new();
	struct sr_yaml_doc *doc = sr_yaml_load_string("t.yaml", yaml, strlen(yaml), d);
	void *cfg = calloc(1, type->config_size);

	assert_non_null(doc);
	if (sr_config_load(doc, sr_yaml_root(doc), type->name, type->config_fields, cfg, d) < 0 ||
	    (type->validate && type->validate(cfg, type->name, d) < 0)) {
		sr_diag_print(d, stderr);
		fail_msg("bad config");
	}
	sr_yaml_doc_free(doc);
	sr_diag_free(d);
	return cfg;
}

/* source → processor (type, yaml) → capture; returns drops by the processor. */
static uint64_t run(const struct gw_component_type *type, const char *yaml, struct source *s)
{
	void *cfg = load(type, yaml);
	struct gw_component source = { .type = &src_type, .id = (char *)"xt_source" };
	struct gw_component proc = { .type = type, .id = (char *)type->name, .config = cfg };
	struct gw_component capture = { .type = &cap_type, .id = (char *)"xt_capture" };
	struct gw_component *comps[] = { &source, &proc, &capture };
	struct gw_component *rv[] = { &source }, *pr[] = { &proc }, *ex[] = { &capture };
	bool is_exporter = type->kind == GW_EXPORTER;
	struct gw_pipeline_def pipe = { .name = "profiles",
					.receivers = rv,
					.n_receivers = 1,
					.processors = pr,
					.n_processors = is_exporter ? 0 : 1,
					.exporters = is_exporter ? pr : ex,
					.n_exporters = 1 };
	struct run r = { 0 };
	struct gw_accounting *a;
	uint64_t dropped;

	src_state = s;
	for (unsigned i = 0; i < CAP_MAX_META; i++)
		free(cap.meta[i]);
	memset(&cap, 0, sizeof(cap));
	assert_int_equal(uv_loop_init(&r.loop), 0);
	r.rt = gw_runtime_new(&(struct gw_runtime_config){ .loop = &r.loop,
							   .components = comps,
							   .n_components = is_exporter ? 2 : 3,
							   .pipelines = &pipe,
							   .n_pipelines = 1,
							   .shutdown_timeout_ns = 5000000000ULL });
	assert_non_null(r.rt);
	uv_timer_init(&r.loop, &r.check);
	r.check.data = &r;
	uv_timer_start(&r.check, on_check, 5, 5);
	assert_int_equal(gw_runtime__start(r.rt), 0);
	uv_run(&r.loop, UV_RUN_DEFAULT);
	assert_true(r.done);
	a = gw_runtime__accounting(r.rt);
	assert_int_equal(gw_accounting__check(a, true), 0);
	dropped = gw_accounting__get(a, type->name, GW_COUNT_DROPPED, NULL);
	if (is_exporter)
		cap.samples = gw_accounting__get(a, type->name, GW_COUNT_EXPORTED, NULL);
	assert_int_equal(cap.samples + dropped, s->emitted);
	gw_runtime_free(r.rt);
	uv_close((uv_handle_t *)&r.check, NULL);
	uv_run(&r.loop, UV_RUN_DEFAULT);
	assert_int_equal(uv_loop_close(&r.loop), 0);
	sr_config_free(type->config_fields, cfg);
	free(cfg);
	return dropped;
}

static void test_batch_merges_by_size(void **state)
{
	/* 20 batches of 2 resources × 30 records; sends at >= 100 records. Resources of one service merge. */
	struct source s = { .n_batches = 20, .n_resources = 2, .n_samples = 30 };

	assert_int_equal(run(&gw_processor_batch, "send_batch_size: 100\nsend_batch_max_size: 0\ntimeout: 1h\n", &s),
			 0);
	assert_int_equal(cap.samples, s.emitted);
	assert_int_equal(cap.records, 20 * 60);
	/* 60 records per input: sends at 120, the rest at shutdown. */
	assert_int_equal(cap.batches, 10);
}

static void test_batch_cuts_at_max_size(void **state)
{
	struct source s = { .n_batches = 3, .n_resources = 4, .n_samples = 50 };

	assert_int_equal(run(&gw_processor_batch, "send_batch_size: 150\nsend_batch_max_size: 150\ntimeout: 1h\n", &s),
			 0);
	assert_int_equal(cap.samples, s.emitted);
	assert_int_equal(cap.records, 600);
	assert_true(cap.max_records <= 150);
	assert_int_equal(cap.batches, 4);
}

static void test_batch_timeout_and_bytes(void **state)
{
	struct source s = { .n_batches = 5, .n_resources = 1, .n_samples = 10 };

	/* A tiny timeout sends small batches before the size is reached. */
	assert_int_equal(
		run(&gw_processor_batch, "send_batch_size: 100000\ntimeout: 1ms\nsend_batch_max_size: 0\n", &s), 0);
	assert_int_equal(cap.samples, s.emitted);
	assert_true(cap.batches >= 2);

	/* A byte cap sends every batch on its own. */
	s = (struct source){ .n_batches = 5, .n_resources = 1, .n_samples = 10 };
	assert_int_equal(run(&gw_processor_batch,
			     "send_batch_size: 100000\ntimeout: 1h\nsend_batch_max_bytes: 1KiB\n"
			     "send_batch_max_size: 0\n",
			     &s),
			 0);
	assert_int_equal(cap.batches, 5);
}

/* The samples that left with metadata m ("" for none), and in how many batches. */
static uint64_t meta_samples(const char *m, unsigned *ret_batches)
{
	for (unsigned i = 0; i < CAP_MAX_META && cap.meta[i]; i++)
		if (strcmp(cap.meta[i], m) == 0) {
			*ret_batches = cap.meta_batches[i];
			return cap.meta_samples[i];
		}
	*ret_batches = 0;
	return 0;
}

static void test_batch_metadata_keys(void **state)
{
	/* Requests of three tenants (one without the header) and other headers that must not travel on. */
	static const char *const reqs[] = {
		"x-scope-orgid: acme\nuser-agent: a/1\n",
		"user-agent: b/1\nx-scope-orgid: globex\n",
		"user-agent: c/1\n",
	};
	struct source s = {
		.n_batches = 9, .n_resources = 1, .n_samples = 10, .client_metadata = reqs, .n_metadata = 3
	};
	unsigned batches;

	assert_int_equal(run(&gw_processor_batch, "timeout: 1h\nmetadata_keys: [X-Scope-OrgID]\n", &s), 0);
	/* One batch per tenant at shutdown, each with its own samples (3 batches of 55), named as configured. */
	assert_int_equal(cap.batches, 3);
	assert_int_equal(meta_samples("X-Scope-OrgID: acme\n", &batches), 3 * 55);
	assert_int_equal(batches, 1);
	assert_int_equal(meta_samples("X-Scope-OrgID: globex\n", &batches), 3 * 55);
	assert_int_equal(meta_samples("", &batches), 3 * 55);

	/* Behind another batch processor: its selection is what the second one keeps apart by. */
	s = (struct source){ .n_batches = 4,
			     .n_resources = 1,
			     .n_samples = 10,
			     .client_metadata = reqs,
			     .n_metadata = 2,
			     .selected = true };
	assert_int_equal(run(&gw_processor_batch, "timeout: 1h\nmetadata_keys: [X-Scope-OrgID]\n", &s), 0);
	assert_int_equal(meta_samples("X-Scope-OrgID: acme\n", &batches), 2 * 55);
	assert_int_equal(meta_samples("X-Scope-OrgID: globex\n", &batches), 2 * 55);

	/* Without metadata_keys, every request merges and no header travels on (as in the Collector). */
	s = (struct source){
		.n_batches = 9, .n_resources = 1, .n_samples = 10, .client_metadata = reqs, .n_metadata = 3
	};
	assert_int_equal(run(&gw_processor_batch, "timeout: 1h\n", &s), 0);
	assert_int_equal(cap.batches, 1);
	assert_int_equal(meta_samples("", &batches), 9 * 55);

	/* A cardinality limit of 2: the third combination is dropped and counted, the others arrive. */
	s = (struct source){
		.n_batches = 9, .n_resources = 1, .n_samples = 10, .client_metadata = reqs, .n_metadata = 3
	};
	assert_int_equal(run(&gw_processor_batch,
			     "timeout: 1h\nmetadata_keys: [x-scope-orgid]\nmetadata_cardinality_limit: 2\n", &s),
			 3 * 55);
	assert_int_equal(meta_samples("x-scope-orgid: acme\n", &batches), 3 * 55);
	assert_int_equal(meta_samples("x-scope-orgid: globex\n", &batches), 3 * 55);
}

static void test_batch_metadata_from_attributes(void **state)
{
	/* Agent-like batches of two services each: the tenant from service.name, unless the request had one. */
	static const char *const reqs[] = { "user-agent: agent\n", "x-scope-orgid: explicit\n" };
	struct source s = { .n_batches = 2, .n_resources = 2, .n_samples = 5, .client_metadata = reqs, .n_metadata = 2 };
	unsigned batches;

	assert_int_equal(run(&gw_processor_batch,
			     "timeout: 1h\nmetadata_keys: [X-Scope-OrgID]\n"
			     "metadata_from_attributes: {X-Scope-OrgID: service.name}\n",
			     &s),
			 0);
	/* Batch 0 (tag 200) split by service; batch 1 (tag 201) whole under its header's tenant. */
	assert_int_equal(cap.batches, 3);
	assert_int_equal(meta_samples("X-Scope-OrgID: svc-200-0\n", &batches), 15);
	assert_int_equal(meta_samples("X-Scope-OrgID: svc-200-1\n", &batches), 15);
	assert_int_equal(meta_samples("X-Scope-OrgID: explicit\n", &batches), 30);
}

static void test_batch_config_errors(void **state)
{
	struct sr_diag *d = sr_diag_new();
	const char *yaml = "send_batch_size: 100\nsend_batch_max_size: 10\n";
	struct sr_yaml_doc *doc = sr_yaml_load_string("t.yaml", yaml, strlen(yaml), d);
	void *cfg = calloc(1, gw_processor_batch.config_size);

	assert_int_equal(sr_config_load(doc, sr_yaml_root(doc), "processors.batch", gw_processor_batch.config_fields,
					cfg, d),
			 0);
	assert_int_equal(gw_processor_batch.validate(cfg, "processors.batch", d), -EINVAL);
	assert_non_null(strstr(sr_diag_message(d, 0), "send_batch_max_size"));
	sr_config_free(gw_processor_batch.config_fields, cfg);
	free(cfg);
	sr_yaml_doc_free(doc);
	sr_diag_free(d);
}

static void test_memory_limiter_passes_under_limit(void **state)
{
	struct source s = { .n_batches = 5, .n_resources = 1, .n_samples = 20 };

	assert_int_equal(run(&gw_processor_memory_limiter, "limit_mib: 65536\ncheck_interval: 10ms\n", &s), 0);
	assert_int_equal(cap.samples, s.emitted);
	assert_int_equal(s.refused, 0);
}

static void test_memory_limiter_refuses_and_drops(void **state)
{
	/* A limit far below any process's RSS: receivers are refused, nothing passes, nothing is lost silently. */
	struct source s = { .n_batches = 5, .n_resources = 1, .n_samples = 20 };

	run(&gw_processor_memory_limiter, "limit_mib: 2\nspike_limit_mib: 1\ncheck_interval: 10ms\n", &s);
	assert_int_equal(s.refused, 5);
	assert_int_equal(cap.samples, 0);
}

/* Every check's first reading is over the soft limit, its second (after the trim) under it. */
static unsigned trim_reads;
static int64_t rss_high_until_trimmed(void)
{
	return trim_reads++ % 2 == 0 ? (int64_t)900 << 20 : (int64_t)100 << 20;
}

static void test_memory_limiter_decides_after_trimming(void **state)
{
	/* Memory that a trim gives back (free heap pages, caches) is no reason to refuse. */
	struct source s = { .n_batches = 5, .n_resources = 1, .n_samples = 20 };

	trim_reads = 0;
	gw_mem_rss_reader = rss_high_until_trimmed;
	assert_int_equal(run(&gw_processor_memory_limiter, "limit_mib: 1000\ncheck_interval: 10ms\n", &s), 0);
	gw_mem_rss_reader = gw_mem_rss_bytes;
	assert_true(trim_reads >= 2 && trim_reads % 2 == 0); /* each check read again after trimming */
	assert_int_equal(s.refused, 0);
	assert_int_equal(cap.samples, s.emitted);
}

/* A stuck limiter (above the soft limit, nothing in the pipeline) is reported once per episode, after
 * GW_MEMLIM_STUCK_CHECKS consecutive such checks; data in flight or a check under the limit restarts the count. */
static void test_memory_limiter_stuck(void **state)
{
	struct gw_memlim_stuck s = { 0 };
	unsigned i;

	for (i = 1; i < GW_MEMLIM_STUCK_CHECKS; i++)
		assert_false(gw_memlim_stuck__check(&s, true, true));
	assert_false(gw_memlim_stuck__check(&s, true, false)); /* data in flight: refusals can drain it */
	for (i = 1; i < GW_MEMLIM_STUCK_CHECKS; i++)
		assert_false(gw_memlim_stuck__check(&s, true, true));
	assert_true(gw_memlim_stuck__check(&s, true, true));
	for (i = 0; i < 3 * GW_MEMLIM_STUCK_CHECKS; i++) /* once per episode */
		assert_false(gw_memlim_stuck__check(&s, true, true));
	assert_false(gw_memlim_stuck__check(&s, false, true)); /* under the soft limit: the episode ends */
	for (i = 1; i < GW_MEMLIM_STUCK_CHECKS; i++)
		assert_false(gw_memlim_stuck__check(&s, true, true));
	assert_true(gw_memlim_stuck__check(&s, true, true));
}

/* The stores fit when, full, they take at most 3/4 of the soft limit; the defaults (596 MiB) need 800 MiB. */
static void test_memory_limiter_stores_fit(void **state)
{
	struct gw_stores *st = gw_stores_new(NULL);
	uint64_t defaults = gw_stores__limit_bytes(st);

	assert_int_equal(defaults, GW_STORE_DEFAULT_EXECUTABLE_BYTES + GW_STORE_DEFAULT_KERNEL_BYTES +
					   GW_STORE_DEFAULT_LOCATION_BYTES + GW_STORE_DEFAULT_STACK_BYTES +
					   GW_STORE_DEFAULT_FUNCTION_BYTES);
	assert_true(gw_memlim_stores_fit(defaults, 800ull << 20));
	assert_false(gw_memlim_stores_fit(defaults, 700ull << 20));
	/* limit_mib 512 (soft 410 MiB) with the 2,000-node soak's stores (stacks 280 MiB, locations 70 MiB). */
	gw_stores__set_limit(st, GW_STORE_STACKS, 280ull << 20);
	gw_stores__set_limit(st, GW_STORE_LOCATIONS, 70ull << 20);
	assert_false(gw_memlim_stores_fit(gw_stores__limit_bytes(st), 410ull << 20));
	assert_true(gw_memlim_stores_fit(3, 4));
	assert_false(gw_memlim_stores_fit(4, 4));
	gw_stores_free(st);
	(void)state;
}

static void write_file(const char *root, const char *path, const char *text)
{
	char p[512], cmd[600];
	FILE *f;

	snprintf(p, sizeof(p), "%s%s", root, path);
	snprintf(cmd, sizeof(cmd), "mkdir -p \"$(dirname '%s')\"", p);
	assert_int_equal(system(cmd), 0);
	f = fopen(p, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void test_memory_totals(void **state)
{
	char root[] = "/tmp/sr-mem-XXXXXX", cmd[128];
	const char *src = NULL;

	assert_true(gw_mem_rss_bytes() > 0);
	assert_non_null(mkdtemp(root));
	write_file(root, "/proc/meminfo", "MemTotal:       16384 kB\nMemFree: 1 kB\n");
	/* cgroup v2 with a limit on our cgroup. */
	write_file(root, "/proc/self/cgroup", "0::/kubepods.slice/pod1.slice/cri-containerd-abc.scope\n");
	write_file(root, "/sys/fs/cgroup/kubepods.slice/pod1.slice/cri-containerd-abc.scope/memory.max", "536870912\n");
	assert_int_equal(gw_mem_total_bytes(root, &src), 536870912);
	assert_string_equal(src, "cgroup2");
	/* "max": no limit, so the host's memory. */
	write_file(root, "/sys/fs/cgroup/kubepods.slice/pod1.slice/cri-containerd-abc.scope/memory.max", "max\n");
	assert_int_equal(gw_mem_total_bytes(root, &src), 16384 * 1024);
	assert_string_equal(src, "meminfo");
	/* cgroup v1, in a container whose memory mount is its own cgroup (the path is not visible). */
	write_file(root, "/proc/self/cgroup", "4:memory:/process_api/0123\n0::/\n");
	write_file(root, "/sys/fs/cgroup/memory/memory.limit_in_bytes", "1073741824\n");
	assert_int_equal(gw_mem_total_bytes(root, &src), 1073741824);
	assert_string_equal(src, "cgroup1");
	/* v1 unlimited (2^63 rounded down to pages). */
	write_file(root, "/sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
	assert_int_equal(gw_mem_total_bytes(root, &src), 16384 * 1024);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	assert_int_equal(system(cmd), 0);
	/* This machine: some positive total. */
	assert_true(gw_mem_total_bytes("", &src) > 0);
}

static void test_memory_limiter_config_errors(void **state)
{
	static const char *const bad[] = {
		"check_interval: 1s\n",			  /* no limit */
		"limit_mib: 100\nspike_limit_mib: 100\n", /* spike >= limit */
		"limit_mib: 100\nlimit_percentage: 50\n", /* both */
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct sr_diag *d = sr_diag_new();
		struct sr_yaml_doc *doc = sr_yaml_load_string("t.yaml", bad[i], strlen(bad[i]), d);
		void *cfg = calloc(1, gw_processor_memory_limiter.config_size);

		assert_int_equal(sr_config_load(doc, sr_yaml_root(doc), "processors.memory_limiter",
						gw_processor_memory_limiter.config_fields, cfg, d),
				 0);
		assert_int_equal(gw_processor_memory_limiter.validate(cfg, "processors.memory_limiter", d), -EINVAL);
		sr_config_free(gw_processor_memory_limiter.config_fields, cfg);
		free(cfg);
		sr_yaml_doc_free(doc);
		sr_diag_free(d);
	}
}

static char *slurp(const char *path, size_t *ret_len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc((size_t)n + 1);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	*ret_len = (size_t)n;
	return buf;
}

static void rm_rf(const char *dir)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

/* file, format json: every line is JSON whose values sum to what was emitted. */
static void test_file_json(void **state)
{
	char dir[] = "/tmp/sr-file-XXXXXX", yaml[256], path[128];
	struct source s = { .n_batches = 4, .n_resources = 2, .n_samples = 20 };
	char *text, *line, *save = NULL;
	size_t len;
	int64_t sum = 0, lines = 0;

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/out.jsonl", dir);
	snprintf(yaml, sizeof(yaml), "path: %s\nformat: json\n", path);
	assert_int_equal(run(&gw_exporter_file, yaml, &s), 0);
	text = slurp(path, &len);
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		struct json_object *j = json_tokener_parse(line), *rps, *d, *st;

		assert_non_null(j);
		lines++;
		assert_true(json_object_object_get_ex(j, "dictionary", &d));
		assert_true(json_object_object_get_ex(d, "stringTable", &st));
		assert_string_equal(json_object_get_string(json_object_array_get_idx(st, 0)), "");
		assert_true(json_object_object_get_ex(j, "resourceProfiles", &rps));
		for (size_t i = 0; i < json_object_array_length(rps); i++) {
			struct json_object *sps, *profs, *samples, *values;

			json_object_object_get_ex(json_object_array_get_idx(rps, i), "scopeProfiles", &sps);
			json_object_object_get_ex(json_object_array_get_idx(sps, 0), "profiles", &profs);
			json_object_object_get_ex(json_object_array_get_idx(profs, 0), "samples", &samples);
			for (size_t k = 0; k < json_object_array_length(samples); k++) {
				assert_true(json_object_object_get_ex(json_object_array_get_idx(samples, k), "values",
								      &values));
				/* protojson: int64 as a string */
				sum += atoll(json_object_get_string(json_object_array_get_idx(values, 0)));
			}
		}
		json_object_put(j);
	}
	assert_int_equal(lines, 4);
	assert_int_equal(sum, (int64_t)s.emitted);
	free(text);
	rm_rf(dir);
}

/* file, format proto, rotated: length-prefixed requests across PATH and PATH.1, decoded by nanopb. */
static void test_file_proto_rotation(void **state)
{
	char dir[] = "/tmp/sr-file-XXXXXX", yaml[256], path[128], p2[140];
	struct source s = { .n_batches = 30, .n_resources = 8, .n_samples = 400 };
	uint64_t sum = 0;
	int files = 0;

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/out.pb", dir);
	/* About 1.5 MiB in all: rotated once at 1 MiB, nothing deleted (2 backups). */
	snprintf(yaml, sizeof(yaml), "path: %s\nformat: proto\nrotation: {max_megabytes: 1, max_backups: 2}\n", path);
	assert_int_equal(run(&gw_exporter_file, yaml, &s), 0);
	for (int i = 0; i < 3; i++) {
		size_t len, off = 0;
		char *buf;

		if (i == 0)
			snprintf(p2, sizeof(p2), "%s", path);
		else
			snprintf(p2, sizeof(p2), "%s.%d", path, i);
		if (access(p2, F_OK) != 0)
			continue;
		files++;
		buf = slurp(p2, &len);
		while (off + 4 <= len) {
			const uint8_t *b = (const uint8_t *)buf + off;
			size_t n = (size_t)b[0] << 24 | (size_t)b[1] << 16 | (size_t)b[2] << 8 | b[3];
			opentelemetry_proto_collector_profiles_v1development_ExportProfilesServiceRequest r =
				opentelemetry_proto_collector_profiles_v1development_ExportProfilesServiceRequest_init_zero;
			pb_istream_t is = pb_istream_from_buffer(b + 4, n);

			assert_true(off + 4 + n <= len);
			assert_true(pb_decode(
				&is,
				opentelemetry_proto_collector_profiles_v1development_ExportProfilesServiceRequest_fields,
				&r));
			for (pb_size_t a = 0; a < r.resource_profiles_count; a++) {
				const opentelemetry_proto_profiles_v1development_Profile *p =
					&r.resource_profiles[a].scope_profiles[0].profiles[0];

				for (pb_size_t k = 0; k < p->samples_count; k++)
					sum += (uint64_t)p->samples[k].values[0];
			}
			pb_release(
				opentelemetry_proto_collector_profiles_v1development_ExportProfilesServiceRequest_fields,
				&r);
			off += 4 + n;
		}
		assert_int_equal(off, len);
		free(buf);
	}
	assert_int_equal(files, 2);
	assert_int_equal(sum, s.emitted);
	rm_rf(dir);
}

/* pprof: one gzipped file per batch, a valid gzip stream holding the function names; max_files honoured. */
static void test_pprof(void **state)
{
	char dir[] = "/tmp/sr-pprof-XXXXXX", yaml[256], cmd[256];
	struct source s = { .n_batches = 5, .n_resources = 1, .n_samples = 30 };
	FILE *ls;
	int files = 0;

	assert_non_null(mkdtemp(dir));
	snprintf(yaml, sizeof(yaml), "directory: %s/p\nmax_files: 3\n", dir);
	assert_int_equal(run(&gw_exporter_pprof, yaml, &s), 0);
	snprintf(cmd, sizeof(cmd), "ls %s/p", dir);
	ls = popen(cmd, "r");
	while (fgets(cmd, sizeof(cmd), ls)) {
		char path[512];
		uint8_t *out = NULL;
		size_t len, out_len;
		char *gz;

		cmd[strcspn(cmd, "\n")] = '\0';
		assert_non_null(strstr(cmd, "profile-"));
		snprintf(path, sizeof(path), "%s/p/%s", dir, cmd);
		gz = slurp(path, &len);
		assert_int_equal(sr_gunzip(gz, len, 1 << 24, &out, &out_len), 0);
		assert_non_null(memmem(out, out_len, "fn_2", 4));
		assert_non_null(memmem(out, out_len, "samples", 7));
		assert_non_null(memmem(out, out_len, "nanoseconds", 11));
		free(out);
		free(gz);
		files++;
	}
	pclose(ls);
	assert_int_equal(files, 3);
	rm_rf(dir);
}

/* flamegraph: one SVG whose root frame holds every sample; function names as frames. */
static void test_flamegraph(void **state)
{
	char dir[] = "/tmp/sr-fg-XXXXXX", yaml[256], path[128], want[64];
	struct source s = { .n_batches = 3, .n_resources = 2, .n_samples = 30 };
	size_t len;
	char *svg;

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/flame.svg", dir);
	snprintf(yaml, sizeof(yaml), "path: %s\ntitle: \"unit <test>\"\n", path);
	assert_int_equal(run(&gw_exporter_flamegraph, yaml, &s), 0);
	svg = slurp(path, &len);
	assert_non_null(strstr(svg, "<svg"));
	assert_non_null(strstr(svg, "</svg>"));
	assert_non_null(strstr(svg, "unit &lt;test&gt;")); /* escaped */
	snprintf(want, sizeof(want), "data-n=\"all\"><title>all (%llu samples, 100.00%%)",
		 (unsigned long long)s.emitted);
	assert_non_null(strstr(svg, want));
	assert_non_null(strstr(svg, "data-n=\"fn_200_0\""));
	assert_non_null(strstr(svg, "data-n=\"do_syscall_64\""));
	free(svg);
	rm_rf(dir);
}

/* Frames the agent named (interpreted, JIT) show their names in pprof and the flame graph. */
static void test_pprof_flamegraph_functions(void **state)
{
	char dir[] = "/tmp/sr-fn-XXXXXX", yaml[600], cmd[256], path[512];
	struct source s = { .n_batches = 1, .functions = true };
	uint8_t *out = NULL;
	size_t len, out_len;
	char *data;
	FILE *ls;

	assert_non_null(mkdtemp(dir));
	snprintf(yaml, sizeof(yaml), "directory: %s/p\n", dir);
	assert_int_equal(run(&gw_exporter_pprof, yaml, &s), 0);
	snprintf(cmd, sizeof(cmd), "ls %s/p", dir);
	ls = popen(cmd, "r");
	assert_non_null(fgets(cmd, sizeof(cmd), ls));
	pclose(ls);
	cmd[strcspn(cmd, "\n")] = '\0';
	snprintf(path, sizeof(path), "%s/p/%s", dir, cmd);
	data = slurp(path, &len);
	assert_int_equal(sr_gunzip(data, len, 1 << 24, &out, &out_len), 0);
	assert_non_null(memmem(out, out_len, "alpha", 5));
	assert_non_null(memmem(out, out_len, "/app/work.py", 12));
	assert_non_null(memmem(out, out_len, "JS:*hot /app/x.js:3", 19));
	free(out);
	free(data);

	s = (struct source){ .n_batches = 1, .functions = true };
	snprintf(path, sizeof(path), "%s/flame.svg", dir);
	snprintf(yaml, sizeof(yaml), "path: %s\n", path);
	assert_int_equal(run(&gw_exporter_flamegraph, yaml, &s), 0);
	data = slurp(path, &len);
	assert_non_null(strstr(data, "data-n=\"alpha\""));
	assert_non_null(strstr(data, "data-n=\"JS:*hot /app/x.js:3\""));
	free(data);
	rm_rf(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_batch_merges_by_size),
		cmocka_unit_test(test_batch_cuts_at_max_size),
		cmocka_unit_test(test_batch_timeout_and_bytes),
		cmocka_unit_test(test_batch_metadata_keys),
		cmocka_unit_test(test_batch_metadata_from_attributes),
		cmocka_unit_test(test_batch_config_errors),
		cmocka_unit_test(test_memory_limiter_passes_under_limit),
		cmocka_unit_test(test_memory_limiter_refuses_and_drops),
		cmocka_unit_test(test_memory_limiter_decides_after_trimming),
		cmocka_unit_test(test_memory_limiter_stuck),
		cmocka_unit_test(test_memory_limiter_stores_fit),
		cmocka_unit_test(test_memory_totals),
		cmocka_unit_test(test_memory_limiter_config_errors),
		cmocka_unit_test(test_file_json),
		cmocka_unit_test(test_file_proto_rotation),
		cmocka_unit_test(test_pprof),
		cmocka_unit_test(test_pprof_flamegraph_functions),
		cmocka_unit_test(test_flamegraph),
	};

	sr_log_set_level(getenv("SR_TEST_VERBOSE") ? SR_LOG_DEBUG : SR_LOG_ERROR);
	return cmocka_run_group_tests_name("export-processors", tests, NULL, NULL);
}
