// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "log.h"

enum sr_log_level sr_log_max_level = SR_LOG_INFO;

static void (*log_sink)(const char *line, void *userdata);
static void *log_sink_userdata;

static const char *const level_names[] = {
	[SR_LOG_ERROR] = "error", [SR_LOG_WARN] = "warn",   [SR_LOG_INFO] = "info",
	[SR_LOG_DEBUG] = "debug", [SR_LOG_TRACE] = "trace",
};

int sr_log_level_from_string(const char *s, enum sr_log_level *ret_level)
{
	if (!s)
		return -EINVAL;
	for (size_t i = 0; i < SR_ARRAY_SIZE(level_names); i++) {
		if (strcasecmp(s, level_names[i]) == 0) {
			*ret_level = (enum sr_log_level)i;
			return 0;
		}
	}
	if (strcasecmp(s, "warning") == 0) {
		*ret_level = SR_LOG_WARN;
		return 0;
	}
	return -EINVAL;
}

const char *sr_log_level_to_string(enum sr_log_level level)
{
	if ((unsigned)level >= SR_ARRAY_SIZE(level_names))
		return "unknown";
	return level_names[level];
}

void sr_log_set_level(enum sr_log_level level)
{
	sr_log_max_level = level;
}

int sr_log_level_flag(const char *program, const char *value)
{
	enum sr_log_level lvl;

	if (sr_log_level_from_string(value, &lvl) < 0) {
		fprintf(stderr, "%s: --log-level: invalid level \"%s\": expected error, warn, info, debug or trace\n",
			program, value);
		return -EINVAL;
	}
	sr_log_set_level(lvl);
	return 0;
}

void sr_log_set_sink(void (*sink)(const char *line, void *userdata), void *userdata)
{
	log_sink = sink;
	log_sink_userdata = userdata;
}

const char *sr_log_quote(const char *s, char *buf, size_t size)
{
	bool needs_quotes = s[0] == '\0';
	size_t o = 0;

	if (size == 0)
		return buf;
	for (const char *p = s; *p; p++) {
		if (*p == ' ' || *p == '"' || *p == '=' || *p == '\\' || (unsigned char)*p < 0x20) {
			needs_quotes = true;
			break;
		}
	}
	if (!needs_quotes) {
		snprintf(buf, size, "%s", s);
		return buf;
	}
#define PUT(c)                                                                                                         \
	do {                                                                                                           \
		if (o + 1 < size)                                                                                      \
			buf[o++] = (c);                                                                                \
	} while (0)
	PUT('"');
	for (const char *p = s; *p; p++) {
		unsigned char c = (unsigned char)*p;
		if (c == '"' || c == '\\') {
			PUT('\\');
			PUT((char)c);
		} else if (c == '\n') {
			PUT('\\');
			PUT('n');
		} else if (c == '\t') {
			PUT('\\');
			PUT('t');
		} else if (c < 0x20) {
			PUT('?');
		} else {
			PUT((char)c);
		}
	}
	PUT('"');
#undef PUT
	buf[o] = '\0';
	return buf;
}

void sr_log_emitv(enum sr_log_level level, const char *component, const char *msg, const char *kvfmt, va_list ap)
{
	char line[4096], ts[40], qmsg[1024];
	struct timespec now;
	struct tm tm;
	int n;

	clock_gettime(CLOCK_REALTIME, &now);
	gmtime_r(&now.tv_sec, &tm);
	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
	n = snprintf(line, sizeof(line), "ts=%s.%03ldZ level=%s component=%s msg=%s", ts, now.tv_nsec / 1000000,
		     sr_log_level_to_string(level), component ? component : "main",
		     sr_log_quote(msg ? msg : "", qmsg, sizeof(qmsg)));
	if (n < 0)
		return;
	if (kvfmt && kvfmt[0] && (size_t)n < sizeof(line) - 2) {
		line[n++] = ' ';
		int m = vsnprintf(line + n, sizeof(line) - (size_t)n, kvfmt, ap);
		if (m > 0)
			n += m;
	}
	if ((size_t)n >= sizeof(line))
		n = sizeof(line) - 1;
	line[n] = '\0';
	if (log_sink) {
		log_sink(line, log_sink_userdata);
		return;
	}
	/* One write per line so lines from threads do not interleave. */
	fprintf(stderr, "%s\n", line);
}

void sr_log_emit(enum sr_log_level level, const char *component, const char *msg, const char *kvfmt, ...)
{
	va_list ap;

	va_start(ap, kvfmt);
	sr_log_emitv(level, component, msg, kvfmt, ap);
	va_end(ap);
}
