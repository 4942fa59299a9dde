// SPDX-License-Identifier: Apache-2.0
/*
 * Times the agent receiver's request processing (gateway/receivers/
 * agent-ingest.c) in CPU time of one core, without the network: a PushRequest of
 * --samples sample records over --stacks known stacks (definitions already in
 * the stores, as in steady state) is decoded, looked up and turned into a
 * batch --iterations times. Prints sample records/s and CPU samples/s
 * (records × their mean count), the same with the batch merged into a
 * running batch (what the batch processor adds), and the request of an agent
 * on a new connection: the same samples with every stack defined again
 * (stored already: checked, not rebuilt).
 *
 * Then the same samples as the OTel eBPF profiler sends them over OTLP
 * (receivers/otlp-decode.h), in v1.10 and v1.9: one
 * ExportProfilesServiceRequest whose dictionary carries every stack and
 * location (OTLP has no definitions kept between requests), samples with
 * thread attributes and one timestamp per CPU sample, decoded into a batch
 * --iterations times with version detection. Prints the same figures and
 * the ratio to the agent protocol's.
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
#include "common/pbwire.h"
#include "receivers/agent-ingest.h"
#include "receivers/otlp-decode.h"

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

/*
 * The CPU time of this thread: rates per core that hold on a machine shared
 * with other work (wall time would count the time other processes ran).
 */
static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The request of the OTLP half: the OTel profiler's shape, same samples, stacks and frames as the agent's. */
static void otlp_request(struct sr_pbw *w, bool v19, unsigned samples, unsigned stacks, unsigned depth,
			 uint64_t *ret_counts)
{
	enum {
		S_SAMPLES = 1,
		S_COUNT,
		S_CPU,
		S_NS,
		S_LIB,
		S_BID_KEY,
		S_BID0,
		S_TN_KEY = S_BID0 + 8,
		S_TID_KEY,
		S_FT_KEY
	};
	/* attribute_table: 0, build IDs 1-8, frame type 9, thread names 10-25, thread ids 26-225 */
	const int32_t a_bid0 = 1, a_native = 9, a_tn0 = 10, a_tid0 = 26;
	size_t rp = sr_pbw__begin(w, 1), m, v, d;
	uint64_t counts = 0, t = 1700000000000000000ULL;
	char str[64];

	m = sr_pbw__begin(w, 1);
	v = sr_pbw__begin(w, 1);
	sr_pbw__string(w, 1, "service.name");
	d = sr_pbw__begin(w, 2);
	sr_pbw__string(w, 1, "app");
	sr_pbw__end(w, d);
	sr_pbw__end(w, v);
	sr_pbw__end(w, m);
	size_t sp = sr_pbw__begin(w, 2), pr = sr_pbw__begin(w, 2);
	m = sr_pbw__begin(w, 1);
	sr_pbw__int(w, 1, S_SAMPLES);
	sr_pbw__int(w, 2, S_COUNT);
	sr_pbw__end(w, m);
	for (unsigned i = 0; i < samples; i++) {
		int32_t attrs[2] = { a_tn0 + (int32_t)(i % 16), a_tid0 + (int32_t)(i % 200) };
		unsigned n = 1 + i % 4;
		m = sr_pbw__begin(w, 2);
		sr_pbw__int(w, 1, 1 + (i * 7919u) % stacks);
		sr_pbw__packed_i32(w, v19 ? 3 : 2, attrs, 2);
		v = sr_pbw__begin(w, 5);
		for (unsigned k = 0; k < n; k++)
			sr_pbw__put_fixed64(w, t + i * 1000 + k);
		sr_pbw__end(w, v);
		sr_pbw__end(w, m);
		counts += n;
	}
	sr_pbw__fixed64(w, 3, t);
	sr_pbw__uint(w, 4, 5000000000ULL);
	m = sr_pbw__begin(w, 5);
	sr_pbw__int(w, 1, S_CPU);
	sr_pbw__int(w, 2, S_NS);
	sr_pbw__end(w, m);
	sr_pbw__int(w, 6, 1000000000 / 19);
	sr_pbw__end(w, pr);
	sr_pbw__end(w, sp);
	sr_pbw__end(w, rp);

	d = sr_pbw__begin(w, 2);
	sr_pbw__end(w, sr_pbw__begin(w, 1));
	for (int e = 0; e < 8; e++) {
		m = sr_pbw__begin(w, 1);
		sr_pbw__int(w, 4, S_LIB);
		sr_pbw__packed_i32(w, 5, &(int32_t){ a_bid0 + e }, 1);
		sr_pbw__end(w, m);
	}
	sr_pbw__end(w, sr_pbw__begin(w, 2));
	for (unsigned s = 0; s < stacks; s++)
		for (unsigned k = 0; k < depth; k++) {
			m = sr_pbw__begin(w, 2);
			sr_pbw__int(w, 1, 1 + (s + k) % 8);
			sr_pbw__uint(w, 2, 0x400000 + (uint64_t)s * 97 + k * 13);
			sr_pbw__packed_i32(w, 4, &a_native, 1);
			sr_pbw__end(w, m);
		}
	sr_pbw__end(w, sr_pbw__begin(w, 3));
	sr_pbw__end(w, sr_pbw__begin(w, 4));
	const char *fixed[] = {
		"", "samples", "count", "cpu", "nanoseconds", "libfoo.so", "process.executable.build_id.gnu"
	};
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		sr_pbw__bytes_always(w, 5, fixed[i], strlen(fixed[i]));
	for (int e = 0; e < 8; e++) {
		snprintf(str, sizeof(str), "%02x000000000000000000000000000000000000005a", e);
		sr_pbw__string(w, 5, str);
	}
	sr_pbw__string(w, 5, "thread.name");
	sr_pbw__string(w, 5, "thread.id");
	sr_pbw__string(w, 5, "profile.frame.type");
	sr_pbw__string(w, 5, "native");
	sr_pbw__end(w, sr_pbw__begin(w, 6));
	for (int i = 0; i < 8 + 1 + 16 + 200; i++) {
		m = sr_pbw__begin(w, 6);
		sr_pbw__int(w, 1, i < 8 ? S_BID_KEY : i == 8 ? S_FT_KEY : i < 25 ? S_TN_KEY : S_TID_KEY);
		v = sr_pbw__begin(w, 2);
		if (i < 8)
			snprintf(str, sizeof(str), "%02x000000000000000000000000000000000000005a", i);
		else if (i == 8)
			snprintf(str, sizeof(str), "native");
		else if (i < 25)
			snprintf(str, sizeof(str), "worker-%d", i - 9);
		if (i < 25)
			sr_pbw__string(w, 1, str);
		else
			sr_pbw__int(w, 3, 2000 + i - 25);
		sr_pbw__end(w, v);
		sr_pbw__end(w, m);
	}
	sr_pbw__end(w, sr_pbw__begin(w, 7));
	for (unsigned s = 0; s < stacks; s++) {
		m = sr_pbw__begin(w, 7);
		v = sr_pbw__begin(w, 1);
		for (unsigned k = 0; k < depth; k++)
			sr_pbw__varint(w, 1 + (uint64_t)s * depth + k);
		sr_pbw__end(w, v);
		sr_pbw__end(w, m);
	}
	sr_pbw__end(w, d);
	*ret_counts = counts;
}

/* Processes body `iterations` times (sequences from first_seq), each accepting every sample: 0, or -1 said. */
static int ingest_times(struct gw_stores *st, const struct buf *body, uint64_t first_seq, unsigned iterations,
			uint64_t counts, const char *what)
{
	struct gw_ingest_result res;
	char err[256] = "";

	for (unsigned it = 0; it < iterations; it++) {
		if (gw_ingest_process(st, NULL, body->p, body->len, first_seq + it, &res, err, sizeof(err)) < 0 ||
		    res.accepted != counts) {
			fprintf(stderr, "%s failed: %s\n", what, err);
			return -1;
		}
		gw_ingest_result_free(&res);
	}
	return 0;
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
	if (gw_ingest_process(st, NULL, defs.p, defs.len, 1, &res, err, sizeof(err)) < 0) {
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
	if (ingest_times(st, &req, 2, iterations, counts, "ingest") < 0)
		return 1;
	double t1 = now();
	struct gw_profiles *acc = gw_profiles_new();
	for (unsigned it = 0; it < iterations; it++) {
		gw_ingest_process(st, NULL, req.p, req.len, 100000 + it, &res, err, sizeof(err));
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
	/* An agent on a new connection: the same samples with every stack and executable defined again. */
	struct buf again = { 0 };
	put(&again, req.p, req.len);
	put(&again, defs.p, defs.len);
	if (ingest_times(st, &again, 200000, iterations, counts, "ingest with definitions") < 0)
		return 1;
	double t3 = now();
	double rec = (double)samples * iterations;
	double agent_rate = (double)counts * iterations / (t1 - t0);
	printf("request: %u sample records (%llu CPU samples), %zu bytes; %u stacks of depth %u known\n", samples,
	       (unsigned long long)counts, req.len, stacks, depth);
	printf("ingest:          %.0f records/s, %.0f CPU samples/s, %.1f MB/s of protobuf\n", rec / (t1 - t0),
	       (double)counts * iterations / (t1 - t0), (double)req.len * iterations / (t1 - t0) / 1e6);
	printf("ingest + merge:  %.0f records/s, %.0f CPU samples/s\n", rec / (t2 - t1),
	       (double)counts * iterations / (t2 - t1));
	printf("ingest, %u stacks defined again (a new connection): %.0f records/s, %.2fx the time of samples only\n",
	       stacks, rec / (t3 - t2), (t3 - t2) / (t1 - t0));

	/* v1.10 and v1.9 detected from the bytes (version: auto), then v1.10 set (no detection pass). */
	for (int run = 0; run < 3; run++) {
		const bool v19 = run == 1;
		const struct gw_otlp_decode_options oo = { .version = run == 2 ? GW_OTLP_DECODE_V1_10
									       : GW_OTLP_DECODE_AUTO };
		struct sr_pbw ow = { 0 };
		struct gw_otlp_decode_result ores;
		uint64_t ocounts;

		otlp_request(&ow, v19, samples, stacks, depth, &ocounts);
		double u0 = now();
		for (unsigned it = 0; it < iterations; it++) {
			if (gw_otlp_decode(st, ow.buf, ow.len, &oo, &ores) != GW_OTLP_DECODE_OK ||
			    ores.accepted != ocounts ||
			    ores.version != (v19 ? GW_OTLP_DECODE_V1_9 : GW_OTLP_DECODE_V1_10)) {
				fprintf(stderr, "otlp decode failed: %s\n", ores.message);
				return 1;
			}
			gw_otlp_decode_result_fini(&ores);
		}
		double u1 = now();
		printf("otlp %-14s %.0f records/s, %.0f CPU samples/s, %.1f MB/s of protobuf (%zu bytes, "
		       "dictionary included); %.2fx the agent protocol's CPU samples/s\n",
		       run == 0	  ? "v1.10 (auto):"
		       : run == 1 ? "v1.9 (auto):"
				  : "v1.10 (set):",
		       rec / (u1 - u0), (double)ocounts * iterations / (u1 - u0),
		       (double)ow.len * iterations / (u1 - u0) / 1e6, ow.len,
		       (double)ocounts * iterations / (u1 - u0) / agent_rate);
		sr_pbw__free(&ow);
	}
	free(defs.p);
	free(again.p);
	free(req.p);
	free(m.p);
	free(f.p);
	gw_stores_free(st);
	return 0;
}
