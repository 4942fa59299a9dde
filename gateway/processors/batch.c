// SPDX-License-Identifier: Apache-2.0
/*
 * batch: merges batches into bigger ones (docs/processors.md, "batch"), as
 * the Collector's batch processor does, so exporters send fewer, larger
 * requests that compress and de-duplicate better (one dictionary per
 * request). Resources with equal attributes are coalesced by the merge.
 *
 * A batch is sent when it holds send_batch_size sample records, when its
 * estimated size reaches send_batch_max_bytes, or timeout after its first
 * sample arrived. send_batch_max_size caps the records of what is sent:
 * larger batches are cut. Batches of different pipelines are kept apart.
 *
 * metadata_keys, as in the Collector: batches are kept apart by the values
 * of these request headers (a receiver's include_metadata), so a tenant's
 * samples (X-Scope-OrgID) never share a request with another's; the values
 * go on with the batch (gw_profiles.metadata) and exporters send them as
 * headers. metadata_cardinality_limit bounds the distinct combinations.
 * metadata_from_attributes gives data that came without such a header (the
 * agents') a value from a resource attribute, e.g. X-Scope-OrgID from
 * k8s.namespace.name: a batch of several namespaces is split per tenant.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <uv.h>

#include "component.h"
#include "common/config.h"
#include "common/grow.h"
#include "core/accounting.h"
#include "core/metrics.h"
#include "core/model.h"
#include "core/runtime.h"
#include "common/log.h"
#include "common/macro.h"

/* metadata_keys: at most this many; a header line kept per key at most this long. */
#define BATCH_MAX_METADATA_KEYS	 16
#define BATCH_METADATA_VALUE_MAX 1024
#define BATCH_MAX_CARDINALITY	 100000
#define BATCH_REASON_CARDINALITY "metadata_cardinality"

struct batch_config {
	uint64_t timeout;
	uint64_t send_batch_size;
	uint64_t send_batch_max_size;
	uint64_t send_batch_max_bytes;
	char **metadata_keys;
	uint32_t n_metadata_keys;
	uint64_t metadata_cardinality_limit;
	struct sr_kv *metadata_from_attributes; /* metadata key -> resource attribute */
	uint32_t n_metadata_from_attributes;
};

static const struct sr_field batch_fields[] = {
	SR_FIELD_DUR("timeout", struct batch_config, timeout, .def = "10s",
		     .doc = "Send a batch this long after its first sample arrived, however small; 0 sends at once."),
	SR_FIELD_U64("send_batch_size", struct batch_config, send_batch_size, .def = "8192",
		     .doc = "Send once a batch holds this many sample records (a record is a stack of one thread "
			    "in one window, with its count).",
		     .min = 1, .max = 100000000),
	SR_FIELD_U64("send_batch_max_size", struct batch_config, send_batch_max_size, .def = "16384",
		     .doc = "Most sample records in a batch sent on; bigger ones are cut. 0: no cap.", .min = 0,
		     .max = 100000000),
	SR_FIELD_BYTES("send_batch_max_bytes", struct batch_config, send_batch_max_bytes, .def = "8MiB",
		       .doc = "Send once a batch's estimated memory reaches this; it bounds the encoded request too "
			      "(which is smaller), keeping requests under the backend's body limit. 0: no cap."),
	SR_FIELD_STRLIST("metadata_keys", struct batch_config, metadata_keys, n_metadata_keys,
			 .doc = "Request headers (a receiver's include_metadata) whose values keep batches apart, "
				"e.g. [X-Scope-OrgID]: one batch per tenant, and exporters send these headers with "
				"each batch's values. Names are case-insensitive.",
			 .min = 0, .max = BATCH_MAX_METADATA_KEYS),
	SR_FIELD_U64("metadata_cardinality_limit", struct batch_config, metadata_cardinality_limit, .def = "1000",
		     .doc = "Most distinct combinations of metadata_keys values at once; the samples of more are "
			    "dropped (counted as metadata_cardinality).",
		     .min = 1, .max = BATCH_MAX_CARDINALITY),
	SR_FIELD_STRMAP("metadata_from_attributes", struct batch_config, metadata_from_attributes,
			n_metadata_from_attributes,
			.doc = "For data that came without one of metadata_keys' headers (the agents'), its value "
			       "from a resource attribute, e.g. {X-Scope-OrgID: k8s.namespace.name}: one tenant per "
			       "namespace (k8s_attributes must run first; relabel can map namespaces to tenants).",
			.min = 0, .max = BATCH_MAX_METADATA_KEYS),
	SR_FIELD_END,
};

static int batch_validate(const void *config, const char *path, struct sr_diag *d)
{
	const struct batch_config *cfg = config;

	if (cfg->send_batch_max_size && cfg->send_batch_max_size < cfg->send_batch_size) {
		sr_diag_add(d, NULL, 0, 0, path,
			    "send_batch_max_size (%" PRIu64 ") must be 0 or >= send_batch_size (%" PRIu64 ")",
			    cfg->send_batch_max_size, cfg->send_batch_size);
		return -EINVAL;
	}
	for (uint32_t i = 0; i < cfg->n_metadata_from_attributes; i++) {
		const char *k = cfg->metadata_from_attributes[i].key;
		bool listed = false;
		for (uint32_t j = 0; j < cfg->n_metadata_keys; j++)
			listed |= strcasecmp(k, cfg->metadata_keys[j]) == 0;
		if (!listed) {
			sr_diag_add(d, NULL, 0, 0, path, "metadata_from_attributes: \"%s\" is not one of metadata_keys",
				    k);
			return -EINVAL;
		}
	}
	for (uint32_t i = 0; i < cfg->n_metadata_keys; i++) {
		const char *k = cfg->metadata_keys[i];
		if (!*k || strpbrk(k, ": \t\r\n") || k[0] == '-') {
			sr_diag_add(d, NULL, 0, 0, path, "metadata_keys[%u]: \"%s\" is not a header name", i, k);
			return -EINVAL;
		}
		for (uint32_t j = 0; j < i; j++)
			if (strcasecmp(k, cfg->metadata_keys[j]) == 0) {
				sr_diag_add(d, NULL, 0, 0, path, "metadata_keys: \"%s\" is listed twice", k);
				return -EINVAL;
			}
	}
	return 0;
}

/* A batch being filled: one per pipeline and combination of metadata_keys values. */
struct pending {
	struct batcher *b;
	uv_timer_t timer;
	struct gw_profiles *p; /* NULL when empty */
	char *metadata;	       /* the values it is for ("Key: value\n" lines); NULL: none */
	struct pending *next;  /* of the same pipeline */
};

struct batcher {
	struct gw_component *c;
	const struct batch_config *cfg;
	struct pending **routes; /* by route_pipeline: a list, one per metadata; zeroed up to cap_routes */
	size_t n_routes, cap_routes;
	size_t n_pending;
	unsigned open_handles;
	bool destroyed;
	uint64_t sent_by_size, sent_by_timeout, sent_by_bytes, cuts;
	uint64_t cardinality_drops;
};

struct cut_state {
	uint64_t i, n;
	bool first;
};

static bool keep_cut(const struct gw_resource *r, const struct gw_sample *s, void *userdata)
{
	struct cut_state *st = userdata;
	bool in_first = st->i++ < st->n;

	return in_first == st->first;
}

/* Sends p on, cut into pieces of at most send_batch_max_size records. */
static void send_on(struct batcher *b, struct gw_profiles *p)
{
	uint64_t max = b->cfg->send_batch_max_size;

	while (max && p->n_samples > max) {
		struct gw_profiles *rest = gw_profiles__clone(p);
		struct cut_state st = { .n = max, .first = true };

		if (!rest) {
			/* Cannot cut: send it whole rather than lose it. */
			break;
		}
		gw_profiles__filter(p, keep_cut, &st);
		st = (struct cut_state){ .n = max, .first = false };
		gw_profiles__filter(rest, keep_cut, &st);
		b->cuts++;
		gw_component_emit(b->c, p);
		p = rest;
	}
	gw_component_emit(b->c, p);
}

static void on_timeout(uv_timer_t *t);

/* Sends everything pending. */
static void flush(struct pending *pd)
{
	struct gw_profiles *p = pd->p;

	pd->p = NULL;
	uv_timer_stop(&pd->timer);
	if (p)
		send_on(pd->b, p);
}

/*
 * Sends full batches: send_batch_max_size records at a time while at least
 * send_batch_size are pending; a remainder stays pending, as in the
 * Collector, with a fresh timeout.
 */
static void flush_full(struct pending *pd)
{
	struct batcher *b = pd->b;
	uint64_t max = b->cfg->send_batch_max_size;

	while (pd->p && pd->p->n_samples >= b->cfg->send_batch_size) {
		struct gw_profiles *p = pd->p, *rest;
		struct cut_state st = { .n = max, .first = true };

		if (!max || p->n_samples <= max) {
			flush(pd);
			return;
		}
		rest = gw_profiles__clone(p);
		if (!rest) {
			flush(pd); /* cannot cut: send it whole rather than lose it */
			return;
		}
		gw_profiles__filter(p, keep_cut, &st);
		st = (struct cut_state){ .n = max, .first = false };
		gw_profiles__filter(rest, keep_cut, &st);
		b->cuts++;
		pd->p = rest;
		gw_component_emit(b->c, p);
	}
	if (pd->p)
		uv_timer_start(&pd->timer, on_timeout, SR_MAX(b->cfg->timeout / 1000000, 1), 0);
}

static void on_timeout(uv_timer_t *t)
{
	struct pending *pd = t->data;

	pd->b->sent_by_timeout++;
	flush(pd);
}

static void pending_closed(uv_handle_t *h)
{
	struct pending *pd = h->data;
	struct batcher *b = pd->b;

	free(pd->metadata);
	free(pd);
	if (--b->open_handles == 0 && b->destroyed) {
		free(b->routes);
		free(b);
	}
}

/*
 * The metadata_keys values of p's request headers, as "Key: value\n" lines
 * in the order of metadata_keys, with the names as written there (so the
 * exporter sends them so); NULL (and 0) when none is present. -ENOMEM.
 */
static int select_metadata(const struct batch_config *cfg, const char *client, const struct gw_resource *res,
			   char **ret)
{
	char *out = NULL;
	size_t len = 0, cap = 0;

	*ret = NULL;
	for (uint32_t i = 0; i < cfg->n_metadata_keys; i++) {
		const char *k = cfg->metadata_keys[i];
		size_t kl = strlen(k);
		size_t before = len;

		/* client holds lowercase names: the first line with this name wins. */
		for (const char *line = client ? client : ""; *line;) {
			const char *end = strchr(line, '\n');
			size_t ll = end ? (size_t)(end - line) : strlen(line);

			if (ll > kl + 1 && strncasecmp(line, k, kl) == 0 && line[kl] == ':') {
				const char *v = line + kl + 1;
				size_t vl = ll - kl - 1;

				while (vl && *v == ' ') {
					v++;
					vl--;
				}
				vl = SR_MIN(vl, (size_t)BATCH_METADATA_VALUE_MAX);
				if (sr_grow((void **)&out, &cap, len + kl + vl + 4, 1, 256) < 0) {
					free(out);
					return -ENOMEM;
				}
				len += (size_t)sprintf(out + len, "%s: %.*s\n", k, (int)vl, v);
				break;
			}
			line += ll + (end ? 1 : 0);
		}
		/* No header: metadata_from_attributes' resource attribute, when the resource has it. */
		for (uint32_t j = 0; len == before && res && j < cfg->n_metadata_from_attributes; j++) {
			const struct gw_attr *a;
			size_t vl;

			if (strcasecmp(cfg->metadata_from_attributes[j].key, k) != 0)
				continue;
			a = gw_resource__attr(res, cfg->metadata_from_attributes[j].value);
			if (!a || a->type != GW_ATTR_STRING || !a->v.s || !*a->v.s || strpbrk(a->v.s, "\r\n"))
				break;
			vl = SR_MIN(strlen(a->v.s), (size_t)BATCH_METADATA_VALUE_MAX);
			if (sr_grow((void **)&out, &cap, len + kl + vl + 4, 1, 256) < 0) {
				free(out);
				return -ENOMEM;
			}
			len += (size_t)sprintf(out + len, "%s: %.*s\n", k, (int)vl, a->v.s);
		}
	}
	*ret = out;
	return 0;
}

static bool same_metadata(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static struct pending *route(struct batcher *b, uint32_t i, const char *metadata)
{
	if (i >= b->n_routes) {
		if (sr_grow_zero((void **)&b->routes, &b->cap_routes, (size_t)i + 1, sizeof(*b->routes), 4) < 0)
			return NULL;
		b->n_routes = i + 1;
	}
	for (struct pending *pd = b->routes[i]; pd; pd = pd->next)
		if (same_metadata(pd->metadata, metadata))
			return pd;
	if (b->n_pending >= b->cfg->metadata_cardinality_limit) {
		/* At the limit, a batch sent and not refilled since (another tenant's) takes the new values. */
		for (struct pending *pd = b->routes[i]; pd; pd = pd->next) {
			char *m = NULL;

			if (pd->p)
				continue;
			if (metadata && !(m = strdup(metadata)))
				return NULL;
			free(pd->metadata);
			pd->metadata = m;
			return pd;
		}
		errno = EMFILE;
		return NULL;
	}
	struct pending *pd = calloc(1, sizeof(*pd));

	if (!pd)
		return NULL;
	if (metadata && !(pd->metadata = strdup(metadata))) {
		free(pd);
		return NULL;
	}
	pd->b = b;
	uv_timer_init(gw_runtime__loop(b->c->runtime), &pd->timer);
	pd->timer.data = pd;
	b->open_handles++;
	b->n_pending++;
	pd->next = b->routes[i];
	b->routes[i] = pd;
	return pd;
}

/* One batch whose metadata is set (meta, NULL: none): into the pending batch of its pipeline and values. */
static int consume_one(struct batcher *b, struct gw_profiles *p, const char *meta)
{
	struct gw_component *c = b->c;
	struct pending *pd;
	int r;

	if (b->cfg->timeout == 0) {
		send_on(b, p);
		return 0;
	}
	pd = route(b, p->route_pipeline, meta);
	if (!pd && errno == EMFILE) {
		if (b->cardinality_drops++ == 0)
			sr_log_warn(
				c->id,
				"more combinations of metadata_keys values at once than metadata_cardinality_limit; "
				"their samples are dropped",
				"limit=%" PRIu64, b->cfg->metadata_cardinality_limit);
		gw_component_drop(c, p, BATCH_REASON_CARDINALITY);
		return 0;
	}
	if (!pd) {
		/* No state for this pipeline: pass the batch on as it is. */
		send_on(b, p);
		return 0;
	}
	if (!pd->p) {
		pd->p = p;
		uv_timer_start(&pd->timer, on_timeout, SR_MAX(b->cfg->timeout / 1000000, 1), 0);
	} else {
		r = gw_profiles__merge(pd->p, p);
		if (r < 0) {
			/* Could not merge (memory): send what is pending, start over with p. */
			flush(pd);
			pd->p = p;
			uv_timer_start(&pd->timer, on_timeout, SR_MAX(b->cfg->timeout / 1000000, 1), 0);
		}
	}
	if (pd->p->n_samples >= b->cfg->send_batch_size) {
		b->sent_by_size++;
		flush_full(pd);
	} else if (b->cfg->send_batch_max_bytes && gw_profiles__memory_bytes(pd->p) >= b->cfg->send_batch_max_bytes) {
		b->sent_by_bytes++;
		flush(pd);
	}
	return 0;
}

/*
 * keep(): the samples of resources whose metadata (from the request or from
 * their attributes) is want, or with exclude, is none of taken[].
 */
struct split_state {
	const struct batch_config *cfg;
	const char *client, *want;
	char *const *taken;
	uint32_t n_taken;
	bool exclude;
	const struct gw_resource *last;
	bool last_keep;
};

static bool same_metadata(const char *a, const char *b);

static bool keep_tenant(const struct gw_resource *r, const struct gw_sample *s, void *userdata)
{
	struct split_state *st = userdata;
	char *m = NULL;

	if (r != st->last) {
		st->last = r;
		if (select_metadata(st->cfg, st->client, r, &m) < 0) {
			/* Out of memory: kept by the last part (p itself), which holds what no other took. */
			st->last_keep = st->exclude;
			return st->last_keep;
		}
		if (st->exclude) {
			st->last_keep = true;
			for (uint32_t i = 0; i < st->n_taken; i++)
				st->last_keep &= !same_metadata(m, st->taken[i]);
		} else {
			st->last_keep = same_metadata(m, st->want);
		}
		free(m);
	}
	return st->last_keep;
}

static int batch_consume(struct gw_component *c, struct gw_profiles *p)
{
	struct batcher *b = c->state;
	const struct batch_config *cfg = b->cfg;
	char *client = NULL, **metas = NULL;
	uint32_t n = 0;
	int r = -ENOMEM;

	r = gw_profiles__make_writable(&p);
	if (r < 0) {
		gw_component_drop(c, p, "out_of_memory");
		return r;
	}
	/*
	 * As the Collector's batch does, what leaves carries only the values of
	 * metadata_keys (none without them), never the request's other headers.
	 * With metadata_from_attributes the values may differ by resource: one
	 * part per distinct value, in the order they first appear.
	 */
	/* A batch from an earlier batch processor carries its selection only: that is its request metadata. */
	const char *src = p->client_metadata ? p->client_metadata : p->metadata;

	if (src && !(client = strdup(src))) {
		r = -ENOMEM;
		goto fail;
	}
	metas = calloc(cfg->n_metadata_from_attributes ? SR_MAX(p->n_resources, 1u) : 1, sizeof(*metas));
	if (!metas) {
		r = -ENOMEM;
		goto fail;
	}
	if (!cfg->n_metadata_from_attributes || p->n_resources == 0) {
		if ((r = select_metadata(cfg, client, NULL, &metas[0])) < 0)
			goto fail;
		n = 1;
	} else {
		for (uint32_t i = 0; i < p->n_resources; i++) {
			char *m;
			bool seen = false;

			if ((r = select_metadata(cfg, client, &p->resources[i], &m)) < 0)
				goto fail;
			for (uint32_t j = 0; j < n && !seen; j++)
				seen = same_metadata(m, metas[j]);
			if (seen)
				free(m);
			else
				metas[n++] = m;
		}
	}
	/* Every part but the last is a filtered copy; the last is p itself, keeping what no other took. */
	for (uint32_t i = 0; i < n && p; i++) {
		bool last = i + 1 == n;
		struct gw_profiles *part = last ? p : gw_profiles__clone(p);
		struct split_state st = {
			.cfg = cfg, .client = client, .want = metas[i], .taken = metas, .n_taken = i, .exclude = last
		};

		if (!part) {
			/* Cannot split: what is left is dropped rather than sent under another tenant. */
			st.exclude = true;
			gw_profiles__filter(p, keep_tenant, &st);
			gw_component_drop(c, p, "out_of_memory");
			p = NULL;
			break;
		}
		if (n > 1)
			gw_profiles__filter(part, keep_tenant, &st);
		if (last)
			p = NULL;
		if (gw_profiles__set_metadata(part, NULL, metas[i]) < 0)
			gw_component_drop(c, part, "out_of_memory");
		else if (part->n_samples == 0 && part->total_count == 0)
			gw_profiles__unref(part);
		else
			consume_one(b, part, metas[i]);
	}
	r = 0;
	goto out;
fail:
	gw_component_drop(c, p, "out_of_memory");
out:
	for (uint32_t i = 0; metas && i < n; i++)
		free(metas[i]);
	free(metas);
	free(client);
	return r;
}

static void batch_metrics(struct gw_metrics_writer *w, void *userdata)
{
	struct batcher *b = userdata;
	static const char *const triggers[] = { "size", "timeout", "bytes" };
	uint64_t v[] = { b->sent_by_size, b->sent_by_timeout, b->sent_by_bytes };
	char l[256], lt[320];

	l[0] = '\0';
	gw_metrics_label(l, sizeof(l), "processor", b->c->id);
	for (size_t i = 0; i < SR_ARRAY_SIZE(triggers); i++) {
		memcpy(lt, l, sizeof(l));
		gw_metrics_label(lt, sizeof(lt), "trigger", triggers[i]);
		gw_metrics__add(w, "stackrelay_gateway_batch_sends_total", GW_METRIC_COUNTER,
				"Batches sent on, by what triggered them.", lt, (double)v[i]);
	}
	gw_metrics__add(w, "stackrelay_gateway_batch_cuts_total", GW_METRIC_COUNTER,
			"Batches cut because they exceeded send_batch_max_size.", l, (double)b->cuts);
	gw_metrics__add(w, "stackrelay_gateway_batch_pending_batches", GW_METRIC_GAUGE,
			"Batches being filled: one per pipeline and combination of metadata_keys values.", l,
			(double)b->n_pending);
}

static int batch_create(struct gw_component *c)
{
	struct batcher *b = calloc(1, sizeof(*b));

	if (!b)
		return -ENOMEM;
	b->c = c;
	b->cfg = c->config;
	c->state = b;
	return 0;
}

static int batch_start(struct gw_component *c)
{
	static const char *const drops[] = { "out_of_memory", NULL };
	static const char *const keyed_drops[] = { "out_of_memory", BATCH_REASON_CARDINALITY, NULL };
	const struct batcher *b = c->state;

	gw_component_declare_drops(c, b->cfg->n_metadata_keys ? keyed_drops : drops);
	gw_runtime__add_metrics(c->runtime, batch_metrics, c->state);
	return 0;
}

static void batch_shutdown(struct gw_component *c, void (*done)(struct gw_component *c))
{
	struct batcher *b = c->state;

	/* Upstream has stopped: send what is pending now. */
	for (size_t i = 0; i < b->n_routes; i++)
		for (struct pending *pd = b->routes[i]; pd; pd = pd->next)
			flush(pd);
	done(c);
}

static void batch_destroy(struct gw_component *c)
{
	struct batcher *b = c->state;

	if (!b)
		return;
	c->state = NULL;
	if (c->runtime)
		gw_runtime__remove_metrics(c->runtime, batch_metrics, b);
	b->destroyed = true;
	for (size_t i = 0; i < b->n_routes; i++) {
		struct pending *pd = b->routes[i], *next;

		for (; pd; pd = next) {
			next = pd->next;
			if (pd->p)
				gw_component_drop(c, pd->p, GW_REASON_SHUTDOWN);
			pd->p = NULL;
			uv_timer_stop(&pd->timer);
			uv_close((uv_handle_t *)&pd->timer, pending_closed);
		}
	}
	if (b->open_handles == 0) {
		free(b->routes);
		free(b);
	}
}

const struct gw_component_type gw_processor_batch = {
	.name = "batch",
	.kind = GW_PROCESSOR,
	.doc = "Merges batches (coalescing equal resources) until send_batch_size records, send_batch_max_bytes or "
	       "timeout, so exporters send fewer, larger requests.",
	.collector_note = "timeout defaults to 10s, not 200ms: fewer, larger profiles, which Pyroscope stores better",
	.config_fields = batch_fields,
	.config_size = sizeof(struct batch_config),
	.validate = batch_validate,
	.create = batch_create,
	.start = batch_start,
	.consume = batch_consume,
	.shutdown = batch_shutdown,
	.destroy = batch_destroy,
};
