/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The definitions a PushRequest carries (agent-ingest-private.h):
 * executables, kernels with their modules, functions the agent named,
 * stacks with their frames, and
 * symbol-table uploads, decoded with the wire layer and interned into the
 * gateway-wide stores. Untrusted input, like all of the request: every count
 * is bounded, nothing recurses on input.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "stackrelay/v1/ingest.pb.h"
#include "stackrelay/v1/types.pb.h"

#include "agent-ingest-private.h"
#include "agent-ingest.h"
#include "common/grow.h"
#include "common/macro.h"
#include "model.h"
#include "common/pbwire.h"
#include "common/utf8.h"

int gw_ingest_parse_executable(struct gw_stores *stores, struct sr_pbr r, char *errbuf, size_t errsize)
{
	char fn[GW_AGENT_MAX_STRING_BYTES + 1], path[GW_AGENT_MAX_STRING_BYTES + 1], dl[GW_AGENT_MAX_STRING_BYTES + 1];
	struct gw_executable_def d = { 0 };
	struct sr_pb_slice t = { 0 };
	uint32_t f, wt;
	uint64_t v;
	int e = 0;

	while (r.p < r.end) {
		if ((e = sr_pbr__tag(&r, &f, &wt)) < 0)
			FAIL(&r, "ExecutableDef: bad field key");
		switch (f) {
		case stackrelay_v1_ExecutableDef_id_tag:
			if ((e = sr_pbr__field_bytes(&r, wt, &t)) < 0 || t.n == 0 || t.n > GW_ID_MAX)
				FAIL(&r, "ExecutableDef.id: empty, malformed or longer than %d bytes", GW_ID_MAX);
			d.id = t.p;
			d.id_len = t.n;
			break;
		case stackrelay_v1_ExecutableDef_id_kind_tag:
			if ((e = sr_pbr__field_varint(&r, wt, &v)) < 0)
				FAIL(&r, "ExecutableDef.id_kind: malformed");
			d.id_kind = v <= GW_EXE_ID_KERNEL ? (enum gw_exe_id_kind)v : GW_EXE_ID_UNSPECIFIED;
			break;
		case stackrelay_v1_ExecutableDef_file_name_tag:
			if ((e = sr_pbr__field_bytes(&r, wt, &t)) < 0)
				FAIL(&r, "ExecutableDef.file_name: malformed");
			d.file_name = gw_ingest_cstr(fn, t);
			break;
		case stackrelay_v1_ExecutableDef_path_tag:
			if ((e = sr_pbr__field_bytes(&r, wt, &t)) < 0)
				FAIL(&r, "ExecutableDef.path: malformed");
			d.path = gw_ingest_cstr(path, t);
			break;
		case stackrelay_v1_ExecutableDef_file_size_tag:
			if ((e = sr_pbr__field_varint(&r, wt, &d.file_size)) < 0)
				FAIL(&r, "ExecutableDef.file_size: malformed");
			break;
		case stackrelay_v1_ExecutableDef_gnu_build_id_tag:
			if ((e = sr_pbr__field_bytes(&r, wt, &t)) < 0 || t.n > GW_ID_MAX)
				FAIL(&r, "ExecutableDef.gnu_build_id: malformed or longer than %d bytes", GW_ID_MAX);
			d.gnu_build_id = t.p;
			d.gnu_build_id_len = t.n;
			break;
		case stackrelay_v1_ExecutableDef_debuglink_tag:
			if ((e = sr_pbr__field_bytes(&r, wt, &t)) < 0)
				FAIL(&r, "ExecutableDef.debuglink: malformed");
			d.debuglink = gw_ingest_cstr(dl, t);
			break;
		case stackrelay_v1_ExecutableDef_is_go_tag:
			if ((e = sr_pbr__field_varint(&r, wt, &v)) < 0)
				FAIL(&r, "ExecutableDef.is_go: malformed");
			d.is_go = v != 0;
			break;
		default:
			if ((e = sr_pbr__skip(&r, wt)) < 0)
				FAIL(&r, "ExecutableDef: malformed field %u", f);
		}
	}
	if (!d.id)
		FAIL(&r, "ExecutableDef without id");
	struct gw_executable *x = gw_stores__intern_executable(stores, &d);
	if (!x) {
		e = -errno;
		snprintf(errbuf, errsize, "cannot store executable: %s", strerror(errno));
		goto out;
	}
	atomic_fetch_or_explicit(&x->flags, GW_EXE_AGENT_DEFINED, memory_order_relaxed);
	gw_executable__unref(x);
out:
	return e;
}

int gw_ingest_parse_kernel(struct gw_stores *stores, struct sr_pbr r, char *errbuf, size_t errsize)
{
	char rel[GW_AGENT_MAX_STRING_BYTES + 1], boot[GW_AGENT_MAX_STRING_BYTES + 1],
		mod[GW_AGENT_MAX_STRING_BYTES + 1];
	struct gw_kernel_def d = { 0 };
	struct gw_kernel_module *mods = NULL;
	char *names = NULL;
	size_t n_mods = 0, names_len = 0;
	const struct sr_pbr start = r;
	struct sr_pb_slice t = { 0 };
	uint32_t f, wt;
	int e = 0;

	/* First pass: count modules and their name bytes, to allocate once. */
	while (r.p < r.end) {
		if ((e = sr_pbr__tag(&r, &f, &wt)) < 0)
			FAIL(&r, "KernelDef: bad field key");
		if (f == stackrelay_v1_KernelDef_modules_tag) {
			if ((e = sr_pbr__field_bytes(&r, wt, &t)) < 0)
				FAIL(&r, "KernelDef.modules: malformed");
			if (++n_mods > GW_AGENT_MAX_KERNEL_MODULES)
				FAIL(&r, "KernelDef: more than %d modules", GW_AGENT_MAX_KERNEL_MODULES);
			names_len += t.n + 1; /* every name in it fits: each costs >= 2 wire bytes */
		} else if ((e = sr_pbr__skip(&r, wt)) < 0)
			FAIL(&r, "KernelDef: malformed field %u", f);
	}
	mods = calloc(n_mods ? n_mods : 1, sizeof(*mods));
	names = malloc(names_len ? names_len : 1);
	if (!mods || !names) {
		e = -ENOMEM;
		goto out;
	}
	n_mods = 0;
	names_len = 0;
	r = start;
	while (r.p < r.end) {
		sr_pbr__tag(&r, &f, &wt); /* checked above */
		switch (f) {
		case stackrelay_v1_KernelDef_id_tag:
			if ((e = sr_pbr__field_bytes(&r, wt, &t)) < 0 || t.n == 0 || t.n > GW_ID_MAX)
				FAIL(&r, "KernelDef.id: empty, malformed or longer than %d bytes", GW_ID_MAX);
			d.id = t.p;
			d.id_len = t.n;
			break;
		case stackrelay_v1_KernelDef_release_tag:
			if ((e = sr_pbr__field_bytes(&r, wt, &t)) < 0)
				FAIL(&r, "KernelDef.release: malformed");
			d.release = gw_ingest_cstr(rel, t);
			break;
		case stackrelay_v1_KernelDef_boot_id_tag:
			if ((e = sr_pbr__field_bytes(&r, wt, &t)) < 0)
				FAIL(&r, "KernelDef.boot_id: malformed");
			d.boot_id = gw_ingest_cstr(boot, t);
			break;
		case stackrelay_v1_KernelDef_addressing_tag: {
			uint64_t v;
			if ((e = sr_pbr__field_varint(&r, wt, &v)) < 0)
				FAIL(&r, "KernelDef.addressing: malformed");
			if (v > GW_KERNEL_MODULE_OFFSET)
				FAIL(&r, "KernelDef.addressing: unknown value %" PRIu64, v);
			d.addressing = (enum gw_kernel_addressing)v;
			break;
		}
		case stackrelay_v1_KernelDef_module_tag:
			if ((e = sr_pbr__field_bytes(&r, wt, &t)) < 0)
				FAIL(&r, "KernelDef.module: malformed");
			d.module = gw_ingest_cstr(mod, t);
			break;
		case stackrelay_v1_KernelDef_build_id_tag:
			if ((e = sr_pbr__field_bytes(&r, wt, &t)) < 0 || t.n > GW_ID_MAX)
				FAIL(&r, "KernelDef.build_id: malformed or longer than %d bytes", GW_ID_MAX);
			d.build_id = t.p;
			d.build_id_len = t.n;
			break;
		case stackrelay_v1_KernelDef_modules_tag: {
			struct gw_kernel_module *m = &mods[n_mods++];
			struct sr_pbr mr;
			sr_pbr__field_bytes(&r, wt, &t);
			mr = sr_pbr__sub(&r, t);
			m->name = "";
			while (mr.p < mr.end) {
				struct sr_pb_slice u = { 0 };
				uint64_t v;
				if ((e = sr_pbr__tag(&mr, &f, &wt)) < 0)
					FAIL(&mr, "KernelModule: bad field key");
				switch (f) {
				case stackrelay_v1_KernelModule_name_tag:
					if ((e = sr_pbr__field_bytes(&mr, wt, &u)) < 0)
						FAIL(&mr, "KernelModule.name: malformed");
					/* Each module's name slot was counted in the first pass. */
					m->name = names + names_len;
					names_len +=
						sr_utf8_copy(names + names_len, u.p, u.n, GW_AGENT_MAX_STRING_BYTES) +
						1;
					break;
				case stackrelay_v1_KernelModule_start_tag:
					if ((e = sr_pbr__field_varint(&mr, wt, &m->start)) < 0)
						FAIL(&mr, "KernelModule.start: malformed");
					break;
				case stackrelay_v1_KernelModule_size_tag:
					if ((e = sr_pbr__field_varint(&mr, wt, &v)) < 0)
						FAIL(&mr, "KernelModule.size: malformed");
					m->size = v;
					break;
				case stackrelay_v1_KernelModule_build_id_tag:
					if ((e = sr_pbr__field_bytes(&mr, wt, &u)) < 0 || u.n > GW_ID_MAX)
						FAIL(&mr, "KernelModule.build_id: malformed");
					gw_id_set(&m->build_id, u.p, u.n);
					break;
				default:
					if ((e = sr_pbr__skip(&mr, wt)) < 0)
						FAIL(&mr, "KernelModule: malformed field %u", f);
				}
			}
			break;
		}
		default:
			sr_pbr__skip(&r, wt);
		}
	}
	if (!d.id)
		FAIL(&r, "KernelDef without id");
	d.modules = mods;
	d.n_modules = (uint32_t)n_mods;
	struct gw_kernel *k = gw_stores__intern_kernel(stores, &d);
	if (!k) {
		e = -errno;
		snprintf(errbuf, errsize, "cannot store kernel: %s", strerror(errno));
		goto out;
	}
	gw_kernel__unref(k);
out:
	free(mods);
	free(names);
	return e;
}

int gw_ingest_parse_function(struct gw_stores *stores, struct sr_pbr r, char *errbuf, size_t errsize)
{
	char rt[GW_AGENT_MAX_STRING_BYTES + 1], name[GW_AGENT_MAX_STRING_BYTES + 1],
		file[GW_AGENT_MAX_STRING_BYTES + 1];
	struct gw_function_def d = { 0 };
	struct sr_pb_slice t = { 0 };
	uint32_t f, wt;
	uint64_t v;
	int e = 0;

	while (r.p < r.end) {
		if ((e = sr_pbr__tag(&r, &f, &wt)) < 0)
			FAIL(&r, "FunctionDef: bad field key");
		switch (f) {
		case stackrelay_v1_FunctionDef_id_tag:
			if ((e = sr_pbr__field_bytes(&r, wt, &t)) < 0 || t.n == 0 || t.n > GW_ID_MAX)
				FAIL(&r, "FunctionDef.id: empty, malformed or longer than %d bytes", GW_ID_MAX);
			d.id = t.p;
			d.id_len = t.n;
			break;
		case stackrelay_v1_FunctionDef_runtime_tag:
			if ((e = sr_pbr__field_bytes(&r, wt, &t)) < 0)
				FAIL(&r, "FunctionDef.runtime: malformed");
			d.runtime = gw_ingest_cstr(rt, t);
			break;
		case stackrelay_v1_FunctionDef_name_tag:
			if ((e = sr_pbr__field_bytes(&r, wt, &t)) < 0)
				FAIL(&r, "FunctionDef.name: malformed");
			d.name = gw_ingest_cstr(name, t);
			break;
		case stackrelay_v1_FunctionDef_file_name_tag:
			if ((e = sr_pbr__field_bytes(&r, wt, &t)) < 0)
				FAIL(&r, "FunctionDef.file_name: malformed");
			d.file_name = gw_ingest_cstr(file, t);
			break;
		case stackrelay_v1_FunctionDef_start_line_tag:
			if ((e = sr_pbr__field_varint(&r, wt, &v)) < 0 || v > UINT32_MAX)
				FAIL(&r, "FunctionDef.start_line: malformed");
			d.start_line = (uint32_t)v;
			break;
		default:
			if ((e = sr_pbr__skip(&r, wt)) < 0)
				FAIL(&r, "FunctionDef: malformed field %u", f);
		}
	}
	if (!d.id)
		FAIL(&r, "FunctionDef without id");
	if (!d.name || !d.name[0])
		FAIL(&r, "FunctionDef without name");
	struct gw_function *fn = gw_stores__intern_function(stores, &d);
	if (!fn) {
		e = -errno;
		snprintf(errbuf, errsize, "cannot store function: %s", strerror(errno));
		goto out;
	}
	gw_function__unref(fn);
out:
	return e;
}

/*
 * The stack a StackDef names, when the stacks store already holds it (a new
 * reference), else NULL: only the definition's top-level fields are read
 * (frames skipped), for its ID, the last one given. Malformed input is left
 * to the full parse.
 */
static struct gw_stack *stored_stack(struct gw_stores *stores, struct sr_pbr r)
{
	struct sr_pb_slice id = { 0 };
	uint32_t f, wt;

	while (r.p < r.end) {
		if (sr_pbr__tag(&r, &f, &wt) < 0)
			return NULL;
		if (f == stackrelay_v1_StackDef_id_tag) {
			if (sr_pbr__field_bytes(&r, wt, &id) < 0)
				return NULL;
		} else if (sr_pbr__skip(&r, wt) < 0)
			return NULL;
	}
	return id.n && id.n <= GW_ID_MAX ? gw_stores__stack(stores, id.p, id.n) : NULL;
}

/*
 * A stack already stored is not built again: most definitions name stacks
 * the store holds (every agent defines its stacks again on each new
 * connection, and nodes running one binary share most of theirs), and
 * building one interns each frame's location, a locked lookup and cache
 * misses each, only for the store to keep the stack it has. Its frames are
 * still validated, and it is kept for the request's samples as a new one is.
 */
int gw_ingest_parse_stack(struct gw_ingest_defs *defs, struct sr_pbr r, char *errbuf, size_t errsize)
{
	struct gw_location *locs[GW_AGENT_MAX_FRAMES_PER_STACK];
	struct gw_executable *last_exe = NULL;
	struct gw_kernel *last_kernel = NULL;
	struct gw_function *last_fn = NULL;
	struct gw_stack *stored = stored_stack(defs->stores, r);
	struct sr_pb_slice id = { 0 };
	uint32_t n = 0, n_frames = 0, f, wt;
	bool truncated = false, missing = false;
	uint64_t v;
	int e = 0;

	while (r.p < r.end) {
		struct sr_pb_slice t = { 0 };
		if ((e = sr_pbr__tag(&r, &f, &wt)) < 0)
			FAIL(&r, "StackDef: bad field key");
		switch (f) {
		case stackrelay_v1_StackDef_id_tag:
			if ((e = sr_pbr__field_bytes(&r, wt, &id)) < 0 || id.n == 0 || id.n > GW_ID_MAX)
				FAIL(&r, "StackDef.id: empty, malformed or longer than %d bytes", GW_ID_MAX);
			break;
		case stackrelay_v1_StackDef_truncated_tag:
			if ((e = sr_pbr__field_varint(&r, wt, &v)) < 0)
				FAIL(&r, "StackDef.truncated: malformed");
			truncated = v != 0;
			break;
		case stackrelay_v1_StackDef_frames_tag: {
			struct sr_pb_slice exe_id = { 0 }, fn_id = { 0 };
			uint64_t address = 0, kind = 0, line = 0;
			if ((e = sr_pbr__field_bytes(&r, wt, &t)) < 0)
				FAIL(&r, "StackDef.frames: malformed");
			if (n_frames++ == GW_AGENT_MAX_FRAMES_PER_STACK)
				FAIL(&r, "StackDef: more than %d frames", GW_AGENT_MAX_FRAMES_PER_STACK);
			struct sr_pbr fr = sr_pbr__sub(&r, t);
			while (fr.p < fr.end) {
				if ((e = sr_pbr__tag(&fr, &f, &wt)) < 0)
					FAIL(&fr, "Frame: bad field key");
				if (f == stackrelay_v1_Frame_executable_id_tag) {
					if ((e = sr_pbr__field_bytes(&fr, wt, &exe_id)) < 0 || exe_id.n > GW_ID_MAX)
						FAIL(&fr, "Frame.executable_id: malformed or longer than %d bytes",
						     GW_ID_MAX);
				} else if (f == stackrelay_v1_Frame_address_tag) {
					if ((e = sr_pbr__field_varint(&fr, wt, &address)) < 0)
						FAIL(&fr, "Frame.address: malformed");
				} else if (f == stackrelay_v1_Frame_kind_tag) {
					if ((e = sr_pbr__field_varint(&fr, wt, &kind)) < 0)
						FAIL(&fr, "Frame.kind: malformed");
				} else if (f == stackrelay_v1_Frame_function_id_tag) {
					if ((e = sr_pbr__field_bytes(&fr, wt, &fn_id)) < 0 || fn_id.n > GW_ID_MAX)
						FAIL(&fr, "Frame.function_id: malformed or longer than %d bytes",
						     GW_ID_MAX);
				} else if (f == stackrelay_v1_Frame_line_tag) {
					if ((e = sr_pbr__field_varint(&fr, wt, &line)) < 0 || line > UINT32_MAX)
						FAIL(&fr, "Frame.line: malformed");
				} else if ((e = sr_pbr__skip(&fr, wt)) < 0)
					FAIL(&fr, "Frame: malformed field %u", f);
			}
			/* UNSPECIFIED: a frame with an executable is a user frame. */
			if (kind == stackrelay_v1_FrameKind_FRAME_KIND_UNSPECIFIED)
				kind = exe_id.n ? stackrelay_v1_FrameKind_FRAME_KIND_USER
						: stackrelay_v1_FrameKind_FRAME_KIND_UNKNOWN;
			if ((kind == stackrelay_v1_FrameKind_FRAME_KIND_USER ||
			     kind == stackrelay_v1_FrameKind_FRAME_KIND_KERNEL) &&
			    !exe_id.n)
				FAIL(&fr, "Frame: %s",
				     kind == stackrelay_v1_FrameKind_FRAME_KIND_USER
					     ? "user frame without executable_id"
					     : "kernel frame without executable_id (the kernel's ID)");
			if ((kind == stackrelay_v1_FrameKind_FRAME_KIND_INTERPRETED ||
			     kind == stackrelay_v1_FrameKind_FRAME_KIND_JIT) &&
			    !fn_id.n)
				FAIL(&fr, "Frame: %s frame without function_id",
				     kind == stackrelay_v1_FrameKind_FRAME_KIND_JIT ? "JIT" : "interpreted");
			if (kind > stackrelay_v1_FrameKind_FRAME_KIND_JIT)
				FAIL(&fr, "Frame.kind %llu is not a FrameKind", (unsigned long long)kind);
			if (missing || stored)
				break; /* keep validating, stop building */
			struct gw_location *l = NULL;
			if (kind == stackrelay_v1_FrameKind_FRAME_KIND_USER) {
				if (!last_exe || last_exe->id.len != exe_id.n ||
				    memcmp(last_exe->id.bytes, exe_id.p, exe_id.n) != 0) {
					gw_executable__unref(last_exe);
					last_exe = gw_stores__executable(defs->stores, exe_id.p, exe_id.n);
				}
				if (!last_exe) {
					if ((e = gw_idlist__add(&defs->missing_exes, exe_id.p, exe_id.n)) < 0)
						goto out;
					missing = true;
					break;
				}
				l = gw_stores__intern_location(defs->stores, GW_FRAME_USER, address, last_exe, NULL);
			} else if (kind == stackrelay_v1_FrameKind_FRAME_KIND_KERNEL) {
				if (!last_kernel || last_kernel->id.len != exe_id.n ||
				    memcmp(last_kernel->id.bytes, exe_id.p, exe_id.n) != 0) {
					gw_kernel__unref(last_kernel);
					last_kernel = gw_stores__kernel(defs->stores, exe_id.p, exe_id.n);
				}
				if (!last_kernel) {
					if ((e = gw_idlist__add(&defs->missing_kernels, exe_id.p, exe_id.n)) < 0)
						goto out;
					missing = true;
					break;
				}
				l = gw_stores__intern_location(defs->stores, GW_FRAME_KERNEL, address, NULL,
							       last_kernel);
			} else if (kind == stackrelay_v1_FrameKind_FRAME_KIND_UNKNOWN) {
				l = gw_stores__intern_location(defs->stores, GW_FRAME_UNKNOWN, address, NULL, NULL);
			} else { /* INTERPRETED, JIT: the only kinds left (checked above) */
				if (!last_fn || last_fn->id.len != fn_id.n ||
				    memcmp(last_fn->id.bytes, fn_id.p, fn_id.n) != 0) {
					gw_function__unref(last_fn);
					last_fn = gw_stores__function(defs->stores, fn_id.p, fn_id.n);
				}
				if (!last_fn) {
					if ((e = gw_idlist__add(&defs->missing_functions, fn_id.p, fn_id.n)) < 0)
						goto out;
					missing = true;
					break;
				}
				l = gw_stores__intern_function_location(defs->stores,
									kind == stackrelay_v1_FrameKind_FRAME_KIND_JIT
										? GW_FRAME_JIT
										: GW_FRAME_INTERPRETED,
									address, last_fn, (uint32_t)line);
			}
			if (!l) {
				e = -ENOMEM;
				goto out;
			}
			locs[n++] = l;
			break;
		}
		default:
			if ((e = sr_pbr__skip(&r, wt)) < 0)
				FAIL(&r, "StackDef: malformed field %u", f);
		}
	}
	if (!id.p)
		FAIL(&r, "StackDef without id");
	if (stored || !missing) {
		struct gw_stack *st = stored ? stored
					     : gw_stores__intern_stack(defs->stores, id.p, id.n, truncated, locs, n);
		stored = NULL;
		n = 0; /* taken */
		if (!st) {
			e = -ENOMEM;
			goto out;
		}
		if (defs->stacks) {
			bool found;
			struct gw_bytes_set_entry *se =
				gw_bytes_set__put(defs->stacks, XXH3_64bits(id.p, id.n), id.p, id.n, &found);

			if (!se) {
				gw_stack__unref(st);
				e = -ENOMEM;
				goto out;
			}
			if (!found) { /* the request keeps this reference (defined twice: the first one) */
				se->value = st;
				st = NULL;
			}
		}
		gw_stack__unref(st);
	}
	/* With a missing part the stack is not stored: a sample using it lists it missing too. */
out:
	for (uint32_t i = 0; i < n; i++)
		gw_location__unref(locs[i]);
	gw_stack__unref(stored);
	gw_executable__unref(last_exe);
	gw_kernel__unref(last_kernel);
	gw_function__unref(last_fn);
	return e;
}

static int symbol_cmp(const void *a, const void *b)
{
	const struct gw_symbol *x = a, *y = b;
	return x->address < y->address ? -1 : x->address > y->address;
}

int gw_ingest_parse_symbol_table(struct gw_ingest_defs *defs, struct sr_pbr r, char *errbuf, size_t errsize)
{
	const struct sr_pbr start = r;
	struct sr_pb_slice id = { 0 }, t = { 0 };
	size_t n_sym = 0, n_src = 0, n_err = 0, strbytes = 1;
	struct gw_symbol_table *tab = NULL;
	struct gw_executable *exe = NULL;
	struct gw_kernel *kernel = NULL;
	uint32_t f, wt;
	int e = 0;

	/* Pass 1: validate and size. */
	while (r.p < r.end) {
		if ((e = sr_pbr__tag(&r, &f, &wt)) < 0)
			FAIL(&r, "SymbolTable: bad field key");
		switch (f) {
		case stackrelay_v1_SymbolTable_executable_id_tag:
			if ((e = sr_pbr__field_bytes(&r, wt, &id)) < 0 || id.n == 0 || id.n > GW_ID_MAX)
				FAIL(&r, "SymbolTable.executable_id: empty, malformed or longer than %d bytes",
				     GW_ID_MAX);
			break;
		case stackrelay_v1_SymbolTable_symbols_tag: {
			if ((e = sr_pbr__field_bytes(&r, wt, &t)) < 0)
				FAIL(&r, "SymbolTable.symbols: malformed");
			struct sr_pbr sr = sr_pbr__sub(&r, t);
			while (sr.p < sr.end) {
				struct sr_pb_slice u = { 0 };
				uint64_t v;
				if ((e = sr_pbr__tag(&sr, &f, &wt)) < 0)
					FAIL(&sr, "Symbol: bad field key");
				if (f == stackrelay_v1_Symbol_name_tag) {
					if ((e = sr_pbr__field_bytes(&sr, wt, &u)) < 0)
						FAIL(&sr, "Symbol.name: malformed");
					strbytes += SR_MIN(u.n, (size_t)GW_AGENT_MAX_STRING_BYTES) + 1;
				} else if (f == stackrelay_v1_Symbol_address_tag ||
					   f == stackrelay_v1_Symbol_size_tag) {
					if ((e = sr_pbr__field_varint(&sr, wt, &v)) < 0)
						FAIL(&sr, "Symbol.address/size: malformed");
				} else if ((e = sr_pbr__skip(&sr, wt)) < 0)
					FAIL(&sr, "Symbol: malformed field %u", f);
			}
			if (++n_sym + defs->symbols > GW_AGENT_MAX_SYMBOLS_PER_REQUEST)
				FAIL(&sr, "SymbolTable: more than %u symbols in one request",
				     GW_AGENT_MAX_SYMBOLS_PER_REQUEST);
			break;
		}
		case stackrelay_v1_SymbolTable_sources_tag:
		case stackrelay_v1_SymbolTable_error_tag:
			if ((e = sr_pbr__field_bytes(&r, wt, &t)) < 0)
				FAIL(&r, "SymbolTable.sources/error: malformed");
			strbytes += SR_MIN(t.n, (size_t)GW_AGENT_MAX_STRING_BYTES) + 1;
			n_src += f == stackrelay_v1_SymbolTable_sources_tag;
			n_err += f == stackrelay_v1_SymbolTable_error_tag && t.n > 0;
			break;
		default:
			if ((e = sr_pbr__skip(&r, wt)) < 0)
				FAIL(&r, "SymbolTable: malformed field %u", f);
		}
	}
	if (!id.p)
		FAIL(&r, "SymbolTable without executable_id");
	/* An executable's table, or a kernel's kallsyms snapshot (SymbolTable.executable_id is then the kernel ID). */
	exe = gw_stores__executable(defs->stores, id.p, id.n);
	if (!exe)
		kernel = gw_stores__kernel(defs->stores, id.p, id.n);
	if (!exe && !kernel) {
		/* Evicted meanwhile: the symbolizer asks again when it needs it. */
		defs->res->tables_refused[GW_UPLOAD_UNKNOWN]++;
		goto out;
	}
	/*
	 * Only the answer to this replica's ask of this agent is taken: any other
	 * table would rename frames of executables other nodes run, and an error
	 * would mark them unavailable. Ignored and counted, never a bad request:
	 * the rest of the request (its samples) is taken as usual.
	 */
	if (!(exe ? gw_executable__answered(exe, defs->identity) : gw_kernel__answered(kernel, defs->identity))) {
		defs->res->tables_refused[n_sym || !n_err ? GW_UPLOAD_NOT_ASKED : GW_UPLOAD_ERROR_NOT_ASKED]++;
		goto out;
	}

	size_t bytes = sizeof(*tab) + n_sym * sizeof(struct gw_symbol) + n_src * sizeof(char *) + strbytes;
	tab = calloc(1, bytes);
	if (!tab) {
		e = -ENOMEM;
		goto out;
	}
	tab->bytes = bytes;
	tab->symbols = (struct gw_symbol *)(tab + 1);
	tab->sources = (const char **)(tab->symbols + n_sym);
	char *pos = (char *)(tab->sources + n_src);
	tab->error = "";

	/* Pass 2: fill (everything was validated). */
	r = start;
	while (r.p < r.end) {
		sr_pbr__tag(&r, &f, &wt);
		if (f == stackrelay_v1_SymbolTable_symbols_tag) {
			struct gw_symbol *sym = &tab->symbols[tab->n_symbols++];
			sr_pbr__bytes(&r, &t);
			struct sr_pbr sr = sr_pbr__sub(&r, t);
			sym->name = "";
			while (sr.p < sr.end) {
				struct sr_pb_slice u = { 0 };
				sr_pbr__tag(&sr, &f, &wt);
				if (f == stackrelay_v1_Symbol_name_tag) {
					sr_pbr__bytes(&sr, &u);
					sym->name = pos;
					pos += sr_utf8_copy(pos, u.p, u.n, GW_AGENT_MAX_STRING_BYTES) + 1;
				} else if (f == stackrelay_v1_Symbol_address_tag)
					sr_pbr__varint(&sr, &sym->address);
				else if (f == stackrelay_v1_Symbol_size_tag)
					sr_pbr__varint(&sr, &sym->size);
				else
					sr_pbr__skip(&sr, wt);
			}
		} else if (f == stackrelay_v1_SymbolTable_sources_tag || f == stackrelay_v1_SymbolTable_error_tag) {
			sr_pbr__bytes(&r, &t);
			const char *str = pos;
			pos += sr_utf8_copy(pos, t.p, t.n, GW_AGENT_MAX_STRING_BYTES) + 1;
			if (f == stackrelay_v1_SymbolTable_sources_tag)
				tab->sources[tab->n_sources++] = str;
			else
				tab->error = str;
		} else
			sr_pbr__skip(&r, wt);
	}
	defs->symbols += n_sym;
	qsort(tab->symbols, tab->n_symbols, sizeof(*tab->symbols), symbol_cmp);
	/* The table is on its way to the symbolizer: stop asking agents for it. */
	if (exe) {
		atomic_fetch_or(&exe->flags, GW_EXE_SYMBOLS_UPLOADED);
		gw_executable__set_want_symbols(exe, false);
	} else {
		atomic_fetch_or(&kernel->flags, GW_EXE_SYMBOLS_UPLOADED);
		gw_kernel__set_want_symbols(kernel, false);
	}
	gw_id_set(&tab->id, id.p, id.n); /* id.n <= GW_ID_MAX was checked in pass 1 */
	tab->exe = exe;
	exe = NULL;
	if (sr_grow((void **)&defs->res->tables, &defs->res->cap_tables, defs->res->n_tables + 1,
		    sizeof(*defs->res->tables), 4) < 0) {
		e = -ENOMEM;
		goto out;
	}
	defs->res->tables[defs->res->n_tables++] = tab;
	tab = NULL;
out:
	gw_symbol_table_free(tab);
	gw_executable__unref(exe);
	gw_kernel__unref(kernel);
	return e;
}
