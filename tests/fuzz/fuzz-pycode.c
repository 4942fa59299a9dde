// SPDX-License-Identifier: Apache-2.0
/*
 * CPython decoders (agent/pycode.c) on any bytes: the first byte picks the
 * version and the line-table format, the next four the instruction offset;
 * the rest is a code object head, a str header, a bytes header and a line
 * table at once. Nothing may read outside the input, a line is never
 * negative, and UTF-8 output stays within its buffer and is terminated.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/pycode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct agent_py_layout *l;
	struct agent_py_code code;
	struct agent_py_str str;
	uint64_t bdata, bsize;
	uint32_t offset;
	char out[64];
	size_t n;

	if (size < 5 || size > 1 << 20)
		return 0;
	l = agent_py_layout(AGENT_PY_VERSION(3, 8 + data[0] % 5));
	memcpy(&offset, data + 1, 4);
	data += 5;
	size -= 5;
	if (!l)
		abort();
	(void)agent_py_code_parse(l, data, size, &code);
	if (agent_py_str_header(l, 0x1000, data, size, &str) == 0) {
		if (str.kind != 1 && str.kind != 2 && str.kind != 4)
			abort();
		n = size / str.kind;
		if (agent_py_str_utf8(data, n, str.kind, out, sizeof(out)) >= sizeof(out) || strlen(out) >= sizeof(out))
			abort();
	}
	(void)agent_py_bytes_header(0x2000, data, size, &bdata, &bsize);
	for (uint8_t kind = AGENT_PY_LNOTAB; kind <= AGENT_PY_LOCATIONS; kind++) {
		if (agent_py_line(kind, 1, data, size, offset) < 0 ||
		    agent_py_line(kind, 1, data, size, offset & 0xff) < 0)
			abort();
	}
	return 0;
}
