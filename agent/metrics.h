/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The agent's Prometheus endpoint: a small blocking HTTP/1.1 server on its
 * own thread, one connection at a time (a scraper every few seconds is the
 * whole load). GET /metrics renders through a callback; anything else gets
 * 404. Requests larger than AGENT_METRICS_MAX_REQUEST or slower than
 * AGENT_METRICS_IO_TIMEOUT_MS are closed.
 */
#ifndef SR_AGENT_METRICS_H
#define SR_AGENT_METRICS_H

#include <stdio.h>

#define AGENT_METRICS_MAX_REQUEST   8192
#define AGENT_METRICS_IO_TIMEOUT_MS 2000

typedef void (*agent_metrics_render_fn)(void *ctx, FILE *out);

struct agent_metrics_server;

/* address is "host:port" ("[::1]:9100", ":9100" for all addresses). NULL + errno. */
struct agent_metrics_server *agent_metrics_server_new(const char *address, agent_metrics_render_fn fn, void *ctx);
/* The bound port (useful with port 0). */
int agent_metrics_server__port(const struct agent_metrics_server *s);
void agent_metrics_server_free(struct agent_metrics_server *s);

#endif
