// SPDX-License-Identifier: Apache-2.0
/*
 * bench/gateway-throughput (README: "Gateway export"): the export half of
 * the gateway's hot path on one core, without network — batches of the
 * internal model encoded as OTLP profiles requests (dictionary building and
 * de-duplication included), then gzip, as otlp_http does on its worker.
 * Side by side, the same request encoded by nanopb's generic pb_encode from
 * a decoded message tree (the obvious alternative), so the ratio means
 * something on any machine.
 *
 * Usage: export-bench [BATCHES] — prints records/s, CPU samples/s, bytes
 * per sample out (protobuf, gzip), gzip and gunzip speed against zlib's,
 * and peak RSS.
 *
 * export-bench BATCHES --fleet: the dictionary of a fleet's gateway instead
 * (the fleet soak's shape, bench/fleet): a million symbolized locations in
 * 250 executables, 200,000 stacks of 6 to 28 frames drawn from them, and
 * requests of 8,192 records of random stacks over 64 resources. Each request
 * then names tens of thousands of locations spread over the heap: the
 * encoder's cache misses and its maps' growth, not its arithmetic, are what
 * this measures. No references are run beside it.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <pb_decode.h>
#include <pb_encode.h>
#include <zlib.h>

#include "core/model.h"
#include "exporters/exporthelper.h"
#include "exporters/otlp-encode.h"
#include "common/gzip.h"
#include "common/pbwire.h"

#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb.h"

#define N_STACKS  2000
#define DEPTH	  24
#define N_FUNCS	  3000
#define RECORDS	  10000
#define RESOURCES 8

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static struct gw_stack *stacks[N_STACKS];

/* --fleet */
#define FLEET_EXES	250
#define FLEET_SYMBOLS	256 /* per executable, 16 addresses each */
#define FLEET_STACKS	200000
#define FLEET_RECORDS	8192
#define FLEET_RESOURCES 64
static struct gw_stack **fleet_stacks;

static uint32_t rnd(uint32_t *seed)
{
	*seed = *seed * 1103515245 + 12345;
	return *seed >> 8;
}

static void make_fleet_stacks(struct gw_stores *s)
{
	struct gw_executable *exes[FLEET_EXES];
	uint32_t seed = 7;

	fleet_stacks = calloc(FLEET_STACKS, sizeof(*fleet_stacks));
	for (int e = 0; e < FLEET_EXES; e++) {
		uint8_t id[20] = { 0 };
		char name[32], path[48];
		struct gw_executable_def def = { .id = id,
						 .id_len = 20,
						 .id_kind = GW_EXE_ID_GNU_BUILD_ID,
						 .file_name = name,
						 .path = path,
						 .gnu_build_id = id,
						 .gnu_build_id_len = 20 };

		memcpy(id, &e, sizeof(e));
		snprintf(name, sizeof(name), "svc%d", e);
		snprintf(path, sizeof(path), "/app/svc%d", e);
		exes[e] = gw_stores__intern_executable(s, &def);
	}
	for (int i = 0; i < FLEET_STACKS; i++) {
		struct gw_location *locs[28];
		uint32_t depth = 6 + rnd(&seed) % 23, e = rnd(&seed) % FLEET_EXES;
		uint8_t sid[16] = { 0 };

		for (uint32_t d = 0; d < depth; d++) {
			uint32_t sym = rnd(&seed) % FLEET_SYMBOLS, off = rnd(&seed) % 16;
			char fn[48];
			struct gw_line ln = { .function = fn };

			snprintf(fn, sizeof(fn), "svc%u_fn%u", e, sym);
			locs[d] = gw_stores__intern_location(s, GW_FRAME_USER, 0x1000 + sym * 0x100 + off * 4, exes[e],
							     NULL);
			if (!gw_location__lines(locs[d])) {
				struct gw_lines *l = gw_lines_table__intern(gw_stores__lines(s), &ln, 1);

				if (!gw_stores__set_lines(s, locs[d], l))
					gw_lines_free(l);
			}
		}
		memcpy(sid, &i, sizeof(i));
		fleet_stacks[i] = gw_stores__intern_stack(s, sid, sizeof(sid), false, locs, depth);
	}
	for (int e = 0; e < FLEET_EXES; e++)
		gw_executable__unref(exes[e]);
}

static struct gw_profiles *make_fleet_batch(unsigned k, uint64_t *ret_total)
{
	struct gw_profiles *p = gw_profiles_new();
	uint32_t seed = 1000 + k;
	uint64_t total = 0;

	for (int r = 0; r < FLEET_RESOURCES; r++) {
		char pod[32];
		struct gw_attr a[] = { { .key = "k8s.pod.name", .type = GW_ATTR_STRING, .v.s = pod },
				       { .key = "k8s.namespace.name", .type = GW_ATTR_STRING, .v.s = "prod" },
				       { .key = "host.name", .type = GW_ATTR_STRING, .v.s = "node-17" } };
		struct gw_resource *res;

		snprintf(pod, sizeof(pod), "pod-%u-%d", k, r);
		res = gw_profiles__add_resource(p, a, 3, 19);
		for (int i = 0; i < FLEET_RECORDS / FLEET_RESOURCES; i++) {
			struct gw_sample smp = { .stack = fleet_stacks[rnd(&seed) % FLEET_STACKS],
						 .count = 1 + i % 8,
						 .pid = 1000 + (uint32_t)r,
						 .tid = 2000 + (uint32_t)i % 2,
						 .thread_name = "worker" };

			gw_resource__add_sample(p, res, &smp);
			gw_resource__cover(res, 1, 10000000001ULL);
			res = &p->resources[r];
			total += smp.count;
		}
	}
	*ret_total = total;
	return p;
}

static void make_stacks(struct gw_stores *s)
{
	uint8_t id[20];
	struct gw_executable_def def = { .id = id,
					 .id_len = 20,
					 .id_kind = GW_EXE_ID_GNU_BUILD_ID,
					 .file_name = "server",
					 .path = "/usr/bin/server",
					 .gnu_build_id = id,
					 .gnu_build_id_len = 20 };
	struct gw_executable *exe;
	uint32_t seed = 1;

	memset(id, 0x5a, sizeof(id));
	exe = gw_stores__intern_executable(s, &def);
	for (int i = 0; i < N_STACKS; i++) {
		struct gw_location *locs[DEPTH];
		uint8_t sid[16] = { 0 };

		for (int d = 0; d < DEPTH; d++) {
			/* Shared roots, varied leaves: like real services. */
			uint32_t f = d < 6 ? (uint32_t)d : (seed = seed * 1103515245 + 12345) % N_FUNCS;
			char name[96];
			struct gw_line ln = { .function = name,
					      .file = "src/server/handler.cc",
					      .line = 100 + f % 400 };
			struct gw_lines *lines;

			snprintf(name, sizeof(name), "server::Handler::process_request_%u(Context&)", f);
			locs[d] = gw_stores__intern_location(s, GW_FRAME_USER, 0x400000 + 16ULL * f, exe, NULL);
			if (!gw_location__lines(locs[d])) {
				lines = gw_lines_new(&ln, 1);
				if (!gw_location__set_lines(locs[d], lines))
					gw_lines_free(lines);
			}
		}
		memcpy(sid, &i, sizeof(i));
		stacks[i] = gw_stores__intern_stack(s, sid, sizeof(sid), false, locs, DEPTH);
	}
	gw_executable__unref(exe);
}

static struct gw_profiles *make_batch(unsigned k, uint64_t *ret_total)
{
	struct gw_profiles *p = gw_profiles_new();
	uint64_t total = 0;

	for (int r = 0; r < RESOURCES; r++) {
		char svc[32];
		struct gw_attr a[] = { { .key = "service.name", .type = GW_ATTR_STRING, .v.s = svc },
				       { .key = "k8s.namespace.name", .type = GW_ATTR_STRING, .v.s = "prod" },
				       { .key = "host.name", .type = GW_ATTR_STRING, .v.s = "node-17" } };
		struct gw_resource *res;

		snprintf(svc, sizeof(svc), "service-%d", r);
		res = gw_profiles__add_resource(p, a, 3, 19);
		for (int i = 0; i < RECORDS / RESOURCES; i++) {
			struct gw_sample smp = { .stack =
							 stacks[(k * 7919 + (unsigned)i * 31 + (unsigned)r) % N_STACKS],
						 .count = 1 + i % 4,
						 .pid = 1000 + i % 50,
						 .tid = 2000 + i % 200,
						 .thread_name = "worker" };

			gw_resource__add_sample(p, res, &smp);
			gw_resource__cover(res, 1, 10000000001ULL);
			res = &p->resources[r];
			total += smp.count;
		}
	}
	*ret_total = total;
	return p;
}

int main(int argc, char **argv)
{
	int batches = argc > 1 ? atoi(argv[1]) : 50;
	bool fleet = argc > 2 && strcmp(argv[2], "--fleet") == 0;
	struct gw_stores *s =
		gw_stores_new(&(struct gw_store_limits){ .location_bytes = 4ULL << 30, .stack_bytes = 4ULL << 30 });
	struct gw_otlp_options o = { .version = GW_OTLP_V1_10 };
	double t_enc = 0, t_gz = 0, t_nanopb = 0, t_zlib = 0, t_gunzip = 0, t_inflate = 0;
	uint64_t samples = 0, records = 0, bytes = 0, gz_bytes = 0, zlib_bytes = 0, n_locations = 0, n_stacks = 0;
	struct gw_otlp_stats st;
	struct rusage ru;

	if (argc > 2 && !fleet) {
		fprintf(stderr, "usage: export-bench [BATCHES [--fleet]]\n");
		return 2;
	}
	if (fleet)
		make_fleet_stacks(s);
	else
		make_stacks(s);
	for (int b = 0; b < batches; b++) {
		uint64_t total;
		struct gw_profiles *p = fleet ? make_fleet_batch((unsigned)b, &total) : make_batch((unsigned)b, &total);
		struct sr_pbw w = { 0 };
		uint8_t *gz;
		size_t gz_len;
		double t0 = now(), t1, t2;

		if (gw_otlp_encode(p, &o, &w, &st) < 0)
			return 1;
		n_locations += st.locations;
		n_stacks += st.stacks;
		t1 = now();
		if (gw_gzip(w.buf, w.len, 1, &gz, &gz_len) < 0)
			return 1;
		t2 = now();
		t_enc += t1 - t0;
		t_gz += t2 - t1;
		/* The reference for gzip: zlib's deflate at the same level, one call, as sr_gzip() did before. */
		if (!fleet) {
			z_stream z = { 0 };
			uLong bound;
			uint8_t *zout;
			double t3 = now();

			if (deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
				return 1;
			bound = deflateBound(&z, (uLong)w.len);
			zout = malloc(bound);
			z.next_in = w.buf;
			z.avail_in = (uInt)w.len;
			z.next_out = zout;
			z.avail_out = (uInt)bound;
			if (!zout || deflate(&z, Z_FINISH) != Z_STREAM_END)
				return 1;
			zlib_bytes += z.total_out;
			deflateEnd(&z);
			free(zout);
			t_zlib += now() - t3;
		}
		/* The receiving side (agent requests are gzip too): sr_gunzip against zlib's inflate. */
		if (!fleet) {
			z_stream z = { 0 };
			uint8_t *back, *zback = malloc(w.len + 1);
			size_t back_len;
			double t3 = now(), t4;

			if (sr_gunzip(gz, gz_len, w.len, &back, &back_len) < 0 || back_len != w.len)
				return 1;
			t4 = now();
			t_gunzip += t4 - t3;
			free(back);
			if (!zback || inflateInit2(&z, 16 + MAX_WBITS) != Z_OK)
				return 1;
			z.next_in = gz;
			z.avail_in = (uInt)gz_len;
			z.next_out = zback;
			z.avail_out = (uInt)w.len + 1;
			if (inflate(&z, Z_FINISH) != Z_STREAM_END || z.total_out != w.len)
				return 1;
			inflateEnd(&z);
			free(zback);
			t_inflate += now() - t4;
		}
		samples += total;
		records += p->n_samples;
		bytes += w.len;
		gz_bytes += gz_len;
		/* The reference: nanopb's generic encoder on the same message (decoded once, untimed). */
		if (!fleet) {
			opentelemetry_proto_collector_profiles_v1development_ExportProfilesServiceRequest r =
				opentelemetry_proto_collector_profiles_v1development_ExportProfilesServiceRequest_init_zero;
			pb_istream_t is = pb_istream_from_buffer(w.buf, w.len);
			uint8_t *buf = malloc(w.len + 1024);
			pb_ostream_t os = pb_ostream_from_buffer(buf, w.len + 1024);
			double t3;

			if (!pb_decode(
				    &is,
				    opentelemetry_proto_collector_profiles_v1development_ExportProfilesServiceRequest_fields,
				    &r))
				return 1;
			t3 = now();
			if (!pb_encode(
				    &os,
				    opentelemetry_proto_collector_profiles_v1development_ExportProfilesServiceRequest_fields,
				    &r))
				return 1;
			t_nanopb += now() - t3;
			pb_release(
				opentelemetry_proto_collector_profiles_v1development_ExportProfilesServiceRequest_fields,
				&r);
			free(buf);
		}
		free(gz);
		sr_pbw__free(&w);
		gw_profiles__unref(p);
	}
	getrusage(RUSAGE_SELF, &ru);
	if (fleet)
		printf("fleet: batches=%d records/batch=%d stacks=%d over %d executables, depth 6-28\n", batches,
		       FLEET_RECORDS, FLEET_STACKS, FLEET_EXES);
	else
		printf("batches=%d records/batch=%d stacks=%d depth=%d\n", batches, RECORDS, N_STACKS, DEPTH);
	printf("encode (model -> OTLP, dictionary included): %.3f M records/s = %.2f M CPU samples/s per core\n",
	       (double)records / t_enc / 1e6, (double)samples / t_enc / 1e6);
	printf("encode + gzip(1):                            %.3f M records/s = %.2f M CPU samples/s per core\n",
	       (double)records / (t_enc + t_gz) / 1e6, (double)samples / (t_enc + t_gz) / 1e6);
	if (fleet) {
		printf("bytes out per record: %.2f protobuf, %.3f gzip; per request: %.0f locations, %.0f stacks\n",
		       (double)bytes / (double)records, (double)gz_bytes / (double)records,
		       (double)n_locations / batches, (double)n_stacks / batches);
		printf("peak RSS: %.1f MiB\n", (double)ru.ru_maxrss / 1024);
		return 0;
	}
	printf("reference, nanopb pb_encode of the same request (serialization only, no dictionary building): "
	       "%.2f M records/s; ours is %.2fx its speed while also building the dictionary\n",
	       (double)records / t_nanopb / 1e6, t_nanopb / t_enc);
	printf("bytes out per CPU sample: %.2f protobuf, %.3f gzip; per record: %.2f / %.3f\n",
	       (double)bytes / (double)samples, (double)gz_bytes / (double)samples, (double)bytes / (double)records,
	       (double)gz_bytes / (double)records);
	printf("gzip(1): sr_gzip (libdeflate) %.0f MB/s, %.3f of the input; reference, zlib deflate %.0f MB/s, "
	       "%.3f of the input: %.2fx its speed\n",
	       (double)bytes / t_gz / 1e6, (double)gz_bytes / (double)bytes, (double)bytes / t_zlib / 1e6,
	       (double)zlib_bytes / (double)bytes, t_zlib / t_gz);
	printf("gunzip: sr_gunzip %.0f MB/s of output; reference, zlib inflate %.0f MB/s: %.2fx its speed\n",
	       (double)bytes / t_gunzip / 1e6, (double)bytes / t_inflate / 1e6, t_inflate / t_gunzip);
	printf("peak RSS: %.1f MiB\n", (double)ru.ru_maxrss / 1024);
	for (int i = 0; i < N_STACKS; i++)
		gw_stack__unref(stacks[i]);
	gw_stores_free(s);
	return 0;
}
