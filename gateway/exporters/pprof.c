// SPDX-License-Identifier: Apache-2.0
/*
 * pprof: writes every batch as a gzipped pprof profile (profile.proto of
 * github.com/google/pprof), readable by `go tool pprof`, into a directory,
 * keeping the newest max_files (docs/exporters.md, "pprof").
 *
 * Sample types samples/count and cpu/nanoseconds (as Go's CPU profiles);
 * resource attributes (service.name, k8s.*, ...) and pid/thread become
 * sample labels, since pprof has no resources. Off-CPU samples go to files
 * of their own (off_cpu-*.pb.gz), with sample types waits/count and
 * off_cpu/nanoseconds: one profile per file is what pprof tools expect.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <uv.h>
#include <xxhash.h>

#include "common/grow.h"
#include "component.h"
#include "common/config.h"
#include "core/accounting.h"
#include "core/model.h"
#include "core/runtime.h"
#include "exporthelper.h"
#include "local.h"
#include "common/log.h"
#include "common/macro.h"
#include "common/pbwire.h"

/*
 * Field numbers of github.com/google/pprof/proto/profile.proto. (No .proto
 * of pprof is vendored: these few constants are all the writer needs.)
 */
enum {
	PPROF_PROFILE_SAMPLE_TYPE = 1,
	PPROF_PROFILE_SAMPLE = 2,
	PPROF_PROFILE_MAPPING = 3,
	PPROF_PROFILE_LOCATION = 4,
	PPROF_PROFILE_FUNCTION = 5,
	PPROF_PROFILE_STRING_TABLE = 6,
	PPROF_PROFILE_TIME_NANOS = 9,
	PPROF_PROFILE_DURATION_NANOS = 10,
	PPROF_PROFILE_PERIOD_TYPE = 11,
	PPROF_PROFILE_PERIOD = 12,
	PPROF_PROFILE_DEFAULT_SAMPLE_TYPE = 14,
	PPROF_VALUETYPE_TYPE = 1,
	PPROF_VALUETYPE_UNIT = 2,
	PPROF_SAMPLE_LOCATION_ID = 1,
	PPROF_SAMPLE_VALUE = 2,
	PPROF_SAMPLE_LABEL = 3,
	PPROF_LABEL_KEY = 1,
	PPROF_LABEL_STR = 2,
	PPROF_LABEL_NUM = 3,
	PPROF_MAPPING_ID = 1,
	PPROF_MAPPING_FILENAME = 5,
	PPROF_MAPPING_BUILD_ID = 6,
	PPROF_MAPPING_HAS_FUNCTIONS = 7,
	PPROF_MAPPING_HAS_FILENAMES = 8,
	PPROF_MAPPING_HAS_LINE_NUMBERS = 9,
	PPROF_MAPPING_HAS_INLINE_FRAMES = 10,
	PPROF_LOCATION_ID = 1,
	PPROF_LOCATION_MAPPING_ID = 2,
	PPROF_LOCATION_ADDRESS = 3,
	PPROF_LOCATION_LINE = 4,
	PPROF_LINE_FUNCTION_ID = 1,
	PPROF_LINE_LINE = 2,
	PPROF_FUNCTION_ID = 1,
	PPROF_FUNCTION_NAME = 2,
	PPROF_FUNCTION_SYSTEM_NAME = 3,
	PPROF_FUNCTION_FILENAME = 4,
	PPROF_FUNCTION_START_LINE = 5,
};

#define PPROF_DEFAULT_MAX_FILES 100
/* Frames of one stack written; deeper stacks keep their leaf-most frames (the agent's BPF limit is lower). */
#define PPROF_MAX_FRAMES 512

struct pprof_config {
	char *directory;
	uint64_t max_files;
};

static const struct sr_field pprof_fields[] = {
	SR_FIELD_STR("directory", struct pprof_config, directory, .required = true,
		     .doc = "Where profile-<time>-<seq>.pb.gz files are written (created if missing)."),
	SR_FIELD_U64("max_files", struct pprof_config, max_files, .def = "100",
		     .doc = "Newest files kept; older ones are deleted. 0: keep all.", .min = 0, .max = 1000000),
	SR_FIELD_END,
};

/*
 * A pointer → id map (ids from 1), for locations, mappings; functions by
 * name+file+start. Open addressing of its own, not the tree's table
 * (common/htab.h): it is looked up for every frame of every sample, and on
 * sr_htab a lookup took 10 % more instructions (callgrind, 50,000 keys) and
 * 1.05-1.14x the time at 50,000 keys in a side-by-side micro-benchmark
 * (2026-12-03).
 */
struct idmap {
	const void **keys;
	uint64_t *k2; /* secondary key (functions) */
	uint32_t *slots;
	uint32_t cap, n;
};

static void idmap_free(struct idmap *m)
{
	free(m->keys);
	free(m->k2);
	free(m->slots);
	*m = (struct idmap){ 0 };
}

/* Returns the id (>= 1) and whether it is new, or 0 on ENOMEM. */
static uint32_t idmap_get(struct idmap *m, const void *key, uint64_t k2, bool *ret_new)
{
	uint64_t h = XXH3_64bits(&key, sizeof(key)) ^ (k2 * 0x9E3779B97F4A7C15ULL);
	uint32_t j;

	if ((m->n + 1) * 2 > m->cap) {
		uint32_t cap = m->cap ? m->cap * 2 : 256;
		const void **nk = calloc(cap, sizeof(*nk));
		uint64_t *n2 = calloc(cap, sizeof(*n2));
		uint32_t *ns = calloc(cap, sizeof(*ns));

		if (!nk || !n2 || !ns) {
			free(nk);
			free(n2);
			free(ns);
			return 0;
		}
		for (uint32_t i = 0; i < m->cap; i++) {
			uint64_t hh;

			if (!m->slots[i])
				continue;
			hh = XXH3_64bits(&m->keys[i], sizeof(m->keys[i])) ^ (m->k2[i] * 0x9E3779B97F4A7C15ULL);
			for (j = (uint32_t)hh & (cap - 1); ns[j]; j = (j + 1) & (cap - 1))
				;
			nk[j] = m->keys[i];
			n2[j] = m->k2[i];
			ns[j] = m->slots[i];
		}
		free(m->keys);
		free(m->k2);
		free(m->slots);
		m->keys = nk;
		m->k2 = n2;
		m->slots = ns;
		m->cap = cap;
	}
	for (j = (uint32_t)h & (m->cap - 1); m->slots[j]; j = (j + 1) & (m->cap - 1))
		if (m->keys[j] == key && m->k2[j] == k2) {
			*ret_new = false;
			return m->slots[j];
		}
	m->keys[j] = key;
	m->k2[j] = k2;
	m->slots[j] = ++m->n;
	*ret_new = true;
	return m->n;
}

struct pprof_enc {
	struct gw_strtab st;
	struct idmap locs, maps, funcs;
	struct sr_pbw body; /* locations, mappings, functions as they are first seen */
	int err;
};

static int64_t S(struct pprof_enc *e, const char *s)
{
	int64_t i = gw_strtab__intern(&e->st, s);

	if (i < 0)
		e->err = -ENOMEM;
	return i < 0 ? 0 : i;
}

static uint32_t mapping_id(struct pprof_enc *e, const struct gw_location *l)
{
	const struct gw_executable *exe = gw_location__exe(l);
	const void *key = exe ? (const void *)exe : (const void *)gw_location__kernel(l);
	bool fresh;
	uint32_t id;
	char hex[2 * GW_ID_MAX + 1];
	size_t m;

	if (!key)
		return 0;
	id = idmap_get(&e->maps, key, 0, &fresh);
	if (!id) {
		e->err = -ENOMEM;
		return 0;
	}
	if (!fresh)
		return id;
	m = sr_pbw__begin(&e->body, PPROF_PROFILE_MAPPING);
	sr_pbw__uint(&e->body, PPROF_MAPPING_ID, id);
	if (exe) {
		sr_pbw__int(&e->body, PPROF_MAPPING_FILENAME, S(e, *exe->path ? exe->path : exe->file_name));
		sr_pbw__int(&e->body, PPROF_MAPPING_BUILD_ID, S(e, gw_id_to_hex(&exe->gnu_build_id, hex, sizeof(hex))));
	} else {
		sr_pbw__int(&e->body, PPROF_MAPPING_FILENAME, S(e, gw_location__kernel(l)->mapping_name));
		sr_pbw__int(&e->body, PPROF_MAPPING_BUILD_ID,
			    S(e, gw_id_to_hex(&gw_location__kernel(l)->build_id, hex, sizeof(hex))));
	}
	/* The gateway symbolizes: tell pprof not to try again. */
	sr_pbw__bool(&e->body, PPROF_MAPPING_HAS_FUNCTIONS, true);
	sr_pbw__bool(&e->body, PPROF_MAPPING_HAS_FILENAMES, true);
	sr_pbw__bool(&e->body, PPROF_MAPPING_HAS_LINE_NUMBERS, true);
	sr_pbw__bool(&e->body, PPROF_MAPPING_HAS_INLINE_FRAMES, true);
	sr_pbw__end(&e->body, m);
	return id;
}

static uint32_t function_id(struct pprof_enc *e, const char *name, const char *system_name, const char *file,
			    uint32_t start_line)
{
	int64_t n = S(e, name), sn = S(e, system_name && *system_name ? system_name : name), f = S(e, file);
	bool fresh;
	uint32_t id = idmap_get(&e->funcs, (const void *)(uintptr_t)n, ((uint64_t)f << 32) | start_line, &fresh);
	size_t m;

	if (!id) {
		e->err = -ENOMEM;
		return 0;
	}
	if (!fresh)
		return id;
	m = sr_pbw__begin(&e->body, PPROF_PROFILE_FUNCTION);
	sr_pbw__uint(&e->body, PPROF_FUNCTION_ID, id);
	sr_pbw__int(&e->body, PPROF_FUNCTION_NAME, n);
	sr_pbw__int(&e->body, PPROF_FUNCTION_SYSTEM_NAME, sn);
	sr_pbw__int(&e->body, PPROF_FUNCTION_FILENAME, f);
	sr_pbw__int(&e->body, PPROF_FUNCTION_START_LINE, start_line);
	sr_pbw__end(&e->body, m);
	return id;
}

static uint32_t location_id(struct pprof_enc *e, const struct gw_location *l)
{
	bool fresh;
	uint32_t id = idmap_get(&e->locs, l, 0, &fresh), mid, fids[64];
	const struct gw_lines *lines;
	uint32_t n = 0;
	size_t m;

	if (!id) {
		e->err = -ENOMEM;
		return 0;
	}
	if (!fresh)
		return id;
	/* Functions and mappings first: nested writes into the same buffer must not interleave. */
	mid = mapping_id(e, l);
	lines = gw_location__lines(l);
	if (lines) {
		for (uint32_t i = 0; i < lines->n && n < SR_ARRAY_SIZE(fids); i++)
			fids[n++] = function_id(e, lines->lines[i].function, lines->lines[i].system_name,
						lines->lines[i].file, lines->lines[i].start_line);
	} else {
		char name[128];

		/* pprof shows only addresses for unsymbolized locations of symbolized mappings: name them. */
		gw_location_fallback_name(l, name, sizeof(name));
		fids[n++] = function_id(e, name, name, "", 0);
	}
	m = sr_pbw__begin(&e->body, PPROF_PROFILE_LOCATION);
	sr_pbw__uint(&e->body, PPROF_LOCATION_ID, id);
	sr_pbw__uint(&e->body, PPROF_LOCATION_MAPPING_ID, mid);
	sr_pbw__uint(&e->body, PPROF_LOCATION_ADDRESS, l->address);
	for (uint32_t i = 0; i < n; i++) {
		size_t lm = sr_pbw__begin(&e->body, PPROF_LOCATION_LINE);

		sr_pbw__uint(&e->body, PPROF_LINE_FUNCTION_ID, fids[i]);
		sr_pbw__int(&e->body, PPROF_LINE_LINE, lines ? lines->lines[i].line : 0);
		sr_pbw__end(&e->body, lm);
	}
	sr_pbw__end(&e->body, m);
	return id;
}

static void label_str(struct pprof_enc *e, struct sr_pbw *w, const char *key, const char *value)
{
	size_t m = sr_pbw__begin(w, PPROF_SAMPLE_LABEL);

	sr_pbw__int(w, PPROF_LABEL_KEY, S(e, key));
	sr_pbw__int(w, PPROF_LABEL_STR, S(e, value));
	sr_pbw__end(w, m);
}

static void label_num(struct pprof_enc *e, struct sr_pbw *w, const char *key, int64_t v)
{
	size_t m = sr_pbw__begin(w, PPROF_SAMPLE_LABEL);

	sr_pbw__int(w, PPROF_LABEL_KEY, S(e, key));
	sr_pbw__int(w, PPROF_LABEL_NUM, v);
	sr_pbw__end(w, m);
}

static void value_type(struct pprof_enc *e, struct sr_pbw *w, uint32_t field, const char *type, const char *unit)
{
	size_t m = sr_pbw__begin(w, field);

	sr_pbw__int(w, PPROF_VALUETYPE_TYPE, S(e, type));
	sr_pbw__int(w, PPROF_VALUETYPE_UNIT, S(e, unit));
	sr_pbw__end(w, m);
}

/* Encodes p's resources of one type as an uncompressed pprof Profile into out. Returns the sample count written. */
static int64_t pprof_encode(const struct gw_profiles *p, enum gw_profile_type type, struct sr_pbw *out)
{
	bool off_cpu = type == GW_PROFILE_OFF_CPU;
	uint64_t total = 0;
	struct pprof_enc e = { 0 };
	struct sr_pbw samples = { 0 };
	uint64_t t_min = UINT64_MAX, t_max = 0;
	int64_t period = 0;
	bool any = false;
	int r;

	/* No file for a type the batch has no samples of. */
	gw_profiles_foreach_resource(p, res) any |= res->profile_type == type && res->n_samples > 0;
	if (!any)
		return 0;
	r = gw_strtab_init(&e.st);
	if (r < 0)
		return r;
	value_type(&e, out, PPROF_PROFILE_SAMPLE_TYPE, off_cpu ? "waits" : "samples", "count");
	value_type(&e, out, PPROF_PROFILE_SAMPLE_TYPE, off_cpu ? "off_cpu" : "cpu", "nanoseconds");
	gw_profiles_foreach_resource(p, res)
	{
		int64_t res_period = res->frequency_hz ? (int64_t)(1000000000ULL / res->frequency_hz) : 0;

		if (res->profile_type != type)
			continue;
		if (!period && !off_cpu)
			period = res_period;
		gw_resource_foreach_sample(res, s)
		{
			uint32_t ids[PPROF_MAX_FRAMES];
			uint32_t n = SR_MIN(s->stack->n_locations, (uint32_t)SR_ARRAY_SIZE(ids));
			size_t m = sr_pbw__begin(&samples, PPROF_PROFILE_SAMPLE), pm;

			for (uint32_t i = 0; i < n; i++)
				ids[i] = location_id(&e, gw_stack__location(s->stack, i));
			pm = sr_pbw__begin(&samples, PPROF_SAMPLE_LOCATION_ID);
			for (uint32_t i = 0; i < n; i++)
				sr_pbw__varint(&samples, ids[i]);
			sr_pbw__end(&samples, pm);
			pm = sr_pbw__begin(&samples, PPROF_SAMPLE_VALUE);
			sr_pbw__varint(&samples, s->count);
			sr_pbw__varint(&samples, off_cpu ? s->off_cpu_ns : (uint64_t)((int64_t)s->count * res_period));
			total += s->count;
			sr_pbw__end(&samples, pm);
			for (uint32_t i = 0; i < res->n_attrs; i++) {
				const struct gw_attr *a = &res->attrs[i];

				if (a->type == GW_ATTR_STRING)
					label_str(&e, &samples, a->key, a->v.s);
				else if (a->type == GW_ATTR_INT)
					label_num(&e, &samples, a->key, a->v.i);
			}
			label_num(&e, &samples, "pid", s->pid);
			label_num(&e, &samples, "thread_id", s->tid);
			if (s->thread_name && *s->thread_name)
				label_str(&e, &samples, "thread_name", s->thread_name);
			sr_pbw__end(&samples, m);
		}
		if (res->n_samples && res->start_ns <= res->end_ns) {
			t_min = SR_MIN(t_min, res->start_ns);
			t_max = SR_MAX(t_max, res->end_ns);
		}
	}
	if (!sr_pbw__reserve(out, samples.len + e.body.len)) {
		r = -ENOMEM;
		goto out;
	}
	memcpy(out->buf + out->len, samples.buf, samples.len);
	out->len += samples.len;
	memcpy(out->buf + out->len, e.body.buf, e.body.len);
	out->len += e.body.len;
	sr_pbw__int(out, PPROF_PROFILE_TIME_NANOS, t_min == UINT64_MAX ? 0 : (int64_t)t_min);
	sr_pbw__int(out, PPROF_PROFILE_DURATION_NANOS,
		    t_max > t_min && t_min != UINT64_MAX ? (int64_t)(t_max - t_min) : 0);
	/* A wait has no sampling period. */
	if (!off_cpu) {
		value_type(&e, out, PPROF_PROFILE_PERIOD_TYPE, "cpu", "nanoseconds");
		sr_pbw__int(out, PPROF_PROFILE_PERIOD, period);
	}
	sr_pbw__int(out, PPROF_PROFILE_DEFAULT_SAMPLE_TYPE, S(&e, off_cpu ? "off_cpu" : "cpu"));
	/* The string table last: every string is known by now. */
	for (uint32_t i = 0; i < e.st.n; i++)
		sr_pbw__bytes_always(out, PPROF_PROFILE_STRING_TABLE, e.st.s[i], e.st.len[i]);
	r = e.err ?: sr_pbw__error(out) ?: sr_pbw__error(&samples) ?: sr_pbw__error(&e.body);
	if (r == 0 && total > INT64_MAX)
		r = -EOVERFLOW;
out:
	sr_pbw__free(&samples);
	sr_pbw__free(&e.body);
	idmap_free(&e.locs);
	idmap_free(&e.maps);
	idmap_free(&e.funcs);
	gw_strtab_free(&e.st);
	return r < 0 ? r : (int64_t)total;
}

struct pprof_exporter {
	struct gw_component *c;
	const struct pprof_config *cfg;
	uint64_t seq;
	uint64_t files_written, bytes_written;
};

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Deletes the oldest <prefix>-*.pb.gz beyond max_files (names sort by time): each profile type keeps its own. */
static void prune(struct pprof_exporter *x, const char *prefix)
{
	size_t plen = strlen(prefix);

	DIR *d;
	struct dirent *de;
	char **names = NULL;
	size_t n = 0, cap = 0;

	if (!x->cfg->max_files)
		return;
	d = opendir(x->cfg->directory);
	if (!d)
		return;
	while ((de = readdir(d))) {
		size_t l = strlen(de->d_name);

		if (strncmp(de->d_name, prefix, plen) != 0 || l < 6 || strcmp(de->d_name + l - 6, ".pb.gz") != 0)
			continue;
		if (sr_grow((void **)&names, &cap, n + 1, sizeof(*names), 128) < 0)
			break;
		names[n] = strdup(de->d_name);
		if (names[n])
			n++;
	}
	closedir(d);
	qsort(names, n, sizeof(*names), cmp_names);
	for (size_t i = 0; i + x->cfg->max_files < n; i++) {
		char path[4096];

		snprintf(path, sizeof(path), "%s/%s", x->cfg->directory, names[i]);
		unlink(path);
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

/* Writes p's samples of one type into one file; returns the samples written (0: none of that type) or -errno. */
static int64_t write_type(struct pprof_exporter *x, const struct gw_profiles *p, enum gw_profile_type type)
{
	/* "profile-" for CPU, as before off-CPU profiles existed. */
	const char *prefix = type == GW_PROFILE_OFF_CPU ? "off_cpu-" : "profile-";
	struct sr_pbw w = { 0 };
	uint8_t *gz = NULL;
	size_t gz_len = 0;
	char path[4096], stamp[32];
	struct tm tm;
	time_t now = time(NULL);
	int64_t n;
	int r;

	n = pprof_encode(p, type, &w);
	if (n <= 0) {
		sr_pbw__free(&w);
		return n;
	}
	r = gw_gzip(w.buf, w.len, 6, &gz, &gz_len);
	sr_pbw__free(&w);
	if (r == 0) {
		gmtime_r(&now, &tm);
		strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
		snprintf(path, sizeof(path), "%s/%s%s-%06" PRIu64 ".pb.gz", x->cfg->directory, prefix, stamp, ++x->seq);
		r = gw_write_file_atomic(path, gz, gz_len);
	}
	free(gz);
	if (r < 0)
		return r;
	x->files_written++;
	x->bytes_written += gz_len;
	prune(x, prefix);
	return n;
}

static int pprof_consume(struct gw_component *c, struct gw_profiles *p)
{
	static const enum gw_profile_type types[] = { GW_PROFILE_CPU, GW_PROFILE_OFF_CPU };
	struct pprof_exporter *x = c->state;
	uint64_t done = 0;

	if (p->n_samples == 0) {
		gw_profiles__unref(p);
		return 0;
	}
	for (size_t i = 0; i < SR_ARRAY_SIZE(types); i++) {
		int64_t n = write_type(x, p, types[i]);

		if (n < 0) {
			sr_log_error(c->id, "could not write a pprof file; samples dropped",
				     "directory=%s type=%s error=%s", x->cfg->directory, gw_profile_type_name(types[i]),
				     strerror((int)-n));
			/* What the other type's file holds is exported; the rest of the batch is not. */
			gw_component_exported(c, done);
			gw_component_drop_samples(c, "write_error", p->total_count - done);
			gw_profiles__unref(p);
			return 0;
		}
		done += (uint64_t)n;
	}
	gw_component_exported(c, p->total_count);
	gw_profiles__unref(p);
	return 0;
}

static int pprof_create(struct gw_component *c)
{
	struct pprof_exporter *x = calloc(1, sizeof(*x));

	if (!x)
		return -ENOMEM;
	x->c = c;
	x->cfg = c->config;
	c->state = x;
	return 0;
}

static const char *const pprof_drops[] = { "write_error", NULL };

static int pprof_start(struct gw_component *c)
{
	struct pprof_exporter *x = c->state;
	char cmd_dir[4096];

	gw_component_declare_drops(c, pprof_drops);
	snprintf(cmd_dir, sizeof(cmd_dir), "%s", x->cfg->directory);
	if (mkdir(cmd_dir, 0755) < 0 && errno != EEXIST) {
		int r = -errno;

		sr_log_error(c->id, "cannot create the pprof directory", "directory=%s error=%s", cmd_dir,
			     strerror(-r));
		return r;
	}
	return 0;
}

static void pprof_shutdown(struct gw_component *c, void (*done)(struct gw_component *c))
{
	done(c);
}

static void pprof_destroy(struct gw_component *c)
{
	free(c->state);
	c->state = NULL;
}

const struct gw_component_type gw_exporter_pprof = {
	.name = "pprof",
	.kind = GW_EXPORTER,
	.doc = "Writes each batch as a gzipped pprof profile (go tool pprof, Speedscope, pprof.me) into a "
	       "directory, keeping the newest max_files.",
	.config_fields = pprof_fields,
	.config_size = sizeof(struct pprof_config),
	.create = pprof_create,
	.start = pprof_start,
	.consume = pprof_consume,
	.shutdown = pprof_shutdown,
	.destroy = pprof_destroy,
};
