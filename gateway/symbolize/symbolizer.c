/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The symbolizer: a hash map from executable ID to an entry whose state says
 * where its symbols are (loaded, loading, being fetched, wanted from the
 * agent, unavailable), a byte-bounded LRU over the entries, the disk store,
 * and the debuginfod fetch threads.
 *
 * Loaded symbols live in a reference-counted handle, so an entry can be
 * evicted while a worker thread still resolves with its handle.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <elfutils/debuginfod.h>
#include <xxhash.h>

#include "common/list.h"
#include "common/macro.h"
#include "core/model.h"
#include "dwarflines.h"
#include "elfsym.h"
#include "store.h"
#include "symbolize.h"
#include "symtab.h"

#define NSEC_PER_SEC		  1000000000ULL
#define DEFAULT_WANTED_TIMEOUT_NS (10ULL * NSEC_PER_SEC)
#define ID_MAX			  64
/* Largest stored table file read back (a 16M-symbol table is about 600 MiB). */
#define SR_SYM_MAX_TABLE_FILE (1ULL << 30)

enum entry_state {
	E_LOADING,  /* a worker is reading local sources */
	E_FETCHING, /* queued for or in a debuginfod fetch */
	E_READY,
	E_WANTED,      /* asked from the agent */
	E_UNAVAILABLE, /* the agent said it cannot read the file */
};

struct gw_sym_handle {
	atomic_uint refs;
	struct gw_symtab *tab;
	struct gw_dwarf *dw;
	Elf *elf;
	int fd;
	pthread_mutex_t dw_lock;
	enum gw_demangle_mode mode;
	size_t bytes;
	bool from_upload;
	atomic_uint *open_dwarf; /* the symbolizer's count, while dw is open */
};

struct entry {
	struct entry *hnext;
	struct sr_list_node lru; /* in gw_symbolizer.lru */
	struct entry *qnext;	 /* fetch queue */
	uint64_t hash;
	uint8_t id[ID_MAX];
	uint8_t id_len;
	uint8_t build_id[ID_MAX];
	uint8_t build_id_len;
	enum entry_state state;
	bool waiters;	     /* someone got PENDING and waits for notify() */
	uint64_t expires_ns; /* WANTED: next debuginfod try; UNAVAILABLE: forget then */
	uint64_t wanted_since_ns;
	struct gw_sym_handle *h;
	size_t bytes;
};

struct gw_symbolizer {
	struct gw_symbolizer_config cfg;
	char *cache_dir;
	char **debug_dirs;
	size_t n_debug_dirs;
	char *debuginfod_urls; /* "" when disabled */
	struct gw_symstore *store;

	pthread_mutex_t lock;
	struct entry **buckets;
	size_t n_buckets, n_entries;
	struct sr_list lru; /* entries, head = most recently used */
	uint64_t bytes;

	/* debuginfod */
	pthread_cond_t fetch_cond;
	struct entry *q_head, *q_tail;
	size_t q_len;
	pthread_t *threads;
	size_t n_threads;
	atomic_bool stopping;
	atomic_uint open_dwarf; /* handles holding a debug file open for DWARF */

	struct {
		_Atomic uint64_t memory_hits, memory_misses, disk_hits;
		_Atomic uint64_t debuginfod_fetches, debuginfod_ok, debuginfod_failed;
		_Atomic uint64_t uploads_accepted, uploads_rejected, upload_errors, evictions;
		_Atomic uint64_t resolved, unresolved, with_lines;
	} st;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NSEC_PER_SEC + (uint64_t)ts.tv_nsec;
}

#define STAT_INC(s, f) atomic_fetch_add_explicit(&(s)->st.f, 1, memory_order_relaxed)

const char *gw_sym_hex(const uint8_t *id, size_t len, char *buf, size_t size)
{
	static const char digits[] = "0123456789abcdef";
	size_t i;

	if (size == 0)
		return buf;
	for (i = 0; i < len && 2 * i + 2 < size; i++) {
		buf[2 * i] = digits[id[i] >> 4];
		buf[2 * i + 1] = digits[id[i] & 15];
	}
	buf[2 * i] = '\0';
	return buf;
}

/* ---- handles ---- */

static void handle_free(struct gw_sym_handle *h)
{
	if (!h)
		return;
	if (h->dw && h->open_dwarf)
		atomic_fetch_sub(h->open_dwarf, 1);
	gw_dwarf_free(h->dw);
	if (h->elf)
		elf_end(h->elf);
	if (h->fd >= 0)
		close(h->fd);
	gw_symtab_free(h->tab);
	pthread_mutex_destroy(&h->dw_lock);
	free(h);
}

static struct gw_sym_handle *handle_new(void)
{
	struct gw_sym_handle *h = calloc(1, sizeof(*h));

	if (!h)
		return NULL;
	atomic_init(&h->refs, 1);
	h->fd = -1;
	pthread_mutex_init(&h->dw_lock, NULL);
	return h;
}

static struct gw_sym_handle *handle_ref(struct gw_sym_handle *h)
{
	atomic_fetch_add_explicit(&h->refs, 1, memory_order_relaxed);
	return h;
}

void gw_sym_handle__release(struct gw_sym_handle *h)
{
	if (h && atomic_fetch_sub_explicit(&h->refs, 1, memory_order_acq_rel) == 1)
		handle_free(h);
}

size_t gw_sym_handle__symbol_count(const struct gw_sym_handle *h)
{
	return h->tab ? gw_symtab__count(h->tab) : 0;
}

int gw_sym_handle__symbol_at(const struct gw_sym_handle *h, size_t i, uint64_t *ret_start, uint64_t *ret_size)
{
	struct gw_symtab_hit hit;

	if (!h->tab || gw_symtab__get(h->tab, i, &hit) < 0)
		return -ENOENT;
	*ret_start = hit.start;
	*ret_size = hit.size;
	return 0;
}

bool gw_sym_handle__has_lines(const struct gw_sym_handle *h)
{
	return h->dw != NULL;
}

static void handle_account(struct gw_sym_handle *h, uint64_t file_size)
{
	h->bytes = sizeof(*h) + (h->tab ? gw_symtab__memory_bytes(h->tab) : 0);
	/*
	 * libdw's parsed state (abbreviations, line tables of the CUs touched)
	 * is not measurable from outside; charge the CU index plus 1/16 of the
	 * debug file as an estimate. The file itself is mapped, not copied.
	 */
	if (h->dw)
		h->bytes += gw_dwarf__index_bytes(h->dw) + file_size / 16;
}

/*
 * Builds a handle from an open ELF file (fd is taken over). tab, when given,
 * is used instead of reading symbols again (taken over too). expect, when
 * given, must equal the file's build ID: fetched and found files are
 * untrusted and may be the wrong one.
 */
static int handle_from_fd(struct gw_symbolizer *s, int fd, struct gw_symtab *tab, const uint8_t *expect,
			  size_t expect_len, struct gw_sym_handle **ret)
{
	struct gw_sym_handle *h = handle_new();
	struct gw_symtab_builder *b = NULL;
	struct stat sb;
	int r;

	if (!h) {
		close(fd);
		gw_symtab_free(tab);
		return -ENOMEM;
	}
	h->fd = fd;
	h->tab = tab;
	h->mode = s->cfg.demangle;
	if ((r = gw_elf_init()) < 0)
		goto fail;
	if (fstat(fd, &sb) < 0) {
		r = -errno;
		goto fail;
	}
	if (!S_ISREG(sb.st_mode) || (uint64_t)sb.st_size > s->cfg.max_file_bytes) {
		r = -EFBIG;
		goto fail;
	}
	h->elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!h->elf || elf_kind(h->elf) != ELF_K_ELF) {
		r = -EBADMSG;
		goto fail;
	}
	if (expect && expect_len > 0) {
		uint8_t bid[GW_ELF_MAX_BUILD_ID];
		int n = gw_elf_build_id(h->elf, bid, sizeof(bid));
		if (n != (int)expect_len || memcmp(bid, expect, expect_len) != 0) {
			r = -ESTALE;
			goto fail;
		}
	}
	if (!h->tab) {
		unsigned sources = 0;
		b = gw_symtab_builder_new();
		if (!b) {
			r = -ENOMEM;
			goto fail;
		}
		r = gw_elf_symbols(h->elf, b, &sources);
		if (r < 0)
			goto fail;
		h->tab = gw_symtab_builder__finish(b, s->cfg.demangle, sources);
		if (!h->tab) {
			r = -errno;
			goto fail;
		}
	}
	/* Past GW_SYM_MAX_OPEN_DWARF files kept open for lines, more executables get names only. */
	if (!s->cfg.no_lines && gw_elf_has_dwarf(h->elf) &&
	    atomic_fetch_add(&s->open_dwarf, 1) < GW_SYM_MAX_OPEN_DWARF) {
		h->dw = gw_dwarf_open(h->elf); /* no usable DWARF is not an error: names remain */
		if (h->dw)
			h->open_dwarf = &s->open_dwarf;
		else
			atomic_fetch_sub(&s->open_dwarf, 1);
	} else if (!s->cfg.no_lines && gw_elf_has_dwarf(h->elf)) {
		atomic_fetch_sub(&s->open_dwarf, 1);
	}
	if (!h->dw) {
		elf_end(h->elf);
		h->elf = NULL;
		close(h->fd);
		h->fd = -1;
	}
	if (gw_symtab__count(h->tab) == 0 && !h->dw) {
		r = -ENODATA;
		goto fail;
	}
	handle_account(h, (uint64_t)sb.st_size);
	gw_symtab_builder_free(b);
	*ret = h;
	return 0;
fail:
	gw_symtab_builder_free(b);
	handle_free(h);
	return r;
}

static int handle_from_path(struct gw_symbolizer *s, const char *path, struct gw_symtab *tab, const uint8_t *expect,
			    size_t expect_len, struct gw_sym_handle **ret)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		gw_symtab_free(tab);
		return -errno;
	}
	return handle_from_fd(s, fd, tab, expect, expect_len, ret);
}

/* ---- resolving ---- */

static const char *arena_dup(struct gw_sym_result *r, const char *str)
{
	size_t l = strlen(str) + 1;
	char *p;

	if (r->arena_len + l > sizeof(r->arena))
		return NULL;
	p = r->arena + r->arena_len;
	memcpy(p, str, l);
	r->arena_len += l;
	return p;
}

/* Display name of a DWARF name: demangled into the result's arena when it fits. */
static const char *display_name(struct gw_sym_handle *h, struct gw_sym_result *r, const char *raw)
{
	char *dm = gw_demangle(raw, h->mode);
	const char *out = raw;

	if (dm) {
		const char *p = arena_dup(r, dm);
		if (p)
			out = p;
		free(dm);
	}
	return out;
}

int gw_sym_handle__function(struct gw_sym_handle *h, uint64_t addr, const char **ret_name, const char **ret_system_name)
{
	struct gw_symtab_hit hit;

	if (!h->tab || gw_symtab__lookup(h->tab, addr, &hit) < 0)
		return -ENOENT;
	*ret_name = hit.name;
	*ret_system_name = hit.sysname;
	return 0;
}

int gw_sym_handle__resolve(struct gw_sym_handle *h, uint64_t addr, struct gw_sym_result *r)
{
	struct gw_symtab_hit hit;
	bool have = h->tab && gw_symtab__lookup(h->tab, addr, &hit) == 0;

	r->n = 0;
	r->arena_len = 0;
	r->symbol_start = have ? hit.start : 0;
	if (h->dw) {
		struct gw_dwarf_frame fr[GW_SYM_MAX_LINES];
		int n;

		pthread_mutex_lock(&h->dw_lock);
		n = gw_dwarf__lookup(h->dw, addr, fr, GW_SYM_MAX_LINES);
		for (int i = 0; i < n; i++) {
			struct gw_sym_line *l = &r->lines[r->n++];
			bool outermost = i == n - 1;
			*l = (struct gw_sym_line){
				.file = fr[i].file,
				.line = fr[i].line,
				.column = fr[i].column,
				.start_line = fr[i].decl_line,
			};
			/* The out-of-line function keeps the symbol table's name, so a frame is named the
			 * same whether or not DWARF was at hand; inlined ones only DWARF knows. */
			if (outermost && have) {
				l->function = hit.name;
				l->system_name = hit.sysname;
			} else if (fr[i].name) {
				l->system_name = fr[i].name;
				l->function = display_name(h, r, fr[i].name);
			} else {
				l->function = l->system_name = "";
			}
		}
		pthread_mutex_unlock(&h->dw_lock);
		if (n > 0 && (have || r->lines[r->n - 1].function[0])) {
			return (int)r->n;
		}
		r->n = 0;
		r->arena_len = 0;
	}
	if (!have)
		return -ENOENT;
	r->lines[0] = (struct gw_sym_line){ .function = hit.name, .system_name = hit.sysname };
	r->n = 1;
	return 1;
}

/* ---- the map and the LRU (callers hold s->lock) ---- */

static uint64_t id_hash(const uint8_t *id, size_t len)
{
	return XXH3_64bits(id, len);
}

static struct entry *map_find(struct gw_symbolizer *s, const uint8_t *id, size_t len, uint64_t hash)
{
	if (!s->n_buckets)
		return NULL;
	for (struct entry *e = s->buckets[hash & (s->n_buckets - 1)]; e; e = e->hnext) {
		if (e->hash == hash && e->id_len == len && memcmp(e->id, id, len) == 0)
			return e;
	}
	return NULL;
}

static int map_grow(struct gw_symbolizer *s)
{
	size_t nb = s->n_buckets ? s->n_buckets * 2 : 1024;
	struct entry **b = calloc(nb, sizeof(*b));

	if (!b)
		return -ENOMEM;
	for (size_t i = 0; i < s->n_buckets; i++) {
		struct entry *e = s->buckets[i], *next;
		for (; e; e = next) {
			next = e->hnext;
			e->hnext = b[e->hash & (nb - 1)];
			b[e->hash & (nb - 1)] = e;
		}
	}
	free(s->buckets);
	s->buckets = b;
	s->n_buckets = nb;
	return 0;
}

static void evict(struct gw_symbolizer *s, struct entry *keep);

static struct entry *map_insert(struct gw_symbolizer *s, const uint8_t *id, size_t len, uint64_t hash)
{
	struct entry *e;

	if (s->n_entries >= s->n_buckets && map_grow(s) < 0)
		return NULL;
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	memcpy(e->id, id, len);
	e->id_len = (uint8_t)len;
	e->hash = hash;
	/* A new entry is "wanted" until a source says otherwise; callers set the real state. */
	e->state = E_WANTED;
	e->wanted_since_ns = now_ns();
	e->hnext = s->buckets[hash & (s->n_buckets - 1)];
	s->buckets[hash & (s->n_buckets - 1)] = e;
	s->n_entries++;
	e->bytes = GW_SYM_NEGATIVE_ENTRY_BYTES;
	s->bytes += e->bytes;
	sr_list__push_front(&s->lru, &e->lru);
	/* A stream of new IDs (deployments, short-lived binaries) must not grow the cache past its limit
	 * while no table becomes ready: older entries make room now. */
	evict(s, e);
	return e;
}

static void map_remove(struct gw_symbolizer *s, struct entry *e)
{
	struct entry **pp = &s->buckets[e->hash & (s->n_buckets - 1)];

	while (*pp && *pp != e)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = e->hnext;
	sr_list__unlink(&s->lru, &e->lru);
	s->n_entries--;
	s->bytes -= e->bytes;
	gw_sym_handle__release(e->h);
	free(e);
}

static void set_bytes(struct gw_symbolizer *s, struct entry *e, size_t bytes)
{
	s->bytes -= e->bytes;
	e->bytes = bytes;
	s->bytes += bytes;
}

static void evict(struct gw_symbolizer *s, struct entry *keep)
{
	struct entry *e = SR_LIST_ENTRY(s->lru.tail, struct entry, lru), *prev;

	for (; e && s->bytes > s->cfg.memory_cache_bytes; e = prev) {
		prev = SR_LIST_ENTRY(e->lru.prev, struct entry, lru);
		/* Entries in flight are pinned: their worker or fetch thread will come back to them. */
		if (e == keep || e->state == E_LOADING || e->state == E_FETCHING)
			continue;
		map_remove(s, e);
		STAT_INC(s, evictions);
	}
}

static void set_ready(struct gw_symbolizer *s, struct entry *e, struct gw_sym_handle *h)
{
	gw_sym_handle__release(e->h);
	e->h = h;
	e->state = E_READY;
	set_bytes(s, e, sizeof(*e) + h->bytes);
	evict(s, e);
}

static void set_wanted(struct gw_symbolizer *s, struct entry *e, uint64_t now)
{
	e->state = E_WANTED;
	e->expires_ns = now + s->cfg.negative_cache_ttl_ns;
	if (!e->wanted_since_ns)
		e->wanted_since_ns = now;
}

static void notify(struct gw_symbolizer *s)
{
	if (s->cfg.notify)
		s->cfg.notify(s->cfg.notify_userdata);
}

/* ---- local sources ---- */

/* Debug file candidates by build ID and by .gnu_debuglink; the first that loads wins. */
static int load_debug_dirs(struct gw_symbolizer *s, const struct entry *e, const struct gw_sym_hint *hint,
			   struct gw_sym_handle **ret)
{
	char hex[2 * ID_MAX + 1], path[PATH_MAX];
	int r = -ENOENT;

	if (e->build_id_len > 0) {
		gw_sym_hex(e->build_id, e->build_id_len, hex, sizeof(hex));
		for (size_t i = 0; i < s->n_debug_dirs; i++) {
			snprintf(path, sizeof(path), "%s/.build-id/%.2s/%s.debug", s->debug_dirs[i], hex, hex + 2);
			if (access(path, R_OK) == 0 &&
			    handle_from_path(s, path, NULL, e->build_id, e->build_id_len, ret) == 0)
				return 0;
		}
	}
	if (hint && hint->debuglink && hint->debuglink[0] && !strchr(hint->debuglink, '/')) {
		char dir[PATH_MAX] = "";
		if (hint->path && hint->path[0] == '/') {
			const char *slash = strrchr(hint->path, '/');
			snprintf(dir, sizeof(dir), "%.*s", (int)(slash - hint->path), hint->path);
		}
		for (size_t i = 0; i < s->n_debug_dirs; i++) {
			/* gdb's order: DIR/<exe dir>/<link>, then DIR/<link>. Without a build ID to
			 * check against, a debuglink match is taken on trust of the operator's dirs. */
			snprintf(path, sizeof(path), "%s%s/%s", s->debug_dirs[i], dir, hint->debuglink);
			if (access(path, R_OK) == 0 &&
			    handle_from_path(s, path, NULL, e->build_id_len ? e->build_id : NULL, e->build_id_len,
					     ret) == 0)
				return 0;
			snprintf(path, sizeof(path), "%s/%s", s->debug_dirs[i], hint->debuglink);
			if (access(path, R_OK) == 0 &&
			    handle_from_path(s, path, NULL, e->build_id_len ? e->build_id : NULL, e->build_id_len,
					     ret) == 0)
				return 0;
		}
	}
	return r;
}

static int load_local(struct gw_symbolizer *s, const struct entry *e, const struct gw_sym_hint *hint,
		      struct gw_sym_handle **ret)
{
	char hex[2 * ID_MAX + 1], path[PATH_MAX];
	struct gw_symtab *tab = NULL;
	int r;

	gw_sym_hex(e->id, e->id_len, hex, sizeof(hex));
	if (s->store) {
		void *buf;
		size_t len;
		if (gw_symstore__read_table(s->store, hex, (size_t)SR_SYM_MAX_TABLE_FILE, &buf, &len) == 0) {
			tab = gw_symtab_deserialize(buf, len, s->cfg.demangle);
			free(buf);
		}
		if (!(hint && hint->is_kernel) && gw_symstore__debug_path(s->store, hex, path, sizeof(path)) == 0) {
			/* A stored debug file adds lines to the stored table. */
			if (handle_from_path(s, path, tab, NULL, 0, ret) == 0) {
				STAT_INC(s, disk_hits);
				return 0;
			}
			tab = NULL;
		}
		if (tab) {
			struct gw_sym_handle *h = handle_new();
			if (!h) {
				gw_symtab_free(tab);
				return -ENOMEM;
			}
			h->tab = tab;
			h->mode = s->cfg.demangle;
			handle_account(h, 0);
			*ret = h;
			STAT_INC(s, disk_hits);
			return 0;
		}
	}
	if (hint && hint->is_kernel)
		return -ENOENT;
	r = load_debug_dirs(s, e, hint, ret);
	if (r == 0) {
		STAT_INC(s, disk_hits);
		/* Keep the table for the next start; the debug file itself stays where it is. */
		if (s->store && (*ret)->tab) {
			void *buf;
			size_t len;
			if (gw_symtab__serialize((*ret)->tab, &buf, &len) == 0) {
				(void)gw_symstore__write_table(s->store, hex, buf, len);
				free(buf);
			}
		}
	}
	return r;
}

/* ---- debuginfod ---- */

struct fetch_ctx {
	struct gw_symbolizer *s;
	uint64_t deadline_ns;
};

static int fetch_progress(debuginfod_client *c, long a, long b)
{
	struct fetch_ctx *ctx = debuginfod_get_user_data(c);

	/* Non-zero aborts the transfer: at shutdown, or past our own deadline. */
	return atomic_load(&ctx->s->stopping) || now_ns() > ctx->deadline_ns;
}

static void fetch_one(struct gw_symbolizer *s, debuginfod_client *c, struct fetch_ctx *ctx, const uint8_t *id,
		      size_t id_len, const uint8_t *bid, size_t bid_len)
{
	struct gw_sym_handle *h = NULL;
	char hex[2 * ID_MAX + 1], stored[PATH_MAX];
	char *path = NULL;
	int fd;

	STAT_INC(s, debuginfod_fetches);
	ctx->deadline_ns = now_ns() + s->cfg.debuginfod_timeout_ns;
	fd = debuginfod_find_debuginfo(c, bid, (int)bid_len, &path);
	if (fd < 0 && !atomic_load(&s->stopping) && now_ns() < ctx->deadline_ns) {
		free(path);
		path = NULL;
		fd = debuginfod_find_executable(c, bid, (int)bid_len, &path);
	}
	if (fd >= 0) {
		int r = handle_from_fd(s, fd, NULL, bid, bid_len, &h);
		if (r == 0 && s->store) {
			gw_sym_hex(id, id_len, hex, sizeof(hex));
			if (path && h->dw == NULL) {
				/* Names only: the table is all we keep; libdebuginfod's copy is dropped. */
				(void)unlink(path);
			} else if (path) {
				(void)gw_symstore__adopt_debug(s->store, hex, path, stored, sizeof(stored));
			}
			void *buf;
			size_t len;
			if (h->tab && gw_symtab__serialize(h->tab, &buf, &len) == 0) {
				(void)gw_symstore__write_table(s->store, hex, buf, len);
				free(buf);
			}
		}
	}
	free(path);
	if (h)
		STAT_INC(s, debuginfod_ok);
	else
		STAT_INC(s, debuginfod_failed);

	/* The entry may have changed meanwhile (an upload made it READY, then it was evicted). */
	pthread_mutex_lock(&s->lock);
	struct entry *e = map_find(s, id, id_len, id_hash(id, id_len));
	if (e && e->state == E_FETCHING) {
		if (h)
			set_ready(s, e, h);
		else
			set_wanted(s, e, now_ns());
		h = NULL;
	}
	pthread_mutex_unlock(&s->lock);
	gw_sym_handle__release(h);
	notify(s);
}

static void *fetch_thread(void *arg)
{
	struct gw_symbolizer *s = arg;
	struct fetch_ctx ctx = { .s = s };
	debuginfod_client *c = debuginfod_begin();

	if (c) {
		debuginfod_set_user_data(c, &ctx);
		debuginfod_set_progressfn(c, fetch_progress);
	}
	for (;;) {
		struct entry *e;
		uint8_t id[ID_MAX], bid[ID_MAX];
		size_t id_len, bid_len;

		pthread_mutex_lock(&s->lock);
		while (!atomic_load(&s->stopping) && !s->q_head)
			pthread_cond_wait(&s->fetch_cond, &s->lock);
		if (atomic_load(&s->stopping)) {
			pthread_mutex_unlock(&s->lock);
			break;
		}
		e = s->q_head;
		s->q_head = e->qnext;
		if (!s->q_head)
			s->q_tail = NULL;
		e->qnext = NULL;
		s->q_len--;
		if (!c) {
			/* No client (out of memory at start): everything goes to the agent. */
			set_wanted(s, e, now_ns());
			pthread_mutex_unlock(&s->lock);
			notify(s);
			continue;
		}
		id_len = e->id_len;
		bid_len = e->build_id_len;
		memcpy(id, e->id, id_len);
		memcpy(bid, e->build_id, bid_len);
		pthread_mutex_unlock(&s->lock);
		fetch_one(s, c, &ctx, id, id_len, bid, bid_len);
	}
	if (c)
		debuginfod_end(c);
	return NULL;
}

static bool enqueue_fetch(struct gw_symbolizer *s, struct entry *e)
{
	if (s->n_threads == 0 || e->build_id_len == 0 || s->q_len >= GW_SYM_FETCH_QUEUE_MAX)
		return false;
	e->state = E_FETCHING;
	e->qnext = NULL;
	if (s->q_tail)
		s->q_tail->qnext = e;
	else
		s->q_head = e;
	s->q_tail = e;
	s->q_len++;
	pthread_cond_signal(&s->fetch_cond);
	return true;
}

/* ---- public ---- */

enum gw_sym_state gw_symbolizer__acquire(struct gw_symbolizer *s, const uint8_t *id, size_t id_len,
					 const struct gw_sym_hint *hint, struct gw_sym_handle **ret_handle)
{
	uint64_t hash, now;
	struct entry *e;
	struct gw_sym_handle *h = NULL;
	enum gw_sym_state st;

	*ret_handle = NULL;
	if (id_len == 0 || id_len > ID_MAX)
		return GW_SYM_UNAVAILABLE;
	hash = id_hash(id, id_len);
	now = now_ns();
	pthread_mutex_lock(&s->lock);
	e = map_find(s, id, id_len, hash);
	if (e) {
		sr_list__unlink(&s->lru, &e->lru);
		sr_list__push_front(&s->lru, &e->lru);
		switch (e->state) {
		case E_READY:
			STAT_INC(s, memory_hits);
			*ret_handle = handle_ref(e->h);
			pthread_mutex_unlock(&s->lock);
			return GW_SYM_READY;
		case E_LOADING:
		case E_FETCHING:
			e->waiters = true;
			pthread_mutex_unlock(&s->lock);
			return GW_SYM_PENDING;
		case E_WANTED:
			/* The negative cache expired: give debuginfod another chance. */
			if (now >= e->expires_ns && enqueue_fetch(s, e)) {
				e->waiters = true;
				st = GW_SYM_PENDING;
			} else {
				st = now - e->wanted_since_ns >= s->cfg.wanted_timeout_ns ? GW_SYM_MISSING
											  : GW_SYM_WANTED;
			}
			pthread_mutex_unlock(&s->lock);
			return st;
		case E_UNAVAILABLE:
			if (now < e->expires_ns) {
				pthread_mutex_unlock(&s->lock);
				return GW_SYM_UNAVAILABLE;
			}
			map_remove(s, e);
			break;
		}
	}
	STAT_INC(s, memory_misses);
	e = map_insert(s, id, id_len, hash);
	if (!e) {
		pthread_mutex_unlock(&s->lock);
		return GW_SYM_MISSING;
	}
	e->state = E_LOADING;
	if (hint && hint->build_id_len > 0 && hint->build_id_len <= ID_MAX) {
		memcpy(e->build_id, hint->build_id, hint->build_id_len);
		e->build_id_len = (uint8_t)hint->build_id_len;
	}
	pthread_mutex_unlock(&s->lock);

	/* Disk and debug directories, without the lock: parsing a large file takes a while. */
	int r = load_local(s, e, hint, &h);

	pthread_mutex_lock(&s->lock);
	bool waiters = e->waiters;
	e->waiters = false;
	if (e->state != E_LOADING) {
		/* An upload arrived meanwhile (add_upload replaced the state): it wins. */
		st = e->state == E_READY ? GW_SYM_READY : GW_SYM_WANTED;
		if (st == GW_SYM_READY)
			*ret_handle = handle_ref(e->h);
		gw_sym_handle__release(h);
	} else if (r == 0) {
		set_ready(s, e, h);
		*ret_handle = handle_ref(h);
		st = GW_SYM_READY;
	} else if (!(hint && hint->is_kernel) && enqueue_fetch(s, e)) {
		st = GW_SYM_PENDING;
		e->waiters = true;
	} else {
		set_wanted(s, e, now);
		st = GW_SYM_WANTED;
	}
	pthread_mutex_unlock(&s->lock);
	if (waiters)
		notify(s);
	return st;
}

int gw_symbolizer__add_upload(struct gw_symbolizer *s, const uint8_t *id, size_t id_len,
			      const struct gw_symbol *symbols, size_t n_symbols, const char *error)
{
	struct gw_symtab_builder *b = NULL;
	struct gw_sym_handle *h = NULL;
	struct entry *e;
	uint64_t hash, bytes;
	char hex[2 * ID_MAX + 1];
	int r;

	if (!id || id_len == 0 || id_len > ID_MAX) {
		STAT_INC(s, uploads_rejected);
		return -EINVAL;
	}
	hash = id_hash(id, id_len);
	if (error && error[0]) {
		STAT_INC(s, upload_errors);
		pthread_mutex_lock(&s->lock);
		e = map_find(s, id, id_len, hash);
		if (!e)
			e = map_insert(s, id, id_len, hash);
		if (e && e->state != E_READY && e->state != E_LOADING && e->state != E_FETCHING) {
			e->state = E_UNAVAILABLE;
			e->expires_ns = now_ns() + s->cfg.negative_cache_ttl_ns;
		}
		pthread_mutex_unlock(&s->lock);
		notify(s);
		return 0;
	}
	if (n_symbols > GW_SYMTAB_MAX_SYMBOLS) {
		r = -E2BIG;
		goto fail;
	}
	bytes = (uint64_t)n_symbols * 24;
	b = gw_symtab_builder_new();
	if (!b) {
		r = -ENOMEM;
		goto fail;
	}
	for (size_t i = 0; i < n_symbols; i++) {
		const struct gw_symbol *sym = &symbols[i];
		size_t nl = sym->name ? strnlen(sym->name, GW_SYMTAB_MAX_NAME + 1) : 0;
		bytes += nl;
		if (bytes > s->cfg.max_upload_bytes) {
			r = -E2BIG;
			goto fail;
		}
		/* A symbol past the end of the address space is a lie; skip it, keep the rest. */
		if (nl == 0 || sym->address == 0 || sym->address + sym->size < sym->address)
			continue;
		r = gw_symtab_builder__add(b, sym->address, sym->size, sym->name, nl, GW_SYMTAB_RANK_GLOBAL, true);
		if (r < 0)
			goto fail;
	}
	if (gw_symtab_builder__count(b) == 0) {
		r = -EBADMSG;
		goto fail;
	}
	h = handle_new();
	if (!h) {
		r = -ENOMEM;
		goto fail;
	}
	h->mode = s->cfg.demangle;
	h->from_upload = true;
	h->tab = gw_symtab_builder__finish(b, s->cfg.demangle, GW_SYMTAB_SRC_UPLOAD);
	if (!h->tab) {
		r = -errno;
		goto fail;
	}
	gw_symtab_builder_free(b);
	b = NULL;
	handle_account(h, 0);
	if (s->store) {
		void *buf;
		size_t len;
		gw_sym_hex(id, id_len, hex, sizeof(hex));
		if (gw_symtab__serialize(h->tab, &buf, &len) == 0) {
			(void)gw_symstore__write_table(s->store, hex, buf, len);
			free(buf);
		}
	}
	pthread_mutex_lock(&s->lock);
	e = map_find(s, id, id_len, hash);
	if (!e)
		e = map_insert(s, id, id_len, hash);
	if (e && !(e->state == E_READY && e->h && !e->h->from_upload && e->h->dw)) {
		if (e->state == E_FETCHING) {
			/* Still queued: take it out of the queue so the fetch thread never sees it. */
			struct entry **pp = &s->q_head, *prev = NULL;
			while (*pp && *pp != e) {
				prev = *pp;
				pp = &(*pp)->qnext;
			}
			if (*pp) {
				*pp = e->qnext;
				if (s->q_tail == e)
					s->q_tail = prev;
				s->q_len--;
				set_ready(s, e, h);
				h = NULL;
			}
			/* Otherwise a fetch is running: it finds the entry READY and drops its result. */
			else {
				set_ready(s, e, h);
				h = NULL;
			}
		} else {
			set_ready(s, e, h);
			h = NULL;
		}
	}
	pthread_mutex_unlock(&s->lock);
	gw_sym_handle__release(h);
	STAT_INC(s, uploads_accepted);
	notify(s);
	return 0;
fail:
	gw_symtab_builder_free(b);
	gw_sym_handle__release(h);
	STAT_INC(s, uploads_rejected);
	return r;
}

/* Files without a GNU build ID (Go binaries): 16 bytes of XXH3-128 over the first and last 4 KiB and the size. */
static int content_id(const char *path, uint8_t *ret)
{
	uint8_t buf[8192];
	struct stat sb;
	ssize_t a, b = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	if (fstat(fd, &sb) < 0) {
		close(fd);
		return -errno;
	}
	a = pread(fd, buf, 4096, 0);
	if (a >= 0 && sb.st_size > 4096)
		b = pread(fd, buf + a, 4096, sb.st_size > 8192 ? sb.st_size - 4096 : a);
	close(fd);
	if (a < 0 || b < 0)
		return -EIO;
	XXH3_state_t *st = XXH3_createState();
	if (!st)
		return -ENOMEM;
	uint64_t size = (uint64_t)sb.st_size;
	XXH3_128bits_reset(st);
	XXH3_128bits_update(st, buf, (size_t)(a + b));
	XXH3_128bits_update(st, &size, sizeof(size));
	XXH128_canonical_t c;
	XXH128_canonicalFromHash(&c, XXH3_128bits_digest(st));
	XXH3_freeState(st);
	memcpy(ret, c.digest, 16);
	return 16;
}

int gw_symbolizer__add_file(struct gw_symbolizer *s, const char *path, uint8_t *ret_id, size_t id_size)
{
	struct gw_sym_handle *h = NULL;
	uint8_t bid[GW_ELF_MAX_BUILD_ID];
	struct entry *e;
	int n, r;

	r = handle_from_path(s, path, NULL, NULL, 0, &h);
	if (r < 0)
		return r;
	n = h->elf ? gw_elf_build_id(h->elf, bid, sizeof(bid)) : -ENOENT;
	if (n == -ENOENT && !h->elf) {
		/* The ELF was closed (no DWARF): read the build ID again. */
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		Elf *elf = fd >= 0 ? elf_begin(fd, ELF_C_READ_MMAP, NULL) : NULL;
		n = elf ? gw_elf_build_id(elf, bid, sizeof(bid)) : -EBADMSG;
		if (elf)
			elf_end(elf);
		if (fd >= 0)
			close(fd);
	}
	if (n == -ENOENT)
		n = content_id(path, bid);
	if (n < 0 || (size_t)n > id_size) {
		gw_sym_handle__release(h);
		return n < 0 ? n : -ENOBUFS;
	}
	memcpy(ret_id, bid, (size_t)n);
	pthread_mutex_lock(&s->lock);
	uint64_t hash = id_hash(bid, (size_t)n);
	e = map_find(s, bid, (size_t)n, hash);
	if (!e)
		e = map_insert(s, bid, (size_t)n, hash);
	if (e && e->state != E_LOADING && e->state != E_FETCHING) {
		set_ready(s, e, h);
		h = NULL;
	}
	pthread_mutex_unlock(&s->lock);
	gw_sym_handle__release(h);
	return e ? n : -ENOMEM;
}

void gw_symbolizer__stats(struct gw_symbolizer *s, struct gw_symbolizer_stats *ret)
{
	memset(ret, 0, sizeof(*ret));
	ret->memory_hits = atomic_load(&s->st.memory_hits);
	ret->memory_misses = atomic_load(&s->st.memory_misses);
	ret->disk_hits = atomic_load(&s->st.disk_hits);
	ret->debuginfod_fetches = atomic_load(&s->st.debuginfod_fetches);
	ret->debuginfod_ok = atomic_load(&s->st.debuginfod_ok);
	ret->debuginfod_failed = atomic_load(&s->st.debuginfod_failed);
	ret->uploads_accepted = atomic_load(&s->st.uploads_accepted);
	ret->uploads_rejected = atomic_load(&s->st.uploads_rejected);
	ret->upload_errors = atomic_load(&s->st.upload_errors);
	ret->evictions = atomic_load(&s->st.evictions);
	pthread_mutex_lock(&s->lock);
	ret->memory_bytes = s->bytes;
	ret->memory_entries = s->n_entries;
	ret->fetch_queue = s->q_len;
	pthread_mutex_unlock(&s->lock);
	ret->disk_bytes = s->store ? gw_symstore__bytes(s->store) : 0;
}

const char *gw_symbolizer__debuginfod_urls(const struct gw_symbolizer *s)
{
	return s->debuginfod_urls;
}

static char *join_urls(const char *const *urls, size_t n)
{
	size_t len = 1;
	char *out;

	for (size_t i = 0; i < n; i++)
		len += strlen(urls[i]) + 1;
	out = calloc(1, len);
	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		if (i)
			strcat(out, " ");
		strcat(out, urls[i]);
	}
	return out;
}

/*
 * libdebuginfod reads its settings from the environment only (elfutils 0.188
 * has no API for URLs or timeouts), so they are set here, once, when the
 * processor is created on the main thread before any worker thread reads
 * the environment.
 */
static int setup_debuginfod_env(struct gw_symbolizer *s)
{
	char buf[64];
	uint64_t secs = (s->cfg.debuginfod_timeout_ns + NSEC_PER_SEC - 1) / NSEC_PER_SEC;

	if (setenv(DEBUGINFOD_URLS_ENV_VAR, s->debuginfod_urls, 1) < 0)
		return -errno;
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)(secs ? secs : 1));
	if (setenv(DEBUGINFOD_TIMEOUT_ENV_VAR, buf, 1) < 0 || setenv(DEBUGINFOD_MAXTIME_ENV_VAR, buf, 1) < 0)
		return -errno;
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)s->cfg.max_file_bytes);
	if (setenv(DEBUGINFOD_MAXSIZE_ENV_VAR, buf, 1) < 0)
		return -errno;
	/* libdebuginfod's own download cache: under cache_dir, else a temporary directory (its
	 * default, ~/.cache, is often read-only in containers). */
	char path[PATH_MAX];
	const char *tmpdir = getenv("TMPDIR");
	if (s->cache_dir)
		snprintf(path, sizeof(path), "%s/debuginfod-client", s->cache_dir);
	else
		snprintf(path, sizeof(path), "%s/stackrelay-debuginfod-client", tmpdir && tmpdir[0] ? tmpdir : "/tmp");
	if (setenv(DEBUGINFOD_CACHE_PATH_ENV_VAR, path, 1) < 0)
		return -errno;
	return 0;
}

struct gw_symbolizer *gw_symbolizer_new(const struct gw_symbolizer_config *cfg)
{
	struct gw_symbolizer *s = calloc(1, sizeof(*s));
	int r = -ENOMEM;

	if (!s)
		goto fail;
	s->cfg = *cfg;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->fetch_cond, NULL);
	atomic_init(&s->stopping, false);
	atomic_init(&s->open_dwarf, 0);
	if (!s->cfg.memory_cache_bytes)
		s->cfg.memory_cache_bytes = GW_SYM_DEFAULT_MEMORY_CACHE_BYTES;
	if (!s->cfg.disk_cache_bytes)
		s->cfg.disk_cache_bytes = GW_SYM_DEFAULT_DISK_CACHE_BYTES;
	if (!s->cfg.debuginfod_timeout_ns)
		s->cfg.debuginfod_timeout_ns = GW_SYM_DEFAULT_DEBUGINFOD_TIMEOUT_NS;
	if (!s->cfg.debuginfod_max_concurrency)
		s->cfg.debuginfod_max_concurrency = GW_SYM_DEFAULT_DEBUGINFOD_CONCURRENCY;
	if (!s->cfg.negative_cache_ttl_ns)
		s->cfg.negative_cache_ttl_ns = GW_SYM_DEFAULT_NEGATIVE_TTL_NS;
	if (!s->cfg.max_upload_bytes)
		s->cfg.max_upload_bytes = GW_SYM_DEFAULT_MAX_UPLOAD_BYTES;
	if (!s->cfg.max_file_bytes)
		s->cfg.max_file_bytes = GW_SYM_DEFAULT_MAX_FILE_BYTES;
	if (!s->cfg.wanted_timeout_ns)
		s->cfg.wanted_timeout_ns = DEFAULT_WANTED_TIMEOUT_NS;
	s->cfg.cache_dir = NULL;
	s->cfg.debug_dirs = NULL;
	s->cfg.debuginfod_urls = NULL;
	if ((r = gw_elf_init()) < 0)
		goto fail;
	r = -ENOMEM;

	if (cfg->cache_dir && cfg->cache_dir[0]) {
		s->cache_dir = strdup(cfg->cache_dir);
		if (!s->cache_dir)
			goto fail;
		s->store = gw_symstore_new(s->cache_dir, s->cfg.disk_cache_bytes);
		if (!s->store) {
			r = -errno;
			goto fail;
		}
	}
	if (cfg->n_debug_dirs) {
		s->debug_dirs = calloc(cfg->n_debug_dirs, sizeof(char *));
		if (!s->debug_dirs)
			goto fail;
		for (size_t i = 0; i < cfg->n_debug_dirs; i++) {
			size_t l = strlen(cfg->debug_dirs[i]);
			while (l > 1 && cfg->debug_dirs[i][l - 1] == '/')
				l--;
			s->debug_dirs[i] = strndup(cfg->debug_dirs[i], l);
			if (!s->debug_dirs[i])
				goto fail;
			s->n_debug_dirs++;
		}
	}
	if (cfg->n_debuginfod_urls) {
		s->debuginfod_urls = join_urls(cfg->debuginfod_urls, cfg->n_debuginfod_urls);
	} else {
		const char *env = getenv(DEBUGINFOD_URLS_ENV_VAR);
		s->debuginfod_urls = strdup(env ? env : "");
	}
	if (!s->debuginfod_urls)
		goto fail;
	if (s->debuginfod_urls[strspn(s->debuginfod_urls, " \t")] != '\0') {
		r = setup_debuginfod_env(s);
		if (r < 0)
			goto fail;
		s->threads = calloc(s->cfg.debuginfod_max_concurrency, sizeof(pthread_t));
		if (!s->threads) {
			r = -ENOMEM;
			goto fail;
		}
		for (unsigned i = 0; i < s->cfg.debuginfod_max_concurrency; i++) {
			r = -pthread_create(&s->threads[i], NULL, fetch_thread, s);
			if (r < 0)
				goto fail;
			s->n_threads++;
		}
	} else {
		s->debuginfod_urls[0] = '\0';
	}
	return s;
fail:
	gw_symbolizer_free(s);
	errno = -r;
	return NULL;
}

void gw_symbolizer_free(struct gw_symbolizer *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	atomic_store(&s->stopping, true);
	pthread_cond_broadcast(&s->fetch_cond);
	pthread_mutex_unlock(&s->lock);
	for (size_t i = 0; i < s->n_threads; i++)
		pthread_join(s->threads[i], NULL);
	free(s->threads);
	while (s->lru.head)
		map_remove(s, SR_CONTAINER_OF(s->lru.head, struct entry, lru));
	free(s->buckets);
	gw_symstore_free(s->store);
	for (size_t i = 0; i < s->n_debug_dirs; i++)
		free(s->debug_dirs[i]);
	free(s->debug_dirs);
	free(s->debuginfod_urls);
	free(s->cache_dir);
	pthread_cond_destroy(&s->fetch_cond);
	pthread_mutex_destroy(&s->lock);
	free(s);
}
