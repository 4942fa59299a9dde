/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The agent protocol's request processing (gateway/receivers/agent-ingest.h):
 * requests are encoded here by hand from the .proto field numbers, responses
 * decoded with nanopb, so both directions are checked against independent code.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <pb_decode.h>
#include <zlib.h>

#include "common/gzip.h"
#include "stackrelay/v1/ingest.pb.h"

#include "core/model.h"
#include "receivers/agent-dedupe.h"
#include "receivers/agent-ingest.h"

/* ---- a tiny protobuf writer ---- */

struct pbw {
	uint8_t *p;
	size_t len, cap;
};

static void put(struct pbw *w, const void *d, size_t n)
{
	if (w->len + n > w->cap) {
		w->cap = (w->len + n) * 2 + 64;
		w->p = realloc(w->p, w->cap);
		assert_non_null(w->p);
	}
	memcpy(w->p + w->len, d, n);
	w->len += n;
}

static void varint(struct pbw *w, uint64_t v)
{
	uint8_t b[10];
	size_t n = 0;
	do {
		b[n] = v & 0x7f;
		v >>= 7;
		if (v)
			b[n] |= 0x80;
		n++;
	} while (v);
	put(w, b, n);
}

static void f_varint(struct pbw *w, uint32_t f, uint64_t v)
{
	varint(w, f << 3);
	varint(w, v);
}

static void f_bytes(struct pbw *w, uint32_t f, const void *d, size_t n)
{
	varint(w, (f << 3) | 2);
	varint(w, n);
	put(w, d, n);
}

static void f_str(struct pbw *w, uint32_t f, const char *s)
{
	f_bytes(w, f, s, strlen(s));
}

static void f_msg(struct pbw *w, uint32_t f, struct pbw *m)
{
	f_bytes(w, f, m->p, m->len);
	free(m->p);
	*m = (struct pbw){ 0 };
}

static void f_fixed64(struct pbw *w, uint32_t f, uint64_t v)
{
	uint8_t b[8];
	varint(w, (f << 3) | 1);
	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)(v >> (8 * i));
	put(w, b, 8);
}

static const uint8_t EXE_A[20] = { 0xaa, 1 }, EXE_B[20] = { 0xbb, 2 }, KERNEL[16] = { 0xcc, 3 };
static const uint8_t STACK_1[16] = { 1 }, STACK_2[16] = { 2 }, STACK_K[16] = { 3 };

static void add_header(struct pbw *w, const char *instance, uint64_t seq)
{
	struct pbw a = { 0 };
	f_varint(w, 1, 1); /* protocol_version */
	if (instance)
		f_str(&a, 1, instance);
	f_str(&a, 2, "host-1");
	f_str(&a, 3, "node-1");
	f_msg(w, 2, &a);
	f_varint(w, 3, seq);
	f_varint(w, 4, 19);
}

static void add_exe(struct pbw *w, const uint8_t *id, const char *name)
{
	struct pbw e = { 0 };
	f_bytes(&e, 1, id, 20);
	f_varint(&e, 2, 1);
	f_str(&e, 3, name);
	f_str(&e, 4, "/usr/bin/x");
	f_msg(w, 7, &e);
}

static void add_kernel(struct pbw *w)
{
	struct pbw k = { 0 }, m = { 0 };
	f_bytes(&k, 1, KERNEL, sizeof(KERNEL));
	f_str(&k, 2, "6.1.0");
	f_str(&m, 1, "ext4");
	f_varint(&m, 2, 0xffffffffc0000000ULL);
	f_varint(&m, 3, 4096);
	f_msg(&k, 5, &m);
	f_msg(w, 8, &k);
}

static void add_frame(struct pbw *s, const uint8_t *exe, size_t exe_len, uint64_t addr, uint64_t kind)
{
	struct pbw f = { 0 };
	if (exe)
		f_bytes(&f, 1, exe, exe_len);
	f_varint(&f, 2, addr);
	f_varint(&f, 3, kind);
	f_msg(s, 2, &f);
}

static void add_stack(struct pbw *w, const uint8_t *id, const uint8_t *exe)
{
	struct pbw s = { 0 };
	f_bytes(&s, 1, id, 16);
	add_frame(&s, exe, 20, 0x1000, 1);
	add_frame(&s, exe, 20, 0x2000, 1);
	add_frame(&s, NULL, 0, 0x7fff0000, 3);
	f_msg(w, 6, &s);
}

static void add_kstack(struct pbw *w)
{
	struct pbw s = { 0 };
	f_bytes(&s, 1, STACK_K, 16);
	add_frame(&s, KERNEL, sizeof(KERNEL), 0xffffffff81000000ULL, 2);
	add_frame(&s, EXE_A, 20, 0x3000, 1);
	f_msg(w, 6, &s);
}

static void add_sample(struct pbw *w, const uint8_t *stack, uint64_t count, const char *proc, const char *thread,
		       const char *container)
{
	struct pbw s = { 0 };
	f_bytes(&s, 1, stack, 16);
	f_varint(&s, 2, 100);
	f_varint(&s, 3, 101);
	if (thread)
		f_str(&s, 4, thread);
	f_str(&s, 5, proc);
	f_str(&s, 6, "/usr/bin/proc");
	if (container)
		f_str(&s, 7, container);
	f_varint(&s, 8, count);
	f_fixed64(&s, 9, 1700000000000000000ULL);
	f_fixed64(&s, 10, 1700000001000000000ULL);
	f_msg(w, 5, &s);
}

/* ---- response decoding with nanopb ---- */

struct resp {
	stackrelay_v1_PushResponse m;
};

static void decode(const struct gw_ingest_result *res, stackrelay_v1_PushResponse *m)
{
	pb_istream_t is = pb_istream_from_buffer(res->response, res->response_len);
	memset(m, 0, sizeof(*m));
	assert_true(pb_decode(&is, stackrelay_v1_PushResponse_fields, m));
	assert_non_null(m->protocol_version);
	assert_int_equal(*m->protocol_version, 1);
}

static uint64_t accepted(const stackrelay_v1_PushResponse *m)
{
	return m->accepted_samples ? *m->accepted_samples : 0;
}

static bool has_id(pb_bytes_array_t **ids, pb_size_t n, const uint8_t *id, size_t len)
{
	for (pb_size_t i = 0; i < n; i++)
		if (ids[i]->size == len && memcmp(ids[i]->bytes, id, len) == 0)
			return true;
	return false;
}

static uint64_t epoch = 1;

static int run(struct gw_stores *st, struct pbw *w, struct gw_ingest_result *res, stackrelay_v1_PushResponse *m)
{
	char err[256] = "";
	int r = gw_ingest_process(st, NULL, w->p, w->len, ++epoch, res, err, sizeof(err));
	if (r == 0 && m)
		decode(res, m);
	else if (r < 0)
		print_message("ingest: %s\n", err);
	return r;
}

static void test_missing_negotiation(void **state)
{
	struct gw_stores *st = gw_stores_new(NULL);
	struct gw_ingest_result res;
	stackrelay_v1_PushResponse m;
	struct pbw w = { 0 };

	/* 1: samples only: every stack missing, nothing accepted */
	add_header(&w, "agent-1", 1);
	add_sample(&w, STACK_1, 3, "app", "main", NULL);
	add_sample(&w, STACK_2, 4, "app", "main", NULL);
	add_sample(&w, STACK_2, 0, "app", "main", NULL); /* count 0: ignored */
	assert_int_equal(run(st, &w, &res, &m), 0);
	assert_int_equal(res.received, 7);
	assert_int_equal(res.accepted, 0);
	assert_int_equal(res.refused_missing, 7);
	assert_null(res.batch);
	assert_int_equal(accepted(&m), 0);
	assert_int_equal(m.missing_stacks_count, 2);
	assert_true(has_id(m.missing_stacks, m.missing_stacks_count, STACK_1, 16));
	pb_release(stackrelay_v1_PushResponse_fields, &m);
	gw_ingest_result_free(&res);
	free(w.p);

	/* 2: stacks defined but executable B unknown: stack 2 stays missing, B listed */
	w = (struct pbw){ 0 };
	add_header(&w, "agent-1", 2);
	add_sample(&w, STACK_1, 3, "app", "main", NULL); /* samples before definitions on the wire */
	add_sample(&w, STACK_2, 4, "app", "main", NULL);
	add_stack(&w, STACK_1, EXE_A);
	add_stack(&w, STACK_2, EXE_B);
	add_exe(&w, EXE_A, "a");
	assert_int_equal(run(st, &w, &res, &m), 0);
	assert_int_equal(res.accepted, 3);
	assert_int_equal(res.refused_missing, 4);
	assert_int_equal(accepted(&m), 3);
	assert_int_equal(m.missing_executables_count, 1);
	assert_true(has_id(m.missing_executables, 1, EXE_B, 20));
	assert_int_equal(m.missing_stacks_count, 1);
	assert_true(has_id(m.missing_stacks, 1, STACK_2, 16));
	assert_non_null(res.batch);
	assert_int_equal(res.batch->total_count, 3);
	pb_release(stackrelay_v1_PushResponse_fields, &m);
	gw_ingest_result_free(&res);
	free(w.p);

	/* 3: the resend with every definition is accepted */
	w = (struct pbw){ 0 };
	add_header(&w, "agent-1", 3);
	add_exe(&w, EXE_B, "b");
	add_stack(&w, STACK_2, EXE_B);
	add_sample(&w, STACK_2, 4, "app", "main", NULL);
	assert_int_equal(run(st, &w, &res, &m), 0);
	assert_int_equal(accepted(&m), 4);
	assert_int_equal(m.missing_stacks_count + m.missing_executables_count + m.missing_kernels_count, 0);
	struct gw_stack *s2 = res.batch->resources[0].samples[0].stack;
	assert_int_equal(s2->n_locations, 3);
	assert_int_equal(gw_location__kind(gw_stack__location(s2, 0)), GW_FRAME_USER);
	assert_int_equal(gw_stack__location(s2, 0)->address, 0x1000);
	assert_string_equal(gw_location__exe(gw_stack__location(s2, 0))->file_name, "b");
	assert_int_equal(gw_location__kind(gw_stack__location(s2, 2)), GW_FRAME_UNKNOWN);
	pb_release(stackrelay_v1_PushResponse_fields, &m);
	gw_ingest_result_free(&res);
	free(w.p);
	gw_stores_free(st);
}

/*
 * A stacks store smaller than one request's stacks evicts the first ones
 * while the rest are defined: the request's samples still find the stacks
 * it defined (else a resend could never be accepted).
 */
static void test_defined_stacks_outlive_eviction(void **state)
{
	struct gw_stores *st = gw_stores_new(&(struct gw_store_limits){ .stack_bytes = 1 });
	struct gw_ingest_result res;
	stackrelay_v1_PushResponse m;
	struct pbw w = { 0 };
	struct gw_store_stats ss;

	uint8_t ids[8][16] = { { 0 } };

	add_header(&w, "agent-1", 1);
	add_exe(&w, EXE_A, "a");
	for (int i = 0; i < 8; i++) {
		ids[i][0] = 0x51;
		ids[i][1] = (uint8_t)i;
		add_stack(&w, ids[i], EXE_A);
	}
	add_stack(&w, ids[7], EXE_A); /* defined twice: the first one is used */
	for (int i = 0; i < 8; i++)
		add_sample(&w, ids[i], (uint64_t)i + 1, "app", "main", NULL);
	assert_int_equal(run(st, &w, &res, &m), 0);
	gw_stores__stats(st, GW_STORE_STACKS, &ss);
	assert_true(ss.evictions >= 1); /* stacks in use get two second chances per insert, then go */
	assert_int_equal(accepted(&m), 36);
	assert_int_equal(res.refused_missing, 0);
	assert_int_equal(m.missing_stacks_count, 0);
	assert_int_equal(res.batch->total_count, 36);
	assert_int_equal(gw_profiles__check(res.batch), 0);
	pb_release(stackrelay_v1_PushResponse_fields, &m);
	gw_ingest_result_free(&res);
	free(w.p);
	gw_stores_free(st);
}

/*
 * A definition of a stack the store already holds is not built again: its
 * frames are validated but no location is interned, and an executable only
 * its frames name need not be known (the stored stack is used).
 */
static void test_stored_stack_not_rebuilt(void **state)
{
	struct gw_stores *st = gw_stores_new(NULL);
	struct gw_ingest_result res;
	stackrelay_v1_PushResponse m;
	struct gw_store_stats before, after;
	struct pbw w = { 0 };

	add_header(&w, "agent-1", 1);
	add_exe(&w, EXE_A, "a");
	add_stack(&w, STACK_1, EXE_A);
	add_sample(&w, STACK_1, 2, "app", "main", NULL);
	assert_int_equal(run(st, &w, &res, &m), 0);
	assert_int_equal(accepted(&m), 2);
	pb_release(stackrelay_v1_PushResponse_fields, &m);
	gw_ingest_result_free(&res);
	free(w.p);

	/* Another agent defines STACK_1 again, its frames in an executable nobody defined. */
	gw_stores__stats(st, GW_STORE_LOCATIONS, &before);
	w = (struct pbw){ 0 };
	add_header(&w, "agent-2", 1);
	add_stack(&w, STACK_1, EXE_B);
	add_sample(&w, STACK_1, 5, "app", "main", NULL);
	assert_int_equal(run(st, &w, &res, &m), 0);
	assert_int_equal(accepted(&m), 5);
	assert_int_equal(m.missing_stacks_count + m.missing_executables_count + m.missing_kernels_count, 0);
	gw_stores__stats(st, GW_STORE_LOCATIONS, &after);
	assert_int_equal(after.inserts, before.inserts);
	assert_int_equal(after.hits + after.misses, before.hits + before.misses); /* no location looked up */
	struct gw_stack *s1 = res.batch->resources[0].samples[0].stack;
	assert_int_equal(s1->n_locations, 3);
	assert_string_equal(gw_location__exe(gw_stack__location(s1, 0))->file_name, "a"); /* the stored frames */
	pb_release(stackrelay_v1_PushResponse_fields, &m);
	gw_ingest_result_free(&res);
	free(w.p);

	/* Its frames are still checked: a user frame without an executable fails the request. */
	w = (struct pbw){ 0 };
	add_header(&w, "agent-2", 2);
	struct pbw sd = { 0 };
	f_bytes(&sd, 1, STACK_1, 16);
	add_frame(&sd, NULL, 0, 0x1000, 1);
	f_msg(&w, 6, &sd);
	assert_int_equal(run(st, &w, &res, NULL), -EBADMSG);
	gw_ingest_result_free(&res);
	free(w.p);

	/* The ID after the frames (any field order): still found. */
	gw_stores__stats(st, GW_STORE_LOCATIONS, &before);
	w = (struct pbw){ 0 };
	add_header(&w, "agent-2", 3);
	sd = (struct pbw){ 0 };
	add_frame(&sd, EXE_B, 20, 0x1000, 1);
	f_bytes(&sd, 1, STACK_1, 16);
	f_msg(&w, 6, &sd);
	add_sample(&w, STACK_1, 1, "app", "main", NULL);
	assert_int_equal(run(st, &w, &res, &m), 0);
	assert_int_equal(accepted(&m), 1);
	assert_int_equal(m.missing_executables_count, 0);
	gw_stores__stats(st, GW_STORE_LOCATIONS, &after);
	assert_int_equal(after.hits + after.misses, before.hits + before.misses);
	pb_release(stackrelay_v1_PushResponse_fields, &m);
	gw_ingest_result_free(&res);
	free(w.p);
	gw_stores_free(st);
}

/* Interpreted and JIT frames: functions defined on first use, missing_functions, lines preset. */
static const uint8_t FUNC_A[16] = { 0xf1, 1 }, FUNC_J[16] = { 0xf2, 2 }, STACK_F[16] = { 4 };

static void add_function(struct pbw *w, const uint8_t *id, const char *runtime, const char *name, const char *file,
			 uint32_t start_line)
{
	struct pbw f = { 0 };
	f_bytes(&f, 1, id, 16);
	f_str(&f, 2, runtime);
	f_str(&f, 3, name);
	if (file)
		f_str(&f, 4, file);
	if (start_line)
		f_varint(&f, 5, start_line);
	f_msg(w, 12, &f);
}

static void add_fn_frame(struct pbw *s, const uint8_t *fn, uint64_t addr, uint64_t kind, uint32_t line)
{
	struct pbw f = { 0 };
	f_varint(&f, 2, addr);
	f_varint(&f, 3, kind);
	f_bytes(&f, 4, fn, 16);
	if (line)
		f_varint(&f, 5, line);
	f_msg(s, 2, &f);
}

static void add_fstack(struct pbw *w)
{
	struct pbw s = { 0 };
	f_bytes(&s, 1, STACK_F, 16);
	add_fn_frame(&s, FUNC_J, 0x7f0000001000ULL, 5, 0);
	add_fn_frame(&s, FUNC_A, 24, 4, 12);
	add_frame(&s, EXE_A, 20, 0x1000, 1);
	f_msg(w, 6, &s);
}

static void test_functions(void **state)
{
	struct gw_stores *st = gw_stores_new(NULL);
	struct gw_ingest_result res;
	stackrelay_v1_PushResponse m;
	struct pbw w = { 0 };

	/* The stack and executable defined, the functions not: both listed, the sample refused. */
	add_header(&w, "agent-f", 1);
	add_exe(&w, EXE_A, "a");
	add_fstack(&w);
	add_sample(&w, STACK_F, 5, "python3", "main", NULL);
	assert_int_equal(run(st, &w, &res, &m), 0);
	assert_int_equal(accepted(&m), 0);
	/* The first missing part stops the stack (the agent then resends all it needs). */
	assert_int_equal(m.missing_functions_count, 1);
	assert_true(has_id(m.missing_functions, 1, FUNC_J, 16));
	assert_int_equal(res.missing_functions, 1);
	assert_true(has_id(m.missing_stacks, m.missing_stacks_count, STACK_F, 16));
	pb_release(stackrelay_v1_PushResponse_fields, &m);
	gw_ingest_result_free(&res);
	free(w.p);

	/* The resend with the functions (after their users on the wire) is accepted. */
	w = (struct pbw){ 0 };
	add_header(&w, "agent-f", 2);
	add_fstack(&w);
	add_sample(&w, STACK_F, 5, "python3", "main", NULL);
	add_function(&w, FUNC_A, "cpython", "alpha", "/app/work.py", 10);
	add_function(&w, FUNC_J, "perf-map", "LazyCompile:*hot /app/x.js:3", NULL, 0);
	assert_int_equal(run(st, &w, &res, &m), 0);
	assert_int_equal(accepted(&m), 5);
	assert_int_equal(m.missing_functions_count + m.missing_stacks_count, 0);
	assert_int_equal(res.defined_functions, 2);
	{
		struct gw_stack *s = res.batch->resources[0].samples[0].stack;
		const struct gw_lines *l;

		assert_int_equal(s->n_locations, 3);
		assert_int_equal(gw_location__kind(gw_stack__location(s, 0)), GW_FRAME_JIT);
		assert_int_equal(gw_stack__location(s, 0)->address, 0x7f0000001000ULL);
		l = gw_location__lines(gw_stack__location(s, 0));
		assert_non_null(l);
		assert_string_equal(l->lines[0].function, "LazyCompile:*hot /app/x.js:3");
		assert_string_equal(l->lines[0].file, "");
		assert_int_equal(gw_location__kind(gw_stack__location(s, 1)), GW_FRAME_INTERPRETED);
		assert_int_equal(gw_stack__location(s, 1)->address, 24);
		assert_int_equal(gw_location__line(gw_stack__location(s, 1)), 12);
		assert_string_equal(gw_location__function(gw_stack__location(s, 1))->runtime, "cpython");
		l = gw_location__lines(gw_stack__location(s, 1));
		assert_non_null(l);
		assert_int_equal(l->n, 1);
		assert_string_equal(l->lines[0].function, "alpha");
		assert_string_equal(l->lines[0].file, "/app/work.py");
		assert_int_equal(l->lines[0].line, 12);
		assert_int_equal(l->lines[0].start_line, 10);
		assert_int_equal(gw_location__kind(gw_stack__location(s, 2)), GW_FRAME_USER);
		assert_null(gw_location__lines(gw_stack__location(s, 2)));
	}
	pb_release(stackrelay_v1_PushResponse_fields, &m);
	gw_ingest_result_free(&res);
	free(w.p);

	/* Malformed: an interpreted frame without function_id, a function without name. */
	w = (struct pbw){ 0 };
	add_header(&w, "agent-f", 3);
	{
		struct pbw s = { 0 }, f = { 0 };
		f_bytes(&s, 1, STACK_2, 16);
		f_varint(&f, 3, 4);
		f_msg(&s, 2, &f);
		f_msg(&w, 6, &s);
	}
	{
		char err[256] = "";
		assert_int_equal(gw_ingest_process(st, NULL, w.p, w.len, ++epoch, &res, err, sizeof(err)), -EBADMSG);
		assert_non_null(strstr(err, "without function_id"));
	}
	free(w.p);
	w = (struct pbw){ 0 };
	add_header(&w, "agent-f", 4);
	add_function(&w, FUNC_A, "cpython", "", NULL, 0);
	{
		char err[256] = "";
		assert_int_equal(gw_ingest_process(st, NULL, w.p, w.len, ++epoch, &res, err, sizeof(err)), -EBADMSG);
		assert_non_null(strstr(err, "FunctionDef without name"));
	}
	free(w.p);
	gw_stores_free(st);
}

static void test_kernel_and_resources(void **state)
{
	struct gw_stores *st = gw_stores_new(NULL);
	struct gw_ingest_result res;
	stackrelay_v1_PushResponse m;
	struct pbw w = { 0 };
	struct pbw s = { 0 };

	add_header(&w, NULL, 0);
	add_exe(&w, EXE_A, "a");
	add_kstack(&w);
	/* a sample naming the kernel directly */
	f_bytes(&s, 1, STACK_K, 16);
	f_varint(&s, 8, 2);
	f_bytes(&s, 12, KERNEL, sizeof(KERNEL));
	f_msg(&w, 5, &s);
	assert_int_equal(run(st, &w, &res, &m), 0);
	assert_int_equal(accepted(&m), 0);
	assert_int_equal(m.missing_kernels_count, 1);
	assert_int_equal(m.missing_stacks_count, 1);
	pb_release(stackrelay_v1_PushResponse_fields, &m);
	gw_ingest_result_free(&res);

	/* with the kernel: accepted; two processes in two containers → resources apart */
	add_kernel(&w);
	add_sample(&w, STACK_K, 5, "app", "t1", "c1");
	add_sample(&w, STACK_K, 6, "app", "t1", "c1");
	add_sample(&w, STACK_K, 7, "db", "t\xff\xfe", "c2"); /* invalid UTF-8 becomes '?' */
	assert_int_equal(run(st, &w, &res, &m), 0);
	assert_int_equal(accepted(&m), 2 + 5 + 6 + 7);
	struct gw_profiles *p = res.batch;
	assert_int_equal(p->n_resources, 3);
	assert_int_equal(gw_profiles__check(p), 0);
	const struct gw_resource *r1 = &p->resources[1], *r2 = &p->resources[2];
	assert_string_equal(gw_resource__string(r1, "host.name"), "host-1");
	assert_string_equal(gw_resource__string(r1, "k8s.node.name"), "node-1");
	assert_string_equal(gw_resource__string(r1, "container.id"), "c1");
	assert_string_equal(gw_resource__string(r1, "process.executable.name"), "app");
	assert_int_equal(r1->frequency_hz, 19);
	assert_int_equal(r1->n_samples, 2);
	assert_ptr_equal(r1->samples[0].thread_name, r1->samples[1].thread_name); /* interned per request */
	assert_string_equal(r2->samples[0].thread_name, "t??");
	assert_int_equal(r1->start_ns, 1700000000000000000ULL);
	assert_int_equal(r1->n_samples, r1->cap_samples); /* fitted */
	assert_int_equal(r1->samples[0].pid, 100);
	struct gw_stack *ks = r1->samples[0].stack;
	assert_int_equal(gw_location__kind(gw_stack__location(ks, 0)), GW_FRAME_KERNEL);
	assert_string_equal(gw_location__kernel(gw_stack__location(ks, 0))->release, "6.1.0");
	assert_int_equal(gw_location__kernel(gw_stack__location(ks, 0))->n_modules, 1);
	assert_string_equal(gw_location__kernel(gw_stack__location(ks, 0))->modules[0].name, "ext4");
	pb_release(stackrelay_v1_PushResponse_fields, &m);
	gw_ingest_result_free(&res);
	free(w.p);
	gw_stores_free(st);
}

/* Image and module IDs (KernelDef.addressing, module): a module's mapping is named as perf names it. */
static void test_kernel_spaces(void **state)
{
	static const uint8_t IMAGE[16] = { 0xc1 }, KMOD[16] = { 0xc2 }, BAD[16] = { 0xc3 };
	struct gw_stores *st = gw_stores_new(NULL);
	struct gw_ingest_result res;
	struct pbw w = { 0 }, k = { 0 }, km = { 0 }, kb = { 0 };
	char err[256] = "";

	add_header(&w, NULL, 0);
	f_bytes(&k, 1, IMAGE, sizeof(IMAGE));
	f_str(&k, 2, "6.1.0");
	f_varint(&k, 6, 1);
	f_msg(&w, 8, &k);
	f_bytes(&km, 1, KMOD, sizeof(KMOD));
	f_str(&km, 2, "6.1.0");
	f_varint(&km, 6, 2);
	f_str(&km, 7, "kvm");
	f_msg(&w, 8, &km);
	assert_int_equal(run(st, &w, &res, NULL), 0);
	gw_ingest_result_free(&res);
	struct gw_kernel *img = gw_stores__kernel(st, IMAGE, sizeof(IMAGE));
	struct gw_kernel *mod = gw_stores__kernel(st, KMOD, sizeof(KMOD));
	assert_non_null(img);
	assert_non_null(mod);
	assert_int_equal(img->addressing, GW_KERNEL_IMAGE_OFFSET);
	assert_string_equal(img->module, "");
	assert_string_equal(img->mapping_name, "[kernel.kallsyms]");
	assert_int_equal(mod->addressing, GW_KERNEL_MODULE_OFFSET);
	assert_string_equal(mod->module, "kvm");
	assert_string_equal(mod->mapping_name, "[kvm]");
	gw_kernel__unref(img);
	gw_kernel__unref(mod);

	/* An addressing this gateway does not know: refused, naming the field. */
	free(w.p);
	memset(&w, 0, sizeof(w));
	add_header(&w, NULL, 0);
	f_bytes(&kb, 1, BAD, sizeof(BAD));
	f_varint(&kb, 6, 7);
	f_msg(&w, 8, &kb);
	assert_true(gw_ingest_process(st, NULL, w.p, w.len, ++epoch, &res, err, sizeof(err)) < 0);
	assert_non_null(strstr(err, "KernelDef.addressing: unknown value 7"));
	assert_null(gw_stores__kernel(st, BAD, sizeof(BAD)));
	free(w.p);
	free(k.p);
	free(km.p);
	free(kb.p);
	gw_stores_free(st);
}

/* Off-CPU samples (Sample.profile_type 2) land in resources of their own with their nanoseconds. */
static void test_off_cpu(void **state)
{
	struct gw_stores *st = gw_stores_new(NULL);
	struct gw_ingest_result res;
	stackrelay_v1_PushResponse m;
	struct pbw w = { 0 }, s = { 0 };
	char err[256];

	add_header(&w, NULL, 0);
	add_exe(&w, EXE_A, "a");
	add_stack(&w, STACK_1, EXE_A);
	add_sample(&w, STACK_1, 5, "app", "t1", NULL);
	f_bytes(&s, 1, STACK_1, 16);
	f_str(&s, 5, "app");
	f_str(&s, 6, "/usr/bin/proc");
	f_varint(&s, 8, 3);
	f_varint(&s, 14, stackrelay_v1_ProfileType_PROFILE_TYPE_OFF_CPU);
	f_varint(&s, 15, 30000000);
	f_msg(&w, 5, &s);
	assert_int_equal(run(st, &w, &res, &m), 0);
	assert_int_equal(accepted(&m), 8);
	assert_int_equal(res.batch->n_resources, 2);
	assert_int_equal(gw_profiles__check(res.batch), 0);
	const struct gw_resource *cpu = &res.batch->resources[0], *off = &res.batch->resources[1];
	assert_int_equal(cpu->profile_type, GW_PROFILE_CPU);
	assert_int_equal(cpu->samples[0].off_cpu_ns, 0);
	assert_int_equal(off->profile_type, GW_PROFILE_OFF_CPU);
	assert_int_equal(off->samples[0].count, 3);
	assert_int_equal(off->samples[0].off_cpu_ns, 30000000);
	assert_string_equal(gw_resource__string(off, "process.executable.name"), "app");
	pb_release(stackrelay_v1_PushResponse_fields, &m);
	gw_ingest_result_free(&res);

	/* A type this gateway does not know is refused, not exported as CPU. */
	s = (struct pbw){ 0 };
	f_bytes(&s, 1, STACK_1, 16);
	f_varint(&s, 8, 1);
	f_varint(&s, 14, 7);
	f_msg(&w, 5, &s);
	assert_true(gw_ingest_process(st, NULL, w.p, w.len, ++epoch, &res, err, sizeof(err)) < 0);
	assert_non_null(strstr(err, "profile_type"));
	gw_ingest_result_free(&res);
	free(w.p);
	gw_stores_free(st);
}

static void test_symbols(void **state)
{
	struct gw_stores *st = gw_stores_new(NULL);
	struct gw_ingest_result res;
	stackrelay_v1_PushResponse m;
	struct pbw w = { 0 }, t = { 0 }, sym = { 0 };

	add_header(&w, NULL, 0);
	add_exe(&w, EXE_A, "a");
	add_stack(&w, STACK_1, EXE_A);
	assert_int_equal(run(st, &w, &res, &m), 0);
	pb_release(stackrelay_v1_PushResponse_fields, &m);
	gw_ingest_result_free(&res);

	/* the symbolizer wants A: a request using it lists A in wanted_symbols */
	struct gw_executable *a = gw_stores__executable(st, EXE_A, 20);
	assert_non_null(a);
	gw_executable__set_want_symbols(a, true);
	add_sample(&w, STACK_1, 1, "app", NULL, NULL);
	add_sample(&w, STACK_1, 1, "app2", NULL, NULL);
	assert_int_equal(run(st, &w, &res, &m), 0);
	assert_int_equal(m.wanted_symbols_count, 1);
	assert_true(has_id(m.wanted_symbols, 1, EXE_A, 20));
	pb_release(stackrelay_v1_PushResponse_fields, &m);
	gw_ingest_result_free(&res);
	free(w.p);

	/* the upload: unsorted symbols come out sorted; A is no longer wanted */
	w = (struct pbw){ 0 };
	add_header(&w, NULL, 0);
	f_bytes(&t, 1, EXE_A, 20);
	f_varint(&sym, 1, 0x2000);
	f_varint(&sym, 2, 16);
	f_str(&sym, 3, "second");
	f_msg(&t, 2, &sym);
	f_varint(&sym, 1, 0x1000);
	f_str(&sym, 3, "first");
	f_msg(&t, 2, &sym);
	f_str(&t, 3, ".symtab");
	f_msg(&w, 9, &t);
	assert_int_equal(run(st, &w, &res, &m), 0);
	assert_int_equal(res.n_tables, 1);
	struct gw_symbol_table *tab = res.tables[0];
	assert_ptr_equal(tab->exe, a);
	assert_int_equal(tab->n_symbols, 2);
	assert_string_equal(tab->symbols[0].name, "first");
	assert_int_equal(tab->symbols[1].size, 16);
	assert_int_equal(tab->n_sources, 1);
	assert_string_equal(tab->sources[0], ".symtab");
	assert_string_equal(tab->error, "");
	assert_false(gw_executable__wants_symbols(a));
	assert_true(atomic_load(&a->flags) & GW_EXE_SYMBOLS_UPLOADED);
	pb_release(stackrelay_v1_PushResponse_fields, &m);
	gw_ingest_result_free(&res);
	free(w.p);
	gw_executable__unref(a);
	gw_stores_free(st);
}

static void test_kernel_symbols(void **state)
{
	struct gw_stores *st = gw_stores_new(NULL);
	struct gw_ingest_result res;
	stackrelay_v1_PushResponse m;
	struct pbw w = { 0 }, t = { 0 }, sym = { 0 };
	static const uint8_t UNKNOWN_ID[16] = { 0xdd, 4 };

	add_header(&w, NULL, 0);
	add_exe(&w, EXE_A, "a");
	add_kernel(&w);
	add_kstack(&w);
	assert_int_equal(run(st, &w, &res, &m), 0);
	pb_release(stackrelay_v1_PushResponse_fields, &m);
	gw_ingest_result_free(&res);
	free(w.p);

	/* the symbolize processor wants the kernel's kallsyms: a request using a kernel frame lists its ID */
	struct gw_kernel *k = gw_stores__kernel(st, KERNEL, sizeof(KERNEL));
	assert_non_null(k);
	assert_false(gw_kernel__wants_symbols(k));
	gw_kernel__set_want_symbols(k, true);
	w = (struct pbw){ 0 };
	add_header(&w, NULL, 0);
	add_sample(&w, STACK_K, 1, "app", NULL, NULL);
	add_sample(&w, STACK_K, 1, "app2", NULL, NULL);
	assert_int_equal(run(st, &w, &res, &m), 0);
	assert_int_equal(accepted(&m), 2);
	assert_int_equal(m.wanted_symbols_count, 1);
	assert_true(has_id(m.wanted_symbols, 1, KERNEL, sizeof(KERNEL)));
	pb_release(stackrelay_v1_PushResponse_fields, &m);
	gw_ingest_result_free(&res);
	free(w.p);

	/* the upload under the kernel ID: passed on with exe NULL and the ID; no longer wanted */
	w = (struct pbw){ 0 };
	add_header(&w, NULL, 0);
	f_bytes(&t, 1, KERNEL, sizeof(KERNEL));
	f_varint(&sym, 1, 0xffffffffc0000100ULL);
	f_str(&sym, 3, "ext4_read [ext4]");
	f_msg(&t, 2, &sym);
	f_varint(&sym, 1, 0xffffffff81000000ULL);
	f_str(&sym, 3, "_text");
	f_msg(&t, 2, &sym);
	f_str(&t, 3, "kallsyms");
	f_msg(&w, 9, &t);
	/* a table for an ID that is neither an executable nor a kernel is dropped */
	f_bytes(&t, 1, UNKNOWN_ID, sizeof(UNKNOWN_ID));
	f_varint(&sym, 1, 0x1000);
	f_str(&sym, 3, "x");
	f_msg(&t, 2, &sym);
	f_msg(&w, 9, &t);
	assert_int_equal(run(st, &w, &res, &m), 0);
	assert_int_equal(res.n_tables, 1);
	struct gw_symbol_table *tab = res.tables[0];
	assert_null(tab->exe);
	assert_int_equal(tab->id.len, sizeof(KERNEL));
	assert_memory_equal(tab->id.bytes, KERNEL, sizeof(KERNEL));
	assert_int_equal(tab->n_symbols, 2);
	assert_string_equal(tab->symbols[0].name, "_text");
	assert_string_equal(tab->symbols[1].name, "ext4_read [ext4]");
	assert_false(gw_kernel__wants_symbols(k));
	assert_true(atomic_load(&k->flags) & GW_EXE_SYMBOLS_UPLOADED);
	pb_release(stackrelay_v1_PushResponse_fields, &m);
	gw_ingest_result_free(&res);
	free(w.p);

	/* the next request does not ask again */
	w = (struct pbw){ 0 };
	add_header(&w, NULL, 0);
	add_sample(&w, STACK_K, 1, "app", NULL, NULL);
	assert_int_equal(run(st, &w, &res, &m), 0);
	assert_int_equal(m.wanted_symbols_count, 0);
	pb_release(stackrelay_v1_PushResponse_fields, &m);
	gw_ingest_result_free(&res);
	free(w.p);
	gw_kernel__unref(k);
	gw_stores_free(st);
}

static void probe_req(struct pbw *w, const uint8_t *const *ids, const size_t *lens, size_t n);
static uint32_t pending(const stackrelay_v1_PushResponse *m);

/* Agents pushing the same executable and kernel at once (one thread per agent request). */
enum { ASK_AGENTS = 8 };

struct ask_agent {
	pthread_barrier_t *start;
	struct gw_stores *st;
	struct pbw req;
	uint64_t epoch;
	struct gw_ingest_result res;
	int rc;
};

static void *ask_agent_run(void *arg)
{
	struct ask_agent *a = arg;
	char err[256];

	/* No cmocka asserts off the main thread: the results are checked after the join. */
	pthread_barrier_wait(a->start);
	a->rc = gw_ingest_process(a->st, NULL, a->req.p, a->req.len, a->epoch, &a->res, err, sizeof(err));
	return NULL;
}

/*
 * A wanted table is asked from one agent at a time: of several agents whose
 * requests use the same executable and kernel at once, one is listed each ID in
 * wanted_symbols; the others' probes count it pending. A response that never
 * reaches its agent gives the ID back, and the next request asks for it.
 */
static void test_wanted_asked_once(void **state)
{
	const uint8_t *ids[] = { EXE_A, KERNEL };
	const size_t lens[] = { 20, sizeof(KERNEL) };
	struct gw_stores *st = gw_stores_new(NULL);
	struct ask_agent ag[ASK_AGENTS];
	pthread_t th[ASK_AGENTS];
	pthread_barrier_t start;
	struct gw_ingest_result res;
	stackrelay_v1_PushResponse m;
	struct pbw w = { 0 };
	int asked_exe = 0, asked_kernel = 0, asker = -1;

	add_header(&w, "agent-0", 1);
	add_exe(&w, EXE_A, "a");
	add_kernel(&w);
	add_stack(&w, STACK_1, EXE_A);
	add_kstack(&w);
	assert_int_equal(run(st, &w, &res, &m), 0);
	pb_release(stackrelay_v1_PushResponse_fields, &m);
	gw_ingest_result_free(&res);
	free(w.p);
	struct gw_executable *a = gw_stores__executable(st, EXE_A, 20);
	struct gw_kernel *k = gw_stores__kernel(st, KERNEL, sizeof(KERNEL));
	assert_non_null(a);
	assert_non_null(k);
	gw_executable__set_want_symbols(a, true);
	gw_kernel__set_want_symbols(k, true);

	assert_int_equal(pthread_barrier_init(&start, NULL, ASK_AGENTS), 0);
	for (int i = 0; i < ASK_AGENTS; i++) {
		char name[16];
		snprintf(name, sizeof(name), "agent-%d", i + 1);
		ag[i] = (struct ask_agent){ .start = &start, .st = st, .epoch = ++epoch };
		add_header(&ag[i].req, name, 1);
		add_sample(&ag[i].req, STACK_1, 1, "app", NULL, NULL);
		add_sample(&ag[i].req, STACK_K, 1, "app", NULL, NULL);
		assert_int_equal(pthread_create(&th[i], NULL, ask_agent_run, &ag[i]), 0);
	}
	for (int i = 0; i < ASK_AGENTS; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);
	pthread_barrier_destroy(&start);
	for (int i = 0; i < ASK_AGENTS; i++) {
		assert_int_equal(ag[i].rc, 0);
		decode(&ag[i].res, &m);
		assert_int_equal(accepted(&m), 2);
		if (has_id(m.wanted_symbols, m.wanted_symbols_count, EXE_A, 20)) {
			asked_exe++;
			asker = i;
		}
		asked_kernel += has_id(m.wanted_symbols, m.wanted_symbols_count, KERNEL, sizeof(KERNEL));
		pb_release(stackrelay_v1_PushResponse_fields, &m);
		free(ag[i].req.p);
	}
	assert_int_equal(asked_exe, 1);
	assert_int_equal(asked_kernel, 1);

	/* Still wanted, but being asked from one agent: another's probe counts both pending, lists neither. */
	probe_req(&w, ids, lens, 2);
	assert_int_equal(run(st, &w, &res, &m), 0);
	assert_int_equal(m.wanted_symbols_count, 0);
	assert_int_equal(pending(&m), 2);
	pb_release(stackrelay_v1_PushResponse_fields, &m);
	gw_ingest_result_free(&res);
	free(w.p);

	/* The response that asked was never delivered (stream reset, 429): the next request asks. */
	for (int i = 0; i < ASK_AGENTS; i++) {
		if (i == asker)
			gw_ingest_result_release_asks(&ag[i].res);
		gw_ingest_result_free(&ag[i].res);
	}
	w = (struct pbw){ 0 };
	add_header(&w, "agent-9", 1);
	add_sample(&w, STACK_1, 1, "app", NULL, NULL);
	assert_int_equal(run(st, &w, &res, &m), 0);
	assert_int_equal(m.wanted_symbols_count, 1);
	assert_true(has_id(m.wanted_symbols, 1, EXE_A, 20));
	pb_release(stackrelay_v1_PushResponse_fields, &m);
	gw_ingest_result_free(&res);
	free(w.p);

	gw_executable__unref(a);
	gw_kernel__unref(k);
	gw_stores_free(st);
}

/* A request of only probe_symbols (PushRequest field 11). */
static void probe_req(struct pbw *w, const uint8_t *const *ids, const size_t *lens, size_t n)
{
	*w = (struct pbw){ 0 };
	add_header(w, "agent-p", 100);
	for (size_t i = 0; i < n; i++)
		f_bytes(w, 11, ids[i], lens[i]);
}

static uint32_t pending(const stackrelay_v1_PushResponse *m)
{
	return m->symbols_pending ? *m->symbols_pending : 0;
}

/* Probes (docs/agent-protocol.md, "Symbol probes"): wanted listed, pending counted, unknown neither. */
static void test_probes(void **state)
{
	static const uint8_t UNKNOWN_ID[16] = { 0xdd, 4 };
	const uint8_t *ids[] = { EXE_A, EXE_B, KERNEL, UNKNOWN_ID, EXE_A };
	const size_t lens[] = { 20, 20, sizeof(KERNEL), sizeof(UNKNOWN_ID), 20 };
	struct gw_stores *st = gw_stores_new(NULL);
	struct gw_ingest_result res;
	stackrelay_v1_PushResponse m;
	struct pbw w = { 0 };

	add_header(&w, "agent-p", 1);
	add_exe(&w, EXE_A, "a");
	add_kernel(&w);
	add_stack(&w, STACK_1, EXE_A);
	add_kstack(&w);
	assert_int_equal(run(st, &w, &res, &m), 0);
	pb_release(stackrelay_v1_PushResponse_fields, &m);
	gw_ingest_result_free(&res);
	free(w.p);
	struct gw_executable *a = gw_stores__executable(st, EXE_A, 20);
	struct gw_kernel *k = gw_stores__kernel(st, KERNEL, sizeof(KERNEL));
	assert_non_null(a);
	assert_non_null(k);

	/* Defined but no samples yet: nothing is wanted or on its way. B was never defined, UNKNOWN is nothing. */
	probe_req(&w, ids, lens, 5);
	assert_int_equal(run(st, &w, &res, &m), 0);
	assert_int_equal(res.probes, 4); /* A twice counts once */
	assert_int_equal(res.received, 0);
	assert_null(res.batch);
	assert_int_equal(m.wanted_symbols_count, 0);
	assert_int_equal(pending(&m), 0);
	pb_release(stackrelay_v1_PushResponse_fields, &m);
	gw_ingest_result_free(&res);
	free(w.p);

	/* Accepted samples: their executable and kernel are on the way to the symbolize processor: pending. */
	w = (struct pbw){ 0 };
	add_header(&w, "agent-p", 2);
	add_sample(&w, STACK_1, 1, "app", NULL, NULL);
	add_sample(&w, STACK_K, 1, "app", NULL, NULL);
	assert_int_equal(run(st, &w, &res, &m), 0);
	assert_int_equal(accepted(&m), 2);
	pb_release(stackrelay_v1_PushResponse_fields, &m);
	gw_ingest_result_free(&res);
	free(w.p);
	assert_true(gw_executable__symbols_pending(a));
	assert_true(gw_kernel__symbols_pending(k));
	probe_req(&w, ids, lens, 5);
	assert_int_equal(run(st, &w, &res, &m), 0);
	assert_int_equal(m.wanted_symbols_count, 0);
	assert_int_equal(pending(&m), 2);
	assert_int_equal(res.symbols_pending, 2);
	pb_release(stackrelay_v1_PushResponse_fields, &m);
	gw_ingest_result_free(&res);
	free(w.p);

	/* The processor looked: A is wanted from the agent, the kernel still being looked up elsewhere. */
	gw_executable__set_lookup(a, 0);
	gw_executable__set_want_symbols(a, true);
	gw_kernel__set_lookup(k, 60ULL * 1000000000ULL);
	probe_req(&w, ids, lens, 5);
	assert_int_equal(run(st, &w, &res, &m), 0);
	assert_int_equal(m.wanted_symbols_count, 1);
	assert_true(has_id(m.wanted_symbols, 1, EXE_A, 20));
	assert_int_equal(pending(&m), 1);
	pb_release(stackrelay_v1_PushResponse_fields, &m);
	gw_ingest_result_free(&res);
	free(w.p);

	/* A resend answered from the de-duplication window takes no probes. */
	probe_req(&w, ids, lens, 5);
	{
		char err[256];
		assert_int_equal(gw_ingest_process_definitions(st, NULL, w.p, w.len, ++epoch, &res, err, sizeof(err)),
				 0);
		assert_int_equal(res.probes, 0);
		gw_ingest_result_free(&res);
	}
	free(w.p);

	/* Once looked up, more samples do not make it pending again; a lookup deadline passes by itself. */
	gw_kernel__set_lookup(k, 1);
	gw_executable__set_want_symbols(a, false);
	w = (struct pbw){ 0 };
	add_header(&w, "agent-p", 3);
	add_sample(&w, STACK_K, 1, "app", NULL, NULL);
	assert_int_equal(run(st, &w, &res, &m), 0);
	pb_release(stackrelay_v1_PushResponse_fields, &m);
	gw_ingest_result_free(&res);
	free(w.p);
	probe_req(&w, ids, lens, 5);
	assert_int_equal(run(st, &w, &res, &m), 0);
	assert_int_equal(m.wanted_symbols_count, 0);
	assert_int_equal(pending(&m), 0);
	pb_release(stackrelay_v1_PushResponse_fields, &m);
	gw_ingest_result_free(&res);
	free(w.p);

	/* Wanted wins over pending (the agent uploads rather than waits). */
	gw_kernel__set_lookup(k, 60ULL * 1000000000ULL);
	gw_kernel__set_want_symbols(k, true);
	assert_false(gw_kernel__symbols_pending(k));
	probe_req(&w, ids, lens, 5);
	assert_int_equal(run(st, &w, &res, &m), 0);
	assert_int_equal(m.wanted_symbols_count, 1);
	assert_true(has_id(m.wanted_symbols, 1, KERNEL, sizeof(KERNEL)));
	assert_int_equal(pending(&m), 0);
	pb_release(stackrelay_v1_PushResponse_fields, &m);
	gw_ingest_result_free(&res);
	free(w.p);

	gw_executable__unref(a);
	gw_kernel__unref(k);
	gw_stores_free(st);
}

/* More wanted IDs than one response lists: the rest count as pending, so the agent asks again. */
static void test_probes_wanted_overflow(void **state)
{
	enum { N = GW_AGENT_MAX_WANTED_PER_RESPONSE + 3 };
	struct gw_stores *st = gw_stores_new(NULL);
	struct gw_ingest_result res;
	stackrelay_v1_PushResponse m;
	uint8_t idbuf[N][20];
	const uint8_t *ids[N];
	size_t lens[N];
	struct pbw w = { 0 };

	add_header(&w, "agent-p", 1);
	for (int i = 0; i < N; i++) {
		memset(idbuf[i], 0, 20);
		idbuf[i][0] = 0xee;
		idbuf[i][1] = (uint8_t)i;
		ids[i] = idbuf[i];
		lens[i] = 20;
		add_exe(&w, idbuf[i], "x");
	}
	assert_int_equal(run(st, &w, &res, &m), 0);
	pb_release(stackrelay_v1_PushResponse_fields, &m);
	gw_ingest_result_free(&res);
	free(w.p);
	for (int i = 0; i < N; i++) {
		struct gw_executable *x = gw_stores__executable(st, idbuf[i], 20);
		assert_non_null(x);
		gw_executable__set_want_symbols(x, true);
		gw_executable__unref(x);
	}
	probe_req(&w, ids, lens, N);
	assert_int_equal(run(st, &w, &res, &m), 0);
	assert_int_equal(m.wanted_symbols_count, GW_AGENT_MAX_WANTED_PER_RESPONSE);
	assert_int_equal(pending(&m), N - GW_AGENT_MAX_WANTED_PER_RESPONSE);
	pb_release(stackrelay_v1_PushResponse_fields, &m);
	gw_ingest_result_free(&res);
	free(w.p);
	gw_stores_free(st);
}

/* The bound on probe IDs per request, and malformed IDs, are bad requests with a clear error. */
static void test_probes_bounds(void **state)
{
	enum { N = GW_AGENT_MAX_PROBES_PER_REQUEST + 1 };
	struct gw_stores *st = gw_stores_new(NULL);
	struct gw_ingest_result res;
	uint8_t(*idbuf)[8] = calloc(N, 8);
	const uint8_t **ids = calloc(N, sizeof(*ids));
	size_t *lens = calloc(N, sizeof(*lens));
	uint8_t big[GW_ID_MAX + 1] = { 1 };
	char err[256];
	struct pbw w = { 0 };

	for (int i = 0; i < N; i++) {
		memcpy(idbuf[i], &i, sizeof(i));
		ids[i] = idbuf[i];
		lens[i] = 8;
	}
	probe_req(&w, ids, lens, N - 1); /* at the limit: fine */
	assert_int_equal(gw_ingest_process(st, NULL, w.p, w.len, ++epoch, &res, err, sizeof(err)), 0);
	assert_int_equal(res.probes, GW_AGENT_MAX_PROBES_PER_REQUEST);
	gw_ingest_result_free(&res);
	free(w.p);
	probe_req(&w, ids, lens, N);
	assert_int_equal(gw_ingest_process(st, NULL, w.p, w.len, ++epoch, &res, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "probe_symbols"));
	assert_non_null(strstr(err, "1024"));
	free(w.p);
	/* Repeats of one ID do not count against the limit. */
	for (int i = 0; i < N; i++)
		ids[i] = idbuf[0];
	probe_req(&w, ids, lens, N);
	assert_int_equal(gw_ingest_process(st, NULL, w.p, w.len, ++epoch, &res, err, sizeof(err)), 0);
	assert_int_equal(res.probes, 1);
	gw_ingest_result_free(&res);
	free(w.p);

	ids[0] = big;
	lens[0] = 0;
	probe_req(&w, ids, lens, 1);
	assert_int_equal(gw_ingest_process(st, NULL, w.p, w.len, ++epoch, &res, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "probe_symbols"));
	free(w.p);
	lens[0] = sizeof(big);
	probe_req(&w, ids, lens, 1);
	assert_int_equal(gw_ingest_process(st, NULL, w.p, w.len, ++epoch, &res, err, sizeof(err)), -EBADMSG);
	free(w.p);
	/* Wrong wire type: a varint where bytes belong. */
	w = (struct pbw){ 0 };
	add_header(&w, NULL, 0);
	f_varint(&w, 11, 5);
	assert_int_equal(gw_ingest_process(st, NULL, w.p, w.len, ++epoch, &res, err, sizeof(err)), -EBADMSG);
	free(w.p);
	free(idbuf);
	free(ids);
	free(lens);
	gw_stores_free(st);
}

static void test_malformed_never_crashes(void **state)
{
	struct gw_stores *st = gw_stores_new(NULL);
	struct gw_ingest_result res;
	struct pbw w = { 0 };
	char err[256];
	unsigned ok = 0, bad = 0;

	add_header(&w, "agent-x", 9);
	add_exe(&w, EXE_A, "a");
	add_kernel(&w);
	add_stack(&w, STACK_1, EXE_A);
	add_kstack(&w);
	add_sample(&w, STACK_1, 3, "app", "main", "c");
	/* Every truncation and every single-byte corruption: a result or a clean error. */
	for (size_t n = 0; n <= w.len; n++) {
		int r = gw_ingest_process(st, NULL, w.p, n, ++epoch, &res, err, sizeof(err));
		if (r == 0) {
			ok++;
			gw_ingest_result_free(&res);
		} else {
			assert_int_equal(r, -EBADMSG);
			assert_true(strlen(err) > 0);
			bad++;
		}
	}
	for (size_t i = 0; i < w.len; i++) {
		uint8_t saved = w.p[i];
		w.p[i] ^= 0xff;
		int r = gw_ingest_process(st, NULL, w.p, w.len, ++epoch, &res, err, sizeof(err));
		if (r == 0)
			gw_ingest_result_free(&res);
		else
			assert_int_equal(r, -EBADMSG);
		w.p[i] = saved;
	}
	assert_true(ok > 0 && bad > 0);
	free(w.p);

	/* a stack over the frame limit */
	w = (struct pbw){ 0 };
	struct pbw s = { 0 };
	add_header(&w, NULL, 0);
	f_bytes(&s, 1, STACK_2, 16);
	for (int i = 0; i <= GW_AGENT_MAX_FRAMES_PER_STACK; i++)
		add_frame(&s, NULL, 0, (uint64_t)i, 3);
	f_msg(&w, 6, &s);
	assert_int_equal(gw_ingest_process(st, NULL, w.p, w.len, ++epoch, &res, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "frames"));
	free(w.p);

	/* a wrong wire type for a known field */
	w = (struct pbw){ 0 };
	f_str(&w, 1, "one");
	assert_int_equal(gw_ingest_process(st, NULL, w.p, w.len, ++epoch, &res, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "protocol_version"));
	/* The 400 names the byte: the value after the one-byte tag. */
	assert_non_null(strstr(err, "(at byte 1)"));
	free(w.p);

	/* A bad field key inside a sample names its offset in the body. */
	w = (struct pbw){ 0 };
	add_header(&w, NULL, 0);
	size_t at = w.len + 2; /* the sample's tag and one-byte length */
	f_bytes(&w, stackrelay_v1_PushRequest_samples_tag, "\x00\x01", 2);
	assert_int_equal(gw_ingest_process(st, NULL, w.p, w.len, ++epoch, &res, err, sizeof(err)), -EBADMSG);
	char want[64];
	snprintf(want, sizeof(want), "Sample: bad field key (at byte %zu)", at);
	assert_non_null(strstr(err, want));
	free(w.p);
	gw_stores_free(st);
}

static void test_header_and_count(void **state)
{
	struct pbw w = { 0 };
	struct gw_ingest_header h;
	char err[128];
	uint64_t n;

	add_header(&w, "inst", 42);
	add_sample(&w, STACK_1, 3, "a", NULL, NULL);
	add_sample(&w, STACK_2, 4, "a", NULL, NULL);
	assert_int_equal(gw_ingest_header(w.p, w.len, &h, err, sizeof(err)), 0);
	assert_int_equal(h.protocol_version, 1);
	assert_int_equal(h.sequence, 42);
	assert_int_equal(h.instance_id_len, 4);
	assert_memory_equal(h.instance_id, "inst", 4);
	assert_int_equal(h.n_samples, 2);
	assert_int_equal(h.frequency_hz, 19);
	assert_int_equal(gw_ingest_count_samples(w.p, w.len, &n, err, sizeof(err)), 0);
	assert_int_equal(n, 7);

	/* A malformed sample is named, with its byte, as gw_ingest_process() names it. */
	size_t at = w.len + 2;
	f_bytes(&w, stackrelay_v1_PushRequest_samples_tag, "\x00\x01", 2);
	assert_int_equal(gw_ingest_count_samples(w.p, w.len, &n, err, sizeof(err)), -EBADMSG);
	char want[64];
	snprintf(want, sizeof(want), "Sample: bad field key (at byte %zu)", at);
	assert_non_null(strstr(err, want));
	free(w.p);
}

static void test_gunzip(void **state)
{
	size_t n = 1 << 20;
	uint8_t *plain = calloc(1, n), *gz = malloc(n), *out;
	size_t out_len;
	z_stream z = { 0 };

	assert_int_equal(deflateInit2(&z, 9, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
	z.next_in = plain;
	z.avail_in = (uInt)n;
	z.next_out = gz;
	z.avail_out = (uInt)n;
	assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
	size_t gz_len = z.total_out;
	deflateEnd(&z);

	assert_int_equal(sr_gunzip(gz, gz_len, n, &out, &out_len), 0);
	assert_int_equal(out_len, n);
	free(out);
	/* one byte less than it inflates to: a bomb is stopped */
	assert_int_equal(sr_gunzip(gz, gz_len, n - 1, &out, &out_len), -EFBIG);
	assert_int_equal(sr_gunzip(gz, gz_len / 2, n, &out, &out_len), -EBADMSG);
	assert_int_equal(sr_gunzip((const uint8_t *)"plain", 5, n, &out, &out_len), -EBADMSG);
	free(plain);
	free(gz);
}

static void test_dedupe(void **state)
{
	struct gw_dedupe *d = gw_dedupe_new(3, 16, 1 << 20);
	uint8_t *r;
	size_t len;

	assert_int_equal(gw_dedupe__lookup(d, (const uint8_t *)"a", 1, 1, &r, &len), -ENOENT);
	for (uint64_t s = 1; s <= 4; s++)
		assert_int_equal(gw_dedupe__insert(d, (const uint8_t *)"a", 1, s, (const uint8_t *)"resp", 4), 0);
	assert_int_equal(gw_dedupe__entries(d), 3);
	/* the oldest went */
	assert_int_equal(gw_dedupe__lookup(d, (const uint8_t *)"a", 1, 1, &r, &len), -ENOENT);
	assert_int_equal(gw_dedupe__lookup(d, (const uint8_t *)"a", 1, 4, &r, &len), 0);
	assert_int_equal(len, 4);
	assert_memory_equal(r, "resp", 4);
	free(r);
	/* same sequence, other instance: different request */
	assert_int_equal(gw_dedupe__lookup(d, (const uint8_t *)"b", 1, 4, &r, &len), -ENOENT);
	gw_dedupe_free(d);

	/* bounded by bytes too */
	d = gw_dedupe_new(1000, 16, 1024);
	uint8_t big[300] = { 0 };
	for (uint64_t s = 0; s < 10; s++)
		gw_dedupe__insert(d, (const uint8_t *)"a", 1, s, big, sizeof(big));
	assert_true(gw_dedupe__entries(d) <= 3);
	gw_dedupe_free(d);
	/* disabled */
	d = gw_dedupe_new(0, 16, 0);
	assert_int_equal(gw_dedupe__insert(d, (const uint8_t *)"a", 1, 1, big, 1), 0);
	assert_int_equal(gw_dedupe__lookup(d, (const uint8_t *)"a", 1, 1, &r, &len), -ENOENT);
	gw_dedupe_free(d);
}

/*
 * One agent's answers do not fill the window: each instance keeps its latest
 * max_per_instance, so a long-lived agent's remembered responses stay flat
 * (not growing until max_entries); other instances keep theirs; the
 * global bound still holds over all of them.
 */
static void test_dedupe_per_agent(void **state)
{
	struct gw_dedupe *d = gw_dedupe_new(1000, 4, 1 << 20);
	uint8_t *r;
	size_t len;
	uint64_t bytes_at_4;

	(void)state;
	for (uint64_t s = 1; s <= 4; s++)
		assert_int_equal(gw_dedupe__insert(d, (const uint8_t *)"a", 1, s, (const uint8_t *)"resp", 4), 0);
	bytes_at_4 = gw_dedupe__bytes(d);
	for (uint64_t s = 5; s <= 500; s++)
		assert_int_equal(gw_dedupe__insert(d, (const uint8_t *)"a", 1, s, (const uint8_t *)"resp", 4), 0);
	assert_int_equal(gw_dedupe__entries(d), 4);
	assert_int_equal(gw_dedupe__evictions(d), 496);
	assert_int_equal(gw_dedupe__bytes(d), bytes_at_4);
	assert_int_equal(gw_dedupe__instances(d), 1);
	assert_int_equal(gw_dedupe__lookup(d, (const uint8_t *)"a", 1, 496, &r, &len), -ENOENT);
	for (uint64_t s = 497; s <= 500; s++) {
		assert_int_equal(gw_dedupe__lookup(d, (const uint8_t *)"a", 1, s, &r, &len), 0);
		free(r);
	}
	/* A second agent keeps its own; the first keeps its latest. */
	for (uint64_t s = 1; s <= 2; s++)
		assert_int_equal(gw_dedupe__insert(d, (const uint8_t *)"b", 1, s, (const uint8_t *)"other", 5), 0);
	assert_int_equal(gw_dedupe__entries(d), 6);
	assert_int_equal(gw_dedupe__instances(d), 2);
	/* The same sequence answered again replaces its entry, not another. */
	assert_int_equal(gw_dedupe__insert(d, (const uint8_t *)"b", 1, 2, (const uint8_t *)"again", 5), 0);
	assert_int_equal(gw_dedupe__entries(d), 6);
	assert_int_equal(gw_dedupe__lookup(d, (const uint8_t *)"b", 1, 2, &r, &len), 0);
	assert_memory_equal(r, "again", 5);
	free(r);
	gw_dedupe_free(d);

	/* One per instance: the instance's record goes with its last entry and comes back with the next. */
	d = gw_dedupe_new(1000, 1, 1 << 20);
	for (uint64_t s = 1; s <= 10; s++)
		assert_int_equal(gw_dedupe__insert(d, (const uint8_t *)"a", 1, s, (const uint8_t *)"resp", 4), 0);
	assert_int_equal(gw_dedupe__entries(d), 1);
	assert_int_equal(gw_dedupe__instances(d), 1);
	assert_int_equal(gw_dedupe__lookup(d, (const uint8_t *)"a", 1, 10, &r, &len), 0);
	free(r);
	gw_dedupe_free(d);

	/* The global LRU still bounds: many agents, each under its own bound, no more than max_entries in all. */
	d = gw_dedupe_new(8, 4, 1 << 20);
	for (uint8_t a = 0; a < 20; a++)
		assert_int_equal(gw_dedupe__insert(d, &a, 1, 1, (const uint8_t *)"resp", 4), 0);
	assert_int_equal(gw_dedupe__entries(d), 8);
	assert_int_equal(gw_dedupe__instances(d), 8);
	assert_int_equal(gw_dedupe__evictions(d), 12);
	gw_dedupe_free(d);
}

static void test_error_response(void **state)
{
	uint8_t *b;
	size_t len;
	stackrelay_v1_PushResponse m = { 0 };

	assert_int_equal(gw_ingest_encode_error(1500, "over the limit", &b, &len), 0);
	pb_istream_t is = pb_istream_from_buffer(b, len);
	assert_true(pb_decode(&is, stackrelay_v1_PushResponse_fields, &m));
	assert_int_equal(*m.retry_after_ms, 1500);
	assert_string_equal(m.error, "over the limit");
	pb_release(stackrelay_v1_PushResponse_fields, &m);
	free(b);
}

/*
 * One answer per ID in a request: while other requests store and evict a
 * stack, the samples of one request that name it are all accepted or all
 * refused (with the stack listed missing). A partial answer would have the
 * agent resend samples that were accepted, and export them twice.
 */
enum { RACE_SAMPLES = 400, RACE_ROUNDS = 300 };

struct race {
	struct gw_stores *st;
	atomic_bool stop;
	uint64_t partial, listed_but_accepted, both_seen[2];
};

static void *race_churn(void *arg)
{
	struct race *r = arg;
	struct pbw w = { 0 };
	char err[256];
	uint64_t ep = 1u << 30;

	add_header(&w, "churn", 1);
	add_exe(&w, EXE_A, "a");
	add_stack(&w, STACK_1, EXE_A);
	while (!atomic_load(&r->stop)) {
		struct gw_ingest_result res;

		if (gw_ingest_process_definitions(r->st, NULL, w.p, w.len, ++ep, &res, err, sizeof(err)) == 0)
			gw_ingest_result_free(&res);
		gw_stores__set_limit(r->st, GW_STORE_STACKS, 1); /* evicts it */
		gw_stores__set_limit(r->st, GW_STORE_STACKS, 0);
	}
	free(w.p);
	return NULL;
}

static void test_one_answer_per_id(void **state)
{
	struct race r = { .st = gw_stores_new(NULL) };
	struct pbw w = { 0 };
	pthread_t th;

	add_header(&w, "agent-r", 1);
	for (int i = 0; i < RACE_SAMPLES; i++)
		add_sample(&w, STACK_1, 1, "app", "main", NULL);
	assert_int_equal(pthread_create(&th, NULL, race_churn, &r), 0);
	for (int round = 0; round < RACE_ROUNDS; round++) {
		struct gw_ingest_result res;
		stackrelay_v1_PushResponse m;
		bool listed;

		assert_int_equal(run(r.st, &w, &res, &m), 0);
		listed = has_id(m.missing_stacks, m.missing_stacks_count, STACK_1, 16);
		if (accepted(&m) != 0 && accepted(&m) != RACE_SAMPLES)
			r.partial++;
		if (listed && accepted(&m) != 0)
			r.listed_but_accepted++;
		r.both_seen[listed]++;
		pb_release(stackrelay_v1_PushResponse_fields, &m);
		gw_ingest_result_free(&res);
	}
	atomic_store(&r.stop, true);
	pthread_join(th, NULL);
	assert_int_equal(r.partial, 0);
	assert_int_equal(r.listed_but_accepted, 0);
	print_message("one answer per ID: %" PRIu64 " rounds found the stack, %" PRIu64 " missing\n", r.both_seen[0],
		      r.both_seen[1]);
	free(w.p);
	gw_stores_free(r.st);
}

/* A request with a header naming node, and one table for exe (symbols, or only an error). */
static void add_table(struct pbw *w, const uint8_t *exe, const char *name, const char *error)
{
	struct pbw t = { 0 }, sym = { 0 };
	f_bytes(&t, 1, exe, 20);
	if (name) {
		f_varint(&sym, 1, 0x1000);
		f_str(&sym, 3, name);
		f_msg(&t, 2, &sym);
	}
	if (error)
		f_str(&t, 4, error);
	f_msg(w, 9, &t);
}

static int run_as(struct gw_stores *st, const struct gw_ingest_peer *peer, struct pbw *w, struct gw_ingest_result *res,
		  stackrelay_v1_PushResponse *m)
{
	char err[512] = "";
	int r = gw_ingest_process(st, peer, w->p, w->len, ++epoch, res, err, sizeof(err));
	if (r == 0 && m)
		decode(res, m);
	return r;
}

/* Symbol tables are taken only from the agent this gateway asked, once, for what it asked. */
static void test_uploads_only_when_asked(void **state)
{
	struct gw_stores *st = gw_stores_new(NULL);
	struct gw_ingest_result res;
	stackrelay_v1_PushResponse m;
	struct pbw w = { 0 };

	/* The victim's executable and stack are defined (by anyone: they are content-addressed). */
	add_header(&w, "victim", 1);
	add_exe(&w, EXE_A, "a");
	add_stack(&w, STACK_1, EXE_A);
	assert_int_equal(run(st, &w, &res, &m), 0);
	pb_release(stackrelay_v1_PushResponse_fields, &m);
	gw_ingest_result_free(&res);
	free(w.p);

	/* Nobody was asked: a table and an error-only table are ignored and counted; the samples are taken. */
	w = (struct pbw){ 0 };
	add_header(&w, "attacker", 1);
	add_sample(&w, STACK_1, 5, "app", NULL, NULL);
	add_table(&w, EXE_A, "evil", NULL);
	add_table(&w, EXE_A, NULL, "cannot read");
	assert_int_equal(run(st, &w, &res, &m), 0);
	assert_int_equal(accepted(&m), 5);
	assert_int_equal(res.n_tables, 0);
	assert_int_equal(res.tables_refused[GW_UPLOAD_NOT_ASKED], 1);
	assert_int_equal(res.tables_refused[GW_UPLOAD_ERROR_NOT_ASKED], 1);
	pb_release(stackrelay_v1_PushResponse_fields, &m);
	gw_ingest_result_free(&res);
	free(w.p);

	/* The symbolizer wants A; the victim's request is the one asked. */
	struct gw_executable *a = gw_stores__executable(st, EXE_A, 20);
	assert_non_null(a);
	gw_executable__set_want_symbols(a, true);
	w = (struct pbw){ 0 };
	add_header(&w, "victim", 2);
	add_sample(&w, STACK_1, 1, "app", NULL, NULL);
	assert_int_equal(run(st, &w, &res, &m), 0);
	assert_int_equal(m.wanted_symbols_count, 1);
	pb_release(stackrelay_v1_PushResponse_fields, &m);
	gw_ingest_result_free(&res);
	free(w.p);

	/* Another agent's table for A, even while A is wanted, is not an answer. */
	w = (struct pbw){ 0 };
	add_header(&w, "attacker", 2);
	add_table(&w, EXE_A, "evil", NULL);
	assert_int_equal(run(st, &w, &res, &m), 0);
	assert_int_equal(res.n_tables, 0);
	assert_int_equal(res.tables_refused[GW_UPLOAD_NOT_ASKED], 1);
	assert_true(gw_executable__wants_symbols(a));
	pb_release(stackrelay_v1_PushResponse_fields, &m);
	gw_ingest_result_free(&res);
	free(w.p);

	/* The same agent on another connection (its instance_id) answers: taken once. */
	struct gw_ingest_peer other_conn = { .conn_serial = 7 };
	w = (struct pbw){ 0 };
	add_header(&w, "victim", 3);
	add_table(&w, EXE_A, "good", NULL);
	assert_int_equal(run_as(st, &other_conn, &w, &res, &m), 0);
	assert_int_equal(res.n_tables, 1);
	assert_string_equal(res.tables[0]->symbols[0].name, "good");
	pb_release(stackrelay_v1_PushResponse_fields, &m);
	gw_ingest_result_free(&res);
	free(w.p);

	/* A second table for the same ask is not taken. */
	w = (struct pbw){ 0 };
	add_header(&w, "victim", 4);
	add_table(&w, EXE_A, "again", NULL);
	assert_int_equal(run(st, &w, &res, &m), 0);
	assert_int_equal(res.n_tables, 0);
	assert_int_equal(res.tables_refused[GW_UPLOAD_NOT_ASKED], 1);
	pb_release(stackrelay_v1_PushResponse_fields, &m);
	gw_ingest_result_free(&res);
	free(w.p);

	/* Asked again, an error from the agent asked answers too; a response never delivered forgets the ask. */
	gw_executable__set_want_symbols(a, true);
	gw_executable__release_ask(a);
	w = (struct pbw){ 0 };
	add_header(&w, "victim", 5);
	add_sample(&w, STACK_1, 1, "app", NULL, NULL);
	assert_int_equal(run(st, &w, &res, &m), 0);
	assert_int_equal(m.wanted_symbols_count, 1);
	pb_release(stackrelay_v1_PushResponse_fields, &m);
	gw_ingest_result_free(&res);
	free(w.p);
	w = (struct pbw){ 0 };
	add_header(&w, "victim", 6);
	add_table(&w, EXE_A, NULL, "cannot read");
	assert_int_equal(run(st, &w, &res, &m), 0);
	assert_int_equal(res.n_tables, 1);
	assert_string_equal(res.tables[0]->error, "cannot read");
	pb_release(stackrelay_v1_PushResponse_fields, &m);
	gw_ingest_result_free(&res);
	free(w.p);

	/* Without instance_id the connection is the agent: another connection's upload is not an answer. */
	struct gw_ingest_peer c1 = { .conn_serial = 1 }, c2 = { .conn_serial = 2 };
	gw_executable__set_want_symbols(a, true);
	gw_executable__release_ask(a);
	w = (struct pbw){ 0 };
	add_header(&w, NULL, 0);
	add_sample(&w, STACK_1, 1, "app", NULL, NULL);
	assert_int_equal(run_as(st, &c1, &w, &res, &m), 0);
	assert_int_equal(m.wanted_symbols_count, 1);
	pb_release(stackrelay_v1_PushResponse_fields, &m);
	gw_ingest_result_free(&res);
	free(w.p);
	w = (struct pbw){ 0 };
	add_header(&w, NULL, 0);
	add_table(&w, EXE_A, "evil", NULL);
	assert_int_equal(run_as(st, &c2, &w, &res, &m), 0);
	assert_int_equal(res.n_tables, 0);
	pb_release(stackrelay_v1_PushResponse_fields, &m);
	gw_ingest_result_free(&res);
	assert_int_equal(run_as(st, &c1, &w, &res, &m), 0);
	assert_int_equal(res.n_tables, 1);
	pb_release(stackrelay_v1_PushResponse_fields, &m);
	gw_ingest_result_free(&res);
	free(w.p);

	gw_executable__unref(a);
	gw_stores_free(st);
}

/* A peer bound to its node (certificate or node token) cannot speak for another node. */
static void test_node_binding(void **state)
{
	struct gw_stores *st = gw_stores_new(NULL);
	struct gw_ingest_result res;
	stackrelay_v1_PushResponse m;
	struct pbw w = { 0 };
	char err[512] = "";
	const char *node1[] = { "node-1" }, *other[] = { "node-2" };
	struct gw_ingest_peer good = {
		.conn_serial = 1, .principal = "node-1", .bind = true, .node_names = node1, .n_node_names = 1
	};
	struct gw_ingest_peer bad = {
		.conn_serial = 2, .principal = "node-2", .bind = true, .node_names = other, .n_node_names = 1
	};
	struct gw_ingest_peer none = { .conn_serial = 3, .bind = true };

	add_header(&w, "agent", 1); /* says node-1 */
	add_exe(&w, EXE_A, "a");
	assert_int_equal(run_as(st, &good, &w, &res, &m), 0);
	pb_release(stackrelay_v1_PushResponse_fields, &m);
	gw_ingest_result_free(&res);
	assert_int_equal(gw_ingest_process(st, &bad, w.p, w.len, ++epoch, &res, err, sizeof(err)), -EPERM);
	assert_non_null(strstr(err, "AgentInfo.node_name \"node-1\""));
	assert_non_null(strstr(err, "node-2"));
	assert_int_equal(gw_ingest_process(st, &none, w.p, w.len, ++epoch, &res, err, sizeof(err)), -EPERM);
	free(w.p);
	/* The identity of an ask includes the principal: the same instance_id with other credentials is another agent. */
	assert_true(gw_ingest_identity(&good, (const uint8_t *)"x", 1) !=
		    gw_ingest_identity(&bad, (const uint8_t *)"x", 1));
	assert_true(gw_ingest_identity(NULL, NULL, 0) != 0);
	gw_stores_free(st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_missing_negotiation),
		cmocka_unit_test(test_defined_stacks_outlive_eviction),
		cmocka_unit_test(test_stored_stack_not_rebuilt),
		cmocka_unit_test(test_kernel_and_resources),
		cmocka_unit_test(test_kernel_spaces),
		cmocka_unit_test(test_functions),
		cmocka_unit_test(test_off_cpu),
		cmocka_unit_test(test_symbols),
		cmocka_unit_test(test_kernel_symbols),
		cmocka_unit_test(test_probes),
		cmocka_unit_test(test_probes_wanted_overflow),
		cmocka_unit_test(test_wanted_asked_once),
		cmocka_unit_test(test_probes_bounds),
		cmocka_unit_test(test_malformed_never_crashes),
		cmocka_unit_test(test_header_and_count),
		cmocka_unit_test(test_gunzip),
		cmocka_unit_test(test_dedupe),
		cmocka_unit_test(test_dedupe_per_agent),
		cmocka_unit_test(test_error_response),
		cmocka_unit_test(test_one_answer_per_id),
		cmocka_unit_test(test_uploads_only_when_asked),
		cmocka_unit_test(test_node_binding),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
