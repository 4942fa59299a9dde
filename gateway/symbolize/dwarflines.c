/* SPDX-License-Identifier: Apache-2.0 */
#include <dwarf.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <elfutils/libdw.h>

#include "common/grow.h"
#include "common/search.h"
#include "dwarflines.h"

/* Most address ranges indexed per file (a bound on the index's memory: 24 bytes each). */
#define DWARF_MAX_RANGES (8u << 20)

struct cu_range {
	uint64_t start, end;
	uint32_t cu; /* index into cus */
};

/*
 * Per-CU index of the functions and inlined instances with code, built on
 * the CU's first lookup by one walk of its DIE tree. libdw's
 * dwarf_getscopes() walks the tree on every call (tens of microseconds on a
 * large CU); with the index a lookup is a binary search plus a walk up the
 * (short) chain of enclosing scopes.
 */
struct scope_die {
	Dwarf_Off off;
	uint32_t parent; /* index of the nearest indexed ancestor, NO_PARENT at the top */
	uint32_t first_range;
	uint32_t n_ranges;
	uint32_t tag;
};

struct scope_range {
	uint64_t lo, hi;
	uint32_t die;
};

struct cu_scopes {
	struct scope_die *dies;
	size_t n_dies, cap_dies;
	struct scope_range *ranges; /* sorted by lo after the walk */
	size_t n_ranges, cap_ranges;
	struct scope_range *die_ranges; /* the same ranges grouped by die (first_range/n_ranges) */
	bool failed;			/* too big or malformed: use dwarf_getscopes() for this CU */
};

#define NO_PARENT UINT32_MAX
/* Deepest DIE nesting followed while indexing (deeper DIEs are skipped). */
#define SCOPE_MAX_DEPTH 256
/* Most scope entries (DIEs + ranges) indexed per file. */
#define SCOPE_MAX_ENTRIES (16u << 20)

struct gw_dwarf {
	Dwarf *dbg;
	Dwarf_Die *cus;
	size_t n_cus, cap_cus;
	struct cu_range *ranges;
	size_t n_ranges, cap_ranges;
	struct cu_scopes **scopes; /* per CU, NULL until first used */
	size_t scope_entries;
};

static int range_cmp(const void *a, const void *b)
{
	const struct cu_range *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->end < y->end ? -1 : (x->end > y->end);
}

static int push_range(struct gw_dwarf *d, uint64_t start, uint64_t end, uint32_t cu)
{
	int r;

	if (start >= end || start == 0)
		return 0;
	if (d->n_ranges >= DWARF_MAX_RANGES)
		return -E2BIG;
	r = sr_grow((void **)&d->ranges, &d->cap_ranges, d->n_ranges + 1, sizeof(*d->ranges), 256);
	if (r < 0)
		return r;
	d->ranges[d->n_ranges++] = (struct cu_range){ .start = start, .end = end, .cu = cu };
	return 0;
}

struct gw_dwarf *gw_dwarf_open(Elf *elf)
{
	struct gw_dwarf *d = calloc(1, sizeof(*d));
	Dwarf_CU *cu = NULL;
	Dwarf_Die cudie, subdie;
	Dwarf_Half version;
	uint8_t unit_type;
	int r = -ENOMEM;

	if (!d)
		goto fail;
	d->dbg = dwarf_begin_elf(elf, DWARF_C_READ, NULL);
	if (!d->dbg) {
		r = -ENODATA;
		goto fail;
	}
	while (dwarf_get_units(d->dbg, cu, &cu, &version, &unit_type, &cudie, &subdie) == 0) {
		Dwarf_Addr base, start, end;
		ptrdiff_t off = 0;

		if (unit_type != DW_UT_compile && unit_type != DW_UT_partial && unit_type != DW_UT_skeleton)
			continue;
		r = sr_grow((void **)&d->cus, &d->cap_cus, d->n_cus + 1, sizeof(*d->cus), 64);
		if (r < 0)
			goto fail;
		uint32_t idx = (uint32_t)d->n_cus;
		d->cus[d->n_cus++] = cudie;
		while ((off = dwarf_ranges(&cudie, off, &base, &start, &end)) > 0) {
			r = push_range(d, start, end, idx);
			if (r < 0)
				goto fail;
		}
	}
	if (d->n_ranges == 0) {
		r = -ENODATA;
		goto fail;
	}
	qsort(d->ranges, d->n_ranges, sizeof(*d->ranges), range_cmp);
	return d;
fail:
	gw_dwarf_free(d);
	errno = -r;
	return NULL;
}

static void cu_scopes_free(struct cu_scopes *c)
{
	if (!c)
		return;
	free(c->dies);
	free(c->ranges);
	free(c->die_ranges);
	free(c);
}

void gw_dwarf_free(struct gw_dwarf *d)
{
	if (!d)
		return;
	if (d->scopes)
		for (size_t i = 0; i < d->n_cus; i++)
			cu_scopes_free(d->scopes[i]);
	free(d->scopes);
	if (d->dbg)
		dwarf_end(d->dbg);
	free(d->cus);
	free(d->ranges);
	free(d);
}

size_t gw_dwarf__index_bytes(const struct gw_dwarf *d)
{
	return sizeof(*d) + d->cap_cus * sizeof(*d->cus) + d->cap_ranges * sizeof(*d->ranges);
}

static Dwarf_Die *find_cu(struct gw_dwarf *d, uint64_t addr)
{
	size_t lo = SR_PARTITION_POINT(d->n_ranges, i, d->ranges[i].start <= addr);

	/* Ranges may nest or overlap (partial units); look back a little for one that covers. */
	for (size_t k = 0; k < 8 && lo > k; k++) {
		const struct cu_range *r = &d->ranges[lo - 1 - k];
		if (addr >= r->start && addr < r->end)
			return &d->cus[r->cu];
	}
	return NULL;
}

static const char *die_name(Dwarf_Die *die)
{
	Dwarf_Attribute a;
	const char *n;

	n = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &a));
	if (!n)
		n = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &a));
	if (!n)
		n = dwarf_diename(die);
	return n;
}

static uint32_t die_udata(Dwarf_Die *die, unsigned name)
{
	Dwarf_Attribute a;
	Dwarf_Word w;

	if (!dwarf_attr(die, name, &a) || dwarf_formudata(&a, &w) != 0 || w > UINT32_MAX)
		return 0;
	return (uint32_t)w;
}

static bool is_scope_tag(int tag)
{
	return tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine;
}

static int add_scope(struct gw_dwarf *d, struct cu_scopes *c, Dwarf_Die *die, int tag, uint32_t parent,
		     uint32_t *ret_idx)
{
	Dwarf_Addr base, lo, hi;
	ptrdiff_t off = 0;
	size_t first = c->n_ranges;
	int r;

	while ((off = dwarf_ranges(die, off, &base, &lo, &hi)) > 0) {
		if (lo >= hi)
			continue;
		if (d->scope_entries >= SCOPE_MAX_ENTRIES)
			return -E2BIG;
		r = sr_grow((void **)&c->ranges, &c->cap_ranges, c->n_ranges + 1, sizeof(*c->ranges), 64);
		if (r < 0)
			return r;
		c->ranges[c->n_ranges++] = (struct scope_range){ .lo = lo, .hi = hi, .die = (uint32_t)c->n_dies };
		d->scope_entries++;
	}
	if (c->n_ranges == first) {
		*ret_idx = parent; /* no code of its own (an abstract or declared-only DIE) */
		return 0;
	}
	r = sr_grow((void **)&c->dies, &c->cap_dies, c->n_dies + 1, sizeof(*c->dies), 64);
	if (r < 0)
		return r;
	c->dies[c->n_dies] = (struct scope_die){
		.off = dwarf_dieoffset(die),
		.parent = parent,
		.first_range = (uint32_t)first,
		.n_ranges = (uint32_t)(c->n_ranges - first),
		.tag = (uint32_t)tag,
	};
	*ret_idx = (uint32_t)c->n_dies++;
	d->scope_entries++;
	return 0;
}

static int scope_range_cmp(const void *a, const void *b)
{
	const struct scope_range *x = a, *y = b;

	if (x->lo != y->lo)
		return x->lo < y->lo ? -1 : 1;
	/* Outer (longer) first at equal starts, so the last one at a start is the innermost. */
	return x->hi > y->hi ? -1 : (x->hi < y->hi);
}

/* One walk of the CU's DIE tree; on any problem the CU falls back to dwarf_getscopes(). */
static struct cu_scopes *build_scopes(struct gw_dwarf *d, Dwarf_Die *cudie)
{
	struct cu_scopes *c = calloc(1, sizeof(*c));
	Dwarf_Die stack[SCOPE_MAX_DEPTH];
	uint32_t parent[SCOPE_MAX_DEPTH];
	int depth = 0;

	if (!c)
		return NULL;
	if (dwarf_child(cudie, &stack[0]) != 0)
		return c; /* an empty CU */
	parent[0] = NO_PARENT;
	for (;;) {
		Dwarf_Die *die = &stack[depth];
		int tag = dwarf_tag(die);
		uint32_t idx = parent[depth];
		if (is_scope_tag(tag) && add_scope(d, c, die, tag, parent[depth], &idx) < 0) {
			c->failed = true;
			break;
		}
		Dwarf_Die child;
		if (dwarf_haschildren(die) > 0 && depth + 1 < SCOPE_MAX_DEPTH && dwarf_child(die, &child) == 0) {
			stack[++depth] = child;
			parent[depth] = idx;
			continue;
		}
		/* Next sibling, or the sibling of the nearest ancestor that has one. */
		int r;
		while ((r = dwarf_siblingof(&stack[depth], &stack[depth])) != 0) {
			if (r < 0 || depth == 0)
				goto done;
			depth--;
		}
	}
done:
	if (c->failed)
		return c;
	/* Ranges grouped by die (as added) for containment checks, and sorted by start for the search. */
	c->die_ranges = malloc((c->n_ranges ? c->n_ranges : 1) * sizeof(*c->die_ranges));
	if (!c->die_ranges) {
		c->failed = true;
		return c;
	}
	if (c->n_ranges > 0) {
		memcpy(c->die_ranges, c->ranges, c->n_ranges * sizeof(*c->ranges));
		qsort(c->ranges, c->n_ranges, sizeof(*c->ranges), scope_range_cmp);
	}
	return c;
}

static bool die_contains(const struct cu_scopes *c, uint32_t die, uint64_t addr)
{
	const struct scope_die *s = &c->dies[die];

	for (uint32_t i = 0; i < s->n_ranges; i++) {
		const struct scope_range *r = &c->die_ranges[s->first_range + i];
		if (addr >= r->lo && addr < r->hi)
			return true;
	}
	return false;
}

/*
 * The innermost indexed scope containing addr. DIE ranges nest, so the
 * innermost scope is the last range starting at or below addr or one of its
 * ancestors; a few earlier ranges are tried too for non-contiguous functions.
 */
static int innermost_scope(const struct cu_scopes *c, uint64_t addr, uint32_t *ret)
{
	size_t lo = SR_PARTITION_POINT(c->n_ranges, i, c->ranges[i].lo <= addr);

	for (size_t k = 0; k < 8 && lo > k; k++) {
		for (uint32_t die = c->ranges[lo - 1 - k].die, steps = 0; die != NO_PARENT && steps < SCOPE_MAX_DEPTH;
		     die = c->dies[die].parent, steps++) {
			if (die_contains(c, die, addr)) {
				*ret = die;
				return 0;
			}
		}
	}
	return -ENOENT;
}

/* The chain of scope DIEs at addr, innermost first, from the index; -ENOENT: use dwarf_getscopes(). */
static int indexed_chain(struct gw_dwarf *d, Dwarf_Die *cudie, uint64_t addr, Dwarf_Die **ret)
{
	size_t cu = (size_t)(cudie - d->cus);
	struct cu_scopes *c;
	uint32_t die;
	int n = 0;

	if (!d->scopes) {
		d->scopes = calloc(d->n_cus, sizeof(*d->scopes));
		if (!d->scopes)
			return -ENOMEM;
	}
	c = d->scopes[cu];
	if (!c) {
		c = d->scopes[cu] = build_scopes(d, cudie);
		if (!c)
			return -ENOMEM;
	}
	if (c->failed)
		return -ENOENT;
	if (innermost_scope(c, addr, &die) < 0) {
		*ret = NULL;
		return 0;
	}
	Dwarf_Die *chain = calloc(GW_DWARF_MAX_FRAMES, sizeof(*chain));
	if (!chain)
		return -ENOMEM;
	for (; die != NO_PARENT && n < GW_DWARF_MAX_FRAMES; die = c->dies[die].parent) {
		if (!dwarf_offdie(d->dbg, c->dies[die].off, &chain[n]))
			break;
		n++;
		if (c->dies[die].tag == DW_TAG_subprogram)
			break;
	}
	*ret = chain;
	return n;
}

int gw_dwarf__lookup(struct gw_dwarf *d, uint64_t addr, struct gw_dwarf_frame *frames, size_t max)
{
	Dwarf_Die *cudie = find_cu(d, addr), *scopes = NULL;
	Dwarf_Files *files = NULL;
	size_t nfiles = 0;
	Dwarf_Line *line;
	const char *file = NULL;
	uint32_t lineno = 0, col = 0;
	int n, out = 0;

	if (!cudie || max == 0)
		return -ENOENT;
	line = dwarf_getsrc_die(cudie, addr);
	if (line) {
		int l = 0, c = 0;
		file = dwarf_linesrc(line, NULL, NULL);
		if (dwarf_lineno(line, &l) == 0 && l > 0)
			lineno = (uint32_t)l;
		if (dwarf_linecol(line, &c) == 0 && c > 0)
			col = (uint32_t)c;
	}
	n = indexed_chain(d, cudie, addr, &scopes);
	if (n == -ENOENT && (n = dwarf_getscopes(cudie, addr, &scopes)) > 0) {
		/*
		 * dwarf_getscopes() continues from an inlined instance into its abstract
		 * origin's scopes; the chain of concrete DIEs around the innermost scope
		 * (inlined instance -> ... -> the out-of-line function) comes from
		 * dwarf_getscopes_die(), as eu-addr2line -i does.
		 */
		Dwarf_Die inner, *chain = NULL;
		int m = -1;
		if (dwarf_offdie(d->dbg, dwarf_dieoffset(&scopes[0]), &inner))
			m = dwarf_getscopes_die(&inner, &chain);
		if (m > 0) {
			free(scopes);
			scopes = chain;
			n = m;
		} else {
			free(chain);
		}
	}
	for (int i = 0; i < n && (size_t)out < max; i++) {
		Dwarf_Die *s = &scopes[i];
		int tag = dwarf_tag(s), decl = 0;

		if (tag != DW_TAG_inlined_subroutine && tag != DW_TAG_subprogram)
			continue;
		frames[out] = (struct gw_dwarf_frame){
			.name = die_name(s),
			.file = file,
			.line = lineno,
			.column = col,
		};
		if (dwarf_decl_line(s, &decl) == 0 && decl > 0)
			frames[out].decl_line = (uint32_t)decl;
		out++;
		if (tag == DW_TAG_subprogram)
			break;
		/* The caller's location is this inlined call's call site. */
		uint32_t call_file = die_udata(s, DW_AT_call_file);
		lineno = die_udata(s, DW_AT_call_line);
		col = die_udata(s, DW_AT_call_column);
		file = NULL;
		if (!files && dwarf_getsrcfiles(cudie, &files, &nfiles) != 0)
			files = NULL;
		if (files && call_file < nfiles)
			file = dwarf_filesrc(files, call_file, NULL, NULL);
	}
	free(scopes);
	if (out == 0) {
		/* Line info without a scope (assembly): one frame with the line only. */
		frames[0] = (struct gw_dwarf_frame){ .file = file, .line = lineno, .column = col };
		out = 1;
	}
	return out;
}
