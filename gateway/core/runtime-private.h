/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The runtime's state, shared by its files: runtime.c (the pipelines' life
 * and routing), runtime-metrics.c (its /metrics, /healthz and /readyz
 * answers and the health_check extension's) and runtime-admission.c
 * (admission, shedding, symbol tables), and nothing else.
 */
#ifndef SR_GW_RUNTIME_PRIVATE_H
#define SR_GW_RUNTIME_PRIVATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <uv.h>

#include "runtime.h"

struct gw_rt_comp {
	struct gw_component *c;
	bool created, started, shutdown_called, done, ready;
	int layer; /* shutdown order: receivers 0, processors 1 + position, exporters last */
};

struct gw_rt_collector {
	gw_metrics_fn fn;
	void *userdata;
};

struct gw_rt_admission {
	struct gw_component *c;
	gw_admission_fn fn;
};

struct gw_rt_shedder {
	struct gw_component *c;
	gw_shed_fn fn;
};

struct gw_runtime {
	uv_loop_t *loop;
	struct gw_rt_comp *comps;
	size_t n_comps;
	const struct gw_pipeline_def *pipes;
	size_t n_pipes;
	bool metrics_off;
	char *health_path;
	uint64_t shutdown_timeout_ns;
	struct gw_stores *stores;
	struct gw_accounting *acct;
	struct gw_rt_admission *admission;
	size_t n_admission, cap_admission;
	const char *refusal; /* why the last gw_runtime__admit() refused */
	gw_symbol_table_fn sym_fn;
	void *sym_ud;
	/* Upload admission, read by receivers' decode threads. */
	_Atomic uint64_t sym_max_pending, sym_pending;
	struct gw_rt_collector *collectors;
	size_t n_collectors, cap_collectors;
	struct gw_rt_shedder *shedders;
	size_t n_shedders, cap_shedders;
	bool started, shutting_down, finished;
	int max_layer, layer;
	uv_timer_t shutdown_timer;
	bool timer_init;
	void (*done)(struct gw_runtime *rt, bool timed_out, void *userdata);
	void *done_ud;
	uint64_t emit_errors;
	time_t start_time_s;
};

#endif
