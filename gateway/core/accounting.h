/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Sample accounting (docs/gateway.md, "Accounting"): every sample count that
 * enters a component is, per component instance, eventually one of
 *
 *   received = accepted + refused + dropped + held
 *
 *   received  counts that entered the component (receivers: counted on the
 *             wire; processors/exporters: counted by the runtime on consume);
 *   accepted  passed on to the next stage (counted by the runtime on emit;
 *             receivers: what they answered "accepted" to the agent);
 *   refused   given back to the sender, which still holds them (receivers
 *             only: missing definitions, retry-later, bad request), by reason;
 *   dropped   lost, by reason (a bound was hit, a backend refused for good);
 *   exported  exporters only: delivered to the backend; part of "accepted"
 *             for exporters (an exporter "passes on" to its backend);
 *   held      in the component's buffers right now (a gauge, derived).
 *
 * End to end (one pipeline, one exporter): receiver.accepted equals the
 * exporter's exported + every drop along the way + what is still held. Tests
 * check both rules (gw_accounting__check()).
 *
 * Counts are sample counts (sum of gw_sample.count), i.e. CPU samples, not
 * sample records. All functions are thread-safe (one mutex; calls are per
 * batch, not per sample).
 */
#ifndef SR_GW_ACCOUNTING_H
#define SR_GW_ACCOUNTING_H

#include <stdbool.h>
#include <stdint.h>

struct gw_accounting;
struct gw_metrics_writer;

enum gw_count {
	GW_COUNT_RECEIVED,
	GW_COUNT_ACCEPTED,
	GW_COUNT_REFUSED,
	GW_COUNT_DROPPED,
	GW_COUNT_EXPORTED,
	_GW_COUNT_MAX,
};

/* Most reasons per (component, refused|dropped); more are folded into "other". */
#define GW_ACCOUNTING_MAX_REASONS 32

/* Reasons used by the core (components may use their own short snake_case words). */
#define GW_REASON_MISSING_DEFINITION "missing_definition"
#define GW_REASON_RETRY_LATER	     "retry_later"
#define GW_REASON_BAD_REQUEST	     "bad_request"
#define GW_REASON_SHUTDOWN	     "shutdown"
#define GW_REASON_NO_ROUTE	     "no_route"
#define GW_REASON_CONSUME_ERROR	     "consume_error"

struct gw_accounting *gw_accounting_new(void);
void gw_accounting_free(struct gw_accounting *a);

/* component: the instance ID ("otlp_http/pyroscope"); reason: NULL for
 * received/accepted/exported, a static string for refused/dropped. */
void gw_accounting__add(struct gw_accounting *a, const char *component, enum gw_count what, const char *reason,
			uint64_t samples);

/* Totals (reason NULL: summed over reasons). 0 for an unknown component. */
uint64_t gw_accounting__get(struct gw_accounting *a, const char *component, enum gw_count what, const char *reason);
/* received - accepted - refused - dropped (exporters: received - exported - refused - dropped). */
int64_t gw_accounting__held(struct gw_accounting *a, const char *component);
/* Every component has held >= 0; when quiescent also held == 0. 0 or -EUCLEAN. */
int gw_accounting__check(struct gw_accounting *a, bool quiescent);
/* Marks a component as an exporter (its "accepted" is its "exported"). */
void gw_accounting__declare(struct gw_accounting *a, const char *component, bool exporter);
/*
 * Creates the component's refused (what = GW_COUNT_REFUSED) or dropped
 * (GW_COUNT_DROPPED) series of each reason (a NULL-terminated list) at 0, so
 * they are written from the first scrape on and the first such loss shows
 * as an increase, not as a new series. Other values of what are ignored.
 */
void gw_accounting__declare_reasons(struct gw_accounting *a, const char *component, enum gw_count what,
				    const char *const *reasons);

/* Writes stackrelay_gateway_samples_*_total families. */
void gw_accounting__write_metrics(struct gw_accounting *a, struct gw_metrics_writer *w);

const char *gw_count_to_string(enum gw_count c);

#endif
