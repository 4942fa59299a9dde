// SPDX-License-Identifier: Apache-2.0
/*
 * The Collector's extensions (docs/otel-collector-migration.md). Each type's
 * keys are a field table like a component's, so unknown keys are errors with
 * their positions; the keys a Go runtime page takes are accepted and do
 * nothing, and a warning says so once per extension.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/evp.h>

#include "common/config.h"
#include "common/macro.h"
#include "gateway/extensions.h"

#define GW_MAX_EXTENSIONS 32

struct health_config {
	char *endpoint;
	char *path;
};

struct storage_config {
	char *directory;
};

struct basicauth_client {
	char *username;
	char *password;
};

struct basicauth_config {
	struct basicauth_client client_auth;
};

/* Longest username:password of a basicauth extension (a header line must stay sane). */
#define GW_BASICAUTH_MAX 4096
/* Most headers one headers_setter sets. */
#define GW_HEADERS_SETTER_MAX 32

struct hs_rule_config {
	char *key;
	char *value;
	char *from_context;
	char *default_value;
	int action;
};

struct hs_config {
	struct hs_rule_config *headers;
	uint32_t n_headers;
};

static const char *const hs_actions[] = { "upsert", "insert", "update", "delete", NULL };

static const struct sr_field health_fields[] = {
	SR_FIELD_STR("endpoint", struct health_config, endpoint, .def = "localhost:13133",
		     .doc = "host:port answering health checks: 200 once the pipelines run, 503 while "
			    "starting or shutting down."),
	SR_FIELD_STR("path", struct health_config, path, .def = "/", .doc = "The path that answers."),
	{ .key = "check_collector_pipeline",
	  .kind = SR_FIELD_EXTERNAL,
	  .doc = "Accepted and ignored (deprecated in the Collector): readiness already covers the pipelines." },
	SR_FIELD_END,
};

static const struct sr_field storage_fields[] = {
	SR_FIELD_STR("directory", struct storage_config, directory, .def = "/var/lib/otelcol/file_storage",
		     .doc = "Where a sending_queue that names this extension as its storage keeps its files (a "
			    "directory per exporter below it)."),
	{ .key = "timeout", .kind = SR_FIELD_EXTERNAL, .doc = "Accepted and ignored." },
	{ .key = "fsync", .kind = SR_FIELD_EXTERNAL, .doc = "Accepted and ignored: the disk queue always syncs." },
	{ .key = "create_directory",
	  .kind = SR_FIELD_EXTERNAL,
	  .doc = "Accepted and ignored: the directory is always created (0700)." },
	{ .key = "directory_permissions", .kind = SR_FIELD_EXTERNAL, .doc = "Accepted and ignored." },
	{ .key = "compaction", .kind = SR_FIELD_EXTERNAL, .doc = "Accepted and ignored." },
	{ .key = "recreate", .kind = SR_FIELD_EXTERNAL, .doc = "Accepted and ignored." },
	SR_FIELD_END,
};

static const struct sr_field basicauth_client_fields[] = {
	SR_FIELD_STR("username", struct basicauth_client, username, .doc = "The user name; may use ${env:NAME}."),
	SR_FIELD_STR("password", struct basicauth_client, password, .secret = true,
		     .doc = "The password; write it as ${env:NAME} or ${file:PATH}, not in the file."),
	SR_FIELD_END,
};

static const struct sr_field basicauth_fields[] = {
	SR_FIELD_MAP("client_auth", struct basicauth_config, client_auth, struct basicauth_client,
		     basicauth_client_fields,
		     .doc = "The credentials an exporter whose auth.authenticator names this extension sends "
			    "(HTTP basic authentication, as Grafana Cloud's Pyroscope takes)."),
	{ .key = "htpasswd",
	  .kind = SR_FIELD_EXTERNAL,
	  .doc = "Refused: checking clients' passwords is not offered (receivers take auth.bearer_token_file)." },
	SR_FIELD_END,
};

static const struct sr_field hs_rule_fields[] = {
	SR_FIELD_STR("key", struct hs_rule_config, key, .required = true, .doc = "The header's name."),
	SR_FIELD_STR("value", struct hs_rule_config, value, .doc = "A fixed value."),
	SR_FIELD_STR("from_context", struct hs_rule_config, from_context,
		     .doc = "The request metadata key whose value it takes: one of a batch processor's "
			    "metadata_keys (e.g. X-Scope-OrgID)."),
	SR_FIELD_STR("default_value", struct hs_rule_config, default_value,
		     .doc = "The value when the batch carries no from_context value."),
	SR_FIELD_ENUMERATION("action", struct hs_rule_config, action, hs_actions, .def = "upsert",
			     .doc = "upsert (set), insert (only where the exporter's headers do not set it), update "
				    "(only where they do) or delete (remove it)."),
	{ .key = "from_attribute",
	  .kind = SR_FIELD_EXTERNAL,
	  .doc = "Refused: authentication attributes do not exist here (use from_context)." },
	SR_FIELD_END,
};

static const struct sr_field hs_fields[] = {
	SR_FIELD_MAPLIST("headers", struct hs_config, headers, n_headers, struct hs_rule_config, hs_rule_fields,
			 .doc = "The headers set on each request of an exporter whose auth.authenticator names this "
				"extension.",
			 .min = 1, .max = GW_HEADERS_SETTER_MAX),
	SR_FIELD_END,
};

static const struct sr_field go_page_fields[] = {
	{ .key = "endpoint", .kind = SR_FIELD_EXTERNAL, .doc = "Accepted and ignored." },
	{ .key = "block_profile_fraction", .kind = SR_FIELD_EXTERNAL, .doc = "Accepted and ignored." },
	{ .key = "mutex_profile_fraction", .kind = SR_FIELD_EXTERNAL, .doc = "Accepted and ignored." },
	{ .key = "save_to_file", .kind = SR_FIELD_EXTERNAL, .doc = "Accepted and ignored." },
	SR_FIELD_END,
};

enum ext_kind { EXT_HEALTH, EXT_STORAGE, EXT_BASICAUTH, EXT_HEADERS_SETTER, EXT_GO_PAGE };

static const struct {
	const char *name;
	enum ext_kind kind;
	const struct sr_field *fields;
	const char *doc;
} ext_types[] = {
	{ "health_check", EXT_HEALTH, health_fields,
	  "The Collector's health check: a second address answering on one path (the telemetry address "
	  "has /healthz and /readyz too)." },
	{ "file_storage", EXT_STORAGE, storage_fields,
	  "A directory for the disk queue of exporters whose `sending_queue.storage` names this extension." },
	{ "basicauth", EXT_BASICAUTH, basicauth_fields,
	  "HTTP basic authentication for exporters: `auth: {authenticator: basicauth/x}` on otlp_http or otlp_grpc "
	  "sends `Authorization: Basic` with client_auth's username and password." },
	{ "headers_setter", EXT_HEADERS_SETTER, hs_fields,
	  "Request headers from the metadata a batch processor's metadata_keys keep (the tenant), for an exporter "
	  "whose `auth: {authenticator: headers_setter}` names it. Without it the exporters send those values "
	  "under their own names anyway." },
	{ "pprof", EXT_GO_PAGE, go_page_fields,
	  "Go runtime profiling pages: accepted and ignored (the gateway is not a Go program; profile it with "
	  "stackrelay-agent)." },
	{ "zpages", EXT_GO_PAGE, go_page_fields, "Go runtime pages: accepted and ignored." },
};

static int type_of(const char *id)
{
	size_t len = strcspn(id, "/");

	for (size_t i = 0; i < SR_ARRAY_SIZE(ext_types); i++)
		if (strlen(ext_types[i].name) == len && strncmp(ext_types[i].name, id, len) == 0)
			return (int)i;
	return -1;
}

/* The enabled IDs: service.extensions, each defined in `extensions`. */
static bool enabled(const struct sr_yaml_doc *doc, const struct sr_yaml_node *list, const char *id)
{
	size_t n = list && sr_yaml_node_type(doc, list) == SR_YAML_SEQUENCE ? sr_yaml_sequence_size(doc, list) : 0;

	for (size_t i = 0; i < n; i++) {
		const char *s = sr_yaml_scalar(doc, sr_yaml_sequence_item(doc, list, i));
		if (s && strcmp(s, id) == 0)
			return true;
	}
	return false;
}

static int load_one(struct gw_extensions *ext, const struct sr_yaml_doc *doc, int t, const char *id,
		    const struct sr_yaml_node *k, const struct sr_yaml_node *v, struct sr_diag *d)
{
	const char *file = sr_yaml_doc_file(doc);
	char path[192];

	snprintf(path, sizeof(path), "extensions.%s", id);
	switch (ext_types[t].kind) {
	case EXT_HEALTH: {
		struct health_config c = { 0 };
		if (sr_config_load(doc, v, path, health_fields, &c, d) < 0)
			return 0;
		if (ext->health_address) {
			sr_diag_add(d, file, sr_yaml_node_line(k), sr_yaml_node_column(k), path,
				    "a second health_check: the gateway serves one");
		} else if (!c.endpoint || !*c.endpoint || !c.path || c.path[0] != '/') {
			sr_diag_add(d, file, sr_yaml_node_line(k), sr_yaml_node_column(k), path,
				    "needs an endpoint (host:port) and a path starting with /");
		} else {
			ext->health_address = strdup(c.endpoint);
			ext->health_path = strdup(c.path);
			if (!ext->health_address || !ext->health_path) {
				sr_config_free(health_fields, &c);
				return -ENOMEM;
			}
		}
		if (sr_yaml_mapping_get(doc, v, "check_collector_pipeline"))
			sr_diag_warn(d, file, sr_yaml_node_line(k), sr_yaml_node_column(k), path,
				     "check_collector_pipeline is ignored: the health check answers 503 while the "
				     "pipelines are not running");
		sr_config_free(health_fields, &c);
		return 0;
	}
	case EXT_STORAGE: {
		struct storage_config c = { 0 };
		if (sr_config_load(doc, v, path, storage_fields, &c, d) < 0)
			return 0;
		if (!c.directory || c.directory[0] != '/') {
			sr_diag_add(d, file, sr_yaml_node_line(k), sr_yaml_node_column(k), path,
				    "directory must be an absolute path");
			sr_config_free(storage_fields, &c);
			return 0;
		}
		struct gw_file_storage *s = &ext->storages[ext->n_storages++];
		s->id = strdup(id);
		s->directory = strdup(c.directory);
		sr_config_free(storage_fields, &c);
		return s->id && s->directory ? 0 : -ENOMEM;
	}
	case EXT_BASICAUTH: {
		struct basicauth_config c = { 0 };
		const struct basicauth_client *ca = &c.client_auth;
		char *plain = NULL, *header = NULL;
		int r = 0;

		if (sr_config_load(doc, v, path, basicauth_fields, &c, d) < 0)
			return 0;
		if (sr_yaml_mapping_get(doc, v, "htpasswd")) {
			sr_diag_add(d, file, sr_yaml_node_line(k), sr_yaml_node_column(k), path,
				    "htpasswd (checking clients' passwords) is not supported: the receivers take "
				    "auth.bearer_token_file; use client_auth for exporters");
		} else if (!ca->username || !*ca->username || !ca->password) {
			sr_diag_add(d, file, sr_yaml_node_line(k), sr_yaml_node_column(k), path,
				    "needs client_auth.username and client_auth.password");
		} else if (strchr(ca->username, ':') ||
			   strlen(ca->username) + strlen(ca->password) > GW_BASICAUTH_MAX) {
			sr_diag_add(d, file, sr_yaml_node_line(k), sr_yaml_node_column(k), path,
				    "client_auth.username may not contain ':', and username and password together are "
				    "at most %d bytes",
				    GW_BASICAUTH_MAX);
		} else if (asprintf(&plain, "%s:%s", ca->username, ca->password) < 0) {
			plain = NULL;
			r = -ENOMEM;
		} else {
			size_t n = strlen(plain);
			header = malloc(sizeof("Authorization: Basic ") + 4 * ((n + 2) / 3) + 1);
			if (!header) {
				r = -ENOMEM;
			} else {
				struct gw_authenticator *a = &ext->authenticators[ext->n_authenticators];
				int w = (int)strlen(strcpy(header, "Authorization: Basic "));
				EVP_EncodeBlock((unsigned char *)header + w, (const unsigned char *)plain, (int)n);
				a->id = strdup(id);
				a->header = header;
				header = NULL;
				ext->n_authenticators++;
				if (!a->id)
					r = -ENOMEM;
			}
		}
		if (plain)
			explicit_bzero(plain, strlen(plain));
		free(plain);
		free(header);
		sr_config_free(basicauth_fields, &c);
		return r;
	}
	case EXT_HEADERS_SETTER: {
		struct hs_config c = { 0 };
		struct gw_authenticator *a = &ext->authenticators[ext->n_authenticators];
		int r = 0;

		if (sr_config_load(doc, v, path, hs_fields, &c, d) < 0)
			return 0;
		const struct sr_yaml_node *list = sr_yaml_mapping_get(doc, v, "headers");
		for (uint32_t i = 0; i < c.n_headers; i++) {
			const struct hs_rule_config *h = &c.headers[i];
			if (sr_yaml_mapping_get(doc, sr_yaml_sequence_item(doc, list, i), "from_attribute")) {
				sr_diag_add(d, file, sr_yaml_node_line(k), sr_yaml_node_column(k), path,
					    "headers[%u].from_attribute is not supported: there are no authentication "
					    "attributes here; use from_context",
					    i);
				goto out_hs;
			}
			if (h->action != GW_HEADER_DELETE && !!h->value == !!h->from_context) {
				sr_diag_add(d, file, sr_yaml_node_line(k), sr_yaml_node_column(k), path,
					    "headers[%u] (%s): set one of value and from_context", i, h->key);
				goto out_hs;
			}
			if (strpbrk(h->key, ": \t\r\n") || (h->value && strpbrk(h->value, "\r\n")) ||
			    (h->default_value && strpbrk(h->default_value, "\r\n"))) {
				sr_diag_add(
					d, file, sr_yaml_node_line(k), sr_yaml_node_column(k), path,
					"headers[%u]: a header name without ':' or blanks, values without line breaks",
					i);
				goto out_hs;
			}
		}
		/* The config's strings, then copies the extension owns. */
		struct gw_header_rule view[GW_HEADERS_SETTER_MAX];
		for (uint32_t i = 0; i < c.n_headers; i++)
			view[i] = (struct gw_header_rule){ .key = c.headers[i].key,
							   .value = c.headers[i].value,
							   .from_context = c.headers[i].from_context,
							   .default_value = c.headers[i].default_value,
							   .action = c.headers[i].action };
		a->id = strdup(id);
		if (!a->id || gw_header_rules_dup(view, c.n_headers, &a->rules) < 0) {
			free(a->id);
			a->id = NULL;
			r = -ENOMEM;
			goto out_hs;
		}
		a->n_rules = c.n_headers;
		ext->n_authenticators++;
	out_hs:
		sr_config_free(hs_fields, &c);
		return r;
	}
	case EXT_GO_PAGE: {
		char ignored[8];
		sr_config_load(doc, v, path, go_page_fields, ignored, d);
		sr_diag_warn(d, file, sr_yaml_node_line(k), sr_yaml_node_column(k), path,
			     "ignored: %s serves Go runtime pages, and the gateway is not a Go program",
			     ext_types[t].name);
		return 0;
	}
	}
	return 0;
}

int gw_extensions_load(struct gw_extensions *ext, const struct sr_yaml_doc *doc, const struct sr_yaml_node *root,
		       const struct sr_yaml_node *service, struct sr_diag *d)
{
	const char *file = sr_yaml_doc_file(doc);
	const struct sr_yaml_node *sec = sr_yaml_mapping_get(doc, root, "extensions");
	const struct sr_yaml_node *list = service ? sr_yaml_mapping_get(doc, service, "extensions") : NULL;
	size_t n = 0;
	int r;

	if (list && !sr_yaml_is_null(doc, list) && sr_yaml_node_type(doc, list) != SR_YAML_SEQUENCE) {
		sr_diag_add(d, file, sr_yaml_node_line(list), sr_yaml_node_column(list), "service.extensions",
			    "expected a list of extension IDs");
		list = NULL;
	}
	if (sec && !sr_yaml_is_null(doc, sec)) {
		if (sr_yaml_node_type(doc, sec) != SR_YAML_MAPPING) {
			sr_diag_add(d, file, sr_yaml_node_line(sec), sr_yaml_node_column(sec), "extensions",
				    "expected a mapping of extension IDs to their settings");
			return 0;
		}
		n = sr_yaml_mapping_size(doc, sec);
		if (n > GW_MAX_EXTENSIONS) {
			sr_diag_add(d, file, sr_yaml_node_line(sec), sr_yaml_node_column(sec), "extensions",
				    "%zu extensions, more than the %d allowed", n, GW_MAX_EXTENSIONS);
			return 0;
		}
		ext->storages = calloc(n ? n : 1, sizeof(*ext->storages));
		ext->authenticators = calloc(n ? n : 1, sizeof(*ext->authenticators));
		if (!ext->storages || !ext->authenticators)
			return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		const struct sr_yaml_node *k, *v;
		sr_yaml_mapping_pair(doc, sec, i, &k, &v);
		const char *id = sr_yaml_scalar(doc, k);
		int t = id ? type_of(id) : -1;
		if (t < 0) {
			sr_diag_add(d, file, sr_yaml_node_line(k), sr_yaml_node_column(k), "extensions",
				    "unknown extension type \"%.*s\" (known: health_check, file_storage, basicauth, "
				    "headers_setter, pprof, zpages)",
				    id ? (int)strcspn(id, "/") : 1, id ? id : "?");
			continue;
		}
		/* The Collector starts only the extensions service.extensions lists. */
		if (!enabled(doc, list, id)) {
			sr_diag_warn(d, file, sr_yaml_node_line(k), sr_yaml_node_column(k), "extensions",
				     "extension \"%s\" is configured but service.extensions does not list it", id);
			if (ext_types[t].kind != EXT_STORAGE && ext_types[t].kind != EXT_BASICAUTH &&
			    ext_types[t].kind != EXT_HEADERS_SETTER)
				continue;
		}
		r = load_one(ext, doc, t, id, k, v, d);
		if (r < 0)
			return r;
	}
	size_t m = list && !sr_yaml_is_null(doc, list) ? sr_yaml_sequence_size(doc, list) : 0;
	for (size_t i = 0; i < m; i++) {
		const struct sr_yaml_node *item = sr_yaml_sequence_item(doc, list, i);
		const char *id = sr_yaml_scalar(doc, item);
		if (!id || !sec || !sr_yaml_mapping_get(doc, sec, id))
			sr_diag_add(d, file, sr_yaml_node_line(item), sr_yaml_node_column(item), "service.extensions",
				    "extension \"%s\" is not defined in extensions", id ? id : "?");
	}
	return 0;
}

int gw_extensions_resolve_storage(const struct gw_extensions *ext, struct sr_yaml_doc *doc,
				  const struct sr_yaml_node *root, struct sr_diag *d)
{
	const char *file = sr_yaml_doc_file(doc);
	const struct sr_yaml_node *sec = sr_yaml_mapping_get(doc, root, "exporters");
	size_t n = sec && sr_yaml_node_type(doc, sec) == SR_YAML_MAPPING ? sr_yaml_mapping_size(doc, sec) : 0;

	for (size_t i = 0; i < n; i++) {
		const struct sr_yaml_node *k, *v, *q, *st;
		sr_yaml_mapping_pair(doc, sec, i, &k, &v);
		const char *exporter = sr_yaml_scalar(doc, k), *name;
		q = v && sr_yaml_node_type(doc, v) == SR_YAML_MAPPING ? sr_yaml_mapping_get(doc, v, "sending_queue")
								      : NULL;
		st = q && sr_yaml_node_type(doc, q) == SR_YAML_MAPPING ? sr_yaml_mapping_get(doc, q, "storage") : NULL;
		name = st ? sr_yaml_scalar(doc, st) : NULL;
		if (!exporter || !name || name[0] == '/' || type_of(name) < 0)
			continue;
		const char *dir = gw_extensions__storage_directory(ext, name);
		char path[4096], sub[192];
		if (ext_types[type_of(name)].kind != EXT_STORAGE || !dir) {
			sr_diag_add(d, file, sr_yaml_node_line(st), sr_yaml_node_column(st), "exporters",
				    "%s: sending_queue.storage names extension \"%s\", which is %s", exporter, name,
				    ext_types[type_of(name)].kind != EXT_STORAGE ? "not a file_storage extension"
										 : "not defined in extensions");
			/* Said once here; the exporter's own check would call it a relative path. */
			if (sr_yaml_set_scalar(doc, st, "") < 0)
				return -ENOMEM;
			continue;
		}
		/* One directory per exporter below the extension's, as the Collector keeps one file each. */
		snprintf(sub, sizeof(sub), "%s", exporter);
		for (char *c = sub; *c; c++)
			if (*c == '/')
				*c = '_';
		if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, sub) >= sizeof(path))
			continue;
		if (sr_yaml_set_scalar(doc, st, path) < 0)
			return -ENOMEM;
	}
	return 0;
}

void gw_extensions_free(struct gw_extensions *ext)
{
	if (!ext)
		return;
	free(ext->health_address);
	free(ext->health_path);
	for (size_t i = 0; i < ext->n_storages; i++) {
		free(ext->storages[i].id);
		free(ext->storages[i].directory);
	}
	free(ext->storages);
	for (size_t i = 0; i < ext->n_authenticators; i++) {
		free(ext->authenticators[i].id);
		if (ext->authenticators[i].header)
			explicit_bzero(ext->authenticators[i].header, strlen(ext->authenticators[i].header));
		free(ext->authenticators[i].header);
		gw_header_rules_free(ext->authenticators[i].rules, ext->authenticators[i].n_rules);
	}
	free(ext->authenticators);
	memset(ext, 0, sizeof(*ext));
}

const char *gw_extensions__storage_directory(const struct gw_extensions *ext, const char *id)
{
	for (size_t i = 0; ext && i < ext->n_storages; i++)
		if (strcmp(ext->storages[i].id, id) == 0)
			return ext->storages[i].directory;
	return NULL;
}

const struct gw_authenticator *gw_extensions__authenticator(const struct gw_extensions *ext, const char *id)
{
	for (size_t i = 0; ext && i < ext->n_authenticators; i++)
		if (strcmp(ext->authenticators[i].id, id) == 0)
			return &ext->authenticators[i];
	return NULL;
}

void gw_header_rules_free(struct gw_header_rule *rules, size_t n)
{
	for (size_t i = 0; rules && i < n; i++) {
		free(rules[i].key);
		free(rules[i].value);
		free(rules[i].from_context);
		free(rules[i].default_value);
	}
	free(rules);
}

int gw_header_rules_dup(const struct gw_header_rule *rules, size_t n, struct gw_header_rule **ret)
{
	struct gw_header_rule *out = calloc(n ? n : 1, sizeof(*out));

	if (!out)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const struct gw_header_rule *from = &rules[i];
		struct gw_header_rule *to = &out[i];

		to->action = from->action;
		to->key = strdup(from->key);
		to->value = from->value ? strdup(from->value) : NULL;
		to->from_context = from->from_context ? strdup(from->from_context) : NULL;
		to->default_value = from->default_value ? strdup(from->default_value) : NULL;
		if (!to->key || (from->value && !to->value) || (from->from_context && !to->from_context) ||
		    (from->default_value && !to->default_value)) {
			gw_header_rules_free(out, i + 1);
			return -ENOMEM;
		}
	}
	*ret = out;
	return 0;
}

const char *gw_header_rule__value(const struct gw_header_rule *r, const char *metadata, char *buf, size_t size)
{
	const char *v = r->value;
	size_t n = v ? strlen(v) : 0;

	if (!v && r->from_context) {
		size_t kl = strlen(r->from_context);
		for (const char *line = metadata ? metadata : ""; *line && !v;) {
			const char *end = strchr(line, '\n');
			size_t ll = end ? (size_t)(end - line) : strlen(line);
			if (ll > kl && strncasecmp(line, r->from_context, kl) == 0 && line[kl] == ':') {
				v = line + kl + 1;
				n = ll - kl - 1;
				while (n && *v == ' ') {
					v++;
					n--;
				}
			}
			line += ll + (end ? 1 : 0);
		}
	}
	if (!v) {
		v = r->default_value;
		if (!v)
			return NULL;
		n = strlen(v);
	}
	snprintf(buf, size, "%.*s", (int)n, v);
	return buf;
}

size_t gw_extensions_describe(FILE *f, bool markdown)
{
	size_t unchecked = 0;

	for (size_t i = 0; i < SR_ARRAY_SIZE(ext_types); i++) {
		char prefix[64];
		snprintf(prefix, sizeof(prefix), "extensions.%s", ext_types[i].name);
		if (markdown) {
			fprintf(f, "\n### `%s` (extension)\n\n%s\n\n", ext_types[i].name, ext_types[i].doc);
			fprintf(f, "| key | type | default | description |\n|---|---|---|---|\n");
		} else {
			fprintf(f, "\nextension %s\n", ext_types[i].name);
		}
		unchecked += sr_config_describe(ext_types[i].fields, prefix, markdown, f);
	}
	return unchecked;
}
