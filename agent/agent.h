/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The agent's parts and how they meet.
 *
 *   main.c      flags and config (lead)
 *   profiling   BPF sampling, process/mapping cache, executable identity,
 *   core        container IDs, aggregation, --output, --check; owns the
 *               definition store (agent_store) and calls the sender
 *   sender      HTTP/2 to the gateway: definitions on first use per
 *               connection, resend of missing IDs, symbol uploads, backoff,
 *               bounded buffer; runs on its own thread so sampling never
 *               waits for the network
 */
#ifndef SR_AGENT_H
#define SR_AGENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "kernel.h"
#include "stackrelay/v1/ingest.pb.h"
#include "stackrelay/v1/types.pb.h"

struct agent_config;

struct agent_run_opts {
	uint64_t duration_ns; /* 0: run until SIGTERM/SIGINT */
	const char *output;   /* write varint-delimited PushRequests here, or NULL */
	bool send;	      /* send to cfg->gateway.endpoint */
	bool keep_privileges; /* keep every capability after setup (debugging; docs/security.md) */
};

/* Preflight: prints each check and how to fix what fails; returns the number of failed checks (or -errno). */
int agent_check(const struct agent_config *cfg, FILE *out);
/* Profiles until the duration ends or a signal arrives, flushes, returns 0 or -errno. */
int agent_run(const struct agent_config *cfg, const struct agent_run_opts *opts);

/*
 * Content-addressed definitions the profiling core has seen, by ID.
 * Thread-safe: the sender calls it from its own thread. Lookups copy into
 * caller-owned nanopb structs (release with pb_release()). An ID the store
 * no longer has (evicted) returns -ENOENT; the sender then drops the samples
 * that need it and counts them.
 */
struct agent_store;

int agent_store__stack(struct agent_store *s, const uint8_t *id, size_t len, stackrelay_v1_StackDef *ret);
int agent_store__executable(struct agent_store *s, const uint8_t *id, size_t len, stackrelay_v1_ExecutableDef *ret);
int agent_store__kernel(struct agent_store *s, const uint8_t *id, size_t len, stackrelay_v1_KernelDef *ret);
int agent_store__function(struct agent_store *s, const uint8_t *id, size_t len, stackrelay_v1_FunctionDef *ret);
/*
 * A deep copy of the running kernel's address spaces (kernel.h), for cutting
 * its kallsyms into the table a kernel ID names: agent_kernel_done() it.
 * -ENOENT when the store has no kernel, -ENOMEM.
 */
int agent_store__kernel_copy(struct agent_store *s, struct agent_kernel *ret);
/*
 * An fd open for reading on the executable with this ID (through
 * /proc/PID/map_files or /proc/PID/root while a process maps it, or a kept
 * path), for symbol extraction. -ENOENT when no longer reachable.
 */
int agent_store__open_executable(struct agent_store *s, const uint8_t *id, size_t len);

/*
 * One reporting window: aggregated samples (their stack_id, and through the
 * stack the executable and kernel IDs, resolve in the store). Ownership passes
 * to the sender on submit.
 */
struct agent_batch {
	stackrelay_v1_Sample *samples;
	size_t n_samples;
	uint64_t total_count; /* sum of samples[].count */
	uint32_t frequency_hz;
	uint64_t window;		  /* the agent's window number: its stacks' last use is no older */
	stackrelay_v1_DropCounters drops; /* lost before aggregation, this window */
};
void agent_batch_free(struct agent_batch *b);

struct agent_sender;

struct agent_sender *agent_sender_new(const struct agent_config *cfg, struct agent_store *store);
/* Never blocks; when the buffer is full the oldest batch is dropped and counted. */
int agent_sender__submit(struct agent_sender *s, struct agent_batch *b);
/* Sends all that is buffered, resolves missing IDs and wanted symbols; waits at most timeout_ns. */
int agent_sender__flush(struct agent_sender *s, uint64_t timeout_ns);
void agent_sender_free(struct agent_sender *s);

struct agent_sender_stats {
	uint64_t requests_ok;
	uint64_t requests_failed;
	uint64_t samples_accepted; /* sum of counts the gateway accepted */
	uint64_t samples_dropped;  /* sum of counts dropped (buffer full, flush timeout, definition lost) */
	uint64_t bytes_sent;
	uint64_t symbol_tables_sent;
	uint64_t buffered_bytes;
	uint64_t oldest_window; /* the oldest agent_batch.window still queued or being sent; UINT64_MAX: none */
	/* Its bounded sets: definitions the gateway has on this connection, executables uploaded or queued. */
	uint64_t sent_ids, sent_ids_bytes, sent_ids_limit;
	uint64_t symbol_ids, symbol_ids_bytes, symbol_ids_limit;
};
void agent_sender__stats(struct agent_sender *s, struct agent_sender_stats *ret);

/*
 * Added by the sender (docs/agent-protocol.md, "Sender metrics"): the rest of
 * its accounting. Conservation: samples_submitted = samples_accepted +
 * samples_buffered + the four dropped_* (samples_dropped is their sum).
 * agent_sender__submit() moves b->samples (and its counters) into the sender
 * and leaves *b empty; the struct itself stays the caller's. Samples must be
 * allocated as nanopb's pb_release() frees them (malloc per pointer field).
 */
struct agent_sender_details {
	uint64_t samples_submitted;
	uint64_t samples_buffered;
	uint64_t dropped_buffer_full;	   /* drop-oldest when buffer_bytes was reached */
	uint64_t dropped_flush_timeout;	   /* still unsent when flush's timeout or shutdown came */
	uint64_t dropped_definition_lost;  /* the store no longer had a definition they need */
	uint64_t dropped_rejected;	   /* the gateway refused them (HTTP 4xx, or still missing after resends) */
	uint64_t samples_resent_missing;   /* resent because the gateway lacked a definition */
	uint64_t accepted_mismatch;	   /* responses whose accepted_samples disagreed with the agent's count */
	uint64_t retries;		   /* attempts after a failed or refused one */
	uint64_t connections;		   /* connections opened */
	uint64_t symbol_tables_failed;	   /* uploads given up on, or tables sent with an error */
	uint64_t symbol_tables_dropped;	   /* wanted but still pending at flush timeout or shutdown */
	uint64_t symbol_tables_reuploaded; /* queued again: a gateway wanted a table uploaded before */
};
void agent_sender__details(struct agent_sender *s, struct agent_sender_details *ret);

#endif
