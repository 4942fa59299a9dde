/* SPDX-License-Identifier: Apache-2.0 */
/* Listen addresses of the servers of the agent and the gateway ("host:port"). */
#ifndef SR_NETADDR_H
#define SR_NETADDR_H

#include <stddef.h>
#include <sys/socket.h>

/*
 * Parses "HOST:PORT", "[V6]:PORT" or ":PORT" (all IPv4 interfaces). HOST is a
 * numeric address or a name resolved now (first result; "localhost" works).
 * PORT may be 0 (any free port; see sr_sockaddr_format on the bound socket).
 * Returns 0, -EINVAL (syntax; errbuf says what) or -EADDRNOTAVAIL (no such host).
 */
int sr_parse_endpoint(const char *s, struct sockaddr_storage *ret, char *errbuf, size_t errsize);
/* "127.0.0.1:7480" / "[::1]:7480" into buf; returns buf. */
const char *sr_sockaddr_format(const struct sockaddr *sa, char *buf, size_t size);

#endif
