// SPDX-License-Identifier: Apache-2.0
/*
 * Java processes: libjvm.so recognition, hotspot_procs entries, and the
 * Java frames of samples resolved to methods (java.h). Runs on the sampling
 * thread.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <linux/types.h>

#include "file-verdicts.h"
#include "container-open.h"
#include "hotspot.h"
#include "common/htab.h"
#include "java.h"
#include "jvm-codecache.h"
#include "jvm.h"
#include "proc-cache.h"
#include "proc.h"
#include "util.h"

/* Longest blob name kept. */
#define JAVA_STUB_NAME_MAX 63

/* What a file is to the JVM walker, examined once per (dev, inode, mtime, size): only its name is looked at here. */
struct java_file {
	uint64_t key[4];
	bool libjvm;
};

/* A JVM process: where its code heaps are, and whether it is still starting. */
struct java_proc {
	uint8_t key[12]; /* pid + start_ns, as agent_proc.key */
	uint32_t pid;
	bool ready;	/* its hotspot_procs entry is written */
	uint32_t tries; /* while starting */
	uint64_t next_try;
	struct agent_jvm_heap heaps[HOTSPOT_MAX_HEAPS];
	int n_heaps;
};

/*
 * The frames of one compiled pc, keyed by what the walker recorded: the
 * process, the pc and the low bits of the compile ID. Code freed and
 * another nmethod put at the same pc has another compile ID, so an entry
 * never names new code; it lasts until the process is retired (its last
 * samples are often read after it exited).
 */
struct java_pc {
	struct agent_pcache_entry base; /* key: the process's key, then the recorded value */
	int n;
	struct agent_jvm_frame frames[];
};

/* A pc in the JVM's own code (a stub, an adapter) and the name of its blob. */
struct java_stub {
	struct agent_pcache_entry base; /* key: the process's key, then the pc */
	char name[JAVA_STUB_NAME_MAX + 1];
};

struct agent_java {
	int procs_fd;
	struct agent_jvm *jvm;
	struct agent_file_verdicts files;
	struct sr_htab_ptrs procs;
	struct agent_pcache pcs;
	struct agent_pcache stubs;
	struct agent_java_stats stats;
	char name[2 * AGENT_JVM_MAX_SYMBOL + 16];
};

static const void *proc_key(const void *v, size_t *len)
{
	*len = sizeof(((const struct java_proc *)0)->key);
	return ((const struct java_proc *)v)->key;
}

static void entry_free(struct agent_pcache_entry *e)
{
	free(e);
}

static void free_all(struct sr_htab_ptrs *h, sr_htab_key_fn key_of)
{
	void *v;

	for (size_t i = 0; (v = sr_htab_ptrs__next(h, &i));)
		free(v);
	sr_htab_ptrs_done(h);
	sr_htab_ptrs_init(h, key_of);
}

struct agent_java *agent_java_new(int procs_fd, uint64_t max_methods)
{
	struct agent_java *j = calloc(1, sizeof(*j));

	if (!j)
		return NULL;
	j->jvm = agent_jvm_new(max_methods);
	if (!j->jvm) {
		free(j);
		return NULL;
	}
	j->procs_fd = procs_fd;
	agent_file_verdicts_init(&j->files, AGENT_JAVA_MAX_FILES);
	sr_htab_ptrs_init(&j->procs, proc_key);
	agent_pcache_init(&j->pcs, AGENT_JAVA_MAX_PCS, entry_free);
	agent_pcache_init(&j->stubs, AGENT_JAVA_MAX_STUBS, entry_free);
	return j;
}

void agent_java_free(struct agent_java *j)
{
	if (!j)
		return;
	agent_pcache_done(&j->stubs);
	agent_pcache_done(&j->pcs);
	free_all(&j->procs, proc_key);
	agent_file_verdicts_done(&j->files);
	sr_htab_ptrs_done(&j->procs);
	agent_jvm_free(j->jvm);
	free(j);
}

/* Whether the file's name is HotSpot's library: libjvm.so. */
static bool libjvm_name(const char *path)
{
	const char *base = strrchr(path, '/');

	return !strcmp(base ? base + 1 : path, "libjvm.so");
}

/* The file behind m, examined on first sight. NULL when it cannot be looked at now. */
static struct java_file *file_for(struct agent_java *j, const struct agent_proc *proc, const struct agent_proc_map *m)
{
	const uint64_t *key = agent_exe__key(m->exe);
	struct java_file *f = agent_file_verdicts__get(&j->files, key);
	char path[512];

	if (f || agent_exe__is_vdso(m->exe))
		return f;
	if (agent_proc_map__path(proc, m, path, sizeof(path)) < 0)
		return NULL;
	f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	memcpy(f->key, key, sizeof(f->key));
	f->libjvm = libjvm_name(path);
	return agent_file_verdicts__add(&j->files, f) < 0 ? NULL : f;
}

static struct agent_jvm_reader reader_of(uint32_t pid)
{
	struct agent_jvm_reader r = { agent_peek_cb, (void *)(uintptr_t)pid };

	return r;
}

/* The process's entry, made when missing. NULL + errno. */
static struct java_proc *proc_entry(struct agent_java *j, const struct agent_proc *proc)
{
	struct java_proc *e = sr_htab_ptrs__get(&j->procs, proc->key, sizeof(proc->key));

	if (e)
		return e;
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	memcpy(e->key, proc->key, sizeof(e->key));
	e->pid = proc->pid;
	if (sr_htab_ptrs__put(&j->procs, e) < 0) {
		free(e);
		errno = ENOMEM;
		return NULL;
	}
	return e;
}

/* The walker's view of the JVM: its layout and heaps. */
static int write_entry(struct agent_java *j, const struct agent_proc *proc, struct java_proc *e,
		       const struct agent_jvm_layout *l)
{
	struct agent_jvm_reader r = reader_of(proc->pid);
	struct hotspot_proc v = { 0 };
	int n = agent_jvm_heaps_read(&r, l, e->heaps, HOTSPOT_MAX_HEAPS);

	if (n < 0)
		return n;
	if (n == 0)
		return -EAGAIN;
	e->n_heaps = n;
	v.start_boottime_ns = proc->start_ns;
	v.low = UINT64_MAX;
	for (int i = 0; i < n; i++) {
		v.heaps[i].low = e->heaps[i].low;
		v.heaps[i].high = e->heaps[i].high;
		v.heaps[i].segmap = e->heaps[i].segmap;
		v.heaps[i].log2_segment = e->heaps[i].log2_segment;
		v.low = e->heaps[i].low < v.low ? e->heaps[i].low : v.low;
		v.high = e->heaps[i].high > v.high ? e->heaps[i].high : v.high;
	}
	v.n_heaps = (__u32)n;
	v.heapblock_size = l->heapblock_size;
	v.codeblob_name = l->codeblob_name;
	v.codeblob_frame_size = l->codeblob_frame_size;
	v.nmethod_compile_id = l->nmethod_compile_id;
	v.method_constmethod = l->method_constmethod;
	v.constmethod_size = l->constmethod_size;
	v.interp_method = (__s8)l->interp_frame_method;
	v.interp_bcp = (__s8)l->interp_frame_bcp;
	v.interp_sender_sp = (__s8)l->interp_frame_sender_sp;
	if (j->procs_fd >= 0 && bpf_map_update_elem(j->procs_fd, &proc->pid, &v, BPF_ANY) < 0)
		return -errno;
	return 0;
}

int agent_java__sync(struct agent_java *j, const struct agent_proc *proc)
{
	const struct agent_proc_map *m = NULL;
	const struct agent_jvm_layout *l;
	struct java_proc *e;
	uint64_t bias;
	int fd, r;

	for (size_t i = 0; i < proc->n_maps && !m; i++) {
		const struct java_file *f;

		if (!proc->maps[i].exe)
			continue;
		f = file_for(j, proc, &proc->maps[i]);
		if (f && f->libjvm && agent_proc_map__current(proc, &proc->maps[i]) &&
		    agent_proc_map__bias(&proc->maps[i], &bias) == 0)
			m = &proc->maps[i];
	}
	e = sr_htab_ptrs__get(&j->procs, proc->key, sizeof(proc->key));
	if (!m) {
		agent_java__forget(j, proc);
		return -ENOENT;
	}
	/* A JVM already given to the walker keeps its heaps: they are reserved once, at start-up. */
	if (e && e->ready) {
		struct hotspot_proc v;

		if (j->procs_fd < 0 ||
		    (bpf_map_lookup_elem(j->procs_fd, &proc->pid, &v) == 0 && v.start_boottime_ns == proc->start_ns))
			return 0;
		/*
		 * Its entry is gone: the process exec'd (another JVM, with the
		 * same pid and start time). What was cached for the old image
		 * goes first: a new JVM's compile IDs start again at 1, so its
		 * code could meet the old image's (pc, compile ID) keys.
		 */
		agent_java__forget(j, proc);
		e = NULL;
	}
	fd = agent_open_map_file(proc->pid, m->start, m->end, NULL);
	if (fd < 0)
		return fd;
	r = agent_jvm__add(j->jvm, proc->key, proc->pid, fd, bias);
	close(fd);
	l = r == 0 ? agent_jvm__layout(j->jvm, proc->key) : NULL;
	if (r == 0 && !l)
		r = -ENOENT;
	if (r == 0 || r == -EAGAIN) {
		e = proc_entry(j, proc);
		if (!e)
			return -errno;
	}
	if (r == 0)
		r = write_entry(j, proc, e, l);
	if (r == -EAGAIN) {
		j->stats.starting++;
		e->tries++;
		e->next_try = 0;
		return r;
	}
	if (r < 0) {
		agent_java__forget(j, proc);
		return r;
	}
	e->ready = true;
	j->stats.processes++;
	return 0;
}

void agent_java__retry(struct agent_java *j, const struct agent_proc *proc, uint64_t now)
{
	struct java_proc *e = sr_htab_ptrs__get(&j->procs, proc->key, sizeof(proc->key));

	if (!e || e->ready || e->tries >= AGENT_JAVA_MAX_TRIES)
		return;
	if (!e->next_try)
		e->next_try = now + AGENT_JAVA_RETRY_NS;
	if (now < e->next_try)
		return;
	e->next_try = now + AGENT_JAVA_RETRY_NS;
	agent_java__sync(j, proc);
}

void agent_java__forget(struct agent_java *j, const struct agent_proc *proc)
{
	struct java_proc *e = sr_htab_ptrs__remove(&j->procs, proc->key, sizeof(proc->key));
	struct hotspot_proc v;

	/* Its layout, named methods, compiled and stub pcs go with it. */
	agent_jvm__forget(j->jvm, proc->key);
	agent_pcache__forget(&j->pcs, proc->key);
	agent_pcache__forget(&j->stubs, proc->key);
	if (!e)
		return;
	free(e);
	/* Unless the PID already names a newer process. */
	if (j->procs_fd >= 0 && bpf_map_lookup_elem(j->procs_fd, &proc->pid, &v) == 0 &&
	    v.start_boottime_ns == proc->start_ns)
		bpf_map_delete_elem(j->procs_fd, &proc->pid);
}

/* Reads the frames of a compiled pc from the live process. Returns how many, or -ENOENT. */
static int compiled_frames(struct agent_java *j, const struct java_proc *e, const struct agent_jvm_layout *l,
			   uint64_t value, struct agent_jvm_frame *ret, int max)
{
	struct agent_jvm_reader r = reader_of(e->pid);
	uint64_t pc = value & HOTSPOT_PC_MASK, blob = 0, method;
	int32_t compile_id;
	int n = -ENOENT;

	for (int i = 0; i < e->n_heaps && n == -ENOENT; i++)
		if (pc >= e->heaps[i].low && pc < e->heaps[i].high)
			n = agent_jvm_blob_at(&r, l, &e->heaps[i], pc, &blob);
	if (n < 0)
		return -ENOENT;
	if (r.read(r.ctx, blob + l->nmethod_compile_id, &compile_id, sizeof(compile_id)) < 0)
		return -ENOENT;
	if (((uint64_t)(uint32_t)compile_id & HOTSPOT_COMPILE_ID_MASK) !=
	    ((value >> HOTSPOT_COMPILE_ID_SHIFT) & HOTSPOT_COMPILE_ID_MASK)) {
		j->stats.compiled_stale++;
		return -ENOENT;
	}
	n = agent_jvm_nmethod_frames(&r, l, blob, pc, ret, max);
	if (n > 0)
		return n;
	/* No debug information at this pc (a native wrapper, a prologue): the nmethod's own method. */
	if (r.read(r.ctx, blob + l->nmethod_method, &method, sizeof(method)) < 0 || !method)
		return -ENOENT;
	ret[0].method = method;
	ret[0].bci = -1;
	return 1;
}

int agent_java__frames(struct agent_java *j, const struct agent_proc *proc, uint64_t value, struct agent_jvm_frame *ret,
		       int max)
{
	const struct java_proc *e = sr_htab_ptrs__get(&j->procs, proc->key, sizeof(proc->key));
	const struct agent_jvm_layout *l;
	struct java_pc *c;
	uint8_t key[20];
	int n;

	if ((value & HOTSPOT_FRAME_MASK) != HOTSPOT_FRAME_FLAG || max < 1)
		return -ENOENT;
	if (!(value & HOTSPOT_FRAME_COMPILED)) {
		uint64_t bci = (value >> HOTSPOT_BCI_SHIFT) & HOTSPOT_BCI_NONE;

		ret[0].method = (value & ((1ULL << HOTSPOT_METHOD_BITS) - 1)) << 3;
		ret[0].bci = bci == HOTSPOT_BCI_NONE ? -1 : (int32_t)bci;
		return 1;
	}
	memcpy(key, proc->key, 12);
	memcpy(key + 12, &value, 8);
	c = (struct java_pc *)agent_pcache__get(&j->pcs, key);
	if (!c) {
		struct agent_jvm_frame frames[AGENT_JVM_MAX_SCOPES];

		l = e ? agent_jvm__layout(j->jvm, proc->key) : NULL;
		if (!l)
			return -ENOENT;
		n = compiled_frames(j, e, l, value, frames, AGENT_JVM_MAX_SCOPES);
		if (n < 0)
			return n;
		c = malloc(sizeof(*c) + (size_t)n * sizeof(c->frames[0]));
		if (!c)
			return -ENOMEM;
		memcpy(c->base.key, key, sizeof(key));
		c->n = n;
		memcpy(c->frames, frames, (size_t)n * sizeof(frames[0]));
		c->base.bytes = (uint32_t)(sizeof(*c) + (size_t)n * sizeof(c->frames[0]));
		if (agent_pcache__put(&j->pcs, &c->base) < 0) {
			free(c);
			return -ENOMEM;
		}
	}
	n = c->n < max ? c->n : max;
	memcpy(ret, c->frames, (size_t)n * sizeof(ret[0]));
	return n;
}

int agent_java__name(struct agent_java *j, const struct agent_proc *proc, const struct agent_jvm_frame *f,
		     struct agent_java_named *ret)
{
	struct agent_jvm_named nm;

	memset(ret, 0, sizeof(*ret));
	if (agent_jvm__method(j->jvm, proc->key, f->method, f->bci, &nm) < 0)
		return -ENOENT;
	snprintf(j->name, sizeof(j->name), "%s.%s", nm.klass, nm.name);
	ret->name = j->name;
	ret->file = nm.file;
	ret->line = nm.line;
	return 0;
}

const char *agent_java__stub(struct agent_java *j, const struct agent_proc *proc, uint64_t addr)
{
	const struct java_proc *e = sr_htab_ptrs__get(&j->procs, proc->key, sizeof(proc->key));
	const struct agent_jvm_layout *l;
	struct agent_jvm_reader r;
	struct java_stub *st;
	uint64_t blob = 0, name_ptr;
	uint8_t key[20];
	char name[JAVA_STUB_NAME_MAX + 1];
	int found = -ENOENT;

	if (!e || !e->ready)
		return NULL;
	memcpy(key, proc->key, 12);
	memcpy(key + 12, &addr, 8);
	st = (struct java_stub *)agent_pcache__get(&j->stubs, key);
	if (st) {
		j->stats.stubs_named++;
		return st->name;
	}
	l = agent_jvm__layout(j->jvm, proc->key);
	if (!l)
		return NULL;
	r = reader_of(e->pid);
	for (int i = 0; i < e->n_heaps && found == -ENOENT; i++)
		if (addr >= e->heaps[i].low && addr < e->heaps[i].high)
			found = agent_jvm_blob_at(&r, l, &e->heaps[i], addr, &blob);
	if (found < 0 || r.read(r.ctx, blob + l->codeblob_name, &name_ptr, sizeof(name_ptr)) < 0)
		return NULL;
	/* A C string in the JVM's memory: read in one piece, cut at its end, printable ASCII only. */
	memset(name, 0, sizeof(name));
	for (size_t len = JAVA_STUB_NAME_MAX; len >= 8; len /= 2)
		if (r.read(r.ctx, name_ptr, name, len) == 0)
			break;
	name[JAVA_STUB_NAME_MAX] = '\0';
	for (size_t i = 0; name[i]; i++)
		if (name[i] < 0x20 || name[i] > 0x7e)
			name[i] = '?';
	if (!name[0])
		return NULL;
	st = malloc(sizeof(*st));
	if (!st)
		return NULL;
	memcpy(st->base.key, key, sizeof(key));
	memcpy(st->name, name, sizeof(name));
	st->base.bytes = sizeof(*st);
	if (agent_pcache__put(&j->stubs, &st->base) < 0) {
		free(st);
		return NULL;
	}
	j->stats.stubs_named++;
	return st->name;
}

void agent_java__stats(struct agent_java *j, struct agent_java_stats *ret)
{
	struct agent_jvm_stats s;

	agent_jvm__stats(j->jvm, &s);
	j->stats.not_understood = s.not_understood;
	j->stats.methods_cached = s.methods_cached;
	j->stats.methods_bytes = s.methods_bytes;
	j->stats.method_reads = s.method_reads;
	j->stats.method_read_errors = s.method_read_errors;
	j->stats.evicted = s.evicted + j->pcs.evicted + j->stubs.evicted;
	j->stats.pcs_cached = j->pcs.n;
	j->stats.stubs_cached = j->stubs.n;
	j->stats.pcs_bytes = agent_pcache__bytes(&j->pcs);
	j->stats.stubs_bytes = agent_pcache__bytes(&j->stubs);
	*ret = j->stats;
}
