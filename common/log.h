/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Logging: one logfmt line per event on stderr,
 *   ts=2026-11-21T07:41:36.123Z level=info component=gateway msg="listening" address=0.0.0.0:7480
 * The level is checked before anything is formatted. Library code returns
 * errors; only main() and pipeline-stage boundaries log (docs/style.md 8).
 */
#ifndef SR_LOG_H
#define SR_LOG_H

#include <stdarg.h>
#include <stdbool.h>

#include "common/macro.h"

enum sr_log_level {
	SR_LOG_ERROR = 0,
	SR_LOG_WARN = 1,
	SR_LOG_INFO = 2,
	SR_LOG_DEBUG = 3,
	SR_LOG_TRACE = 4,
};

extern enum sr_log_level sr_log_max_level;

/* Parses "error", "warn" (or "warning"), "info", "debug", "trace". */
int sr_log_level_from_string(const char *s, enum sr_log_level *ret_level);
const char *sr_log_level_to_string(enum sr_log_level level);
void sr_log_set_level(enum sr_log_level level);
/*
 * --log-level for a program's command line: sets the level, or prints
 * "PROGRAM: --log-level: invalid level ..." to stderr and returns -EINVAL.
 */
int sr_log_level_flag(const char *program, const char *value);
/* Where lines go; default stderr. For tests. */
void sr_log_set_sink(void (*sink)(const char *line, void *userdata), void *userdata);

/*
 * msg is a fixed human sentence (quoted and escaped on output); kvfmt, if not
 * NULL, is a printf format of extra `key=value` pairs appended as they are.
 * Use sr_log_quote() for values that may contain spaces or quotes.
 */
void sr_log_emit(enum sr_log_level level, const char *component, const char *msg, const char *kvfmt, ...)
	SR_PRINTF(4, 5);
void sr_log_emitv(enum sr_log_level level, const char *component, const char *msg, const char *kvfmt, va_list ap);

/* Writes s as a logfmt value (quoted when needed) into buf; returns buf. */
const char *sr_log_quote(const char *s, char *buf, size_t size);

#define sr_log(level, component, msg, ...)                                                                             \
	do {                                                                                                           \
		if ((level) <= sr_log_max_level)                                                                       \
			sr_log_emit((level), (component), (msg), __VA_ARGS__);                                         \
	} while (0)

#define sr_log_error(component, msg, ...) sr_log(SR_LOG_ERROR, component, msg, __VA_ARGS__)
#define sr_log_warn(component, msg, ...)  sr_log(SR_LOG_WARN, component, msg, __VA_ARGS__)
#define sr_log_info(component, msg, ...)  sr_log(SR_LOG_INFO, component, msg, __VA_ARGS__)
#define sr_log_debug(component, msg, ...) sr_log(SR_LOG_DEBUG, component, msg, __VA_ARGS__)
#define sr_log_trace(component, msg, ...) sr_log(SR_LOG_TRACE, component, msg, __VA_ARGS__)

#endif
