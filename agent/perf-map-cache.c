// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fsopen.h"
#include "common/grow.h"
#include "functions.h"
#include "common/htab.h"
#include "common/list.h"
#include "common/log.h"
#include "common/macro.h"
#include "common/search.h"
#include "perf-map-parse.h"
#include "perf-map-cache.h"
#include "parse-limits.h"

#define LOG_COMPONENT "perf-maps"

struct pm_entry {
	uint64_t start, end;
	uint32_t name_off, name_len;
	uint32_t seq; /* later lines win over earlier ones they overlap */
};

struct pm_proc {
	uint8_t key[12]; /* pid, start_ns */
	struct sr_list_node lru;
	uint32_t pid;
	bool have_file; /* opened at least once */
	bool exhausted; /* a limit stopped reading */
	uint64_t dev, ino;
	uint64_t offset; /* bytes of the file consumed */
	uint64_t bytes_read;
	uint64_t next_read_ns;
	struct agent_perf_map_state st;
	struct pm_entry *e; /* sorted by start, not overlapping */
	size_t n, cap;
	struct pm_entry *fresh; /* read in this refresh, merged after */
	size_t n_fresh, cap_fresh;
	char *names;
	size_t names_len, names_cap;
	uint32_t seq;
};

struct agent_perf_map_cache {
	struct agent_perf_map_cache_limits lim;
	char *proc_dir;
	struct sr_htab_ptrs procs;
	struct sr_list lru; /* head: most recently used */
	struct agent_perf_map_cache_stats st;
	bool warned_limit;
};

static const void *proc_key(const void *v, size_t *len)
{
	*len = sizeof(((const struct pm_proc *)v)->key);
	return ((const struct pm_proc *)v)->key;
}

static void make_key(uint8_t key[12], uint32_t pid, uint64_t start_ns)
{
	memcpy(key, &pid, 4);
	memcpy(key + 4, &start_ns, 8);
}

struct agent_perf_map_cache *agent_perf_map_cache_new(const struct agent_perf_map_cache_limits *limits,
						      const char *proc_dir)
{
	struct agent_perf_map_cache *m = calloc(1, sizeof(*m));

	if (!m)
		return NULL;
	if (limits)
		m->lim = *limits;
	if (!m->lim.max_bytes_per_process)
		m->lim.max_bytes_per_process = AGENT_PERF_MAP_CACHE_DEFAULT_MAX_BYTES;
	if (!m->lim.max_entries_per_process)
		m->lim.max_entries_per_process = AGENT_PERF_MAP_CACHE_DEFAULT_MAX_ENTRIES;
	if (!m->lim.max_processes)
		m->lim.max_processes = AGENT_PERF_MAP_CACHE_DEFAULT_MAX_PROCESSES;
	m->proc_dir = strdup(proc_dir ? proc_dir : "/proc");
	if (!m->proc_dir) {
		free(m);
		return NULL;
	}
	sr_htab_ptrs_init(&m->procs, proc_key);
	return m;
}

static size_t proc_memory(const struct pm_proc *p)
{
	return sizeof(*p) + p->cap * sizeof(*p->e) + p->cap_fresh * sizeof(*p->fresh) + p->names_cap;
}

static void proc_free(struct agent_perf_map_cache *m, struct pm_proc *p)
{
	m->st.entries -= p->n;
	m->st.memory_bytes -= proc_memory(p);
	m->st.processes--;
	free(p->e);
	free(p->fresh);
	free(p->names);
	free(p);
}

static void forget(struct agent_perf_map_cache *m, struct pm_proc *p)
{
	sr_list__unlink(&m->lru, &p->lru);
	sr_htab_ptrs__remove(&m->procs, p->key, sizeof(p->key));
	proc_free(m, p);
}

void agent_perf_map_cache_free(struct agent_perf_map_cache *m)
{
	struct sr_list_node *n, *next;

	if (!m)
		return;
	for (n = m->lru.head; n; n = next) {
		next = n->next;
		proc_free(m, SR_CONTAINER_OF(n, struct pm_proc, lru));
	}
	sr_htab_ptrs_done(&m->procs);
	free(m->proc_dir);
	free(m);
}

void agent_perf_map_cache__exit(struct agent_perf_map_cache *m, uint32_t pid, uint64_t start_ns)
{
	uint8_t key[12];
	struct pm_proc *p;

	make_key(key, pid, start_ns);
	p = sr_htab_ptrs__get(&m->procs, key, sizeof(key));
	if (p)
		forget(m, p);
}

void agent_perf_map_cache__stats(const struct agent_perf_map_cache *m, struct agent_perf_map_cache_stats *ret)
{
	*ret = m->st;
}

/* The PID the process has in its own PID namespace (the last NSpid field), or pid. */
static uint32_t ns_pid(const struct agent_perf_map_cache *m, uint32_t pid)
{
	char path[256], line[512];
	uint32_t r = pid;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%u/status", m->proc_dir, pid);
	f = fopen(path, "re");
	if (!f)
		return pid;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "NSpid:", 6) == 0) {
			char *s = line + 6, *end;

			for (;;) {
				unsigned long v = strtoul(s, &end, 10);

				if (end == s)
					break;
				r = (uint32_t)v;
				s = end;
			}
			break;
		}
	}
	fclose(f);
	return r;
}

/*
 * Opens the map inside the process's root (common/fsopen.h): symlinks may not
 * lead out of it, without openat2 none is followed at all, a FIFO does not block; it
 * must be a regular file owned by the process's user or root, so a process
 * cannot make the agent read another file as its perf map.
 */
static int open_map(const struct agent_perf_map_cache *m, uint32_t pid, struct stat *ret_st)
{
	char path[256], name[64];
	struct stat pst;
	int root, fd;

	snprintf(path, sizeof(path), "%s/%u", m->proc_dir, pid);
	if (stat(path, &pst) < 0)
		return -errno;
	snprintf(path, sizeof(path), "%s/%u/root", m->proc_dir, pid);
	root = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return -errno;
	snprintf(name, sizeof(name), "tmp/perf-%u.map", ns_pid(m, pid));
	fd = sr_fs_openat(root, name, SR_FS_IN_ROOT, 0);
	close(root);
	if (fd == -EXDEV || fd == -ELOOP)
		agent_parse_refused(AGENT_PARSE_ESCAPE);
	if (fd < 0)
		return fd;
	if (sr_fs_check_regular(fd, 0, ret_st) < 0) {
		agent_parse_refused(AGENT_PARSE_NOT_REGULAR);
		close(fd);
		return -EPERM;
	}
	if (ret_st->st_uid != pst.st_uid && ret_st->st_uid != 0) {
		close(fd);
		return -EPERM;
	}
	return fd;
}

struct parse_ctx {
	struct agent_perf_map_cache *m;
	struct pm_proc *p;
};

static int on_line(void *userdata, const struct agent_perf_map_line *l)
{
	struct parse_ctx *c = userdata;
	struct pm_proc *p = c->p;
	size_t len = SR_MIN(l->name_len, (size_t)AGENT_FUNCTION_NAME_MAX);
	struct pm_entry *e;

	if (p->n + p->n_fresh >= c->m->lim.max_entries_per_process)
		return -ENOSPC;
	if (sr_grow((void **)&p->fresh, &p->cap_fresh, p->n_fresh + 1, sizeof(*p->fresh), 64) < 0 ||
	    sr_grow((void **)&p->names, &p->names_cap, p->names_len + len, 1, 64) < 0)
		return -ENOMEM;
	memcpy(p->names + p->names_len, l->name, len);
	e = &p->fresh[p->n_fresh++];
	*e = (struct pm_entry){ .start = l->start,
				.end = l->start + l->size,
				.name_off = (uint32_t)p->names_len,
				.name_len = (uint32_t)len,
				.seq = ++p->seq };
	p->names_len += len;
	return 0;
}

static int by_start(const void *a, const void *b)
{
	const struct pm_entry *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->seq > y->seq ? -1 : x->seq < y->seq; /* newest first */
}

/*
 * Merges the fresh entries into the sorted ones: code moves (a JIT frees and
 * reuses memory), so of overlapping entries the one written last wins.
 */
static int merge(struct pm_proc *p)
{
	size_t n = 0;

	if (!p->n_fresh)
		return 0;
	if (sr_grow((void **)&p->e, &p->cap, p->n + p->n_fresh, sizeof(*p->e), 64) < 0)
		return -ENOMEM;
	memcpy(p->e + p->n, p->fresh, p->n_fresh * sizeof(*p->e));
	p->n += p->n_fresh;
	p->n_fresh = 0;
	qsort(p->e, p->n, sizeof(*p->e), by_start);
	for (size_t i = 0; i < p->n; i++) {
		if (n > 0 && p->e[i].start < p->e[n - 1].end) {
			if (p->e[i].seq > p->e[n - 1].seq)
				p->e[n - 1] = p->e[i];
			continue;
		}
		p->e[n++] = p->e[i];
	}
	p->n = n;
	return 0;
}

/* Reads what was appended to the map since the last time. */
static void refresh(struct agent_perf_map_cache *m, struct pm_proc *p, uint64_t now_ns)
{
	static char buf[64 * 1024 + AGENT_PERF_MAP_MAX_LINE + 1];
	struct parse_ctx ctx = { m, p };
	size_t before_mem = proc_memory(p), before_n = p->n;
	uint64_t budget, done = 0, offset0;
	struct stat st;
	size_t have = 0;
	int fd, r = 0;

	p->next_read_ns = now_ns + AGENT_PERF_MAP_CACHE_REREAD_NS;
	fd = open_map(m, p->pid, &st);
	if (fd < 0) {
		p->next_read_ns = now_ns + AGENT_PERF_MAP_CACHE_RETRY_NS;
		return;
	}
	if (p->have_file &&
	    ((uint64_t)st.st_dev != p->dev || (uint64_t)st.st_ino != p->ino || (uint64_t)st.st_size < p->offset)) {
		/* Another file now (the process exec'd, or it was rewritten): start over. */
		m->st.entries -= p->n;
		p->n = p->names_len = 0;
		p->offset = p->bytes_read = 0;
		p->exhausted = false;
		memset(&p->st, 0, sizeof(p->st));
		before_n = 0;
	}
	offset0 = p->offset;
	p->have_file = true;
	p->dev = (uint64_t)st.st_dev;
	p->ino = (uint64_t)st.st_ino;
	budget = SR_MIN(m->lim.max_bytes_per_process - SR_MIN(p->bytes_read, m->lim.max_bytes_per_process),
			(uint64_t)AGENT_PERF_MAP_CACHE_READ_BYTES);
	while (!p->exhausted && done < budget) {
		size_t want = (size_t)SR_MIN((uint64_t)(sizeof(buf) - 1 - have), budget - done), used = 0;
		ssize_t got = pread(fd, buf + have, want, (off_t)(p->offset + have));
		int64_t k;

		if (got <= 0)
			break;
		done += (uint64_t)got;
		have += (size_t)got;
		k = agent_perf_map_parse(buf, have, false, &p->st, on_line, &ctx, &used);
		if (k < 0) {
			r = (int)k;
			p->exhausted = true;
		}
		p->offset += used;
		memmove(buf, buf + used, have - used);
		have -= used;
	}
	close(fd);
	/* What was used up counts (a line not ended yet is read again next time). */
	p->bytes_read += p->offset - offset0;
	if (p->offset > offset0) {
		m->st.reads++;
		m->st.bytes_read += p->offset - offset0;
	}
	/* At the byte limit, or what is left of it cannot hold the next line. */
	if (p->bytes_read >= m->lim.max_bytes_per_process ||
	    (p->offset == offset0 && done && done >= budget && budget < AGENT_PERF_MAP_CACHE_READ_BYTES))
		p->exhausted = true;
	if (merge(p) < 0)
		p->n_fresh = 0;
	m->st.entries = m->st.entries - before_n + p->n;
	m->st.memory_bytes += proc_memory(p) - before_mem;
	if (p->exhausted && !m->warned_limit) {
		m->warned_limit = true;
		sr_log_warn(LOG_COMPONENT, "stopped reading a perf map at a limit; later JIT code stays unnamed",
			    "pid=%u bytes_read=%" PRIu64 " entries=%zu reason=%s", p->pid, p->bytes_read, p->n,
			    r == -ENOSPC ? "max_entries_per_process"
			    : r < 0	 ? strerror(-r)
					 : "max_bytes_per_process");
	}
	if (p->st.bad && p->st.first_bad)
		sr_log_debug(LOG_COMPONENT, "perf map lines that are not START SIZE NAME were skipped",
			     "pid=%u bad_lines=%" PRIu64 " first_bad_line=%" PRIu64, p->pid, p->st.bad,
			     p->st.first_bad);
}

static const struct pm_entry *find(const struct pm_proc *p, uint64_t addr)
{
	size_t at = SR_PARTITION_POINT(p->n, i, p->e[i].start <= addr);

	return at > 0 && addr < p->e[at - 1].end ? &p->e[at - 1] : NULL;
}

static struct pm_proc *get_proc(struct agent_perf_map_cache *m, uint32_t pid, uint64_t start_ns)
{
	uint8_t key[12];
	struct pm_proc *p;

	make_key(key, pid, start_ns);
	p = sr_htab_ptrs__get(&m->procs, key, sizeof(key));
	if (p) {
		if (m->lru.head != &p->lru) {
			sr_list__unlink(&m->lru, &p->lru);
			sr_list__push_front(&m->lru, &p->lru);
		}
		return p;
	}
	if (m->st.processes >= m->lim.max_processes && m->lru.tail) {
		forget(m, SR_CONTAINER_OF(m->lru.tail, struct pm_proc, lru));
		m->st.processes_forgotten++;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	memcpy(p->key, key, sizeof(key));
	p->pid = pid;
	if (sr_htab_ptrs__put(&m->procs, p) < 0) {
		free(p);
		return NULL;
	}
	sr_list__push_front(&m->lru, &p->lru);
	m->st.processes++;
	m->st.memory_bytes += proc_memory(p);
	return p;
}

const char *agent_perf_map_cache__lookup(struct agent_perf_map_cache *m, uint32_t pid, uint64_t start_ns, uint64_t addr,
					 uint64_t now_ns, size_t *ret_len, enum agent_jit_result *ret_why)
{
	struct pm_proc *p = get_proc(m, pid, start_ns);
	const struct pm_entry *e;
	uint64_t bad_before;

	if (!p) {
		*ret_why = AGENT_JIT_LIMIT;
		return NULL;
	}
	e = find(p, addr);
	if (!e && !p->exhausted && now_ns >= p->next_read_ns) {
		bad_before = p->st.bad;
		refresh(m, p, now_ns);
		m->st.bad_lines += p->st.bad - SR_MIN(bad_before, p->st.bad);
		e = find(p, addr);
	}
	if (e) {
		*ret_len = e->name_len;
		*ret_why = AGENT_JIT_NAMED;
		return p->names + e->name_off;
	}
	*ret_why = !p->have_file ? AGENT_JIT_NO_PERF_MAP : p->exhausted ? AGENT_JIT_LIMIT : AGENT_JIT_NOT_IN_PERF_MAP;
	return NULL;
}
