/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A listener's life (gateway/net/conn.h): TLS (OpenSSL, ALPN h2, and
 * http/1.1 for a receiver that serves it), the bearer token file, the
 * listening socket and the tick, shutdown (GOAWAY, then waiting for the
 * connections and the receiver's jobs) and teardown. The receiver sets
 * rx->c, cfg, ops and loop, then calls these in order.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nghttp2/nghttp2.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <uv.h>

#include "component.h"
#include "gateway/net/conn.h"
#include "common/log.h"
#include "common/macro.h"
#include "common/netaddr.h"
#include "common/units.h"

/* ---- defaults ---- */

int gw_listener_config_defaults(struct gw_listener_config *cfg)
{
	enum { COUNT, SIZE, DURATION };
	const struct {
		const char *def;
		int kind;
		uint64_t *to;
	} defs[] = {
		{ GW_LISTENER_DEF_MAX_CONNECTIONS, COUNT, &cfg->max_connections },
		{ GW_LISTENER_DEF_MAX_CONNECTIONS_PER_PEER, COUNT, &cfg->max_connections_per_peer },
		{ GW_LISTENER_DEF_MAX_CONCURRENT_STREAMS, COUNT, &cfg->max_concurrent_streams },
		{ GW_LISTENER_DEF_MAX_HEADER_LIST_BYTES, SIZE, &cfg->max_header_list_bytes },
		{ GW_LISTENER_DEF_MAX_CONTINUATIONS, COUNT, &cfg->max_continuations },
		{ GW_LISTENER_DEF_MAX_PENDING_ACKS, COUNT, &cfg->max_pending_acks },
		{ GW_LISTENER_DEF_RESETS_BURST, COUNT, &cfg->stream_resets.burst },
		{ GW_LISTENER_DEF_RESETS_PER_SECOND, COUNT, &cfg->stream_resets.per_second },
		{ GW_LISTENER_DEF_MAX_REQUEST_BYTES, SIZE, &cfg->max_request_bytes },
		{ GW_LISTENER_DEF_MAX_INFLIGHT_BYTES, SIZE, &cfg->max_inflight_bytes },
		{ GW_LISTENER_DEF_HEADER_TIMEOUT, DURATION, &cfg->header_timeout_ns },
		{ GW_LISTENER_DEF_REQUEST_TIMEOUT, DURATION, &cfg->request_timeout_ns },
		{ GW_LISTENER_DEF_IDLE_TIMEOUT, DURATION, &cfg->idle_timeout_ns },
		{ GW_LISTENER_DEF_KEEPALIVE_INTERVAL, DURATION, &cfg->keepalive.interval_ns },
		{ GW_LISTENER_DEF_KEEPALIVE_TIMEOUT, DURATION, &cfg->keepalive.timeout_ns },
	};

	for (size_t i = 0; i < SR_ARRAY_SIZE(defs); i++) {
		char *end;
		int r = 0;
		if (defs[i].kind == SIZE)
			r = sr_parse_size(defs[i].def, defs[i].to);
		else if (defs[i].kind == DURATION)
			r = sr_parse_duration(defs[i].def, defs[i].to);
		else {
			*defs[i].to = strtoull(defs[i].def, &end, 10);
			r = *end ? -EINVAL : 0;
		}
		if (r < 0)
			return -EINVAL;
	}
	cfg->max_head_bytes = cfg->max_head_lines = 0; /* net/h1.c's own */
	return 0;
}

/* ---- TLS ---- */

static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen, const unsigned char *in,
		       unsigned int inlen, void *arg)
{
	struct gw_listener *rx = arg;
	/* HTTP/2 only (an agent that does not offer h2 cannot talk to us), unless HTTP/1.1 is served too. */
	int r = nghttp2_select_next_protocol((unsigned char **)out, outlen, in, inlen);
	if (r == 1 || (r == 0 && rx->ops->http1))
		return SSL_TLSEXT_ERR_OK;
	return rx->ops->http1 ? SSL_TLSEXT_ERR_NOACK : SSL_TLSEXT_ERR_ALERT_FATAL;
}

int gw_listener_tls_setup(struct gw_listener *rx)
{
	const struct gw_listener_tls_config *t = &rx->cfg->tls;
	char err[256] = "";
	const char *what;

	rx->ssl_ctx = SSL_CTX_new(TLS_server_method());
	if (!rx->ssl_ctx)
		return -ENOMEM;
	SSL_CTX_set_min_proto_version(rx->ssl_ctx, TLS1_2_VERSION);
	SSL_CTX_set_options(rx->ssl_ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
	/* A connection's record buffers (about 34 KiB) only while a record is in them: agents' connections idle. */
	SSL_CTX_set_mode(rx->ssl_ctx, SSL_MODE_RELEASE_BUFFERS);
	what = "cert_file";
	if (SSL_CTX_use_certificate_chain_file(rx->ssl_ctx, t->cert_file) != 1)
		goto fail;
	what = "key_file";
	if (SSL_CTX_use_PrivateKey_file(rx->ssl_ctx, t->key_file, SSL_FILETYPE_PEM) != 1 ||
	    SSL_CTX_check_private_key(rx->ssl_ctx) != 1)
		goto fail;
	if (t->client_ca_file) {
		what = "client_ca_file";
		if (SSL_CTX_load_verify_locations(rx->ssl_ctx, t->client_ca_file, NULL) != 1)
			goto fail;
		STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(t->client_ca_file);
		if (names)
			SSL_CTX_set_client_CA_list(rx->ssl_ctx, names);
		SSL_CTX_set_verify(rx->ssl_ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
	}
	SSL_CTX_set_alpn_select_cb(rx->ssl_ctx, alpn_select, rx);
	return 0;
fail:
	ERR_error_string_n(ERR_get_error(), err, sizeof(err));
	ERR_clear_error();
	sr_log_error(rx->ops->component, "cannot load TLS files", "id=%s key=tls.%s error=\"%s\"", rx->c->id, what,
		     err);
	return -EINVAL;
}

/* ---- bearer token ---- */

int gw_listener_token_load(struct gw_listener *rx, char *err, size_t errsize)
{
	const char *path = rx->cfg->auth.bearer_token_file;
	struct stat stt;
	char *buf = NULL;
	ssize_t n;
	int fd, e;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &stt) < 0) {
		e = -errno;
		snprintf(err, errsize, "cannot read bearer_token_file %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return e;
	}
	buf = malloc(MAX_TOKEN_BYTES + 1);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	n = read(fd, buf, MAX_TOKEN_BYTES + 1);
	e = -errno;
	close(fd);
	if (n < 0 || n > MAX_TOKEN_BYTES) {
		snprintf(err, errsize, "bearer_token_file %s: %s", path, n < 0 ? strerror(-e) : "longer than 16 KiB");
		free(buf);
		return n < 0 ? e : -EFBIG;
	}
	/* Trailing whitespace (a final newline) is not part of the token. */
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' ' || buf[n - 1] == '\t'))
		n--;
	buf[n] = '\0';
	if (n == 0) {
		snprintf(err, errsize, "bearer_token_file %s is empty", path);
		free(buf);
		return -EINVAL;
	}
	free(rx->token);
	rx->token = buf;
	rx->token_len = (size_t)n;
	rx->token_mtime = stt.st_mtim;
	return 0;
}

void gw_listener_token_recheck(struct gw_listener *rx)
{
	struct stat stt;
	char err[256];

	if (gw_net_now_ms(rx) - rx->token_checked_ms < TOKEN_RECHECK_MS)
		return;
	rx->token_checked_ms = gw_net_now_ms(rx);
	if (stat(rx->cfg->auth.bearer_token_file, &stt) < 0)
		return; /* keep the last good token */
	if (stt.st_mtim.tv_sec == rx->token_mtime.tv_sec && stt.st_mtim.tv_nsec == rx->token_mtime.tv_nsec)
		return;
	if (gw_listener_token_load(rx, err, sizeof(err)) < 0)
		sr_log_warn(rx->ops->component, "cannot re-read the bearer token; keeping the previous one",
			    "id=%s error=\"%s\"", rx->c->id, err);
}

bool gw_listener_token_ok(struct gw_listener *rx, const uint8_t *value, size_t len)
{
	static const char prefix[] = "Bearer ";
	if (len < sizeof(prefix) - 1 || strncasecmp((const char *)value, prefix, sizeof(prefix) - 1) != 0)
		return false;
	value += sizeof(prefix) - 1;
	len -= sizeof(prefix) - 1;
	return len == rx->token_len && CRYPTO_memcmp(value, rx->token, len) == 0;
}

/* ---- listening ---- */

/* The listener and the tick of rx (TLS and token already loaded). */
int gw_listener_listen(struct gw_listener *rx)
{
	const struct gw_listener_config *cfg = rx->cfg;
	const char *comp = rx->ops->component;
	struct sockaddr_storage ss;
	char err[256];
	int namelen = sizeof(ss);
	int r;

	if (nghttp2_session_callbacks_new(&rx->cbs) != 0 || nghttp2_option_new(&rx->h2opt) != 0)
		return -ENOMEM;
	gw_net_h2_callbacks(rx->cbs);
	nghttp2_option_set_stream_reset_rate_limit(rx->h2opt, cfg->stream_resets.burst, cfg->stream_resets.per_second);
	nghttp2_option_set_max_continuations(rx->h2opt, (size_t)cfg->max_continuations);
	nghttp2_option_set_max_outbound_ack(rx->h2opt, (size_t)cfg->max_pending_acks);
	/*
	 * nghttp2 keeps up to max_concurrent_streams closed streams a session
	 * for RFC 7540 priorities, which nothing here uses: 32 × 240 bytes on
	 * every connection, 15 MiB of a replica's heap with 2,000 agents.
	 */
	nghttp2_option_set_no_closed_streams(rx->h2opt, 1);
	r = sr_parse_endpoint(cfg->endpoint, &ss, err, sizeof(err));
	if (r < 0) {
		sr_log_error(comp, "bad endpoint", "id=%s error=\"%s\"", rx->c->id, err);
		return r;
	}
	uv_tcp_init(rx->loop, &rx->listener);
	rx->listener.data = rx;
	rx->handles++;
	rx->listening = true;
	if ((r = uv_tcp_bind(&rx->listener, (struct sockaddr *)&ss, 0)) < 0 ||
	    (r = uv_listen((uv_stream_t *)&rx->listener, 511, gw_net_on_connection)) < 0) {
		sr_log_error(comp, "cannot listen", "id=%s endpoint=%s error=\"%s\"", rx->c->id, cfg->endpoint,
			     uv_strerror(r));
		return r;
	}
	uv_tcp_getsockname(&rx->listener, (struct sockaddr *)&ss, &namelen);
	sr_sockaddr_format((struct sockaddr *)&ss, rx->address, sizeof(rx->address));

	uint64_t tick = 1000;
	if (cfg->header_timeout_ns)
		tick = SR_MIN(tick, cfg->header_timeout_ns / SR_NSEC_PER_MSEC / 4);
	if (cfg->keepalive.interval_ns)
		tick = SR_MIN(tick, cfg->keepalive.interval_ns / SR_NSEC_PER_MSEC / 4);
	if (cfg->keepalive.timeout_ns)
		tick = SR_MIN(tick, cfg->keepalive.timeout_ns / SR_NSEC_PER_MSEC / 4);
	tick = SR_MAX(tick, (uint64_t)20);
	uv_timer_init(rx->loop, &rx->tick);
	rx->tick.data = rx;
	rx->handles++;
	rx->tick_init = true;
	uv_timer_start(&rx->tick, gw_net_on_tick, tick, tick);
	/* (The tick is stopped when shutdown is done, so it does not keep the loop alive.) */
	return 0;
}

static void listener_closed(uv_handle_t *h)
{
	struct gw_listener *rx = h->data;
	rx->handles--;
	rx->listening = false;
	gw_listener_maybe_done(rx);
	gw_listener_maybe_free(rx);
}

void gw_listener_handle_closed(uv_handle_t *h)
{
	struct gw_listener *rx = h->data;
	rx->handles--;
	gw_listener_maybe_free(rx);
}

/* ---- shutdown and teardown ---- */

/* Stops listening and lets connections finish; rx->done is called when they have. */
void gw_listener_shutdown(struct gw_listener *rx)
{
	rx->shutting_down = true;
	rx->shutdown_started_ms = gw_net_now_ms(rx);
	if (rx->listening && !uv_is_closing((uv_handle_t *)&rx->listener))
		uv_close((uv_handle_t *)&rx->listener, listener_closed);
	/* Finish what was started, refuse new streams: GOAWAY with the last stream we saw. */
	for (struct conn *cn = rx->conns, *next; cn; cn = next) {
		next = cn->next;
		gw_net_conn_goaway(cn);
	}
	gw_listener_maybe_done(rx);
}

/* Closes everything of rx; it is freed when its last handle is closed. */
void gw_listener_destroy(struct gw_listener *rx)
{
	rx->destroyed = true;
	rx->done = NULL;
	while (rx->conns)
		gw_net_conn_close(rx->conns);
	if (rx->listening && !uv_is_closing((uv_handle_t *)&rx->listener))
		uv_close((uv_handle_t *)&rx->listener, listener_closed);
	if (rx->tick_init && !uv_is_closing((uv_handle_t *)&rx->tick))
		uv_close((uv_handle_t *)&rx->tick, gw_listener_handle_closed);
	gw_listener_maybe_free(rx);
}

void gw_listener_maybe_free(struct gw_listener *rx)
{
	if (!rx->destroyed || rx->handles > 0)
		return;
	if (rx->ops->release)
		rx->ops->release(rx);
	SSL_CTX_free(rx->ssl_ctx);
	nghttp2_session_callbacks_del(rx->cbs);
	nghttp2_option_del(rx->h2opt);
	free(rx->token);
	free(rx);
}

void gw_listener_maybe_done(struct gw_listener *rx)
{
	if (!rx->shutting_down || rx->n_conns > 0 || rx->listening || rx->jobs > 0 || !rx->done)
		return;
	void (*done)(struct gw_component * c) = rx->done;
	rx->done = NULL;
	if (rx->tick_init && !uv_is_closing((uv_handle_t *)&rx->tick))
		uv_timer_stop(&rx->tick);
	done(rx->c);
}
