/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the agent's two HTTP clients share, the gateway sender
 * (sender-http.c) and the OTLP export (otlp-export.c): the checks of an
 * endpoint's tls settings, tls.server_name as a connect-to mapping, and the
 * libcurl options of one kept connection with its TLS. Errors name the
 * config section they were given ("gateway", "otlp").
 */
#ifndef SR_AGENT_HTTP_CLIENT_H
#define SR_AGENT_HTTP_CLIENT_H

#include <stdbool.h>
#include <stddef.h>

#include <curl/curl.h>

#include "agent/config.h"

/*
 * tls set on an http:// endpoint, cert_file without key_file (or the
 * reverse), and files that cannot be read are refused: -EINVAL or the
 * access() errno, with err naming the key.
 */
int agent_http_check_tls(const char *section, const char *endpoint, const struct agent_tls_config *tls, bool https,
			 char *err, size_t size);

/*
 * tls.server_name: u's host becomes server_name (verified, sent as SNI) and
 * *ret a connect-to entry that keeps the connection going to u's real host
 * and port. 0, -EINVAL (u is no URL, or server_name no host name: err
 * says), -ENOMEM.
 */
int agent_http_server_name(const char *section, CURLU *u, const char *server_name, struct curl_slist **ret, char *err,
			   size_t size);

/* One kept connection, TCP keepalive, only the endpoint's scheme, libcurl's trace at --log-level trace, TLS. */
void agent_http_set_connection(CURL *easy, const struct agent_tls_config *tls, bool https);

#endif
