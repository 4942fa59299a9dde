/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The agent receiver's tick (agent-private.h): what it checks every few
 * hundred milliseconds. Connections: header, request, keepalive and idle
 * timeouts, and the end of the shutdown grace. The stores: whether the
 * definition stores are too small for the fleet (watch_stores).
 */
#include <inttypes.h>
#include <stdint.h>

#include <nghttp2/nghttp2.h>
#include <uv.h>

#include "agent-h1.h"
#include "agent-private.h"
#include "log.h"
#include "model.h"
#include "runtime.h"
#include "units.h"

/* The window over which missing definitions are weighed against evictions, and how often a warning may repeat. */
#define THRASH_WINDOW_MS     10000
#define THRASH_WARN_EVERY_MS (10 * 60 * 1000)

/*
 * The stores whose evictions agents feel (rx->thrash is indexed like this).
 * min_missing: fewer missing definitions than this in a window are ordinary
 * churn (an agent restarted, a replica came up). Executables and kernels are
 * few and long-lived, so a handful asked for again already says the store
 * evicts ones in use; and each evicted one costs more than a stack: the next
 * definition naming it makes a new one, with new copies of its locations.
 */
static const struct {
	enum gw_store_kind store;
	const char *msg, *plural, *singular;
	uint64_t min_missing;
} watched[] = {
	{ GW_STORE_STACKS,
	  "the stacks store is too small for the stacks agents use: it evicts stacks that come back as "
	  "definitions, at a high CPU cost; raise stores.stacks",
	  "stacks", "stack", 100 },
	{ GW_STORE_EXECUTABLES,
	  "the executables store is too small for the executables agents use: it evicts executables that come "
	  "back as definitions, with new copies of their locations, at a high CPU cost; raise stores.executables",
	  "executables", "executable", 10 },
	{ GW_STORE_KERNELS,
	  "the kernels store is too small for the kernels agents use: it evicts kernels that come back as "
	  "definitions, with new copies of their locations, at a high CPU cost; raise stores.kernels",
	  "kernels", "kernel", 10 },
};

static uint64_t missing_of(const struct agent_rx *rx, enum gw_store_kind k)
{
	return k == GW_STORE_STACKS	   ? rx->st.missing_stacks
	       : k == GW_STORE_EXECUTABLES ? rx->st.missing_executables
					   : rx->st.missing_kernels;
}

/*
 * A store smaller than the definitions the fleet uses evicts ones that
 * agents still name: every request is answered with them missing and they
 * come back as definitions, so the gateway spends its CPU on definitions
 * (costly, not lossy: docs/gateway.md, "Definition stores"). Healthy
 * eviction removes definitions nobody uses any more, which are rarely
 * asked for again. So, per store: it evicted in the window, and agents
 * were told of missing definitions of its kind at least a quarter as
 * often. A gateway that just started (empty stores, nothing evicted) does
 * not count.
 */
static void watch_stores(struct agent_rx *rx, uint64_t now_ms)
{
	_Static_assert(SR_ARRAY_SIZE(watched) == SR_ARRAY_SIZE(rx->thrash), "one thrash window per watched store");
	for (size_t i = 0; i < SR_ARRAY_SIZE(watched); i++) {
		__typeof__(rx->thrash[0]) *t = &rx->thrash[i];
		struct gw_store_stats st;
		uint64_t missing, evictions;

		if (t->at_ms && now_ms - t->at_ms < THRASH_WINDOW_MS)
			continue;
		gw_stores__stats(gw_runtime__stores(rx->c->runtime), watched[i].store, &st);
		missing = missing_of(rx, watched[i].store) - t->missing;
		evictions = st.evictions - t->evictions;
		if (t->at_ms && evictions > 0 && missing >= watched[i].min_missing && missing * 4 >= evictions &&
		    (!t->warned_ms || now_ms - t->warned_ms >= THRASH_WARN_EVERY_MS)) {
			t->warned_ms = now_ms;
			sr_log_warn(COMPONENT, watched[i].msg,
				    "id=%s window_s=%u missing_%s=%" PRIu64 " %s_evictions=%" PRIu64
				    " %s_store_bytes=%" PRIu64 " %s_store_limit_bytes=%" PRIu64,
				    rx->c->id, (unsigned)(THRASH_WINDOW_MS / 1000), watched[i].plural, missing,
				    watched[i].singular, evictions, watched[i].plural, st.bytes, watched[i].plural,
				    st.limit_bytes);
		}
		t->at_ms = now_ms;
		t->missing = missing_of(rx, watched[i].store);
		t->evictions = st.evictions;
	}
}

void gw_agent_on_tick(uv_timer_t *t)
{
	struct agent_rx *rx = t->data;
	const struct agent_config *cfg = rx->cfg;
	uint64_t now = gw_agent_now_ms(rx);
	struct conn *c = rx->conns;

	while (c) {
		struct conn *next = c->next;
		if (!c->got_headers && now - c->accepted_ms > cfg->header_timeout_ns / SR_NSEC_PER_MSEC) {
			rx->st.header_timeouts++;
			sr_log_debug(COMPONENT, "no request headers within header_timeout; closing", "id=%s peer=%s",
				     rx->c->id, c->peer);
			gw_agent_conn_close(c);
			goto next;
		}
		uint64_t head_ms = c->got_headers ? gw_h1_head_started_ms(c) : 0;
		if (head_ms && now - head_ms > cfg->header_timeout_ns / SR_NSEC_PER_MSEC) {
			rx->st.header_timeouts++;
			sr_log_debug(COMPONENT, "HTTP/1.1 request head not complete within header_timeout; closing",
				     "id=%s peer=%s", rx->c->id, c->peer);
			gw_agent_conn_close(c);
			goto next;
		}
		if (c->ping_outstanding && now - c->ping_sent_ms > cfg->keepalive.timeout_ns / SR_NSEC_PER_MSEC) {
			rx->st.keepalive_timeouts++;
			sr_log_debug(COMPONENT, "PING not answered within keepalive.timeout; closing", "id=%s peer=%s",
				     rx->c->id, c->peer);
			gw_agent_conn_close(c);
			goto next;
		}
		if (rx->shutting_down && now - rx->shutdown_started_ms > SHUTDOWN_GRACE_MS) {
			gw_agent_conn_close(c);
			goto next;
		}
		/* An early answer (413, 408) is followed by its body's rest only as long as a request may take. */
		if (gw_h1_discarding(c) && now - c->last_request_ms > cfg->request_timeout_ns / SR_NSEC_PER_MSEC) {
			sr_log_debug(COMPONENT, "body of an answered request not sent within request_timeout; closing",
				     "id=%s peer=%s", rx->c->id, c->peer);
			gw_agent_conn_close(c);
			goto next;
		}
		for (struct h2stream *s = c->streams, *sn; s; s = sn) {
			sn = s->next;
			if (!s->responded && !s->processing &&
			    now - s->started_ms > cfg->request_timeout_ns / SR_NSEC_PER_MSEC)
				gw_agent_respond_error(s, 408, 0, "request not complete within request_timeout");
		}
		if (c->n_streams == 0 && cfg->idle_timeout_ns &&
		    now - c->last_request_ms > cfg->idle_timeout_ns / SR_NSEC_PER_MSEC && c->got_headers) {
			rx->st.idle_closes++;
			gw_agent_conn_goaway(c);
			goto next;
		}
		if (cfg->keepalive.interval_ns && !c->ping_outstanding && c->got_headers && !c->h1 &&
		    now - c->last_recv_ms > cfg->keepalive.interval_ns / SR_NSEC_PER_MSEC) {
			if (nghttp2_submit_ping(c->h2, NGHTTP2_FLAG_NONE, NULL) == 0) {
				c->ping_outstanding = true;
				c->ping_sent_ms = now;
			}
		}
		gw_agent_conn_flush(c);
	next:
		c = next;
	}
	if (!rx->ops)
		watch_stores(rx, now);
}
