#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A fake Grafana Pyroscope OTLP profiles receiver, for tests.

Independent of stackrelay's code: Python's standard library only, its own
protobuf reader, and the OTLP field numbers of the specification (v1.10.0,
or v1.9.0 with --proto-version 1.9, which differ only in Sample). It applies
the checks of Pyroscope's OTLP handler:

  - POST <path> (default /v1development/profiles) only;
  - Content-Type exactly application/x-protobuf, else 415;
  - Content-Encoding gzip allowed;
  - the dictionary present, mapping_table[0] present, every index in bounds;
  - each profile one of the two types stackrelay sends, as Pyroscope's OTLP
    conversion names them (pkg/ingester/otlp/convert.go): process_cpu
    (sample type samples/count, period type cpu/nanoseconds, period > 0) or
    off_cpu (the single sample type off_cpu/nanoseconds, no period type or
    period 0; values are nanoseconds).
A request that fails a check gets 400 with the reason in the body.

It can be scripted (--script, comma-separated, one entry per request, then
200 for ever): 200, 400, 401, 413, 429, 500, 502, 503, 504 (an optional
":SECONDS" adds Retry-After SECONDS; "503:date:SECONDS" gives it as an HTTP
date), "slow:SECONDS" (answer 200 that late), "hold" (answer 200 once a
POST /release arrives, or after 120 s: for tests that need a request in
flight until they say so, whatever the load), "reset" (close the connection
with a TCP RST, no response), "partial:N" (200 with partial_success
rejected_profiles=N). --max-body-bytes answers 413 to bigger bodies, as
Pyroscope's body limit does.

What was delivered is recorded per sample: the key is the sample's stack as
function names (or addresses) joined with ";" plus its sample attributes,
and the resource's service.name. GET /stats returns JSON: requests, statuses,
accepted samples (sum of CPU values), per-key sums, off-CPU nanoseconds
(total and per key), every validation error, and the decoded shapes of the
last request (for tests of the encoding).

Each accepted request's X-Scope-OrgID (the tenant) and Authorization are
recorded too: /stats "tenants" maps each tenant ("" without the header) to
its requests and samples, "auth" lists the Authorization values seen.

With --tls-cert and --tls-key it serves HTTPS (HTTP/1.1) instead;
--tls-max-version 1.2 caps the TLS version it offers.

Usage: fake_pyroscope.py --port-file FILE [--port 0] [--script ...]
Stops on SIGTERM/SIGINT, on POST /quit, or after --lifetime seconds.
POST /release lets every held request ("hold") go.
"""

import argparse
import email.utils
import gzip
import json
import os
import signal
import socket
import ssl
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# ---- protobuf wire format ----


class DecodeError(Exception):
    pass


def read_varint(b, i):
    v = 0
    shift = 0
    while True:
        if i >= len(b):
            raise DecodeError("truncated varint")
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        if not c & 0x80:
            return v, i
        shift += 7
        if shift >= 70:
            raise DecodeError("varint too long")


def fields(b):
    """Yields (number, wire_type, value) of a message; LEN values are bytes."""
    i = 0
    while i < len(b):
        key, i = read_varint(b, i)
        num, wt = key >> 3, key & 7
        if num == 0:
            raise DecodeError("field number 0")
        if wt == 0:
            v, i = read_varint(b, i)
        elif wt == 1:
            if i + 8 > len(b):
                raise DecodeError("truncated fixed64")
            v = struct.unpack_from("<Q", b, i)[0]
            i += 8
        elif wt == 2:
            n, i = read_varint(b, i)
            if i + n > len(b):
                raise DecodeError("truncated length-delimited field")
            v = bytes(b[i:i + n])
            i += n
        elif wt == 5:
            if i + 4 > len(b):
                raise DecodeError("truncated fixed32")
            v = struct.unpack_from("<I", b, i)[0]
            i += 4
        else:
            raise DecodeError("wire type %d" % wt)
        yield num, wt, v


def to_signed(v, bits=64):
    if v >= 1 << (bits - 1):
        v -= 1 << 64
    return v


def msg(b, spec):
    """Decodes b by spec {number: (name, kind)}; kinds: int, uint, fixed64, double, bool, string, bytes,
    ints (repeated packed or not), fixed64s, strings, msg:SPEC, msgs:SPEC (repeated)."""
    out = {}
    for name, kind in spec.values():
        if kind.startswith("msgs") or kind in ("ints", "fixed64s", "strings"):
            out[name] = []
    for num, wt, v in fields(b):
        if num not in spec:
            continue
        name, kind = spec[num]
        if kind in ("int", "uint", "bool"):
            if wt != 0:
                raise DecodeError("%s: wire type %d" % (name, wt))
            out[name] = to_signed(v) if kind == "int" else (bool(v) if kind == "bool" else v)
        elif kind == "fixed64":
            if wt != 1:
                raise DecodeError("%s: wire type %d" % (name, wt))
            out[name] = v
        elif kind == "double":
            out[name] = struct.unpack("<d", struct.pack("<Q", v))[0]
        elif kind in ("string", "bytes"):
            if wt != 2:
                raise DecodeError("%s: wire type %d" % (name, wt))
            out[name] = v.decode("utf-8") if kind == "string" else v
        elif kind == "strings":
            out[name].append(v.decode("utf-8"))
        elif kind == "ints":
            if wt == 2:
                j = 0
                while j < len(v):
                    x, j = read_varint(v, j)
                    out[name].append(to_signed(x))
            elif wt == 0:
                out[name].append(to_signed(v))
            else:
                raise DecodeError("%s: wire type %d" % (name, wt))
        elif kind == "fixed64s":
            if wt == 2:
                out[name].extend(struct.unpack("<%dQ" % (len(v) // 8), v))
            else:
                out[name].append(v)
        elif kind.startswith("msgs:"):
            out[name].append(msg(v, SPECS[kind[5:]]))
        elif kind.startswith("msg:"):
            out[name] = msg(v, SPECS[kind[4:]])
    return out


# Field numbers from the OTLP specification (opentelemetry-proto v1.10.0 / v1.9.0).
SPECS = {
    "AnyValue": {1: ("string_value", "string"), 2: ("bool_value", "bool"), 3: ("int_value", "int"),
                 4: ("double_value", "double"), 7: ("bytes_value", "bytes")},
    "KeyValue": {1: ("key", "string"), 2: ("value", "msg:AnyValue")},
    "Resource": {1: ("attributes", "msgs:KeyValue"), 2: ("dropped_attributes_count", "uint")},
    "Scope": {1: ("name", "string"), 2: ("version", "string"), 3: ("attributes", "msgs:KeyValue")},
    "Request": {1: ("resource_profiles", "msgs:ResourceProfiles"), 2: ("dictionary", "msg:Dictionary")},
    "Dictionary": {1: ("mapping_table", "msgs:Mapping"), 2: ("location_table", "msgs:Location"),
                   3: ("function_table", "msgs:Function"), 4: ("link_table", "msgs:Link"),
                   5: ("string_table", "strings"), 6: ("attribute_table", "msgs:KeyValueAndUnit"),
                   7: ("stack_table", "msgs:Stack")},
    "ResourceProfiles": {1: ("resource", "msg:Resource"), 2: ("scope_profiles", "msgs:ScopeProfiles"),
                         3: ("schema_url", "string")},
    "ScopeProfiles": {1: ("scope", "msg:Scope"), 2: ("profiles", "msgs:Profile"), 3: ("schema_url", "string")},
    "Profile": {1: ("sample_type", "msg:ValueType"), 2: ("samples", "msgs:Sample"),
                3: ("time_unix_nano", "fixed64"), 4: ("duration_nano", "uint"), 5: ("period_type", "msg:ValueType"),
                6: ("period", "int"), 7: ("profile_id", "bytes"), 8: ("dropped_attributes_count", "uint"),
                9: ("original_payload_format", "string"), 10: ("original_payload", "bytes"),
                11: ("attribute_indices", "ints")},
    "ValueType": {1: ("type_strindex", "int"), 2: ("unit_strindex", "int")},
    "Sample": None,  # per version, below
    "Mapping": {1: ("memory_start", "uint"), 2: ("memory_limit", "uint"), 3: ("file_offset", "uint"),
                4: ("filename_strindex", "int"), 5: ("attribute_indices", "ints")},
    "Location": {1: ("mapping_index", "int"), 2: ("address", "uint"), 3: ("lines", "msgs:Line"),
                 4: ("attribute_indices", "ints")},
    "Line": {1: ("function_index", "int"), 2: ("line", "int"), 3: ("column", "int")},
    "Function": {1: ("name_strindex", "int"), 2: ("system_name_strindex", "int"), 3: ("filename_strindex", "int"),
                 4: ("start_line", "int")},
    "Link": {1: ("trace_id", "bytes"), 2: ("span_id", "bytes")},
    "KeyValueAndUnit": {1: ("key_strindex", "int"), 2: ("value", "msg:AnyValue"), 3: ("unit_strindex", "int")},
    "Stack": {1: ("location_indices", "ints")},
    "Response": {1: ("partial_success", "msg:PartialSuccess")},
}
SAMPLE_V1_10 = {1: ("stack_index", "int"), 2: ("attribute_indices", "ints"), 3: ("link_index", "int"),
                4: ("values", "ints"), 5: ("timestamps_unix_nano", "fixed64s")}
SAMPLE_V1_9 = {1: ("stack_index", "int"), 2: ("values", "ints"), 3: ("attribute_indices", "ints"),
               4: ("link_index", "int"), 5: ("timestamps_unix_nano", "fixed64s")}


def encode_varint(v):
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def encode_partial_success(rejected, message):
    ps = b""
    if rejected:
        ps += b"\x08" + encode_varint(rejected)
    if message:
        m = message.encode()
        ps += b"\x12" + encode_varint(len(m)) + m
    return b"\x0a" + encode_varint(len(ps)) + ps


# ---- Pyroscope's checks ----


class Invalid(Exception):
    pass


def any_value(v):
    if v is None:
        return None
    for k in ("string_value", "int_value", "bool_value", "double_value", "bytes_value"):
        if k in v:
            return v[k]
    return None


def validate_and_flatten(req):
    """Applies Pyroscope's rules; returns (records, shapes). records: list of (key, value, profile type)."""
    d = req.get("dictionary")
    if d is None:
        raise Invalid("missing dictionary")
    strings = d["string_table"]
    if not strings or strings[0] != "":
        raise Invalid("string_table[0] must be the empty string")
    if not d["mapping_table"]:
        raise Invalid("mapping_table[0] is missing")
    for name in ("location_table", "function_table", "stack_table", "attribute_table"):
        if not d[name]:
            raise Invalid("%s[0] is missing" % name)

    def s(i, what):
        if not 0 <= i < len(strings):
            raise Invalid("%s: string index %d out of bounds (%d strings)" % (what, i, len(strings)))
        return strings[i]

    def check(i, table, what):
        if not 0 <= i < len(d[table]):
            raise Invalid("%s: index %d out of bounds of %s (%d)" % (what, i, table, len(d[table])))
        return d[table][i]

    for i, m in enumerate(d["mapping_table"]):
        s(m.get("filename_strindex", 0), "mapping %d filename" % i)
        for a in m["attribute_indices"]:
            check(a, "attribute_table", "mapping %d attribute" % i)
    for i, f in enumerate(d["function_table"]):
        for k in ("name_strindex", "system_name_strindex", "filename_strindex"):
            s(f.get(k, 0), "function %d %s" % (i, k))
    for i, loc in enumerate(d["location_table"]):
        check(loc.get("mapping_index", 0), "mapping_table", "location %d" % i)
        for ln in loc["lines"]:
            check(ln.get("function_index", 0), "function_table", "location %d line" % i)
    for i, st in enumerate(d["stack_table"]):
        for li in st["location_indices"]:
            check(li, "location_table", "stack %d" % i)
    for i, a in enumerate(d["attribute_table"]):
        s(a.get("key_strindex", 0), "attribute %d key" % i)

    def frame_names(stack_index):
        names = []
        for li in check(stack_index, "stack_table", "sample")["location_indices"]:
            loc = d["location_table"][li]
            if loc["lines"]:
                for ln in loc["lines"]:
                    names.append(strings[d["function_table"][ln.get("function_index", 0)].get("name_strindex", 0)])
            else:
                m = d["mapping_table"][loc.get("mapping_index", 0)]
                names.append("%s+0x%x" % (strings[m.get("filename_strindex", 0)], loc.get("address", 0)))
        return names

    records = []
    shapes = {"resources": [], "dictionary": {k: len(v) for k, v in d.items() if isinstance(v, list)},
              "mapping_build_ids": []}
    for m in d["mapping_table"]:
        for a in m["attribute_indices"]:
            kv = d["attribute_table"][a]
            shapes["mapping_build_ids"].append(
                [strings[m.get("filename_strindex", 0)], s(kv.get("key_strindex", 0), "attr"),
                 any_value(kv.get("value"))])
    for rp in req["resource_profiles"]:
        rattrs = {kv["key"]: any_value(kv.get("value")) for kv in rp.get("resource", {}).get("attributes", [])}
        service = rattrs.get("service.name") or "unknown_service:%s" % rattrs.get("process.executable.name", "")
        rshape = {"attributes": rattrs, "profiles": []}
        shapes["resources"].append(rshape)
        for sp in rp["scope_profiles"]:
            for p in sp["profiles"]:
                st = p.get("sample_type")
                pt = p.get("period_type")
                if st is None:
                    raise Invalid("sample_type is required")
                stype = (s(st.get("type_strindex", 0), "sample_type"), s(st.get("unit_strindex", 0), "sample_type"))
                ptype = None
                if pt is not None:
                    ptype = (s(pt.get("type_strindex", 0), "period_type"),
                             s(pt.get("unit_strindex", 0), "period_type"))
                # Pyroscope ignores a period type without a period.
                if stype == ("off_cpu", "nanoseconds") and (ptype is None or p.get("period", 0) == 0):
                    ptname = "off_cpu"
                elif stype == ("samples", "count"):
                    if ptype != ("cpu", "nanoseconds"):
                        raise Invalid("period type %s, want cpu/nanoseconds" % ("/".join(ptype) if ptype else "none"))
                    if p.get("period", 0) <= 0:
                        raise Invalid("period must be > 0")
                    ptname = "process_cpu"
                else:
                    raise Invalid("sample type %s/%s, want samples/count (CPU) or off_cpu/nanoseconds "
                                  "without a period (off-CPU)" % stype)
                pshape = {"period": p.get("period", 0), "time_unix_nano": p.get("time_unix_nano", 0),
                          "duration_nano": p.get("duration_nano", 0), "samples": len(p["samples"]),
                          "scope": sp.get("scope", {}).get("name", ""), "profile_type": ptname}
                rshape["profiles"].append(pshape)
                for smp in p["samples"]:
                    names = frame_names(smp.get("stack_index", 0))
                    attrs = []
                    for a in smp["attribute_indices"]:
                        kv = check(a, "attribute_table", "sample attribute")
                        attrs.append("%s=%s" % (s(kv.get("key_strindex", 0), "sample attribute key"),
                                                any_value(kv.get("value"))))
                    if smp.get("link_index", 0):
                        check(smp["link_index"], "link_table", "sample link")
                    value = sum(smp["values"]) if smp["values"] else len(smp["timestamps_unix_nano"])
                    key = "%s|%s|%s" % (service, ";".join(names), ",".join(sorted(attrs)))
                    records.append((key, value, ptname))
    return records, shapes


# ---- the server ----


class State:
    def __init__(self, args):
        self.lock = threading.Lock()
        self.released = threading.Event()
        self.script = [e for e in args.script.split(",") if e] if args.script else []
        self.args = args
        self.requests = 0
        self.statuses = {}
        self.accepted_samples = 0
        self.accepted_requests = 0
        self.by_key = {}
        self.off_cpu_nanoseconds = 0
        self.off_cpu_by_key = {}
        self.errors = []
        self.last_shapes = None
        self.content_types = []
        self.encodings = []
        self.versions = []
        self.tenants = {}
        self.auth = []

    def next_action(self):
        with self.lock:
            self.requests += 1
            return self.script.pop(0) if self.script else "200"

    def count(self, status):
        with self.lock:
            self.statuses[str(status)] = self.statuses.get(str(status), 0) + 1


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-pyroscope/1"

    def log_message(self, fmt, *a):
        if self.server.state.args.verbose:
            sys.stderr.write("fake-pyroscope: " + (fmt % a) + "\n")

    def reply(self, status, body=b"", ctype="text/plain; charset=utf-8", headers=None):
        self.server.state.count(status)
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        st = self.server.state
        if self.path == "/stats":
            with st.lock:
                body = json.dumps({
                    "requests": st.requests, "statuses": st.statuses, "accepted_requests": st.accepted_requests,
                    "accepted_samples": st.accepted_samples, "by_key": st.by_key, "errors": st.errors,
                    "off_cpu_nanoseconds": st.off_cpu_nanoseconds, "off_cpu_by_key": st.off_cpu_by_key,
                    "last_shapes": st.last_shapes, "content_types": st.content_types, "encodings": st.encodings,
                    "versions": st.versions, "script_left": st.script, "tenants": st.tenants,
                    "auth": st.auth,
                }, sort_keys=True).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.reply(404, b"not found\n")

    def do_POST(self):
        st = self.server.state
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if self.path == "/release":
            st.released.set()
            self.reply(200, b"released\n")
            return
        if self.path == "/quit":
            self.reply(200, b"bye\n")
            threading.Thread(target=self.server.shutdown, daemon=True).start()
            return
        if self.path != st.args.path:
            self.reply(404, b"404 page not found\n")
            return
        action = st.next_action()
        code, _, rest = action.partition(":")
        if code == "reset":
            # An abortive close: the client sees a connection reset, no response.
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
            self.connection.close()
            with st.lock:
                st.statuses["reset"] = st.statuses.get("reset", 0) + 1
            return
        if code == "slow":
            time.sleep(float(rest or "1"))
            code, rest = "200", ""
        elif code == "hold":
            st.released.wait(120)
            code, rest = "200", ""
        ctype = self.headers.get("Content-Type", "")
        with st.lock:
            st.content_types.append(ctype)
            st.encodings.append(self.headers.get("Content-Encoding", ""))
        if ctype != "application/x-protobuf":
            self.reply(415, b"unsupported content type: %s\n" % ctype.encode())
            return
        if st.args.max_body_bytes and len(body) > st.args.max_body_bytes:
            self.reply(413, b"request body too large\n")
            return
        if code not in ("200", "partial"):
            headers = {}
            if rest.startswith("date:"):
                headers["Retry-After"] = email.utils.formatdate(time.time() + float(rest[5:]), usegmt=True)
            elif rest:
                headers["Retry-After"] = rest
            self.reply(int(code), b"scripted failure %s\n" % code.encode(), headers=headers)
            return
        try:
            if self.headers.get("Content-Encoding", "") == "gzip":
                body = gzip.decompress(body)
            req = msg(body, SPECS["Request"])
            records, shapes = validate_and_flatten(req)
        except (DecodeError, Invalid, OSError, UnicodeDecodeError, KeyError) as e:
            with st.lock:
                st.errors.append(str(e))
            self.reply(400, ("invalid request: %s\n" % e).encode())
            return
        rejected = int(rest) if code == "partial" and rest else 0
        tenant = self.headers.get("X-Scope-OrgID", "")
        with st.lock:
            st.accepted_requests += 1
            st.versions.append(st.args.proto_version)
            t = st.tenants.setdefault(tenant, {"requests": 0, "samples": 0})
            t["requests"] += 1
            t["samples"] += sum(v for _, v, ptname in records if ptname != "off_cpu")
            if self.headers.get("Authorization") is not None:
                st.auth.append(self.headers.get("Authorization"))
            for key, value, ptname in records:
                if ptname == "off_cpu":
                    st.off_cpu_by_key[key] = st.off_cpu_by_key.get(key, 0) + value
                    st.off_cpu_nanoseconds += value
                    continue
                st.by_key[key] = st.by_key.get(key, 0) + value
                st.accepted_samples += value
            st.last_shapes = shapes
        out = encode_partial_success(rejected, "rejected by script" if rejected else "") if rejected else b""
        self.reply(200, out, ctype="application/x-protobuf")


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file", help="write the bound port here once listening")
    ap.add_argument("--path", default="/v1development/profiles")
    ap.add_argument("--proto-version", choices=["1.10", "1.9"], default="1.10")
    ap.add_argument("--script", default="")
    ap.add_argument("--max-body-bytes", type=int, default=0)
    ap.add_argument("--lifetime", type=float, default=300, help="exit after this many seconds (bounded tests)")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--tls-cert", help="PEM certificate: serve HTTPS")
    ap.add_argument("--tls-key", help="PEM private key of --tls-cert")
    ap.add_argument("--tls-max-version", choices=["1.2", "1.3"], default="1.3")
    args = ap.parse_args()

    # The version decides Sample's field numbers, as in a real Pyroscope of that version.
    SPECS["Sample"] = SAMPLE_V1_9 if args.proto_version == "1.9" else SAMPLE_V1_10
    srv = Server(("127.0.0.1", args.port), Handler)
    srv.state = State(args)
    if args.tls_cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(args.tls_cert, args.tls_key)
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2 if args.tls_max_version == "1.2" else ssl.TLSVersion.TLSv1_3
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % srv.server_address[1])
        os.rename(tmp, args.port_file)

    def stop(*_):
        threading.Thread(target=srv.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    timer = threading.Timer(args.lifetime, stop)
    timer.daemon = True
    timer.start()
    srv.serve_forever(poll_interval=0.1)
    srv.server_close()


if __name__ == "__main__":
    main()
