// SPDX-License-Identifier: Apache-2.0
/*
 * What the OTLP exporters share besides the exporter itself
 * (exporthelper.c, exporthelper-enqueue.c): their settings (TLS, retries,
 * the sending queue) and how they are checked, gzip, and how a backend's
 * answer is read.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <pb_decode.h>

#include "sr-config.h"
#include "gateway/extensions.h"
#include "exporthelper.h"
#include "common/gzip.h"
#include "common/log.h"
#include "common/macro.h"

#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb.h"

const char *const gw_export_proto_versions[] = { "1.10", "1.9", NULL };
const char *const gw_export_compressions[] = { "gzip", "none", NULL };
const char *const gw_export_process_attributes[] = { "none", "sample", "resource", NULL };
/* The Collector's configtls versions; "" for max_version is the newest the TLS library has. */
const char *const gw_export_tls_versions[] = { "1.0", "1.1", "1.2", "1.3", NULL };
const char *const gw_export_queue_sizers[] = { "requests", "items", "bytes", NULL };

const struct sr_field gw_export_tls_fields[] = {
	SR_FIELD_STR("ca_file", struct gw_export_tls_config, ca_file,
		     .doc = "PEM file of CAs that verify the server; default: the system store."),
	SR_FIELD_STR("cert_file", struct gw_export_tls_config, cert_file,
		     .doc = "PEM client certificate for mutual TLS (needs key_file)."),
	SR_FIELD_STR("key_file", struct gw_export_tls_config, key_file, .doc = "PEM private key of cert_file.",
		     .secret = false),
	SR_FIELD_BOOLEAN("insecure_skip_verify", struct gw_export_tls_config, insecure_skip_verify, .def = "false",
			 .doc = "Do not verify the server's certificate or name (testing only)."),
	SR_FIELD_BOOLEAN("insecure", struct gw_export_tls_config, insecure, .def = "false",
			 .doc = "The Collector's switch for no TLS at all. otlp_grpc: a host:port endpoint is "
				"plaintext HTTP/2 (unless ca_file is set). otlp_http: the URL's scheme decides, as "
				"in the Collector; an https:// server is still verified."),
	SR_FIELD_ENUMERATION("min_version", struct gw_export_tls_config, min_version, gw_export_tls_versions,
			     .def = "1.2", .doc = "Oldest TLS version accepted: 1.0, 1.1, 1.2 or 1.3."),
	SR_FIELD_STR("max_version", struct gw_export_tls_config, max_version, .def = "",
		     .doc = "Newest TLS version offered: 1.0, 1.1, 1.2 or 1.3; empty: the newest there is."),
	SR_FIELD_END,
};

const struct sr_field gw_export_retry_fields[] = {
	SR_FIELD_BOOLEAN(
		"enabled", struct gw_export_retry_config, enabled, .def = "true",
		.doc = "Retry failed requests that may succeed later (429, 500, 502, 503, 504, network errors)."),
	SR_FIELD_DUR("initial_interval", struct gw_export_retry_config, initial_interval, .def = "5s",
		     .doc = "Wait before the first retry."),
	SR_FIELD_DBL("randomization_factor", struct gw_export_retry_config, randomization_factor, .def = "0.5",
		     .doc = "Each wait is randomized by ± this fraction.", .min = 0, .max = 1),
	SR_FIELD_DBL("multiplier", struct gw_export_retry_config, multiplier, .def = "1.5",
		     .doc = "Each wait grows by this factor.", .min = 1, .max = 100),
	SR_FIELD_DUR("max_interval", struct gw_export_retry_config, max_interval, .def = "30s",
		     .doc = "Longest wait between retries."),
	SR_FIELD_DUR(
		"max_elapsed_time", struct gw_export_retry_config, max_elapsed_time, .def = "5m",
		.doc = "Give up (and count the samples dropped) after this long since the first attempt; 0: never."),
	SR_FIELD_END,
};

const struct sr_field gw_export_queue_fields[] = {
	SR_FIELD_BOOLEAN("enabled", struct gw_export_queue_config, enabled, .def = "true",
			 .doc = "Queue requests so that consume never waits for the network."),
	SR_FIELD_U64("queue_size_mib", struct gw_export_queue_config, queue_size_mib, .def = "128",
		     .doc = "Bound of the queue in MiB of encoded requests (on disk when storage is set).", .min = 1,
		     .max = 1048576),
	SR_FIELD_U64("queue_size", struct gw_export_queue_config, queue_size, .def = "0",
		     .doc = "The Collector's bound, in the unit of sizer; 0: none but queue_size_mib. With sizer "
			    "requests or items, queue_size_mib bounds the bytes as well; with sizer bytes it "
			    "replaces queue_size_mib.",
		     .min = 0, .max = GW_EXPORT_MAX_QUEUE_SIZE),
	SR_FIELD_ENUMERATION("sizer", struct gw_export_queue_config, sizer, gw_export_queue_sizers, .def = "requests",
			     .doc = "Unit of queue_size: requests (export requests), items (samples, counted as "
				    "the sum of their values) or bytes (of encoded, compressed requests)."),
	SR_FIELD_U64("num_consumers", struct gw_export_queue_config, num_consumers, .def = "10",
		     .doc = "Requests in flight at once.", .min = 1, .max = GW_EXPORT_MAX_CONSUMERS),
	SR_FIELD_BOOLEAN("block_on_overflow", struct gw_export_queue_config, block_on_overflow, .def = "false",
			 .doc = "When full, make receivers answer 'retry later' (agents keep the data) instead of "
				"dropping the oldest queued request. Always on with storage."),
	SR_FIELD_STR("storage", struct gw_export_queue_config, storage,
		     .doc = "Directory of a persistent queue: requests are written there (fsync) before they are "
			    "acknowledged and replayed after a restart. While the disk cannot take a write "
			    "(full, quota, I/O error) receivers answer 'retry later' and what is already inside "
			    "is held in memory."),
	SR_FIELD_DUR("disk_check_interval", struct gw_export_queue_config, disk_check_interval, .def = "1s",
		     .doc = "With storage, while the disk cannot take a write: how often it is tried again (the "
			    "requests held in memory, else a probe file as large as the write that failed); "
			    "refused senders are told to retry after this long."),
	SR_FIELD_END,
};

const struct sr_field gw_export_auth_fields[] = {
	SR_FIELD_STR("authenticator", struct gw_export_auth_config, authenticator,
		     .doc = "ID of a basicauth extension whose credentials every request carries (Authorization: "
			    "Basic), as the Collector's auth.authenticator."),
	SR_FIELD_END,
};

int gw_export_resolve(void *config, const struct gw_extensions *ext, const char *path, struct sr_diag *d)
{
	struct gw_export_config *cfg = config;
	const struct gw_authenticator *a;
	const char *id = cfg->auth.authenticator;

	if (!id || !*id)
		return 0;
	a = gw_extensions__authenticator(ext, id);
	if (!a) {
		sr_diag_add(d, NULL, 0, 0, path,
			    "auth.authenticator names \"%s\", which is not a basicauth or headers_setter extension "
			    "defined in extensions%s",
			    id,
			    strncmp(id, "bearertokenauth", 15) == 0
				    ? " (for a bearer token write headers: {Authorization: \"Bearer ${env:TOKEN}\"})"
				    : "");
		return -EINVAL;
	}
	for (uint32_t i = 0; a->header && i < cfg->n_headers; i++)
		if (strcasecmp(cfg->headers[i].key, "Authorization") == 0) {
			sr_diag_add(d, NULL, 0, 0, path,
				    "auth.authenticator and headers.Authorization both set it: keep one");
			return -EINVAL;
		}
	cfg->auth.ext = a;
	return 0;
}

int gw_export_validate(const void *config, const char *path, struct sr_diag *d)
{
	const struct gw_export_config *cfg = config;
	int r = 0;

	if (!!cfg->tls.cert_file != !!cfg->tls.key_file) {
		sr_diag_add(d, NULL, 0, 0, path, "tls: cert_file and key_file go together");
		r = -EINVAL;
	}
	if (cfg->retry_on_failure.enabled && cfg->retry_on_failure.initial_interval == 0) {
		sr_diag_add(d, NULL, 0, 0, path, "retry_on_failure.initial_interval must be > 0");
		r = -EINVAL;
	}
	if (cfg->sending_queue.disk_check_interval < GW_EXPORT_MIN_DISK_CHECK_NS) {
		sr_diag_add(d, NULL, 0, 0, path, "sending_queue.disk_check_interval must be at least 10ms");
		r = -EINVAL;
	}
	if (cfg->tls.max_version && *cfg->tls.max_version) {
		int max = -1;
		for (int i = 0; gw_export_tls_versions[i]; i++)
			if (strcmp(cfg->tls.max_version, gw_export_tls_versions[i]) == 0)
				max = i;
		if (max < 0) {
			sr_diag_add(d, NULL, 0, 0, path, "tls.max_version: \"%s\" is not 1.0, 1.1, 1.2 or 1.3",
				    cfg->tls.max_version);
			r = -EINVAL;
		} else if (max < cfg->tls.min_version) {
			sr_diag_add(d, NULL, 0, 0, path, "tls.max_version %s is older than min_version %s",
				    cfg->tls.max_version, gw_export_tls_versions[cfg->tls.min_version]);
			r = -EINVAL;
		}
	}
	if (cfg->sending_queue.sizer == GW_EXPORT_SIZER_BYTES && cfg->sending_queue.queue_size) {
		if (cfg->sending_queue.queue_size_mib != GW_EXPORT_DEFAULT_QUEUE_MIB) {
			sr_diag_add(d, NULL, 0, 0, path,
				    "sending_queue: queue_size with sizer bytes and queue_size_mib are the same bound; "
				    "set one");
			r = -EINVAL;
		} else if (cfg->sending_queue.queue_size < GW_EXPORT_MIN_QUEUE_BYTES) {
			sr_diag_add(d, NULL, 0, 0, path,
				    "sending_queue.queue_size: %" PRIu64 " bytes (sizer bytes) is less than 1MiB, "
				    "smaller than one request of a busy gateway; write e.g. 268435456 for 256MiB",
				    cfg->sending_queue.queue_size);
			r = -EINVAL;
		}
	}
	if (cfg->sending_queue.storage && *cfg->sending_queue.storage && cfg->sending_queue.storage[0] != '/') {
		sr_diag_add(d, NULL, 0, 0, path, "sending_queue.storage must be an absolute path, not '%s'",
			    cfg->sending_queue.storage);
		r = -EINVAL;
	}
	return r;
}

/* ---- gzip ---- */

int gw_gzip(const void *data, size_t len, int level, uint8_t **ret, size_t *ret_len)
{
	return sr_gzip(data, len, level, ret, ret_len);
}

int gw_export_parse_response(const void *body, size_t len, int64_t *ret_rejected, char *ret_msg, size_t msg_size)
{
	opentelemetry_proto_collector_profiles_v1development_ExportProfilesServiceResponse resp =
		opentelemetry_proto_collector_profiles_v1development_ExportProfilesServiceResponse_init_zero;
	pb_istream_t s = pb_istream_from_buffer(body, len);
	int r = 0;

	*ret_rejected = 0;
	if (msg_size)
		ret_msg[0] = '\0';
	if (!pb_decode(&s, opentelemetry_proto_collector_profiles_v1development_ExportProfilesServiceResponse_fields,
		       &resp)) {
		r = -EINVAL;
		goto out;
	}
	if (resp.has_partial_success) {
		*ret_rejected = resp.partial_success.rejected_profiles;
		if (resp.partial_success.error_message && msg_size)
			snprintf(ret_msg, msg_size, "%s", resp.partial_success.error_message);
	}
out:
	pb_release(opentelemetry_proto_collector_profiles_v1development_ExportProfilesServiceResponse_fields, &resp);
	return r;
}

/* ---- answers ---- */

const char *const gw_export_permanent_reasons[] = {
	"rejected_400", "rejected_401", "rejected_403", "rejected_404",
	"rejected_415", "rejected_500", "rejected",	NULL,
};

const char *gw_export_permanent_reason(long status)
{
	switch (status) {
	case 400:
		return "rejected_400";
	case 401:
		return "rejected_401";
	case 403:
		return "rejected_403";
	case 404:
		return "rejected_404";
	case 415:
		return "rejected_415";
	case 500:
		return "rejected_500";
	default:
		return "rejected";
	}
}

void gw_export_quote_body(const struct gw_http_response *r, char *buf, size_t size)
{
	char tmp[GW_EXPORT_LOG_BODY_MAX + 1];
	size_t n = SR_MIN(r->body_len, (size_t)GW_EXPORT_LOG_BODY_MAX);

	/* Bodies may be binary (protobuf Status): keep printable ASCII only. */
	for (size_t i = 0; i < n; i++)
		tmp[i] = (r->body[i] >= 0x20 && r->body[i] < 0x7f) ? r->body[i] : '.';
	tmp[n] = '\0';
	sr_log_quote(tmp, buf, size);
}
