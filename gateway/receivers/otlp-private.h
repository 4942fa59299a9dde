/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the files of the `otlp` receiver share: otlp.c (the component:
 * config, listeners, metrics, lifecycle) and otlp-request.c (the OTLP/gRPC
 * and OTLP/HTTP requests). Connections, TLS, HTTP/2 and HTTP/1.1 are the
 * gateway's connection layer (gateway/net/conn.c, h1.c), driven through gw_conn_ops.
 */
#ifndef SR_GW_OTLP_PRIVATE_H
#define SR_GW_OTLP_PRIVATE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "agent.h"
#include "decode-thread.h"
#include "gateway/net/conn.h"
#include "otlp-decode.h"

#define OTLP_COMPONENT "receiver/otlp"
#define OTLP_GRPC_PATH "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export"
#define OTLP_HTTP_PATH "/v1development/profiles"

/* ---- configuration ---- */

struct otlp_grpc_config {
	char *endpoint;
	struct gw_listener_tls_config tls;
	struct gw_listener_auth_config auth;
	uint64_t max_recv_msg_size_mib;
	uint64_t max_concurrent_streams;
	bool include_metadata;
};

struct otlp_http_config {
	char *endpoint;
	struct gw_listener_tls_config tls;
	struct gw_listener_auth_config auth;
	uint64_t max_request_body_size;
	bool include_metadata;
};

struct otlp_protocols_config {
	struct otlp_grpc_config grpc;
	struct otlp_http_config http;
};

struct otlp_config {
	struct otlp_protocols_config protocols;
	char *version;
	uint64_t max_connections;
	uint64_t max_inflight_bytes;
	uint64_t header_timeout_ns;
	uint64_t request_timeout_ns;
	uint64_t idle_timeout_ns;
};

/* ---- state ---- */

enum otlp_proto { OTLP_GRPC, OTLP_HTTP, OTLP_N_PROTOS };

/* proto_flags of a stream (struct h2stream). */
#define OTLP_F_JSON	     1u /* OTLP/HTTP body is application/json */
#define OTLP_F_GRPC_ENCODING 2u /* gRPC: grpc-encoding gzip was announced */

struct otlp_stats {
	uint64_t bytes_wire, bytes_plain, invalid, too_large, rejected_profiles, links_dropped, attrs_dropped;
};

struct otlp_rx;

/* One listening protocol; rx first: the connection layer frees the whole struct with free(rx). */
struct otlp_listener {
	struct gw_listener rx;
	struct gw_listener_config cfg;
	struct otlp_rx *o;
	enum otlp_proto proto;
	bool include_metadata; /* keep each request's headers with its batch (gw_profiles.client_metadata) */
	uint64_t max_body;     /* gRPC: max_recv_msg_size_mib; HTTP: max_request_body_size */
	struct otlp_stats st;
};

struct otlp_job;

struct otlp_rx {
	struct gw_component *c;
	const struct otlp_config *cfg;
	struct gw_otlp_decode_options dopts;
	struct otlp_listener *l[OTLP_N_PROTOS];
	unsigned pending_done;
	void (*done)(struct gw_component *c);
	/*
	 * The decode thread (core/decode-thread.h, as the agent receiver's):
	 * bodies over GW_AGENT_INLINE_MAX_BYTES are decoded off the loop, so a
	 * large request does not stall other connections.
	 */
	struct gw_decode_thread dec;
};

/* otlp-request.c */
extern const struct gw_conn_ops gw_otlp_grpc_ops, gw_otlp_http_ops;
/* The decode thread's gw_decode_thread.run and .returned (discard: the receiver is going away). */
void gw_otlp_job_run(struct gw_decode_job *j);
void gw_otlp_job_returned(struct gw_decode_job *j, bool discard);

#endif
