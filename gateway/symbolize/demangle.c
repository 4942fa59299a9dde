/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libiberty does the demangling; this file maps the four modes onto its
 * options and trims what libiberty has no option for:
 *   - clone suffixes (" [clone .isra.0]") in full mode, like demangle.NoClones;
 *   - parameters of enclosing functions in local names
 *     ("foo(int)::bar" -> "foo::bar"), like demangle.NoEnclosingParams;
 *   - template and generic arguments in simplified mode, like
 *     demangle.NoTemplateParams, keeping operator names ("operator<<") and
 *     Rust qualified paths ("<T as Trait>::f") intact.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <libiberty/demangle.h>

#include "demangle.h"

const char *const gw_demangle_mode_names[] = {
	[GW_DEMANGLE_NONE] = "none",
	[GW_DEMANGLE_SIMPLIFIED] = "simplified",
	[GW_DEMANGLE_TEMPLATES] = "templates",
	[GW_DEMANGLE_FULL] = "full",
	[_GW_DEMANGLE_MAX] = NULL,
};

int gw_demangle_mode_from_string(const char *s, enum gw_demangle_mode *ret)
{
	for (int i = 0; i < _GW_DEMANGLE_MAX; i++) {
		if (s && strcmp(s, gw_demangle_mode_names[i]) == 0) {
			*ret = (enum gw_demangle_mode)i;
			return 0;
		}
	}
	return -EINVAL;
}

const char *gw_demangle_mode_to_string(enum gw_demangle_mode mode)
{
	if ((int)mode < 0 || mode >= _GW_DEMANGLE_MAX)
		return "unknown";
	return gw_demangle_mode_names[mode];
}

int gw_is_mangled(const char *name)
{
	return name && name[0] == '_' && (name[1] == 'Z' || name[1] == 'R');
}

static bool is_ident(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '$';
}

/* True when the text before position i (ignoring trailing chars in skip) ends with "operator". */
static bool after_operator(const char *s, size_t i, const char *skip)
{
	while (i > 0 && strchr(skip, s[i - 1]))
		i--;
	return i >= 8 && memcmp(s + i - 8, "operator", 8) == 0 && (i == 8 || !is_ident(s[i - 9]));
}

/* Removes every " [clone .xxx]" group. */
static void strip_clones(char *s)
{
	char *p;

	while ((p = strstr(s, " [clone "))) {
		char *end = strchr(p, ']');
		if (!end)
			break;
		memmove(p, end + 1, strlen(end + 1) + 1);
	}
}

/* Index just past the group opened at s[i] (open/close), or 0 when unbalanced. */
static size_t match_group(const char *s, size_t i, char open, char close)
{
	int depth = 0;

	for (size_t j = i; s[j]; j++) {
		if (s[j] == open)
			depth++;
		else if (s[j] == close && --depth == 0)
			return j + 1;
	}
	return 0;
}

/* "a::f(int) const::b" -> "a::f::b": parameter lists followed by "::". */
static void strip_enclosing_params(char *s)
{
	static const char *const quals[] = { " const", " volatile", " &&", " &" };
	size_t i = 0;

	while (s[i]) {
		if (s[i] != '(' || i == 0 || !(is_ident(s[i - 1]) || s[i - 1] == '>') || after_operator(s, i, "")) {
			i++;
			continue;
		}
		size_t end = match_group(s, i, '(', ')');
		if (!end)
			return;
		size_t k = end;
		for (bool again = true; again;) {
			again = false;
			for (size_t q = 0; q < sizeof(quals) / sizeof(quals[0]); q++) {
				size_t ql = strlen(quals[q]);
				if (strncmp(s + k, quals[q], ql) == 0) {
					k += ql;
					again = true;
				}
			}
		}
		if (strncmp(s + k, "::", 2) == 0) {
			memmove(s + i, s + k, strlen(s + k) + 1);
			continue;
		}
		i = end;
	}
}

/* Removes template/generic argument lists (C++ "vector<int>", Rust "f::<T>"). */
static void strip_template_args(char *s)
{
	size_t i = 0;

	while (s[i]) {
		if (s[i] != '<' || after_operator(s, i + 1, "<=>")) {
			i++;
			continue;
		}
		size_t from;
		if (i > 0 && (is_ident(s[i - 1]) || s[i - 1] == '>'))
			from = i; /* C++ template arguments */
		else if (i >= 3 && s[i - 1] == ':' && s[i - 2] == ':' && (is_ident(s[i - 3]) || s[i - 3] == '>'))
			from = i - 2; /* Rust turbofish "::<...>" */
		else {
			i++; /* a Rust qualified path "<T as Trait>": keep */
			continue;
		}
		size_t end = match_group(s, i, '<', '>');
		if (!end)
			return;
		memmove(s + from, s + end, strlen(s + end) + 1);
		i = from;
	}
}

char *gw_demangle(const char *name, enum gw_demangle_mode mode)
{
	int flags = DMGL_AUTO;
	char *r;

	if (mode == GW_DEMANGLE_NONE || !gw_is_mangled(name)) {
		errno = ENOENT;
		return NULL;
	}
	if (mode == GW_DEMANGLE_FULL)
		flags |= DMGL_PARAMS | DMGL_ANSI;
	r = cplus_demangle(name, flags);
	if (!r) {
		errno = ENOENT;
		return NULL;
	}
	switch (mode) {
	case GW_DEMANGLE_FULL:
		strip_clones(r);
		break;
	case GW_DEMANGLE_SIMPLIFIED:
		strip_enclosing_params(r);
		strip_template_args(r);
		break;
	default:
		strip_enclosing_params(r);
		break;
	}
	return r;
}
