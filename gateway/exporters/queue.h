/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The exporters' sending queue (docs/exporters.md, "Sending queue"): a FIFO
 * of encoded requests, bounded by bytes, in memory or — when a storage
 * directory is set — on disk, crash-safely:
 *
 *   push   writes <dir>/.<seq>.tmp, fsync()s it, renames it to <seq>.srq and
 *          fsync()s the directory before returning, so a batch acknowledged
 *          upstream survives kill -9 and power loss;
 *   open   replays every <seq>.srq in order, deletes stale .tmp files (never
 *          acknowledged), and takes an exclusive lock on <dir>/lock so two
 *          gateways cannot share a directory;
 *   pop    loads an item's bytes (disk items are read only when sent, so the
 *          queue's memory is what is in flight); a file whose header or
 *          checksum is wrong is renamed to <name>.corrupt, kept for
 *          inspection, and reported as an error.
 *
 * When the disk cannot take an item (ENOSPC, EDQUOT, EIO, EROFS...), push
 * keeps it in memory instead ("held") and the queue is failing: later pushes
 * are held without touching the disk, until retry_disk() writes every held
 * item (or, with none held, a probe file as large as the write that failed)
 * and the disk is taken back. Held items are sent like any other; what the
 * owner does meanwhile (refuse new data, bound the memory) is its business.
 *
 * File format (little endian): "SRQ1", u32 format 1, u32 flags, u32
 * metadata length, u64 samples, u64 payload length, u32 crc32(metadata and
 * payload), u32 crc32(first 36 header bytes), metadata, payload. The
 * metadata ("name: value\n" header lines a batch processor's metadata_keys
 * kept, e.g. the tenant) is sent with the request; files written before it
 * existed have length 0 there.
 *
 * Library code: no logging; errors are returned with enough to log.
 */
#ifndef SR_GW_QUEUE_H
#define SR_GW_QUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GW_QUEUE_HEADER_SIZE 40
/* Item flags, stored with the item. */
#define GW_QUEUE_GZIP	   (1u << 0) /* payload is gzip-compressed */
#define GW_QUEUE_OTLP_V1_9 (1u << 1) /* payload is an OTLP v1.9 request (else v1.10) */
/* A file larger than this is not a queue item (corrupt). */
#define GW_QUEUE_ITEM_MAX_BYTES (1ULL << 30)
/* Most bytes of an item's metadata. */
#define GW_QUEUE_METADATA_MAX 16384

struct gw_queue;

struct gw_queue_item {
	struct gw_queue_item *prev, *next; /* private */
	uint64_t seq;
	uint64_t samples; /* sample count (sum of values) inside */
	uint32_t flags;
	uint8_t *data;	/* loaded while popped; NULL otherwise for disk items */
	size_t len;	/* payload length */
	char *metadata; /* header lines sent with it ("Name: value\n"...), NULL: none; kept in memory */
	uint32_t metadata_len;
	bool in_flight;
	bool held; /* persistent queue: in memory only, the disk could not take it */
	/* for the owner of a popped item */
	void *userdata;
};

struct gw_queue_config {
	uint64_t max_bytes;	 /* queue_size_mib */
	const char *storage_dir; /* NULL: memory only */
};

/* Replay report of open(). */
struct gw_queue_replay {
	uint64_t items, samples, bytes;
	uint64_t corrupt_files;	  /* renamed to .corrupt */
	uint64_t stale_tmp_files; /* deleted */
};

/*
 * NULL + errno on failure; *ret_what (may be NULL) names the failing step
 * ("mkdir", "lock", "opendir") for the caller's message. EBUSY: another
 * process holds the lock.
 */
struct gw_queue *gw_queue_open(const struct gw_queue_config *cfg, struct gw_queue_replay *ret_replay,
			       const char **ret_what);
/* Frees memory, popped items included; persistent items stay on disk. NULL is fine. */
void gw_queue_close(struct gw_queue *q);

/* gw_queue__push(): queued, but in memory only (the disk could not take it). */
#define GW_QUEUE_HELD 1
/*
 * Appends an item; takes ownership of data (malloc'd) in every case;
 * metadata (NULL: none; at most GW_QUEUE_METADATA_MAX bytes) is copied.
 * Persistent: durable when it returns 0; GW_QUEUE_HELD when the disk could
 * not take it (or is failing already) and it is queued in memory instead
 * (gw_queue__disk_error() says why). -ENOMEM or -EFBIG (over
 * GW_QUEUE_ITEM_MAX_BYTES): not queued, data freed.
 */
int gw_queue__push(struct gw_queue *q, uint8_t *data, size_t len, uint64_t samples, uint32_t flags,
		   const char *metadata);
/*
 * Takes the oldest waiting item for sending (its data loaded). NULL when none
 * waits. A corrupt file is moved aside and its sample count (0 when unknown)
 * added to *ret_corrupt_samples; pop then goes on with the next item.
 * *ret_corrupt_path (may be NULL) receives the path of the last moved file
 * (valid until the next call).
 */
struct gw_queue_item *gw_queue__pop(struct gw_queue *q, uint64_t *ret_corrupt_samples, const char **ret_corrupt_path);
/* The item is finished (delivered or dropped): deleted from disk and freed. */
void gw_queue__done(struct gw_queue *q, struct gw_queue_item *it);
/* A popped item goes back to the head, e.g. when shutting down mid-retry. */
void gw_queue__unpop(struct gw_queue *q, struct gw_queue_item *it);
/* Removes the oldest waiting item (drop-oldest on overflow); NULL when none waits. Call done() after accounting. */
struct gw_queue_item *gw_queue__take_oldest(struct gw_queue *q);
/* The same among held items only (memory to give back); NULL when none is held and waiting. */
struct gw_queue_item *gw_queue__take_oldest_held(struct gw_queue *q);

/* -errno of the disk write that failed and made the queue hold items, 0 while the disk takes them. */
int gw_queue__disk_error(const struct gw_queue *q);
/* Items held in memory for want of disk (waiting and in flight), and their bytes. */
size_t gw_queue__held(const struct gw_queue *q);
uint64_t gw_queue__held_bytes(const struct gw_queue *q);
/*
 * Tries the disk again: writes the held items (in flight, then waiting),
 * or, when none is held, a probe file (.probe.tmp, as large as the write
 * that failed, fsync'ed, then deleted). 0: every write succeeded, the disk
 * is taken back (disk_error 0); an item written in flight keeps its bytes
 * until done. Else the -errno of the first failure; what was not written
 * stays held. 0 at once on a memory queue, or with nothing held and a disk
 * that is not failing.
 */
int gw_queue__retry_disk(struct gw_queue *q);

/* Bytes held: payloads waiting and in flight (on disk: file sizes). */
uint64_t gw_queue__bytes(const struct gw_queue *q);
uint64_t gw_queue__max_bytes(const struct gw_queue *q);
size_t gw_queue__waiting(const struct gw_queue *q);
size_t gw_queue__in_flight(const struct gw_queue *q);
/* Sum of samples in items waiting and in flight. */
uint64_t gw_queue__samples(const struct gw_queue *q);
bool gw_queue__persistent(const struct gw_queue *q);

#endif
