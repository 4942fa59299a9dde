/* SPDX-License-Identifier: Apache-2.0 */
/*
 * --output: what would be sent, as varint-length-delimited PushRequests in
 * one file. Each request carries the definitions (stacks, executables,
 * kernel) of every ID it uses that no earlier request in the file carried,
 * so the file stands alone: `protoc --decode` reads it, a gateway could
 * ingest it. A window with more than AGENT_OUTPUT_MAX_SAMPLES samples is
 * written as several requests.
 */
#ifndef SR_AGENT_OUTPUT_H
#define SR_AGENT_OUTPUT_H

#include <stddef.h>
#include <stdint.h>

#include "agent.h"

/* Samples per PushRequest (nanopb's repeated-field count is 16 bits). */
#define AGENT_OUTPUT_MAX_SAMPLES 8192

struct agent_output;
struct agent_store;

struct agent_info {
	uint8_t instance_id[16];
	char host_name[256];
	const char *node_name;
	const char *version;
};

/* Fills instance_id (random), host_name and version. */
void agent_info_init(struct agent_info *info, const char *node_name);

struct agent_output *agent_output_open(const char *path, const struct agent_info *info);
/* Writes one window; the batch stays the caller's. Returns 0 or -errno. */
int agent_output__write(struct agent_output *o, struct agent_store *s, const struct agent_batch *b);
uint64_t agent_output__bytes(const struct agent_output *o);
/* Flushes and closes; returns 0 or the first write error. */
int agent_output_close(struct agent_output *o);

#endif
