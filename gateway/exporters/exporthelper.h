/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What otlp_http and otlp_grpc share (after the Collector's exporterhelper):
 * the config (endpoint, TLS, headers, compression, timeout, retry_on_failure,
 * sending_queue), OTLP encoding on the libuv thread pool, the bytes-bounded
 * sending queue (memory or disk), num_consumers senders with backoff,
 * splitting of requests the backend finds too large (HTTP 413, gRPC
 * RESOURCE_EXHAUSTED "larger than max"), shedding the oldest queued requests
 * for the memory_limiter (gw_runtime__shed), and the accounting of every
 * sample: exported, or dropped with a reason. The transports differ only in how a request is framed and how a
 * response is judged (struct gw_export_transport).
 */
#ifndef SR_GW_EXPORTHELPER_H
#define SR_GW_EXPORTHELPER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/config.h"
#include "httpclient.h"
#include "otlp-encode.h"
#include "retry.h"

struct gw_component;
struct gw_extensions;
struct gw_authenticator;
struct gw_profiles;

/* Default bound of the sending queue: what the exporter may hold, in MiB. */
#define GW_EXPORT_DEFAULT_QUEUE_MIB	128
#define GW_EXPORT_DEFAULT_NUM_CONSUMERS 10
/* num_consumers upper bound (parallel requests per exporter). */
#define GW_EXPORT_MAX_CONSUMERS 256
/* With block_on_overflow the queue may exceed queue_size_mib by what is already inside the pipeline, up to this factor. */
#define GW_EXPORT_BLOCK_HARD_FACTOR 2
/* sending_queue.disk_check_interval's lower bound: a probe writes as much as a request. */
#define GW_EXPORT_MIN_DISK_CHECK_NS (10ULL * 1000000ULL)
/* Most user headers sent (headers:); the config rejects more. */
#define GW_EXPORT_MAX_HEADERS 64
/* A 413 is split at most this deep (2^depth parts) before the part is dropped. */
#define GW_EXPORT_MAX_SPLIT_DEPTH 16

struct gw_export_tls_config {
	char *ca_file;
	char *cert_file;
	char *key_file;
	bool insecure_skip_verify;
	bool insecure;	   /* the Collector's: no TLS (otlp_grpc's host:port), see otlp_grpc.c */
	int min_version;   /* index into gw_export_tls_versions */
	char *max_version; /* "" or one of gw_export_tls_versions */
};

struct gw_export_retry_config {
	bool enabled;
	uint64_t initial_interval;
	double randomization_factor;
	double multiplier;
	uint64_t max_interval;
	uint64_t max_elapsed_time;
};

/* sending_queue.sizer: the unit of queue_size (index into gw_export_queue_sizers). */
enum { GW_EXPORT_SIZER_REQUESTS, GW_EXPORT_SIZER_ITEMS, GW_EXPORT_SIZER_BYTES };
/* queue_size's upper bound in any unit (1 TiB of bytes; requests and samples are never near it). */
#define GW_EXPORT_MAX_QUEUE_SIZE (1ULL << 40)
/* queue_size's lower bound with sizer bytes: below it most requests would not fit. */
#define GW_EXPORT_MIN_QUEUE_BYTES (1ULL << 20)

struct gw_export_queue_config {
	bool enabled;
	uint64_t queue_size_mib;
	uint64_t queue_size; /* in the unit of sizer; 0: not set */
	int sizer;	     /* GW_EXPORT_SIZER_* */
	uint64_t num_consumers;
	bool block_on_overflow;
	char *storage;
	uint64_t disk_check_interval;
};

struct gw_export_auth_config {
	char *authenticator; /* an extension ID (basicauth/x, headers_setter) */
	/* Resolved (gw_export_resolve): that extension, in the config's memory; NULL: none. */
	const struct gw_authenticator *ext;
};

/* The config struct of otlp_http and otlp_grpc (each has its own key table). */
struct gw_export_config {
	char *endpoint;
	char *profiles_endpoint; /* otlp_http only */
	int proto_version;	 /* index into gw_export_proto_versions */
	int compression;	 /* index into gw_export_compressions */
	struct sr_kv *headers;
	uint32_t n_headers;
	uint64_t timeout;
	bool h2c;
	int process_attributes; /* enum gw_otlp_process_attrs */
	struct gw_export_tls_config tls;
	struct gw_export_retry_config retry_on_failure;
	bool retry_on_http_500;
	struct gw_export_queue_config sending_queue;
	struct gw_export_auth_config auth;
};

extern const char *const gw_export_proto_versions[];
extern const char *const gw_export_compressions[];
extern const char *const gw_export_process_attributes[];
extern const char *const gw_export_tls_versions[];
extern const char *const gw_export_queue_sizers[];
extern const struct sr_field gw_export_tls_fields[];
extern const struct sr_field gw_export_retry_fields[];
extern const struct sr_field gw_export_queue_fields[];
extern const struct sr_field gw_export_auth_fields[];
int gw_export_validate(const void *config, const char *path, struct sr_diag *d);
/* Finds auth.authenticator among the extensions (component type's resolve). */
int gw_export_resolve(void *config, const struct gw_extensions *ext, const char *path, struct sr_diag *d);

struct gw_exporter;

/* A request being sent. */
struct gw_export_request {
	const uint8_t *body; /* the queued payload (maybe gzip) */
	size_t len;
	bool gzip;
};

struct gw_export_transport {
	const char *name; /* for logs: "otlp_http" */
	/* Builds the URL (malloc'd) from the config; NULL + errno with *ret_error set. */
	char *(*url)(const struct gw_export_config *cfg, const char **ret_error);
	/* Extra headers after the user's ("Name: value", NULL-terminated, static). */
	const char *const *(*headers)(bool gzip);
	enum gw_http_version (*http_version)(const struct gw_export_config *cfg, const char *url);
	/* Frames the queued payload for the wire (malloc'd into *ret, or 0 with *ret NULL: send as is). */
	int (*frame)(const struct gw_export_request *req, uint8_t **ret, size_t *ret_len);
	/*
	 * Judges a response. Fills *ret_rejected (partial_success profiles) and
	 * ret_msg (a short reason for logs) when there is one.
	 */
	enum gw_export_outcome (*classify)(const struct gw_export_config *cfg, const struct gw_http_response *r,
					   int64_t *ret_rejected, char *ret_msg, size_t msg_size);
};

/* create/start/consume/shutdown/destroy of both exporters. */
int gw_exporter_create(struct gw_component *c, const struct gw_export_transport *t);
int gw_exporter_start(struct gw_component *c);
int gw_exporter_consume(struct gw_component *c, struct gw_profiles *p);
void gw_exporter_shutdown(struct gw_component *c, void (*done)(struct gw_component *c));
void gw_exporter_destroy(struct gw_component *c);

/*
 * Requests in the sending queue, waiting and in flight; ret_in_flight (may be
 * NULL) gets those in flight alone (for tests and benches). Loop thread.
 */
size_t gw_exporter_queued_requests(struct gw_component *c, size_t *ret_in_flight);

/* Batches taken and still being encoded on the thread pool, not yet in the queue (for tests). Loop thread. */
unsigned gw_exporter_encoding(struct gw_component *c);

/* Decodes an ExportProfilesServiceResponse; 0 with the partial success (0/"" when none), or -EINVAL. */
int gw_export_parse_response(const void *body, size_t len, int64_t *ret_rejected, char *ret_msg, size_t msg_size);

/* gzip (RFC 1952) of data at level; malloc'd into *ret. 0 or -errno. */
int gw_gzip(const void *data, size_t len, int level, uint8_t **ret, size_t *ret_len);

/* Bytes of a response body quoted in a log line. */
#define GW_EXPORT_LOG_BODY_MAX 512
/* The drop reason of a request the backend refused for good with this HTTP status ("rejected_400", ...). */
const char *gw_export_permanent_reason(long status);
/* Every reason gw_export_permanent_reason() returns, NULL-terminated. */
extern const char *const gw_export_permanent_reasons[];
/* The start of r's body (GW_EXPORT_LOG_BODY_MAX bytes, printable ASCII), quoted for a log line into buf. */
void gw_export_quote_body(const struct gw_http_response *r, char *buf, size_t size);

#endif
