// SPDX-License-Identifier: Apache-2.0
/*
 * symbolize's pass over one batch, on a libuv worker thread (symbolize.c
 * queues it): each location without lines is looked up in its executable's
 * or kernel's symbols (once per executable a pass) and gets its lines, a
 * fallback name, or stays unsymbolized while symbols are on their way.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "core/model.h"
#include "core/runtime.h"
#include "core/threads.h"
#include "common/log.h"
#include "common/macro.h"
#include "symbolize-private.h"

/* Distinct executables and kernels tracked while symbolizing one batch. */
#define SYMBOLIZE_BATCH_EXES_INITIAL 64

struct exe_slot {
	const void *key; /* struct gw_executable * or struct gw_kernel * */
	enum gw_sym_state state;
	struct gw_sym_handle *h;
};

/*
 * The executables and kernels of one batch by pointer, open addressing.
 * Not the tree's table (common/htab.h): it is looked up for every location
 * symbolized, and the same map on sr_htab took 18 % more instructions a
 * lookup (callgrind) and 2.2-2.7x the time over 16 and 256 executables in a
 * side-by-side micro-benchmark (2026-12-03).
 */
struct exe_map {
	struct exe_slot *slots;
	size_t cap, n;
};

static struct exe_slot *exe_map_get(struct exe_map *m, const void *key, bool *ret_new)
{
	if (m->n * 2 >= m->cap) {
		size_t nc = m->cap ? m->cap * 2 : SYMBOLIZE_BATCH_EXES_INITIAL;
		struct exe_slot *ns = calloc(nc, sizeof(*ns));
		if (!ns)
			return NULL;
		for (size_t i = 0; i < m->cap; i++) {
			if (!m->slots[i].key)
				continue;
			size_t j = ((uintptr_t)m->slots[i].key >> 4) & (nc - 1);
			while (ns[j].key)
				j = (j + 1) & (nc - 1);
			ns[j] = m->slots[i];
		}
		free(m->slots);
		m->slots = ns;
		m->cap = nc;
	}
	size_t j = ((uintptr_t)key >> 4) & (m->cap - 1);
	while (m->slots[j].key && m->slots[j].key != key)
		j = (j + 1) & (m->cap - 1);
	*ret_new = !m->slots[j].key;
	if (*ret_new) {
		m->slots[j].key = key;
		m->n++;
	}
	return &m->slots[j];
}

static void exe_map_free(struct exe_map *m)
{
	for (size_t i = 0; i < m->cap; i++)
		gw_sym_handle__release(m->slots[i].h);
	free(m->slots);
}

/* Publishes lines on l (charged to the locations store); returns true when this call set them. */
static bool publish(struct sp *sp, struct gw_location *l, const struct gw_line *lines, uint32_t n)
{
	struct gw_stores *stores = gw_runtime__stores(sp->c->runtime);
	/* Shared with every location of the same lines (every address of a function named by its symbol). */
	struct gw_lines *gl = gw_lines_table__intern(gw_stores__lines(stores), lines, n);

	if (!gl)
		return false;
	if (!gw_stores__set_lines(stores, l, gl)) {
		gw_lines_free(gl);
		return false;
	}
	return true;
}

static bool publish_fallback(struct sp *sp, struct gw_location *l)
{
	char name[GW_ID_MAX * 2 + 96];
	const struct gw_executable *exe = gw_location__exe(l);
	const struct gw_kernel *k = gw_location__kernel(l);

	if (exe) {
		char hex[2 * GW_ID_MAX + 1];
		const char *bin = exe->file_name && exe->file_name[0] ? exe->file_name
								      : gw_id_to_hex(&exe->id, hex, sizeof(hex));
		snprintf(name, sizeof(name), "%.*s+0x%" PRIx64, 128, bin, l->address);
	} else if (k) {
		const char *mod = k->module[0] ? k->module : NULL;
		uint64_t base = 0;
		/* Runtime addresses: the module, if the agent said where modules lay; else offsets already. */
		for (uint32_t i = 0; !mod && i < k->n_modules; i++) {
			if (l->address >= k->modules[i].start &&
			    l->address - k->modules[i].start < k->modules[i].size) {
				mod = k->modules[i].name;
				base = k->modules[i].start;
				break;
			}
		}
		if (mod)
			snprintf(name, sizeof(name), "[%.64s]+0x%" PRIx64, mod, l->address - base);
		else
			snprintf(name, sizeof(name), "[kernel]+0x%" PRIx64, l->address);
	} else {
		snprintf(name, sizeof(name), "[unknown]+0x%" PRIx64, l->address);
	}
	return publish(sp, l, &(struct gw_line){ .function = name, .system_name = "" }, 1);
}

/*
 * Tells agents that probe this executable or kernel at exit (PushResponse.symbols_pending,
 * docs/agent-protocol.md "Symbol probes") whether a lookup is still going on: pending while
 * debuginfod (or a load) works and this batch would still wait for it; over once it is
 * resolved, wanted from the agent (listed in wanted_symbols instead) or never resolvable.
 */
static void note_lookup(const struct job *job, struct gw_location *l, enum gw_sym_state state)
{
	uint64_t now = gw_symbolize_now_ns(), pending_ns = 0;

	if (state == GW_SYM_PENDING && !job->final && job->deadline_ns > now)
		pending_ns = job->deadline_ns - now;
	if (gw_location__kind(l) == GW_FRAME_KERNEL) {
		gw_kernel__set_lookup(gw_location__kernel(l), pending_ns);
		/* Symbols are here (or never will be): an agent asked before they were must not upload again. */
		if (state == GW_SYM_READY || state == GW_SYM_UNAVAILABLE)
			gw_kernel__set_want_symbols(gw_location__kernel(l), false);
	} else {
		gw_executable__set_lookup(gw_location__exe(l), pending_ns);
		if (state == GW_SYM_READY || state == GW_SYM_UNAVAILABLE)
			gw_executable__set_want_symbols(gw_location__exe(l), false);
	}
}

static void symbolize_location(struct sp *sp, struct job *job, struct exe_map *m, struct gw_sym_result *res,
			       struct gw_location *l)
{
	const void *key;
	struct gw_sym_hint hint = { 0 };
	const struct gw_id *id;
	struct gw_executable *exe = gw_location__exe(l);
	struct gw_kernel *kernel = gw_location__kernel(l);
	bool is_new;

	if (exe) {
		key = exe;
		id = &exe->id;
		hint.path = exe->path;
		hint.debuglink = exe->debuglink;
		if (exe->gnu_build_id.len) {
			hint.build_id = exe->gnu_build_id.bytes;
			hint.build_id_len = exe->gnu_build_id.len;
		} else if (exe->id_kind == GW_EXE_ID_GNU_BUILD_ID) {
			hint.build_id = exe->id.bytes;
			hint.build_id_len = exe->id.len;
		}
	} else if (kernel) {
		key = kernel;
		id = &kernel->id;
		hint.is_kernel = true;
	} else {
		/* JIT or anonymous memory: nothing can ever name it. */
		if (publish_fallback(sp, l))
			job->fallback++;
		return;
	}
	struct exe_slot *slot = exe_map_get(m, key, &is_new);
	if (!slot) {
		job->unsymbolized++;
		return;
	}
	if (is_new) {
		slot->state = gw_symbolizer__acquire(sp->sym, id->bytes, id->len, &hint, &slot->h);
		note_lookup(job, l, slot->state);
	}

	switch (slot->state) {
	case GW_SYM_READY: {
		int n = gw_sym_handle__resolve(slot->h, l->address, res);
		if (n <= 0) {
			if (publish_fallback(sp, l))
				job->fallback++;
			return;
		}
		struct gw_line lines[GW_SYM_MAX_LINES];
		for (int i = 0; i < n; i++) {
			const struct gw_sym_line *sl = &res->lines[i];
			lines[i] = (struct gw_line){
				.function = sl->function,
				.system_name = strcmp(sl->system_name, sl->function) == 0 ? "" : sl->system_name,
				.file = sl->file ? sl->file : "",
				.line = sl->line,
				.column = sl->column,
				.start_line = sl->start_line,
			};
		}
		if (publish(sp, l, lines, (uint32_t)n))
			job->named++;
		return;
	}
	case GW_SYM_WANTED:
		/*
		 * Only stackrelay agents upload symbols: an executable that only
		 * OTLP senders named will not get them, so its batch does not wait.
		 */
		if (exe && !(atomic_load_explicit(&exe->flags, memory_order_relaxed) & GW_EXE_AGENT_DEFINED)) {
			job->unsymbolized++;
			return;
		}
		/* The receiver lists the ID in wanted_symbols; the agent uploads the .symtab or its kallsyms. */
		if (kernel)
			gw_kernel__set_want_symbols(kernel, true);
		else
			gw_executable__set_want_symbols(exe, true);
		/* fallthrough */
	case GW_SYM_PENDING:
		if (job->final)
			job->unsymbolized++;
		else
			job->pending++;
		return;
	case GW_SYM_MISSING:
		/* Still asked from agents, but no batch waits for it any more. */
		if (exe)
			gw_executable__set_want_symbols(exe, true);
		else
			gw_kernel__set_want_symbols(kernel, true);
		job->unsymbolized++;
		return;
	case GW_SYM_UNAVAILABLE:
		if (publish_fallback(sp, l))
			job->fallback++;
		return;
	}
}

void gw_symbolize_work_cb(uv_work_t *w)
{
	struct job *job = SR_CONTAINER_OF(w, struct job, work);
	struct exe_map m = { 0 };
	struct gw_sym_result *res;

	gw_thread_background();
	res = malloc(sizeof(*res));
	job->pending = 0;
	if (!res)
		return;
	gw_profiles_foreach_resource(job->p, r)
	{
		gw_resource_foreach_sample(r, s)
		{
			struct gw_stack *st = s->stack;
			bool all = true;

			/* Most samples' stacks were done in an earlier batch: one flag instead of a
			 * cache miss per location (a quarter of the gateway's CPU in the fleet soak). */
			if (!st || atomic_load_explicit(&st->symbolized, memory_order_acquire))
				continue;
			for (uint32_t i = 0; i < st->n_locations; i++) {
				struct gw_location *l = gw_stack__location(st, i);
				if (!gw_location__lines(l)) {
					symbolize_location(job->sp, job, &m, res, l);
					all = all && gw_location__lines(l);
				}
			}
			if (all)
				atomic_store_explicit(&st->symbolized, true, memory_order_release);
		}
	}
	exe_map_free(&m);
	free(res);
}
