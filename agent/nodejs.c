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
#include <sys/uio.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <linux/types.h>

#include "file-verdicts.h"
#include "container-open.h"
#include "common/htab.h"
#include "nodejs.h"
#include "proc-cache.h"
#include "proc.h"
#include "v8.h"
#include "v8frame.h"

/* What a file is to V8, examined once per (dev, inode, mtime, size). */
struct js_file {
	uint64_t key[4];
	bool v8;	/* has v8dbg_* symbols */
	bool supported; /* ... with everything the walk needs */
	struct agent_v8_meta meta;
};

/* A Node.js process: the metadata of its build, its own copy (the file table starts again when full). */
struct js_proc {
	uint8_t key[12]; /* pid + start_ns, as agent_proc.key */
	struct agent_v8_meta meta;
};

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

struct agent_nodejs {
	int procs_fd;
	uint64_t max_functions;
	struct agent_file_verdicts files;
	struct sr_htab_ptrs procs;
	struct agent_pcache functions;
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
	e->meta = f->meta;
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
	if (!e)
		return;
	free(e);
	/* Unless the PID already names a newer process. */
	if (n->procs_fd >= 0 && bpf_map_lookup_elem(n->procs_fd, &proc->pid, &v) == 0 &&
	    v.start_boottime_ns == proc->start_ns)
		bpf_map_delete_elem(n->procs_fd, &proc->pid);
}

/* agent_v8_read_fn over process_vm_readv: exactly len bytes, or -errno. */
static int peek(void *ctx, uint64_t addr, void *buf, size_t len)
{
	pid_t pid = (pid_t)(uintptr_t)ctx;
	struct iovec local = { buf, len }, remote = { (void *)(uintptr_t)addr, len };
	ssize_t r = process_vm_readv(pid, &local, 1, &remote, 1, 0);

	if (r < 0)
		return -errno;
	return (size_t)r == len ? 0 : -EFAULT;
}

/* The three words a cached entry is checked against, from one read of the object's head. */
static int read_head(const struct agent_v8_meta *m, uint32_t pid, uint64_t sfi, uint64_t ret[3])
{
	const uint32_t offs[3] = { m->heap_object_map, m->sfi_name_or_scope_info, m->sfi_script_or_debug_info };
	uint8_t head[JS_HEAD_MAX];
	uint32_t span = 0;
	int r;

	for (int i = 0; i < 3; i++)
		span = offs[i] + 8 > span ? offs[i] + 8 : span;
	if (span > sizeof(head))
		return -EINVAL;
	r = peek((void *)(uintptr_t)pid, sfi - m->heap_object_tag, head, span);
	if (r < 0)
		return r;
	for (int i = 0; i < 3; i++)
		memcpy(&ret[i], head + offs[i], 8);
	return 0;
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
	line = agent_v8_line(m, peek, (void *)(uintptr_t)pid, sfi, offset);
	if (line < 0)
		n->stats.line_read_errors++;
	slot = fn->n_lines < AGENT_NODEJS_LINES ? fn->n_lines++ : fn->next_line++ % AGENT_NODEJS_LINES;
	fn->lines[slot].offset = offset;
	fn->lines[slot].line = line > 0 ? (uint32_t)line : 0;
	return fn->lines[slot].line;
}

int agent_nodejs__frame(struct agent_nodejs *n, const struct agent_proc *proc, uint64_t value,
			struct agent_js_frame *ret)
{
	const struct js_proc *e = sr_htab_ptrs__get(&n->procs, proc->key, sizeof(proc->key));
	uint64_t sfi = (value & V8_FRAME_SFI_MASK) << 3 | V8_HEAP_OBJECT_TAG, head[3];
	uint32_t offset1 = (uint32_t)((value >> V8_FRAME_OFFSET_SHIFT) & V8_FRAME_OFFSET_MASK);
	struct js_function *fn;
	bool alive = true;
	uint8_t key[20];
	int r;

	memset(ret, 0, sizeof(*ret));
	ret->sfi = sfi;
	ret->offset = offset1 ? (int32_t)offset1 - 1 : -1;
	if (!e || !(value & V8_FRAME_FLAG))
		return -ENOENT;
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
		alive = false;
		if (fn)
			goto found;
		n->stats.function_read_errors++;
		return -ENOENT;
	}
	if (fn && (fn->map != head[0] || fn->nos != head[1] || fn->sod != head[2])) {
		drop_function(n, fn);
		fn = NULL;
	}
	if (!fn) {
		fn = calloc(1, sizeof(*fn));
		if (!fn)
			return -ENOMEM;
		memcpy(fn->base.key, key, sizeof(key));
		fn->base.bytes = sizeof(*fn);
		n->stats.function_reads++;
		r = agent_v8_describe(&e->meta, peek, (void *)(uintptr_t)proc->pid, sfi, &fn->fn);
		if (r < 0) {
			n->stats.function_read_errors++;
			free(fn);
			return -ENOENT;
		}
		fn->map = head[0];
		fn->nos = head[1];
		fn->sod = head[2];
		if (agent_pcache__put(&n->functions, &fn->base) < 0) {
			free(fn);
			return -ENOMEM;
		}
	}
found:
	/* V8's profilers show a function without a name as "(anonymous)". */
	ret->name = fn->fn.name[0] ? fn->fn.name : "(anonymous)";
	ret->script = fn->fn.script;
	ret->start_line = fn->fn.start_line;
	ret->line = fn->fn.start_line;
	if (ret->offset >= 0) {
		uint32_t line = function_line(n, fn, &e->meta, proc->pid, sfi, (uint32_t)ret->offset, alive);

		if (line)
			ret->line = line;
	}
	return 0;
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
	n->stats.evicted = n->functions.evicted;
	*ret = n->stats;
}
