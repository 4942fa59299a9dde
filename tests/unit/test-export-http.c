// SPDX-License-Identifier: Apache-2.0
/*
 * otlp_http end to end, at the unit level: the real runtime, the real
 * exporter and HTTP client, against the independent fake Pyroscope
 * (tests/fakes/fake_pyroscope.py, Python stdlib) scripted to fail in every
 * way Pyroscope can. A test source component emits synthetic batches whose
 * stacks are unique per batch, and every test ends by checking that the
 * fake received each sample exactly once (its accepted sample sum equals
 * what was emitted, and the exporter's accounting balances).
 *
 * The persistent-queue test kills a gateway process with SIGKILL while the
 * backend is down: this binary re-executes itself as that process.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <curl/curl.h>
#include <json-c/json.h>
#include <uv.h>

#include "component.h"
#include "common/config.h"
#include "core/accounting.h"
#include "core/model.h"
#include "core/runtime.h"
#include "exporters/exporthelper.h"
#include "common/log.h"
#include "processors/memory_limiter.h"
#include "test-export-util.h"
#include "test-filter.h"

extern const struct gw_component_type gw_exporter_otlp_http;
extern const struct gw_component_type gw_exporter_otlp_grpc;

extern const struct gw_component_type gw_processor_memory_limiter;

/* A memory_limiter in front of the exporter when set (its config), and the peak RSS seen. */
static const char *limiter_yaml;
static int64_t peak_rss;

/* The exporter under test (otlp_http unless a test says otherwise). */
static const struct gw_component_type *exporter_type = &gw_exporter_otlp_http;

/* Every loop of these tests ends by itself within this long. */
#define TEST_DEADLINE_MS 60000

/* ---- the fake Pyroscope ---- */

struct fake {
	pid_t pid;
	int port;
	char dir[64];
};

static void fake_start(struct fake *f, const char *const *extra_args)
{
	const char *fixtures = getenv("SR_TEST_FIXTURES");
	char script[1024], port_file[128];
	const char *argv[32];
	size_t n = 0;

	assert_non_null(fixtures);
	snprintf(script, sizeof(script), "%s/../fakes/fake_pyroscope.py", fixtures);
	strcpy(f->dir, "/tmp/sr-fake-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(port_file, sizeof(port_file), "%s/port", f->dir);
	argv[n++] = "python3";
	argv[n++] = script;
	argv[n++] = "--port-file";
	argv[n++] = port_file;
	argv[n++] = "--lifetime";
	argv[n++] = "120";
	for (; extra_args && *extra_args && n < 30; extra_args++)
		argv[n++] = *extra_args;
	argv[n] = NULL;
	f->pid = fork();
	assert_true(f->pid >= 0);
	if (f->pid == 0) {
		/* A failed assertion skips fake_stop: the fake must not outlive the test and hold its output open. */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		execvp("python3", (char *const *)argv);
		_exit(127);
	}
	for (int i = 0; i < 200; i++) {
		FILE *pf = fopen(port_file, "r");

		if (pf) {
			assert_int_equal(fscanf(pf, "%d", &f->port), 1);
			fclose(pf);
			return;
		}
		usleep(50000);
	}
	fail_msg("fake Pyroscope did not start");
}

static void fake_stop(struct fake *f)
{
	char cmd[128];
	int status;

	kill(f->pid, SIGTERM);
	waitpid(f->pid, &status, 0);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
	assert_int_equal(system(cmd), 0);
}

static size_t collect(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	char **buf = userdata;
	size_t old = *buf ? strlen(*buf) : 0, n = size * nmemb;

	*buf = realloc(*buf, old + n + 1);
	memcpy(*buf + old, ptr, n);
	(*buf)[old + n] = '\0';
	return n;
}

static size_t collect_discard(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	(void)ptr;
	(void)userdata;
	return size * nmemb;
}

/* POST /release: the fake answers the requests it holds ("hold" in its script). */
static void fake_release(const struct fake *f)
{
	char url[128];
	CURL *c = curl_easy_init();

	snprintf(url, sizeof(url), "http://127.0.0.1:%d/release", f->port);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, "");
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect_discard);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 120L);
	assert_int_equal(curl_easy_perform(c), CURLE_OK);
	curl_easy_cleanup(c);
}

/* GET /stats; the caller puts the result. */
static struct json_object *fake_stats(const struct fake *f)
{
	char url[128], *body = NULL;
	CURL *c = curl_easy_init();
	struct json_object *j;

	snprintf(url, sizeof(url), "http://127.0.0.1:%d/stats", f->port);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
	/* A bound, not a speed: the fake decodes every request in Python, and lags on a loaded machine. */
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 120L);
	assert_int_equal(curl_easy_perform(c), CURLE_OK);
	curl_easy_cleanup(c);
	j = json_tokener_parse(body);
	assert_non_null(j);
	free(body);
	return j;
}

static int64_t jint(struct json_object *j, const char *key)
{
	struct json_object *v;

	if (!json_object_object_get_ex(j, key, &v))
		return -1;
	return json_object_get_int64(v);
}

static int64_t jstatus(struct json_object *j, const char *status)
{
	struct json_object *s;

	assert_true(json_object_object_get_ex(j, "statuses", &s));
	return jint(s, status) < 0 ? 0 : jint(s, status);
}

/* ---- the source: a receiver that emits synthetic batches ---- */

struct source {
	uv_timer_t timer;
	unsigned next, n_batches, n_resources, n_samples, first_tag;
	uint64_t emitted;
	unsigned refused;      /* admission said "retry later" */
	bool ignore_admission; /* a misbehaving sender: pushes even when told to retry later */
	/* The next batch only once the exporter queued the previous ones (one request each, none answered yet):
	 * encoding runs on the thread pool, where a later batch can overtake an earlier one. */
	bool in_order;
	/* The next batch only once the exporter has encoded every earlier one and tried to queue it (a disk
	 * write for a persistent queue): admission then answers knowing how the last write went. */
	bool settled;
};

static struct source *the_source;
static struct gw_component *cur_exporter;

static void source_tick(uv_timer_t *t)
{
	struct gw_component *c = t->data;
	struct source *s = c->state;
	struct gw_profiles *p;
	uint64_t total;
	uint32_t retry_ms = 0;

	if (s->next >= s->n_batches)
		return;
	if (s->in_order && gw_exporter_queued_requests(cur_exporter, NULL) < s->next) {
		uv_timer_start(&s->timer, source_tick, 1, 0);
		return;
	}
	if (s->settled && gw_exporter_encoding(cur_exporter) > 0) {
		uv_timer_start(&s->timer, source_tick, 1, 0);
		return;
	}
	/* Like an agent: ask admission first, back off when refused. */
	if (gw_runtime__admit(c->runtime, &retry_ms) < 0 && !s->ignore_admission) {
		s->refused++;
		uv_timer_start(&s->timer, source_tick, 20, 0);
		return;
	}
	p = xt_batch(gw_runtime__stores(c->runtime), s->first_tag + s->next, s->n_resources, s->n_samples, &total);
	assert_non_null(p);
	s->next++;
	s->emitted += total;
	gw_component_received(c, total);
	gw_component_emit(c, p);
	uv_timer_start(&s->timer, source_tick, 1, 0);
}

static int source_create(struct gw_component *c)
{
	c->state = the_source;
	return 0;
}

static int source_start(struct gw_component *c)
{
	struct source *s = c->state;

	uv_timer_init(gw_runtime__loop(c->runtime), &s->timer);
	s->timer.data = c;
	uv_timer_start(&s->timer, source_tick, 1, 0);
	return 0;
}

static void source_shutdown(struct gw_component *c, void (*done)(struct gw_component *c))
{
	struct source *s = c->state;

	uv_timer_stop(&s->timer);
	done(c);
}

static void source_destroy(struct gw_component *c)
{
	struct source *s = c->state;

	if (s)
		uv_close((uv_handle_t *)&s->timer, NULL); /* s outlives the loop run */
}

static const struct gw_component_type source_type = {
	.name = "xt_source",
	.kind = GW_RECEIVER,
	.create = source_create,
	.start = source_start,
	.shutdown = source_shutdown,
	.destroy = source_destroy,
};

/* ---- one run of the runtime ---- */

struct run {
	uv_loop_t loop;
	struct gw_runtime *rt;
	uv_timer_t check, deadline;
	uint64_t expect; /* exported + dropped the run waits for */
	bool shutting_down, finished, timed_out;
	struct gw_accounting *acct;
	/* results */
	uint64_t exported, dropped, received;
	uint64_t final_exported, final_dropped; /* after shutdown: everything accounted for */
};

/* Called at each check of a run when set (tests that act mid-run); the exporter under test. */
static void (*check_hook)(struct run *r);

static void on_done(struct gw_runtime *rt, bool timed_out, void *userdata)
{
	struct run *r = userdata;

	r->finished = true;
	r->timed_out = timed_out;
	uv_timer_stop(&r->check);
	uv_timer_stop(&r->deadline);
}

static void on_check(uv_timer_t *t)
{
	struct run *r = t->data;
	struct gw_accounting *a = gw_runtime__accounting(r->rt);
	uint64_t ex = gw_accounting__get(a, exporter_type->name, GW_COUNT_EXPORTED, NULL);
	uint64_t dr = gw_accounting__get(a, exporter_type->name, GW_COUNT_DROPPED, NULL);

	uint64_t want = r->expect ? r->expect : the_source->emitted;
	int64_t rss = gw_mem_rss_bytes();

	if (rss > peak_rss)
		peak_rss = rss;
	if (check_hook && !r->shutting_down)
		check_hook(r);

	if (!r->shutting_down && the_source->next >= the_source->n_batches && ex + dr >= want) {
		r->shutting_down = true;
		r->exported = ex;
		r->dropped = dr;
		r->received = gw_accounting__get(a, exporter_type->name, GW_COUNT_RECEIVED, NULL);
		/* Balanced always; quiescent (nothing held) when everything received is accounted for. */
		assert_int_equal(gw_accounting__check(a, ex + dr == r->received), 0);
		gw_runtime__shutdown(r->rt, on_done, r);
	}
}

static void on_deadline(uv_timer_t *t)
{
	struct run *r = t->data;

	if (!r->shutting_down) {
		struct gw_accounting *a = gw_runtime__accounting(r->rt);

		r->exported = gw_accounting__get(a, exporter_type->name, GW_COUNT_EXPORTED, NULL);
		r->dropped = gw_accounting__get(a, exporter_type->name, GW_COUNT_DROPPED, NULL);
		r->shutting_down = true;
		gw_runtime__shutdown(r->rt, on_done, r);
	}
}

static uint64_t last_drops[9];
static const char *const drop_reasons[] = { "rejected_400",
					    "too_large",
					    "retries_exhausted",
					    "queue_full",
					    "shutdown",
					    "rejected",
					    "memory_limit",
					    "queue_unwritable_at_shutdown",
					    NULL };

/*
 * Runs source → otlp_http (config yaml) until exported + dropped reaches
 * expect (0: every emitted sample), then shuts down; the counts are in *r.
 */
static void run_pipeline(const char *yaml, struct source *src, uint64_t expect, uint32_t deadline_ms, struct run *r)
{
	struct sr_diag *d = sr_diag_new();
	struct sr_yaml_doc *doc = sr_yaml_load_string("test.yaml", yaml, strlen(yaml), d);
	void *cfg = calloc(1, exporter_type->config_size);
	struct gw_component exp = { .type = exporter_type, .id = (char *)exporter_type->name, .config = cfg };
	struct gw_component source = { .type = &source_type, .id = (char *)"xt_source" };
	void *lcfg = limiter_yaml ? calloc(1, gw_processor_memory_limiter.config_size) : NULL;
	struct gw_component lim = { .type = &gw_processor_memory_limiter,
				    .id = (char *)"memory_limiter",
				    .config = lcfg };
	struct gw_component *comps[] = { &source, &exp, &lim };
	struct gw_component *recv[] = { &source }, *exps[] = { &exp }, *procs[] = { &lim };
	struct gw_pipeline_def pipe = { .name = "profiles",
					.receivers = recv,
					.n_receivers = 1,
					.exporters = exps,
					.n_exporters = 1,
					.processors = procs,
					.n_processors = limiter_yaml ? 1 : 0 };
	int rc;

	if (limiter_yaml) {
		struct sr_yaml_doc *ld = sr_yaml_load_string("limiter.yaml", limiter_yaml, strlen(limiter_yaml), d);

		assert_non_null(ld);
		assert_int_equal(sr_config_load(ld, sr_yaml_root(ld), "processors.memory_limiter",
						gw_processor_memory_limiter.config_fields, lcfg, d),
				 0);
		sr_yaml_doc_free(ld);
	}

	if (!doc ||
	    sr_config_load(doc, sr_yaml_root(doc), "exporters.test", exporter_type->config_fields, cfg, d) < 0 ||
	    exporter_type->validate(cfg, "exporters.test", d) < 0) {
		sr_diag_print(d, stderr);
		fail_msg("bad test config");
	}
	the_source = src;
	cur_exporter = &exp;
	memset(r, 0, sizeof(*r));
	assert_int_equal(uv_loop_init(&r->loop), 0);
	r->rt = gw_runtime_new(&(struct gw_runtime_config){ .loop = &r->loop,
							    .components = comps,
							    .n_components = limiter_yaml ? 3 : 2,
							    .pipelines = &pipe,
							    .n_pipelines = 1,
							    .shutdown_timeout_ns = 2ULL * 1000000000ULL });
	assert_non_null(r->rt);
	r->expect = expect;
	uv_timer_init(&r->loop, &r->check);
	uv_timer_init(&r->loop, &r->deadline);
	r->check.data = r->deadline.data = r;
	uv_timer_start(&r->check, on_check, 20, 20);
	uv_timer_start(&r->deadline, on_deadline, deadline_ms, 0);
	rc = gw_runtime__start(r->rt);
	assert_int_equal(rc, 0);
	uv_run(&r->loop, UV_RUN_DEFAULT);
	r->final_exported =
		gw_accounting__get(gw_runtime__accounting(r->rt), exporter_type->name, GW_COUNT_EXPORTED, NULL);
	r->final_dropped =
		gw_accounting__get(gw_runtime__accounting(r->rt), exporter_type->name, GW_COUNT_DROPPED, NULL) +
		gw_accounting__get(gw_runtime__accounting(r->rt), "memory_limiter", GW_COUNT_DROPPED, NULL);
	for (size_t i = 0; drop_reasons[i]; i++)
		last_drops[i] = gw_accounting__get(gw_runtime__accounting(r->rt), exporter_type->name, GW_COUNT_DROPPED,
						   drop_reasons[i]);
	gw_runtime_free(r->rt);
	uv_close((uv_handle_t *)&r->check, NULL);
	uv_close((uv_handle_t *)&r->deadline, NULL);
	uv_run(&r->loop, UV_RUN_DEFAULT);
	assert_int_equal(uv_loop_close(&r->loop), 0);
	sr_config_free(exporter_type->config_fields, cfg);
	free(cfg);
	if (lcfg)
		sr_config_free(gw_processor_memory_limiter.config_fields, lcfg);
	free(lcfg);
	sr_yaml_doc_free(doc);
	sr_diag_free(d);
}

static uint64_t dropped_reason(struct run *r, const char *reason)
{
	for (size_t i = 0; drop_reasons[i]; i++)
		if (strcmp(drop_reasons[i], reason) == 0)
			return last_drops[i];
	return 0;
}

static char *config(const struct fake *f, const char *extra)
{
	static char buf[2048];

	snprintf(buf, sizeof(buf),
		 "endpoint: http://127.0.0.1:%d\n"
		 "retry_on_failure: {initial_interval: 20ms, max_interval: 100ms, max_elapsed_time: 20s}\n"
		 "%s",
		 f ? f->port : 1, extra ? extra : "");
	return buf;
}

/* ---- tests ---- */

static void test_deliver_v1_10_gzip(void **state)
{
	struct fake f;
	struct source src = { .n_batches = 5, .n_resources = 2, .n_samples = 40, .first_tag = 10 };
	struct run r;
	struct json_object *st, *v;

	fake_start(&f, NULL);
	run_pipeline(config(&f, NULL), &src, 0, TEST_DEADLINE_MS, &r);
	assert_int_equal(r.exported, src.emitted);
	assert_int_equal(r.dropped, 0);
	st = fake_stats(&f);
	assert_int_equal(jint(st, "accepted_samples"), (int64_t)src.emitted);
	assert_int_equal(jstatus(st, "200"), jint(st, "requests"));
	assert_true(json_object_object_get_ex(st, "content_types", &v));
	assert_string_equal(json_object_get_string(json_object_array_get_idx(v, 0)), "application/x-protobuf");
	assert_true(json_object_object_get_ex(st, "encodings", &v));
	assert_string_equal(json_object_get_string(json_object_array_get_idx(v, 0)), "gzip");
	/* The fake resolved function names through the dictionary. */
	assert_true(json_object_object_get_ex(st, "by_key", &v));
	assert_true(json_object_object_length(v) > 0);
	json_object_put(st);
	fake_stop(&f);
}

static void test_deliver_v1_9_plain(void **state)
{
	static const char *const args[] = { "--proto-version", "1.9", NULL };
	struct fake f;
	struct source src = { .n_batches = 3, .n_resources = 1, .n_samples = 30, .first_tag = 20 };
	struct run r;
	struct json_object *st, *v;

	fake_start(&f, args);
	run_pipeline(config(&f, "proto_version: \"1.9\"\ncompression: none\nprocess_attributes: sample\n"), &src, 0,
		     TEST_DEADLINE_MS, &r);
	assert_int_equal(r.exported, src.emitted);
	st = fake_stats(&f);
	assert_int_equal(jint(st, "accepted_samples"), (int64_t)src.emitted);
	assert_true(json_object_object_get_ex(st, "encodings", &v));
	assert_string_equal(json_object_get_string(json_object_array_get_idx(v, 0)), "");
	json_object_put(st);
	fake_stop(&f);
}

static void test_version_mismatch_is_refused(void **state)
{
	/* A v1.9 Pyroscope reading v1.10 requests sees values as attribute indices out of bounds: 400, dropped. */
	static const char *const args[] = { "--proto-version", "1.9", NULL };
	struct fake f;
	struct source src = { .n_batches = 1, .n_resources = 1, .n_samples = 10, .first_tag = 25 };
	struct run r;
	struct json_object *st;

	fake_start(&f, args);
	run_pipeline(config(&f, NULL), &src, 0, TEST_DEADLINE_MS, &r);
	assert_int_equal(r.exported, 0);
	assert_int_equal(dropped_reason(&r, "rejected_400"), src.emitted);
	st = fake_stats(&f);
	assert_int_equal(jint(st, "accepted_samples"), 0);
	assert_int_equal(jstatus(st, "400"), 1);
	json_object_put(st);
	fake_stop(&f);
}

static void test_transient_failures_retried(void **state)
{
	/* Every transient answer Pyroscope (or a proxy) gives, including a connection reset and a slow reply. */
	static const char *const args[] = { "--script", "500,503:1,429,reset,502,504,503:date:1,slow:0.3", NULL };
	struct fake f;
	struct source src = { .n_batches = 4, .n_resources = 1, .n_samples = 25, .first_tag = 30 };
	struct run r;
	struct json_object *st;

	fake_start(&f, args);
	run_pipeline(config(&f, "sending_queue: {num_consumers: 2}\n"), &src, 0, TEST_DEADLINE_MS, &r);
	assert_int_equal(r.exported, src.emitted);
	assert_int_equal(r.dropped, 0);
	st = fake_stats(&f);
	/* Exactly once: the fake accepted each sample one time. */
	assert_int_equal(jint(st, "accepted_samples"), (int64_t)src.emitted);
	assert_int_equal(jstatus(st, "500"), 1);
	assert_int_equal(jstatus(st, "503"), 2);
	assert_int_equal(jstatus(st, "429"), 1);
	assert_int_equal(jstatus(st, "reset"), 1);
	json_object_put(st);
	fake_stop(&f);
}

static void test_500_not_retried_when_configured(void **state)
{
	static const char *const args[] = { "--script", "500", NULL };
	struct fake f;
	struct source src = { .n_batches = 1, .n_resources = 1, .n_samples = 10, .first_tag = 35 };
	struct run r;

	fake_start(&f, args);
	run_pipeline(config(&f, "retry_on_http_500: false\n"), &src, 0, TEST_DEADLINE_MS, &r);
	assert_int_equal(r.exported, 0);
	assert_int_equal(r.dropped, src.emitted);
	fake_stop(&f);
}

static void test_413_split(void **state)
{
	/* Bodies over 2000 bytes get 413; the exporter halves requests until they fit. */
	static const char *const args[] = { "--max-body-bytes", "2000", NULL };
	struct fake f;
	struct source src = { .n_batches = 2, .n_resources = 4, .n_samples = 60, .first_tag = 40 };
	struct run r;
	struct json_object *st;

	fake_start(&f, args);
	run_pipeline(config(&f, "compression: none\nprocess_attributes: sample\n"), &src, 0, TEST_DEADLINE_MS, &r);
	assert_int_equal(r.exported + r.dropped, src.emitted);
	st = fake_stats(&f);
	assert_true(jstatus(st, "413") >= 2);
	assert_int_equal(jint(st, "accepted_samples"), (int64_t)r.exported);
	/* What could not be split small enough is counted, never silent. */
	assert_int_equal(r.dropped, dropped_reason(&r, "too_large"));
	assert_true(r.exported > src.emitted / 2);
	json_object_put(st);
	fake_stop(&f);
}

static void test_permanent_and_partial(void **state)
{
	static const char *const args[] = { "--script", "400,partial:2,401", NULL };
	struct fake f;
	struct source src = { .n_batches = 4, .n_resources = 1, .n_samples = 10, .first_tag = 50 };
	struct run r;
	struct json_object *st;

	fake_start(&f, args);
	run_pipeline(config(&f, "sending_queue: {num_consumers: 1}\n"), &src, 0, TEST_DEADLINE_MS, &r);
	st = fake_stats(&f);
	/* Two batches refused for good (400, 401): dropped and counted; the partial one counts as delivered. */
	assert_int_equal(r.exported + r.dropped, src.emitted);
	assert_int_equal(jint(st, "accepted_samples"), (int64_t)r.exported);
	assert_int_equal(dropped_reason(&r, "rejected_400") > 0, 1);
	assert_int_equal(jint(st, "accepted_requests"), 2);
	json_object_put(st);
	fake_stop(&f);
}

static void test_retries_exhausted(void **state)
{
	/* Nobody listens on port 1: connection refused until max_elapsed_time. */
	struct source src = { .n_batches = 2, .n_resources = 1, .n_samples = 5, .first_tag = 60 };
	struct run r;

	run_pipeline("endpoint: http://127.0.0.1:1\n"
		     "retry_on_failure: {initial_interval: 10ms, max_interval: 50ms, max_elapsed_time: 300ms}\n",
		     &src, 0, TEST_DEADLINE_MS, &r);
	assert_int_equal(r.exported, 0);
	assert_int_equal(dropped_reason(&r, "retries_exhausted"), src.emitted);
}

static void test_drop_oldest_when_full(void **state)
{
	/* 1 MiB queue, backend down, block_on_overflow off: the oldest requests go, counted. */
	struct source src = { .n_batches = 40, .n_resources = 8, .n_samples = 400, .first_tag = 70 };
	struct run r;

	run_pipeline("endpoint: http://127.0.0.1:1\ncompression: none\nprocess_attributes: sample\n"
		     "retry_on_failure: {initial_interval: 10s}\n"
		     "sending_queue: {queue_size_mib: 1, num_consumers: 1}\n",
		     &src, 1, 20000, &r);
	/* Whatever was not delivered is dropped with a reason at the latest at shutdown. */
	assert_true(dropped_reason(&r, "queue_full") > 0);
}

static void test_queue_size_in_requests_and_items(void **state)
{
	/*
	 * The Collector's queue_size: 2 requests (its default sizer), then 200
	 * samples (sizer items), far under queue_size_mib; backend down, so
	 * the count bound alone makes the queue drop the oldest.
	 */
	struct source src = { .n_batches = 12, .n_resources = 1, .n_samples = 10, .first_tag = 75 };
	struct run r;

	run_pipeline("endpoint: http://127.0.0.1:1\n"
		     "retry_on_failure: {initial_interval: 10s}\n"
		     "sending_queue: {queue_size: 2, num_consumers: 1}\n",
		     &src, 1, 20000, &r);
	/* 12 requests of 55 samples: at most 2 queued at once, so most were dropped while the run lasted. */
	assert_true(r.dropped >= 9 * 55);
	assert_true(dropped_reason(&r, "queue_full") >= 9 * 55);

	src = (struct source){ .n_batches = 12, .n_resources = 1, .n_samples = 10, .first_tag = 76 };
	run_pipeline("endpoint: http://127.0.0.1:1\n"
		     "retry_on_failure: {initial_interval: 10s}\n"
		     "sending_queue: {queue_size: 200, sizer: items, num_consumers: 1}\n",
		     &src, 1, 20000, &r);
	/* 200 samples hold 3 requests of 55. */
	assert_true(dropped_reason(&r, "queue_full") >= 8 * 55);
}

/* ---- persistent queue: kill -9 while the backend is down ---- */

static int count_srq(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	if (!d)
		return 0;
	while ((de = readdir(d)))
		if (strstr(de->d_name, ".srq") && !strstr(de->d_name, ".corrupt"))
			n++;
	closedir(d);
	return n;
}

/* The child: queue n batches to disk with the backend down, say so on stdout, then wait to be killed. */
static int child_main(const char *storage, unsigned n_batches)
{
	struct source src = { .n_batches = n_batches, .n_resources = 2, .n_samples = 50, .first_tag = 100 };
	char yaml[512];
	struct run r;

	snprintf(yaml, sizeof(yaml),
		 "endpoint: http://127.0.0.1:1\n"
		 "retry_on_failure: {initial_interval: 1h, max_elapsed_time: 0s}\n"
		 "sending_queue: {storage: %s}\n",
		 storage);
	/* Never reaches its expectation: it is killed while the loop runs. */
	run_pipeline(yaml, &src, UINT64_MAX, 120000, &r);
	return 1;
}

static void test_persistent_queue_survives_kill9(void **state)
{
	char dir[] = "/tmp/sr-pq-XXXXXX", storage[128], self[1024], nb[16];
	unsigned n_batches = 6;
	uint64_t expect = 0;
	struct fake f;
	pid_t pid;
	int status, files = 0;
	ssize_t l;

	assert_non_null(mkdtemp(dir));
	snprintf(storage, sizeof(storage), "%s/queue", dir);
	l = readlink("/proc/self/exe", self, sizeof(self) - 1);
	assert_true(l > 0);
	self[l] = '\0';
	snprintf(nb, sizeof(nb), "%u", n_batches);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		execl(self, self, "--child-persistent", storage, nb, (char *)NULL);
		_exit(127);
	}
	/* Every batch is on disk (fsync'ed and renamed) once it is acknowledged: wait for all files, then kill. */
	for (int i = 0; i < 400 && files < (int)n_batches; i++) {
		usleep(50000);
		files = count_srq(storage);
	}
	assert_int_equal(files, n_batches);
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

	/* The same batches the child made (same tags): what a second gateway must deliver. */
	{
		struct gw_stores *s = gw_stores_new(NULL);

		for (unsigned i = 0; i < n_batches; i++) {
			uint64_t t;
			struct gw_profiles *p = xt_batch(s, 100 + i, 2, 50, &t);

			gw_profiles__unref(p);
			expect += t;
		}
		gw_stores_free(s);
	}

	/* Restart with the backend up: the queue is replayed. */
	fake_start(&f, NULL);
	{
		struct source none = { .n_batches = 0 };
		char yaml[512];
		struct run r;
		struct json_object *st;

		snprintf(yaml, sizeof(yaml),
			 "endpoint: http://127.0.0.1:%d\n"
			 "retry_on_failure: {initial_interval: 20ms}\n"
			 "sending_queue: {storage: %s}\n",
			 f.port, storage);
		run_pipeline(yaml, &none, expect, TEST_DEADLINE_MS, &r);
		assert_int_equal(r.exported, expect);
		assert_int_equal(r.dropped, 0);
		st = fake_stats(&f);
		assert_int_equal(jint(st, "accepted_samples"), (int64_t)expect);
		json_object_put(st);
	}
	assert_int_equal(count_srq(storage), 0);
	fake_stop(&f);
	{
		char cmd[256];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		assert_int_equal(system(cmd), 0);
	}
}

/* ---- persistent queue: a disk that cannot take a write ---- */

/* Writes past RLIMIT_FSIZE fail with EFBIG (SIGXFSZ ignored): the disk says no, as a full one does. */
static void limit_file_size(rlim_t bytes)
{
	struct rlimit rl;

	assert_int_equal(getrlimit(RLIMIT_FSIZE, &rl), 0);
	rl.rlim_cur = bytes == RLIM_INFINITY ? rl.rlim_max : bytes;
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &rl), 0);
}

static struct {
	unsigned refused_at_restore;
	bool restored;
	char why[256];
} disk_test;

/* After a few refusals, space again: the exporter's probe must take the disk back. */
static void disk_hook(struct run *r)
{
	if (disk_test.restored || the_source->refused < 5)
		return;
	snprintf(disk_test.why, sizeof(disk_test.why), "%s", gw_runtime__refusal(r->rt));
	disk_test.refused_at_restore = the_source->refused;
	limit_file_size(RLIM_INFINITY);
	disk_test.restored = true;
}

static void test_disk_failure_refuses_then_recovers(void **state)
{
	char dir[] = "/tmp/sr-pqdisk-XXXXXX", yaml[512];
	struct fake f;
	/* Settled: without it a slow encoder (a sanitizer build) lets all 12 in before the first write fails. */
	struct source src = { .n_batches = 12, .n_resources = 2, .n_samples = 50, .first_tag = 140, .settled = true };
	struct run r;
	struct json_object *st;

	assert_non_null(mkdtemp(dir));
	fake_start(&f, NULL); /* before the limit: the fake is another process with its own */
	snprintf(yaml, sizeof(yaml),
		 "endpoint: http://127.0.0.1:%d\n"
		 "retry_on_failure: {initial_interval: 20ms}\n"
		 "sending_queue: {storage: %s/queue, disk_check_interval: 50ms}\n",
		 f.port, dir);
	memset(&disk_test, 0, sizeof(disk_test));
	signal(SIGXFSZ, SIG_IGN);
	limit_file_size(64); /* the queue's lock file is empty; no request fits */
	check_hook = disk_hook;
	run_pipeline(yaml, &src, 0, TEST_DEADLINE_MS, &r);
	check_hook = NULL;
	limit_file_size(RLIM_INFINITY);
	/* Refused while the disk said no, with the reason; nothing taken was dropped; all delivered once. */
	assert_true(disk_test.restored);
	assert_non_null(strstr(disk_test.why, "cannot write its queue to disk (File too large)"));
	assert_true(src.refused >= disk_test.refused_at_restore);
	assert_int_equal(r.dropped, 0);
	assert_int_equal(r.final_dropped, 0);
	assert_int_equal(r.exported, src.emitted);
	st = fake_stats(&f);
	assert_int_equal(jint(st, "accepted_samples"), (int64_t)src.emitted);
	json_object_put(st);
	fake_stop(&f);
	{
		char cmd[256];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		assert_int_equal(system(cmd), 0);
	}
}

/*
 * The disk never takes a write and the backend is down: the source is
 * refused, what was taken is held in memory until shutdown, and what
 * shutdown_timeout could not deliver is counted, not lost silently.
 */
static void test_disk_failure_at_shutdown(void **state)
{
	char dir[] = "/tmp/sr-pqdisk-XXXXXX", yaml[512];
	struct source src = { .n_batches = 20, .n_resources = 1, .n_samples = 20, .first_tag = 160, .settled = true };
	struct run r;

	assert_non_null(mkdtemp(dir));
	snprintf(yaml, sizeof(yaml),
		 "endpoint: http://127.0.0.1:1\n"
		 "retry_on_failure: {initial_interval: 20ms, max_elapsed_time: 0s}\n"
		 "sending_queue: {storage: %s/queue, disk_check_interval: 50ms}\n",
		 dir);
	signal(SIGXFSZ, SIG_IGN);
	limit_file_size(64);
	/* Nothing is ever delivered: the deadline shuts the run down. */
	run_pipeline(yaml, &src, UINT64_MAX, 1500, &r);
	limit_file_size(RLIM_INFINITY);
	assert_true(src.refused > 0);
	assert_true(src.next < src.n_batches); /* refused batches were never taken */
	assert_int_equal(r.dropped, 0);	       /* nothing dropped while running */
	assert_int_equal(r.final_exported, 0);
	assert_int_equal(r.final_dropped, src.emitted);
	assert_int_equal(dropped_reason(&r, "queue_unwritable_at_shutdown"), src.emitted);
	{
		char cmd[256];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		assert_int_equal(system(cmd), 0);
	}
}

static void test_block_on_overflow_refuses(void **state)
{
	/* A tiny queue that blocks: the source is told to retry later instead of anything being dropped. */
	static const char *const args[] = { "--script", "slow:1,slow:1", NULL };
	struct fake f;
	struct source src = { .n_batches = 60, .n_resources = 8, .n_samples = 400, .first_tag = 120 };
	struct run r;
	struct json_object *st;

	fake_start(&f, args);
	run_pipeline(config(&f, "compression: none\nprocess_attributes: sample\n"
				"sending_queue: {queue_size_mib: 1, num_consumers: 1, block_on_overflow: true}\n"),
		     &src, 0, TEST_DEADLINE_MS, &r);
	assert_int_equal(r.exported, src.emitted);
	assert_int_equal(r.dropped, 0);
	assert_true(src.refused > 0);
	st = fake_stats(&f);
	assert_int_equal(jint(st, "accepted_samples"), (int64_t)src.emitted);
	json_object_put(st);
	fake_stop(&f);
}

/*
 * Floods source → memory_limiter → otlp_http (1 GiB memory queue, so only the
 * limiter bounds memory) against the fake Pyroscope answering every request
 * `slow` seconds late; limit = RSS at start + headroom_mib. Returns the limit;
 * the run's counts are in *r, the peak RSS in peak_rss.
 */
static int64_t flood(struct source *src, unsigned headroom_mib, unsigned spike_mib, const char *slow,
		     uint32_t deadline_ms, struct run *r)
{
	char script[8192], yaml[256], lyaml[128];
	const char *args[4] = { "--script", NULL, NULL, NULL };
	struct fake f;
	int64_t limit = gw_mem_rss_bytes() + ((int64_t)headroom_mib << 20);
	size_t o = 0;

	for (int i = 0; i < 600; i++)
		o += (size_t)snprintf(script + o, sizeof(script) - o, "%sslow:%s", i ? "," : "", slow);
	args[1] = script;
	fake_start(&f, args);
	snprintf(lyaml, sizeof(lyaml), "limit_mib: %lld\nspike_limit_mib: %u\ncheck_interval: 20ms\n",
		 (long long)(limit >> 20), spike_mib);
	snprintf(yaml, sizeof(yaml),
		 "endpoint: http://127.0.0.1:%d\ncompression: none\nprocess_attributes: sample\n"
		 "sending_queue: {queue_size_mib: 1024, num_consumers: 2}\n",
		 f.port);
	limiter_yaml = lyaml;
	peak_rss = 0;
	run_pipeline(yaml, src, 0, deadline_ms, r);
	limiter_yaml = NULL;
	fake_stop(&f);
	return limit;
}

/*
 * Flood: the source offers far more than a slow backend takes. The
 * memory_limiter (limit = RSS at start + 8 MiB) makes the source back off
 * ("retry later", counted) and the RSS stays under the limit plus the
 * documented in-flight overhead; whatever was accepted is delivered or
 * dropped with a reason, never lost silently.
 */
static void test_memory_limiter_flood(void **state)
{
	struct source src = { .n_batches = 400, .n_resources = 8, .n_samples = 400, .first_tag = 160 };
	struct run r;
	int64_t limit = flood(&src, 8, 4, "0.3", 8000, &r);

	print_message("flood: limit=%lld MiB peak_rss=%lld MiB refused=%u accepted_batches=%u exported=%llu "
		      "dropped=%llu\n",
		      (long long)(limit >> 20), (long long)(peak_rss >> 20), src.refused, src.next,
		      (unsigned long long)r.exported, (unsigned long long)r.dropped);
	assert_true(src.refused > 0);
	assert_true(r.exported > 0);
	/* Bounded: the limit plus what can be in flight past the soft limit before a check (documented). */
	assert_true(peak_rss < limit + (32 << 20));
}

/*
 * Flood past admission: the source ignores "retry later" (as many agents'
 * requests already in flight do), so memory reaches the hard limit; there
 * the limiter drops incoming batches and the queue sheds its oldest
 * requests (both counted as memory_limit). The peak RSS over the limit is
 * the overhead documented in docs/processors.md.
 */
static void test_memory_limiter_flood_past_admission(void **state)
{
	struct source src = {
		.n_batches = 150, .n_resources = 8, .n_samples = 400, .first_tag = 180, .ignore_admission = true
	};
	struct run r;

#ifdef __SANITIZE_ADDRESS__
	/*
	 * AddressSanitizer's shadow memory and quarantine dwarf and delay the
	 * RSS this test steers by, so whether the hard limit is ever crossed
	 * depends on the sanitizer, not on the limiter. The normal build runs it.
	 */
	print_message("skipped under AddressSanitizer: RSS is not the process's own\n");
	skip();
#endif
	int64_t limit = flood(&src, 4, 2, "0.1", 6000, &r);

	print_message("flood past admission: limit=%lld KiB peak_rss=%lld KiB (%+lld KiB over the limit) "
		      "emitted=%llu exported=%llu shed_from_queue=%llu dropped_in_all=%llu\n",
		      (long long)(limit >> 10), (long long)(peak_rss >> 10), (long long)((peak_rss - limit) / 1024),
		      (unsigned long long)src.emitted, (unsigned long long)r.final_exported,
		      (unsigned long long)dropped_reason(&r, "memory_limit"), (unsigned long long)r.final_dropped);
	assert_true(r.final_exported > 0);
	assert_true(dropped_reason(&r, "memory_limit") > 0);
	/* Nothing lost silently: every emitted sample exported or dropped with a reason (shutdown included). */
	assert_int_equal(r.final_exported + r.final_dropped, src.emitted);
	assert_true(peak_rss < limit + (32 << 20));
}

/* Starts the gRPC front (Node's http2) before the fake f with its options (opt, value); returns its port. */
static int grpc_front_start(const struct fake *f, const char *opt, const char *value, pid_t *ret_pid)
{
	const char *fixtures = getenv("SR_TEST_FIXTURES");
	char front[1024], backend[64], port_file[128];
	pid_t pid;
	int port = 0;

	snprintf(front, sizeof(front), "%s/../integration/export-grpc-front.js", fixtures);
	snprintf(backend, sizeof(backend), "http://127.0.0.1:%d", f->port);
	snprintf(port_file, sizeof(port_file), "%s/grpc-port", f->dir);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		execlp("node", "node", front, "--port-file", port_file, "--backend", backend, opt, value, (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 200 && !port; i++) {
		FILE *pf = fopen(port_file, "r");

		if (pf) {
			if (fscanf(pf, "%d", &port) != 1)
				port = 0;
			fclose(pf);
		}
		if (!port)
			usleep(50000);
	}
	assert_true(port > 0);
	*ret_pid = pid;
	return port;
}

/*
 * Runs src → otlp_grpc (extra config lines after the endpoint) through the
 * gRPC front started with (opt, value) before the fake Pyroscope *f, which
 * is started here (stop it after reading its stats). Skips without node.
 */
/* endpoint is scheme + 127.0.0.1:port ("http://", or "" for the Collector's host:port). */
static void run_grpc(struct fake *f, const char *opt, const char *value, const char *scheme, const char *extra,
		     struct source *src, struct run *r)
{
	static const char *const args[] = { NULL };
	char yaml[512];
	pid_t pid;
	int port, status;

	if (system("node --version >/dev/null 2>&1") != 0)
		skip();
	fake_start(f, args);
	port = grpc_front_start(f, opt, value, &pid);
	snprintf(yaml, sizeof(yaml),
		 "endpoint: %s127.0.0.1:%d\n"
		 "retry_on_failure: {initial_interval: 20ms, max_interval: 100ms}\n%s",
		 scheme, port, extra);
	exporter_type = &gw_exporter_otlp_grpc;
	run_pipeline(yaml, src, 0, TEST_DEADLINE_MS, r);
	exporter_type = &gw_exporter_otlp_http;
	kill(pid, SIGTERM);
	waitpid(pid, &status, 0);
}

/* otlp_grpc through a gRPC front (Node's http2) that forwards to the fake Pyroscope. */
static void test_grpc(void **state)
{
	struct fake f;
	struct source src = { .n_batches = 4, .n_resources = 2, .n_samples = 30, .first_tag = 140 };
	struct run r;
	struct json_object *st;

	/* Two UNAVAILABLE first: the retry path over gRPC. */
	run_grpc(&f, "--script", "14,14", "http://", "", &src, &r);
	assert_int_equal(r.exported, src.emitted);
	assert_int_equal(r.dropped, 0);
	st = fake_stats(&f);
	assert_int_equal(jint(st, "accepted_samples"), (int64_t)src.emitted);
	json_object_put(st);
	fake_stop(&f);

	/* The Collector's plaintext gRPC: host:port with tls.insecure (the front speaks h2c only). */
	src = (struct source){ .n_batches = 2, .n_resources = 1, .n_samples = 10, .first_tag = 145 };
	run_grpc(&f, "--script", "", "", "tls: {insecure: true}\n", &src, &r);
	assert_int_equal(r.exported, src.emitted);
	st = fake_stats(&f);
	assert_int_equal(jint(st, "accepted_samples"), (int64_t)src.emitted);
	json_object_put(st);
	fake_stop(&f);
}

/*
 * otlp_grpc against a server whose max receive size is 2000 bytes: it answers
 * RESOURCE_EXHAUSTED "grpc: received message larger than max"; the exporter
 * splits like on 413 until the parts fit. Everything is delivered once or
 * counted as too_large.
 */
static void test_grpc_split_on_resource_exhausted(void **state)
{
	struct fake f;
	struct source src = { .n_batches = 2, .n_resources = 4, .n_samples = 60, .first_tag = 150 };
	struct run r;
	struct json_object *st;

	run_grpc(&f, "--max-message-bytes", "2000", "http://", "compression: none\nprocess_attributes: sample\n", &src,
		 &r);
	assert_int_equal(r.exported + r.dropped, src.emitted);
	assert_int_equal(r.dropped, dropped_reason(&r, "too_large"));
	/* Split, not retried until given up: most of it arrives, in more requests than batches. */
	assert_true(r.exported > src.emitted / 2);
	assert_int_equal(dropped_reason(&r, "retries_exhausted"), 0);
	st = fake_stats(&f);
	assert_int_equal(jint(st, "accepted_samples"), (int64_t)r.exported);
	assert_true(jint(st, "accepted_requests") > (int64_t)src.n_batches);
	json_object_put(st);
	fake_stop(&f);
}

/* ---- memory_limiter sheds the oldest queued requests ---- */

#define SHED_LIMIT_MIB 65536
/* Readings above the limit still to give; then a reading well under it. */
static int shed_high_reads;

static int64_t fake_rss(void)
{
	if (shed_high_reads > 0) {
		shed_high_reads--;
		return ((int64_t)SHED_LIMIT_MIB << 20) + 1;
	}
	return 64 << 20;
}

static bool shed_armed, shed_released;
static const struct fake *shed_fake;

static void shed_hook(struct run *r)
{
	size_t in_flight = 0;

	/*
	 * Once every batch is queued and the first is in flight (held by the
	 * backend): two readings over the limit. Before the first is sent, all
	 * six wait, and the oldest the limiter sheds would be the first.
	 */
	if (!shed_armed && the_source->next >= the_source->n_batches &&
	    gw_exporter_queued_requests(cur_exporter, &in_flight) == the_source->n_batches && in_flight == 1) {
		shed_armed = true;
		shed_high_reads = 4; /* two checks, each reading before and after its trim */
	}
	/* Both read: the backend may answer the request it held, and the rest flow. */
	if (shed_armed && !shed_released && shed_high_reads == 0) {
		shed_released = true;
		fake_release(shed_fake);
	}
}

/*
 * Six batches queued behind a request the backend holds until the test
 * releases it; the limiter then reads an RSS just over its hard limit at
 * two checks (before and after each one's trim). Each sheds just enough (rss - limit + 1 byte: one request) of the oldest waiting
 * requests: batches 2 and 3 are dropped, counted as memory_limit; batch 1
 * (in flight) and 4-6 are delivered.
 */
static void test_memory_limiter_sheds_oldest(void **state)
{
	static const char *const args[] = { "--script", "hold", NULL };
	enum { FIRST_TAG = 170, N = 6 };
	struct fake f;
	struct source src = {
		.n_batches = N, .n_resources = 1, .n_samples = 10, .first_tag = FIRST_TAG, .in_order = true
	};
	struct run r;
	struct json_object *st, *keys;
	uint64_t totals[N], shed_expect;
	char lyaml[128];

	{
		struct gw_stores *s = gw_stores_new(NULL);

		for (unsigned i = 0; i < N; i++)
			gw_profiles__unref(xt_batch(s, FIRST_TAG + i, 1, 10, &totals[i]));
		gw_stores_free(s);
	}
	shed_expect = totals[1] + totals[2];
	fake_start(&f, args);
	snprintf(lyaml, sizeof(lyaml), "limit_mib: %d\nspike_limit_mib: 1\ncheck_interval: 10ms\n", SHED_LIMIT_MIB);
	limiter_yaml = lyaml;
	gw_mem_rss_reader = fake_rss;
	check_hook = shed_hook;
	shed_fake = &f;
	shed_released = false;
	shed_armed = false;
	shed_high_reads = 0;
	run_pipeline(config(&f, "compression: none\nsending_queue: {num_consumers: 1}\n"), &src, 0, TEST_DEADLINE_MS,
		     &r);
	check_hook = NULL;
	gw_mem_rss_reader = gw_mem_rss_bytes;
	limiter_yaml = NULL;
	assert_true(shed_armed);
	assert_int_equal(shed_high_reads, 0);
	assert_int_equal(r.dropped, shed_expect);
	assert_int_equal(dropped_reason(&r, "memory_limit"), shed_expect);
	assert_int_equal(r.exported, src.emitted - shed_expect);
	st = fake_stats(&f);
	assert_int_equal(jint(st, "accepted_samples"), (int64_t)r.exported);
	/* Which ones: the oldest waiting (tags FIRST_TAG+1, +2) are gone, the others arrived. */
	assert_true(json_object_object_get_ex(st, "by_key", &keys));
	for (unsigned i = 0; i < N; i++) {
		char svc[32];
		bool seen = false;

		snprintf(svc, sizeof(svc), "svc-%u-", FIRST_TAG + i);
		json_object_object_foreach(keys, k, v)
		{
			(void)v;
			if (strncmp(k, svc, strlen(svc)) == 0)
				seen = true;
		}
		assert_int_equal(seen, i != 1 && i != 2);
	}
	json_object_put(st);
	fake_stop(&f);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_deliver_v1_10_gzip),
		cmocka_unit_test(test_deliver_v1_9_plain),
		cmocka_unit_test(test_version_mismatch_is_refused),
		cmocka_unit_test(test_transient_failures_retried),
		cmocka_unit_test(test_500_not_retried_when_configured),
		cmocka_unit_test(test_413_split),
		cmocka_unit_test(test_permanent_and_partial),
		cmocka_unit_test(test_retries_exhausted),
		cmocka_unit_test(test_drop_oldest_when_full),
		cmocka_unit_test(test_queue_size_in_requests_and_items),
		cmocka_unit_test(test_block_on_overflow_refuses),
		cmocka_unit_test(test_persistent_queue_survives_kill9),
		cmocka_unit_test(test_disk_failure_refuses_then_recovers),
		cmocka_unit_test(test_disk_failure_at_shutdown),
		cmocka_unit_test(test_grpc),
		cmocka_unit_test(test_grpc_split_on_resource_exhausted),
		cmocka_unit_test(test_memory_limiter_sheds_oldest),
		cmocka_unit_test(test_memory_limiter_flood),
		cmocka_unit_test(test_memory_limiter_flood_past_admission),
	};

	signal(SIGPIPE, SIG_IGN);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	sr_log_set_level(getenv("SR_TEST_VERBOSE") ? SR_LOG_DEBUG : SR_LOG_ERROR);
	if (argc == 4 && strcmp(argv[1], "--child-persistent") == 0)
		return child_main(argv[2], (unsigned)atoi(argv[3]));
	sr_test_filter_from_env();
	return cmocka_run_group_tests_name("export-http", tests, NULL, NULL);
}
