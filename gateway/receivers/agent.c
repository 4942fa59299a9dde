/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Receiver `agent`: the stackrelay agent protocol (docs/agent-protocol.md)
 * over HTTP/2 (nghttp2) on the gateway's libuv loop; plain TCP with prior
 * knowledge (h2c), or TLS via OpenSSL memory BIOs with ALPN "h2", optionally
 * requiring client certificates (mTLS) and/or a bearer token.
 *
 * One request = one stream: POST /stackrelay.v1.Ingest/Push with a PushRequest
 * body (optionally gzip). The body is buffered up to max_request_bytes (also
 * after decompression), then processed by agent-ingest.c (on the loop, or on
 * the receiver's decode thread when large) and answered; the batch goes into
 * the pipelines with gw_component_emit(). Everything a client controls is
 * bounded: connections, streams per connection, request bytes per stream and
 * in flight overall, the time to send headers, idle time, and unanswered PINGs.
 *
 * This file is the component: its config schema, metrics and lifecycle.
 * The listener, connections, HTTP/2, TLS and the bearer token are the
 * gateway/net/ layer; the protocol's headers and requests are in
 * agent-request.c (agent-private.h is what they share).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <nghttp2/nghttp2.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <uv.h>

#include "accounting.h"
#include "agent-dedupe.h"
#include "agent-ingest.h"
#include "agent-private.h"
#include "agent.h"
#include "common/config.h"
#include "common/gzip.h"
#include "common/log.h"
#include "common/macro.h"
#include "metrics.h"
#include "model.h"
#include "common/netaddr.h"
#include "runtime.h"
#include "common/units.h"

static const struct sr_field client_identity_fields[] = {
	SR_FIELD_BOOLEAN("bind_node_name", struct gw_listener_identity_config, bind_node_name, .def = "false",
			 .doc = "Each request's AgentInfo.node_name (host_name when it has none) must be a name of the "
				"client certificate (its subject CN or a DNS subject alternative name, read through "
				"node_name_template); other requests are answered 403. Needs client_ca_file."),
	SR_FIELD_STR("node_name_template", struct gw_listener_identity_config, node_name_template, .def = "{node}",
		     .doc = "How a certificate name spells a node name: `{node}` stands for it, e.g. "
			    "`system:node:{node}` for certificates named as the kubelet's are."),
	SR_FIELD_END,
};

static const struct sr_field tls_fields[] = {
	SR_FIELD_STR("cert_file", struct gw_listener_tls_config, cert_file,
		     .doc = "PEM server certificate (chain). With key_file, the receiver speaks TLS (ALPN h2) only."),
	SR_FIELD_STR("key_file", struct gw_listener_tls_config, key_file, .doc = "PEM private key of cert_file."),
	SR_FIELD_STR("client_ca_file", struct gw_listener_tls_config, client_ca_file,
		     .doc = "PEM CA bundle; when set, every agent must present a certificate it signed (mTLS)."),
	SR_FIELD_MAP("client_identity", struct gw_listener_tls_config, client_identity,
		     struct gw_listener_identity_config, client_identity_fields,
		     .doc = "What a client certificate proves: with bind_node_name, the node it may speak for "
			    "(docs/security.md, \"The gateway against hostile peers\")."),
	SR_FIELD_END,
};

static const struct sr_field auth_fields[] = {
	SR_FIELD_STR("bearer_token_file", struct gw_listener_auth_config, bearer_token_file,
		     .doc = "File holding the token agents must send as `Authorization: Bearer <token>`; re-read "
			    "when it changes (checked every 10s)."),
	SR_FIELD_STR("node_tokens_file", struct gw_listener_auth_config, node_tokens_file,
		     .doc = "One token per node: a file of `<node name> <token>` lines (`#` comments); a request's "
			    "bearer token must be one of them and speaks for its node only: AgentInfo.node_name "
			    "(host_name when it has none) must be that node, else 403. Re-read when it changes "
			    "(checked every 10s). Excludes bearer_token_file."),
	SR_FIELD_END,
};

static const struct sr_field keepalive_fields[] = {
	SR_FIELD_DUR("interval", struct gw_listener_keepalive_config, interval_ns,
		     .def = GW_LISTENER_DEF_KEEPALIVE_INTERVAL,
		     .doc = "Send an HTTP/2 PING after this long without traffic from the agent; 0 disables."),
	SR_FIELD_DUR("timeout", struct gw_listener_keepalive_config, timeout_ns,
		     .def = GW_LISTENER_DEF_KEEPALIVE_TIMEOUT,
		     .doc = "Close the connection when a PING is not answered within this."),
	SR_FIELD_END,
};

static const struct sr_field dedupe_fields[] = {
	SR_FIELD_U64("max_entries", struct gw_agent_dedupe_config, max_entries, .def = "65536", .min = 0,
		     .max = 16777216,
		     .doc = "Responses remembered by (agent instance_id, sequence) so a resent request is not "
			    "counted twice on this replica; 0 disables."),
	SR_FIELD_U64("max_per_agent", struct gw_agent_dedupe_config, max_per_agent, .def = "16", .min = 1, .max = 65536,
		     .doc = "Responses remembered per agent instance, its latest (an agent resends only its "
			    "outstanding request)."),
	SR_FIELD_BYTES("max_bytes", struct gw_agent_dedupe_config, max_bytes, .def = "32MiB",
		       .doc = "Bytes the remembered responses may use."),
	SR_FIELD_END,
};

static const struct sr_field stores_fields[] = {
	SR_FIELD_BYTES("executables", struct gw_agent_stores_config, executables, .def = "16MiB", .min = 65536,
		       .max = GW_STORE_MAX_BYTES,
		       .doc = "Bytes of executable definitions kept beyond those stored locations name (those count "
			      "against stacks)."),
	SR_FIELD_BYTES(
		"kernels", struct gw_agent_stores_config, kernels, .def = "4MiB", .min = 65536,
		.max = GW_STORE_MAX_BYTES,
		.doc = "Bytes of kernel definitions (with module lists) kept beyond those stored locations name."),
	SR_FIELD_BYTES("locations", struct gw_agent_stores_config, locations, .def = "256MiB", .min = 65536,
		       .max = GW_STORE_MAX_BYTES,
		       .doc = "Bytes of locations (executable + address, with any lines they do not share) kept beyond "
			      "those stored stacks hold (a cache for stacks defined again)."),
	SR_FIELD_BYTES("stacks", struct gw_agent_stores_config, stacks, .def = "256MiB", .min = 65536,
		       .max = GW_STORE_MAX_BYTES,
		       .doc = "Bytes of stack definitions kept, with the locations they hold, the executables, "
			      "kernels and functions those name, and the symbolized lines stored locations share."),
	SR_FIELD_BYTES("functions", struct gw_agent_stores_config, functions, .def = "64MiB", .min = 65536,
		       .max = GW_STORE_MAX_BYTES,
		       .doc = "Bytes of function definitions (interpreted and JIT code the agents named) kept beyond "
			      "those stored "
			      "locations name."),
	SR_FIELD_END,
};

static const struct sr_field stream_resets_fields[] = {
	SR_FIELD_U64("burst", struct gw_listener_resets_config, burst, .def = GW_LISTENER_DEF_RESETS_BURST, .min = 1,
		     .max = 1000000, .doc = "Streams a client may reset (RST_STREAM) at once before the rate applies."),
	SR_FIELD_U64("per_second", struct gw_listener_resets_config, per_second,
		     .def = GW_LISTENER_DEF_RESETS_PER_SECOND, .min = 1, .max = 1000000,
		     .doc = "Resets per second a client may sustain after the burst; beyond it the connection is "
			    "closed with GOAWAY (HTTP/2 rapid reset)."),
	SR_FIELD_END,
};

static const struct sr_field agent_fields[] = {
	SR_FIELD_STR("endpoint", struct gw_agent_config, net.endpoint, .def = "127.0.0.1:7480",
		     .doc = "HOST:PORT to listen on (0.0.0.0:7480 for every interface)."),
	SR_FIELD_MAP("tls", struct gw_agent_config, net.tls, struct gw_listener_tls_config, tls_fields,
		     .doc = "TLS; absent: plain HTTP/2 (h2c, prior knowledge)."),
	SR_FIELD_MAP("auth", struct gw_agent_config, net.auth, struct gw_listener_auth_config, auth_fields,
		     .doc = "Bearer-token authentication; absent: none."),
	SR_FIELD_U64("max_connections", struct gw_agent_config, net.max_connections,
		     .def = GW_LISTENER_DEF_MAX_CONNECTIONS, .min = 1, .max = 1000000,
		     .doc = "Open connections. At the limit, the oldest connection that has not sent a request yet "
			    "is closed to make room; without one, the new connection is closed at accept."),
	SR_FIELD_U64("max_connections_per_peer", struct gw_agent_config, net.max_connections_per_peer,
		     .def = GW_LISTENER_DEF_MAX_CONNECTIONS_PER_PEER, .max = 1000000,
		     .doc = "Open connections from one IP address; more are closed at accept, so one host cannot "
			    "take every connection. 0: no per-address limit (the default, since agents behind a load "
			    "balancer or NAT share one address)."),
	SR_FIELD_U64("max_concurrent_streams", struct gw_agent_config, net.max_concurrent_streams,
		     .def = GW_LISTENER_DEF_MAX_CONCURRENT_STREAMS, .min = 1, .max = 1000,
		     .doc = "Concurrent requests per connection (HTTP/2 SETTINGS)."),
	SR_FIELD_BYTES("max_header_list_bytes", struct gw_agent_config, net.max_header_list_bytes,
		       .def = GW_LISTENER_DEF_MAX_HEADER_LIST_BYTES, .min = 1024, .max = 1048576,
		       .doc = "Request header list size (names + values + 32 bytes each, HTTP/2 SETTINGS); larger "
			      "gets 431."),
	SR_FIELD_U64("max_continuations", struct gw_agent_config, net.max_continuations,
		     .def = GW_LISTENER_DEF_MAX_CONTINUATIONS, .min = 1, .max = 1000,
		     .doc = "CONTINUATION frames after one HEADERS frame; more close the connection (CONTINUATION "
			    "flood)."),
	SR_FIELD_U64("max_pending_acks", struct gw_agent_config, net.max_pending_acks,
		     .def = GW_LISTENER_DEF_MAX_PENDING_ACKS, .min = 1, .max = 1000000,
		     .doc = "PING and SETTINGS acknowledgements queued for a client that does not read them; more "
			    "close the connection."),
	SR_FIELD_MAP("stream_resets", struct gw_agent_config, net.stream_resets, struct gw_listener_resets_config,
		     stream_resets_fields, .doc = "Rate limit of streams a client resets (token bucket)."),
	SR_FIELD_BYTES(
		"max_request_bytes", struct gw_agent_config, net.max_request_bytes,
		.def = GW_LISTENER_DEF_MAX_REQUEST_BYTES, .min = 1024, .max = 1073741824,
		.doc = "Largest request body, compressed and after gzip decompression; larger gets 413. The "
		       "default leaves room for the agent's largest symbol upload (gateway.max_symbol_upload_size, "
		       "8MiB by default)."),
	SR_FIELD_BYTES("max_inflight_bytes", struct gw_agent_config, net.max_inflight_bytes,
		       .def = GW_LISTENER_DEF_MAX_INFLIGHT_BYTES, .min = 1024, .max = 68719476736,
		       .doc = "Request bytes buffered across all connections; beyond it requests get 503 with "
			      "retry_after_ms."),
	SR_FIELD_DUR("header_timeout", struct gw_agent_config, net.header_timeout_ns,
		     .def = GW_LISTENER_DEF_HEADER_TIMEOUT,
		     .doc = "Time from accept to the first complete request headers (TLS handshake included); "
			    "on HTTP/1.1 also from the first byte of each later request's head to its end."),
	SR_FIELD_DUR("request_timeout", struct gw_agent_config, net.request_timeout_ns,
		     .def = GW_LISTENER_DEF_REQUEST_TIMEOUT,
		     .doc = "Time a request may take to arrive completely; slower ones get 408. On HTTP/1.1 the "
			    "rest of a body answered early (413, 408) is read for as long again, then the "
			    "connection is closed."),
	SR_FIELD_DUR("idle_timeout", struct gw_agent_config, net.idle_timeout_ns, .def = GW_LISTENER_DEF_IDLE_TIMEOUT,
		     .doc = "A connection without requests for this long is closed with GOAWAY."),
	SR_FIELD_MAP("keepalive", struct gw_agent_config, net.keepalive, struct gw_listener_keepalive_config,
		     keepalive_fields,
		     .doc = "HTTP/2 PING keepalive: finds dead agents behind NATs and load balancers."),
	SR_FIELD_MAP("dedupe", struct gw_agent_config, dedupe, struct gw_agent_dedupe_config, dedupe_fields,
		     .doc = "De-duplication of resent requests."),
	SR_FIELD_MAP("stores", struct gw_agent_config, stores, struct gw_agent_stores_config, stores_fields,
		     .doc = "Bounds of the gateway-wide definition stores (by bytes, coldest evicted first; an evicted "
			    "definition is "
			    "asked for again). Shared by every receiver: the last one started sets them."),
	SR_FIELD_END,
};

/* ---- metrics ---- */

static void write_metrics(struct gw_metrics_writer *w, void *userdata)
{
	struct gw_listener *rx = userdata;
	struct gw_agent_rx *a = agent_of(rx);
	char lbl[128] = "", l2[256];
	const struct {
		const char *family, *help;
		uint64_t v;
	} counters[] = {
		{ "stackrelay_gateway_agent_connections_accepted_total", "Agent connections accepted.",
		  rx->st.connections_accepted },
		{ "stackrelay_gateway_agent_connections_refused_total",
		  "Agent connections closed at accept (max_connections or shutting down).",
		  rx->st.connections_refused },
		{ "stackrelay_gateway_agent_connections_refused_peer_total",
		  "Agent connections closed at accept for max_connections_per_peer.", rx->st.connections_refused_peer },
		{ "stackrelay_gateway_agent_connections_evicted_total",
		  "Connections without a request closed to make room for a new one at max_connections.",
		  rx->st.connections_evicted },
		{ "stackrelay_gateway_agent_streams_reset_total", "Request streams the client reset (RST_STREAM).",
		  rx->st.streams_reset },
		{ "stackrelay_gateway_agent_headers_too_large_total",
		  "Requests answered 431 for headers beyond max_header_list_bytes.", rx->st.headers_too_large },
		{ "stackrelay_gateway_agent_tls_handshake_failures_total",
		  "TLS handshakes that failed (wrong or missing client certificate, no h2 ALPN, not TLS).",
		  rx->st.tls_failures },
		{ "stackrelay_gateway_agent_header_timeouts_total",
		  "Connections closed for sending no request headers within header_timeout.", rx->st.header_timeouts },
		{ "stackrelay_gateway_agent_keepalive_timeouts_total", "Connections closed for an unanswered PING.",
		  rx->st.keepalive_timeouts },
		{ "stackrelay_gateway_agent_idle_closes_total", "Connections closed after idle_timeout.",
		  rx->st.idle_closes },
		{ "stackrelay_gateway_agent_protocol_errors_total",
		  "Malformed HTTP/2 or PushRequests, unsupported protocol versions, and connections closed for "
		  "exceeding an HTTP/2 limit (stream_resets, max_continuations, max_pending_acks).",
		  rx->st.protocol_errors },
		{ "stackrelay_gateway_agent_auth_failures_total", "Requests without the right bearer token.",
		  rx->st.auth_failures },
		{ "stackrelay_gateway_agent_identity_refusals_total",
		  "Requests answered 403: their node name is not one their client certificate or node token "
		  "speaks for (tls.client_identity, auth.node_tokens_file).",
		  a->st.identity_refusals },
		{ "stackrelay_gateway_agent_request_bytes_total", "Request body bytes as received (compressed).",
		  a->st.bytes_wire },
		{ "stackrelay_gateway_agent_request_decoded_bytes_total", "Request body bytes after decompression.",
		  a->st.bytes_plain },
		{ "stackrelay_gateway_agent_duplicate_requests_total",
		  "Resent requests answered from the de-duplication window (not counted again).", a->st.duplicates },
		{ "stackrelay_gateway_agent_duplicate_samples_total", "CPU samples in those resent requests.",
		  a->st.duplicate_samples },
		{ "stackrelay_gateway_agent_symbol_tables_total", "Symbol tables agents uploaded.",
		  a->st.symbol_tables },
		{ "stackrelay_gateway_agent_symbol_tables_deferred_total",
		  "Symbol tables answered 429 because the symbolize processor had max_pending_uploads to add.",
		  a->st.symbol_tables_deferred },
		{ "stackrelay_gateway_agent_wanted_symbols_total", "Executable IDs asked for in wanted_symbols.",
		  a->st.wanted },
		{ "stackrelay_gateway_agent_symbol_probes_total",
		  "Executable and kernel IDs agents asked about in probe_symbols (at exit).", a->st.probes },
		{ "stackrelay_gateway_agent_symbol_probes_pending_total",
		  "Probed IDs answered as still being looked up (symbols_pending).", a->st.probes_pending },
	};

	gw_metrics_label(lbl, sizeof(lbl), "component", rx->c->id);
	for (size_t i = 0; i < SR_ARRAY_SIZE(counters); i++)
		gw_metrics__add(w, counters[i].family, GW_METRIC_COUNTER, counters[i].help, lbl, (double)counters[i].v);
	gw_metrics__add(w, "stackrelay_gateway_agent_connections", GW_METRIC_GAUGE, "Open agent connections.", lbl,
			rx->n_conns);
	gw_metrics__add(w, "stackrelay_gateway_agent_inflight_bytes", GW_METRIC_GAUGE,
			"Request bytes buffered now (bounded by max_inflight_bytes).", lbl, (double)rx->inflight_bytes);
	gw_metrics__add(w, "stackrelay_gateway_agent_dedupe_entries", GW_METRIC_GAUGE,
			"Responses remembered for de-duplication.", lbl, (double)gw_dedupe__entries(a->dedupe));
	gw_metrics__add(w, "stackrelay_gateway_agent_dedupe_bytes", GW_METRIC_GAUGE,
			"Bytes the remembered responses hold (bounded by dedupe.max_bytes).", lbl,
			(double)gw_dedupe__bytes(a->dedupe));
	gw_metrics__add(w, "stackrelay_gateway_agent_dedupe_agents", GW_METRIC_GAUGE,
			"Agent instances with remembered responses (at most dedupe.max_per_agent each).", lbl,
			(double)gw_dedupe__instances(a->dedupe));
	gw_metrics__add(w, "stackrelay_gateway_agent_dedupe_evictions_total", GW_METRIC_COUNTER,
			"Remembered responses forgotten for a bound (an agent's latest max_per_agent, max_entries, "
			"max_bytes).",
			lbl, (double)gw_dedupe__evictions(a->dedupe));
	for (size_t i = 0; i < SR_ARRAY_SIZE(status_codes); i++) {
		char code[8];
		snprintf(code, sizeof(code), "%d", status_codes[i]);
		snprintf(l2, sizeof(l2), "%s", lbl);
		gw_metrics_label(l2, sizeof(l2), "status", code);
		gw_metrics__add(w, "stackrelay_gateway_agent_requests_total", GW_METRIC_COUNTER,
				"Agent requests answered, by HTTP status.", l2, (double)rx->statuses[i]);
	}
	gw_metrics__add_histogram(w, "stackrelay_gateway_agent_request_duration_seconds",
				  "Seconds from a request's first header to its answer (queued, read, decoded and "
				  "admitted to the pipeline; not the write of the answer).",
				  lbl, &rx->request_duration);
	for (size_t i = 0; i < GW_UPLOAD_REFUSAL_MAX; i++) {
		snprintf(l2, sizeof(l2), "%s", lbl);
		gw_metrics_label(l2, sizeof(l2), "reason", gw_upload_refusal_names[i]);
		gw_metrics__add(w, "stackrelay_gateway_agent_symbol_tables_refused_total", GW_METRIC_COUNTER,
				"Symbol tables not taken, by reason: not_asked (this replica did not ask that agent "
				"for it), error_not_asked (an error answering no ask), unknown_executable (not "
				"stored); the rest of the request was.",
				l2, (double)a->st.tables_refused[i]);
	}
	const struct {
		const char *kind;
		uint64_t v;
	} missing[] = {
		{ "stack", a->st.missing_stacks },
		{ "executable", a->st.missing_executables },
		{ "kernel", a->st.missing_kernels },
		{ "function", a->st.missing_functions },
	};
	for (size_t i = 0; i < SR_ARRAY_SIZE(missing); i++) {
		snprintf(l2, sizeof(l2), "%s", lbl);
		gw_metrics_label(l2, sizeof(l2), "kind", missing[i].kind);
		gw_metrics__add(w, "stackrelay_gateway_agent_missing_definitions_total", GW_METRIC_COUNTER,
				"Definitions reported missing to agents (they resend them).", l2, (double)missing[i].v);
	}
	const struct {
		const char *reason;
		uint64_t v;
	} drops[] = {
		{ "ring_buffer_full", a->st.agent_drops.ring_buffer_full },
		{ "stack_errors", a->st.agent_drops.stack_errors },
		{ "buffer_overflow", a->st.agent_drops.buffer_overflow },
		{ "process_unknown", a->st.agent_drops.process_unknown },
	};
	for (size_t i = 0; i < SR_ARRAY_SIZE(drops); i++) {
		snprintf(l2, sizeof(l2), "%s", lbl);
		gw_metrics_label(l2, sizeof(l2), "reason", drops[i].reason);
		gw_metrics__add(w, "stackrelay_gateway_agent_reported_drops_total", GW_METRIC_COUNTER,
				"CPU samples agents reported lost before sending, by reason (from PushRequest.drops).",
				l2, (double)drops[i].v);
	}
}

/* ---- lifecycle ---- */

static int agent_validate(const void *config, const char *path, struct sr_diag *d)
{
	const struct gw_listener_config *cfg = &((const struct gw_agent_config *)config)->net;
	int r = 0;

	if (!!cfg->tls.cert_file != !!cfg->tls.key_file) {
		sr_diag_add(d, NULL, 0, 0, path, "tls: cert_file and key_file go together (one is missing)");
		r = -EINVAL;
	}
	if (cfg->tls.client_identity.bind_node_name && !cfg->tls.client_ca_file) {
		sr_diag_add(d, NULL, 0, 0, path,
			    "tls.client_identity.bind_node_name needs tls.client_ca_file (client certificates)");
		r = -EINVAL;
	}
	if (cfg->tls.client_identity.node_name_template &&
	    !strstr(cfg->tls.client_identity.node_name_template, "{node}")) {
		sr_diag_add(d, NULL, 0, 0, path, "tls.client_identity.node_name_template must contain {node}");
		r = -EINVAL;
	}
	if (cfg->auth.bearer_token_file && cfg->auth.node_tokens_file) {
		sr_diag_add(d, NULL, 0, 0, path,
			    "auth: bearer_token_file and node_tokens_file exclude each other (a shared token would "
			    "speak for every node)");
		r = -EINVAL;
	}
	if (cfg->tls.client_ca_file && !cfg->tls.cert_file) {
		sr_diag_add(d, NULL, 0, 0, path, "tls.client_ca_file needs tls.cert_file and tls.key_file");
		r = -EINVAL;
	}
	if (cfg->endpoint) {
		struct sockaddr_storage ss;
		char err[256];
		if (sr_parse_endpoint(cfg->endpoint, &ss, err, sizeof(err)) == -EINVAL) {
			sr_diag_add(d, NULL, 0, 0, path, "endpoint: %s", err);
			r = -EINVAL;
		}
	}
	return r;
}

/* ---- the definition stores (gw_listener.on_tick) ---- */

/* The window over which missing definitions are weighed against evictions, and how often a warning may repeat. */
#define THRASH_WINDOW_MS     10000
#define THRASH_WARN_EVERY_MS (10 * 60 * 1000)

/*
 * The stores whose evictions agents feel (gw_agent_rx.thrash is indexed like this).
 * min_missing: fewer missing definitions than this in a window are ordinary
 * churn (an agent restarted, a replica came up). Executables and kernels are
 * few and long-lived, so a handful asked for again already says the store
 * evicts ones in use; and each evicted one costs more than a stack: the next
 * definition naming it makes a new one, with new copies of its locations.
 */
static const struct {
	enum gw_store_kind store;
	const char *msg, *plural, *singular;
	uint64_t min_missing;
} watched[] = {
	{ GW_STORE_STACKS,
	  "the stacks store is too small for the stacks agents use: it evicts stacks that come back as "
	  "definitions, at a high CPU cost; raise stores.stacks",
	  "stacks", "stack", 100 },
	{ GW_STORE_EXECUTABLES,
	  "the executables store is too small for the executables agents use: it evicts executables that come "
	  "back as definitions, with new copies of their locations, at a high CPU cost; raise stores.executables",
	  "executables", "executable", 10 },
	{ GW_STORE_KERNELS,
	  "the kernels store is too small for the kernels agents use: it evicts kernels that come back as "
	  "definitions, with new copies of their locations, at a high CPU cost; raise stores.kernels",
	  "kernels", "kernel", 10 },
};

static uint64_t missing_of(const struct gw_agent_stats *st, enum gw_store_kind k)
{
	return k == GW_STORE_STACKS	   ? st->missing_stacks
	       : k == GW_STORE_EXECUTABLES ? st->missing_executables
					   : st->missing_kernels;
}

/*
 * A store smaller than the definitions the fleet uses evicts ones that
 * agents still name: every request is answered with them missing and they
 * come back as definitions, so the gateway spends its CPU on definitions
 * (costly, not lossy: docs/gateway.md, "Definition stores"). Healthy
 * eviction removes definitions nobody uses any more, which are rarely
 * asked for again. So, per store: it evicted in the window, and agents
 * were told of missing definitions of its kind at least a quarter as
 * often. A gateway that just started (empty stores, nothing evicted) does
 * not count.
 */
static void watch_stores(struct gw_listener *rx, uint64_t now_ms)
{
	struct gw_agent_rx *a = agent_of(rx);

	_Static_assert(SR_ARRAY_SIZE(watched) == SR_ARRAY_SIZE(a->thrash), "one thrash window per watched store");
	for (size_t i = 0; i < SR_ARRAY_SIZE(watched); i++) {
		__typeof__(a->thrash[0]) *t = &a->thrash[i];
		struct gw_store_stats st;
		uint64_t missing, evictions;

		if (t->at_ms && now_ms - t->at_ms < THRASH_WINDOW_MS)
			continue;
		gw_stores__stats(gw_runtime__stores(rx->c->runtime), watched[i].store, &st);
		missing = missing_of(&a->st, watched[i].store) - t->missing;
		evictions = st.evictions - t->evictions;
		if (t->at_ms && evictions > 0 && missing >= watched[i].min_missing && missing * 4 >= evictions &&
		    (!t->warned_ms || now_ms - t->warned_ms >= THRASH_WARN_EVERY_MS)) {
			t->warned_ms = now_ms;
			sr_log_warn(COMPONENT, watched[i].msg,
				    "id=%s window_s=%u missing_%s=%" PRIu64 " %s_evictions=%" PRIu64
				    " %s_store_bytes=%" PRIu64 " %s_store_limit_bytes=%" PRIu64,
				    rx->c->id, (unsigned)(THRASH_WINDOW_MS / 1000), watched[i].plural, missing,
				    watched[i].singular, evictions, watched[i].plural, st.bytes, watched[i].plural,
				    st.limit_bytes);
		}
		t->at_ms = now_ms;
		t->missing = missing_of(&a->st, watched[i].store);
		t->evictions = st.evictions;
	}
}

static int agent_create(struct gw_component *c)
{
	struct gw_agent_rx *a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	struct gw_listener *rx = &a->rx;
	rx->c = c;
	rx->ops = &gw_agent_conn_ops;
	rx->cfg = &((const struct gw_agent_config *)c->config)->net;
	rx->on_tick = watch_stores;
	c->state = rx;
	return 0;
}

static const char *const agent_refusals[] = { GW_REASON_RETRY_LATER, GW_REASON_MISSING_DEFINITION, NULL };

static int agent_start(struct gw_component *c)
{
	struct gw_listener *rx = c->state;
	struct gw_agent_rx *a = agent_of(rx);
	const struct gw_listener_config *cfg = rx->cfg;
	const struct gw_agent_config *acfg = c->config;
	char err[256];
	int r;

	rx->loop = gw_runtime__loop(c->runtime);
	gw_component_declare_refusals(c, agent_refusals);
	{
		struct gw_stores *st = gw_runtime__stores(c->runtime);
		gw_stores__set_limit(st, GW_STORE_EXECUTABLES, acfg->stores.executables);
		gw_stores__set_limit(st, GW_STORE_KERNELS, acfg->stores.kernels);
		gw_stores__set_limit(st, GW_STORE_LOCATIONS, acfg->stores.locations);
		gw_stores__set_limit(st, GW_STORE_STACKS, acfg->stores.stacks);
		gw_stores__set_limit(st, GW_STORE_FUNCTIONS, acfg->stores.functions);
	}
	if (cfg->tls.cert_file && (r = gw_listener_tls_setup(rx)) < 0)
		return r;
	if (cfg->auth.bearer_token_file && (r = gw_listener_token_load(rx, err, sizeof(err))) < 0) {
		sr_log_error(COMPONENT, "cannot load the bearer token", "id=%s error=\"%s\"", c->id, err);
		return r;
	}
	if (cfg->auth.node_tokens_file && (r = gw_agent_node_tokens_load(rx, err, sizeof(err))) < 0) {
		sr_log_error(COMPONENT, "cannot load the node tokens", "id=%s error=\"%s\"", c->id, err);
		return r;
	}
	rx->token_checked_ms = uv_now(rx->loop);
	a->node_tokens_checked_ms = rx->token_checked_ms;
	a->dedupe = gw_dedupe_new((uint32_t)acfg->dedupe.max_entries, (uint32_t)acfg->dedupe.max_per_agent,
				  acfg->dedupe.max_bytes);
	if (!a->dedupe)
		return -ENOMEM;
	/* The decode thread for large requests; its async handle counts in rx->handles. */
	a->dec.run = gw_agent_job_run;
	a->dec.returned = gw_agent_job_returned;
	r = gw_decode_thread_start(&a->dec, rx->loop);
	a->dec.async.data = rx;
	if (a->dec.async_init)
		rx->handles++;
	if (r < 0) {
		sr_log_error(COMPONENT, "cannot start the decode thread", "id=%s error=\"%s\"", c->id, strerror(-r));
		return r;
	}
	if ((r = gw_listener_listen(rx)) < 0)
		return r;
	gw_runtime__add_metrics(c->runtime, write_metrics, rx);
	sr_log_info(COMPONENT, "listening for agents", "id=%s address=%s tls=%s mtls=%s auth=%s", c->id, rx->address,
		    rx->ssl_ctx ? "yes" : "no", cfg->tls.client_ca_file ? "yes" : "no",
		    cfg->auth.node_tokens_file	  ? "node_tokens"
		    : cfg->auth.bearer_token_file ? "bearer"
						  : "none");
	return 0;
}

static void agent_shutdown(struct gw_component *c, void (*done)(struct gw_component *c))
{
	struct gw_listener *rx = c->state;

	rx->done = done;
	gw_listener_shutdown(rx);
}

/* Stops the decode thread and drops its jobs (the listener is being destroyed). */
/* gw_agent_conn_ops.release: what is the agent receiver's around the listener. */
void gw_agent_release(struct gw_listener *rx)
{
	struct gw_agent_rx *a = agent_of(rx);

	gw_decode_thread_free(&a->dec);
	gw_dedupe_free(a->dedupe);
	gw_agent_node_tokens_free(rx);
}

static void agent_destroy(struct gw_component *c)
{
	struct gw_listener *rx = c->state;

	if (!rx)
		return;
	c->state = NULL;
	if (c->runtime)
		gw_runtime__remove_metrics(c->runtime, write_metrics, rx);
	rx->destroyed = true; /* jobs dropped now neither answer nor finish the shutdown */
	rx->done = NULL;
	gw_decode_thread_stop(&agent_of(rx)->dec, gw_listener_handle_closed);
	gw_listener_destroy(rx);
}

const char *gw_agent_receiver_address(struct gw_component *c)
{
	struct gw_listener *rx = c->state;
	return rx ? rx->address : NULL;
}

const struct gw_component_type gw_receiver_agent = {
	.name = "agent",
	.kind = GW_RECEIVER,
	.doc = "Receives profiles from stackrelay agents: the agent protocol (docs/agent-protocol.md) over HTTP/2, "
	       "plain (h2c) or TLS with optional client certificates and bearer token. Definitions (stacks, "
	       "executables, kernels) are kept in gateway-wide bounded stores; unknown ones are asked for.",
	.config_fields = agent_fields,
	.config_size = sizeof(struct gw_agent_config),
	.validate = agent_validate,
	.create = agent_create,
	.start = agent_start,
	.shutdown = agent_shutdown,
	.destroy = agent_destroy,
};
