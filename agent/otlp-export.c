// SPDX-License-Identifier: Apache-2.0
/*
 * The OTLP export's queue and thread (otlp-export.h). libcurl's easy
 * interface, as the gateway sender uses it (sender-http.c), on a thread of
 * its own, so sampling never waits for the network: HTTP/1.1 for http://,
 * which every OTLP/HTTP server speaks (the Collector's otlp receiver serves
 * HTTP/2 only over TLS), and HTTP/2 by ALPN for https://.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <zlib.h>

#include "agent/config.h"
#include "agent/http-client.h"
#include "agent/otlp-encode.h"
#include "agent/otlp-export.h"
#include "common/gzip.h"
#include "common/list.h"
#include "common/log.h"
#include "common/pbwire.h"
#include "common/units.h"
#include "sr-config.h"

struct request {
	struct request *next;
	uint8_t *body;
	size_t len;
	uint64_t count;	   /* sample counts it carries */
	uint64_t first_ns; /* first attempt, for max_elapsed_time; 0: not tried */
	uint64_t attempts;
};

struct agent_otlp_exporter {
	const struct agent_otlp_config *cfg;
	const struct agent_otlp_meta *meta;
	CURL *easy;
	struct curl_slist *headers;
	struct curl_slist *connect_to; /* tls.server_name: verify that name, connect to the endpoint's host */
	char *url;
	char errbuf[CURL_ERROR_SIZE];
	char resp[AGENT_OTLP_RESPONSE_LOG_BYTES];
	size_t resp_len;

	pthread_t thread;
	bool thread_started;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct request *head, *tail; /* the head may be in flight */
	bool head_in_flight;
	bool stopping;
	uint64_t next_attempt_ns; /* backoff: nothing is sent before */
	uint64_t backoff_ns;
	uint64_t rnd;
	struct agent_otlp_stats st;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * SR_NSEC_PER_SEC + (uint64_t)ts.tv_nsec;
}

static size_t write_cb(char *data, size_t size, size_t nmemb, void *userdata)
{
	struct agent_otlp_exporter *x = userdata;
	size_t n = size * nmemb, room = sizeof(x->resp) - 1 - x->resp_len;

	/* Only the start of a body is kept, for the log; the rest is read and thrown away. */
	if (room) {
		size_t k = n < room ? n : room;
		memcpy(x->resp + x->resp_len, data, k);
		x->resp_len += k;
		x->resp[x->resp_len] = '\0';
	}
	return n;
}

static void request_free(struct request *r)
{
	if (!r)
		return;
	free(r->body);
	free(r);
}

/* Removes r (not in flight) from the queue; the caller holds the lock. */
static void unlink_locked(struct agent_otlp_exporter *x, struct request *r)
{
	struct request **pp = &x->head, *prev = NULL;

	for (; *pp && *pp != r; prev = *pp, pp = &(*pp)->next)
		;
	if (!*pp)
		return;
	*pp = r->next;
	if (x->tail == r)
		x->tail = prev;
	x->st.buffered_bytes -= r->len;
	x->st.buffered_samples -= r->count;
}

static bool retryable(long status)
{
	/* 500 too: Pyroscope answers it for transient failures (the Collector would drop). */
	return status == 429 || status == 500 || status == 502 || status == 503 || status == 504;
}

static uint64_t jitter(struct agent_otlp_exporter *x, uint64_t d)
{
	/* xorshift64: spread, not secrecy. Uniform in [d/2, 3d/2]. */
	x->rnd ^= x->rnd << 13;
	x->rnd ^= x->rnd >> 7;
	x->rnd ^= x->rnd << 17;
	return d / 2 + (d ? x->rnd % (d + 1) : 0);
}

/* One POST of r; returns the HTTP status, or 0 for a transport failure (error in x->errbuf). */
static long post(struct agent_otlp_exporter *x, const struct request *r, uint64_t *ret_retry_after_ns)
{
	curl_off_t retry_after = 0;
	long status = 0;
	CURLcode cc;

	x->errbuf[0] = '\0';
	x->resp_len = 0;
	x->resp[0] = '\0';
	*ret_retry_after_ns = 0;
	curl_easy_setopt(x->easy, CURLOPT_POSTFIELDS, (const char *)r->body);
	curl_easy_setopt(x->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->len);
	cc = curl_easy_perform(x->easy);
	if (cc != CURLE_OK) {
		if (!x->errbuf[0])
			snprintf(x->errbuf, sizeof(x->errbuf), "%s", curl_easy_strerror(cc));
		return 0;
	}
	curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
	if (curl_easy_getinfo(x->easy, CURLINFO_RETRY_AFTER, &retry_after) == CURLE_OK && retry_after > 0)
		*ret_retry_after_ns = (uint64_t)retry_after * SR_NSEC_PER_SEC;
	return status;
}

/* After an attempt of the head: account, pop or schedule the retry. Lock held. */
static void settle_locked(struct agent_otlp_exporter *x, struct request *r, long status, uint64_t retry_after_ns)
{
	const struct agent_otlp_retry_config *rc = &x->cfg->retry;
	uint64_t now = now_ns(), wait;
	bool ok = status >= 200 && status < 300;
	bool again = !ok && (status == 0 || retryable(status)) && rc->enabled;
	bool out_of_time = rc->max_elapsed_time_ns && now - r->first_ns >= rc->max_elapsed_time_ns;

	x->head_in_flight = false;
	if (ok) {
		x->st.requests_ok++;
		x->st.samples_sent += r->count;
		x->st.bytes_sent += r->len;
		x->backoff_ns = 0;
		x->next_attempt_ns = 0;
	} else {
		x->st.requests_failed++;
	}
	/* Shutting down: it stays queued, and free() counts it with the rest as dropped at shutdown. */
	if (!ok && again && !out_of_time && x->stopping)
		return;
	if (!ok && again && !out_of_time) {
		x->backoff_ns = x->backoff_ns ? x->backoff_ns + x->backoff_ns / 2 : rc->initial_interval_ns;
		if (x->backoff_ns > rc->max_interval_ns)
			x->backoff_ns = rc->max_interval_ns;
		wait = retry_after_ns ? SR_MIN(retry_after_ns, AGENT_OTLP_RETRY_AFTER_MAX_NS)
				      : jitter(x, x->backoff_ns);
		x->next_attempt_ns = now + wait;
		x->st.retries++;
		if (r->attempts == 1)
			sr_log_warn("otlp", "export failed; retrying",
				    "endpoint=%s status=%ld error=\"%s\" wait_ms=%" PRIu64, x->cfg->endpoint, status,
				    status ? x->resp : x->errbuf, (uint64_t)(wait / SR_NSEC_PER_MSEC));
		return;
	}
	if (!ok) {
		if (again || status == 0 || retryable(status))
			x->st.dropped_retries_exhausted += r->count;
		else
			x->st.dropped_rejected += r->count;
		sr_log_error("otlp", "export failed; samples dropped",
			     "endpoint=%s status=%ld error=\"%s\" samples=%" PRIu64 " attempts=%" PRIu64,
			     x->cfg->endpoint, status, status ? x->resp : x->errbuf, r->count, r->attempts);
	}
	unlink_locked(x, r);
	request_free(r);
}

static void *thread_main(void *arg)
{
	struct agent_otlp_exporter *x = arg;

	pthread_mutex_lock(&x->lock);
	for (;;) {
		struct request *r;
		uint64_t now = now_ns(), retry_after = 0;
		long status;

		/* flush() had its time: what is left is counted as dropped by free(). */
		if (x->stopping)
			break;
		if (!x->head || now < x->next_attempt_ns) {
			if (!x->head) {
				pthread_cond_wait(&x->cond, &x->lock);
			} else {
				struct timespec ts;
				uint64_t wait = x->next_attempt_ns - now;

				clock_gettime(CLOCK_REALTIME, &ts);
				wait += (uint64_t)ts.tv_nsec;
				ts.tv_sec += (time_t)(wait / SR_NSEC_PER_SEC);
				ts.tv_nsec = (long)(wait % SR_NSEC_PER_SEC);
				pthread_cond_timedwait(&x->cond, &x->lock, &ts);
			}
			continue;
		}
		r = x->head;
		x->head_in_flight = true;
		if (!r->first_ns)
			r->first_ns = now;
		r->attempts++;
		pthread_mutex_unlock(&x->lock);
		status = post(x, r, &retry_after);
		pthread_mutex_lock(&x->lock);
		settle_locked(x, r, status, retry_after);
		pthread_cond_broadcast(&x->cond);
	}
	pthread_cond_broadcast(&x->cond);
	pthread_mutex_unlock(&x->lock);
	return NULL;
}

/* Queues body (taken); makes room by dropping the oldest waiting requests. Lock held. */
static void enqueue_locked(struct agent_otlp_exporter *x, uint8_t *body, size_t len, uint64_t count)
{
	struct request *r;

	while (x->st.buffered_bytes + len > x->cfg->buffer_bytes) {
		struct request *victim = x->head_in_flight ? (x->head ? x->head->next : NULL) : x->head;

		if (!victim)
			break;
		x->st.dropped_buffer_full += victim->count;
		unlink_locked(x, victim);
		request_free(victim);
	}
	r = calloc(1, sizeof(*r));
	if (!r || x->st.buffered_bytes + len > x->cfg->buffer_bytes) {
		x->st.dropped_buffer_full += count;
		free(r);
		free(body);
		return;
	}
	r->body = body;
	r->len = len;
	r->count = count;
	if (x->tail)
		x->tail->next = r;
	else
		x->head = r;
	x->tail = r;
	x->st.buffered_bytes += len;
	x->st.buffered_samples += count;
	pthread_cond_broadcast(&x->cond);
}

static uint64_t batch_count(const struct agent_batch *b, size_t first, size_t n)
{
	uint64_t c = 0;

	for (size_t i = first; i < first + n; i++)
		c += agent_otlp_sample_count(&b->samples[i]);
	return c;
}

int agent_otlp_exporter__submit(struct agent_otlp_exporter *x, struct agent_store *s, const struct agent_batch *b)
{
	int r = 0;

	for (size_t first = 0; first < b->n_samples;) {
		size_t n = SR_MIN(b->n_samples - first, (size_t)AGENT_OTLP_MAX_SAMPLES_PER_REQUEST);
		uint64_t count = batch_count(b, first, n);
		struct agent_otlp_encode_stats es;
		struct sr_pbw w = { 0 };
		uint8_t *body = NULL;
		size_t len = 0;
		int e = agent_otlp_encode(s, b, first, n, x->meta, &w, &es);

		if (e == 0 && x->cfg->compression == 0) {
			e = sr_gzip(w.buf, w.len, Z_DEFAULT_COMPRESSION, &body, &len);
			sr_pbw__free(&w);
		} else if (e == 0) {
			body = w.buf;
			len = w.len;
		} else {
			sr_pbw__free(&w);
		}
		pthread_mutex_lock(&x->lock);
		x->st.samples_submitted += count;
		if (e < 0) {
			x->st.dropped_encoding += count;
			r = e;
		} else {
			x->st.dropped_definition_lost += es.lost;
			if (es.samples)
				enqueue_locked(x, body, len, es.count);
			else
				free(body);
		}
		pthread_mutex_unlock(&x->lock);
		first += n;
	}
	return r;
}

int agent_otlp_exporter__flush(struct agent_otlp_exporter *x, uint64_t timeout_ns)
{
	uint64_t deadline = now_ns() + timeout_ns;
	int r = 0;

	pthread_mutex_lock(&x->lock);
	while (x->head && x->thread_started) {
		struct timespec ts;
		uint64_t now = now_ns(), wait;

		if (now >= deadline) {
			r = -ETIMEDOUT;
			break;
		}
		wait = SR_MIN(deadline - now, 100 * SR_NSEC_PER_MSEC);
		clock_gettime(CLOCK_REALTIME, &ts);
		wait += (uint64_t)ts.tv_nsec;
		ts.tv_sec += (time_t)(wait / SR_NSEC_PER_SEC);
		ts.tv_nsec = (long)(wait % SR_NSEC_PER_SEC);
		pthread_cond_timedwait(&x->cond, &x->lock, &ts);
	}
	pthread_mutex_unlock(&x->lock);
	return r;
}

void agent_otlp_exporter__stats(struct agent_otlp_exporter *x, struct agent_otlp_stats *ret)
{
	pthread_mutex_lock(&x->lock);
	*ret = x->st;
	pthread_mutex_unlock(&x->lock);
}

void agent_otlp_exporter__render_metrics(struct agent_otlp_exporter *x, FILE *f)
{
	struct agent_otlp_stats s;

	agent_otlp_exporter__stats(x, &s);
	fprintf(f,
		"# HELP stackrelay_agent_otlp_samples_submitted_total Sample counts handed to the OTLP export.\n"
		"# TYPE stackrelay_agent_otlp_samples_submitted_total counter\n"
		"stackrelay_agent_otlp_samples_submitted_total %" PRIu64 "\n"
		"# HELP stackrelay_agent_otlp_samples_sent_total Sample counts the OTLP endpoint accepted.\n"
		"# TYPE stackrelay_agent_otlp_samples_sent_total counter\n"
		"stackrelay_agent_otlp_samples_sent_total %" PRIu64 "\n"
		"# HELP stackrelay_agent_otlp_samples_dropped_total Sample counts the OTLP export dropped, by reason.\n"
		"# TYPE stackrelay_agent_otlp_samples_dropped_total counter\n"
		"stackrelay_agent_otlp_samples_dropped_total{reason=\"buffer_full\"} %" PRIu64 "\n"
		"stackrelay_agent_otlp_samples_dropped_total{reason=\"rejected\"} %" PRIu64 "\n"
		"stackrelay_agent_otlp_samples_dropped_total{reason=\"retries_exhausted\"} %" PRIu64 "\n"
		"stackrelay_agent_otlp_samples_dropped_total{reason=\"shutdown\"} %" PRIu64 "\n"
		"stackrelay_agent_otlp_samples_dropped_total{reason=\"definition_lost\"} %" PRIu64 "\n"
		"stackrelay_agent_otlp_samples_dropped_total{reason=\"encoding\"} %" PRIu64 "\n"
		"# HELP stackrelay_agent_otlp_requests_total OTLP export attempts, by result.\n"
		"# TYPE stackrelay_agent_otlp_requests_total counter\n"
		"stackrelay_agent_otlp_requests_total{result=\"ok\"} %" PRIu64 "\n"
		"stackrelay_agent_otlp_requests_total{result=\"failed\"} %" PRIu64 "\n"
		"# HELP stackrelay_agent_otlp_retries_total OTLP export attempts after a failed one.\n"
		"# TYPE stackrelay_agent_otlp_retries_total counter\n"
		"stackrelay_agent_otlp_retries_total %" PRIu64 "\n"
		"# HELP stackrelay_agent_otlp_sent_bytes_total OTLP request bodies accepted, as sent (compressed).\n"
		"# TYPE stackrelay_agent_otlp_sent_bytes_total counter\n"
		"stackrelay_agent_otlp_sent_bytes_total %" PRIu64 "\n"
		"# HELP stackrelay_agent_otlp_buffered_bytes Encoded OTLP requests waiting (otlp.buffer_size bounds "
		"it).\n"
		"# TYPE stackrelay_agent_otlp_buffered_bytes gauge\n"
		"stackrelay_agent_otlp_buffered_bytes %" PRIu64 "\n"
		"# HELP stackrelay_agent_otlp_buffered_samples Sample counts in waiting OTLP requests.\n"
		"# TYPE stackrelay_agent_otlp_buffered_samples gauge\n"
		"stackrelay_agent_otlp_buffered_samples %" PRIu64 "\n",
		s.samples_submitted, s.samples_sent, s.dropped_buffer_full, s.dropped_rejected,
		s.dropped_retries_exhausted, s.dropped_shutdown, s.dropped_definition_lost, s.dropped_encoding,
		s.requests_ok, s.requests_failed, s.retries, s.bytes_sent, s.buffered_bytes, s.buffered_samples);
}

/* tls.server_name: the URL names it (verified, sent as SNI), the connection goes to the endpoint's host. */
static int connect_to(struct agent_otlp_exporter *x, char *err, size_t size)
{
	CURLU *u = curl_url();
	char *url = NULL;
	int r = -EINVAL;

	if (!u)
		return -ENOMEM;
	if (curl_url_set(u, CURLUPART_URL, x->url, 0) != CURLUE_OK) {
		snprintf(err, size, "otlp.endpoint %s is not a URL", x->cfg->endpoint);
		goto out;
	}
	r = agent_http_server_name("otlp", u, x->cfg->tls.server_name, &x->connect_to, err, size);
	if (r < 0)
		goto out;
	if (curl_url_get(u, CURLUPART_URL, &url, 0) != CURLUE_OK) {
		r = -ENOMEM;
		goto out;
	}
	free(x->url);
	x->url = strdup(url);
	r = x->url ? 0 : -ENOMEM;
out:
	curl_free(url);
	curl_url_cleanup(u);
	return r;
}

/* The URL, the headers and the TLS settings, checked. */
static int setup_curl(struct agent_otlp_exporter *x, char *err, size_t size)
{
	const struct agent_otlp_config *cfg = x->cfg;
	const struct agent_tls_config *tls = &cfg->tls;
	bool https = strncmp(cfg->endpoint, "https://", 8) == 0;
	uint64_t timeout_ms = cfg->timeout_ns / SR_NSEC_PER_MSEC;
	size_t elen = strlen(cfg->endpoint);
	struct curl_slist *tmp;
	char *h;
	int r;

	if (!https && strncmp(cfg->endpoint, "http://", 7) != 0) {
		snprintf(err, size, "otlp.endpoint %s must start with http:// or https://", cfg->endpoint);
		return -EINVAL;
	}
	if ((r = agent_http_check_tls("otlp", cfg->endpoint, tls, https, err, size)) < 0)
		return r;
	while (elen > 0 && cfg->endpoint[elen - 1] == '/')
		elen--;
	if (asprintf(&x->url, "%.*s%s", (int)elen, cfg->endpoint, AGENT_OTLP_PATH) < 0) {
		x->url = NULL;
		return -ENOMEM;
	}
	x->easy = curl_easy_init();
	if (!x->easy)
		return -ENOMEM;
	if (https && tls->server_name && *tls->server_name && (r = connect_to(x, err, size)) < 0)
		return r;
	if (curl_easy_setopt(x->easy, CURLOPT_URL, x->url) != CURLE_OK) {
		snprintf(err, size, "otlp.endpoint %s is not a URL", cfg->endpoint);
		return -EINVAL;
	}
	if (x->connect_to)
		curl_easy_setopt(x->easy, CURLOPT_CONNECT_TO, x->connect_to);
	/* Exactly this Content-Type: Pyroscope answers 415 to anything else. */
	x->headers = curl_slist_append(NULL, "Content-Type: application/x-protobuf");
	if (x->headers && cfg->compression == 0 && (tmp = curl_slist_append(x->headers, "Content-Encoding: gzip")))
		x->headers = tmp;
	if (x->headers && (tmp = curl_slist_append(x->headers, "Expect:")))
		x->headers = tmp;
	for (uint32_t i = 0; x->headers && i < cfg->n_headers; i++) {
		const char *k = cfg->headers[i].key, *v = cfg->headers[i].value ? cfg->headers[i].value : "";
		if (!*k || strpbrk(k, ":\r\n \t") || strpbrk(v, "\r\n")) {
			snprintf(err, size, "otlp.headers: \"%.64s\" is not a valid header name or value", k);
			return -EINVAL;
		}
		if (asprintf(&h, "%s: %s", k, v) < 0)
			return -ENOMEM;
		tmp = curl_slist_append(x->headers, h);
		free(h);
		if (!tmp)
			return -ENOMEM;
		x->headers = tmp;
	}
	if (!x->headers)
		return -ENOMEM;
	curl_easy_setopt(x->easy, CURLOPT_HTTPHEADER, x->headers);
	curl_easy_setopt(x->easy, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(x->easy, CURLOPT_POST, 1L);
	curl_easy_setopt(x->easy, CURLOPT_HTTP_VERSION,
			 https ? (long)CURL_HTTP_VERSION_2TLS : (long)CURL_HTTP_VERSION_1_1);
	curl_easy_setopt(x->easy, CURLOPT_USERAGENT, "stackrelay-agent/" SR_VERSION);
	curl_easy_setopt(x->easy, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
	curl_easy_setopt(x->easy, CURLOPT_CONNECTTIMEOUT_MS, (long)SR_MIN(timeout_ms, 10000));
	curl_easy_setopt(x->easy, CURLOPT_WRITEFUNCTION, write_cb);
	curl_easy_setopt(x->easy, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(x->easy, CURLOPT_ERRORBUFFER, x->errbuf);
	agent_http_set_connection(x->easy, tls, https);
	return 0;
}

struct agent_otlp_exporter *agent_otlp_exporter_new(const struct agent_otlp_config *cfg,
						    const struct agent_otlp_meta *meta, char *err, size_t err_size)
{
	struct agent_otlp_exporter *x;
	int r;

	err[0] = '\0';
	if (!cfg->endpoint || !*cfg->endpoint) {
		snprintf(err, err_size, "otlp.endpoint is empty");
		errno = EINVAL;
		return NULL;
	}
	/* curl_global_init() is idempotent here: the gateway sender's transport calls it too, once. */
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		snprintf(err, err_size, "libcurl initialisation failed");
		errno = EIO;
		return NULL;
	}
	x = calloc(1, sizeof(*x));
	if (!x) {
		errno = ENOMEM;
		return NULL;
	}
	x->cfg = cfg;
	x->meta = meta;
	pthread_mutex_init(&x->lock, NULL);
	pthread_cond_init(&x->cond, NULL);
	if (getrandom(&x->rnd, sizeof(x->rnd), 0) != sizeof(x->rnd) || !x->rnd)
		x->rnd = (uint64_t)getpid() * 0x9e3779b97f4a7c15ULL | 1;
	r = setup_curl(x, err, err_size);
	if (r == 0)
		r = -pthread_create(&x->thread, NULL, thread_main, x);
	if (r < 0) {
		if (!err[0])
			snprintf(err, err_size, "%s", strerror(-r));
		agent_otlp_exporter_free(x);
		errno = -r;
		return NULL;
	}
	x->thread_started = true;
	return x;
}

void agent_otlp_exporter_free(struct agent_otlp_exporter *x)
{
	struct request *r;

	if (!x)
		return;
	if (x->thread_started) {
		pthread_mutex_lock(&x->lock);
		x->stopping = true;
		pthread_cond_broadcast(&x->cond);
		pthread_mutex_unlock(&x->lock);
		pthread_join(x->thread, NULL);
	}
	while ((r = x->head)) {
		x->head = r->next;
		x->st.dropped_shutdown += r->count;
		request_free(r);
	}
	if (x->st.dropped_shutdown)
		sr_log_warn("otlp", "samples still queued at exit are dropped", "samples=%" PRIu64,
			    x->st.dropped_shutdown);
	if (x->easy)
		curl_easy_cleanup(x->easy);
	curl_slist_free_all(x->headers);
	curl_slist_free_all(x->connect_to);
	free(x->url);
	pthread_cond_destroy(&x->cond);
	pthread_mutex_destroy(&x->lock);
	free(x);
}
