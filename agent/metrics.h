/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The agent's Prometheus endpoint: a small HTTP/1.1 server on its own thread
 * (a scraper every few seconds is the whole load). GET /metrics renders
 * through a callback; other GETs get 404, other methods 405.
 *
 * A client cannot hold it: up to AGENT_METRICS_MAX_CLIENTS connections are
 * served at once, without blocking on any (further ones wait in the listen
 * backlog until one ends); each has AGENT_METRICS_DEADLINE_MS from accept to
 * send its request and take the whole response, and is closed then; a
 * request head longer than AGENT_METRICS_MAX_REQUEST bytes, or of more than
 * AGENT_METRICS_MAX_HEADERS header lines, gets 431, a malformed one 400.
 */
#ifndef SR_AGENT_METRICS_H
#define SR_AGENT_METRICS_H

#include <stdio.h>

/* Longest request head (request line and headers) read. */
#define AGENT_METRICS_MAX_REQUEST 8192
/* Header lines of a request; more gets 431 (a scrape sends a handful). */
#define AGENT_METRICS_MAX_HEADERS 100
/* Time a connection has, from accept, to send its request and read the response. */
#define AGENT_METRICS_DEADLINE_MS 5000
/* Connections served at once. */
#define AGENT_METRICS_MAX_CLIENTS 4

typedef void (*agent_metrics_render_fn)(void *ctx, FILE *out);

struct agent_metrics_server;

/*
 * Binds and listens on address, "host:port" ("[::1]:9100", ":9100" for all
 * IPv4 addresses; common/netaddr.h reads it), without serving yet: the agent binds before it drops the
 * capabilities setup needs, and starts threads only after. NULL + errno.
 */
struct agent_metrics_server *agent_metrics_server_new(const char *address, agent_metrics_render_fn fn, void *ctx);
/* Starts serving on its own thread. 0 or -errno. */
int agent_metrics_server__start(struct agent_metrics_server *s);
/* The bound port (useful with port 0). */
int agent_metrics_server__port(const struct agent_metrics_server *s);
void agent_metrics_server_free(struct agent_metrics_server *s);

#endif
