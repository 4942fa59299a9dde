/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Round trip, as a property over generated profiles: a random batch of the
 * model, encoded by the gateway's own OTLP encoder (exporters/otlp-encode.h)
 * in v1.9 and v1.10 with each placement of process attributes, then decoded
 * by the otlp receiver's decoder (receivers/otlp-decode.h) with version
 * detection, gives back the same profile: per resource (attributes, type,
 * frequency) the same stacks (addresses, executables' build IDs, lines),
 * values, sample attributes, process/thread identity where the encoding
 * keeps it, and time windows.
 *
 * What an OTLP export cannot carry is left out of the comparison, as
 * documented in docs/receivers.md: off-CPU wait counts (only their
 * nanoseconds are exported), per-sample windows (a profile has one), and
 * pids/tids when the encoder drops them. Kernel frames are not generated:
 * the export names them through a mapping, and they come back as frames of
 * that mapping.
 */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/model.h"
#include "exporters/otlp-encode.h"
#include "common/pbwire.h"
#include "receivers/otlp-decode.h"

/* xorshift64*: reproducible from the seed printed on failure. */
static uint64_t rng_state;

static uint64_t rnd(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545F4914F6CDD1DULL;
}

static uint32_t rnd_below(uint32_t n)
{
	return (uint32_t)(rnd() % n);
}

#define N_EXES 3
#define N_LOCS 40

struct gen {
	struct gw_stores *stores;
	struct gw_executable *exes[N_EXES];
	struct gw_location *locs[N_LOCS];
};

static void gen_definitions(struct gen *g)
{
	static const char *const funcs[] = { "main", "run", "alloc", "std::vector<int>::push_back", "ĉu_utf8" };
	static const char *const files[] = { "", "main.c", "src/run.cc", "/usr/include/c++/vector" };

	for (int i = 0; i < N_EXES; i++) {
		uint8_t id[20];
		char path[64];
		for (size_t k = 0; k < sizeof(id); k++)
			id[k] = (uint8_t)rnd();
		snprintf(path, sizeof(path), "/usr/lib/lib%d.so", i);
		struct gw_executable_def def = { .id = id,
						 .id_len = sizeof(id),
						 .id_kind = GW_EXE_ID_GNU_BUILD_ID,
						 .file_name = path + 9,
						 .path = path,
						 .gnu_build_id = id,
						 .gnu_build_id_len = sizeof(id) };
		g->exes[i] = gw_stores__intern_executable(g->stores, &def);
		assert_non_null(g->exes[i]);
	}
	for (int i = 0; i < N_LOCS; i++) {
		/* Distinct addresses per location: a plain and a symbolized one never share a store entry. */
		uint64_t address = 0x1000 + (uint64_t)i * 0x100 + rnd_below(0x80);
		int kind = rnd_below(3); /* 0 plain native, 1 symbolized native, 2 named, no executable */
		struct gw_location *l =
			gw_stores__intern_location(g->stores, kind == 2 ? GW_FRAME_UNKNOWN : GW_FRAME_USER, address,
						   kind == 2 ? NULL : g->exes[rnd_below(N_EXES)], NULL);
		assert_non_null(l);
		if (kind) {
			struct gw_line lines[3];
			/* Shared lines (as the symbolize processor makes them) from a small set, so that
			 * locations of one request share them; the others each their own. */
			bool shared = rnd_below(2);
			uint32_t n = 1 + rnd_below(shared ? 2 : 3);
			for (uint32_t k = 0; k < n; k++)
				lines[k] = (struct gw_line){
					.function = funcs[rnd_below(shared ? 2 : 5)],
					.system_name = shared || rnd_below(2) ? "" : "_Z3runv",
					.file = files[rnd_below(shared ? 1 : 4)],
					.line = shared ? rnd_below(2) : rnd_below(1000),
					.column = shared ? 0 : rnd_below(3),
					.start_line = shared ? 0 : rnd_below(50),
				};
			struct gw_lines *gl = shared ? gw_lines_table__intern(gw_stores__lines(g->stores), lines, n)
						     : gw_lines_new(lines, n);
			assert_non_null(gl);
			if (!gw_location__set_lines(l, gl))
				gw_lines_free(gl);
		}
		g->locs[i] = l;
	}
}

static struct gw_stack *gen_stack(struct gen *g)
{
	struct gw_location *locs[12];
	uint32_t n = rnd_below(10) == 0 ? 0 : 1 + rnd_below(12);
	uint8_t id[16];

	for (uint32_t i = 0; i < n; i++)
		locs[i] = gw_location__ref(g->locs[rnd_below(N_LOCS)]);
	for (size_t k = 0; k < sizeof(id); k++)
		id[k] = (uint8_t)rnd();
	struct gw_stack *s = gw_stores__intern_stack(g->stores, id, sizeof(id), false, locs, n);
	assert_non_null(s);
	return s;
}

static void gen_attr(struct gw_attr *a, const char *key)
{
	static const char *const words[] = { "alpha", "beta", "γ", "a b c" };
	a->key = key;
	switch (rnd_below(4)) {
	case 0:
		a->type = GW_ATTR_STRING;
		a->v.s = words[rnd_below(4)];
		break;
	case 1:
		a->type = GW_ATTR_INT;
		a->v.i = (int64_t)rnd_below(1000) - 500;
		break;
	case 2:
		a->type = GW_ATTR_BOOL;
		a->v.b = rnd_below(2);
		break;
	default:
		a->type = GW_ATTR_DOUBLE;
		a->v.d = (double)rnd_below(10000) / 7.0;
	}
}

static struct gw_profiles *gen_batch(struct gen *g)
{
	static const char *const rkeys[] = { "k0", "k1", "k2" }, *const skeys[] = { "s0", "s1" };
	static const char *const threads[] = { NULL, "worker", "io-1" };
	static const uint32_t freqs[] = { 19, 97, 100, 1000 };
	struct gw_profiles *p = gw_profiles_new();
	uint32_t n_res = 1 + rnd_below(4);

	assert_non_null(p);
	for (uint32_t r = 0; r < n_res; r++) {
		struct gw_attr attrs[4] = { { .key = "res.idx", .type = GW_ATTR_INT, .v.i = r } };
		uint32_t n_attrs = 1 + rnd_below(4);
		bool off = rnd_below(3) == 0;
		for (uint32_t k = 1; k < n_attrs; k++)
			gen_attr(&attrs[k], rkeys[k - 1]);
		struct gw_resource *res = gw_profiles__add_typed_resource(
			p, attrs, n_attrs, off ? 0 : freqs[rnd_below(4)], off ? GW_PROFILE_OFF_CPU : GW_PROFILE_CPU);
		assert_non_null(res);
		uint32_t n_samples = 1 + rnd_below(40);
		for (uint32_t i = 0; i < n_samples; i++) {
			struct {
				struct gw_sample_attrs h;
				struct gw_attr v[2];
			} sattrs;
			uint32_t n_sattrs = rnd_below(3);
			uint64_t start = 1700000000000000000ULL + rnd_below(1000000);
			for (uint32_t k = 0; k < n_sattrs; k++)
				gen_attr(&sattrs.h.v[k], skeys[k]);
			sattrs.h.n = n_sattrs;
			struct gw_sample s = {
				.stack = gen_stack(g),
				.count = 1 + rnd_below(1000),
				.pid = 100 + rnd_below(3),
				.tid = 1000 + rnd_below(5),
				.thread_name = threads[rnd_below(3)],
				.attrs = n_sattrs ? &sattrs.h : NULL,
			};
			if (off)
				s.off_cpu_ns = 1 + rnd() % 1000000000;
			/* add_sample takes its own reference. */
			assert_int_equal(gw_resource__add_sample(p, &p->resources[r], &s), 0);
			gw_resource__cover(&p->resources[r], start, start + rnd_below(5000000));
			gw_stack__unref(s.stack);
		}
	}
	return p;
}

/* ---- canonical forms ---- */

struct buf {
	char *p;
	size_t len, cap;
};

static void bprintf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void bprintf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
		va_end(ap);
		assert_true(n >= 0);
		if (b->p && b->len + (size_t)n < b->cap)
			break;
		b->cap = (b->cap + (size_t)n + 1) * 2;
		b->p = realloc(b->p, b->cap);
		assert_non_null(b->p);
	}
	b->len += (size_t)n;
}

static void attr_text(struct buf *b, const struct gw_attr *a)
{
	switch (a->type) {
	case GW_ATTR_STRING:
		bprintf(b, "%s=s:%s;", a->key, a->v.s ? a->v.s : "");
		break;
	case GW_ATTR_INT:
		bprintf(b, "%s=i:%" PRId64 ";", a->key, a->v.i);
		break;
	case GW_ATTR_BOOL:
		bprintf(b, "%s=b:%d;", a->key, a->v.b);
		break;
	case GW_ATTR_DOUBLE:
		bprintf(b, "%s=d:%a;", a->key, a->v.d);
		break;
	}
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Attributes in key order (the encoder and decoder keep order, but merging need not). */
static void attrs_text(struct buf *b, const struct gw_attr *attrs, uint32_t n, const char *skip)
{
	char *parts[16];
	uint32_t k = 0;

	assert_true(n <= 16);
	for (uint32_t i = 0; i < n; i++) {
		struct buf one = { 0 };
		if (skip && strcmp(attrs[i].key, skip) == 0)
			continue;
		attr_text(&one, &attrs[i]);
		parts[k++] = one.p;
	}
	qsort(parts, k, sizeof(parts[0]), cmp_str);
	for (uint32_t i = 0; i < k; i++) {
		bprintf(b, "%s", parts[i]);
		free(parts[i]);
	}
}

static void stack_text(struct buf *b, const struct gw_stack *s)
{
	char hex[2 * GW_ID_MAX + 1];

	for (uint32_t i = 0; i < s->n_locations; i++) {
		const struct gw_location *l = gw_stack__location(s, i);
		const struct gw_lines *ln = gw_location__lines(l);
		bprintf(b, "[%#" PRIx64 " %s", l->address,
			gw_location__exe(l) ? gw_id_to_hex(&gw_location__exe(l)->gnu_build_id, hex, sizeof(hex)) : "-");
		for (uint32_t k = 0; ln && k < ln->n; k++) {
			const struct gw_line *x = &ln->lines[k];
			bprintf(b, " %s/%s/%s:%u:%u@%u", x->function, x->system_name, x->file, x->line, x->column,
				x->start_line);
		}
		bprintf(b, "]");
	}
}

struct entry {
	char *key;
	uint64_t value;
};

struct entries {
	struct entry *v;
	size_t n, cap;
};

static int cmp_entry(const void *a, const void *b)
{
	return strcmp(((const struct entry *)a)->key, ((const struct entry *)b)->key);
}

/* Sorted, equal keys merged by summing. */
static void canonicalize(struct entries *e)
{
	size_t o = 0;

	qsort(e->v, e->n, sizeof(e->v[0]), cmp_entry);
	for (size_t i = 0; i < e->n; i++) {
		if (o && strcmp(e->v[o - 1].key, e->v[i].key) == 0) {
			e->v[o - 1].value += e->v[i].value;
			free(e->v[i].key);
		} else {
			e->v[o++] = e->v[i];
		}
	}
	e->n = o;
}

static void resource_key(struct buf *b, const struct gw_resource *r)
{
	bprintf(b, "%s f=%u {", gw_profile_type_name(r->profile_type),
		r->profile_type == GW_PROFILE_CPU ? r->frequency_hz : 0);
	attrs_text(b, r->attrs, r->n_attrs, "process.pid");
	bprintf(b, "}");
}

/* One entry per sample: resource, stack, attributes and (per mode) process identity → its value. */
static void collect(const struct gw_profiles *p, enum gw_otlp_process_attrs mode, struct entries *out)
{
	gw_profiles_foreach_resource(p, r)
	{
		gw_resource_foreach_sample(r, s)
		{
			struct buf b = { 0 };
			resource_key(&b, r);
			bprintf(&b, " | ");
			stack_text(&b, s->stack);
			bprintf(&b, " | ");
			attrs_text(&b, s->attrs ? s->attrs->v : NULL, gw_sample__n_attrs(s), NULL);
			if (mode != GW_OTLP_PROCESS_ATTRS_NONE)
				bprintf(&b, " | pid %u tid %u thread %s", s->pid, s->tid,
					s->thread_name && *s->thread_name ? s->thread_name : "-");
			if (out->n == out->cap) {
				out->cap = out->cap ? out->cap * 2 : 64;
				out->v = realloc(out->v, out->cap * sizeof(*out->v));
				assert_non_null(out->v);
			}
			out->v[out->n++] =
				(struct entry){ b.p, r->profile_type == GW_PROFILE_OFF_CPU ? s->off_cpu_ns : s->count };
		}
	}
	canonicalize(out);
}

static void entries_free(struct entries *e)
{
	for (size_t i = 0; i < e->n; i++)
		free(e->v[i].key);
	free(e->v);
}

/* Every decoded resource's window is its original resource's (all of its pid groups when pids go on resources). */
static void check_windows(const struct gw_profiles *orig, const struct gw_profiles *got)
{
	gw_profiles_foreach_resource(got, r)
	{
		struct buf want = { 0 };
		uint64_t lo = UINT64_MAX, hi = 0;

		resource_key(&want, r);
		gw_profiles_foreach_resource(orig, o)
		{
			struct buf k = { 0 };
			resource_key(&k, o);
			if (strcmp(k.p, want.p) == 0) {
				lo = o->start_ns < lo ? o->start_ns : lo;
				hi = o->end_ns > hi ? o->end_ns : hi;
			}
			free(k.p);
		}
		assert_int_equal(r->start_ns, lo);
		assert_int_equal(r->end_ns, hi);
		free(want.p);
	}
}

static void round_trip(struct gen *g, const struct gw_profiles *p, enum gw_otlp_version v,
		       enum gw_otlp_process_attrs mode, uint64_t seed)
{
	struct gw_otlp_options eo = { .version = v, .process_attrs = mode };
	struct gw_otlp_decode_result res;
	struct entries want = { 0 }, got = { 0 };
	struct sr_pbw w = { 0 };
	struct gw_otlp_stats st;

	assert_int_equal(gw_otlp_encode(p, &eo, &w, &st), 0);
	if (gw_otlp_decode(g->stores, w.buf, w.len, NULL, &res) != GW_OTLP_DECODE_OK)
		fail_msg("seed %" PRIu64 " v%s mode %d: %s", seed, gw_otlp_version_to_string(v), mode, res.message);
	assert_int_equal(res.version, v == GW_OTLP_V1_9 ? GW_OTLP_DECODE_V1_9 : GW_OTLP_DECODE_V1_10);
	assert_int_equal(res.accepted_records, st.samples);
	assert_int_equal(res.refused, 0);
	assert_non_null(res.batch);
	assert_int_equal(gw_profiles__check(res.batch), 0);
	collect(p, mode, &want);
	collect(res.batch, mode, &got);
	if (want.n != got.n)
		fail_msg("seed %" PRIu64 " v%s mode %d: %zu sample groups, decoded %zu", seed,
			 gw_otlp_version_to_string(v), mode, want.n, got.n);
	for (size_t i = 0; i < want.n; i++) {
		if (strcmp(want.v[i].key, got.v[i].key) != 0 || want.v[i].value != got.v[i].value)
			fail_msg("seed %" PRIu64 " v%s mode %d:\n want %s = %" PRIu64 "\n got  %s = %" PRIu64, seed,
				 gw_otlp_version_to_string(v), mode, want.v[i].key, want.v[i].value, got.v[i].key,
				 got.v[i].value);
	}
	check_windows(p, res.batch);
	entries_free(&want);
	entries_free(&got);
	gw_otlp_decode_result_fini(&res);
	sr_pbw__free(&w);
}

static void test_round_trip(void **state)
{
	const char *env = getenv("SR_TEST_SEED");
	uint64_t seed0 = env ? strtoull(env, NULL, 0) : 0x5eed;
	unsigned runs = env ? 1 : 60;
	(void)state;

	for (unsigned i = 0; i < runs; i++) {
		struct gen g = { 0 };
		uint64_t seed = seed0 + i;
		struct gw_profiles *p;

		rng_state = seed * 0x9E3779B97F4A7C15ULL + 1;
		g.stores = gw_stores_new(NULL);
		assert_non_null(g.stores);
		gen_definitions(&g);
		p = gen_batch(&g);
		for (int v = 0; v < 2; v++)
			for (int mode = 0; mode < 3; mode++)
				round_trip(&g, p, v ? GW_OTLP_V1_9 : GW_OTLP_V1_10, (enum gw_otlp_process_attrs)mode,
					   seed);
		gw_profiles__unref(p);
		for (int k = 0; k < N_LOCS; k++)
			gw_location__unref(g.locs[k]);
		for (int k = 0; k < N_EXES; k++)
			gw_executable__unref(g.exes[k]);
		gw_stores_free(g.stores);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
	};
	return cmocka_run_group_tests_name("otlp-roundtrip", tests, NULL, NULL);
}
