// SPDX-License-Identifier: Apache-2.0
/*
 * ${env:NAME} substitution, with the OTel Collector's syntax so that users
 * can carry their configs over: `${env:NAME}`, `${env:NAME:-default}`, and
 * `$$` for a literal `$`. A `$` not followed by `{` or `$` is kept as it is.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

struct strbuf {
	char *s;
	size_t len, cap;
};

static int strbuf_append(struct strbuf *b, const char *s, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 64;
		while (cap < b->len + n + 1)
			cap *= 2;
		char *p = realloc(b->s, cap);
		if (!p)
			return -ENOMEM;
		b->s = p;
		b->cap = cap;
	}
	memcpy(b->s + b->len, s, n);
	b->len += n;
	b->s[b->len] = '\0';
	return 0;
}

static bool is_name_start(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}

static bool is_name_char(char c)
{
	return is_name_start(c) || (c >= '0' && c <= '9');
}

static const char *default_getenv(const char *name)
{
	return getenv(name);
}

int sr_env_expand(const char *s, char **ret, char *errbuf, size_t errsize, const char *(*getenv_fn)(const char *name))
{
	struct strbuf b = { 0 };
	const char *p = s;
	int r = 0;

	if (!getenv_fn)
		getenv_fn = default_getenv;
	if (errsize)
		errbuf[0] = '\0';
	r = strbuf_append(&b, "", 0);
	if (r < 0)
		goto fail;

	while (*p) {
		const char *dollar = strchr(p, '$');
		if (!dollar) {
			r = strbuf_append(&b, p, strlen(p));
			if (r < 0)
				goto fail;
			break;
		}
		r = strbuf_append(&b, p, (size_t)(dollar - p));
		if (r < 0)
			goto fail;
		if (dollar[1] == '$') {
			r = strbuf_append(&b, "$", 1);
			if (r < 0)
				goto fail;
			p = dollar + 2;
			continue;
		}
		if (dollar[1] != '{') {
			r = strbuf_append(&b, "$", 1);
			if (r < 0)
				goto fail;
			p = dollar + 1;
			continue;
		}

		const char *close = strchr(dollar, '}');
		if (!close) {
			snprintf(errbuf, errsize, "unterminated \"${\" at offset %zu (write $$ for a literal $)",
				 (size_t)(dollar - s));
			r = -EINVAL;
			goto fail;
		}
		const char *inner = dollar + 2;
		if (strncmp(inner, "env:", 4) != 0) {
			snprintf(errbuf, errsize, "unsupported substitution \"%.*s\": only ${env:NAME} is supported",
				 (int)(close - dollar + 1), dollar);
			r = -EINVAL;
			goto fail;
		}
		const char *name = inner + 4, *q = name;
		if (!is_name_start(*q)) {
			snprintf(errbuf, errsize, "invalid variable name in \"%.*s\"", (int)(close - dollar + 1),
				 dollar);
			r = -EINVAL;
			goto fail;
		}
		while (is_name_char(*q))
			q++;
		size_t name_len = (size_t)(q - name);
		const char *def = NULL;
		size_t def_len = 0;
		if (q[0] == ':' && q[1] == '-') {
			def = q + 2;
			def_len = (size_t)(close - def);
		} else if (q != close) {
			snprintf(errbuf, errsize, "invalid variable name in \"%.*s\"", (int)(close - dollar + 1),
				 dollar);
			r = -EINVAL;
			goto fail;
		}

		char name_buf[256];
		if (name_len >= sizeof(name_buf)) {
			snprintf(errbuf, errsize, "variable name longer than %zu characters", sizeof(name_buf) - 1);
			r = -EINVAL;
			goto fail;
		}
		memcpy(name_buf, name, name_len);
		name_buf[name_len] = '\0';
		const char *value = getenv_fn(name_buf);
		if (value) {
			r = strbuf_append(&b, value, strlen(value));
		} else if (def) {
			r = strbuf_append(&b, def, def_len);
		} else {
			snprintf(errbuf, errsize,
				 "environment variable %s is not set (write ${env:%s:-default} to give a default)",
				 name_buf, name_buf);
			r = -ENOENT;
			goto fail;
		}
		if (r < 0)
			goto fail;
		p = close + 1;
	}
	*ret = b.s;
	return 0;

fail:
	if (r == -ENOMEM && errsize)
		snprintf(errbuf, errsize, "out of memory");
	free(b.s);
	return r;
}
