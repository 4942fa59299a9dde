/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "common/grow.h"
#include "common/gopclntab.h"
#include "common/macro.h"
#include "symtab.h"

/* malloc(0) may return NULL; empty tables still get arrays. */
#define SR_SYMTAB_MAX1(n)   ((n) ? (n) : 1)
#define SR_SYMTAB_MIN(a, b) ((a) < (b) ? (a) : (b))

struct gw_symtab {
	uint64_t *addr;
	uint32_t *size;
	uint32_t *name;
	uint32_t *sysname;
	char *pool;
	size_t n;
	size_t pool_len;
	unsigned sources;
	enum gw_demangle_mode mode;
	/* Every INDEX_STRIDE-th address: a small first-level array that stays in cache, so a
	 * lookup touches one block of the big array instead of log2(n) scattered lines. */
	uint64_t *top;
	size_t n_top;
	/* Page index, when the address span is compact enough: for each 4 KiB page from
	 * page_base, the last symbol starting at or below the page's start. A lookup then
	 * searches only the symbols of one page: O(1) in the table's size. */
	uint32_t *page;
	uint64_t page_base;
	size_t n_pages;
};

#define PAGE_SHIFT 12
/* Page index memory allowed, in index entries per symbol (4 bytes each). */
#define PAGE_INDEX_PER_SYMBOL 4

#define INDEX_STRIDE 32

static void build_index(struct gw_symtab *t);

struct entry {
	uint64_t addr;
	uint64_t size;
	uint32_t name; /* offset in the builder's pool */
	uint8_t rank;
	uint8_t is_func;
};

struct gw_symtab_builder {
	struct entry *e;
	size_t n, cap;
	char *pool;
	size_t pool_len, pool_cap;
};

struct gw_symtab_builder *gw_symtab_builder_new(void)
{
	return calloc(1, sizeof(struct gw_symtab_builder));
}

void gw_symtab_builder_free(struct gw_symtab_builder *b)
{
	if (!b)
		return;
	free(b->e);
	free(b->pool);
	free(b);
}

size_t gw_symtab_builder__count(const struct gw_symtab_builder *b)
{
	return b->n;
}

void gw_symtab_builder__rollback(struct gw_symtab_builder *b, size_t mark)
{
	if (mark >= b->n)
		return;
	/* Names are appended in order, so the first forgotten name starts the free pool. */
	b->pool_len = b->e[mark].name;
	b->n = mark;
}

int gw_symtab_builder__add(struct gw_symtab_builder *b, uint64_t addr, uint64_t size, const char *name, size_t len,
			   unsigned rank, bool is_func)
{
	int r;

	if (len == 0 || !name || !name[0])
		return 0;
	/* ELF symbol versions ("memcpy@@GLIBC_2.14") are not part of the function's name. */
	const char *at = memchr(name, '@', len);
	if (at && at != name)
		len = (size_t)(at - name);
	if (len > GW_SYMTAB_MAX_NAME)
		len = GW_SYMTAB_MAX_NAME;
	if (b->n >= GW_SYMTAB_MAX_SYMBOLS || b->pool_len + len + 1 > GW_SYMTAB_MAX_POOL)
		return -E2BIG;
	r = sr_grow((void **)&b->e, &b->cap, b->n + 1, sizeof(*b->e), 64);
	if (r < 0)
		return r;
	r = sr_grow((void **)&b->pool, &b->pool_cap, b->pool_len + len + 1, 1, 64);
	if (r < 0)
		return r;
	memcpy(b->pool + b->pool_len, name, len);
	b->pool[b->pool_len + len] = '\0';
	b->e[b->n++] = (struct entry){
		.addr = addr,
		.size = size,
		.name = (uint32_t)b->pool_len,
		.rank = (uint8_t)rank,
		.is_func = is_func,
	};
	b->pool_len += len + 1;
	return 0;
}

/* qsort has no context argument in C11; the pool travels through this (builders are per thread). */
static _Thread_local const char *sort_pool;

static int entry_cmp(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	if (x->rank != y->rank)
		return x->rank > y->rank ? -1 : 1;
	if (x->is_func != y->is_func)
		return x->is_func ? -1 : 1;
	if ((x->size != 0) != (y->size != 0))
		return x->size ? -1 : 1;
	/* Public names have fewer leading underscores: "read" over "__read", "__GI___read". */
	const char *na = sort_pool + x->name, *nb = sort_pool + y->name;
	size_t ua = strspn(na, "_"), ub = strspn(nb, "_");
	if (ua != ub)
		return ua < ub ? -1 : 1;
	size_t la = strlen(na), lb = strlen(nb);
	if (la != lb)
		return la < lb ? -1 : 1;
	return strcmp(na, nb);
}

static struct gw_symtab *symtab_alloc(size_t n)
{
	struct gw_symtab *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->n = n;
	t->addr = malloc(SR_SYMTAB_MAX1(n) * sizeof(*t->addr));
	t->size = malloc(SR_SYMTAB_MAX1(n) * sizeof(*t->size));
	t->name = malloc(SR_SYMTAB_MAX1(n) * sizeof(*t->name));
	t->sysname = malloc(SR_SYMTAB_MAX1(n) * sizeof(*t->sysname));
	if (!t->addr || !t->size || !t->name || !t->sysname) {
		gw_symtab_free(t);
		errno = ENOMEM;
		return NULL;
	}
	return t;
}

struct pool {
	char *p;
	size_t len, cap;
};

static int64_t pool_add(struct pool *p, const char *s)
{
	size_t l = strlen(s) + 1;

	if (p->len + l > GW_SYMTAB_MAX_POOL)
		return -E2BIG;
	if (sr_grow((void **)&p->p, &p->cap, p->len + l, 1, 64) < 0)
		return -ENOMEM;
	memcpy(p->p + p->len, s, l);
	p->len += l;
	return (int64_t)(p->len - l);
}

struct gw_symtab *gw_symtab_builder__finish(struct gw_symtab_builder *b, enum gw_demangle_mode mode, unsigned sources)
{
	struct gw_symtab *t = NULL;
	struct pool pool = { 0 };
	size_t n = 0;
	int r = -ENOMEM;

	sort_pool = b->pool;
	if (b->n > 1)
		qsort(b->e, b->n, sizeof(*b->e), entry_cmp);
	sort_pool = NULL;

	/* Reduce aliases in place: the first entry of each address wins (sort order). */
	for (size_t i = 0; i < b->n; i++) {
		if (n > 0 && b->e[n - 1].addr == b->e[i].addr) {
			if (b->e[n - 1].size == 0 && b->e[i].size > b->e[n - 1].size)
				b->e[n - 1].size = b->e[i].size;
			continue;
		}
		b->e[n++] = b->e[i];
	}

	t = symtab_alloc(n);
	if (!t)
		goto fail;
	t->sources = sources;
	t->mode = mode;
	for (size_t i = 0; i < n; i++) {
		const char *raw = b->pool + b->e[i].name;
		int64_t sys = pool_add(&pool, raw), disp = sys;
		if (sys < 0) {
			r = (int)sys;
			goto fail;
		}
		char *dm = gw_demangle(raw, mode);
		if (dm) {
			disp = pool_add(&pool, dm);
			free(dm);
			if (disp < 0) {
				r = (int)disp;
				goto fail;
			}
		} else if (errno == ENOMEM) {
			goto fail;
		}
		t->addr[i] = b->e[i].addr;
		t->size[i] = b->e[i].size > UINT32_MAX ? UINT32_MAX : (uint32_t)b->e[i].size;
		t->sysname[i] = (uint32_t)sys;
		t->name[i] = (uint32_t)disp;
	}
	if (pool.len == 0 && pool_add(&pool, "") < 0)
		goto fail;
	/* Give back the slack of the doubling growth: tables live long. */
	char *shrunk = realloc(pool.p, pool.len);
	t->pool = shrunk ? shrunk : pool.p;
	t->pool_len = pool.len;
	pool.p = NULL;

	build_index(t);
	b->n = 0;
	b->pool_len = 0;
	return t;
fail:
	free(pool.p);
	gw_symtab_free(t);
	errno = -r;
	return NULL;
}

/* Builds the first-level index; without memory the lookup falls back to the plain search. */
static void build_index(struct gw_symtab *t)
{
	free(t->top);
	t->top = NULL;
	t->n_top = 0;
	free(t->page);
	t->page = NULL;
	t->n_pages = 0;
	if (t->n < 4 * INDEX_STRIDE)
		return;
	uint64_t base = t->addr[0] & ~((1ULL << PAGE_SHIFT) - 1);
	uint64_t np = ((t->addr[t->n - 1] - base) >> PAGE_SHIFT) + 1;
	if (np <= (uint64_t)t->n * PAGE_INDEX_PER_SYMBOL + 1024 && (t->page = malloc(np * sizeof(*t->page)))) {
		size_t i = 0;
		for (uint64_t p = 0; p < np; p++) {
			uint64_t start = base + (p << PAGE_SHIFT);
			while (i + 1 < t->n && t->addr[i + 1] <= start)
				i++;
			t->page[p] = (uint32_t)i;
		}
		t->page_base = base;
		t->n_pages = np;
		return;
	}
	size_t n = (t->n + INDEX_STRIDE - 1) / INDEX_STRIDE;
	t->top = malloc(n * sizeof(*t->top));
	if (!t->top)
		return;
	for (size_t i = 0; i < n; i++)
		t->top[i] = t->addr[i * INDEX_STRIDE];
	t->n_top = n;
}

void gw_symtab_free(struct gw_symtab *t)
{
	if (!t)
		return;
	free(t->top);
	free(t->page);
	free(t->addr);
	free(t->size);
	free(t->name);
	free(t->sysname);
	free(t->pool);
	free(t);
}

size_t gw_symtab__count(const struct gw_symtab *t)
{
	return t->n;
}

size_t gw_symtab__memory_bytes(const struct gw_symtab *t)
{
	return sizeof(*t) + t->n * (sizeof(uint64_t) + 3 * sizeof(uint32_t)) + t->pool_len +
	       t->n_top * sizeof(uint64_t) + t->n_pages * sizeof(uint32_t);
}

unsigned gw_symtab__sources(const struct gw_symtab *t)
{
	return t->sources;
}

enum gw_demangle_mode gw_symtab__demangle_mode(const struct gw_symtab *t)
{
	return t->mode;
}

static void fill_hit(const struct gw_symtab *t, size_t i, struct gw_symtab_hit *ret)
{
	ret->name = t->pool + t->name[i];
	ret->sysname = t->pool + t->sysname[i];
	ret->start = t->addr[i];
	ret->size = t->size[i];
}

int gw_symtab__get(const struct gw_symtab *t, size_t i, struct gw_symtab_hit *ret)
{
	if (i >= t->n)
		return -ENOENT;
	fill_hit(t, i, ret);
	return 0;
}

/* How many earlier symbols are checked for one that encloses addr (nested symbols). */
#define ENCLOSING_LOOKBACK 4

int gw_symtab__lookup(const struct gw_symtab *t, uint64_t addr, struct gw_symtab_hit *ret)
{
	const uint64_t *a = t->addr;
	size_t lo = 0, n = t->n;

	if (t->n_pages) {
		if (addr < t->addr[0])
			return -ENOENT;
		uint64_t p = (addr - t->page_base) >> PAGE_SHIFT;
		if (p >= t->n_pages) {
			lo = t->page[t->n_pages - 1];
			n = t->n - lo;
		} else {
			lo = t->page[p];
			n = (p + 1 < t->n_pages ? t->page[p + 1] + 1 : t->n) - lo;
		}
	} else if (t->n_top) {
		/* First level: which block of INDEX_STRIDE symbols. */
		size_t blo = 0, bn = t->n_top;
		while (bn > 1) {
			size_t half = bn / 2;
			blo = t->top[blo + half] <= addr ? blo + half : blo;
			bn -= half;
		}
		lo = blo * INDEX_STRIDE;
		n = SR_SYMTAB_MIN(t->n - lo, (size_t)INDEX_STRIDE);
	}
	/* Branch-light binary search for the last symbol starting at or below addr. */
	while (n > 1) {
		size_t half = n / 2;
		lo = a[lo + half] <= addr ? lo + half : lo;
		n -= half;
	}
	if (t->n == 0 || a[lo] > addr)
		return -ENOENT;
	uint64_t off = addr - a[lo];
	if (t->size[lo] ? off < t->size[lo] : off < GW_SYMTAB_IMPLICIT_SIZE_MAX) {
		fill_hit(t, lo, ret);
		return 0;
	}
	for (size_t k = 1; k <= ENCLOSING_LOOKBACK && k <= lo; k++) {
		size_t i = lo - k;
		if (t->size[i] && addr - a[i] < t->size[i]) {
			fill_hit(t, i, ret);
			return 0;
		}
	}
	return -ENOENT;
}

/* ---- serialized form ---- */

#define DISK_MAGIC   "SRSYMTAB"
#define DISK_VERSION 1

struct disk_header {
	char magic[8];
	uint32_t version;
	uint32_t mode;
	uint32_t sources;
	uint32_t reserved;
	uint64_t n;
	uint64_t pool_len;
	uint64_t checksum; /* XXH64 of the whole file, this field taken as 0 */
};

int gw_symtab__serialize(const struct gw_symtab *t, void **ret, size_t *ret_len)
{
	size_t body = t->n * (8 + 4 + 4 + 4) + t->pool_len;
	struct disk_header h = {
		.magic = DISK_MAGIC,
		.version = DISK_VERSION,
		.mode = t->mode,
		.sources = t->sources,
		.n = t->n,
		.pool_len = t->pool_len,
	};
	uint8_t *buf = malloc(sizeof(h) + body), *p;

	if (!buf)
		return -ENOMEM;
	p = buf + sizeof(h);
	memcpy(p, t->addr, t->n * 8);
	p += t->n * 8;
	memcpy(p, t->size, t->n * 4);
	p += t->n * 4;
	memcpy(p, t->name, t->n * 4);
	p += t->n * 4;
	memcpy(p, t->sysname, t->n * 4);
	p += t->n * 4;
	memcpy(p, t->pool, t->pool_len);
	memcpy(buf, &h, sizeof(h));
	h.checksum = XXH64(buf, sizeof(h) + body, 0);
	memcpy(buf, &h, sizeof(h));
	*ret = buf;
	*ret_len = sizeof(h) + body;
	return 0;
}

static struct gw_symtab *redemangle(struct gw_symtab *t, enum gw_demangle_mode mode)
{
	struct gw_symtab_builder *b = gw_symtab_builder_new();
	struct gw_symtab *nt = NULL;

	if (!b)
		goto out;
	for (size_t i = 0; i < t->n; i++) {
		const char *s = t->pool + t->sysname[i];
		if (gw_symtab_builder__add(b, t->addr[i], t->size[i], s, strlen(s), GW_SYMTAB_RANK_GLOBAL, true) < 0)
			goto out;
	}
	nt = gw_symtab_builder__finish(b, mode, t->sources);
out:
	gw_symtab_builder_free(b);
	gw_symtab_free(t);
	if (!nt && errno == 0)
		errno = ENOMEM;
	return nt;
}

struct gw_symtab *gw_symtab_deserialize(const void *buf, size_t len, enum gw_demangle_mode mode)
{
	const uint8_t *p = buf;
	struct disk_header h;
	struct gw_symtab *t;

	if (len < sizeof(h))
		goto bad;
	memcpy(&h, buf, sizeof(h));
	if (memcmp(h.magic, DISK_MAGIC, 8) != 0 || h.version != DISK_VERSION || h.mode >= _GW_DEMANGLE_MAX)
		goto bad;
	if (h.n > GW_SYMTAB_MAX_SYMBOLS || h.pool_len == 0 || h.pool_len > GW_SYMTAB_MAX_POOL)
		goto bad;
	if (len - sizeof(h) != h.n * 20 + h.pool_len)
		goto bad;
	{
		/* The checksum covers the header too (with the checksum field zero). */
		XXH64_state_t *xs = XXH64_createState();
		struct disk_header z = h;
		uint64_t sum;
		if (!xs) {
			errno = ENOMEM;
			return NULL;
		}
		z.checksum = 0;
		XXH64_reset(xs, 0);
		XXH64_update(xs, &z, sizeof(z));
		XXH64_update(xs, p + sizeof(h), len - sizeof(h));
		sum = XXH64_digest(xs);
		XXH64_freeState(xs);
		if (sum != h.checksum)
			goto bad;
	}
	t = symtab_alloc(h.n);
	if (!t)
		return NULL;
	t->sources = h.sources;
	t->mode = h.mode;
	p += sizeof(h);
	memcpy(t->addr, p, h.n * 8);
	p += h.n * 8;
	memcpy(t->size, p, h.n * 4);
	p += h.n * 4;
	memcpy(t->name, p, h.n * 4);
	p += h.n * 4;
	memcpy(t->sysname, p, h.n * 4);
	p += h.n * 4;
	t->pool_len = h.pool_len;
	t->pool = malloc(h.pool_len);
	if (!t->pool) {
		gw_symtab_free(t);
		errno = ENOMEM;
		return NULL;
	}
	memcpy(t->pool, p, h.pool_len);
	/* The checksum catches accidents, not malice: every invariant is checked too. */
	if (t->pool[t->pool_len - 1] != '\0')
		goto bad_free;
	for (size_t i = 0; i < t->n; i++) {
		if (t->name[i] >= t->pool_len || t->sysname[i] >= t->pool_len)
			goto bad_free;
		if (i > 0 && t->addr[i] <= t->addr[i - 1])
			goto bad_free;
	}
	if (t->mode != mode)
		return redemangle(t, mode);
	build_index(t);
	return t;
bad_free:
	gw_symtab_free(t);
bad:
	errno = EBADMSG;
	return NULL;
}

/* ---- kallsyms ---- */

int gw_kallsyms_parse(const char *text, size_t len, struct gw_symtab_builder *b, size_t *ret_bad)
{
	const char *p = text, *end = text + len;
	size_t bad = 0;
	int added = 0;
	char name[GW_SYMTAB_MAX_NAME + 64];

	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		const char *line = p, *q;
		uint64_t addr = 0;
		int digits = 0;

		if (!eol)
			eol = end;
		p = eol + 1;
		if (eol == line)
			continue;
		for (q = line; q < eol && sr_hex_value(*q) >= 0 && digits < 17; q++, digits++)
			addr = addr << 4 | (uint64_t)sr_hex_value(*q);
		if (digits == 0 || digits > 16 || eol - q < 4 || q[0] != ' ' || q[2] != ' ') {
			bad++;
			continue;
		}
		char type = q[1];
		const char *sym = q + 3, *sym_end = sym;
		while (sym_end < eol && *sym_end != '\t' && *sym_end != ' ')
			sym_end++;
		if (!strchr("tTwW", type))
			continue;
		if (addr == 0 || sym_end == sym) {
			/* kptr_restrict hides addresses as zeros: nothing to resolve with. */
			bad++;
			continue;
		}
		size_t nl = (size_t)(sym_end - sym);
		if (nl > GW_SYMTAB_MAX_NAME)
			nl = GW_SYMTAB_MAX_NAME;
		memcpy(name, sym, nl);
		/* Module symbols: "name\t[module]" becomes "name [module]". */
		const char *mod = memchr(sym_end, '[', (size_t)(eol - sym_end));
		const char *mod_end = mod ? memchr(mod, ']', (size_t)(eol - mod)) : NULL;
		if (mod && mod_end && (size_t)(mod_end - mod) < 60) {
			name[nl++] = ' ';
			memcpy(name + nl, mod, (size_t)(mod_end - mod) + 1);
			nl += (size_t)(mod_end - mod) + 1;
		}
		unsigned rank = type == 'T' ? GW_SYMTAB_RANK_GLOBAL
					    : (type == 't' ? GW_SYMTAB_RANK_LOCAL : GW_SYMTAB_RANK_WEAK);
		int r = gw_symtab_builder__add(b, addr, 0, name, nl, rank, true);
		if (r < 0)
			return r;
		added++;
	}
	if (ret_bad)
		*ret_bad = bad;
	return added;
}

/* ---- Go pclntab (the walk itself is in gopclntab.c) ---- */

static int add_to_builder(void *userdata, uint64_t addr, uint64_t size, const char *name, size_t len)
{
	return gw_symtab_builder__add(userdata, addr, size, name, len, GW_SYMTAB_RANK_GLOBAL, true);
}

int gw_gopclntab_parse(const uint8_t *data, size_t len, uint64_t text_start, struct gw_symtab_builder *b)
{
	return sr_gopclntab_walk(data, len, text_start, add_to_builder, b);
}
