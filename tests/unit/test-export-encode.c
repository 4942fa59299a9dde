// SPDX-License-Identifier: Apache-2.0
/*
 * The OTLP encoder, read back with nanopb's decoders generated from the
 * .proto files (a different code path from the hand-written writer): both
 * wire versions, the dictionary rules Pyroscope enforces, de-duplication,
 * process attribute placement, and 413 splitting.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <pb_decode.h>

#include "common/clock.h"
#include "core/heap.h"
#include "core/model.h"
#include "exporters/otlp-encode.h"
#include "common/macro.h"
#include "common/pbwire.h"
#include "test-export-util.h"

#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb.h"
#include "opentelemetry/proto/profiles/v1development/profiles_v1_9.pb.h"

typedef opentelemetry_proto_collector_profiles_v1development_ExportProfilesServiceRequest req10_t;
typedef opentelemetry_proto_profiles_v1development_v1_9_ExportProfilesServiceRequest req9_t;
typedef opentelemetry_proto_profiles_v1development_ProfilesDictionary dict_t;
#define REQ10_FIELDS opentelemetry_proto_collector_profiles_v1development_ExportProfilesServiceRequest_fields
#define REQ9_FIELDS  opentelemetry_proto_profiles_v1development_v1_9_ExportProfilesServiceRequest_fields

struct fixture {
	struct gw_stores *stores;
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

	gw_stores_free(f->stores);
	free(f);
	return 0;
}

/* SR_DUMP_SEEDS=DIR writes encoded requests there (seeds of tests/fuzz/corpus/otlp-response). */
static void dump_seed(const char *name, const struct sr_pbw *w)
{
	const char *dir = getenv("SR_DUMP_SEEDS");
	char path[512];
	FILE *f;

	if (!dir)
		return;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	assert_non_null(f);
	fwrite(w->buf, 1, w->len, f);
	fclose(f);
}

static const char *str(const dict_t *d, int32_t i)
{
	assert_true(i >= 0 && (pb_size_t)i < d->string_table_count);
	return d->string_table[i] ? d->string_table[i] : "";
}

/* Pyroscope's checks: tables present with a zero element 0, every index in bounds. */
static void check_dictionary(const dict_t *d)
{
	assert_true(d->mapping_table_count >= 1);
	assert_true(d->location_table_count >= 1);
	assert_true(d->function_table_count >= 1);
	assert_true(d->stack_table_count >= 1);
	assert_true(d->attribute_table_count >= 1);
	assert_true(d->link_table_count >= 1);
	assert_true(d->string_table_count >= 1);
	assert_string_equal(str(d, 0), "");
	assert_int_equal(d->mapping_table[0].filename_strindex, 0);
	assert_int_equal(d->mapping_table[0].attribute_indices_count, 0);
	assert_int_equal(d->location_table[0].lines_count, 0);
	assert_int_equal(d->function_table[0].name_strindex, 0);
	assert_int_equal(d->stack_table[0].location_indices_count, 0);
	assert_int_equal(d->attribute_table[0].key_strindex, 0);
	for (pb_size_t i = 0; i < d->mapping_table_count; i++) {
		str(d, d->mapping_table[i].filename_strindex);
		for (pb_size_t j = 0; j < d->mapping_table[i].attribute_indices_count; j++)
			assert_true((pb_size_t)d->mapping_table[i].attribute_indices[j] < d->attribute_table_count);
	}
	for (pb_size_t i = 0; i < d->location_table_count; i++) {
		assert_true((pb_size_t)d->location_table[i].mapping_index < d->mapping_table_count);
		for (pb_size_t j = 0; j < d->location_table[i].lines_count; j++)
			assert_true((pb_size_t)d->location_table[i].lines[j].function_index < d->function_table_count);
	}
	for (pb_size_t i = 0; i < d->function_table_count; i++) {
		str(d, d->function_table[i].name_strindex);
		str(d, d->function_table[i].system_name_strindex);
		str(d, d->function_table[i].filename_strindex);
	}
	for (pb_size_t i = 0; i < d->stack_table_count; i++)
		for (pb_size_t j = 0; j < d->stack_table[i].location_indices_count; j++)
			assert_true((pb_size_t)d->stack_table[i].location_indices[j] < d->location_table_count);
	for (pb_size_t i = 1; i < d->attribute_table_count; i++)
		str(d, d->attribute_table[i].key_strindex);
	/* De-duplicated: no string twice. */
	for (pb_size_t i = 0; i < d->string_table_count; i++)
		for (pb_size_t j = i + 1; j < d->string_table_count; j++)
			assert_string_not_equal(str(d, (int32_t)i), str(d, (int32_t)j));
}

static void check_build_id(const dict_t *d, const char *want_hex_prefix)
{
	bool found = false;

	for (pb_size_t i = 1; i < d->mapping_table_count; i++) {
		const opentelemetry_proto_profiles_v1development_Mapping *m = &d->mapping_table[i];

		assert_int_equal(m->attribute_indices_count, 1);
		const opentelemetry_proto_profiles_v1development_KeyValueAndUnit *kv =
			&d->attribute_table[m->attribute_indices[0]];
		assert_string_equal(str(d, kv->key_strindex), "process.executable.build_id.gnu");
		if (strncmp(kv->value.value.string_value, want_hex_prefix, strlen(want_hex_prefix)) == 0)
			found = true;
	}
	assert_true(found);
}

#define CHECK_PROFILE(d, prof)                                                                                         \
	do {                                                                                                           \
		assert_true((prof)->has_sample_type && (prof)->has_period_type);                                       \
		assert_string_equal(str(d, (prof)->sample_type.type_strindex), "samples");                             \
		assert_string_equal(str(d, (prof)->sample_type.unit_strindex), "count");                               \
		assert_string_equal(str(d, (prof)->period_type.type_strindex), "cpu");                                 \
		assert_string_equal(str(d, (prof)->period_type.unit_strindex), "nanoseconds");                         \
		assert_int_equal((prof)->period, 1000000000 / 99);                                                     \
		assert_in_range((prof)->time_unix_nano, 1700000000000000000ULL, 1700000000000000100ULL);               \
		assert_true((prof)->duration_nano > 9000000000ULL);                                                    \
	} while (0)

static uint64_t sum_v10(const req10_t *r, size_t *ret_samples)
{
	uint64_t sum = 0;
	size_t n = 0;

	for (pb_size_t i = 0; i < r->resource_profiles_count; i++)
		for (pb_size_t j = 0; j < r->resource_profiles[i].scope_profiles_count; j++)
			for (pb_size_t k = 0; k < r->resource_profiles[i].scope_profiles[j].profiles_count; k++) {
				const opentelemetry_proto_profiles_v1development_Profile *p =
					&r->resource_profiles[i].scope_profiles[j].profiles[k];

				CHECK_PROFILE(&r->dictionary, p);
				for (pb_size_t s = 0; s < p->samples_count; s++) {
					assert_true((pb_size_t)p->samples[s].stack_index <
						    r->dictionary.stack_table_count);
					assert_true(p->samples[s].stack_index > 0);
					assert_int_equal(p->samples[s].values_count, 1);
					for (pb_size_t a = 0; a < p->samples[s].attribute_indices_count; a++)
						assert_true((pb_size_t)p->samples[s].attribute_indices[a] <
							    r->dictionary.attribute_table_count);
					sum += (uint64_t)p->samples[s].values[0];
					n++;
				}
			}
	*ret_samples = n;
	return sum;
}

static void decode10(const struct sr_pbw *w, req10_t *r)
{
	pb_istream_t s = pb_istream_from_buffer(w->buf, w->len);

	memset(r, 0, sizeof(*r));
	assert_true(pb_decode(&s, REQ10_FIELDS, r));
}

static void test_v1_10(void **state)
{
	struct fixture *f = *state;
	uint64_t total, sum;
	struct gw_profiles *p = xt_batch(f->stores, 1, 2, 50, &total);
	struct gw_otlp_options o = { .version = GW_OTLP_V1_10, .scope_version = "test" };
	struct gw_otlp_stats st;
	struct sr_pbw w = { 0 };
	req10_t r;
	size_t n;

	assert_non_null(p);
	assert_int_equal(gw_otlp_encode(p, &o, &w, &st), 0);
	assert_int_equal(st.total_count, total);
	dump_seed("request-v1.10", &w);
	decode10(&w, &r);
	check_dictionary(&r.dictionary);
	check_build_id(&r.dictionary, "ab01abab");
	assert_int_equal(r.resource_profiles_count, 2);
	sum = sum_v10(&r, &n);
	assert_int_equal(sum, total);
	/* Without process attributes, samples of one stack merge: fewer Sample messages than records. */
	assert_true(n < 100);
	assert_int_equal(n, st.samples);
	/* 7 user functions + the kernel's one; the kernel mapping + the app's. */
	assert_int_equal(st.functions, 1 + 8);
	assert_int_equal(st.mappings, 1 + 2);
	/* Resource attributes as given; no process.pid. */
	for (pb_size_t i = 0; i < r.resource_profiles[0].resource.attributes_count; i++)
		assert_string_not_equal(r.resource_profiles[0].resource.attributes[i].key, "process.pid");
	assert_string_equal(r.resource_profiles[0].resource.attributes[0].key, "service.name");
	assert_string_equal(r.resource_profiles[0].resource.attributes[0].value->value.string_value, "svc-1-0");
	assert_string_equal(r.resource_profiles[0].scope_profiles[0].scope.name, "stackrelay");
	pb_release(REQ10_FIELDS, &r);
	sr_pbw__free(&w);
	gw_profiles__unref(p);
}

/*
 * Off-CPU resources become profiles of their own, in the shape Pyroscope's
 * OTLP conversion names off_cpu: one sample type off_cpu/nanoseconds, no
 * period type, values the nanoseconds (summed when samples of one stack merge).
 */
static void test_off_cpu(void **state)
{
	struct fixture *f = *state;
	uint64_t total;
	struct gw_profiles *p = xt_batch(f->stores, 1, 1, 10, &total);
	struct gw_otlp_options o = { .version = GW_OTLP_V1_10, .scope_version = "test" };
	struct gw_otlp_stats st;
	struct gw_resource *r;
	struct sr_pbw w = { 0 };
	uint64_t ns = 0, cpu = 0;
	int off = 0;
	req10_t req;

	assert_non_null(p);
	struct gw_stack *stack = p->resources[0].samples[0].stack;
	r = gw_profiles__add_typed_resource(p, NULL, 0, 99, GW_PROFILE_OFF_CPU);
	assert_non_null(r);
	assert_int_equal(gw_resource__set_string(p, r, "service.name", "svc-off"), 0);
	for (int i = 0; i < 3; i++) {
		struct gw_sample s = {
			.stack = stack, .count = 2, .off_cpu_ns = 10000000ULL * (uint64_t)(i + 1), .pid = 7, .tid = 7
		};
		assert_int_equal(gw_resource__add_sample(p, r, &s), 0);
		gw_resource__cover(r, 1700000000000000000ULL, 1700000010000000000ULL);
	}
	assert_int_equal(gw_otlp_encode(p, &o, &w, &st), 0);
	assert_int_equal(st.total_count, total + 6);
	decode10(&w, &req);
	check_dictionary(&req.dictionary);
	assert_int_equal(req.resource_profiles_count, 2);
	for (pb_size_t i = 0; i < req.resource_profiles_count; i++) {
		const opentelemetry_proto_profiles_v1development_Profile *prof =
			&req.resource_profiles[i].scope_profiles[0].profiles[0];

		assert_true(prof->has_sample_type);
		if (strcmp(str(&req.dictionary, prof->sample_type.type_strindex), "off_cpu") == 0) {
			off++;
			assert_string_equal(str(&req.dictionary, prof->sample_type.unit_strindex), "nanoseconds");
			assert_false(prof->has_period_type);
			assert_int_equal(prof->period, 0);
			/* One stack: the three samples merged into one value. */
			assert_int_equal(prof->samples_count, 1);
			assert_int_equal(prof->samples[0].values_count, 1);
			ns += (uint64_t)prof->samples[0].values[0];
		} else {
			CHECK_PROFILE(&req.dictionary, prof);
			for (pb_size_t k = 0; k < prof->samples_count; k++)
				cpu += (uint64_t)prof->samples[k].values[0];
		}
	}
	assert_int_equal(off, 1);
	assert_int_equal(ns, 60000000);
	assert_int_equal(cpu, total);
	pb_release(REQ10_FIELDS, &req);
	sr_pbw__free(&w);
	gw_profiles__unref(p);
}

static void test_v1_9(void **state)
{
	struct fixture *f = *state;
	uint64_t total, sum = 0;
	struct gw_profiles *p = xt_batch(f->stores, 2, 1, 40, &total);
	struct gw_otlp_options o = { .version = GW_OTLP_V1_9 };
	struct sr_pbw w = { 0 };
	req9_t r = { 0 };
	req10_t wrong;
	pb_istream_t s;
	uint64_t counted;

	assert_non_null(p);
	assert_int_equal(gw_otlp_encode(p, &o, &w, NULL), 0);
	dump_seed("request-v1.9", &w);
	s = pb_istream_from_buffer(w.buf, w.len);
	assert_true(pb_decode(&s, REQ9_FIELDS, &r));
	check_dictionary(&r.dictionary);
	for (pb_size_t i = 0; i < r.resource_profiles_count; i++) {
		const opentelemetry_proto_profiles_v1development_v1_9_Profile *prof =
			&r.resource_profiles[i].scope_profiles[0].profiles[0];

		CHECK_PROFILE(&r.dictionary, prof);
		for (pb_size_t k = 0; k < prof->samples_count; k++) {
			assert_int_equal(prof->samples[k].values_count, 1);
			assert_true(prof->samples[k].stack_index > 0);
			sum += (uint64_t)prof->samples[k].values[0];
		}
	}
	assert_int_equal(sum, total);
	pb_release(REQ9_FIELDS, &r);

	/* Read as v1.10, a v1.9 Sample's values (field 2) look like attribute indices: the versions differ. */
	decode10(&w, &wrong);
	assert_int_equal(wrong.resource_profiles[0].scope_profiles[0].profiles[0].samples[0].values_count, 0);
	pb_release(REQ10_FIELDS, &wrong);

	assert_int_equal(gw_otlp_count(w.buf, w.len, GW_OTLP_V1_9, &counted), 0);
	assert_int_equal(counted, total);
	/* A v1.9 split (with compaction) decodes as v1.9 and conserves samples. */
	{
		struct sr_pbw a = { 0 }, b = { 0 };
		uint64_t ca, cb;
		req9_t h = { 0 };
		pb_istream_t hs;

		assert_int_equal(gw_otlp_split(w.buf, w.len, GW_OTLP_V1_9, &a, &ca, &b, &cb), 0);
		assert_int_equal(ca + cb, total);
		hs = pb_istream_from_buffer(b.buf, b.len);
		assert_true(pb_decode(&hs, REQ9_FIELDS, &h));
		check_dictionary(&h.dictionary);
		pb_release(REQ9_FIELDS, &h);
		sr_pbw__free(&a);
		sr_pbw__free(&b);
	}
	sr_pbw__free(&w);
	gw_profiles__unref(p);
}

static void test_process_attrs(void **state)
{
	struct fixture *f = *state;
	uint64_t total;
	struct gw_profiles *p = xt_batch(f->stores, 3, 1, 30, &total);
	struct gw_otlp_options o = { .version = GW_OTLP_V1_10, .process_attrs = GW_OTLP_PROCESS_ATTRS_SAMPLE };
	struct sr_pbw w = { 0 };
	req10_t r;
	size_t n;

	assert_non_null(p);
	assert_int_equal(gw_otlp_encode(p, &o, &w, NULL), 0);
	decode10(&w, &r);
	assert_int_equal(sum_v10(&r, &n), total);
	assert_int_equal(n, 30); /* one Sample per record: attributes keep them apart */
	{
		const opentelemetry_proto_profiles_v1development_Sample *smp =
			&r.resource_profiles[0].scope_profiles[0].profiles[0].samples[0];
		const dict_t *d = &r.dictionary;

		assert_int_equal(smp->attribute_indices_count, 3);
		assert_string_equal(str(d, d->attribute_table[smp->attribute_indices[0]].key_strindex), "process.pid");
		assert_int_equal(d->attribute_table[smp->attribute_indices[0]].value.value.int_value, 100);
		assert_string_equal(str(d, d->attribute_table[smp->attribute_indices[1]].key_strindex), "thread.id");
		assert_string_equal(str(d, d->attribute_table[smp->attribute_indices[2]].key_strindex), "thread.name");
		assert_string_equal(d->attribute_table[smp->attribute_indices[2]].value.value.string_value, "worker-0");
	}
	pb_release(REQ10_FIELDS, &r);
	sr_pbw__free(&w);

	/* resource: one ResourceProfiles per pid (3 pids), process.pid among its attributes. */
	o.process_attrs = GW_OTLP_PROCESS_ATTRS_RESOURCE;
	assert_int_equal(gw_otlp_encode(p, &o, &w, NULL), 0);
	dump_seed("request-pid-resources", &w);
	decode10(&w, &r);
	assert_int_equal(r.resource_profiles_count, 3);
	assert_int_equal(sum_v10(&r, &n), total);
	for (pb_size_t i = 0; i < r.resource_profiles_count; i++) {
		const opentelemetry_proto_resource_v1_Resource *res = &r.resource_profiles[i].resource;

		assert_string_equal(res->attributes[res->attributes_count - 1].key, "process.pid");
		assert_int_equal(res->attributes[res->attributes_count - 1].value->value.int_value, 100 + i);
	}
	pb_release(REQ10_FIELDS, &r);
	sr_pbw__free(&w);
	gw_profiles__unref(p);
}

static void test_split(void **state)
{
	struct fixture *f = *state;
	uint64_t total, ca, cb;
	struct gw_otlp_options o = { .version = GW_OTLP_V1_10 };
	struct sr_pbw w = { 0 }, a = { 0 }, b = { 0 };
	req10_t r;
	size_t n;
	pb_size_t whole_stacks, whole_strings;

	/* Several resources: split by resource. */
	struct gw_profiles *p = xt_batch(f->stores, 4, 4, 20, &total);
	assert_non_null(p);
	assert_int_equal(gw_otlp_encode(p, &o, &w, NULL), 0);
	assert_int_equal(gw_otlp_split(w.buf, w.len, GW_OTLP_V1_10, &a, &ca, &b, &cb), 0);
	assert_int_equal(ca + cb, total);
	assert_true(ca > 0 && cb > 0);
	decode10(&w, &r);
	whole_stacks = r.dictionary.stack_table_count;
	whole_strings = r.dictionary.string_table_count;
	pb_release(REQ10_FIELDS, &r);
	decode10(&a, &r);
	check_dictionary(&r.dictionary);
	assert_int_equal(r.resource_profiles_count, 2);
	assert_int_equal(sum_v10(&r, &n), ca);
	/* Each half carries only the dictionary entries it uses (every index still in bounds, checked above). */
	assert_true(r.dictionary.stack_table_count <= whole_stacks);
	assert_true(r.dictionary.string_table_count <= whole_strings);
	pb_release(REQ10_FIELDS, &r);
	decode10(&b, &r);
	check_dictionary(&r.dictionary);
	assert_int_equal(sum_v10(&r, &n), cb);
	pb_release(REQ10_FIELDS, &r);
	sr_pbw__free(&w);
	sr_pbw__free(&a);
	sr_pbw__free(&b);
	gw_profiles__unref(p);

	/* One resource: split its samples, down to single samples which cannot be split. */
	p = xt_batch(f->stores, 5, 1, 8, &total);
	o.process_attrs = GW_OTLP_PROCESS_ATTRS_SAMPLE;
	assert_int_equal(gw_otlp_encode(p, &o, &w, NULL), 0);
	assert_int_equal(gw_otlp_split(w.buf, w.len, GW_OTLP_V1_10, &a, &ca, &b, &cb), 0);
	assert_int_equal(ca + cb, total);
	decode10(&w, &r);
	whole_stacks = r.dictionary.stack_table_count;
	pb_release(REQ10_FIELDS, &r);
	decode10(&b, &r);
	check_dictionary(&r.dictionary);
	/* Half the samples, fewer stacks: the split half's dictionary really shrank. */
	assert_true(r.dictionary.stack_table_count < whole_stacks);
	assert_int_equal(r.resource_profiles_count, 1);
	assert_int_equal(r.resource_profiles[0].scope_profiles[0].profiles[0].samples_count, 4);
	assert_int_equal(sum_v10(&r, &n), cb);
	pb_release(REQ10_FIELDS, &r);
	{
		struct sr_pbw c = { 0 }, d = { 0 }, e = { 0 }, g = { 0 };
		uint64_t cc, cd;

		assert_int_equal(gw_otlp_split(b.buf, b.len, GW_OTLP_V1_10, &c, &cc, &d, &cd), 0);
		assert_int_equal(cc + cd, cb);
		assert_int_equal(gw_otlp_split(c.buf, c.len, GW_OTLP_V1_10, &e, &cc, &g, &cd), 0);
		sr_pbw__free(&e);
		sr_pbw__free(&g);
		/* c now holds 2 samples; one of its halves holds one: cannot split further. */
		assert_int_equal(gw_otlp_split(c.buf, c.len, GW_OTLP_V1_10, &e, &cc, &g, &cd), 0);
		sr_pbw__free(&g);
		g = (struct sr_pbw){ 0 };
		{
			struct sr_pbw h = { 0 }, i = { 0 };
			uint64_t x, y;

			assert_int_equal(gw_otlp_split(e.buf, e.len, GW_OTLP_V1_10, &h, &x, &i, &y), -ERANGE);
			sr_pbw__free(&h);
			sr_pbw__free(&i);
		}
		sr_pbw__free(&c);
		sr_pbw__free(&d);
		sr_pbw__free(&e);
	}
	/* Garbage is refused, not crashed on. */
	{
		static const uint8_t junk[] = { 0x0a, 0x7f, 0x01 };
		uint64_t x;

		assert_int_equal(gw_otlp_count(junk, sizeof(junk), GW_OTLP_V1_10, &x), -EINVAL);
	}
	sr_pbw__free(&w);
	sr_pbw__free(&a);
	sr_pbw__free(&b);
	gw_profiles__unref(p);
}

static void test_empty_and_unsymbolized(void **state)
{
	struct fixture *f = *state;
	struct gw_profiles *p = gw_profiles_new();
	struct gw_otlp_options o = { .version = GW_OTLP_V1_10 };
	struct sr_pbw w = { 0 };
	req10_t r;
	struct gw_location *l;
	struct gw_stack *st;
	struct gw_resource *res;
	struct gw_sample smp = { .count = 3 };
	uint8_t sid[4] = { 9, 9, 9, 9 };
	size_t n;

	/* An empty batch is a valid request with only the dictionary's zero elements. */
	assert_int_equal(gw_otlp_encode(p, &o, &w, NULL), 0);
	decode10(&w, &r);
	check_dictionary(&r.dictionary);
	assert_int_equal(r.resource_profiles_count, 0);
	pb_release(REQ10_FIELDS, &r);
	sr_pbw__free(&w);

	/* An unknown (JIT) frame: a location without lines and mapping 0. */
	l = gw_stores__intern_location(f->stores, GW_FRAME_UNKNOWN, 0x7f0000001234, NULL, NULL);
	st = gw_stores__intern_stack(f->stores, sid, sizeof(sid), false, &l, 1);
	assert_non_null(st);
	res = gw_profiles__add_resource(p, NULL, 0, 19);
	smp.stack = st;
	assert_int_equal(gw_resource__add_sample(p, res, &smp), 0);
	gw_resource__cover(res, 1, 2);
	gw_stack__unref(st);
	assert_int_equal(gw_otlp_encode(p, &o, &w, NULL), 0);
	decode10(&w, &r);
	check_dictionary(&r.dictionary);
	assert_int_equal(r.dictionary.location_table_count, 2);
	assert_int_equal(r.dictionary.location_table[1].mapping_index, 0);
	assert_int_equal(r.dictionary.location_table[1].address, 0x7f0000001234);
	assert_int_equal(r.dictionary.location_table[1].lines_count, 0);
	assert_int_equal(r.resource_profiles[0].scope_profiles[0].profiles[0].period, 1000000000 / 19);
	(void)n;
	pb_release(REQ10_FIELDS, &r);
	sr_pbw__free(&w);
	gw_profiles__unref(p);
}

/* The frame type attribute of a location, or NULL. */
static const char *frame_type_of(const dict_t *d, const opentelemetry_proto_profiles_v1development_Location *l)
{
	for (pb_size_t i = 0; i < l->attribute_indices_count; i++) {
		const opentelemetry_proto_profiles_v1development_KeyValueAndUnit *a =
			&d->attribute_table[l->attribute_indices[i]];

		if (!strcmp(str(d, a->key_strindex), "profile.frame.type"))
			return a->value.value.string_value;
	}
	return NULL;
}

/* Interpreted and JIT frames: Function + Line from the agent's definition, and profile.frame.type. */
static void test_functions(void **state)
{
	struct fixture *f = *state;
	static const struct {
		const char *exe, *jit_type;
	} cases[] = { { "node", "v8js" }, { "myapp", "perf-map" } };

	for (size_t c = 0; c < SR_ARRAY_SIZE(cases); c++) {
		struct gw_profiles *p = xt_function_batch(f->stores, cases[c].exe, NULL);
		struct gw_otlp_options o = { .version = GW_OTLP_V1_10 };
		struct sr_pbw w = { 0 };
		const dict_t *d;
		const opentelemetry_proto_profiles_v1development_Stack *stk;
		const opentelemetry_proto_profiles_v1development_Location *l;
		req10_t r;

		assert_int_equal(gw_otlp_encode(p, &o, &w, NULL), 0);
		decode10(&w, &r);
		d = &r.dictionary;
		check_dictionary(d);
		stk = &d->stack_table[r.resource_profiles[0].scope_profiles[0].profiles[0].samples[0].stack_index];
		assert_int_equal(stk->location_indices_count, 3);
		l = &d->location_table[stk->location_indices[0]];
		assert_string_equal(frame_type_of(d, l), cases[c].jit_type);
		assert_int_equal(l->lines_count, 1);
		assert_string_equal(str(d, d->function_table[l->lines[0].function_index].name_strindex),
				    "JS:*hot /app/x.js:3");
		l = &d->location_table[stk->location_indices[1]];
		assert_string_equal(frame_type_of(d, l), "cpython");
		assert_int_equal(l->mapping_index, 0);
		assert_int_equal(l->address, 24);
		assert_int_equal(l->lines_count, 1);
		assert_int_equal(l->lines[0].line, 12);
		{
			const opentelemetry_proto_profiles_v1development_Function *fn =
				&d->function_table[l->lines[0].function_index];

			assert_string_equal(str(d, fn->name_strindex), "alpha");
			assert_string_equal(str(d, fn->filename_strindex), "/app/work.py");
			assert_int_equal(fn->start_line, 10);
		}
		l = &d->location_table[stk->location_indices[2]];
		assert_null(frame_type_of(d, l)); /* native frames carry none */
		pb_release(REQ10_FIELDS, &r);

		/* v1.9 carries the same dictionary. */
		{
			struct gw_otlp_options o9 = { .version = GW_OTLP_V1_9 };
			struct sr_pbw w9 = { 0 };
			req9_t r9 = { 0 };
			pb_istream_t is;

			assert_int_equal(gw_otlp_encode(p, &o9, &w9, NULL), 0);
			is = pb_istream_from_buffer(w9.buf, w9.len);
			assert_true(pb_decode(&is, REQ9_FIELDS, &r9));
			check_dictionary(&r9.dictionary);
			{
				int found = 0;

				for (pb_size_t i = 0; i < r9.dictionary.location_table_count; i++) {
					const char *t = frame_type_of(&r9.dictionary, &r9.dictionary.location_table[i]);

					found += t && !strcmp(t, "cpython");
				}
				assert_int_equal(found, 1);
			}
			pb_release(REQ9_FIELDS, &r9);
			sr_pbw__free(&w9);
		}
		sr_pbw__free(&w);
		gw_profiles__unref(p);
	}
}

/*
 * Functions are one per (name, system name, file, start line): lines of one
 * function at other lines share it, and functions that share only a name
 * (another file, start line or system name) do not.
 */
static void test_functions_by_name(void **state)
{
	struct fixture *f = *state;
	static const struct {
		const char *name, *sys, *file;
		uint32_t start, line;
		int fn; /* which distinct function, 1-based */
	} cases[] = {
		{ "f", "", "a.c", 10, 11, 1 },	  { "f", "", "a.c", 10, 12, 1 },    { "f", "", "b.c", 10, 13, 2 },
		{ "f", "", "b.c", 10, 30, 2 },	  { "g", "f", "a.c", 10, 14, 3 },   { "f", "_Zf", "a.c", 10, 15, 4 },
		{ "f", "_Zf", "a.c", 10, 16, 4 }, { "f", "", "a.c", 20, 21, 5 },    { "f", "", "b.c", 10, 31, 2 },
		{ "g", "", "a.c", 10, 17, 6 },	  { "f", "_Zf", "b.c", 10, 18, 7 }, { "f", "", "a.c", 10, 19, 1 },
	};
	enum { N = SR_ARRAY_SIZE(cases) };
	static const uint8_t eid[20] = { 0xe7 }, sid[16] = { 0x57 };
	struct gw_executable_def de = { .id = eid, .id_len = 20, .id_kind = GW_EXE_ID_GNU_BUILD_ID, .file_name = "app" };
	struct gw_executable *e = gw_stores__intern_executable(f->stores, &de);
	struct gw_attr attrs[] = { { .key = "service.name", .type = GW_ATTR_STRING, .v.s = "fns" } };
	struct gw_location *locs[N];
	struct gw_profiles *p = gw_profiles_new();
	struct gw_sample smp = { .count = 3, .pid = 9, .tid = 9 };
	struct gw_otlp_options o = { .version = GW_OTLP_V1_10 };
	struct sr_pbw w = { 0 };
	int32_t seen[8] = { 0 }; /* function index of each distinct function */
	const opentelemetry_proto_profiles_v1development_Stack *stk;
	struct gw_resource *r;
	struct gw_stack *st;
	const dict_t *d;
	req10_t req;

	assert_non_null(e);
	assert_non_null(p);
	for (size_t i = 0; i < N; i++) {
		struct gw_line ln = { .function = cases[i].name,
				      .system_name = cases[i].sys,
				      .file = cases[i].file,
				      .line = cases[i].line,
				      .start_line = cases[i].start };
		struct gw_lines *lines = gw_lines_new(&ln, 1);

		locs[i] = gw_stores__intern_location(f->stores, GW_FRAME_USER, 0x1000 + 16 * i, e, NULL);
		assert_non_null(locs[i]);
		assert_non_null(lines);
		assert_true(gw_location__set_lines(locs[i], lines));
	}
	st = gw_stores__intern_stack(f->stores, sid, sizeof(sid), false, locs, N);
	assert_non_null(st);
	r = gw_profiles__add_resource(p, attrs, 1, 99);
	assert_non_null(r);
	smp.stack = st;
	assert_true(gw_resource__add_sample(p, r, &smp) >= 0);
	gw_resource__cover(r, 1, 2);
	gw_stack__unref(st);

	assert_int_equal(gw_otlp_encode(p, &o, &w, NULL), 0);
	decode10(&w, &req);
	d = &req.dictionary;
	check_dictionary(d);
	assert_int_equal(d->function_table_count, 1 + 7);
	stk = &d->stack_table[req.resource_profiles[0].scope_profiles[0].profiles[0].samples[0].stack_index];
	assert_int_equal(stk->location_indices_count, N);
	for (size_t i = 0; i < N; i++) {
		const opentelemetry_proto_profiles_v1development_Location *l =
			&d->location_table[stk->location_indices[i]];
		const opentelemetry_proto_profiles_v1development_Function *fn;
		int32_t fi;

		assert_int_equal(l->lines_count, 1);
		assert_int_equal(l->lines[0].line, cases[i].line);
		fi = l->lines[0].function_index;
		fn = &d->function_table[fi];
		assert_string_equal(str(d, fn->name_strindex), cases[i].name);
		assert_string_equal(str(d, fn->system_name_strindex), *cases[i].sys ? cases[i].sys : cases[i].name);
		assert_string_equal(str(d, fn->filename_strindex), cases[i].file);
		assert_int_equal(fn->start_line, cases[i].start);
		if (!seen[cases[i].fn])
			seen[cases[i].fn] = fi;
		assert_int_equal(fi, seen[cases[i].fn]); /* one entry per distinct function */
	}
	pb_release(REQ10_FIELDS, &req);
	sr_pbw__free(&w);
	gw_profiles__unref(p);
	gw_executable__unref(e);
}

static void test_version_strings(void **state)
{
	enum gw_otlp_version v;

	assert_int_equal(gw_otlp_version_from_string("1.10", &v), 0);
	assert_int_equal(v, GW_OTLP_V1_10);
	assert_int_equal(gw_otlp_version_from_string("1.9", &v), 0);
	assert_int_equal(v, GW_OTLP_V1_9);
	assert_int_equal(gw_otlp_version_from_string("1.8", &v), -EINVAL);
	assert_string_equal(gw_otlp_version_to_string(GW_OTLP_V1_9), "1.9");
}

/* The dictionaries kept between requests are a cache: released under memory pressure, and encoding goes on. */
/* A stack's frames as "address,address,...", leaf first. */
static void frames_key(char *buf, size_t size, const uint64_t *addr, size_t n)
{
	size_t off = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < n && off < size; i++)
		off += (size_t)snprintf(buf + off, size - off, "%llx,", (unsigned long long)addr[i]);
}

static int by_string(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * Locations are added to the dictionary sorted by their slot in the
 * location table (otlp_dict.c, gw_otlp_dict_resolve()): with thousands of
 * them the sort takes several passes, and locations shared by many stacks
 * at random places must still come back as each stack's frames, in order.
 */
static void test_many_shared_locations(void **state)
{
	enum { N_LOCS = 5000, N_STACKS = 600, MAX_DEPTH = 40 };
	struct fixture *f = *state;
	static const uint8_t eid[20] = { 0xe5 };
	struct gw_executable_def de = { .id = eid, .id_len = 20, .id_kind = GW_EXE_ID_GNU_BUILD_ID, .file_name = "app" };
	struct gw_executable *e = gw_stores__intern_executable(f->stores, &de);
	struct gw_location **locs = calloc(N_LOCS, sizeof(*locs));
	char **want = calloc(N_STACKS, sizeof(*want)), **got = calloc(N_STACKS, sizeof(*got));
	struct gw_profiles *p = gw_profiles_new();
	struct gw_otlp_options o = { .version = GW_OTLP_V1_10 };
	struct sr_pbw w = { 0 };
	struct gw_otlp_stats st;
	uint32_t seed = 12345;
	req10_t r;

	assert_non_null(e);
	assert_non_null(p);
	for (int i = 0; i < 3; i++) {
		struct gw_attr a = { .key = "process.executable.name",
				     .type = GW_ATTR_STRING,
				     .v.s = i == 0   ? "app"
					    : i == 1 ? "web"
						     : "db" };

		assert_non_null(gw_profiles__add_resource(p, &a, 1, 99));
	}
	for (uint32_t i = 0; i < N_LOCS; i++) {
		locs[i] = gw_stores__intern_location(f->stores, GW_FRAME_USER, 0x10000 + 16 * (uint64_t)i, e, NULL);
		assert_non_null(locs[i]);
	}
	for (uint32_t i = 0; i < N_STACKS; i++) {
		struct gw_location *frames[MAX_DEPTH];
		uint64_t addr[MAX_DEPTH];
		uint8_t id[16] = { 0x5a };
		struct gw_resource *res = &p->resources[i % 3];
		struct gw_stack *stk;
		uint32_t n;

		seed = seed * 1103515245u + 12345u;
		n = 1 + (seed >> 16) % MAX_DEPTH;
		/* Its own leaf: no two stacks alike. The stack takes these references. */
		frames[0] = gw_location__ref(locs[i]);
		for (uint32_t k = 1; k < n; k++) {
			seed = seed * 1103515245u + 12345u;
			frames[k] = gw_location__ref(locs[(seed >> 8) % N_LOCS]);
		}
		for (uint32_t k = 0; k < n; k++)
			addr[k] = frames[k]->address;
		memcpy(id + 1, &i, sizeof(i));
		stk = gw_stores__intern_stack(f->stores, id, sizeof(id), false, frames, n);
		assert_non_null(stk);
		want[i] = malloc(MAX_DEPTH * 20);
		frames_key(want[i], MAX_DEPTH * 20, addr, n);
		assert_int_equal(gw_resource__add_sample(p, res, &(struct gw_sample){ .stack = stk, .count = 1 }), 0);
		gw_resource__cover(res, 1, 2);
		gw_stack__unref(stk);
	}
	assert_int_equal(gw_otlp_encode(p, &o, &w, &st), 0);
	decode10(&w, &r);
	check_dictionary(&r.dictionary);
	assert_int_equal(r.dictionary.stack_table_count, N_STACKS + 1);
	for (pb_size_t i = 1; i < r.dictionary.stack_table_count; i++) {
		const opentelemetry_proto_profiles_v1development_Stack *stk = &r.dictionary.stack_table[i];
		uint64_t addr[MAX_DEPTH];

		assert_true(stk->location_indices_count <= MAX_DEPTH);
		for (pb_size_t k = 0; k < stk->location_indices_count; k++)
			addr[k] = r.dictionary.location_table[stk->location_indices[k]].address;
		got[i - 1] = malloc(MAX_DEPTH * 20);
		frames_key(got[i - 1], MAX_DEPTH * 20, addr, stk->location_indices_count);
	}
	/* Each location once. */
	for (pb_size_t i = 1; i < r.dictionary.location_table_count; i++)
		for (pb_size_t k = i + 1; k < r.dictionary.location_table_count && k < i + 64; k++)
			assert_true(r.dictionary.location_table[i].address != r.dictionary.location_table[k].address);
	assert_true(st.locations <= N_LOCS + 1);
	qsort(want, N_STACKS, sizeof(*want), by_string);
	qsort(got, N_STACKS, sizeof(*got), by_string);
	for (uint32_t i = 0; i < N_STACKS; i++) {
		assert_string_equal(got[i], want[i]);
		free(got[i]);
		free(want[i]);
	}
	pb_release(REQ10_FIELDS, &r);
	sr_pbw__free(&w);
	gw_profiles__unref(p);
	for (uint32_t i = 0; i < N_LOCS; i++)
		gw_location__unref(locs[i]);
	gw_executable__unref(e);
	free(locs);
	free(want);
	free(got);
}

/* A JIT frame in processes of two runtimes: its profile.frame.type is the runtime of the first sample naming it. */
static void test_jit_type_of_first_sample(void **state)
{
	struct fixture *f = *state;
	static const char *const exes[2] = { "node", "myapp" };

	for (int first = 0; first < 2; first++) {
		struct gw_profiles *a = xt_function_batch(f->stores, exes[first], NULL);
		struct gw_profiles *b = xt_function_batch(f->stores, exes[!first], NULL);
		struct gw_otlp_options o = { .version = GW_OTLP_V1_10 };
		struct sr_pbw w = { 0 };
		req10_t r;
		int jit = 0;

		assert_non_null(a);
		assert_non_null(b);
		assert_int_equal(gw_profiles__merge(a, b), 0); /* consumes b */
		assert_int_equal(a->n_resources, 2);
		assert_int_equal(gw_otlp_encode(a, &o, &w, NULL), 0);
		decode10(&w, &r);
		check_dictionary(&r.dictionary);
		for (pb_size_t i = 1; i < r.dictionary.location_table_count; i++) {
			const char *t = frame_type_of(&r.dictionary, &r.dictionary.location_table[i]);

			if (t && strcmp(t, "cpython") != 0) {
				assert_string_equal(t, first == 0 ? "v8js" : "perf-map");
				jit++;
			}
		}
		assert_int_equal(jit, 1); /* one location, one stack: both resources name it */
		pb_release(REQ10_FIELDS, &r);
		sr_pbw__free(&w);
		gw_profiles__unref(a);
	}
}

static void count_encoder_cache(const char *name, size_t bytes, void *arg)
{
	if (strcmp(name, "otlp_encoder") == 0)
		*(size_t *)arg += bytes;
}

static void test_kept_scratch_released(void **state)
{
	struct fixture *f = *state;
	uint64_t total;
	struct gw_profiles *p = xt_batch(f->stores, 2, 1, 40, &total);
	struct gw_otlp_options o = { .version = GW_OTLP_V1_10 };
	struct sr_pbw w = { 0 }, w2 = { 0 };

	assert_non_null(p);
	assert_int_equal(gw_otlp_encode(p, &o, &w, NULL), 0);
	assert_true(gw_otlp_encode_kept_bytes() > 0);
	/* Listed for /metrics by name, with what it keeps. */
	size_t listed = 0;
	gw_heap_caches_each(count_encoder_cache, &listed);
	assert_int_equal(listed, gw_otlp_encode_kept_bytes());
	gw_heap_release_caches();
	assert_int_equal(gw_otlp_encode_kept_bytes(), 0);
	assert_int_equal(gw_otlp_encode(p, &o, &w2, NULL), 0); /* grown again from nothing: the same bytes */
	assert_int_equal(w2.len, w.len);
	assert_memory_equal(w2.buf, w.buf, w.len);
	assert_true(gw_otlp_encode_kept_bytes() > 0);
	sr_pbw__free(&w);
	sr_pbw__free(&w2);
	gw_profiles__unref(p);
}

/* A kept set not taken for GW_OTLP_ENCODE_KEEP_IDLE_NS is freed, by the next keep or the heap trim; a recent one stays. */
static void test_kept_scratch_ages_out(void **state)
{
	struct fixture *f = *state;
	uint64_t total, now;
	struct gw_profiles *p = xt_batch(f->stores, 2, 1, 40, &total);
	struct gw_otlp_options o = { .version = GW_OTLP_V1_10 };
	struct sr_pbw w = { 0 };

	assert_non_null(p);
	gw_heap_release_caches();
	assert_int_equal(gw_otlp_encode(p, &o, &w, NULL), 0);
	/* One encoding at a time takes the set it kept last: one set, however many encodings. */
	assert_int_equal(gw_otlp_encode(p, &o, &w, NULL), 0);
	assert_int_equal(gw_otlp_encode_kept_sets(), 1);
	now = sr_now_ns();
	assert_int_equal(gw_otlp_encode_trim_kept(now), 0); /* just kept */
	assert_int_equal(gw_otlp_encode_kept_sets(), 1);
	assert_int_equal(gw_otlp_encode_trim_kept(now + GW_OTLP_ENCODE_KEEP_IDLE_NS + 1), 1);
	assert_int_equal(gw_otlp_encode_kept_sets(), 0);
	assert_int_equal(gw_otlp_encode_kept_bytes(), 0);
	assert_int_equal(gw_otlp_encode_trim_kept(0), 0); /* nothing left, and no underflow */
	/* The gateway's periodic heap trim frees an idle set too, without another encoding. */
	assert_int_equal(gw_otlp_encode(p, &o, &w, NULL), 0);
	now = sr_now_ns();
	gw_heap_trim_caches(now);
	assert_int_equal(gw_otlp_encode_kept_sets(), 1);
	gw_heap_trim_caches(now + GW_OTLP_ENCODE_KEEP_IDLE_NS + 1);
	assert_int_equal(gw_otlp_encode_kept_sets(), 0);
	sr_pbw__free(&w);
	gw_profiles__unref(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_v1_10, setup, teardown),
		cmocka_unit_test_setup_teardown(test_v1_9, setup, teardown),
		cmocka_unit_test_setup_teardown(test_off_cpu, setup, teardown),
		cmocka_unit_test_setup_teardown(test_process_attrs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_split, setup, teardown),
		cmocka_unit_test_setup_teardown(test_empty_and_unsymbolized, setup, teardown),
		cmocka_unit_test_setup_teardown(test_functions, setup, teardown),
		cmocka_unit_test_setup_teardown(test_functions_by_name, setup, teardown),
		cmocka_unit_test_setup_teardown(test_many_shared_locations, setup, teardown),
		cmocka_unit_test_setup_teardown(test_jit_type_of_first_sample, setup, teardown),
		cmocka_unit_test_setup_teardown(test_kept_scratch_released, setup, teardown),
		cmocka_unit_test_setup_teardown(test_kept_scratch_ages_out, setup, teardown),
		cmocka_unit_test(test_version_strings),
	};

	return cmocka_run_group_tests_name("export-encode", tests, NULL, NULL);
}
