/* SPDX-License-Identifier: Apache-2.0 */
/*
 * JIT perf maps (/tmp/perf-PID.map, written by Node.js --perf-basic-prof, the
 * JVM's perf-map agents, .NET with DOTNET_PerfMapEnabled=1, ...): one line per
 * piece of generated code, `START SIZE NAME`, START and SIZE in hex (a 0x
 * prefix is accepted), NAME the rest of the line.
 *
 * The parser is a pure function over bytes, so unit tests and the fuzzer
 * (tests/fuzz/fuzz-perfmap.c) drive it without a process. It reads a file in
 * pieces: only complete lines are taken; the bytes of a line not ended yet are
 * left for the next call (*ret_consumed says how far it got). A line longer
 * than AGENT_PERF_MAP_MAX_LINE is skipped up to its end, which may be in a
 * later piece (state->skipping carries that over).
 */
#ifndef SR_AGENT_PERF_MAP_PARSE_H
#define SR_AGENT_PERF_MAP_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Longest line taken; names are cut at AGENT_FUNCTION_NAME_MAX later. */
#define AGENT_PERF_MAP_MAX_LINE 8192

struct agent_perf_map_line {
	uint64_t start, size; /* size > 0, start + size does not overflow */
	const char *name;     /* not NUL-terminated; no trailing '\r' */
	size_t name_len;      /* > 0 */
};

/* Carried from one piece of a file to the next. */
struct agent_perf_map_state {
	bool skipping;	    /* inside an over-long line */
	uint64_t line;	    /* lines seen so far (1-based number of the last one) */
	uint64_t bad;	    /* lines that are not START SIZE NAME, or too long */
	uint64_t first_bad; /* number of the first bad line, 0: none */
};

/* Called for each good line; a negative return stops parsing and is returned. */
typedef int (*agent_perf_map_fn)(void *userdata, const struct agent_perf_map_line *l);

/*
 * Parses the complete lines of buf[0..len). at_eof: the file ends here, so a
 * last line without '\n' is complete too. Returns the number of good lines or
 * fn's negative return; *ret_consumed is how many bytes were used up.
 */
int64_t agent_perf_map_parse(const char *buf, size_t len, bool at_eof, struct agent_perf_map_state *state,
			     agent_perf_map_fn fn, void *userdata, size_t *ret_consumed);

/* One line (no '\n'); 0 or -EINVAL. */
int agent_perf_map_parse_line(const char *line, size_t len, struct agent_perf_map_line *ret);

#endif
