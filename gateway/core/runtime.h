/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The pipeline runtime (docs/gateway.md, "Runtime").
 *
 * main.c / pipeline.c build the component instances (struct gw_component with
 * type, id and loaded config; one instance per ID even when several pipelines
 * use it) and the pipelines as arrays of instance pointers, then:
 *
 *   rt = gw_runtime_new(&(struct gw_runtime_config){ loop, comps, n, pipes, n, ... });
 *   gw_runtime__start(rt);            create + start: exporters, processors, receivers
 *   gw_telemetry_servers_start(...);  its /metrics, /healthz, /readyz and health_check
 *                                     (gateway/telemetry/server.h, answered by rt)
 *   uv_run(loop, UV_RUN_DEFAULT);
 *   on SIGTERM: gw_runtime__shutdown(rt, done_cb, userdata);
 *                                     receivers stop accepting, processors flush in
 *                                     pipeline order, exporters deliver; bounded by
 *                                     shutdown_timeout; done_cb runs once on the loop
 *   gw_runtime_free(rt);              after done_cb (or a failed start): destroy all
 *
 * The runtime calls each component's create/start/shutdown/destroy; pipeline.c
 * must not. When shutdown_timeout expires before every component called
 * done(), the runtime destroys every component at once (so the loop can
 * end): destroy() must work in any state, close every handle, and never let
 * done() or a callback run on freed state afterwards (work queued with
 * uv_queue_work must keep what it uses alive until its after_work callback).
 * When shutdown completes (done_cb), the caller closes the telemetry servers,
 * so uv_run() returns once components have closed their handles.
 *
 * Routing: a receiver's gw_component_emit() sends its batch into every
 * pipeline that lists it (a private clone per extra pipeline); a processor's
 * emit sends the batch to the next processor of the batch's pipeline (the
 * batch carries its route), or to every exporter of that pipeline (shared,
 * read-only, one reference each). Delivery is a direct call of the next
 * consume() on the loop thread. A processor that works on a worker thread
 * (uv_queue_work) emits from its after_work callback.
 *
 * Accounting (accounting.h) is automatic at stage boundaries: consume counts
 * "received", emit counts "accepted". Components only report what they drop
 * (gw_component_drop / gw_component_drop_samples), what receivers refuse, and
 * what exporters deliver (gw_component_exported).
 */
#ifndef SR_GW_RUNTIME_H
#define SR_GW_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "component.h"
#include "metrics.h"

struct gw_profiles;
struct gw_stores;
struct gw_accounting;
struct gw_symbol_table;
struct gw_store_limits;

/* One entry of service.pipelines. */
struct gw_pipeline_def {
	const char *name; /* "profiles" or "profiles/x" */
	struct gw_component **receivers;
	size_t n_receivers;
	struct gw_component **processors; /* in order */
	size_t n_processors;
	struct gw_component **exporters;
	size_t n_exporters;
};

struct gw_runtime_config {
	uv_loop_t *loop;
	/* Every instance once (the pipelines point into it). The runtime sets c->runtime. */
	struct gw_component **components;
	size_t n_components;
	const struct gw_pipeline_def *pipelines;
	size_t n_pipelines;
	/* service.telemetry.metrics.level: none; /metrics answers 404, health endpoints stay. */
	bool metrics_off;
	/* The path the health_check extension answers; NULL: "/". */
	const char *health_path;
	/* service.shutdown_timeout; 0: GW_RUNTIME_DEFAULT_SHUTDOWN_TIMEOUT_NS. */
	uint64_t shutdown_timeout_ns;
	/* Definition store bounds; NULL: defaults (model.h). */
	const struct gw_store_limits *store_limits;
};

#define GW_RUNTIME_DEFAULT_SHUTDOWN_TIMEOUT_NS (30ULL * 1000000000ULL)
/* The address the default config's receiver listens on (no --config). */
#define GW_DEFAULT_AGENT_ENDPOINT "127.0.0.1:7480"
/* An upload told to wait (gw_runtime__admit_symbol_tables) retries after 2 to 4 s. */
#define GW_SYMBOL_UPLOAD_RETRY_MS 2000

struct gw_runtime;

/* Copies what it needs from cfg (the arrays must outlive the runtime). NULL + errno. */
struct gw_runtime *gw_runtime_new(const struct gw_runtime_config *cfg);
/* 0 or -errno (logged, naming the component); on failure call gw_runtime_free(), which destroys
 * every component created so far (destroy closes their handles), then run the loop once more. */
int gw_runtime__start(struct gw_runtime *rt);
/* Graceful stop; done is called once on the loop thread (with timed_out when
 * shutdown_timeout expired before every component was done). */
void gw_runtime__shutdown(struct gw_runtime *rt, void (*done)(struct gw_runtime *rt, bool timed_out, void *userdata),
			  void *userdata);
/* Destroys every component and frees the runtime; closes its handles, so run the loop once more after. */
void gw_runtime_free(struct gw_runtime *rt);

uv_loop_t *gw_runtime__loop(struct gw_runtime *rt);
struct gw_stores *gw_runtime__stores(struct gw_runtime *rt);
struct gw_accounting *gw_runtime__accounting(struct gw_runtime *rt);
/*
 * The answers of the gateway's own endpoints (gateway/telemetry/server.h
 * serves them; its gw_telemetry_handler with rt as userdata): GET /metrics,
 * /healthz, /readyz of the telemetry server, and the health_check
 * extension's path (200 with a JSON status while the pipelines run, 503
 * otherwise).
 */
void gw_runtime_telemetry_handler(void *userdata, const char *path, int *ret_status, char **ret_body, size_t *ret_len,
				  const char **ret_content_type);
void gw_runtime_health_handler(void *userdata, const char *path, int *ret_status, char **ret_body, size_t *ret_len,
			       const char **ret_content_type);
/* True after start succeeded and before shutdown (/readyz). */
bool gw_runtime__ready(struct gw_runtime *rt);

/* ---- for components ---- */

/*
 * Passes p to the next stage (see Routing above); takes ownership. Loop
 * thread only. Returns 0, or -errno when a downstream stage failed (the batch
 * is then accounted as dropped there).
 */
int gw_component_emit(struct gw_component *c, struct gw_profiles *p);
/* Accounts every sample of p as dropped by c with reason, and frees p. */
void gw_component_drop(struct gw_component *c, struct gw_profiles *p, const char *reason);
/* Accounts samples (counts) dropped by c with reason (p already changed). Any thread. */
void gw_component_drop_samples(struct gw_component *c, const char *reason, uint64_t samples);
/* Receivers: samples received on the wire / refused back to the sender. Any thread. */
void gw_component_received(struct gw_component *c, uint64_t samples);
void gw_component_refused(struct gw_component *c, const char *reason, uint64_t samples);
/* Exporters: samples delivered to the backend. Any thread. */
void gw_component_exported(struct gw_component *c, uint64_t samples);
/*
 * The reasons c may drop samples for (receivers: refuse them for), a
 * NULL-terminated list of static strings, declared in start: each
 * stackrelay_gateway_samples_dropped_total (refused_total) series then
 * exists at 0 from the first scrape, so a first loss shows as a rate. The
 * runtime declares its own ("shutdown" for processors and exporters).
 */
void gw_component_declare_drops(struct gw_component *c, const char *const *reasons);
void gw_component_declare_refusals(struct gw_component *c, const char *const *reasons);

/*
 * Admission control (the memory_limiter sets it; so does an exporter whose
 * sending queue is full or whose disk cannot take it): receivers call
 * gw_runtime__admit() before taking a request; when any registered check
 * refuses, the request is answered "retry later" with *ret_retry_after_ms.
 * check returns 0 to admit or -EBUSY with a delay and *ret_why (a sentence
 * for the refused sender, alive until the next check); called with both
 * out-parameters NULL it is only asked (gw_runtime__admits: nothing is
 * counted). Loop thread only.
 */
typedef int (*gw_admission_fn)(struct gw_component *c, uint32_t *ret_retry_after_ms, const char **ret_why);
int gw_runtime__set_admission(struct gw_runtime *rt, struct gw_component *c, gw_admission_fn fn);
/*
 * Whether gw_runtime__admit() would admit a request now, without counting a
 * refusal: a receiver asks before it spends work on a request it would then
 * refuse, and calls gw_runtime__admit() when it answers.
 */
bool gw_runtime__admits(struct gw_runtime *rt);
int gw_runtime__admit(struct gw_runtime *rt, uint32_t *ret_retry_after_ms);
/* Why the last gw_runtime__admit() refused, for the answer ("the gateway is over its memory limit"). */
const char *gw_runtime__refusal(struct gw_runtime *rt);

/*
 * Shedding (the memory_limiter calls gw_runtime__shed() above its hard
 * limit): components holding queued data in memory (the exporters' sending
 * queues) register a function that drops their oldest queued item, accounts
 * its samples as dropped with reason, and returns the bytes it freed (0:
 * nothing to shed). shed() takes one item from each component in turn until
 * bytes are freed or nobody has anything left; it returns the bytes freed.
 * Loop thread only.
 */
typedef uint64_t (*gw_shed_fn)(struct gw_component *c, const char *reason);
int gw_runtime__add_shedder(struct gw_runtime *rt, struct gw_component *c, gw_shed_fn fn);
void gw_runtime__remove_shedder(struct gw_runtime *rt, struct gw_component *c);
uint64_t gw_runtime__shed(struct gw_runtime *rt, uint64_t bytes, const char *reason);

/*
 * Symbol uploads: the symbolize processor registers a handler; receivers
 * hand it every table an agent uploads (ownership passes; without a handler
 * the table is freed). Loop thread.
 */
typedef void (*gw_symbol_table_fn)(struct gw_symbol_table *t, void *userdata);
/*
 * max_pending: bytes of handed-over tables (gw_symbol_table.bytes) the
 * handler may have to add at once (0: no bound); it calls
 * gw_runtime__symbol_table_done() for each when it is done with it.
 */
void gw_runtime__set_symbol_table_handler(struct gw_runtime *rt, gw_symbol_table_fn fn, uint64_t max_pending,
					  void *userdata);
void gw_runtime__symbol_table(struct gw_runtime *rt, struct gw_symbol_table *t);
void gw_runtime__symbol_table_done(struct gw_runtime *rt, uint64_t bytes);
/* Bytes of handed-over tables not done yet. Any thread. */
uint64_t gw_runtime__symbol_tables_pending(struct gw_runtime *rt);
/*
 * Whether an upload of tables of about `bytes` is taken now: 0, or -EAGAIN
 * and *ret_retry_after_ms while max_pending bytes wait (one upload is always
 * taken when none waits). Any thread: receivers ask before decoding. A taken
 * upload's *ret_reserved bytes count as pending until the receiver passes
 * them to gw_runtime__symbol_table_done(), after it handed the tables over
 * (or dropped them), so that uploads decoded one after another see each other.
 */
int gw_runtime__admit_symbol_tables(struct gw_runtime *rt, uint64_t bytes, uint64_t *ret_reserved,
				    uint32_t *ret_retry_after_ms);

/* Extra /metrics collectors (called on the loop thread at each scrape). */
int gw_runtime__add_metrics(struct gw_runtime *rt, gw_metrics_fn fn, void *userdata);
void gw_runtime__remove_metrics(struct gw_runtime *rt, gw_metrics_fn fn, void *userdata);

/* Readiness: a component not ready yet (e.g. k8s initial list) holds /readyz at 503. */
void gw_component_set_ready(struct gw_component *c, bool ready);

#endif
