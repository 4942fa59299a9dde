// SPDX-License-Identifier: Apache-2.0
/*
 * OTLP/JSON to protobuf (gateway/receivers/otlp-json.c): every field type in
 * both proto versions against protobuf bytes worked out by hand from the
 * encoding spec; the JSON mapping's liberties (proto names, numbers as
 * strings and strings as numbers, exponents, null, escapes, unknown fields);
 * every error with the JSON path and byte it names; and every limit.
 * Python's protobuf checks the same code on random messages in
 * tests/integration/otlp-json-protobuf.py.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "otlp-json.h"
#include "common/pbwire.h"

static char err[512];
static const enum gw_otlp_version versions[] = { GW_OTLP_V1_9, GW_OTLP_V1_10 };
static char hex[8192];

/* Transcodes json; the output as lowercase hex in `hex`, the error in `err`. */
static int tj_lim(const char *json, size_t len, enum gw_otlp_version v, const struct gw_otlp_json_limits *lim)
{
	struct sr_pbw w = { 0 };
	int r = gw_otlp_json_transcode(json, len, v, lim, &w, err, sizeof(err));

	hex[0] = '\0';
	assert_true(w.len * 2 < sizeof(hex));
	for (size_t i = 0; i < w.len; i++)
		sprintf(hex + 2 * i, "%02x", w.buf[i]);
	if (r < 0)
		assert_int_equal(w.len, 0);
	else
		assert_string_equal(err, "");
	sr_pbw__free(&w);
	return r;
}

static int tj(const char *json, enum gw_otlp_version v)
{
	return tj_lim(json, strlen(json), v, NULL);
}

/* Hex of a length-delimited field (tag byte given in hex) around body hex; lengths below 128. */
static char *len_field(const char *tag, const char *body)
{
	size_t n = strlen(body) / 2;
	char *s = malloc(strlen(body) + 8);

	assert_true(n < 128);
	sprintf(s, "%s%02zx%s", tag, n, body);
	return s;
}

/* The request that holds one Profile whose fields are profile_json, and its protobuf. */
static void check_profile(enum gw_otlp_version v, const char *profile_json, const char *profile_hex)
{
	char json[4096];
	char *p = len_field("12", profile_hex), *s = len_field("12", p), *req = len_field("0a", s);

	snprintf(json, sizeof(json), "{\"resourceProfiles\":[{\"scopeProfiles\":[{\"profiles\":[{%s}]}]}]}",
		 profile_json);
	if (tj(json, v) < 0)
		fail_msg("%s: %s", profile_json, err);
	if (strcmp(hex, req))
		fail_msg("%s: got %s, want %s", profile_json, hex, req);
	free(p), free(s), free(req);
}

/* The request whose dictionary's first attribute has the AnyValue any_json, and its protobuf. */
static void check_any(const char *any_json, const char *any_hex)
{
	char json[4096];
	char *a = len_field("12", any_hex), *kvu = len_field("32", a), *req = len_field("12", kvu);

	snprintf(json, sizeof(json), "{\"dictionary\":{\"attributeTable\":[{\"value\":%s}]}}", any_json);
	for (size_t i = 0; i < 2; i++) {
		enum gw_otlp_version v = versions[i];

		if (tj(json, v) < 0)
			fail_msg("%s: %s", any_json, err);
		if (strcmp(hex, req))
			fail_msg("%s: got %s, want %s", any_json, hex, req);
	}
	free(a), free(kvu), free(req);
}

static void check_error(enum gw_otlp_version v, const char *json, int rc, const char *want)
{
	int r = tj(json, v);

	if (r != rc || !strstr(err, want))
		fail_msg("%s: got %d \"%s\", want %d \"%s\"", json, r, err, rc, want);
}

static void test_empty(void **state)
{
	(void)state;
	assert_int_equal(tj("{}", GW_OTLP_V1_10), 0);
	assert_string_equal(hex, "");
	assert_int_equal(tj(" \t\r\n{ \n}\n", GW_OTLP_V1_9), 0);
	assert_string_equal(hex, "");
	assert_int_equal(tj("\xef\xbb\xbf{}", GW_OTLP_V1_10), 0);
	/* An empty member name, first thing in an empty writer. */
	assert_int_equal(tj("{\"\":1}", GW_OTLP_V1_10), 0);
	assert_string_equal(hex, "");
	/* Empty messages are written: a present resource is not an absent one, and indices count elements. */
	assert_int_equal(tj("{\"resourceProfiles\":[{},{\"resource\":{}}],\"dictionary\":{}}", GW_OTLP_V1_10), 0);
	assert_string_equal(hex, "0a000a020a001200");
}

/* The one message that differs: Sample's field numbers. */
static void test_sample_versions(void **state)
{
	static const char *json = "\"samples\":[{\"stackIndex\":1,\"values\":[\"5\",-3],\"attributeIndices\":[2],"
				  "\"linkIndex\":3,\"timestampsUnixNano\":[\"1\",2]}]";
	static const char *ts = "2a1001000000000000000200000000000000";

	(void)state;
	char v10[256], v9[256], *s10, *s9;

	snprintf(v10, sizeof(v10), "0801%s%s%s%s", "220b05fdffffffffffffffff01", "120102", "1803", ts);
	snprintf(v9, sizeof(v9), "0801%s%s%s%s", "120b05fdffffffffffffffff01", "1a0102", "2003", ts);
	s10 = len_field("12", v10);
	s9 = len_field("12", v9);
	check_profile(GW_OTLP_V1_10, json, s10);
	check_profile(GW_OTLP_V1_9, json, s9);
	/* Proto field names too. */
	check_profile(GW_OTLP_V1_9,
		      "\"samples\":[{\"stack_index\":1,\"values\":[\"5\",-3],\"attribute_indices\":[2],"
		      "\"link_index\":3,\"timestamps_unix_nano\":[\"1\",2]}]",
		      s9);
	free(s10), free(s9);
}

static void test_profile_scalars(void **state)
{
	(void)state;
	for (size_t i = 0; i < 2; i++) {
		enum gw_otlp_version v = versions[i];

		/* fixed64, as a string and as a number */
		check_profile(v, "\"timeUnixNano\":\"1\"", "190100000000000000");
		check_profile(v, "\"timeUnixNano\":18446744073709551615", "19ffffffffffffffff");
		/* uint64 */
		check_profile(v, "\"durationNano\":\"18446744073709551615\"", "20ffffffffffffffffff01");
		/* int64 */
		check_profile(v, "\"period\":\"-1\"", "30ffffffffffffffffff01");
		check_profile(v, "\"period\":-9223372036854775808", "3080808080808080808001");
		check_profile(v, "\"period\":\"1e3\"", "30e807");
		check_profile(v, "\"period\":10.0", "300a");
		check_profile(v, "\"period\":0.5e1", "3005");
		/* uint32 */
		check_profile(v, "\"droppedAttributesCount\":4294967295", "40ffffffff0f");
		check_profile(v, "\"droppedAttributesCount\":\"7\"", "4007");
		/* profile ID: hex, or base64 when not 32 hex digits */
		check_profile(v, "\"profileId\":\"000102030405060708090A0B0C0D0E0f\"",
			      "3a10000102030405060708090a0b0c0d0e0f");
		check_profile(v, "\"profileId\":\"AAECAwQFBgcICQoLDA0ODw==\"", "3a10000102030405060708090a0b0c0d0e0f");
		/* bytes: standard and URL-safe base64, padded or not */
		check_profile(v, "\"originalPayload\":\"AQID\"", "5203010203");
		check_profile(v, "\"originalPayload\":\"-_8\"", "5202fbff");
		check_profile(v, "\"originalPayload\":\"+/8=\"", "5202fbff");
		check_profile(v, "\"originalPayload\":\"AQ\"", "520101");
		/* string */
		check_profile(v, "\"originalPayloadFormat\":\"pprof\"", "4a057070726f66");
		/* packed int32, negative: ten bytes */
		check_profile(v, "\"attributeIndices\":[0,-1,\"2\"]", "5a0c00ffffffffffffffffff0102");
		/* messages */
		check_profile(v, "\"sampleType\":{\"typeStrindex\":1,\"unitStrindex\":2},\"periodType\":{}",
			      "0a04080110022a00");
		/* zero values are not written, null is the default, empty arrays are nothing */
		check_profile(v, "\"period\":0,\"profileId\":\"\",\"attributeIndices\":[],\"timeUnixNano\":null", "");
		/* unknown fields, of every JSON type, are skipped */
		check_profile(v, "\"x\":{\"a\":[1,-2.5e3,\"s\",true,false,null,{}]},\"period\":1,\"y\":[]", "3001");
	}
}

static void test_dictionary(void **state)
{
	(void)state;
	/* Repeated strings keep their empty elements (indices count them). */
	assert_int_equal(tj("{\"dictionary\":{\"stringTable\":[\"\",\"a\",\"\"]}}", GW_OTLP_V1_10), 0);
	assert_string_equal(hex, "12072a002a01612a00");
	/* Links: trace and span IDs in hex, either case. */
	assert_int_equal(tj("{\"dictionary\":{\"linkTable\":[{\"traceId\":\"0102030405060708090A0B0C0D0E0F10\","
			    "\"spanId\":\"a1a2a3a4a5a6a7a8\"}]}}",
			    GW_OTLP_V1_9),
			 0);
	assert_string_equal(hex, "121e221c0a100102030405060708090a0b0c0d0e0f101208a1a2a3a4a5a6a7a8");
	/* Every table, one element each. */
	assert_int_equal(
		tj("{\"dictionary\":{\"mappingTable\":[{\"memoryStart\":\"4096\",\"memoryLimit\":8192,\"fileOffset\":"
		   "\"1\","
		   "\"filenameStrindex\":1,\"attributeIndices\":[1]}],"
		   "\"locationTable\":[{\"mappingIndex\":1,\"address\":\"4660\",\"lines\":[{\"functionIndex\":1,"
		   "\"line\":\"-2\",\"column\":3}],\"attributeIndices\":[2]}],"
		   "\"functionTable\":[{\"nameStrindex\":1,\"systemNameStrindex\":2,\"filenameStrindex\":3,"
		   "\"startLine\":\"4\"}],"
		   "\"attributeTable\":[{\"keyStrindex\":1,\"unitStrindex\":2}],"
		   "\"stackTable\":[{\"locationIndices\":[1,2]}]}}",
		   GW_OTLP_V1_10),
		0);
	assert_string_equal(hex, "1240"
				 "0a0d"
				 "088020"
				 "108040"
				 "1801"
				 "2001"
				 "2a0101"
				 "1219"
				 "0801"
				 "10b424"
				 "1a0f0801"
				 "10feffffffffffffffff01"
				 "1803"
				 "220102"
				 "1a08"
				 "0801100218032004"
				 "3204"
				 "08011802"
				 "3a04"
				 "0a020102");
}

static void test_any_value(void **state)
{
	(void)state;
	/* Oneof members are written even when zero: a set oneof is not an unset one. */
	check_any("{\"stringValue\":\"\"}", "0a00");
	check_any("{\"boolValue\":false}", "1000");
	check_any("{\"boolValue\":true}", "1001");
	check_any("{\"intValue\":\"0\"}", "1800");
	check_any("{\"intValue\":-1}", "18ffffffffffffffffff01");
	check_any("{\"intValue\":\"9223372036854775807\"}", "18ffffffffffffffff7f");
	check_any("{\"doubleValue\":0}", "210000000000000000");
	check_any("{\"doubleValue\":1.5}", "21000000000000f83f");
	check_any("{\"doubleValue\":\"-2.5E-1\"}", "21000000000000d0bf");
	check_any("{\"doubleValue\":\"NaN\"}", "21000000000000f87f");
	check_any("{\"doubleValue\":\"Infinity\"}", "21000000000000f07f");
	check_any("{\"doubleValue\":\"-Infinity\"}", "21000000000000f0ff");
	check_any("{\"bytesValue\":\"\"}", "3a00");
	check_any("{\"bytes_value\":\"AA==\"}", "3a0100");
	check_any("{}", "");
	check_any("{\"intValue\":null,\"boolValue\":true}", "1001");
	/* Nested arrays and key-value lists. */
	check_any("{\"arrayValue\":{\"values\":[{\"intValue\":1},{}]}}", "2a060a0218010a00");
	check_any("{\"kvlistValue\":{\"values\":[{\"key\":\"k\",\"value\":{\"boolValue\":true}}]}}",
		  "32090a070a016b12021001");
}

static void test_strings(void **state)
{
	(void)state;
	/* Escapes, surrogate pairs, raw UTF-8. */
	check_any("{\"stringValue\":\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"}", "0a08225c2f080c0a0d09");
	check_any("{\"stringValue\":\"\\u00e9\\u0000\\ud83d\\ude00\"}", "0a07c3a900f09f9880");
	check_any("{\"stringValue\":\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"}", "0a09c3a9e282acf09f9880");
	/* Member names may be escaped too. */
	check_any("{\"string\\u0056alue\":\"a\"}", "0a0161");
}

static void test_errors(void **state)
{
	(void)state;
	const int B = -EBADMSG;
	const enum gw_otlp_version V = GW_OTLP_V1_10;

	check_error(V, "", B, "request body (byte 0): expected an object (ExportProfilesServiceRequest), got the end");
	check_error(V, "[]", B,
		    "request body (byte 0): expected an object (ExportProfilesServiceRequest), got an array");
	check_error(V, "{} x", B, "request body (byte 3): a character that starts no JSON value after the request");
	check_error(V, "{}{}", B, "an object after the request object");
	check_error(V, "{\"resourceProfiles\":[", B,
		    "resourceProfiles[0] (byte 21): expected an object (ResourceProfiles), got the end");
	check_error(V, "{\"resourceProfiles\":{}}", B, "resourceProfiles (byte 20): expected an array, got an object");
	check_error(V, "{\"resourceProfiles\":[{\"resource\":[]}]}", B,
		    "resourceProfiles[0].resource (byte 33): expected an object (Resource), got an array");
	check_error(V, "{\"resourceProfiles\":[null]}", B, "resourceProfiles[0] (byte 21): null is not a valid");
	check_error(V, "{\"resourceProfiles\":[{},]}", B, "resourceProfiles[1] (byte 24): expected an object");
	check_error(V, "{\"resourceProfiles\" []}", B, "expected ':'");
	check_error(V, "{\"a\":1,}", B, "request body (byte 7): expected a string, got a character");
	check_error(V, "{\"a\":1 \"b\":2}", B, "expected ',' or '}', got a string");
	/* The brief's example path, in v1.10's names. */
	check_error(V,
		    "{\"resourceProfiles\":[{\"scopeProfiles\":[{},{\"profiles\":[{\"samples\":[{},{},{},"
		    "{\"stackIndex\":\"x\"}]}]}]}]}",
		    B,
		    "resourceProfiles[0].scopeProfiles[1].profiles[0].samples[3].stackIndex (byte 90): \"x\" is not a "
		    "number");
	check_error(
		GW_OTLP_V1_9,
		"{\"resourceProfiles\":[{\"scopeProfiles\":[{\"profiles\":[{\"samples\":[{\"values\":[1,1.5]}]}]}]}]}",
		B,
		"resourceProfiles[0].scopeProfiles[0].profiles[0].samples[0].values[1] (byte 77): 1.5 is not an "
		"integer");
	/* Numbers out of range, of the wrong kind, malformed. */
	check_error(V, "{\"dictionary\":{\"stackTable\":[{\"locationIndices\":[2147483648]}]}}", B,
		    "dictionary.stackTable[0].locationIndices[0] (byte 49): 2147483648 is out of range for int32");
	check_error(V, "{\"dictionary\":{\"stackTable\":[{\"locationIndices\":[-2147483649]}]}}", B,
		    "out of range for int32");
	check_error(V, "{\"resource_profiles\":[{\"resource\":{\"droppedAttributesCount\":-1}}]}", B,
		    "resourceProfiles[0].resource.droppedAttributesCount (byte 60): -1 is out of range for uint32");
	check_error(V, "{\"resourceProfiles\":[{\"resource\":{\"droppedAttributesCount\":4294967296}}]}", B,
		    "out of range for uint32");
	check_error(V, "{\"dictionary\":{\"functionTable\":[{\"startLine\":\"9223372036854775808\"}]}}", B,
		    "dictionary.functionTable[0].startLine (byte 45): 9223372036854775808 is out of range for int64");
	check_error(V, "{\"dictionary\":{\"mappingTable\":[{\"memoryStart\":\"-1\"}]}}", B,
		    "-1 is out of range for uint64");
	check_error(V, "{\"dictionary\":{\"mappingTable\":[{\"memoryStart\":18446744073709551616}]}}", B,
		    "out of range for uint64");
	check_error(V, "{\"dictionary\":{\"mappingTable\":[{\"memoryStart\":1e30}]}}", B, "out of range for uint64");
	check_error(V, "{\"dictionary\":{\"mappingTable\":[{\"memoryStart\":\" 1\"}]}}", B, "\" 1\" is not a number");
	check_error(V, "{\"dictionary\":{\"mappingTable\":[{\"memoryStart\":\"0x10\"}]}}", B, "is not a number");
	check_error(V, "{\"dictionary\":{\"mappingTable\":[{\"memoryStart\":01}]}}", B, "expected ',' or '}'");
	check_error(V, "{\"dictionary\":{\"mappingTable\":[{\"memoryStart\":-}]}}", B, "invalid number");
	check_error(V, "{\"dictionary\":{\"mappingTable\":[{\"memoryStart\":1.}]}}", B, "invalid number");
	check_error(V, "{\"dictionary\":{\"mappingTable\":[{\"memoryStart\":true}]}}", B,
		    "expected a number, got a boolean");
	check_error(V, "{\"dictionary\":{\"attributeTable\":[{\"value\":{\"doubleValue\":1e400}}]}}", B,
		    "dictionary.attributeTable[0].value.doubleValue (byte 57): 1e400 is out of range for a double");
	check_error(V, "{\"dictionary\":{\"attributeTable\":[{\"value\":{\"doubleValue\":\"nan\"}}]}}", B,
		    "\"nan\" is not a number");
	check_error(V, "{\"dictionary\":{\"attributeTable\":[{\"value\":{\"boolValue\":\"true\"}}]}}", B,
		    "expected true or false, got a string");
	check_error(V, "{\"dictionary\":{\"attributeTable\":[{\"value\":{\"boolValue\":tru}}]}}", B,
		    "invalid literal (expected true)");
	/* Bytes. */
	check_error(V, "{\"dictionary\":{\"linkTable\":[{\"traceId\":\"abc\"}]}}", B,
		    "dictionary.linkTable[0].traceId (byte 39): \"abc\" is not hex");
	check_error(V, "{\"dictionary\":{\"linkTable\":[{\"spanId\":\"zz\"}]}}", B, "is not hex");
	check_error(V, "{\"dictionary\":{\"attributeTable\":[{\"value\":{\"bytesValue\":\"A\"}}]}}", B,
		    "dictionary.attributeTable[0].value.bytesValue (byte 56): \"A\" is not base64");
	check_error(V, "{\"dictionary\":{\"attributeTable\":[{\"value\":{\"bytesValue\":\"A*==\"}}]}}", B,
		    "is not base64");
	check_error(V, "{\"dictionary\":{\"attributeTable\":[{\"value\":{\"bytesValue\":\"AA=\"}}]}}", B,
		    "is not base64");
	/* Strings. */
	check_error(V, "{\"dictionary\":{\"stringTable\":[\"a\xff\"]}}", B,
		    "dictionary.stringTable[0] (byte 32): invalid UTF-8");
	check_error(V, "{\"dictionary\":{\"stringTable\":[\"\xc0\x80\"]}}", B, "invalid UTF-8");
	check_error(V, "{\"dictionary\":{\"stringTable\":[\"\xed\xa0\x80\"]}}", B, "invalid UTF-8");
	check_error(V, "{\"dictionary\":{\"stringTable\":[\"\xf4\x90\x80\x80\"]}}", B, "invalid UTF-8");
	check_error(V, "{\"dictionary\":{\"stringTable\":[\"\xe2\x82\"]}}", B, "invalid UTF-8");
	check_error(V, "{\"dictionary\":{\"stringTable\":[\"\\udc00\"]}}", B, "lone low surrogate \\udc00");
	check_error(V, "{\"dictionary\":{\"stringTable\":[\"\\ud800x\"]}}", B, "not followed by a low one");
	check_error(V, "{\"dictionary\":{\"stringTable\":[\"\\ud800\\u0041\"]}}", B, "not followed by a low one");
	check_error(V, "{\"dictionary\":{\"stringTable\":[\"\\u12\"]}}", B, "invalid \\u escape");
	check_error(V, "{\"dictionary\":{\"stringTable\":[\"\\x\"]}}", B, "invalid escape");
	check_error(V, "{\"dictionary\":{\"stringTable\":[\"a\nb\"]}}", B, "control character 0x0a in a string");
	check_error(V, "{\"dictionary\":{\"stringTable\":[\"abc", B,
		    "dictionary.stringTable[0] (byte 34): unterminated");
	check_error(V, "{\"dictionary\":{\"stringTable\":[1]}}", B, "expected a string, got a number");
	/* Fields given twice, oneofs with two members. */
	check_error(V, "{\"dictionary\":{},\"dictionary\":{}}", B,
		    "dictionary (byte 17): field given twice (as dictionary or dictionary)");
	check_error(V, "{\"dictionary\":{\"stackTable\":[],\"stack_table\":[]}}", B,
		    "dictionary.stackTable (byte 31): field given twice (as stackTable or stack_table)");
	check_error(V, "{\"dictionary\":{\"attributeTable\":[{\"value\":{\"intValue\":1,\"boolValue\":true}}]}}", B,
		    "dictionary.attributeTable[0].value.boolValue (byte 56): a second member of the oneof of AnyValue");
	/* Unknown fields are skipped, but must be JSON; their names show in paths as written. */
	check_error(V, "{\"dictionary\":{\"future\":{\"a\":[1,}}}", B,
		    "dictionary.future (byte 32): expected a value, got a character");
	check_error(V, "{\"dictionary\":{\"future\":[\"\xff\"]}}", B, "dictionary.future (byte 26): invalid UTF-8");
	/* Messages are printable UTF-8 whatever the input they quote. */
	check_error(V, "{\"dictionary\":{\"stackTable\":[{\"locationIndices\":[\"\xff\xc3\"]}]}}", B,
		    "locationIndices[0] (byte 49): \"??\" is not a number");
	check_error(V, "{\"dictionary\":{\"attributeTable\":[{\"value\":{\"bytesValue\":\"\\u00e9\\u0001\"}}]}}", B,
		    "bytesValue (byte 56): \"\xc3\xa9?\" is not base64");
	check_error(V, "{\"x\":nul}", B, "x (byte 5): invalid literal (expected null)");
	/* No such version. */
	assert_int_equal(tj("{}", (enum gw_otlp_version)11), -EINVAL);
	assert_string_equal(err, "request body (byte 0): unknown OTLP profiles version 11");
}

static void test_limits(void **state)
{
	struct gw_otlp_json_limits lim = { 0 };
	char *deep;
	size_t n;

	(void)state;
	/* Input bytes: checked before anything is read. */
	lim.max_input_bytes = 4;
	assert_int_equal(tj_lim("{}   ", strlen("{}   "), GW_OTLP_V1_10, &lim), -EMSGSIZE);
	assert_string_equal(err, "request body (byte 0): the body of 5 bytes exceeds the limit of 4");
	assert_int_equal(tj_lim("{}  ", strlen("{}  "), GW_OTLP_V1_10, &lim), 0);

	/* Nesting: the outermost object is depth 1; unknown fields count too. */
	lim = (struct gw_otlp_json_limits){ .max_depth = 3 };
	assert_int_equal(tj_lim("{\"dictionary\":{\"stackTable\":[]}}", strlen("{\"dictionary\":{\"stackTable\":[]}}"),
				GW_OTLP_V1_10, &lim),
			 0);
	check_error(GW_OTLP_V1_10, "{\"dictionary\":{\"stackTable\":[{}]}}", 0, "");
	assert_int_equal(tj_lim("{\"dictionary\":{\"stackTable\":[{}]}}",
				strlen("{\"dictionary\":{\"stackTable\":[{}]}}"), GW_OTLP_V1_10, &lim),
			 -EMSGSIZE);
	assert_string_equal(err, "dictionary.stackTable[0] (byte 29): nesting deeper than 3");
	assert_int_equal(tj_lim("{\"x\":[[[]]]}", strlen("{\"x\":[[[]]]}"), GW_OTLP_V1_10, &lim), -EMSGSIZE);
	assert_string_equal(err, "x (byte 7): nesting deeper than 3");

	/* AnyValues nest without end in the schema: the default limit stops them. */
	deep = malloc(1 << 16);
	n = (size_t)sprintf(deep, "{\"dictionary\":{\"attributeTable\":[{\"value\":");
	for (int i = 0; i < 40; i++)
		n += (size_t)sprintf(deep + n, "{\"arrayValue\":{\"values\":[");
	n += (size_t)sprintf(deep + n, "{}");
	for (int i = 0; i < 40; i++)
		n += (size_t)sprintf(deep + n, "]}}");
	n += (size_t)sprintf(deep + n, "}]}}");
	assert_int_equal(tj_lim(deep, n, GW_OTLP_V1_10, NULL), -EMSGSIZE);
	assert_non_null(strstr(err, "nesting deeper than 64"));
	assert_non_null(strstr(err, "dictionary.attributeTable[0].value.arrayValue.values[0].arrayValue.values[0]."));
	lim = (struct gw_otlp_json_limits){ .max_depth = 200 };
	assert_int_equal(tj_lim(deep, n, GW_OTLP_V1_10, &lim), 0);

	/* A depth above the cap is the cap: 600 nested arrays in an unknown field. */
	n = (size_t)sprintf(deep, "{\"x\":");
	for (int i = 0; i < 600; i++)
		deep[n++] = '[';
	for (int i = 0; i < 600; i++)
		deep[n++] = ']';
	deep[n++] = '}';
	lim = (struct gw_otlp_json_limits){ .max_depth = 100000 };
	assert_int_equal(tj_lim(deep, n, GW_OTLP_V1_10, &lim), -EMSGSIZE);
	assert_non_null(strstr(err, "nesting deeper than 512"));
	free(deep);

	/* Array elements, known and unknown arrays alike. */
	lim = (struct gw_otlp_json_limits){ .max_array_elements = 3 };
	assert_int_equal(tj_lim("{\"dictionary\":{\"stringTable\":[\"\",\"\",\"\"]}}",
				strlen("{\"dictionary\":{\"stringTable\":[\"\",\"\",\"\"]}}"), GW_OTLP_V1_10, &lim),
			 0);
	assert_int_equal(tj_lim("{\"dictionary\":{\"stringTable\":[\"\",\"\",\"\",\"\"]}}",
				strlen("{\"dictionary\":{\"stringTable\":[\"\",\"\",\"\",\"\"]}}"), GW_OTLP_V1_10,
				&lim),
			 -EMSGSIZE);
	assert_string_equal(err, "dictionary.stringTable[3] (byte 39): more than 3 array elements");
	assert_int_equal(tj_lim("{\"y\":[1,2,3,4]}", strlen("{\"y\":[1,2,3,4]}"), GW_OTLP_V1_10, &lim), -EMSGSIZE);
	assert_string_equal(err, "y (byte 12): more than 3 array elements");

	/* Output bytes, open messages counted with 5-byte length prefixes: -1 is ten bytes of int32 (a request may grow threefold). */
	lim = (struct gw_otlp_json_limits){ .max_output_bytes = 30 };
	assert_int_equal(tj_lim("{\"dictionary\":{\"stackTable\":[{\"locationIndices\":[-1]}]}}",
				strlen("{\"dictionary\":{\"stackTable\":[{\"locationIndices\":[-1]}]}}"), GW_OTLP_V1_10,
				&lim),
			 0);
	assert_int_equal(tj_lim("{\"dictionary\":{\"stackTable\":[{\"locationIndices\":[-1,-1]}]}}",
				strlen("{\"dictionary\":{\"stackTable\":[{\"locationIndices\":[-1,-1]}]}}"),
				GW_OTLP_V1_10, &lim),
			 -EMSGSIZE);
	assert_string_equal(
		err, "dictionary.stackTable[0].locationIndices[1] (byte 52): the protobuf output exceeds 30 bytes");
}

/* The output is appended to what the writer holds, and a failure leaves that as it was. */
static void test_append(void **state)
{
	struct sr_pbw w = { 0 };

	(void)state;
	sr_pbw__raw(&w, "ab", 2);
	assert_int_equal(gw_otlp_json_transcode("{\"dictionary\":{}}", 17, GW_OTLP_V1_10, NULL, &w, NULL, 0), 0);
	assert_int_equal(w.len, 4);
	assert_memory_equal(w.buf, "ab\x12\x00", 4);
	assert_int_equal(gw_otlp_json_transcode("{\"dictionary\":{\"stringTable\":[\"x\"]}", 35, GW_OTLP_V1_10, NULL,
						&w, err, sizeof(err)),
			 -EBADMSG);
	assert_int_equal(w.len, 4);
	assert_int_equal(gw_otlp_json_transcode(NULL, 0, GW_OTLP_V1_10, NULL, &w, err, 8), -EBADMSG);
	assert_int_equal(strlen(err), 7); /* cut to the buffer */
	sr_pbw__free(&w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_empty),		cmocka_unit_test(test_sample_versions),
		cmocka_unit_test(test_profile_scalars), cmocka_unit_test(test_dictionary),
		cmocka_unit_test(test_any_value),	cmocka_unit_test(test_strings),
		cmocka_unit_test(test_errors),		cmocka_unit_test(test_limits),
		cmocka_unit_test(test_append),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
