// SPDX-License-Identifier: Apache-2.0
/*
 * JIT perf map parser: any bytes, fed whole and in pieces of sizes taken from
 * the input, must parse or be skipped; every entry it reports is well formed
 * and lies inside the input; pieces and the whole agree.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/perf-map-parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct sink {
	const char *buf;
	size_t len;
	uint64_t n;
	uint64_t sum; /* of starts and sizes, to compare runs */
};

static int on_line(void *userdata, const struct agent_perf_map_line *l)
{
	struct sink *s = userdata;

	if (l->size == 0 || l->start + l->size < l->start || l->name_len == 0 || l->name_len > AGENT_PERF_MAP_MAX_LINE)
		abort();
	if (l->name < s->buf || l->name + l->name_len > s->buf + s->len)
		abort();
	if (memchr(l->name, '\n', l->name_len))
		abort();
	s->n++;
	s->sum += l->start ^ l->size ^ l->name_len;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct agent_perf_map_state whole = { 0 }, parts = { 0 };
	struct sink a = { (const char *)data, size, 0, 0 }, b = { 0 };
	size_t used = 0, pos = 0, piece;
	char *buf;

	if (size > 1 << 20)
		return 0;
	if (agent_perf_map_parse((const char *)data, size, true, &whole, on_line, &a, &used) < 0 || used != size)
		abort();
	/* The same bytes in pieces, as a file read while it grows: the consumer keeps what was not used. */
	buf = malloc(size + 1);
	if (!buf)
		return 0;
	piece = size ? 1 + data[0] % 97 : 1;
	{
		size_t have = 0;

		while (pos < size || have) {
			size_t take = pos < size ? (piece < size - pos ? piece : size - pos) : 0;
			bool eof = pos + take == size;
			int64_t k;

			memcpy(buf + have, data + pos, take);
			pos += take;
			have += take;
			b.buf = buf;
			b.len = have;
			k = agent_perf_map_parse(buf, have, eof, &parts, on_line, &b, &used);
			if (k < 0 || used > have)
				abort();
			memmove(buf, buf + used, have - used);
			have -= used;
			if (eof && have)
				abort(); /* at the end everything is consumed */
			if (eof)
				break;
		}
	}
	/* Lines longer than the limit are cut differently when they straddle pieces; short inputs agree. */
	if (size < AGENT_PERF_MAP_MAX_LINE && (a.n != b.n || a.sum != b.sum || whole.bad != parts.bad))
		abort();
	free(buf);
	return 0;
}
