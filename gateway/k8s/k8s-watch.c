// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "common/grow.h"
#include "common/macro.h"
#include "k8s-watch.h"

struct k8s_watch_decoder {
	enum k8s_kind kind;
	const struct k8s_keep *keep;
	size_t max;
	char *buf; /* partial line */
	size_t len, cap;
	uint64_t skipped;
};

const char *k8s_event_type_to_string(enum k8s_event_type t)
{
	static const char *const names[] = { "ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR" };

	return (size_t)t < SR_ARRAY_SIZE(names) ? names[t] : "UNKNOWN";
}

static int event_type_from_string(const char *s, enum k8s_event_type *ret)
{
	static const char *const names[] = { "ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR" };

	for (size_t i = 0; i < SR_ARRAY_SIZE(names); i++)
		if (strcmp(s, names[i]) == 0) {
			*ret = (enum k8s_event_type)i;
			return 0;
		}
	return -EBADMSG;
}

struct k8s_watch_decoder *k8s_watch_decoder_new(enum k8s_kind kind, const struct k8s_keep *keep, size_t max_event_bytes)
{
	struct k8s_watch_decoder *d = calloc(1, sizeof(*d));

	if (!d)
		return NULL;
	d->kind = kind;
	d->keep = keep;
	d->max = max_event_bytes ? max_event_bytes : K8S_WATCH_MAX_EVENT_BYTES;
	return d;
}

void k8s_watch_decoder_free(struct k8s_watch_decoder *d)
{
	if (!d)
		return;
	free(d->buf);
	free(d);
}

uint64_t k8s_watch_decoder__skipped(const struct k8s_watch_decoder *d)
{
	return d->skipped;
}

void k8s_watch_decoder__reset(struct k8s_watch_decoder *d)
{
	d->len = 0;
}

static struct json_object *parse_json(const char *s, size_t len)
{
	struct json_tokener *tok;
	struct json_object *o;

	if (len > INT32_MAX)
		return NULL;
	tok = json_tokener_new_ex(K8S_JSON_MAX_DEPTH);
	if (!tok)
		return NULL;
	o = json_tokener_parse_ex(tok, s, (int)len);
	/*
	 * A complete value must use the whole input (bar whitespace): two
	 * objects on one line, or a truncated one, are not an event.
	 */
	if (o && json_tokener_get_error(tok) == json_tokener_success) {
		size_t used = json_tokener_get_parse_end(tok);
		for (; used < len; used++)
			if (s[used] != ' ' && s[used] != '\t' && s[used] != '\r' && s[used] != '\n')
				break;
		if (used != len) {
			json_object_put(o);
			o = NULL;
		}
	} else if (o) {
		json_object_put(o);
		o = NULL;
	}
	json_tokener_free(tok);
	return o;
}

static const char *object_rv(struct json_object *obj)
{
	struct json_object *meta, *rv;

	if (!json_object_is_type(obj, json_type_object) || !json_object_object_get_ex(obj, "metadata", &meta) ||
	    !json_object_is_type(meta, json_type_object) || !json_object_object_get_ex(meta, "resourceVersion", &rv) ||
	    !json_object_is_type(rv, json_type_string))
		return NULL;
	return json_object_get_string(rv);
}

static int decode_line(struct k8s_watch_decoder *d, const char *line, size_t len, k8s_event_cb cb, void *userdata)
{
	struct json_object *root, *type, *obj;
	struct k8s_event ev = { 0 };
	int r;

	/* Blank lines (keep-alives some proxies insert) are not events. */
	while (len && (line[len - 1] == '\r' || line[len - 1] == ' ' || line[len - 1] == '\t'))
		len--;
	if (len == 0)
		return 0;
	root = parse_json(line, len);
	if (!root)
		return -EBADMSG;
	if (!json_object_is_type(root, json_type_object) || !json_object_object_get_ex(root, "type", &type) ||
	    !json_object_is_type(type, json_type_string) ||
	    event_type_from_string(json_object_get_string(type), &ev.type) < 0 ||
	    !json_object_object_get_ex(root, "object", &obj) || !json_object_is_type(obj, json_type_object)) {
		r = -EBADMSG;
		goto out;
	}
	ev.object.kind = d->kind;
	switch (ev.type) {
	case K8S_EVENT_ERROR: {
		struct json_object *code, *msg;
		if (json_object_object_get_ex(obj, "code", &code) && json_object_is_type(code, json_type_int))
			ev.error_code = (int)json_object_get_int(code);
		if (json_object_object_get_ex(obj, "message", &msg) && json_object_is_type(msg, json_type_string))
			ev.error_message = json_object_get_string(msg);
		break;
	}
	case K8S_EVENT_BOOKMARK:
		ev.resource_version = object_rv(obj);
		break;
	default:
		ev.resource_version = object_rv(obj);
		if (k8s_object_from_json(d->kind, obj, d->keep, &ev.object) < 0) {
			/* -ENOMEM included: dropping one event beats losing the stream. */
			d->skipped++;
			r = 0;
			goto out;
		}
		break;
	}
	r = cb(userdata, &ev);
	k8s_object_clear(&ev.object);
out:
	json_object_put(root);
	return r;
}

int k8s_watch_decoder__feed(struct k8s_watch_decoder *d, const void *data, size_t len, k8s_event_cb cb, void *userdata)
{
	const char *p = data, *end = p + len;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
		int r;

		if (d->len + n > d->max) {
			d->len = 0;
			return -EMSGSIZE;
		}
		if (nl && d->len == 0) {
			/* Whole line in the input: decode in place, no copy. */
			r = decode_line(d, p, n, cb, userdata);
			if (r < 0)
				return r;
			p = nl + 1;
			continue;
		}
		if (sr_grow((void **)&d->buf, &d->cap, d->len + n, 1, 4096) < 0)
			return -ENOMEM;
		memcpy(d->buf + d->len, p, n);
		d->len += n;
		if (!nl)
			break;
		r = decode_line(d, d->buf, d->len, cb, userdata);
		d->len = 0;
		if (r < 0)
			return r;
		p = nl + 1;
	}
	return 0;
}

int k8s_watch_decoder__finish(struct k8s_watch_decoder *d, k8s_event_cb cb, void *userdata)
{
	int r = 0;

	if (d->len)
		r = decode_line(d, d->buf, d->len, cb, userdata);
	d->len = 0;
	return r;
}

void k8s_list_meta_clear(struct k8s_list_meta *m)
{
	SR_FREE(m->resource_version);
	SR_FREE(m->continue_token);
	m->skipped = 0;
}

int k8s_list_parse(enum k8s_kind kind, const void *body, size_t len, const struct k8s_keep *keep, k8s_event_cb cb,
		   void *userdata, struct k8s_list_meta *ret)
{
	struct json_object *root, *meta, *items, *v;
	int r = 0;

	memset(ret, 0, sizeof(*ret));
	root = parse_json(body, len);
	if (!root)
		return -EBADMSG;
	if (!json_object_is_type(root, json_type_object) || !json_object_object_get_ex(root, "items", &items) ||
	    !(json_object_is_type(items, json_type_array) || json_object_is_type(items, json_type_null))) {
		r = -EBADMSG;
		goto out;
	}
	if (json_object_object_get_ex(root, "metadata", &meta) && json_object_is_type(meta, json_type_object)) {
		if (json_object_object_get_ex(meta, "resourceVersion", &v) &&
		    json_object_is_type(v, json_type_string) && *json_object_get_string(v)) {
			ret->resource_version = strdup(json_object_get_string(v));
			if (!ret->resource_version) {
				r = -ENOMEM;
				goto out;
			}
		}
		if (json_object_object_get_ex(meta, "continue", &v) && json_object_is_type(v, json_type_string) &&
		    *json_object_get_string(v)) {
			ret->continue_token = strdup(json_object_get_string(v));
			if (!ret->continue_token) {
				r = -ENOMEM;
				goto out;
			}
		}
	}
	if (json_object_is_type(items, json_type_null))
		goto out;
	size_t n = json_object_array_length(items);
	for (size_t i = 0; i < n; i++) {
		struct json_object *item = json_object_array_get_idx(items, i);
		struct k8s_event ev = { .type = K8S_EVENT_ADDED };
		if (k8s_object_from_json(kind, item, keep, &ev.object) < 0) {
			ret->skipped++;
			continue;
		}
		ev.resource_version = object_rv(item);
		r = cb(userdata, &ev);
		k8s_object_clear(&ev.object);
		if (r < 0)
			goto out;
	}
out:
	json_object_put(root);
	return r;
}

int k8s_status_parse(const void *body, size_t len, char *msgbuf, size_t msgsize)
{
	struct json_object *root = parse_json(body, len), *code, *msg;
	int r = -EBADMSG;

	if (msgsize)
		msgbuf[0] = '\0';
	if (!root)
		return -EBADMSG;
	if (json_object_is_type(root, json_type_object) && json_object_object_get_ex(root, "code", &code) &&
	    json_object_is_type(code, json_type_int)) {
		int64_t c = json_object_get_int64(code);
		if (c >= 0 && c < 1000)
			r = (int)c;
		if (msgsize && json_object_object_get_ex(root, "message", &msg) &&
		    json_object_is_type(msg, json_type_string))
			snprintf(msgbuf, msgsize, "%s", json_object_get_string(msg));
	}
	json_object_put(root);
	return r;
}
