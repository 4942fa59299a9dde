// SPDX-License-Identifier: Apache-2.0
/*
 * Substitution in config strings, with the OpenTelemetry Collector's syntax
 * and meaning so that users can carry their configs over: `${env:NAME}`,
 * `${NAME}` (env is the default scheme), `${env:NAME:-default}`,
 * `${file:PATH}` (the file's content, trailing newlines dropped, as a token
 * file mounted from a Secret is written), and `$$` for a literal `$`. A `$`
 * not followed by `{` or `$` is kept as it is. An unset variable without a
 * default becomes an empty string with a warning, as in the Collector.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "common/fileio.h"
#include "common/grow.h"

struct strbuf {
	char *s;
	size_t len, cap;
};

static int strbuf_append(struct strbuf *b, const char *s, size_t n)
{
	if (sr_grow((void **)&b->s, &b->cap, b->len + n + 1, 1, 64) < 0)
		return -ENOMEM;
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

/* The content of a ${file:PATH} reference: a regular file of at most SR_ENV_FILE_MAX bytes. */
static int append_file(struct strbuf *b, const char *path, char *errbuf, size_t errsize)
{
	char *buf = NULL;
	size_t len = 0;
	int r = sr_read_file(path, SR_ENV_FILE_MAX, &buf, &len);

	if (r == -EINVAL || r == -EFBIG) {
		snprintf(errbuf, errsize, "${file:%s}: not a regular file of at most %d bytes", path, SR_ENV_FILE_MAX);
		return r;
	}
	if (r < 0) {
		snprintf(errbuf, errsize, "${file:%s}: %s", path, strerror(-r));
		return r;
	}
	while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
		len--;
	r = strbuf_append(b, buf, len);
	free(buf);
	return r;
}

/*
 * One ${...} reference between dollar and close. Sets *warned (and errbuf)
 * when an unset variable became an empty string.
 */
static int expand_one(struct strbuf *b, const char *s, const char *dollar, const char *close, char *errbuf,
		      size_t errsize, const char *(*getenv_fn)(const char *name), bool *warned)
{
	const char *name = dollar + 2, *q = name, *def = NULL;
	size_t name_len, def_len = 0;
	char name_buf[256];
	int ref_len = (int)(close - dollar + 1);

	if (!is_name_start(*q)) {
		snprintf(errbuf, errsize, "invalid variable name in \"%.*s\"", ref_len, dollar);
		return -EINVAL;
	}
	while (is_name_char(*q))
		q++;
	/* "${scheme:...}": env and file are the Collector's default providers. */
	if (q[0] == ':' && q[1] != '-') {
		size_t scheme_len = (size_t)(q - name);
		if (scheme_len == 4 && strncmp(name, "file", 4) == 0) {
			char path[4096];
			size_t plen = (size_t)(close - (q + 1));
			if (plen == 0 || plen >= sizeof(path)) {
				snprintf(errbuf, errsize, "invalid file reference \"%.*s\"", ref_len, dollar);
				return -EINVAL;
			}
			memcpy(path, q + 1, plen);
			path[plen] = '\0';
			return append_file(b, path, errbuf, errsize);
		}
		if (scheme_len != 3 || strncmp(name, "env", 3) != 0) {
			snprintf(errbuf, errsize,
				 "unsupported substitution \"%.*s\" at offset %zu: the schemes are env "
				 "(${env:NAME}, or ${NAME}) and file (${file:PATH})",
				 ref_len, dollar, (size_t)(dollar - s));
			return -EINVAL;
		}
		name = q = q + 1;
		if (!is_name_start(*q)) {
			snprintf(errbuf, errsize, "invalid variable name in \"%.*s\"", ref_len, dollar);
			return -EINVAL;
		}
		while (is_name_char(*q))
			q++;
	}
	name_len = (size_t)(q - name);
	if (q[0] == ':' && q[1] == '-') {
		def = q + 2;
		def_len = (size_t)(close - def);
	} else if (q != close) {
		snprintf(errbuf, errsize, "invalid variable name in \"%.*s\"", ref_len, dollar);
		return -EINVAL;
	}
	if (name_len >= sizeof(name_buf)) {
		snprintf(errbuf, errsize, "variable name longer than %zu characters", sizeof(name_buf) - 1);
		return -EINVAL;
	}
	memcpy(name_buf, name, name_len);
	name_buf[name_len] = '\0';
	const char *value = getenv_fn(name_buf);
	if (value)
		return strbuf_append(b, value, strlen(value));
	if (def)
		return strbuf_append(b, def, def_len);
	if (!*warned)
		snprintf(errbuf, errsize,
			 "environment variable %s is not set: using an empty string (write ${env:%s:-default} to "
			 "give a default)",
			 name_buf, name_buf);
	*warned = true;
	return 0;
}

int sr_env_expand(const char *s, char **ret, char *errbuf, size_t errsize, const char *(*getenv_fn)(const char *name))
{
	struct strbuf b = { 0 };
	const char *p = s;
	bool warned = false;
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
		r = expand_one(&b, s, dollar, close, errbuf, errsize, getenv_fn, &warned);
		if (r < 0)
			goto fail;
		p = close + 1;
	}
	*ret = b.s;
	return warned ? 1 : 0;

fail:
	if (r == -ENOMEM && errsize)
		snprintf(errbuf, errsize, "out of memory");
	free(b.s);
	return r;
}
