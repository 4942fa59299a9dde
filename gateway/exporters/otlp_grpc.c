// SPDX-License-Identifier: Apache-2.0
/*
 * otlp_grpc: the same OTLP request over gRPC (HTTP/2, unary
 * ProfilesService/Export), for receivers that only speak gRPC. libcurl
 * carries it: a length-prefixed message out, grpc-status from the trailers
 * (or the headers of a trailers-only response) back.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "component.h"
#include "exporthelper.h"

#define OTLP_GRPC_PATH "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export"

static char *grpc_url(const struct gw_export_config *cfg, const char **ret_error)
{
	const char *e = cfg->endpoint;
	size_t l;
	char *url;
	int r;

	if (!e || !*e) {
		*ret_error = "endpoint is required";
		errno = EINVAL;
		return NULL;
	}
	l = strlen(e);
	while (l > 0 && e[l - 1] == '/')
		l--;
	/*
	 * host:port means TLS, as in the Collector, unless tls.insecure says
	 * plaintext (and no ca_file says TLS after all, as there); http:// says
	 * plaintext (h2c), https:// TLS whatever insecure says.
	 */
	if (strncasecmp(e, "http://", 7) == 0 || strncasecmp(e, "https://", 8) == 0)
		r = asprintf(&url, "%.*s%s", (int)l, e, OTLP_GRPC_PATH);
	else if (strstr(e, "://")) {
		*ret_error = "the endpoint must be host:port, http://host:port or https://host:port";
		errno = EINVAL;
		return NULL;
	} else
		r = asprintf(&url, "%s%.*s%s",
			     cfg->tls.insecure && !(cfg->tls.ca_file && *cfg->tls.ca_file) ? "http://" : "https://",
			     (int)l, e, OTLP_GRPC_PATH);
	return r < 0 ? NULL : url;
}

static const char *const *grpc_headers(bool gzip)
{
	static const char *const plain[] = { "Content-Type: application/grpc", "TE: trailers", NULL };
	static const char *const gz[] = { "Content-Type: application/grpc", "TE: trailers", "grpc-encoding: gzip",
					  NULL };

	return gzip ? gz : plain;
}

static enum gw_http_version grpc_version(const struct gw_export_config *cfg, const char *url)
{
	return GW_HTTP_2_PRIOR; /* gRPC is HTTP/2 only: h2c on http://, ALPN h2 on https:// */
}

static int grpc_frame(const struct gw_export_request *req, uint8_t **ret, size_t *ret_len)
{
	uint8_t *b;

	if (req->len > UINT32_MAX)
		return -EFBIG;
	b = malloc(req->len + 5);
	if (!b)
		return -ENOMEM;
	b[0] = req->gzip ? 1 : 0;
	b[1] = (uint8_t)(req->len >> 24);
	b[2] = (uint8_t)(req->len >> 16);
	b[3] = (uint8_t)(req->len >> 8);
	b[4] = (uint8_t)req->len;
	memcpy(b + 5, req->body, req->len);
	*ret = b;
	*ret_len = req->len + 5;
	return 0;
}

#define GRPC_RESOURCE_EXHAUSTED 8

/*
 * RESOURCE_EXHAUSTED means either "over quota" (transient: retried) or "the
 * message is larger than the server accepts" (split). Servers say which only
 * in grpc-message: grpc-go "grpc: received message larger than max (N vs. M)"
 * and "... after decompression larger than max", grpc-java/C++ "... message
 * too large", "Received message larger than max". The match is
 * case-insensitive on those phrases.
 */
static bool grpc_too_large(const char *msg)
{
	static const char *const phrases[] = { "larger than max", "too large", "message_too_large", NULL };

	for (size_t i = 0; msg && phrases[i]; i++)
		if (strcasestr(msg, phrases[i]))
			return true;
	return false;
}

static enum gw_export_outcome grpc_classify(const struct gw_export_config *cfg, const struct gw_http_response *r,
					    int64_t *ret_rejected, char *ret_msg, size_t msg_size)
{
	char *end;
	long code;
	enum gw_export_outcome o;

	if (r->result != GW_HTTP_OK)
		return GW_EXPORT_RETRY;
	if (r->status != 200) {
		/* Not a gRPC answer (a proxy's): judge the HTTP status. */
		snprintf(ret_msg, msg_size, "HTTP %ld from a non-gRPC peer", r->status);
		return gw_retry_classify_http(r->status, cfg->retry_on_http_500);
	}
	if (!r->grpc_status[0]) {
		snprintf(ret_msg, msg_size, "response without grpc-status");
		return GW_EXPORT_RETRY;
	}
	code = strtol(r->grpc_status, &end, 10);
	if (*end || code < 0) {
		snprintf(ret_msg, msg_size, "bad grpc-status '%s'", r->grpc_status);
		return GW_EXPORT_RETRY;
	}
	o = gw_retry_classify_grpc((int)code);
	if (code == GRPC_RESOURCE_EXHAUSTED && grpc_too_large(r->grpc_message)) {
		/* A message size limit, not a quota: resending the same bytes cannot work; halve it (as on 413). */
		snprintf(ret_msg, msg_size, "grpc-status 8 (message too large): %s", r->grpc_message);
		return GW_EXPORT_SPLIT;
	}
	if (o == GW_EXPORT_OK) {
		const uint8_t *b = (const uint8_t *)r->body;

		if (r->body_len >= 5 && b[0] == 0 && !r->body_truncated) {
			size_t n = (size_t)b[1] << 24 | (size_t)b[2] << 16 | (size_t)b[3] << 8 | b[4];

			if (n <= r->body_len - 5)
				gw_export_parse_response(b + 5, n, ret_rejected, ret_msg, msg_size);
		}
	} else {
		snprintf(ret_msg, msg_size, "grpc-status %ld: %s", code, r->grpc_message);
	}
	return o;
}

static const struct gw_export_transport grpc_transport = {
	.name = "otlp_grpc",
	.url = grpc_url,
	.headers = grpc_headers,
	.http_version = grpc_version,
	.frame = grpc_frame,
	.classify = grpc_classify,
};

static const struct sr_field otlp_grpc_fields[] = {
	SR_FIELD_STR("endpoint", struct gw_export_config, endpoint, .required = true,
		     .doc = "host:port (TLS; plaintext HTTP/2 with tls.insecure), https://host:port, or "
			    "http://host:port (plaintext HTTP/2)."),
	SR_FIELD_ENUMERATION("proto_version", struct gw_export_config, proto_version, gw_export_proto_versions,
			     .def = "1.10", .doc = "OTLP profiles wire version: 1.10 or 1.9."),
	SR_FIELD_ENUMERATION("compression", struct gw_export_config, compression, gw_export_compressions, .def = "gzip",
			     .doc = "Message compression (grpc-encoding)."),
	SR_FIELD_STRMAP("headers", struct gw_export_config, headers, n_headers,
			.doc = "Extra request metadata; values may use ${env:NAME}.", .min = 0,
			.max = GW_EXPORT_MAX_HEADERS),
	SR_FIELD_DUR("timeout", struct gw_export_config, timeout, .def = "30s", .doc = "Time limit of one request."),
	SR_FIELD_ENUMERATION("process_attributes", struct gw_export_config, process_attributes,
			     gw_export_process_attributes, .def = "none",
			     .doc = "Where process.pid, thread.id and thread.name go: none, sample or resource."),
	SR_FIELD_MAP("tls", struct gw_export_config, tls, struct gw_export_tls_config, gw_export_tls_fields,
		     .doc = "TLS for host:port and https:// endpoints."),
	SR_FIELD_MAP("retry_on_failure", struct gw_export_config, retry_on_failure, struct gw_export_retry_config,
		     gw_export_retry_fields,
		     .doc = "Exponential backoff of failed requests (the Collector's defaults)."),
	SR_FIELD_BOOLEAN("retry_on_http_500", struct gw_export_config, retry_on_http_500, .def = "true",
			 .doc = "Treat HTTP 500 from a non-gRPC peer as transient."),
	SR_FIELD_MAP("sending_queue", struct gw_export_config, sending_queue, struct gw_export_queue_config,
		     gw_export_queue_fields, .doc = "The queue between the pipeline and the network."),
	SR_FIELD_MAP("auth", struct gw_export_config, auth, struct gw_export_auth_config, gw_export_auth_fields,
		     .doc = "Authentication by an extension (basicauth), as in the Collector."),
	SR_FIELD_END,
};

static int otlp_grpc_validate(const void *config, const char *path, struct sr_diag *d)
{
	const char *err = NULL;
	char *url = grpc_url(config, &err);
	int r = gw_export_validate(config, path, d);

	if (!url) {
		sr_diag_add(d, NULL, 0, 0, path, "endpoint: %s", err ? err : "invalid");
		r = -EINVAL;
	}
	free(url);
	return r;
}

static int otlp_grpc_create(struct gw_component *c)
{
	return gw_exporter_create(c, &grpc_transport);
}

const struct gw_component_type gw_exporter_otlp_grpc = {
	.name = "otlp_grpc",
	.kind = GW_EXPORTER,
	.doc = "Sends profiles over OTLP/gRPC (ProfilesService/Export, HTTP/2), with the same retries and queue as "
	       "otlp_http.",
	.collector_note = "the sending queue is bounded in bytes (queue_size_mib) as well as by queue_size",
	.config_fields = otlp_grpc_fields,
	.config_size = sizeof(struct gw_export_config),
	.validate = otlp_grpc_validate,
	.resolve = gw_export_resolve,
	.create = otlp_grpc_create,
	.start = gw_exporter_start,
	.consume = gw_exporter_consume,
	.shutdown = gw_exporter_shutdown,
	.destroy = gw_exporter_destroy,
};
