/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The OpenTelemetry Collector's `extensions` section and
 * `service.extensions`, so that a Collector config loads as it is written:
 * health_check serves its endpoint, file_storage names a directory that a
 * sending_queue may point at, basicauth and headers_setter give an
 * exporter whose `auth: {authenticator: ...}` names them an Authorization
 * header or headers from each batch's metadata, pprof and zpages (Go
 * runtime pages) are accepted with a warning and do nothing.
 */
#ifndef SR_GW_EXTENSIONS_H
#define SR_GW_EXTENSIONS_H

#include <stdbool.h>
#include <stdio.h>

struct sr_diag;
struct sr_yaml_doc;
struct sr_yaml_node;

/* headers_setter's actions, as in the Collector. */
enum gw_header_action { GW_HEADER_UPSERT, GW_HEADER_INSERT, GW_HEADER_UPDATE, GW_HEADER_DELETE };

/* One header of headers_setter: key set to value, or to a metadata key's value (from_context), else default_value. */
struct gw_header_rule {
	char *key;
	char *value;
	char *from_context;
	char *default_value;
	int action; /* enum gw_header_action */
};

/* What the enabled extensions ask of the gateway. */
struct gw_extensions {
	char *health_address; /* health_check's endpoint; NULL: none */
	char *health_path;    /* its path, "/" by default */
	/* file_storage extensions by ID: a sending_queue's `storage: file_storage/x` is that directory. */
	struct gw_file_storage {
		char *id;
		char *directory;
	} * storages;
	size_t n_storages;
	/* Client authenticators by ID (basicauth, headers_setter), for an exporter's auth.authenticator. */
	struct gw_authenticator {
		char *id;
		char *header; /* basicauth: "Authorization: Basic <base64(username:password)>" */
		/* headers_setter: the headers each request gets, from its batch's metadata. */
		struct gw_header_rule *rules;
		size_t n_rules;
	} * authenticators;
	size_t n_authenticators;
};

/*
 * Loads `extensions` (root) and `service.extensions` (service). Problems go to
 * d with their positions. Returns 0, or -ENOMEM.
 */
int gw_extensions_load(struct gw_extensions *ext, const struct sr_yaml_doc *doc, const struct sr_yaml_node *root,
		       const struct sr_yaml_node *service, struct sr_diag *d);
void gw_extensions_free(struct gw_extensions *ext);

/*
 * Points every exporter's `sending_queue.storage: file_storage[/name]` at a
 * directory below that extension's, named after the exporter, before the
 * exporters' settings are read. Returns 0 or -ENOMEM.
 */
int gw_extensions_resolve_storage(const struct gw_extensions *ext, struct sr_yaml_doc *doc,
				  const struct sr_yaml_node *root, struct sr_diag *d);

/* The directory of file_storage extension id, or NULL when there is none by that ID. */
const char *gw_extensions__storage_directory(const struct gw_extensions *ext, const char *id);

/* The authenticator extension id, or NULL when there is none by that ID. */
const struct gw_authenticator *gw_extensions__authenticator(const struct gw_extensions *ext, const char *id);

/* Deep copies of n rules into *ret (calloc'd), or -ENOMEM (nothing left to free). */
int gw_header_rules_dup(const struct gw_header_rule *rules, size_t n, struct gw_header_rule **ret);
/* Frees n rules and the array; NULL is fine. */
void gw_header_rules_free(struct gw_header_rule *rules, size_t n);

/*
 * The value rule r gives a request whose batch carries metadata ("Name:
 * value\n" lines, NULL: none): value, the from_context key's value (names
 * case-insensitive), or default_value; NULL when none applies. Copied into
 * buf (size bytes, truncated).
 */
const char *gw_header_rule__value(const struct gw_header_rule *r, const char *metadata, char *buf, size_t size);

/* For --help and docs: the extensions and their keys. */
size_t gw_extensions_describe(FILE *f, bool markdown);

#endif
