// SPDX-License-Identifier: Apache-2.0
/*
 * Python processes: interpreter recognition, py_procs entries and the code
 * object cache (python.h). Runs on the sampling thread.
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "container-open.h"
#include "file-verdicts.h"
#include "common/htab.h"
#include "proc-cache.h"
#include "common/log.h"
#include "parse-limits.h"
#include "proc.h"
#include "util.h"
#include "pycode.h"
#include "python.h"

/* What a file is to Python, examined once per (dev, inode, mtime, size). */
struct py_file {
	uint64_t key[4];
	const struct agent_py_layout *layout; /* NULL: not a (supported) interpreter */
	bool interpreter;		      /* has _PyRuntime (even when its version is not supported) */
	uint64_t runtime;		      /* ELF virtual addresses */
	uint64_t eval;
	uint64_t eval_size;
	uint64_t code_type;
};

/* A Python process: enough to name its frames. */
struct py_proc_entry {
	uint8_t key[12]; /* pid + start_ns, as agent_proc.key */
	const struct agent_py_layout *layout;
	uint64_t code_type; /* PyCode_Type's address in the process */
	bool written;	    /* py_procs holds last, written for the address space mm */
	uint64_t mm;
	struct py_proc last;
};

struct py_code {
	struct agent_pcache_entry base; /* key: pid (4), start_ns (8), code address (8) */
	uint8_t kind;			/* enum agent_py_linetable_kind */
	struct agent_py_code head;	/* what the entry was read from: it stands while the head is the same */
	char *name;
	char *file;
	uint8_t *table;
	size_t table_len;
};

/* Code object heads read ahead for one sample (agent_python__prefetch); at least a stack's Python frames. */
#define PY_AHEAD_MAX 128

struct agent_python {
	int procs_fd;
	uint64_t max_codes;
	struct agent_file_verdicts files;
	struct sr_htab_ptrs procs;
	struct agent_pcache codes;
	struct agent_python_stats stats;
	/* The current sample's code object heads, read in one system call: ahead_n of them, for ahead_key. */
	uint8_t ahead_key[12];
	size_t ahead_n;
	uint64_t ahead_addr[PY_AHEAD_MAX];
	uint8_t (*ahead_head)[AGENT_PY_CODE_HEAD];
};

static const void *proc_key(const void *v, size_t *len)
{
	*len = sizeof(((const struct py_proc_entry *)0)->key);
	return ((const struct py_proc_entry *)v)->key;
}

static void code_free(struct py_code *c)
{
	free(c->name);
	free(c->file);
	free(c->table);
	free(c);
}

static void code_free_entry(struct agent_pcache_entry *e)
{
	code_free((struct py_code *)e);
}

struct agent_python *agent_python_new(int procs_fd, uint64_t max_codes)
{
	struct agent_python *py = calloc(1, sizeof(*py));

	if (!py)
		return NULL;
	py->ahead_head = malloc(PY_AHEAD_MAX * sizeof(*py->ahead_head));
	if (!py->ahead_head) {
		free(py);
		return NULL;
	}
	py->procs_fd = procs_fd;
	py->max_codes = max_codes ? max_codes : AGENT_PY_DEFAULT_MAX_CODES;
	agent_file_verdicts_init(&py->files, AGENT_PY_MAX_FILES);
	sr_htab_ptrs_init(&py->procs, proc_key);
	agent_pcache_init(&py->codes, py->max_codes, code_free_entry);
	elf_version(EV_CURRENT);
	return py;
}

void agent_python_free(struct agent_python *py)
{
	void *v;

	if (!py)
		return;
	agent_pcache_done(&py->codes);
	agent_file_verdicts_done(&py->files);
	for (size_t i = 0; (v = sr_htab_ptrs__next(&py->procs, &i));)
		free(v);
	sr_htab_ptrs_done(&py->procs);
	free(py->ahead_head);
	free(py);
}

/* The file name's version: python3.X or libpython3.X(.so...), as AGENT_PY_VERSION; 0 when it is not one. */
static uint16_t version_from_name(const char *path)
{
	const char *base = strrchr(path, '/');
	unsigned minor = 0;
	char *end;

	base = base ? base + 1 : path;
	if (!strncmp(base, "lib", 3))
		base += 3;
	if (strncmp(base, "python3.", 8))
		return 0;
	minor = (unsigned)strtoul(base + 8, &end, 10);
	if (end == base + 8 || minor > 255)
		return 0;
	/* A free-threaded build (python3.13t): other layouts, not supported. */
	if (*end == 't')
		return AGENT_PY_VERSION(3, 255);
	return AGENT_PY_VERSION(3, minor);
}

static const char *version_text(uint16_t version)
{
	static char buf[16];

	if ((version & 0xff) == 255)
		return "free-threaded";
	snprintf(buf, sizeof(buf), "%u.%u", version >> 8, version & 0xff);
	return buf;
}

/* Reads 4 bytes at ELF virtual address vaddr from the section that holds them, with one pread. */
static int read_u32_at(Elf *elf, int fd, uint64_t vaddr, uint32_t *ret)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;

	while ((scn = elf_nextscn(elf, scn))) {
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS || vaddr < sh.sh_addr ||
		    vaddr + 4 > sh.sh_addr + sh.sh_size)
			continue;
		if ((sh.sh_flags & SHF_COMPRESSED) ||
		    pread(fd, ret, 4, (off_t)(sh.sh_offset + (vaddr - sh.sh_addr))) != 4)
			return -EINVAL;
		return 0;
	}
	return -ENOENT;
}

/* Looks up the interpreter's symbols in .symtab and .dynsym; fills f. */
static void examine(int fd, const char *path, struct py_file *f)
{
	/* Within the parse limits (parse-limits.h), read with pread rather than mapped: no SIGBUS on truncation. */
	Elf *elf = agent_elf_preflight_fd(fd) == 0 ? elf_begin(fd, ELF_C_READ, NULL) : NULL;
	uint64_t version_addr = 0;
	Elf_Scn *scn = NULL;
	uint16_t version = 0;
	uint32_t hex;
	GElf_Shdr sh;

	if (!elf)
		return;
	while ((scn = elf_nextscn(elf, scn))) {
		Elf_Data *d;
		size_t n;

		if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) || !sh.sh_entsize)
			continue;
		if (agent_parse_section_data(scn, false, &d) < 0)
			continue;
		n = d->d_size / sh.sh_entsize;
		for (size_t i = 0; i < n; i++) {
			GElf_Sym sym;
			const char *name;

			if (!gelf_getsym(d, (int)i, &sym) || sym.st_shndx == SHN_UNDEF || !sym.st_value)
				continue;
			name = elf_strptr(elf, sh.sh_link, sym.st_name);
			if (!name || (name[0] != '_' && name[0] != 'P'))
				continue;
			if (!strcmp(name, "_PyRuntime")) {
				f->runtime = sym.st_value;
			} else if (!strcmp(name, "_PyEval_EvalFrameDefault")) {
				f->eval = sym.st_value;
				f->eval_size = sym.st_size;
			} else if (!strcmp(name, "PyCode_Type")) {
				f->code_type = sym.st_value;
			} else if (!strcmp(name, "Py_Version")) {
				version_addr = sym.st_value;
			}
		}
	}
	f->interpreter = f->runtime && f->eval && f->eval_size && f->code_type;
	/* Py_Version (3.11+) is PY_VERSION_HEX; before it, the file name says the version. */
	if (f->interpreter && version_addr && read_u32_at(elf, fd, version_addr, &hex) == 0)
		version = (uint16_t)(hex >> 16);
	if (version_from_name(path) == AGENT_PY_VERSION(3, 255))
		version = AGENT_PY_VERSION(3, 255);
	if (f->interpreter && !version)
		version = version_from_name(path);
	if (f->interpreter)
		f->layout = agent_py_layout(version);
	if (f->interpreter)
		sr_log_info("agent",
			    f->layout ? "Python interpreter found" : "Python interpreter of an unsupported version",
			    "path=\"%s\" version=%s", path, version_text(version));
	elf_end(elf);
}

/* The file behind m, examined on first sight. NULL when it cannot be read now. */
static struct py_file *file_for(struct agent_python *py, const struct agent_proc *proc, const struct agent_proc_map *m)
{
	const uint64_t *key = agent_exe__key(m->exe);
	struct py_file *f = agent_file_verdicts__get(&py->files, key);
	char path[512];
	int fd;

	if (f || agent_exe__is_vdso(m->exe))
		return f;
	if (agent_proc_map__path(proc, m, path, sizeof(path)) < 0)
		return NULL;
	f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	memcpy(f->key, key, sizeof(f->key));
	/* Only interpreters are read: a file named python3.X or libpython3.X. */
	if (version_from_name(path)) {
		fd = agent_open_map_file(proc->pid, m->start, m->end, NULL);
		if (fd < 0) {
			free(f);
			return NULL;
		}
		examine(fd, path, f);
		close(fd);
	}
	return agent_file_verdicts__add(&py->files, f) < 0 ? NULL : f;
}

int agent_python__sync(struct agent_python *py, const struct agent_proc *proc)
{
	struct py_proc_entry *e;
	struct py_proc v;
	struct py_file *f = NULL;
	const struct agent_proc_map *m = NULL;
	uint64_t bias;

	for (size_t i = 0; i < proc->n_maps && !f; i++) {
		struct py_file *c;

		if (!proc->maps[i].exe)
			continue;
		c = file_for(py, proc, &proc->maps[i]);
		if (c && c->interpreter && agent_proc_map__current(proc, &proc->maps[i])) {
			f = c;
			m = &proc->maps[i];
		}
	}
	/* An exec may have replaced an interpreter with something else: the old entry goes. */
	if (!f || !f->layout)
		agent_python__forget(py, proc);
	if (!f)
		return -ENOENT;
	if (!f->layout) {
		py->stats.unsupported++;
		return -ENOTSUP;
	}
	if (agent_proc_map__bias(m, &bias) < 0)
		return -ENOENT;
	e = sr_htab_ptrs__get(&py->procs, proc->key, sizeof(proc->key));
	if (!e) {
		e = calloc(1, sizeof(*e));
		if (!e)
			return -ENOMEM;
		memcpy(e->key, proc->key, sizeof(e->key));
		if (sr_htab_ptrs__put(&py->procs, e) < 0) {
			free(e);
			return -ENOMEM;
		}
		py->stats.processes++;
	}
	e->layout = f->layout;
	e->code_type = f->code_type + bias;
	memset(&v, 0, sizeof(v)); /* padding too: compared with what was written */
	v.start_boottime_ns = proc->start_ns;
	v.runtime = f->runtime + bias;
	v.eval_start = f->eval + bias;
	v.eval_end = v.eval_start + f->eval_size;
	v.off = f->layout->bpf;
	/*
	 * Synced again for each library it maps (its extension modules): the
	 * entry is written again only when it changed. BPF deletes it at exec,
	 * which changes the address space (mm; 0 when not known: always written).
	 */
	if (e->written && proc->mm && e->mm == proc->mm && memcmp(&e->last, &v, sizeof(v)) == 0)
		return 0;
	e->written = false;
	if (py->procs_fd >= 0 && bpf_map_update_elem(py->procs_fd, &proc->pid, &v, BPF_ANY) < 0)
		return -errno;
	e->written = true;
	e->mm = proc->mm;
	e->last = v;
	return 0;
}

void agent_python__forget(struct agent_python *py, const struct agent_proc *proc)
{
	struct py_proc_entry *e = sr_htab_ptrs__remove(&py->procs, proc->key, sizeof(proc->key));
	struct py_proc v;

	/* Its code objects go with it: a host starts thousands of short Python processes. */
	agent_pcache__forget(&py->codes, proc->key);
	if (!e)
		return;
	free(e);
	/* Unless the PID already names a newer process. */
	if (py->procs_fd >= 0 && bpf_map_lookup_elem(py->procs_fd, &proc->pid, &v) == 0 &&
	    v.start_boottime_ns == proc->start_ns)
		bpf_map_delete_elem(py->procs_fd, &proc->pid);
}

/*
 * Reads len bytes at addr and, in the same system call, up to cap - len more
 * that follow them on the same page: an object's contents usually follow
 * its head (a compact str's characters, a bytes object's), and bytes on a
 * page already read cannot fault. Returns how many more were read, or
 * -errno.
 */
static size_t span_on_page(uint64_t addr, size_t len, size_t cap)
{
	uint64_t end = addr + len, page_end = (end + 4095) & ~4095ULL;

	return len + (page_end > end ? SR_MIN(cap - len, (size_t)(page_end - end)) : 0);
}

static ssize_t peek_more(uint32_t pid, uint64_t addr, uint8_t *buf, size_t len, size_t cap)
{
	size_t span = span_on_page(addr, len, cap);
	struct iovec local = { buf, span }, remote = { (void *)(uintptr_t)addr, span };
	ssize_t n = process_vm_readv((pid_t)pid, &local, 1, &remote, 1, 0);

	if (n < 0)
		return -errno;
	return (size_t)n < len ? -EFAULT : n - (ssize_t)len;
}

/* One object's head to read, as peek_more() reads it: more is what it returns. */
struct ahead {
	uint64_t addr;
	uint8_t *buf;
	size_t len, cap;
	ssize_t more;
};

/*
 * peek_more() for each of n objects, in one system call: a range the call
 * did not read whole (it stops at the first that fails) is read alone, so
 * each comes out as peek_more() would have read it.
 */
static void peek_ahead(uint32_t pid, struct ahead *a, size_t n)
{
	struct iovec local[3], remote[3];
	size_t off = 0;
	ssize_t got;

	if (n > SR_ARRAY_SIZE(local))
		n = SR_ARRAY_SIZE(local);
	for (size_t i = 0; i < n; i++) {
		size_t span = span_on_page(a[i].addr, a[i].len, a[i].cap);

		local[i] = (struct iovec){ a[i].buf, span };
		remote[i] = (struct iovec){ (void *)(uintptr_t)a[i].addr, span };
	}
	got = n ? process_vm_readv((pid_t)pid, local, n, remote, n, 0) : 0;
	for (size_t i = 0; i < n; i++) {
		off += local[i].iov_len;
		if (got >= 0 && off <= (size_t)got)
			a[i].more = (ssize_t)(local[i].iov_len - a[i].len);
		else
			a[i].more = peek_more(pid, a[i].addr, a[i].buf, a[i].len, a[i].cap);
	}
}

/* Copies [at, at + len) of the process from buf (read from base, got bytes) when it is all there, else reads it. */
static int copy_or_peek(uint32_t pid, const uint8_t *buf, uint64_t base, size_t got, uint64_t at, void *out, size_t len)
{
	if (at >= base && at - base <= got && len <= got - (at - base)) {
		memcpy(out, buf + (at - base), len);
		return 0;
	}
	return agent_peek(pid, at, out, len);
}

/* Room for a str object's head and the characters of a name that follow it. */
#define PY_STR_AHEAD (AGENT_PY_STR_HEAD + AGENT_PY_MAX_NAME * 4)

/*
 * A str object of the process as UTF-8 (malloc'd), or NULL. head holds
 * what peek_more() read at addr (more: what it returned).
 */
static char *read_str(const struct agent_py_layout *l, uint32_t pid, uint64_t addr, const uint8_t *head, ssize_t more)
{
	uint8_t chars[AGENT_PY_MAX_NAME * 4];
	struct agent_py_str s;
	size_t n, bytes;
	char out[AGENT_PY_MAX_NAME + 4];

	if (!addr || more < 0 || agent_py_str_header(l, addr, head, AGENT_PY_STR_HEAD, &s) < 0)
		return NULL;
	n = s.length < AGENT_PY_MAX_NAME ? (size_t)s.length : AGENT_PY_MAX_NAME;
	bytes = n * s.kind;
	if (bytes && copy_or_peek(pid, head, addr, AGENT_PY_STR_HEAD + (size_t)more, s.data, chars, bytes) < 0)
		return NULL;
	agent_py_str_utf8(chars, n, s.kind, out, AGENT_PY_MAX_NAME);
	if (s.length > n)
		strcat(out, "...");
	return strdup(out);
}

/*
 * Fills c (name, file, line table) from a code object's decoded head. false
 * when a string cannot be read. The three objects' heads are read in one
 * system call.
 */
static bool read_code(const struct agent_py_layout *l, uint32_t pid, const struct agent_py_code *pc, struct py_code *c)
{
	uint8_t nhead[PY_STR_AHEAD], fhead[PY_STR_AHEAD], bhead[AGENT_PY_BYTES_HEAD + 4096];
	struct ahead a[3] = {
		{ pc->name, nhead, AGENT_PY_STR_HEAD, sizeof(nhead), -1 },
		{ pc->filename, fhead, AGENT_PY_STR_HEAD, sizeof(fhead), -1 },
		{ pc->linetable, bhead, AGENT_PY_BYTES_HEAD, sizeof(bhead), -1 },
	};
	struct ahead want[3];
	size_t n = 0;
	uint64_t data, size;
	ssize_t more;

	/* Only objects there are: a null address is not read. */
	for (size_t i = 0; i < 3; i++)
		if (a[i].addr)
			want[n++] = a[i];
	peek_ahead(pid, want, n);
	for (size_t i = 0, j = 0; i < 3; i++)
		if (a[i].addr)
			a[i].more = want[j++].more;
	c->name = read_str(l, pid, pc->name, nhead, a[0].more);
	c->file = read_str(l, pid, pc->filename, fhead, a[1].more);
	if (!c->name || !c->file)
		return false;
	c->head = *pc;
	c->kind = l->linetable_kind;
	if (pc->linetable && (more = a[2].more) >= 0 &&
	    agent_py_bytes_header(pc->linetable, bhead, AGENT_PY_BYTES_HEAD, &data, &size) == 0 && size > 0 &&
	    size <= AGENT_PY_MAX_LINETABLE) {
		c->table = malloc(size);
		if (c->table && copy_or_peek(pid, bhead, pc->linetable, AGENT_PY_BYTES_HEAD + (size_t)more, data,
					     c->table, size) == 0) {
			c->table_len = size;
		} else {
			free(c->table);
			c->table = NULL;
		}
	}
	return true;
}

static void drop_code(struct agent_python *py, struct py_code *c)
{
	agent_pcache__drop(&py->codes, &c->base);
}

void agent_python__prefetch(struct agent_python *py, const struct agent_proc *proc, const __u64 *values, size_t n)
{
	struct iovec local[PY_AHEAD_MAX], remote[PY_AHEAD_MAX];
	size_t k = 0;
	ssize_t got;

	py->ahead_n = 0;
	if (!proc || !sr_htab_ptrs__get(&py->procs, proc->key, sizeof(proc->key)))
		return;
	for (size_t i = 0; i < n && k < PY_AHEAD_MAX; i++) {
		uint64_t addr = values[i] & PY_FRAME_ADDR_MASK;
		size_t j;

		if (!(values[i] & PY_FRAME_FLAG))
			continue;
		/* Recursion: a code object once. */
		for (j = 0; j < k && py->ahead_addr[j] != addr; j++)
			;
		if (j < k)
			continue;
		py->ahead_addr[k] = addr;
		local[k] = (struct iovec){ py->ahead_head[k], AGENT_PY_CODE_HEAD };
		remote[k] = (struct iovec){ (void *)(uintptr_t)addr, AGENT_PY_CODE_HEAD };
		k++;
	}
	/* One frame reads its own head. */
	if (k < 2)
		return;
	got = process_vm_readv((pid_t)proc->pid, local, k, remote, k, 0);
	/* The call stops at the first head it cannot read: those after it are read one by one, as before. */
	if (got > 0)
		py->ahead_n = (size_t)got / AGENT_PY_CODE_HEAD;
	memcpy(py->ahead_key, proc->key, sizeof(py->ahead_key));
}

/* The head of the code object at addr when agent_python__prefetch() read it for this process. */
static bool head_ahead(struct agent_python *py, const struct agent_proc *proc, uint64_t addr,
		       uint8_t head[AGENT_PY_CODE_HEAD])
{
	if (!py->ahead_n || memcmp(py->ahead_key, proc->key, sizeof(py->ahead_key)) != 0)
		return false;
	for (size_t i = 0; i < py->ahead_n; i++)
		if (py->ahead_addr[i] == addr) {
			memcpy(head, py->ahead_head[i], AGENT_PY_CODE_HEAD);
			return true;
		}
	return false;
}

int agent_python__frame(struct agent_python *py, const struct agent_proc *proc, uint64_t value,
			struct agent_py_frame *ret)
{
	const struct py_proc_entry *e = sr_htab_ptrs__get(&py->procs, proc->key, sizeof(proc->key));
	uint64_t addr = value & PY_FRAME_ADDR_MASK;
	uint32_t offset = (uint32_t)((value >> PY_FRAME_OFFSET_SHIFT) & PY_FRAME_OFFSET_MAX);
	uint8_t key[20], head[AGENT_PY_CODE_HEAD];
	struct agent_py_code pc;
	struct py_code *c;

	memset(ret, 0, sizeof(*ret));
	ret->code = addr;
	ret->offset = offset;
	if (!e || !(value & PY_FRAME_FLAG))
		return -ENOENT;
	memcpy(key, proc->key, 12);
	memcpy(key + 12, &addr, 8);
	c = (struct py_code *)agent_pcache__get(&py->codes, key);
	/*
	 * The head is read every time: a code object can be freed and another
	 * made at its address (and a frame being set up can still point at a
	 * freed one), so a cached entry stands only while the head it was read
	 * from is still there. Failures are not remembered, for the same reason.
	 * A process that is gone (its samples are often read after it exited)
	 * keeps what was read while it lived.
	 */
	if (!head_ahead(py, proc, addr, head) && agent_peek(proc->pid, addr, head, sizeof(head)) < 0)
		goto gone;
	if (agent_py_code_parse(e->layout, head, sizeof(head), &pc) < 0 || pc.type != e->code_type) {
		if (c)
			drop_code(py, c);
		py->stats.code_read_errors++;
		return -ENOENT;
	}
	if (c && (c->head.name != pc.name || c->head.filename != pc.filename || c->head.linetable != pc.linetable ||
		  c->head.firstlineno != pc.firstlineno)) {
		drop_code(py, c);
		c = NULL;
	}
	if (!c) {
		c = calloc(1, sizeof(*c));
		if (!c)
			return -ENOMEM;
		memcpy(c->base.key, key, sizeof(key));
		py->stats.code_reads++;
		if (!read_code(e->layout, proc->pid, &pc, c)) {
			py->stats.code_read_errors++;
			code_free(c);
			return -ENOENT;
		}
		c->base.bytes = (uint32_t)(sizeof(*c) + (c->name ? strlen(c->name) + 1 : 0) +
					   (c->file ? strlen(c->file) + 1 : 0) + c->table_len);
		if (agent_pcache__put(&py->codes, &c->base) < 0) {
			code_free(c);
			return -ENOMEM;
		}
	}
	goto found;
gone:
	if (!c) {
		py->stats.code_read_errors++;
		return -ENOENT;
	}
found:
	ret->name = c->name;
	ret->file = c->file;
	ret->first_line = c->head.firstlineno;
	/* A clamped offset has no line of its own: the function's first line stands for it. */
	ret->line = offset == PY_FRAME_OFFSET_MAX
			    ? c->head.firstlineno
			    : agent_py_line(c->kind, c->head.firstlineno, c->table, c->table_len, offset);
	return 0;
}

void agent_python__stats(struct agent_python *py, struct agent_python_stats *ret)
{
	py->stats.codes_cached = py->codes.n;
	py->stats.codes_bytes = agent_pcache__bytes(&py->codes);
	py->stats.evicted = py->codes.evicted;
	*ret = py->stats;
}
