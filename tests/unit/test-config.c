// SPDX-License-Identifier: Apache-2.0
/* The YAML schema layer: every kind, defaults, every problem with its position, running out of memory. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/config.h"
#include "common/units.h"

struct retry {
	bool enabled;
	uint64_t initial_ns;
};

struct rule {
	char *action;
	char **sources;
	uint32_t n_sources;
};

struct cfg {
	char *endpoint;
	bool verbose;
	int64_t offset;
	uint64_t workers;
	double ratio;
	uint64_t timeout_ns;
	uint64_t queue_bytes;
	int mode;
	char **urls;
	uint32_t n_urls;
	struct sr_kv *headers;
	uint32_t n_headers;
	struct retry retry;
	struct rule *rules;
	uint32_t n_rules;
	char *token;
	uint64_t pin; /* a secret that is not a string */
	char **dirs;
	uint32_t n_dirs;
};

static const char *const modes[] = { "none", "simplified", "templates", "full", NULL };

static const struct sr_field retry_fields[] = {
	SR_FIELD_BOOLEAN("enabled", struct retry, enabled, .def = "true", .doc = "Retry."),
	SR_FIELD_DUR("initial_interval", struct retry, initial_ns, .def = "5s", .doc = "First wait."),
	SR_FIELD_END,
};

static const struct sr_field rule_fields[] = {
	SR_FIELD_STR("action", struct rule, action, .def = "replace", .doc = "What to do."),
	SR_FIELD_STRLIST("source_labels", struct rule, sources, n_sources, .doc = "Inputs."),
	SR_FIELD_END,
};

static const struct sr_field fields[] = {
	SR_FIELD_STR("endpoint", struct cfg, endpoint, .required = true, .doc = "Where."),
	SR_FIELD_BOOLEAN("verbose", struct cfg, verbose, .def = "false", .doc = "Chatty."),
	SR_FIELD_I64("offset", struct cfg, offset, .def = "-3", .min = -10, .max = 10, .doc = "Offset."),
	SR_FIELD_U64("workers", struct cfg, workers, .def = "4", .min = 1, .max = 64, .doc = "Workers."),
	SR_FIELD_DBL("ratio", struct cfg, ratio, .def = "0.5", .doc = "Ratio."),
	SR_FIELD_DUR("timeout", struct cfg, timeout_ns, .def = "10s", .max = 60 * 1000000000LL, .doc = "Timeout."),
	SR_FIELD_BYTES("queue_size", struct cfg, queue_bytes, .def = "64MiB", .doc = "Queue."),
	SR_FIELD_ENUMERATION("mode", struct cfg, mode, modes, .def = "templates", .doc = "Mode."),
	SR_FIELD_STRLIST("urls", struct cfg, urls, n_urls, .min = 0, .max = 3, .doc = "URLs."),
	SR_FIELD_STRMAP("headers", struct cfg, headers, n_headers, .doc = "Headers."),
	SR_FIELD_MAP("retry", struct cfg, retry, struct retry, retry_fields, .doc = "Retry settings."),
	SR_FIELD_MAPLIST("rules", struct cfg, rules, n_rules, struct rule, rule_fields, .doc = "Rules."),
	SR_FIELD_STR("token", struct cfg, token, .secret = true, .doc = "Secret."),
	SR_FIELD_U64("pin", struct cfg, pin, .secret = true, .doc = "Secret number."),
	SR_FIELD_STRLIST("debug_dirs", struct cfg, dirs, n_dirs, .def = "[/usr/lib/debug, /opt/debug]", .doc = "Dirs."),
	SR_FIELD_END,
};

/*
 * Linked with --wrap=calloc and --wrap=free (tests/unit/meson.build): the
 * calloc() and free() calls of common/ and of this file come here. While
 * alloc.on, the fail_at-th calloc() fails and every block calloc() returns is
 * listed until free() gives it back, so a test sees what an error path leaked.
 */
void *__real_calloc(size_t n, size_t size);
void __real_free(void *p);
void *__wrap_calloc(size_t n, size_t size);
void __wrap_free(void *p);

static struct {
	bool on;
	unsigned calls, fail_at; /* 1-based; 0: none fails */
	bool overflow;
	void *live[256];
	size_t n_live;
} alloc;

void *__wrap_calloc(size_t n, size_t size)
{
	void *p;

	if (!alloc.on)
		return __real_calloc(n, size);
	if (++alloc.calls == alloc.fail_at) {
		errno = ENOMEM;
		return NULL;
	}
	p = __real_calloc(n, size);
	if (p && alloc.n_live < SR_ARRAY_SIZE(alloc.live))
		alloc.live[alloc.n_live++] = p;
	else if (p)
		alloc.overflow = true;
	return p;
}

void __wrap_free(void *p)
{
	for (size_t i = 0; p && i < alloc.n_live; i++)
		if (alloc.live[i] == p) {
			alloc.live[i] = alloc.live[--alloc.n_live];
			break;
		}
	__real_free(p);
}

struct oom_item {
	int level;
};

struct oom_inner {
	int level;
};

struct oom_cfg {
	int mode;
	struct oom_item *items;
	uint32_t n_items;
	struct oom_inner inner;
	int last;
};

static const char *const levels[] = { "a", "b", "c", NULL };

/*
 * Two tables alike in every kind (enums, a list of mappings, a mapping), and
 * distinct, so that each has its own schema to build; the docs differ so that
 * no compiler folds them into one.
 */
#define OOM_TABLES(p)                                                                                                  \
	static const struct sr_field p##_item_fields[] = {                                                             \
		SR_FIELD_ENUMERATION("level", struct oom_item, level, levels, .def = "a", .doc = #p),                  \
		SR_FIELD_END,                                                                                          \
	};                                                                                                             \
	static const struct sr_field p##_inner_fields[] = {                                                            \
		SR_FIELD_ENUMERATION("level", struct oom_inner, level, levels, .def = "a", .doc = #p),                 \
		SR_FIELD_END,                                                                                          \
	};                                                                                                             \
	static const struct sr_field p##_fields[] = {                                                                  \
		SR_FIELD_ENUMERATION("mode", struct oom_cfg, mode, levels, .def = "a", .doc = #p),                     \
		SR_FIELD_MAPLIST("items", struct oom_cfg, items, n_items, struct oom_item, p##_item_fields,            \
				 .doc = #p),                                                                           \
		SR_FIELD_MAP("inner", struct oom_cfg, inner, struct oom_inner, p##_inner_fields, .doc = #p),           \
		SR_FIELD_ENUMERATION("last", struct oom_cfg, last, levels, .def = "a", .doc = #p),                     \
		SR_FIELD_END,                                                                                          \
	}
OOM_TABLES(oom_a);
OOM_TABLES(oom_b);

static int load(const char *text, struct cfg *c, struct sr_diag **ret_d)
{
	struct sr_diag *d = sr_diag_new();
	struct sr_yaml_doc *doc = sr_yaml_load_string("test.yaml", text, strlen(text), d);
	int r = -EINVAL;

	memset(c, 0, sizeof(*c));
	if (doc)
		r = sr_config_load(doc, sr_yaml_root(doc), "", fields, c, d);
	sr_yaml_doc_free(doc);
	sr_diag_print(d, stderr);
	*ret_d = d;
	return r;
}

static bool has(struct sr_diag *d, const char *needle)
{
	for (size_t i = 0; sr_diag_message(d, i); i++)
		if (strstr(sr_diag_message(d, i), needle))
			return true;
	return false;
}

static void dump(struct sr_diag *d)
{
	sr_diag_print(d, stderr);
}

static void test_defaults(void **state)
{
	struct sr_diag *d;
	struct cfg c;

	(void)state;
	assert_int_equal(load("endpoint: http://x\n", &c, &d), 0);
	assert_string_equal(c.endpoint, "http://x");
	assert_false(c.verbose);
	assert_int_equal(c.offset, -3);
	assert_int_equal(c.workers, 4);
	assert_true(c.ratio > 0.49 && c.ratio < 0.51);
	assert_int_equal(c.timeout_ns, 10 * SR_NSEC_PER_SEC);
	assert_int_equal(c.queue_bytes, 64ULL << 20);
	assert_int_equal(c.mode, 2);
	assert_int_equal(c.n_urls, 0);
	assert_int_equal(c.n_headers, 0);
	assert_true(c.retry.enabled);
	assert_int_equal(c.retry.initial_ns, 5 * SR_NSEC_PER_SEC);
	assert_null(c.token);
	assert_int_equal(c.n_dirs, 2);
	assert_string_equal(c.dirs[1], "/opt/debug");
	sr_config_free(fields, &c);
	sr_diag_free(d);
}

static void test_all_kinds(void **state)
{
	struct sr_diag *d;
	struct cfg c;

	(void)state;
	setenv("SR_TEST_TENANT", "acme", 1);
	assert_int_equal(load("endpoint: \"http://pyro:4040\"\n"
			      "verbose: yes\n"
			      "offset: 7\n"
			      "workers: 8\n"
			      "ratio: 0.25\n"
			      "timeout: 45s\n"
			      "queue_size: 1GiB\n"
			      "mode: FULL\n"
			      "urls: [http://a, http://b]\n"
			      "headers:\n"
			      "  X-Scope-OrgID: ${env:SR_TEST_TENANT}\n"
			      "  Empty:\n"
			      "retry: {enabled: false, initial_interval: 250ms}\n"
			      "rules:\n"
			      "  - action: keep\n"
			      "    source_labels: [a, b]\n"
			      "  - source_labels: []\n"
			      "token: s3cret\n",
			      &c, &d),
			 0);
	dump(d);
	assert_string_equal(c.endpoint, "http://pyro:4040");
	assert_true(c.verbose);
	assert_int_equal(c.offset, 7);
	assert_int_equal(c.workers, 8);
	assert_int_equal(c.timeout_ns, 45 * SR_NSEC_PER_SEC);
	assert_int_equal(c.queue_bytes, 1ULL << 30);
	assert_int_equal(c.mode, 3);
	assert_int_equal(c.n_urls, 2);
	assert_string_equal(c.urls[1], "http://b");
	assert_int_equal(c.n_headers, 2);
	assert_string_equal(c.headers[0].key, "X-Scope-OrgID");
	assert_string_equal(c.headers[0].value, "acme");
	assert_string_equal(c.headers[1].value, "");
	assert_false(c.retry.enabled);
	assert_int_equal(c.retry.initial_ns, 250 * SR_NSEC_PER_MSEC);
	assert_int_equal(c.n_rules, 2);
	assert_string_equal(c.rules[0].action, "keep");
	assert_int_equal(c.rules[0].n_sources, 2);
	assert_string_equal(c.rules[0].sources[1], "b");
	assert_string_equal(c.rules[1].action, "replace");
	assert_string_equal(c.token, "s3cret");
	sr_config_free(fields, &c);
	sr_diag_free(d);
}

static void test_every_problem_reported_with_position(void **state)
{
	struct sr_diag *d;
	struct cfg c;

	(void)state;
	unsetenv("SR_TEST_MISSING");
	assert_int_equal(load("endpint: x\n"				   /* 1: unknown key, no endpoint */
			      "workers: 100\n"				   /* 2: out of range */
			      "timeout: 10x\n"				   /* 3: bad duration */
			      "queue_size: lots\n"			   /* 4: bad size */
			      "mode: fancy\n"				   /* 5: bad enum */
			      "verbose: maybe\n"			   /* 6: bad bool */
			      "headers: {A: \"${env:SR_TEST_MISSING}\"}\n" /* 7: unset variable: a warning */
			      "retry: {initial_interval: 5}\n"		   /* 8: number without unit */
			      "urls: [a, b, c, d]\n"			   /* 9: too many */
			      "rules: [{action: [x]}]\n"		   /* 10: wrong node type */
			      "token: {a: 1}\n",			   /* 11: secret, wrong type */
			      &c, &d),
			 -EINVAL);
	dump(d);
	assert_true(has(d, "test.yaml:1:1: error: unknown key \"endpint\" (did you mean \"endpoint\"?)"));
	assert_true(has(d, "missing required key \"endpoint\""));
	assert_true(has(d, "test.yaml:2:10: error: workers: 100 is out of range: must be from 1 to 64"));
	assert_true(has(d, "test.yaml:3:10: error: timeout: invalid duration \"10x\""));
	assert_true(has(d, "test.yaml:4:13: error: queue_size: invalid size \"lots\""));
	assert_true(has(d, "test.yaml:5:7: error: mode: invalid value \"fancy\": expected one of none, simplified, "
			   "templates, full"));
	assert_true(has(d, "test.yaml:6:10: error: verbose: invalid bool \"maybe\""));
	assert_true(has(d, "test.yaml:7:14: warning: headers.A: environment variable SR_TEST_MISSING is not set: using "
			   "an empty string"));
	assert_true(has(d, "test.yaml:8:27: error: retry.initial_interval: invalid duration \"5\""));
	assert_true(has(d, "test.yaml:9:7: error: urls: has 4 entries: must have from 0 to 3"));
	assert_true(has(d, "test.yaml:10:18: error: rules[0].action: expected a string, got a sequence"));
	assert_true(has(d, "test.yaml:11:8: error: token: expected a string, got a mapping"));
	assert_int_equal(sr_diag_errors(d), 11);
	assert_int_equal(sr_diag_warnings(d), 1);
	sr_diag_free(d);
}

static void test_duration_bounds_and_secret(void **state)
{
	struct sr_diag *d;
	struct cfg c;

	(void)state;
	assert_int_equal(load("endpoint: x\ntimeout: 2m\n", &c, &d), -EINVAL);
	assert_true(has(d, "duration 2m is out of range: must be from 0s to 1m"));
	sr_diag_free(d);
	assert_int_equal(load("endpoint: x\nverbose: hunter2\n", &c, &d), -EINVAL);
	assert_true(has(d, "\"hunter2\""));
	sr_diag_free(d);
	/* A secret of another kind than string: its error names the field, never the value. */
	assert_int_equal(load("endpoint: x\npin: 12hunter2\n", &c, &d), -EINVAL);
	assert_true(has(d, "invalid non-negative integer \"(secret)\""));
	assert_false(has(d, "hunter2"));
	sr_diag_free(d);
}

static void test_syntax_error(void **state)
{
	struct sr_diag *d;
	struct cfg c;

	(void)state;
	assert_int_equal(load("endpoint: x\n  bad: [\n", &c, &d), -EINVAL);
	dump(d);
	assert_true(has(d, "test.yaml:2:"));
	assert_true(has(d, "invalid YAML"));
	sr_diag_free(d);
}

static void test_duplicates_and_null(void **state)
{
	struct sr_diag *d;
	struct cfg c;

	(void)state;
	assert_int_equal(load("endpoint: x\nworkers: 2\nworkers: 3\n", &c, &d), -EINVAL);
	assert_true(has(d, "test.yaml:3:1: error: duplicate key \"workers\" (first at line 2)"));
	sr_diag_free(d);
	/* A key with no value takes the default, as in the Collector. */
	assert_int_equal(load("endpoint: x\nworkers:\nretry:\n", &c, &d), 0);
	assert_int_equal(c.workers, 4);
	assert_true(c.retry.enabled);
	sr_config_free(fields, &c);
	sr_diag_free(d);
}

static void test_billion_laughs_bounded(void **state)
{
	char text[4096];
	size_t o = 0;
	struct sr_diag *d;
	struct cfg c;

	(void)state;
	o += (size_t)snprintf(text + o, sizeof(text) - o, "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
	for (int i = 1; i < 9; i++)
		o += (size_t)snprintf(text + o, sizeof(text) - o,
				      "a%d: &a%d [*a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d]\n", i, i,
				      i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1);
	assert_int_equal(load(text, &c, &d), -EINVAL);
	assert_true(has(d, "document too large or too deeply nested"));
	sr_diag_free(d);
}

static void test_describe(void **state)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	(void)state;
	assert_int_equal(sr_config_describe(fields, "exporters.x", true, f), 0);
	fclose(f);
	assert_non_null(strstr(buf, "| `exporters.x.timeout` | duration | `10s` | Timeout. (0s to 1m) |"));
	assert_non_null(strstr(buf, "| `exporters.x.retry.initial_interval` | duration | `5s` |"));
	assert_non_null(strstr(buf, "| `exporters.x.rules[].action` |"));
	assert_non_null(strstr(buf, "| `exporters.x.endpoint` | string | required |"));
	assert_non_null(strstr(buf, "enum: none \\| simplified \\| templates \\| full"));
	free(buf);
}

/* Bounds are a range: a minimum with no maximum above it would never be checked, and describing says so. */
static const struct sr_field min_only_fields[] = {
	SR_FIELD_U64("workers", struct cfg, workers, .def = "4", .min = 1, .doc = "Workers."),
	SR_FIELD_MAP("retry", struct cfg, retry, struct retry, retry_fields, .doc = "Retry settings."),
	SR_FIELD_END,
};

static void test_describe_unchecked_minimum(void **state)
{
	FILE *f = fopen("/dev/null", "w");

	(void)state;
	assert_non_null(f);
	assert_int_equal(sr_config_describe(min_only_fields, "x", false, f), 1);
	fclose(f);
}

static void test_file_errors(void **state)
{
	struct sr_diag *d = sr_diag_new();
	struct cfg c = { 0 };

	(void)state;
	assert_int_equal(sr_config_load_file("/nonexistent/stackrelay.yaml", fields, &c, d), -EINVAL);
	assert_true(has(d, "/nonexistent/stackrelay.yaml: error: cannot open: No such file or directory"));
	sr_diag_free(d);
}

/* Loads with the fail_at-th calloc() of sr_config_load() failing (0: none). */
static int load_failing(const struct sr_field *table, unsigned fail_at, struct oom_cfg *c)
{
	static const char text[] = "mode: b\nitems: [{level: c}]\ninner: {level: b}\nlast: c\n";
	struct sr_diag *d = sr_diag_new();
	struct sr_yaml_doc *doc = sr_yaml_load_string("oom.yaml", text, strlen(text), d);
	int r;

	assert_non_null(doc);
	memset(c, 0, sizeof(*c));
	alloc.calls = 0;
	alloc.fail_at = fail_at;
	alloc.on = true;
	r = sr_config_load(doc, sr_yaml_root(doc), "", table, c, d);
	alloc.on = false;
	sr_yaml_doc_free(doc);
	sr_diag_free(d);
	return r;
}

static void test_schema_out_of_memory_frees_what_it_built(void **state)
{
	struct oom_cfg c;
	size_t kept;
	unsigned n;
	int r;

	(void)state;
	/* Built without a failure, a schema keeps its blocks for the life of the process: the baseline. */
	memset(&alloc, 0, sizeof(alloc));
	assert_int_equal(load_failing(oom_b_fields, 0, &c), 0);
	sr_config_free(oom_b_fields, &c);
	kept = alloc.n_live;
	assert_true(kept > 0);

	/*
	 * The twin table with its 1st, 2nd, ... calloc() failing until the schema is built: each
	 * failure is -ENOMEM and leaves behind only what a schema keeps (parts built before it stay
	 * cached and are not built again).
	 */
	memset(&alloc, 0, sizeof(alloc));
	for (n = 1;; n++) {
		r = load_failing(oom_a_fields, n, &c);
		if (r == 0)
			break;
		assert_int_equal(r, -ENOMEM);
		assert_true(n < 100);
	}
	assert_true(n > 5);
	assert_int_equal(c.mode, 1);
	assert_int_equal(c.n_items, 1);
	assert_int_equal(c.items[0].level, 2);
	assert_int_equal(c.inner.level, 1);
	assert_int_equal(c.last, 2);
	sr_config_free(oom_a_fields, &c);
	assert_false(alloc.overflow);
	assert_int_equal(alloc.n_live, kept);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_all_kinds),
		cmocka_unit_test(test_every_problem_reported_with_position),
		cmocka_unit_test(test_duration_bounds_and_secret),
		cmocka_unit_test(test_syntax_error),
		cmocka_unit_test(test_duplicates_and_null),
		cmocka_unit_test(test_billion_laughs_bounded),
		cmocka_unit_test(test_describe),
		cmocka_unit_test(test_describe_unchecked_minimum),
		cmocka_unit_test(test_file_errors),
		cmocka_unit_test(test_schema_out_of_memory_frees_what_it_built),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
