// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <string.h>

#include "common/macro.h"
#include "perf-map-parse.h"

/* A hex number (optional 0x) at *p, at most 16 digits; advances *p. */
static int hex(const char **p, const char *end, uint64_t *ret)
{
	const char *s = *p;
	uint64_t v = 0;
	int n = 0, d;

	if (end - s > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
		s += 2;
	while (s < end && (d = sr_hex_value(*s)) >= 0) {
		if (++n > 16)
			return -EINVAL;
		v = v << 4 | (uint64_t)d;
		s++;
	}
	if (n == 0)
		return -EINVAL;
	*p = s;
	*ret = v;
	return 0;
}

static const char *skip_blanks(const char *s, const char *end)
{
	while (s < end && (*s == ' ' || *s == '\t'))
		s++;
	return s;
}

int agent_perf_map_parse_line(const char *line, size_t len, struct agent_perf_map_line *ret)
{
	const char *p = line, *end = line + len, *q;

	while (end > p && (end[-1] == '\r' || end[-1] == ' ' || end[-1] == '\t'))
		end--;
	p = skip_blanks(p, end);
	if (hex(&p, end, &ret->start) < 0 || p == end || (*p != ' ' && *p != '\t'))
		return -EINVAL;
	p = skip_blanks(p, end);
	if (hex(&p, end, &ret->size) < 0 || p == end || (*p != ' ' && *p != '\t'))
		return -EINVAL;
	q = skip_blanks(p, end);
	if (q == end || ret->size == 0 || ret->start + ret->size < ret->start)
		return -EINVAL;
	ret->name = q;
	ret->name_len = (size_t)(end - q);
	return 0;
}

int64_t agent_perf_map_parse(const char *buf, size_t len, bool at_eof, struct agent_perf_map_state *state,
			     agent_perf_map_fn fn, void *userdata, size_t *ret_consumed)
{
	size_t pos = 0;
	int64_t good = 0;

	*ret_consumed = 0;
	while (pos < len) {
		const char *nl = memchr(buf + pos, '\n', len - pos);
		size_t line_len = nl ? (size_t)(nl - (buf + pos)) : len - pos;
		struct agent_perf_map_line l;

		if (!nl && !at_eof) {
			/* Not ended yet: wait for more, unless it is already too long to take. */
			if (line_len > AGENT_PERF_MAP_MAX_LINE) {
				if (!state->skipping) {
					state->line++;
					state->bad++;
					if (!state->first_bad)
						state->first_bad = state->line;
				}
				state->skipping = true;
				pos = len;
			}
			break;
		}
		if (state->skipping) {
			/* The end of an over-long line counted already. */
			state->skipping = false;
		} else {
			state->line++;
			if (line_len <= AGENT_PERF_MAP_MAX_LINE &&
			    agent_perf_map_parse_line(buf + pos, line_len, &l) == 0) {
				int r = fn(userdata, &l);

				if (r < 0) {
					*ret_consumed = pos;
					return r;
				}
				good++;
			} else if (line_len > 0) {
				state->bad++;
				if (!state->first_bad)
					state->first_bad = state->line;
			}
		}
		pos += line_len + (nl ? 1 : 0);
	}
	*ret_consumed = pos;
	return good;
}
