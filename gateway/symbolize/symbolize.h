/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The gateway's symbolizer (docs/symbolization.md): turns (executable ID, ELF
 * virtual address) and (kernel ID, runtime kernel address) into function
 * names, and, when DWARF is available, source file, line, column and inlined
 * frames.
 *
 * SOURCES, in order, per executable ID:
 *   1. memory: a byte-bounded LRU of loaded symbol sources (memory_cache_size);
 *   2. disk: cache_dir/symtab/xx/rest.sym (tables built before from debug
 *      files and debuginfod survive restarts), cache_dir/.build-id/xx/rest.debug
 *      (debug files fetched from debuginfod), then every debug_dirs entry in the
 *      /usr/lib/debug layout (.build-id/xx/rest.debug, and the
 *      .gnu_debuglink name next to the executable's path; opened beneath the
 *      directory: a path with ".." or a link out of it is refused), then an
 *      agent's stored upload (cache_dir/symtab/xx/rest.upload.sym);
 *   3. debuginfod (libdebuginfod): debuginfo, else the executable, by GNU
 *      build ID, on the symbolizer's own fetch threads (at most
 *      debuginfod_max_concurrency at once), each bounded by debuginfod_timeout;
 *      failures are remembered for negative_cache_ttl;
 *   4. the agent: the executable is reported "wanted" and the agent uploads
 *      its .symtab/.dynsym (gw_symbolizer__add_upload), which is stored on
 *      disk too.
 * Kernel IDs skip 2 (build-ID files) and 3: kernel symbols come from the
 * agent's kallsyms upload (runtime addresses of that boot, so KASLR needs no
 * correction) or from the disk store.
 *
 * THREADS: every function is thread-safe. gw_symbolizer__acquire() may read
 * and parse files: call it from worker threads (uv_queue_work), never on the
 * event loop. Network fetches never run on the caller's thread.
 */
#ifndef SR_GW_SYMBOLIZE_H
#define SR_GW_SYMBOLIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "demangle.h"

struct gw_symbol; /* core/model.h: {address, size, name} */

/* Defaults of the symbolize processor's keys (docs/symbolization.md). */
#define GW_SYM_DEFAULT_MEMORY_CACHE_BYTES     (256ULL << 20)
#define GW_SYM_DEFAULT_DISK_CACHE_BYTES	      (2ULL << 30)
#define GW_SYM_DEFAULT_DEBUGINFOD_TIMEOUT_NS  (30ULL * 1000000000ULL)
#define GW_SYM_DEFAULT_DEBUGINFOD_CONCURRENCY 2
#define GW_SYM_DEFAULT_NEGATIVE_TTL_NS	      (600ULL * 1000000000ULL)
#define GW_SYM_DEFAULT_MAX_UPLOAD_BYTES	      (64ULL << 20)
#define GW_SYM_DEFAULT_MAX_FILE_BYTES	      (4ULL << 30)
/* Executables waiting for a debuginfod fetch; past it they are asked from the agent. */
#define GW_SYM_FETCH_QUEUE_MAX 4096
/* Memory charged for an executable known to have no symbols (negative entry). */
#define GW_SYM_NEGATIVE_ENTRY_BYTES 256
/*
 * Debug files kept open (an fd and a mapping each) for DWARF lines at once;
 * executables loaded beyond it get function names only until others are evicted.
 */
#define GW_SYM_MAX_OPEN_DWARF 512
/* Most source lines (inlined frames + the function) one address resolves to. */
#define GW_SYM_MAX_LINES 16

struct gw_symbolizer_config {
	const char *cache_dir;		    /* NULL or "": no disk store */
	const char *const *debuginfod_urls; /* NULL/0: $DEBUGINFOD_URLS when set */
	size_t n_debuginfod_urls;
	uint64_t debuginfod_timeout_ns;	     /* 0: default */
	unsigned debuginfod_max_concurrency; /* 0: default; fetch threads */
	uint64_t negative_cache_ttl_ns;	     /* 0: default */
	uint64_t memory_cache_bytes;	     /* 0: default */
	uint64_t disk_cache_bytes;	     /* 0: default */
	enum gw_demangle_mode demangle;
	uint64_t max_upload_bytes;     /* 0: default */
	uint64_t max_file_bytes;       /* largest ELF/debug file opened; 0: default */
	const char *const *debug_dirs; /* e.g. /usr/lib/debug */
	size_t n_debug_dirs;
	bool no_lines; /* skip DWARF (function names only) */
	/*
	 * How long an executable may stay "wanted" from agents before lookups
	 * stop reporting it pending (GW_SYM_MISSING instead); 0: 10 s.
	 */
	uint64_t wanted_timeout_ns;
	/* Called from any thread after an executable's symbols arrived or failed. */
	void (*notify)(void *userdata);
	void *notify_userdata;
};

enum gw_sym_state {
	GW_SYM_READY,	    /* symbols are loaded: *ret_handle is set */
	GW_SYM_PENDING,	    /* loading or fetching from debuginfod: notify() follows */
	GW_SYM_WANTED,	    /* no local or debuginfod symbols: ask the agent to upload */
	GW_SYM_MISSING,	    /* wanted for longer than wanted_timeout: do not wait for it */
	GW_SYM_UNAVAILABLE, /* definitely none (the agent could not read the file) */
};

/* What the gateway knows about an executable besides its ID (all optional). */
struct gw_sym_hint {
	const uint8_t *build_id; /* GNU build ID (for debuginfod and .build-id paths) */
	size_t build_id_len;
	const char *path;      /* path on the node (for .gnu_debuglink lookups) */
	const char *debuglink; /* .gnu_debuglink name */
	bool is_kernel;	       /* a kernel ID: only uploads and the disk store */
};

/* One resolved source line, innermost inlined frame first. */
struct gw_sym_line {
	const char *function;	 /* display name (demangled per mode) */
	const char *system_name; /* name as in the binary (mangled) */
	const char *file;	 /* NULL when unknown */
	uint32_t line, column;	 /* 0 when unknown */
	uint32_t start_line;	 /* the function's declaration line, 0 when unknown */
};

struct gw_sym_result {
	uint32_t n;
	struct gw_sym_line lines[GW_SYM_MAX_LINES];
	uint64_t symbol_start; /* the enclosing symbol's address (0 when only DWARF knew it) */
	/* private: demangled DWARF names live here until the next resolve */
	char arena[8192];
	size_t arena_len;
};

struct gw_symbolizer_stats {
	uint64_t memory_hits, memory_misses;
	uint64_t disk_hits; /* tables or debug files found on disk */
	uint64_t debuginfod_fetches, debuginfod_ok, debuginfod_failed;
	uint64_t uploads_accepted, uploads_rejected, upload_errors;
	uint64_t uploads_outranked; /* uploads refused: a debug file or debuginfod named it already */
	/* debug_dirs lookups refused: an agent's path or debuglink with "."/"..", a file leading out of the dir */
	uint64_t debug_paths_dot_dot, debug_paths_escaping;
	uint64_t evictions;
	uint64_t memory_bytes, memory_entries;
	uint64_t disk_bytes;
	uint64_t fetch_queue;
};

struct gw_symbolizer;
struct gw_sym_handle;

/* Starts the fetch threads when debuginfod is configured. NULL + errno. */
struct gw_symbolizer *gw_symbolizer_new(const struct gw_symbolizer_config *cfg);
/* Stops fetches (in-flight ones are aborted within about a second) and frees. NULL-safe. */
void gw_symbolizer_free(struct gw_symbolizer *s);
/* The debuginfod URLs in use ("" when none). */
const char *gw_symbolizer__debuginfod_urls(const struct gw_symbolizer *s);

/*
 * Looks the executable up through the sources above. On GW_SYM_READY,
 * *ret_handle holds a reference: resolve with it, then release it. Other
 * states leave *ret_handle NULL. id is the executable (or kernel) ID, 1..64
 * bytes; a bad ID gives GW_SYM_UNAVAILABLE.
 */
enum gw_sym_state gw_symbolizer__acquire(struct gw_symbolizer *s, const uint8_t *id, size_t id_len,
					 const struct gw_sym_hint *hint, struct gw_sym_handle **ret_handle);
void gw_sym_handle__release(struct gw_sym_handle *h);

/*
 * Resolves addr. Returns the number of lines (>= 1) in r, or -ENOENT when no
 * symbol covers addr. r's strings stay valid until the handle is released or
 * r is reused.
 */
int gw_sym_handle__resolve(struct gw_sym_handle *h, uint64_t addr, struct gw_sym_result *r);
/* Function name only (no DWARF), the fast path: 0 or -ENOENT. */
int gw_sym_handle__function(struct gw_sym_handle *h, uint64_t addr, const char **ret_name,
			    const char **ret_system_name);
size_t gw_sym_handle__symbol_count(const struct gw_sym_handle *h);
/* The i-th symbol's start and size in address order (tools, benchmarks): 0 or -ENOENT. */
int gw_sym_handle__symbol_at(const struct gw_sym_handle *h, size_t i, uint64_t *ret_start, uint64_t *ret_size);
bool gw_sym_handle__has_lines(const struct gw_sym_handle *h);

/*
 * THE UPLOAD CONTRACT (called by the symbolize processor's symbol-table
 * handler, which the agent receiver feeds through
 * gw_runtime__symbol_table()): an agent's SymbolTable for executable (or
 * kernel) ID id. symbols are ELF virtual addresses (runtime addresses for a
 * kernel: a kallsyms snapshot of that boot, module symbols named
 * "name [module]"), any order, size 0 when unknown, names as in the binary
 * (mangled). error non-empty means the agent cannot read the file: the ID is
 * then UNAVAILABLE for negative_cache_ttl.
 *
 * Validated before use: 1..64-byte ID, at most GW_SYMTAB_MAX_SYMBOLS
 * symbols, 24 bytes per symbol plus names within max_upload_bytes, names
 * non-empty (cut at GW_SYMTAB_MAX_NAME), address + size not overflowing.
 * Sources are ranked: an upload never replaces a table from a debug file,
 * the store's trusted tables or debuginfod (-EEXIST, counted in
 * uploads_outranked), and a trusted source found later replaces it. The
 * receiver takes an upload only from the agent it asked (docs/agent-protocol.md,
 * "Who may upload"); this function trusts its caller for that. The table is
 * also written to the disk store, apart from trusted tables. Returns 0,
 * -EINVAL (bad ID), -E2BIG (over a limit), -EBADMSG (no usable symbol),
 * -EEXIST (outranked), -ENOMEM. Any thread; the work is proportional to the table.
 */
int gw_symbolizer__add_upload(struct gw_symbolizer *s, const uint8_t *id, size_t id_len,
			      const struct gw_symbol *symbols, size_t n_symbols, const char *error);

/*
 * Registers a local ELF file (executable, library or debug file) under its
 * GNU build ID (without one: 16 bytes of XXH3-128 over the first and last
 * 4 KiB and the size), as if found in a debug directory; *ret_id gets the ID
 * used (up to 64 bytes) and its length is returned. For tools, tests and
 * benchmarks.
 */
int gw_symbolizer__add_file(struct gw_symbolizer *s, const char *path, uint8_t *ret_id, size_t id_size);

void gw_symbolizer__stats(struct gw_symbolizer *s, struct gw_symbolizer_stats *ret);

/* Lower-case hex of id into buf (2 * len + 1 bytes); returns buf. */
const char *gw_sym_hex(const uint8_t *id, size_t len, char *buf, size_t size);

#endif
