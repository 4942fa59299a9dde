// SPDX-License-Identifier: Apache-2.0
#define PCRE2_CODE_UNIT_WIDTH 8

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pcre2.h>

#include "common/grow.h"
#include "common/macro.h"
#include "regex.h"

struct gw_regex {
	pcre2_code *code;
	pcre2_match_context *mctx;
	uint32_t ngroups; /* capture groups + 1 */
};

/*
 * RE2 has no backtracking constructs. Rather than parse the pattern fully,
 * scan it for the syntax that introduces them, skipping escapes and
 * character classes, where the same characters are literal.
 */
static int check_re2_compatible(const char *p, char *errbuf, size_t errsize)
{
	bool in_class = false;

	for (size_t i = 0; p[i]; i++) {
		char c = p[i];
		if (c == '\\') {
			char n = p[i + 1];
			if (!n)
				break;
			if (!in_class && ((n >= '1' && n <= '9') || n == 'k' || n == 'g')) {
				snprintf(errbuf, errsize,
					 "backreference \\%c at offset %zu is not supported (RE2 syntax)", n, i);
				return -EINVAL;
			}
			if (n == 'C') {
				snprintf(errbuf, errsize, "\\C at offset %zu is not supported (RE2 syntax)", i);
				return -EINVAL;
			}
			i++;
			continue;
		}
		if (in_class) {
			if (c == ']')
				in_class = false;
			continue;
		}
		if (c == '[') {
			in_class = true;
			/* A ']' right after '[' or '[^' is literal. */
			if (p[i + 1] == '^')
				i++;
			if (p[i + 1] == ']')
				i++;
			continue;
		}
		if (c == '(' && p[i + 1] == '?') {
			char n = p[i + 2];
			/* (?: (?i) (?P<name> (?<name> and flag groups are RE2; the rest are not. */
			if (n == '=' || n == '!' || n == '>' || n == '|' || n == '(' || n == 'R' || n == '&' ||
			    n == 'C' || (n >= '0' && n <= '9') || n == '+' ||
			    (n == 'P' && (p[i + 3] == '=' || p[i + 3] == '>')) ||
			    (n == '<' && (p[i + 3] == '=' || p[i + 3] == '!'))) {
				snprintf(errbuf, errsize, "group (?%c at offset %zu is not supported (RE2 syntax)", n,
					 i);
				return -EINVAL;
			}
		}
		if ((c == '+' || c == '*' || c == '?' || c == '}') && p[i + 1] == '+') {
			snprintf(errbuf, errsize, "possessive quantifier at offset %zu is not supported (RE2 syntax)",
				 i + 1);
			return -EINVAL;
		}
	}
	return 0;
}

struct gw_regex *gw_regex_new(const char *pattern, bool anchored, char *errbuf, size_t errsize)
{
	struct gw_regex *re = NULL;
	char *wrapped = NULL;
	int errcode;
	PCRE2_SIZE erroff;
	int r;

	if (errsize)
		errbuf[0] = '\0';
	r = check_re2_compatible(pattern, errbuf, errsize);
	if (r < 0) {
		errno = -r;
		return NULL;
	}
	re = calloc(1, sizeof(*re));
	if (!re)
		goto nomem;
	if (anchored) {
		size_t n = strlen(pattern) + 16;
		wrapped = malloc(n);
		if (!wrapped)
			goto nomem;
		snprintf(wrapped, n, "\\A(?:%s)\\z", pattern);
	}
	re->code = pcre2_compile((PCRE2_SPTR)(wrapped ? wrapped : pattern), PCRE2_ZERO_TERMINATED,
				 PCRE2_UTF | PCRE2_DOLLAR_ENDONLY | PCRE2_NEVER_BACKSLASH_C | PCRE2_MATCH_INVALID_UTF,
				 &errcode, &erroff, NULL);
	if (!re->code) {
		char msg[128];
		pcre2_get_error_message(errcode, (PCRE2_UCHAR *)msg, sizeof(msg));
		/* Offsets are into the user's pattern, not the wrapper. */
		if (wrapped)
			erroff = erroff >= 5 ? erroff - 5 : 0;
		snprintf(errbuf, errsize, "%s at offset %zu", msg, (size_t)erroff);
		free(wrapped);
		gw_regex_free(re);
		errno = EINVAL;
		return NULL;
	}
	free(wrapped);
	wrapped = NULL;
	uint32_t cap = 0;
	pcre2_pattern_info(re->code, PCRE2_INFO_CAPTURECOUNT, &cap);
	if (cap + 1 > GW_REGEX_MAX_GROUPS) {
		snprintf(errbuf, errsize, "%u capture groups, at most %u", cap, GW_REGEX_MAX_GROUPS - 1);
		gw_regex_free(re);
		errno = EINVAL;
		return NULL;
	}
	re->ngroups = cap + 1;
	re->mctx = pcre2_match_context_create(NULL);
	if (!re->mctx)
		goto nomem;
	pcre2_set_match_limit(re->mctx, GW_REGEX_MATCH_LIMIT);
	pcre2_set_depth_limit(re->mctx, GW_REGEX_DEPTH_LIMIT);
	return re;
nomem:
	free(wrapped);
	gw_regex_free(re);
	snprintf(errbuf, errsize, "out of memory");
	errno = ENOMEM;
	return NULL;
}

void gw_regex_free(struct gw_regex *re)
{
	if (!re)
		return;
	pcre2_match_context_free(re->mctx);
	pcre2_code_free(re->code);
	free(re);
}

static int match_result(const struct gw_regex *re, pcre2_match_data *md, int rc, const char *subject,
			struct gw_regex_match *m);

int gw_regex__match(const struct gw_regex *re, const char *subject, struct gw_regex_match *m)
{
	/*
	 * Match data per call: a compiled pattern is shared by threads (the
	 * k8s client decodes LIST pages on a worker and asks the extraction
	 * rules which keys to keep), and pcre2_match_data is not.
	 */
	pcre2_match_data *md = pcre2_match_data_create(re->ngroups, NULL);
	int rc;

	if (!md)
		return -ENOMEM;
	rc = pcre2_match(re->code, (PCRE2_SPTR)subject, strlen(subject), 0, 0, md, re->mctx);
	rc = match_result(re, md, rc, subject, m);
	pcre2_match_data_free(md);
	return rc;
}

static int match_result(const struct gw_regex *re, pcre2_match_data *md, int rc, const char *subject,
			struct gw_regex_match *m)
{
	if (rc == PCRE2_ERROR_NOMATCH || rc == PCRE2_ERROR_BADUTFOFFSET ||
	    (rc <= PCRE2_ERROR_UTF8_ERR1 && rc >= PCRE2_ERROR_UTF8_ERR21))
		return 0;
	if (rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT || rc == PCRE2_ERROR_HEAPLIMIT)
		return -E2BIG;
	if (rc < 0)
		return 0;
	if (m) {
		PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
		m->subject = subject;
		m->ngroups = re->ngroups;
		for (size_t i = 0; i < re->ngroups; i++) {
			bool set = i < (size_t)rc && ov[2 * i] != PCRE2_UNSET;
			m->ovector[2 * i] = set ? ov[2 * i] : SIZE_MAX;
			m->ovector[2 * i + 1] = set ? ov[2 * i + 1] : SIZE_MAX;
		}
	}
	return 1;
}

struct buf {
	char *p;
	size_t len, cap;
};

static int buf_add(struct buf *b, const char *s, size_t n)
{
	if (sr_grow((void **)&b->p, &b->cap, b->len + n + 1, 1, 64) < 0)
		return -ENOMEM;
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
	return 0;
}

static bool is_name_char(char c)
{
	return isalnum((unsigned char)c) || c == '_';
}

static int add_group(const struct gw_regex *re, const struct gw_regex_match *m, const char *name, size_t nlen,
		     struct buf *b)
{
	long idx = -1;
	bool numeric = true;

	for (size_t i = 0; i < nlen; i++)
		if (!isdigit((unsigned char)name[i]))
			numeric = false;
	if (numeric) {
		/* Go: a purely numeric name is an index; too large means "no such group". */
		if (nlen > 4)
			return 0;
		idx = strtol(name, NULL, 10);
	} else {
		char tmp[256];
		if (nlen >= sizeof(tmp))
			return 0;
		memcpy(tmp, name, nlen);
		tmp[nlen] = '\0';
		int n = pcre2_substring_number_from_name(re->code, (PCRE2_SPTR)tmp);
		if (n < 0)
			return 0;
		idx = n;
	}
	if (idx < 0 || (size_t)idx >= m->ngroups || m->ovector[2 * idx] == SIZE_MAX)
		return 0;
	return buf_add(b, m->subject + m->ovector[2 * idx], m->ovector[2 * idx + 1] - m->ovector[2 * idx]);
}

int gw_regex__expand(const struct gw_regex *re, const struct gw_regex_match *m, const char *template, char **ret)
{
	struct buf b = { 0 };
	const char *p = template;
	int r = buf_add(&b, "", 0);

	while (r >= 0 && *p) {
		const char *dollar = strchr(p, '$');
		if (!dollar) {
			r = buf_add(&b, p, strlen(p));
			break;
		}
		r = buf_add(&b, p, (size_t)(dollar - p));
		if (r < 0)
			break;
		p = dollar + 1;
		if (*p == '$') {
			r = buf_add(&b, "$", 1);
			p++;
			continue;
		}
		const char *name = p;
		size_t nlen = 0;
		bool braced = false;
		if (*p == '{') {
			const char *close = strchr(p + 1, '}');
			braced = true;
			name = p + 1;
			if (close) {
				nlen = (size_t)(close - name);
				for (size_t i = 0; i < nlen; i++)
					if (!is_name_char(name[i]))
						close = NULL;
			}
			if (!close || nlen == 0) {
				r = buf_add(&b, "$", 1);
				continue;
			}
			p = close + 1;
		} else {
			while (is_name_char(name[nlen]))
				nlen++;
			if (nlen == 0) {
				r = buf_add(&b, "$", 1);
				continue;
			}
			p = name + nlen;
		}
		(void)braced;
		if (m)
			r = add_group(re, m, name, nlen, &b);
	}
	if (r < 0) {
		free(b.p);
		return r;
	}
	*ret = b.p;
	return 0;
}
