// SPDX-License-Identifier: Apache-2.0
/*
 * The unwind table builder: DWARF call frame information (.eh_frame, the
 * LSB's variant of it, and .debug_frame) turned into the sorted rows of
 * bpf/unwind.h. A parser of our own over the section bytes rather than
 * libdw's CFI reader: libdw answers "the rule at this pc", one query at a
 * time, where the table needs every row of every FDE in one linear pass.
 *
 * Two passes: the first walks the section(s) and collects each FDE's range;
 * the FDEs are sorted by address; the second runs each FDE's instructions
 * (after its CIE's) and appends a row wherever the rule changes. Gaps between
 * FDEs get a row of UNWIND_CFA_INVALID, so a pc that no FDE covers never
 * borrows its neighbour's rule.
 *
 * Untrusted input: every read is bounds-checked, lengths are checked before
 * use, loops run over bytes that exist, the remember/restore stack is
 * bounded, and the row count is bounded by the caller's max_rows.
 *
 * This file holds the two passes, the CIE cache and the public API; entries
 * and CIEs are read in unwind-table-cfi.c, instructions run into rows in
 * unwind-table-rows.c, and an ELF file's sections found in unwind-table-elf.c.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "common/search.h"
#include "unwind-table-private.h"

static struct cie *get_cie(struct builder *b, const struct section *sec, size_t off)
{
	struct cie *c;

	for (size_t i = 0; i < b->n_cies; i++)
		if (b->cies[i].off == off && b->cies[i].sec == sec)
			return b->cies[i].usable ? &b->cies[i] : NULL;
	if (b->n_cies < CIE_CACHE) {
		c = &b->cies[b->n_cies++];
	} else {
		c = &b->cies[b->next_cie];
		b->next_cie = (b->next_cie + 1) % CIE_CACHE;
	}
	if (agent_unwind_parse_cie(b->s, sec, off, c) < 0)
		c->usable = false;
	return c->usable ? c : NULL;
}

/* Reads an FDE's range (first pass). Returns 0, 1 to skip it (empty), or -EINVAL. */
static int read_fde_range(struct builder *b, const struct section *sec, struct reader *r, size_t cie_off, struct fde *f)
{
	const struct cie *c = get_cie(b, sec, cie_off);
	uint64_t range;

	if (!c)
		return -EINVAL;
	f->begin = agent_unwind_rd_encoded(r, c->fde_enc, c->addr_size, sec, b->s, true);
	range = agent_unwind_rd_encoded(r, c->fde_enc & 0x0f, c->addr_size, sec, b->s, false);
	if (r->err)
		return -EINVAL;
	if (range == 0)
		return 1;
	/* Nothing real is linked at 0; .debug_frame keeps FDEs of discarded code there. */
	if (f->begin == 0 || range > UINT32_MAX || f->begin + range < f->begin)
		return -EINVAL;
	f->end = f->begin + range;
	return 0;
}

static int add_fde(struct builder *b, const struct fde *f)
{
	int r = sr_grow((void **)&b->fdes, &b->cap_fdes, b->n_fdes + 1, sizeof(*b->fdes), 256);

	if (r < 0)
		return r;
	b->fdes[b->n_fdes++] = *f;
	return 0;
}

/* First pass over one section: every FDE's range. Returns 0, -EINVAL when the section's framing breaks, or -ENOMEM. */
static int collect(struct builder *b, const struct section *sec)
{
	size_t off = 0;

	while (off < sec->len) {
		struct reader body;
		size_t next = 0, cie_off = 0;
		struct fde f = { .sec = sec, .off = off };
		int kind = agent_unwind_read_entry(sec, off, &next, &body, &cie_off), r;

		if (kind == 0)
			break;
		if (kind < 0)
			/* The framing is lost: what came before is good, nothing after can be found. */
			return b->n_fdes ? 0 : -EINVAL;
		if (kind == 2) {
			b->stats->fdes++;
			if (!sec->is_eh)
				b->stats->from_debug_frame++;
			f.cie_off = cie_off;
			r = read_fde_range(b, sec, &body, cie_off, &f);
			if (r < 0)
				b->stats->fdes_bad++;
			else if (r == 0 && add_fde(b, &f) < 0)
				return -ENOMEM;
		}
		off = next;
	}
	return 0;
}

static int fde_cmp(const void *a, const void *b)
{
	const struct fde *x = a, *y = b;

	if (x->begin != y->begin)
		return x->begin < y->begin ? -1 : 1;
	/* At the same address .eh_frame's FDE comes first (it is what the program's own unwinder uses). */
	if (!x->sec || !y->sec)
		return x->sec ? 1 : y->sec ? -1 : 0;
	if (x->sec->is_eh != y->sec->is_eh)
		return x->sec->is_eh ? -1 : 1;
	return x->off < y->off ? -1 : (x->off > y->off);
}

/* Second pass for one FDE: its rows, appended. */
static int run_fde(struct builder *b, const struct fde *f)
{
	struct cie *c = get_cie(b, f->sec, f->cie_off);
	struct cfa_state initial, st;
	struct reader body;
	size_t next, cie_off;

	if (!c || agent_unwind_read_entry(f->sec, f->off, &next, &body, &cie_off) != 2)
		return -EINVAL;
	/* The CIE's instructions set the rules every FDE starts from (and DW_CFA_restore returns to). */
	if (!c->initial_done) {
		c->initial = (struct cfa_state){ .cfa_reg = UINT64_MAX };
		c->initial_ret =
			agent_unwind_run_insns(b, c, c->insns, c->insns_end, &c->initial, &c->initial, 0, 0, false);
		c->initial_done = true;
	}
	if (c->initial_ret < 0)
		return c->initial_ret;
	initial = c->initial;
	agent_unwind_rd_encoded(&body, c->fde_enc, c->addr_size, f->sec, b->s, true);
	agent_unwind_rd_encoded(&body, c->fde_enc & 0x0f, c->addr_size, f->sec, b->s, false);
	if (c->has_z)
		rd_skip(&body, rd_uleb(&body));
	if (body.err)
		return -EINVAL;
	st = initial;
	return agent_unwind_run_insns(b, c, body.p, body.end, &st, &initial, f->begin, f->end, true);
}

/*
 * An entry point that no FDE covers is where the kernel started the
 * program: nothing called it, so a stack that reaches it is complete. Adds
 * its range (to the next FDE, at most AGENT_UNWIND_ENTRY_SPAN bytes) to the
 * sorted FDEs. Returns 0 or -ENOMEM.
 */
static int add_entry(struct builder *b, uint64_t entry)
{
	struct fde f = { .begin = entry, .entry = true };
	size_t lo;
	int r;

	if (!entry)
		return 0;
	lo = SR_PARTITION_POINT(b->n_fdes, i, b->fdes[i].begin <= entry);
	/* fdes[lo - 1] is the last to start at or before it; FDEs nest rarely, so check the few before. */
	for (size_t i = lo; i > 0 && i + 8 > lo; i--)
		if (b->fdes[i - 1].end > entry)
			return 0;
	f.end = entry + AGENT_UNWIND_ENTRY_SPAN;
	if (lo < b->n_fdes && b->fdes[lo].begin < f.end)
		f.end = b->fdes[lo].begin;
	if ((r = add_fde(b, &f)) < 0)
		return r;
	qsort(b->fdes, b->n_fdes, sizeof(*b->fdes), fde_cmp);
	return 0;
}

static void builder_done(struct builder *b)
{
	free(b->fdes);
	free(b->rows);
}

int agent_unwind_table_build(const struct agent_unwind_sections *s, size_t max_rows, struct agent_unwind_table *ret)
{
	struct builder b = { .s = s, .max_rows = max_rows };
	struct section secs[2];
	size_t n_secs = 0;
	uint64_t cursor = 0;
	const struct unwind_row invalid = { 0 }, end_row = { .cfa_type = UNWIND_CFA_END };
	bool broken = false;
	int r = 0;

	memset(ret, 0, sizeof(*ret));
	b.stats = &ret->stats;
	ret->arch = s->arch;
	if (s->arch != AGENT_UNWIND_ARCH_X86_64 && s->arch != AGENT_UNWIND_ARCH_ARM64)
		return -ENOEXEC;
	if (max_rows < 2)
		return -E2BIG;
	if (s->eh_frame && s->eh_frame_len)
		secs[n_secs++] = (struct section){ s->eh_frame, s->eh_frame_len, s->eh_frame_vaddr, true };
	if (s->debug_frame && s->debug_frame_len)
		secs[n_secs++] = (struct section){ s->debug_frame, s->debug_frame_len, 0, false };
	for (size_t i = 0; i < n_secs; i++) {
		r = collect(&b, &secs[i]);
		if (r == -ENOMEM)
			goto fail;
		/* One broken section does not spoil the other. */
		broken |= r == -EINVAL;
	}
	if (b.n_fdes == 0) {
		/* Bytes that do not frame as entries are malformed, not "no CFI". */
		r = ret->stats.fdes_bad || broken ? -EINVAL : -ENOENT;
		goto fail;
	}
	qsort(b.fdes, b.n_fdes, sizeof(*b.fdes), fde_cmp);
	if ((r = add_entry(&b, s->entry)) < 0)
		goto fail;
	b.base = b.fdes[0].begin;
	for (size_t i = 0; i < b.n_fdes; i++) {
		const struct fde *f = &b.fdes[i];
		size_t before = b.n_rows;

		if (f->end - b.base > UINT32_MAX) {
			/* Rows hold 32-bit offsets: code 4 GiB past the first FDE is not covered. */
			ret->stats.fdes_bad++;
			continue;
		}
		if (i > 0 && f->begin < cursor) {
			/* Overlap: .debug_frame yields to what is already there; a later .eh_frame FDE wins. */
			if (f->entry || !f->sec->is_eh) {
				ret->stats.fdes_bad += !f->entry;
				continue;
			}
			while (b.n_rows > 0 && b.rows[b.n_rows - 1].pc >= (uint32_t)(f->begin - b.base))
				b.n_rows--;
			before = b.n_rows;
		} else if (i > 0 && f->begin > cursor) {
			b.fde_first_row = b.n_rows;
			if ((r = agent_unwind_push_row(&b, cursor, invalid)) < 0)
				goto fail;
			before = b.n_rows;
		}
		b.fde_first_row = b.n_rows;
		r = f->entry ? agent_unwind_push_row(&b, f->begin, end_row) : run_fde(&b, f);
		if (r == -E2BIG || r == -ENOMEM)
			goto fail;
		if (r < 0) {
			/*
			 * This FDE alone is bad: its range gets no rule. From its
			 * start, also when it overlaps the FDE before: that one's
			 * rows from here on are gone, and its last row kept must
			 * not stretch over them.
			 */
			ret->stats.fdes_bad++;
			b.n_rows = before;
			b.fde_first_row = b.n_rows;
			if ((r = agent_unwind_push_row(&b, f->begin, invalid)) < 0)
				goto fail;
		}
		if (f->end > cursor || i == 0) {
			cursor = f->end;
		} else if (f->end < cursor) {
			/* Nested in the FDE before it: what is left of that one has lost its rows. */
			b.fde_first_row = b.n_rows;
			if ((r = agent_unwind_push_row(&b, f->end, invalid)) < 0)
				goto fail;
		}
	}
	b.fde_first_row = b.n_rows;
	if ((r = agent_unwind_push_row(&b, cursor, invalid)) < 0)
		goto fail;
	ret->base = b.base;
	ret->end = cursor;
	ret->rows = b.rows;
	ret->n_rows = b.n_rows;
	b.rows = NULL;
	builder_done(&b);
	return 0;
fail:
	builder_done(&b);
	if (r == 0)
		r = -EINVAL;
	ret->rows = NULL;
	ret->n_rows = 0;
	return r;
}

const struct unwind_row *agent_unwind_table__find(const struct agent_unwind_table *t, uint64_t vaddr)
{
	size_t at;
	uint64_t rel;

	if (!t->n_rows || vaddr < t->base || vaddr - t->base > UINT32_MAX)
		return NULL;
	rel = vaddr - t->base;
	at = SR_PARTITION_POINT(t->n_rows, i, t->rows[i].pc <= rel);
	return at ? &t->rows[at - 1] : NULL;
}

void agent_unwind_table_done(struct agent_unwind_table *t)
{
	if (!t)
		return;
	free(t->rows);
	t->rows = NULL;
	t->n_rows = 0;
}
