// SPDX-License-Identifier: Apache-2.0
/*
 * The exporter otlp_http and otlp_grpc share (exporthelper.h), but for its way
 * in (exporthelper-enqueue.c): create, start, shutdown and destroy; the
 * consumers that send queued requests, retry them with backoff and split
 * those the backend finds too large; the runtime's hooks (metrics, shedding;
 * admission is in exporthelper-disk.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "component.h"
#include "sr-config.h"
#include "core/accounting.h"
#include "core/runtime.h"
#include "exporthelper-private.h"
#include "exporthelper.h"
#include "common/gzip.h"
#include "common/log.h"
#include "common/macro.h"
#include "common/pbwire.h"
#include "queue.h"
#include "common/units.h"

/* ---- the exporter ---- */

/* Whether one of the first n "Name: value" lines has the header name of line h. */
static bool metadata_sets(const char *const *lines, size_t n, const char *h)
{
	size_t hl = strcspn(h, ":");

	for (size_t i = 0; i < n; i++)
		if (strcspn(lines[i], ":") == hl && strncasecmp(lines[i], h, hl) == 0)
			return true;
	return false;
}

static void send_item(struct consumer *k);

static void exporter_free(struct exporter *x)
{
	if (!x)
		return;
	gw_queue_close(x->queue);
	for (char **h = x->headers; h && *h; h++)
		free(*h);
	free(x->headers);
	gw_header_rules_free(x->rules, x->n_rules);
	free(x->url);
	free(x->consumers);
	free(x);
}

/* The state is freed once every libuv handle and every thread-pool job is finished. */
void gw_exporter_maybe_free(struct exporter *x)
{
	if (x->destroyed && x->open_handles == 0 && x->jobs == 0)
		exporter_free(x);
}

void gw_exporter_maybe_done(struct exporter *x)
{
	bool idle;

	if (!x->shutting_down || !x->done || x->jobs > 0)
		return;
	if (gw_queue__persistent(x->queue)) {
		/*
		 * Everything the pipeline handed over is queued now. What only
		 * memory holds (the disk could not take it) is delivered first:
		 * exporthelper-disk.c stops sending after it, then comes back here.
		 */
		if (!x->stopped_sending) {
			gw_exporter_disk_drain(x);
			return;
		}
		/* Everything is on disk: nothing to wait for once no request is in flight. */
		idle = gw_queue__in_flight(x->queue) == 0;
	} else
		idle = gw_queue__waiting(x->queue) == 0 && gw_queue__in_flight(x->queue) == 0;
	if (idle) {
		void (*done)(struct gw_component * c) = x->done;

		x->done = NULL;
		done(x->c);
	}
}

static void item_finished(struct consumer *k)
{
	struct exporter *x = k->x;

	gw_queue__done(x->queue, k->item);
	k->item = NULL;
	k->sending = false;
	free(k->framed);
	k->framed = NULL;
	k->split_depth = 0;
}

static void drop_item(struct consumer *k, const char *reason)
{
	gw_component_drop_samples(k->x->c, reason, k->item->samples);
	item_finished(k);
}

static void on_retry_timer(uv_timer_t *t)
{
	struct consumer *k = t->data;

	send_item(k);
}

static void split_item(struct consumer *k)
{
	struct exporter *x = k->x;
	struct gw_queue_item *it = k->item;
	enum gw_otlp_version v = (it->flags & GW_QUEUE_OTLP_V1_9) ? GW_OTLP_V1_9 : GW_OTLP_V1_10;
	uint8_t *plain = NULL;
	size_t plain_len = 0;
	struct sr_pbw a = { 0 }, b = { 0 };
	uint64_t ca = 0, cb = 0;
	int r;

	if (it->flags & GW_QUEUE_GZIP) {
		r = sr_gunzip(it->data, it->len, GW_QUEUE_ITEM_MAX_BYTES, &plain, &plain_len);
		if (r < 0)
			goto fail;
	}
	r = gw_otlp_split(plain ? plain : it->data, plain ? plain_len : it->len, v, &a, &ca, &b, &cb);
	if (r < 0)
		goto fail;
	if (ca + cb != it->samples) {
		r = -EUCLEAN;
		goto fail;
	}
	for (int i = 0; i < 2; i++) {
		struct sr_pbw *h = i == 0 ? &a : &b;
		uint8_t *out = h->buf;
		size_t out_len = h->len;

		if (x->gzip || (it->flags & GW_QUEUE_GZIP)) {
			r = gw_gzip(h->buf, h->len, GW_EXPORT_GZIP_LEVEL, &out, &out_len);
			if (r < 0)
				goto fail;
			sr_pbw__free(h);
		} else {
			*h = (struct sr_pbw){ 0 };
		}
		r = gw_queue__push(x->queue, out, out_len, i == 0 ? ca : cb, it->flags, it->metadata);
		if (r == GW_QUEUE_HELD)
			gw_exporter_disk_held(x); /* in memory until the disk takes it */
		if (r < 0) {
			/* No memory for it (a disk failure holds it instead): drop only this half. */
			gw_component_drop_samples(x->c, "out_of_memory", i == 0 ? ca : cb);
			sr_log_error(x->c->id, "could not queue half of a split request; its samples are dropped",
				     "samples=%" PRIu64 " error=%s", i == 0 ? ca : cb, strerror(-r));
		}
	}
	sr_log_info(x->c->id, "backend said the request is too large (413 or RESOURCE_EXHAUSTED); split in two",
		    "samples=%" PRIu64 " halves=%" PRIu64 "+%" PRIu64, it->samples, ca, cb);
	free(plain);
	item_finished(k);
	return;
fail:
	free(plain);
	sr_pbw__free(&a);
	sr_pbw__free(&b);
	sr_log_error(x->c->id, "backend said the request is too large and it cannot be split; samples dropped",
		     "samples=%" PRIu64 " bytes=%zu error=%s", it->samples, it->len,
		     r == -ERANGE ? "single sample" : strerror(-r));
	drop_item(k, "too_large");
}

static void on_response(void *userdata, const struct gw_http_response *resp)
{
	struct consumer *k = userdata;
	struct exporter *x = k->x;
	char msg[256] = "", body[GW_EXPORT_LOG_BODY_MAX * 2 + 8];
	int64_t rejected = 0;
	enum gw_export_outcome o;
	uint64_t delay, min_delay = 0;

	free(k->framed);
	k->framed = NULL;
	if (resp->result == GW_HTTP_ABORTED) {
		/* Shutting down: the item stays queued (on disk it is replayed at the next start). */
		gw_queue__unpop(x->queue, k->item);
		k->item = NULL;
		k->sending = false;
		return;
	}
	o = x->t->classify(x->cfg, resp, &rejected, msg, sizeof(msg));
	switch (o) {
	case GW_EXPORT_OK:
		x->requests_ok++;
		x->bytes_sent += k->item->len;
		if (x->failing) {
			sr_log_info(x->c->id, "backend accepts requests again", "url=%s", x->url);
			x->failing = false;
		}
		if (rejected > 0 || msg[0]) {
			char q[600];

			x->partial_rejected_profiles += (uint64_t)SR_MAX(rejected, 0);
			sr_log_warn(x->c->id, "backend accepted the request partially",
				    "rejected_profiles=%" PRId64 " message=%s", rejected,
				    sr_log_quote(msg, q, sizeof(q)));
		}
		gw_component_exported(x->c, k->item->samples);
		item_finished(k);
		break;
	case GW_EXPORT_SPLIT:
		x->requests_split++;
		if (k->split_depth >= GW_EXPORT_MAX_SPLIT_DEPTH) {
			sr_log_error(x->c->id, "backend said 'too large' too many times; samples dropped",
				     "samples=%" PRIu64, k->item->samples);
			drop_item(k, "too_large");
			break;
		}
		split_item(k);
		break;
	case GW_EXPORT_PERMANENT:
		x->requests_permanent++;
		gw_export_quote_body(resp, body, sizeof(body));
		if (resp->result == GW_HTTP_OK)
			sr_log_error(x->c->id, "backend rejected the request for good; samples dropped",
				     "url=%s status=%ld samples=%" PRIu64 " reason=\"%s\" body=%s", x->url,
				     resp->status, k->item->samples, msg, body);
		else
			sr_log_error(x->c->id, "request cannot succeed; samples dropped",
				     "url=%s samples=%" PRIu64 " error=\"%s\"", x->url, k->item->samples,
				     msg[0] ? msg : resp->error);
		drop_item(k, resp->status ? gw_export_permanent_reason(resp->status) : "rejected");
		break;
	case GW_EXPORT_RETRY:
		if (resp->result == GW_HTTP_OK)
			x->requests_retry++;
		else
			x->requests_transport++;
		if (resp->retry_after[0] && gw_retry_parse_after(resp->retry_after, time(NULL), &min_delay) < 0)
			min_delay = 0;
		if (!gw_backoff_next(&k->backoff, uv_hrtime(), min_delay, &delay)) {
			sr_log_error(x->c->id, "giving up on a request after retrying; samples dropped",
				     "url=%s samples=%" PRIu64 " attempts=%u last_status=%ld last_error=\"%s\"", x->url,
				     k->item->samples, k->backoff.attempts + 1, resp->status,
				     resp->result == GW_HTTP_OK ? msg : resp->error);
			drop_item(k, x->retry.enabled ? "retries_exhausted" : "send_failed");
			break;
		}
		{
			char d[32];

			if (!x->failing)
				sr_log_warn(x->c->id, "export failed; retrying",
					    "url=%s status=%ld error=\"%s\" retry_in=%s", x->url, resp->status,
					    resp->result == GW_HTTP_OK ? msg : resp->error,
					    sr_format_duration(delay, d, sizeof(d)));
			else
				sr_log_debug(x->c->id, "export failed; retrying", "url=%s status=%ld retry_in=%s",
					     x->url, resp->status, sr_format_duration(delay, d, sizeof(d)));
		}
		x->failing = true;
		uv_timer_start(&k->timer, on_retry_timer, (delay + 999999) / 1000000, 0);
		return; /* the consumer stays busy with its item */
	}
	gw_exporter_kick(x);
	gw_exporter_maybe_done(x);
}

/* Whether the configured headers set name (namelen bytes). */
static bool configured_sets(const struct exporter *x, const char *name, size_t namelen)
{
	for (char **h = x->headers; h && *h; h++)
		if (strcspn(*h, ":") == namelen && strncasecmp(*h, name, namelen) == 0)
			return true;
	return false;
}

/*
 * headers_setter: the header lines its rules make from a request's
 * metadata, written into buf and pointed at from lines (at most max);
 * deleted gets the names of the configured headers a delete removes.
 * Returns the number of lines.
 */
static size_t apply_rules(const struct exporter *x, const char *metadata, char *buf, size_t size, const char **lines,
			  size_t max, const char **deleted, size_t *ret_n_deleted)
{
	size_t n = 0, used = 0;

	*ret_n_deleted = 0;
	for (size_t i = 0; i < x->n_rules && n < max; i++) {
		const struct gw_header_rule *r = &x->rules[i];
		size_t kl = strlen(r->key);
		char value[1024];
		int w;

		if (r->action == GW_HEADER_DELETE) {
			if (*ret_n_deleted < max)
				deleted[(*ret_n_deleted)++] = r->key;
			continue;
		}
		if ((r->action == GW_HEADER_INSERT && configured_sets(x, r->key, kl)) ||
		    (r->action == GW_HEADER_UPDATE && !configured_sets(x, r->key, kl)) ||
		    !gw_header_rule__value(r, metadata, value, sizeof(value)))
			continue;
		w = snprintf(buf + used, size - used, "%s: %s", r->key, value);
		if (w < 0 || (size_t)w >= size - used)
			break;
		lines[n++] = buf + used;
		used += (size_t)w + 1;
	}
	return n;
}

static void send_item(struct consumer *k)
{
	struct exporter *x = k->x;
	struct gw_export_request er = {
		.body = k->item->data,
		.len = k->item->len,
		.gzip = (k->item->flags & GW_QUEUE_GZIP) != 0,
	};
	const char *const *extra = x->t->headers(er.gzip);
	/* The batch's metadata, the configured headers and auth's, the transport's. */
	const char *hdrs[2 * GW_EXPORT_MAX_HEADERS + 8];
	size_t nh = 0, n_meta, n_deleted = 0;
	char meta[GW_QUEUE_METADATA_MAX + 1];
	const char *deleted[GW_EXPORT_MAX_HEADERS];
	struct gw_http_request req;
	int r;

	/*
	 * The batch's metadata (a batch processor's metadata_keys: the tenant)
	 * first, then the configured headers but those it sets: libcurl sends
	 * both of a name twice, and the batch's value is the one that counts.
	 * With a headers_setter, its rules say which headers the metadata
	 * makes, instead.
	 */
	if (x->n_rules) {
		nh = apply_rules(x, k->item->metadata, meta, sizeof(meta), hdrs, GW_EXPORT_MAX_HEADERS, deleted,
				 &n_deleted);
	} else if (k->item->metadata) {
		memcpy(meta, k->item->metadata, k->item->metadata_len + 1);
		for (char *line = meta, *end; *line && nh < GW_EXPORT_MAX_HEADERS; line = end + 1) {
			end = strchr(line, '\n');
			if (!end)
				break;
			*end = '\0';
			hdrs[nh++] = line;
		}
	}
	n_meta = nh;
	for (char **h = x->headers; h && *h && nh < 2 * GW_EXPORT_MAX_HEADERS + 1; h++)
		if (!metadata_sets(hdrs, n_meta, *h) && !metadata_sets(deleted, n_deleted, *h))
			hdrs[nh++] = *h;
	for (; extra && *extra && nh < SR_ARRAY_SIZE(hdrs) - 1; extra++)
		hdrs[nh++] = *extra;
	hdrs[nh] = NULL;

	free(k->framed);
	k->framed = NULL;
	r = x->t->frame ? x->t->frame(&er, &k->framed, &k->framed_len) : 0;
	req = (struct gw_http_request){
		.url = x->url,
		.headers = hdrs,
		.body = k->framed ? k->framed : er.body,
		.body_len = k->framed ? k->framed_len : er.len,
		.timeout_ns = x->cfg->timeout,
		.tls = &x->tls,
		.version = x->t->http_version(x->cfg, x->url),
	};
	k->sending = true;
	if (r == 0)
		r = gw_http_client__post(x->http, &req, on_response, k);
	if (r < 0) {
		/* Could not even start: treat it like a network error, through the same retry path. */
		struct gw_http_response fake = {
			.result = GW_HTTP_TRANSPORT,
			.error = strerror(-r),
			.body = "",
			.retry_after = "",
			.content_type = "",
			.grpc_status = "",
			.grpc_message = "",
		};

		on_response(k, &fake);
	}
}

bool gw_exporter_queue_fits(const struct exporter *x, uint64_t len, uint64_t samples, uint64_t factor)
{
	const struct gw_queue *q = x->queue;

	if (gw_queue__bytes(q) + len > gw_queue__max_bytes(q) * factor)
		return false;
	if (x->max_requests &&
	    gw_queue__waiting(q) + gw_queue__in_flight(q) + (len || samples ? 1 : 0) > x->max_requests * factor)
		return false;
	return !x->max_samples || gw_queue__samples(q) + samples <= x->max_samples * factor;
}

void gw_exporter_kick(struct exporter *x)
{
	if (!x->started || x->destroyed)
		return;
	/* Persistent queues stop sending at shutdown: what is on disk is safe. */
	if (x->shutting_down && gw_queue__persistent(x->queue) && x->stopped_sending)
		return;
	for (size_t i = 0; i < x->n_consumers; i++) {
		struct consumer *k = &x->consumers[i];
		uint64_t corrupt = 0;
		const char *path = NULL;

		if (k->item)
			continue;
		k->item = gw_queue__pop(x->queue, &corrupt, &path);
		if (path) {
			sr_log_error(x->c->id, "queue file is corrupt; moved aside and kept for inspection",
				     "path=%s samples=%" PRIu64, path, corrupt);
			if (corrupt)
				gw_component_drop_samples(x->c, "queue_corrupt", corrupt);
		}
		if (!k->item)
			break;
		gw_backoff_init(&k->backoff, &x->retry, uv_hrtime(), ++x->seed * 0x9E3779B97F4A7C15ULL);
		send_item(k);
	}
}

/*
 * The memory_limiter's shedding hook (gw_runtime__shed): drops the oldest
 * waiting request of a memory queue, counted with reason. Requests in flight
 * stay (their bytes are on the wire already). A persistent queue keeps its
 * waiting requests on disk, not in memory: only those it holds in memory
 * because the disk could not take them can be shed (an OOM kill would lose
 * them and everything else in memory).
 */
static uint64_t shed(struct gw_component *c, const char *reason)
{
	struct exporter *x = c->state;
	struct gw_queue_item *it;
	uint64_t bytes;

	if (!x || !x->queue)
		return 0;
	it = gw_queue__persistent(x->queue) ? gw_queue__take_oldest_held(x->queue) : gw_queue__take_oldest(x->queue);
	if (!it)
		return 0;
	bytes = it->len;
	x->shed_requests++;
	gw_component_drop_samples(c, reason, it->samples);
	sr_log_debug(c->id, "memory above the limit; dropped the oldest queued request",
		     "samples=%" PRIu64 " bytes=%" PRIu64 " queue_bytes=%" PRIu64, it->samples, bytes,
		     gw_queue__bytes(x->queue));
	gw_queue__done(x->queue, it);
	return bytes;
}

size_t gw_exporter_queued_requests(struct gw_component *c, size_t *ret_in_flight)
{
	struct exporter *x = c->state;
	size_t in_flight = x && x->queue ? gw_queue__in_flight(x->queue) : 0;

	if (ret_in_flight)
		*ret_in_flight = in_flight;
	return x && x->queue ? gw_queue__waiting(x->queue) + in_flight : 0;
}

unsigned gw_exporter_encoding(struct gw_component *c)
{
	struct exporter *x = c->state;

	return x ? x->jobs : 0;
}

static void metrics(struct gw_metrics_writer *w, void *userdata)
{
	struct exporter *x = userdata;
	char l[256] = "", lo[320];
	static const char *const outcomes[] = { "ok", "retry", "split", "permanent", "network_error" };
	uint64_t counts[] = { x->requests_ok, x->requests_retry, x->requests_split, x->requests_permanent,
			      x->requests_transport };

	gw_metrics_label(l, sizeof(l), "exporter", x->c->id);
	gw_metrics__add(w, "stackrelay_gateway_export_queue_bytes", GW_METRIC_GAUGE,
			"Bytes of encoded requests held by the sending queue (waiting and in flight).", l,
			(double)gw_queue__bytes(x->queue));
	gw_metrics__add(w, "stackrelay_gateway_export_queue_capacity_bytes", GW_METRIC_GAUGE,
			"Bound of the sending queue in bytes (queue_size_mib, or queue_size with sizer bytes).", l,
			(double)gw_queue__max_bytes(x->queue));
	gw_metrics__add(w, "stackrelay_gateway_export_queue_requests", GW_METRIC_GAUGE,
			"Requests in the sending queue (waiting and in flight).", l,
			(double)(gw_queue__waiting(x->queue) + gw_queue__in_flight(x->queue)));
	gw_metrics__add(w, "stackrelay_gateway_export_queue_samples", GW_METRIC_GAUGE,
			"Samples in the sending queue (waiting and in flight).", l,
			(double)gw_queue__samples(x->queue));
	for (size_t i = 0; i < SR_ARRAY_SIZE(outcomes); i++) {
		memcpy(lo, l, sizeof(l));
		gw_metrics_label(lo, sizeof(lo), "outcome", outcomes[i]);
		gw_metrics__add(w, "stackrelay_gateway_export_requests_total", GW_METRIC_COUNTER,
				"Export attempts by outcome.", lo, (double)counts[i]);
	}
	gw_metrics__add(w, "stackrelay_gateway_export_partial_rejected_profiles_total", GW_METRIC_COUNTER,
			"Profiles the backend rejected in a partial_success response.", l,
			(double)x->partial_rejected_profiles);
	gw_metrics__add(w, "stackrelay_gateway_export_shed_requests_total", GW_METRIC_COUNTER,
			"Queued requests dropped (oldest first) because memory was above the memory_limiter's limit.",
			l, (double)x->shed_requests);
	gw_metrics__add(w, "stackrelay_gateway_export_sent_bytes_total", GW_METRIC_COUNTER,
			"Bytes of requests the backend accepted (after compression).", l, (double)x->bytes_sent);
	gw_exporter_disk_metrics(w, x, l);
}

/* "1.2" -> 12; "" or NULL -> 0 (the TLS library's default). */
static int tls_version(const char *s)
{
	return s && s[0] == '1' && s[1] == '.' && s[2] >= '0' && s[2] <= '3' && !s[3] ? 10 + (s[2] - '0') : 0;
}

int gw_exporter_create(struct gw_component *c, const struct gw_export_transport *t)
{
	const struct gw_export_config *cfg = c->config;
	struct exporter *x;
	const char *err = NULL;
	int r;

	x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	x->c = c;
	x->cfg = cfg;
	x->t = t;
	x->url = t->url(cfg, &err);
	if (!x->url) {
		r = -errno;
		sr_log_error(c->id, "bad endpoint", "endpoint=\"%s\" error=\"%s\"", cfg->endpoint ? cfg->endpoint : "",
			     err ? err : strerror(-r));
		goto fail;
	}
	x->headers = calloc(cfg->n_headers + 2, sizeof(char *));
	if (!x->headers) {
		r = -ENOMEM;
		goto fail;
	}
	for (uint32_t i = 0; i < cfg->n_headers; i++) {
		if (asprintf(&x->headers[i], "%s: %s", cfg->headers[i].key, cfg->headers[i].value) < 0) {
			x->headers[i] = NULL;
			r = -ENOMEM;
			goto fail;
		}
	}
	/* auth.authenticator's header (basicauth) or rules (headers_setter), resolved when the config was loaded. */
	if (cfg->auth.ext && cfg->auth.ext->header && !(x->headers[cfg->n_headers] = strdup(cfg->auth.ext->header))) {
		r = -ENOMEM;
		goto fail;
	}
	if (cfg->auth.ext && cfg->auth.ext->n_rules) {
		r = gw_header_rules_dup(cfg->auth.ext->rules, cfg->auth.ext->n_rules, &x->rules);
		if (r < 0)
			goto fail;
		x->n_rules = cfg->auth.ext->n_rules;
	}
	x->tls = (struct gw_http_tls){
		.ca_file = cfg->tls.ca_file,
		.cert_file = cfg->tls.cert_file,
		.key_file = cfg->tls.key_file,
		.insecure_skip_verify = cfg->tls.insecure_skip_verify,
		.min_version =
			tls_version(cfg->tls.min_version >= 0 ? gw_export_tls_versions[cfg->tls.min_version] : ""),
		.max_version = tls_version(cfg->tls.max_version),
	};
	x->retry = (struct gw_retry_config){
		.enabled = cfg->retry_on_failure.enabled,
		.initial_interval_ns = cfg->retry_on_failure.initial_interval,
		.randomization_factor = cfg->retry_on_failure.randomization_factor,
		.multiplier = cfg->retry_on_failure.multiplier,
		.max_interval_ns = cfg->retry_on_failure.max_interval,
		.max_elapsed_time_ns = cfg->retry_on_failure.max_elapsed_time,
	};
	x->enc = (struct gw_otlp_options){
		.version = cfg->proto_version == 1 ? GW_OTLP_V1_9 : GW_OTLP_V1_10,
		.process_attrs = (enum gw_otlp_process_attrs)cfg->process_attributes,
		.scope_version = SR_VERSION,
	};
	x->gzip = cfg->compression == 0;
	/* Without a queue: one request at a time, held in memory until delivered (still bounded). */
	x->n_consumers = cfg->sending_queue.enabled ? cfg->sending_queue.num_consumers : 1;
	if (x->n_consumers == 0)
		x->n_consumers = 1;
	x->consumers = calloc(x->n_consumers, sizeof(*x->consumers));
	if (!x->consumers) {
		r = -ENOMEM;
		goto fail;
	}
	c->state = x;
	return 0;
fail:
	exporter_free(x);
	return r;
}

/* Every reason an exporter drops samples for (gw_component_declare_drops); a persistent queue adds its own. */
static const char *const export_drops[] = {
	"too_large",	"out_of_memory",	 "queue_full", "encode_error", "encode_mismatch",
	"memory_limit", GW_REASON_CONSUME_ERROR, NULL,
};
static const char *const export_retry_drops[] = { "retries_exhausted", NULL };
static const char *const export_no_retry_drops[] = { "send_failed", NULL };
static const char *const export_disk_drops[] = { "queue_corrupt", "queue_unwritable_at_shutdown", NULL };

static void declare_drops(struct exporter *x)
{
	gw_component_declare_drops(x->c, gw_export_permanent_reasons);
	gw_component_declare_drops(x->c, export_drops);
	gw_component_declare_drops(x->c, x->retry.enabled ? export_retry_drops : export_no_retry_drops);
	if (gw_queue__persistent(x->queue))
		gw_component_declare_drops(x->c, export_disk_drops);
}

int gw_exporter_start(struct gw_component *c)
{
	struct exporter *x = c->state;
	const struct gw_export_config *cfg = x->cfg;
	struct gw_queue_config qc = {
		.max_bytes =
			(cfg->sending_queue.enabled ? cfg->sending_queue.queue_size_mib : GW_EXPORT_DEFAULT_QUEUE_MIB)
			<< 20,
		.storage_dir = cfg->sending_queue.enabled ? cfg->sending_queue.storage : NULL,
	};
	struct gw_queue_replay rep = { 0 };
	const char *what = "";
	int r;

	/* The Collector's queue_size: a byte bound replaces queue_size_mib, a count adds to it. */
	if (cfg->sending_queue.enabled && cfg->sending_queue.queue_size) {
		switch (cfg->sending_queue.sizer) {
		case GW_EXPORT_SIZER_BYTES:
			qc.max_bytes = cfg->sending_queue.queue_size;
			break;
		case GW_EXPORT_SIZER_ITEMS:
			x->max_samples = cfg->sending_queue.queue_size;
			break;
		default:
			x->max_requests = cfg->sending_queue.queue_size;
			break;
		}
	}
	x->loop = gw_runtime__loop(c->runtime);
	x->http = gw_http_client__new(x->loop);
	if (!x->http) {
		r = -errno;
		sr_log_error(c->id, "could not create the HTTP client", "error=%s", strerror(-r));
		return r;
	}
	x->queue = gw_queue_open(&qc, &rep, &what);
	if (!x->queue) {
		r = -errno;
		sr_log_error(c->id, "could not open the sending queue", "storage=%s step=%s error=%s",
			     qc.storage_dir ? qc.storage_dir : "(memory)", what,
			     r == -EBUSY ? "another process uses this directory" : strerror(-r));
		return r;
	}
	declare_drops(x);
	if (rep.items || rep.corrupt_files || rep.stale_tmp_files) {
		sr_log_info(c->id, "replaying the persistent queue",
			    "storage=%s requests=%" PRIu64 " samples=%" PRIu64 " bytes=%" PRIu64
			    " corrupt_files=%" PRIu64 " stale_tmp_files=%" PRIu64,
			    qc.storage_dir, rep.items, rep.samples, rep.bytes, rep.corrupt_files, rep.stale_tmp_files);
		/* They entered an earlier process: count them in, so exported - received stays balanced. */
		if (rep.samples)
			gw_component_received(c, rep.samples);
	}
	if (rep.corrupt_files)
		sr_log_error(c->id, "corrupt queue files were moved aside (*.corrupt) and kept for inspection",
			     "storage=%s files=%" PRIu64, qc.storage_dir, rep.corrupt_files);
	for (size_t i = 0; i < x->n_consumers; i++) {
		x->consumers[i].x = x;
		uv_timer_init(x->loop, &x->consumers[i].timer);
		x->consumers[i].timer.data = &x->consumers[i];
		x->open_handles++;
	}
	gw_exporter_disk_start(x);
	if (cfg->sending_queue.block_on_overflow || gw_queue__persistent(x->queue))
		gw_runtime__set_admission(c->runtime, c, gw_exporter_admission);
	if (gw_runtime__add_metrics(c->runtime, metrics, x) == 0)
		x->metrics_added = true;
	if (gw_runtime__add_shedder(c->runtime, c, shed) == 0)
		x->shedder_added = true;
	x->started = true;
	sr_log_info(c->id, "exporting", "url=%s proto_version=%s compression=%s queue=%s", x->url,
		    gw_otlp_version_to_string(x->enc.version), x->gzip ? "gzip" : "none",
		    qc.storage_dir ? qc.storage_dir : "memory");
	gw_exporter_kick(x);
	return 0;
}

void gw_exporter_shutdown(struct gw_component *c, void (*done)(struct gw_component *c))
{
	struct exporter *x = c->state;

	x->shutting_down = true;
	x->done = done;
	gw_exporter_maybe_done(x);
}

void gw_exporter_stop_sending(struct exporter *x)
{
	x->stopped_sending = true;
	/* Items waiting for a retry go back to the queue, i.e. stay on disk for the next start. */
	for (size_t i = 0; i < x->n_consumers; i++) {
		struct consumer *k = &x->consumers[i];

		if (k->item && uv_is_active((uv_handle_t *)&k->timer)) {
			uv_timer_stop(&k->timer);
			gw_queue__unpop(x->queue, k->item);
			k->item = NULL;
			k->sending = false;
		}
	}
	/* Requests in flight are aborted; their callbacks put the items back the same way. */
	gw_http_client__close(x->http);
	x->http = NULL;
}

static void timer_closed(uv_handle_t *h)
{
	struct consumer *k = h->data;
	struct exporter *x = k->x;

	x->open_handles--;
	gw_exporter_maybe_free(x);
}

void gw_exporter_destroy(struct gw_component *c)
{
	struct exporter *x = c->state;
	struct gw_queue_item *it;

	if (!x)
		return;
	c->state = NULL;
	if (x->metrics_added)
		gw_runtime__remove_metrics(c->runtime, metrics, x);
	if (x->shedder_added)
		gw_runtime__remove_shedder(c->runtime, c);
	gw_http_client__close(x->http); /* aborted callbacks put their items back */
	x->http = NULL;
	x->destroyed = true;
	if (x->jobs_samples)
		gw_component_drop_samples(c, GW_REASON_SHUTDOWN, x->jobs_samples);
	if (x->queue) {
		for (size_t i = 0; i < x->n_consumers; i++) {
			struct consumer *k = &x->consumers[i];

			if (k->item) {
				uv_timer_stop(&k->timer);
				gw_queue__unpop(x->queue, k->item);
				k->item = NULL;
			}
			free(k->framed);
			k->framed = NULL;
		}
		/* What a persistent queue holds in memory for want of disk: tried once more, else counted. */
		gw_exporter_disk_destroy(x);
		if (!gw_queue__persistent(x->queue)) {
			/* A memory queue dies with the process: what is left is dropped, and counted. */
			uint64_t lost = 0;

			while ((it = gw_queue__take_oldest(x->queue))) {
				lost += it->samples;
				gw_component_drop_samples(c, GW_REASON_SHUTDOWN, it->samples);
				gw_queue__done(x->queue, it);
			}
			if (lost)
				sr_log_warn(c->id, "stopped with undelivered samples in the memory queue; dropped",
					    "samples=%" PRIu64, lost);
		}
	}
	if (x->started) {
		for (size_t i = 0; i < x->n_consumers; i++)
			uv_close((uv_handle_t *)&x->consumers[i].timer, timer_closed);
	}
	gw_exporter_maybe_free(x);
}
