// SPDX-License-Identifier: Apache-2.0
/*
 * What the agent reads of a JVM after its layout (agent/jvm-method.c,
 * agent/jvm-codecache.c) on any bytes: the input is the JVM's memory at
 * FUZZ_BASE with OpenJDK 17's layout; its first 8 bytes are the Method*
 * to name, the next 8 a pc to look up, and CodeCache::_heaps is the cell at
 * FUZZ_BASE + 16; an nmethod is at FUZZ_BASE + 0x2000 (the pc is looked
 * up in it too). The whole input is a line number table, scopes data and a
 * class name too. Nothing may be read outside the input, names stay terminated within
 * their buffers, lines are never negative.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/jvm-codecache.h"
#include "agent/jvm-method.h"

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

/* OpenJDK 17's values (as its tables give them on x86-64). */
static const struct agent_jvm_layout jdk17 = {
	.codecache_heaps_addr = FUZZ_BASE + 16,
	.growable_array_data = 8,
	.codeheap_memory = 8,
	.codeheap_segmap = 0x78,
	.codeheap_log2_segment_size = 0x100,
	.vspace_low = 0x10,
	.vspace_high = 0x18,
	.heapblock_size = 16,
	.heapblock_used = 8,
	.codeblob_name = 0x60,
	.codeblob_code_begin = 0x20,
	.nmethod_scopes_data = 0x78,
	.nmethod_metadata_offset = 0x104,
	.nmethod_scopes_pcs_offset = 0x10c,
	.nmethod_dependencies_offset = 0x110,
	.pcdesc_scope_decode_offset = 4,
	.pcdesc_size = 16,
	.method_constmethod = 8,
	.constmethod_constants = 8,
	.constmethod_flags = 0x1c,
	.constmethod_code_size = 0x20,
	.constmethod_name_index = 0x22,
	.constmethod_signature_index = 0x24,
	.constmethod_size = 48,
	.constmethod_has_linenumber_table = 1,
	.constantpool_pool_holder = 0x18,
	.constantpool_source_file_name_index = 0x36,
	.constantpool_length = 0x3c,
	.constantpool_size = 72,
	.klass_name = 0x18,
	.symbol_length = 4,
	.symbol_body = 6,
};

static void check_str(const char *s, size_t cap)
{
	if (!memchr(s, '\0', cap))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct image im = { data, size };
	struct agent_jvm_reader r = { image_read, &im };
	struct agent_jvm_heap heaps[AGENT_JVM_MAX_HEAPS];
	struct agent_jvm_frame frames[AGENT_JVM_MAX_SCOPES];
	struct agent_jvm_method m;
	struct agent_jvm_scope scope;
	uint64_t method, pc, blob;
	char name[32];
	int n;

	if (size < 16 || size > 1 << 20)
		return 0;
	if (agent_jvm_line(data, size, data[0]) < 0 || agent_jvm_line(data, size, UINT32_MAX) < 0)
		abort();
	if (agent_jvm_class_name(data, size, name, sizeof(name)) >= sizeof(name) || strlen(name) >= sizeof(name))
		abort();
	memcpy(&method, data, 8);
	memcpy(&pc, data + 8, 8);
	if (agent_jvm_scope_decode(data, size, data[1], &scope) == 0 && scope.bci < -1)
		abort();
	n = agent_jvm_nmethod_frames(&r, &jdk17, FUZZ_BASE + 0x2000, pc, frames, AGENT_JVM_MAX_SCOPES);
	if (n > AGENT_JVM_MAX_SCOPES)
		abort();
	if (agent_jvm_method_read(&r, &jdk17, method, &m) == 0) {
		check_str(m.klass, sizeof(m.klass));
		check_str(m.name, sizeof(m.name));
		check_str(m.file, sizeof(m.file));
		if (agent_jvm_method_line(&r, &m, data[0]) < 0)
			abort();
	}
	n = agent_jvm_heaps_read(&r, &jdk17, heaps, AGENT_JVM_MAX_HEAPS);
	if (n > AGENT_JVM_MAX_HEAPS)
		abort();
	for (int i = 0; i < n; i++)
		if (agent_jvm_blob_at(&r, &jdk17, &heaps[i], pc, &blob) == 0 && blob < heaps[i].low)
			abort();
	return 0;
}
