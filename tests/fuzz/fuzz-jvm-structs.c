// SPDX-License-Identifier: Apache-2.0
/*
 * HotSpot's vmStructs decoder (agent/jvm-structs.c) on any bytes: the input
 * is a JVM's memory at FUZZ_BASE, and the table symbols are its first
 * AGENT_JVM_N_SYMS 8-byte cells (each holding a table pointer, an entry
 * offset or a stride, as in libjvm.so). Nothing may be read outside the
 * input, tables stay within their bounds, and a layout, when one comes out,
 * has the frame slots the decoder promises.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/jvm-structs.h"

#define FUZZ_BASE 0x100000ULL

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct image {
	const uint8_t *data;
	size_t size;
};

static int image_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	const struct image *im = ctx;

	if (addr < FUZZ_BASE || addr - FUZZ_BASE > im->size || len > im->size - (addr - FUZZ_BASE))
		return -EFAULT;
	memcpy(buf, im->data + (addr - FUZZ_BASE), len);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct image im = { data, size };
	struct agent_jvm_reader r = { image_read, &im };
	uint64_t syms[AGENT_JVM_N_SYMS];
	struct agent_jvm_tables *t;
	struct agent_jvm_layout l;
	const char *missing;
	size_t counts[4];
	uint64_t v;

	if (size > 1 << 20)
		return 0;
	for (unsigned i = 0; i < AGENT_JVM_N_SYMS; i++)
		syms[i] = FUZZ_BASE + i * 8;
	t = agent_jvm_tables_read(&r, syms);
	if (!t) {
		if (errno != EAGAIN && errno != EINVAL && errno != EFAULT && errno != ENOMEM)
			abort();
		return 0;
	}
	agent_jvm_tables__counts(t, counts);
	for (int i = 0; i < 4; i++)
		if (counts[i] > AGENT_JVM_MAX_ENTRIES)
			abort();
	(void)agent_jvm_tables__field(t, "CodeBlob", "_name", &v);
	(void)agent_jvm_tables__size(t, "HeapBlock", &v);
	if (agent_jvm_layout_from(t, &l, &missing) == 0) {
		if (l.interp_frame_method != -3 || l.interp_frame_bcp != -8 || !l.heapblock_size)
			abort();
	} else if (!missing) {
		abort();
	}
	agent_jvm_tables_free(t);
	return 0;
}
