#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The OTLP/JSON transcoder (gateway/receivers/otlp-json.c) checked against an
independent implementation: Python's protobuf (Debian's python3-protobuf) with
classes protoc compiles here from proto/opentelemetry.

For both proto versions (v1.9, v1.10), random ExportProfilesServiceRequests
are built from the descriptors (every field type, edge values, nested
AnyValues, Unicode), written as JSON by google.protobuf.json_format, turned
into what OTLP/JSON senders write (trace, span and profile IDs in hex; at
random: proto field names, 64-bit integers as numbers, ASCII escapes,
indentation), transcoded by tests/integration/otlp-json-driver.c, parsed back by
Python and compared with the original message.

Needs /usr/bin/python3 with python3-protobuf and protoc (scripts/install-deps);
skips (77) without them. SR_OTLP_JSON_SEED replays a run; SR_OTLP_JSON_COUNT sets
the messages per version (default 300); SR_OTLP_JSON_DUMP=DIR saves the JSON of
each (how the seed corpus of tests/fuzz/corpus/otlp-json was made).
"""
import base64
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

SKIP = 77


def skip(why):
    print("SKIP: " + why)
    sys.exit(SKIP)


driver = os.environ.get("SR_OTLP_JSON_DRIVER")
src = os.environ.get("SR_SOURCE_ROOT")
if not driver or not src:
    skip("run through meson test (SR_OTLP_JSON_DRIVER, SR_SOURCE_ROOT unset)")
if not shutil.which("protoc"):
    skip("protoc not installed (scripts/install-deps)")
try:
    from google.protobuf import descriptor as pbdesc
    from google.protobuf import json_format
except ImportError:
    skip("python3-protobuf not installed (scripts/install-deps); run with Debian's /usr/bin/python3")

tmp = tempfile.mkdtemp(prefix="sr-otlp-json-")
proto = os.path.join(src, "proto")
subprocess.run(["protoc", "-I", proto, "--python_out=" + tmp,
                "opentelemetry/proto/common/v1/common.proto",
                "opentelemetry/proto/resource/v1/resource.proto",
                "opentelemetry/proto/profiles/v1development/profiles.proto",
                "opentelemetry/proto/profiles/v1development/profiles_v1_9.proto",
                "opentelemetry/proto/collector/profiles/v1development/profiles_service.proto"], check=True)
sys.path.insert(0, tmp)
from opentelemetry.proto.collector.profiles.v1development import profiles_service_pb2  # noqa: E402
from opentelemetry.proto.profiles.v1development import profiles_v1_9_pb2  # noqa: E402

FD = pbdesc.FieldDescriptor
HEX_FIELDS = {"trace_id", "span_id", "profile_id"}
INT64_TYPES = {FD.TYPE_INT64, FD.TYPE_UINT64, FD.TYPE_FIXED64, FD.TYPE_SINT64, FD.TYPE_SFIXED64}

seed = int(os.environ.get("SR_OTLP_JSON_SEED", random.randrange(1 << 32)))
count = int(os.environ.get("SR_OTLP_JSON_COUNT", "300"))
dump_dir = os.environ.get("SR_OTLP_JSON_DUMP")
rng = random.Random(seed)
print("seed %d (SR_OTLP_JSON_SEED replays it), %d messages per version" % (seed, count))

STRINGS = ["", "a", "service.name", "quote \" backslash \\ slash /", "tab\tnewline\ncr\r\x00\x01\x1f",
           "é", "日本語", "\U0001F600 emoji", "\u2028\u2029", "x" * 300]


def rand_int(lo, hi):
    edges = [0, 1, -1, lo, hi, lo + 1, hi - 1, 127, 128, 16383, 16384, 2**31 - 1, -2**31, 2**32 - 1, 2**53 + 1]
    v = rng.choice(edges) if rng.random() < 0.5 else rng.randint(lo, hi)
    return min(max(v, lo), hi)


def rand_double():
    return rng.choice([0.0, -0.0, 1.0, -1.5, 0.1, 1e-310, 5e-324, 1.7976931348623157e308, float("inf"),
                       float("-inf"), rng.uniform(-1e12, 1e12), rng.random()])


def rand_scalar(f):
    t = f.type
    if t == FD.TYPE_STRING:
        return rng.choice(STRINGS) if rng.random() < 0.6 else "".join(
            chr(rng.choice([rng.randint(0x20, 0x7e), rng.randint(0xa0, 0xd7ff), rng.randint(0x10000, 0x10ffff)]))
            for _ in range(rng.randint(0, 12)))
    if t == FD.TYPE_BYTES:
        if f.name in ("trace_id", "profile_id"):
            return rng.randbytes(16)
        if f.name == "span_id":
            return rng.randbytes(8)
        return rng.randbytes(rng.choice([0, 1, 2, 3, 4, 5, 16, 100]))
    if t == FD.TYPE_BOOL:
        return rng.random() < 0.5
    if t == FD.TYPE_DOUBLE:
        return rand_double()
    if t == FD.TYPE_INT32:
        return rand_int(-2**31, 2**31 - 1)
    if t == FD.TYPE_UINT32:
        return rand_int(0, 2**32 - 1)
    if t == FD.TYPE_INT64:
        return rand_int(-2**63, 2**63 - 1)
    if t in (FD.TYPE_UINT64, FD.TYPE_FIXED64):
        return rand_int(0, 2**64 - 1)
    raise AssertionError("field type %d not generated (%s)" % (t, f.full_name))


def fill(msg, depth):
    d = msg.DESCRIPTOR
    oneofs_done = set()
    for f in d.fields:
        if f.containing_oneof is not None:
            if f.containing_oneof.name in oneofs_done or rng.random() < 0.6:
                continue
            oneofs_done.add(f.containing_oneof.name)
        elif rng.random() < 0.3:
            continue
        if f.type == FD.TYPE_MESSAGE:
            if depth > 5:
                continue
            if f.label == FD.LABEL_REPEATED:
                for _ in range(rng.randint(0, 4 if depth < 3 else 2)):
                    fill(getattr(msg, f.name).add(), depth + 1)
            else:
                getattr(msg, f.name).SetInParent()
                fill(getattr(msg, f.name), depth + 1)
        elif f.label == FD.LABEL_REPEATED:
            getattr(msg, f.name).extend(rand_scalar(f) for _ in range(rng.randint(0, 6)))
        else:
            setattr(msg, f.name, rand_scalar(f))


def otlp_style(obj, d):
    """json_format's output as OTLP/JSON senders write it, with the liberties the spec allows."""
    out = {}
    for key, value in obj.items():
        f = d.fields_by_camelcase_name.get(key) or d.fields_by_name[key]
        name = f.name if rng.random() < 0.2 else key
        vals = value if f.label == FD.LABEL_REPEATED else [value]
        conv = []
        for v in vals:
            if f.type == FD.TYPE_MESSAGE:
                v = otlp_style(v, f.message_type)
            elif f.name in HEX_FIELDS:
                h = base64.b64decode(v).hex()
                v = h.upper() if rng.random() < 0.3 else h
            elif f.type in INT64_TYPES and rng.random() < 0.3:
                v = int(v)
            elif f.type == FD.TYPE_BYTES and rng.random() < 0.3:
                v = base64.urlsafe_b64encode(base64.b64decode(v)).decode().rstrip("=")
            conv.append(v)
        out[name] = conv if f.label == FD.LABEL_REPEATED else conv[0]
    return out


def dump(obj):
    return json.dumps(obj, ensure_ascii=rng.random() < 0.5, indent=rng.choice([None, None, 1, "\t"]),
                      separators=rng.choice([(",", ":"), (", ", ": ")]))


def run(version, cls):
    failures = 0
    for i in range(count):
        msg = cls()
        fill(msg, 0)
        js = json_format.MessageToJson(msg, preserving_proto_field_name=rng.random() < 0.2)
        text = dump(otlp_style(json.loads(js), cls.DESCRIPTOR))
        if dump_dir:
            with open(os.path.join(dump_dir, "random-v%s-%d" % (version, i)), "w") as f:
                f.write(text)
        p = subprocess.run([driver, version], input=text.encode(), capture_output=True)
        if p.returncode != 0:
            print("FAIL v%s #%d: transcoder refused it: %s\n%s" % (version, i, p.stderr.decode(), text[:4000]))
            failures += 1
            continue
        back = cls.FromString(p.stdout)
        if back != msg:
            print("FAIL v%s #%d: the message differs\nJSON: %s\nexpected: %s\ngot: %s" % (
                version, i, text[:4000], msg, back))
            failures += 1
        if failures >= 5:
            break
    print("%s v%s: %d messages, %d failures" % ("ok" if not failures else "not ok", version, i + 1, failures))
    return failures


bad = run("1.10", profiles_service_pb2.ExportProfilesServiceRequest)
bad += run("1.9", profiles_v1_9_pb2.ExportProfilesServiceRequest)
shutil.rmtree(tmp, ignore_errors=True)
sys.exit(1 if bad else 0)
