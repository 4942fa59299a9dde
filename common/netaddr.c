/* SPDX-License-Identifier: Apache-2.0 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/netaddr.h"

int sr_parse_endpoint(const char *s, struct sockaddr_storage *ret, char *errbuf, size_t errsize)
{
	char host[256];
	const char *port_s;
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV }, *res = NULL;
	char *end;
	unsigned long port;
	size_t hl;

	if (!s || !*s) {
		snprintf(errbuf, errsize, "empty address: want HOST:PORT");
		return -EINVAL;
	}
	if (s[0] == '[') {
		const char *close = strchr(s, ']');
		if (!close || close[1] != ':') {
			snprintf(errbuf, errsize, "\"%s\": want [IPV6]:PORT", s);
			return -EINVAL;
		}
		hl = (size_t)(close - s - 1);
		port_s = close + 2;
		if (hl >= sizeof(host))
			goto too_long;
		memcpy(host, s + 1, hl);
	} else {
		const char *colon = strrchr(s, ':');
		if (!colon) {
			snprintf(errbuf, errsize, "\"%s\": want HOST:PORT (the port is required)", s);
			return -EINVAL;
		}
		hl = (size_t)(colon - s);
		port_s = colon + 1;
		if (hl >= sizeof(host))
			goto too_long;
		memcpy(host, s, hl);
	}
	host[hl] = '\0';
	errno = 0;
	port = strtoul(port_s, &end, 10);
	if (!*port_s || *end || errno || port > 65535) {
		snprintf(errbuf, errsize, "\"%s\": port \"%s\" is not a number from 0 to 65535", s, port_s);
		return -EINVAL;
	}
	memset(ret, 0, sizeof(*ret));
	if (hl == 0 || strcmp(host, "0.0.0.0") == 0) {
		struct sockaddr_in *in = (struct sockaddr_in *)ret;
		in->sin_family = AF_INET;
		in->sin_port = htons((uint16_t)port);
		in->sin_addr.s_addr = htonl(INADDR_ANY);
		return 0;
	}
	{
		struct sockaddr_in *in = (struct sockaddr_in *)ret;
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ret;
		if (inet_pton(AF_INET, host, &in->sin_addr) == 1) {
			in->sin_family = AF_INET;
			in->sin_port = htons((uint16_t)port);
			return 0;
		}
		memset(ret, 0, sizeof(*ret));
		if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
			in6->sin6_family = AF_INET6;
			in6->sin6_port = htons((uint16_t)port);
			return 0;
		}
	}
	if (getaddrinfo(host, NULL, &hints, &res) != 0 || !res) {
		snprintf(errbuf, errsize, "\"%s\": cannot resolve host \"%s\"", s, host);
		return -EADDRNOTAVAIL;
	}
	memcpy(ret, res->ai_addr, res->ai_addrlen);
	if (ret->ss_family == AF_INET)
		((struct sockaddr_in *)ret)->sin_port = htons((uint16_t)port);
	else
		((struct sockaddr_in6 *)ret)->sin6_port = htons((uint16_t)port);
	freeaddrinfo(res);
	return 0;

too_long:
	snprintf(errbuf, errsize, "host name too long in \"%.64s...\"", s);
	return -EINVAL;
}

const char *sr_sockaddr_format(const struct sockaddr *sa, char *buf, size_t size)
{
	char a[INET6_ADDRSTRLEN] = "?";
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		inet_ntop(AF_INET, &in->sin_addr, a, sizeof(a));
		snprintf(buf, size, "%s:%u", a, ntohs(in->sin_port));
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
		inet_ntop(AF_INET6, &in6->sin6_addr, a, sizeof(a));
		snprintf(buf, size, "[%s]:%u", a, ntohs(in6->sin6_port));
	} else
		snprintf(buf, size, "?");
	return buf;
}
