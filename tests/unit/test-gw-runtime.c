/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The pipeline runtime (gateway/core/runtime.h) with in-process test
 * components: routing into several pipelines (private copies), fan-out to
 * several exporters (shared), accounting at stage boundaries, admission,
 * graceful shutdown in layers (a holding processor flushes into running
 * exporters), the shutdown timeout, and symbol uploads' admission. Ends
 * with uv_loop_close() == 0, so a leaked handle fails the test.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <uv.h>

#include "core/accounting.h"
#include "core/model.h"
#include "core/runtime.h"

/* ---- test components ---- */

static int noop(struct gw_component *c)
{
	return 0;
}

static void done_now(struct gw_component *c, void (*done)(struct gw_component *c))
{
	done(c);
}

/* tag: sets resource attribute "tag" = its id on every resource, then emits */
static int tag_consume(struct gw_component *c, struct gw_profiles *p)
{
	int r = gw_profiles__make_writable(&p);
	if (r < 0) {
		gw_component_drop(c, p, "out_of_memory");
		return r;
	}
	gw_profiles_foreach_resource(p, res) gw_resource__set_string(p, res, "tag", c->id);
	return gw_component_emit(c, p);
}

/* hold: keeps every batch (merged) until shutdown, then emits it */
struct hold {
	struct gw_profiles *held;
	bool never_done;
};

static int hold_create(struct gw_component *c)
{
	c->state = calloc(1, sizeof(struct hold));
	return c->state ? 0 : -ENOMEM;
}

static int hold_consume(struct gw_component *c, struct gw_profiles *p)
{
	struct hold *h = c->state;
	if (!h->held) {
		h->held = p;
		return 0;
	}
	return gw_profiles__merge(h->held, p);
}

static void hold_shutdown(struct gw_component *c, void (*done)(struct gw_component *c))
{
	struct hold *h = c->state;
	if (h->never_done)
		return;
	if (h->held) {
		gw_component_emit(c, h->held);
		h->held = NULL;
	}
	done(c);
}

static void hold_destroy(struct gw_component *c)
{
	struct hold *h = c->state;
	if (h && h->held)
		gw_component_drop(c, h->held, GW_REASON_SHUTDOWN);
	free(h);
	c->state = NULL;
}

/* sink: counts exported samples and checks the tag it expects */
struct sink {
	uint64_t got;
	const char *want_tag; /* NULL: no tag expected */
	bool read_only_ok;
};

static int sink_consume(struct gw_component *c, struct gw_profiles *p)
{
	struct sink *s = c->config;
	gw_profiles_foreach_resource(p, r)
	{
		const char *tag = gw_resource__string(r, "tag");
		if (s->want_tag)
			assert_string_equal(tag, s->want_tag);
		else
			assert_null(tag);
	}
	s->got += p->total_count;
	gw_component_exported(c, p->total_count);
	gw_profiles__unref(p);
	return 0;
}

static unsigned refusals_counted;

static int refuse_admission(struct gw_component *c, uint32_t *ret_ms, const char **ret_why)
{
	if (ret_ms) { /* NULL: only asked */
		*ret_ms = 250;
		*ret_why = "held for the test";
		refusals_counted++;
	}
	return -EBUSY;
}

static const struct gw_component_type t_rx = {
	.name = "t_rx", .kind = GW_RECEIVER, .create = noop, .start = noop, .shutdown = done_now
};
static const struct gw_component_type t_tag = {
	.name = "t_tag", .kind = GW_PROCESSOR, .consume = tag_consume, .shutdown = done_now
};
static const struct gw_component_type t_hold = { .name = "t_hold",
						 .kind = GW_PROCESSOR,
						 .create = hold_create,
						 .consume = hold_consume,
						 .shutdown = hold_shutdown,
						 .destroy = hold_destroy };
static const struct gw_component_type t_sink = {
	.name = "t_sink", .kind = GW_EXPORTER, .consume = sink_consume, .shutdown = done_now
};

/* ---- helpers ---- */

static struct gw_profiles *make_batch(struct gw_stores *st, uint64_t count)
{
	uint8_t exe_id[20] = { 9 }, stack_id[16] = { 7 };
	struct gw_executable_def d = { .id = exe_id, .id_len = sizeof(exe_id) };
	struct gw_executable *e = gw_stores__intern_executable(st, &d);
	struct gw_location *l = gw_stores__intern_location(st, GW_FRAME_USER, 0x10, e, NULL);
	struct gw_stack *s = gw_stores__intern_stack(st, stack_id, sizeof(stack_id), false, &l, 1);
	struct gw_profiles *p = gw_profiles_new();
	struct gw_attr a = { .key = "host.name", .type = GW_ATTR_STRING, .v.s = "n1" };
	struct gw_resource *r = gw_profiles__add_resource(p, &a, 1, 19);
	struct gw_sample smp = { .stack = s, .count = count };
	assert_int_equal(gw_resource__add_sample(p, r, &smp), 0);
	gw_stack__unref(s);
	gw_executable__unref(e);
	return p;
}

struct shut {
	bool called, timed_out;
};

static void on_shutdown(struct gw_runtime *rt, bool timed_out, void *ud)
{
	struct shut *s = ud;
	s->called = true;
	s->timed_out = timed_out;
}

static void test_routing_and_shutdown(void **state)
{
	uv_loop_t loop;
	struct sink s1 = { .want_tag = "t_tag/a" }, s2 = { .want_tag = "t_tag/a" }, s3 = { .want_tag = "t_tag/b" };
	struct gw_component rx = { .type = &t_rx, .id = (char *)"t_rx" },
			    tag_a = { .type = &t_tag, .id = (char *)"t_tag/a" },
			    tag_b = { .type = &t_tag, .id = (char *)"t_tag/b" },
			    hold = { .type = &t_hold, .id = (char *)"t_hold" },
			    sink1 = { .type = &t_sink, .id = (char *)"t_sink/1", .config = &s1 },
			    sink2 = { .type = &t_sink, .id = (char *)"t_sink/2", .config = &s2 },
			    sink3 = { .type = &t_sink, .id = (char *)"t_sink/3", .config = &s3 };
	struct gw_component *all[] = { &rx, &tag_a, &tag_b, &hold, &sink1, &sink2, &sink3 };
	struct gw_component *p1_rx[] = { &rx }, *p1_proc[] = { &tag_a, &hold }, *p1_exp[] = { &sink1, &sink2 };
	struct gw_component *p2_proc[] = { &tag_b }, *p2_exp[] = { &sink3 };
	struct gw_pipeline_def pipes[] = {
		{ "profiles/1", p1_rx, 1, p1_proc, 2, p1_exp, 2 },
		{ "profiles/2", p1_rx, 1, p2_proc, 1, p2_exp, 1 },
	};
	struct shut sh = { 0 };
	uint32_t ms;

	assert_int_equal(uv_loop_init(&loop), 0);
	struct gw_runtime *rt = gw_runtime_new(&(struct gw_runtime_config){
		.loop = &loop, .components = all, .n_components = 7, .pipelines = pipes, .n_pipelines = 2 });
	assert_non_null(rt);
	assert_false(gw_runtime__ready(rt));
	assert_int_equal(gw_runtime__start(rt), 0);
	assert_true(gw_runtime__ready(rt));
	gw_component_set_ready(&hold, false);
	assert_false(gw_runtime__ready(rt));
	gw_component_set_ready(&hold, true);

	/* admission */
	assert_int_equal(gw_runtime__admit(rt, &ms), 0);
	assert_true(gw_runtime__admits(rt));
	assert_int_equal(gw_runtime__set_admission(rt, &hold, refuse_admission), 0);
	assert_false(gw_runtime__admits(rt)); /* asked: nothing counted */
	assert_int_equal(refusals_counted, 0);
	assert_int_equal(gw_runtime__admit(rt, &ms), -EBUSY);
	assert_int_equal(ms, 250);
	assert_string_equal(gw_runtime__refusal(rt), "held for the test");
	assert_int_equal(refusals_counted, 1);
	gw_runtime__set_admission(rt, &hold, NULL);
	assert_int_equal(gw_runtime__admit(rt, &ms), 0);
	assert_true(gw_runtime__admits(rt));

	/* two batches into both pipelines */
	struct gw_stores *st = gw_runtime__stores(rt);
	gw_component_received(&rx, 10 + 5);
	assert_int_equal(gw_component_emit(&rx, make_batch(st, 10)), 0);
	assert_int_equal(gw_component_emit(&rx, make_batch(st, 5)), 0);
	/* pipeline 2 went straight through; pipeline 1 is held */
	assert_int_equal(s3.got, 15);
	assert_int_equal(s1.got + s2.got, 0);
	struct gw_accounting *a = gw_runtime__accounting(rt);
	assert_int_equal(gw_accounting__get(a, "t_rx", GW_COUNT_ACCEPTED, NULL), 15);
	assert_int_equal(gw_accounting__held(a, "t_hold"), 15);
	assert_int_equal(gw_accounting__check(a, false), 0);
	assert_int_equal(gw_accounting__check(a, true), -EUCLEAN);
	/* an exporter cannot emit */
	assert_int_equal(gw_component_emit(&sink1, make_batch(st, 1)), -EINVAL);

	gw_runtime__shutdown(rt, on_shutdown, &sh);
	assert_false(gw_runtime__ready(rt));
	uv_run(&loop, UV_RUN_DEFAULT);
	assert_true(sh.called);
	assert_false(sh.timed_out);
	/* the holder flushed into both exporters (shared, each counted) */
	assert_int_equal(s1.got, 15);
	assert_int_equal(s2.got, 15);
	assert_int_equal(gw_accounting__get(a, "t_sink/1", GW_COUNT_EXPORTED, NULL), 15);
	assert_int_equal(gw_accounting__check(a, true), 0);
	assert_int_equal(gw_profiles_live_count(), 0);
	gw_runtime_free(rt);
	uv_run(&loop, UV_RUN_DEFAULT);
	assert_int_equal(uv_loop_close(&loop), 0);
}

static void test_shutdown_timeout(void **state)
{
	uv_loop_t loop;
	struct sink s1 = { 0 };
	struct gw_component rx = { .type = &t_rx, .id = (char *)"t_rx" },
			    hold = { .type = &t_hold, .id = (char *)"t_hold" },
			    sink1 = { .type = &t_sink, .id = (char *)"t_sink", .config = &s1 };
	struct gw_component *all[] = { &rx, &hold, &sink1 };
	struct gw_component *prx[] = { &rx }, *pproc[] = { &hold }, *pexp[] = { &sink1 };
	struct gw_pipeline_def pipes[] = { { "profiles", prx, 1, pproc, 1, pexp, 1 } };
	struct shut sh = { 0 };

	assert_int_equal(uv_loop_init(&loop), 0);
	struct gw_runtime *rt = gw_runtime_new(&(struct gw_runtime_config){ .loop = &loop,
									    .components = all,
									    .n_components = 3,
									    .pipelines = pipes,
									    .n_pipelines = 1,
									    .shutdown_timeout_ns = 50 * 1000000ULL });
	assert_int_equal(gw_runtime__start(rt), 0);
	((struct hold *)hold.state)->never_done = true;
	gw_component_received(&rx, 3);
	gw_component_emit(&rx, make_batch(gw_runtime__stores(rt), 3));
	gw_runtime__shutdown(rt, on_shutdown, &sh);
	uv_run(&loop, UV_RUN_DEFAULT);
	assert_true(sh.called);
	assert_true(sh.timed_out);
	/* destroyed at the timeout: what it held is accounted as dropped */
	struct gw_accounting *a = gw_runtime__accounting(rt);
	assert_int_equal(gw_accounting__get(a, "t_hold", GW_COUNT_DROPPED, GW_REASON_SHUTDOWN), 3);
	assert_int_equal(gw_accounting__check(a, true), 0);
	gw_runtime_free(rt);
	uv_run(&loop, UV_RUN_DEFAULT);
	assert_int_equal(uv_loop_close(&loop), 0);
}

static void no_table(struct gw_symbol_table *t, void *userdata)
{
	fail_msg("no table is handed over here");
}

/* Symbol uploads are admitted against max_pending, and a taken one counts as pending from its admission. */
static void test_symbol_upload_admission(void **state)
{
	uv_loop_t loop;
	struct sink s1 = { 0 };
	struct gw_component rx = { .type = &t_rx, .id = (char *)"t_rx" },
			    sink1 = { .type = &t_sink, .id = (char *)"t_sink", .config = &s1 };
	struct gw_component *all[] = { &rx, &sink1 };
	struct gw_component *prx[] = { &rx }, *pexp[] = { &sink1 };
	struct gw_pipeline_def pipes[] = { { "profiles", prx, 1, NULL, 0, pexp, 1 } };
	uint64_t reserved = 1;
	uint32_t retry_ms = 0;

	assert_int_equal(uv_loop_init(&loop), 0);
	struct gw_runtime *rt = gw_runtime_new(&(struct gw_runtime_config){
		.loop = &loop, .components = all, .n_components = 2, .pipelines = pipes, .n_pipelines = 1 });
	assert_non_null(rt);
	/* No handler: no bound, nothing reserved. */
	assert_int_equal(gw_runtime__admit_symbol_tables(rt, 1 << 20, &reserved, &retry_ms), 0);
	assert_int_equal(reserved, 0);
	assert_int_equal(gw_runtime__symbol_tables_pending(rt), 0);

	gw_runtime__set_symbol_table_handler(rt, no_table, 1000, NULL);
	/* Taken uploads are pending from their admission, before anything is handed over... */
	assert_int_equal(gw_runtime__admit_symbol_tables(rt, 600, &reserved, &retry_ms), 0);
	assert_int_equal(reserved, 600);
	assert_int_equal(gw_runtime__symbol_tables_pending(rt), 600);
	assert_int_equal(gw_runtime__admit_symbol_tables(rt, 400, &reserved, &retry_ms), 0);
	assert_int_equal(gw_runtime__symbol_tables_pending(rt), 1000);
	/* ...so the next one, decoded just after, waits at its agent: 2 s, up to 4 s the fuller the backlog. */
	assert_int_equal(gw_runtime__admit_symbol_tables(rt, 1, &reserved, &retry_ms), -EAGAIN);
	assert_int_equal(reserved, 0);
	assert_int_equal(retry_ms, 2 * GW_SYMBOL_UPLOAD_RETRY_MS);
	assert_int_equal(gw_runtime__symbol_tables_pending(rt), 1000);
	gw_runtime__symbol_table_done(rt, 600);
	gw_runtime__symbol_table_done(rt, 400);
	assert_int_equal(gw_runtime__symbol_tables_pending(rt), 0);
	/* One upload is always taken when none waits, however large. */
	assert_int_equal(gw_runtime__admit_symbol_tables(rt, 5000, &reserved, &retry_ms), 0);
	assert_int_equal(reserved, 5000);
	assert_int_equal(gw_runtime__admit_symbol_tables(rt, 1, &reserved, &retry_ms), -EAGAIN);
	assert_in_range(retry_ms, GW_SYMBOL_UPLOAD_RETRY_MS, 2 * GW_SYMBOL_UPLOAD_RETRY_MS);
	gw_runtime__symbol_table_done(rt, 5000);
	assert_int_equal(gw_runtime__symbol_tables_pending(rt), 0);

	gw_runtime_free(rt);
	uv_run(&loop, UV_RUN_DEFAULT);
	assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_routing_and_shutdown),
		cmocka_unit_test(test_shutdown_timeout),
		cmocka_unit_test(test_symbol_upload_admission),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
