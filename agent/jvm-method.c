// SPDX-License-Identifier: Apache-2.0
/*
 * HotSpot Method* names and lines (jvm-method.h).
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "jvm-method.h"
#include "common/utf8.h"

size_t agent_jvm_class_name(const uint8_t *sym, size_t len, char *out, size_t cap)
{
	size_t n;

	if (cap < 2) {
		if (cap)
			out[0] = '\0';
		return 0;
	}
	n = sr_utf8_copy(out, sym, len, cap - 1);
	out[n] = '\0';
	for (size_t i = 0; i < n; i++)
		if (out[i] == '/')
			out[i] = '.';
	return n;
}

/* HotSpot's UNSIGNED5 (CompressedReadStream::read_int): bytes below 192 end a number of up to five. */
static int read_u5(const uint8_t *p, size_t len, size_t *pos, uint32_t *ret)
{
	uint32_t sum = 0;

	for (unsigned i = 0; i < 5; i++) {
		uint32_t b;

		if (*pos >= len)
			return -EINVAL;
		b = p[(*pos)++];
		sum += b << (6 * i);
		if (b < 192 || i == 4) {
			*ret = sum;
			return 0;
		}
	}
	return -EINVAL;
}

static int read_signed(const uint8_t *p, size_t len, size_t *pos, int32_t *ret)
{
	uint32_t v;

	if (read_u5(p, len, pos, &v) < 0)
		return -EINVAL;
	/* Zig-zag: the low bit is the sign. */
	*ret = (int32_t)((v >> 1) ^ (0u - (v & 1)));
	return 0;
}

int32_t agent_jvm_line(const uint8_t *table, size_t len, uint32_t bci)
{
	uint32_t cur_bci = 0, best_bci = 0;
	int32_t line = 0, best = 0;
	size_t pos = 0;

	/* Each entry takes at least a byte: len bounds the loop. */
	while (pos < len) {
		uint8_t b = table[pos++];
		int32_t dbci, dline;

		if (b == 0)
			break;
		if (b == 0xff) {
			if (read_signed(table, len, &pos, &dbci) < 0 || read_signed(table, len, &pos, &dline) < 0)
				break;
		} else {
			dbci = b >> 3;
			dline = b & 7;
		}
		cur_bci += (uint32_t)dbci;
		line = (int32_t)((uint32_t)line + (uint32_t)dline);
		if (cur_bci == bci)
			return line > 0 ? line : 0;
		/* The table is in bci order in practice; the best entry below bci wins, as in Method::line_number_from_bci. */
		if (cur_bci < bci && cur_bci >= best_bci) {
			best_bci = cur_bci;
			best = line;
		}
	}
	return best > 0 ? best : 0;
}

static int read_ptr(const struct agent_jvm_reader *r, uint64_t addr, uint64_t *ret)
{
	if (!addr || addr + 8 < addr)
		return -EINVAL;
	return r->read(r->ctx, addr, ret, 8);
}

static uint16_t get_u16(const uint8_t *buf, uint16_t at)
{
	uint16_t v;

	memcpy(&v, buf + at, 2);
	return v;
}

/* A Symbol's text, cut at AGENT_JVM_MAX_SYMBOL bytes, into out (valid UTF-8 or class-name form). */
static int read_symbol(const struct agent_jvm_reader *r, const struct agent_jvm_layout *l, uint64_t sym, bool klass,
		       char *out, size_t cap)
{
	uint8_t head[64], body[AGENT_JVM_MAX_SYMBOL];
	uint16_t len;
	size_t n;
	int err;

	if (!sym || l->symbol_body > sizeof(head) || l->symbol_length + 2u > sizeof(head))
		return -EINVAL;
	err = r->read(r->ctx, sym, head, l->symbol_body);
	if (err < 0)
		return err;
	len = get_u16(head, l->symbol_length);
	n = len < sizeof(body) ? len : sizeof(body);
	if (n) {
		err = r->read(r->ctx, sym + l->symbol_body, body, n);
		if (err < 0)
			return err;
	}
	if (klass) {
		agent_jvm_class_name(body, n, out, cap);
	} else {
		size_t w = sr_utf8_copy(out, body, n, cap - 1);

		out[w] = '\0';
	}
	if (len > n)
		strcat(out, "...");
	return 0;
}

/* What a method's names are read from. */
struct method_head {
	uint64_t const_method;
	uint64_t constants;
	uint64_t holder;
	uint64_t name_symbol;
	uint16_t flags;
	uint16_t code_size;
	uint16_t file_index;
};

static int read_head(const struct agent_jvm_reader *r, const struct agent_jvm_layout *l, uint64_t method,
		     struct method_head *ret)
{
	uint8_t cm[256], cp[256];
	uint16_t name_index;
	int32_t cp_len;
	int err;

	memset(ret, 0, sizeof(*ret));
	if (l->constmethod_size > sizeof(cm) || l->constantpool_size > sizeof(cp) ||
	    l->constmethod_constants + 8u > l->constmethod_size || l->constmethod_flags + 2u > l->constmethod_size ||
	    l->constmethod_code_size + 2u > l->constmethod_size ||
	    l->constmethod_name_index + 2u > l->constmethod_size ||
	    l->constantpool_pool_holder + 8u > l->constantpool_size ||
	    l->constantpool_source_file_name_index + 2u > l->constantpool_size ||
	    l->constantpool_length + 4u > l->constantpool_size)
		return -EINVAL;
	err = read_ptr(r, method + l->method_constmethod, &ret->const_method);
	if (err == 0)
		err = ret->const_method ? r->read(r->ctx, ret->const_method, cm, l->constmethod_size) : -EINVAL;
	if (err < 0)
		return err;
	memcpy(&ret->constants, cm + l->constmethod_constants, 8);
	ret->flags = get_u16(cm, l->constmethod_flags);
	ret->code_size = get_u16(cm, l->constmethod_code_size);
	name_index = get_u16(cm, l->constmethod_name_index);
	if (!ret->constants)
		return -EINVAL;
	err = r->read(r->ctx, ret->constants, cp, l->constantpool_size);
	if (err < 0)
		return err;
	memcpy(&ret->holder, cp + l->constantpool_pool_holder, 8);
	memcpy(&cp_len, cp + l->constantpool_length, 4);
	ret->file_index = get_u16(cp, l->constantpool_source_file_name_index);
	/* Index 0 is never a valid constant pool entry. */
	if (!name_index || cp_len <= 0 || name_index >= cp_len || ret->file_index >= cp_len || !ret->holder)
		return -EINVAL;
	return read_ptr(r, ret->constants + l->constantpool_size + 8ull * name_index, &ret->name_symbol);
}

int agent_jvm_method_ids(const struct agent_jvm_reader *r, const struct agent_jvm_layout *l, uint64_t method,
			 uint64_t *ret_const_method, uint64_t *ret_holder, uint64_t *ret_name_symbol)
{
	struct method_head h;
	int err = read_head(r, l, method, &h);

	if (err < 0)
		return err;
	*ret_const_method = h.const_method;
	*ret_holder = h.holder;
	*ret_name_symbol = h.name_symbol;
	return 0;
}

int agent_jvm_method_read(const struct agent_jvm_reader *r, const struct agent_jvm_layout *l, uint64_t method,
			  struct agent_jvm_method *ret)
{
	uint64_t file_sym = 0, klass_name;
	struct method_head h;
	int err;

	memset(ret, 0, sizeof(*ret));
	err = read_head(r, l, method, &h);
	if (err == 0 && h.file_index)
		err = read_ptr(r, h.constants + l->constantpool_size + 8ull * h.file_index, &file_sym);
	if (err == 0)
		err = read_ptr(r, h.holder + l->klass_name, &klass_name);
	if (err == 0)
		err = read_symbol(r, l, h.name_symbol, false, ret->name, sizeof(ret->name) - 3);
	if (err == 0)
		err = read_symbol(r, l, klass_name, true, ret->klass, sizeof(ret->klass) - 3);
	if (err == 0 && file_sym)
		err = read_symbol(r, l, file_sym, false, ret->file, sizeof(ret->file) - 3);
	if (err < 0)
		return err;
	ret->const_method = h.const_method;
	ret->holder = h.holder;
	ret->name_symbol = h.name_symbol;
	ret->code_size = h.code_size;
	if (h.flags & l->constmethod_has_linenumber_table)
		ret->line_table = h.const_method + l->constmethod_size + h.code_size;
	return 0;
}

int32_t agent_jvm_method_line(const struct agent_jvm_reader *r, const struct agent_jvm_method *m, uint32_t bci)
{
	return agent_jvm_line_at(r, m->line_table, m->code_size, bci);
}

int32_t agent_jvm_line_at(const struct agent_jvm_reader *r, uint64_t line_table, uint16_t code_size, uint32_t bci)
{
	uint8_t table[AGENT_JVM_MAX_LINETABLE];
	size_t have = 0;

	if (!line_table || bci >= code_size)
		return 0;
	/* A page at a time: the table's end is not known before its 0 byte, and the next page may be unmapped. */
	while (have < sizeof(table)) {
		uint64_t at = line_table + have;
		size_t n = 4096 - (size_t)(at & 4095);

		if (n > sizeof(table) - have)
			n = sizeof(table) - have;
		if (r->read(r->ctx, at, table + have, n) < 0)
			break;
		have += n;
		if (memchr(table + have - n, 0, n))
			break;
	}
	return agent_jvm_line(table, have, bci);
}

int agent_jvm_scope_decode(const uint8_t *data, size_t len, uint32_t decode_offset, struct agent_jvm_scope *ret)
{
	size_t pos = decode_offset;
	uint32_t bci;

	if (decode_offset >= len)
		return -EINVAL;
	if (read_u5(data, len, &pos, &ret->sender) < 0 || read_u5(data, len, &pos, &ret->method_index) < 0 ||
	    read_u5(data, len, &pos, &bci) < 0 || bci > INT32_MAX)
		return -EINVAL;
	/* Stored as bci - InvocationEntryBci (-1). */
	ret->bci = (int32_t)(bci - 1);
	return 0;
}

/* Reads count PcDescs from at, a chunk at a time, and returns the first with a pc offset >= target. */
static int find_pcdesc(const struct agent_jvm_reader *r, const struct agent_jvm_layout *l, uint64_t at, size_t count,
		       int32_t target, uint32_t *ret_decode)
{
	uint8_t chunk[4096];
	size_t per = sizeof(chunk) / l->pcdesc_size;

	for (size_t done = 0; done < count;) {
		size_t n = count - done < per ? count - done : per;
		int err = r->read(r->ctx, at + done * l->pcdesc_size, chunk, n * l->pcdesc_size);

		if (err < 0)
			return err;
		for (size_t i = 0; i < n; i++) {
			int32_t pc_offset, decode;

			memcpy(&pc_offset, chunk + i * l->pcdesc_size + l->pcdesc_pc_offset, 4);
			memcpy(&decode, chunk + i * l->pcdesc_size + l->pcdesc_scope_decode_offset, 4);
			/* PcDescs are in pc order; the first one is a sentinel at offset -1. */
			if (pc_offset >= target) {
				if (decode < 0)
					return -EINVAL;
				*ret_decode = (uint32_t)decode;
				return 0;
			}
		}
		done += n;
	}
	return -ENOENT;
}

int agent_jvm_nmethod_frames(const struct agent_jvm_reader *r, const struct agent_jvm_layout *l, uint64_t nmethod,
			     uint64_t pc, struct agent_jvm_frame *ret, int max)
{
	uint64_t code_begin, scopes_data;
	int32_t metadata_off, pcs_off, deps_off;
	uint32_t decode = 0;
	uint64_t pcs, pcs_end, data_end;
	int n = 0, err;

	if (l->pcdesc_size < 8 || l->pcdesc_size > 64 || l->pcdesc_pc_offset + 4u > l->pcdesc_size ||
	    l->pcdesc_scope_decode_offset + 4u > l->pcdesc_size)
		return -EINVAL;
	err = r->read(r->ctx, nmethod + l->codeblob_code_begin, &code_begin, 8);
	if (err == 0)
		err = r->read(r->ctx, nmethod + l->nmethod_scopes_data, &scopes_data, 8);
	if (err == 0)
		err = r->read(r->ctx, nmethod + l->nmethod_metadata_offset, &metadata_off, 4);
	if (err == 0)
		err = r->read(r->ctx, nmethod + l->nmethod_scopes_pcs_offset, &pcs_off, 4);
	if (err == 0)
		err = r->read(r->ctx, nmethod + l->nmethod_dependencies_offset, &deps_off, 4);
	if (err < 0)
		return err;
	/* The nmethod's sections, in order: metadata, scopes data, PcDescs. */
	pcs = nmethod + (uint64_t)pcs_off;
	pcs_end = nmethod + (uint64_t)deps_off;
	data_end = pcs;
	if (metadata_off <= 0 || pcs_off <= metadata_off || deps_off < pcs_off || pc < code_begin ||
	    pc - code_begin > INT32_MAX || scopes_data < nmethod + (uint64_t)metadata_off || scopes_data > data_end ||
	    (pcs_end - pcs) / l->pcdesc_size > AGENT_JVM_MAX_PCDESCS)
		return -EINVAL;
	err = find_pcdesc(r, l, pcs, (size_t)((pcs_end - pcs) / l->pcdesc_size), (int32_t)(pc - code_begin), &decode);
	if (err < 0)
		return err;
	/* decode 0 is DebugInformationRecorder::serialized_null: no scope. */
	for (int depth = 0; decode && depth < AGENT_JVM_MAX_SCOPES && n < max; depth++) {
		uint8_t buf[16];
		struct agent_jvm_scope s;
		uint64_t at = scopes_data + decode, method;
		size_t len;

		if (at >= data_end || at < scopes_data)
			return -EINVAL;
		len = data_end - at < sizeof(buf) ? (size_t)(data_end - at) : sizeof(buf);
		err = r->read(r->ctx, at, buf, len);
		if (err < 0)
			return err;
		if (agent_jvm_scope_decode(buf, len, 0, &s) < 0 || !s.method_index)
			return -EINVAL;
		/* metadata_at(i) is the (i - 1)th Metadata* from metadata_begin, which ends where the scopes data starts. */
		if ((uint64_t)s.method_index > (scopes_data - nmethod - (uint64_t)metadata_off) / 8)
			return -EINVAL;
		err = r->read(r->ctx, nmethod + (uint64_t)metadata_off + 8ull * (s.method_index - 1), &method, 8);
		if (err < 0)
			return err;
		ret[n].method = method;
		ret[n].bci = s.bci;
		n++;
		/* A sender is encoded before the scope inlined into it. */
		if (s.sender >= decode)
			return s.sender ? -EINVAL : n;
		decode = s.sender;
	}
	return n;
}
