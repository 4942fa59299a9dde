// SPDX-License-Identifier: Apache-2.0
/*
 * The agent's OTLP encoder (agent/otlp-encode.c) against a decoder it does
 * not share code with: nanopb's, generated from proto/opentelemetry. Windows
 * of the fake store's samples (test-agent-sender-fakestore.h) are encoded in
 * v1.10 and v1.9 and decoded back: every index in bounds, counts conserved,
 * native frames as mapping + address with the build ID, Python frames
 * named, frame types, resources per process, and the exporter's queue bound.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <pb_decode.h>

#include "agent.h"
#include "agent/config.h"
#include "agent/otlp-encode.h"
#include "agent/otlp-export.h"
#include "agent/otlp-kernel-names.h"
#include "agent/kernel.h"
#include "common/otlp-fields.h"
#include "common/pbwire.h"
#include "test-agent-sender-fakestore.h"

#define P(m) opentelemetry_proto_profiles_v1development_##m
typedef opentelemetry_proto_collector_profiles_v1development_ExportProfilesServiceRequest req10_t;
typedef opentelemetry_proto_profiles_v1development_v1_9_ExportProfilesServiceRequest req9_t;

static struct agent_batch make_batch(unsigned n, uint64_t *ret_total)
{
	struct agent_batch b = { 0 };

	b.samples = calloc(n, sizeof(*b.samples));
	b.n_samples = n;
	b.frequency_hz = 19;
	*ret_total = 0;
	for (unsigned i = 0; i < n; i++) {
		/* Three processes; stack i, count i + 1. */
		fake_sample(&b.samples[i], i, 100 + i % 3, i + 1);
		*ret_total += i + 1;
	}
	b.total_count = *ret_total;
	return b;
}

static void batch_free(struct agent_batch *b)
{
	for (size_t i = 0; i < b->n_samples; i++)
		pb_release(stackrelay_v1_Sample_fields, &b->samples[i]);
	free(b->samples);
	*b = (struct agent_batch){ 0 };
}

static const char *str(const P(ProfilesDictionary) * d, int32_t i)
{
	assert_true(i >= 0 && (pb_size_t)i < d->string_table_count);
	return d->string_table[i];
}

/* The string value of attribute_table[i] under key, or NULL when its key differs. */
static const char *attr_str(const P(ProfilesDictionary) * d, int32_t i, const char *key)
{
	const P(KeyValueAndUnit) * a;

	assert_true(i > 0 && (pb_size_t)i < d->attribute_table_count);
	a = &d->attribute_table[i];
	if (strcmp(str(d, a->key_strindex), key) != 0)
		return NULL;
	assert_true(a->has_value);
	assert_int_equal(a->value.which_value, opentelemetry_proto_common_v1_AnyValue_string_value_tag);
	return a->value.value.string_value;
}

static const char *resource_attr(const opentelemetry_proto_resource_v1_Resource *r, const char *key)
{
	static char buf[32];

	for (pb_size_t i = 0; i < r->attributes_count; i++) {
		const opentelemetry_proto_common_v1_KeyValue *kv = &r->attributes[i];
		if (strcmp(kv->key, key) != 0)
			continue;
		if (kv->value->which_value == opentelemetry_proto_common_v1_AnyValue_int_value_tag) {
			snprintf(buf, sizeof(buf), "%lld", (long long)kv->value->value.int_value);
			return buf;
		}
		return kv->value->value.string_value;
	}
	return NULL;
}

struct seen {
	uint64_t total;
	unsigned named_python, native_with_build_id, kernel, samples;
};

/* Checks one stack's locations; counts what kinds of frames it had. */
static void check_stack(const P(ProfilesDictionary) * d, int32_t si, struct seen *s)
{
	const P(Stack) * st;

	assert_true(si > 0 && (pb_size_t)si < d->stack_table_count);
	st = &d->stack_table[si];
	assert_int_equal(st->location_indices_count, 3);
	for (pb_size_t k = 0; k < st->location_indices_count; k++) {
		int32_t li = st->location_indices[k];
		const P(Location) * loc;
		const char *type = NULL;

		assert_true(li > 0 && (pb_size_t)li < d->location_table_count);
		loc = &d->location_table[li];
		for (pb_size_t a = 0; a < loc->attribute_indices_count; a++)
			type = type ? type : attr_str(d, loc->attribute_indices[a], "profile.frame.type");
		assert_non_null(type);
		assert_true(loc->mapping_index >= 0 && (pb_size_t)loc->mapping_index < d->mapping_table_count);
		if (strcmp(type, "cpython") == 0) {
			const P(Function) * fn;
			assert_int_equal(loc->lines_count, 1);
			assert_true(loc->lines[0].function_index > 0 &&
				    (pb_size_t)loc->lines[0].function_index < d->function_table_count);
			fn = &d->function_table[loc->lines[0].function_index];
			assert_memory_equal(str(d, fn->name_strindex), "func", 4);
			assert_string_equal(str(d, fn->filename_strindex), "/app/main.py");
			assert_true(loc->lines[0].line >= 10);
			s->named_python++;
		} else if (strcmp(type, "native") == 0) {
			const P(Mapping) *m = &d->mapping_table[loc->mapping_index];
			const char *bid = NULL;
			assert_int_equal(loc->lines_count, 0);
			assert_true(loc->mapping_index > 0);
			assert_true(loc->address >= 0x401000);
			assert_memory_equal(str(d, m->filename_strindex), "/usr/bin/exe", 12);
			for (pb_size_t a = 0; a < m->attribute_indices_count; a++)
				bid = bid ? bid
					  : attr_str(d, m->attribute_indices[a], "process.executable.build_id.gnu");
			assert_non_null(bid);
			assert_int_equal(strlen(bid), 2 * FAKE_EXEC_ID_BYTES);
			s->native_with_build_id++;
		} else {
			assert_string_equal(type, "kernel");
			assert_string_equal(str(d, d->mapping_table[loc->mapping_index].filename_strindex),
					    "[kernel.kallsyms]");
			s->kernel++;
		}
	}
}

static void check_dictionary_zeroes(const P(ProfilesDictionary) * d)
{
	/* Element 0 of every table is the zero value: Pyroscope needs mapping_table[0]. */
	assert_true(d->mapping_table_count >= 1 && d->location_table_count >= 1 && d->function_table_count >= 1);
	assert_true(d->string_table_count >= 1 && d->attribute_table_count >= 1 && d->stack_table_count >= 1);
	assert_string_equal(d->string_table[0], "");
	assert_int_equal(d->mapping_table[0].filename_strindex, 0);
	assert_int_equal(d->stack_table[0].location_indices_count, 0);
}

static void check_profile_types(const P(ProfilesDictionary) * d, const P(Profile) * p)
{
	assert_true(p->has_sample_type && p->has_period_type);
	assert_string_equal(str(d, p->sample_type.type_strindex), "samples");
	assert_string_equal(str(d, p->sample_type.unit_strindex), "count");
	assert_string_equal(str(d, p->period_type.type_strindex), "cpu");
	assert_string_equal(str(d, p->period_type.unit_strindex), "nanoseconds");
	assert_int_equal(p->period, 1000000000 / 19);
	assert_int_equal(p->time_unix_nano, 1700000000000000000ULL);
	assert_int_equal(p->duration_nano, 10000000000ULL);
}

static void encode(struct agent_store *st, const struct agent_batch *b, int version, struct sr_pbw *w,
		   struct agent_otlp_encode_stats *es)
{
	struct agent_otlp_meta meta = { .version = version, .host_name = "node-1", .scope_version = "test" };

	*w = (struct sr_pbw){ 0 };
	assert_int_equal(agent_otlp_encode(st, b, 0, b->n_samples, &meta, w, es), 0);
}

/* Encodes b as v1.10 and decodes it into req (pb_release() it). */
static void encode_decode(struct agent_store *st, const struct agent_batch *b, req10_t *req,
			  struct agent_otlp_encode_stats *es)
{
	struct sr_pbw w;
	pb_istream_t is;

	encode(st, b, AGENT_OTLP_V1_10, &w, es);
	is = pb_istream_from_buffer(w.buf, w.len);
	assert_true(pb_decode(
		&is, opentelemetry_proto_collector_profiles_v1development_ExportProfilesServiceRequest_fields, req));
	sr_pbw__free(&w);
}

static void test_v1_10(void **state)
{
	struct agent_store *st = fake_store_new(64, 5);
	uint64_t total;
	struct agent_batch b = make_batch(40, &total);
	struct agent_otlp_encode_stats es;
	req10_t req = { 0 };
	struct seen s = { 0 };

	(void)state;
	encode_decode(st, &b, &req, &es);
	assert_int_equal(es.count, total);
	assert_int_equal(es.lost, 0);
	assert_true(req.has_dictionary);
	check_dictionary_zeroes(&req.dictionary);
	/* One resource per process. */
	assert_int_equal(req.resource_profiles_count, 3);
	for (pb_size_t r = 0; r < req.resource_profiles_count; r++) {
		const P(ResourceProfiles) *rp = &req.resource_profiles[r];
		const char *pid = resource_attr(&rp->resource, "process.pid");

		assert_non_null(pid);
		assert_true(atoi(pid) >= 100 && atoi(pid) <= 102);
		assert_string_equal(resource_attr(&rp->resource, "host.name"), "node-1");
		assert_int_equal(rp->scope_profiles_count, 1);
		assert_string_equal(rp->scope_profiles[0].scope.name, "stackrelay-agent");
		assert_int_equal(rp->scope_profiles[0].profiles_count, 1);
		for (pb_size_t p = 0; p < rp->scope_profiles[0].profiles_count; p++) {
			const P(Profile) *pr = &rp->scope_profiles[0].profiles[p];
			check_profile_types(&req.dictionary, pr);
			for (pb_size_t i = 0; i < pr->samples_count; i++) {
				const P(Sample) *smp = &pr->samples[i];
				const char *tname = NULL;
				assert_int_equal(smp->values_count, 1);
				s.total += (uint64_t)smp->values[0];
				s.samples++;
				for (pb_size_t a = 0; a < smp->attribute_indices_count; a++)
					tname = tname ? tname
						      : attr_str(&req.dictionary, smp->attribute_indices[a],
								 "thread.name");
				assert_non_null(tname);
				assert_memory_equal(tname, "proc", 4);
				check_stack(&req.dictionary, smp->stack_index, &s);
			}
		}
	}
	assert_int_equal(s.samples, 40);
	assert_int_equal(s.total, total);
	assert_int_equal(s.named_python, 20);
	assert_int_equal(s.kernel, 20);
	assert_int_equal(s.native_with_build_id, 80);
	/* Interned: 5 executables, 4 functions (+ the zero entries). */
	assert_int_equal(req.dictionary.mapping_table_count, 1 + 5 + 1);
	assert_int_equal(req.dictionary.function_table_count, 1 + FAKE_N_FUNCS);
	pb_release(opentelemetry_proto_collector_profiles_v1development_ExportProfilesServiceRequest_fields, &req);
	batch_free(&b);
	fake_store_free(st);
}

static void test_v1_9(void **state)
{
	struct agent_store *st = fake_store_new(64, 5);
	uint64_t total, got = 0;
	struct agent_batch b = make_batch(30, &total);
	struct agent_otlp_encode_stats es;
	struct sr_pbw w;
	req9_t req = { 0 };
	pb_istream_t is;

	(void)state;
	encode(st, &b, AGENT_OTLP_V1_9, &w, &es);
	is = pb_istream_from_buffer(w.buf, w.len);
	assert_true(pb_decode(&is, opentelemetry_proto_profiles_v1development_v1_9_ExportProfilesServiceRequest_fields,
			      &req));
	for (pb_size_t r = 0; r < req.resource_profiles_count; r++)
		for (pb_size_t p = 0; p < req.resource_profiles[r].scope_profiles[0].profiles_count; p++) {
			const opentelemetry_proto_profiles_v1development_v1_9_Profile *pr =
				&req.resource_profiles[r].scope_profiles[0].profiles[p];
			for (pb_size_t i = 0; i < pr->samples_count; i++) {
				assert_int_equal(pr->samples[i].values_count, 1);
				assert_true(pr->samples[i].attribute_indices_count >= 1);
				assert_true(pr->samples[i].stack_index > 0);
				got += (uint64_t)pr->samples[i].values[0];
			}
		}
	assert_int_equal(got, total);
	pb_release(opentelemetry_proto_profiles_v1development_v1_9_ExportProfilesServiceRequest_fields, &req);
	sr_pbw__free(&w);
	batch_free(&b);
	fake_store_free(st);
}

/* A sample whose stack the store lost is left out and counted; the rest are whole. */
static void test_evicted_stack_counted(void **state)
{
	struct agent_store *st = fake_store_new(8, 2);
	uint64_t total;
	struct agent_batch b = make_batch(8, &total);
	struct agent_otlp_encode_stats es;
	req10_t req = { 0 };

	(void)state;
	fake_store_evict_stack(st, 3);
	encode_decode(st, &b, &req, &es);
	assert_int_equal(es.lost, 4);
	assert_int_equal(es.count + es.lost, total);
	assert_int_equal(es.samples, 7);
	/* Every stack in the table is a real one: the lost one left no hole. */
	for (pb_size_t i = 1; i < req.dictionary.stack_table_count; i++)
		assert_int_equal(req.dictionary.stack_table[i].location_indices_count, 3);
	pb_release(opentelemetry_proto_collector_profiles_v1development_ExportProfilesServiceRequest_fields, &req);
	batch_free(&b);
	fake_store_free(st);
}

/* Off-CPU samples go to a profile of their own: off_cpu/nanoseconds, no period. */
static void test_off_cpu_profile(void **state)
{
	struct agent_store *st = fake_store_new(8, 2);
	uint64_t total;
	struct agent_batch b = make_batch(4, &total);
	struct agent_otlp_encode_stats es;
	req10_t req = { 0 };
	const P(ResourceProfiles) *rp = NULL;

	(void)state;
	for (unsigned i = 0; i < 4; i++) {
		free(b.samples[i].pid);
		b.samples[i].pid = malloc(sizeof(uint32_t));
		*b.samples[i].pid = 7;
	}
	b.samples[1].profile_type = malloc(sizeof(*b.samples[1].profile_type));
	*b.samples[1].profile_type = stackrelay_v1_ProfileType_PROFILE_TYPE_OFF_CPU;
	b.samples[1].off_cpu_nanos = malloc(sizeof(uint64_t));
	*b.samples[1].off_cpu_nanos = 5000000;
	encode_decode(st, &b, &req, &es);
	assert_int_equal(req.resource_profiles_count, 1);
	rp = &req.resource_profiles[0];
	assert_int_equal(rp->scope_profiles[0].profiles_count, 2);
	{
		const P(Profile) *cpu = &rp->scope_profiles[0].profiles[0], *off = &rp->scope_profiles[0].profiles[1];
		assert_int_equal(cpu->samples_count, 3);
		assert_int_equal(off->samples_count, 1);
		assert_string_equal(str(&req.dictionary, off->sample_type.type_strindex), "off_cpu");
		assert_string_equal(str(&req.dictionary, off->sample_type.unit_strindex), "nanoseconds");
		assert_false(off->has_period_type);
		assert_int_equal(off->samples[0].values[0], 5000000);
	}
	pb_release(opentelemetry_proto_collector_profiles_v1development_ExportProfilesServiceRequest_fields, &req);
	batch_free(&b);
	fake_store_free(st);
}

static const char *fake_kernel_name(void *ctx, const uint8_t *id, size_t len, uint64_t address)
{
	(void)id;
	(void)len;
	(*(unsigned *)ctx)++;
	return address & 1 ? "fake_kfunc_odd" : "fake_kfunc_even";
}

/* Kernel frames named through meta.kernel_name become Line -> Function, on their kernel mapping. */
static void test_kernel_frames_named(void **state)
{
	struct agent_store *st = fake_store_new(8, 2);
	uint64_t total;
	struct agent_batch b = make_batch(8, &total);
	unsigned calls = 0, named = 0;
	struct agent_otlp_meta meta = { .version = AGENT_OTLP_V1_10,
					.scope_version = "test",
					.kernel_name = fake_kernel_name,
					.kernel_name_ctx = &calls };
	struct agent_otlp_encode_stats es;
	struct sr_pbw w = { 0 };
	req10_t req = { 0 };
	pb_istream_t is;
	const P(ProfilesDictionary) *d = &req.dictionary;

	(void)state;
	assert_int_equal(agent_otlp_encode(st, &b, 0, b.n_samples, &meta, &w, &es), 0);
	is = pb_istream_from_buffer(w.buf, w.len);
	assert_true(pb_decode(
		&is, opentelemetry_proto_collector_profiles_v1development_ExportProfilesServiceRequest_fields, &req));
	for (pb_size_t i = 1; i < d->location_table_count; i++) {
		const P(Location) *loc = &d->location_table[i];
		const char *file = str(d, d->mapping_table[loc->mapping_index].filename_strindex);
		if (strcmp(file, "[kernel.kallsyms]") != 0)
			continue;
		assert_int_equal(loc->lines_count, 1);
		assert_memory_equal(str(d, d->function_table[loc->lines[0].function_index].name_strindex),
				    "fake_kfunc_", 11);
		named++;
	}
	/* Stacks 1, 3, 5, 7 hold one kernel frame each, at distinct addresses. */
	assert_int_equal(named, 4);
	assert_int_equal(calls, 4);
	pb_release(opentelemetry_proto_collector_profiles_v1development_ExportProfilesServiceRequest_fields, &req);
	sr_pbw__free(&w);
	batch_free(&b);
	fake_store_free(st);
}

/* kallsyms read per address space: the image by offsets from _text, a module by offsets from its start. */
static void test_kernel_names_from_kallsyms(void **state)
{
	static const char text[] = "ffffffff81000000 T _text\n"
				   "ffffffff81001010 T do_one\n"
				   "ffffffff81002000 W weak_fn\n"
				   "ffffffff81003000 D some_data\n"
				   "ffffffffc0a01000 t mod_fn\t[kvm]\n";
	struct agent_kernel_module mods[1] = {
		{ .name = "kvm", .start = 0xffffffffc0a00000ULL, .size = 0x2000, .live = true },
	};
	struct agent_kernel k = { .release = "6.1.0-test",
				  .text_start = 0xffffffff81000000ULL,
				  .text_end = 0xffffffff81003000ULL,
				  .modules = mods,
				  .n_modules = 1 };
	char path[] = "/tmp/sr-test-kallsyms-XXXXXX";
	int fd = mkstemp(path);
	struct agent_otlp_knames *kn;
	uint8_t unknown[AGENT_KERNEL_ID_LEN] = { 9 };

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	memset(k.id, 1, sizeof(k.id));
	memset(k.runtime_id, 2, sizeof(k.runtime_id));
	memset(mods[0].id, 3, sizeof(mods[0].id));
	assert_int_equal(agent_kernel_index_modules(&k), 0);
	kn = agent_otlp_knames_new(path, &k);
	assert_non_null(kn);
	assert_string_equal(agent_otlp_knames__lookup(kn, k.id, sizeof(k.id), 0x1015), "do_one");
	assert_string_equal(agent_otlp_knames__lookup(kn, k.id, sizeof(k.id), 0x2004), "weak_fn");
	assert_string_equal(agent_otlp_knames__lookup(kn, mods[0].id, sizeof(mods[0].id), 0x1008), "mod_fn [kvm]");
	assert_null(agent_otlp_knames__lookup(kn, unknown, sizeof(unknown), 0x1015));
	agent_otlp_knames_free(kn);
	unlink(path);
	free(k.by_start);
}

/* Bad settings are refused with a message naming the key. */
static void test_exporter_config_errors(void **state)
{
	struct agent_otlp_config cfg = { 0 };
	struct agent_otlp_meta meta = { 0 };
	char err[256];
	struct sr_kv bad = { .key = (char *)"X-Bad\r\nHeader", .value = (char *)"v" };

	(void)state;
	cfg.buffer_bytes = 1 << 20;
	cfg.timeout_ns = 1000000000ULL;
	cfg.endpoint = (char *)"";
	assert_null(agent_otlp_exporter_new(&cfg, &meta, err, sizeof(err)));
	assert_non_null(strstr(err, "otlp.endpoint"));
	cfg.endpoint = (char *)"ftp://collector:4318";
	assert_null(agent_otlp_exporter_new(&cfg, &meta, err, sizeof(err)));
	assert_non_null(strstr(err, "http://"));
	cfg.endpoint = (char *)"http://127.0.0.1:4318";
	cfg.headers = &bad;
	cfg.n_headers = 1;
	assert_null(agent_otlp_exporter_new(&cfg, &meta, err, sizeof(err)));
	assert_non_null(strstr(err, "otlp.headers"));
	cfg.n_headers = 0;
	cfg.tls.ca_file = (char *)"/nonexistent/ca.pem";
	assert_null(agent_otlp_exporter_new(&cfg, &meta, err, sizeof(err)));
	assert_non_null(strstr(err, "otlp.tls"));
}

/*
 * With the endpoint away (a closed port) and no retry time left, the queue
 * stays within buffer_size: the oldest requests go first, every sample is
 * counted once as sent, dropped or still buffered.
 */
static void test_exporter_bounded_and_counted(void **state)
{
	struct agent_store *st = fake_store_new(256, 5);
	struct agent_otlp_config cfg = { 0 };
	struct agent_otlp_meta meta = { .version = AGENT_OTLP_V1_10, .scope_version = "test" };
	struct agent_otlp_exporter *x;
	struct agent_otlp_stats s;
	char err[256];
	uint64_t submitted = 0;

	(void)state;
	/* Port 9 (discard) on localhost is closed here: connections are refused at once. */
	cfg.endpoint = (char *)"http://127.0.0.1:9";
	cfg.compression = 1; /* none: sizes are predictable */
	cfg.buffer_bytes = 8 * 1024;
	cfg.timeout_ns = 2000000000ULL;
	cfg.retry.enabled = true;
	cfg.retry.initial_interval_ns = 3600ULL * 1000000000ULL; /* never retried within the test */
	cfg.retry.max_interval_ns = cfg.retry.initial_interval_ns;
	x = agent_otlp_exporter_new(&cfg, &meta, err, sizeof(err));
	assert_non_null(x);
	for (unsigned round = 0; round < 20; round++) {
		uint64_t total;
		struct agent_batch b = make_batch(40, &total);
		assert_int_equal(agent_otlp_exporter__submit(x, st, &b), 0);
		submitted += total;
		batch_free(&b);
	}
	agent_otlp_exporter__stats(x, &s);
	assert_int_equal(s.samples_submitted, submitted);
	assert_true(s.buffered_bytes <= cfg.buffer_bytes);
	assert_true(s.dropped_buffer_full > 0);
	assert_int_equal(s.samples_sent, 0);
	assert_int_equal(s.samples_sent + s.buffered_samples + s.dropped_buffer_full + s.dropped_rejected +
				 s.dropped_retries_exhausted + s.dropped_definition_lost + s.dropped_encoding,
			 submitted);
	agent_otlp_exporter_free(x);
	fake_store_free(st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_v1_10),
		cmocka_unit_test(test_v1_9),
		cmocka_unit_test(test_evicted_stack_counted),
		cmocka_unit_test(test_off_cpu_profile),
		cmocka_unit_test(test_kernel_frames_named),
		cmocka_unit_test(test_kernel_names_from_kallsyms),
		cmocka_unit_test(test_exporter_config_errors),
		cmocka_unit_test(test_exporter_bounded_and_counted),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
