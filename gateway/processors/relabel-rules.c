// SPDX-License-Identifier: Apache-2.0
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "common/config.h"
#include "common/grow.h"
#include "common/macro.h"
#include "core/regex.h"
#include "relabel-rules.h"

const char *const gw_relabel_action_names[] = {
	"replace",  "keep",	 "drop",      "keepequal", "dropequal", "hashmod",
	"labelmap", "labeldrop", "labelkeep", "lowercase", "uppercase", NULL,
};

void gw_labels_clear(struct gw_labels *ls)
{
	for (size_t i = 0; i < ls->n; i++) {
		free(ls->v[i].key);
		free(ls->v[i].value);
	}
	SR_FREE(ls->v);
	ls->n = ls->cap = 0;
}

static ssize_t labels_find(const struct gw_labels *ls, const char *key)
{
	for (size_t i = 0; i < ls->n; i++)
		if (strcmp(ls->v[i].key, key) == 0)
			return (ssize_t)i;
	return -1;
}

const char *gw_labels__get(const struct gw_labels *ls, const char *key)
{
	ssize_t i = labels_find(ls, key);

	return i < 0 ? NULL : ls->v[i].value;
}

int gw_labels__set(struct gw_labels *ls, const char *key, const char *value)
{
	ssize_t i = labels_find(ls, key);
	char *v = strdup(value);
	int r;

	if (!v)
		return -ENOMEM;
	if (i >= 0) {
		free(ls->v[i].value);
		ls->v[i].value = v;
		return 0;
	}
	r = sr_grow((void **)&ls->v, &ls->cap, ls->n + 1, sizeof(*ls->v), 16);
	if (r < 0) {
		free(v);
		return r;
	}
	ls->v[ls->n].key = strdup(key);
	if (!ls->v[ls->n].key) {
		free(v);
		return -ENOMEM;
	}
	ls->v[ls->n].value = v;
	ls->n++;
	return 0;
}

bool gw_labels__del(struct gw_labels *ls, const char *key)
{
	ssize_t i = labels_find(ls, key);

	if (i < 0)
		return false;
	free(ls->v[i].key);
	free(ls->v[i].value);
	/* Keep the order: users read attributes in the order they were added. */
	memmove(&ls->v[i], &ls->v[i + 1], (ls->n - (size_t)i - 1) * sizeof(*ls->v));
	ls->n--;
	return true;
}

struct rule {
	enum gw_relabel_action action;
	char **source;
	size_t nsource;
	char *separator;
	char *target;
	char *replacement;
	struct gw_regex *regex;
	uint64_t modulus;
};

struct gw_relabel {
	struct rule *rules;
	size_t n;
};

void gw_relabel_free(struct gw_relabel *rl)
{
	if (!rl)
		return;
	for (size_t i = 0; i < rl->n; i++) {
		struct rule *r = &rl->rules[i];
		for (size_t j = 0; j < r->nsource; j++)
			free(r->source[j]);
		free(r->source);
		free(r->separator);
		free(r->target);
		free(r->replacement);
		gw_regex_free(r->regex);
	}
	free(rl->rules);
	free(rl);
}

static char *dup_or(const char *s, const char *def)
{
	return strdup(s ? s : def);
}

static int compile_rule(const struct gw_relabel_rule_config *c, struct rule *r, char *err, size_t errsize)
{
	char rerr[160];

	if (c->action < 0 || c->action >= GW_RELABEL__MAX) {
		snprintf(err, errsize, "action: unknown action %d", c->action);
		return -EINVAL;
	}
	r->action = (enum gw_relabel_action)c->action;
	switch (r->action) {
	case GW_RELABEL_REPLACE:
	case GW_RELABEL_HASHMOD:
	case GW_RELABEL_LOWERCASE:
	case GW_RELABEL_UPPERCASE:
	case GW_RELABEL_KEEPEQUAL:
	case GW_RELABEL_DROPEQUAL:
		if (!c->target_label || !*c->target_label) {
			snprintf(err, errsize, "target_label: required by action %s",
				 gw_relabel_action_names[r->action]);
			return -EINVAL;
		}
		break;
	case GW_RELABEL_LABELDROP:
	case GW_RELABEL_LABELKEEP:
		if (c->source_labels_count || c->target_label || c->modulus || c->replacement) {
			snprintf(err, errsize,
				 "action %s uses only regex (source_labels, target_label, modulus and "
				 "replacement must be unset)",
				 gw_relabel_action_names[r->action]);
			return -EINVAL;
		}
		break;
	case GW_RELABEL_LABELMAP:
		if (c->source_labels_count || c->target_label) {
			snprintf(err, errsize,
				 "action labelmap uses regex and replacement (source_labels and "
				 "target_label must be unset)");
			return -EINVAL;
		}
		break;
	default:
		break;
	}
	if (r->action == GW_RELABEL_HASHMOD && c->modulus == 0) {
		snprintf(err, errsize, "modulus: required (> 0) by action hashmod");
		return -EINVAL;
	}
	if ((r->action == GW_RELABEL_KEEP || r->action == GW_RELABEL_DROP || r->action == GW_RELABEL_REPLACE ||
	     r->action == GW_RELABEL_HASHMOD || r->action == GW_RELABEL_LOWERCASE ||
	     r->action == GW_RELABEL_UPPERCASE || r->action == GW_RELABEL_KEEPEQUAL ||
	     r->action == GW_RELABEL_DROPEQUAL) &&
	    c->source_labels_count == 0 && r->action != GW_RELABEL_REPLACE) {
		snprintf(err, errsize, "source_labels: required by action %s", gw_relabel_action_names[r->action]);
		return -EINVAL;
	}
	if (c->source_labels_count) {
		r->source = calloc(c->source_labels_count, sizeof(*r->source));
		if (!r->source)
			return -ENOMEM;
		for (uint32_t i = 0; i < c->source_labels_count; i++) {
			r->source[r->nsource] = strdup(c->source_labels[i]);
			if (!r->source[r->nsource])
				return -ENOMEM;
			r->nsource++;
		}
	}
	r->separator = dup_or(c->separator, ";");
	r->replacement = dup_or(c->replacement, "$1");
	if (c->target_label && !(r->target = strdup(c->target_label)))
		return -ENOMEM;
	if (!r->separator || !r->replacement)
		return -ENOMEM;
	r->modulus = c->modulus;
	r->regex = gw_regex_new(c->regex ? c->regex : "(.*)", true, rerr, sizeof(rerr));
	if (!r->regex) {
		int e = errno;
		snprintf(err, errsize, "regex: %s", rerr);
		return -e;
	}
	return 0;
}

struct gw_relabel *gw_relabel_new(const struct gw_relabel_rule_config *rules, size_t n, char *errbuf, size_t errsize)
{
	struct gw_relabel *rl = calloc(1, sizeof(*rl));
	char err[256];
	int r;

	if (errsize)
		errbuf[0] = '\0';
	if (!rl)
		goto nomem;
	if (n > GW_RELABEL_MAX_RULES) {
		snprintf(errbuf, errsize, "rules: %zu rules, at most %u", n, GW_RELABEL_MAX_RULES);
		gw_relabel_free(rl);
		errno = EINVAL;
		return NULL;
	}
	rl->rules = calloc(n ? n : 1, sizeof(*rl->rules));
	if (!rl->rules)
		goto nomem;
	for (size_t i = 0; i < n; i++) {
		err[0] = '\0';
		rl->n = i + 1;
		r = compile_rule(&rules[i], &rl->rules[i], err, sizeof(err));
		if (r == -ENOMEM)
			goto nomem;
		if (r < 0) {
			snprintf(errbuf, errsize, "rules[%zu]: %s", i, err);
			gw_relabel_free(rl);
			errno = -r;
			return NULL;
		}
	}
	return rl;
nomem:
	gw_relabel_free(rl);
	snprintf(errbuf, errsize, "out of memory");
	errno = ENOMEM;
	return NULL;
}

/* Values of the source labels joined by the separator; a missing label is "". */
static char *join_sources(const struct rule *r, const struct gw_labels *ls)
{
	size_t len = 1;
	char *s, *p;

	for (size_t i = 0; i < r->nsource; i++) {
		const char *v = gw_labels__get(ls, r->source[i]);
		len += (v ? strlen(v) : 0) + (i ? strlen(r->separator) : 0);
	}
	s = p = malloc(len);
	if (!s)
		return NULL;
	*p = '\0';
	for (size_t i = 0; i < r->nsource; i++) {
		const char *v = gw_labels__get(ls, r->source[i]);
		if (i)
			p = stpcpy(p, r->separator);
		if (v)
			p = stpcpy(p, v);
	}
	return s;
}

/* Prometheus' hashmod: the last 8 bytes of the MD5 of the value, big-endian, modulo. */
static uint64_t hashmod(const char *v, uint64_t modulus)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	uint64_t s = 0;

	EVP_Digest(v, strlen(v), md, &mdlen, EVP_md5(), NULL);
	for (unsigned i = 8; i < 16 && i < mdlen; i++)
		s = (s << 8) | md[i];
	return s % modulus;
}

static int match(const struct rule *r, const char *s, struct gw_regex_match *m, struct gw_relabel_stats *stats)
{
	int rc = gw_regex__match(r->regex, s, m);

	if (rc == -E2BIG) {
		if (stats)
			stats->regex_limit++;
		return 0;
	}
	return rc;
}

/* Applies one rule; returns 1 keep, 0 drop, -ENOMEM. */
static int apply_rule(const struct rule *r, struct gw_labels *ls, struct gw_relabel_stats *stats)
{
	struct gw_regex_match m;
	char *val = NULL, *res = NULL, *target = NULL;
	int rc = 1, e;

	switch (r->action) {
	case GW_RELABEL_LABELMAP: {
		/* Matches against the names as they were before this rule. */
		struct gw_labels add = { 0 };
		for (size_t i = 0; i < ls->n && rc >= 0; i++) {
			if (match(r, ls->v[i].key, &m, stats) <= 0)
				continue;
			if ((e = gw_regex__expand(r->regex, &m, r->replacement, &res)) < 0) {
				rc = e;
				break;
			}
			if (*res && (e = gw_labels__set(&add, res, ls->v[i].value)) < 0)
				rc = e;
			SR_FREE(res);
		}
		for (size_t i = 0; i < add.n && rc >= 0; i++)
			if ((e = gw_labels__set(ls, add.v[i].key, add.v[i].value)) < 0)
				rc = e;
		gw_labels_clear(&add);
		return rc;
	}
	case GW_RELABEL_LABELDROP:
	case GW_RELABEL_LABELKEEP:
		for (size_t i = 0; i < ls->n;) {
			int mm = match(r, ls->v[i].key, NULL, stats);
			if ((mm > 0) == (r->action == GW_RELABEL_LABELDROP))
				gw_labels__del(ls, ls->v[i].key);
			else
				i++;
		}
		return 1;
	default:
		break;
	}

	val = join_sources(r, ls);
	if (!val)
		return -ENOMEM;
	switch (r->action) {
	case GW_RELABEL_KEEP:
		rc = match(r, val, NULL, stats) > 0 ? 1 : 0;
		break;
	case GW_RELABEL_DROP:
		rc = match(r, val, NULL, stats) > 0 ? 0 : 1;
		break;
	case GW_RELABEL_KEEPEQUAL:
	case GW_RELABEL_DROPEQUAL: {
		const char *t = gw_labels__get(ls, r->target);
		bool eq = strcmp(val, t ? t : "") == 0;
		rc = (eq == (r->action == GW_RELABEL_KEEPEQUAL)) ? 1 : 0;
		break;
	}
	case GW_RELABEL_REPLACE:
		if (match(r, val, &m, stats) <= 0)
			break;
		/* Prometheus expands the target label with the match too. */
		if ((e = gw_regex__expand(r->regex, &m, r->target, &target)) < 0 ||
		    (e = gw_regex__expand(r->regex, &m, r->replacement, &res)) < 0) {
			rc = e;
			break;
		}
		if (!*target)
			break;
		if (!*res)
			gw_labels__del(ls, target);
		else if ((e = gw_labels__set(ls, target, res)) < 0)
			rc = e;
		break;
	case GW_RELABEL_LOWERCASE:
	case GW_RELABEL_UPPERCASE:
		/* ASCII only, like Go's strings.ToLower for the label values seen in practice. */
		for (char *p = val; *p; p++)
			*p = (char)(r->action == GW_RELABEL_LOWERCASE ? tolower((unsigned char)*p)
								      : toupper((unsigned char)*p));
		if ((e = gw_labels__set(ls, r->target, val)) < 0)
			rc = e;
		break;
	case GW_RELABEL_HASHMOD: {
		char num[32];
		snprintf(num, sizeof(num), "%" PRIu64, hashmod(val, r->modulus));
		if ((e = gw_labels__set(ls, r->target, num)) < 0)
			rc = e;
		break;
	}
	default:
		break;
	}
	free(val);
	free(res);
	free(target);
	return rc;
}

int gw_relabel__apply(const struct gw_relabel *rl, struct gw_labels *ls, struct gw_relabel_stats *stats)
{
	for (size_t i = 0; i < rl->n; i++) {
		int r = apply_rule(&rl->rules[i], ls, stats);
		if (r < 0)
			return r;
		if (r == 0) {
			if (stats)
				stats->dropped++;
			return 0;
		}
	}
	for (size_t i = 0; i < ls->n;) {
		if (strncmp(ls->v[i].key, "__", 2) == 0)
			gw_labels__del(ls, ls->v[i].key);
		else
			i++;
	}
	if (stats)
		stats->kept++;
	return 1;
}
