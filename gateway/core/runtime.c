/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The pipeline runtime (runtime.h): the components' life (create, start,
 * shutdown in layers, destroy) and the routing of batches between them. Its
 * /metrics and health answers are runtime-metrics.c, admission, shedding and
 * symbol tables runtime-admission.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "accounting.h"
#include "common/log.h"
#include "common/macro.h"
#include "model.h"
#include "runtime-private.h"

static const char *const runtime_drops[] = { GW_REASON_SHUTDOWN, NULL };

static struct gw_rt_comp *find(struct gw_runtime *rt, const struct gw_component *c)
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
	rt->metrics_off = cfg->metrics_off;
	if (!(rt->health_path = strdup(cfg->health_path ? cfg->health_path : "/")))
		goto fail;
	rt->comps = calloc(cfg->n_components ? cfg->n_components : 1, sizeof(*rt->comps));
	rt->stores = gw_stores_new(cfg->store_limits);
	rt->acct = gw_accounting_new();
	if (!rt->comps || !rt->stores || !rt->acct)
		goto fail;
	rt->n_comps = cfg->n_components;
	for (size_t i = 0; i < cfg->n_components; i++) {
		struct gw_component *c = cfg->components[i];
		rt->comps[i] = (struct gw_rt_comp){ .c = c, .ready = true };
		c->runtime = rt;
		gw_accounting__declare(rt->acct, c->id, c->type->kind == GW_EXPORTER);
		/* deliver_one() drops what reaches a stopped processor or exporter. */
		if (c->type->kind != GW_RECEIVER)
			gw_component_declare_drops(c, runtime_drops);
	}
	/* Shutdown layers: a processor goes after everything upstream of it in
	 * any pipeline, exporters after every processor. */
	for (size_t p = 0; p < rt->n_pipes; p++) {
		for (size_t i = 0; i < rt->pipes[p].n_processors; i++) {
			struct gw_rt_comp *rc = find(rt, rt->pipes[p].processors[i]);
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
	struct gw_rt_comp *rc = c->runtime ? find(c->runtime, c) : NULL;
	if (rc)
		rc->ready = ready;
}

/* ---- start ---- */

static const enum gw_component_kind start_order[] = { GW_EXPORTER, GW_PROCESSOR, GW_RECEIVER };

int gw_runtime__start(struct gw_runtime *rt)
{
	int r;

	/* Downstream first, so nothing flows into a component that is not running. */
	for (size_t k = 0; k < SR_ARRAY_SIZE(start_order); k++) {
		for (size_t i = 0; i < rt->n_comps; i++) {
			struct gw_rt_comp *rc = &rt->comps[i];
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
			struct gw_rt_comp *rc = &rt->comps[i];
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
	struct gw_rt_comp *rc = find(rt, c);
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

void gw_component_declare_drops(struct gw_component *c, const char *const *reasons)
{
	if (c->runtime)
		gw_accounting__declare_reasons(c->runtime->acct, c->id, GW_COUNT_DROPPED, reasons);
}

void gw_component_declare_refusals(struct gw_component *c, const char *const *reasons)
{
	if (c->runtime)
		gw_accounting__declare_reasons(c->runtime->acct, c->id, GW_COUNT_REFUSED, reasons);
}

void gw_component_exported(struct gw_component *c, uint64_t samples)
{
	if (c->runtime)
		gw_accounting__add(c->runtime->acct, c->id, GW_COUNT_EXPORTED, NULL, samples);
}

/* ---- shutdown ---- */

static void shutdown_layer(struct gw_runtime *rt);

static const enum gw_component_kind destroy_order[] = { GW_RECEIVER, GW_PROCESSOR, GW_EXPORTER };

/* Receivers first: they feed the others. */
static void destroy_all(struct gw_runtime *rt)
{
	for (size_t k = 0; k < SR_ARRAY_SIZE(destroy_order); k++)
		for (size_t i = 0; i < rt->n_comps; i++) {
			struct gw_rt_comp *rc = &rt->comps[i];
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
	if (rt->done)
		rt->done(rt, timed_out, rt->done_ud);
}

static void component_done(struct gw_component *c)
{
	struct gw_runtime *rt = c->runtime;
	struct gw_rt_comp *rc = find(rt, c);

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
			struct gw_rt_comp *rc = &rt->comps[i];
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
			struct gw_rt_comp *rc = &rt->comps[i];
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
	gw_stores_free(rt->stores);
	gw_accounting_free(rt->acct);
	free(rt->collectors);
	free(rt->admission);
	free(rt->shedders);
	free(rt->comps);
	free(rt->health_path);
	if (rt->timer_init) {
		/* The timer is embedded: free the runtime when it is closed. */
		rt->shutdown_timer.data = rt;
		uv_close((uv_handle_t *)&rt->shutdown_timer, free_after_close);
		return;
	}
	free(rt);
}
