// SPDX-License-Identifier: Apache-2.0
/*
 * stackrelay-gateway: flags and configuration, then the pipeline runtime on
 * a libuv loop. Exit codes: 0 ok, 1 runtime failure, 2 bad usage or invalid
 * config.
 *
 * Signals: SIGTERM/SIGINT stop accepting, flush, deliver or persist within
 * service.shutdown_timeout, exit 0 (a second signal exits at once with 1).
 * SIGHUP re-reads the file: a valid new file's log level applies at once;
 * other changes are reported as needing a restart.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "common/config.h"
#include "core/heap.h"
#include "core/runtime.h"
#include "common/log.h"
#include "gateway/telemetry/server.h"
#include "pipeline.h"
#include "sr-config.h"
#include "common/version.h"

#define EXIT_USAGE 2

struct gateway {
	uv_loop_t loop;
	uv_signal_t sigterm, sigint, sighup;
	uv_timer_t trim; /* gives free heap pages back (core/heap.h) */
	struct gw_runtime *rt;
	struct gw_telemetry_servers servers; /* its /metrics and health_check */
	struct gw_config *cfg;
	const char *config_path;
	bool log_level_from_flag;
	bool stopping;
	bool timed_out;
};

static void usage(FILE *f)
{
	fprintf(f, "Usage: stackrelay-gateway [OPTIONS]\n"
		   "\n"
		   "Receives stacks from stackrelay agents, symbolizes them, adds Kubernetes metadata,\n"
		   "batches under a memory limit and exports OTLP profiles (e.g. to Grafana Pyroscope).\n"
		   "\n"
		   "Options:\n"
		   "  --config PATH       YAML pipeline configuration; without it, the built-in default below\n"
		   "  --validate          check the configuration, list every problem, exit 0 (valid) or 2\n"
		   "  --log-level LEVEL   error, warn, info, debug or trace (overrides service.telemetry.logs.level)\n"
		   "  --version           print versions and exit\n"
		   "  --help              print this help and exit\n"
		   "\n"
		   "Signals: SIGTERM/SIGINT flush and exit within service.shutdown_timeout; SIGHUP reloads\n"
		   "the log level from the file.\n"
		   "\n"
		   "Built-in default configuration:\n\n");
	fputs(gw_default_config, f);
	fprintf(f, "\nComponents and their keys (type, default, meaning):\n");
	gw_config_describe(f, false);
	fprintf(f, "\nStrings may use ${env:NAME} (or ${NAME}), ${env:NAME:-default} and ${file:PATH}. See "
		   "docs/configuration.md.\n");
}

static void close_walk_cb(uv_handle_t *h, void *arg)
{
	(void)arg;
	if (!uv_is_closing(h))
		uv_close(h, NULL);
}

static void shutdown_done(struct gw_runtime *rt, bool timed_out, void *userdata)
{
	struct gateway *g = userdata;

	(void)rt;
	/* Nothing more to serve: let the loop end. */
	gw_telemetry_servers_close(&g->servers);
	g->timed_out = timed_out;
	if (timed_out) {
		/*
		 * Work already running on libuv's worker threads cannot be
		 * cancelled; waiting for it would overrun the timeout the
		 * operator set. What was not delivered was counted as dropped.
		 */
		sr_log_warn("gateway", "shutdown timeout expired before every component finished; exiting now", "");
		uv_stop(&g->loop);
		return;
	}
	sr_log_info("gateway", "shutdown complete", "");
	uv_close((uv_handle_t *)&g->sigterm, NULL);
	uv_close((uv_handle_t *)&g->sigint, NULL);
	uv_close((uv_handle_t *)&g->sighup, NULL);
}

static void on_stop_signal(uv_signal_t *h, int signum)
{
	struct gateway *g = h->data;

	if (g->stopping) {
		sr_log_warn("gateway", "second signal: exiting without finishing the shutdown", "signal=%d", signum);
		exit(1);
	}
	g->stopping = true;
	sr_log_info("gateway", "stopping: no new requests, flushing", "signal=%d shutdown_timeout_s=%.1f", signum,
		    (double)g->cfg->service.shutdown_timeout_ns / 1e9);
	gw_runtime__shutdown(g->rt, shutdown_done, g);
}

static void on_sighup(uv_signal_t *h, int signum)
{
	struct gateway *g = h->data;
	struct gw_config *next = NULL;
	struct sr_diag *d;

	(void)signum;
	if (!g->config_path) {
		sr_log_info("gateway", "SIGHUP: running on the built-in configuration, nothing to reload", "");
		return;
	}
	d = sr_diag_new();
	if (!d)
		return;
	if (gw_config_load(g->config_path, &next, d) < 0) {
		sr_diag_print(d, stderr);
		sr_log_error("gateway", "SIGHUP: new configuration is invalid; keeping the running one", "file=%s",
			     g->config_path);
		sr_diag_free(d);
		return;
	}
	sr_diag_free(d);
	if (!g->log_level_from_flag) {
		sr_log_set_level((enum sr_log_level)next->service.log_level);
		sr_log_info("gateway", "SIGHUP: log level applied", "level=%s",
			    sr_log_level_to_string((enum sr_log_level)next->service.log_level));
	}
	sr_log_info("gateway", "SIGHUP: components and pipelines are not reloaded; restart to apply other changes",
		    "file=%s", g->config_path);
	gw_config_free(next);
}

int main(int argc, char **argv)
{
	enum { OPT_CONFIG = 256, OPT_VALIDATE, OPT_LOG_LEVEL, OPT_VERSION, OPT_HELP };
	static const struct option options[] = {
		{ "config", required_argument, NULL, OPT_CONFIG },
		{ "validate", no_argument, NULL, OPT_VALIDATE },
		{ "log-level", required_argument, NULL, OPT_LOG_LEVEL },
		{ "version", no_argument, NULL, OPT_VERSION },
		{ "help", no_argument, NULL, OPT_HELP },
		{ 0 },
	};
	struct gateway g = { 0 };
	const char *log_level = NULL;
	bool validate = false;
	struct sr_diag *diag;
	int opt, r, ret = EXIT_USAGE;

	gw_heap_setup(); /* before any thread starts */
	while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
		switch (opt) {
		case OPT_CONFIG:
			g.config_path = optarg;
			break;
		case OPT_VALIDATE:
			validate = true;
			break;
		case OPT_LOG_LEVEL:
			log_level = optarg;
			break;
		case OPT_VERSION:
			sr_print_version(stdout, "stackrelay-gateway");
			return 0;
		case OPT_HELP:
			usage(stdout);
			return 0;
		default:
			fprintf(stderr, "Try 'stackrelay-gateway --help'.\n");
			return EXIT_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "stackrelay-gateway: unexpected argument \"%s\"; try 'stackrelay-gateway --help'\n",
			argv[optind]);
		return EXIT_USAGE;
	}
	if (log_level) {
		if (sr_log_level_flag("stackrelay-gateway", log_level) < 0)
			return EXIT_USAGE;
		g.log_level_from_flag = true;
	}

	diag = sr_diag_new();
	if (!diag) {
		fprintf(stderr, "stackrelay-gateway: out of memory\n");
		return 1;
	}
	r = gw_config_load(g.config_path, &g.cfg, diag);
	sr_diag_print(diag, stderr);
	if (r < 0) {
		fprintf(stderr, "stackrelay-gateway: invalid configuration: %zu error%s\n", sr_diag_errors(diag),
			sr_diag_errors(diag) == 1 ? "" : "s");
		sr_diag_free(diag);
		return EXIT_USAGE;
	}
	sr_diag_free(diag);
	if (validate) {
		printf("%s: configuration is valid\n", g.config_path ? g.config_path : "built-in default");
		gw_config_free(g.cfg);
		return 0;
	}
	if (!g.log_level_from_flag)
		sr_log_set_level((enum sr_log_level)g.cfg->service.log_level);

	ret = 1;
	r = uv_loop_init(&g.loop);
	if (r < 0) {
		sr_log_error("gateway", "cannot create the event loop", "error=\"%s\"", uv_strerror(r));
		goto out_config;
	}
	const struct gw_runtime_config rc = {
		.loop = &g.loop,
		.components = g.cfg->components,
		.n_components = g.cfg->n_components,
		.pipelines = g.cfg->pipelines,
		.n_pipelines = g.cfg->n_pipelines,
		.metrics_off = g.cfg->service.metrics_level == GW_METRICS_LEVEL_NONE,
		.health_path = g.cfg->extensions.health_path,
		.shutdown_timeout_ns = g.cfg->service.shutdown_timeout_ns,
	};
	g.rt = gw_runtime_new(&rc);
	if (!g.rt) {
		sr_log_error("gateway", "cannot create the pipeline runtime", "error=\"%s\"", strerror(errno));
		goto out_loop;
	}
	r = gw_telemetry_servers_start(&g.servers, g.rt, g.cfg->service.metrics_address,
				       g.cfg->extensions.health_address, g.cfg->extensions.health_path);
	if (r >= 0)
		r = gw_runtime__start(g.rt);
	if (r < 0) {
		sr_log_error("gateway", "start failed; see the errors above", "error=\"%s\"", strerror(-r));
		goto out_runtime;
	}

	r = gw_heap_trim_start(&g.loop, &g.trim, GW_HEAP_TRIM_INTERVAL_MS);
	if (r < 0)
		sr_log_warn("gateway", "cannot start giving free heap pages back", "error=\"%s\"", uv_strerror(r));

	uv_signal_init(&g.loop, &g.sigterm);
	uv_signal_init(&g.loop, &g.sigint);
	uv_signal_init(&g.loop, &g.sighup);
	g.sigterm.data = g.sigint.data = g.sighup.data = &g;
	uv_signal_start(&g.sigterm, on_stop_signal, SIGTERM);
	uv_signal_start(&g.sigint, on_stop_signal, SIGINT);
	uv_signal_start(&g.sighup, on_sighup, SIGHUP);
	signal(SIGPIPE, SIG_IGN);

	/* A Collector config loads as written; say once where it means something else here. */
	const char *note_types[16], *notes[16];
	size_t n_notes = gw_config_collector_notes(g.cfg, note_types, notes, 16);
	for (size_t i = 0; i < n_notes; i++)
		sr_log_warn("gateway", "means something else than in the OpenTelemetry Collector",
			    "type=%s note=\"%s\"", note_types[i], notes[i]);
	sr_log_info("gateway", "running", "version=%s config=%s components=%zu pipelines=%zu", SR_VERSION,
		    g.config_path ? g.config_path : "built-in", g.cfg->n_components, g.cfg->n_pipelines);
	uv_run(&g.loop, UV_RUN_DEFAULT);
	if (g.timed_out) {
		fflush(stderr);
		exit(0);
	}
	ret = 0;

out_runtime:
	gw_telemetry_servers_close(&g.servers);
	gw_runtime_free(g.rt);
	/* Let close callbacks of everything the runtime closed run, then close stragglers. */
	uv_run(&g.loop, UV_RUN_DEFAULT);
	uv_walk(&g.loop, close_walk_cb, NULL);
	uv_run(&g.loop, UV_RUN_DEFAULT);
out_loop:
	if (uv_loop_close(&g.loop) != 0)
		sr_log_warn("gateway", "event loop closed with handles still open", "");
out_config:
	gw_config_free(g.cfg);
	return ret;
}
