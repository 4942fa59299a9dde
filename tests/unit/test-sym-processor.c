// SPDX-License-Identifier: Apache-2.0
/*
 * The symbolize processor in the real runtime: a test source emits batches
 * whose locations point into a binary built at test time (its debug file in
 * a debug directory), into an executable the gateway knows nothing about
 * (wanted from the agent, then uploaded through gw_runtime__symbol_table()),
 * and into one whose symbols never come (passed on after wait_for_symbols,
 * unsymbolized), plus kernel frames (core and module) of a kernel whose
 * kallsyms the gateway lacks: wanted, then uploaded under the kernel ID.
 * A capture exporter checks the lines every location got.
 */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <uv.h>

#include "common/config.h"
#include "component.h"
#include "core/accounting.h"
#include "core/model.h"
#include "core/runtime.h"

extern const struct gw_component_type gw_processor_symbolize;

static char tmp[256];
static uint8_t bid[64];
static size_t bid_len;
static uint64_t a_inline, a_middle, a_leaf;

static const uint8_t wanted_id[16] = { 0x77, 0x61, 0x6e, 0x74, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12 };
static const uint8_t never_id[16] = { 0x6e, 0x65, 0x76, 0x72, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12 };
static const uint8_t kernel_id[16] = { 0x6b, 0x65, 0x72, 0x6e, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12 };

struct state {
	struct gw_component *src, *exp;
	uv_timer_t timer;
	unsigned step;
	uint64_t t0;
	/* what the exporter saw, by batch tag (the sample's pid) */
	bool got[5];
	uint64_t got_ms[5];
	bool uploaded;
	struct gw_runtime *rt;
	bool done;
};

static struct state st;

static const char *sh_line(const char *cmd)
{
	static char buf[1024];
	FILE *f = popen(cmd, "r");

	buf[0] = '\0';
	if (f) {
		if (!fgets(buf, sizeof(buf), f))
			buf[0] = '\0';
		pclose(f);
	}
	buf[strcspn(buf, "\r\n")] = '\0';
	return buf;
}

static uint64_t nm_addr(const char *sym)
{
	char cmd[PATH_MAX + 128];
	unsigned long long a = 0;

	snprintf(cmd, sizeof(cmd), "nm -P '%s/prog' | awk '$1 == \"%s\" { print $3 }'", tmp, sym);
	sscanf(sh_line(cmd), "%llx", &a);
	return a;
}

/* One batch with one sample (pid = tag) over one stack of the given locations. */
static struct gw_profiles *batch(struct gw_stores *stores, uint32_t tag, struct gw_location **locs, uint32_t n)
{
	uint8_t sid[16] = { 's', 't', 'a', 'c', 'k', (uint8_t)tag };
	struct gw_stack *stack = gw_stores__intern_stack(stores, sid, sizeof(sid), false, locs, n);
	struct gw_profiles *p = gw_profiles_new();
	struct gw_attr a = { .key = "service.name", .type = GW_ATTR_STRING, .v.s = "sym-test" };
	struct gw_resource *r;

	assert_non_null(stack);
	assert_non_null(p);
	r = gw_profiles__add_resource(p, &a, 1, 19);
	assert_non_null(r);
	assert_int_equal(gw_resource__add_sample(
				 p, r, &(struct gw_sample){ .stack = stack, .count = 5, .pid = tag, .tid = tag }),
			 0);
	gw_stack__unref(stack);
	return p;
}

static struct gw_executable *exe(struct gw_stores *stores, const uint8_t *id, size_t len, const char *name,
				 enum gw_exe_id_kind kind)
{
	struct gw_executable *e = gw_stores__intern_executable(
		stores, &(struct gw_executable_def){
				.id = id, .id_len = len, .id_kind = kind, .file_name = name, .path = name });
	assert_non_null(e);
	/* Defined by an agent (as the agent receiver marks it), so batches wait for its upload. */
	atomic_fetch_or(&e->flags, GW_EXE_AGENT_DEFINED);
	return e;
}

static void emit_batches(struct gw_component *c)
{
	struct gw_stores *stores = gw_runtime__stores(c->runtime);
	struct gw_executable *e1 = exe(stores, bid, bid_len, "prog", GW_EXE_ID_GNU_BUILD_ID);
	struct gw_executable *e2 = exe(stores, wanted_id, 16, "libwanted.so", GW_EXE_ID_CONTENT_HASH);
	struct gw_executable *e3 = exe(stores, never_id, 16, "libnever.so", GW_EXE_ID_CONTENT_HASH);
	struct gw_location *l1[4] = {
		gw_stores__intern_location(stores, GW_FRAME_USER, a_inline, e1, NULL),
		gw_stores__intern_location(stores, GW_FRAME_USER, a_middle, e1, NULL),
		gw_stores__intern_location(stores, GW_FRAME_USER, 0x10, e1, NULL), /* no symbol covers it */
		gw_stores__intern_location(stores, GW_FRAME_UNKNOWN, 0x7f0000dead, NULL, NULL),
	};
	struct gw_location *l2[1] = { gw_stores__intern_location(stores, GW_FRAME_USER, 0x1010, e2, NULL) };
	struct gw_location *l3[1] = { gw_stores__intern_location(stores, GW_FRAME_USER, 0x2020, e3, NULL) };
	struct gw_kernel_module kvm = { .name = "kvm", .start = 0xffffffffc0a00000ULL, .size = 0x10000 };
	struct gw_kernel *k = gw_stores__intern_kernel(stores, &(struct gw_kernel_def){ .id = kernel_id,
											.id_len = 16,
											.release = "6.1.0-test",
											.boot_id = "b00t",
											.modules = &kvm,
											.n_modules = 1 });
	assert_non_null(k);
	struct gw_location *l4[3] = {
		gw_stores__intern_location(stores, GW_FRAME_KERNEL, 0xffffffff81001010ULL, NULL, k),
		gw_stores__intern_location(stores, GW_FRAME_KERNEL, 0xffffffffc0a01004ULL, NULL, k),
		gw_stores__intern_location(stores, GW_FRAME_KERNEL, 0xffffffff80000000ULL, NULL, k), /* below _text */
	};

	gw_component_received(c, 20);
	assert_int_equal(gw_component_emit(c, batch(stores, 1, l1, 4)), 0);
	assert_int_equal(gw_component_emit(c, batch(stores, 2, l2, 1)), 0);
	assert_int_equal(gw_component_emit(c, batch(stores, 3, l3, 1)), 0);
	assert_int_equal(gw_component_emit(c, batch(stores, 4, l4, 3)), 0);
	gw_kernel__unref(k);
	gw_executable__unref(e1);
	gw_executable__unref(e2);
	gw_executable__unref(e3);
}

static void upload_wanted(struct gw_component *c)
{
	struct gw_stores *stores = gw_runtime__stores(c->runtime);
	struct gw_executable *e2 = gw_stores__executable(stores, wanted_id, 16);
	static const char name[] = "_ZN3foo3barEv";
	struct gw_symbol_table *t;

	assert_non_null(e2);
	/* The processor asked for it: the receiver would list it in wanted_symbols. */
	assert_true(gw_executable__wants_symbols(e2));
	/* Looked up, and not "pending" for agents' exit probes: wanted is the answer (docs/agent-protocol.md). */
	assert_true(atomic_load(&e2->flags) & GW_EXE_SYMBOLS_LOOKED_UP);
	assert_false(gw_executable__symbols_pending(e2));
	t = calloc(1, sizeof(*t) + sizeof(struct gw_symbol) + sizeof(name));
	assert_non_null(t);
	t->symbols = (struct gw_symbol *)(t + 1);
	char *n = (char *)(t->symbols + 1);
	memcpy(n, name, sizeof(name));
	t->symbols[0] = (struct gw_symbol){ .address = 0x1000, .size = 0x100, .name = n };
	t->n_symbols = 1;
	t->error = "";
	t->exe = e2;
	gw_runtime__symbol_table(c->runtime, t);
}

/* What the receiver makes of an agent's kallsyms upload: exe NULL, the kernel ID in id. */
static void upload_kernel(struct gw_component *c)
{
	struct gw_stores *stores = gw_runtime__stores(c->runtime);
	struct gw_kernel *k = gw_stores__kernel(stores, kernel_id, 16);
	static const char names[] = "_text\0do_syscall_64\0mod_fn [kvm]";
	struct gw_symbol_table *t;

	assert_non_null(k);
	/* The processor asked for it: the receiver lists the kernel ID in wanted_symbols. */
	assert_true(gw_kernel__wants_symbols(k));
	assert_true(atomic_load(&k->flags) & GW_EXE_SYMBOLS_LOOKED_UP);
	assert_false(gw_kernel__symbols_pending(k));
	gw_kernel__unref(k);
	t = calloc(1, sizeof(*t) + 3 * sizeof(struct gw_symbol) + sizeof(names));
	assert_non_null(t);
	t->symbols = (struct gw_symbol *)(t + 1);
	char *n = (char *)(t->symbols + 3);
	memcpy(n, names, sizeof(names));
	t->symbols[0] = (struct gw_symbol){ .address = 0xffffffff81000000ULL, .name = n };
	t->symbols[1] = (struct gw_symbol){ .address = 0xffffffff81001000ULL, .name = n + 6 };
	t->symbols[2] = (struct gw_symbol){ .address = 0xffffffffc0a01000ULL, .name = n + 20 };
	t->n_symbols = 3;
	t->error = "";
	assert_int_equal(gw_id_set(&t->id, kernel_id, 16), 0);
	gw_runtime__symbol_table(c->runtime, t);
}

static void on_done(struct gw_runtime *rt, bool timed_out, void *userdata)
{
	st.done = true;
	assert_false(timed_out);
}

static void tick(uv_timer_t *t)
{
	struct gw_component *c = t->data;
	uint64_t ms = (uv_hrtime() - st.t0) / 1000000;

	if (st.step == 0) {
		emit_batches(c);
		st.step = 1;
	} else if (st.step == 1 && ms >= 200 && !st.uploaded) {
		upload_wanted(c);
		upload_kernel(c);
		st.uploaded = true;
		st.step = 2;
	} else if (st.step == 2 && st.got[1] && st.got[2] && st.got[3] && st.got[4]) {
		struct gw_executable *e1 = gw_stores__executable(gw_runtime__stores(c->runtime), bid, bid_len);

		/* Symbolized from a local file: looked up, neither wanted nor pending for probes. */
		assert_non_null(e1);
		assert_true(atomic_load(&e1->flags) & GW_EXE_SYMBOLS_LOOKED_UP);
		assert_false(gw_executable__wants_symbols(e1));
		assert_false(gw_executable__symbols_pending(e1));
		gw_executable__unref(e1);
		st.step = 3;
		gw_runtime__shutdown(st.rt, on_done, NULL);
		return;
	} else if (ms > 20000) {
		fail_msg("batches did not all arrive in 20 s: %d %d %d %d", st.got[1], st.got[2], st.got[3], st.got[4]);
	}
	uv_timer_start(&st.timer, tick, 20, 0);
}

static int src_start(struct gw_component *c)
{
	uv_timer_init(gw_runtime__loop(c->runtime), &st.timer);
	st.timer.data = c;
	st.t0 = uv_hrtime();
	uv_timer_start(&st.timer, tick, 1, 0);
	return 0;
}

static void src_shutdown(struct gw_component *c, void (*done)(struct gw_component *c))
{
	uv_timer_stop(&st.timer);
	done(c);
}

static void src_destroy(struct gw_component *c)
{
	uv_close((uv_handle_t *)&st.timer, NULL);
}

static const struct gw_component_type src_type = {
	.name = "sym_source",
	.kind = GW_RECEIVER,
	.start = src_start,
	.shutdown = src_shutdown,
	.destroy = src_destroy,
};

static const struct gw_line *line_of(struct gw_location *l, uint32_t i, uint32_t *ret_n)
{
	const struct gw_lines *ls = gw_location__lines(l);

	*ret_n = ls ? ls->n : 0;
	return ls && i < ls->n ? &ls->lines[i] : NULL;
}

static int exp_consume(struct gw_component *c, struct gw_profiles *p)
{
	uint64_t ms = (uv_hrtime() - st.t0) / 1000000;

	gw_profiles_foreach_resource(p, r)
	{
		gw_resource_foreach_sample(r, s)
		{
			const struct gw_stack *stk = s->stack;
			uint32_t n;
			const struct gw_line *ln;
			assert_true(s->pid >= 1 && s->pid <= 4);
			st.got[s->pid] = true;
			st.got_ms[s->pid] = ms;
			switch (s->pid) {
			case 1:
				/* Inlined frame first, then its caller, with files and lines from DWARF. */
				ln = line_of(gw_stack__location(stk, 0), 0, &n);
				assert_int_equal(n, 2);
				assert_string_equal(ln->function, "sr_fixture_inline_add");
				assert_true(strstr(ln->file, "prog.c") != NULL);
				assert_true(ln->line > 0);
				ln = line_of(gw_stack__location(stk, 0), 1, &n);
				assert_string_equal(ln->function, "sr_fixture_leaf");
				assert_true(ln->line > 0);
				ln = line_of(gw_stack__location(stk, 1), 0, &n);
				assert_int_equal(n, 1);
				assert_string_equal(ln->function, "sr_fixture_middle");
				/* Kept and named <binary>+0x<address> when nothing covers it. */
				ln = line_of(gw_stack__location(stk, 2), 0, &n);
				assert_int_equal(n, 1);
				assert_string_equal(ln->function, "prog+0x10");
				ln = line_of(gw_stack__location(stk, 3), 0, &n);
				assert_string_equal(ln->function, "[unknown]+0x7f0000dead");
				break;
			case 2:
				/* Held until the agent's upload arrived, then named (demangled). */
				assert_true(st.uploaded);
				ln = line_of(gw_stack__location(stk, 0), 0, &n);
				assert_int_equal(n, 1);
				assert_string_equal(ln->function, "foo::bar");
				assert_string_equal(ln->system_name, "_ZN3foo3barEv");
				break;
			case 3:
				/* Never uploaded: passed on after wait_for_symbols, without lines. */
				assert_null(gw_location__lines(gw_stack__location(stk, 0)));
				assert_true(ms >= 900);
				break;
			case 4:
				/* Kernel frames held until the kallsyms upload, then named; module symbols carry it. */
				assert_true(st.uploaded);
				ln = line_of(gw_stack__location(stk, 0), 0, &n);
				assert_int_equal(n, 1);
				assert_string_equal(ln->function, "do_syscall_64");
				ln = line_of(gw_stack__location(stk, 1), 0, &n);
				assert_string_equal(ln->function, "mod_fn [kvm]");
				/* Nothing covers it: kept, named after the kernel. */
				ln = line_of(gw_stack__location(stk, 2), 0, &n);
				assert_int_equal(n, 1);
				assert_string_equal(ln->function, "[kernel]+0xffffffff80000000");
				break;
			}
		}
	}
	gw_component_exported(c, p->total_count);
	gw_profiles__unref(p);
	return 0;
}

static const struct gw_component_type exp_type = {
	.name = "sym_capture",
	.kind = GW_EXPORTER,
	.consume = exp_consume,
};

static int setup(void **state)
{
	const char *fixtures = getenv("SR_TEST_FIXTURES");
	char cmd[16384];
	char hex[129];

	snprintf(tmp, sizeof(tmp), "/tmp/sr-test-sym-processor.XXXXXX");
	if (!mkdtemp(tmp))
		return -1;
	if (system("command -v gcc >/dev/null && command -v objcopy >/dev/null") != 0)
		return 0;
	snprintf(cmd, sizeof(cmd),
		 "cd %s && gcc -O1 -g -o prog %s/sym/prog.c && objcopy --only-keep-debug prog prog.debug", tmp,
		 fixtures ? fixtures : "tests/fixtures");
	if (system(cmd) != 0)
		return -1;
	snprintf(cmd, sizeof(cmd), "readelf -n '%s/prog' | awk '/Build ID:/ { print $3 }'", tmp);
	snprintf(hex, sizeof(hex), "%s", sh_line(cmd));
	for (bid_len = 0; hex[2 * bid_len] && bid_len < sizeof(bid); bid_len++) {
		unsigned v;
		sscanf(hex + 2 * bid_len, "%2x", &v);
		bid[bid_len] = (uint8_t)v;
	}
	snprintf(cmd, sizeof(cmd),
		 "mkdir -p %s/debug/.build-id/%.2s && cp %s/prog.debug %s/debug/.build-id/%.2s/%s.debug", tmp, hex, tmp,
		 tmp, hex, hex + 2);
	if (system(cmd) != 0)
		return -1;
	a_leaf = nm_addr("sr_fixture_leaf");
	a_middle = nm_addr("sr_fixture_middle");
	/* An address inside the inlined helper, found with elfutils as independent truth. */
	for (uint64_t a = a_leaf; a < a_leaf + 64 && !a_inline; a++) {
		snprintf(cmd, sizeof(cmd), "eu-addr2line -i -f -e '%s/prog' 0x%llx | head -1", tmp,
			 (unsigned long long)a);
		if (strncmp(sh_line(cmd), "sr_fixture_inline_add ", 22) == 0)
			a_inline = a;
	}
	return 0;
}

static int teardown(void **state)
{
	char cmd[PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	return system(cmd) == 0 ? 0 : -1;
}

static void test_processor(void **state)
{
	char yaml[8192];
	struct sr_diag *d = sr_diag_new();
	uv_loop_t loop;

	if (!bid_len || !a_inline)
		skip();
	snprintf(yaml, sizeof(yaml),
		 "debug_dirs: [%s/debug]\ncache_dir: %s/cache\nwait_for_symbols: 1s\ndemangle: templates\n", tmp, tmp);
	struct sr_yaml_doc *doc = sr_yaml_load_string("sym.yaml", yaml, strlen(yaml), d);
	void *cfg = calloc(1, gw_processor_symbolize.config_size);
	if (!doc || sr_config_load(doc, sr_yaml_root(doc), "processors.symbolize", gw_processor_symbolize.config_fields,
				   cfg, d) < 0) {
		sr_diag_print(d, stderr);
		fail_msg("bad config");
	}
	struct gw_component src = { .type = &src_type, .id = (char *)"sym_source" };
	struct gw_component proc = { .type = &gw_processor_symbolize, .id = (char *)"symbolize", .config = cfg };
	struct gw_component exp = { .type = &exp_type, .id = (char *)"sym_capture" };
	struct gw_component *comps[] = { &src, &proc, &exp }, *recv[] = { &src }, *procs[] = { &proc },
			    *exps[] = { &exp };
	struct gw_pipeline_def pipe = { .name = "profiles",
					.receivers = recv,
					.n_receivers = 1,
					.processors = procs,
					.n_processors = 1,
					.exporters = exps,
					.n_exporters = 1 };

	memset(&st, 0, sizeof(st));
	assert_int_equal(uv_loop_init(&loop), 0);
	st.rt = gw_runtime_new(&(struct gw_runtime_config){ .loop = &loop,
							    .components = comps,
							    .n_components = 3,
							    .pipelines = &pipe,
							    .n_pipelines = 1,
							    .shutdown_timeout_ns = 5ULL * 1000000000ULL });
	assert_non_null(st.rt);
	assert_int_equal(gw_runtime__start(st.rt), 0);
	uv_run(&loop, UV_RUN_DEFAULT);
	assert_true(st.done);
	assert_true(st.got[1] && st.got[2] && st.got[3] && st.got[4]);
	/* Batches 2 and 4 did not wait for the timeout: the uploads released them. */
	assert_true(st.got_ms[2] < 900);
	assert_true(st.got_ms[4] < 900);

	struct gw_accounting *a = gw_runtime__accounting(st.rt);
	assert_int_equal(gw_accounting__get(a, "symbolize", GW_COUNT_RECEIVED, NULL), 20);
	assert_int_equal(gw_accounting__get(a, "symbolize", GW_COUNT_ACCEPTED, NULL), 20);
	assert_int_equal(gw_accounting__get(a, "symbolize", GW_COUNT_DROPPED, NULL), 0);
	gw_runtime_free(st.rt);
	uv_run(&loop, UV_RUN_DEFAULT);
	assert_int_equal(uv_loop_close(&loop), 0);
	sr_config_free(gw_processor_symbolize.config_fields, cfg);
	free(cfg);
	sr_yaml_doc_free(doc);
	sr_diag_free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_processor),
	};
	return cmocka_run_group_tests_name("sym-processor", tests, setup, teardown);
}
