/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Regular expressions as Prometheus relabeling (Go's RE2) and the
 * Collector's key_regex use them, implemented with PCRE2 (Debian's
 * libpcre2-8). PCRE2 accepts more than RE2 and can backtrack; so that a rule
 * means the same here as in Prometheus and cannot stall the event loop:
 *   - patterns using what RE2 rejects are refused at load time: backreferences
 *     (\1, \k<name>, (?P=name)), lookahead/lookbehind, atomic groups,
 *     possessive quantifiers, recursion, conditionals, callouts, \C;
 *   - anchored patterns are compiled as \A(?:...)\z, like Prometheus'
 *     ^(?:...)$ (RE2's $ is the end of text, PCRE2's $ is too under
 *     PCRE2_DOLLAR_ENDONLY, which is set);
 *   - matching runs under GW_REGEX_MATCH_LIMIT / GW_REGEX_DEPTH_LIMIT; a
 *     match that exceeds them counts as "no match" and is reported by the
 *     caller's error counter.
 * Subjects and patterns are UTF-8 (PCRE2_UTF, invalid UTF-8 subjects never match).
 */
#ifndef SR_GW_CORE_REGEX_H
#define SR_GW_CORE_REGEX_H

#include <stdbool.h>
#include <stddef.h>

/* Backtracking budget per match (PCRE2 match_limit) and nesting depth (depth_limit). */
#define GW_REGEX_MATCH_LIMIT 100000u
#define GW_REGEX_DEPTH_LIMIT 1000u
/* Capture groups usable in a replacement ($0..$99). */
#define GW_REGEX_MAX_GROUPS 100u

struct gw_regex;

/*
 * Compiles pattern. anchored: match the whole subject. Returns NULL with
 * errno EINVAL and a message in errbuf ("missing ) at offset 4") on a bad
 * or non-RE2 pattern, ENOMEM otherwise.
 */
struct gw_regex *gw_regex_new(const char *pattern, bool anchored, char *errbuf, size_t errsize);
void gw_regex_free(struct gw_regex *re);

/* One match: offsets of group i are ovector[2i], ovector[2i+1]; SIZE_MAX when unset. */
struct gw_regex_match {
	const char *subject;
	size_t ngroups;
	size_t ovector[2 * GW_REGEX_MAX_GROUPS];
};

/*
 * Returns 1 on match (m filled, may be NULL), 0 on no match, -E2BIG when a
 * limit was hit, -ENOMEM. Thread-safe: one compiled pattern may be matched
 * from several threads at once.
 */
int gw_regex__match(const struct gw_regex *re, const char *subject, struct gw_regex_match *m);

/*
 * Expands template as Go's Regexp.Expand does: $1, ${1}, $name, ${name},
 * $$ for a literal $; $name takes the longest run of [A-Za-z0-9_]; an
 * unknown or unmatched group expands to nothing; a $ not followed by a
 * valid name is copied. Returns 0 with *ret malloc'd, or -ENOMEM.
 */
int gw_regex__expand(const struct gw_regex *re, const struct gw_regex_match *m, const char *template, char **ret);

#endif
