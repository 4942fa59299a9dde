// SPDX-License-Identifier: Apache-2.0
/*
 * The sender's queue (sender-private.h): submit() cuts a batch into chunks
 * bounded in bytes (drop-oldest, counted), the thread takes the oldest as the
 * head of the next request, splits it on a 413, drops what is left at a
 * flush deadline; and the accounting of every sample that leaves it.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <pb_decode.h>

#include "config.h"
#include "common/grow.h"
#include "common/log.h"
#include "common/macro.h"
#include "sender-private.h"
#include "sr-config.h"
#include "common/units.h"

static uint64_t varint_size(uint64_t v)
{
	uint64_t n = 1;

	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

static uint64_t len_field(size_t len)
{
	return 1 + varint_size(len) + len;
}

uint64_t agent_sender_sample_bytes(const stackrelay_v1_Sample *sample)
{
	/*
	 * The encoded size, computed by hand: submit() runs this for every sample
	 * on the caller's thread, and nanopb's generic field walk costs several
	 * times more (every field number is below 16, so tags take one byte).
	 */
	uint64_t size = 0;

	if (sample->stack_id)
		size += len_field(sample->stack_id->size);
	if (sample->kernel_id)
		size += len_field(sample->kernel_id->size);
	if (sample->pid)
		size += 1 + varint_size(*sample->pid);
	if (sample->tid)
		size += 1 + varint_size(*sample->tid);
	if (sample->count)
		size += 1 + varint_size(*sample->count);
	if (sample->profile_type)
		size += 1 + varint_size((uint64_t)*sample->profile_type);
	if (sample->off_cpu_nanos)
		size += 1 + varint_size(*sample->off_cpu_nanos);
	if (sample->process_start_ticks)
		size += 1 + varint_size(*sample->process_start_ticks);
	if (sample->start_time_unix_nano)
		size += 9;
	if (sample->end_time_unix_nano)
		size += 9;
	if (sample->thread_name)
		size += len_field(strlen(sample->thread_name));
	if (sample->process_name)
		size += len_field(strlen(sample->process_name));
	if (sample->executable_path)
		size += len_field(strlen(sample->executable_path));
	if (sample->container_id)
		size += len_field(strlen(sample->container_id));
	if (sample->pod_uid)
		size += len_field(strlen(sample->pod_uid));
	/* The decoded struct and its per-field allocations cost about as much again. */
	return sizeof(*sample) + 2 * size;
}

uint64_t agent_sender_sample_count(const stackrelay_v1_Sample *sample)
{
	return sample->count ? *sample->count : 0;
}

static void samples_release(stackrelay_v1_Sample *samples, size_t n)
{
	for (size_t i = 0; i < n; i++)
		pb_release(stackrelay_v1_Sample_fields, &samples[i]);
}

void agent_sender_chunk_free(struct chunk *c)
{
	if (!c)
		return;
	samples_release(c->samples, c->n);
	free(c->samples);
	free(c);
}

static void add_drops(uint64_t dst[4], const uint64_t src[4])
{
	for (int i = 0; i < 4; i++)
		dst[i] += src[i];
}

/* Counts and frees a chunk that will never be sent. Called with mu held. */
void agent_sender_drop_chunk_locked(struct agent_sender *s, struct chunk *c, enum drop_reason why)
{
	uint64_t *counter[] = {
		[DROP_BUFFER_FULL] = &s->details.dropped_buffer_full,
		[DROP_FLUSH_TIMEOUT] = &s->details.dropped_flush_timeout,
		[DROP_DEFINITION_LOST] = &s->details.dropped_definition_lost,
		[DROP_REJECTED] = &s->details.dropped_rejected,
	};

	*counter[why] += c->count;
	s->stats.samples_dropped += c->count;
	if (why == DROP_FLUSH_TIMEOUT)
		s->flush_dropped += c->count;
	s->buffered_bytes -= c->bytes;
	s->buffered_samples -= c->count;
	/* The relayed pre-aggregation drop counters are not samples: keep them for the next request. */
	if (c->has_drops) {
		add_drops(s->pending_drops, c->drops);
		s->has_pending_drops = true;
	}
	agent_sender_chunk_free(c);
}

/* Counts samples that leave a chunk some other way than whole. Called with mu held. */
void agent_sender_count_gone_locked(struct agent_sender *s, uint64_t count, uint64_t bytes, int why)
{
	s->buffered_bytes -= bytes;
	s->buffered_samples -= count;
	if (why < 0) {
		s->stats.samples_accepted += count;
		return;
	}
	s->stats.samples_dropped += count;
	switch (why) {
	case DROP_BUFFER_FULL:
		s->details.dropped_buffer_full += count;
		break;
	case DROP_FLUSH_TIMEOUT:
		s->details.dropped_flush_timeout += count;
		s->flush_dropped += count;
		break;
	case DROP_DEFINITION_LOST:
		s->details.dropped_definition_lost += count;
		break;
	default:
		s->details.dropped_rejected += count;
		break;
	}
}

int agent_sender__submit(struct agent_sender *s, struct agent_batch *b)
{
	struct chunkq fresh = TAILQ_HEAD_INITIALIZER(fresh);
	uint64_t drops[4] = { 0 }, total_count = 0, total_bytes = 0, dropped = 0;
	bool any_drops = false;
	size_t i = 0;
	int r = 0;

	if (!s || !b)
		return -EINVAL;
	TAILQ_INIT(&fresh);
	if (b->drops.ring_buffer_full)
		drops[0] = *b->drops.ring_buffer_full;
	if (b->drops.stack_errors)
		drops[1] = *b->drops.stack_errors;
	if (b->drops.buffer_overflow)
		drops[2] = *b->drops.buffer_overflow;
	if (b->drops.process_unknown)
		drops[3] = *b->drops.process_unknown;
	any_drops = drops[0] || drops[1] || drops[2] || drops[3];

	/* Cut into chunks outside the lock: this is the only real work submit does. */
	while (i < b->n_samples) {
		struct chunk *c = calloc(1, sizeof(*c));
		size_t start = i;

		if (!c) {
			r = -ENOMEM;
			break;
		}
		while (i < b->n_samples && (i == start || c->bytes < AGENT_SENDER_CHUNK_BYTES)) {
			c->bytes += agent_sender_sample_bytes(&b->samples[i]);
			c->count += agent_sender_sample_count(&b->samples[i]);
			i++;
		}
		c->samples = malloc((i - start) * sizeof(*c->samples));
		if (!c->samples) {
			free(c);
			i = start;
			r = -ENOMEM;
			break;
		}
		memcpy(c->samples, &b->samples[start], (i - start) * sizeof(*c->samples));
		c->n = i - start;
		c->frequency_hz = b->frequency_hz;
		c->window = b->window;
		total_count += c->count;
		total_bytes += c->bytes;
		TAILQ_INSERT_TAIL(&fresh, c, link);
	}
	/* Whatever could not be queued (out of memory) is dropped here, counted. */
	for (size_t j = i; j < b->n_samples; j++) {
		dropped += agent_sender_sample_count(&b->samples[j]);
		pb_release(stackrelay_v1_Sample_fields, &b->samples[j]);
	}
	free(b->samples);
	b->samples = NULL;
	b->n_samples = 0;
	b->total_count = 0;
	pb_release(stackrelay_v1_DropCounters_fields, &b->drops);
	memset(&b->drops, 0, sizeof(b->drops));

	pthread_mutex_lock(&s->mu);
	s->details.samples_submitted += total_count + dropped;
	s->stats.samples_dropped += dropped;
	s->details.dropped_buffer_full += dropped;
	if (any_drops) {
		add_drops(s->pending_drops, drops);
		s->has_pending_drops = true;
	}
	s->buffered_bytes += total_bytes;
	s->buffered_samples += total_count;
	TAILQ_CONCAT(&s->queue, &fresh, link);
	/* Drop-oldest: the head (being sent or retried) is kept, see the file comment. */
	while (s->buffered_bytes > s->buffer_limit && !TAILQ_EMPTY(&s->queue)) {
		struct chunk *c = TAILQ_FIRST(&s->queue);

		TAILQ_REMOVE(&s->queue, c, link);
		dropped += c->count;
		agent_sender_drop_chunk_locked(s, c, DROP_BUFFER_FULL);
	}
	if (dropped) {
		uint64_t now = agent_sender_now_ns();

		if (!s->last_full_log_ns || now - s->last_full_log_ns >= 60 * SR_NSEC_PER_SEC) {
			s->last_full_log_ns = now;
			sr_log_warn(LOG_COMPONENT, "send buffer full, dropping the oldest samples",
				    "dropped_total=%" PRIu64 " buffer_bytes=%" PRIu64, s->details.dropped_buffer_full,
				    s->buffer_limit);
		}
	}
	pthread_cond_signal(&s->wake);
	pthread_mutex_unlock(&s->mu);
	return r;
}

/* Takes the oldest queued chunks (same frequency, never resends) as the next request. Called with mu held. */
struct chunk *agent_sender_form_head_locked(struct agent_sender *s)
{
	struct chunk *h = TAILQ_FIRST(&s->queue), *c;
	size_t cap = 0; /* room in h->samples as far as known: chunks are allocated to fit */

	if (!h) {
		if (!s->has_pending_drops)
			return NULL;
		/* Only drop counters to relay: an empty request carries them. */
		h = calloc(1, sizeof(*h));
		if (!h)
			return NULL;
		h->window = UINT64_MAX; /* no samples: no stacks to keep */
	} else {
		TAILQ_REMOVE(&s->queue, h, link);
		while (h->rounds == 0 && (c = TAILQ_FIRST(&s->queue)) && c->rounds == 0 &&
		       c->frequency_hz == h->frequency_hz &&
		       h->bytes + c->bytes <= AGENT_SENDER_REQUEST_SAMPLE_BYTES * 2) {
			if (sr_grow((void **)&h->samples, &cap, h->n + c->n, sizeof(*h->samples), 64) < 0)
				break;
			TAILQ_REMOVE(&s->queue, c, link);
			memcpy(h->samples + h->n, c->samples, c->n * sizeof(*h->samples));
			h->n += c->n;
			h->count += c->count;
			h->bytes += c->bytes;
			h->window = SR_MIN(h->window, c->window);
			free(c->samples);
			if (c->has_drops) {
				add_drops(s->pending_drops, c->drops);
				s->has_pending_drops = true;
			}
			free(c);
		}
	}
	if (s->has_pending_drops) {
		add_drops(h->drops, s->pending_drops);
		h->has_drops = true;
		memset(s->pending_drops, 0, sizeof(s->pending_drops));
		s->has_pending_drops = false;
	}
	s->head = h;
	return h;
}

/* Splits the head in two for a 413; a single sample too large is rejected. */
void agent_sender_split_head(struct agent_sender *s, struct chunk *h)
{
	struct chunk *second;
	size_t half = h->n / 2;

	pthread_mutex_lock(&s->mu);
	s->head = NULL;
	if (h->n < 2 || !(second = calloc(1, sizeof(*second)))) {
		agent_sender_drop_chunk_locked(s, h, DROP_REJECTED);
		pthread_mutex_unlock(&s->mu);
		return;
	}
	second->samples = malloc((h->n - half) * sizeof(*second->samples));
	if (!second->samples) {
		free(second);
		agent_sender_drop_chunk_locked(s, h, DROP_REJECTED);
		pthread_mutex_unlock(&s->mu);
		return;
	}
	memcpy(second->samples, h->samples + half, (h->n - half) * sizeof(*second->samples));
	second->n = h->n - half;
	h->n = half;
	second->count = second->bytes = 0;
	for (size_t i = 0; i < second->n; i++) {
		second->count += agent_sender_sample_count(&second->samples[i]);
		second->bytes += agent_sender_sample_bytes(&second->samples[i]);
	}
	h->count -= second->count;
	h->bytes -= second->bytes;
	second->frequency_hz = h->frequency_hz;
	second->window = h->window;
	second->rounds = h->rounds;
	/* Split halves must not merge back; rounds > 0 keeps them apart. The 413 was not processed: new sequences. */
	if (!h->rounds)
		h->rounds = second->rounds = 1;
	h->seq = 0;
	TAILQ_INSERT_HEAD(&s->queue, second, link);
	TAILQ_INSERT_HEAD(&s->queue, h, link);
	pthread_mutex_unlock(&s->mu);
}

/* Flush ran out of time (or shutdown): everything still here is dropped, counted. Called with mu held. */
void agent_sender_drop_all_locked(struct agent_sender *s)
{
	struct chunk *c;

	if (s->head) {
		agent_sender_drop_chunk_locked(s, s->head, DROP_FLUSH_TIMEOUT);
		s->head = NULL;
	}
	while ((c = TAILQ_FIRST(&s->queue))) {
		TAILQ_REMOVE(&s->queue, c, link);
		agent_sender_drop_chunk_locked(s, c, DROP_FLUSH_TIMEOUT);
	}
	s->details.symbol_tables_dropped += s->n_symjobs;
	agent_sender_probe_done_locked(s);
	/* Not uploaded after all: if the gateway asks again, try again. */
	for (size_t i = 0; i < s->n_symjobs; i++)
		agent_idset_del(&s->symdone, AGENT_ID_SYMBOLS, s->symjobs[i].id, s->symjobs[i].len);
	s->n_symjobs = 0;
}
