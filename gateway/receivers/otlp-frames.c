// SPDX-License-Identifier: Apache-2.0
/*
 * The frames of an OTLP profiles request's dictionary (otlp-decode-private.h):
 * mappings, functions, locations and stacks, decoded lazily and once per
 * request, interned into the gateway-wide stores.
 *
 * Mapping to the model (docs/receivers.md):
 *   - a Mapping with process.executable.build_id.gnu (hex) becomes a
 *     gw_executable of that GNU build ID; with only
 *     process.executable.build_id.htlhash, one with that content hash;
 *   - a Location without lines on such a mapping (a native frame) becomes a
 *     plain USER location at its address (the OTel profiler sends ELF
 *     virtual addresses), which the symbolize processor names;
 *   - a Location with lines keeps them as they are (a preset location, see
 *     gw_stores__intern_location_lines); interpreter frames
 *     (profile.frame.type other than native, go, kernel) are kept as they
 *     came; frames without lines that nothing can name later (native
 *     without a build ID, kernel, interpreter) get one line saying what they
 *     are: "<file>+0x<address>", "[kernel]+0x<address>", "[cpython]+0x<address>";
 *   - a Stack becomes a gw_stack whose ID is a content hash of its
 *     locations (OTLP has no stack IDs), so equal stacks share one object.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "core/model.h"
#include "common/macro.h"
#include "otlp-decode-private.h"
#include "common/pbwire.h"

#include "opentelemetry/proto/profiles/v1development/profiles.pb.h"

#define P(m, f) opentelemetry_proto_profiles_v1development_##m##_##f##_tag

/* Stack IDs made here: a tag byte then a 128-bit content hash (agent IDs are 16 bytes: never equal). */
#define OTLP_STACK_ID_TAG 'o'
#define OTLP_STACK_ID_LEN 17

/* A hex build ID into bytes; false when it is not even-length hex of 1 to GW_ID_MAX bytes. */
static bool parse_hex_id(const char *s, uint8_t *out, size_t *ret_len)
{
	size_t n = strlen(s);

	if (n == 0 || n % 2 || n / 2 > GW_ID_MAX)
		return false;
	for (size_t i = 0; i < n; i += 2) {
		int hi = sr_hex_value(s[i]), lo = sr_hex_value(s[i + 1]);
		if (hi < 0 || lo < 0)
			return false;
		out[i / 2] = (uint8_t)(hi << 4 | lo);
	}
	*ret_len = n / 2;
	return true;
}

static int decode_mapping(struct otlp_dec *d, uint32_t i, const struct otlp_mapping **ret)
{
	struct otlp_mapping *m = &d->mappings[i];
	uint8_t gnu[GW_ID_MAX], htl[GW_ID_MAX];
	size_t gnu_len = 0, htl_len = 0;
	uint32_t n_attrs = 0;
	struct sr_pbr r;
	struct sr_pb_field f;
	char path[64];
	int e;

	*ret = m;
	if (m->done)
		return 0;
	m->filename = "";
	if (i == 0) {
		m->done = true;
		return 0;
	}
	snprintf(path, sizeof(path), "dictionary.mapping_table[%u]", i);
	r = otlp_entry_reader(d, OT_MAPPING, i);
	while ((e = sr_pbr__next(&r, &f)) == 0) {
		if (f.number == P(Mapping, filename_strindex)) {
			if (f.wt != SR_PB_VARINT)
				return otlp_fail(d, GW_OTLP_DECODE_INVALID, f.start,
						 "%s.filename_strindex: not a varint", path);
			if ((e = otlp_dict_string(d, f.value, path, f.start, &m->filename)) < 0)
				return e;
		} else if (f.number == P(Mapping, attribute_indices)) {
			struct sr_pbr el;
			uint64_t v;
			if (sr_pbr__elements(&r, &f, SR_PB_VARINT, &el) < 0)
				return otlp_fail(d, GW_OTLP_DECODE_INVALID, f.start, "%s.attribute_indices: malformed",
						 path);
			while (sr_pbr__more(&el)) {
				const struct otlp_attr *a;
				const uint8_t *at = el.p;
				if (sr_pbr__varint(&el, &v) < 0)
					return otlp_fail(d, GW_OTLP_DECODE_INVALID, at,
							 "%s.attribute_indices: malformed varint", path);
				if (++n_attrs > d->lim.max_attrs)
					return otlp_fail(d, GW_OTLP_DECODE_TOO_LARGE, at,
							 "%s: more than %u attributes (max_attrs)", path,
							 d->lim.max_attrs);
				if ((e = otlp_dict_attr(d, v, path, at, &a)) < 0)
					return e;
				if (!a->usable || a->a.type != GW_ATTR_STRING)
					continue;
				/* A build ID that is not hex is ignored: the mapping is then like one without. */
				if (a->role == OA_BUILD_ID_GNU && !parse_hex_id(a->a.v.s, gnu, &gnu_len))
					gnu_len = 0;
				else if (a->role == OA_BUILD_ID_HTLHASH && !parse_hex_id(a->a.v.s, htl, &htl_len))
					htl_len = 0;
			}
		} else if (f.number == P(Mapping, memory_start) || f.number == P(Mapping, memory_limit) ||
			   f.number == P(Mapping, file_offset)) {
			if (f.wt != SR_PB_VARINT)
				return otlp_fail(d, GW_OTLP_DECODE_INVALID, f.start, "%s: field %u is not a varint",
						 path, f.number);
		}
	}
	if (e < 0)
		return otlp_fail(d, GW_OTLP_DECODE_INVALID, r.p, "%s: malformed field", path);
	if (gnu_len || htl_len) {
		const char *base = strrchr(m->filename, '/');
		struct gw_executable_def def = {
			.id = gnu_len ? gnu : htl,
			.id_len = gnu_len ? gnu_len : htl_len,
			.id_kind = gnu_len ? GW_EXE_ID_GNU_BUILD_ID : GW_EXE_ID_CONTENT_HASH,
			.file_name = base ? base + 1 : m->filename,
			.path = m->filename,
			.gnu_build_id = gnu_len ? gnu : NULL,
			.gnu_build_id_len = gnu_len,
		};
		m->exe = gw_stores__intern_executable(d->stores, &def);
		if (!m->exe)
			return otlp_nomem(d, path);
	}
	m->done = true;
	return 0;
}

static int decode_function(struct otlp_dec *d, uint64_t i, const char *what, const uint8_t *at,
			   const struct otlp_function **ret)
{
	struct otlp_function *fn;
	struct sr_pbr r;
	struct sr_pb_field f;
	char path[64];
	int e;

	if ((e = otlp_check_index(d, OT_FUNCTION, i, what, at)) < 0)
		return e;
	fn = &d->functions[i];
	*ret = fn;
	if (fn->done)
		return 0;
	fn->name = fn->system_name = fn->file = "";
	fn->done = true;
	if (i == 0)
		return 0;
	snprintf(path, sizeof(path), "dictionary.function_table[%" PRIu64 "]", i);
	r = otlp_entry_reader(d, OT_FUNCTION, (uint32_t)i);
	while ((e = sr_pbr__next(&r, &f)) == 0) {
		const char **dst = f.number == P(Function, name_strindex)	   ? &fn->name
				   : f.number == P(Function, system_name_strindex) ? &fn->system_name
				   : f.number == P(Function, filename_strindex)	   ? &fn->file
										   : NULL;
		if (!dst && f.number != P(Function, start_line))
			continue;
		if (f.wt != SR_PB_VARINT) {
			fn->done = false;
			return otlp_fail(d, GW_OTLP_DECODE_INVALID, f.start, "%s: field %u is not a varint", path,
					 f.number);
		}
		if (!dst) {
			fn->start_line = f.value > UINT32_MAX ? 0 : (uint32_t)f.value;
		} else if ((e = otlp_dict_string(d, f.value, path, f.start, dst)) < 0) {
			fn->done = false;
			return e;
		}
	}
	if (e < 0) {
		fn->done = false;
		return otlp_fail(d, GW_OTLP_DECODE_INVALID, r.p, "%s: malformed field", path);
	}
	return 0;
}

/* What a frame type makes of a location. */
enum frame_class { FC_NATIVE, FC_KERNEL, FC_INTERPRETED };

static enum frame_class frame_class_of(const char *type)
{
	if (!type || !*type || strcmp(type, "native") == 0 || strcmp(type, "go") == 0)
		return FC_NATIVE;
	if (strcmp(type, "kernel") == 0)
		return FC_KERNEL;
	return FC_INTERPRETED;
}

/* Chains s into h, with its terminator. */
static uint64_t hash_str(uint64_t h, const char *s)
{
	return XXH3_64bits_withSeed(s, strlen(s) + 1, h);
}

/*
 * Reads location i: its content hash, and (intern) the gw_location. Stacks
 * first ask only for hashes: a stack already in the store is found by its ID
 * without interning its locations.
 */
static int decode_location(struct otlp_dec *d, uint64_t i, const char *what, const uint8_t *at, bool intern,
			   const struct otlp_location **ret)
{
	const int saved_table = d->ctx_table;
	const uint64_t saved_index = d->ctx_index;
	struct gw_line lines[GW_OTLP_DEFAULT_MAX_LINES];
	struct gw_line *lv = lines;
	uint32_t n_lines = 0, n_attrs = 0;
	const struct otlp_mapping *m = NULL;
	const char *frame_type = NULL;
	uint64_t address = 0;
	struct otlp_location *loc;
	struct gw_location *l = NULL;
	struct sr_pbr r;
	struct sr_pb_field f;
	char fallback[160];
	uint64_t h[2];
	bool preset;
	struct gw_executable *exe;
	enum frame_class fc;
	int e;

	if ((e = otlp_check_index(d, OT_LOCATION, i, what, at)) < 0)
		return e;
	loc = &d->locations[i];
	*ret = loc;
	if (intern ? loc->l != NULL : loc->hashed)
		return 0;
	if (d->lim.max_lines > SR_ARRAY_SIZE(lines)) {
		lv = malloc(d->lim.max_lines * sizeof(*lv));
		if (!lv)
			return otlp_nomem(d, "a location");
	}
	d->ctx_table = OT_LOCATION;
	d->ctx_index = i;
	r = otlp_entry_reader(d, OT_LOCATION, (uint32_t)i);
	while ((e = sr_pbr__next(&r, &f)) == 0) {
		if (f.number == P(Location, mapping_index)) {
			if (f.wt != SR_PB_VARINT) {
				e = otlp_fail(d, GW_OTLP_DECODE_INVALID, f.start, "%s.mapping_index: not a varint",
					      otlp_what(d, NULL));
				goto out;
			}
			if ((e = otlp_check_index(d, OT_MAPPING, f.value, NULL, f.start)) < 0 ||
			    (e = decode_mapping(d, (uint32_t)f.value, &m)) < 0)
				goto out;
		} else if (f.number == P(Location, address)) {
			if (f.wt != SR_PB_VARINT) {
				e = otlp_fail(d, GW_OTLP_DECODE_INVALID, f.start, "%s.address: not a varint",
					      otlp_what(d, NULL));
				goto out;
			}
			address = f.value;
		} else if (f.number == P(Location, lines)) {
			struct sr_pbr lr;
			struct sr_pb_field g;
			const struct otlp_function *fn = NULL;
			int64_t line = 0, column = 0;

			if (f.wt != SR_PB_LEN) {
				e = otlp_fail(d, GW_OTLP_DECODE_INVALID, f.start, "%s.lines[%u]: not a message",
					      otlp_what(d, NULL), n_lines);
				goto out;
			}
			if (n_lines >= d->lim.max_lines) {
				e = otlp_fail(d, GW_OTLP_DECODE_TOO_LARGE, f.start,
					      "%s: more than %u lines (max_lines)", otlp_what(d, NULL),
					      d->lim.max_lines);
				goto out;
			}
			lr = sr_pbr__sub(&r, (struct sr_pb_slice){ f.data, f.len });
			while ((e = sr_pbr__next(&lr, &g)) == 0) {
				if (g.number != P(Line, function_index) && g.number != P(Line, line) &&
				    g.number != P(Line, column))
					continue;
				if (g.wt != SR_PB_VARINT) {
					e = otlp_fail(d, GW_OTLP_DECODE_INVALID, g.start,
						      "%s.lines[%u]: field %u is not a varint", otlp_what(d, NULL),
						      n_lines, g.number);
					goto out;
				}
				if (g.number == P(Line, function_index))
					e = decode_function(d, g.value, NULL, g.start, &fn);
				else if (g.number == P(Line, line))
					line = (int64_t)g.value;
				else
					column = (int64_t)g.value;
				if (e < 0)
					goto out;
			}
			if (e < 0) {
				e = otlp_fail(d, GW_OTLP_DECODE_INVALID, lr.p, "%s.lines[%u]: malformed field",
					      otlp_what(d, NULL), n_lines);
				goto out;
			}
			if (!fn && (e = decode_function(d, 0, NULL, f.start, &fn)) < 0)
				goto out;
			lv[n_lines++] = (struct gw_line){
				.function = fn->name,
				/* The model keeps "" when the linkage name is the display name. */
				.system_name = strcmp(fn->system_name, fn->name) == 0 ? "" : fn->system_name,
				.file = fn->file,
				.line = line < 0 || line > UINT32_MAX ? 0 : (uint32_t)line,
				.column = column < 0 || column > UINT32_MAX ? 0 : (uint32_t)column,
				.start_line = fn->start_line,
			};
		} else if (f.number == P(Location, attribute_indices)) {
			struct sr_pbr el;
			uint64_t v;
			if (sr_pbr__elements(&r, &f, SR_PB_VARINT, &el) < 0) {
				e = otlp_fail(d, GW_OTLP_DECODE_INVALID, f.start, "%s.attribute_indices: malformed",
					      otlp_what(d, NULL));
				goto out;
			}
			while (sr_pbr__more(&el)) {
				const struct otlp_attr *a;
				const uint8_t *vat = el.p;
				if (sr_pbr__varint(&el, &v) < 0) {
					e = otlp_fail(d, GW_OTLP_DECODE_INVALID, vat,
						      "%s.attribute_indices: malformed varint", otlp_what(d, NULL));
					goto out;
				}
				if (++n_attrs > d->lim.max_attrs) {
					e = otlp_fail(d, GW_OTLP_DECODE_TOO_LARGE, vat,
						      "%s: more than %u attributes (max_attrs)", otlp_what(d, NULL),
						      d->lim.max_attrs);
					goto out;
				}
				if ((e = otlp_dict_attr(d, v, NULL, vat, &a)) < 0)
					goto out;
				if (a->usable && a->role == OA_FRAME_TYPE && a->a.type == GW_ATTR_STRING)
					frame_type = a->a.v.s;
			}
		}
	}
	if (e < 0) {
		e = otlp_fail(d, GW_OTLP_DECODE_INVALID, r.p, "%s: malformed field", otlp_what(d, NULL));
		goto out;
	}
	e = 0;
	fc = frame_class_of(frame_type);
	/* A native frame on a mapping with a build ID is the symbolize processor's; anything else is preset. */
	exe = fc == FC_NATIVE && m ? m->exe : NULL;
	preset = !(exe && n_lines == 0);
	if (preset && n_lines == 0) {
		/*
		 * Nothing can name it later: a native frame without a build ID, a
		 * kernel frame without a name, an interpreter frame its sender could
		 * not name. A line saying what it is keeps it visible in every export
		 * (a location without lines would vanish from flame graphs).
		 */
		const char *base = m ? strrchr(m->filename, '/') : NULL;
		const char *file = base ? base + 1 : m ? m->filename : "";
		if (fc == FC_INTERPRETED)
			snprintf(fallback, sizeof(fallback), "[%.64s]+0x%" PRIx64, frame_type, address);
		else if (fc == FC_KERNEL)
			snprintf(fallback, sizeof(fallback), "[%.64s]+0x%" PRIx64, *file ? file : "kernel", address);
		else
			snprintf(fallback, sizeof(fallback), "%.128s+0x%" PRIx64, *file ? file : "[unknown]", address);
		lv[n_lines++] = (struct gw_line){ .function = fallback, .system_name = "", .file = "" };
	}
	if (!loc->hashed) {
		/* Kind, address, executable ID, and the lines when they are part of its identity; two seeds: 128 bits. */
		for (int k = 0; k < 2; k++) {
			const uint64_t head[3] = { exe ? GW_FRAME_USER : GW_FRAME_UNKNOWN, address, preset };
			h[k] = XXH3_64bits_withSeed(head, sizeof(head), 0x6f746c70u + (uint64_t)k);
			if (exe)
				h[k] = XXH3_64bits_withSeed(exe->id.bytes, exe->id.len, h[k]);
			for (uint32_t j = 0; preset && j < n_lines; j++) {
				const uint64_t nums[3] = { lv[j].line, lv[j].column, lv[j].start_line };
				h[k] = XXH3_64bits_withSeed(nums, sizeof(nums), h[k]);
				h[k] = hash_str(h[k], lv[j].function);
				h[k] = hash_str(h[k], lv[j].system_name ? lv[j].system_name : "");
				h[k] = hash_str(h[k], lv[j].file ? lv[j].file : "");
			}
			loc->hash[k] = h[k];
		}
		loc->hashed = true;
	}
	if (!intern)
		goto out;
	if (preset)
		l = gw_stores__intern_location_lines(d->stores, exe ? GW_FRAME_USER : GW_FRAME_UNKNOWN, address, exe,
						     NULL, lv, n_lines);
	else
		l = gw_stores__intern_location(d->stores, GW_FRAME_USER, address, exe, NULL);
	if (!l) {
		e = otlp_nomem(d, "a location");
		goto out;
	}
	loc->l = l;
out:
	d->ctx_table = saved_table;
	d->ctx_index = saved_index;
	if (lv != lines)
		free(lv);
	return e;
}

/* Calls fn on each location index of stack entry r (validated, bounded by max_stack_depth). */
static int stack_walk(struct otlp_dec *d, struct sr_pbr r, bool intern, struct gw_location **locs, uint64_t *hashes,
		      uint32_t *ret_n)
{
	struct sr_pb_field f;
	uint32_t n = 0;
	int e = 0;

	while (r.p && (e = sr_pbr__next(&r, &f)) == 0) {
		struct sr_pbr el;
		uint64_t v;
		if (f.number != P(Stack, location_indices))
			continue;
		if (sr_pbr__elements(&r, &f, SR_PB_VARINT, &el) < 0)
			return otlp_fail(d, GW_OTLP_DECODE_INVALID, f.start, "%s.location_indices: malformed",
					 otlp_what(d, NULL));
		while (sr_pbr__more(&el)) {
			const struct otlp_location *loc;
			const uint8_t *vat = el.p;
			if (sr_pbr__varint(&el, &v) < 0)
				return otlp_fail(d, GW_OTLP_DECODE_INVALID, vat,
						 "%s.location_indices: malformed varint", otlp_what(d, NULL));
			if (n >= d->lim.max_stack_depth)
				return otlp_fail(d, GW_OTLP_DECODE_TOO_LARGE, vat,
						 "%s: more than %u locations (max_stack_depth)", otlp_what(d, NULL),
						 d->lim.max_stack_depth);
			if ((e = decode_location(d, v, NULL, vat, intern, &loc)) < 0)
				return e;
			if (intern) {
				locs[n++] = gw_location__ref(loc->l);
			} else {
				hashes[2 * n] = loc->hash[0];
				hashes[2 * n + 1] = loc->hash[1];
				n++;
			}
		}
	}
	if (e < 0)
		return otlp_fail(d, GW_OTLP_DECODE_INVALID, r.p, "%s: malformed field", otlp_what(d, NULL));
	*ret_n = n;
	return 0;
}

int otlp_dict_stack(struct otlp_dec *d, uint64_t i, const char *what, const uint8_t *at, struct gw_stack **ret)
{
	const int saved_table = d->ctx_table;
	const uint64_t saved_index = d->ctx_index;
	struct gw_location **locs = NULL;
	uint64_t *hashes = NULL;
	uint32_t n = 0, n_locs = 0;
	uint8_t id[OTLP_STACK_ID_LEN];
	struct sr_pbr r = { 0 };
	int e = 0;

	if (i != 0 || d->n[OT_STACK]) {
		if ((e = otlp_check_index(d, OT_STACK, i, what, at)) < 0)
			return e;
		r = otlp_entry_reader(d, OT_STACK, (uint32_t)i);
	}
	if (d->stack_done[i]) {
		*ret = gw_stack__ref(d->stacks[i]);
		return 0;
	}
	d->ctx_table = OT_STACK;
	d->ctx_index = i;
	hashes = malloc(2 * sizeof(*hashes) * d->lim.max_stack_depth);
	if (!hashes) {
		e = otlp_nomem(d, "a stack");
		goto out;
	}
	/* The ID from the locations' content; a stack already stored needs nothing interned. */
	if ((e = stack_walk(d, r, false, NULL, hashes, &n)) < 0)
		goto out;
	XXH128_hash_t h = XXH3_128bits(hashes, n * 2 * sizeof(uint64_t));
	id[0] = OTLP_STACK_ID_TAG;
	memcpy(id + 1, &h.low64, 8);
	memcpy(id + 9, &h.high64, 8);
	d->stacks[i] = gw_stores__stack(d->stores, id, sizeof(id));
	if (!d->stacks[i]) {
		locs = malloc(sizeof(*locs) * (n ? n : 1));
		if (!locs) {
			e = otlp_nomem(d, "a stack");
			goto out;
		}
		if ((e = stack_walk(d, r, true, locs, NULL, &n_locs)) < 0)
			goto out;
		/* intern_stack takes the location references, also on failure. */
		d->stacks[i] = gw_stores__intern_stack(d->stores, id, sizeof(id), false, locs, n_locs);
		n_locs = 0;
		if (!d->stacks[i]) {
			e = otlp_nomem(d, "a stack");
			goto out;
		}
	}
	d->stack_done[i] = true;
	*ret = gw_stack__ref(d->stacks[i]);
	e = 0;
out:
	d->ctx_table = saved_table;
	d->ctx_index = saved_index;
	for (uint32_t k = 0; k < n_locs; k++)
		gw_location__unref(locs[k]);
	free(locs);
	free(hashes);
	return e;
}
