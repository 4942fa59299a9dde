// SPDX-License-Identifier: Apache-2.0
/*
 * file: appends every batch to a file as an OTLP ExportProfilesServiceRequest
 * (docs/exporters.md, "file"), like the Collector's file exporter:
 *
 *   format: json   one OTLP/JSON object per line (protojson names, 64-bit
 *                  integers as strings, bytes as base64);
 *   format: proto  each request prefixed by its length (4 bytes, big endian).
 *
 * Rotated by size: when the file would exceed rotation.max_megabytes it is
 * renamed to PATH.1 (PATH.1 to PATH.2, ...), keeping rotation.max_backups.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <pb_decode.h>

#include "component.h"
#include "sr-config.h"
#include "common/config.h"
#include "core/accounting.h"
#include "core/model.h"
#include "core/runtime.h"
#include "exporthelper.h"
#include "local.h"
#include "common/log.h"
#include "common/macro.h"
#include "otlp-encode.h"
#include "common/pbwire.h"

#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb.h"

static const char *const file_formats[] = { "json", "proto", NULL };

struct file_rotation {
	uint64_t max_megabytes;
	uint64_t max_backups;
};

struct file_config {
	char *path;
	int format;
	int proto_version;
	int process_attributes;
	struct file_rotation rotation;
};

static const struct sr_field rotation_fields[] = {
	SR_FIELD_U64("max_megabytes", struct file_rotation, max_megabytes, .def = "100",
		     .doc = "Rotate before the file grows past this many MiB; 0: never.", .min = 0, .max = 1048576),
	SR_FIELD_U64("max_backups", struct file_rotation, max_backups, .def = "3",
		     .doc = "Rotated files kept (PATH.1 newest).", .min = 0, .max = 1000),
	SR_FIELD_END,
};

static const struct sr_field file_fields[] = {
	SR_FIELD_STR("path", struct file_config, path, .required = true, .doc = "The file requests are appended to."),
	SR_FIELD_ENUMERATION("format", struct file_config, format, file_formats, .def = "json",
			     .doc = "json: OTLP/JSON, one request per line; proto: length-prefixed protobuf."),
	SR_FIELD_ENUMERATION("proto_version", struct file_config, proto_version, gw_export_proto_versions,
			     .def = "1.10", .doc = "OTLP profiles version of format proto (JSON is the same in both)."),
	SR_FIELD_ENUMERATION("process_attributes", struct file_config, process_attributes, gw_export_process_attributes,
			     .def = "sample",
			     .doc = "Where process.pid, thread.id and thread.name go: none, sample or resource."),
	SR_FIELD_MAP("rotation", struct file_config, rotation, struct file_rotation, rotation_fields,
		     .doc = "Size-based rotation."),
	SR_FIELD_END,
};

/* ---- OTLP/JSON ---- */

struct js {
	struct sr_pbw *w;
};

static void jlit(struct sr_pbw *w, const char *s)
{
	sr_pbw__raw(w, s, strlen(s));
}

static void SR_PRINTF(2, 3) jf(struct sr_pbw *w, const char *fmt, ...)
{
	char buf[128];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n > 0)
		sr_pbw__raw(w, buf, (size_t)SR_MIN((size_t)n, sizeof(buf) - 1));
}

static void jstr(struct sr_pbw *w, const char *s)
{
	static const char hex[] = "0123456789abcdef";

	jlit(w, "\"");
	for (; s && *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\') {
			char e[2] = { '\\', (char)c };

			sr_pbw__raw(w, e, 2);
		} else if (c < 0x20) {
			char e[6] = { '\\', 'u', '0', '0', hex[c >> 4], hex[c & 15] };

			sr_pbw__raw(w, e, 6);
		} else {
			sr_pbw__raw(w, (const char *)&c, 1);
		}
	}
	jlit(w, "\"");
}

static void jbase64(struct sr_pbw *w, const uint8_t *p, size_t n)
{
	static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

	jlit(w, "\"");
	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) |
			     (i + 2 < n ? p[i + 2] : 0);
		char o[4] = { b64[v >> 18], b64[(v >> 12) & 63], i + 1 < n ? b64[(v >> 6) & 63] : '=',
			      i + 2 < n ? b64[v & 63] : '=' };

		sr_pbw__raw(w, o, 4);
	}
	jlit(w, "\"");
}

static void jints(struct sr_pbw *w, const char *name, const int32_t *v, pb_size_t n, bool *first)
{
	if (!n)
		return;
	jf(w, "%s\"%s\":[", *first ? "" : ",", name);
	*first = false;
	for (pb_size_t i = 0; i < n; i++)
		jf(w, "%s%" PRId32, i ? "," : "", v[i]);
	jlit(w, "]");
}

#define JFIELD_INT(w, first, name, v)                                                                                  \
	do {                                                                                                           \
		if (v) {                                                                                               \
			jf(w, "%s\"%s\":%" PRId64, *(first) ? "" : ",", name, (int64_t)(v));                           \
			*(first) = false;                                                                              \
		}                                                                                                      \
	} while (0)
/* protojson writes 64-bit integers as strings. */
#define JFIELD_I64(w, first, name, v)                                                                                  \
	do {                                                                                                           \
		if (v) {                                                                                               \
			jf(w, "%s\"%s\":\"%" PRId64 "\"", *(first) ? "" : ",", name, (int64_t)(v));                    \
			*(first) = false;                                                                              \
		}                                                                                                      \
	} while (0)
#define JFIELD_U64(w, first, name, v)                                                                                  \
	do {                                                                                                           \
		if (v) {                                                                                               \
			jf(w, "%s\"%s\":\"%" PRIu64 "\"", *(first) ? "" : ",", name, (uint64_t)(v));                   \
			*(first) = false;                                                                              \
		}                                                                                                      \
	} while (0)

static void janyvalue(struct sr_pbw *w, const opentelemetry_proto_common_v1_AnyValue *v)
{
	jlit(w, "{");
	switch (v->which_value) {
	case opentelemetry_proto_common_v1_AnyValue_string_value_tag:
		jlit(w, "\"stringValue\":");
		jstr(w, v->value.string_value ? v->value.string_value : "");
		break;
	case opentelemetry_proto_common_v1_AnyValue_bool_value_tag:
		jf(w, "\"boolValue\":%s", v->value.bool_value ? "true" : "false");
		break;
	case opentelemetry_proto_common_v1_AnyValue_int_value_tag:
		jf(w, "\"intValue\":\"%" PRId64 "\"", v->value.int_value);
		break;
	case opentelemetry_proto_common_v1_AnyValue_double_value_tag:
		jf(w, "\"doubleValue\":%.17g", v->value.double_value);
		break;
	case opentelemetry_proto_common_v1_AnyValue_bytes_value_tag:
		jlit(w, "\"bytesValue\":");
		jbase64(w, v->value.bytes_value ? v->value.bytes_value->bytes : NULL,
			v->value.bytes_value ? v->value.bytes_value->size : 0);
		break;
	default:
		break;
	}
	jlit(w, "}");
}

static void jkeyvalues(struct sr_pbw *w, const char *name, const opentelemetry_proto_common_v1_KeyValue *kv,
		       pb_size_t n, bool *first)
{
	if (!n)
		return;
	jf(w, "%s\"%s\":[", *first ? "" : ",", name);
	*first = false;
	for (pb_size_t i = 0; i < n; i++) {
		jlit(w, i ? ",{\"key\":" : "{\"key\":");
		jstr(w, kv[i].key ? kv[i].key : "");
		if (kv[i].value) {
			jlit(w, ",\"value\":");
			janyvalue(w, kv[i].value);
		}
		jlit(w, "}");
	}
	jlit(w, "]");
}

static void jvaluetype(struct sr_pbw *w, const char *name,
		       const opentelemetry_proto_profiles_v1development_ValueType *v, bool *first)
{
	bool f = true;

	jf(w, "%s\"%s\":{", *first ? "" : ",", name);
	*first = false;
	JFIELD_INT(w, &f, "typeStrindex", v->type_strindex);
	JFIELD_INT(w, &f, "unitStrindex", v->unit_strindex);
	jlit(w, "}");
}

static void jdictionary(struct sr_pbw *w, const opentelemetry_proto_profiles_v1development_ProfilesDictionary *d)
{
	jlit(w, "\"dictionary\":{\"mappingTable\":[");
	for (pb_size_t i = 0; i < d->mapping_table_count; i++) {
		const opentelemetry_proto_profiles_v1development_Mapping *m = &d->mapping_table[i];
		bool f = true;

		jlit(w, i ? ",{" : "{");
		JFIELD_U64(w, &f, "memoryStart", m->memory_start);
		JFIELD_U64(w, &f, "memoryLimit", m->memory_limit);
		JFIELD_U64(w, &f, "fileOffset", m->file_offset);
		JFIELD_INT(w, &f, "filenameStrindex", m->filename_strindex);
		jints(w, "attributeIndices", m->attribute_indices, m->attribute_indices_count, &f);
		jlit(w, "}");
	}
	jlit(w, "],\"locationTable\":[");
	for (pb_size_t i = 0; i < d->location_table_count; i++) {
		const opentelemetry_proto_profiles_v1development_Location *l = &d->location_table[i];
		bool f = true;

		jlit(w, i ? ",{" : "{");
		JFIELD_INT(w, &f, "mappingIndex", l->mapping_index);
		JFIELD_U64(w, &f, "address", l->address);
		if (l->lines_count) {
			jf(w, "%s\"lines\":[", f ? "" : ",");
			f = false;
			for (pb_size_t j = 0; j < l->lines_count; j++) {
				bool g = true;

				jlit(w, j ? ",{" : "{");
				JFIELD_INT(w, &g, "functionIndex", l->lines[j].function_index);
				JFIELD_I64(w, &g, "line", l->lines[j].line);
				JFIELD_I64(w, &g, "column", l->lines[j].column);
				jlit(w, "}");
			}
			jlit(w, "]");
		}
		jints(w, "attributeIndices", l->attribute_indices, l->attribute_indices_count, &f);
		jlit(w, "}");
	}
	jlit(w, "],\"functionTable\":[");
	for (pb_size_t i = 0; i < d->function_table_count; i++) {
		const opentelemetry_proto_profiles_v1development_Function *fn = &d->function_table[i];
		bool f = true;

		jlit(w, i ? ",{" : "{");
		JFIELD_INT(w, &f, "nameStrindex", fn->name_strindex);
		JFIELD_INT(w, &f, "systemNameStrindex", fn->system_name_strindex);
		JFIELD_INT(w, &f, "filenameStrindex", fn->filename_strindex);
		JFIELD_I64(w, &f, "startLine", fn->start_line);
		jlit(w, "}");
	}
	jlit(w, "],\"linkTable\":[");
	for (pb_size_t i = 0; i < d->link_table_count; i++)
		jlit(w, i ? ",{}" : "{}");
	jlit(w, "],\"stringTable\":[");
	for (pb_size_t i = 0; i < d->string_table_count; i++) {
		if (i)
			jlit(w, ",");
		jstr(w, d->string_table[i] ? d->string_table[i] : "");
	}
	jlit(w, "],\"attributeTable\":[");
	for (pb_size_t i = 0; i < d->attribute_table_count; i++) {
		const opentelemetry_proto_profiles_v1development_KeyValueAndUnit *a = &d->attribute_table[i];
		bool f = true;

		jlit(w, i ? ",{" : "{");
		JFIELD_INT(w, &f, "keyStrindex", a->key_strindex);
		if (a->has_value) {
			jf(w, "%s\"value\":", f ? "" : ",");
			janyvalue(w, &a->value);
			f = false;
		}
		JFIELD_INT(w, &f, "unitStrindex", a->unit_strindex);
		jlit(w, "}");
	}
	jlit(w, "],\"stackTable\":[");
	for (pb_size_t i = 0; i < d->stack_table_count; i++) {
		bool f = true;

		jlit(w, i ? ",{" : "{");
		jints(w, "locationIndices", d->stack_table[i].location_indices,
		      d->stack_table[i].location_indices_count, &f);
		jlit(w, "}");
	}
	jlit(w, "]}");
}

/* OTLP/JSON of a v1.10 request (what gw_otlp_encode made), one line. */
static int to_json(const uint8_t *req, size_t len, struct sr_pbw *w)
{
	opentelemetry_proto_collector_profiles_v1development_ExportProfilesServiceRequest r =
		opentelemetry_proto_collector_profiles_v1development_ExportProfilesServiceRequest_init_zero;
	pb_istream_t s = pb_istream_from_buffer(req, len);

	if (!pb_decode(&s, opentelemetry_proto_collector_profiles_v1development_ExportProfilesServiceRequest_fields,
		       &r))
		return -EINVAL;
	jlit(w, "{\"resourceProfiles\":[");
	for (pb_size_t i = 0; i < r.resource_profiles_count; i++) {
		const opentelemetry_proto_profiles_v1development_ResourceProfiles *rp = &r.resource_profiles[i];
		bool f = true;

		jlit(w, i ? ",{\"resource\":{" : "{\"resource\":{");
		jkeyvalues(w, "attributes", rp->resource.attributes, rp->resource.attributes_count, &f);
		jlit(w, "},\"scopeProfiles\":[");
		for (pb_size_t j = 0; j < rp->scope_profiles_count; j++) {
			const opentelemetry_proto_profiles_v1development_ScopeProfiles *sp = &rp->scope_profiles[j];
			bool g = true;

			jlit(w, j ? ",{\"scope\":{" : "{\"scope\":{");
			if (sp->scope.name) {
				jlit(w, "\"name\":");
				jstr(w, sp->scope.name);
				g = false;
			}
			if (sp->scope.version) {
				jlit(w, g ? "\"version\":" : ",\"version\":");
				jstr(w, sp->scope.version);
			}
			jlit(w, "},\"profiles\":[");
			for (pb_size_t k = 0; k < sp->profiles_count; k++) {
				const opentelemetry_proto_profiles_v1development_Profile *p = &sp->profiles[k];
				bool h = true;

				jlit(w, k ? ",{" : "{");
				jvaluetype(w, "sampleType", &p->sample_type, &h);
				jlit(w, ",\"samples\":[");
				for (pb_size_t m = 0; m < p->samples_count; m++) {
					const opentelemetry_proto_profiles_v1development_Sample *smp = &p->samples[m];
					bool q = true;

					jlit(w, m ? ",{" : "{");
					JFIELD_INT(w, &q, "stackIndex", smp->stack_index);
					jints(w, "attributeIndices", smp->attribute_indices,
					      smp->attribute_indices_count, &q);
					JFIELD_INT(w, &q, "linkIndex", smp->link_index);
					if (smp->values_count) {
						jf(w, "%s\"values\":[", q ? "" : ",");
						q = false;
						for (pb_size_t v = 0; v < smp->values_count; v++)
							jf(w, "%s\"%" PRId64 "\"", v ? "," : "", smp->values[v]);
						jlit(w, "]");
					}
					jlit(w, "}");
				}
				jlit(w, "]");
				JFIELD_U64(w, &h, "timeUnixNano", p->time_unix_nano);
				JFIELD_U64(w, &h, "durationNano", p->duration_nano);
				jvaluetype(w, "periodType", &p->period_type, &h);
				JFIELD_I64(w, &h, "period", p->period);
				jlit(w, "}");
			}
			jlit(w, "]}");
		}
		jlit(w, "]}");
	}
	jlit(w, "],");
	jdictionary(w, &r.dictionary);
	jlit(w, "}\n");
	pb_release(opentelemetry_proto_collector_profiles_v1development_ExportProfilesServiceRequest_fields, &r);
	return sr_pbw__error(w);
}

/* ---- the exporter ---- */

struct file_exporter {
	struct gw_component *c;
	const struct file_config *cfg;
	int fd;
	uint64_t size;
};

static int open_file(struct file_exporter *x)
{
	struct stat st;

	x->fd = open(x->cfg->path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (x->fd < 0)
		return -errno;
	x->size = fstat(x->fd, &st) == 0 ? (uint64_t)st.st_size : 0;
	return 0;
}

static int rotate(struct file_exporter *x)
{
	char from[4200], to[4200];
	uint64_t n = x->cfg->rotation.max_backups;

	close(x->fd);
	x->fd = -1;
	if (n == 0) {
		if (unlink(x->cfg->path) < 0 && errno != ENOENT)
			return -errno;
		return open_file(x);
	}
	snprintf(to, sizeof(to), "%s.%" PRIu64, x->cfg->path, n);
	unlink(to);
	for (uint64_t i = n; i-- > 1;) {
		snprintf(from, sizeof(from), "%s.%" PRIu64, x->cfg->path, i);
		snprintf(to, sizeof(to), "%s.%" PRIu64, x->cfg->path, i + 1);
		rename(from, to);
	}
	snprintf(to, sizeof(to), "%s.1", x->cfg->path);
	if (rename(x->cfg->path, to) < 0)
		return -errno;
	return open_file(x);
}

static int file_consume(struct gw_component *c, struct gw_profiles *p)
{
	struct file_exporter *x = c->state;
	struct gw_otlp_options o = {
		.version = x->cfg->format == 0 ? GW_OTLP_V1_10
					       : (x->cfg->proto_version == 1 ? GW_OTLP_V1_9 : GW_OTLP_V1_10),
		.process_attrs = (enum gw_otlp_process_attrs)x->cfg->process_attributes,
		.scope_version = SR_VERSION,
	};
	struct sr_pbw req = { 0 }, out = { 0 };
	uint64_t total = p->total_count, max = x->cfg->rotation.max_megabytes << 20;
	size_t written = 0;
	int r;

	if (p->n_samples == 0) {
		gw_profiles__unref(p);
		return 0;
	}
	r = gw_otlp_encode(p, &o, &req, NULL);
	if (r == 0) {
		if (x->cfg->format == 0) {
			r = to_json(req.buf, req.len, &out);
		} else {
			uint8_t len[4] = { (uint8_t)(req.len >> 24), (uint8_t)(req.len >> 16), (uint8_t)(req.len >> 8),
					   (uint8_t)req.len };

			if (sr_pbw__reserve(&out, req.len + 4)) {
				memcpy(out.buf, len, 4);
				memcpy(out.buf + 4, req.buf, req.len);
				out.len = req.len + 4;
			}
			r = sr_pbw__error(&out);
		}
	}
	if (r == 0 && max && x->size > 0 && x->size + out.len > max)
		r = rotate(x);
	if (r == 0 && x->fd < 0)
		r = open_file(x);
	if (r == 0)
		r = gw_write_all(x->fd, out.buf, out.len);
	written = out.len;
	sr_pbw__free(&req);
	sr_pbw__free(&out);
	if (r < 0) {
		sr_log_error(c->id, "could not write profiles to the file; samples dropped", "path=%s error=%s",
			     x->cfg->path, strerror(-r));
		gw_component_drop(c, p, "write_error");
		return 0;
	}
	x->size += written;
	gw_component_exported(c, total);
	gw_profiles__unref(p);
	return 0;
}

static int file_create(struct gw_component *c)
{
	struct file_exporter *x = calloc(1, sizeof(*x));

	if (!x)
		return -ENOMEM;
	x->c = c;
	x->cfg = c->config;
	x->fd = -1;
	c->state = x;
	return 0;
}

static const char *const file_drops[] = { "write_error", NULL };

static int file_start(struct gw_component *c)
{
	struct file_exporter *x = c->state;
	int r = open_file(x);

	gw_component_declare_drops(c, file_drops);
	if (r < 0)
		sr_log_error(c->id, "cannot open the output file", "path=%s error=%s", x->cfg->path, strerror(-r));
	return r;
}

static void file_shutdown(struct gw_component *c, void (*done)(struct gw_component *c))
{
	struct file_exporter *x = c->state;

	if (x->fd >= 0)
		fsync(x->fd);
	done(c);
}

static void file_destroy(struct gw_component *c)
{
	struct file_exporter *x = c->state;

	if (!x)
		return;
	if (x->fd >= 0)
		close(x->fd);
	free(x);
	c->state = NULL;
}

const struct gw_component_type gw_exporter_file = {
	.name = "file",
	.kind = GW_EXPORTER,
	.doc = "Appends every batch to a file as OTLP/JSON lines or length-prefixed OTLP protobuf, rotated by size.",
	.config_fields = file_fields,
	.config_size = sizeof(struct file_config),
	.create = file_create,
	.start = file_start,
	.consume = file_consume,
	.shutdown = file_shutdown,
	.destroy = file_destroy,
};
