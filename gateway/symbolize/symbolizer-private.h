/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the files of the symbolizer share, and nothing else includes:
 * symbolizer.c (the map of executable IDs and its LRU, the public API),
 * symbolizer-handle.c (loaded symbols: building a handle from an ELF file,
 * resolving addresses with it), symbolizer-local.c (the disk store and the
 * debug directories) and symbolizer-debuginfod.c (the fetch threads).
 */
#ifndef SR_GW_SYMBOLIZER_PRIVATE_H
#define SR_GW_SYMBOLIZER_PRIVATE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <libelf.h>

#include "common/htab.h"
#include "common/list.h"
#include "symbolize.h"

struct gw_dwarf;
struct gw_disk_store;
struct gw_symtab;

#define NSEC_PER_SEC 1000000000ULL
#define ID_MAX	     64

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
	struct gw_disk_store *store;

	pthread_mutex_t lock;
	struct sr_htab map; /* executable ID -> entry: struct sr_htab_ptr slots */
	size_t n_entries;
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
		_Atomic uint64_t uploads_accepted, uploads_rejected, upload_errors, uploads_outranked, evictions;
		/* debug-directory lookups refused: a "."/".." component, a link out of the directory */
		_Atomic uint64_t debug_paths_dot_dot, debug_paths_escaping;
	} st;
};

#define STAT_INC(s, f) atomic_fetch_add_explicit(&(s)->st.f, 1, memory_order_relaxed)

/* symbolizer.c; callers hold s->lock */
uint64_t gw_sym_id_hash(const uint8_t *id, size_t len);
struct entry *gw_sym_map_find(struct gw_symbolizer *s, const uint8_t *id, size_t len, uint64_t hash);
void gw_sym_set_ready(struct gw_symbolizer *s, struct entry *e, struct gw_sym_handle *h);
void gw_sym_set_wanted(struct gw_symbolizer *s, struct entry *e, uint64_t now);
void gw_sym_notify(struct gw_symbolizer *s);

/* symbolizer-handle.c */
struct gw_sym_handle *gw_sym_handle_new(void);
struct gw_sym_handle *gw_sym_handle_ref(struct gw_sym_handle *h);
void gw_sym_handle_account(struct gw_sym_handle *h, uint64_t file_size);
int gw_sym_handle_from_fd(struct gw_symbolizer *s, int fd, struct gw_symtab *tab, const uint8_t *expect,
			  size_t expect_len, struct gw_sym_handle **ret);
int gw_sym_handle_from_path(struct gw_symbolizer *s, const char *path, struct gw_symtab *tab, const uint8_t *expect,
			    size_t expect_len, struct gw_sym_handle **ret);

/* symbolizer-local.c */
int gw_sym_load_local(struct gw_symbolizer *s, const struct entry *e, const struct gw_sym_hint *hint,
		      struct gw_sym_handle **ret);

/* symbolizer-debuginfod.c; gw_sym_enqueue_fetch() with s->lock held */
void *gw_sym_fetch_thread(void *arg);
bool gw_sym_enqueue_fetch(struct gw_symbolizer *s, struct entry *e);
char *gw_sym_join_urls(const char *const *urls, size_t n);
int gw_sym_setup_debuginfod_env(struct gw_symbolizer *s);

#endif
