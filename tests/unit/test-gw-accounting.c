/* SPDX-License-Identifier: Apache-2.0 */
/* Sample accounting and the Prometheus writer (gateway/core/accounting.h, metrics.h). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/accounting.h"
#include "core/metrics.h"

static void test_sum_rule(void **state)
{
	struct gw_accounting *a = gw_accounting_new();

	gw_accounting__declare(a, "otlp_http", true);
	gw_accounting__add(a, "agent", GW_COUNT_RECEIVED, NULL, 100);
	gw_accounting__add(a, "agent", GW_COUNT_REFUSED, GW_REASON_MISSING_DEFINITION, 10);
	gw_accounting__add(a, "agent", GW_COUNT_ACCEPTED, NULL, 90);
	gw_accounting__add(a, "batch", GW_COUNT_RECEIVED, NULL, 90);
	gw_accounting__add(a, "batch", GW_COUNT_DROPPED, "too_old", 5);
	assert_int_equal(gw_accounting__held(a, "batch"), 85);
	assert_int_equal(gw_accounting__check(a, false), 0);
	assert_int_equal(gw_accounting__check(a, true), -EUCLEAN); /* batch still holds 85 */
	gw_accounting__add(a, "batch", GW_COUNT_ACCEPTED, NULL, 85);
	gw_accounting__add(a, "otlp_http", GW_COUNT_RECEIVED, NULL, 85);
	gw_accounting__add(a, "otlp_http", GW_COUNT_EXPORTED, NULL, 80);
	assert_int_equal(gw_accounting__held(a, "otlp_http"), 5);
	gw_accounting__add(a, "otlp_http", GW_COUNT_DROPPED, "queue_full", 5);
	assert_int_equal(gw_accounting__check(a, true), 0);
	/* end to end: accepted at the receiver = exported + drops */
	assert_int_equal(gw_accounting__get(a, "agent", GW_COUNT_ACCEPTED, NULL),
			 gw_accounting__get(a, "otlp_http", GW_COUNT_EXPORTED, NULL) +
				 gw_accounting__get(a, "batch", GW_COUNT_DROPPED, NULL) +
				 gw_accounting__get(a, "otlp_http", GW_COUNT_DROPPED, NULL));
	assert_int_equal(gw_accounting__get(a, "agent", GW_COUNT_REFUSED, GW_REASON_MISSING_DEFINITION), 10);
	assert_int_equal(gw_accounting__get(a, "agent", GW_COUNT_REFUSED, "nope"), 0);
	assert_int_equal(gw_accounting__get(a, "unknown", GW_COUNT_RECEIVED, NULL), 0);
	/* more drops than received is a bug the check catches */
	gw_accounting__add(a, "x", GW_COUNT_DROPPED, "r", 1);
	assert_int_equal(gw_accounting__check(a, false), -EUCLEAN);
	gw_accounting_free(a);
}

static void test_reasons_are_bounded(void **state)
{
	struct gw_accounting *a = gw_accounting_new();
	char reason[32];

	for (int i = 0; i < 100; i++) {
		snprintf(reason, sizeof(reason), "r%d", i);
		gw_accounting__add(a, "p", GW_COUNT_DROPPED, reason, 1);
	}
	assert_int_equal(gw_accounting__get(a, "p", GW_COUNT_DROPPED, NULL), 100);
	assert_int_equal(gw_accounting__get(a, "p", GW_COUNT_DROPPED, "r0"), 1);
	/* the last slot collects every reason past the bound */
	assert_int_equal(gw_accounting__get(a, "p", GW_COUNT_DROPPED, "other"), 100 - (GW_ACCOUNTING_MAX_REASONS - 1));
	gw_accounting_free(a);
}

static void test_metrics_text(void **state)
{
	struct gw_accounting *a = gw_accounting_new();
	struct gw_metrics_writer *w = gw_metrics_writer_new();
	char lbl[128] = "";
	char *text;
	size_t len;

	gw_accounting__declare(a, "otlp_http/p", true);
	gw_accounting__add(a, "agent", GW_COUNT_RECEIVED, NULL, 7);
	gw_accounting__add(a, "agent", GW_COUNT_REFUSED, "retry_later", 7);
	gw_accounting__add(a, "otlp_http/p", GW_COUNT_RECEIVED, NULL, 3);
	gw_accounting__write_metrics(a, w);
	gw_metrics_label(lbl, sizeof(lbl), "path", "a\"b\\c\nd");
	gw_metrics__add(w, "x_total", GW_METRIC_COUNTER, "X.", lbl, 1.5);
	assert_int_equal(gw_metrics_writer__render(w, &text, &len), 0);
	assert_int_equal(strlen(text), len);
	/* One HELP/TYPE per family, series grouped under it. */
	const char *fam = "# TYPE stackrelay_gateway_samples_received_total counter\n";
	const char *first = strstr(text, fam);
	assert_non_null(first);
	assert_null(strstr(first + 1, fam));
	/* Both series right after the family's TYPE line, before any other family. */
	const char *next_family = strstr(first + strlen(fam), "# HELP");
	const char *s1 = strstr(first, "stackrelay_gateway_samples_received_total{component=\"agent\"} 7\n");
	const char *s2 = strstr(first, "stackrelay_gateway_samples_received_total{component=\"otlp_http/p\"} 3\n");
	assert_non_null(s1);
	assert_non_null(s2);
	assert_true(s1 < next_family && s2 < next_family);
	assert_non_null(strstr(
		text, "stackrelay_gateway_samples_refused_total{component=\"agent\",reason=\"retry_later\"} 7\n"));
	assert_non_null(strstr(text, "stackrelay_gateway_samples_exported_total{component=\"otlp_http/p\"} 0\n"));
	assert_null(strstr(text, "stackrelay_gateway_samples_exported_total{component=\"agent\"}"));
	assert_non_null(strstr(text, "stackrelay_gateway_samples_held{component=\"otlp_http/p\"} 3\n"));
	assert_non_null(strstr(text, "x_total{path=\"a\\\"b\\\\c\\nd\"} 1.5\n"));
	free(text);
	gw_metrics_writer_free(w);
	gw_accounting_free(a);
}

/* Declared reasons are series at 0 before any loss; a later drop adds to its series, not a new one. */
static void test_declared_reasons(void **state)
{
	static const char *const drops[] = { "queue_full", "retries_exhausted", NULL };
	static const char *const refusals[] = { GW_REASON_RETRY_LATER, NULL };
	struct gw_accounting *a = gw_accounting_new();
	struct gw_metrics_writer *w;
	char *text;
	size_t len;

	gw_accounting__declare(a, "otlp_http/p", true);
	gw_accounting__declare_reasons(a, "otlp_http/p", GW_COUNT_DROPPED, drops);
	gw_accounting__declare_reasons(a, "otlp_http/p", GW_COUNT_DROPPED, drops); /* twice: still one series */
	gw_accounting__declare_reasons(a, "agent", GW_COUNT_REFUSED, refusals);
	gw_accounting__declare_reasons(a, "agent", GW_COUNT_RECEIVED, drops); /* not a count with reasons */
	assert_int_equal(gw_accounting__check(a, true), 0);

	w = gw_metrics_writer_new();
	gw_accounting__write_metrics(a, w);
	assert_int_equal(gw_metrics_writer__render(w, &text, &len), 0);
	assert_non_null(strstr(text, "stackrelay_gateway_samples_dropped_total{component=\"otlp_http/p\","
				     "reason=\"queue_full\"} 0\n"));
	assert_non_null(strstr(text, "stackrelay_gateway_samples_dropped_total{component=\"otlp_http/p\","
				     "reason=\"retries_exhausted\"} 0\n"));
	assert_non_null(strstr(text, "stackrelay_gateway_samples_refused_total{component=\"agent\","
				     "reason=\"retry_later\"} 0\n"));
	assert_null(strstr(text, "stackrelay_gateway_samples_dropped_total{component=\"agent\""));
	assert_null(strstr(strstr(text, "reason=\"queue_full\"") + 1, "reason=\"queue_full\""));
	free(text);
	gw_metrics_writer_free(w);

	gw_accounting__add(a, "otlp_http/p", GW_COUNT_RECEIVED, NULL, 4);
	gw_accounting__add(a, "otlp_http/p", GW_COUNT_DROPPED, "queue_full", 4);
	assert_int_equal(gw_accounting__get(a, "otlp_http/p", GW_COUNT_DROPPED, "queue_full"), 4);
	assert_int_equal(gw_accounting__get(a, "otlp_http/p", GW_COUNT_DROPPED, NULL), 4);
	assert_int_equal(gw_accounting__check(a, true), 0);
	w = gw_metrics_writer_new();
	gw_accounting__write_metrics(a, w);
	assert_int_equal(gw_metrics_writer__render(w, &text, &len), 0);
	assert_non_null(strstr(text, "stackrelay_gateway_samples_dropped_total{component=\"otlp_http/p\","
				     "reason=\"queue_full\"} 4\n"));
	free(text);
	gw_metrics_writer_free(w);
	gw_accounting_free(a);
}

/* A duration histogram renders as Prometheus does: cumulative buckets with le, +Inf, _sum and _count. */
static void test_metrics_histogram(void **state)
{
	struct gw_metrics_writer *w = gw_metrics_writer_new();
	struct gw_duration_histogram h = { 0 };
	char *text;
	size_t len;

	gw_duration_histogram__observe(&h, 0.001);
	gw_duration_histogram__observe(&h, 0.005); /* on a bound: in its bucket (le is "less or equal") */
	gw_duration_histogram__observe(&h, 0.3);
	gw_duration_histogram__observe(&h, 20);
	gw_metrics__add_histogram(w, "d_seconds", "D.", "component=\"agent\"", &h);
	gw_metrics__add_histogram(w, "e_seconds", "E.", NULL, &h);
	assert_int_equal(gw_metrics_writer__render(w, &text, &len), 0);
	assert_non_null(strstr(text, "# TYPE d_seconds histogram\n"));
	assert_null(strstr(text, "# TYPE d_seconds_bucket"));
	assert_non_null(strstr(text, "d_seconds_bucket{component=\"agent\",le=\"0.005\"} 2\n"));
	assert_non_null(strstr(text, "d_seconds_bucket{component=\"agent\",le=\"0.25\"} 2\n"));
	assert_non_null(strstr(text, "d_seconds_bucket{component=\"agent\",le=\"0.5\"} 3\n"));
	assert_non_null(strstr(text, "d_seconds_bucket{component=\"agent\",le=\"10\"} 3\n"));
	assert_non_null(strstr(text, "d_seconds_bucket{component=\"agent\",le=\"+Inf\"} 4\n"));
	assert_non_null(strstr(text, "d_seconds_sum{component=\"agent\"} 20.30")); /* 20.306, as %.17g prints it */
	assert_non_null(strstr(text, "d_seconds_count{component=\"agent\"} 4\n"));
	assert_non_null(strstr(text, "e_seconds_bucket{le=\"0.01\"} 2\n"));
	assert_non_null(strstr(text, "e_seconds_count 4\n"));
	free(text);
	gw_metrics_writer_free(w);
	(void)state;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sum_rule),	  cmocka_unit_test(test_reasons_are_bounded),
		cmocka_unit_test(test_metrics_text),	  cmocka_unit_test(test_declared_reasons),
		cmocka_unit_test(test_metrics_histogram),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
