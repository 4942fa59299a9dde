/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The symbolizer: a hash map from executable ID to an entry whose state says
 * where its symbols are (loaded, loading, being fetched, wanted from the
 * agent, unavailable), a byte-bounded LRU over the entries, and the public
 * API that moves entries between those states: lookups, agent uploads,
 * local files, stats, creating and freeing.
 *
 * Loaded symbols live in a reference-counted handle (symbolizer-handle.c),
 * so an entry can be evicted while a worker thread still resolves with its
 * handle. The sources behind the memory cache are in symbolizer-local.c
 * (disk store, debug directories) and symbolizer-debuginfod.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <elfutils/debuginfod.h>
#include <xxhash.h>

#include "common/clock.h"
#include "common/list.h"
#include "common/macro.h"
#include "core/model.h"
#include "elfsym.h"
#include "disk-store.h"
#include "symbolize.h"
#include "symbolizer-private.h"
#include "symtab.h"

#define DEFAULT_WANTED_TIMEOUT_NS (10ULL * NSEC_PER_SEC)

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

/* ---- the map and the LRU (callers hold s->lock) ---- */

uint64_t gw_sym_id_hash(const uint8_t *id, size_t len)
{
	return XXH3_64bits(id, len);
}

struct id_key {
	const uint8_t *id;
	size_t len;
};

static bool map_eq(const void *slot, const void *key)
{
	const struct entry *e = ((const struct sr_htab_ptr *)slot)->value;
	const struct id_key *k = key;

	return e->id_len == k->len && memcmp(e->id, k->id, k->len) == 0;
}

static struct sr_htab_ptr *map_slot(struct gw_symbolizer *s, const uint8_t *id, size_t len, uint64_t hash)
{
	struct id_key k = { id, len };

	return sr_htab__get(&s->map, hash, &k);
}

struct entry *gw_sym_map_find(struct gw_symbolizer *s, const uint8_t *id, size_t len, uint64_t hash)
{
	struct sr_htab_ptr *slot = map_slot(s, id, len, hash);

	return slot ? slot->value : NULL;
}

static void evict(struct gw_symbolizer *s, struct entry *keep);

static struct entry *map_insert(struct gw_symbolizer *s, const uint8_t *id, size_t len, uint64_t hash)
{
	struct sr_htab_ptr *slot;
	struct entry *e = calloc(1, sizeof(*e));

	if (!e)
		return NULL;
	if (sr_htab__add(&s->map, hash, (void **)&slot) < 0) {
		free(e);
		return NULL;
	}
	slot->value = e;
	memcpy(e->id, id, len);
	e->id_len = (uint8_t)len;
	e->hash = hash;
	/* A new entry is "wanted" until a source says otherwise; callers set the real state. */
	e->state = E_WANTED;
	e->wanted_since_ns = sr_now_ns();
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
	struct sr_htab_ptr *slot = map_slot(s, e->id, e->id_len, e->hash);

	if (slot)
		sr_htab__del(&s->map, slot);
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

void gw_sym_set_ready(struct gw_symbolizer *s, struct entry *e, struct gw_sym_handle *h)
{
	gw_sym_handle__release(e->h);
	e->h = h;
	e->state = E_READY;
	set_bytes(s, e, sizeof(*e) + h->bytes);
	evict(s, e);
}

void gw_sym_set_wanted(struct gw_symbolizer *s, struct entry *e, uint64_t now)
{
	e->state = E_WANTED;
	e->expires_ns = now + s->cfg.negative_cache_ttl_ns;
	if (!e->wanted_since_ns)
		e->wanted_since_ns = now;
}

void gw_sym_notify(struct gw_symbolizer *s)
{
	if (s->cfg.notify)
		s->cfg.notify(s->cfg.notify_userdata);
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
	hash = gw_sym_id_hash(id, id_len);
	now = sr_now_ns();
	pthread_mutex_lock(&s->lock);
	e = gw_sym_map_find(s, id, id_len, hash);
	if (e) {
		sr_list__unlink(&s->lru, &e->lru);
		sr_list__push_front(&s->lru, &e->lru);
		switch (e->state) {
		case E_READY:
			STAT_INC(s, memory_hits);
			*ret_handle = gw_sym_handle_ref(e->h);
			pthread_mutex_unlock(&s->lock);
			return GW_SYM_READY;
		case E_LOADING:
		case E_FETCHING:
			e->waiters = true;
			pthread_mutex_unlock(&s->lock);
			return GW_SYM_PENDING;
		case E_WANTED:
			/* The negative cache expired: give debuginfod another chance. */
			if (now >= e->expires_ns && gw_sym_enqueue_fetch(s, e)) {
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
	int r = gw_sym_load_local(s, e, hint, &h);

	pthread_mutex_lock(&s->lock);
	bool waiters = e->waiters;
	e->waiters = false;
	if (e->state == E_READY && r == 0 && !h->from_upload && e->h && e->h->from_upload) {
		/* An upload arrived meanwhile; a debug file or the store outranks it. */
		gw_sym_set_ready(s, e, h);
		*ret_handle = gw_sym_handle_ref(h);
		st = GW_SYM_READY;
	} else if (e->state != E_LOADING) {
		/* An upload arrived meanwhile (add_upload replaced the state) and nothing local outranks it. */
		st = e->state == E_READY ? GW_SYM_READY : GW_SYM_WANTED;
		if (st == GW_SYM_READY)
			*ret_handle = gw_sym_handle_ref(e->h);
		gw_sym_handle__release(h);
	} else if (r == 0) {
		gw_sym_set_ready(s, e, h);
		*ret_handle = gw_sym_handle_ref(h);
		st = GW_SYM_READY;
	} else if (!(hint && hint->is_kernel) && gw_sym_enqueue_fetch(s, e)) {
		st = GW_SYM_PENDING;
		e->waiters = true;
	} else {
		gw_sym_set_wanted(s, e, now);
		st = GW_SYM_WANTED;
	}
	pthread_mutex_unlock(&s->lock);
	if (waiters)
		gw_sym_notify(s);
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
	hash = gw_sym_id_hash(id, id_len);
	if (error && error[0]) {
		STAT_INC(s, upload_errors);
		pthread_mutex_lock(&s->lock);
		e = gw_sym_map_find(s, id, id_len, hash);
		if (!e)
			e = map_insert(s, id, id_len, hash);
		if (e && e->state != E_READY && e->state != E_LOADING && e->state != E_FETCHING) {
			e->state = E_UNAVAILABLE;
			e->expires_ns = sr_now_ns() + s->cfg.negative_cache_ttl_ns;
		}
		pthread_mutex_unlock(&s->lock);
		gw_sym_notify(s);
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
	h = gw_sym_handle_new();
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
	gw_sym_handle_account(h, 0);
	pthread_mutex_lock(&s->lock);
	e = gw_sym_map_find(s, id, id_len, hash);
	if (e && e->state == E_READY && e->h && !e->h->from_upload) {
		/* A debug file, the store or debuginfod named it: an agent's table never replaces that. */
		pthread_mutex_unlock(&s->lock);
		STAT_INC(s, uploads_outranked);
		r = -EEXIST;
		goto fail_counted;
	}
	pthread_mutex_unlock(&s->lock);
	if (s->store) {
		void *buf;
		size_t len;
		gw_sym_hex(id, id_len, hex, sizeof(hex));
		if (gw_symtab__serialize(h->tab, &buf, &len) == 0) {
			(void)gw_disk_store__write_table(s->store, GW_DISK_STORE_UPLOAD, hex, buf, len);
			free(buf);
		}
	}
	pthread_mutex_lock(&s->lock);
	e = gw_sym_map_find(s, id, id_len, hash);
	if (!e)
		e = map_insert(s, id, id_len, hash);
	if (e && !(e->state == E_READY && e->h && !e->h->from_upload)) {
		if (e->state == E_FETCHING) {
			/*
			 * Still queued: take it out of the queue so the fetch thread never sees it.
			 * Otherwise a fetch is running: it finds the entry READY and drops its result.
			 */
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
			}
		}
		gw_sym_set_ready(s, e, h);
		h = NULL;
	}
	pthread_mutex_unlock(&s->lock);
	gw_sym_handle__release(h);
	STAT_INC(s, uploads_accepted);
	gw_sym_notify(s);
	return 0;
fail:
	STAT_INC(s, uploads_rejected);
fail_counted:
	gw_symtab_builder_free(b);
	gw_sym_handle__release(h);
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

	r = gw_sym_handle_from_path(s, path, NULL, NULL, 0, &h);
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
	uint64_t hash = gw_sym_id_hash(bid, (size_t)n);
	e = gw_sym_map_find(s, bid, (size_t)n, hash);
	if (!e)
		e = map_insert(s, bid, (size_t)n, hash);
	if (e && e->state != E_LOADING && e->state != E_FETCHING) {
		gw_sym_set_ready(s, e, h);
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
	ret->uploads_outranked = atomic_load(&s->st.uploads_outranked);
	ret->debug_paths_dot_dot = atomic_load(&s->st.debug_paths_dot_dot);
	ret->debug_paths_escaping = atomic_load(&s->st.debug_paths_escaping);
	ret->evictions = atomic_load(&s->st.evictions);
	pthread_mutex_lock(&s->lock);
	ret->memory_bytes = s->bytes;
	ret->memory_entries = s->n_entries;
	ret->fetch_queue = s->q_len;
	pthread_mutex_unlock(&s->lock);
	ret->disk_bytes = s->store ? gw_disk_store__bytes(s->store) : 0;
}

const char *gw_symbolizer__debuginfod_urls(const struct gw_symbolizer *s)
{
	return s->debuginfod_urls;
}

struct gw_symbolizer *gw_symbolizer_new(const struct gw_symbolizer_config *cfg)
{
	struct gw_symbolizer *s = calloc(1, sizeof(*s));
	int r = -ENOMEM;

	if (!s)
		goto fail;
	s->cfg = *cfg;
	pthread_mutex_init(&s->lock, NULL);
	sr_htab_init(&s->map, sizeof(struct sr_htab_ptr), map_eq);
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
		s->store = gw_disk_store_new(s->cache_dir, s->cfg.disk_cache_bytes);
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
		s->debuginfod_urls = gw_sym_join_urls(cfg->debuginfod_urls, cfg->n_debuginfod_urls);
	} else {
		const char *env = getenv(DEBUGINFOD_URLS_ENV_VAR);
		s->debuginfod_urls = strdup(env ? env : "");
	}
	if (!s->debuginfod_urls)
		goto fail;
	if (s->debuginfod_urls[strspn(s->debuginfod_urls, " \t")] != '\0') {
		r = gw_sym_setup_debuginfod_env(s);
		if (r < 0)
			goto fail;
		s->threads = calloc(s->cfg.debuginfod_max_concurrency, sizeof(pthread_t));
		if (!s->threads) {
			r = -ENOMEM;
			goto fail;
		}
		for (unsigned i = 0; i < s->cfg.debuginfod_max_concurrency; i++) {
			r = -pthread_create(&s->threads[i], NULL, gw_sym_fetch_thread, s);
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
	sr_htab_done(&s->map);
	gw_disk_store_free(s->store);
	for (size_t i = 0; i < s->n_debug_dirs; i++)
		free(s->debug_dirs[i]);
	free(s->debug_dirs);
	free(s->debuginfod_urls);
	free(s->cache_dir);
	pthread_cond_destroy(&s->fetch_cond);
	pthread_mutex_destroy(&s->lock);
	free(s);
}
