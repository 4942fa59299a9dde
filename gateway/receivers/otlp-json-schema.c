/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The messages of ExportProfilesServiceRequest as the OTLP/JSON transcoder
 * sees them (otlp-json-private.h), from proto/opentelemetry/proto/...:
 * common/v1/common.proto, resource/v1/resource.proto and
 * profiles/v1development/profiles.proto (v1.10) or profiles_v1_9.proto (v1.9).
 * A field is its JSON name, proto name, number, type and nested message.
 */
#include <stddef.h>

#include "otlp-json-private.h"

#define F(json, proto, number, type, flags, msg)                                                                       \
	{                                                                                                              \
		json, proto, number, type, flags, msg                                                                  \
	}
#define MSG(var, name, table)  static const struct gw_oj_msg var = { name, table, sizeof(table) / sizeof(table[0]) }
#define ROOT(var, name, table) const struct gw_oj_msg var = { name, table, sizeof(table) / sizeof(table[0]) }

/* Mutually recursive: declared before their tables. */
static const struct gw_oj_msg m_any_value, m_key_value;

static const struct gw_oj_field f_array_value[] = {
	F("values", "values", 1, J_MESSAGE, F_REPEATED, &m_any_value),
};
MSG(m_array_value, "ArrayValue", f_array_value);

static const struct gw_oj_field f_kvlist[] = {
	F("values", "values", 1, J_MESSAGE, F_REPEATED, &m_key_value),
};
MSG(m_kvlist, "KeyValueList", f_kvlist);

static const struct gw_oj_field f_any_value[] = {
	F("stringValue", "string_value", 1, J_STRING, F_ONEOF, NULL),
	F("boolValue", "bool_value", 2, J_BOOL, F_ONEOF, NULL),
	F("intValue", "int_value", 3, J_INT64, F_ONEOF, NULL),
	F("doubleValue", "double_value", 4, J_DOUBLE, F_ONEOF, NULL),
	F("arrayValue", "array_value", 5, J_MESSAGE, F_ONEOF, &m_array_value),
	F("kvlistValue", "kvlist_value", 6, J_MESSAGE, F_ONEOF, &m_kvlist),
	F("bytesValue", "bytes_value", 7, J_BYTES, F_ONEOF, NULL),
};
static const struct gw_oj_msg m_any_value = { "AnyValue", f_any_value, 7 };

static const struct gw_oj_field f_key_value[] = {
	F("key", "key", 1, J_STRING, 0, NULL),
	F("value", "value", 2, J_MESSAGE, 0, &m_any_value),
};
static const struct gw_oj_msg m_key_value = { "KeyValue", f_key_value, 2 };

static const struct gw_oj_field f_scope[] = {
	F("name", "name", 1, J_STRING, 0, NULL),
	F("version", "version", 2, J_STRING, 0, NULL),
	F("attributes", "attributes", 3, J_MESSAGE, F_REPEATED, &m_key_value),
	F("droppedAttributesCount", "dropped_attributes_count", 4, J_UINT32, 0, NULL),
};
MSG(m_scope, "InstrumentationScope", f_scope);

static const struct gw_oj_field f_resource[] = {
	F("attributes", "attributes", 1, J_MESSAGE, F_REPEATED, &m_key_value),
	F("droppedAttributesCount", "dropped_attributes_count", 2, J_UINT32, 0, NULL),
};
MSG(m_resource, "Resource", f_resource);

static const struct gw_oj_field f_link[] = {
	F("traceId", "trace_id", 1, J_HEX, 0, NULL),
	F("spanId", "span_id", 2, J_HEX, 0, NULL),
};
MSG(m_link, "Link", f_link);

static const struct gw_oj_field f_value_type[] = {
	F("typeStrindex", "type_strindex", 1, J_INT32, 0, NULL),
	F("unitStrindex", "unit_strindex", 2, J_INT32, 0, NULL),
};
MSG(m_value_type, "ValueType", f_value_type);

static const struct gw_oj_field f_mapping[] = {
	F("memoryStart", "memory_start", 1, J_UINT64, 0, NULL),
	F("memoryLimit", "memory_limit", 2, J_UINT64, 0, NULL),
	F("fileOffset", "file_offset", 3, J_UINT64, 0, NULL),
	F("filenameStrindex", "filename_strindex", 4, J_INT32, 0, NULL),
	F("attributeIndices", "attribute_indices", 5, J_INT32, F_REPEATED, NULL),
};
MSG(m_mapping, "Mapping", f_mapping);

static const struct gw_oj_field f_stack[] = {
	F("locationIndices", "location_indices", 1, J_INT32, F_REPEATED, NULL),
};
MSG(m_stack, "Stack", f_stack);

static const struct gw_oj_field f_line[] = {
	F("functionIndex", "function_index", 1, J_INT32, 0, NULL),
	F("line", "line", 2, J_INT64, 0, NULL),
	F("column", "column", 3, J_INT64, 0, NULL),
};
MSG(m_line, "Line", f_line);

static const struct gw_oj_field f_location[] = {
	F("mappingIndex", "mapping_index", 1, J_INT32, 0, NULL),
	F("address", "address", 2, J_UINT64, 0, NULL),
	F("lines", "lines", 3, J_MESSAGE, F_REPEATED, &m_line),
	F("attributeIndices", "attribute_indices", 4, J_INT32, F_REPEATED, NULL),
};
MSG(m_location, "Location", f_location);

static const struct gw_oj_field f_function[] = {
	F("nameStrindex", "name_strindex", 1, J_INT32, 0, NULL),
	F("systemNameStrindex", "system_name_strindex", 2, J_INT32, 0, NULL),
	F("filenameStrindex", "filename_strindex", 3, J_INT32, 0, NULL),
	F("startLine", "start_line", 4, J_INT64, 0, NULL),
};
MSG(m_function, "Function", f_function);

static const struct gw_oj_field f_kvu[] = {
	F("keyStrindex", "key_strindex", 1, J_INT32, 0, NULL),
	F("value", "value", 2, J_MESSAGE, 0, &m_any_value),
	F("unitStrindex", "unit_strindex", 3, J_INT32, 0, NULL),
};
MSG(m_kvu, "KeyValueAndUnit", f_kvu);

static const struct gw_oj_field f_dictionary[] = {
	F("mappingTable", "mapping_table", 1, J_MESSAGE, F_REPEATED, &m_mapping),
	F("locationTable", "location_table", 2, J_MESSAGE, F_REPEATED, &m_location),
	F("functionTable", "function_table", 3, J_MESSAGE, F_REPEATED, &m_function),
	F("linkTable", "link_table", 4, J_MESSAGE, F_REPEATED, &m_link),
	F("stringTable", "string_table", 5, J_STRING, F_REPEATED, NULL),
	F("attributeTable", "attribute_table", 6, J_MESSAGE, F_REPEATED, &m_kvu),
	F("stackTable", "stack_table", 7, J_MESSAGE, F_REPEATED, &m_stack),
};
MSG(m_dictionary, "ProfilesDictionary", f_dictionary);

/* v1.10 (profiles.proto). */
static const struct gw_oj_field f_sample_v10[] = {
	F("stackIndex", "stack_index", 1, J_INT32, 0, NULL),
	F("attributeIndices", "attribute_indices", 2, J_INT32, F_REPEATED, NULL),
	F("linkIndex", "link_index", 3, J_INT32, 0, NULL),
	F("values", "values", 4, J_INT64, F_REPEATED, NULL),
	F("timestampsUnixNano", "timestamps_unix_nano", 5, J_FIXED64, F_REPEATED, NULL),
};
MSG(m_sample_v10, "Sample", f_sample_v10);

/* v1.9 (profiles_v1_9.proto): the same Sample fields under other numbers. */
static const struct gw_oj_field f_sample_v9[] = {
	F("stackIndex", "stack_index", 1, J_INT32, 0, NULL),
	F("values", "values", 2, J_INT64, F_REPEATED, NULL),
	F("attributeIndices", "attribute_indices", 3, J_INT32, F_REPEATED, NULL),
	F("linkIndex", "link_index", 4, J_INT32, 0, NULL),
	F("timestampsUnixNano", "timestamps_unix_nano", 5, J_FIXED64, F_REPEATED, NULL),
};
MSG(m_sample_v9, "Sample", f_sample_v9);

/* Profile and the messages above it differ between versions only in the Sample they hold. */
#define PROFILE_FIELDS(sample)                                                                                         \
	F("sampleType", "sample_type", 1, J_MESSAGE, 0, &m_value_type),                                                \
		F("samples", "samples", 2, J_MESSAGE, F_REPEATED, sample),                                             \
		F("timeUnixNano", "time_unix_nano", 3, J_FIXED64, 0, NULL),                                            \
		F("durationNano", "duration_nano", 4, J_UINT64, 0, NULL),                                              \
		F("periodType", "period_type", 5, J_MESSAGE, 0, &m_value_type),                                        \
		F("period", "period", 6, J_INT64, 0, NULL), F("profileId", "profile_id", 7, J_ID, 0, NULL),            \
		F("droppedAttributesCount", "dropped_attributes_count", 8, J_UINT32, 0, NULL),                         \
		F("originalPayloadFormat", "original_payload_format", 9, J_STRING, 0, NULL),                           \
		F("originalPayload", "original_payload", 10, J_BYTES, 0, NULL),                                        \
		F("attributeIndices", "attribute_indices", 11, J_INT32, F_REPEATED, NULL)

static const struct gw_oj_field f_profile_v10[] = { PROFILE_FIELDS(&m_sample_v10) };
MSG(m_profile_v10, "Profile", f_profile_v10);
static const struct gw_oj_field f_profile_v9[] = { PROFILE_FIELDS(&m_sample_v9) };
MSG(m_profile_v9, "Profile", f_profile_v9);

static const struct gw_oj_field f_scope_profiles_v10[] = {
	F("scope", "scope", 1, J_MESSAGE, 0, &m_scope),
	F("profiles", "profiles", 2, J_MESSAGE, F_REPEATED, &m_profile_v10),
	F("schemaUrl", "schema_url", 3, J_STRING, 0, NULL),
};
MSG(m_scope_profiles_v10, "ScopeProfiles", f_scope_profiles_v10);
static const struct gw_oj_field f_scope_profiles_v9[] = {
	F("scope", "scope", 1, J_MESSAGE, 0, &m_scope),
	F("profiles", "profiles", 2, J_MESSAGE, F_REPEATED, &m_profile_v9),
	F("schemaUrl", "schema_url", 3, J_STRING, 0, NULL),
};
MSG(m_scope_profiles_v9, "ScopeProfiles", f_scope_profiles_v9);

static const struct gw_oj_field f_resource_profiles_v10[] = {
	F("resource", "resource", 1, J_MESSAGE, 0, &m_resource),
	F("scopeProfiles", "scope_profiles", 2, J_MESSAGE, F_REPEATED, &m_scope_profiles_v10),
	F("schemaUrl", "schema_url", 3, J_STRING, 0, NULL),
};
MSG(m_resource_profiles_v10, "ResourceProfiles", f_resource_profiles_v10);
static const struct gw_oj_field f_resource_profiles_v9[] = {
	F("resource", "resource", 1, J_MESSAGE, 0, &m_resource),
	F("scopeProfiles", "scope_profiles", 2, J_MESSAGE, F_REPEATED, &m_scope_profiles_v9),
	F("schemaUrl", "schema_url", 3, J_STRING, 0, NULL),
};
MSG(m_resource_profiles_v9, "ResourceProfiles", f_resource_profiles_v9);

static const struct gw_oj_field f_request_v10[] = {
	F("resourceProfiles", "resource_profiles", 1, J_MESSAGE, F_REPEATED, &m_resource_profiles_v10),
	F("dictionary", "dictionary", 2, J_MESSAGE, 0, &m_dictionary),
};
ROOT(gw_oj_request_v10, "ExportProfilesServiceRequest", f_request_v10);
static const struct gw_oj_field f_request_v9[] = {
	F("resourceProfiles", "resource_profiles", 1, J_MESSAGE, F_REPEATED, &m_resource_profiles_v9),
	F("dictionary", "dictionary", 2, J_MESSAGE, 0, &m_dictionary),
};
ROOT(gw_oj_request_v9, "ExportProfilesServiceRequest", f_request_v9);
