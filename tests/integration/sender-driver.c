// SPDX-License-Identifier: Apache-2.0
/*
 * Drives the agent's sender without the profiling core: a fake store
 * (tests/unit/test-agent-sender-fakestore.c) and synthetic windows, sent over
 * the real libcurl transport to whatever gateway --endpoint names. Prints the
 * sender's accounting as one JSON object on stdout.
 *
 *   sender-driver --endpoint URL [--windows N] [--samples N] [--interval-ms N]
 *       [--flush-timeout-ms N] [--timeout-ms N] [--max-connection-age-ms N]
 *       [--buffer-bytes N] [--compression gzip|none] [--token-file F]
 *       [--ca F] [--cert F] [--key F] [--server-name N] [--insecure]
 *       [--exec-path F]   (executable 0 of the fake world is this file, for symbol uploads)
 *       [--symbol-reupload-after-ms N]   (gateway.symbol_reupload_after; default 0: once per run)
 *       [--backoff-ms INITIAL,MAX]   (shorter backoff so fault scripts run fast)
 *
 * Window w holds --samples samples over stacks (w + i) % 64, pid 1000 + w,
 * count (i % 5) + 1. Exit status: 0 flushed, 3 flush timed out, 2 usage, 1 setup failed.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <pb_decode.h>

#include "agent.h"
#include "agent/config.h"
#include "agent/sender-parts-private.h"
#include "common/log.h"
#include "test-agent-sender-fakestore.h"

#define N_STACKS 64
#define N_EXECS	 8

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

int main(int argc, char **argv)
{
	struct agent_config cfg = { 0 };
	struct agent_store *store;
	struct agent_sender *s;
	struct agent_sender_stats st;
	struct agent_sender_details d;
	unsigned windows = 10, samples = 50, interval_ms = 0;
	uint64_t flush_timeout_ms = 20000, submitted = 0;
	const char *exec_path = NULL, *compression = "gzip";
	uint64_t backoff_initial_ms = 0, backoff_max_ms = 0, submit_max_ns = 0, submit_total_ns = 0, t0, t_send;
	int r;

	cfg.node_name = (char *)"driver-node";
	cfg.gateway.timeout_ns = 5000ULL * 1000000;
	cfg.gateway.buffer_bytes = 64ULL << 20;
	cfg.gateway.max_symbol_upload_bytes = 16ULL << 20;
	for (int i = 1; i < argc; i++) {
		const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(k, "--insecure")) {
			cfg.gateway.tls.insecure_skip_verify = true;
			continue;
		}
		if (!v) {
			fprintf(stderr, "sender-driver: %s needs a value\n", k);
			return 2;
		}
		i++;
		if (!strcmp(k, "--endpoint"))
			cfg.gateway.endpoint = (char *)v;
		else if (!strcmp(k, "--windows"))
			windows = (unsigned)strtoul(v, NULL, 10);
		else if (!strcmp(k, "--samples"))
			samples = (unsigned)strtoul(v, NULL, 10);
		else if (!strcmp(k, "--interval-ms"))
			interval_ms = (unsigned)strtoul(v, NULL, 10);
		else if (!strcmp(k, "--flush-timeout-ms"))
			flush_timeout_ms = strtoull(v, NULL, 10);
		else if (!strcmp(k, "--timeout-ms"))
			cfg.gateway.timeout_ns = strtoull(v, NULL, 10) * 1000000ULL;
		else if (!strcmp(k, "--max-connection-age-ms"))
			cfg.gateway.max_connection_age_ns = strtoull(v, NULL, 10) * 1000000ULL;
		else if (!strcmp(k, "--buffer-bytes"))
			cfg.gateway.buffer_bytes = strtoull(v, NULL, 10);
		else if (!strcmp(k, "--compression"))
			compression = v;
		else if (!strcmp(k, "--token-file"))
			cfg.gateway.bearer_token_file = (char *)v;
		else if (!strcmp(k, "--ca"))
			cfg.gateway.tls.ca_file = (char *)v;
		else if (!strcmp(k, "--cert"))
			cfg.gateway.tls.cert_file = (char *)v;
		else if (!strcmp(k, "--key"))
			cfg.gateway.tls.key_file = (char *)v;
		else if (!strcmp(k, "--server-name"))
			cfg.gateway.tls.server_name = (char *)v;
		else if (!strcmp(k, "--exec-path"))
			exec_path = v;
		else if (!strcmp(k, "--symbol-reupload-after-ms"))
			cfg.gateway.symbol_reupload_after_ns = strtoull(v, NULL, 10) * 1000000ULL;
		else if (!strcmp(k, "--backoff-ms") &&
			 sscanf(v, "%" SCNu64 ",%" SCNu64, &backoff_initial_ms, &backoff_max_ms) == 2)
			;
		else {
			fprintf(stderr, "sender-driver: unknown option %s\n", k);
			return 2;
		}
	}
	if (!cfg.gateway.endpoint) {
		fprintf(stderr, "sender-driver: --endpoint is required\n");
		return 2;
	}
	for (int i = 0; agent_compression_names[i]; i++)
		if (!strcmp(agent_compression_names[i], compression))
			cfg.gateway.compression = i;
	if (getenv("SR_LOG_LEVEL")) {
		enum sr_log_level l;

		if (sr_log_level_from_string(getenv("SR_LOG_LEVEL"), &l) == 0)
			sr_log_set_level(l);
	}

	store = fake_store_new(N_STACKS, N_EXECS);
	if (exec_path)
		fake_store_set_exec_path(store, 0, exec_path);
	s = agent_sender_new(&cfg, store);
	if (!s) {
		fprintf(stderr, "sender-driver: agent_sender_new: %s\n", strerror(errno));
		fake_store_free(store);
		return 1;
	}
	if (backoff_initial_ms)
		agent_sender__set_backoff(s, backoff_initial_ms * 1000000ULL, backoff_max_ms * 1000000ULL);
	t_send = mono_ns();
	for (unsigned w = 0; w < windows; w++) {
		struct agent_batch b = { 0 };

		b.samples = calloc(samples ? samples : 1, sizeof(*b.samples));
		b.n_samples = samples;
		b.frequency_hz = 19;
		for (unsigned i = 0; i < samples; i++) {
			fake_sample(&b.samples[i], (w + i) % N_STACKS, 1000 + w, (i % 5) + 1);
			b.total_count += (i % 5) + 1;
		}
		submitted += b.total_count;
		t0 = mono_ns();
		agent_sender__submit(s, &b);
		t0 = mono_ns() - t0;
		submit_total_ns += t0;
		if (t0 > submit_max_ns)
			submit_max_ns = t0;
		agent_batch_free(&b);
		if (interval_ms)
			sleep_ms(interval_ms);
	}
	r = agent_sender__flush(s, flush_timeout_ms * 1000000ULL);
	t_send = mono_ns() - t_send;
	agent_sender__stats(s, &st);
	agent_sender__details(s, &d);
	printf("{\"submitted\": %" PRIu64 ", \"samples_submitted\": %" PRIu64 ", \"accepted\": %" PRIu64
	       ", \"dropped\": %" PRIu64 ", \"buffered\": %" PRIu64 ", \"dropped_buffer_full\": %" PRIu64
	       ", \"dropped_flush_timeout\": %" PRIu64 ", \"dropped_definition_lost\": %" PRIu64
	       ", \"dropped_rejected\": %" PRIu64 ", \"requests_ok\": %" PRIu64 ", \"requests_failed\": %" PRIu64
	       ", \"retries\": %" PRIu64 ", \"connections\": %" PRIu64 ", \"resent_missing\": %" PRIu64
	       ", \"accepted_mismatch\": %" PRIu64 ", \"symbol_tables_sent\": %" PRIu64
	       ", \"symbol_tables_failed\": %" PRIu64 ", \"symbol_tables_reuploaded\": %" PRIu64
	       ", \"bytes_sent\": %" PRIu64 ", \"flush\": %d"
	       ", \"submit_max_us\": %.1f, \"submit_mean_us\": %.1f, \"elapsed_ms\": %.1f}\n",
	       submitted, d.samples_submitted, st.samples_accepted, st.samples_dropped, d.samples_buffered,
	       d.dropped_buffer_full, d.dropped_flush_timeout, d.dropped_definition_lost, d.dropped_rejected,
	       st.requests_ok, st.requests_failed, d.retries, d.connections, d.samples_resent_missing,
	       d.accepted_mismatch, st.symbol_tables_sent, d.symbol_tables_failed, d.symbol_tables_reuploaded,
	       st.bytes_sent, r, (double)submit_max_ns / 1e3, windows ? (double)submit_total_ns / windows / 1e3 : 0.0,
	       (double)t_send / 1e6);
	agent_sender_free(s);
	fake_store_free(store);
	return r == 0 ? 0 : r == -ETIMEDOUT ? 3 : 1;
}

/* The profiling core's batch destructor lives in agent/aggregate.c, which the driver does not link. */
void agent_batch_free(struct agent_batch *b)
{
	if (!b)
		return;
	for (size_t i = 0; i < b->n_samples; i++)
		pb_release(stackrelay_v1_Sample_fields, &b->samples[i]);
	free(b->samples);
	b->samples = NULL;
	b->n_samples = 0;
	b->total_count = 0;
	pb_release(stackrelay_v1_DropCounters_fields, &b->drops);
	memset(&b->drops, 0, sizeof(b->drops));
}
