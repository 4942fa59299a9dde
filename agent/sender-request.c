/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sender's requests, of any kind (sender-private.h): encoding a
 * PushRequest and the fields every request has, posting it with the bearer
 * token and classifying the answer (done, retry, reject, too large), and when
 * to try again after a failure: backoff with jitter, or the gateway's
 * retry-after.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <pb_decode.h>
#include <pb_encode.h>

#include "agent.h"
#include "config.h"
#include "common/log.h"
#include "sender-private.h"
#include "sr-config.h"
#include "common/units.h"

static uint64_t rnd_next(struct agent_sender *s)
{
	/* xorshift64*: jitter needs spread, not secrecy. */
	uint64_t x = s->rnd_state;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	s->rnd_state = x;
	return x * 0x2545F4914F6CDD1DULL;
}

uint64_t agent_sender_backoff_ns(unsigned failures, uint64_t initial_ns, uint64_t max_ns, uint64_t rnd)
{
	uint64_t d = initial_ns;

	if (failures == 0)
		return 0;
	for (unsigned i = 1; i < failures && d < max_ns; i++)
		d = d > max_ns / 2 ? max_ns : d * 2;
	if (d > max_ns)
		d = max_ns;
	/* "Equal jitter": at least half the delay, so a fleet that failed together spreads out. */
	return d / 2 + (d / 2 ? rnd % (d / 2 + 1) : 0);
}

uint64_t agent_sender_retry_after_ns(uint64_t ra_ns, uint64_t rnd)
{
	uint64_t d = ra_ns > AGENT_SENDER_RETRY_AFTER_MAX_NS ? AGENT_SENDER_RETRY_AFTER_MAX_NS : ra_ns;

	/* Never earlier than asked; up to a quarter later so agents do not return in lockstep. */
	return d + (d / 4 ? rnd % (d / 4 + 1) : 0);
}

/*
 * table (may be NULL) is an encoded SymbolTable appended as one more
 * PushRequest.symbol_tables field: a table too large for nanopb's 16-bit
 * repeated counts is encoded by agent_symtab__encode() instead of through req.
 */
int agent_sender_encode(struct agent_sender *s, stackrelay_v1_PushRequest *req, const uint8_t *table, size_t table_len,
			struct encoded *ret)
{
	size_t size = 0;
	pb_ostream_t os;
	uint8_t *buf;

	if (!pb_get_encoded_size(&size, stackrelay_v1_PushRequest_fields, req))
		return -EINVAL;
	if (table)
		size += 1 + 10 + table_len; /* tag 9 (one byte), length varint, body */
	buf = malloc(size ? size : 1);
	if (!buf)
		return -ENOMEM;
	os = pb_ostream_from_buffer(buf, size);
	if (!pb_encode(&os, stackrelay_v1_PushRequest_fields, req) ||
	    (table && (!pb_encode_tag(&os, PB_WT_STRING, stackrelay_v1_PushRequest_symbol_tables_tag) ||
		       !pb_encode_varint(&os, table_len) || !pb_write(&os, table, table_len)))) {
		free(buf);
		return -EINVAL;
	}
	if (s->gzip) {
		uint8_t *z = NULL;
		size_t zlen = 0;
		int r = agent_sender_gzip(buf, os.bytes_written, &z, &zlen);

		free(buf);
		if (r < 0)
			return r;
		buf = z;
		size = zlen;
	} else {
		size = os.bytes_written;
	}
	ret->buf = buf;
	ret->len = size;
	return 0;
}

void agent_sender_fill_common(struct agent_sender *s, stackrelay_v1_PushRequest *req, struct req_common *st,
			      uint64_t seq)
{
	memset(req, 0, sizeof(*req));
	st->protocol_version = AGENT_PROTOCOL_VERSION;
	st->seq = seq;
	st->instance = (pb_bytes_array_t *)st->instance_buf;
	st->instance->size = AGENT_SENDER_INSTANCE_ID_BYTES;
	memcpy(st->instance->bytes, s->instance_id, AGENT_SENDER_INSTANCE_ID_BYTES);
	memset(&st->agent, 0, sizeof(st->agent));
	st->agent.instance_id = st->instance;
	st->agent.host_name = s->host_name;
	st->agent.node_name = s->cfg->node_name;
	st->agent.version = (char *)SR_VERSION;
	req->protocol_version = &st->protocol_version;
	req->agent = &st->agent;
	req->sequence = &st->seq;
}

static bool should_abort_cb(void *ctx)
{
	struct agent_sender *s = ctx;

	return atomic_load(&s->abort_transfer);
}

void agent_sender_reread_token(struct agent_sender *s, bool force)
{
	const char *path = s->cfg->gateway.bearer_token_file;
	uint64_t now = agent_sender_now_ns();
	char buf[AGENT_SENDER_MAX_TOKEN_BYTES + 1];
	ssize_t n;
	int fd;

	if (!path || !*path)
		return;
	if (!force && s->token && now - s->token_read_ns < AGENT_SENDER_TOKEN_REREAD_NS)
		return;
	s->token_read_ns = now;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		sr_log_warn(LOG_COMPONENT, "cannot read the bearer token file; keeping the previous token",
			    "file=%s error=\"%s\"", path, strerror(errno));
		return;
	}
	n = read(fd, buf, sizeof(buf));
	close(fd);
	if (n < 0 || n > AGENT_SENDER_MAX_TOKEN_BYTES) {
		sr_log_warn(LOG_COMPONENT, "bearer token file unreadable or too large; keeping the previous token",
			    "file=%s max_bytes=%d", path, AGENT_SENDER_MAX_TOKEN_BYTES);
		return;
	}
	/* Tokens are mounted as files, often with a trailing newline. */
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' ' || buf[n - 1] == '\t'))
		n--;
	buf[n] = '\0';
	if (s->token && strcmp(s->token, buf) == 0)
		return;
	free(s->token);
	s->token = strdup(buf);
}

static void classify(struct agent_sender *s, int r, struct agent_sender_http_result *res, struct attempt *a)
{
	pb_istream_t is;

	a->status = res->status;
	if (r < 0 || res->status == 0) {
		a->outcome = OUT_RETRY;
		snprintf(a->why, sizeof(a->why), "%s", res->error[0] ? res->error : strerror(-r));
		return;
	}
	if (res->body_len) {
		is = pb_istream_from_buffer(res->body, res->body_len);
		a->have_resp = pb_decode(&is, stackrelay_v1_PushResponse_fields, &a->resp);
		if (!a->have_resp)
			pb_release(stackrelay_v1_PushResponse_fields, &a->resp);
	}
	if (res->status == 200) {
		if (!a->have_resp && res->body_len) {
			/* Processed or not, we cannot tell: resend under the same sequence (the gateway de-duplicates). */
			a->outcome = OUT_RETRY;
			snprintf(a->why, sizeof(a->why), "undecodable PushResponse (%zu bytes)", res->body_len);
			return;
		}
		if (a->have_resp && a->resp.retry_after_ms && *a->resp.retry_after_ms) {
			a->outcome = OUT_RETRY;
			a->wait_ns = (uint64_t)*a->resp.retry_after_ms * SR_NSEC_PER_MSEC;
			snprintf(a->why, sizeof(a->why), "gateway asked to retry after %" PRIu32 "ms%s%s",
				 *a->resp.retry_after_ms, a->resp.error ? ": " : "",
				 a->resp.error ? a->resp.error : "");
			return;
		}
		a->outcome = OUT_DONE;
		return;
	}
	snprintf(a->why, sizeof(a->why), "HTTP %ld%s%s", res->status, a->have_resp && a->resp.error ? ": " : "",
		 a->have_resp && a->resp.error ? a->resp.error : "");
	switch (res->status) {
	case 401:
	case 403:
		/* The token may have rotated, or the gateway's list may change: keep the data, read the token again. */
		agent_sender_reread_token(s, true);
		a->outcome = OUT_RETRY;
		break;
	case 408:
	case 425:
	case 429:
	case 500:
	case 502:
	case 503:
	case 504:
		a->outcome = OUT_RETRY;
		a->wait_ns = res->retry_after_ns;
		if (a->have_resp && a->resp.retry_after_ms && *a->resp.retry_after_ms)
			a->wait_ns = (uint64_t)*a->resp.retry_after_ms * SR_NSEC_PER_MSEC;
		break;
	case 413:
		a->outcome = OUT_TOO_LARGE;
		break;
	default:
		a->outcome = res->status >= 500 ? OUT_RETRY : OUT_REJECT;
		break;
	}
}

/* Sends one request body and classifies the answer. */
void agent_sender_post(struct agent_sender *s, const struct encoded *enc, struct attempt *a)
{
	struct agent_sender_http_result res = { 0 };
	struct agent_sender_http_request req = {
		.body = enc->buf,
		.len = enc->len,
		.gzip = s->gzip,
		.should_abort = should_abort_cb,
		.abort_ctx = s,
	};
	uint64_t now = agent_sender_now_ns(), age = s->cfg->gateway.max_connection_age_ns;
	int r;

	agent_sender_reread_token(s, false);
	req.token = s->token;
	/* Reconnect now and then, so agents behind an L4 balancer spread over new replicas. */
	req.fresh_connection = s->force_fresh || (s->have_conn && age && now - s->conn_started_ns >= age);
	r = s->transport.post(s->transport.userdata, &req, &res);
	if (res.new_connection) {
		pthread_mutex_lock(&s->mu);
		s->details.connections++;
		pthread_mutex_unlock(&s->mu);
	}
	s->force_fresh = false;
	classify(s, r, &res, a);
	if (r == 0 && res.status) {
		__atomic_add_fetch(&s->stats.bytes_sent, enc->len, __ATOMIC_RELAXED);
		if (res.new_connection || req.fresh_connection || !s->have_conn)
			s->conn_started_ns = now;
		s->have_conn = true;
	} else {
		/* No response: the next request probably goes out on a new connection, which starts empty. */
		s->have_conn = false;
	}
	free(res.body);
}

void agent_sender_note_failure(struct agent_sender *s, const struct attempt *a, const char *what)
{
	pthread_mutex_lock(&s->mu);
	s->stats.requests_failed++;
	pthread_mutex_unlock(&s->mu);
	if (!s->failing) {
		sr_log_warn(LOG_COMPONENT, "push to the gateway failed; keeping the data and retrying with backoff",
			    "endpoint=%s request=%s error=\"%s\"", s->cfg->gateway.endpoint, what, a->why);
		s->failing = true;
	} else {
		sr_log_debug(LOG_COMPONENT, "push to the gateway failed again", "request=%s error=\"%s\" failures=%u",
			     what, a->why, s->failures);
	}
}

void agent_sender_note_success(struct agent_sender *s)
{
	if (s->failing)
		sr_log_info(LOG_COMPONENT, "push to the gateway recovered", "endpoint=%s failures=%u",
			    s->cfg->gateway.endpoint, s->failures);
	s->failing = false;
	s->failures = 0;
}

/* Schedules the next attempt after a failure. */
void agent_sender_schedule_retry(struct agent_sender *s, uint64_t wait_ns)
{
	uint64_t d;

	s->failures++;
	d = wait_ns ? agent_sender_retry_after_ns(wait_ns, rnd_next(s))
		    : agent_sender_backoff_ns(s->failures, s->backoff_initial_ns, s->backoff_max_ns, rnd_next(s));
	pthread_mutex_lock(&s->mu);
	s->next_attempt_ns = agent_sender_now_ns() + d;
	s->details.retries++;
	pthread_mutex_unlock(&s->mu);
}
