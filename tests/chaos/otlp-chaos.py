#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Hostile peers against the gateway's `otlp` receiver (docs/reliability.md,
"Hostile peers"): otlp-chaos.py CASE runs one family of attacks on the
OTLP/HTTP port (HTTP/1.1) or the OTLP/gRPC port while a legitimate agent
(sender-driver) and a legitimate OTLP/HTTP sender (valid protobuf over
HTTP/1.1 keep-alive, chaoslib.OtlpSender) deliver, with chaos.py's checks:
the gateway stays up, answers /healthz, keeps its RSS under memory_limiter's
limit, every sample of both senders reaches the fake Pyroscope, and the
gateway counted the attack. Attackers connect from 127.0.0.2 and up.

Valid requests are built with Python's protobuf from classes protoc compiles
here from proto/opentelemetry (as tests/integration/otlp-receiver.py does);
needs /usr/bin/python3 with python3-protobuf, and protoc; skips without."""
import gzip
import os
import socket
import ssl
import struct
import subprocess
import sys
import time
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chaoslib as C  # noqa: E402
import h2raw as H  # noqa: E402

O = "stackrelay_gateway_otlp_"
HTTP_PATH = "/v1development/profiles"
GRPC_PATH = "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export"
PB = {}  # the compiled protobuf modules


def compile_protos():
    import shutil
    if not shutil.which("protoc"):
        C.skip("protoc not installed")
    try:
        import google.protobuf  # noqa: F401
    except ImportError:
        C.skip("python3-protobuf not installed")
    tmp = C.slib.tmpdir("sr-chaos-otlp-pb-")
    proto = os.path.join(C.SOURCE_ROOT, "proto")
    subprocess.run(["protoc", "-I", proto, "--python_out=" + tmp,
                    "opentelemetry/proto/common/v1/common.proto",
                    "opentelemetry/proto/resource/v1/resource.proto",
                    "opentelemetry/proto/profiles/v1development/profiles.proto",
                    "opentelemetry/proto/collector/profiles/v1development/profiles_service.proto"], check=True)
    sys.path.insert(0, tmp)
    from opentelemetry.proto.collector.profiles.v1development import profiles_service_pb2 as svc
    PB["svc"] = svc


def build_request(samples=50, service="chaos-otlp-legit", stack_index=1, location_index=1, string_index=None):
    """A valid OTLP v1.10 request: `samples` CPU samples of value 1 on a symbolized stack (work <- main);
    the indices can be pointed out of range."""
    req = PB["svc"].ExportProfilesServiceRequest()
    d = req.dictionary
    strings = ["", "samples", "count", "cpu", "nanoseconds", "main", "work", "/usr/bin/app", "app.c"]
    S = {s: i for i, s in enumerate(strings)}
    d.string_table.extend(strings)
    d.mapping_table.add()
    d.mapping_table.add(memory_start=0x400000, memory_limit=0x500000, filename_strindex=S["/usr/bin/app"])
    d.function_table.add()
    d.function_table.add(name_strindex=S["main"] if string_index is None else string_index,
                         filename_strindex=S["app.c"])
    d.function_table.add(name_strindex=S["work"], filename_strindex=S["app.c"])
    d.location_table.add()
    d.location_table.add(mapping_index=1, address=0x401000).lines.add(function_index=2, line=10)
    d.location_table.add(mapping_index=1, address=0x402000).lines.add(function_index=1, line=3)
    d.stack_table.add()
    d.stack_table.add().location_indices.extend([location_index, 2])
    rp = req.resource_profiles.add()
    kv = rp.resource.attributes.add(key="service.name")
    kv.value.string_value = service
    prof = rp.scope_profiles.add().profiles.add()
    prof.sample_type.type_strindex = S["samples"]
    prof.sample_type.unit_strindex = S["count"]
    prof.period_type.type_strindex = S["cpu"]
    prof.period_type.unit_strindex = S["nanoseconds"]
    prof.period = 50_000_000
    prof.time_unix_nano = time.time_ns()
    prof.duration_nano = 1_000_000_000
    for _ in range(samples):
        prof.samples.add(stack_index=stack_index).values.append(1)
    return req.SerializeToString()


# ---- raw HTTP/1.1 ----

def h1_conn(src="127.0.0.2", port=None, timeout=5):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout, source_address=(src, 0))
    return s


def head(ctype="application/x-protobuf", extra="", method="POST", path=HTTP_PATH):
    return (f"{method} {path} HTTP/1.1\r\nHost: gateway\r\nContent-Type: {ctype}\r\n{extra}").encode()


def exchange(a, port, data, src="127.0.0.2", wait=5.0):
    """Sends data on a new connection and reads until the gateway closes it or `wait` passes; counts the
    status lines it answered."""
    try:
        s = h1_conn(src, port)
    except OSError:
        a.count("connect_failed")
        time.sleep(0.05)
        return b""
    got = b""
    try:
        s.sendall(data)
        s.settimeout(wait)
        while not answered(got):
            b = s.recv(65536)
            if not b:
                break
            got += b
    except OSError:
        pass  # reset after the answer (the gateway closes with our bytes unread), or our wait passed
    s.close()
    for line in got.split(b"\r\n"):
        if line.startswith(b"HTTP/1.1 "):
            a.count("status_" + line[9:12].decode())
    return got


def answered(got):
    """A whole answer (head and Content-Length body) is in got."""
    end = got.find(b"\r\n\r\n")
    if end < 0:
        return False
    for line in got[:end].split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return len(got) - end - 4 >= int(line.split(b":")[1])
    return True


def bomb(plain_mib, wbits=31):
    z = zlib.compressobj(9, zlib.DEFLATED, wbits)
    chunk = bytes(1 << 20)
    return b"".join([z.compress(chunk) for _ in range(plain_mib)] + [z.flush()])


# ---- case otlp-h1-slow: slowloris over HTTP/1.1, heads that never end, bodies that never come ----

def h1_slow(a, i, gw):
    if i == 0:
        return h1_slowloris(a, gw)
    if i == 1:
        return h1_endless_head(a, gw)
    if i == 2:
        return h1_slow_second_head(a, gw)
    return h1_short_body(a, gw)


def h1_slowloris(a, gw):
    """Connections that trickle a request head one header line a second, never ending it."""
    C.hold_connections(a, gw.hport, head(), trickle=b"X-Slow: 1\r\n", target=5000)


def h1_endless_head(a, gw):
    """Header lines as fast as the gateway takes them, never the empty line."""
    line = b"X-Endless: " + b"e" * 100 + b"\r\n"
    while not a.stopping:
        try:
            s = h1_conn("127.0.0.3", gw.hport)
            a.count("endless_heads")
            s.sendall(head())
            while not a.stopping:
                s.sendall(line * 64)
                a.count("endless_bytes", len(line) * 64)
        except OSError:
            pass
        try:
            s.close()
        except (OSError, UnboundLocalError):
            pass


def h1_slow_second_head(a, gw):
    """A keep-alive connection answered once (404), whose next request head then trickles forever."""
    conns = []
    while not a.stopping and len(conns) < 50:
        try:
            s = h1_conn("127.0.0.4", gw.hport)
            s.sendall(b"GET /nothing-here HTTP/1.1\r\nHost: gateway\r\n\r\n")
            s.settimeout(5)
            got = s.recv(4096)
            if got.startswith(b"HTTP/1.1 404"):
                a.count("status_404")
            s.sendall(head())
            s.setblocking(False)
            conns.append(s)
            a.count("second_heads")
        except OSError:
            a.count("connect_failed")
    while not a.stopping:
        keep = []
        for s in conns:
            try:
                s.send(b"X-Slow: 2\r\n")
                keep.append(s)
            except BlockingIOError:
                keep.append(s)
            except OSError:
                s.close()
                a.count("second_heads_closed")
        conns = keep
        a.stop_ev.wait(1)
    for s in conns:
        s.close()


def h1_short_body(a, gw):
    """Content-Length longer than the body: the rest never comes (held until request_timeout)."""
    while not a.stopping:
        body = build_request(samples=1, service="chaos-otlp-attack")
        data = head(extra=f"Content-Length: {len(body) + 1000}\r\n\r\n") + body
        exchange(a, gw.hport, data, src="127.0.0.5", wait=15)
        a.count("short_bodies")


# ---- case otlp-h1-held: connections that hold a slot of max_connections after their headers ----

def h1_held(a, i, gw, per_worker=100):
    """Worker 0: a Content-Length far over max_request_body_size (413), then silence. Worker 1: a body
    shorter than its Content-Length (408 after request_timeout), then silence. Worker 2: one request
    answered (404), then the next head trickled one line a second. Each holds up to per_worker
    connections, opening at most 10 new ones every half second."""
    if i == 0:
        first, trickle = head(extra="Content-Length: 99999999999999\r\n\r\n") + b"x" * 1000, None
    elif i == 1:
        first, trickle = head(extra="Content-Length: 100000\r\n\r\n") + b"x" * 10, None
    else:
        first, trickle = b"GET /nothing-here HTTP/1.1\r\nHost: gateway\r\n\r\n" + head(), b"X-Slow: 3\r\n"
    kind = ["413_held", "408_held", "head_held"][i]
    socks = []
    while not a.stopping:
        for _ in range(min(10, per_worker - len(socks))):
            try:
                s = socket.create_connection(("127.0.0.1", gw.hport), timeout=2, source_address=(f"127.0.2.{i + 1}", 0))
                s.setblocking(False)
                s.send(first)
                socks.append(s)
                a.count(kind)
            except OSError:
                a.count("connect_failed")
        keep = []
        for s in socks:
            try:
                while True:
                    if s.recv(65536) == b"":
                        raise OSError("closed")
            except BlockingIOError:
                if trickle:
                    try:
                        s.send(trickle)
                    except OSError:
                        pass
                keep.append(s)
            except OSError:
                s.close()
                a.count("closed_by_gateway")
        socks = keep
        with a.lock:
            a.stats[kind + "_max"] = max(a.stats.get(kind + "_max", 0), len(socks))
            a.stats["held"] = sum(a.stats.get(k + "_now", 0) for k in ("413_held", "408_held", "head_held"))
            a.stats[kind + "_now"] = len(socks)
        a.stop_ev.wait(0.5)
    for s in socks:
        s.close()


# ---- case otlp-h1-framing: broken framing, on fresh connections ----

def framing_bodies():
    body = build_request(samples=1, service="chaos-otlp-attack", stack_index=99)
    many = "".join(f"X-H{k}: {'v' * 40}\r\n" for k in range(400))
    return [
        ("long_line", head(extra="X-Long: " + "l" * 20000 + "\r\n\r\n")),
        ("many_headers", head(extra=many + "\r\n")),
        ("huge_chunk", head(extra="Transfer-Encoding: chunked\r\n\r\n") +
         b"ffffffffffffffff\r\n" + b"z" * 65536),
        ("overflow_chunk", head(extra="Transfer-Encoding: chunked\r\n\r\n") + b"1ffffffffffffffff\r\nz\r\n"),
        ("bad_chunk", head(extra="Transfer-Encoding: chunked\r\n\r\n") + b"zz\r\nhello\r\n0\r\n\r\n"),
        ("chunk_no_crlf", head(extra="Transfer-Encoding: chunked\r\n\r\n") + b"5\r\nhelloXX5\r\nhello\r\n"),
        ("long_chunk_line", head(extra="Transfer-Encoding: chunked\r\n\r\n") + b"0" * 300 + b"5\r\n"),
        ("endless_trailers", head(extra="Transfer-Encoding: chunked\r\n\r\n") + b"0\r\n" +
         b"X-Trailer: t\r\n" * 3000),
        ("cl_and_te", head(extra=f"Content-Length: {len(body)}\r\nTransfer-Encoding: chunked\r\n\r\n") + body),
        ("two_cl", head(extra=f"Content-Length: {len(body)}\r\nContent-Length: 5\r\n\r\n") + body),
        ("cl_huge", head(extra="Content-Length: 99999999999999\r\n\r\n") + b"x" * 1000),
        ("cl_overflow", head(extra="Content-Length: 999999999999999999999999\r\n\r\n")),
        ("cl_short", head(extra=f"Content-Length: {len(body) // 2}\r\n\r\n") + body),
        ("bad_request_line", b"POST  HTTP/1.1 x\r\n\r\n"),
        ("bad_version", b"POST /v1development/profiles HTTP/9.9\r\n\r\n"),
        ("folded", head(extra="X-A: a\r\n folded\r\n\r\n")),
        ("bad_index", head(extra=f"Content-Length: {len(body)}\r\n\r\n") + body),
    ]


def h1_framing(a, i, gw):
    if i == 3:
        return h1_tiny_chunks(a, gw)
    cases = framing_bodies()
    k = i
    while not a.stopping:
        name, data = cases[k % len(cases)]
        k += 3
        exchange(a, gw.hport, data, src=f"127.0.0.{2 + i}", wait=8)
        a.count("framing_" + name)
        a.count("framing")


def h1_tiny_chunks(a, gw):
    """An endless chunked body of 1-byte chunks (6 wire bytes per body byte)."""
    piece = b"1\r\nx\r\n" * 4096
    while not a.stopping:
        try:
            s = h1_conn("127.0.0.6", gw.hport)
            s.sendall(head(extra="Transfer-Encoding: chunked\r\n\r\n"))
            a.count("tiny_chunk_requests")
            while not a.stopping:
                s.sendall(piece)
                a.count("tiny_chunks", 4096)
        except OSError:
            pass
        try:
            s.close()
        except (OSError, UnboundLocalError):
            pass


# ---- case otlp-h1-flood: pipelined floods, and clients that never read ----

def h1_flood(a, i, gw):
    """Even workers: pipelined requests as fast as possible, answers read. Odd ones: the same, never read."""
    body = build_request(samples=1, service="chaos-otlp-attack", stack_index=99)  # 400: out of range
    one = head(extra=f"Content-Length: {len(body)}\r\n\r\n") + body + \
        b"GET /v1development/profiles HTTP/1.1\r\nHost: gateway\r\n\r\n"
    burst = one * 256
    src = f"127.0.0.{2 + i}"
    while not a.stopping:
        try:
            s = h1_conn(src, gw.hport, timeout=3)
            a.count("connections")
        except OSError:
            a.count("connect_failed")
            time.sleep(0.05)
            continue
        try:
            while not a.stopping:
                s.sendall(burst)
                a.count("pipelined", 512)
                if i % 2 == 0:
                    s.setblocking(False)
                    try:
                        while s.recv(1 << 20):
                            pass
                    except BlockingIOError:
                        pass
                    s.setblocking(True)
        except OSError:
            pass  # the gateway closed (pipelined bytes end the connection) or stopped reading us
        s.close()


# ---- case otlp-bombs: gzip bombs, truncated gzip, lying gRPC prefixes, JSON and protobuf bombs ----

BODIES = []


def bomb_bodies():
    valid = build_request(samples=1, service="chaos-otlp-attack")
    gz = bomb(64)  # 64 MiB of zeros, over max_request_body_size (20 MiB) and max_recv_msg_size_mib (4)
    trunc = gzip.compress(valid)[:-12]
    nest = b'{"resourceProfiles":[' + b"[" * 200000 + b"]" * 200000 + b"]}"
    nest_obj = b'{"resourceProfiles":[' + b'{"a":' * 100000 + b"1" + b"}" * 100000 + b"]}"
    huge_str = b'{"resourceProfiles":[{"resource":{"attributes":[{"key":"' + b"k" * (16 << 20) + b'"}]}}]}'
    bad = [build_request(samples=1, service="chaos-otlp-attack", stack_index=1 << 30),
           build_request(samples=1, service="chaos-otlp-attack", location_index=123456),
           build_request(samples=1, service="chaos-otlp-attack", string_index=99999),
           b"\x0a" + H.varint(1 << 62) + b"\x01\x02",  # resource_profiles of 2^62 bytes
           b"\x12" + H.varint(0xFFFFFFFF) + b"x" * 100]  # a dictionary of 4 GiB
    nested = b""
    for _ in range(20000):
        nested = H.pb_bytes(1, nested)
    bad.append(nested)
    http = [("gzip_bomb", "application/x-protobuf", "gzip", gz),
            ("gzip_bomb_json", "application/json", "gzip", gz),
            ("truncated_gzip", "application/x-protobuf", "gzip", trunc),
            ("truncated_gzip_json", "application/json", "gzip", gzip.compress(b'{"resourceProfiles":[]}')[:-9]),
            ("json_nesting", "application/json", None, nest),
            ("json_object_nesting", "application/json", None, nest_obj),
            ("json_huge_string", "application/json", None, huge_str)] + \
        [("pb_bad", "application/x-protobuf", None, b) for b in bad]
    grpc = [("grpc_gzip_bomb", True, b"\x01" + struct.pack(">I", len(gz)) + gz),
            ("grpc_truncated_gzip", True, b"\x01" + struct.pack(">I", len(trunc)) + trunc),
            ("grpc_prefix_over_max", False, b"\x00" + struct.pack(">I", 0xFFFFFFFF) + valid),
            ("grpc_prefix_longer", False, b"\x00" + struct.pack(">I", len(valid) + 500) + valid),
            ("grpc_prefix_shorter", False, b"\x00" + struct.pack(">I", 3) + valid),
            ("grpc_compressed_unannounced", False, b"\x01" + struct.pack(">I", len(valid)) + valid)] + \
        [("grpc_pb_bad", False, b"\x00" + struct.pack(">I", len(b)) + b) for b in bad]
    return http, grpc


def grpc_block(gzip_enc):
    hs = [(":method", "POST"), (":scheme", "http"), (":path", GRPC_PATH), (":authority", "gateway"),
          ("content-type", "application/grpc"), ("te", "trailers")]
    if gzip_enc:
        hs.append(("grpc-encoding", "gzip"))
    return b"".join(H.literal(n, v) for n, v in hs)


def bombs(a, i, gw):
    http, grpc = BODIES
    k = i
    while not a.stopping:
        if i % 2 == 0:
            name, ctype, enc, body = http[k % len(http)]
            extra = f"Content-Length: {len(body)}\r\n" + (f"Content-Encoding: {enc}\r\n" if enc else "") + "\r\n"
            exchange(a, gw.hport, head(ctype=ctype, extra=extra) + body, src=f"127.0.0.{2 + i}", wait=30)
            a.count("http_" + name)
        else:
            name, enc, msg = grpc[k % len(grpc)]
            try:
                c = H.Conn(gw.gport, src=f"127.0.0.{2 + i}", timeout=10)
                c.read(0.2)
                sid = c.stream()
                out = H.frame(H.HEADERS, H.END_HEADERS, sid, grpc_block(enc))
                for off in range(0, len(msg), 16384):
                    out += H.frame(H.DATA, H.END_STREAM if off + 16384 >= len(msg) else 0, sid, msg[off:off + 16384])
                c.send(out)
                deadline = time.monotonic() + 30
                while c.headers < 1 and c.read(0.2) and time.monotonic() < deadline and not a.stopping:
                    pass
                a.count("grpc_answered", c.headers)
                c.close()
            except (OSError, H.Closed):
                a.count("grpc_closed")
            a.count(name)
        a.count("bodies")
        k += 1


# ---- case otlp-mtls: bad client certificates and bad tokens on both ports ----

TLS = {}


def otlp_tls_ctx(cert=None, alpn="http/1.1"):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(TLS["ca.pem"])
    ctx.set_alpn_protocols([alpn])
    if cert:
        ctx.load_cert_chain(*cert)
    return ctx


def mtls(a, i, gw):
    """Workers 0-2: expired, foreign-CA and absent client certificates, on the OTLP/HTTP (HTTP/1.1) and the
    OTLP/gRPC port in turn. Worker 3: a wrong token on OTLP/HTTP; worker 4: no token on OTLP/gRPC."""
    kind = ["expired", "foreign", "absent", "wrong_token", "no_token"][i]
    certs = {"expired": (TLS["expired.pem"], TLS["expired.key"]), "foreign": (TLS["rogue.pem"], TLS["rogue.key"]),
             "absent": None}
    good = (TLS["client.pem"], TLS["client.key"])
    body = build_request(samples=1, service="chaos-otlp-attack")
    grpc_msg = b"\x00" + struct.pack(">I", len(body)) + body
    n = 0
    while not a.stopping:
        n += 1
        grpc = kind == "no_token" or (kind in certs and n % 2 == 0)
        ctx = otlp_tls_ctx(certs.get(kind, good), alpn="h2" if grpc else "http/1.1")
        try:
            if grpc:
                c = H.Conn(gw.gport, tls=ctx, timeout=5, src=f"127.0.0.{2 + i}")
                c.read(0.3)
                for _ in range(10):
                    sid = c.stream()
                    out = H.frame(H.HEADERS, H.END_HEADERS, sid, grpc_block(False))
                    c.send(out + H.frame(H.DATA, H.END_STREAM, sid, grpc_msg))
                deadline = time.monotonic() + 5
                while c.headers < 10 and c.read(0.2) and time.monotonic() < deadline:
                    pass
                a.count(f"{kind}_grpc_answers", c.headers)
                c.close()
            else:
                raw = socket.create_connection(("127.0.0.1", gw.hport), timeout=5,
                                               source_address=(f"127.0.0.{2 + i}", 0))
                s = ctx.wrap_socket(raw, server_hostname="localhost")
                auth = "Authorization: Bearer not-the-token\r\n" if kind == "wrong_token" else ""
                s.sendall(head(extra=f"{auth}Content-Length: {len(body)}\r\n\r\n") + body)
                got = s.recv(4096)
                a.count(f"{kind}_http_" + (got[9:12].decode() if got.startswith(b"HTTP/1.1 ") else "refused"))
                s.close()
        except (OSError, ssl.SSLError, H.Closed):
            a.count(f"{kind}_refused")
            time.sleep(0.02)
        a.count(f"{kind}_{'grpc' if grpc else 'http'}_attempts")


CASES = {
    # name: (attack, threads, load, counters that must have moved)
    "otlp-h1-slow": (h1_slow, 4,
                     "{opened:,} HTTP/1.1 connections trickling headers ({held_max:,} at once), "
                     "{endless_heads:,} endless heads, {second_heads:,} slow second heads, "
                     "{short_bodies:,} bodies shorter than Content-Length",
                     [O + "header_timeouts_total", O + 'requests_total{component="otlp",protocol="http",status="408"}',
                      # endless heads pass the head-size limit: 431, as every HTTP/1 server here answers it
                      O + 'requests_total{component="otlp",protocol="http",status="431"}']),
    "otlp-h1-held": (h1_held, 3,
                     "max_connections 200; {413_held:,} connections held after a 413, {408_held:,} after a 408, "
                     "{head_held:,} trickling a second head; {closed_by_gateway:,} closed by the gateway",
                     [O + "header_timeouts_total", O + "connections_refused_total",
                      O + 'requests_total{component="otlp",protocol="http",status="413"}',
                      O + 'requests_total{component="otlp",protocol="http",status="408"}']),
    "otlp-mtls": (mtls, 5, "TLS on both ports: {expired_refused:,} expired, {foreign_refused:,} foreign CA, "
                  "{absent_refused:,} certificate-less connections refused; {wrong_token_http_401:,} wrong-token "
                  "HTTP/1.1 requests and {no_token_grpc_answers:,} token-less gRPC calls answered",
                  [O + "tls_handshake_failures_total", O + "auth_failures_total"]),
    "otlp-h1-framing": (h1_framing, 4,
                        "{framing:,} requests with broken framing (17 kinds), {tiny_chunks:,} 1-byte chunks",
                        [O + 'requests_total{component="otlp",protocol="http",status="400"}',
                         O + 'requests_total{component="otlp",protocol="http",status="413"}']),
    "otlp-h1-flood": (h1_flood, 4, "{pipelined:,} pipelined requests over {connections:,} connections, "
                      "half of them never reading",
                      [O + 'requests_total{component="otlp",protocol="http",status="400"}']),
    "otlp-bombs": (bombs, 4, "{bodies:,} bodies: gzip bombs of 64 MiB, truncated gzip, lying gRPC prefixes, "
                   "200000-deep JSON, 16 MiB JSON strings, out-of-range indices, 2^62-byte lengths",
                   [O + "too_large_requests_total", O + "invalid_requests_total"]),
}


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in CASES:
        print(f"usage: otlp-chaos.py {{{','.join(CASES)}}}")
        sys.exit(2)
    name = sys.argv[1]
    fn, threads, load, counters = CASES[name]
    compile_protos()
    if name == "otlp-bombs":
        BODIES.extend(bomb_bodies())
    legit = build_request(samples=50)
    otlp = {"body": legit, "samples": 50, "extra": ""}
    if name == "otlp-mtls":
        import shutil
        if not shutil.which("openssl"):
            C.skip("openssl not installed")
        import chaos
        d = C.slib.tmpdir("sr-chaos-otlp-certs-")
        TLS.update(C.slib.make_certs(d))
        TLS["expired.pem"], TLS["expired.key"] = chaos.make_expired(d, TLS)
        with open(os.path.join(d, "otlp-token"), "w") as f:
            f.write("chaos-otlp-token-0123456789\n")
        token_file = os.path.join(d, "otlp-token")
        otlp["proto"] = (f", tls: {{cert_file: {TLS['server.pem']}, key_file: {TLS['server.key']}, "
                         f"client_ca_file: {TLS['ca.pem']}}}, auth: {{bearer_token_file: {token_file}}}")
        otlp["ctx"] = otlp_tls_ctx((TLS["client.pem"], TLS["client.key"]))
        otlp["token"] = "chaos-otlp-token-0123456789"
    under_way = {"otlp-h1-slow": lambda st: st.get("held_max", 0) >= 4000,
                 "otlp-h1-held": lambda st: st.get("held", 0) >= 200}.get(name, lambda st: True)
    extra = "    max_connections: 200\n" if name == "otlp-h1-held" else ""
    otlp["extra"] = extra
    C.run_case(name, fn, threads=threads, load=load, counters=counters, under_way=under_way, otlp=otlp)


if __name__ == "__main__":
    main()
