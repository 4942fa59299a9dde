// SPDX-License-Identifier: Apache-2.0
/*
 * The config loader on arbitrary bytes: libyaml parsing, ${env:...}
 * substitution, the schema check over every field kind, the libcyaml load
 * and the free. Nothing may crash, leak or read out of bounds, whatever the
 * file says.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"

#define FUZZ_MAX_INPUT (64 * 1024)

struct inner {
	bool enabled;
	uint64_t interval_ns;
	struct sr_kv *headers;
	uint32_t n_headers;
};

struct item {
	char *name;
	char **values;
	uint32_t n_values;
	int64_t weight;
};

struct root {
	char *endpoint;
	bool flag;
	int64_t i;
	uint64_t u;
	double d;
	uint64_t duration_ns;
	uint64_t size;
	int mode;
	char **list;
	uint32_t n_list;
	struct sr_kv *map;
	uint32_t n_map;
	struct inner inner;
	struct item *items;
	uint32_t n_items;
};

static const char *const modes[] = { "a", "b", "c", NULL };

static const struct sr_field inner_fields[] = {
	SR_FIELD_BOOLEAN("enabled", struct inner, enabled, .def = "true"),
	SR_FIELD_DUR("interval", struct inner, interval_ns, .def = "1s", .max = 3600000000000LL),
	SR_FIELD_STRMAP("headers", struct inner, headers, n_headers, .max = 16),
	SR_FIELD_END,
};

static const struct sr_field item_fields[] = {
	SR_FIELD_STR("name", struct item, name, .required = true),
	SR_FIELD_STRLIST("values", struct item, values, n_values),
	SR_FIELD_I64("weight", struct item, weight, .def = "1", .min = -5, .max = 5),
	SR_FIELD_END,
};

static const struct sr_field root_fields[] = {
	SR_FIELD_STR("endpoint", struct root, endpoint, .def = "http://localhost"),
	SR_FIELD_BOOLEAN("flag", struct root, flag),
	SR_FIELD_I64("i", struct root, i),
	SR_FIELD_U64("u", struct root, u, .min = 1, .max = 1000),
	SR_FIELD_DBL("d", struct root, d),
	SR_FIELD_DUR("duration", struct root, duration_ns, .def = "10s"),
	SR_FIELD_BYTES("size", struct root, size, .def = "1MiB"),
	SR_FIELD_ENUMERATION("mode", struct root, mode, modes, .def = "b"),
	SR_FIELD_STRLIST("list", struct root, list, n_list),
	SR_FIELD_STRMAP("map", struct root, map, n_map),
	SR_FIELD_MAP("inner", struct root, inner, struct inner, inner_fields),
	SR_FIELD_MAPLIST("items", struct root, items, n_items, struct item, item_fields, .max = 64),
	SR_FIELD_END,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sr_diag *d;
	struct sr_yaml_doc *doc;
	struct root r = { 0 };

	if (size > FUZZ_MAX_INPUT)
		return 0;
	setenv("SR_FUZZ_VAR", "value", 0);
	d = sr_diag_new();
	if (!d)
		return 0;
	doc = sr_yaml_load_string("fuzz.yaml", (const char *)data, size, d);
	if (doc) {
		if (sr_config_load(doc, sr_yaml_root(doc), "", root_fields, &r, d) == 0)
			sr_config_free(root_fields, &r);
		sr_yaml_doc_free(doc);
	}
	sr_diag_free(d);
	return 0;
}
