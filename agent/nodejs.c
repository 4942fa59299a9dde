// SPDX-License-Identifier: Apache-2.0
/*
 * Node.js processes: node binary recognition, v8_procs entries and the
 * function cache (nodejs.h). Runs on the sampling thread.
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <linux/types.h>

#include "file-verdicts.h"
#include "container-open.h"
#include "common/htab.h"
#include "nodejs.h"
#include "proc-cache.h"
#include "proc.h"
#include "util.h"
#include "v8.h"
#include "v8frame.h"

_Static_assert(AGENT_NODEJS_MAX_FRAMES == AGENT_V8_MAX_INLINED, "a frame's functions, as agent/v8.h keeps them");

/* What a file is to V8, examined once per (dev, inode, mtime, size). */
struct js_file {
	uint64_t key[4];
	bool v8;		   /* has v8dbg_* symbols */
	bool supported;		   /* ... with everything the walk needs */
	struct agent_v8_meta meta; /* with code_instruction_size once a process of this build taught it */
};

/* A Node.js process: the metadata of its build, its own copy (the file table starts again when full). */
struct js_proc {
	uint8_t key[12]; /* pid + start_ns, as agent_proc.key */
	uint64_t file_key[4];
	struct agent_v8_meta meta; /* with what was learned from the process (code_instruction_size) */
	uint32_t frames;	   /* frames named: the size is looked for every JS_LEARN_EVERY */
	uint32_t learn_failures;
	uint32_t codes_read;	/* Codes of optimized frames read, */
	uint32_t codes_refused; /* ... and refused by the checks: many more than read, the layout is not this build's */
	bool codes_off;		/* given up on: optimized frames are recorded by their functions */
};

/* Named frames between two looks for a Code the BPF namer offered to learn the instruction size from. */
#define JS_LEARN_EVERY 64
/* Offers that taught nothing (no builtin) before a process is given up on. */
#define JS_LEARN_MAX_FAILURES 64
/* Optimized frames' Codes refused (and more than read) before a process's optimized frames go back to functions. */
#define JS_CODE_MAX_REFUSED 16

/* Longest span of a SharedFunctionInfo's head read to check a cached entry. */
#define JS_HEAD_MAX 256

struct js_function {
	struct agent_pcache_entry base; /* key: pid (4), start_ns (8), SharedFunctionInfo (8) */
	/* What the entry was read from: the map, name-or-scope-info and script slots. */
	uint64_t map, nos, sod;
	struct agent_v8_function fn;
	/* Lines of bytecode offsets (0: not found), replaced in turn. */
	struct {
		uint32_t offset;
		uint32_t line;
	} lines[AGENT_NODEJS_LINES];
	uint32_t n_lines;
	uint32_t next_line;
};

/*
 * An optimized Code's functions at its recent pc offsets. The entry stands
 * while the Code's head (map, deoptimization data, positions,
 * InstructionStream, first instruction) still holds what it was read from.
 */
#define JS_CODE_HEAD 6
/*
 * An offset whose lines were not found is read again on its next samples,
 * this many times: the script's line ends or source may have been read
 * while V8's garbage collector moved them. What is never found (a script
 * whose source the agent does not read) then stays at the function's
 * first line without a read per sample.
 */
#define JS_CODE_LINE_RETRIES 3
struct js_code {
	struct agent_pcache_entry base; /* key: pid (4), start_ns (8), Code (8) */
	uint64_t head[JS_CODE_HEAD];
	uint64_t sfi; /* the Code's own function: names an offset not read while the process lived */
	struct {
		uint32_t offset;
		int32_t n;	       /* functions, innermost first; 0: the offset could not be mapped */
		uint32_t line_retries; /* reads again of an offset whose lines were not found */
		struct agent_v8_code_frame f[AGENT_V8_MAX_INLINED];
	} at[AGENT_NODEJS_CODE_OFFSETS];
	uint32_t n_at;
	uint32_t next_at;
};

struct agent_nodejs {
	int procs_fd;
	uint64_t max_functions;
	struct agent_file_verdicts files;
	struct sr_htab_ptrs procs;
	struct agent_pcache functions;
	struct agent_pcache codes;
	struct agent_nodejs_stats stats;
};

static const void *proc_key(const void *v, size_t *len)
{
	*len = sizeof(((const struct js_proc *)0)->key);
	return ((const struct js_proc *)v)->key;
}

static void function_free(struct agent_pcache_entry *e)
{
	free(e);
}

struct agent_nodejs *agent_nodejs_new(int procs_fd, uint64_t max_functions)
{
	struct agent_nodejs *n = calloc(1, sizeof(*n));

	if (!n)
		return NULL;
	n->procs_fd = procs_fd;
	n->max_functions = max_functions ? max_functions : AGENT_NODEJS_DEFAULT_MAX_FUNCTIONS;
	agent_file_verdicts_init(&n->files, AGENT_NODEJS_MAX_FILES);
	sr_htab_ptrs_init(&n->procs, proc_key);
	agent_pcache_init(&n->functions, n->max_functions, function_free);
	agent_pcache_init(&n->codes, AGENT_NODEJS_MAX_CODES, function_free);
	elf_version(EV_CURRENT);
	return n;
}

static void free_all(struct sr_htab_ptrs *h, sr_htab_key_fn key_of)
{
	void *v;

	for (size_t i = 0; (v = sr_htab_ptrs__next(h, &i));)
		free(v);
	sr_htab_ptrs_done(h);
	sr_htab_ptrs_init(h, key_of);
}

void agent_nodejs_free(struct agent_nodejs *n)
{
	if (!n)
		return;
	agent_pcache_done(&n->functions);
	agent_pcache_done(&n->codes);
	free_all(&n->procs, proc_key);
	agent_file_verdicts_done(&n->files);
	sr_htab_ptrs_done(&n->procs);
	free(n);
}

/* Whether the file's name is one V8 is shipped in: node (node20, nodejs, ...) or libnode.so. */
static bool node_name(const char *path)
{
	const char *base = strrchr(path, '/');

	base = base ? base + 1 : path;
	return !strncmp(base, "node", 4) || !strncmp(base, "libnode.so", 10);
}

/* The file behind m, examined on first sight. NULL when it cannot be read now. */
static struct js_file *file_for(struct agent_nodejs *n, const struct agent_proc *proc, const struct agent_proc_map *m)
{
	const uint64_t *key = agent_exe__key(m->exe);
	struct js_file *f = agent_file_verdicts__get(&n->files, key);
	char path[512];
	Elf *elf;
	int fd, r;

	if (f || agent_exe__is_vdso(m->exe))
		return f;
	if (agent_proc_map__path(proc, m, path, sizeof(path)) < 0)
		return NULL;
	f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	memcpy(f->key, key, sizeof(f->key));
	/* Only files named like a node binary are read: the others' symbol tables are never scanned. */
	if (node_name(path)) {
		fd = agent_open_map_file(proc->pid, m->start, m->end, NULL);
		if (fd < 0) {
			free(f);
			return NULL;
		}
		elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
		r = elf ? agent_v8_meta_read(elf, &f->meta) : -EINVAL;
		f->v8 = r != -ENOENT && elf;
		f->supported = r == 0;
		if (elf)
			elf_end(elf);
		close(fd);
	}
	return agent_file_verdicts__add(&n->files, f) < 0 ? NULL : f;
}

int agent_nodejs__sync(struct agent_nodejs *n, const struct agent_proc *proc)
{
	const struct js_file *f = NULL;
	struct v8_proc v = { 0 };
	struct js_proc *e;

	for (size_t i = 0; i < proc->n_maps && !f; i++) {
		struct js_file *c;

		if (!proc->maps[i].exe)
			continue;
		c = file_for(n, proc, &proc->maps[i]);
		if (c && c->v8 && agent_proc_map__current(proc, &proc->maps[i]))
			f = c;
	}
	if (!f || !f->supported)
		agent_nodejs__forget(n, proc);
	if (!f)
		return -ENOENT;
	if (!f->supported) {
		n->stats.unsupported++;
		return -ENOTSUP;
	}
	e = sr_htab_ptrs__get(&n->procs, proc->key, sizeof(proc->key));
	if (!e) {
		e = calloc(1, sizeof(*e));
		if (!e)
			return -ENOMEM;
		memcpy(e->key, proc->key, sizeof(e->key));
		if (sr_htab_ptrs__put(&n->procs, e) < 0) {
			free(e);
			return -ENOMEM;
		}
		n->stats.processes++;
	}
	/* What the process taught stands while it runs the same build. */
	if (memcmp(e->file_key, f->key, sizeof(e->file_key)) != 0) {
		memcpy(e->file_key, f->key, sizeof(e->file_key));
		e->meta = f->meta;
	} else {
		uint32_t learned = e->meta.code_instruction_size;

		e->meta = f->meta;
		if (learned || e->codes_off)
			e->meta.code_instruction_size = learned;
	}
	v.start_boottime_ns = proc->start_ns;
	v.off_fp_function = (__s16)f->meta.off_fp_function;
	v.off_fp_context = (__s16)f->meta.off_fp_context;
	v.heap_object_map = (__u16)f->meta.heap_object_map;
	v.map_instance_type = (__u16)f->meta.map_instance_type;
	v.js_function_shared = (__u16)f->meta.js_function_shared;
	v.type_js_function_first = (__u16)f->meta.type_js_function_first;
	v.type_js_function_last = (__u16)f->meta.type_js_function_last;
	v.type_sfi = (__u16)f->meta.type_sfi;
	if (f->meta.has_positions) {
		v.off_fp_bytecode_array = (__s16)f->meta.off_fp_bytecode_array;
		v.off_fp_bytecode_offset = (__s16)f->meta.off_fp_bytecode_offset;
		v.bytecode_data = (__u16)f->meta.bytecode_data;
		v.type_bytecode_array = (__u16)f->meta.type_bytecode_array;
	}
	/* Not for a process whose Codes failed the layout's checks. */
	if (f->meta.has_code_positions &&
	    (e->meta.code_instruction_size || e->learn_failures < JS_LEARN_MAX_FAILURES)) {
		v.js_function_code = (__u16)f->meta.js_function_code;
		v.code_deopt_data = (__u16)f->meta.code_deopt_data;
		v.code_instruction_start = (__u16)f->meta.code_instruction_start;
		v.deopt_sfi = (__u16)(f->meta.fixed_array_data + 8 * f->meta.deopt_sfi);
		v.code_instruction_stream = (__u16)f->meta.code_instruction_stream;
		v.code_instruction_size = (__u16)e->meta.code_instruction_size;
	}
	if (n->procs_fd >= 0 && bpf_map_update_elem(n->procs_fd, &proc->pid, &v, BPF_ANY) < 0)
		return -errno;
	return 0;
}

void agent_nodejs__forget(struct agent_nodejs *n, const struct agent_proc *proc)
{
	struct js_proc *e = sr_htab_ptrs__remove(&n->procs, proc->key, sizeof(proc->key));
	struct v8_proc v;

	/* Its functions go with it. */
	agent_pcache__forget(&n->functions, proc->key);
	agent_pcache__forget(&n->codes, proc->key);
	if (!e)
		return;
	free(e);
	/* Unless the PID already names a newer process. */
	if (n->procs_fd >= 0 && bpf_map_lookup_elem(n->procs_fd, &proc->pid, &v) == 0 &&
	    v.start_boottime_ns == proc->start_ns)
		bpf_map_delete_elem(n->procs_fd, &proc->pid);
}

/* The words at offs of the object at tagged pointer obj, from one read of its head (at most JS_HEAD_MAX bytes). */
static int read_words(const struct agent_v8_meta *m, uint32_t pid, uint64_t obj, const uint32_t *offs, int n,
		      uint64_t *ret)
{
	uint8_t head[JS_HEAD_MAX];
	uint32_t span = 0;
	int r;

	for (int i = 0; i < n; i++)
		span = offs[i] + 8 > span ? offs[i] + 8 : span;
	if (span > sizeof(head))
		return -EINVAL;
	r = agent_peek(pid, obj - m->heap_object_tag, head, span);
	if (r < 0)
		return r;
	for (int i = 0; i < n; i++)
		memcpy(&ret[i], head + offs[i], 8);
	return 0;
}

/* The three words a cached function is checked against. */
static int read_head(const struct agent_v8_meta *m, uint32_t pid, uint64_t sfi, uint64_t ret[3])
{
	const uint32_t offs[3] = { m->heap_object_map, m->sfi_name_or_scope_info, m->sfi_script_or_debug_info };

	return read_words(m, pid, sfi, offs, 3, ret);
}

static void drop_function(struct agent_nodejs *n, struct js_function *fn)
{
	agent_pcache__drop(&n->functions, &fn->base);
}

/*
 * The line of a bytecode offset of fn: kept, or read while the process
 * lives (its function entry was just checked against the object's head);
 * 0 when not known. A line that cannot be read is kept as 0 too: the
 * frame then carries the function's first line, and no read is repeated.
 */
static uint32_t function_line(struct agent_nodejs *n, struct js_function *fn, const struct agent_v8_meta *m,
			      uint32_t pid, uint64_t sfi, uint32_t offset, bool alive)
{
	uint32_t slot;
	int line;

	for (uint32_t i = 0; i < fn->n_lines; i++)
		if (fn->lines[i].offset == offset)
			return fn->lines[i].line;
	if (!alive || !m->has_positions)
		return 0;
	n->stats.line_reads++;
	line = agent_v8_line(m, agent_peek_cb, (void *)(uintptr_t)pid, sfi, offset);
	if (line < 0)
		n->stats.line_read_errors++;
	slot = fn->n_lines < AGENT_NODEJS_LINES ? fn->n_lines++ : fn->next_line++ % AGENT_NODEJS_LINES;
	fn->lines[slot].offset = offset;
	fn->lines[slot].line = line > 0 ? (uint32_t)line : 0;
	return fn->lines[slot].line;
}

/*
 * The cached function of sfi, checked against the object's head; read
 * anew when absent or changed. *alive says whether the process could be
 * read. NULL when it cannot be named.
 */
static struct js_function *function_get(struct agent_nodejs *n, const struct js_proc *e, const struct agent_proc *proc,
					uint64_t sfi, bool *alive)
{
	struct js_function *fn;
	uint64_t head[3];
	uint8_t key[20];
	int r;

	*alive = true;
	memcpy(key, proc->key, 12);
	memcpy(key + 12, &sfi, 8);
	fn = (struct js_function *)agent_pcache__get(&n->functions, key);
	/*
	 * A process that is gone (samples are often read after it exited)
	 * keeps what was read while it lived; a live one's entry stands only
	 * while the object's head is what it was read from.
	 */
	r = read_head(&e->meta, proc->pid, sfi, head);
	if (r < 0) {
		*alive = false;
		if (!fn)
			n->stats.function_read_errors++;
		return fn;
	}
	if (fn && (fn->map != head[0] || fn->nos != head[1] || fn->sod != head[2])) {
		drop_function(n, fn);
		fn = NULL;
	}
	if (fn)
		return fn;
	fn = calloc(1, sizeof(*fn));
	if (!fn)
		return NULL;
	memcpy(fn->base.key, key, sizeof(key));
	fn->base.bytes = sizeof(*fn);
	n->stats.function_reads++;
	r = agent_v8_describe(&e->meta, agent_peek_cb, (void *)(uintptr_t)proc->pid, sfi, &fn->fn);
	if (r < 0) {
		n->stats.function_read_errors++;
		free(fn);
		return NULL;
	}
	fn->map = head[0];
	fn->nos = head[1];
	fn->sod = head[2];
	if (agent_pcache__put(&n->functions, &fn->base) < 0) {
		free(fn);
		return NULL;
	}
	return fn;
}

/* ret named after fn, at line (0: the function's first). */
static void name_frame(const struct js_function *fn, uint32_t line, struct agent_js_frame *ret)
{
	/* V8's profilers show a function without a name as "(anonymous)". */
	ret->name = fn->fn.name[0] ? fn->fn.name : "(anonymous)";
	ret->script = fn->fn.script;
	ret->start_line = fn->fn.start_line;
	ret->line = line ? line : fn->fn.start_line;
}

/*
 * Until the process has taught where a Code keeps its instruction size,
 * optimized frames come as their functions alone: now and then, take the
 * Code the BPF namer offered (a builtin's, usually) and learn from it;
 * once learned, v8_procs gets the size and the namer records optimized
 * frames by their Code.
 */
static void learn_code_size(struct agent_nodejs *n, struct js_proc *e, const struct agent_proc *proc)
{
	struct v8_proc v;
	uint32_t off;

	if (!e->meta.has_code_positions || e->meta.code_instruction_size || n->procs_fd < 0 ||
	    e->learn_failures >= JS_LEARN_MAX_FAILURES || e->frames++ % JS_LEARN_EVERY != 0)
		return;
	if (bpf_map_lookup_elem(n->procs_fd, &proc->pid, &v) < 0 || v.start_boottime_ns != proc->start_ns ||
	    !v.learn_code)
		return;
	/* The namer reads the Code's fields in one span from its deoptimization data (bpf/v8frame.h). */
	if (agent_v8_learn_code_size(&e->meta, agent_peek_cb, (void *)(uintptr_t)proc->pid, v.learn_code, &off) == 0 &&
	    off > e->meta.code_deopt_data && off + 4 - e->meta.code_deopt_data <= V8_CODE_SPAN &&
	    e->meta.code_instruction_start > e->meta.code_deopt_data &&
	    e->meta.code_instruction_start + 8 - e->meta.code_deopt_data <= V8_CODE_SPAN &&
	    (e->meta.code_instruction_start - e->meta.code_deopt_data) % 8 == 0 && off % 4 == 0) {
		struct js_file *f = agent_file_verdicts__get(&n->files, e->file_key);

		e->meta.code_instruction_size = off;
		v.code_instruction_size = (__u16)off;
		/* Other processes of the build take it from the file at their next sync. */
		if (f)
			f->meta.code_instruction_size = off;
		n->stats.code_layouts_learned++;
	} else {
		e->learn_failures++;
	}
	/* Cleared: the namer offers another Code while the size is not known. */
	v.learn_code = 0;
	bpf_map_update_elem(n->procs_fd, &proc->pid, &v, BPF_EXIST);
}

/*
 * The process's Codes fail the checks the derived layout must pass (a
 * build whose layout differs from what it is derived as): its optimized
 * frames are recorded by their functions again, and it is not asked again.
 */
static void give_up_codes(struct agent_nodejs *n, struct js_proc *e, const struct agent_proc *proc)
{
	struct v8_proc v;

	e->meta.code_instruction_size = 0;
	e->learn_failures = JS_LEARN_MAX_FAILURES;
	e->codes_off = true;
	n->stats.code_layouts_refused++;
	if (n->procs_fd >= 0 && bpf_map_lookup_elem(n->procs_fd, &proc->pid, &v) == 0 &&
	    v.start_boottime_ns == proc->start_ns) {
		v.code_instruction_size = 0;
		v.js_function_code = 0;
		bpf_map_update_elem(n->procs_fd, &proc->pid, &v, BPF_EXIST);
	}
}

int agent_nodejs__frame(struct agent_nodejs *n, const struct agent_proc *proc, uint64_t value,
			struct agent_js_frame *ret)
{
	struct js_proc *e = sr_htab_ptrs__get(&n->procs, proc->key, sizeof(proc->key));
	uint64_t sfi = (value & V8_FRAME_SFI_MASK) << 3 | V8_HEAP_OBJECT_TAG;
	uint32_t offset1 = (uint32_t)((value >> V8_FRAME_OFFSET_SHIFT) & V8_FRAME_OFFSET_MASK), line = 0;
	struct js_function *fn;
	bool alive;

	memset(ret, 0, sizeof(*ret));
	ret->sfi = sfi;
	ret->offset = offset1 ? (int32_t)offset1 - 1 : -1;
	if (!e || !(value & V8_FRAME_FLAG) || (value & V8_FRAME_CODE))
		return -ENOENT;
	learn_code_size(n, e, proc);
	fn = function_get(n, e, proc, sfi, &alive);
	if (!fn)
		return -ENOENT;
	if (ret->offset >= 0)
		line = function_line(n, fn, &e->meta, proc->pid, sfi, (uint32_t)ret->offset, alive);
	name_frame(fn, line, ret);
	return 0;
}

/* The Code's head words an entry is checked against (JS_CODE_HEAD of them), from one read. */
static int read_code_head(const struct agent_v8_meta *m, uint32_t pid, uint64_t code, uint64_t ret[JS_CODE_HEAD])
{
	const uint32_t offs[JS_CODE_HEAD] = { m->heap_object_map,	  m->code_deopt_data,
					      m->code_source_positions,	  m->code_relocation_info,
					      m->code_instruction_stream, m->code_instruction_start };

	return read_words(m, pid, code, offs, JS_CODE_HEAD, ret);
}

/* The Code's own function alone, at its first line, in *ret; NULL when it was never read. */
static const struct agent_v8_code_frame *own_function(const struct js_code *c, struct agent_v8_code_frame *ret,
						      int *ret_n)
{
	if (!c->sfi)
		return NULL;
	memset(ret, 0, sizeof(*ret));
	ret->sfi = c->sfi;
	*ret_n = 1;
	return ret;
}

/*
 * Slot i of c (Code code), whose lines were not found, read again: taken
 * when the read names the same functions, else left as it was.
 */
static const struct agent_v8_code_frame *code_lines_again(struct agent_nodejs *n, const struct js_proc *e,
							  const struct agent_proc *proc, uint64_t code,
							  struct js_code *c, uint32_t i, int *ret_n)
{
	struct agent_v8_code_frame f[AGENT_V8_MAX_INLINED];
	int r;

	n->stats.code_reads++;
	r = agent_v8_code_frames(&e->meta, agent_peek_cb, (void *)(uintptr_t)proc->pid, code, c->at[i].offset, f,
				 AGENT_V8_MAX_INLINED);
	if (r == c->at[i].n && f[r - 1].sfi == c->sfi) {
		memcpy(c->at[i].f, f, (size_t)r * sizeof(f[0]));
		if (f[r - 1].line == 0)
			n->stats.code_lines_unknown++;
	} else {
		n->stats.code_read_errors++;
	}
	*ret_n = c->at[i].n;
	return c->at[i].f;
}

/*
 * The functions of an optimized frame at offset of Code code, innermost
 * first: kept with the Code, or read while the process lives; for a
 * process that is gone, or an offset that could not be mapped, the Code's
 * own function alone (in *ret_gone), at its first line. NULL when the Code
 * cannot be read or is no optimized code.
 */
static const struct agent_v8_code_frame *code_functions(struct agent_nodejs *n, struct js_proc *e,
							const struct agent_proc *proc, uint64_t code, uint32_t offset,
							struct agent_v8_code_frame *ret_gone, int *ret_n)
{
	uint64_t head[JS_CODE_HEAD];
	struct js_code *c;
	uint8_t key[20];
	bool alive;
	uint32_t slot;
	int r;

	memcpy(key, proc->key, 12);
	memcpy(key + 12, &code, 8);
	c = (struct js_code *)agent_pcache__get(&n->codes, key);
	alive = read_code_head(&e->meta, proc->pid, code, head) == 0;
	if (c && alive && memcmp(c->head, head, sizeof(head)) != 0) {
		agent_pcache__drop(&n->codes, &c->base);
		c = NULL;
	}
	for (uint32_t i = 0; c && i < c->n_at; i++) {
		if (c->at[i].offset != offset)
			continue;
		if (c->at[i].n == 0)
			return own_function(c, ret_gone, ret_n);
		if (alive && c->at[i].f[c->at[i].n - 1].line == 0 && c->at[i].line_retries < JS_CODE_LINE_RETRIES) {
			c->at[i].line_retries++;
			return code_lines_again(n, e, proc, code, c, i, ret_n);
		}
		*ret_n = c->at[i].n;
		return c->at[i].f;
	}
	/* The process is gone: the Code's own function, at its first line, when it was read. */
	if (!alive)
		return c ? own_function(c, ret_gone, ret_n) : NULL;
	if (!c) {
		c = calloc(1, sizeof(*c));
		if (!c)
			return NULL;
		memcpy(c->base.key, key, sizeof(key));
		c->base.bytes = sizeof(*c);
		memcpy(c->head, head, sizeof(head));
		if (agent_pcache__put(&n->codes, &c->base) < 0) {
			free(c);
			return NULL;
		}
	}
	n->stats.code_reads++;
	slot = c->n_at < AGENT_NODEJS_CODE_OFFSETS ? c->n_at++ : c->next_at++ % AGENT_NODEJS_CODE_OFFSETS;
	c->at[slot].offset = offset;
	c->at[slot].line_retries = 0;
	r = agent_v8_code_frames(&e->meta, agent_peek_cb, (void *)(uintptr_t)proc->pid, code, offset, c->at[slot].f,
				 AGENT_V8_MAX_INLINED);
	if (r == -EINVAL) {
		/* No optimized code at that address (any more): nothing to name the frame by. */
		n->stats.code_read_errors++;
		agent_pcache__drop(&n->codes, &c->base);
		if (++e->codes_refused >= JS_CODE_MAX_REFUSED && e->codes_refused > e->codes_read && !e->codes_off)
			give_up_codes(n, e, proc);
		return NULL;
	}
	e->codes_read++;
	if (r < 0) {
		/* Kept as not mapped: the offset is named by the Code's own function when it is known. */
		n->stats.code_read_errors++;
		c->at[slot].n = 0;
		return own_function(c, ret_gone, ret_n);
	}
	c->sfi = c->at[slot].f[r - 1].sfi;
	if (c->at[slot].f[r - 1].line == 0)
		n->stats.code_lines_unknown++;
	c->at[slot].n = r;
	*ret_n = r;
	return c->at[slot].f;
}

int agent_nodejs__frames(struct agent_nodejs *n, const struct agent_proc *proc, uint64_t value,
			 struct agent_js_frame *ret, int room)
{
	struct js_proc *e = sr_htab_ptrs__get(&n->procs, proc->key, sizeof(proc->key));
	uint64_t code = (value & V8_FRAME_SFI_MASK) << 3 | V8_HEAP_OBJECT_TAG;
	uint32_t offset1 = (uint32_t)((value >> V8_FRAME_OFFSET_SHIFT) & V8_FRAME_OFFSET_MASK);
	const struct agent_v8_code_frame *cf;
	struct agent_v8_code_frame gone;
	int n_cf = 0, out = 0;

	if (room < 1)
		return -ENOENT;
	if (!(value & V8_FRAME_CODE))
		return agent_nodejs__frame(n, proc, value, ret) < 0 ? -ENOENT : 1;
	if (!e || !(value & V8_FRAME_FLAG) || !offset1)
		return -ENOENT;
	cf = code_functions(n, e, proc, code, offset1 - 1, &gone, &n_cf);
	if (!cf)
		return -ENOENT;
	for (int i = 0; i < n_cf && out < room; i++) {
		/* The Code's own function is last: inlined ones beyond the room are left out first. */
		int k = i < n_cf - 1 && n_cf - i > room - out ? -1 : i;
		struct js_function *fn;
		bool alive;

		if (k < 0)
			continue;
		fn = function_get(n, e, proc, cf[k].sfi, &alive);
		if (!fn)
			continue;
		memset(&ret[out], 0, sizeof(ret[out]));
		ret[out].sfi = cf[k].sfi;
		ret[out].offset = -1;
		name_frame(fn, cf[k].line > 0 ? (uint32_t)cf[k].line : 0, &ret[out]);
		out++;
	}
	if (n_cf > 1)
		n->stats.inlined_frames += (uint64_t)(out > 1 ? out - 1 : 0);
	return out > 0 ? out : -ENOENT;
}

int agent_nodejs__add(struct agent_nodejs *n, const struct agent_proc *proc, const struct agent_v8_meta *m)
{
	struct js_proc *e = calloc(1, sizeof(*e));

	if (!e)
		return -ENOMEM;
	memcpy(e->key, proc->key, sizeof(e->key));
	e->meta = *m;
	if (sr_htab_ptrs__put(&n->procs, e) < 0) {
		free(e);
		return -ENOMEM;
	}
	n->stats.processes++;
	return 0;
}

void agent_nodejs__stats(struct agent_nodejs *n, struct agent_nodejs_stats *ret)
{
	n->stats.functions_cached = n->functions.n;
	n->stats.functions_bytes = agent_pcache__bytes(&n->functions);
	n->stats.codes_cached = n->codes.n;
	n->stats.codes_bytes = agent_pcache__bytes(&n->codes);
	n->stats.evicted = n->functions.evicted + n->codes.evicted;
	*ret = n->stats;
}
