// SPDX-License-Identifier: Apache-2.0
/*
 * Reading the gateway's own OTLP requests back (otlp-encode.h): counting
 * their samples, and splitting one in two when a backend answers 413, each
 * half with a dictionary that keeps only what it uses.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "common/macro.h"
#include "otlp-encode.h"
#include "common/otlp-fields.h"
#include "common/pbwire.h"

/* ---- reading our own requests back (413 splits, counts) ---- */

/* The next field (common/pbwire.h); 1 at the end. Malformed input is -EINVAL, as gw_otlp_count() promises. */
static int next_field(struct sr_pbr *r, struct sr_pb_field *f)
{
	int e = sr_pbr__next(r, f);

	return e < 0 ? -EINVAL : e;
}

static struct sr_pbr sub_of(const struct sr_pbr *r, const struct sr_pb_field *f)
{
	return sr_pbr__sub(r, (struct sr_pb_slice){ f->data, f->len });
}

/* The repeated child field at each nesting level: request → RP → SP → Profile → Sample. */
static const uint32_t level_child[] = {
	SR_OTLP_REQ(resource_profiles),
	SR_OTLP_P(ResourceProfiles, scope_profiles),
	SR_OTLP_P(ScopeProfiles, profiles),
	SR_OTLP_P(Profile, samples),
};

static int count_sample(struct sr_pbr r, uint32_t values_field, uint64_t *sum)
{
	struct sr_pb_field f;
	int e;

	while ((e = next_field(&r, &f)) == 0) {
		struct sr_pbr el;
		uint64_t v;

		if (f.number != values_field)
			continue;
		/* Packed (as we write them) or not. */
		if (sr_pbr__elements(&r, &f, SR_PB_VARINT, &el) < 0)
			return -EINVAL;
		while (sr_pbr__more(&el)) {
			if (sr_pbr__varint(&el, &v) < 0)
				return -EINVAL;
			*sum += v;
		}
	}
	return e < 0 ? e : 0;
}

static int count_level(struct sr_pbr r, unsigned level, uint32_t values_field, uint64_t *sum)
{
	struct sr_pb_field f;
	int e;

	while ((e = next_field(&r, &f)) == 0) {
		if (f.number != level_child[level] || f.wt != SR_PB_LEN)
			continue;
		if (level == SR_ARRAY_SIZE(level_child) - 1)
			e = count_sample(sub_of(&r, &f), values_field, sum);
		else
			e = count_level(sub_of(&r, &f), level + 1, values_field, sum);
		if (e < 0)
			return e;
	}
	return e < 0 ? e : 0;
}

int gw_otlp_count(const uint8_t *req, size_t len, enum gw_otlp_version v, uint64_t *ret_count)
{
	uint64_t sum = 0;
	int r = count_level(sr_pbr_of(req, len), 0, v == GW_OTLP_V1_9 ? SR_OTLP_S9(values) : SR_OTLP_S10(values), &sum);

	if (r < 0)
		return r;
	*ret_count = sum;
	return 0;
}

/* Splits the message body msg at level into bodies a and b. */
static int split_level(const struct sr_pbr msg, unsigned level, struct sr_pbw *a, struct sr_pbw *b)
{
	struct sr_pbr q = msg;
	struct sr_pb_field f, only = { 0 };
	size_t n_children = 0, child_bytes = 0, acc = 0;
	int r;

	while ((r = next_field(&q, &f)) == 0) {
		if (f.number == level_child[level] && f.wt == SR_PB_LEN) {
			n_children++;
			child_bytes += (size_t)(f.end - f.start);
			only = f;
		}
	}
	if (r < 0)
		return r;
	if (n_children == 0)
		return -ERANGE;
	if (n_children == 1) {
		struct sr_pbw ca = { 0 }, cb = { 0 };

		if (level == SR_ARRAY_SIZE(level_child) - 1)
			return -ERANGE;
		r = split_level(sub_of(&msg, &only), level + 1, &ca, &cb);
		if (r < 0)
			goto one_out;
		q = msg;
		while (next_field(&q, &f) == 0) {
			if (f.start == only.start) {
				sr_pbw__bytes_always(a, f.number, ca.buf, ca.len);
				sr_pbw__bytes_always(b, f.number, cb.buf, cb.len);
			} else {
				sr_pbw__copy_field(a, &f);
				sr_pbw__copy_field(b, &f);
			}
		}
		r = sr_pbw__error(a) ?: sr_pbw__error(b) ?: sr_pbw__error(&ca) ?: sr_pbw__error(&cb);
	one_out:
		sr_pbw__free(&ca);
		sr_pbw__free(&cb);
		return r;
	}
	/* Several children: the first half of their bytes to a, the rest to b; other fields to both. */
	q = msg;
	while (next_field(&q, &f) == 0) {
		if (f.number == level_child[level] && f.wt == SR_PB_LEN) {
			bool first = acc == 0 || acc + (size_t)(f.end - f.start) / 2 <= child_bytes / 2;

			acc += (size_t)(f.end - f.start);
			sr_pbw__copy_field(first ? a : b, &f);
		} else {
			sr_pbw__copy_field(a, &f);
			sr_pbw__copy_field(b, &f);
		}
	}
	return sr_pbw__error(a) ?: sr_pbw__error(b);
}

/* ---- dictionary compaction (after a split, each half keeps only what it uses) ---- */

enum dict_table { T_MAP, T_LOC, T_FUN, T_LINK, T_STR, T_ATTR, T_STACK, T_MAX, T_NONE = T_MAX, T_SUB };

/* What a field refers to: a dictionary table (varint or packed indices) or a submessage with its own rules. */
struct ref_rule {
	uint32_t field;
	enum dict_table t;
	const struct ref_rule *sub;
};

#define RULES_END                                                                                                      \
	{                                                                                                              \
		0, T_NONE, NULL                                                                                        \
	}
static const struct ref_rule r_value_type[] = { { SR_OTLP_P(ValueType, type_strindex), T_STR, NULL },
						{ SR_OTLP_P(ValueType, unit_strindex), T_STR, NULL },
						RULES_END };
static const struct ref_rule r_sample10[] = { { SR_OTLP_S10(stack_index), T_STACK, NULL },
					      { SR_OTLP_S10(attribute_indices), T_ATTR, NULL },
					      { SR_OTLP_S10(link_index), T_LINK, NULL },
					      RULES_END };
static const struct ref_rule r_sample9[] = { { SR_OTLP_S9(stack_index), T_STACK, NULL },
					     { SR_OTLP_S9(attribute_indices), T_ATTR, NULL },
					     { SR_OTLP_S9(link_index), T_LINK, NULL },
					     RULES_END };
static const struct ref_rule r_profile10[] = { { SR_OTLP_P(Profile, sample_type), T_SUB, r_value_type },
					       { SR_OTLP_P(Profile, samples), T_SUB, r_sample10 },
					       { SR_OTLP_P(Profile, period_type), T_SUB, r_value_type },
					       { SR_OTLP_P(Profile, attribute_indices), T_ATTR, NULL },
					       RULES_END };
static const struct ref_rule r_profile9[] = { { SR_OTLP_P(Profile, sample_type), T_SUB, r_value_type },
					      { SR_OTLP_P(Profile, samples), T_SUB, r_sample9 },
					      { SR_OTLP_P(Profile, period_type), T_SUB, r_value_type },
					      { SR_OTLP_P(Profile, attribute_indices), T_ATTR, NULL },
					      RULES_END };
static const struct ref_rule r_scope10[] = { { SR_OTLP_P(ScopeProfiles, profiles), T_SUB, r_profile10 }, RULES_END };
static const struct ref_rule r_scope9[] = { { SR_OTLP_P(ScopeProfiles, profiles), T_SUB, r_profile9 }, RULES_END };
static const struct ref_rule r_rp10[] = { { SR_OTLP_P(ResourceProfiles, scope_profiles), T_SUB, r_scope10 },
					  RULES_END };
static const struct ref_rule r_rp9[] = { { SR_OTLP_P(ResourceProfiles, scope_profiles), T_SUB, r_scope9 }, RULES_END };
static const struct ref_rule r_line[] = { { SR_OTLP_P(Line, function_index), T_FUN, NULL }, RULES_END };
/* Per table, the rules of its entries (strings: none). */
static const struct ref_rule r_mapping[] = { { SR_OTLP_P(Mapping, filename_strindex), T_STR, NULL },
					     { SR_OTLP_P(Mapping, attribute_indices), T_ATTR, NULL },
					     RULES_END };
static const struct ref_rule r_location[] = { { SR_OTLP_P(Location, mapping_index), T_MAP, NULL },
					      { SR_OTLP_P(Location, lines), T_SUB, r_line },
					      { SR_OTLP_P(Location, attribute_indices), T_ATTR, NULL },
					      RULES_END };
static const struct ref_rule r_function[] = { { SR_OTLP_P(Function, name_strindex), T_STR, NULL },
					      { SR_OTLP_P(Function, system_name_strindex), T_STR, NULL },
					      { SR_OTLP_P(Function, filename_strindex), T_STR, NULL },
					      RULES_END };
static const struct ref_rule r_attr[] = { { SR_OTLP_P(KeyValueAndUnit, key_strindex), T_STR, NULL },
					  { SR_OTLP_P(KeyValueAndUnit, unit_strindex), T_STR, NULL },
					  RULES_END };
static const struct ref_rule r_stack[] = { { SR_OTLP_P(Stack, location_indices), T_LOC, NULL }, RULES_END };
static const struct ref_rule r_none[] = { RULES_END };

static const uint32_t table_field[T_MAX] = {
	[T_MAP] = SR_OTLP_P(ProfilesDictionary, mapping_table),
	[T_LOC] = SR_OTLP_P(ProfilesDictionary, location_table),
	[T_FUN] = SR_OTLP_P(ProfilesDictionary, function_table),
	[T_LINK] = SR_OTLP_P(ProfilesDictionary, link_table),
	[T_STR] = SR_OTLP_P(ProfilesDictionary, string_table),
	[T_ATTR] = SR_OTLP_P(ProfilesDictionary, attribute_table),
	[T_STACK] = SR_OTLP_P(ProfilesDictionary, stack_table),
};
static const struct ref_rule *const table_rules[T_MAX] = {
	[T_MAP] = r_mapping, [T_LOC] = r_location, [T_FUN] = r_function, [T_LINK] = r_none,
	[T_STR] = r_none,    [T_ATTR] = r_attr,	   [T_STACK] = r_stack,
};

struct compact {
	/* The dictionary's entries as raw slices, per table. */
	struct sr_pb_slice *ent[T_MAX];
	uint32_t n[T_MAX], cap[T_MAX];
	/* used[t][i] while marking; then the new index + 1 (0: dropped). */
	uint32_t *map[T_MAX];
};

static void compact_free(struct compact *c)
{
	for (int t = 0; t < T_MAX; t++) {
		free(c->ent[t]);
		free(c->map[t]);
	}
}

static const struct ref_rule *rule_for(const struct ref_rule *rules, uint32_t field)
{
	for (const struct ref_rule *r = rules; r->field; r++)
		if (r->field == field)
			return r;
	return NULL;
}

/* Marks the entries a message's fields refer to; -EINVAL on malformed bytes or indexes out of bounds. */
static int mark(struct compact *c, struct sr_pbr msg, const struct ref_rule *rules)
{
	struct sr_pb_field f;
	int r;

	while ((r = next_field(&msg, &f)) == 0) {
		const struct ref_rule *rule = rule_for(rules, f.number);
		struct sr_pbr el;
		uint64_t v;

		if (!rule)
			continue;
		if (rule->t == T_SUB) {
			if (f.wt != SR_PB_LEN)
				return -EINVAL;
			r = mark(c, sub_of(&msg, &f), rule->sub);
			if (r < 0)
				return r;
			continue;
		}
		/* One index or packed indices. */
		if (sr_pbr__elements(&msg, &f, SR_PB_VARINT, &el) < 0)
			return -EINVAL;
		while (sr_pbr__more(&el)) {
			if (sr_pbr__varint(&el, &v) < 0 || v >= c->n[rule->t])
				return -EINVAL;
			c->map[rule->t][v] = 1;
		}
	}
	return r < 0 ? r : 0;
}

/* Writes the message msg (marked before: well-formed) with every reference renumbered. */
static void rewrite(struct compact *c, struct sr_pbw *w, struct sr_pbr msg, const struct ref_rule *rules)
{
	struct sr_pb_field f;

	while (next_field(&msg, &f) == 0) {
		const struct ref_rule *rule = rule_for(rules, f.number);

		if (!rule) {
			sr_pbw__copy_field(w, &f);
		} else if (rule->t == T_SUB) {
			size_t m = sr_pbw__begin(w, f.number);

			rewrite(c, w, sub_of(&msg, &f), rule->sub);
			sr_pbw__end(w, m);
		} else if (f.wt == SR_PB_VARINT) {
			sr_pbw__uint(w, f.number, c->map[rule->t][f.value] - 1);
		} else {
			struct sr_pbr el = sub_of(&msg, &f);
			size_t m = sr_pbw__begin(w, f.number);
			uint64_t v;

			while (sr_pbr__more(&el) && sr_pbr__varint(&el, &v) == 0)
				sr_pbw__varint(w, c->map[rule->t][v] - 1);
			sr_pbw__end(w, m);
		}
	}
}

/* A reader of entry i of table t (a slice of the request read by rq). */
static struct sr_pbr entry_of(const struct sr_pbr *rq, const struct compact *c, int t, uint32_t i)
{
	return sr_pbr__sub(rq, c->ent[t][i]);
}

/* Rewrites a request so its dictionary holds only what its profiles use. */
static int compact_request(const uint8_t *req, size_t len, enum gw_otlp_version v, struct sr_pbw *out)
{
	const struct ref_rule *rp_rules = v == GW_OTLP_V1_9 ? r_rp9 : r_rp10;
	/* Marking order: every referrer before what it refers to (strings and links refer to nothing). */
	static const enum dict_table order[] = { T_STACK, T_LOC, T_MAP, T_FUN, T_ATTR };
	struct compact c = { 0 };
	const struct sr_pbr rq = sr_pbr_of(req, len);
	struct sr_pbr q = rq, dict = { 0 };
	struct sr_pb_field f;
	size_t dm;
	int r;

	while ((r = next_field(&q, &f)) == 0)
		if (f.number == SR_OTLP_REQ(dictionary) && f.wt == SR_PB_LEN)
			dict = sub_of(&q, &f);
	if (r < 0 || !dict.p)
		return -EINVAL;
	while ((r = next_field(&dict, &f)) == 0) {
		for (int t = 0; t < T_MAX; t++) {
			if (f.number != table_field[t] || f.wt != SR_PB_LEN)
				continue;
			if (sr_grow_u32((void **)&c.ent[t], &c.cap[t], c.n[t] + 1, sizeof(*c.ent[t]), 256) < 0)
				goto nomem;
			c.ent[t][c.n[t]++] = (struct sr_pb_slice){ f.data, f.len };
		}
	}
	if (r < 0)
		goto out;
	for (int t = 0; t < T_MAX; t++) {
		if (c.n[t] == 0) {
			r = -EINVAL; /* element 0 of every table must be there */
			goto out;
		}
		c.map[t] = calloc(c.n[t], sizeof(uint32_t));
		if (!c.map[t])
			goto nomem;
		c.map[t][0] = 1;
	}
	for (q = rq; next_field(&q, &f) == 0;)
		if (f.number == SR_OTLP_REQ(resource_profiles) && f.wt == SR_PB_LEN) {
			r = mark(&c, sub_of(&q, &f), rp_rules);
			if (r < 0)
				goto out;
		}
	for (size_t k = 0; k < SR_ARRAY_SIZE(order); k++) {
		enum dict_table t = order[k];

		for (uint32_t i = 0; i < c.n[t]; i++)
			if (c.map[t][i]) {
				r = mark(&c, entry_of(&rq, &c, t, i), table_rules[t]);
				if (r < 0)
					goto out;
			}
	}
	/* Marks become new indices (+1), keeping the order. */
	for (int t = 0; t < T_MAX; t++)
		for (uint32_t i = 0, next = 0; i < c.n[t]; i++)
			c.map[t][i] = c.map[t][i] ? ++next : 0;

	for (q = rq; next_field(&q, &f) == 0;) {
		if (f.number == SR_OTLP_REQ(resource_profiles) && f.wt == SR_PB_LEN) {
			size_t m = sr_pbw__begin(out, f.number);

			rewrite(&c, out, sub_of(&q, &f), rp_rules);
			sr_pbw__end(out, m);
		} else if (f.number != SR_OTLP_REQ(dictionary)) {
			sr_pbw__copy_field(out, &f);
		}
	}
	dm = sr_pbw__begin(out, SR_OTLP_REQ(dictionary));
	for (int t = 0; t < T_MAX; t++)
		for (uint32_t i = 0; i < c.n[t]; i++) {
			size_t m;

			if (!c.map[t][i])
				continue;
			m = sr_pbw__begin(out, table_field[t]);
			if (t == T_STR)
				sr_pbw__raw(out, c.ent[t][i].p, c.ent[t][i].n);
			else
				rewrite(&c, out, entry_of(&rq, &c, t, i), table_rules[t]);
			sr_pbw__end(out, m);
		}
	sr_pbw__end(out, dm);
	r = sr_pbw__error(out);
	goto out;
nomem:
	r = -ENOMEM;
out:
	compact_free(&c);
	return r;
}

int gw_otlp_split(const uint8_t *req, size_t len, enum gw_otlp_version v, struct sr_pbw *ret_a, uint64_t *ret_a_count,
		  struct sr_pbw *ret_b, uint64_t *ret_b_count)
{
	struct sr_pbw a = { 0 }, b = { 0 };
	int r;

	r = split_level(sr_pbr_of(req, len), 0, &a, &b);
	/* Each half keeps only the dictionary entries it uses, so halves really shrink. */
	if (r == 0)
		r = compact_request(a.buf, a.len, v, ret_a);
	if (r == 0)
		r = compact_request(b.buf, b.len, v, ret_b);
	sr_pbw__free(&a);
	sr_pbw__free(&b);
	if (r < 0)
		return r;
	r = gw_otlp_count(ret_a->buf, ret_a->len, v, ret_a_count);
	if (r < 0)
		return r;
	return gw_otlp_count(ret_b->buf, ret_b->len, v, ret_b_count);
}
