// SPDX-License-Identifier: Apache-2.0
/*
 * Untrusted symbol tables: the first byte picks the decoder, the rest is its
 * input.
 *   0: a serialized table as read back from cache_dir (gw_symtab_deserialize)
 *   1: a kallsyms snapshot (gw_kallsyms_parse)
 *   2: an agent upload (gw_symbolizer__add_upload), records of
 *      {u64 address, u32 size, u8 name length, name}
 * Every table that loads is then looked up at addresses taken from the input.
 * The unit test of the same path is tests/unit/test-sym-uploaded-tables.c.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/model.h"
#include "symbolize.h"
#include "symtab.h"

/* Inputs larger than this are not interesting and slow the fuzzer down. */
#define FUZZ_MAX_INPUT (1u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void probe(const struct gw_symtab *t, const uint8_t *data, size_t size)
{
	struct gw_symtab_hit hit;

	for (size_t i = 0; i + 8 <= size && i < 512; i += 8) {
		uint64_t a;
		memcpy(&a, data + i, 8);
		if (gw_symtab__lookup(t, a, &hit) == 0 && (!hit.name || !hit.sysname))
			abort();
	}
}

static void upload(const uint8_t *data, size_t size)
{
	static struct gw_symbolizer *s;
	struct gw_symbol *v = calloc(size / 13 + 1, sizeof(*v));
	char *names = malloc(size + 1), *np = names;
	size_t n = 0, off = 0;
	static const uint8_t id[4] = { 1, 2, 3, 4 };

	if (!v || !names)
		goto out;
	if (!s)
		s = gw_symbolizer_new(&(struct gw_symbolizer_config){
			.demangle = GW_DEMANGLE_FULL, .max_upload_bytes = 1u << 20, .memory_cache_bytes = 8u << 20 });
	if (!s)
		goto out;
	while (off + 13 <= size) {
		uint64_t a;
		uint32_t sz;
		uint8_t nl = data[off + 12];
		memcpy(&a, data + off, 8);
		memcpy(&sz, data + off + 8, 4);
		off += 13;
		if (nl > size - off)
			nl = (uint8_t)(size - off);
		memcpy(np, data + off, nl);
		np[nl] = '\0';
		v[n++] = (struct gw_symbol){ .address = a, .size = sz, .name = np };
		np += nl + 1;
		off += nl;
	}
	if (gw_symbolizer__add_upload(s, id, sizeof(id), v, n, "") == 0) {
		struct gw_sym_handle *h = NULL;
		if (gw_symbolizer__acquire(s, id, sizeof(id), NULL, &h) == GW_SYM_READY) {
			struct gw_sym_result *r = malloc(sizeof(*r));
			for (size_t i = 0; r && i < n && i < 64; i++) {
				gw_sym_handle__resolve(h, v[i].address, r);
				gw_sym_handle__resolve(h, v[i].address + v[i].size / 2, r);
			}
			free(r);
			gw_sym_handle__release(h);
		}
	}
out:
	free(v);
	free(names);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gw_symtab_builder *b;
	struct gw_symtab *t;

	if (size < 1 || size > FUZZ_MAX_INPUT)
		return 0;
	switch (data[0] % 3) {
	case 0:
		t = gw_symtab_deserialize(data + 1, size - 1, (enum gw_demangle_mode)(data[0] / 3 % _GW_DEMANGLE_MAX));
		if (t) {
			probe(t, data + 1, size - 1);
			gw_symtab_free(t);
		}
		break;
	case 1:
		b = gw_symtab_builder_new();
		if (b && gw_kallsyms_parse((const char *)data + 1, size - 1, b, NULL) >= 0) {
			t = gw_symtab_builder__finish(b, GW_DEMANGLE_TEMPLATES, GW_SYMTAB_SRC_KALLSYMS);
			if (t) {
				probe(t, data + 1, size - 1);
				gw_symtab_free(t);
			}
		}
		gw_symtab_builder_free(b);
		break;
	default:
		upload(data + 1, size - 1);
		break;
	}
	return 0;
}
