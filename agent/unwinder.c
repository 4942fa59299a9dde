// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <gelf.h>
#include <libelf.h>
#include <linux/bpf.h>
#include <sys/auxv.h>
#include <sys/mman.h>

#include "container-open.h"
#include "common/htab.h"
#include "common/list.h"
#include "proc.h"
#include "unwind-table.h"
#include "unwinder.h"

/* What a BPF array costs beyond its values (struct bpf_array and page rounding), for the memory bound. */
#define TABLE_MAP_OVERHEAD 4096

const char *const agent_unwind_no_table_names[AGENT_UNWIND_NT__MAX] = {
#if defined(__aarch64__)
	[AGENT_UNWIND_NT_FOREIGN] = "not_arm64",
#else
	[AGENT_UNWIND_NT_FOREIGN] = "not_x86_64",
#endif
	[AGENT_UNWIND_NT_NO_CFI] = "no_cfi",	 [AGENT_UNWIND_NT_MALFORMED] = "malformed",
	[AGENT_UNWIND_NT_TOO_BIG] = "too_big",	 [AGENT_UNWIND_NT_UNREADABLE] = "unreadable",
	[AGENT_UNWIND_NT_KERNEL] = "kernel",
};

/* One file's table, loaded or known to be impossible (id 0: follow frame pointers in it). */
struct table {
	uint64_t key[4]; /* the file: dev, ino, mtime_ns, size (struct agent_exe's key) */
	uint32_t id;
	uint32_t n_rows;
	uint64_t base;
	uint64_t bytes;
	bool published;		 /* in unwind_files */
	int fd;			 /* its rows' map while it waits for publish_pending(); -1 after */
	struct sr_list_node lru; /* loaded tables only */
};

struct agent_unwinder {
	struct agent_unwinder_opts o;
	struct sr_htab_ptrs tables;
	struct sr_list lru; /* front: most recently written into a process */
	uint32_t next_id;
	struct agent_unwinder_stats stats;
	struct unwind_proc scratch;
	/* Tables filled but not yet in unwind_tables (one sync's worth; see publish_pending()). */
	struct table *pending[UNWIND_MAX_MAPPINGS + 1];
	size_t n_pending;
};

static const void *table_key(const void *v, size_t *len)
{
	*len = sizeof(((struct table *)0)->key);
	return ((const struct table *)v)->key;
}

struct agent_unwinder *agent_unwinder_new(const struct agent_unwinder_opts *o)
{
	struct agent_unwinder *u = calloc(1, sizeof(*u));

	if (!u) {
		errno = ENOMEM;
		return NULL;
	}
	u->o = *o;
	if (!u->o.max_rows)
		u->o.max_rows = AGENT_UNWIND_MAX_ROWS_DEFAULT;
	sr_htab_ptrs_init(&u->tables, table_key);
	u->next_id = 1;
	return u;
}

void agent_unwinder_free(struct agent_unwinder *u)
{
	void *v;

	if (!u)
		return;
	for (size_t i = 0; (v = sr_htab_ptrs__next(&u->tables, &i));)
		free(v);
	sr_htab_ptrs_done(&u->tables);
	free(u);
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* The BPF side's key of a file (struct unwind_file_key): the same four values as struct agent_exe's. */
static void file_key(const struct table *t, struct unwind_file_key *ret)
{
	ret->dev = t->key[0];
	ret->ino = t->key[1];
	ret->mtime_ns = t->key[2];
	ret->size = t->key[3];
}

static void evict(struct agent_unwinder *u, struct table *t)
{
	struct unwind_file_key fk;

	/* Withdrawn from unwind_files first, so no new mapping picks up the ID being retired. */
	if (t->published) {
		file_key(t, &fk);
		bpf_map_delete_elem(u->o.files_fd, &fk);
	}
	bpf_map_delete_elem(u->o.tables_fd, &t->id);
	/* Filled but never published (sr_htab_ptrs__put() failed right after): out of the pending list. */
	if (t->fd >= 0) {
		for (size_t i = 0; i < u->n_pending; i++)
			if (u->pending[i] == t)
				u->pending[i] = u->pending[--u->n_pending];
		close(t->fd);
		t->fd = -1;
	}
	sr_list__unlink(&u->lru, &t->lru);
	u->stats.tables--;
	u->stats.table_bytes -= t->bytes;
	u->stats.table_rows -= t->n_rows;
	u->stats.tables_evicted++;
	/* Forget it entirely: a later use builds it again under a new ID. */
	sr_htab_ptrs__remove(&u->tables, t->key, sizeof(t->key));
	free(t);
}

/* Makes room for bytes more, never evicting keep. */
static void make_room(struct agent_unwinder *u, uint64_t bytes, const struct table *keep)
{
	while (u->stats.table_bytes + bytes > u->o.max_bytes && u->lru.tail) {
		struct table *t = SR_LIST_ENTRY(u->lru.tail, struct table, lru);
		/* Pending tables are the newest: once the tail is one, nothing older is left. */
		if (t == keep || t->fd >= 0)
			break;
		evict(u, t);
	}
}

static enum agent_unwind_no_table no_table_reason(int r)
{
	switch (r) {
	case -ENOENT:
		return AGENT_UNWIND_NT_NO_CFI;
	case -ENOEXEC:
		return AGENT_UNWIND_NT_FOREIGN;
	case -E2BIG:
		return AGENT_UNWIND_NT_TOO_BIG;
	default:
		return AGENT_UNWIND_NT_MALFORMED;
	}
}

int agent_unwind_rows_map(const struct agent_unwind_table *t)
{
	LIBBPF_OPTS(bpf_map_create_opts, mo, .map_flags = BPF_F_INNER_MAP | BPF_F_MMAPABLE);
	size_t bytes = t->n_rows * sizeof(struct unwind_row);
	void *mem;
	int fd, r;

	fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "sr_unwind_rows", sizeof(uint32_t), sizeof(struct unwind_row),
			    (uint32_t)t->n_rows, &mo);
	if (fd < 0)
		return -errno;
	/* One memcpy: a batch update took about 400 ns a row (libLLVM's million rows: 0.4 s). */
	mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (mem == MAP_FAILED) {
		r = -errno;
		close(fd);
		return r;
	}
	memcpy(mem, t->rows, bytes);
	munmap(mem, bytes);
	/* Read-only from here on for user space too: the BPF side trusts a table never changes under an ID. */
	if (bpf_map_freeze(fd) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	return fd;
}

/* Creates and fills the BPF array for a built table; publish_pending() makes it visible under t->id. */
static int fill(struct agent_unwinder *u, struct table *t, const struct agent_unwind_table *ut)
{
	int fd;

	if (u->n_pending == sizeof(u->pending) / sizeof(u->pending[0]))
		return -ENOSPC;
	fd = agent_unwind_rows_map(ut);
	if (fd < 0)
		return fd;
	t->id = u->next_id++;
	if (u->next_id == 0)
		u->next_id = 1;
	t->fd = fd;
	u->pending[u->n_pending++] = t;
	return 0;
}

/* A table the kernel refused: kept as "no table" (frame pointers), its memory given back. */
static void unload(struct agent_unwinder *u, struct table *t)
{
	sr_list__unlink(&u->lru, &t->lru);
	u->stats.tables--;
	u->stats.tables_built--;
	u->stats.table_bytes -= t->bytes;
	u->stats.table_rows -= t->n_rows;
	u->stats.no_table[AGENT_UNWIND_NT_KERNEL]++;
	t->id = 0;
	t->bytes = 0;
}

/*
 * Puts the filled tables into unwind_tables in one batch: the kernel waits
 * for an RCU grace period after each update of a map of maps from user
 * space (10 to 25 ms here, with the agent's thread blocked), and once for a
 * whole batch. Kernels without batch updates of it get them one by one.
 */
static void publish_pending(struct agent_unwinder *u)
{
	LIBBPF_OPTS(bpf_map_batch_opts, bo); /* BPF_ANY: IDs are new (BPF_NOEXIST is refused in batches) */
	uint32_t keys[sizeof(u->pending) / sizeof(u->pending[0])], count = (uint32_t)u->n_pending;
	bool batched;
	int fds[sizeof(u->pending) / sizeof(u->pending[0])];

	if (!u->n_pending)
		return;
	for (size_t i = 0; i < u->n_pending; i++) {
		keys[i] = u->pending[i]->id;
		fds[i] = u->pending[i]->fd;
	}
	/* On failure count is not to be trusted (it reports all as done): redo each, which is idempotent. */
	batched = bpf_map_update_batch(u->o.tables_fd, keys, fds, &count, &bo) == 0 && count == u->n_pending;
	for (size_t i = 0; i < u->n_pending; i++) {
		struct table *t = u->pending[i];

		if (!batched && bpf_map_update_elem(u->o.tables_fd, &t->id, &t->fd, BPF_ANY) < 0)
			unload(u, t);
		/* The map of maps holds its own reference. */
		close(t->fd);
		t->fd = -1;
	}
	u->n_pending = 0;
}

/*
 * The vDSO has no file to open: its table comes from the agent's own copy,
 * the same image in every 64-bit process (agent/proc.c identifies it so).
 */
static int build_vdso(size_t size, size_t max_rows, struct agent_unwind_table *ret)
{
	const void *base = (const void *)getauxval(AT_SYSINFO_EHDR);
	struct agent_unwind_sections s = { .is_64 = 1, .arch = AGENT_UNWIND_ARCH_NATIVE };
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	size_t shstrndx;
	Elf *elf;
	int r = -ENOENT;

	if (!base || elf_version(EV_CURRENT) == EV_NONE)
		return -ENOENT;
	elf = elf_memory((char *)base, size);
	if (!elf)
		return -ENOEXEC;
	if (elf_getshdrstrndx(elf, &shstrndx) == 0) {
		while ((scn = elf_nextscn(elf, scn))) {
			const char *name;
			Elf_Data *d;

			if (!gelf_getshdr(scn, &sh) || !(name = elf_strptr(elf, shstrndx, sh.sh_name)))
				continue;
			if (strcmp(name, ".eh_frame") == 0 && sh.sh_type == SHT_PROGBITS &&
			    (d = elf_getdata(scn, NULL))) {
				s.eh_frame = d->d_buf;
				s.eh_frame_len = d->d_size;
				s.eh_frame_vaddr = sh.sh_addr;
			} else if (strcmp(name, ".text") == 0) {
				s.text_vaddr = sh.sh_addr;
			}
		}
		if (s.eh_frame)
			r = agent_unwind_table_build(&s, max_rows, ret);
	}
	elf_end(elf);
	return r;
}

/* The table of the file behind m, built and loaded on first use; NULL when it cannot be had now. */
static struct table *table_for(struct agent_unwinder *u, const struct agent_proc *proc, const struct agent_proc_map *m)
{
	struct agent_unwind_table ut = { 0 };
	const uint64_t *key = agent_exe__key(m->exe);
	struct table *t = sr_htab_ptrs__get(&u->tables, key, 4 * sizeof(uint64_t));
	uint64_t t0;
	int fd, r;

	if (t) {
		if (t->id) {
			sr_list__unlink(&u->lru, &t->lru);
			sr_list__push_front(&u->lru, &t->lru);
		}
		return t;
	}
	t0 = mono_ns();
	fd = -1;
	if (!agent_exe__is_vdso(m->exe)) {
		fd = agent_open_map_file(proc->pid, m->start, m->end, NULL);
		if (fd < 0) {
			/* Not remembered: another process that maps the file may still be readable. */
			u->stats.no_table[AGENT_UNWIND_NT_UNREADABLE]++;
			return NULL;
		}
	}
	t = calloc(1, sizeof(*t));
	if (!t) {
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	memcpy(t->key, key, sizeof(t->key));
	t->fd = -1;
	if (fd >= 0) {
		r = agent_unwind_table_build_fd(fd, u->o.max_rows, &ut);
		close(fd);
		if (r == 0 && ut.arch != AGENT_UNWIND_ARCH_NATIVE) {
			/* Another architecture's rows (an emulated program's file): this unwinder cannot follow them. */
			agent_unwind_table_done(&ut);
			r = -ENOEXEC;
		}
	} else {
		r = build_vdso(m->end - m->start, u->o.max_rows, &ut);
	}
	if (r == 0) {
		t->bytes = ut.n_rows * sizeof(struct unwind_row) + TABLE_MAP_OVERHEAD;
		if (t->bytes > u->o.max_bytes) {
			r = -E2BIG;
			u->stats.no_table[AGENT_UNWIND_NT_TOO_BIG]++;
		} else {
			make_room(u, t->bytes, NULL);
			r = fill(u, t, &ut);
			if (r < 0)
				u->stats.no_table[AGENT_UNWIND_NT_KERNEL]++;
		}
	} else {
		u->stats.no_table[no_table_reason(r)]++;
	}
	if (r == 0) {
		t->n_rows = (uint32_t)ut.n_rows;
		t->base = ut.base;
		sr_list__push_front(&u->lru, &t->lru);
		u->stats.tables++;
		u->stats.tables_built++;
		u->stats.table_bytes += t->bytes;
		u->stats.table_rows += t->n_rows;
	} else {
		t->id = 0;
		t->bytes = 0;
	}
	agent_unwind_table_done(&ut);
	u->stats.build_ns += mono_ns() - t0;
	if (sr_htab_ptrs__put(&u->tables, t) < 0) {
		if (t->id)
			evict(u, t);
		else
			free(t);
		return NULL;
	}
	return t;
}

int agent_unwinder__sync(struct agent_unwinder *u, struct agent_proc *proc)
{
	struct unwind_proc *e = &u->scratch;
	struct table *tabs[UNWIND_MAX_MAPPINGS];
	uint64_t biases[UNWIND_MAX_MAPPINGS], t0;
	uint32_t n = 0;

	if (proc->unwind_gen == proc->maps_gen)
		return 0;
	memset(e, 0, sizeof(*e));
	e->start_boottime_ns = proc->start_ns;
	e->mm = proc->mm;
	/* First every table this process needs, built and filled; then one publication for them all. */
	for (size_t i = 0; i < proc->n_maps; i++) {
		const struct agent_proc_map *m = &proc->maps[i];

		if (n == UNWIND_MAX_MAPPINGS) {
			u->stats.mappings_truncated += proc->n_maps - i;
			break;
		}
		e->m[n].start = m->start;
		e->m[n].end = m->end;
		tabs[n] = NULL;
		/* No file, or no table: the BPF side follows frame pointers through it. */
		if (m->exe && agent_proc_map__bias(m, &biases[n]) == 0)
			tabs[n] = table_for(u, proc, m);
		n++;
	}
	t0 = mono_ns();
	publish_pending(u);
	u->stats.build_ns += mono_ns() - t0;
	for (uint32_t i = 0; i < n; i++) {
		const struct agent_proc_map *m = &proc->maps[i];
		struct unwind_mapping *um = &e->m[i];
		struct table *t = tabs[i];

		if (!t || !t->id)
			continue;
		um->table_id = t->id;
		um->n_rows = t->n_rows;
		um->bias = biases[i] + t->base;
		/*
		 * The first mapping of a file says how its text is placed; from
		 * then on the BPF side adds mappings of it at that offset itself.
		 */
		if (!t->published && u->o.files_fd >= 0 && !agent_exe__is_vdso(m->exe)) {
			struct unwind_file_key fk;
			struct unwind_file f = { .offset = m->offset,
						 .bias_off = m->start - um->bias,
						 .table_id = t->id,
						 .n_rows = t->n_rows };

			file_key(t, &fk);
			t->published = bpf_map_update_elem(u->o.files_fd, &fk, &f, BPF_ANY) == 0;
		}
	}
	e->n = n;
	if (bpf_map_update_elem(u->o.procs_fd, &proc->pid, e, BPF_ANY) < 0)
		return -errno;
	proc->unwind_gen = proc->maps_gen;
	u->stats.procs_written++;
	return 0;
}

void agent_unwinder__forget(struct agent_unwinder *u, const struct agent_proc *proc)
{
	struct unwind_proc *e = &u->scratch;

	/*
	 * Also when the agent never wrote it: the BPF side may have
	 * (unwind_track_mapping). But the BPF exit hook deleted the entry of a
	 * process that exited: only one the agent wrote may have come after it
	 * (a sync before the exit record). Most retired processes exited
	 * without being written (never sampled): no lookup, which copies the
	 * whole entry (4 KiB), for them.
	 */
	if (proc->exited && !proc->unwind_gen)
		return;
	if (bpf_map_lookup_elem(u->o.procs_fd, &proc->pid, e) == 0 && e->start_boottime_ns == proc->start_ns)
		bpf_map_delete_elem(u->o.procs_fd, &proc->pid);
}

void agent_unwinder__stats(struct agent_unwinder *u, struct agent_unwinder_stats *ret)
{
	*ret = u->stats;
}
