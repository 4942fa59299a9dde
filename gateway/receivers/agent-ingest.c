/* SPDX-License-Identifier: Apache-2.0 */
/*
 * PushRequest processing (agent-ingest.h). Untrusted input: every length is
 * checked against what is left of its enclosing message before use, every
 * count is bounded, nothing recurses on input, and no allocation is larger
 * than a small multiple of the (already bounded) body.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pb_encode.h>
#include <xxhash.h>

#include "stackrelay/v1/ingest.pb.h"
#include "stackrelay/v1/types.pb.h"

#include "agent-ingest.h"
#include "macro.h"
#include "model.h"

/* ---- gzip ---- */

/* ---- wire reader ---- */

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

struct rd {
	const uint8_t *p, *end;
};

struct slice {
	const uint8_t *p;
	size_t n;
};

static int rd_varint(struct rd *r, uint64_t *v)
{
	uint64_t x = 0;
	for (unsigned s = 0; s < 70; s += 7) {
		if (r->p >= r->end)
			return -EBADMSG;
		uint8_t b = *r->p++;
		if (s == 63 && b > 1)
			return -EBADMSG;
		x |= (uint64_t)(b & 0x7f) << s;
		if (!(b & 0x80)) {
			*v = x;
			return 0;
		}
	}
	return -EBADMSG;
}

static int rd_key(struct rd *r, uint32_t *field, uint32_t *wt)
{
	uint64_t k;
	int e = rd_varint(r, &k);
	if (e < 0)
		return e;
	if ((k >> 3) == 0 || (k >> 3) > 536870911u)
		return -EBADMSG;
	*field = (uint32_t)(k >> 3);
	*wt = (uint32_t)(k & 7);
	return 0;
}

static int rd_len(struct rd *r, struct slice *s)
{
	uint64_t n;
	int e = rd_varint(r, &n);
	if (e < 0)
		return e;
	if (n > (uint64_t)(r->end - r->p))
		return -EBADMSG;
	s->p = r->p;
	s->n = (size_t)n;
	r->p += n;
	return 0;
}

static int rd_fixed64(struct rd *r, uint64_t *v)
{
	if (r->end - r->p < 8)
		return -EBADMSG;
	uint64_t x = 0;
	for (int i = 7; i >= 0; i--)
		x = (x << 8) | r->p[i];
	r->p += 8;
	*v = x;
	return 0;
}

static int rd_skip(struct rd *r, uint32_t wt)
{
	uint64_t v;
	struct slice s;
	switch (wt) {
	case WT_VARINT:
		return rd_varint(r, &v);
	case WT_I64:
		if (r->end - r->p < 8)
			return -EBADMSG;
		r->p += 8;
		return 0;
	case WT_LEN:
		return rd_len(r, &s);
	case WT_I32:
		if (r->end - r->p < 4)
			return -EBADMSG;
		r->p += 4;
		return 0;
	default:
		return -EBADMSG; /* groups are not used by proto3 */
	}
}

static struct rd rd_of(struct slice s)
{
	return (struct rd){ s.p, s.p + s.n };
}

/* Reads a field's value of the expected wire type into *v / *s. */
static int want_varint(struct rd *r, uint32_t wt, uint64_t *v)
{
	return wt == WT_VARINT ? rd_varint(r, v) : -EBADMSG;
}

static int want_len(struct rd *r, uint32_t wt, struct slice *s)
{
	return wt == WT_LEN ? rd_len(r, s) : -EBADMSG;
}

static int want_fixed64(struct rd *r, uint32_t wt, uint64_t *v)
{
	return wt == WT_I64 ? rd_fixed64(r, v) : -EBADMSG;
}

#define FAIL(fmt, ...)                                                                                                 \
	do {                                                                                                           \
		snprintf(errbuf, errsize, fmt, ##__VA_ARGS__);                                                         \
		e = -EBADMSG;                                                                                          \
		goto out;                                                                                              \
	} while (0)

/*
 * Copies a string field as valid UTF-8 (other bytes become '?', because OTLP
 * strings must be UTF-8 and backends reject anything else), cut at max bytes.
 */
static size_t utf8_copy(char *dst, const uint8_t *s, size_t n, size_t max)
{
	size_t i = 0, o = 0;
	n = SR_MIN(n, max);
	while (i < n) {
		uint8_t c = s[i];
		size_t len = c < 0x80		  ? 1
			     : (c & 0xe0) == 0xc0 ? 2
			     : (c & 0xf0) == 0xe0 ? 3
			     : (c & 0xf8) == 0xf0 ? 4
						  : 0;
		bool ok = len > 0 && i + len <= n && !(len == 2 && c < 0xc2) && !(c == 0 && len == 1);
		for (size_t k = 1; ok && k < len; k++)
			ok = (s[i + k] & 0xc0) == 0x80;
		if (ok && len == 3) {
			uint32_t cp = ((c & 0x0fu) << 12) | ((s[i + 1] & 0x3fu) << 6) | (s[i + 2] & 0x3fu);
			ok = cp >= 0x800 && (cp < 0xd800 || cp > 0xdfff);
		} else if (ok && len == 4) {
			uint32_t cp = ((c & 0x07u) << 18) | ((s[i + 1] & 0x3fu) << 12) | ((s[i + 2] & 0x3fu) << 6) |
				      (s[i + 3] & 0x3fu);
			ok = cp >= 0x10000 && cp <= 0x10ffff;
		}
		if (!ok) {
			dst[o++] = '?';
			i++;
			continue;
		}
		memcpy(dst + o, s + i, len);
		o += len;
		i += len;
	}
	dst[o] = '\0';
	return o;
}

/* A NUL-terminated UTF-8 copy in a caller buffer of GW_AGENT_MAX_STRING_BYTES + 1. */
static const char *cstr(char *buf, struct slice s)
{
	utf8_copy(buf, s.p, s.n, GW_AGENT_MAX_STRING_BYTES);
	return buf;
}

/* ---- header ---- */

int gw_ingest_header(const uint8_t *body, size_t len, struct gw_ingest_header *ret, char *errbuf, size_t errsize)
{
	struct rd r = { body, body + len };
	uint32_t f, wt;
	uint64_t v;
	struct slice s;
	int e = 0;

	memset(ret, 0, sizeof(*ret));
	while (r.p < r.end) {
		if ((e = rd_key(&r, &f, &wt)) < 0)
			FAIL("PushRequest: bad field key at byte %zu", (size_t)(r.p - body));
		switch (f) {
		case stackrelay_v1_PushRequest_protocol_version_tag:
			if ((e = want_varint(&r, wt, &v)) < 0)
				FAIL("PushRequest.protocol_version: malformed");
			ret->protocol_version = v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
			break;
		case stackrelay_v1_PushRequest_sequence_tag:
			if ((e = want_varint(&r, wt, &ret->sequence)) < 0)
				FAIL("PushRequest.sequence: malformed");
			break;
		case stackrelay_v1_PushRequest_sampling_frequency_hz_tag:
			if ((e = want_varint(&r, wt, &v)) < 0)
				FAIL("PushRequest.sampling_frequency_hz: malformed");
			ret->frequency_hz = v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
			break;
		case stackrelay_v1_PushRequest_agent_tag: {
			if ((e = want_len(&r, wt, &s)) < 0)
				FAIL("PushRequest.agent: malformed");
			struct rd a = rd_of(s);
			while (a.p < a.end) {
				struct slice t = { 0 };
				if ((e = rd_key(&a, &f, &wt)) < 0)
					FAIL("AgentInfo: bad field key");
				if (f == stackrelay_v1_AgentInfo_instance_id_tag) {
					if ((e = want_len(&a, wt, &t)) < 0 || t.n > GW_ID_MAX)
						FAIL("AgentInfo.instance_id: malformed or longer than %d bytes",
						     GW_ID_MAX);
					ret->instance_id = t.p;
					ret->instance_id_len = t.n;
				} else if ((e = rd_skip(&a, wt)) < 0)
					FAIL("AgentInfo: malformed field %u", f);
			}
			break;
		}
		case stackrelay_v1_PushRequest_samples_tag:
			if ((e = want_len(&r, wt, &s)) < 0)
				FAIL("PushRequest.samples: malformed");
			ret->n_samples++;
			break;
		default:
			if ((e = rd_skip(&r, wt)) < 0)
				FAIL("PushRequest: malformed field %u", f);
		}
	}
out:
	return e;
}

/* ---- per-request sets ---- */

/* A set of byte strings (slices into the body or the batch), open addressing. */
struct sset {
	struct sent {
		uint64_t h;
		const uint8_t *p;
		size_t n;
		const void *value;
		bool used;
	} * e;
	size_t cap, n;
};

static void sset_free(struct sset *s)
{
	free(s->e);
	*s = (struct sset){ 0 };
}

/* Finds or inserts; *ret_found says which; returns the entry or NULL (ENOMEM). */
static struct sent *sset_put(struct sset *s, uint64_t h, const uint8_t *p, size_t n, bool *ret_found)
{
	if ((s->n + 1) * 2 > s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 64;
		struct sent *ne = calloc(cap, sizeof(*ne));
		if (!ne)
			return NULL;
		for (size_t i = 0; i < s->cap; i++) {
			if (!s->e[i].used)
				continue;
			size_t j = s->e[i].h & (cap - 1);
			while (ne[j].used)
				j = (j + 1) & (cap - 1);
			ne[j] = s->e[i];
		}
		free(s->e);
		s->e = ne;
		s->cap = cap;
	}
	size_t j = h & (s->cap - 1);
	while (s->e[j].used) {
		if (s->e[j].h == h && s->e[j].n == n && memcmp(s->e[j].p, p, n) == 0) {
			*ret_found = true;
			return &s->e[j];
		}
		j = (j + 1) & (s->cap - 1);
	}
	s->e[j] = (struct sent){ .h = h, .p = p, .n = n, .used = true };
	s->n++;
	*ret_found = false;
	return &s->e[j];
}

/* A list of IDs for the response, de-duplicated. */
struct idlist {
	struct sset set;
	struct slice *v;
	size_t n, cap;
};

static int idlist_add(struct idlist *l, const uint8_t *p, size_t n)
{
	bool found;
	if (!sset_put(&l->set, XXH3_64bits(p, n), p, n, &found))
		return -ENOMEM;
	if (found)
		return 0;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		struct slice *nv = realloc(l->v, cap * sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		l->v = nv;
		l->cap = cap;
	}
	l->v[l->n++] = (struct slice){ p, n };
	return 0;
}

static void idlist_free(struct idlist *l)
{
	sset_free(&l->set);
	free(l->v);
}

/* ---- definitions ---- */

static int parse_executable(struct gw_stores *stores, struct slice s, char *errbuf, size_t errsize)
{
	char fn[GW_AGENT_MAX_STRING_BYTES + 1], path[GW_AGENT_MAX_STRING_BYTES + 1], dl[GW_AGENT_MAX_STRING_BYTES + 1];
	struct gw_executable_def d = { 0 };
	struct rd r = rd_of(s);
	struct slice t = { 0 };
	uint32_t f, wt;
	uint64_t v;
	int e = 0;

	while (r.p < r.end) {
		if ((e = rd_key(&r, &f, &wt)) < 0)
			FAIL("ExecutableDef: bad field key");
		switch (f) {
		case stackrelay_v1_ExecutableDef_id_tag:
			if ((e = want_len(&r, wt, &t)) < 0 || t.n == 0 || t.n > GW_ID_MAX)
				FAIL("ExecutableDef.id: empty, malformed or longer than %d bytes", GW_ID_MAX);
			d.id = t.p;
			d.id_len = t.n;
			break;
		case stackrelay_v1_ExecutableDef_id_kind_tag:
			if ((e = want_varint(&r, wt, &v)) < 0)
				FAIL("ExecutableDef.id_kind: malformed");
			d.id_kind = v <= GW_EXE_ID_KERNEL ? (enum gw_exe_id_kind)v : GW_EXE_ID_UNSPECIFIED;
			break;
		case stackrelay_v1_ExecutableDef_file_name_tag:
			if ((e = want_len(&r, wt, &t)) < 0)
				FAIL("ExecutableDef.file_name: malformed");
			d.file_name = cstr(fn, t);
			break;
		case stackrelay_v1_ExecutableDef_path_tag:
			if ((e = want_len(&r, wt, &t)) < 0)
				FAIL("ExecutableDef.path: malformed");
			d.path = cstr(path, t);
			break;
		case stackrelay_v1_ExecutableDef_file_size_tag:
			if ((e = want_varint(&r, wt, &d.file_size)) < 0)
				FAIL("ExecutableDef.file_size: malformed");
			break;
		case stackrelay_v1_ExecutableDef_gnu_build_id_tag:
			if ((e = want_len(&r, wt, &t)) < 0 || t.n > GW_ID_MAX)
				FAIL("ExecutableDef.gnu_build_id: malformed or longer than %d bytes", GW_ID_MAX);
			d.gnu_build_id = t.p;
			d.gnu_build_id_len = t.n;
			break;
		case stackrelay_v1_ExecutableDef_debuglink_tag:
			if ((e = want_len(&r, wt, &t)) < 0)
				FAIL("ExecutableDef.debuglink: malformed");
			d.debuglink = cstr(dl, t);
			break;
		case stackrelay_v1_ExecutableDef_is_go_tag:
			if ((e = want_varint(&r, wt, &v)) < 0)
				FAIL("ExecutableDef.is_go: malformed");
			d.is_go = v != 0;
			break;
		default:
			if ((e = rd_skip(&r, wt)) < 0)
				FAIL("ExecutableDef: malformed field %u", f);
		}
	}
	if (!d.id)
		FAIL("ExecutableDef without id");
	struct gw_executable *x = gw_stores__intern_executable(stores, &d);
	if (!x) {
		e = -errno;
		snprintf(errbuf, errsize, "cannot store executable: %s", strerror(errno));
		goto out;
	}
	gw_executable__unref(x);
out:
	return e;
}

static int parse_kernel(struct gw_stores *stores, struct slice s, char *errbuf, size_t errsize)
{
	char rel[GW_AGENT_MAX_STRING_BYTES + 1], boot[GW_AGENT_MAX_STRING_BYTES + 1];
	struct gw_kernel_def d = { 0 };
	struct gw_kernel_module *mods = NULL;
	char *names = NULL;
	size_t n_mods = 0, names_len = 0;
	struct rd r = rd_of(s);
	struct slice t = { 0 };
	uint32_t f, wt;
	int e = 0;

	/* First pass: count modules and their name bytes, to allocate once. */
	while (r.p < r.end) {
		if ((e = rd_key(&r, &f, &wt)) < 0)
			FAIL("KernelDef: bad field key");
		if (f == stackrelay_v1_KernelDef_modules_tag) {
			if ((e = want_len(&r, wt, &t)) < 0)
				FAIL("KernelDef.modules: malformed");
			if (++n_mods > GW_AGENT_MAX_KERNEL_MODULES)
				FAIL("KernelDef: more than %d modules", GW_AGENT_MAX_KERNEL_MODULES);
			names_len += t.n + 1; /* every name in it fits: each costs >= 2 wire bytes */
		} else if ((e = rd_skip(&r, wt)) < 0)
			FAIL("KernelDef: malformed field %u", f);
	}
	mods = calloc(n_mods ? n_mods : 1, sizeof(*mods));
	names = malloc(names_len ? names_len : 1);
	if (!mods || !names) {
		e = -ENOMEM;
		goto out;
	}
	n_mods = 0;
	names_len = 0;
	r = rd_of(s);
	while (r.p < r.end) {
		rd_key(&r, &f, &wt); /* checked above */
		switch (f) {
		case stackrelay_v1_KernelDef_id_tag:
			if ((e = want_len(&r, wt, &t)) < 0 || t.n == 0 || t.n > GW_ID_MAX)
				FAIL("KernelDef.id: empty, malformed or longer than %d bytes", GW_ID_MAX);
			d.id = t.p;
			d.id_len = t.n;
			break;
		case stackrelay_v1_KernelDef_release_tag:
			if ((e = want_len(&r, wt, &t)) < 0)
				FAIL("KernelDef.release: malformed");
			d.release = cstr(rel, t);
			break;
		case stackrelay_v1_KernelDef_boot_id_tag:
			if ((e = want_len(&r, wt, &t)) < 0)
				FAIL("KernelDef.boot_id: malformed");
			d.boot_id = cstr(boot, t);
			break;
		case stackrelay_v1_KernelDef_build_id_tag:
			if ((e = want_len(&r, wt, &t)) < 0 || t.n > GW_ID_MAX)
				FAIL("KernelDef.build_id: malformed or longer than %d bytes", GW_ID_MAX);
			d.build_id = t.p;
			d.build_id_len = t.n;
			break;
		case stackrelay_v1_KernelDef_modules_tag: {
			struct gw_kernel_module *m = &mods[n_mods++];
			struct rd mr;
			want_len(&r, wt, &t);
			mr = rd_of(t);
			m->name = "";
			while (mr.p < mr.end) {
				struct slice u = { 0 };
				uint64_t v;
				if ((e = rd_key(&mr, &f, &wt)) < 0)
					FAIL("KernelModule: bad field key");
				switch (f) {
				case stackrelay_v1_KernelModule_name_tag:
					if ((e = want_len(&mr, wt, &u)) < 0)
						FAIL("KernelModule.name: malformed");
					/* Each module's name slot was counted in the first pass. */
					m->name = names + names_len;
					names_len +=
						utf8_copy(names + names_len, u.p, u.n, GW_AGENT_MAX_STRING_BYTES) + 1;
					break;
				case stackrelay_v1_KernelModule_start_tag:
					if ((e = want_varint(&mr, wt, &m->start)) < 0)
						FAIL("KernelModule.start: malformed");
					break;
				case stackrelay_v1_KernelModule_size_tag:
					if ((e = want_varint(&mr, wt, &v)) < 0)
						FAIL("KernelModule.size: malformed");
					m->size = v;
					break;
				case stackrelay_v1_KernelModule_build_id_tag:
					if ((e = want_len(&mr, wt, &u)) < 0 || u.n > GW_ID_MAX)
						FAIL("KernelModule.build_id: malformed");
					gw_id_set(&m->build_id, u.p, u.n);
					break;
				default:
					if ((e = rd_skip(&mr, wt)) < 0)
						FAIL("KernelModule: malformed field %u", f);
				}
			}
			break;
		}
		default:
			rd_skip(&r, wt);
		}
	}
	if (!d.id)
		FAIL("KernelDef without id");
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

/* Resource identity of a sample: process, executable, container, pod (slices into the body). */
struct rkey {
	struct slice process_name, exe_path, container_id, pod_uid;
	enum gw_profile_type type;
};

struct rslot {
	uint64_t h;
	struct rkey k;
	uint32_t idx;
	bool used;
};

struct rtable {
	struct rslot *s;
	size_t cap, n;
};

struct ctx {
	struct gw_stores *stores;
	uint64_t epoch;
	struct idlist missing_stacks, missing_exes, missing_kernels, wanted;
	struct idlist probed; /* probe_symbols, de-duplicated */
	struct gw_ingest_result *res;
	/* resources of the batch by identity */
	struct rtable resources;
	struct sset thread_names;
	struct slice host_name, node_name;
	struct slice known_kernel; /* a kernel ID found in the store during this request */
	uint64_t symbols;	   /* symbols in this request's tables so far */
	uint32_t frequency_hz;
	bool definitions_only;
};

static int parse_stack(struct ctx *c, struct slice s, char *errbuf, size_t errsize)
{
	struct gw_location *locs[GW_AGENT_MAX_FRAMES_PER_STACK];
	struct gw_executable *last_exe = NULL;
	struct gw_kernel *last_kernel = NULL;
	struct slice id = { 0 };
	uint32_t n = 0, f, wt;
	bool truncated = false, missing = false;
	struct rd r = rd_of(s);
	uint64_t v;
	int e = 0;

	while (r.p < r.end) {
		struct slice t = { 0 };
		if ((e = rd_key(&r, &f, &wt)) < 0)
			FAIL("StackDef: bad field key");
		switch (f) {
		case stackrelay_v1_StackDef_id_tag:
			if ((e = want_len(&r, wt, &id)) < 0 || id.n == 0 || id.n > GW_ID_MAX)
				FAIL("StackDef.id: empty, malformed or longer than %d bytes", GW_ID_MAX);
			break;
		case stackrelay_v1_StackDef_truncated_tag:
			if ((e = want_varint(&r, wt, &v)) < 0)
				FAIL("StackDef.truncated: malformed");
			truncated = v != 0;
			break;
		case stackrelay_v1_StackDef_frames_tag: {
			struct slice exe_id = { 0 };
			uint64_t address = 0, kind = 0;
			if ((e = want_len(&r, wt, &t)) < 0)
				FAIL("StackDef.frames: malformed");
			if (n == GW_AGENT_MAX_FRAMES_PER_STACK)
				FAIL("StackDef: more than %d frames", GW_AGENT_MAX_FRAMES_PER_STACK);
			struct rd fr = rd_of(t);
			while (fr.p < fr.end) {
				if ((e = rd_key(&fr, &f, &wt)) < 0)
					FAIL("Frame: bad field key");
				if (f == stackrelay_v1_Frame_executable_id_tag) {
					if ((e = want_len(&fr, wt, &exe_id)) < 0 || exe_id.n > GW_ID_MAX)
						FAIL("Frame.executable_id: malformed or longer than %d bytes",
						     GW_ID_MAX);
				} else if (f == stackrelay_v1_Frame_address_tag) {
					if ((e = want_varint(&fr, wt, &address)) < 0)
						FAIL("Frame.address: malformed");
				} else if (f == stackrelay_v1_Frame_kind_tag) {
					if ((e = want_varint(&fr, wt, &kind)) < 0)
						FAIL("Frame.kind: malformed");
				} else if ((e = rd_skip(&fr, wt)) < 0)
					FAIL("Frame: malformed field %u", f);
			}
			/* UNSPECIFIED: a frame with an executable is a user frame. */
			if (kind == stackrelay_v1_FrameKind_FRAME_KIND_UNSPECIFIED)
				kind = exe_id.n ? stackrelay_v1_FrameKind_FRAME_KIND_USER
						: stackrelay_v1_FrameKind_FRAME_KIND_UNKNOWN;
			if (missing)
				break; /* keep validating, stop building */
			struct gw_location *l = NULL;
			if (kind == stackrelay_v1_FrameKind_FRAME_KIND_USER) {
				if (!exe_id.n)
					FAIL("Frame: user frame without executable_id");
				if (!last_exe || last_exe->id.len != exe_id.n ||
				    memcmp(last_exe->id.bytes, exe_id.p, exe_id.n) != 0) {
					gw_executable__unref(last_exe);
					last_exe = gw_stores__executable(c->stores, exe_id.p, exe_id.n);
				}
				if (!last_exe) {
					if ((e = idlist_add(&c->missing_exes, exe_id.p, exe_id.n)) < 0)
						goto out;
					missing = true;
					break;
				}
				l = gw_stores__intern_location(c->stores, GW_FRAME_USER, address, last_exe, NULL);
			} else if (kind == stackrelay_v1_FrameKind_FRAME_KIND_KERNEL) {
				if (!exe_id.n)
					FAIL("Frame: kernel frame without executable_id (the kernel's ID)");
				if (!last_kernel || last_kernel->id.len != exe_id.n ||
				    memcmp(last_kernel->id.bytes, exe_id.p, exe_id.n) != 0) {
					gw_kernel__unref(last_kernel);
					last_kernel = gw_stores__kernel(c->stores, exe_id.p, exe_id.n);
				}
				if (!last_kernel) {
					if ((e = idlist_add(&c->missing_kernels, exe_id.p, exe_id.n)) < 0)
						goto out;
					missing = true;
					break;
				}
				l = gw_stores__intern_location(c->stores, GW_FRAME_KERNEL, address, NULL, last_kernel);
			} else if (kind == stackrelay_v1_FrameKind_FRAME_KIND_UNKNOWN) {
				l = gw_stores__intern_location(c->stores, GW_FRAME_UNKNOWN, address, NULL, NULL);
			} else
				FAIL("Frame.kind %llu is not a FrameKind", (unsigned long long)kind);
			if (!l) {
				e = -ENOMEM;
				goto out;
			}
			locs[n++] = l;
			break;
		}
		default:
			if ((e = rd_skip(&r, wt)) < 0)
				FAIL("StackDef: malformed field %u", f);
		}
	}
	if (!id.p)
		FAIL("StackDef without id");
	if (!missing) {
		struct gw_stack *st = gw_stores__intern_stack(c->stores, id.p, id.n, truncated, locs, n);
		n = 0; /* taken */
		if (!st) {
			e = -ENOMEM;
			goto out;
		}
		gw_stack__unref(st);
	}
	/* With a missing part the stack is not stored: a sample using it lists it missing too. */
out:
	for (uint32_t i = 0; i < n; i++)
		gw_location__unref(locs[i]);
	gw_executable__unref(last_exe);
	gw_kernel__unref(last_kernel);
	return e;
}

static int symbol_cmp(const void *a, const void *b)
{
	const struct gw_symbol *x = a, *y = b;
	return x->address < y->address ? -1 : x->address > y->address;
}

static int parse_symbol_table(struct ctx *c, struct slice s, char *errbuf, size_t errsize)
{
	struct rd r = rd_of(s);
	struct slice id = { 0 }, t = { 0 };
	size_t n_sym = 0, n_src = 0, strbytes = 1;
	struct gw_symbol_table *tab = NULL;
	struct gw_executable *exe = NULL;
	struct gw_kernel *kernel = NULL;
	uint32_t f, wt;
	int e = 0;

	/* Pass 1: validate and size. */
	while (r.p < r.end) {
		if ((e = rd_key(&r, &f, &wt)) < 0)
			FAIL("SymbolTable: bad field key");
		switch (f) {
		case stackrelay_v1_SymbolTable_executable_id_tag:
			if ((e = want_len(&r, wt, &id)) < 0 || id.n == 0 || id.n > GW_ID_MAX)
				FAIL("SymbolTable.executable_id: empty, malformed or longer than %d bytes", GW_ID_MAX);
			break;
		case stackrelay_v1_SymbolTable_symbols_tag: {
			if ((e = want_len(&r, wt, &t)) < 0)
				FAIL("SymbolTable.symbols: malformed");
			struct rd sr = rd_of(t);
			while (sr.p < sr.end) {
				struct slice u = { 0 };
				uint64_t v;
				if ((e = rd_key(&sr, &f, &wt)) < 0)
					FAIL("Symbol: bad field key");
				if (f == stackrelay_v1_Symbol_name_tag) {
					if ((e = want_len(&sr, wt, &u)) < 0)
						FAIL("Symbol.name: malformed");
					strbytes += SR_MIN(u.n, (size_t)GW_AGENT_MAX_STRING_BYTES) + 1;
				} else if (f == stackrelay_v1_Symbol_address_tag ||
					   f == stackrelay_v1_Symbol_size_tag) {
					if ((e = want_varint(&sr, wt, &v)) < 0)
						FAIL("Symbol.address/size: malformed");
				} else if ((e = rd_skip(&sr, wt)) < 0)
					FAIL("Symbol: malformed field %u", f);
			}
			if (++n_sym + c->symbols > GW_AGENT_MAX_SYMBOLS_PER_REQUEST)
				FAIL("SymbolTable: more than %u symbols in one request",
				     GW_AGENT_MAX_SYMBOLS_PER_REQUEST);
			break;
		}
		case stackrelay_v1_SymbolTable_sources_tag:
		case stackrelay_v1_SymbolTable_error_tag:
			if ((e = want_len(&r, wt, &t)) < 0)
				FAIL("SymbolTable.sources/error: malformed");
			strbytes += SR_MIN(t.n, (size_t)GW_AGENT_MAX_STRING_BYTES) + 1;
			n_src += f == stackrelay_v1_SymbolTable_sources_tag;
			break;
		default:
			if ((e = rd_skip(&r, wt)) < 0)
				FAIL("SymbolTable: malformed field %u", f);
		}
	}
	if (!id.p)
		FAIL("SymbolTable without executable_id");
	/* An executable's table, or a kernel's kallsyms snapshot (SymbolTable.executable_id is then the kernel ID). */
	exe = gw_stores__executable(c->stores, id.p, id.n);
	if (!exe)
		kernel = gw_stores__kernel(c->stores, id.p, id.n);
	if (!exe && !kernel)
		goto out; /* evicted meanwhile: the symbolizer asks again when it needs it */

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
	r = rd_of(s);
	while (r.p < r.end) {
		rd_key(&r, &f, &wt);
		if (f == stackrelay_v1_SymbolTable_symbols_tag) {
			struct gw_symbol *sym = &tab->symbols[tab->n_symbols++];
			rd_len(&r, &t);
			struct rd sr = rd_of(t);
			sym->name = "";
			while (sr.p < sr.end) {
				struct slice u = { 0 };
				rd_key(&sr, &f, &wt);
				if (f == stackrelay_v1_Symbol_name_tag) {
					rd_len(&sr, &u);
					sym->name = pos;
					pos += utf8_copy(pos, u.p, u.n, GW_AGENT_MAX_STRING_BYTES) + 1;
				} else if (f == stackrelay_v1_Symbol_address_tag)
					rd_varint(&sr, &sym->address);
				else if (f == stackrelay_v1_Symbol_size_tag)
					rd_varint(&sr, &sym->size);
				else
					rd_skip(&sr, wt);
			}
		} else if (f == stackrelay_v1_SymbolTable_sources_tag || f == stackrelay_v1_SymbolTable_error_tag) {
			rd_len(&r, &t);
			const char *str = pos;
			pos += utf8_copy(pos, t.p, t.n, GW_AGENT_MAX_STRING_BYTES) + 1;
			if (f == stackrelay_v1_SymbolTable_sources_tag)
				tab->sources[tab->n_sources++] = str;
			else
				tab->error = str;
		} else
			rd_skip(&r, wt);
	}
	c->symbols += n_sym;
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
	{
		struct gw_symbol_table **nt = realloc(c->res->tables, (c->res->n_tables + 1) * sizeof(*c->res->tables));
		if (!nt) {
			e = -ENOMEM;
			goto out;
		}
		c->res->tables = nt;
		c->res->tables[c->res->n_tables++] = tab;
		tab = NULL;
	}
out:
	gw_symbol_table_free(tab);
	gw_executable__unref(exe);
	gw_kernel__unref(kernel);
	return e;
}

static int parse_drops(struct ctx *c, struct slice s, char *errbuf, size_t errsize)
{
	struct rd r = rd_of(s);
	uint32_t f, wt;
	uint64_t v;
	int e = 0;
	while (r.p < r.end) {
		if ((e = rd_key(&r, &f, &wt)) < 0)
			FAIL("DropCounters: bad field key");
		if (wt != WT_VARINT) {
			if ((e = rd_skip(&r, wt)) < 0)
				FAIL("DropCounters: malformed field %u", f);
			continue;
		}
		if ((e = rd_varint(&r, &v)) < 0)
			FAIL("DropCounters: malformed field %u", f);
		switch (f) {
		case stackrelay_v1_DropCounters_ring_buffer_full_tag:
			c->res->drops.ring_buffer_full += v;
			break;
		case stackrelay_v1_DropCounters_stack_errors_tag:
			c->res->drops.stack_errors += v;
			break;
		case stackrelay_v1_DropCounters_buffer_overflow_tag:
			c->res->drops.buffer_overflow += v;
			break;
		case stackrelay_v1_DropCounters_process_unknown_tag:
			c->res->drops.process_unknown += v;
			break;
		}
	}
out:
	return e;
}

/* ---- samples ---- */

struct sample_in {
	struct slice stack_id, thread_name, process_name, exe_path, container_id, pod_uid, kernel_id;
	uint64_t pid, tid, count, start, end, start_ticks;
	uint64_t profile_type, off_cpu_nanos; /* stackrelay_v1_ProfileType */
};

static int parse_sample(struct slice s, struct sample_in *in, char *errbuf, size_t errsize)
{
	struct rd r = rd_of(s);
	uint32_t f, wt;
	int e = 0;

	memset(in, 0, sizeof(*in));
	while (r.p < r.end) {
		if ((e = rd_key(&r, &f, &wt)) < 0)
			FAIL("Sample: bad field key");
		switch (f) {
		case stackrelay_v1_Sample_stack_id_tag:
			e = want_len(&r, wt, &in->stack_id);
			break;
		case stackrelay_v1_Sample_pid_tag:
			e = want_varint(&r, wt, &in->pid);
			break;
		case stackrelay_v1_Sample_tid_tag:
			e = want_varint(&r, wt, &in->tid);
			break;
		case stackrelay_v1_Sample_thread_name_tag:
			e = want_len(&r, wt, &in->thread_name);
			break;
		case stackrelay_v1_Sample_process_name_tag:
			e = want_len(&r, wt, &in->process_name);
			break;
		case stackrelay_v1_Sample_executable_path_tag:
			e = want_len(&r, wt, &in->exe_path);
			break;
		case stackrelay_v1_Sample_container_id_tag:
			e = want_len(&r, wt, &in->container_id);
			break;
		case stackrelay_v1_Sample_count_tag:
			e = want_varint(&r, wt, &in->count);
			break;
		case stackrelay_v1_Sample_start_time_unix_nano_tag:
			e = want_fixed64(&r, wt, &in->start);
			break;
		case stackrelay_v1_Sample_end_time_unix_nano_tag:
			e = want_fixed64(&r, wt, &in->end);
			break;
		case stackrelay_v1_Sample_process_start_ticks_tag:
			e = want_varint(&r, wt, &in->start_ticks);
			break;
		case stackrelay_v1_Sample_pod_uid_tag:
			e = want_len(&r, wt, &in->pod_uid);
			break;
		case stackrelay_v1_Sample_kernel_id_tag:
			e = want_len(&r, wt, &in->kernel_id);
			if (e == 0 && in->kernel_id.n > GW_ID_MAX)
				e = -EBADMSG;
			break;
		case stackrelay_v1_Sample_profile_type_tag:
			e = want_varint(&r, wt, &in->profile_type);
			break;
		case stackrelay_v1_Sample_off_cpu_nanos_tag:
			e = want_varint(&r, wt, &in->off_cpu_nanos);
			break;
		default:
			e = rd_skip(&r, wt);
		}
		if (e < 0)
			FAIL("Sample: malformed field %u", f);
	}
	if (in->stack_id.n == 0 || in->stack_id.n > GW_ID_MAX)
		FAIL("Sample.stack_id: empty or longer than %d bytes", GW_ID_MAX);
	/* A type this gateway cannot export is refused, not exported as something else. */
	if (in->profile_type > stackrelay_v1_ProfileType_PROFILE_TYPE_OFF_CPU)
		FAIL("Sample.profile_type: %llu is not a type this gateway knows (0-2)",
		     (unsigned long long)in->profile_type);
out:
	return e;
}

static uint64_t slice_hash(struct slice s, uint64_t seed)
{
	return XXH3_64bits_withSeed(s.p, s.n, seed);
}

static bool slice_eq(struct slice a, struct slice b)
{
	return a.n == b.n && (a.n == 0 || memcmp(a.p, b.p, a.n) == 0);
}

static bool rkey_eq(const struct rkey *a, const struct rkey *b)
{
	return a->type == b->type && slice_eq(a->process_name, b->process_name) && slice_eq(a->exe_path, b->exe_path) &&
	       slice_eq(a->container_id, b->container_id) && slice_eq(a->pod_uid, b->pod_uid);
}

static int rtable_grow(struct rtable *t)
{
	size_t cap = t->cap ? t->cap * 2 : 64;
	struct rslot *ns = calloc(cap, sizeof(*ns));
	if (!ns)
		return -ENOMEM;
	for (size_t i = 0; i < t->cap; i++) {
		if (!t->s[i].used)
			continue;
		size_t j = t->s[i].h & (cap - 1);
		while (ns[j].used)
			j = (j + 1) & (cap - 1);
		ns[j] = t->s[i];
	}
	free(t->s);
	t->s = ns;
	t->cap = cap;
	return 0;
}

static int add_str_attr(struct gw_profiles *p, struct gw_resource *r, const char *key, struct slice v)
{
	char buf[GW_AGENT_MAX_STRING_BYTES + 1];
	if (!v.n)
		return 0;
	return gw_resource__set_string(p, r, key, cstr(buf, v));
}

/* The resource index for a sample's identity, created on first use. */
static int resource_for(struct ctx *c, const struct sample_in *in, uint32_t *ret)
{
	struct gw_profiles *p = c->res->batch;
	enum gw_profile_type type = in->profile_type == stackrelay_v1_ProfileType_PROFILE_TYPE_OFF_CPU
					    ? GW_PROFILE_OFF_CPU
					    : GW_PROFILE_CPU;
	struct rkey k = { in->process_name, in->exe_path, in->container_id, in->pod_uid, type };
	struct rtable *t = &c->resources;
	uint64_t h;
	size_t j;
	int e;

	h = slice_hash(in->process_name, 1);
	h = slice_hash(in->exe_path, h);
	h = slice_hash(in->container_id, h);
	h = slice_hash(in->pod_uid, h) ^ (uint64_t)type;
	if ((t->n + 1) * 2 > t->cap && (e = rtable_grow(t)) < 0)
		return e;
	for (j = h & (t->cap - 1); t->s[j].used; j = (j + 1) & (t->cap - 1)) {
		if (t->s[j].h == h && rkey_eq(&t->s[j].k, &k)) {
			*ret = t->s[j].idx;
			return 0;
		}
	}
	struct gw_resource *r = gw_profiles__add_typed_resource(p, NULL, 0, c->frequency_hz, type);
	if (!r)
		return -ENOMEM;
	if ((e = add_str_attr(p, r, "host.name", c->host_name)) < 0 ||
	    (e = add_str_attr(p, r, "k8s.node.name", c->node_name)) < 0 ||
	    (e = add_str_attr(p, r, "container.id", in->container_id)) < 0 ||
	    (e = add_str_attr(p, r, "k8s.pod.uid", in->pod_uid)) < 0 ||
	    (e = add_str_attr(p, r, "process.executable.name", in->process_name)) < 0 ||
	    (e = add_str_attr(p, r, "process.executable.path", in->exe_path)) < 0)
		return e;
	t->s[j] = (struct rslot){ .h = h, .k = k, .idx = p->n_resources - 1, .used = true };
	t->n++;
	*ret = p->n_resources - 1;
	return 0;
}

/* One thread-name string per distinct name in the batch. */
static const char *thread_name(struct ctx *c, struct slice s)
{
	char buf[GW_AGENT_MAX_STRING_BYTES + 1];
	bool found;
	struct sent *se;

	if (!s.n)
		return NULL;
	se = sset_put(&c->thread_names, XXH3_64bits(s.p, s.n), s.p, s.n, &found);
	if (!se)
		return NULL;
	if (!found)
		se->value = gw_profiles__strdup(c->res->batch, cstr(buf, s));
	return se->value;
}

/*
 * Lists a wanted executable (x) or kernel (k) in this response when no other
 * agent is being asked for it (claim_ask); the claim is kept with the result,
 * so it can be released if the response is never delivered. Returns 1 when
 * listed, 0 when another agent has it or the list is full.
 */
static int ask_for(struct ctx *c, struct gw_executable *x, struct gw_kernel *k)
{
	struct gw_ingest_result *res = c->res;
	int e;

	if (c->wanted.n >= GW_AGENT_MAX_WANTED_PER_RESPONSE)
		return 0;
	if (x) {
		struct gw_executable **v = realloc(res->asked_exes, (res->n_asked_exes + 1) * sizeof(*v));
		if (!v)
			return -ENOMEM;
		res->asked_exes = v;
		if (!gw_executable__claim_ask(x, GW_AGENT_WANTED_ASK_NS))
			return 0;
		v[res->n_asked_exes++] = gw_executable__ref(x);
		e = idlist_add(&c->wanted, x->id.bytes, x->id.len);
	} else {
		struct gw_kernel **v = realloc(res->asked_kernels, (res->n_asked_kernels + 1) * sizeof(*v));
		if (!v)
			return -ENOMEM;
		res->asked_kernels = v;
		if (!gw_kernel__claim_ask(k, GW_AGENT_WANTED_ASK_NS))
			return 0;
		v[res->n_asked_kernels++] = gw_kernel__ref(k);
		e = idlist_add(&c->wanted, k->id.bytes, k->id.len);
	}
	return e < 0 ? e : 1;
}

/* Adds the wanted executables and kernels behind a stack (once per stack and exe per request). */
static int note_wanted(struct ctx *c, struct gw_stack *st)
{
	/* Only an optimization (the wanted list de-duplicates too), so a race between
	 * two requests processed at once costs a second walk, nothing more. */
	if (atomic_load_explicit(&st->scratch_epoch, memory_order_relaxed) == c->epoch)
		return 0;
	atomic_store_explicit(&st->scratch_epoch, c->epoch, memory_order_relaxed);
	for (uint32_t i = 0; i < st->n_locations; i++) {
		struct gw_executable *x = st->locations[i]->exe;
		struct gw_kernel *k = st->locations[i]->kernel;
		/* A kernel whose kallsyms the symbolize processor needs (few per request: the list de-duplicates). */
		if (k && gw_kernel__wants_symbols(k)) {
			int e = ask_for(c, NULL, k);
			if (e < 0)
				return e;
		}
		/* On its way to the symbolize processor: a probe in the meantime is answered "pending". */
		if (k)
			gw_kernel__set_queued(k, GW_AGENT_QUEUED_PENDING_NS);
		if (!x || atomic_load_explicit(&x->scratch_epoch, memory_order_relaxed) == c->epoch)
			continue;
		atomic_store_explicit(&x->scratch_epoch, c->epoch, memory_order_relaxed);
		gw_executable__set_queued(x, GW_AGENT_QUEUED_PENDING_NS);
		if (gw_executable__wants_symbols(x)) {
			int e = ask_for(c, x, NULL);
			if (e < 0)
				return e;
		}
	}
	return 0;
}

static int add_sample(struct ctx *c, const struct sample_in *in)
{
	struct gw_stack *st;
	uint32_t ri;
	int e;

	/* The sample's kernel must be known too (docs/agent-protocol.md): the
	 * last one found is remembered, samples of one node share it. */
	if (in->kernel_id.n && !slice_eq(in->kernel_id, c->known_kernel)) {
		struct gw_kernel *k = gw_stores__kernel(c->stores, in->kernel_id.p, in->kernel_id.n);
		if (!k) {
			c->res->refused_missing += in->count;
			if ((e = idlist_add(&c->missing_kernels, in->kernel_id.p, in->kernel_id.n)) < 0)
				return e;
			/* Also list the stack when it is unknown, so one resend carries everything. */
			st = gw_stores__stack(c->stores, in->stack_id.p, in->stack_id.n);
			if (st) {
				gw_stack__unref(st);
				return 0;
			}
			return idlist_add(&c->missing_stacks, in->stack_id.p, in->stack_id.n);
		}
		gw_kernel__unref(k);
		c->known_kernel = in->kernel_id;
	}
	st = gw_stores__stack(c->stores, in->stack_id.p, in->stack_id.n);
	if (!st) {
		c->res->refused_missing += in->count;
		return idlist_add(&c->missing_stacks, in->stack_id.p, in->stack_id.n);
	}
	if ((e = note_wanted(c, st)) < 0 || (e = resource_for(c, in, &ri)) < 0) {
		gw_stack__unref(st);
		return e;
	}
	struct gw_sample s = {
		.stack = st,
		.count = in->count,
		.start_ns = in->start,
		.end_ns = in->end,
		.pid = (uint32_t)in->pid,
		.tid = (uint32_t)in->tid,
		.thread_name = thread_name(c, in->thread_name),
		.process_start_ticks = in->start_ticks,
		.off_cpu_ns = in->profile_type == stackrelay_v1_ProfileType_PROFILE_TYPE_OFF_CPU ? in->off_cpu_nanos
												 : 0,
	};
	e = gw_resource__add_sample_owned(c->res->batch, &c->res->batch->resources[ri], &s);
	if (e < 0) {
		gw_stack__unref(st);
		return e;
	}
	c->res->accepted += in->count;
	return 0;
}

/* ---- response ---- */

static bool enc_ids(pb_ostream_t *os, uint32_t tag, const struct idlist *l)
{
	for (size_t i = 0; i < l->n; i++)
		if (!pb_encode_tag(os, PB_WT_STRING, tag) || !pb_encode_string(os, l->v[i].p, l->v[i].n))
			return false;
	return true;
}

static bool enc_varint(pb_ostream_t *os, uint32_t tag, uint64_t v)
{
	return v == 0 || (pb_encode_tag(os, PB_WT_VARINT, tag) && pb_encode_varint(os, v));
}

struct resp {
	uint64_t accepted;
	uint32_t retry_after_ms;
	uint32_t symbols_pending;
	const char *error;
	const struct idlist *stacks, *exes, *kernels, *wanted;
};

static bool enc_response(pb_ostream_t *os, const struct resp *r)
{
	if (!enc_varint(os, stackrelay_v1_PushResponse_protocol_version_tag, GW_AGENT_PROTOCOL_VERSION) ||
	    !enc_varint(os, stackrelay_v1_PushResponse_accepted_samples_tag, r->accepted))
		return false;
	if ((r->stacks && !enc_ids(os, stackrelay_v1_PushResponse_missing_stacks_tag, r->stacks)) ||
	    (r->exes && !enc_ids(os, stackrelay_v1_PushResponse_missing_executables_tag, r->exes)) ||
	    (r->kernels && !enc_ids(os, stackrelay_v1_PushResponse_missing_kernels_tag, r->kernels)) ||
	    (r->wanted && !enc_ids(os, stackrelay_v1_PushResponse_wanted_symbols_tag, r->wanted)))
		return false;
	if (!enc_varint(os, stackrelay_v1_PushResponse_retry_after_ms_tag, r->retry_after_ms) ||
	    !enc_varint(os, stackrelay_v1_PushResponse_symbols_pending_tag, r->symbols_pending))
		return false;
	if (r->error && *r->error &&
	    (!pb_encode_tag(os, PB_WT_STRING, stackrelay_v1_PushResponse_error_tag) ||
	     !pb_encode_string(os, (const pb_byte_t *)r->error, strlen(r->error))))
		return false;
	return true;
}

static int encode_response(const struct resp *r, uint8_t **ret, size_t *ret_len)
{
	pb_ostream_t sizing = PB_OSTREAM_SIZING;
	pb_ostream_t os;
	uint8_t *buf;

	if (!enc_response(&sizing, r))
		return -EINVAL;
	buf = malloc(sizing.bytes_written ? sizing.bytes_written : 1);
	if (!buf)
		return -ENOMEM;
	os = pb_ostream_from_buffer(buf, sizing.bytes_written);
	if (!enc_response(&os, r)) {
		free(buf);
		return -EINVAL;
	}
	*ret = buf;
	*ret_len = os.bytes_written;
	return 0;
}

int gw_ingest_encode_error(uint32_t retry_after_ms, const char *error, uint8_t **ret, size_t *ret_len)
{
	struct resp r = { .retry_after_ms = retry_after_ms, .error = error };
	return encode_response(&r, ret, ret_len);
}

/* ---- the request ---- */

/* Calls fn for every top-level field numbered tag (length-delimited). */
static int each_field(struct rd r, uint32_t tag, int (*fn)(struct ctx *c, struct slice s, char *errbuf, size_t errsize),
		      struct ctx *c, char *errbuf, size_t errsize)
{
	uint32_t f, wt;
	struct slice s;
	int e;

	while (r.p < r.end) {
		if ((e = rd_key(&r, &f, &wt)) < 0) {
			snprintf(errbuf, errsize, "PushRequest: bad field key");
			return e;
		}
		if (f != tag) {
			if ((e = rd_skip(&r, wt)) < 0) {
				snprintf(errbuf, errsize, "PushRequest: malformed field %u", f);
				return e;
			}
			continue;
		}
		if ((e = want_len(&r, wt, &s)) < 0) {
			snprintf(errbuf, errsize, "PushRequest: field %u is not length-delimited", f);
			return e;
		}
		if ((e = fn(c, s, errbuf, errsize)) < 0)
			return e;
	}
	return 0;
}

static int do_executable(struct ctx *c, struct slice s, char *errbuf, size_t errsize)
{
	c->res->defined_executables++;
	return parse_executable(c->stores, s, errbuf, errsize);
}

static int do_kernel(struct ctx *c, struct slice s, char *errbuf, size_t errsize)
{
	c->res->defined_kernels++;
	return parse_kernel(c->stores, s, errbuf, errsize);
}

static int do_stack(struct ctx *c, struct slice s, char *errbuf, size_t errsize)
{
	c->res->defined_stacks++;
	return parse_stack(c, s, errbuf, errsize);
}

static int do_agent(struct ctx *c, struct slice s, char *errbuf, size_t errsize)
{
	struct rd r = rd_of(s);
	uint32_t f, wt;
	int e = 0;
	while (r.p < r.end) {
		struct slice t = { 0 };
		if ((e = rd_key(&r, &f, &wt)) < 0)
			FAIL("AgentInfo: bad field key");
		if (f == stackrelay_v1_AgentInfo_host_name_tag) {
			if ((e = want_len(&r, wt, &t)) < 0)
				FAIL("AgentInfo.host_name: malformed");
			c->host_name = t;
		} else if (f == stackrelay_v1_AgentInfo_node_name_tag) {
			if ((e = want_len(&r, wt, &t)) < 0)
				FAIL("AgentInfo.node_name: malformed");
			c->node_name = t;
		} else if ((e = rd_skip(&r, wt)) < 0)
			FAIL("AgentInfo: malformed field %u", f);
	}
out:
	return e;
}

static int do_sample(struct ctx *c, struct slice s, char *errbuf, size_t errsize)
{
	struct sample_in in;
	int e = parse_sample(s, &in, errbuf, errsize);
	if (e < 0)
		return e;
	if (in.count == 0)
		return 0;
	if (c->res->received + in.count < c->res->received) {
		snprintf(errbuf, errsize, "Sample.count: the sum of counts overflows 64 bits");
		return -EBADMSG;
	}
	c->res->received += in.count;
	return add_sample(c, &in);
}

/*
 * One probed ID (docs/agent-protocol.md, "Symbol probes"): listed in
 * wanted_symbols when the symbolizer wants the agent's table, counted in
 * symbols_pending while a lookup is still going on. An ID this gateway does
 * not know is neither: it holds no frames in it.
 */
static int do_probe(struct ctx *c, struct slice s, char *errbuf, size_t errsize)
{
	struct gw_executable *x;
	struct gw_kernel *k = NULL;
	bool wanted, pending, dup;
	size_t before = c->probed.n;
	int e;

	if (s.n == 0 || s.n > GW_ID_MAX) {
		snprintf(errbuf, errsize, "PushRequest.probe_symbols: an ID is empty or longer than %d bytes",
			 GW_ID_MAX);
		return -EBADMSG;
	}
	if ((e = idlist_add(&c->probed, s.p, s.n)) < 0)
		return e;
	dup = c->probed.n == before;
	if (dup)
		return 0;
	if (c->probed.n > GW_AGENT_MAX_PROBES_PER_REQUEST) {
		snprintf(errbuf, errsize, "PushRequest.probe_symbols: more than %d IDs in one request",
			 GW_AGENT_MAX_PROBES_PER_REQUEST);
		return -EBADMSG;
	}
	x = gw_stores__executable(c->stores, s.p, s.n);
	if (x) {
		wanted = gw_executable__wants_symbols(x);
		pending = gw_executable__symbols_pending(x);
	} else if ((k = gw_stores__kernel(c->stores, s.p, s.n))) {
		wanted = gw_kernel__wants_symbols(k);
		pending = gw_kernel__symbols_pending(k);
	} else {
		return 0;
	}
	e = 0;
	if (wanted) {
		/*
		 * Not listed (a full list, or another agent is uploading it): pending,
		 * so the agent asks again after a while, and uploads it then if the
		 * other agent never did.
		 */
		if ((e = ask_for(c, x, k)) == 0)
			c->res->symbols_pending++;
	} else if (pending) {
		c->res->symbols_pending++;
	}
	gw_executable__unref(x);
	gw_kernel__unref(k);
	return e < 0 ? e : 0;
}

static int process(struct gw_stores *stores, const uint8_t *body, size_t len, uint64_t epoch, bool definitions_only,
		   struct gw_ingest_result *res, char *errbuf, size_t errsize)
{
	struct rd r = { body, body + len };
	struct ctx c = { .stores = stores, .epoch = epoch, .res = res, .definitions_only = definitions_only };
	struct gw_ingest_header h;
	int e;

	memset(res, 0, sizeof(*res));
	if ((e = gw_ingest_header(body, len, &h, errbuf, errsize)) < 0)
		return e;
	c.frequency_hz = h.frequency_hz;
	res->batch = gw_profiles_new();
	if (!res->batch) {
		e = -ENOMEM;
		goto fail;
	}
	/* Definitions before their users, whatever the order on the wire. */
	if ((e = each_field(r, stackrelay_v1_PushRequest_agent_tag, do_agent, &c, errbuf, errsize)) < 0 ||
	    (e = each_field(r, stackrelay_v1_PushRequest_executables_tag, do_executable, &c, errbuf, errsize)) < 0 ||
	    (e = each_field(r, stackrelay_v1_PushRequest_kernels_tag, do_kernel, &c, errbuf, errsize)) < 0 ||
	    (e = each_field(r, stackrelay_v1_PushRequest_stacks_tag, do_stack, &c, errbuf, errsize)) < 0 ||
	    (e = each_field(r, stackrelay_v1_PushRequest_symbol_tables_tag, parse_symbol_table, &c, errbuf, errsize)) <
		    0 ||
	    (e = each_field(r, stackrelay_v1_PushRequest_drops_tag, parse_drops, &c, errbuf, errsize)) < 0 ||
	    (!definitions_only &&
	     (e = each_field(r, stackrelay_v1_PushRequest_samples_tag, do_sample, &c, errbuf, errsize)) < 0) ||
	    (!definitions_only &&
	     (e = each_field(r, stackrelay_v1_PushRequest_probe_symbols_tag, do_probe, &c, errbuf, errsize)) < 0))
		goto fail;
	res->probes = c.probed.n;
	res->missing_stacks = c.missing_stacks.n;
	res->missing_executables = c.missing_exes.n;
	res->missing_kernels = c.missing_kernels.n;
	res->wanted = c.wanted.n;
	{
		struct resp rs = {
			.accepted = res->accepted,
			.symbols_pending = (uint32_t)SR_MIN(res->symbols_pending, (uint64_t)UINT32_MAX),
			.stacks = &c.missing_stacks,
			.exes = &c.missing_exes,
			.kernels = &c.missing_kernels,
			.wanted = &c.wanted,
		};
		if ((e = encode_response(&rs, &res->response, &res->response_len)) < 0)
			goto fail;
	}
	if (res->batch->n_samples == 0) {
		gw_profiles__unref(res->batch);
		res->batch = NULL;
	}
	e = 0;
	goto out;
fail:
	if (e == -ENOMEM)
		snprintf(errbuf, errsize, "out of memory processing the request");
	gw_ingest_result_release_asks(res);
	gw_ingest_result_free(res);
out:
	idlist_free(&c.missing_stacks);
	idlist_free(&c.missing_exes);
	idlist_free(&c.missing_kernels);
	idlist_free(&c.wanted);
	idlist_free(&c.probed);
	free(c.resources.s);
	sset_free(&c.thread_names);
	return e;
}

int gw_ingest_process(struct gw_stores *stores, const uint8_t *body, size_t len, uint64_t epoch,
		      struct gw_ingest_result *res, char *errbuf, size_t errsize)
{
	return process(stores, body, len, epoch, false, res, errbuf, errsize);
}

int gw_ingest_process_definitions(struct gw_stores *stores, const uint8_t *body, size_t len, uint64_t epoch,
				  struct gw_ingest_result *res, char *errbuf, size_t errsize)
{
	return process(stores, body, len, epoch, true, res, errbuf, errsize);
}

void gw_ingest_result_release_asks(struct gw_ingest_result *res)
{
	for (size_t i = 0; i < res->n_asked_exes; i++)
		gw_executable__release_ask(res->asked_exes[i]);
	for (size_t i = 0; i < res->n_asked_kernels; i++)
		gw_kernel__release_ask(res->asked_kernels[i]);
}

void gw_ingest_result_free(struct gw_ingest_result *res)
{
	for (size_t i = 0; i < res->n_asked_exes; i++)
		gw_executable__unref(res->asked_exes[i]);
	free(res->asked_exes);
	for (size_t i = 0; i < res->n_asked_kernels; i++)
		gw_kernel__unref(res->asked_kernels[i]);
	free(res->asked_kernels);
	gw_profiles__unref(res->batch);
	for (size_t i = 0; i < res->n_tables; i++)
		gw_symbol_table_free(res->tables[i]);
	free(res->tables);
	free(res->response);
	memset(res, 0, sizeof(*res));
}

static int count_one(struct ctx *c, struct slice s, char *errbuf, size_t errsize)
{
	struct sample_in in;
	int e = parse_sample(s, &in, errbuf, errsize);
	if (e < 0)
		return e;
	if (c->res->received + in.count < c->res->received)
		return -EBADMSG;
	c->res->received += in.count;
	return 0;
}

int gw_ingest_count_samples(const uint8_t *body, size_t len, uint64_t *ret)
{
	struct gw_ingest_result res = { 0 };
	struct ctx c = { .res = &res };
	char err[128];
	int e = each_field((struct rd){ body, body + len }, stackrelay_v1_PushRequest_samples_tag, count_one, &c, err,
			   sizeof(err));
	*ret = res.received;
	return e;
}

/* ---- de-duplication ---- */

struct dentry {
	uint64_t h;
	uint8_t id[GW_ID_MAX];
	uint8_t id_len;
	uint64_t seq;
	uint8_t *resp;
	size_t len;
	struct dentry *prev, *next, *hnext; /* LRU (next = older) and bucket chain */
};

struct gw_dedupe {
	uint32_t max_entries;
	uint64_t max_bytes, bytes;
	uint64_t n;
	struct dentry **buckets;
	size_t n_buckets;
	struct dentry *head, *tail;
};

struct gw_dedupe *gw_dedupe_new(uint32_t max_entries, uint64_t max_bytes)
{
	struct gw_dedupe *d = calloc(1, sizeof(*d));
	if (!d)
		return NULL;
	d->max_entries = max_entries;
	d->max_bytes = max_bytes;
	d->n_buckets = 1;
	while (d->n_buckets < max_entries)
		d->n_buckets *= 2;
	d->buckets = calloc(d->n_buckets, sizeof(*d->buckets));
	if (!d->buckets) {
		free(d);
		return NULL;
	}
	return d;
}

static void dedupe_remove(struct gw_dedupe *d, struct dentry *e)
{
	struct dentry **pp = &d->buckets[e->h & (d->n_buckets - 1)];
	while (*pp != e)
		pp = &(*pp)->hnext;
	*pp = e->hnext;
	if (e->prev)
		e->prev->next = e->next;
	else
		d->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		d->tail = e->prev;
	d->bytes -= sizeof(*e) + e->len;
	d->n--;
	free(e->resp);
	free(e);
}

void gw_dedupe_free(struct gw_dedupe *d)
{
	if (!d)
		return;
	while (d->head)
		dedupe_remove(d, d->head);
	free(d->buckets);
	free(d);
}

static uint64_t dkey(const uint8_t *id, size_t len, uint64_t seq)
{
	return XXH3_64bits_withSeed(id, len, seq);
}

static struct dentry *dedupe_find(struct gw_dedupe *d, const uint8_t *id, size_t len, uint64_t seq, uint64_t h)
{
	for (struct dentry *e = d->buckets[h & (d->n_buckets - 1)]; e; e = e->hnext)
		if (e->h == h && e->seq == seq && e->id_len == len && memcmp(e->id, id, len) == 0)
			return e;
	return NULL;
}

int gw_dedupe__lookup(struct gw_dedupe *d, const uint8_t *instance_id, size_t id_len, uint64_t sequence, uint8_t **ret,
		      size_t *ret_len)
{
	struct dentry *e;
	if (!d || d->max_entries == 0 || id_len == 0 || id_len > GW_ID_MAX)
		return -ENOENT;
	e = dedupe_find(d, instance_id, id_len, sequence, dkey(instance_id, id_len, sequence));
	if (!e)
		return -ENOENT;
	*ret = malloc(e->len ? e->len : 1);
	if (!*ret)
		return -ENOMEM;
	memcpy(*ret, e->resp, e->len);
	*ret_len = e->len;
	return 0;
}

int gw_dedupe__insert(struct gw_dedupe *d, const uint8_t *instance_id, size_t id_len, uint64_t sequence,
		      const uint8_t *response, size_t len)
{
	uint64_t h;
	struct dentry *e;

	if (!d || d->max_entries == 0 || id_len == 0 || id_len > GW_ID_MAX)
		return 0;
	if (sizeof(*e) + len > d->max_bytes)
		return -EFBIG;
	h = dkey(instance_id, id_len, sequence);
	e = dedupe_find(d, instance_id, id_len, sequence, h);
	if (e)
		dedupe_remove(d, e);
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->resp = malloc(len ? len : 1);
	if (!e->resp) {
		free(e);
		return -ENOMEM;
	}
	memcpy(e->resp, response, len);
	e->len = len;
	e->h = h;
	memcpy(e->id, instance_id, id_len);
	e->id_len = (uint8_t)id_len;
	e->seq = sequence;
	e->hnext = d->buckets[h & (d->n_buckets - 1)];
	d->buckets[h & (d->n_buckets - 1)] = e;
	e->next = d->head;
	if (d->head)
		d->head->prev = e;
	d->head = e;
	if (!d->tail)
		d->tail = e;
	d->n++;
	d->bytes += sizeof(*e) + len;
	while (d->tail && d->tail != e && (d->n > d->max_entries || d->bytes > d->max_bytes))
		dedupe_remove(d, d->tail);
	return 0;
}

uint64_t gw_dedupe__entries(struct gw_dedupe *d)
{
	return d ? d->n : 0;
}
