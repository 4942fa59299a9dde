// SPDX-License-Identifier: Apache-2.0
/*
 * HotSpot JVMs: libjvm.so's exports, a JVM's tables read from its memory,
 * layouts per libjvm build, JVM processes and their named methods (jvm.h).
 */
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "elfinfo.h"
#include "common/htab.h"
#include "jvm.h"
#include "parse-limits.h"
#include "proc-cache.h"
#include "util.h"

int agent_jvm_file_syms(int fd, uint64_t ret_vaddr[AGENT_JVM_N_SYMS])
{
	Elf *elf;
	Elf_Scn *scn = NULL;
	unsigned found = 0;
	GElf_Shdr sh;

	elf_version(EV_CURRENT);
	/* Within the parse limits (parse-limits.h), read with pread rather than mapped: no SIGBUS on truncation. */
	if (agent_elf_preflight_fd(fd) < 0)
		return -EINVAL;
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf)
		return -EINVAL;
	memset(ret_vaddr, 0, AGENT_JVM_N_SYMS * sizeof(*ret_vaddr));
	while ((scn = elf_nextscn(elf, scn))) {
		Elf_Data *d;
		size_t n;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM || !sh.sh_entsize)
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
			if (!name || strncmp(name, "gHotSpotVM", 10))
				continue;
			for (unsigned s = 0; s < AGENT_JVM_N_SYMS; s++) {
				if (!ret_vaddr[s] && !strcmp(name, agent_jvm_sym_name(s))) {
					ret_vaddr[s] = sym.st_value;
					found++;
				}
			}
		}
	}
	elf_end(elf);
	return found == AGENT_JVM_N_SYMS ? 0 : -ENOENT;
}

struct agent_jvm_tables *agent_jvm_tables_of(uint32_t pid, uint64_t bias, const uint64_t vaddr[AGENT_JVM_N_SYMS])
{
	struct agent_jvm_reader r = { agent_peek_cb, (void *)(uintptr_t)pid };
	uint64_t syms[AGENT_JVM_N_SYMS];

	for (unsigned s = 0; s < AGENT_JVM_N_SYMS; s++)
		syms[s] = vaddr[s] + bias;
	return agent_jvm_tables_read(&r, syms);
}

/* A libjvm build: its symbols and layout, static addresses as ELF virtual addresses. */
struct jvm_build {
	uint8_t key[1 + AGENT_BUILD_ID_MAX]; /* length, then the build ID */
	bool understood;
	const char *missing; /* what the tables lacked, when not understood */
	struct agent_jvm_layout layout;
};

struct jvm_proc {
	uint8_t key[12];
	uint32_t pid;
	struct agent_jvm_layout layout; /* relocated */
};

/* Lines of bytecode indexes looked up lately, per method (by bci modulo this). */
#define JVM_LINE_MEMO 4

/* A named method, its three strings packed after it (names average ~20 bytes: ~180 bytes an entry). */
struct jvm_name {
	struct agent_pcache_entry base; /* key: the process's key, then the Method* */
	uint16_t code_size;
	/*
	 * The line of a bci costs a read of the method's line table: a hot
	 * frame's is kept, and also answers once the process is gone.
	 */
	struct {
		int32_t bci; /* -1: empty */
		int32_t line;
	} memo[JVM_LINE_MEMO];
	uint64_t const_method; /* what it was read from: it stands while these are the same */
	uint64_t holder;
	uint64_t name_symbol;
	uint64_t line_table;
	const char *klass;
	const char *name;
	const char *file;
	char strings[];
};

/* A cache entry for m: one allocation. NULL + errno. */
static struct jvm_name *name_new(const uint8_t key[20], const struct agent_jvm_method *m)
{
	size_t lk = strlen(m->klass) + 1, ln = strlen(m->name) + 1, lf = strlen(m->file) + 1;
	struct jvm_name *n = malloc(sizeof(*n) + lk + ln + lf);

	if (!n)
		return NULL;
	memcpy(n->base.key, key, AGENT_PCACHE_KEY);
	n->base.bytes = (uint32_t)(sizeof(*n) + lk + ln + lf);
	n->code_size = m->code_size;
	for (int i = 0; i < JVM_LINE_MEMO; i++)
		n->memo[i].bci = -1;
	n->const_method = m->const_method;
	n->holder = m->holder;
	n->name_symbol = m->name_symbol;
	n->line_table = m->line_table;
	memcpy(n->strings, m->klass, lk);
	memcpy(n->strings + lk, m->name, ln);
	memcpy(n->strings + lk + ln, m->file, lf);
	n->klass = n->strings;
	n->name = n->strings + lk;
	n->file = n->strings + lk + ln;
	return n;
}

struct agent_jvm {
	uint64_t max_methods;
	struct sr_htab_ptrs builds;
	struct sr_htab_ptrs procs;
	struct agent_pcache names;
	struct agent_jvm_stats stats;
};

static const void *build_key(const void *v, size_t *len)
{
	*len = sizeof(((const struct jvm_build *)0)->key);
	return ((const struct jvm_build *)v)->key;
}

static const void *proc_key(const void *v, size_t *len)
{
	*len = sizeof(((const struct jvm_proc *)0)->key);
	return ((const struct jvm_proc *)v)->key;
}

static void name_free(struct agent_pcache_entry *e)
{
	free(e);
}

struct agent_jvm *agent_jvm_new(uint64_t max_methods)
{
	struct agent_jvm *j = calloc(1, sizeof(*j));

	if (!j)
		return NULL;
	j->max_methods = max_methods ? max_methods : AGENT_JVM_DEFAULT_MAX_METHODS;
	sr_htab_ptrs_init(&j->builds, build_key);
	sr_htab_ptrs_init(&j->procs, proc_key);
	agent_pcache_init(&j->names, j->max_methods, name_free);
	return j;
}

void agent_jvm_free(struct agent_jvm *j)
{
	void *v;

	if (!j)
		return;
	agent_pcache_done(&j->names);
	for (size_t i = 0; (v = sr_htab_ptrs__next(&j->builds, &i));)
		free(v);
	for (size_t i = 0; (v = sr_htab_ptrs__next(&j->procs, &i));)
		free(v);
	sr_htab_ptrs_done(&j->builds);
	sr_htab_ptrs_done(&j->procs);
	free(j);
}

/* The layout's static addresses moved by delta (bias to relocate, minus bias to un-relocate). */
static void relocate(struct agent_jvm_layout *l, uint64_t delta)
{
	l->codecache_heaps_addr += delta;
	l->codecache_low_addr += delta;
	l->codecache_high_addr += delta;
}

/* Reads the build's layout from the process (bias relocates the symbols). */
static int read_build(struct jvm_build *b, uint32_t pid, uint64_t bias, const uint64_t vaddr[AGENT_JVM_N_SYMS])
{
	struct agent_jvm_tables *t = agent_jvm_tables_of(pid, bias, vaddr);
	int err;

	if (!t)
		return -errno;
	err = agent_jvm_layout_from(t, &b->layout, &b->missing);
	agent_jvm_tables_free(t);
	if (err == -ENOTSUP) {
		b->understood = false;
		return 0;
	}
	if (err < 0)
		return err;
	b->understood = true;
	relocate(&b->layout, 0 - bias);
	return 0;
}

int agent_jvm__add(struct agent_jvm *j, const uint8_t key[12], uint32_t pid, int fd, uint64_t bias)
{
	uint64_t vaddr[AGENT_JVM_N_SYMS];
	struct agent_elf_info elf;
	uint8_t bkey[1 + AGENT_BUILD_ID_MAX] = { 0 };
	struct jvm_build nb = { 0 }, *b;
	struct jvm_proc *p;
	int err;

	err = agent_jvm_file_syms(fd, vaddr);
	if (err < 0)
		return err == -EINVAL ? -ENOENT : err;
	err = agent_elf_read_fd(fd, &elf);
	if (err < 0)
		return err == -ENOEXEC ? -ENOENT : err;
	/* Without a build ID every file is its own build, read again for each process. */
	bkey[0] = (uint8_t)elf.build_id_len;
	memcpy(bkey + 1, elf.build_id, elf.build_id_len);
	b = elf.build_id_len ? sr_htab_ptrs__get(&j->builds, bkey, sizeof(bkey)) : NULL;
	if (!b) {
		memcpy(nb.key, bkey, sizeof(bkey));
		err = read_build(&nb, pid, bias, vaddr);
		if (err == -EAGAIN)
			j->stats.starting++;
		if (err < 0)
			return err;
		j->stats.builds++;
		if (elf.build_id_len && j->builds.h.n < AGENT_JVM_MAX_BUILDS) {
			b = malloc(sizeof(*b));
			if (!b)
				return -ENOMEM;
			*b = nb;
			if (sr_htab_ptrs__put(&j->builds, b) < 0) {
				free(b);
				return -ENOMEM;
			}
		} else {
			b = &nb;
		}
	}
	if (!b->understood) {
		j->stats.not_understood++;
		return -ENOTSUP;
	}
	p = sr_htab_ptrs__get(&j->procs, key, 12);
	if (!p) {
		p = calloc(1, sizeof(*p));
		if (!p)
			return -ENOMEM;
		memcpy(p->key, key, 12);
		if (sr_htab_ptrs__put(&j->procs, p) < 0) {
			free(p);
			return -ENOMEM;
		}
		j->stats.processes++;
	}
	p->pid = pid;
	p->layout = b->layout;
	relocate(&p->layout, bias);
	return 0;
}

const struct agent_jvm_layout *agent_jvm__layout(const struct agent_jvm *j, const uint8_t key[12])
{
	const struct jvm_proc *p = sr_htab_ptrs__get(&j->procs, key, 12);

	return p ? &p->layout : NULL;
}

void agent_jvm__forget(struct agent_jvm *j, const uint8_t key[12])
{
	free(sr_htab_ptrs__remove(&j->procs, key, 12));
	agent_pcache__forget(&j->names, key);
}

int agent_jvm__method(struct agent_jvm *j, const uint8_t key[12], uint64_t method, int32_t bci,
		      struct agent_jvm_named *ret)
{
	const struct jvm_proc *p = sr_htab_ptrs__get(&j->procs, key, 12);
	struct agent_jvm_reader r;
	uint64_t cm, holder, sym;
	struct agent_jvm_method m;
	uint8_t nkey[20];
	struct jvm_name *n;
	int err;

	memset(ret, 0, sizeof(*ret));
	if (!p || !method)
		return -ENOENT;
	r.read = agent_peek_cb;
	r.ctx = (void *)(uintptr_t)p->pid;
	memcpy(nkey, key, 12);
	memcpy(nkey + 12, &method, 8);
	n = (struct jvm_name *)agent_pcache__get(&j->names, nkey);
	/* Checked on every use: a class can be unloaded and its Method*'s memory reused for another method. */
	err = agent_jvm_method_ids(&r, &p->layout, method, &cm, &holder, &sym);
	/* A process that is gone (its last samples are read after it exited) keeps what was read while it lived. */
	if (err == -ESRCH && n)
		goto named;
	if (err < 0 || (n && (n->const_method != cm || n->holder != holder || n->name_symbol != sym))) {
		if (n)
			agent_pcache__drop(&j->names, &n->base);
		j->stats.method_read_errors += err < 0;
		if (err < 0)
			return -ENOENT;
		n = NULL;
	}
	if (!n) {
		j->stats.method_reads++;
		if (agent_jvm_method_read(&r, &p->layout, method, &m) < 0) {
			j->stats.method_read_errors++;
			return -ENOENT;
		}
		n = name_new(nkey, &m);
		if (!n)
			return -ENOMEM;
		if (agent_pcache__put(&j->names, &n->base) < 0) {
			free(n);
			return -ENOMEM;
		}
	}
named:
	ret->klass = n->klass;
	ret->name = n->name;
	ret->file = n->file;
	ret->line = 0;
	if (bci >= 0) {
		int slot = bci % JVM_LINE_MEMO;

		if (n->memo[slot].bci != bci) {
			ret->line = agent_jvm_line_at(&r, n->line_table, n->code_size, (uint32_t)bci);
			/* A line not read (the process is gone) is not kept. */
			if (ret->line > 0) {
				n->memo[slot].bci = bci;
				n->memo[slot].line = ret->line;
			}
		} else {
			ret->line = n->memo[slot].line;
		}
	}
	return 0;
}

void agent_jvm__stats(const struct agent_jvm *j, struct agent_jvm_stats *ret)
{
	*ret = j->stats;
	ret->methods_cached = j->names.n;
	ret->methods_bytes = agent_pcache__bytes(&j->names);
	ret->evicted = j->names.evicted;
}
