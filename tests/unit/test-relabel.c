// SPDX-License-Identifier: Apache-2.0
/* Prometheus relabel semantics over attribute sets: one table row per behaviour. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/config.h"
#include "gateway/core/regex.h"
#include "gateway/processors/relabel-rules.h"

#define MAXR 4
#define MAXL 8

struct rule_spec {
	const char *action;
	const char *source[4];
	const char *separator;
	const char *target;
	const char *regex;
	const char *replacement;
	uint64_t modulus;
};

struct row {
	const char *name;
	struct rule_spec rules[MAXR];
	const char *in[MAXL][2];
	const char *out[MAXL][2]; /* expected, in order; ignored when dropped */
	bool dropped;
};

static const struct row rows[] = {
	{ "replace executable into service.name",
	  { { "replace", { "process.executable.name" }, NULL, "service.name", NULL, NULL, 0 } },
	  { { "process.executable.name", "nginx" } },
	  { { "process.executable.name", "nginx" }, { "service.name", "nginx" } } },
	{ "replace default regex matches empty source: sets empty -> deletes target",
	  { { "replace", { "missing" }, NULL, "service.name", NULL, NULL, 0 } },
	  { { "service.name", "old" } },
	  { { NULL, NULL } } },
	{ "replace with capture groups, ${1} and $name",
	  { { "replace",
	      { "k8s.namespace.name", "k8s.pod.name" },
	      "/",
	      "svc",
	      "(?P<ns>[^/]+)/(.*)-[a-z0-9]+",
	      "${ns}.$2",
	      0 } },
	  { { "k8s.namespace.name", "shop" }, { "k8s.pod.name", "web-abcde" } },
	  { { "k8s.namespace.name", "shop" }, { "k8s.pod.name", "web-abcde" }, { "svc", "shop.web" } } },
	{ "replace: regex is anchored, no partial match",
	  { { "replace", { "a" }, NULL, "b", "bc", "X", 0 } },
	  { { "a", "abcd" } },
	  { { "a", "abcd" } } },
	{ "replace: $1x means group '1x' (empty), as Go",
	  { { "replace", { "a" }, NULL, "b", "(.*)", "$1x-${1}x", 0 } },
	  { { "a", "v" } },
	  { { "a", "v" }, { "b", "-vx" } } },
	{ "replace: target_label expanded from the match",
	  { { "replace", { "a" }, NULL, "label_$1", "(.*)", "yes", 0 } },
	  { { "a", "foo" } },
	  { { "a", "foo" }, { "label_foo", "yes" } } },
	{ "replace: $$ is a literal dollar",
	  { { "replace", { "a" }, NULL, "b", "(.*)", "$$1", 0 } },
	  { { "a", "v" } },
	  { { "a", "v" }, { "b", "$1" } } },
	{ "keep matching",
	  { { "keep", { "process.executable.name" }, NULL, NULL, "java|python3?", NULL, 0 } },
	  { { "process.executable.name", "python3" } },
	  { { "process.executable.name", "python3" } } },
	{ "keep not matching drops",
	  { { "keep", { "process.executable.name" }, NULL, NULL, "java|python3?", NULL, 0 } },
	  { { "process.executable.name", "bash" } },
	  { { NULL, NULL } },
	  true },
	{ "drop noisy processes",
	  { { "drop", { "process.executable.name" }, NULL, NULL, "(kworker|ksoftirqd)/.*", NULL, 0 } },
	  { { "process.executable.name", "kworker/0:1" } },
	  { { NULL, NULL } },
	  true },
	{ "drop on a missing label matches the empty string",
	  { { "drop", { "nope" }, NULL, NULL, "", NULL, 0 } },
	  { { "a", "1" } },
	  { { NULL, NULL } },
	  true },
	{ "keepequal / dropequal",
	  { { "keepequal", { "a" }, NULL, "b", NULL, NULL, 0 }, { "dropequal", { "a" }, NULL, "c", NULL, NULL, 0 } },
	  { { "a", "1" }, { "b", "1" }, { "c", "2" } },
	  { { "a", "1" }, { "b", "1" }, { "c", "2" } } },
	{ "hashmod as Prometheus (md5, last 8 bytes)",
	  { { "hashmod", { "a" }, NULL, "shard", NULL, NULL, 10 } },
	  { { "a", "foo" } },
	  /* md5("foo") = acbd18db4cc2f85cedef654fccc4a4d8; 0xedef654fccc4a4d8 % 10 = 6 */
	  { { "a", "foo" }, { "shard", "6" } } },
	{ "labelmap copies matching keys under a new name",
	  { { "labelmap", { NULL }, NULL, NULL, "k8s\\.pod\\.labels\\.(.+)", "$1", 0 } },
	  { { "k8s.pod.labels.team", "core" }, { "x", "y" } },
	  { { "k8s.pod.labels.team", "core" }, { "x", "y" }, { "team", "core" } } },
	{ "labeldrop",
	  { { "labeldrop", { NULL }, NULL, NULL, "process\\..*", NULL, 0 } },
	  { { "process.pid", "1" }, { "service.name", "s" }, { "process.executable.name", "e" } },
	  { { "service.name", "s" } } },
	{ "labelkeep",
	  { { "labelkeep", { NULL }, NULL, NULL, "service\\..*|k8s\\.namespace\\.name", NULL, 0 } },
	  { { "process.pid", "1" }, { "service.name", "s" }, { "k8s.namespace.name", "n" } },
	  { { "service.name", "s" }, { "k8s.namespace.name", "n" } } },
	{ "lowercase / uppercase",
	  { { "lowercase", { "a" }, NULL, "lo", NULL, NULL, 0 }, { "uppercase", { "a" }, NULL, "up", NULL, NULL, 0 } },
	  { { "a", "MiXed" } },
	  { { "a", "MiXed" }, { "lo", "mixed" }, { "up", "MIXED" } } },
	{ "__ scratch labels vanish after the last rule",
	  { { "replace", { "a" }, NULL, "__tmp", NULL, NULL, 0 },
	    { "replace", { "__tmp" }, NULL, "b", "(.)(.*)", "$2", 0 } },
	  { { "a", "xyz" } },
	  { { "a", "xyz" }, { "b", "yz" } } },
	{ "regex $ is end of text (no trailing newline match)",
	  { { "keep", { "a" }, NULL, NULL, "abc$", NULL, 0 } },
	  { { "a", "abc\n" } },
	  { { NULL, NULL } },
	  true },
};

static int action_index(const char *name)
{
	for (int i = 0; gw_relabel_action_names[i]; i++)
		if (strcmp(gw_relabel_action_names[i], name) == 0)
			return i;
	fail_msg("unknown action %s", name);
	return -1;
}

static struct gw_relabel *build(const struct rule_spec *specs, size_t n, char *err, size_t errsize)
{
	struct gw_relabel_rule_config cfg[MAXR];
	struct gw_relabel *rl;

	memset(cfg, 0, sizeof(cfg));
	for (size_t i = 0; i < n; i++) {
		const struct rule_spec *s = &specs[i];
		cfg[i].action = action_index(s->action);
		cfg[i].source_labels = (char **)s->source;
		while (cfg[i].source_labels_count < 4 && s->source[cfg[i].source_labels_count])
			cfg[i].source_labels_count++;
		cfg[i].separator = (char *)s->separator;
		cfg[i].target_label = (char *)s->target;
		cfg[i].regex = (char *)s->regex;
		cfg[i].replacement = (char *)s->replacement;
		cfg[i].modulus = s->modulus;
	}
	rl = gw_relabel_new(cfg, n, err, errsize);
	return rl;
}

static void test_table(void **state)
{
	for (size_t r = 0; r < sizeof(rows) / sizeof(rows[0]); r++) {
		const struct row *row = &rows[r];
		struct gw_labels ls = { 0 };
		struct gw_relabel_stats st = { 0 };
		char err[256];
		size_t nrules = 0, nout = 0;
		struct gw_relabel *rl;

		while (nrules < MAXR && row->rules[nrules].action)
			nrules++;
		rl = build(row->rules, nrules, err, sizeof(err));
		if (!rl)
			fail_msg("%s: %s", row->name, err);
		for (size_t i = 0; i < MAXL && row->in[i][0]; i++)
			assert_int_equal(gw_labels__set(&ls, row->in[i][0], row->in[i][1]), 0);
		int kept = gw_relabel__apply(rl, &ls, &st);
		if (row->dropped) {
			if (kept != 0)
				fail_msg("%s: expected drop, got %d", row->name, kept);
			assert_int_equal(st.dropped, 1);
		} else {
			if (kept != 1)
				fail_msg("%s: expected keep, got %d", row->name, kept);
			while (nout < MAXL && row->out[nout][0])
				nout++;
			if (ls.n != nout) {
				for (size_t i = 0; i < ls.n; i++)
					print_message("  %s=%s\n", ls.v[i].key, ls.v[i].value);
				fail_msg("%s: %zu labels, expected %zu", row->name, ls.n, nout);
			}
			for (size_t i = 0; i < nout; i++) {
				if (strcmp(ls.v[i].key, row->out[i][0]) != 0 ||
				    strcmp(ls.v[i].value, row->out[i][1]) != 0)
					fail_msg("%s: label %zu is %s=%s, expected %s=%s", row->name, i, ls.v[i].key,
						 ls.v[i].value, row->out[i][0], row->out[i][1]);
			}
		}
		gw_labels_clear(&ls);
		gw_relabel_free(rl);
	}
}

static void test_invalid(void **state)
{
	static const struct {
		struct rule_spec rule;
		const char *msg;
	} bad[] = {
		{ { "replace", { "a" }, NULL, NULL, NULL, NULL, 0 },
		  "rules[0]: target_label: required by action replace" },
		{ { "hashmod", { "a" }, NULL, "t", NULL, NULL, 0 },
		  "rules[0]: modulus: required (> 0) by action hashmod" },
		{ { "keep", { NULL }, NULL, NULL, "x", NULL, 0 }, "rules[0]: source_labels: required by action keep" },
		{ { "labeldrop", { "a" }, NULL, NULL, "x", NULL, 0 }, "rules[0]: action labeldrop uses only regex" },
		{ { "replace", { "a" }, NULL, "t", "(a", NULL, 0 }, "rules[0]: regex: missing closing parenthesis" },
		{ { "replace", { "a" }, NULL, "t", "(a)\\1", NULL, 0 }, "rules[0]: regex: backreference" },
		{ { "replace", { "a" }, NULL, "t", "a(?=b)", NULL, 0 }, "rules[0]: regex: group (?=" },
		{ { "replace", { "a" }, NULL, "t", "a++", NULL, 0 }, "rules[0]: regex: possessive" },
		{ { "replace", { "a" }, NULL, "t", "(?<!x)a", NULL, 0 }, "rules[0]: regex: group (?<" },
	};
	char err[256];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct gw_relabel *rl = build(&bad[i].rule, 1, err, sizeof(err));
		if (rl)
			fail_msg("case %zu accepted", i);
		assert_int_equal(errno, EINVAL);
		if (strncmp(err, bad[i].msg, strlen(bad[i].msg)) != 0)
			fail_msg("case %zu: \"%s\" does not start with \"%s\"", i, err, bad[i].msg);
	}
	/* Character classes may hold what would be lookaround syntax elsewhere. */
	struct rule_spec ok = { "replace", { "a" }, NULL, "t", "[(?=]\\(\\?!x\\)[]a]", NULL, 0 };
	struct gw_relabel *rl = build(&ok, 1, err, sizeof(err));
	if (!rl)
		fail_msg("class pattern refused: %s", err);
	gw_relabel_free(rl);
}

/* Catastrophic backtracking is cut off by the match limit, not allowed to spin. */
static void test_match_limit(void **state)
{
	char err[128];
	struct gw_regex *re = gw_regex_new("(a|aa)*[bc]", true, err, sizeof(err));
	char subject[64];

	assert_non_null(re);
	memset(subject, 'a', sizeof(subject) - 1);
	subject[sizeof(subject) - 1] = '\0';
	assert_int_equal(gw_regex__match(re, subject, NULL), -E2BIG);
	gw_regex_free(re);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table),
		cmocka_unit_test(test_invalid),
		cmocka_unit_test(test_match_limit),
	};
	return cmocka_run_group_tests_name("relabel", tests, NULL, NULL);
}
