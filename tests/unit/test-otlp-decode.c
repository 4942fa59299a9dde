/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The OTLP profiles request decoder (gateway/receivers/otlp-decode.h).
 * Requests are written here field by field from the OTLP .proto field
 * numbers (not with the gateway's encoder), in the shapes the OTel eBPF
 * profiler and the gateway send, in v1.9 and v1.10, and broken in every way
 * the decoder must refuse.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/model.h"
#include "common/pbwire.h"
#include "receivers/otlp-decode.h"

/* ---- a request builder ---- */

/* String table (index: string). */
enum {
	S_EMPTY,
	S_SAMPLES,
	S_COUNT,
	S_CPU,
	S_NS,
	S_APP,
	S_BUILD_ID_KEY,
	S_BUILD_ID,
	S_MAIN,
	S_APP_C,
	S_FRAME_TYPE,
	S_CPYTHON,
	S_THREAD_NAME,
	S_WORKER,
	S_THREAD_ID,
	S_KERNEL,
	S_SYSCALL,
	S_OFF_CPU,
	S_TAG,
	S_X,
	S_EVENTS,
	S_N,
};

static const char *const strings[S_N] = {
	"",
	"samples",
	"count",
	"cpu",
	"nanoseconds",
	"/usr/bin/app",
	"process.executable.build_id.gnu",
	"abcdef0123456789",
	"main",
	"app.c",
	"profile.frame.type",
	"cpython",
	"thread.name",
	"worker",
	"thread.id",
	"kernel",
	"do_syscall",
	"off_cpu",
	"svc.tag",
	"x",
	"events",
};

/* Attribute table. */
enum { A_ZERO, A_BUILD_ID, A_CPYTHON, A_THREAD_NAME, A_THREAD_ID, A_KERNEL, A_TAG, A_N };

struct xsample {
	int32_t stack;
	int32_t attrs[8];
	unsigned n_attrs;
	int32_t link;
	int64_t values[4];
	unsigned n_values;
	uint64_t ts[4];
	unsigned n_ts;
	bool link_as_len; /* link_index written length-delimited */
};

struct xreq {
	bool v19;
	int32_t st_type, st_unit, pt_type, pt_unit;
	int64_t period;
	struct xsample samples[4];
	unsigned n_samples;
	/* Overrides for bad input. */
	int32_t stack1_extra_loc;  /* appended to stack 1 when not 0 */
	int32_t function1_name;	   /* when not 0 */
	int32_t location1_mapping; /* when not 0 */
	unsigned extra_strings;	   /* appended to the string table */
	unsigned resource_nesting; /* an array attribute nested this deep */
	bool resource_pid;	   /* process.pid 77 on the resource */
	bool htlhash;		   /* the mapping's build ID attribute is htlhash, not gnu */
};

static void value_type(struct sr_pbw *w, uint32_t field, int32_t type, int32_t unit)
{
	size_t m = sr_pbw__begin(w, field);
	sr_pbw__int(w, 1, type);
	sr_pbw__int(w, 2, unit);
	sr_pbw__end(w, m);
}

static void attr_str(struct sr_pbw *w, int32_t key, int32_t value)
{
	size_t m = sr_pbw__begin(w, 6), v;
	sr_pbw__int(w, 1, key);
	v = sr_pbw__begin(w, 2);
	sr_pbw__string(w, 1, strings[value]);
	sr_pbw__end(w, v);
	sr_pbw__end(w, m);
}

static void nested_array(struct sr_pbw *w, unsigned depth)
{
	/* AnyValue{array_value: ArrayValue{values: [AnyValue{...}]}} */
	size_t a = sr_pbw__begin(w, 5);
	size_t v = sr_pbw__begin(w, 1);
	if (depth > 1)
		nested_array(w, depth - 1);
	else
		sr_pbw__int(w, 3, 1);
	sr_pbw__end(w, v);
	sr_pbw__end(w, a);
}

static void write_dictionary(struct sr_pbw *w, const struct xreq *x)
{
	size_t d = sr_pbw__begin(w, 2), m, l;

	/* mapping_table: zero, /usr/bin/app with a GNU build ID */
	sr_pbw__end(w, sr_pbw__begin(w, 1));
	m = sr_pbw__begin(w, 1);
	sr_pbw__uint(w, 1, 0x400000);
	sr_pbw__uint(w, 2, 0x500000);
	sr_pbw__int(w, 4, S_APP);
	sr_pbw__packed_i32(w, 5, (int32_t[]){ A_BUILD_ID }, 1);
	sr_pbw__end(w, m);
	/* location_table: zero; native unsymbolized; native symbolized; cpython; kernel */
	sr_pbw__end(w, sr_pbw__begin(w, 2));
	m = sr_pbw__begin(w, 2);
	sr_pbw__int(w, 1, x->location1_mapping ? x->location1_mapping : 1);
	sr_pbw__uint(w, 2, 0x1234);
	sr_pbw__end(w, m);
	m = sr_pbw__begin(w, 2);
	sr_pbw__int(w, 1, 1);
	sr_pbw__uint(w, 2, 0x2000);
	l = sr_pbw__begin(w, 3);
	sr_pbw__int(w, 1, 1);
	sr_pbw__int(w, 2, 10);
	sr_pbw__end(w, l);
	sr_pbw__end(w, m);
	m = sr_pbw__begin(w, 2);
	sr_pbw__uint(w, 2, 7);
	l = sr_pbw__begin(w, 3);
	sr_pbw__int(w, 1, 1);
	sr_pbw__int(w, 2, 3);
	sr_pbw__end(w, l);
	sr_pbw__packed_i32(w, 4, (int32_t[]){ A_CPYTHON }, 1);
	sr_pbw__end(w, m);
	m = sr_pbw__begin(w, 2);
	sr_pbw__uint(w, 2, 0xffffffff81000000ULL);
	l = sr_pbw__begin(w, 3);
	sr_pbw__int(w, 1, 2);
	sr_pbw__end(w, l);
	sr_pbw__packed_i32(w, 4, (int32_t[]){ A_KERNEL }, 1);
	sr_pbw__end(w, m);
	/* function_table: zero, main (app.c), do_syscall */
	sr_pbw__end(w, sr_pbw__begin(w, 3));
	m = sr_pbw__begin(w, 3);
	sr_pbw__int(w, 1, x->function1_name ? x->function1_name : S_MAIN);
	sr_pbw__int(w, 3, S_APP_C);
	sr_pbw__end(w, m);
	m = sr_pbw__begin(w, 3);
	sr_pbw__int(w, 1, S_SYSCALL);
	sr_pbw__end(w, m);
	/* link_table: zero, one trace/span */
	sr_pbw__end(w, sr_pbw__begin(w, 4));
	m = sr_pbw__begin(w, 4);
	sr_pbw__bytes(w, 1, "0123456789abcdef", 16);
	sr_pbw__bytes(w, 2, "ABCDEFGH", 8);
	sr_pbw__end(w, m);
	/* string_table */
	for (int i = 0; i < S_N; i++) {
		const char *str = i == S_BUILD_ID_KEY && x->htlhash ? "process.executable.build_id.htlhash"
								    : strings[i];
		sr_pbw__bytes_always(w, 5, str, strlen(str));
	}
	for (unsigned i = 0; i < x->extra_strings; i++)
		sr_pbw__bytes_always(w, 5, "more", 4);
	/* attribute_table */
	sr_pbw__end(w, sr_pbw__begin(w, 6));
	attr_str(w, S_BUILD_ID_KEY, S_BUILD_ID);
	attr_str(w, S_FRAME_TYPE, S_CPYTHON);
	attr_str(w, S_THREAD_NAME, S_WORKER);
	m = sr_pbw__begin(w, 6);
	sr_pbw__int(w, 1, S_THREAD_ID);
	l = sr_pbw__begin(w, 2);
	sr_pbw__int(w, 3, 42);
	sr_pbw__end(w, l);
	sr_pbw__end(w, m);
	attr_str(w, S_FRAME_TYPE, S_KERNEL);
	attr_str(w, S_TAG, S_X);
	/* stack_table: empty; [1, 2, 3, 4]; [1] */
	sr_pbw__end(w, sr_pbw__begin(w, 7));
	m = sr_pbw__begin(w, 7);
	if (x->stack1_extra_loc)
		sr_pbw__packed_i32(w, 1, (int32_t[]){ 1, 2, 3, 4, x->stack1_extra_loc }, 5);
	else
		sr_pbw__packed_i32(w, 1, (int32_t[]){ 1, 2, 3, 4 }, 4);
	sr_pbw__end(w, m);
	m = sr_pbw__begin(w, 7);
	sr_pbw__packed_i32(w, 1, (int32_t[]){ 1 }, 1);
	sr_pbw__end(w, m);
	sr_pbw__end(w, d);
}

static void write_sample(struct sr_pbw *w, bool v19, const struct xsample *s)
{
	size_t m = sr_pbw__begin(w, 2), v;

	sr_pbw__int(w, 1, s->stack);
	if (v19 && s->n_values) {
		v = sr_pbw__begin(w, 2);
		for (unsigned i = 0; i < s->n_values; i++)
			sr_pbw__varint(w, (uint64_t)s->values[i]);
		sr_pbw__end(w, v);
	}
	sr_pbw__packed_i32(w, v19 ? 3 : 2, s->attrs, s->n_attrs);
	if (s->link_as_len)
		sr_pbw__packed_i32(w, v19 ? 4 : 3, &s->link, 1);
	else
		sr_pbw__int(w, v19 ? 4 : 3, s->link);
	if (!v19 && s->n_values) {
		v = sr_pbw__begin(w, 4);
		for (unsigned i = 0; i < s->n_values; i++)
			sr_pbw__varint(w, (uint64_t)s->values[i]);
		sr_pbw__end(w, v);
	}
	if (s->n_ts) {
		v = sr_pbw__begin(w, 5);
		for (unsigned i = 0; i < s->n_ts; i++)
			sr_pbw__put_fixed64(w, s->ts[i]);
		sr_pbw__end(w, v);
	}
	sr_pbw__end(w, m);
}

static void build(const struct xreq *x, struct sr_pbw *w)
{
	size_t rp = sr_pbw__begin(w, 1), r, kv, v, sp, p;

	r = sr_pbw__begin(w, 1);
	kv = sr_pbw__begin(w, 1);
	sr_pbw__string(w, 1, "service.name");
	v = sr_pbw__begin(w, 2);
	sr_pbw__string(w, 1, "svc");
	sr_pbw__end(w, v);
	sr_pbw__end(w, kv);
	if (x->resource_pid) {
		kv = sr_pbw__begin(w, 1);
		sr_pbw__string(w, 1, "process.pid");
		v = sr_pbw__begin(w, 2);
		sr_pbw__int(w, 3, 77);
		sr_pbw__end(w, v);
		sr_pbw__end(w, kv);
	}
	if (x->resource_nesting) {
		kv = sr_pbw__begin(w, 1);
		sr_pbw__string(w, 1, "deep");
		v = sr_pbw__begin(w, 2);
		nested_array(w, x->resource_nesting);
		sr_pbw__end(w, v);
		sr_pbw__end(w, kv);
	}
	sr_pbw__end(w, r);
	sp = sr_pbw__begin(w, 2);
	p = sr_pbw__begin(w, 2);
	value_type(w, 1, x->st_type ? x->st_type : S_SAMPLES, x->st_unit ? x->st_unit : S_COUNT);
	for (unsigned i = 0; i < x->n_samples; i++)
		write_sample(w, x->v19, &x->samples[i]);
	sr_pbw__fixed64(w, 3, 1000);
	sr_pbw__uint(w, 4, 500);
	if (x->pt_type >= 0) {
		value_type(w, 5, x->pt_type ? x->pt_type : S_CPU, x->pt_unit ? x->pt_unit : S_NS);
		sr_pbw__int(w, 6, x->period ? x->period : 1000000000 / 19);
	}
	sr_pbw__end(w, p);
	sr_pbw__end(w, sp);
	sr_pbw__end(w, rp);
	write_dictionary(w, x);
	assert_int_equal(sr_pbw__error(w), 0);
}

struct fixture {
	struct gw_stores *stores;
	struct gw_otlp_decode_result res;
	struct sr_pbw w;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	f->stores = gw_stores_new(NULL);
	assert_non_null(f->stores);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	gw_otlp_decode_result_fini(&f->res);
	sr_pbw__free(&f->w);
	gw_stores_free(f->stores);
	free(f);
	return 0;
}

static enum gw_otlp_decode_status run(struct fixture *f, const struct xreq *x, const struct gw_otlp_decode_options *o)
{
	gw_otlp_decode_result_fini(&f->res);
	sr_pbw__free(&f->w);
	f->w = (struct sr_pbw){ 0 };
	build(x, &f->w);
	return gw_otlp_decode(f->stores, f->w.buf, f->w.len, o, &f->res);
}

/* The OTel eBPF profiler's CPU shape: attributes and timestamps, no values. */
static struct xsample otel_cpu_sample(void)
{
	return (struct xsample){ .stack = 1,
				 .attrs = { A_THREAD_NAME, A_THREAD_ID, A_TAG },
				 .n_attrs = 3,
				 .ts = { 1100, 1300 },
				 .n_ts = 2 };
}

static void check_otel_batch(struct fixture *f)
{
	struct gw_profiles *p = f->res.batch;
	const struct gw_lines *ln;
	struct gw_resource *r;
	struct gw_sample *s;
	struct gw_stack *st;
	char hex[2 * GW_ID_MAX + 1];

	assert_non_null(p);
	assert_int_equal(p->n_resources, 1);
	r = &p->resources[0];
	assert_int_equal(r->profile_type, GW_PROFILE_CPU);
	assert_int_equal(r->frequency_hz, 19);
	assert_string_equal(gw_resource__string(r, "service.name"), "svc");
	assert_null(gw_resource__attr(r, "process.pid"));
	assert_int_equal(r->n_samples, 1);
	s = &r->samples[0];
	assert_int_equal(s->count, 2);
	assert_int_equal(r->start_ns, 1100);
	assert_int_equal(r->end_ns, 1300);
	assert_int_equal(s->tid, 42);
	assert_int_equal(s->pid, 77);
	assert_string_equal(s->thread_name, "worker");
	assert_int_equal(gw_sample__n_attrs(s), 1);
	assert_string_equal(s->attrs->v[0].key, "svc.tag");
	assert_string_equal(s->attrs->v[0].v.s, "x");
	st = s->stack;
	assert_int_equal(st->n_locations, 4);
	/* Native, unsymbolized: the symbolize processor's, by build ID. */
	assert_int_equal(gw_location__kind(gw_stack__location(st, 0)), GW_FRAME_USER);
	assert_int_equal(gw_stack__location(st, 0)->address, 0x1234);
	assert_false(gw_location__preset(gw_stack__location(st, 0)));
	assert_null(gw_location__lines(gw_stack__location(st, 0)));
	assert_string_equal(gw_id_to_hex(&gw_location__exe(gw_stack__location(st, 0))->gnu_build_id, hex, sizeof(hex)),
			    "abcdef0123456789");
	assert_int_equal(gw_location__exe(gw_stack__location(st, 0))->id_kind, GW_EXE_ID_GNU_BUILD_ID);
	assert_string_equal(gw_location__exe(gw_stack__location(st, 0))->path, "/usr/bin/app");
	assert_string_equal(gw_location__exe(gw_stack__location(st, 0))->file_name, "app");
	/* Native, symbolized by the sender: kept. */
	assert_true(gw_location__preset(gw_stack__location(st, 1)));
	assert_ptr_equal(gw_location__exe(gw_stack__location(st, 1)), gw_location__exe(gw_stack__location(st, 0)));
	ln = gw_location__lines(gw_stack__location(st, 1));
	assert_non_null(ln);
	assert_int_equal(ln->n, 1);
	assert_string_equal(ln->lines[0].function, "main");
	assert_string_equal(ln->lines[0].file, "app.c");
	assert_int_equal(ln->lines[0].line, 10);
	/* Interpreted: as it came, no executable. */
	assert_int_equal(gw_location__kind(gw_stack__location(st, 2)), GW_FRAME_UNKNOWN);
	assert_true(gw_location__preset(gw_stack__location(st, 2)));
	assert_int_equal(gw_stack__location(st, 2)->address, 7);
	assert_string_equal(gw_location__lines(gw_stack__location(st, 2))->lines[0].function, "main");
	assert_int_equal(gw_location__lines(gw_stack__location(st, 2))->lines[0].line, 3);
	/* Kernel, named by the sender. */
	assert_true(gw_location__preset(gw_stack__location(st, 3)));
	assert_string_equal(gw_location__lines(gw_stack__location(st, 3))->lines[0].function, "do_syscall");
	assert_int_equal(gw_profiles__check(p), 0);
}

static void test_v10_otel_shape_detected(void **state)
{
	struct fixture *f = *state;
	struct xreq x = { .resource_pid = true, .n_samples = 1 };

	x.samples[0] = otel_cpu_sample();
	assert_int_equal(run(f, &x, NULL), GW_OTLP_DECODE_OK);
	assert_int_equal(f->res.version, GW_OTLP_DECODE_V1_10);
	assert_true(f->res.version_detected);
	assert_int_equal(f->res.received, 2);
	assert_int_equal(f->res.accepted, 2);
	assert_int_equal(f->res.refused, 0);
	assert_int_equal(f->res.rejected_profiles, 0);
	assert_string_equal(f->res.message, "");
	check_otel_batch(f);
}

static void test_v19_otel_shape_detected(void **state)
{
	struct fixture *f = *state;
	struct xreq x = { .v19 = true, .resource_pid = true, .n_samples = 1 };

	x.samples[0] = otel_cpu_sample();
	assert_int_equal(run(f, &x, NULL), GW_OTLP_DECODE_OK);
	assert_int_equal(f->res.version, GW_OTLP_DECODE_V1_9);
	assert_true(f->res.version_detected);
	check_otel_batch(f);
}

static void test_v19_values_only_detected(void **state)
{
	struct fixture *f = *state;
	struct xreq x = { .v19 = true, .n_samples = 2 };

	x.samples[0] = (struct xsample){ .stack = 2, .values = { 5 }, .n_values = 1 };
	x.samples[1] = (struct xsample){ .stack = 1, .values = { 3 }, .n_values = 1 };
	assert_int_equal(run(f, &x, NULL), GW_OTLP_DECODE_OK);
	assert_int_equal(f->res.version, GW_OTLP_DECODE_V1_9);
	assert_int_equal(f->res.accepted, 8);
	assert_int_equal(f->res.batch->resources[0].samples[0].count, 5);
	/* No timestamps: the profile's window. */
	assert_int_equal(f->res.batch->resources[0].start_ns, 1000);
	assert_int_equal(f->res.batch->resources[0].end_ns, 1500);
}

static void test_v10_values_detected(void **state)
{
	struct fixture *f = *state;
	struct xreq x = { .n_samples = 1 };

	x.samples[0] = (struct xsample){ .stack = 2, .attrs = { A_TAG }, .n_attrs = 1, .values = { 4 }, .n_values = 1 };
	assert_int_equal(run(f, &x, NULL), GW_OTLP_DECODE_OK);
	assert_int_equal(f->res.version, GW_OTLP_DECODE_V1_10);
	assert_int_equal(f->res.accepted, 4);
}

static void test_ambiguous_refused_then_configured(void **state)
{
	struct fixture *f = *state;
	struct xreq x = { .n_samples = 1 };
	struct gw_otlp_decode_options o = { .version = GW_OTLP_DECODE_V1_10 };

	/* v1.10: one attribute and one timestamp; as v1.9: one value and one timestamp. */
	x.samples[0] = (struct xsample){ .stack = 2, .attrs = { A_TAG }, .n_attrs = 1, .ts = { 1200 }, .n_ts = 1 };
	assert_int_equal(run(f, &x, NULL), GW_OTLP_DECODE_AMBIGUOUS);
	assert_null(f->res.batch);
	assert_non_null(strstr(f->res.message, "version"));
	assert_int_equal(f->res.accepted, 0);

	assert_int_equal(run(f, &x, &o), GW_OTLP_DECODE_OK);
	assert_false(f->res.version_detected);
	assert_int_equal(f->res.accepted, 1);
	assert_string_equal(f->res.batch->resources[0].samples[0].attrs->v[0].key, "svc.tag");

	o.version = GW_OTLP_DECODE_V1_9;
	assert_int_equal(run(f, &x, &o), GW_OTLP_DECODE_OK);
	assert_int_equal(f->res.accepted, A_TAG);
}

static void test_same_either_way(void **state)
{
	struct fixture *f = *state;
	struct xreq x = { .n_samples = 1 };

	x.samples[0] = (struct xsample){ .stack = 2, .ts = { 1200, 1201, 1202 }, .n_ts = 3 };
	assert_int_equal(run(f, &x, NULL), GW_OTLP_DECODE_OK);
	assert_int_equal(f->res.accepted, 3);
	/* No samples at all: nothing to tell apart either. */
	x.n_samples = 0;
	assert_int_equal(run(f, &x, NULL), GW_OTLP_DECODE_OK);
	assert_null(f->res.batch);
	assert_int_equal(f->res.received, 0);
}

static void expect_invalid(struct fixture *f, const struct xreq *x, const struct gw_otlp_decode_options *o,
			   enum gw_otlp_decode_status st, const char *needle)
{
	assert_int_equal(run(f, x, o), st);
	assert_null(f->res.batch);
	assert_int_equal(f->res.accepted, 0);
	if (!strstr(f->res.message, needle))
		fail_msg("message \"%s\" lacks \"%s\"", f->res.message, needle);
	assert_non_null(strstr(f->res.message, "at byte"));
}

static void test_out_of_range_indices(void **state)
{
	struct fixture *f = *state;
	struct gw_otlp_decode_options o = { .version = GW_OTLP_DECODE_V1_10 };
	struct xreq x = { .n_samples = 1 };

	x.samples[0] = otel_cpu_sample();
	x.samples[0].stack = 9;
	expect_invalid(
		f, &x, &o, GW_OTLP_DECODE_INVALID,
		"resource_profiles[0].scope_profiles[0].profiles[0].samples[0].stack_index: stack_table index 9");
	x.samples[0] = otel_cpu_sample();
	x.samples[0].attrs[1] = 99;
	expect_invalid(f, &x, &o, GW_OTLP_DECODE_INVALID, "samples[0].attribute_indices: attribute_table index 99");
	x.samples[0] = otel_cpu_sample();
	x.samples[0].link = 5;
	expect_invalid(f, &x, &o, GW_OTLP_DECODE_INVALID, "samples[0].link_index: link_table index 5");
	x.samples[0] = otel_cpu_sample();
	x.stack1_extra_loc = 17;
	expect_invalid(f, &x, &o, GW_OTLP_DECODE_INVALID, "dictionary.stack_table[1]: location_table index 17");
	x.stack1_extra_loc = 0;
	x.function1_name = 1000;
	expect_invalid(f, &x, &o, GW_OTLP_DECODE_INVALID, "dictionary.function_table[1]: string_table index 1000");
	x.function1_name = 0;
	x.location1_mapping = 3;
	expect_invalid(f, &x, &o, GW_OTLP_DECODE_INVALID, "dictionary.location_table[1]: mapping_table index 3");
	/* The same out of range index under auto detection is still named, in the version the sample points to. */
	x.location1_mapping = 0;
	x.samples[0].stack = 9;
	expect_invalid(f, &x, NULL, GW_OTLP_DECODE_INVALID, "samples[0].stack_index: stack_table index 9");
	assert_int_equal(f->res.version, GW_OTLP_DECODE_V1_10);
	x.v19 = true;
	x.samples[0].attrs[0] = 50;
	expect_invalid(f, &x, NULL, GW_OTLP_DECODE_INVALID, "samples[0].stack_index: stack_table index 9");
	assert_int_equal(f->res.version, GW_OTLP_DECODE_V1_9);
}

static void test_sample_shapes(void **state)
{
	struct fixture *f = *state;
	struct gw_otlp_decode_options o = { .version = GW_OTLP_DECODE_V1_10 };
	struct xreq x = { .n_samples = 1 };

	x.samples[0] = (struct xsample){ .stack = 2, .values = { 1, 2 }, .n_values = 2, .ts = { 1, 2, 3 }, .n_ts = 3 };
	expect_invalid(f, &x, &o, GW_OTLP_DECODE_INVALID, "2 values for 3 timestamps");
	x.samples[0] = (struct xsample){ .stack = 2 };
	expect_invalid(f, &x, &o, GW_OTLP_DECODE_INVALID, "neither values nor timestamps");
	x.samples[0] = (struct xsample){ .stack = 2, .values = { -4 }, .n_values = 1 };
	expect_invalid(f, &x, &o, GW_OTLP_DECODE_INVALID, "negative value");
	/* link_index is one int32: length-delimited is v1.9's attribute_indices, not v1.10. */
	x.samples[0] = (struct xsample){ .stack = 2, .link = 1, .link_as_len = true, .ts = { 5 }, .n_ts = 1 };
	expect_invalid(f, &x, &o, GW_OTLP_DECODE_INVALID, "link_index: not a varint");
}

static void test_limits(void **state)
{
	struct fixture *f = *state;
	struct gw_otlp_limits lim = { .max_stack_depth = 3 };
	struct gw_otlp_decode_options o = { .limits = &lim };
	struct xreq x = { .n_samples = 2 };

	x.samples[0] = otel_cpu_sample();
	x.samples[1] = otel_cpu_sample();
	expect_invalid(f, &x, &o, GW_OTLP_DECODE_TOO_LARGE, "more than 3 locations (max_stack_depth)");
	lim = (struct gw_otlp_limits){ .max_samples = 1 };
	expect_invalid(f, &x, &o, GW_OTLP_DECODE_TOO_LARGE, "more than 1 samples (max_samples)");
	lim = (struct gw_otlp_limits){ .max_strings = 8 };
	expect_invalid(f, &x, &o, GW_OTLP_DECODE_TOO_LARGE, "string_table has more than 8 entries (max_strings)");
	lim = (struct gw_otlp_limits){ .max_attrs = 2 };
	expect_invalid(f, &x, &o, GW_OTLP_DECODE_TOO_LARGE, "more than 2 attributes (max_attrs)");
	lim = (struct gw_otlp_limits){ .max_sample_points = 3 };
	expect_invalid(f, &x, &o, GW_OTLP_DECODE_TOO_LARGE, "max_sample_points");
	lim = (struct gw_otlp_limits){ .max_work_bytes = 1024 };
	x.extra_strings = 100;
	expect_invalid(f, &x, &o, GW_OTLP_DECODE_TOO_LARGE, "max_work_bytes");
	x.extra_strings = 0;
	lim = (struct gw_otlp_limits){ 0 };
	x.resource_nesting = 50;
	expect_invalid(f, &x, &o, GW_OTLP_DECODE_TOO_LARGE, "nested deeper than 8 (max_nesting)");
	/* Within the limit, the attribute is dropped (the model has no arrays) and counted. */
	x.resource_nesting = 3;
	assert_int_equal(run(f, &x, &o), GW_OTLP_DECODE_OK);
	assert_int_equal(f->res.attrs_dropped, 1);
	assert_null(gw_resource__attr(&f->res.batch->resources[0], "deep"));
}

static void test_malformed_bytes(void **state)
{
	struct fixture *f = *state;
	struct xreq x = { .n_samples = 2, .resource_pid = true };
	uint8_t *copy;
	size_t len;

	x.samples[0] = otel_cpu_sample();
	x.samples[1] = (struct xsample){ .stack = 2, .ts = { 1 }, .n_ts = 1 };
	assert_int_equal(run(f, &x, NULL), GW_OTLP_DECODE_OK);
	len = f->w.len;
	copy = malloc(len);
	/* Every truncation: refused with a message, or (cut between fields) decoded; never a crash. */
	for (size_t n = 0; n < len; n++) {
		memcpy(copy, f->w.buf, n);
		gw_otlp_decode_result_fini(&f->res);
		if (gw_otlp_decode(f->stores, copy, n, NULL, &f->res) != GW_OTLP_DECODE_OK)
			assert_true(f->res.message[0]);
		else if (f->res.batch)
			assert_int_equal(gw_profiles__check(f->res.batch), 0);
	}
	/* A declared length far past the end. */
	{
		const uint8_t huge[] = { 0x0a, 0xff, 0xff, 0xff, 0xff, 0x07, 0x00 };
		gw_otlp_decode_result_fini(&f->res);
		assert_int_equal(gw_otlp_decode(f->stores, huge, sizeof(huge), NULL, &f->res), GW_OTLP_DECODE_INVALID);
		assert_non_null(strstr(f->res.message, "request: malformed field (at byte 0)"));
	}
	/* Every single-byte corruption: no crash, and consistent results. */
	for (size_t i = 0; i < len; i++) {
		memcpy(copy, f->w.buf, len);
		copy[i] ^= 0xa5;
		gw_otlp_decode_result_fini(&f->res);
		if (gw_otlp_decode(f->stores, copy, len, NULL, &f->res) == GW_OTLP_DECODE_OK) {
			assert_int_equal(f->res.received, f->res.accepted + f->res.refused);
			if (f->res.batch)
				assert_int_equal(gw_profiles__check(f->res.batch), 0);
		} else {
			assert_true(f->res.message[0]);
			assert_null(f->res.batch);
		}
	}
	free(copy);
}

static void test_profile_types(void **state)
{
	struct fixture *f = *state;
	struct xreq x = { .n_samples = 1 };
	struct gw_sample *s;

	/* Off-CPU, the OTel profiler's shape: one value (nanoseconds) per timestamp, no period. */
	x.st_type = S_OFF_CPU;
	x.st_unit = S_NS;
	x.pt_type = -1;
	x.samples[0] = (struct xsample){ .stack = 2, .values = { 100, 250 }, .n_values = 2, .ts = { 7, 9 }, .n_ts = 2 };
	assert_int_equal(run(f, &x, NULL), GW_OTLP_DECODE_OK);
	assert_int_equal(f->res.batch->resources[0].profile_type, GW_PROFILE_OFF_CPU);
	s = &f->res.batch->resources[0].samples[0];
	assert_int_equal(s->count, 2);
	assert_int_equal(s->off_cpu_ns, 350);

	/* cpu/nanoseconds: converted to samples of the period. */
	x = (struct xreq){ .v19 = true, .n_samples = 1, .st_type = S_CPU, .st_unit = S_NS, .period = 10000000 };
	x.samples[0] = (struct xsample){ .stack = 2, .values = { 30000000 }, .n_values = 1 };
	assert_int_equal(run(f, &x, &(struct gw_otlp_decode_options){ .version = GW_OTLP_DECODE_V1_9 }),
			 GW_OTLP_DECODE_OK);
	assert_int_equal(f->res.accepted, 3);
	assert_int_equal(f->res.batch->resources[0].frequency_hz, 100);

	/* A type the model has no place for: refused as a profile (partial success). */
	x = (struct xreq){ .n_samples = 2, .st_type = S_EVENTS, .st_unit = S_COUNT };
	x.samples[0] = otel_cpu_sample();
	x.samples[1] = otel_cpu_sample();
	assert_int_equal(run(f, &x, NULL), GW_OTLP_DECODE_OK);
	assert_null(f->res.batch);
	assert_int_equal(f->res.rejected_profiles, 1);
	assert_int_equal(f->res.received, 4);
	assert_int_equal(f->res.refused, 4);
	assert_non_null(strstr(f->res.message, "sample type events/count"));
}

static void test_links(void **state)
{
	struct fixture *f = *state;
	struct xreq x = { .n_samples = 1 };
	struct gw_otlp_decode_options o = { .links = GW_OTLP_LINKS_ATTRIBUTES };
	struct gw_sample *s;

	x.samples[0] = otel_cpu_sample();
	x.samples[0].link = 1;
	assert_int_equal(run(f, &x, NULL), GW_OTLP_DECODE_OK);
	assert_int_equal(f->res.links_dropped, 1);
	assert_int_equal(gw_sample__n_attrs(&f->res.batch->resources[0].samples[0]), 1);

	assert_int_equal(run(f, &x, &o), GW_OTLP_DECODE_OK);
	assert_int_equal(f->res.links_dropped, 0);
	s = &f->res.batch->resources[0].samples[0];
	assert_int_equal(gw_sample__n_attrs(s), 3);
	assert_string_equal(s->attrs->v[1].key, "trace.id");
	assert_string_equal(s->attrs->v[1].v.s, "30313233343536373839616263646566");
	assert_string_equal(s->attrs->v[2].key, "span.id");
	assert_string_equal(s->attrs->v[2].v.s, "4142434445464748");
}

static void test_definitions_shared(void **state)
{
	struct fixture *f = *state;
	struct xreq x = { .n_samples = 1 };
	struct gw_stack *first;
	struct gw_location *plain, *preset;
	struct gw_line other = { .function = "other" };

	x.samples[0] = otel_cpu_sample();
	assert_int_equal(run(f, &x, NULL), GW_OTLP_DECODE_OK);
	first = gw_stack__ref(f->res.batch->resources[0].samples[0].stack);
	/* The same request again: the same stack object (content-addressed). */
	assert_int_equal(run(f, &x, NULL), GW_OTLP_DECODE_OK);
	assert_ptr_equal(f->res.batch->resources[0].samples[0].stack, first);
	/* Preset lines are part of a location's identity. */
	preset = gw_stack__location(first, 1);
	plain = gw_stores__intern_location(f->stores, GW_FRAME_USER, preset->address, gw_location__exe(preset), NULL);
	assert_ptr_not_equal(plain, preset);
	assert_null(gw_location__lines(plain));
	gw_location__unref(plain);
	plain = gw_stores__intern_location_lines(f->stores, GW_FRAME_USER, preset->address, gw_location__exe(preset),
						 NULL, &other, 1);
	assert_ptr_not_equal(plain, preset);
	assert_string_equal(gw_location__lines(plain)->lines[0].function, "other");
	gw_location__unref(plain);
	gw_stack__unref(first);
}

static void test_frames_without_lines(void **state)
{
	struct fixture *f = *state;
	struct gw_otlp_decode_options o = { .version = GW_OTLP_DECODE_V1_10 };
	struct sr_pbw w = { 0 };
	struct gw_stack *st;
	size_t m, l;

	/*
	 * A request of one sample over three frames without lines: an interpreter
	 * frame, a kernel frame, a native frame of a mapping without build ID.
	 */
	m = sr_pbw__begin(&w, 1);
	l = sr_pbw__begin(&w, 2);
	{
		size_t p = sr_pbw__begin(&w, 2), s;
		value_type(&w, 1, 1, 2);
		/* stack 1, values [3] (v1.10 field 4) */
		s = sr_pbw__begin(&w, 2);
		sr_pbw__int(&w, 1, 1);
		sr_pbw__packed_i32(&w, 4, (int32_t[]){ 3 }, 1);
		sr_pbw__end(&w, s);
		sr_pbw__end(&w, p);
	}
	sr_pbw__end(&w, l);
	sr_pbw__end(&w, m);
	m = sr_pbw__begin(&w, 2);
	sr_pbw__end(&w, sr_pbw__begin(&w, 1));
	l = sr_pbw__begin(&w, 1);
	sr_pbw__int(&w, 4, 5); /* filename "/lib/x.so" */
	sr_pbw__end(&w, l);
	sr_pbw__end(&w, sr_pbw__begin(&w, 2));
	l = sr_pbw__begin(&w, 2);
	sr_pbw__uint(&w, 2, 0x11);
	sr_pbw__packed_i32(&w, 4, (int32_t[]){ 1 }, 1);
	sr_pbw__end(&w, l);
	l = sr_pbw__begin(&w, 2);
	sr_pbw__uint(&w, 2, 0x22);
	sr_pbw__packed_i32(&w, 4, (int32_t[]){ 2 }, 1);
	sr_pbw__end(&w, l);
	l = sr_pbw__begin(&w, 2);
	sr_pbw__int(&w, 1, 1);
	sr_pbw__uint(&w, 2, 0x33);
	sr_pbw__end(&w, l);
	for (const char *const *s = (const char *const[]){ "", "samples", "count", "profile.frame.type", "cpython",
							   "/lib/x.so", "kernel", NULL };
	     *s; s++)
		sr_pbw__bytes_always(&w, 5, *s, strlen(*s));
	sr_pbw__end(&w, sr_pbw__begin(&w, 6));
	for (int k = 0; k < 2; k++) {
		size_t a = sr_pbw__begin(&w, 6), v;
		sr_pbw__int(&w, 1, 3);
		v = sr_pbw__begin(&w, 2);
		sr_pbw__string(&w, 1, k ? "kernel" : "cpython");
		sr_pbw__end(&w, v);
		sr_pbw__end(&w, a);
	}
	sr_pbw__end(&w, sr_pbw__begin(&w, 7));
	l = sr_pbw__begin(&w, 7);
	sr_pbw__packed_i32(&w, 1, (int32_t[]){ 1, 2, 3 }, 3);
	sr_pbw__end(&w, l);
	sr_pbw__end(&w, m);
	if (gw_otlp_decode(f->stores, w.buf, w.len, &o, &f->res) != GW_OTLP_DECODE_OK)
		fail_msg("%s", f->res.message);
	st = f->res.batch->resources[0].samples[0].stack;
	assert_int_equal(st->n_locations, 3);
	assert_string_equal(gw_location__lines(gw_stack__location(st, 0))->lines[0].function, "[cpython]+0x11");
	assert_string_equal(gw_location__lines(gw_stack__location(st, 1))->lines[0].function, "[kernel]+0x22");
	assert_string_equal(gw_location__lines(gw_stack__location(st, 2))->lines[0].function, "x.so+0x33");
	for (int k = 0; k < 3; k++) {
		assert_true(gw_location__preset(gw_stack__location(st, k)));
		assert_null(gw_location__exe(gw_stack__location(st, k)));
	}
	sr_pbw__free(&w);
}

static void test_htlhash_mapping(void **state)
{
	struct fixture *f = *state;
	struct xreq x = { .n_samples = 1, .htlhash = true };
	const struct gw_location *l;
	char hex[2 * GW_ID_MAX + 1];

	x.samples[0] = otel_cpu_sample();
	assert_int_equal(run(f, &x, NULL), GW_OTLP_DECODE_OK);
	l = gw_stack__location(f->res.batch->resources[0].samples[0].stack, 0);
	/* Keyed by the content hash; no GNU build ID to look up in debuginfod. */
	assert_int_equal(gw_location__kind(l), GW_FRAME_USER);
	assert_null(gw_location__lines(l));
	assert_int_equal(gw_location__exe(l)->id_kind, GW_EXE_ID_CONTENT_HASH);
	assert_string_equal(gw_id_to_hex(&gw_location__exe(l)->id, hex, sizeof(hex)), "abcdef0123456789");
	assert_int_equal(gw_location__exe(l)->gnu_build_id.len, 0);
}

static void test_version_strings(void **state)
{
	enum gw_otlp_decode_version v;
	(void)state;
	assert_int_equal(gw_otlp_decode_version_from_string("auto", &v), 0);
	assert_int_equal(v, GW_OTLP_DECODE_AUTO);
	assert_int_equal(gw_otlp_decode_version_from_string("v1.9", &v), 0);
	assert_int_equal(v, GW_OTLP_DECODE_V1_9);
	assert_int_equal(gw_otlp_decode_version_from_string("1.10.0", &v), 0);
	assert_int_equal(v, GW_OTLP_DECODE_V1_10);
	assert_int_equal(gw_otlp_decode_version_from_string("1.11", &v), -EINVAL);
	assert_string_equal(gw_otlp_decode_version_to_string(GW_OTLP_DECODE_V1_9), "1.9");
	assert_string_equal(gw_otlp_decode_status_to_string(GW_OTLP_DECODE_AMBIGUOUS), "version ambiguous");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_v10_otel_shape_detected, setup, teardown),
		cmocka_unit_test_setup_teardown(test_v19_otel_shape_detected, setup, teardown),
		cmocka_unit_test_setup_teardown(test_v19_values_only_detected, setup, teardown),
		cmocka_unit_test_setup_teardown(test_v10_values_detected, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ambiguous_refused_then_configured, setup, teardown),
		cmocka_unit_test_setup_teardown(test_same_either_way, setup, teardown),
		cmocka_unit_test_setup_teardown(test_out_of_range_indices, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sample_shapes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_limits, setup, teardown),
		cmocka_unit_test_setup_teardown(test_malformed_bytes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_profile_types, setup, teardown),
		cmocka_unit_test_setup_teardown(test_links, setup, teardown),
		cmocka_unit_test_setup_teardown(test_definitions_shared, setup, teardown),
		cmocka_unit_test_setup_teardown(test_frames_without_lines, setup, teardown),
		cmocka_unit_test_setup_teardown(test_htlhash_mapping, setup, teardown),
		cmocka_unit_test(test_version_strings),
	};
	return cmocka_run_group_tests_name("otlp-decode", tests, NULL, NULL);
}
