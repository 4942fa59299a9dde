/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The gateway's internal profile model: what every processor and exporter
 * works on (docs/gateway.md, "Internal model").
 *
 * SHAPE
 *   struct gw_profiles   one batch: resources, each with its samples.
 *   struct gw_resource   attributes (host/node, container, process; processors
 *                        add k8s.* etc.) + the sampling frequency + samples.
 *   struct gw_sample     a stack + count + pid/tid/thread name (48 bytes; the
 *                        time window is the resource's) + optional attributes.
 *   struct gw_stack      an array of locations, leaf first (content-addressed
 *                        by the agent's 128-bit stack ID).
 *   struct gw_location   (executable or kernel, address, kind). The symbolize
 *                        processor later gives it lines: several per location
 *                        for inlined frames, innermost first (as OTLP wants).
 *                        Interpreted and JIT frames name a gw_function instead
 *                        and get their one line when created.
 *   struct gw_function   a function the agent named (runtime, name, file,
 *                        first line): CPython code, perf-map JIT code.
 *   struct gw_executable build ID etc.; struct gw_kernel the running kernel.
 *
 * MEMORY: two kinds of storage.
 *   1. Definitions (executables, kernels, locations, stacks) are immutable,
 *      reference-counted objects shared by every batch, interned in the
 *      gateway-wide content-addressed stores (struct gw_stores): one object per
 *      distinct ID, so equal stacks from 1000 nodes cost one allocation, and a
 *      location symbolized once is symbolized for every batch. The stores are
 *      LRU and byte-bounded: eviction only removes an object from the index (the
 *      next agent that uses it is told it is missing and resends it); the object
 *      itself lives until its last reference is dropped.
 *   2. Everything per batch (resources, samples, attribute strings, thread
 *      names) lives in the batch: arrays plus an arena of string chunks. A
 *      sample holds one reference to its stack. Merging two batches moves the
 *      arena chunks, so no string is copied and pointers stay valid.
 *
 * THREADING RULES
 *   - A batch is owned by exactly one party at a time (the component whose
 *     consume() received it, until it emits, drops or frees it). The owner may
 *     hand it to a worker thread (uv_queue_work) and must not touch it on the
 *     loop until the work is done. A batch whose refcount is > 1 (shared by the
 *     runtime's fan-out to several exporters) is read-only: call
 *     gw_profiles__make_writable() before changing it.
 *   - Definitions are immutable after creation except:
 *       gw_location.lines   set once (gw_location__set_lines), atomically:
 *                           readers load it with gw_location__lines();
 *       gw_executable.flags, gw_kernel.flags  atomic bits (want symbols, ...);
 *       gw_executable/gw_kernel.symbols_pending_until  atomic deadline
 *                           (gw_executable__set_lookup and friends);
 *       gw_executable.symbolizer / gw_kernel.symbolizer  a set-once slot the
 *                           symbolize processor may use (gw_slot__set_once).
 *     So workers may read any definition and set lines while the loop thread
 *     exports other batches sharing the same locations.
 *   - Reference counts are atomic: ref/unref from any thread.
 *   - The stores (lookup/intern) are thread-safe (one mutex per store), but
 *     their hot user is the receiver on the loop thread.
 *   - gw_profiles__* functions are not thread-safe for the same batch; distinct
 *     batches may be used on distinct threads.
 *   - Emitting a batch to the next stage (runtime.h) and accounting drops may
 *     be done only on the loop thread / from any thread respectively
 *     (accounting.h).
 *
 * Strings are UTF-8, NUL-terminated, never NULL in definitions ("" when
 * absent); in samples, thread_name may be NULL.
 */
#ifndef SR_GW_MODEL_H
#define SR_GW_MODEL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Longest executable, kernel or stack ID accepted from an agent (bytes). */
#define GW_ID_MAX 64

struct gw_id {
	uint8_t len; /* 0: none */
	uint8_t bytes[GW_ID_MAX];
};

/* Copies len bytes; returns -EINVAL when len > GW_ID_MAX. */
int gw_id_set(struct gw_id *id, const void *bytes, size_t len);
bool gw_id_equal(const struct gw_id *a, const struct gw_id *b);
/* Lower-case hex into buf (2 * GW_ID_MAX + 1 bytes is always enough); returns buf. */
const char *gw_id_to_hex(const struct gw_id *id, char *buf, size_t size);

/* Shared header of store objects but locations; private to model.c and the stores (store*.c). */
struct gw_obj {
	atomic_uint refs;
	uint32_t bytes; /* memory charged to the store */
	uint32_t hash;	/* the key's hash, low half: enough to pick a bucket and to skip most unequal keys */
	bool indexed;	/* in its store's index (holding one reference) */
	uint8_t type;	/* enum gw_obj_type */
	uint8_t flags;	/* GW_OBJ_REFERENCED: under the store's lock (model-store.c) */
	/*
	 * The recency list, while the object is in it (lru_next not NULL). An
	 * indexed object out of it keeps there the number of stored locations
	 * naming it (under its store's lock, model-store.c).
	 */
	union {
		struct gw_obj *lru_prev;
		uint32_t held;
	};
	struct gw_obj *lru_next, *hash_next;
};

/* gw_obj.flags */
#define GW_OBJ_REFERENCED    0x01 /* found since it last reached the cold end */
#define GW_OBJ_LINES_CHARGED 0x02 /* a location counted in its shared lines' store_holders (gw_location.flags) */

/* ---- executables and kernels ---- */

enum gw_exe_id_kind {
	GW_EXE_ID_UNSPECIFIED = 0,
	GW_EXE_ID_GNU_BUILD_ID = 1,
	GW_EXE_ID_CONTENT_HASH = 2,
	GW_EXE_ID_KERNEL = 3,
};

/* gw_executable.flags */
enum {
	/* The symbolizer could not symbolize it from its cache or debuginfod:
	 * receivers list its ID in PushResponse.wanted_symbols. */
	GW_EXE_WANT_SYMBOLS = 1u << 0,
	/* An agent uploaded a symbol table for it (or said it cannot). */
	GW_EXE_SYMBOLS_UPLOADED = 1u << 1,
	/* The symbolize processor has looked it up at least once (gw_executable__set_lookup). */
	GW_EXE_SYMBOLS_LOOKED_UP = 1u << 2,
	/* A stackrelay agent defined it (ExecutableDef): one can be asked to upload
	 * its symbols. Executables only OTLP senders named never get an upload, so
	 * batches do not wait for one. */
	GW_EXE_AGENT_DEFINED = 1u << 3,
};

struct gw_executable {
	struct gw_obj obj;
	struct gw_id id;
	enum gw_exe_id_kind id_kind;
	const char *file_name; /* base name */
	const char *path;      /* as seen inside the process's mount namespace */
	const char *debuglink; /* .gnu_debuglink name or "" */
	uint64_t file_size;
	struct gw_id gnu_build_id; /* the GNU build ID when known (== id for GNU_BUILD_ID) */
	bool is_go;
	atomic_uint flags;
	_Atomic(void *) symbolizer; /* set-once slot for the symbolize processor */
	/* Receiver scratch (de-duplication of work within one request); atomic, relaxed. */
	atomic_uint_fast64_t scratch_epoch;
	/*
	 * Until when (CLOCK_MONOTONIC ns, 0: not) a symbol lookup is in progress:
	 * PushResponse.symbols_pending counts it for agents that probe it
	 * (docs/agent-protocol.md, "Symbol probes"). A deadline, not a flag, so
	 * a lookup nobody looks at again stops counting by itself.
	 */
	atomic_uint_fast64_t symbols_pending_until;
	/* Until when (CLOCK_MONOTONIC ns) one agent is being asked for its symbols (gw_executable__claim_ask). */
	atomic_uint_fast64_t symbols_asked_until;
	/* Who was asked (an agent identity, gw_ingest_identity()) and until when its upload is taken (0: nobody). */
	atomic_uint_fast64_t symbols_asked_of, symbols_answer_until;
};

struct gw_kernel_module {
	const char *name;
	uint64_t start, size;
	struct gw_id build_id;
};

/* How a kernel ID's frames count addresses (KernelDef.addressing, docs/agent-protocol.md "Kernel frames"). */
enum gw_kernel_addressing {
	GW_KERNEL_RUNTIME = 0,	     /* this boot's runtime addresses */
	GW_KERNEL_IMAGE_OFFSET = 1,  /* offsets from the image's _text: one ID per kernel build */
	GW_KERNEL_MODULE_OFFSET = 2, /* offsets from a module's start: one ID per module build */
};

struct gw_kernel {
	struct gw_obj obj;
	struct gw_id id;
	const char *release;
	const char *boot_id;
	const char *module;	  /* MODULE_OFFSET: the module's name; else "" */
	const char *mapping_name; /* "[kernel.kallsyms]", or "[module]" for a module's ID */
	struct gw_id build_id;	  /* the image's, or the module's */
	enum gw_kernel_addressing addressing;
	const struct gw_kernel_module *modules; /* sorted by start */
	uint32_t n_modules;
	_Atomic(void *) symbolizer; /* set-once slot for the symbolize processor */
	atomic_uint flags;	    /* GW_EXE_WANT_SYMBOLS, GW_EXE_SYMBOLS_UPLOADED, as for executables */
	atomic_uint_fast64_t symbols_pending_until;		     /* as for executables */
	atomic_uint_fast64_t symbols_asked_until;		     /* as for executables */
	atomic_uint_fast64_t symbols_asked_of, symbols_answer_until; /* as for executables */
};

/* What an executable is made from (all strings may be NULL = ""). */
struct gw_executable_def {
	const void *id;
	size_t id_len;
	enum gw_exe_id_kind id_kind;
	const char *file_name, *path, *debuglink;
	uint64_t file_size;
	const void *gnu_build_id;
	size_t gnu_build_id_len;
	bool is_go;
};

struct gw_kernel_def {
	const void *id;
	size_t id_len;
	const char *release, *boot_id, *module;
	enum gw_kernel_addressing addressing;
	const void *build_id;
	size_t build_id_len;
	const struct gw_kernel_module *modules; /* any order; copied */
	uint32_t n_modules;
};

/* ---- functions named by agents (interpreted and JIT code) ---- */

struct gw_function {
	struct gw_obj obj;
	struct gw_id id;
	const char *runtime;   /* "cpython", "perf-map", ... */
	const char *name;      /* never "" */
	const char *file_name; /* "" when unknown */
	uint32_t start_line;   /* 0 when unknown */
};

struct gw_function_def {
	const void *id;
	size_t id_len;
	const char *runtime, *name, *file_name; /* NULL = "" */
	uint32_t start_line;
};

/* ---- locations, lines, stacks ---- */

enum gw_frame_kind {
	GW_FRAME_UNKNOWN = 0,	  /* JIT / anonymous memory: raw runtime address, no executable */
	GW_FRAME_USER = 1,	  /* ELF virtual address inside exe */
	GW_FRAME_KERNEL = 2,	  /* runtime kernel address; kernel names the kernel */
	GW_FRAME_INTERPRETED = 3, /* interpreted code: function, line; address is the bytecode offset */
	GW_FRAME_JIT = 4,	  /* JIT code named from a perf map: function; address is the runtime address */
};

/* The frame's location names a gw_function (its lines are set when it is created). */
static inline bool gw_frame_kind_has_function(enum gw_frame_kind k)
{
	return k == GW_FRAME_INTERPRETED || k == GW_FRAME_JIT;
}

struct gw_line {
	const char *function;	 /* demangled/display name, "" when unknown */
	const char *system_name; /* mangled/linkage name, "" when same or unknown */
	const char *file;	 /* source file, "" when unknown */
	uint32_t line;		 /* 0 when unknown */
	uint32_t column;	 /* 0 when unknown */
	uint32_t start_line;	 /* function's first line, 0 when unknown */
};

struct gw_lines_table;

/*
 * Immutable; one allocation holding the strings. Innermost (inlined) first.
 * Reference counted: lines from a gw_lines_table (lines.c) are shared by
 * every location with the same lines (all addresses of a function named by
 * its symbol alone share one), others have one owner.
 */
struct gw_lines {
	uint32_t n;
	atomic_uint refs;	      /* changed under table's lock while table is set */
	struct gw_lines_table *table; /* NULL: not shared */
	/* Stored locations holding it (under the locations store's lock): charged while one does (model-store.c). */
	uint32_t store_holders;
	struct gw_lines *hash_next;
	uint64_t hash;
	struct gw_line lines[];
};

/* Builds a gw_lines copying every string (NULL becomes ""), not shared; NULL + errno. */
struct gw_lines *gw_lines_new(const struct gw_line *lines, uint32_t n);
/* Drops a reference (NULL-safe); the last one frees it (and takes it out of its table). */
void gw_lines_free(struct gw_lines *l);

/* Shared lines: a table of them, bounded by the locations that hold them. */
struct gw_lines_table *gw_lines_table_new(void);
/* Entries still held (a batch outliving the stores) stay valid, unshared, freed by their last holder. */
void gw_lines_table_free(struct gw_lines_table *t);
/* A reference to lines equal to (lines, n): the table's or a new one added to it; NULL + errno. */
struct gw_lines *gw_lines_table__intern(struct gw_lines_table *t, const struct gw_line *lines, uint32_t n);
struct gw_lines_table_stats {
	uint64_t entries, bytes, hits, misses;
};
void gw_lines_table__stats(struct gw_lines_table *t, struct gw_lines_table_stats *ret);

/*
 * 40 bytes: a fleet's gateway holds millions. Not a gw_obj: the locations
 * store (model-store-locations.c) indexes locations by slot, in a table of 4-byte
 * slot numbers, and links its recency list through slot numbers too, so a
 * location carries neither a chain pointer nor its hash nor 8-byte links;
 * its charge, slot and line are derived (gw_location__charge(),
 * gw_location__slot(), gw_location__line()).
 */
struct gw_location {
	atomic_uint refs;
	uint8_t sub;   /* its enum gw_frame_kind and GW_LOCATION_PRESET: set before it is shared */
	uint8_t flags; /* GW_OBJ_REFERENCED, GW_OBJ_LINES_CHARGED, GW_LOCATION_*: under the locations store's lock */
	uint16_t unused;
	/*
	 * The locations store's recency list, while it is in it
	 * (GW_LOCATION_LISTED): the slots toward the hot and the cold end
	 * (GW_SLOT_NONE: the end). Out of it, `held` counts the stored stacks
	 * holding it (under the locations store's lock).
	 */
	union {
		uint32_t lru_prev;
		uint32_t held;
	};
	uint32_t lru_next;
	uint64_t address;
	/*
	 * What the address is in, a reference chosen by kind: USER the executable,
	 * KERNEL the kernel, INTERPRETED and JIT the function (UNKNOWN: none).
	 * One member for the three: read it with gw_location__exe(),
	 * gw_location__kernel() and gw_location__function().
	 */
	union {
		struct gw_executable *exe;
		struct gw_kernel *kernel;
		struct gw_function *function;
	} in;
	_Atomic(const struct gw_lines *) lines; /* NULL until symbolized; preset for INTERPRETED, JIT */
};
_Static_assert(sizeof(struct gw_location) == 40, "a location stays 40 bytes (a replica holds millions)");

/* gw_location.sub: its enum gw_frame_kind, and this bit when its lines came with the frame
 * (gw_stores__intern_location_lines): part of its identity, never replaced. */
#define GW_LOCATION_KIND_MASK 0x0f
#define GW_LOCATION_PRESET    0x80

/* gw_location.flags, beside GW_OBJ_REFERENCED and GW_OBJ_LINES_CHARGED */
#define GW_LOCATION_INDEXED   0x04 /* in the locations store's index (holding one reference) */
#define GW_LOCATION_LISTED    0x08 /* in its recency list (no stored stack holds it) */
#define GW_LOCATION_OWN_LINES 0x10 /* its charge counts its own (unshared) lines */

/* No slot: the end of a list of locations. */
#define GW_SLOT_NONE UINT32_MAX

static inline enum gw_frame_kind gw_location__kind(const struct gw_location *l)
{
	return (enum gw_frame_kind)(l->sub & GW_LOCATION_KIND_MASK);
}

static inline bool gw_location__preset(const struct gw_location *l)
{
	return l->sub & GW_LOCATION_PRESET;
}

/*
 * The location table (location-slots.c): every location lives in a slot of
 * chunks that never move, so that stacks name their frames by 4-byte slots.
 */
#define GW_LOCATION_CHUNK_SHIFT 13
#define GW_LOCATION_MAX_CHUNKS	(1u << 16)
extern struct gw_location *gw_location_chunks[GW_LOCATION_MAX_CHUNKS];

/* The location in slot (one that something holds: its stack, a reference). */
static inline struct gw_location *gw_location__at(uint32_t slot)
{
	return &gw_location_chunks[slot >> GW_LOCATION_CHUNK_SHIFT][slot & ((1u << GW_LOCATION_CHUNK_SHIFT) - 1)];
}
/* The slot of l: gw_location__at(gw_location__slot(l)) == l. */
uint32_t gw_location__slot(const struct gw_location *l);
struct gw_slot_pool_stats; /* slot-pool.h */

/* Locations alive and slots mapped (live ones and free ones, reused lowest first). */
void gw_location_slots__stats(uint64_t *live, uint64_t *capacity);
/* The location table's bytes: live, mapped, in resident pages, given back (slot-pool.h). */
void gw_location_slots__bytes(struct gw_slot_pool_stats *ret);

/* The location's executable (USER frames), kernel (KERNEL frames) or function (INTERPRETED, JIT); else NULL. */
static inline struct gw_executable *gw_location__exe(const struct gw_location *l)
{
	return gw_location__kind(l) == GW_FRAME_USER ? l->in.exe : NULL;
}
static inline struct gw_kernel *gw_location__kernel(const struct gw_location *l)
{
	return gw_location__kind(l) == GW_FRAME_KERNEL ? l->in.kernel : NULL;
}
static inline struct gw_function *gw_location__function(const struct gw_location *l)
{
	return gw_frame_kind_has_function(gw_location__kind(l)) ? l->in.function : NULL;
}

/* NULL while unsymbolized; safe from any thread. */
static inline const struct gw_lines *gw_location__lines(const struct gw_location *l)
{
	return atomic_load_explicit(&((struct gw_location *)l)->lines, memory_order_acquire);
}

/* INTERPRETED and JIT: the source line its frame named (its lines' first; 0: unknown); else 0. */
static inline uint32_t gw_location__line(const struct gw_location *l)
{
	const struct gw_lines *lines;

	if (!gw_frame_kind_has_function(gw_location__kind(l)))
		return 0;
	lines = gw_location__lines(l);
	return lines && lines->n ? lines->lines[0].line : 0;
}
/*
 * Publishes lines once. Returns true when they were set (the location owns
 * them now), false when another thread got there first (the caller still owns
 * lines and frees them).
 */
bool gw_location__set_lines(struct gw_location *l, struct gw_lines *lines);
/* Bytes a gw_lines occupies (the struct, its lines and their strings). */
size_t gw_lines__bytes(const struct gw_lines *lines);

/* Members ordered without padding, frames in 4 bytes each: a fleet's gateway holds millions. */
struct gw_stack {
	struct gw_obj obj;
	bool truncated;
	/* Every location has its lines (set once, by the symbolize processor: lines never change after). */
	atomic_bool symbolized;
	uint8_t id_len; /* the ID's bytes come first in words[] (gw_stack__id()) */
	uint32_t n_locations;
	/* Receiver scratch, as in gw_executable, in 32 bits: a request whose epoch matches it
	 * modulo 2^32 skips work that is only an optimization (agent-samples.c, note_wanted). */
	atomic_uint scratch_epoch;
	/*
	 * The ID (id_len bytes, then to a 4-byte boundary), then the frames'
	 * location slots, leaf first, each holding a reference
	 * (gw_stack__slots(), gw_stack__location()). The ID first: a store's
	 * lookup compares it right after the header, on the header's cache line
	 * or the next, not one past the frames.
	 */
	uint32_t words[];
};

/* Bytes of the stack slabs (stack-slabs.c): in live stacks' slots, mapped, in resident pages, given back. */
void gw_stack_slabs__stats(struct gw_slot_pool_stats *ret);

/* The stack's ID (id_len bytes): stored at its length, not GW_ID_MAX, as a fleet holds millions of stacks. */
static inline const uint8_t *gw_stack__id(const struct gw_stack *s)
{
	return (const uint8_t *)s->words;
}

/* The location slots of the stack's frames, leaf first (n_locations of them). */
static inline const uint32_t *gw_stack__slots(const struct gw_stack *s)
{
	return s->words + (s->id_len + 3u) / 4;
}

/* Frame i of the stack, leaf first (i < n_locations). */
static inline struct gw_location *gw_stack__location(const struct gw_stack *s, uint32_t i)
{
	return gw_location__at(gw_stack__slots(s)[i]);
}

/* Set-once slot helpers for the symbolizer's per-definition data. */
static inline void *gw_slot__get(_Atomic(void *) *slot)
{
	return atomic_load_explicit(slot, memory_order_acquire);
}
/* Returns true when v was stored, false when the slot already held something. */
bool gw_slot__set_once(_Atomic(void *) *slot, void *v);

/* References (NULL-safe). unref frees at zero. */
struct gw_executable *gw_executable__ref(struct gw_executable *e);
void gw_executable__unref(struct gw_executable *e);
struct gw_kernel *gw_kernel__ref(struct gw_kernel *k);
void gw_kernel__unref(struct gw_kernel *k);
struct gw_location *gw_location__ref(struct gw_location *l);
void gw_location__unref(struct gw_location *l);
struct gw_stack *gw_stack__ref(struct gw_stack *s);
void gw_stack__unref(struct gw_stack *s);
struct gw_function *gw_function__ref(struct gw_function *f);
void gw_function__unref(struct gw_function *f);

static inline bool gw_executable__wants_symbols(const struct gw_executable *e)
{
	return atomic_load_explicit(&((struct gw_executable *)e)->flags, memory_order_relaxed) & GW_EXE_WANT_SYMBOLS;
}
/* The symbolize processor calls this when it needs the agent's symbol table. */
void gw_executable__set_want_symbols(struct gw_executable *e, bool want);

/* The same for a kernel: receivers list its ID in wanted_symbols and the agent uploads its kallsyms. */
static inline bool gw_kernel__wants_symbols(const struct gw_kernel *k)
{
	return atomic_load_explicit(&((struct gw_kernel *)k)->flags, memory_order_relaxed) & GW_EXE_WANT_SYMBOLS;
}
void gw_kernel__set_want_symbols(struct gw_kernel *k, bool want);

/*
 * One agent at a time is asked for a wanted table: a receiver lists a wanted
 * ID in a response only when claim_ask returns true, which it does for one
 * caller per ttl_ns (thread-safe). Every agent that uses the executable would
 * otherwise upload the same table until the first upload is loaded (16
 * agents, 16 copies). After ttl_ns without the table (the agent died, the
 * response was lost, its uploads are slow), the next request may claim it
 * and ask its agent. release_ask ends a claim whose response was never
 * delivered, so the next request asks at once.
 */
bool gw_executable__claim_ask(struct gw_executable *e, uint64_t ttl_ns);
void gw_executable__release_ask(struct gw_executable *e);
bool gw_kernel__claim_ask(struct gw_kernel *k, uint64_t ttl_ns);
void gw_kernel__release_ask(struct gw_kernel *k);

/*
 * Who may upload a table (docs/agent-protocol.md, "Who may upload"): after a
 * successful claim the receiver records the identity of the agent it asks
 * (a non-zero hash of its instance and authenticated principal) and how long
 * that agent's answer is taken (answer_ns, longer than the claim: an agent
 * uploads at 1 MiB/s behind its other uploads). answered() is true, once,
 * for that identity within that time, and ends the ask (a table or an error
 * answers it); release_ask forgets it. Thread-safe (atomics): a second agent
 * asked after the first one's claim expired replaces it.
 */
void gw_executable__record_ask(struct gw_executable *e, uint64_t identity, uint64_t answer_ns);
bool gw_executable__answered(struct gw_executable *e, uint64_t identity);
void gw_kernel__record_ask(struct gw_kernel *k, uint64_t identity, uint64_t answer_ns);
bool gw_kernel__answered(struct gw_kernel *k, uint64_t identity);

/*
 * Symbol lookup progress, for agents that probe IDs at exit (PushRequest.probe_symbols,
 * docs/agent-protocol.md "Symbol probes"). Thread-safe (atomics).
 *
 * set_lookup: the symbolize processor looked the executable up; pending_ns > 0
 * while the lookup goes on elsewhere (debuginfod): pending for that long at
 * most; 0 when it ended (resolved, wanted from agents, or never resolvable).
 *
 * set_queued: the receiver accepted samples using it; until the symbolize
 * processor has looked at it, it counts as pending for at most pending_ns
 * (the batch is on its way to the processor). Once looked up, no effect.
 *
 * symbols_pending: a deadline above is in the future and the symbols are not
 * wanted from agents (wanted IDs are listed, not counted).
 */
void gw_executable__set_lookup(struct gw_executable *e, uint64_t pending_ns);
void gw_executable__set_queued(struct gw_executable *e, uint64_t pending_ns);
bool gw_executable__symbols_pending(const struct gw_executable *e);
void gw_kernel__set_lookup(struct gw_kernel *k, uint64_t pending_ns);
void gw_kernel__set_queued(struct gw_kernel *k, uint64_t pending_ns);
bool gw_kernel__symbols_pending(const struct gw_kernel *k);

/* ---- the gateway-wide stores ---- */

struct gw_store_limits {
	uint64_t executable_bytes; /* default GW_STORE_DEFAULT_EXECUTABLE_BYTES */
	uint64_t kernel_bytes;	   /* default GW_STORE_DEFAULT_KERNEL_BYTES */
	uint64_t location_bytes;   /* default GW_STORE_DEFAULT_LOCATION_BYTES */
	uint64_t stack_bytes;	   /* default GW_STORE_DEFAULT_STACK_BYTES */
	uint64_t function_bytes;   /* default GW_STORE_DEFAULT_FUNCTION_BYTES */
};

#define GW_STORE_DEFAULT_EXECUTABLE_BYTES (16ULL << 20)
#define GW_STORE_DEFAULT_KERNEL_BYTES	  (4ULL << 20)
#define GW_STORE_DEFAULT_LOCATION_BYTES	  (256ULL << 20)
#define GW_STORE_DEFAULT_STACK_BYTES	  (256ULL << 20)
#define GW_STORE_DEFAULT_FUNCTION_BYTES	  (64ULL << 20)
/* The largest bound a store may be given (the configuration refuses more): 1 TiB, a typo's size, not a host's. */
#define GW_STORE_MAX_BYTES (1LL << 40)

enum gw_store_kind {
	GW_STORE_EXECUTABLES,
	GW_STORE_KERNELS,
	GW_STORE_LOCATIONS,
	GW_STORE_STACKS,
	GW_STORE_FUNCTIONS,
	_GW_STORE_MAX,
};

struct gw_store_stats {
	uint64_t entries;
	uint64_t bytes;
	uint64_t limit_bytes;
	uint64_t hits, misses, inserts, evictions;
	uint64_t second_chances; /* cold entries still referenced elsewhere, moved to the hot end instead of evicted */
	uint64_t rescued;	 /* cold entries found since they were last at the cold end, moved to the hot end */
	/* Bytes of the ones stored objects hold (charged to the stacks store instead): locations stored stacks
	 * hold; executables, kernels and functions stored locations name. */
	uint64_t held_bytes;
	uint64_t lines_bytes; /* stacks: shared lines stored locations hold (in bytes) */
	uint64_t index_bytes; /* the index's buckets (GW_OBJ_OVERHEAD counts them in the charges) */
};

struct gw_stores;

/*
 * gw_location__set_lines(), and charges the lines while l is indexed,
 * evicting to stay under the bound: lines of the stores' shared table
 * (gw_stores__lines()) once, however many stored locations share them, to
 * the stacks store's bound; other lines to l (so to the stacks store while a
 * stored stack holds it, else the locations store). What the symbolize
 * processor uses.
 */
bool gw_stores__set_lines(struct gw_stores *s, struct gw_location *l, struct gw_lines *lines);
/*
 * The table of lines its locations share (lines.c). Shared lines are charged
 * once while a stored location holds them (gw_stores__set_lines()), so a
 * store's bytes are the memory it holds.
 */
struct gw_lines_table *gw_stores__lines(struct gw_stores *s);

/* limits may be NULL (defaults); zero members mean the default. NULL + errno. */
struct gw_stores *gw_stores_new(const struct gw_store_limits *limits);
/* Drops the stores' references; objects still referenced by batches live on. */
void gw_stores_free(struct gw_stores *s);
const char *gw_store_kind_to_string(enum gw_store_kind k);
void gw_stores__stats(struct gw_stores *s, enum gw_store_kind k, struct gw_store_stats *ret);
/* Bytes charged to all the stores (held locations and shared lines once, in the stacks store's). */
uint64_t gw_stores__bytes(struct gw_stores *s);
/* The sum of the stores' bounds: what they may hold once full. */
uint64_t gw_stores__limit_bytes(struct gw_stores *s);
/* Changes a store's byte bound (0: its default), evicting at once when over it. */
void gw_stores__set_limit(struct gw_stores *s, enum gw_store_kind k, uint64_t bytes);

/* Lookups return a new reference (refresh LRU) or NULL when not stored. */
struct gw_executable *gw_stores__executable(struct gw_stores *s, const void *id, size_t id_len);
struct gw_kernel *gw_stores__kernel(struct gw_stores *s, const void *id, size_t id_len);
struct gw_stack *gw_stores__stack(struct gw_stores *s, const void *id, size_t id_len);
struct gw_function *gw_stores__function(struct gw_stores *s, const void *id, size_t id_len);

/*
 * Interning: returns a reference to the stored object with that ID, creating
 * it from def when absent (an existing one wins: IDs are content addresses).
 * NULL + errno (EINVAL bad ID, ENOMEM).
 */
struct gw_executable *gw_stores__intern_executable(struct gw_stores *s, const struct gw_executable_def *def);
struct gw_kernel *gw_stores__intern_kernel(struct gw_stores *s, const struct gw_kernel_def *def);
/* NULL + errno (EINVAL: bad ID or no name, ENOMEM). */
struct gw_function *gw_stores__intern_function(struct gw_stores *s, const struct gw_function_def *def);
/* exe for USER frames, kernel for KERNEL frames, neither for UNKNOWN. */
struct gw_location *gw_stores__intern_location(struct gw_stores *s, enum gw_frame_kind kind, uint64_t address,
					       struct gw_executable *exe, struct gw_kernel *kernel);
/*
 * A location whose lines came with it (a frame its sender symbolized, an
 * interpreter frame): the lines (copied) are part of its identity, so the
 * same address with other lines, or without lines, is another location. It
 * is created with its lines set, so the symbolize processor leaves it as it
 * is. n may be 0: a frame kept without lines (never symbolized either).
 */
struct gw_location *gw_stores__intern_location_lines(struct gw_stores *s, enum gw_frame_kind kind, uint64_t address,
						     struct gw_executable *exe, struct gw_kernel *kernel,
						     const struct gw_line *lines, uint32_t n);
/*
 * An INTERPRETED or JIT frame's location: keyed by (kind, address, function,
 * line), with one line preset from the function (function = name, file =
 * file_name, start_line, line), so the symbolize processor leaves it alone.
 */
struct gw_location *gw_stores__intern_function_location(struct gw_stores *s, enum gw_frame_kind kind, uint64_t address,
							struct gw_function *function, uint32_t line);
/* Takes the locations' references in every case (also on failure). */
struct gw_stack *gw_stores__intern_stack(struct gw_stores *s, const void *id, size_t id_len, bool truncated,
					 struct gw_location **locations, uint32_t n);

/* ---- batches ---- */

enum gw_attr_type {
	GW_ATTR_STRING,
	GW_ATTR_INT,
	GW_ATTR_BOOL,
	GW_ATTR_DOUBLE,
};

struct gw_attr {
	const char *key;
	enum gw_attr_type type;
	union {
		const char *s;
		int64_t i;
		bool b;
		double d;
	} v;
};

/* A sample's own attributes (OTLP input: trace and span IDs, ...), in the batch. */
struct gw_sample_attrs {
	uint32_t n;
	struct gw_attr v[];
};

/*
 * One record: 48 bytes, as a fleet's batches hold hundreds of thousands of
 * them. The time it covers is its resource's (gw_resource.start_ns/end_ns):
 * nothing downstream reads a sample's own window, only a profile's span.
 */
struct gw_sample {
	struct gw_stack *stack;		     /* a reference owned by the batch */
	uint64_t count;			     /* CPU samples taken, or off-CPU waits recorded (GW_PROFILE_OFF_CPU) */
	uint64_t off_cpu_ns;		     /* GW_PROFILE_OFF_CPU: nanoseconds off CPU over the count waits; else 0 */
	const char *thread_name;	     /* in the batch, or NULL */
	const struct gw_sample_attrs *attrs; /* per-sample attributes, in the batch, or NULL */
	uint32_t pid, tid;
};

_Static_assert(sizeof(struct gw_sample) == 48, "a sample stays 48 bytes (batches hold many)");

static inline uint32_t gw_sample__n_attrs(const struct gw_sample *s)
{
	return s->attrs ? s->attrs->n : 0;
}

/*
 * What a resource's samples measure. Each type is exported as its own
 * profile (docs/exporters.md, "Profile types"); resources of different types
 * never merge.
 */
enum gw_profile_type {
	GW_PROFILE_CPU = 0,	/* count CPU samples at frequency_hz */
	GW_PROFILE_OFF_CPU = 1, /* count waits, off_cpu_ns their length */
};

struct gw_resource {
	struct gw_attr *attrs;
	uint32_t n_attrs, cap_attrs;
	uint32_t frequency_hz;		   /* sampling frequency: period = 1e9 / frequency_hz */
	enum gw_profile_type profile_type; /* set when created (gw_profiles__add_typed_resource) */
	struct gw_sample *samples;
	uint32_t n_samples, cap_samples;
	uint64_t total_count; /* sum of samples[].count */
	/*
	 * The time the samples cover, Unix nanoseconds: the earliest start and
	 * the latest end of what was added (gw_resource__cover); start_ns >
	 * end_ns while nothing was (a new resource: UINT64_MAX, 0).
	 */
	uint64_t start_ns, end_ns;
	/*
	 * The address (IP, no port) of the peer that sent this resource, when
	 * the receiver knows it and no agent named its node (NULL: unknown).
	 * Not an attribute, so it is never exported; k8s_attributes'
	 * `from: connection` association reads it. Set with
	 * gw_resource__set_peer(); batches merge resources regardless of it.
	 */
	const char *peer_addr;
	/* private: attribute hash for merging (0 = recompute) */
	uint64_t attrs_hash;
};

struct gw_profiles_chunk;

struct gw_profiles {
	/* Read-only for users; change through the functions below. */
	struct gw_resource *resources;
	uint32_t n_resources, cap_resources;
	uint64_t total_count; /* sum of every sample's count */
	uint64_t n_samples;   /* number of sample records */
	uint64_t created_ns;  /* CLOCK_MONOTONIC at creation (batch age) */
	/*
	 * Request metadata as "name: value" lines, each ending in '\n'; NULL:
	 * none. client_metadata: every header of the request the batch came
	 * in (a receiver's include_metadata; names lowercase). metadata: what a
	 * batch processor's metadata_keys kept of it (names as written there):
	 * batches are kept apart by it, and exporters send it as headers.
	 * Set with gw_profiles__set_metadata().
	 */
	const char *client_metadata;
	const char *metadata;

	/* private */
	atomic_uint refs;
	uint64_t mem_bytes; /* estimate, also added to the gateway-wide total */
	struct gw_profiles_chunk *chunks;
	uint32_t route_pipeline, route_stage; /* the runtime's: where this batch goes next */
	uint32_t *res_index;		      /* open-addressing index of resources by attrs_hash (merge) */
	uint32_t res_index_cap;
	bool res_index_valid;
};

#define gw_profiles_foreach_resource(p, r)                                                                             \
	for (struct gw_resource *r = (p)->resources; r < (p)->resources + (p)->n_resources; r++)
#define gw_resource_foreach_sample(r, s)                                                                               \
	for (struct gw_sample *s = (r)->samples; s < (r)->samples + (r)->n_samples; s++)

/* An empty batch with refcount 1; NULL + errno. */
struct gw_profiles *gw_profiles_new(void);
struct gw_profiles *gw_profiles__ref(struct gw_profiles *p);
/* Drops a reference; the last one frees the batch and its stack references. NULL-safe. */
void gw_profiles__unref(struct gw_profiles *p);
static inline void gw_profiles_free(struct gw_profiles *p)
{
	gw_profiles__unref(p);
}
/* Copies either (NULL: none) into the batch's memory; 0 or -ENOMEM (nothing changed then). */
int gw_profiles__set_metadata(struct gw_profiles *p, const char *client_metadata, const char *metadata);
/* Deep copy (strings copied, stacks re-referenced); NULL + errno. */
struct gw_profiles *gw_profiles__clone(const struct gw_profiles *p);
/* If *pp is shared, replaces it with a private clone (dropping one reference). */
int gw_profiles__make_writable(struct gw_profiles **pp);

/* Estimated heap bytes of this batch (arrays, strings; not the shared stacks). */
static inline uint64_t gw_profiles__memory_bytes(const struct gw_profiles *p)
{
	return p->mem_bytes;
}
/* Sum of gw_profiles__memory_bytes over every live batch in the process. */
uint64_t gw_profiles_live_bytes(void);
uint64_t gw_profiles_live_count(void);

/* Copies into the batch's arena; NULL + errno. NULL s gives NULL. */
const char *gw_profiles__strdup(struct gw_profiles *p, const char *s);
const char *gw_profiles__strndup(struct gw_profiles *p, const char *s, size_t n);
void *gw_profiles__alloc(struct gw_profiles *p, size_t size); /* zeroed, 8-aligned */

/*
 * Adds a resource with copies of attrs (keys and string values copied);
 * returns it (valid until the next add_resource/merge) or NULL + errno.
 */
struct gw_resource *gw_profiles__add_resource(struct gw_profiles *p, const struct gw_attr *attrs, uint32_t n,
					      uint32_t frequency_hz);
/* The same for samples of another type than CPU. */
struct gw_resource *gw_profiles__add_typed_resource(struct gw_profiles *p, const struct gw_attr *attrs, uint32_t n,
						    uint32_t frequency_hz, enum gw_profile_type type);
/* "cpu", "off_cpu": for logs, file names and metrics. */
const char *gw_profile_type_name(enum gw_profile_type type);
/* Sets (replaces or appends) one attribute, copying key and value. */
int gw_resource__set_attr(struct gw_profiles *p, struct gw_resource *r, const struct gw_attr *a);
int gw_resource__set_string(struct gw_profiles *p, struct gw_resource *r, const char *key, const char *value);
int gw_resource__set_int(struct gw_profiles *p, struct gw_resource *r, const char *key, int64_t value);
/* NULL when absent. */
const struct gw_attr *gw_resource__attr(const struct gw_resource *r, const char *key);
const char *gw_resource__string(const struct gw_resource *r, const char *key);
/* Removes key if present; returns 1 when removed, 0 when absent. */
int gw_resource__remove_attr(struct gw_resource *r, const char *key);
/* Records the peer address (copied into the batch); NULL clears it. Returns 0 or -ENOMEM. */
int gw_resource__set_peer(struct gw_profiles *p, struct gw_resource *r, const char *addr);

/*
 * Appends a sample to r (a resource of p). Takes a new reference on s->stack
 * (the caller keeps its own); thread_name and attrs are copied into the batch.
 * Returns 0 or -errno.
 */
int gw_resource__add_sample(struct gw_profiles *p, struct gw_resource *r, const struct gw_sample *s);
/* Same, but takes over the caller's stack reference and uses thread_name and
 * attrs as given (they must already live in p). For hot paths. */
int gw_resource__add_sample_owned(struct gw_profiles *p, struct gw_resource *r, const struct gw_sample *s);
/* Makes room for exactly n more samples in r (no doubling): a receiver that counted them first. 0 or -errno. */
int gw_resource__reserve_samples(struct gw_profiles *p, struct gw_resource *r, uint32_t n);
/*
 * Gives back the room small sample arrays (up to 64 KiB) grew for but did
 * not use (they double as they grow). A receiver calls it on a batch it has
 * finished filling, before the batch waits in the pipeline.
 */
void gw_profiles__fit(struct gw_profiles *p);
/* Widens r's time span (start_ns/end_ns) to cover [start_ns, end_ns]. */
static inline void gw_resource__cover(struct gw_resource *r, uint64_t start_ns, uint64_t end_ns)
{
	if (start_ns < r->start_ns)
		r->start_ns = start_ns;
	if (end_ns > r->end_ns)
		r->end_ns = end_ns;
}

/*
 * Keeps only the samples for which keep() returns true; removed samples'
 * stack references are dropped and empty resources removed. Returns the sum of
 * the removed counts (the caller accounts them as dropped with its reason).
 */
uint64_t gw_profiles__filter(struct gw_profiles *p,
			     bool (*keep)(const struct gw_resource *r, const struct gw_sample *s, void *userdata),
			     void *userdata);

/*
 * Moves every sample of src into dst, coalescing resources with equal
 * attributes, frequency and profile type; consumes src (one reference). Both must be
 * writable by the caller, on the same route and with equal metadata (-EXDEV otherwise, src
 * untouched). Returns 0 or -errno (src untouched on error).
 */
int gw_profiles__merge(struct gw_profiles *dst, struct gw_profiles *src);

/* Re-checks totals and references; for tests and debug builds. 0 or -EUCLEAN. */
int gw_profiles__check(const struct gw_profiles *p);

/* ---- symbol tables uploaded by agents (PushRequest.symbol_tables) ---- */

struct gw_symbol {
	uint64_t address; /* ELF virtual address */
	uint64_t size;
	const char *name; /* as in the ELF (mangled) */
};

/*
 * One allocation; symbols sorted by address. id is the executable's or the
 * kernel's ID; exe is set (a reference) for an executable, NULL for a kernel
 * (a kallsyms snapshot: runtime addresses, module symbols "name [module]").
 */
struct gw_symbol_table {
	struct gw_executable *exe; /* a reference, or NULL for a kernel's table */
	struct gw_id id;
	struct gw_symbol *symbols;
	uint32_t n_symbols;
	const char **sources; /* ".symtab", ".dynsym", ".gnu_debugdata" */
	uint32_t n_sources;
	const char *error; /* the agent could not read the file; "" otherwise */
	uint64_t bytes;	   /* size of the allocation */
};

void gw_symbol_table_free(struct gw_symbol_table *t);

#endif
