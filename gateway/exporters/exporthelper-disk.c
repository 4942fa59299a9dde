// SPDX-License-Identifier: Apache-2.0
/*
 * Admission for the exporter (exporthelper-private.h), and a persistent
 * queue's disk when it cannot take a write (docs/exporters.md, "A full or
 * failing disk"; docs/security.md, "A full or failing disk").
 *
 * A gateway that cannot persist pushes back instead of accepting and
 * dropping: once a write fails (ENOSPC, EDQUOT, EIO, EROFS...), the request
 * is held in memory by the queue (queue.h), the runtime's admission check
 * (the one the memory_limiter uses) makes the receivers answer "retry later"
 * so agents keep their data, and a timer tries the disk again every
 * sending_queue.disk_check_interval: the held requests, oldest first, or,
 * with none held, a probe as large as the write that failed. When every
 * write succeeds the disk is taken back and receivers accept again. Held
 * requests are sent like any other meanwhile, so a live backend drains
 * them, and the disk.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <uv.h>

#include "component.h"
#include "core/accounting.h"
#include "core/metrics.h"
#include "core/runtime.h"
#include "exporthelper-private.h"
#include "exporthelper.h"
#include "common/log.h"
#include "common/macro.h"
#include "queue.h"
#include "common/units.h"

/* A full queue (block_on_overflow, or storage) tells agents to retry after this long. */
#define EXPORT_BLOCK_RETRY_AFTER_MS 1000
/* Refused senders never come back sooner than this, whatever disk_check_interval is. */
#define EXPORT_DISK_MIN_RETRY_AFTER_MS 1000
/* Reason index of a refusal for a full queue (after the disk reasons). */
#define REFUSAL_QUEUE_FULL GW_EXPORT_DISK_REASONS

static const struct {
	int err;
	const char *reason;
} disk_reasons[GW_EXPORT_DISK_REASONS] = {
	{ ENOSPC, "no_space" }, { EDQUOT, "quota" },	     { EIO, "io_error" },
	{ EROFS, "read_only" }, { EFBIG, "file_too_large" }, { 0, "write_error" }, /* any other */
};

static size_t disk_reason(int err)
{
	for (size_t i = 0; i + 1 < GW_EXPORT_DISK_REASONS; i++)
		if (disk_reasons[i].err == -err)
			return i;
	return GW_EXPORT_DISK_REASONS - 1;
}

static uint64_t check_interval_ms(const struct exporter *x)
{
	uint64_t ns = x->cfg->sending_queue.disk_check_interval;

	return SR_MAX(ns ? ns / 1000000 : 1000, (uint64_t)1);
}

static void on_disk_check(uv_timer_t *t);

void gw_exporter_disk_start(struct exporter *x)
{
	if (!gw_queue__persistent(x->queue))
		return;
	uv_timer_init(x->loop, &x->disk_timer);
	x->disk_timer.data = x;
	x->disk_timer_init = true;
	x->open_handles++;
}

void gw_exporter_disk_held(struct exporter *x)
{
	int err = gw_queue__disk_error(x->queue);
	uint64_t ms = check_interval_ms(x);

	if (x->disk_failing || !err)
		return;
	x->disk_failing = true;
	x->disk_errors[disk_reason(err)]++;
	snprintf(x->refusal_why, sizeof(x->refusal_why), "the gateway cannot write its queue to disk (%s)",
		 strerror(-err));
	sr_log_error(x->c->id,
		     "the disk cannot take the sending queue's writes; receivers answer 'retry later' and what is "
		     "already inside is kept in memory until the disk takes it or the backend does",
		     "storage=%s error=\"%s\" reason=%s check_interval_ms=%" PRIu64 " held_requests=%zu",
		     x->cfg->sending_queue.storage, strerror(-err), disk_reasons[disk_reason(err)].reason, ms,
		     gw_queue__held(x->queue));
	if (x->disk_timer_init)
		uv_timer_start(&x->disk_timer, on_disk_check, ms, ms);
}

static void on_disk_check(uv_timer_t *t)
{
	struct exporter *x = t->data;
	int r;

	if (x->destroyed)
		return;
	if (x->disk_failing || gw_queue__held(x->queue)) {
		size_t held = gw_queue__held(x->queue);

		r = gw_queue__retry_disk(x->queue);
		if (r < 0) {
			x->disk_errors[disk_reason(r)]++;
			snprintf(x->refusal_why, sizeof(x->refusal_why),
				 "the gateway cannot write its queue to disk (%s)", strerror(-r));
			sr_log_debug(x->c->id, "the disk still cannot take the sending queue's writes",
				     "error=\"%s\" held_requests=%zu", strerror(-r), gw_queue__held(x->queue));
		} else if (x->disk_failing) {
			x->disk_failing = false;
			sr_log_info(x->c->id, "the disk takes the sending queue's writes again; receivers accept again",
				    "storage=%s written_from_memory=%zu", x->cfg->sending_queue.storage,
				    held - gw_queue__held(x->queue));
		}
	}
	if (x->draining) {
		/* Shutting down with nothing left only in memory: the rest is on disk, stop sending. */
		if (gw_queue__held(x->queue) == 0) {
			uv_timer_stop(t);
			gw_exporter_stop_sending(x);
			gw_exporter_maybe_done(x);
		} else if (!x->drain_warned) {
			x->drain_warned = true;
			sr_log_warn(x->c->id,
				    "shutting down with requests the disk could not take: delivering them until "
				    "shutdown_timeout",
				    "held_requests=%zu held_bytes=%" PRIu64, gw_queue__held(x->queue),
				    gw_queue__held_bytes(x->queue));
		}
		return;
	}
	if (x->shutting_down)
		return;
	if (!x->disk_failing)
		uv_timer_stop(t);
	gw_exporter_kick(x);
}

int gw_exporter_admission(struct gw_component *c, uint32_t *ret_retry_after_ms, const char **ret_why)
{
	struct exporter *x = c->state;
	bool persistent;

	if (!x || !x->queue)
		return 0;
	persistent = gw_queue__persistent(x->queue);
	if (persistent && x->disk_failing) {
		if (ret_retry_after_ms) {
			x->refusals[disk_reason(gw_queue__disk_error(x->queue))]++;
			*ret_retry_after_ms =
				(uint32_t)SR_MAX(check_interval_ms(x), (uint64_t)EXPORT_DISK_MIN_RETRY_AFTER_MS);
			if (ret_why)
				*ret_why = x->refusal_why;
		}
		return -EBUSY;
	}
	/* A persistent queue never drops the oldest to make room: it holds the receivers back when full. */
	if ((persistent || x->cfg->sending_queue.block_on_overflow) &&
	    (gw_queue__bytes(x->queue) >= gw_queue__max_bytes(x->queue) || !gw_exporter_queue_fits(x, 0, 1, 1))) {
		if (ret_retry_after_ms) {
			x->refusals[REFUSAL_QUEUE_FULL]++;
			*ret_retry_after_ms = EXPORT_BLOCK_RETRY_AFTER_MS;
			if (ret_why)
				*ret_why = "the gateway's sending queue is full";
		}
		return -EBUSY;
	}
	return 0;
}

void gw_exporter_disk_metrics(struct gw_metrics_writer *w, struct exporter *x, const char *labels)
{
	char l[320];

	if (!gw_queue__persistent(x->queue) && !x->cfg->sending_queue.block_on_overflow)
		return;
	for (size_t i = 0; i <= GW_EXPORT_DISK_REASONS; i++) {
		snprintf(l, sizeof(l), "%s", labels);
		gw_metrics_label(l, sizeof(l), "reason",
				 i < GW_EXPORT_DISK_REASONS ? disk_reasons[i].reason : "queue_full");
		gw_metrics__add(
			w, "stackrelay_gateway_export_queue_refusals_total", GW_METRIC_COUNTER,
			"Receiver requests answered 'retry later' because the sending queue was full or its disk "
			"could not take a write, by reason.",
			l, (double)x->refusals[i]);
	}
	if (!gw_queue__persistent(x->queue))
		return;
	for (size_t i = 0; i < GW_EXPORT_DISK_REASONS; i++) {
		snprintf(l, sizeof(l), "%s", labels);
		gw_metrics_label(l, sizeof(l), "reason", disk_reasons[i].reason);
		gw_metrics__add(w, "stackrelay_gateway_export_queue_disk_errors_total", GW_METRIC_COUNTER,
				"Writes of the persistent queue that failed (the first of an episode and each failed "
				"retry), by reason.",
				l, (double)x->disk_errors[i]);
	}
	gw_metrics__add(w, "stackrelay_gateway_export_queue_disk_refusing", GW_METRIC_GAUGE,
			"1 while the persistent queue's disk cannot take a write and receivers answer 'retry later'.",
			labels, x->disk_failing ? 1.0 : 0.0);
	gw_metrics__add(w, "stackrelay_gateway_export_queue_held_requests", GW_METRIC_GAUGE,
			"Requests of the persistent queue held in memory because the disk could not take them.", labels,
			(double)gw_queue__held(x->queue));
	gw_metrics__add(w, "stackrelay_gateway_export_queue_held_bytes", GW_METRIC_GAUGE,
			"Bytes of the requests held in memory because the disk could not take them.", labels,
			(double)gw_queue__held_bytes(x->queue));
}

void gw_exporter_disk_drain(struct exporter *x)
{
	if (x->draining)
		return;
	x->draining = true;
	if (x->disk_timer_init) {
		uv_timer_start(&x->disk_timer, on_disk_check, 0, check_interval_ms(x));
		return;
	}
	/* Never started: nothing was sent, nothing is held. */
	gw_exporter_stop_sending(x);
	gw_exporter_maybe_done(x);
}

static void disk_timer_closed(uv_handle_t *h)
{
	struct exporter *x = h->data;

	x->open_handles--;
	gw_exporter_maybe_free(x);
}

void gw_exporter_disk_destroy(struct exporter *x)
{
	struct gw_queue_item *it;
	uint64_t lost = 0;

	if (x->queue && gw_queue__persistent(x->queue) && gw_queue__held(x->queue)) {
		gw_queue__retry_disk(x->queue);
		while ((it = gw_queue__take_oldest_held(x->queue))) {
			lost += it->samples;
			gw_component_drop_samples(x->c, "queue_unwritable_at_shutdown", it->samples);
			gw_queue__done(x->queue, it);
		}
		if (lost)
			sr_log_error(x->c->id,
				     "stopped with samples the disk could not take and the backend did not; dropped",
				     "samples=%" PRIu64 " storage=%s", lost, x->cfg->sending_queue.storage);
	}
	if (x->disk_timer_init) {
		uv_timer_stop(&x->disk_timer);
		uv_close((uv_handle_t *)&x->disk_timer, disk_timer_closed);
	}
}
