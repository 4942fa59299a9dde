// SPDX-License-Identifier: Apache-2.0
/*
 * A gateway for tests: the real config loader, runtime and components, plus
 * two test-only component types registered through gw_component_types_extra:
 *
 *   processors: test_slow {delay: 2s}   each batch spends `delay` on a worker
 *                                        thread (uv_queue_work), like a
 *                                        CPU-heavy stage, then goes on;
 *   exporters:  test_count {}           counts what it gets as exported.
 *
 * Usage: gw-harness --config FILE. SIGTERM shuts down like the gateway;
 * before exiting it prints every component's accounting and whether the sum
 * rule holds ("accounting ok" / "accounting broken") on stderr.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "common/config.h"
#include "core/accounting.h"
#include "core/model.h"
#include "core/runtime.h"
#include "common/log.h"
#include "gateway/telemetry/server.h"
#include "pipeline.h"

/* ---- test_slow ---- */

struct slow_config {
	uint64_t delay_ns;
};

static const struct sr_field slow_fields[] = {
	SR_FIELD_DUR("delay", struct slow_config, delay_ns, .def = "1s", .doc = "Time each batch spends on a worker."),
	SR_FIELD_END,
};

struct slow {
	struct gw_component *c;
	unsigned inflight;
	bool destroyed;
	void (*done)(struct gw_component *c);
};

struct slow_job {
	uv_work_t work;
	struct slow *s;
	struct gw_profiles *p;
	uint64_t delay_ns;
};

static void slow_work(uv_work_t *w)
{
	struct slow_job *j = w->data;
	/* Stand-in for CPU-heavy work (symbolization): the worker is busy, the loop is not. */
	usleep((useconds_t)(j->delay_ns / 1000));
}

static void slow_maybe_done(struct slow *s)
{
	if (s->done && s->inflight == 0) {
		void (*done)(struct gw_component * c) = s->done;
		s->done = NULL;
		done(s->c);
	}
}

static void slow_after(uv_work_t *w, int status)
{
	struct slow_job *j = w->data;
	struct slow *s = j->s;

	s->inflight--;
	if (s->destroyed) {
		/* The runtime gave up waiting (shutdown_timeout): account, then free what is left. */
		gw_component_drop(s->c, j->p, GW_REASON_SHUTDOWN);
		free(j);
		if (s->inflight == 0)
			free(s);
		return;
	}
	gw_component_emit(s->c, j->p);
	free(j);
	slow_maybe_done(s);
}

static int slow_create(struct gw_component *c)
{
	struct slow *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->c = c;
	c->state = s;
	return 0;
}

static int slow_consume(struct gw_component *c, struct gw_profiles *p)
{
	struct slow *s = c->state;
	struct slow_job *j = calloc(1, sizeof(*j));
	int r;

	if (!j) {
		gw_component_drop(c, p, "out_of_memory");
		return -ENOMEM;
	}
	j->s = s;
	j->p = p;
	j->delay_ns = ((const struct slow_config *)c->config)->delay_ns;
	j->work.data = j;
	r = uv_queue_work(gw_runtime__loop(c->runtime), &j->work, slow_work, slow_after);
	if (r < 0) {
		free(j);
		gw_component_drop(c, p, "queue_error");
		return r;
	}
	s->inflight++;
	return 0;
}

static void slow_shutdown(struct gw_component *c, void (*done)(struct gw_component *c))
{
	struct slow *s = c->state;
	s->done = done;
	slow_maybe_done(s);
}

static void slow_destroy(struct gw_component *c)
{
	struct slow *s = c->state;
	if (!s)
		return;
	c->state = NULL;
	s->done = NULL;
	if (s->inflight) {
		s->destroyed = true; /* freed by the last after_work */
		return;
	}
	free(s);
}

static const struct gw_component_type test_slow = {
	.name = "test_slow",
	.kind = GW_PROCESSOR,
	.doc = "Test only: spends `delay` per batch on a worker thread.",
	.config_fields = slow_fields,
	.config_size = sizeof(struct slow_config),
	.create = slow_create,
	.consume = slow_consume,
	.shutdown = slow_shutdown,
	.destroy = slow_destroy,
};

/* ---- test_count ---- */

struct count_config {
	bool unused;
};

static const struct sr_field count_fields[] = {
	SR_FIELD_END,
};

static int count_consume(struct gw_component *c, struct gw_profiles *p)
{
	gw_component_exported(c, p->total_count);
	gw_profiles__unref(p);
	return 0;
}

static void count_shutdown(struct gw_component *c, void (*done)(struct gw_component *c))
{
	done(c);
}

static const struct gw_component_type test_count = {
	.name = "test_count",
	.kind = GW_EXPORTER,
	.doc = "Test only: counts every sample as exported.",
	.config_fields = count_fields,
	.config_size = sizeof(struct count_config),
	.consume = count_consume,
	.shutdown = count_shutdown,
};

static const struct gw_component_type *const extra_types[] = { &test_slow, &test_count, NULL };

/* ---- main ---- */

struct harness {
	uv_loop_t loop;
	uv_signal_t sigterm;
	struct gw_runtime *rt;
	struct gw_telemetry_servers servers;
	struct gw_config *cfg;
	bool timed_out;
};

static void print_accounting(struct harness *h)
{
	struct gw_accounting *a = gw_runtime__accounting(h->rt);
	for (size_t i = 0; i < h->cfg->n_components; i++) {
		const char *id = h->cfg->components[i]->id;
		fprintf(stderr,
			"accounting component=%s received=%llu accepted=%llu refused=%llu dropped=%llu "
			"exported=%llu held=%lld\n",
			id, (unsigned long long)gw_accounting__get(a, id, GW_COUNT_RECEIVED, NULL),
			(unsigned long long)gw_accounting__get(a, id, GW_COUNT_ACCEPTED, NULL),
			(unsigned long long)gw_accounting__get(a, id, GW_COUNT_REFUSED, NULL),
			(unsigned long long)gw_accounting__get(a, id, GW_COUNT_DROPPED, NULL),
			(unsigned long long)gw_accounting__get(a, id, GW_COUNT_EXPORTED, NULL),
			(long long)gw_accounting__held(a, id));
	}
	fprintf(stderr, "accounting %s\n", gw_accounting__check(a, true) == 0 ? "ok" : "broken");
}

static void shutdown_done(struct gw_runtime *rt, bool timed_out, void *userdata)
{
	struct harness *h = userdata;
	fprintf(stderr, "shutdown %s\n", timed_out ? "timed out" : "complete");
	gw_telemetry_servers_close(&h->servers);
	uv_close((uv_handle_t *)&h->sigterm, NULL);
	h->timed_out = timed_out;
	/* Work already running on worker threads cannot be cancelled: do not wait for it. */
	if (timed_out)
		uv_stop(&h->loop);
}

static void on_sigterm(uv_signal_t *sig, int signum)
{
	struct harness *h = sig->data;
	gw_runtime__shutdown(h->rt, shutdown_done, h);
}

int main(int argc, char **argv)
{
	struct harness h = { 0 };
	struct sr_diag *d = sr_diag_new();
	int r;

	if (argc != 3 || strcmp(argv[1], "--config") != 0) {
		fprintf(stderr, "usage: gw-harness --config FILE\n");
		return 2;
	}
	gw_component_types_extra = extra_types;
	if (gw_config_load(argv[2], &h.cfg, d) < 0) {
		sr_diag_print(d, stderr);
		sr_diag_free(d);
		return 2;
	}
	sr_diag_free(d);
	signal(SIGPIPE, SIG_IGN);
	uv_loop_init(&h.loop);
	const struct gw_runtime_config rc = {
		.loop = &h.loop,
		.components = h.cfg->components,
		.n_components = h.cfg->n_components,
		.pipelines = h.cfg->pipelines,
		.n_pipelines = h.cfg->n_pipelines,
		.shutdown_timeout_ns = h.cfg->service.shutdown_timeout_ns,
	};
	h.rt = gw_runtime_new(&rc);
	if (!h.rt)
		return 1;
	r = gw_telemetry_servers_start(&h.servers, h.rt, h.cfg->service.metrics_address, NULL, NULL);
	if (r < 0 || (r = gw_runtime__start(h.rt)) < 0)
		return 1;
	uv_signal_init(&h.loop, &h.sigterm);
	h.sigterm.data = &h;
	uv_signal_start(&h.sigterm, on_sigterm, SIGTERM);
	sr_log_info("gateway", "running", "harness=yes");
	uv_run(&h.loop, UV_RUN_DEFAULT);
	print_accounting(&h);
	if (h.timed_out) {
		/* Workers may still hold batches; the process ends without freeing what they use. */
		fflush(stderr);
		_exit(0);
	}
	gw_telemetry_servers_close(&h.servers);
	gw_runtime_free(h.rt);
	uv_run(&h.loop, UV_RUN_DEFAULT);
	r = uv_loop_close(&h.loop);
	if (r != 0)
		fprintf(stderr, "loop closed with handles open: %s\n", uv_strerror(r));
	gw_config_free(h.cfg);
	return r == 0 ? 0 : 1;
}
