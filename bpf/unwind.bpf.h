/* SPDX-License-Identifier: GPL-2.0 OR Apache-2.0 */
/*
 * The table unwinder (x86-64; AArch64 rows are stepped by unwind-a64.bpf.h):
 * from the sampled user registers, frame by frame, find the mapping that
 * holds the pc (unwind_procs, written by the agent), binary-search its
 * executable's table (unwind_tables, built by agent/unwind-table.c from
 * .eh_frame), and compute the caller's RIP, RSP
 * and RBP. Mappings without a table (Go, JIT code, files not read yet) are
 * crossed by their frame pointers, and so is code that no FDE of its file's
 * table covers (V8's embedded builtins in the node binary): on x86-64 V8
 * keeps an RBP chain through its JIT code and builtins, and the first return
 * address that lands in code with a table goes back to the table.
 *
 * The verifier bounds what one program may do, so a program unwinds
 * UNWIND_FRAMES_PER_PROG frames and tail-calls itself for the next ones;
 * the state between calls lives in a per-CPU scratch entry, and the finished
 * sample is copied into the ring buffer. Every stack that ends says why in
 * one PROFILE_CNT_UNWIND_END_* counter.
 */
#ifndef SR_BPF_UNWIND_BPF_H
#define SR_BPF_UNWIND_BPF_H

#include "common.bpf.h"
#include "profile.h"
#include "pyframe.h"
#include "hotspot.h"
#include "unwind.h"
#include "v8frame.h"

/* Frames per program run; PROFILE_MAX_STACK_DEPTH / this must stay under the kernel's 33 tail calls. */
#define UNWIND_FRAMES_PER_PROG 32
/* Offsets into a signal frame's ucontext (x86-64 glibc and kernel ABI): uc_mcontext.gregs[REG_*]. */
#define UNWIND_UC_MCONTEXT 40
#define UNWIND_REG_RBP	   10
#define UNWIND_REG_RSP	   15
#define UNWIND_REG_RIP	   16

struct unwind_rows_map {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_INNER_MAP | BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	/* Sizes, not BTF types: the row is only ever reached through a pointer, so its BTF would be a forward. */
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(struct unwind_row));
};

/* table ID -> that table's rows; every table is its own array, exactly sized (BPF_F_INNER_MAP, 5.10+). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH_OF_MAPS);
	__uint(max_entries, UNWIND_MAX_TABLES);
	__type(key, __u32);
	__array(values, struct unwind_rows_map);
} unwind_tables SEC(".maps");

/* tgid -> its mappings; allocated per process as the agent adds them, sized to profiling.max_processes. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct unwind_proc);
} unwind_procs SEC(".maps");

struct unwind_scratch_state {
	struct profile_sample sample;
	__u64 rip;
	__u64 rsp;
	__u64 rbp;
#if defined(__TARGET_ARCH_arm64)
	__u64 lr; /* the interrupted frame's LR (x30): its return address until it saves it */
#endif
	__u32 n;
	__u8 rbp_valid;
	__u8 return_address; /* rip is a return address: look up rip - 1 */
	__u8 pad[2];
	/*
	 * An index passed through memory: the verifier forgets what it knew
	 * of it, so the search's bounds do not become "precise" and states
	 * of different iterations can be pruned (otherwise ~100k instructions).
	 */
	__u32 launder;
	/* Frames stepped in this stack, counted once at its end (a counter update per frame costs a lookup). */
	__u32 table_frames;
	__u32 fp_frames;
	__u32 cur_valid; /* cur holds the mapping of the last frame looked up */
	__u32 slot;	 /* this state's key in unwind_scratch (UNWIND_SCRATCH_*) */
	__u32 pad2;
	__u64 dbg_t; /* debug_stage_times: when the current stage began */
	/*
	 * Consecutive frames mostly lie in one file (a program's own call
	 * chain, a library's): they reuse its mapping without looking up the
	 * process's list again.
	 */
	struct unwind_mapping cur;
	/* Python frames (pyframe.bpf.h): the process's interpreter, the next frame, where the walk stands. */
	struct py_proc py;
	__u64 py_frame;
	__u32 py_state;
	__u32 py_frames;
	__u32 py_new; /* a code object not seen lately: wake the agent to name it while the process lives */
	__u32 pad3;
	/* V8 frames (v8.bpf.h): the process's offsets (start_boottime_ns 0: not V8), frames named. */
	struct v8_proc v8;
	__u32 v8_frames;
	__u32 pad4;
	__u64 v8_code[V8_CODE_SPAN / 8]; /* an optimized Code's fields, from its deoptimization data on */
	/* HotSpot frames (hotspot.bpf.h): the process's JVM layout (start_boottime_ns 0: not a JVM), frames recorded. */
	struct hotspot_proc jvm;
	__u32 jvm_frames;
	__u32 pad5;
};

/*
 * One state per CPU for each kind of stack: a CPU sample's perf_event
 * program runs in NMI context and can interrupt the off-CPU program
 * (offcpu.bpf.h) in the middle of its stack on the same CPU.
 */
enum unwind_scratch_slot {
	UNWIND_SCRATCH_CPU = 0,
	UNWIND_SCRATCH_OFF_CPU = 1,
	UNWIND_SCRATCH__MAX,
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, UNWIND_SCRATCH__MAX);
	__type(key, __u32);
	__type(value, struct unwind_scratch_state);
} unwind_scratch SEC(".maps");

/* v8.bpf.h: names the frame about to be crossed by its frame pointer when it is JavaScript. */
__noinline int v8_frame(__u32 slot);
/* hotspot.bpf.h: steps a frame of a JVM's code, or HOTSPOT_NOT_JAVA (-1). */
__noinline int hotspot_step(__u32 slot);

/*
 * The searches are global functions of scalars: the verifier checks each
 * once, where inlined ones would be re-checked for every frame and branch
 * (past its instruction limit).
 */

/*
 * Finds the current process's mapping that holds addr and copies it into the
 * cur of scratch state slot. Returns 0, or 1 when no mapping holds it.
 */
__noinline int unwind_find_mapping(__u64 addr, __u32 slot)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32, lo = 0, hi, idx;
	const struct unwind_proc *p = bpf_map_lookup_elem(&unwind_procs, &tgid);
	struct unwind_scratch_state *st = bpf_map_lookup_elem(&unwind_scratch, &slot);

	if (!st)
		return 1;
	st->cur_valid = 0;
	if (!p)
		return 1;
	hi = p->n;
	if (hi > UNWIND_MAX_MAPPINGS)
		hi = UNWIND_MAX_MAPPINGS;
	for (int i = 0; i < UNWIND_MAPPING_STEPS; i++) {
		__u32 mid;

		if (lo >= hi)
			break;
		st->launder = lo + (hi - lo) / 2;
		mid = *(volatile __u32 *)&st->launder & (UNWIND_MAX_MAPPINGS - 1);
		if (p->m[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0 || lo > UNWIND_MAX_MAPPINGS)
		return 1;
	st->launder = lo - 1;
	idx = *(volatile __u32 *)&st->launder & (UNWIND_MAX_MAPPINGS - 1);
	if (addr >= p->m[idx].end)
		return 1;
	st->cur = p->m[idx];
	st->cur_valid = 1;
	return 0;
}

/* Rows looked up lately, per CPU: (table, pc) -> row. A power of two. */
#define UNWIND_ROW_CACHE 4096
/* unwind_find_row()'s answer when the table is gone (never a real enum unwind_cfa_type). */
#define UNWIND_ROW_EVICTED 0xff

struct unwind_row_cache_entry {
	__u32 table_id; /* 0: empty (no table has ID 0) */
	__u32 pc;
	struct unwind_row row;
};

/*
 * A profile samples the same return addresses over and over (the call sites
 * of hot loops' callers), so most frames are answered here with one lookup
 * instead of a binary search of up to 24 lookups through the map of maps.
 * Table IDs are never reused while the agent runs, so an entry cannot go
 * stale: a table that is evicted is never looked up under its ID again.
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, UNWIND_ROW_CACHE);
	__type(key, __u32);
	__type(value, struct unwind_row_cache_entry);
} unwind_row_cache SEC(".maps");

union unwind_row_word {
	struct unwind_row row;
	__u64 word;
};

/*
 * The row of table table_id (n rows) that holds pc, packed into a word (a
 * global function returns scalars only): cfa_type UNWIND_CFA_INVALID when
 * no row holds it (no CFI: the caller follows the frame pointers),
 * UNWIND_ROW_EVICTED when the table is gone.
 */
__noinline __u64 unwind_find_row(__u32 table_id, __u32 n, __u32 pc)
{
	__u32 lo = 0, hi = n, slot = (table_id * 2654435761u ^ pc) & (UNWIND_ROW_CACHE - 1);
	struct unwind_row_cache_entry *ce = bpf_map_lookup_elem(&unwind_row_cache, &slot);
	union unwind_row_word out = { .word = 0 };
	const struct unwind_row *r;
	void *rows;

	if (ce && ce->table_id == table_id && ce->pc == pc) {
		out.row = ce->row;
		return out.word;
	}
	if (debug_stage_times)
		count(PROFILE_CNT_DBG_ROW_MISSES);
	rows = bpf_map_lookup_elem(&unwind_tables, &table_id);
	if (!rows) {
		out.row.cfa_type = UNWIND_ROW_EVICTED;
		return out.word;
	}
	for (int i = 0; i < UNWIND_ROW_STEPS; i++) {
		__u32 mid;

		if (lo >= hi)
			break;
		mid = lo + (hi - lo) / 2;
		r = bpf_map_lookup_elem(rows, &mid);
		if (!r)
			return out.word;
		if (r->pc <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0 || lo < hi)
		return out.word;
	lo--;
	r = bpf_map_lookup_elem(rows, &lo);
	if (!r)
		return out.word;
	out.row = *r;
	if (ce) {
		ce->table_id = table_id;
		ce->pc = pc;
		ce->row = out.row;
	}
	return out.word;
}

/*
 * One step along the frame-pointer chain, for code without a table. Returns
 * 0 to go on, or the counter that says why the stack ends: why_fail when
 * the chain breaks (the frame had no table to begin with).
 */
static __always_inline int unwind_fp_step(struct unwind_scratch_state *st, int why_fail)
{
	__u64 frame[2];
	int r;

	/* Compiled Java code keeps no frame pointers: the JVM's own layout steps its frames. */
	if (st->jvm.start_boottime_ns) {
		r = hotspot_step(st->slot);
		if (r >= 0)
			return r;
	}
	if (!st->rbp_valid)
		return why_fail;
	if (st->v8.start_boottime_ns)
		v8_frame(st->slot);
	/* glibc's _start clears RBP: a chain that ends in 0 is complete. */
	if (st->rbp == 0)
		return PROFILE_CNT_UNWIND_END_COMPLETE;
	/* Frames live above the stack pointer; anything else is not a frame pointer. */
	if (st->rbp < st->rsp || (st->rbp & 7))
		return why_fail;
	if (bpf_probe_read_user(frame, sizeof(frame), (const void *)st->rbp))
		return why_fail;
	if (frame[1] == 0)
		return PROFILE_CNT_UNWIND_END_COMPLETE;
	st->rsp = st->rbp + 16;
	st->rbp = frame[0];
	st->rip = frame[1];
	st->return_address = 1;
	st->fp_frames++;
	return 0;
}

#if defined(__TARGET_ARCH_arm64)
#include "unwind-a64.bpf.h"
#endif

/* Moves st to the caller of its current frame; returns 0, or the PROFILE_CNT_UNWIND_END_* that ends the stack. */
static __always_inline int unwind_step(struct unwind_scratch_state *st)
{
	const struct unwind_row *row;
	const struct unwind_mapping *m;
	__u64 pc = st->rip - (st->return_address ? 1 : 0), cfa, ra, rel;
	union unwind_row_word found;
	__u32 table_id;

	if (!(st->cur_valid && st->rip >= st->cur.start && st->rip < st->cur.end)) {
		__u64 t = dbg_now();
		int miss = unwind_find_mapping(st->rip, st->slot);

		if (debug_stage_times && st->slot == UNWIND_SCRATCH_CPU) {
			count_add(PROFILE_CNT_DBG_NS_MAPPING, bpf_ktime_get_ns() - t);
			count(PROFILE_CNT_DBG_MAPPINGS);
		}
		if (miss)
			return unwind_fp_step(st, PROFILE_CNT_UNWIND_END_NO_MAPPING);
	}
	m = &st->cur;
	table_id = m->table_id;
	if (!table_id)
		return unwind_fp_step(st, PROFILE_CNT_UNWIND_END_NO_TABLE);
	/*
	 * Outside the table's range, or in a gap between its FDEs, no CFI
	 * describes the code (V8's builtins, hand-written assembly). V8's
	 * builtins keep RBP a frame pointer; elsewhere unwind_fp_step()'s
	 * checks (above RSP, aligned, readable) end most chains that are not.
	 */
	if (pc < m->bias)
		return unwind_fp_step(st, PROFILE_CNT_UNWIND_END_NO_CFI);
	rel = pc - m->bias;
	if (rel >> 32)
		return unwind_fp_step(st, PROFILE_CNT_UNWIND_END_NO_CFI);
	if (debug_stage_times && st->slot == UNWIND_SCRATCH_CPU) {
		__u64 t = bpf_ktime_get_ns();

		found.word = unwind_find_row(table_id, m->n_rows, (__u32)rel);
		count_add(PROFILE_CNT_DBG_NS_ROW, bpf_ktime_get_ns() - t);
		count(PROFILE_CNT_DBG_ROWS);
	} else {
		found.word = unwind_find_row(table_id, m->n_rows, (__u32)rel);
	}
	if (found.row.cfa_type == UNWIND_ROW_EVICTED)
		return PROFILE_CNT_UNWIND_END_EVICTED;
	row = &found.row;
#if defined(__TARGET_ARCH_arm64)
	return unwind_row_step_a64(st, row);
#endif

	switch (row->cfa_type) {
	case UNWIND_CFA_RSP:
		cfa = st->rsp + row->cfa_off;
		break;
	case UNWIND_CFA_RSP_X8:
		cfa = st->rsp + ((__u64)row->cfa_off << 3);
		break;
	case UNWIND_CFA_RBP:
		if (!st->rbp_valid)
			return PROFILE_CNT_UNWIND_END_NO_RULE;
		cfa = st->rbp + row->cfa_off;
		break;
	case UNWIND_CFA_PLT:
		cfa = st->rsp + 8 + ((st->rip & 15) >= row->cfa_off ? 8 : 0);
		break;
	case UNWIND_CFA_DEREF_RBP:
		if (!st->rbp_valid ||
		    bpf_probe_read_user(&cfa, sizeof(cfa), (const void *)(st->rbp + (__s64)(__s16)row->cfa_off)))
			return PROFILE_CNT_UNWIND_END_READ_FAULT;
		break;
	case UNWIND_CFA_SIGNAL: {
		/* The kernel pushed the interrupted registers: go on from them, the pc exact. */
		__u64 gregs[UNWIND_REG_RIP - UNWIND_REG_RBP + 1];

		if (bpf_probe_read_user(gregs, sizeof(gregs),
					(const void *)(st->rsp + UNWIND_UC_MCONTEXT + 8 * UNWIND_REG_RBP)))
			return PROFILE_CNT_UNWIND_END_READ_FAULT;
		st->rbp = gregs[0];
		st->rsp = gregs[UNWIND_REG_RSP - UNWIND_REG_RBP];
		st->rip = gregs[UNWIND_REG_RIP - UNWIND_REG_RBP];
		st->rbp_valid = 1;
		st->return_address = 0;
		st->table_frames++;
		return st->rip ? 0 : PROFILE_CNT_UNWIND_END_COMPLETE;
	}
	case UNWIND_CFA_END:
		return PROFILE_CNT_UNWIND_END_COMPLETE;
	case UNWIND_CFA_INVALID:
		return unwind_fp_step(st, PROFILE_CNT_UNWIND_END_NO_CFI);
	default:
		return PROFILE_CNT_UNWIND_END_NO_RULE;
	}
	/* The caller's frame is above this one; a CFA at or below RSP would loop. */
	if (cfa <= st->rsp)
		return PROFILE_CNT_UNWIND_END_NO_RULE;
	if (bpf_probe_read_user(&ra, sizeof(ra), (const void *)(cfa - 8)))
		return PROFILE_CNT_UNWIND_END_READ_FAULT;
	if (row->rbp_off == UNWIND_RBP_UNDEFINED) {
		st->rbp_valid = 0;
	} else if (row->rbp_off != UNWIND_RBP_SAME) {
		if (bpf_probe_read_user(&st->rbp, sizeof(st->rbp), (const void *)(cfa + 8 * (__s64)row->rbp_off)))
			return PROFILE_CNT_UNWIND_END_READ_FAULT;
		st->rbp_valid = 1;
	}
	st->rsp = cfa;
	st->rip = ra;
	st->return_address = 1;
	st->table_frames++;
	return ra ? 0 : PROFILE_CNT_UNWIND_END_COMPLETE;
}

/* Tables by file, written by the agent as it loads them (bpf/unwind.h). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, UNWIND_MAX_TABLES);
	__type(key, struct unwind_file_key);
	__type(value, struct unwind_file);
} unwind_files SEC(".maps");

/* Where a process's new mapping list is put together (4 KiB: too big for the BPF stack). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct unwind_proc);
} unwind_proc_scratch SEC(".maps");

/*
 * An index into a mapping list, masked where the verifier sees it: the empty
 * asm hides the value from the compiler, which would otherwise drop a mask it
 * can prove redundant and leave the verifier without a bound.
 */
static __always_inline __u32 unwind_slot(__u32 i)
{
	asm volatile("" : "+r"(i));
	return i & (UNWIND_MAX_MAPPINGS - 1);
}

/* What unwind_merge_one() works on: the mapping to add and where the merge stands. */
struct unwind_merge {
	struct unwind_mapping add;
	__u32 tgid;
	__u32 old_n; /* entries of the process's current list */
	__u32 n;     /* entries written to unwind_proc_scratch */
	__u32 placed;
	__u32 full;
};

/*
 * One entry of the process's current list, copied into the new one unless the
 * added mapping replaces it; the added mapping goes in before the first entry
 * above it. A bpf_loop() callback: the verifier checks it once, where an
 * unrolled or bounded loop would be re-checked along every path of its caller.
 */
static long unwind_merge_one(__u32 i, struct unwind_merge *c)
{
	const struct unwind_proc *old = bpf_map_lookup_elem(&unwind_procs, &c->tgid);
	const struct unwind_mapping *om;
	struct unwind_proc *p;
	__u32 zero = 0;

	p = bpf_map_lookup_elem(&unwind_proc_scratch, &zero);
	if (!old || !p || i >= c->old_n || i >= UNWIND_MAX_MAPPINGS)
		return 1;
	om = &old->m[unwind_slot(i)];
	/* What the new mapping overlaps is gone (mmap replaced it). */
	if (om->end > c->add.start && om->start < c->add.end)
		return 0;
	if (!c->placed && om->start >= c->add.end) {
		if (c->n >= UNWIND_MAX_MAPPINGS) {
			c->full = 1;
			return 1;
		}
		p->m[unwind_slot(c->n)] = c->add;
		c->n++;
		c->placed = 1;
	}
	if (c->n >= UNWIND_MAX_MAPPINGS) {
		c->full = 1;
		return 1;
	}
	p->m[unwind_slot(c->n)] = *om;
	c->n++;
	return 0;
}

/*
 * A process made an executable mapping of a file whose table is loaded: add
 * it to the process's list (replacing what it overlaps; a new address space,
 * after exec, starts a new list), so its next sample already unwinds through
 * it. The agent rewrites the list from its own view whenever it syncs the
 * process; both views come from the same records. Where this cannot be done
 * (the file has no table yet, another offset, the list is full) the agent's
 * sync does it later, and until then the frame-pointer fallback holds.
 * Callers run in process context (mmap's exit, exec), where bpf_loop() (5.17)
 * is allowed, as bpf_find_vma() already requires.
 */
static __always_inline void unwind_track_mapping(__u32 tgid, __u64 started, __u64 mm, __u64 start, __u64 end,
						 __u64 offset, const struct unwind_file_key *key)
{
	const struct unwind_file *f = bpf_map_lookup_elem(&unwind_files, key);
	struct unwind_merge c = { .tgid = tgid };
	const struct unwind_proc *old;
	struct unwind_proc *p;
	__u32 zero = 0;

	if (!f || f->offset != offset)
		return;
	c.add.start = start;
	c.add.end = end;
	c.add.bias = start - f->bias_off;
	c.add.table_id = f->table_id;
	c.add.n_rows = f->n_rows;
	old = bpf_map_lookup_elem(&unwind_procs, &tgid);
	if (old && old->start_boottime_ns == started && old->mm == mm) {
		c.old_n = old->n;
		bpf_loop(UNWIND_MAX_MAPPINGS, unwind_merge_one, &c, 0);
		if (c.full)
			return;
	}
	p = bpf_map_lookup_elem(&unwind_proc_scratch, &zero);
	if (!p)
		return;
	if (!c.placed) {
		if (c.n >= UNWIND_MAX_MAPPINGS)
			return;
		p->m[unwind_slot(c.n)] = c.add;
		c.n++;
	}
	p->start_boottime_ns = started;
	p->mm = mm;
	p->n = c.n;
	p->pad = 0;
	bpf_map_update_elem(&unwind_procs, &tgid, p, BPF_ANY);
}

/* A forked process starts with its parent's address space: and with its parent's list. */
static __always_inline void unwind_track_fork(__u32 parent_tgid, __u64 parent_started, __u32 tgid, __u64 started,
					      __u64 mm)
{
	const struct unwind_proc *old = bpf_map_lookup_elem(&unwind_procs, &parent_tgid);
	struct unwind_proc *p;
	__u32 zero = 0;

	if (!old || old->start_boottime_ns != parent_started)
		return;
	p = bpf_map_lookup_elem(&unwind_proc_scratch, &zero);
	if (!p || bpf_probe_read_kernel(p, sizeof(*p), old))
		return;
	p->start_boottime_ns = started;
	p->mm = mm;
	bpf_map_update_elem(&unwind_procs, &tgid, p, BPF_ANY);
}

#endif
