/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Receiver `otlp`: OpenTelemetry profiles as the OpenTelemetry Collector's
 * otlp receiver takes them (docs/receivers.md): OTLP/gRPC
 * (ProfilesService/Export) and OTLP/HTTP (POST /v1development/profiles,
 * HTTP/1.1 and HTTP/2 on one port), protobuf in OTLP v1.9 or v1.10, gzip,
 * TLS with optional client certificates and a bearer token. Requests are
 * decoded by otlp-decode.c into the same model and stores as agent requests,
 * so the pipeline (symbolize, k8s_attributes, relabel, batch) treats both
 * alike.
 *
 * This file is the component: config schema, listeners, metrics, lifecycle.
 * Each protocol is a listener of the gateway's connection layer
 * (gateway/net/conn.c) with its own gw_conn_ops (otlp-request.c), its limits
 * the layer's defaults (gw_listener_config_defaults) but for the keys below.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accounting.h"
#include "common/config.h"
#include "common/log.h"
#include "common/macro.h"
#include "metrics.h"
#include "common/netaddr.h"
#include "otlp-private.h"
#include "runtime.h"
#include "common/units.h"

static const struct sr_field tls_fields[] = {
	SR_FIELD_STR("cert_file", struct gw_listener_tls_config, cert_file,
		     .doc = "PEM server certificate (chain). With key_file, this protocol speaks TLS only."),
	SR_FIELD_STR("key_file", struct gw_listener_tls_config, key_file, .doc = "PEM private key of cert_file."),
	SR_FIELD_STR("client_ca_file", struct gw_listener_tls_config, client_ca_file,
		     .doc = "PEM CA bundle; when set, every client must present a certificate it signed (mTLS)."),
	SR_FIELD_END,
};

static const struct sr_field auth_fields[] = {
	SR_FIELD_STR("bearer_token_file", struct gw_listener_auth_config, bearer_token_file,
		     .doc = "File holding the token clients must send as `Authorization: Bearer <token>`; re-read "
			    "when it changes (checked every 10s)."),
	SR_FIELD_END,
};

static const struct sr_field grpc_fields[] = {
	SR_FIELD_STR("endpoint", struct otlp_grpc_config, endpoint, .def = "localhost:4317",
		     .doc = "HOST:PORT of OTLP/gRPC (0.0.0.0:4317 for every interface); \"\" turns gRPC off."),
	SR_FIELD_MAP("tls", struct otlp_grpc_config, tls, struct gw_listener_tls_config, tls_fields,
		     .doc = "TLS (ALPN h2); absent: plaintext HTTP/2 (h2c)."),
	SR_FIELD_MAP("auth", struct otlp_grpc_config, auth, struct gw_listener_auth_config, auth_fields,
		     .doc = "Bearer-token authentication; absent: none."),
	SR_FIELD_U64("max_recv_msg_size_mib", struct otlp_grpc_config, max_recv_msg_size_mib, .def = "4", .min = 1,
		     .max = 1024,
		     .doc = "Largest request message in MiB, compressed and after decompression; larger gets "
			    "ResourceExhausted."),
	SR_FIELD_U64("max_concurrent_streams", struct otlp_grpc_config, max_concurrent_streams, .def = "100", .min = 1,
		     .max = 1000, .doc = "Concurrent calls per connection (HTTP/2 SETTINGS)."),
	SR_FIELD_BOOLEAN("include_metadata", struct otlp_grpc_config, include_metadata, .def = "false",
			 .doc = "Keep each call's metadata (headers but authorization) with its profiles, for a "
				"batch processor's metadata_keys (per-tenant batches and exports)."),
	SR_FIELD_END,
};

static const struct sr_field http_fields[] = {
	SR_FIELD_STR("endpoint", struct otlp_http_config, endpoint, .def = "localhost:4318",
		     .doc = "HOST:PORT of OTLP/HTTP, HTTP/1.1 and HTTP/2 on one port (0.0.0.0:4318 for every "
			    "interface); \"\" turns HTTP off."),
	SR_FIELD_MAP("tls", struct otlp_http_config, tls, struct gw_listener_tls_config, tls_fields,
		     .doc = "TLS (ALPN h2 and http/1.1); absent: plaintext."),
	SR_FIELD_MAP("auth", struct otlp_http_config, auth, struct gw_listener_auth_config, auth_fields,
		     .doc = "Bearer-token authentication; absent: none."),
	SR_FIELD_BYTES("max_request_body_size", struct otlp_http_config, max_request_body_size, .def = "20MiB",
		       .min = 1024, .max = 1073741824,
		       .doc = "Largest request body, compressed and after decompression; larger gets 413."),
	SR_FIELD_BOOLEAN("include_metadata", struct otlp_http_config, include_metadata, .def = "false",
			 .doc = "Keep each request's headers (but authorization) with its profiles, for a batch "
				"processor's metadata_keys (per-tenant batches and exports)."),
	SR_FIELD_END,
};

static const struct sr_field protocols_fields[] = {
	SR_FIELD_MAP("grpc", struct otlp_protocols_config, grpc, struct otlp_grpc_config, grpc_fields,
		     .doc = "OTLP/gRPC: ProfilesService/Export."),
	SR_FIELD_MAP("http", struct otlp_protocols_config, http, struct otlp_http_config, http_fields,
		     .doc = "OTLP/HTTP: POST /v1development/profiles (protobuf or JSON, optionally gzip)."),
	SR_FIELD_END,
};

static const struct sr_field otlp_fields[] = {
	SR_FIELD_MAP("protocols", struct otlp_config, protocols, struct otlp_protocols_config, protocols_fields,
		     .doc = "The protocols served, as in the Collector's otlp receiver. Both listen unless their "
			    "endpoint is \"\"."),
	SR_FIELD_STR("version", struct otlp_config, version, .def = "auto",
		     .doc = "OTLP profiles version of requests: v1.9, v1.10, or auto (told from the bytes; a "
			    "request that reads validly both ways with different meanings is refused, never "
			    "guessed)."),
	SR_FIELD_U64("max_connections", struct otlp_config, max_connections, .def = GW_LISTENER_DEF_MAX_CONNECTIONS,
		     .min = 1, .max = 1000000, .doc = "Open connections per protocol; more are closed at accept."),
	SR_FIELD_BYTES("max_inflight_bytes", struct otlp_config, max_inflight_bytes,
		       .def = GW_LISTENER_DEF_MAX_INFLIGHT_BYTES, .min = 1024, .max = 68719476736,
		       .doc = "Request bytes buffered per protocol across connections; beyond it requests get "
			      "503/Unavailable."),
	SR_FIELD_DUR("header_timeout", struct otlp_config, header_timeout_ns, .def = GW_LISTENER_DEF_HEADER_TIMEOUT,
		     .doc = "Time from accept to the first complete request headers (TLS handshake included); "
			    "on HTTP/1.1 also from the first byte of each later request's head to its end."),
	SR_FIELD_DUR("request_timeout", struct otlp_config, request_timeout_ns, .def = GW_LISTENER_DEF_REQUEST_TIMEOUT,
		     .doc = "Time a request may take to arrive completely; slower ones get 408/DeadlineExceeded. "
			    "On HTTP/1.1 the rest of a body answered early (413, 408) is read for as long again, "
			    "then the connection is closed."),
	SR_FIELD_DUR("idle_timeout", struct otlp_config, idle_timeout_ns, .def = GW_LISTENER_DEF_IDLE_TIMEOUT,
		     .doc = "A connection without requests for this long is closed."),
	SR_FIELD_END,
};

static int check_protocol(const char *proto, const char *endpoint, const struct gw_listener_tls_config *tls,
			  const char *path, struct sr_diag *d)
{
	int r = 0;

	if (!!tls->cert_file != !!tls->key_file) {
		sr_diag_add(d, NULL, 0, 0, path,
			    "protocols.%s.tls: cert_file and key_file go together (one is missing)", proto);
		r = -EINVAL;
	}
	if (tls->client_ca_file && !tls->cert_file) {
		sr_diag_add(d, NULL, 0, 0, path,
			    "protocols.%s.tls.client_ca_file needs protocols.%s.tls.cert_file and key_file", proto,
			    proto);
		r = -EINVAL;
	}
	if (endpoint && *endpoint) {
		struct sockaddr_storage ss;
		char err[256];
		if (sr_parse_endpoint(endpoint, &ss, err, sizeof(err)) == -EINVAL) {
			sr_diag_add(d, NULL, 0, 0, path, "protocols.%s.endpoint: %s", proto, err);
			r = -EINVAL;
		}
	}
	return r;
}

static int otlp_validate(const void *config, const char *path, struct sr_diag *d)
{
	const struct otlp_config *cfg = config;
	const struct otlp_protocols_config *p = &cfg->protocols;
	enum gw_otlp_decode_version v;
	int r = 0;

	if (check_protocol("grpc", p->grpc.endpoint, &p->grpc.tls, path, d) < 0)
		r = -EINVAL;
	if (check_protocol("http", p->http.endpoint, &p->http.tls, path, d) < 0)
		r = -EINVAL;
	if ((!p->grpc.endpoint || !*p->grpc.endpoint) && (!p->http.endpoint || !*p->http.endpoint)) {
		sr_diag_add(d, NULL, 0, 0, path, "protocols: both grpc.endpoint and http.endpoint are off");
		r = -EINVAL;
	}
	if (cfg->version && gw_otlp_decode_version_from_string(cfg->version, &v) < 0) {
		sr_diag_add(d, NULL, 0, 0, path, "version: \"%s\" is not one of auto, v1.9, v1.10", cfg->version);
		r = -EINVAL;
	}
	return r;
}

/* ---- metrics ---- */

static void write_metrics(struct gw_metrics_writer *w, void *userdata)
{
	struct otlp_rx *o = userdata;
	static const char *const names[] = { "grpc", "http" };

	for (int i = 0; i < OTLP_N_PROTOS; i++) {
		struct otlp_listener *l = o->l[i];
		char lbl[192] = "", l2[256];
		if (!l)
			continue;
		gw_metrics_label(lbl, sizeof(lbl), "component", o->c->id);
		gw_metrics_label(lbl, sizeof(lbl), "protocol", names[i]);
		const struct {
			const char *family, *help;
			uint64_t v;
		} counters[] = {
			{ "stackrelay_gateway_otlp_connections_accepted_total", "OTLP connections accepted.",
			  l->rx.st.connections_accepted },
			{ "stackrelay_gateway_otlp_connections_refused_total",
			  "OTLP connections closed at accept (max_connections or shutting down).",
			  l->rx.st.connections_refused },
			{ "stackrelay_gateway_otlp_connections_evicted_total",
			  "OTLP connections without a request closed to make room past max_connections.",
			  l->rx.st.connections_evicted },
			{ "stackrelay_gateway_otlp_header_timeouts_total",
			  "OTLP connections closed for a request head not complete within header_timeout.",
			  l->rx.st.header_timeouts },
			{ "stackrelay_gateway_otlp_headers_too_large_total",
			  "OTLP requests refused for headers over max_header_list_bytes (431).",
			  l->rx.st.headers_too_large },
			{ "stackrelay_gateway_otlp_tls_handshake_failures_total", "TLS handshakes that failed.",
			  l->rx.st.tls_failures },
			{ "stackrelay_gateway_otlp_auth_failures_total", "Requests without the right bearer token.",
			  l->rx.st.auth_failures },
			{ "stackrelay_gateway_otlp_protocol_errors_total",
			  "Malformed HTTP/2 or HTTP/1.1 on OTLP connections.", l->rx.st.protocol_errors },
			{ "stackrelay_gateway_otlp_invalid_requests_total",
			  "Requests refused as malformed (400/InvalidArgument), the version ambiguous included.",
			  l->st.invalid },
			{ "stackrelay_gateway_otlp_too_large_requests_total",
			  "Requests refused as too large (413/ResourceExhausted), after decompression too.",
			  l->st.too_large },
			{ "stackrelay_gateway_otlp_request_bytes_total", "Request body bytes as received.",
			  l->st.bytes_wire },
			{ "stackrelay_gateway_otlp_request_decoded_bytes_total",
			  "Request bytes after decompression and gRPC framing.", l->st.bytes_plain },
			{ "stackrelay_gateway_otlp_rejected_profiles_total",
			  "Profiles refused in accepted requests (partial_success.rejected_profiles).",
			  l->st.rejected_profiles },
			{ "stackrelay_gateway_otlp_links_dropped_total", "Sample links (trace/span) dropped.",
			  l->st.links_dropped },
			{ "stackrelay_gateway_otlp_attributes_dropped_total",
			  "Attribute values not representable (bytes, arrays, maps) dropped.", l->st.attrs_dropped },
		};
		for (size_t k = 0; k < SR_ARRAY_SIZE(counters); k++)
			gw_metrics__add(w, counters[k].family, GW_METRIC_COUNTER, counters[k].help, lbl,
					(double)counters[k].v);
		gw_metrics__add(w, "stackrelay_gateway_otlp_connections", GW_METRIC_GAUGE, "Open OTLP connections.",
				lbl, l->rx.n_conns);
		for (size_t k = 0; k < SR_ARRAY_SIZE(status_codes); k++) {
			char code[8];
			snprintf(code, sizeof(code), "%d", status_codes[k]);
			snprintf(l2, sizeof(l2), "%s", lbl);
			gw_metrics_label(l2, sizeof(l2), "status", code);
			gw_metrics__add(w, "stackrelay_gateway_otlp_requests_total", GW_METRIC_COUNTER,
					"OTLP requests answered, by HTTP status (gRPC: the HTTP status its grpc-status "
					"stands for).",
					l2, (double)l->rx.statuses[k]);
		}
	}
}

/* ---- lifecycle ---- */

static int otlp_create(struct gw_component *c)
{
	struct otlp_rx *o = calloc(1, sizeof(*o));
	if (!o)
		return -ENOMEM;
	o->c = c;
	o->cfg = c->config;
	if (o->cfg->version)
		gw_otlp_decode_version_from_string(o->cfg->version, &o->dopts.version);
	c->state = o;
	return 0;
}

static int listener_start(struct otlp_rx *o, enum otlp_proto proto)
{
	const struct otlp_config *cfg = o->cfg;
	const char *endpoint = proto == OTLP_GRPC ? cfg->protocols.grpc.endpoint : cfg->protocols.http.endpoint;
	struct otlp_listener *l;
	char err[256];
	int r;

	if (!endpoint || !*endpoint)
		return 0;
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	o->l[proto] = l;
	l->o = o;
	l->proto = proto;
	if ((r = gw_listener_config_defaults(&l->cfg)) < 0)
		return r;
	l->cfg.endpoint = (char *)endpoint;
	if (proto == OTLP_GRPC) {
		l->cfg.tls = cfg->protocols.grpc.tls;
		l->cfg.auth = cfg->protocols.grpc.auth;
		l->max_body = cfg->protocols.grpc.max_recv_msg_size_mib << 20;
		l->cfg.max_concurrent_streams = cfg->protocols.grpc.max_concurrent_streams;
		l->include_metadata = cfg->protocols.grpc.include_metadata;
		/* The framed message: 5 bytes more. */
		l->cfg.max_request_bytes = l->max_body + 5;
	} else {
		l->cfg.tls = cfg->protocols.http.tls;
		l->cfg.auth = cfg->protocols.http.auth;
		l->max_body = cfg->protocols.http.max_request_body_size;
		l->include_metadata = cfg->protocols.http.include_metadata;
		l->cfg.max_concurrent_streams = 100;
		l->cfg.max_request_bytes = l->max_body;
	}
	l->cfg.max_connections = cfg->max_connections;
	l->cfg.max_inflight_bytes = cfg->max_inflight_bytes;
	l->cfg.header_timeout_ns = cfg->header_timeout_ns;
	l->cfg.request_timeout_ns = cfg->request_timeout_ns;
	l->cfg.idle_timeout_ns = cfg->idle_timeout_ns;
	l->rx.c = o->c;
	l->rx.cfg = &l->cfg;
	l->rx.ops = proto == OTLP_GRPC ? &gw_otlp_grpc_ops : &gw_otlp_http_ops;
	l->rx.owner = l;
	l->rx.loop = gw_runtime__loop(o->c->runtime);
	if (l->cfg.tls.cert_file && (r = gw_listener_tls_setup(&l->rx)) < 0)
		return r;
	if (l->cfg.auth.bearer_token_file && (r = gw_listener_token_load(&l->rx, err, sizeof(err))) < 0) {
		sr_log_error(OTLP_COMPONENT, "cannot load the bearer token", "id=%s protocol=%s error=\"%s\"", o->c->id,
			     proto == OTLP_GRPC ? "grpc" : "http", err);
		return r;
	}
	l->rx.token_checked_ms = uv_now(l->rx.loop);
	if ((r = gw_listener_listen(&l->rx)) < 0)
		return r;
	sr_log_info(OTLP_COMPONENT, "listening for OTLP profiles",
		    "id=%s protocol=%s address=%s tls=%s mtls=%s auth=%s", o->c->id,
		    proto == OTLP_GRPC ? "grpc" : "http", l->rx.address, l->rx.ssl_ctx ? "yes" : "no",
		    l->cfg.tls.client_ca_file ? "yes" : "no", l->cfg.auth.bearer_token_file ? "bearer" : "none");
	return 0;
}

static const char *const otlp_refusals[] = { GW_REASON_RETRY_LATER, GW_REASON_BAD_REQUEST, NULL };

static int otlp_start(struct gw_component *c)
{
	struct otlp_rx *o = c->state;
	int r;

	gw_component_declare_refusals(c, otlp_refusals);
	o->dec.run = gw_otlp_job_run;
	o->dec.returned = gw_otlp_job_returned;
	r = gw_decode_thread_start(&o->dec, gw_runtime__loop(c->runtime));
	o->dec.async.data = o;
	if (r < 0) {
		sr_log_error(OTLP_COMPONENT, "cannot start the decode thread", "id=%s error=\"%s\"", c->id,
			     strerror(-r));
		return r;
	}
	if ((r = listener_start(o, OTLP_GRPC)) < 0 || (r = listener_start(o, OTLP_HTTP)) < 0)
		return r;
	gw_runtime__add_metrics(c->runtime, write_metrics, o);
	return 0;
}

static void one_done(struct gw_component *c)
{
	struct otlp_rx *o = c->state;
	if (o && --o->pending_done == 0 && o->done) {
		void (*done)(struct gw_component * c) = o->done;
		o->done = NULL;
		done(c);
	}
}

static void otlp_shutdown(struct gw_component *c, void (*done)(struct gw_component *c))
{
	struct otlp_rx *o = c->state;

	o->done = done;
	o->pending_done = 1; /* held until every listener was asked */
	for (int i = 0; i < OTLP_N_PROTOS; i++)
		if (o->l[i]) {
			o->pending_done++;
			o->l[i]->rx.done = one_done;
			gw_listener_shutdown(&o->l[i]->rx);
		}
	one_done(c);
}

static void rx_free(struct otlp_rx *o)
{
	gw_decode_thread_free(&o->dec);
	free(o);
}

static void async_closed(uv_handle_t *h)
{
	rx_free(h->data);
}

static void otlp_destroy(struct gw_component *c)
{
	struct otlp_rx *o = c->state;

	if (!o)
		return;
	if (c->runtime)
		gw_runtime__remove_metrics(c->runtime, write_metrics, o);
	/* Jobs not finished are freed first: they point at connections. The handle's close frees o. */
	gw_decode_thread_stop(&o->dec, async_closed);
	for (int i = 0; i < OTLP_N_PROTOS; i++)
		if (o->l[i]) {
			o->l[i]->rx.done = NULL;
			gw_listener_destroy(&o->l[i]->rx); /* frees the listener once its handles are closed */
		}
	c->state = NULL;
	if (!o->dec.async_init)
		rx_free(o);
}

const char *gw_otlp_receiver_address(struct gw_component *c, bool grpc);
const char *gw_otlp_receiver_address(struct gw_component *c, bool grpc)
{
	struct otlp_rx *o = c->state;
	struct otlp_listener *l = o ? o->l[grpc ? OTLP_GRPC : OTLP_HTTP] : NULL;
	return l ? l->rx.address : NULL;
}

const struct gw_component_type gw_receiver_otlp = {
	.name = "otlp",
	.kind = GW_RECEIVER,
	.doc = "Receives OpenTelemetry profiles as the Collector's otlp receiver does: OTLP/gRPC and OTLP/HTTP "
	       "(HTTP/1.1 and HTTP/2; protobuf, gzip), OTLP v1.9 or v1.10, with optional TLS, client "
	       "certificates and bearer token. Frames sent unsymbolized (build ID + address) are named by the "
	       "symbolize processor like agent frames.",
	.config_fields = otlp_fields,
	.config_size = sizeof(struct otlp_config),
	.validate = otlp_validate,
	.create = otlp_create,
	.start = otlp_start,
	.shutdown = otlp_shutdown,
	.destroy = otlp_destroy,
};
