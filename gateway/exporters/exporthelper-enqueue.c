// SPDX-License-Identifier: Apache-2.0
/*
 * The exporter's way in (exporthelper-private.h): gw_exporter_consume() hands
 * a batch to the libuv thread pool, which encodes it as OTLP (and gzips it
 * unless compression is none); back on the loop, the request goes into the
 * sending queue, room made by dropping the oldest request when a memory
 * queue is full, and the consumers are kicked (exporthelper.c). A request
 * the disk cannot take is held in memory (exporthelper-disk.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "component.h"
#include "core/accounting.h"
#include "core/model.h"
#include "core/runtime.h"
#include "core/threads.h"
#include "exporthelper-private.h"
#include "exporthelper.h"
#include "common/log.h"
#include "common/macro.h"
#include "common/pbwire.h"
#include "queue.h"

struct encode_job {
	uv_work_t work;
	struct exporter *x;
	struct gw_profiles *p;
	uint64_t samples;
	uint8_t *data;
	size_t len;
	int error;
	char *metadata; /* the batch's (a batch processor's metadata_keys), sent with the request */
};

/* Makes room for a request of len bytes and samples samples (drop-oldest), or says there is none. */
static bool make_room(struct exporter *x, uint64_t len, uint64_t samples)
{
	if (x->cfg->sending_queue.block_on_overflow || gw_queue__persistent(x->queue))
		/*
		 * Receivers are held back by admission (exporthelper-disk.c); what
		 * is already in the pipeline still fits, up to a hard bound. A
		 * persistent queue never drops what it made durable to make room.
		 */
		return gw_exporter_queue_fits(x, len, samples, GW_EXPORT_BLOCK_HARD_FACTOR);
	while (!gw_exporter_queue_fits(x, len, samples, 1)) {
		struct gw_queue_item *old = gw_queue__take_oldest(x->queue);

		if (!old)
			return false;
		gw_component_drop_samples(x->c, "queue_full", old->samples);
		sr_log_warn(x->c->id, "sending queue full; dropped the oldest request",
			    "samples=%" PRIu64 " queue_bytes=%" PRIu64, old->samples, gw_queue__bytes(x->queue));
		gw_queue__done(x->queue, old);
	}
	return true;
}

static void encode_work(uv_work_t *w)
{
	struct encode_job *j = SR_CONTAINER_OF(w, struct encode_job, work);
	struct exporter *x = j->x;
	struct sr_pbw out = { 0 };
	struct gw_otlp_stats st;

	gw_thread_background();
	j->error = gw_otlp_encode(j->p, &x->enc, &out, &st);
	if (j->error < 0) {
		sr_pbw__free(&out);
		return;
	}
	j->samples = st.total_count;
	if (x->gzip) {
		j->error = gw_gzip(out.buf, out.len, GW_EXPORT_GZIP_LEVEL, &j->data, &j->len);
		sr_pbw__free(&out);
	} else {
		j->data = out.buf;
		j->len = out.len;
	}
}

static void encode_done(uv_work_t *w, int status)
{
	struct encode_job *j = SR_CONTAINER_OF(w, struct encode_job, work);
	struct exporter *x = j->x;
	uint64_t samples = j->p->total_count;
	int r;

	x->jobs--;
	x->jobs_samples -= samples;
	gw_profiles__unref(j->p);
	if (x->destroyed) {
		/*
		 * The runtime (and its accounting) is gone: destroy() already
		 * counted this batch as dropped when it saw the job pending.
		 */
		free(j->data);
		free(j->metadata);
		free(j);
		gw_exporter_maybe_free(x);
		return;
	}
	if (status < 0 || j->error < 0) {
		sr_log_error(x->c->id, "could not encode a batch; samples dropped", "samples=%" PRIu64 " error=%s",
			     samples, strerror(-(status < 0 ? status : j->error)));
		gw_component_drop_samples(x->c, "encode_error", samples);
		free(j->data);
		goto out;
	}
	if (!make_room(x, j->len, j->samples)) {
		sr_log_warn(x->c->id, "sending queue full; dropped a new request", "samples=%" PRIu64 " bytes=%zu",
			    samples, j->len);
		gw_component_drop_samples(x->c, "queue_full", samples);
		free(j->data);
		goto out;
	}
	r = gw_queue__push(x->queue, j->data, j->len, j->samples,
			   (x->gzip ? GW_QUEUE_GZIP : 0) | (x->enc.version == GW_OTLP_V1_9 ? GW_QUEUE_OTLP_V1_9 : 0),
			   j->metadata);
	if (r < 0) {
		/* Not a disk failure (those are held, below): no memory for the item, or larger than any item may be. */
		sr_log_error(x->c->id, "could not queue a request; samples dropped", "samples=%" PRIu64 " error=%s",
			     samples, strerror(-r));
		gw_component_drop_samples(x->c, r == -EFBIG ? "too_large" : "out_of_memory", samples);
	} else if (r == GW_QUEUE_HELD) {
		gw_exporter_disk_held(x);
	}
	sr_log_debug(x->c->id, "request queued", "samples=%" PRIu64 " bytes=%zu queue_bytes=%" PRIu64 " held=%d",
		     samples, j->len, gw_queue__bytes(x->queue), r == GW_QUEUE_HELD);
	/* Samples of equal stacks merge, so the encoded count equals the batch's. */
	if (r >= 0 && j->samples != samples)
		gw_component_drop_samples(x->c, "encode_mismatch", samples - SR_MIN(samples, j->samples));
	gw_exporter_kick(x);
out:
	free(j->metadata);
	free(j);
	gw_exporter_maybe_done(x);
}

int gw_exporter_consume(struct gw_component *c, struct gw_profiles *p)
{
	struct exporter *x = c->state;
	struct encode_job *j;
	int r;

	if (p->total_count == 0 && p->n_samples == 0) {
		gw_profiles__unref(p);
		return 0;
	}
	if (x->shutting_down && x->done == NULL) {
		gw_component_drop(c, p, GW_REASON_SHUTDOWN);
		return 0;
	}
	j = calloc(1, sizeof(*j));
	if (!j) {
		gw_component_drop(c, p, GW_REASON_CONSUME_ERROR);
		return -ENOMEM;
	}
	j->x = x;
	j->p = p;
	if (p->metadata && !(j->metadata = strdup(p->metadata))) {
		free(j);
		gw_component_drop(c, p, GW_REASON_CONSUME_ERROR);
		return -ENOMEM;
	}
	r = uv_queue_work(x->loop, &j->work, encode_work, encode_done);
	if (r < 0) {
		free(j->metadata);
		free(j);
		gw_component_drop(c, p, GW_REASON_CONSUME_ERROR);
		return r;
	}
	x->jobs++;
	x->jobs_samples += p->total_count;
	return 0;
}
