// SPDX-License-Identifier: Apache-2.0
/*
 * The V8 SharedFunctionInfo decoder (agent/v8.c) on any bytes: the input is
 * a process's memory at FUZZ_BASE, its first four bytes the offset of the
 * tagged SharedFunctionInfo pointer to name, the next four (when there are
 * eight) a bytecode offset whose line is looked up. The metadata is the
 * unit tests' (tests/unit/v8-test-meta.h: Node 20's, V8 11.3).
 * Nothing may be read outside the image, a cycle of cons strings or objects
 * must end, the names stay terminated and printable within their buffers,
 * and a line is positive or an error. The source position table's decoder
 * also runs on the whole input as a table, and the same pointer is taken
 * for an optimized Code (its frames at the offset) and a builtin's Code
 * (the instruction size's place learned from it).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/v8.h"
#include "../unit/v8-test-meta.h"

#define FUZZ_BASE 0x10000u

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct image {
	const uint8_t *p;
	size_t n;
};

static int read_image(void *ctx, uint64_t addr, void *buf, size_t len)
{
	const struct image *im = ctx;

	if (addr < FUZZ_BASE || addr - FUZZ_BASE > im->n || len > im->n - (addr - FUZZ_BASE))
		return -EFAULT;
	memcpy(buf, im->p + (addr - FUZZ_BASE), len);
	return 0;
}

static void check_text(const char *s, size_t cap)
{
	size_t n = strnlen(s, cap);

	if (n >= cap)
		abort();
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] >= 0x7f)
			abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct image im = { data, size };
	struct agent_v8_code_frame cf[AGENT_V8_MAX_INLINED];
	struct agent_v8_source_position sp;
	struct agent_v8_function f;
	uint32_t off, bc = 0, learned;
	int64_t pos;
	int line, n;

	if (size < 4 || size > 1 << 20)
		return 0;
	memcpy(&off, data, 4);
	if (size >= 8)
		memcpy(&bc, data + 4, 4);
	if (agent_v8_describe(&m, read_image, &im, (uint64_t)FUZZ_BASE + off, &f) == 0) {
		check_text(f.name, sizeof(f.name));
		check_text(f.script, sizeof(f.script));
	}
	line = agent_v8_line(&m, read_image, &im, (uint64_t)FUZZ_BASE + off, bc);
	if (line == 0)
		abort();
	if (agent_v8_position_at(data, size, bc, &pos) == 0 && pos < AGENT_V8_NO_POSITION)
		abort();
	if (agent_v8_source_position_at(data, size, bc, &sp) == 0 &&
	    (sp.script_offset < AGENT_V8_NO_POSITION || sp.inlining_id < -1 || sp.last_code_offset < -1))
		abort();
	/* The same pointer as an optimized Code, the offset as a pc offset. */
	n = agent_v8_code_frames(&m, read_image, &im, (uint64_t)FUZZ_BASE + off, bc, cf, AGENT_V8_MAX_INLINED);
	if (n == 0 || n > AGENT_V8_MAX_INLINED)
		abort();
	for (int i = 0; i < n; i++)
		if (cf[i].line < 0)
			abort();
	if (agent_v8_learn_code_size(&m, read_image, &im, (uint64_t)FUZZ_BASE + off, &learned) == 0 &&
	    learned < m.code_instruction_start + 8)
		abort();
	return 0;
}
