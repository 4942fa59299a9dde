// SPDX-License-Identifier: Apache-2.0
/*
 * The OTLP encoder (otlp-encode.h). The dictionary's tables are written as
 * they are found, each into its own buffer, entries interned by their bytes
 * in one hash table (a kind byte first, so a string and a location with equal
 * bytes differ); the resources go straight into the output, and the
 * dictionary follows them (field order does not matter in protobuf).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pb_decode.h>

#include "agent/otlp-encode.h"
#include "common/htab.h"
#include "common/macro.h"
#include "common/otlp-fields.h"
#include "common/pbwire.h"

#define SCOPE_NAME "stackrelay-agent"
#define HEX_ID_MAX 64 /* bytes of a build ID written as hex */

enum table { T_MAPPING, T_LOCATION, T_FUNCTION, T_LINK, T_STRING, T_ATTRIBUTE, T_STACK, T__N };

/* Dictionary field of each table. */
static const uint32_t table_field[T__N] = {
	[T_MAPPING] = SR_OTLP_P(ProfilesDictionary, mapping_table),
	[T_LOCATION] = SR_OTLP_P(ProfilesDictionary, location_table),
	[T_FUNCTION] = SR_OTLP_P(ProfilesDictionary, function_table),
	[T_LINK] = SR_OTLP_P(ProfilesDictionary, link_table), /* only its zero entry: the agent knows no spans */
	[T_STRING] = SR_OTLP_P(ProfilesDictionary, string_table),
	[T_ATTRIBUTE] = SR_OTLP_P(ProfilesDictionary, attribute_table),
	[T_STACK] = SR_OTLP_P(ProfilesDictionary, stack_table),
};

struct entry {
	uint32_t idx;
	uint32_t len;
	uint8_t key[]; /* kind, then the key's bytes */
};

struct enc {
	struct agent_store *store;
	const struct agent_otlp_meta *meta;
	struct sr_htab_ptrs keys;
	struct sr_pbw t[T__N];
	uint32_t n[T__N];
	int error;
};

static const void *entry_key(const void *v, size_t *len)
{
	const struct entry *e = v;

	*len = e->len;
	return e->key;
}

/* The index of (kind, key) in its table; *ret_new when the caller must write the entry now. -ENOMEM. */
static int64_t intern(struct enc *e, enum table kind, const void *key, size_t len, bool *ret_new)
{
	uint8_t stackbuf[256], *k = len + 1 <= sizeof(stackbuf) ? stackbuf : malloc(len + 1);
	struct entry *en;
	int64_t idx;

	*ret_new = false;
	if (!k)
		return -ENOMEM;
	k[0] = (uint8_t)kind;
	memcpy(k + 1, key, len);
	en = sr_htab_ptrs__get(&e->keys, k, len + 1);
	if (en) {
		idx = en->idx;
		goto out;
	}
	en = malloc(sizeof(*en) + len + 1);
	if (!en) {
		idx = -ENOMEM;
		goto out;
	}
	en->idx = e->n[kind];
	en->len = (uint32_t)(len + 1);
	memcpy(en->key, k, len + 1);
	if (sr_htab_ptrs__put(&e->keys, en) < 0) {
		free(en);
		idx = -ENOMEM;
		goto out;
	}
	idx = e->n[kind]++;
	*ret_new = true;
out:
	if (k != stackbuf)
		free(k);
	return idx;
}

static int64_t str_index(struct enc *e, const char *s)
{
	size_t len = s ? strlen(s) : 0;
	bool fresh;
	int64_t i = intern(e, T_STRING, s ? s : "", len, &fresh);

	if (i >= 0 && fresh)
		sr_pbw__bytes_always(&e->t[T_STRING], table_field[T_STRING], s ? s : "", len);
	return i;
}

/* An AnyValue field: the string s, or the int v when s is NULL. */
static void write_any_value(struct sr_pbw *w, uint32_t field, const char *s, int64_t v)
{
	size_t m = sr_pbw__begin(w, field);

	if (s)
		sr_pbw__bytes_always(w, SR_OTLP_C(AnyValue, string_value), s, strlen(s));
	else
		sr_pbw__int(w, SR_OTLP_C(AnyValue, int_value), v);
	sr_pbw__end(w, m);
}

/* An attribute_table entry: a string value, or an int when s is NULL. */
static int64_t attr_index(struct enc *e, const char *key, const char *s, int64_t v)
{
	char buf[512];
	int n = s ? snprintf(buf, sizeof(buf), "%s=s%s", key, s)
		  : snprintf(buf, sizeof(buf), "%s=i%lld", key, (long long)v);
	struct sr_pbw *w = &e->t[T_ATTRIBUTE];
	int64_t ki, i;
	size_t m;
	bool fresh;

	if (n < 0 || (size_t)n >= sizeof(buf))
		return 0; /* longer than any name the agent keeps: left out */
	i = intern(e, T_ATTRIBUTE, buf, (size_t)n, &fresh);
	if (i < 0 || !fresh)
		return i;
	ki = str_index(e, key);
	if (ki < 0)
		return ki;
	m = sr_pbw__begin(w, table_field[T_ATTRIBUTE]);
	sr_pbw__int(w, SR_OTLP_P(KeyValueAndUnit, key_strindex), ki);
	write_any_value(w, SR_OTLP_P(KeyValueAndUnit, value), s, v);
	sr_pbw__end(w, m);
	return i;
}

static void hex(const uint8_t *p, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[p[i] >> 4];
		out[2 * i + 1] = digits[p[i] & 15];
	}
	out[2 * n] = '\0';
}

static void write_mapping(struct enc *e, int64_t file, int64_t build_id_attr)
{
	struct sr_pbw *w = &e->t[T_MAPPING];
	size_t m = sr_pbw__begin(w, table_field[T_MAPPING]);

	sr_pbw__int(w, SR_OTLP_P(Mapping, filename_strindex), file);
	if (build_id_attr > 0) {
		int32_t a = (int32_t)build_id_attr;
		sr_pbw__packed_i32(w, SR_OTLP_P(Mapping, attribute_indices), &a, 1);
	}
	sr_pbw__end(w, m);
}

/* What a user frame's executable's mapping says: its path and GNU build ID. */
static int exe_mapping_fields(struct enc *e, const pb_bytes_array_t *id, int64_t *ret_file, int64_t *ret_attr)
{
	stackrelay_v1_ExecutableDef def = { 0 };
	const pb_bytes_array_t *gnu = NULL;
	char hexid[2 * HEX_ID_MAX + 1];
	int r = agent_store__executable(e->store, id->bytes, id->size, &def);

	if (r < 0 && r != -ENOENT)
		return r;
	if (def.id_kind && *def.id_kind == stackrelay_v1_ExecutableIdKind_EXECUTABLE_ID_KIND_GNU_BUILD_ID)
		gnu = def.id;
	else if (def.gnu_build_id && def.gnu_build_id->size)
		gnu = def.gnu_build_id;
	*ret_file = str_index(e, def.path && *def.path ? def.path : def.file_name);
	if (gnu && gnu->size <= HEX_ID_MAX) {
		hex(gnu->bytes, gnu->size, hexid);
		*ret_attr = attr_index(e, "process.executable.build_id.gnu", hexid, 0);
	}
	pb_release(stackrelay_v1_ExecutableDef_fields, &def);
	return 0;
}

/* A kernel address space's: "[kernel.kallsyms]" or "[module]", no build ID (offsets, not ELF addresses). */
static int kernel_mapping_fields(struct enc *e, const pb_bytes_array_t *id, int64_t *ret_file)
{
	stackrelay_v1_KernelDef def = { 0 };
	char name[80];
	int r = agent_store__kernel(e->store, id->bytes, id->size, &def);

	if (r < 0 && r != -ENOENT)
		return r;
	if (def.module && *def.module)
		snprintf(name, sizeof(name), "[%.64s]", def.module);
	else
		snprintf(name, sizeof(name), "[kernel.kallsyms]");
	pb_release(stackrelay_v1_KernelDef_fields, &def);
	*ret_file = str_index(e, name);
	return 0;
}

/* The mapping_table index of a frame's executable or kernel address space, by its ID; 0 without one. */
static int64_t mapping_index(struct enc *e, const pb_bytes_array_t *id, bool kernel)
{
	int64_t idx, file = 0, attr = 0;
	bool fresh;
	int r;

	if (!id || !id->size)
		return 0;
	idx = intern(e, T_MAPPING, id->bytes, id->size, &fresh);
	if (idx < 0 || !fresh)
		return idx;
	r = kernel ? kernel_mapping_fields(e, id, &file) : exe_mapping_fields(e, id, &file, &attr);
	if (r < 0 || file < 0 || attr < 0)
		return r < 0 ? r : file < 0 ? file : attr;
	write_mapping(e, file, attr);
	return idx;
}

/* A named frame's function; its runtime (the frame type) goes to ret_type. 0 when the store lost it. */
static int64_t function_index(struct enc *e, const pb_bytes_array_t *id, char *ret_type, size_t type_size)
{
	stackrelay_v1_FunctionDef def = { 0 };
	struct sr_pbw *w = &e->t[T_FUNCTION];
	int64_t idx, name, file;
	bool fresh;
	size_t m;
	int r;

	snprintf(ret_type, type_size, "native");
	if (!id || !id->size)
		return 0;
	r = agent_store__function(e->store, id->bytes, id->size, &def);
	if (r < 0)
		return r == -ENOENT ? 0 : r;
	if (def.runtime && *def.runtime)
		snprintf(ret_type, type_size, "%s", def.runtime);
	idx = intern(e, T_FUNCTION, id->bytes, id->size, &fresh);
	if (idx >= 0 && fresh) {
		name = str_index(e, def.name);
		file = str_index(e, def.file_name);
		if (name < 0 || file < 0) {
			idx = name < 0 ? name : file;
			goto out;
		}
		m = sr_pbw__begin(w, table_field[T_FUNCTION]);
		sr_pbw__int(w, SR_OTLP_P(Function, name_strindex), name);
		sr_pbw__int(w, SR_OTLP_P(Function, filename_strindex), file);
		if (def.start_line && *def.start_line)
			sr_pbw__int(w, SR_OTLP_P(Function, start_line), *def.start_line);
		sr_pbw__end(w, m);
	}
out:
	pb_release(stackrelay_v1_FunctionDef_fields, &def);
	return idx;
}

/* A kernel frame's function, by name (meta->kernel_name); 0 when it has none. */
static int64_t kernel_function_index(struct enc *e, const pb_bytes_array_t *id, uint64_t address)
{
	const char *name = id && e->meta->kernel_name
				   ? e->meta->kernel_name(e->meta->kernel_name_ctx, id->bytes, id->size, address)
				   : NULL;
	struct sr_pbw *w = &e->t[T_FUNCTION];
	char key[256];
	int64_t idx, ni;
	bool fresh;
	size_t m;
	int n;

	if (!name || !*name)
		return 0;
	/* Keyed apart from function IDs (16 binary bytes) by the leading "\xffk". */
	n = snprintf(key, sizeof(key), "\xffk%s", name);
	if (n < 0 || (size_t)n >= sizeof(key))
		return 0;
	idx = intern(e, T_FUNCTION, key, (size_t)n, &fresh);
	if (idx < 0 || !fresh)
		return idx;
	ni = str_index(e, name);
	if (ni < 0)
		return ni;
	m = sr_pbw__begin(w, table_field[T_FUNCTION]);
	sr_pbw__int(w, SR_OTLP_P(Function, name_strindex), ni);
	sr_pbw__end(w, m);
	return idx;
}

struct loc_key {
	uint64_t address;
	int64_t mapping, function, type_attr;
	uint32_t line;
	uint32_t pad;
};

static int64_t location_index(struct enc *e, const stackrelay_v1_Frame *f)
{
	struct sr_pbw *w = &e->t[T_LOCATION];
	struct loc_key k = { 0 };
	int kind = f->kind ? (int)*f->kind : 0;
	char type[32] = "native";
	int64_t idx;
	bool fresh;
	size_t m;

	k.address = f->address ? *f->address : 0;
	switch (kind) {
	case stackrelay_v1_FrameKind_FRAME_KIND_USER:
		k.mapping = mapping_index(e, f->executable_id, false);
		break;
	case stackrelay_v1_FrameKind_FRAME_KIND_KERNEL:
		k.mapping = mapping_index(e, f->executable_id, true);
		k.function = kernel_function_index(e, f->executable_id, k.address);
		snprintf(type, sizeof(type), "kernel");
		break;
	case stackrelay_v1_FrameKind_FRAME_KIND_INTERPRETED:
	case stackrelay_v1_FrameKind_FRAME_KIND_JIT:
		k.function = function_index(e, f->function_id, type, sizeof(type));
		k.line = f->line ? *f->line : 0;
		/* A bytecode offset or a JIT address means nothing to a reader: the line says where. */
		k.address = 0;
		break;
	default:
		break;
	}
	if (k.mapping < 0 || k.function < 0)
		return k.mapping < 0 ? k.mapping : k.function;
	k.type_attr = attr_index(e, "profile.frame.type", type, 0);
	if (k.type_attr < 0)
		return k.type_attr;
	idx = intern(e, T_LOCATION, &k, sizeof(k), &fresh);
	if (idx < 0 || !fresh)
		return idx;
	m = sr_pbw__begin(w, table_field[T_LOCATION]);
	sr_pbw__int(w, SR_OTLP_P(Location, mapping_index), k.mapping);
	sr_pbw__uint(w, SR_OTLP_P(Location, address), k.address);
	if (k.function > 0) {
		size_t lm = sr_pbw__begin(w, SR_OTLP_P(Location, lines));
		sr_pbw__int(w, SR_OTLP_P(Line, function_index), k.function);
		sr_pbw__int(w, SR_OTLP_P(Line, line), k.line);
		sr_pbw__end(w, lm);
	}
	if (k.type_attr > 0) {
		int32_t a = (int32_t)k.type_attr;
		sr_pbw__packed_i32(w, SR_OTLP_P(Location, attribute_indices), &a, 1);
	}
	sr_pbw__end(w, m);
	return idx;
}

/* The stack_table index of a sample's stack; 0 when the store no longer has it. */
static int64_t stack_index(struct enc *e, const pb_bytes_array_t *id)
{
	stackrelay_v1_StackDef def = { 0 };
	struct sr_pbw *w = &e->t[T_STACK];
	int32_t *locs = NULL;
	int64_t idx, li = 0;
	bool fresh;
	int r;

	if (!id || !id->size)
		return 0;
	/* Known from an earlier sample: no lookup. */
	idx = intern(e, T_STACK, id->bytes, id->size, &fresh);
	if (idx < 0 || !fresh)
		return idx;
	r = agent_store__stack(e->store, id->bytes, id->size, &def);
	if (r < 0) {
		/* Forgotten again (it was the last entry made): samples on it are left out and counted. */
		uint8_t key[1 + 64];
		struct entry *en;

		if (id->size < sizeof(key)) {
			key[0] = T_STACK;
			memcpy(key + 1, id->bytes, id->size);
			en = sr_htab_ptrs__remove(&e->keys, key, id->size + 1);
			free(en);
			e->n[T_STACK]--;
		}
		return r;
	}
	locs = calloc(def.frames_count ? def.frames_count : 1, sizeof(*locs));
	if (!locs) {
		idx = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < def.frames_count; i++) {
		li = location_index(e, &def.frames[i]);
		if (li < 0) {
			idx = li;
			goto out;
		}
		locs[i] = (int32_t)li;
	}
	{
		size_t m = sr_pbw__begin(w, table_field[T_STACK]);
		sr_pbw__packed_i32(w, SR_OTLP_P(Stack, location_indices), locs, def.frames_count);
		sr_pbw__end(w, m);
	}
out:
	free(locs);
	pb_release(stackrelay_v1_StackDef_fields, &def);
	return idx;
}

uint64_t agent_otlp_sample_count(const stackrelay_v1_Sample *smp)
{
	return smp->count ? *smp->count : 1;
}

static bool is_off_cpu(const stackrelay_v1_Sample *smp)
{
	return smp->profile_type && *smp->profile_type == stackrelay_v1_ProfileType_PROFILE_TYPE_OFF_CPU;
}

#define U32(p) ((p) ? *(p) : 0)
#define U64(p) ((p) ? *(p) : 0)
#define STR(p) ((p) ? (p) : "")

/* Samples of one resource sort together: process, then CPU before off-CPU. */
static int cmp_samples(const void *pa, const void *pb, void *ctx)
{
	const stackrelay_v1_Sample *base = ctx;
	const stackrelay_v1_Sample *a = &base[*(const uint32_t *)pa], *b = &base[*(const uint32_t *)pb];
	int c;

	if (U32(a->pid) != U32(b->pid))
		return U32(a->pid) < U32(b->pid) ? -1 : 1;
	if (U64(a->process_start_ticks) != U64(b->process_start_ticks))
		return U64(a->process_start_ticks) < U64(b->process_start_ticks) ? -1 : 1;
	if ((c = strcmp(STR(a->container_id), STR(b->container_id))) != 0)
		return c;
	if ((c = strcmp(STR(a->executable_path), STR(b->executable_path))) != 0)
		return c;
	if (is_off_cpu(a) != is_off_cpu(b))
		return is_off_cpu(a) ? 1 : -1;
	return *(const uint32_t *)pa < *(const uint32_t *)pb ? -1 : 1;
}

static bool same_resource(const stackrelay_v1_Sample *a, const stackrelay_v1_Sample *b)
{
	return U32(a->pid) == U32(b->pid) && U64(a->process_start_ticks) == U64(b->process_start_ticks) &&
	       !strcmp(STR(a->container_id), STR(b->container_id)) &&
	       !strcmp(STR(a->executable_path), STR(b->executable_path));
}

static void write_kv(struct sr_pbw *w, uint32_t field, const char *key, const char *s, int64_t v)
{
	size_t m = sr_pbw__begin(w, field);

	sr_pbw__string(w, SR_OTLP_C(KeyValue, key), key);
	write_any_value(w, SR_OTLP_C(KeyValue, value), s, v);
	sr_pbw__end(w, m);
}

static void write_value_type(struct sr_pbw *w, uint32_t field, int64_t type, int64_t unit)
{
	size_t m = sr_pbw__begin(w, field);

	sr_pbw__int(w, SR_OTLP_P(ValueType, type_strindex), type);
	sr_pbw__int(w, SR_OTLP_P(ValueType, unit_strindex), unit);
	sr_pbw__end(w, m);
}

/* One Profile of samples order[from, to), all of one type. */
static int write_profile(struct enc *e, struct sr_pbw *w, const struct agent_batch *b, const uint32_t *order,
			 size_t from, size_t to, struct agent_otlp_encode_stats *st)
{
	const stackrelay_v1_Sample *first = &b->samples[order[from]];
	bool off = is_off_cpu(first), v19 = e->meta->version == AGENT_OTLP_V1_9;
	uint64_t t0 = U64(first->start_time_unix_nano), t1 = U64(first->end_time_unix_nano);
	int64_t s_type = str_index(e, off ? "off_cpu" : "samples"),
		s_unit = str_index(e, off ? "nanoseconds" : "count");
	int64_t p_type = str_index(e, "cpu"), p_unit = str_index(e, "nanoseconds");
	size_t pm;

	if (s_type < 0 || s_unit < 0 || p_type < 0 || p_unit < 0)
		return -ENOMEM;
	pm = sr_pbw__begin(w, SR_OTLP_P(ScopeProfiles, profiles));
	write_value_type(w, SR_OTLP_P(Profile, sample_type), s_type, s_unit);
	for (size_t i = from; i < to; i++) {
		const stackrelay_v1_Sample *smp = &b->samples[order[i]];
		uint64_t count = agent_otlp_sample_count(smp), value = off ? U64(smp->off_cpu_nanos) : count;
		int64_t stack = stack_index(e, smp->stack_id), a_tid, a_name = 0;
		int32_t attrs[2];
		size_t n_attrs = 0, m, vm;

		if (stack == -ENOENT || stack == -ESRCH || stack == 0) {
			st->lost += count;
			continue;
		}
		if (stack < 0)
			return (int)stack;
		a_tid = attr_index(e, "thread.id", NULL, U32(smp->tid));
		if (smp->thread_name && *smp->thread_name)
			a_name = attr_index(e, "thread.name", smp->thread_name, 0);
		if (a_tid < 0 || a_name < 0)
			return -ENOMEM;
		if (a_tid > 0)
			attrs[n_attrs++] = (int32_t)a_tid;
		if (a_name > 0)
			attrs[n_attrs++] = (int32_t)a_name;
		m = sr_pbw__begin(w, SR_OTLP_P(Profile, samples));
		sr_pbw__int(w, v19 ? SR_OTLP_S9(stack_index) : SR_OTLP_S10(stack_index), stack);
		if (!v19)
			sr_pbw__packed_i32(w, SR_OTLP_S10(attribute_indices), attrs, n_attrs);
		vm = sr_pbw__begin(w, v19 ? SR_OTLP_S9(values) : SR_OTLP_S10(values));
		sr_pbw__varint(w, value);
		sr_pbw__end(w, vm);
		if (v19)
			sr_pbw__packed_i32(w, SR_OTLP_S9(attribute_indices), attrs, n_attrs);
		sr_pbw__end(w, m);
		st->samples++;
		st->count += count;
		if (U64(smp->start_time_unix_nano) && U64(smp->start_time_unix_nano) < t0)
			t0 = U64(smp->start_time_unix_nano);
		if (U64(smp->end_time_unix_nano) > t1)
			t1 = U64(smp->end_time_unix_nano);
	}
	sr_pbw__fixed64(w, SR_OTLP_P(Profile, time_unix_nano), t0);
	sr_pbw__uint(w, SR_OTLP_P(Profile, duration_nano), t1 > t0 ? t1 - t0 : 0);
	if (!off) {
		write_value_type(w, SR_OTLP_P(Profile, period_type), p_type, p_unit);
		sr_pbw__int(w, SR_OTLP_P(Profile, period),
			    b->frequency_hz ? (int64_t)(1000000000ULL / b->frequency_hz) : 0);
	}
	sr_pbw__end(w, pm);
	return 0;
}

static int write_resource(struct enc *e, struct sr_pbw *w, const struct agent_batch *b, const uint32_t *order,
			  size_t from, size_t to, struct agent_otlp_encode_stats *st)
{
	const stackrelay_v1_Sample *smp = &b->samples[order[from]];
	const char *path = STR(smp->executable_path), *base = strrchr(path, '/');
	const char *name = *path ? (base ? base + 1 : path) : STR(smp->process_name);
	size_t rm, resm, sm, scm, split = to;
	uint32_t field = SR_OTLP_RES(attributes);
	int r;

	rm = sr_pbw__begin(w, SR_OTLP_REQ(resource_profiles));
	resm = sr_pbw__begin(w, SR_OTLP_P(ResourceProfiles, resource));
	if (smp->container_id && *smp->container_id)
		write_kv(w, field, "container.id", smp->container_id, 0);
	if (smp->pod_uid && *smp->pod_uid)
		write_kv(w, field, "k8s.pod.uid", smp->pod_uid, 0);
	write_kv(w, field, "process.pid", NULL, U32(smp->pid));
	if (*path)
		write_kv(w, field, "process.executable.path", path, 0);
	if (*name)
		write_kv(w, field, "process.executable.name", name, 0);
	if (e->meta->host_name && *e->meta->host_name)
		write_kv(w, field, "host.name", e->meta->host_name, 0);
	sr_pbw__end(w, resm);
	sm = sr_pbw__begin(w, SR_OTLP_P(ResourceProfiles, scope_profiles));
	scm = sr_pbw__begin(w, SR_OTLP_P(ScopeProfiles, scope));
	sr_pbw__string(w, SR_OTLP_C(InstrumentationScope, name), SCOPE_NAME);
	sr_pbw__string(w, SR_OTLP_C(InstrumentationScope, version), e->meta->scope_version);
	sr_pbw__end(w, scm);
	for (size_t i = from; i < to; i++)
		if (is_off_cpu(&b->samples[order[i]])) {
			split = i;
			break;
		}
	r = split > from ? write_profile(e, w, b, order, from, split, st) : 0;
	if (r == 0 && split < to)
		r = write_profile(e, w, b, order, split, to, st);
	sr_pbw__end(w, sm);
	sr_pbw__end(w, rm);
	st->resources++;
	return r;
}

static void write_dictionary(struct enc *e, struct sr_pbw *w)
{
	size_t m = sr_pbw__begin(w, SR_OTLP_REQ(dictionary));

	for (int t = 0; t < T__N; t++)
		sr_pbw__raw(w, e->t[t].buf, e->t[t].len);
	sr_pbw__end(w, m);
}

int agent_otlp_encode(struct agent_store *s, const struct agent_batch *b, size_t first, size_t n,
		      const struct agent_otlp_meta *meta, struct sr_pbw *w, struct agent_otlp_encode_stats *ret)
{
	struct enc e = { .store = s, .meta = meta };
	struct agent_otlp_encode_stats st = { 0 };
	uint32_t *order = NULL;
	struct entry *en;
	int r = 0;

	sr_htab_ptrs_init(&e.keys, entry_key);
	/* Element 0 of every table is the zero value (index 0 means unset); "" for strings. */
	for (int t = 0; t < T__N; t++) {
		if (t == T_STRING)
			(void)str_index(&e, "");
		else
			sr_pbw__bytes_always(&e.t[t], table_field[t], "", 0), e.n[t] = 1;
	}
	if (first > b->n_samples || n > b->n_samples - first || n > UINT32_MAX) {
		r = -EINVAL;
		goto out;
	}
	order = malloc((n ? n : 1) * sizeof(*order));
	if (!order) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		order[i] = (uint32_t)(first + i);
	qsort_r(order, n, sizeof(*order), cmp_samples, b->samples);
	for (size_t i = 0; i < n && r == 0;) {
		size_t j = i + 1;
		while (j < n && same_resource(&b->samples[order[i]], &b->samples[order[j]]))
			j++;
		r = write_resource(&e, w, b, order, i, j, &st);
		i = j;
	}
	if (r == 0)
		write_dictionary(&e, w);
	for (int t = 0; t < T__N && r == 0; t++)
		r = sr_pbw__error(&e.t[t]);
	if (r == 0)
		r = sr_pbw__error(w);
out:
	for (size_t i = 0; (en = sr_htab_ptrs__next(&e.keys, &i));)
		free(en);
	sr_htab_ptrs_done(&e.keys);
	for (int t = 0; t < T__N; t++)
		sr_pbw__free(&e.t[t]);
	free(order);
	if (ret)
		*ret = st;
	return r;
}
