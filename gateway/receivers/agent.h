/* SPDX-License-Identifier: Apache-2.0 */
/* Receiver `agent` (agent.c). */
#ifndef SR_GW_RECEIVER_AGENT_H
#define SR_GW_RECEIVER_AGENT_H

#include "component.h"
#include "gateway/net/conn.h"

/*
 * Request bodies up to this many bytes (as received) are decoded on the loop
 * (a few milliseconds at most); larger ones, e.g. symbol-table uploads of
 * many MiB, go to the receiver's decode thread (the otlp receiver's too) so they never stall the
 * network I/O of other agents. (Not libuv's pool: symbolization fills it.)
 */
#define GW_AGENT_INLINE_MAX_BYTES (256u * 1024u)
/*
 * A gzip body's cost is its decompressed size (up to max_request_bytes, a
 * thousand times the wire size for a gzip bomb): only small ones are
 * decoded on the loop.
 */
#define GW_AGENT_INLINE_MAX_GZIP_BYTES (16u * 1024u)

extern const struct gw_component_type gw_receiver_agent;

/* The bound listen address of a started instance ("127.0.0.1:7480"), for tests and logs; NULL before start. */
const char *gw_agent_receiver_address(struct gw_component *c);

struct gw_agent_dedupe_config {
	uint64_t max_entries;
	uint64_t max_per_agent;
	uint64_t max_bytes;
};

struct gw_agent_stores_config {
	uint64_t executables;
	uint64_t kernels;
	uint64_t locations;
	uint64_t stacks;
	uint64_t functions;
};

/* The agent receiver's settings: its listener's and its own. */
struct gw_agent_config {
	struct gw_listener_config net; /* first: the keys of both are one mapping */
	struct gw_agent_dedupe_config dedupe;
	struct gw_agent_stores_config stores;
};

#endif
