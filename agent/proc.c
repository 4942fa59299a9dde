// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/fileio.h"
#include "common/grow.h"
#include "container-open.h"
#include "common/htab.h"
#include "proc.h"
#include "proc-private.h"
#include "procmaps.h"
#include "procstat.h"
#include "util.h"
#include "stackrelay/v1/types.pb.h"

/* Above this no user mapping exists on 64-bit Linux (x86-64 and arm64 with 5-level tables: 57 bits). */
#define AGENT_USER_ADDR_LIMIT (1ULL << 57)

struct agent_procs {
	struct sr_htab_ptrs procs;
	struct sr_htab_ptrs exes;
	struct agent_store *store;
	uint64_t max_processes;
	long clk_tck;
	struct agent_exe *vdso;
	uint64_t vdso_size;
	struct agent_procs_stats stats;
	void (*on_file)(void *ctx, uint64_t dev, uint64_t ino, bool known);
	void *on_file_ctx;
};

static const void *proc_key(const void *v, size_t *len)
{
	*len = sizeof(((struct agent_proc *)0)->key);
	return ((const struct agent_proc *)v)->key;
}

static const void *exe_key(const void *v, size_t *len)
{
	*len = sizeof(((struct agent_exe *)0)->key);
	return ((const struct agent_exe *)v)->key;
}

static void make_key(uint8_t key[12], uint32_t pid, uint64_t start_ns)
{
	memcpy(key, &pid, 4);
	memcpy(key + 4, &start_ns, 8);
}

/* The vDSO is the same image in every (64-bit) process: identify it once from our own. */
static struct agent_exe *load_vdso(struct agent_procs *p, uint64_t *ret_size)
{
	unsigned long base = getauxval(AT_SYSINFO_EHDR);
	char *maps = NULL;
	size_t len, n = 0;
	struct agent_map *m = NULL;
	struct agent_exe *e = NULL;
	struct agent_exe_def def = { 0 };
	uint64_t size = 0;

	if (!base || sr_read_file("/proc/self/maps", AGENT_MAPS_MAX_BYTES, &maps, &len) < 0)
		return NULL;
	if (agent_procmaps_parse(maps, len, false, &m, &n, NULL) < 0)
		goto out;
	for (size_t i = 0; i < n; i++)
		if (m[i].kind == AGENT_MAP_VDSO && m[i].start == base)
			size = m[i].end - m[i].start;
	if (!size)
		goto out;
	*ret_size = size;
	e = calloc(1, sizeof(*e));
	if (!e)
		goto out;
	e->store_idx = -1;
	e->refs = 1; /* never evicted */
	if (agent_elf_read_mem((const void *)base, size, &e->elf) < 0 || !e->elf.build_id_len)
		goto out;
	memcpy(def.id, e->elf.build_id, e->elf.build_id_len);
	def.id_len = e->elf.build_id_len;
	def.id_kind = stackrelay_v1_ExecutableIdKind_EXECUTABLE_ID_KIND_GNU_BUILD_ID;
	def.path = "[vdso]";
	def.size = size;
	e->store_idx = agent_store__add_exe(p->store, &def);
out:
	agent_procmaps_free(m, n);
	free(maps);
	return e;
}

struct agent_procs *agent_procs_new(struct agent_store *store, uint64_t max_processes)
{
	struct agent_procs *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	sr_htab_ptrs_init(&p->procs, proc_key);
	sr_htab_ptrs_init(&p->exes, exe_key);
	p->store = store;
	p->max_processes = max_processes ? max_processes : AGENT_DEFAULT_MAX_PROCESSES;
	p->clk_tck = sysconf(_SC_CLK_TCK);
	if (p->clk_tck <= 0)
		p->clk_tck = 100;
	p->vdso = load_vdso(p, &p->vdso_size);
	return p;
}

void agent_procs__on_file(struct agent_procs *p, void (*fn)(void *ctx, uint64_t dev, uint64_t ino, bool known),
			  void *ctx)
{
	p->on_file = fn;
	p->on_file_ctx = ctx;
}

const uint64_t *agent_exe__key(const struct agent_exe *e)
{
	return e->key;
}

bool agent_exe__is_vdso(const struct agent_exe *e)
{
	/* Files have a device and inode; the vDSO's key is all zeros. */
	return e->key[0] == 0 && e->key[1] == 0;
}

static void exe_unref(struct agent_exe *e)
{
	if (e && e->refs > 0)
		e->refs--;
}

static void proc_clear_maps(struct agent_proc *proc)
{
	for (size_t i = 0; i < proc->n_maps; i++)
		exe_unref(proc->maps[i].exe);
	SR_FREE(proc->maps);
	proc->n_maps = proc->cap_maps = 0;
	proc->maps_gen++;
}

static void proc_free(struct agent_proc *proc)
{
	if (!proc)
		return;
	proc_clear_maps(proc);
	free(proc->exe_path);
	free(proc);
}

void agent_procs_free(struct agent_procs *p)
{
	void *v;

	if (!p)
		return;
	for (size_t i = 0; (v = sr_htab_ptrs__next(&p->procs, &i));)
		proc_free(v);
	sr_htab_ptrs_done(&p->procs);
	for (size_t i = 0; (v = sr_htab_ptrs__next(&p->exes, &i));) {
		free(((struct agent_exe *)v)->path);
		free(v);
	}
	sr_htab_ptrs_done(&p->exes);
	free(p->vdso);
	free(p);
}

static uint64_t timespec_ns(const struct timespec *ts)
{
	return (uint64_t)ts->tv_sec * 1000000000ULL + (uint64_t)ts->tv_nsec;
}

/* Drop unused identified files when the cache is over its limit. */
/* Frees a cached file no mapping refers to, and its hold on the store's executable. */
static void exe_forget(struct agent_procs *p, struct agent_exe *e)
{
	if (e->store_idx >= 0)
		agent_store__put_exe(p->store, (uint32_t)e->store_idx);
	free(e->path);
	free(e);
}

/* A cached file leaves the cache: BPF is told, so that its next mapping wakes the agent to identify it again. */
static void exe_drop(struct agent_procs *p, struct agent_exe *e)
{
	sr_htab_ptrs__remove(&p->exes, e->key, sizeof(e->key));
	if (p->on_file)
		p->on_file(p->on_file_ctx, e->key[0], e->key[1], false);
	exe_forget(p, e);
}

/*
 * Drops the files no process maps: at AGENT_EXE_CACHE_MAX all of them, and
 * before (window > 0) those no process mapped for AGENT_FILE_IDLE_WINDOWS
 * windows, so that a host running new executables all the time (a CI node,
 * new build IDs every build) holds the last minute's, not the last 8192.
 */
static void exes_trim(struct agent_procs *p, uint64_t window)
{
	bool full = p->exes.h.n >= AGENT_EXE_CACHE_MAX;
	struct agent_exe *e;

	if (!full && !window)
		return;
	for (size_t i = 0; (e = sr_htab_ptrs__next(&p->exes, &i));) {
		if (e->refs > 0 && window > e->last_window) /* mapped now: idle from here on at the earliest */
			e->last_window = window;
		else if (e->refs == 0 && (full || e->last_window + AGENT_FILE_IDLE_WINDOWS < window)) {
			p->stats.files_dropped++;
			exe_drop(p, e);
			/* Removing leaves a tombstone, so iteration can go on. */
		}
	}
}

/* proc maps cached file e at [start, end): a reference for the mapping, and e is in use this window. */
static void exe_take(struct agent_procs *p, struct agent_exe *e, const struct agent_proc *proc, uint64_t start,
		     uint64_t end, const char *path)
{
	if (proc->last_window > e->last_window)
		e->last_window = proc->last_window;
	if (e->store_idx >= 0)
		agent_store__exe_seen(p->store, (uint32_t)e->store_idx, proc->pid, proc->start_ns, start, end, path);
	e->refs++;
}

/* Identify the file behind one mapping. Returns a referenced cache entry or NULL. */
static struct agent_exe *resolve_file(struct agent_procs *p, struct agent_proc *proc, const struct agent_map *m)
{
	struct stat st;
	uint64_t key[4];
	struct agent_exe *e;
	struct agent_exe_def def = { 0 };
	int fd;

	/*
	 * Open first and identify by the descriptor (fstat), never stat a path
	 * and open it after: between the two a container can put a FIFO or a
	 * symlink there. map_files reaches deleted and other-namespace files;
	 * without access to it, the path inside the process's root is trusted
	 * only if it is the same inode.
	 */
	fd = agent_open_map_file(proc->pid, m->start, m->end, &st);
	if (fd < 0) {
		if (m->deleted)
			return NULL;
		fd = agent_open_in_root(proc->pid, m->path, 0, m->inode, &st);
		if (fd < 0)
			return NULL;
	}
	key[0] = (uint64_t)st.st_dev;
	key[1] = (uint64_t)st.st_ino;
	key[2] = timespec_ns(&st.st_mtim);
	key[3] = (uint64_t)st.st_size;
	e = sr_htab_ptrs__get(&p->exes, key, sizeof(key));
	if (e)
		goto found;

	exes_trim(p, 0);
	e = calloc(1, sizeof(*e));
	if (!e)
		goto fail;
	memcpy(e->key, key, sizeof(key));
	e->store_idx = -1;
	/* Kept so that the runtimes (python.c, nodejs.c, java.c) judge the file by name without reading the link again. */
	e->path = m->path ? strdup(m->path) : NULL;
	p->stats.elf_reads++;
	if (agent_elf_read_fd(fd, &e->elf) == 0) {
		def.path = m->path;
		def.size = (uint64_t)st.st_size;
		def.debuglink = e->elf.debuglink;
		def.is_go = e->elf.is_go;
		def.dev = key[0];
		def.ino = key[1];
		if (e->elf.build_id_len) {
			memcpy(def.id, e->elf.build_id, e->elf.build_id_len);
			def.id_len = e->elf.build_id_len;
			def.id_kind = stackrelay_v1_ExecutableIdKind_EXECUTABLE_ID_KIND_GNU_BUILD_ID;
			e->store_idx = agent_store__add_exe(p->store, &def);
		} else if (agent_content_hash_fd(fd, (uint64_t)st.st_size, def.id) == 0) {
			def.id_len = 16;
			def.id_kind = stackrelay_v1_ExecutableIdKind_EXECUTABLE_ID_KIND_CONTENT_HASH;
			e->store_idx = agent_store__add_exe(p->store, &def);
		}
	} else {
		p->stats.elf_errors++;
	}
	if (sr_htab_ptrs__put(&p->exes, e) < 0) {
		exe_forget(p, e);
		goto fail;
	}
	if (p->on_file)
		p->on_file(p->on_file_ctx, key[0], key[1], true);
found:
	exe_take(p, e, proc, m->start, m->end, m->path);
	close(fd);
	return e;
fail:
	close(fd);
	return NULL;
}

/* dir: the process's /proc directory when the caller holds it, else -1 (the path is opened). */
static void read_maps(struct agent_procs *p, struct agent_proc *proc, int dir, uint64_t now_ns)
{
	char path[64], *buf = NULL;
	struct agent_map *m = NULL;
	size_t len, n = 0;
	int r;

	proc->maps_read_ns = now_ns;
	proc->refresh_free = false;
	p->stats.maps_reads++;
	if (dir >= 0) {
		r = sr_read_fileat(dir, "maps", AGENT_MAPS_MAX_BYTES, &buf, &len);
	} else {
		snprintf(path, sizeof(path), "/proc/%u/maps", proc->pid);
		r = sr_read_file(path, AGENT_MAPS_MAX_BYTES, &buf, &len);
	}
	if (r < 0) {
		p->stats.maps_read_errors++;
		if (r == -ENOENT || r == -ESRCH)
			proc->exited = true;
		return;
	}
	/* -E2BIG still returns the first entries: better than none. */
	r = agent_procmaps_parse(buf, len, true, &m, &n, NULL);
	free(buf);
	if (r < 0 && r != -E2BIG) {
		p->stats.maps_read_errors++;
		return;
	}
	proc_clear_maps(proc);
	if (n) {
		proc->maps = calloc(n, sizeof(*proc->maps));
		if (!proc->maps) {
			agent_procmaps_free(m, n);
			return;
		}
	}
	for (size_t i = 0; i < n; i++) {
		struct agent_proc_map *pm = &proc->maps[i];
		pm->start = m[i].start;
		pm->end = m[i].end;
		pm->offset = m[i].offset;
		pm->anon = m[i].kind == AGENT_MAP_ANON ||
			   (m[i].kind == AGENT_MAP_SPECIAL && m[i].path && strncmp(m[i].path, "[anon:", 6) == 0);
		if (m[i].kind == AGENT_MAP_FILE && m[i].path && m[i].path[0] == '/')
			pm->exe = resolve_file(p, proc, &m[i]);
		else if (m[i].kind == AGENT_MAP_VDSO && p->vdso && p->vdso->store_idx >= 0) {
			pm->exe = p->vdso;
			pm->exe->refs++;
		}
	}
	proc->n_maps = proc->cap_maps = n;
	proc->maps_ok = true;
	proc->maps_gen++;
	agent_procmaps_free(m, n);
}

static uint64_t now_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return timespec_ns(&ts);
}

/* The start time in ticks from /proc/PID/stat, through dir (the process's /proc directory), read into the stack. */
static int read_stat_start(int dir, uint64_t *ret_ticks)
{
	char buf[2048];
	size_t len;
	int r = sr_read_fileat_into(dir, "stat", buf, sizeof(buf), &len);

	return r < 0 ? r : agent_procstat_start_ticks(buf, len, ret_ticks);
}

/*
 * stat, exe and cgroup, through dir (the process's /proc directory); false
 * when the process is gone (or its PID is another's). dir names the process
 * it was opened for until that one exits: checked once here, it is the
 * sampled process for every read through it after.
 */
static bool read_info(struct agent_procs *p, struct agent_proc *proc, int dir)
{
	char buf[PATH_MAX], *cg = NULL;
	size_t len;
	uint64_t ticks = 0;
	ssize_t n;

	proc->info_ok = true;
	/* The start time in /proc must be the one BPF saw, or this PID is already another process. */
	if (dir < 0 || read_stat_start(dir, &ticks) < 0 ||
	    ticks != proc->start_ns / (1000000000ULL / (uint64_t)p->clk_tck)) {
		proc->exited = true;
		return false;
	}
	/* Names come with every sample from BPF (thread and group leader comm); no /proc/PID/comm read. */
	n = readlinkat(dir, "exe", buf, sizeof(buf) - 1);
	if (n > 0) {
		buf[n] = '\0';
		free(proc->exe_path);
		proc->exe_path = strdup(buf);
	}
	if (sr_read_fileat(dir, "cgroup", 1 << 20, &cg, &len) == 0) {
		agent_cgroup_parse(cg, len, &proc->cg);
		free(cg);
	}
	return true;
}

/* The process's /proc directory (O_PATH), or -1. */
static int open_proc_dir(uint32_t pid)
{
	char path[32];

	snprintf(path, sizeof(path), "/proc/%u", pid);
	return open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
}

static void read_info_only(struct agent_procs *p, struct agent_proc *proc)
{
	int dir = open_proc_dir(proc->pid);

	read_info(p, proc, dir);
	if (dir >= 0)
		close(dir);
}

static void read_proc(struct agent_procs *p, struct agent_proc *proc)
{
	int dir = open_proc_dir(proc->pid);

	if (read_info(p, proc, dir)) {
		read_maps(p, proc, dir, now_mono_ns());
		proc->refresh_free = true;
	}
	if (dir >= 0)
		close(dir);
}

static struct agent_proc *lookup(struct agent_procs *p, uint32_t pid, uint64_t start_ns)
{
	uint8_t key[12];

	make_key(key, pid, start_ns);
	return sr_htab_ptrs__get(&p->procs, key, sizeof(key));
}

static struct agent_proc *proc_new(struct agent_procs *p, uint32_t pid, uint64_t start_ns, uint64_t window)
{
	struct agent_proc *proc = calloc(1, sizeof(*proc));

	if (!proc)
		return NULL;
	make_key(proc->key, pid, start_ns);
	proc->pid = pid;
	proc->start_ns = start_ns;
	proc->last_window = window;
	proc->maps_gen = 1; /* unwind_gen 0: never given to the unwinder */
	if (sr_htab_ptrs__put(&p->procs, proc) < 0) {
		free(proc);
		return NULL;
	}
	return proc;
}

struct agent_proc *agent_procs__get(struct agent_procs *p, uint32_t pid, uint64_t start_ns, uint64_t window)
{
	struct agent_proc *proc = lookup(p, pid, start_ns);

	if (proc) {
		proc->last_window = window;
		if (proc->stale) {
			proc->stale = false;
			proc_clear_maps(proc);
			proc->maps_ok = false;
			proc->mm = 0;
			proc->maps_fruitless = 0;
			read_proc(p, proc);
		} else if (!proc->info_ok) {
			/* Known from its mappings alone: its name and cgroup now, its maps only on a miss. */
			read_info_only(p, proc);
		}
		return proc;
	}
	proc = proc_new(p, pid, start_ns, window);
	if (proc)
		read_proc(p, proc);
	return proc;
}

static int maps_insert(struct agent_proc *proc, const struct agent_proc_map *m);

void agent_procs__exec(struct agent_procs *p, uint32_t pid, uint64_t start_ns, uint64_t mm, uint64_t vdso,
		       uint64_t window)
{
	struct agent_proc *proc = lookup(p, pid, start_ns);

	(void)window;
	if (!proc)
		return;
	/* The vDSO is mapped by exec without mmap(2): add it from the record. */
	if (mm && proc->mm == mm && vdso && p->vdso && p->vdso->store_idx >= 0) {
		struct agent_proc_map m = { .start = vdso, .end = vdso + p->vdso_size, .exe = p->vdso };
		p->vdso->refs++;
		if (maps_insert(proc, &m) < 0)
			exe_unref(p->vdso);
	}
	/*
	 * The new image's mappings came before this record: when they are
	 * the ones we hold, only the name and executable path are stale.
	 * Otherwise read everything at the next sample (reading now would be
	 * wasted on the many processes that exit before any sample).
	 */
	if (mm && proc->mm == mm)
		proc->info_ok = false;
	else
		proc->stale = true;
}

/* Inserts m into the sorted maps, dropping what it overlaps. Takes over m->exe's reference. */
static int maps_insert(struct agent_proc *proc, const struct agent_proc_map *m)
{
	size_t keep = 0, at;
	struct agent_proc_map *maps;

	if (sr_grow((void **)&proc->maps, &proc->cap_maps, proc->n_maps + 1, sizeof(*proc->maps), 8) < 0)
		return -ENOMEM;
	maps = proc->maps;
	for (size_t i = 0; i < proc->n_maps; i++) {
		if (maps[i].start < m->end && m->start < maps[i].end) {
			exe_unref(maps[i].exe);
			continue;
		}
		maps[keep++] = maps[i];
	}
	for (at = keep; at > 0 && maps[at - 1].start > m->start; at--)
		;
	memmove(&maps[at + 1], &maps[at], (keep - at) * sizeof(*maps));
	maps[at] = *m;
	proc->n_maps = keep + 1;
	proc->maps_gen++;
	return 0;
}

/* The file of a reported mapping: from the cache by identity, or read through map_files while the process lives. */
static struct agent_exe *mmap_file(struct agent_procs *p, struct agent_proc *proc, const struct profile_mmap_event *ev)
{
	uint64_t key[4] = { ev->dev, ev->ino, ev->mtime_ns, ev->size };
	char mf[96], target[PATH_MAX];
	struct agent_map m = { 0 };
	struct agent_exe *e = sr_htab_ptrs__get(&p->exes, key, sizeof(key));
	ssize_t n;

	if (e) {
		/* BPF forgot it (LRU): remind it, or every mapping of it wakes us. */
		if ((ev->flags & PROFILE_MMAP_UNKNOWN_FILE) && p->on_file)
			p->on_file(p->on_file_ctx, key[0], key[1], true);
		exe_take(p, e, proc, ev->start, ev->end, NULL);
		return e;
	}
	agent_map_files_path(mf, sizeof(mf), proc->pid, ev->start, ev->end);
	n = readlink(mf, target, sizeof(target) - 1);
	if (n <= 0) {
		p->stats.mmap_files_gone++;
		return NULL;
	}
	target[n] = '\0';
	m.start = ev->start;
	m.end = ev->end;
	m.offset = ev->offset;
	m.inode = ev->ino;
	m.kind = AGENT_MAP_FILE;
	m.perms = AGENT_MAP_READ | AGENT_MAP_EXEC;
	n = (ssize_t)strlen(target);
	if (n > 10 && strcmp(target + n - 10, " (deleted)") == 0) {
		target[n - 10] = '\0';
		m.deleted = true;
	}
	m.path = target;
	e = resolve_file(p, proc, &m);
	if (e)
		p->stats.mmap_files_identified++;
	else
		p->stats.mmap_files_gone++;
	return e;
}

void agent_procs__fork(struct agent_procs *p, const struct profile_fork_event *ev, uint64_t window)
{
	struct agent_proc *parent = lookup(p, ev->parent_pid, ev->parent_start_boottime_ns), *child;

	/* An unknown parent: the child is read from /proc at its first sample, like any process met late. */
	if (!parent || !parent->n_maps || lookup(p, ev->hdr.pid, ev->hdr.start_boottime_ns))
		return;
	child = proc_new(p, ev->hdr.pid, ev->hdr.start_boottime_ns, window);
	if (!child)
		return;
	child->maps = malloc(parent->n_maps * sizeof(*child->maps));
	if (!child->maps)
		return;
	memcpy(child->maps, parent->maps, parent->n_maps * sizeof(*child->maps));
	for (size_t i = 0; i < parent->n_maps; i++)
		if (child->maps[i].exe)
			child->maps[i].exe->refs++;
	child->n_maps = child->cap_maps = parent->n_maps;
	child->maps_ok = true;
	child->mm = ev->mm;
	child->cg = parent->cg;
	p->stats.forks_copied++;
}

struct agent_proc *agent_procs__mmap(struct agent_procs *p, const struct profile_mmap_event *ev, uint64_t window)
{
	struct agent_proc *proc = lookup(p, ev->hdr.pid, ev->hdr.start_boottime_ns);
	struct agent_proc_map m = { 0 }; /* an mmap event names a file: not anonymous */

	p->stats.mmap_events++;
	if (!proc) {
		/* Its first sight: name and cgroup are read at its first sample, maps only on a miss. */
		proc = proc_new(p, ev->hdr.pid, ev->hdr.start_boottime_ns, window);
		if (!proc)
			return NULL;
		proc->maps_ok = true;
		proc->mm = ev->mm;
	} else if (proc->mm != ev->mm) {
		/* A new image (exec): the old one's mappings are gone with its address space. */
		if (proc->mm)
			proc_clear_maps(proc);
		proc->mm = ev->mm;
		proc->stale = false;
		proc->info_ok = false;
		proc->maps_ok = true;
	}
	m.start = ev->start;
	m.end = ev->end;
	m.offset = ev->offset;
	m.exe = mmap_file(p, proc, ev);
	if (maps_insert(proc, &m) < 0)
		exe_unref(m.exe);
	return proc;
}

void agent_procs__exit(struct agent_procs *p, uint32_t pid, uint64_t start_ns)
{
	struct agent_proc *proc = lookup(p, pid, start_ns);

	if (proc)
		proc->exited = true;
}

bool agent_procs__user_frame(struct agent_procs *p, struct agent_proc *proc, uint64_t addr, uint64_t now_ns,
			     struct agent_frame *ret)
{
	const struct agent_proc_map *m = NULL;
	uint64_t vaddr;
	int attempt;

	ret->address = addr;
	ret->exe = AGENT_EXE_NONE;
	ret->line = 0;
	ret->kind = stackrelay_v1_FrameKind_FRAME_KIND_UNKNOWN;
	for (attempt = 0; attempt < 2; attempt++) {
		if ((m = agent_proc__find_map(proc, addr)))
			break;
		/* A library loaded after we read the maps (dlopen): read them again, not too often. */
		if (attempt > 0 && proc->maps_fruitless < AGENT_MAPS_REFRESH_BACKOFF_MAX)
			proc->maps_fruitless++;
		if (attempt > 0 || proc->exited || addr < 4096 || addr >= AGENT_USER_ADDR_LIMIT) {
			p->stats.unattributed[proc->exited && !proc->n_maps ? AGENT_UNATTR_PROC_GONE
									    : AGENT_UNATTR_NO_MAPPING]++;
			return false;
		}
		/* Nothing known at all (read mid-exec, or it failed): retry sooner. */
		if (!proc->refresh_free &&
		    now_ns - proc->maps_read_ns < (proc->n_maps ? AGENT_MAPS_REFRESH_MIN_NS << proc->maps_fruitless
								: AGENT_MAPS_RETRY_EMPTY_NS)) {
			p->stats.unattributed[AGENT_UNATTR_NO_MAPPING]++;
			return false;
		}
		read_maps(p, proc, -1, now_ns);
	}
	/* Found by a re-read (attempt 1): the re-reads pay off again. */
	if (attempt > 0)
		proc->maps_fruitless = 0;
	if (!m->exe) {
		p->stats.unattributed[m->anon ? AGENT_UNATTR_ANONYMOUS : AGENT_UNATTR_FILE_GONE]++;
		return m->anon;
	}
	if (m->exe->store_idx < 0 || agent_elf_offset_to_vaddr(&m->exe->elf, addr - m->start + m->offset, &vaddr) < 0) {
		p->stats.unattributed[AGENT_UNATTR_NOT_ELF]++;
		return false;
	}
	ret->address = vaddr;
	ret->exe = (uint32_t)m->exe->store_idx;
	ret->kind = stackrelay_v1_FrameKind_FRAME_KIND_USER;
	return false;
}

static int cmp_window(const void *a, const void *b)
{
	const struct agent_proc *x = *(struct agent_proc *const *)a, *y = *(struct agent_proc *const *)b;

	return x->last_window < y->last_window ? -1 : x->last_window > y->last_window;
}

bool agent_proc__same_image(struct agent_procs *p, const struct agent_proc *proc, uint64_t mm, size_t n_frames)
{
	if (!mm || !proc->mm || mm == proc->mm)
		return true;
	p->stats.unattributed[AGENT_UNATTR_OTHER_IMAGE] += n_frames;
	return false;
}

void agent_procs__gc(struct agent_procs *p, uint64_t window, void (*fn)(void *ctx, struct agent_proc *proc), void *ctx)
{
	struct agent_proc *proc, **all;
	size_t n = 0;

	all = malloc((p->procs.h.n + 1) * sizeof(*all));
	if (!all)
		return;
	for (size_t i = 0; (proc = sr_htab_ptrs__next(&p->procs, &i));)
		all[n++] = proc;
	qsort(all, n, sizeof(*all), cmp_window);
	for (size_t i = 0; i < n; i++) {
		bool over = (n - i) > p->max_processes;
		proc = all[i];
		if (over || proc->exited || proc->last_window + AGENT_PROC_IDLE_WINDOWS < window) {
			sr_htab_ptrs__remove(&p->procs, proc->key, sizeof(proc->key));
			if (fn)
				fn(ctx, proc);
			if (over)
				p->stats.retired_limit++;
			else if (proc->exited)
				p->stats.retired_exited++;
			else
				p->stats.retired_idle++;
			proc_free(proc);
		}
	}
	free(all);
	exes_trim(p, window);
}

void agent_procs__stats(struct agent_procs *p, struct agent_procs_stats *ret)
{
	void *v;

	*ret = p->stats;
	ret->processes = p->procs.h.n;
	ret->executables_cached = p->exes.h.n;
	ret->processes_bytes = p->procs.h.cap * p->procs.h.elem;
	for (size_t i = 0; (v = sr_htab_ptrs__next(&p->procs, &i));) {
		const struct agent_proc *proc = v;
		ret->processes_bytes += sizeof(*proc) + proc->n_maps * sizeof(proc->maps[0]) +
					(proc->exe_path ? strlen(proc->exe_path) + 1 : 0);
	}
	ret->executables_bytes = p->exes.h.cap * p->exes.h.elem + p->exes.h.n * sizeof(struct agent_exe);
	for (size_t i = 0; (v = sr_htab_ptrs__next(&p->exes, &i));) {
		const struct agent_exe *e = v;
		ret->executables_bytes += e->path ? strlen(e->path) + 1 : 0;
	}
}
