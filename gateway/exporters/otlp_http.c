// SPDX-License-Identifier: Apache-2.0
/*
 * otlp_http: OTLP profiles over HTTP (docs/exporters.md). POST
 * <endpoint>/v1development/profiles, Content-Type application/x-protobuf
 * exactly (Pyroscope answers 415 to anything else), optionally gzip.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "component.h"
#include "exporthelper.h"

#define OTLP_HTTP_PROFILES_PATH "/v1development/profiles"

static char *http_url(const struct gw_export_config *cfg, const char **ret_error)
{
	const char *base = cfg->profiles_endpoint && *cfg->profiles_endpoint ? cfg->profiles_endpoint : cfg->endpoint;
	size_t l;
	char *url;

	if (!base || !*base) {
		*ret_error = "endpoint is required";
		errno = EINVAL;
		return NULL;
	}
	if (strncasecmp(base, "http://", 7) != 0 && strncasecmp(base, "https://", 8) != 0) {
		*ret_error = "the URL must start with http:// or https://";
		errno = EINVAL;
		return NULL;
	}
	if (base == cfg->profiles_endpoint)
		return strdup(base);
	l = strlen(base);
	while (l > 0 && base[l - 1] == '/')
		l--;
	if (asprintf(&url, "%.*s%s", (int)l, base, OTLP_HTTP_PROFILES_PATH) < 0)
		return NULL;
	return url;
}

static const char *const *http_headers(bool gzip)
{
	static const char *const plain[] = { "Content-Type: application/x-protobuf", NULL };
	static const char *const gz[] = { "Content-Type: application/x-protobuf", "Content-Encoding: gzip", NULL };

	return gzip ? gz : plain;
}

static enum gw_http_version http_version(const struct gw_export_config *cfg, const char *url)
{
	if (strncasecmp(url, "https://", 8) == 0)
		return GW_HTTP_AUTO; /* HTTP/2 when the server offers it via ALPN */
	return cfg->h2c ? GW_HTTP_2_PRIOR : GW_HTTP_1_1;
}

static enum gw_export_outcome http_classify(const struct gw_export_config *cfg, const struct gw_http_response *r,
					    int64_t *ret_rejected, char *ret_msg, size_t msg_size)
{
	enum gw_export_outcome o;

	if (r->result != GW_HTTP_OK)
		return GW_EXPORT_RETRY;
	o = gw_retry_classify_http(r->status, cfg->retry_on_http_500);
	if (o == GW_EXPORT_OK) {
		/* A protobuf body may carry a partial_success; JSON or empty bodies carry nothing we use. */
		if (r->body_len > 0 && !r->body_truncated &&
		    strncasecmp(r->content_type, "application/x-protobuf", 22) == 0)
			gw_export_parse_response(r->body, r->body_len, ret_rejected, ret_msg, msg_size);
	} else {
		snprintf(ret_msg, msg_size, "HTTP %ld", r->status);
	}
	return o;
}

static const struct gw_export_transport http_transport = {
	.name = "otlp_http",
	.url = http_url,
	.headers = http_headers,
	.http_version = http_version,
	.classify = http_classify,
};

static const struct sr_field otlp_http_fields[] = {
	SR_FIELD_STR(
		"endpoint", struct gw_export_config, endpoint, .required = true,
		.doc = "Base URL of the OTLP receiver (http:// or https://); /v1development/profiles is appended."),
	SR_FIELD_STR("profiles_endpoint", struct gw_export_config, profiles_endpoint,
		     .doc = "Full URL to POST profiles to, used as is instead of endpoint + path."),
	SR_FIELD_ENUMERATION(
		"proto_version", struct gw_export_config, proto_version, gw_export_proto_versions, .def = "1.10",
		.doc = "OTLP profiles wire version: 1.10 (Pyroscope >= 1.20, 2.x) or 1.9 (Pyroscope 1.18-1.19)."),
	SR_FIELD_ENUMERATION("compression", struct gw_export_config, compression, gw_export_compressions, .def = "gzip",
			     .doc = "Request body compression."),
	SR_FIELD_STRMAP("headers", struct gw_export_config, headers, n_headers,
			.doc = "Extra request headers (e.g. X-Scope-OrgID); values may use ${env:NAME}.", .min = 0,
			.max = GW_EXPORT_MAX_HEADERS),
	SR_FIELD_DUR("timeout", struct gw_export_config, timeout, .def = "30s",
		     .doc = "Time limit of one request, connection included."),
	SR_FIELD_BOOLEAN(
		"h2c", struct gw_export_config, h2c, .def = "false",
		.doc = "Speak HTTP/2 without TLS (prior knowledge) to an http:// endpoint; https:// negotiates "
		       "HTTP/2 by ALPN anyway."),
	SR_FIELD_ENUMERATION("process_attributes", struct gw_export_config, process_attributes,
			     gw_export_process_attributes, .def = "none",
			     .doc = "Where process.pid, thread.id and thread.name go: none (dropped; one series per "
				    "service), sample (sample attributes) or resource (process.pid per resource). Each "
				    "becomes a Pyroscope label, multiplying series."),
	SR_FIELD_MAP("tls", struct gw_export_config, tls, struct gw_export_tls_config, gw_export_tls_fields,
		     .doc = "TLS for https:// endpoints (the Collector's configtls client keys)."),
	SR_FIELD_MAP("retry_on_failure", struct gw_export_config, retry_on_failure, struct gw_export_retry_config,
		     gw_export_retry_fields,
		     .doc = "Exponential backoff of failed requests (the Collector's defaults)."),
	SR_FIELD_BOOLEAN("retry_on_http_500", struct gw_export_config, retry_on_http_500, .def = "true",
			 .doc = "Treat HTTP 500 as transient (Pyroscope uses it for temporary failures)."),
	SR_FIELD_MAP("sending_queue", struct gw_export_config, sending_queue, struct gw_export_queue_config,
		     gw_export_queue_fields, .doc = "The queue between the pipeline and the network."),
	SR_FIELD_MAP("auth", struct gw_export_config, auth, struct gw_export_auth_config, gw_export_auth_fields,
		     .doc = "Authentication by an extension (basicauth), as in the Collector."),
	SR_FIELD_END,
};

static int otlp_http_validate(const void *config, const char *path, struct sr_diag *d)
{
	const struct gw_export_config *cfg = config;
	const char *err = NULL;
	char *url = http_url(cfg, &err);
	int r = gw_export_validate(config, path, d);

	if (!url) {
		sr_diag_add(d, NULL, 0, 0, path, "%s: %s", cfg->profiles_endpoint ? "profiles_endpoint" : "endpoint",
			    err ? err : "invalid");
		r = -EINVAL;
	} else if (cfg->tls.insecure && !cfg->tls.insecure_skip_verify && strncasecmp(url, "https://", 8) == 0) {
		/* The Collector's otlphttp ignores insecure too; say so, since the name suggests otherwise. */
		sr_diag_warn(d, NULL, 0, 0, path,
			     "tls.insecure does not turn TLS off for an https:// endpoint (the scheme decides, as in "
			     "the Collector's otlphttp): the server is still verified; tls.insecure_skip_verify "
			     "skips that");
	}
	free(url);
	return r;
}

static int otlp_http_create(struct gw_component *c)
{
	return gw_exporter_create(c, &http_transport);
}

const struct gw_component_type gw_exporter_otlp_http = {
	.name = "otlp_http",
	.kind = GW_EXPORTER,
	.doc = "Sends profiles to Pyroscope or any OTLP receiver over HTTP (OTLP profiles v1.10 or v1.9, protobuf, "
	       "gzip), with retries, a bytes-bounded sending queue and an optional crash-safe disk queue.",
	.collector_note = "HTTP 500 is retried (retry_on_http_500: true), as Pyroscope answers 500 to transient "
			  "failures, where the Collector drops the data; and the sending queue is bounded in bytes "
			  "(queue_size_mib) as well",
	.config_fields = otlp_http_fields,
	.config_size = sizeof(struct gw_export_config),
	.validate = otlp_http_validate,
	.resolve = gw_export_resolve,
	.create = otlp_http_create,
	.start = gw_exporter_start,
	.consume = gw_exporter_consume,
	.shutdown = gw_exporter_shutdown,
	.destroy = gw_exporter_destroy,
};
