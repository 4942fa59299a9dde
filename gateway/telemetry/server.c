/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The gateway's own HTTP endpoints (server.h): a listener of the connection
 * layer (gateway/net/conn.h) whose gw_conn_ops take GET and HEAD of a path
 * and hand it to the handler; the layer reads the requests (HTTP/1.1 heads
 * through common/http1.h, or h2c), bounds them and writes the answers.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "component.h"
#include "gateway/net/conn.h"
#include "gateway/telemetry/server.h"
#include "common/log.h"
#include "common/macro.h"
#include "common/netaddr.h"
#include "common/units.h"
#include "runtime.h"

#define TELEMETRY_COMPONENT "telemetry"

struct gw_telemetry {
	struct gw_listener rx; /* first: the connection layer frees the whole struct with free(rx) */
	struct gw_listener_config cfg;
	struct gw_component comp; /* what the layer's logs name (rx.c->id) */
	gw_telemetry_handler handler;
	void *userdata;
};

static struct gw_telemetry *telemetry_of(struct h2stream *s)
{
	return (struct gw_telemetry *)s->conn->rx; /* rx is its first member */
}

/* :method and :path (without its query, which is ignored); the other headers mean nothing here. */
static void on_header(struct h2stream *s, const uint8_t *name, size_t namelen, const uint8_t *value, size_t valuelen)
{
	if (gw_net_name_is(name, namelen, ":method")) {
		if (!gw_net_value_is(value, valuelen, "GET") && !gw_net_value_is(value, valuelen, "HEAD"))
			gw_net_stream_error(s, 405, "only GET and HEAD");
	} else if (gw_net_name_is(name, namelen, ":path") && !s->proto_data) {
		const uint8_t *q = memchr(value, '?', valuelen);
		size_t len = q ? (size_t)(q - value) : valuelen;
		if (len > GW_TELEMETRY_MAX_PATH_BYTES) {
			gw_net_stream_error(s, 400, "request path too long");
			return;
		}
		/* The value is not NUL-terminated (it points into the connection's buffer): copy len bytes, no more. */
		char *path = malloc(len + 1);
		if (!path) {
			gw_net_stream_error(s, 503, "out of memory");
			return;
		}
		memcpy(path, value, len);
		path[len] = '\0';
		s->proto_data = path;
	}
}

static void on_error(struct h2stream *s, int status, uint32_t retry_after_ms, const char *msg)
{
	char *body = NULL;
	int len = asprintf(&body, "%s\n", msg);
	gw_net_respond_ex(s, status, "text/plain; charset=utf-8", (uint8_t *)(len < 0 ? NULL : body),
			  len < 0 ? 0 : (size_t)len, retry_after_ms, NULL, NULL);
}

/* A complete request: the handler's answer (HEAD leaves its body out: the layer's business). */
static void on_request(struct h2stream *s)
{
	struct gw_telemetry *t = telemetry_of(s);
	const char *ctype = "text/plain; charset=utf-8";
	char *body = NULL;
	size_t len = 0;
	int status = 500;

	if (!s->proto_data) {
		on_error(s, 400, 0, "no request path");
		return;
	}
	t->handler(t->userdata, s->proto_data, &status, &body, &len, &ctype);
	gw_net_respond_ex(s, status, ctype, (uint8_t *)body, body ? len : 0, 0, NULL, NULL);
}

static void on_release(struct gw_listener *rx)
{
	struct gw_telemetry *t = (struct gw_telemetry *)rx;
	free(t->cfg.endpoint);
	free(t->comp.id);
}

static const struct gw_conn_ops telemetry_ops = {
	.header = on_header,
	.request = on_request,
	.error = on_error,
	.http1 = true,
	.http1_close = true,
	.component = TELEMETRY_COMPONENT,
	.too_large_msg = "the telemetry server takes no request body",
	.release = on_release,
};

/* The layer's limits for scrapes and probes: small heads, no bodies, few connections. */
static int telemetry_config(struct gw_listener_config *cfg)
{
	int r = gw_listener_config_defaults(cfg);
	if (r < 0)
		return r;
	cfg->max_connections = GW_TELEMETRY_MAX_CONNECTIONS;
	cfg->max_concurrent_streams = GW_TELEMETRY_MAX_STREAMS;
	cfg->max_head_bytes = GW_TELEMETRY_MAX_REQUEST_BYTES;
	cfg->max_head_lines = GW_TELEMETRY_MAX_HEADERS;
	/* HTTP/2's count of a header list (name + value + 32 each) of the largest head HTTP/1.1 may send. */
	cfg->max_header_list_bytes = GW_TELEMETRY_MAX_REQUEST_BYTES + 32 * GW_TELEMETRY_MAX_HEADERS;
	cfg->max_request_bytes = 0;
	cfg->max_inflight_bytes = 0;
	cfg->header_timeout_ns = cfg->request_timeout_ns = cfg->idle_timeout_ns =
		GW_TELEMETRY_REQUEST_TIMEOUT_MS * SR_NSEC_PER_MSEC;
	cfg->keepalive.interval_ns = 0;
	return 0;
}

struct gw_telemetry *gw_telemetry_new(uv_loop_t *loop, const char *id, const char *address,
				      gw_telemetry_handler handler, void *userdata, char *errbuf, size_t errsize)
{
	struct sockaddr_storage ss;
	struct gw_telemetry *t;
	int r;

	r = sr_parse_endpoint(address, &ss, errbuf, errsize);
	if (r < 0) {
		errno = -r;
		return NULL;
	}
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->handler = handler;
	t->userdata = userdata;
	t->rx.c = &t->comp;
	t->rx.cfg = &t->cfg;
	t->rx.ops = &telemetry_ops;
	t->rx.owner = t;
	t->rx.loop = loop;
	t->comp.id = strdup(id);
	t->cfg.endpoint = strdup(address);
	if (!t->comp.id || !t->cfg.endpoint) {
		snprintf(errbuf, errsize, "out of memory");
		r = -ENOMEM;
		goto fail;
	}
	r = telemetry_config(&t->cfg);
	if (r < 0) {
		snprintf(errbuf, errsize, "bad default limits");
		goto fail;
	}
	r = gw_listener_listen(&t->rx);
	if (r < 0) {
		snprintf(errbuf, errsize, "cannot listen on %s: %s", address, uv_strerror(r));
		goto fail;
	}
	return t;
fail:
	gw_listener_destroy(&t->rx); /* frees t once its handles are closed */
	errno = -r;
	return NULL;
}

const char *gw_telemetry__address(const struct gw_telemetry *t)
{
	return t->rx.address;
}

void gw_telemetry_close(struct gw_telemetry *t)
{
	if (t)
		gw_listener_destroy(&t->rx);
}

int gw_telemetry_servers_start(struct gw_telemetry_servers *s, struct gw_runtime *rt, const char *metrics_address,
			       const char *health_address, const char *health_path)
{
	uv_loop_t *loop = gw_runtime__loop(rt);
	char err[256] = "";

	if (metrics_address && *metrics_address) {
		s->metrics = gw_telemetry_new(loop, "service.telemetry", metrics_address, gw_runtime_telemetry_handler,
					      rt, err, sizeof(err));
		if (!s->metrics) {
			int r = -errno;
			sr_log_error("gateway", "cannot start the telemetry server", "address=%s error=\"%s\"",
				     metrics_address, err);
			return r;
		}
		sr_log_info("gateway", "telemetry server listening", "address=%s", gw_telemetry__address(s->metrics));
	}
	if (health_address) {
		s->health = gw_telemetry_new(loop, "health_check", health_address, gw_runtime_health_handler, rt, err,
					     sizeof(err));
		if (!s->health) {
			int r = -errno;
			sr_log_error("gateway", "cannot start the health_check extension", "address=%s error=\"%s\"",
				     health_address, err);
			return r;
		}
		sr_log_info("gateway", "health_check listening", "address=%s path=%s", gw_telemetry__address(s->health),
			    health_path ? health_path : "/");
	}
	return 0;
}

void gw_telemetry_servers_close(struct gw_telemetry_servers *s)
{
	gw_telemetry_close(s->metrics);
	s->metrics = NULL;
	gw_telemetry_close(s->health);
	s->health = NULL;
}
