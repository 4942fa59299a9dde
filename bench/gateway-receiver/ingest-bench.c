// SPDX-License-Identifier: Apache-2.0
/*
 * Times the agent receiver's request processing (gateway/receivers/
 * agent-ingest.c) on one core, without the network: a PushRequest of
 * --samples sample records over --stacks known stacks (definitions already in
 * the stores, as in steady state) is decoded, looked up and turned into a
 * batch --iterations times. Prints sample records/s and CPU samples/s
 * (records × their mean count), and the same with the batch merged into a
 * running batch (what the batch processor adds).
 *
 *   ingest-bench [--samples N] [--stacks N] [--depth N] [--iterations N]
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/model.h"
#include "receivers/agent-ingest.h"

struct buf {
	uint8_t *p;
	size_t len, cap;
};

static void put(struct buf *b, const void *d, size_t n)
{
	if (b->len + n > b->cap) {
		b->cap = (b->len + n) * 2;
		b->p = realloc(b->p, b->cap);
		if (!b->p)
			abort();
	}
	memcpy(b->p + b->len, d, n);
	b->len += n;
}

static void varint(struct buf *b, uint64_t v)
{
	uint8_t t[10];
	size_t n = 0;
	do {
		t[n] = v & 0x7f;
		v >>= 7;
		if (v)
			t[n] |= 0x80;
		n++;
	} while (v);
	put(b, t, n);
}

static void field_bytes(struct buf *b, uint32_t f, const void *d, size_t n)
{
	varint(b, (f << 3) | 2);
	varint(b, n);
	put(b, d, n);
}

static void field_msg(struct buf *b, uint32_t f, struct buf *m)
{
	field_bytes(b, f, m->p, m->len);
	m->len = 0;
}

static void field_varint(struct buf *b, uint32_t f, uint64_t v)
{
	varint(b, f << 3);
	varint(b, v);
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	unsigned samples = 10000, stacks = 2000, depth = 24, iterations = 200;
	static const struct option opts[] = {
		{ "samples", required_argument, NULL, 's' },
		{ "stacks", required_argument, NULL, 't' },
		{ "depth", required_argument, NULL, 'd' },
		{ "iterations", required_argument, NULL, 'i' },
		{ 0 },
	};
	int o;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 's':
			samples = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 't':
			stacks = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'd':
			depth = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'i':
			iterations = (unsigned)strtoul(optarg, NULL, 10);
			break;
		default:
			fprintf(stderr,
				"usage: ingest-bench [--samples N] [--stacks N] [--depth N] [--iterations N]\n");
			return 2;
		}
	}

	struct gw_stores *st = gw_stores_new(NULL);
	struct buf defs = { 0 }, req = { 0 }, m = { 0 }, f = { 0 };
	uint8_t exe[8][20];
	for (int e = 0; e < 8; e++) {
		memset(exe[e], 0, 20);
		exe[e][0] = (uint8_t)e;
		exe[e][19] = 0x5a;
		field_bytes(&m, 1, exe[e], 20);
		field_varint(&m, 2, 1);
		field_bytes(&m, 3, "libfoo.so", 9);
		field_msg(&defs, 7, &m);
	}
	for (unsigned s = 0; s < stacks; s++) {
		uint8_t id[16] = { 0 };
		memcpy(id, &s, sizeof(s));
		field_bytes(&m, 1, id, 16);
		for (unsigned d = 0; d < depth; d++) {
			field_bytes(&f, 1, exe[(s + d) % 8], 20);
			field_varint(&f, 2, 0x400000 + (uint64_t)s * 97 + d * 13);
			field_varint(&f, 3, 1);
			field_msg(&m, 2, &f);
		}
		field_msg(&defs, 6, &m);
	}
	/* Steady state: definitions are known; requests carry samples only. */
	struct gw_ingest_result res;
	char err[256];
	field_varint(&req, 1, 1);
	if (gw_ingest_process(st, defs.p, defs.len, 1, &res, err, sizeof(err)) < 0) {
		fprintf(stderr, "definitions: %s\n", err);
		return 1;
	}
	gw_ingest_result_free(&res);
	uint64_t counts = 0;
	for (unsigned i = 0; i < samples; i++) {
		uint8_t id[16] = { 0 };
		unsigned s = (i * 7919u) % stacks;
		char tn[16];
		memcpy(id, &s, sizeof(s));
		field_bytes(&m, 1, id, 16);
		field_varint(&m, 2, 1000 + i % 50);
		field_varint(&m, 3, 2000 + i % 200);
		snprintf(tn, sizeof(tn), "worker-%u", i % 16);
		field_bytes(&m, 4, tn, strlen(tn));
		field_bytes(&m, 5, "app", 3);
		field_bytes(&m, 6, "/usr/bin/app", 12);
		field_varint(&m, 8, 1 + i % 4);
		counts += 1 + i % 4;
		field_msg(&req, 5, &m);
	}

	double t0 = now();
	for (unsigned it = 0; it < iterations; it++) {
		if (gw_ingest_process(st, req.p, req.len, 2 + it, &res, err, sizeof(err)) < 0 ||
		    res.accepted != counts) {
			fprintf(stderr, "ingest failed: %s\n", err);
			return 1;
		}
		gw_ingest_result_free(&res);
	}
	double t1 = now();
	struct gw_profiles *acc = gw_profiles_new();
	for (unsigned it = 0; it < iterations; it++) {
		gw_ingest_process(st, req.p, req.len, 100000 + it, &res, err, sizeof(err));
		gw_profiles__merge(acc, res.batch);
		res.batch = NULL;
		gw_ingest_result_free(&res);
		if (acc->n_samples > 200000) {
			gw_profiles__unref(acc);
			acc = gw_profiles_new();
		}
	}
	double t2 = now();
	gw_profiles__unref(acc);
	double rec = (double)samples * iterations;
	printf("request: %u sample records (%llu CPU samples), %zu bytes; %u stacks of depth %u known\n", samples,
	       (unsigned long long)counts, req.len, stacks, depth);
	printf("ingest:          %.0f records/s, %.0f CPU samples/s, %.1f MB/s of protobuf\n", rec / (t1 - t0),
	       (double)counts * iterations / (t1 - t0), (double)req.len * iterations / (t1 - t0) / 1e6);
	printf("ingest + merge:  %.0f records/s, %.0f CPU samples/s\n", rec / (t2 - t1),
	       (double)counts * iterations / (t2 - t1));
	free(defs.p);
	free(req.p);
	free(m.p);
	free(f.p);
	gw_stores_free(st);
	return 0;
}
