/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The listener's tick (gateway/net/conn.h): what it checks every few hundred
 * milliseconds on every connection: header, request, keepalive and idle
 * timeouts, and the end of the shutdown grace; then the receiver's own
 * periodic work (gw_listener.on_tick: the agent receiver watches its stores).
 */
#include <stdint.h>

#include <nghttp2/nghttp2.h>
#include <uv.h>

#include "gateway/net/conn.h"
#include "gateway/net/h1.h"
#include "component.h"
#include "common/log.h"
#include "common/units.h"

void gw_net_on_tick(uv_timer_t *t)
{
	struct gw_listener *rx = t->data;
	const struct gw_listener_config *cfg = rx->cfg;
	uint64_t now = gw_net_now_ms(rx);
	struct conn *c = rx->conns;

	while (c) {
		struct conn *next = c->next;
		if (c->lingering) {
			if (now - c->linger_started_ms > GW_NET_LINGER_MS)
				gw_net_conn_close(c);
			goto next;
		}
		if (!c->got_headers && now - c->accepted_ms > cfg->header_timeout_ns / SR_NSEC_PER_MSEC) {
			rx->st.header_timeouts++;
			sr_log_debug(rx->ops->component, "no request headers within header_timeout; closing",
				     "id=%s peer=%s", rx->c->id, c->peer);
			gw_net_conn_close(c);
			goto next;
		}
		uint64_t head_ms = c->got_headers ? gw_h1_head_started_ms(c) : 0;
		if (head_ms && now - head_ms > cfg->header_timeout_ns / SR_NSEC_PER_MSEC) {
			rx->st.header_timeouts++;
			sr_log_debug(rx->ops->component,
				     "HTTP/1.1 request head not complete within header_timeout; closing",
				     "id=%s peer=%s", rx->c->id, c->peer);
			gw_net_conn_close(c);
			goto next;
		}
		if (c->ping_outstanding && now - c->ping_sent_ms > cfg->keepalive.timeout_ns / SR_NSEC_PER_MSEC) {
			rx->st.keepalive_timeouts++;
			sr_log_debug(rx->ops->component, "PING not answered within keepalive.timeout; closing",
				     "id=%s peer=%s", rx->c->id, c->peer);
			gw_net_conn_close(c);
			goto next;
		}
		if (rx->shutting_down && now - rx->shutdown_started_ms > SHUTDOWN_GRACE_MS) {
			gw_net_conn_close(c);
			goto next;
		}
		/* An early answer (413, 408) is followed by its body's rest only as long as a request may take. */
		if (gw_h1_discarding(c) && now - c->last_request_ms > cfg->request_timeout_ns / SR_NSEC_PER_MSEC) {
			sr_log_debug(rx->ops->component,
				     "body of an answered request not sent within request_timeout; closing",
				     "id=%s peer=%s", rx->c->id, c->peer);
			gw_net_conn_close(c);
			goto next;
		}
		for (struct h2stream *s = c->streams, *sn; s; s = sn) {
			sn = s->next;
			if (!s->responded && !s->processing &&
			    now - s->started_ms > cfg->request_timeout_ns / SR_NSEC_PER_MSEC)
				gw_net_respond_error(s, 408, 0, "request not complete within request_timeout");
		}
		if (c->n_streams == 0 && cfg->idle_timeout_ns &&
		    now - c->last_request_ms > cfg->idle_timeout_ns / SR_NSEC_PER_MSEC && c->got_headers) {
			rx->st.idle_closes++;
			gw_net_conn_goaway(c);
			goto next;
		}
		if (cfg->keepalive.interval_ns && !c->ping_outstanding && c->got_headers && !c->h1 &&
		    now - c->last_recv_ms > cfg->keepalive.interval_ns / SR_NSEC_PER_MSEC) {
			if (nghttp2_submit_ping(c->h2, NGHTTP2_FLAG_NONE, NULL) == 0) {
				c->ping_outstanding = true;
				c->ping_sent_ms = now;
			}
		}
		gw_net_conn_flush(c);
	next:
		c = next;
	}
	if (rx->on_tick)
		rx->on_tick(rx, now);
}
