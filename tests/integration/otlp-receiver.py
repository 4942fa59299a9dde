#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The gateway's `otlp` receiver (docs/receivers.md) end to end, against an
independent encoder: ExportProfilesServiceRequests built with Python's
protobuf (Debian's python3-protobuf) from classes protoc compiles here from
proto/opentelemetry, in OTLP v1.9 and v1.10, sent over HTTP/1.1 (protobuf,
gzip, chunked, JSON), HTTP/2 (h2c) and gRPC (python3-h2 framing, gzip
messages, bearer token), through the real gateway (symbolize with a real
debuginfod, batch) to tests/fakes/fake_pyroscope.py.

Checked: every sample arrives with its value and attributes; the native
frames of a stripped binary, sent as build ID + address like the OTel eBPF
profiler sends them, come out named (sr_fixture_leaf, sr_fixture_middle)
through debuginfod serving the binary's debug twin; the receiver's
accounting (received/accepted) matches what was sent. Bad input gets the
right status and the gateway stays up: a request whose version cannot be
told apart, truncated gzip, a gzip bomb, wrong content types, too large
bodies and messages, malformed protobuf, a missing token, a wrong path.

Needs /usr/bin/python3 with python3-protobuf and python3-h2, protoc,
debuginfod, gcc and objcopy (scripts/install-deps); skips (77) without them.
"""
import gzip
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kubelib  # noqa: E402
from ports import free_port  # noqa: E402
import metricslib  # noqa: E402

SKIP = 77


def log(*a):
    print("otlp-receiver:", *a, flush=True)


def skip(why):
    print("SKIP: " + why)
    sys.exit(SKIP)


src = os.environ.get("SR_SOURCE_ROOT")
gateway = os.environ.get("SR_GATEWAY")
fixtures = os.environ.get("SR_TEST_FIXTURES")
if not src or not gateway or not fixtures:
    skip("run through meson test (SR_SOURCE_ROOT, SR_GATEWAY, SR_TEST_FIXTURES unset)")
for tool in ("protoc", "debuginfod", "gcc", "objcopy", "readelf", "nm"):
    if not shutil.which(tool):
        skip(tool + " not installed (scripts/install-deps)")
try:
    from google.protobuf import json_format
    import h2.config
    import h2.connection
    import h2.events
except ImportError as e:
    skip("%s (python3-protobuf, python3-h2: scripts/install-deps); run with Debian's /usr/bin/python3" % e)

tmp = tempfile.mkdtemp(prefix="sr-otlp-receiver.")
procs = []


def cleanup():
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
    shutil.rmtree(tmp, ignore_errors=True)


def run(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout




def start_on_free_ports(what, n_ports, start, is_ready, log_path, attempts=5, timeout=180):
    """Starts a server on ports found free just before; another process may take
    one first, and then the server is started again on others."""
    for _ in range(attempts):
        ports = [free_port() for _ in range(n_ports)]
        p = start(ports)
        procs.append(p)
        deadline = time.monotonic() + timeout
        while p.poll() is None:
            if is_ready(ports):
                return p, ports
            if time.monotonic() > deadline:
                raise SystemExit("FAIL: timed out waiting for " + what)
            time.sleep(0.2)
        text = open(log_path).read()
        if "in use" not in text.lower():
            raise SystemExit("FAIL: %s exited: %s" % (what, text[-3000:]))
        log(what, "lost a race for a port; starting it again")
    raise SystemExit("FAIL: %s: no free ports in %d attempts" % (what, attempts))


def http_ok(url):
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status == 200
    except Exception:
        return False


def wait_for(what, cond, timeout=60):
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise SystemExit("FAIL: timed out waiting for " + what)
        time.sleep(0.2)


# ---- the independent encoder ----

proto = os.path.join(src, "proto")
subprocess.run(["protoc", "-I", proto, "--python_out=" + tmp,
                "opentelemetry/proto/common/v1/common.proto",
                "opentelemetry/proto/resource/v1/resource.proto",
                "opentelemetry/proto/profiles/v1development/profiles.proto",
                "opentelemetry/proto/profiles/v1development/profiles_v1_9.proto",
                "opentelemetry/proto/collector/profiles/v1development/profiles_service.proto"], check=True)
sys.path.insert(0, tmp)
from opentelemetry.proto.collector.profiles.v1development import profiles_service_pb2 as svc  # noqa: E402
from opentelemetry.proto.profiles.v1development import profiles_v1_9_pb2 as p9  # noqa: E402


def build_request(version, service, leaf, middle, build_id, values, extra=0):
    """A request shaped like the OTel eBPF profiler's: CPU samples with a
    symbolized stack (work <- main) and a native stack of a stripped binary
    (build ID + ELF addresses, no lines). values: (symbolized, native)."""
    req = svc.ExportProfilesServiceRequest() if version == "1.10" else p9.ExportProfilesServiceRequest()
    d = req.dictionary
    strings = ["", "samples", "count", "cpu", "nanoseconds", "main", "work", "/usr/bin/app", "/opt/prog.stripped",
               "process.executable.build_id.gnu", "thread.name", "worker-1", "app.c", "app.region"]
    S = {s: i for i, s in enumerate(strings)}
    d.string_table.extend(strings)
    d.mapping_table.add()
    d.mapping_table.add(memory_start=0x400000, memory_limit=0x500000, filename_strindex=S["/usr/bin/app"])
    m2 = d.mapping_table.add(memory_start=0x10000, memory_limit=0x20000, filename_strindex=S["/opt/prog.stripped"])
    d.attribute_table.add()
    a1 = d.attribute_table.add(key_strindex=S["thread.name"])
    a1.value.string_value = "worker-1"
    a2 = d.attribute_table.add(key_strindex=S["process.executable.build_id.gnu"])
    a2.value.string_value = build_id
    a3 = d.attribute_table.add(key_strindex=S["app.region"])
    a3.value.string_value = "eu-1"
    m2.attribute_indices.append(2)
    d.function_table.add()
    d.function_table.add(name_strindex=S["main"], filename_strindex=S["app.c"])
    d.function_table.add(name_strindex=S["work"], filename_strindex=S["app.c"])
    d.location_table.add()
    d.location_table.add(mapping_index=1, address=0x401000).lines.add(function_index=2, line=10)
    d.location_table.add(mapping_index=1, address=0x402000).lines.add(function_index=1, line=3)
    d.location_table.add(mapping_index=2, address=leaf)
    d.location_table.add(mapping_index=2, address=middle)
    d.stack_table.add()
    d.stack_table.add().location_indices.extend([1, 2])
    d.stack_table.add().location_indices.extend([3, 4])
    rp = req.resource_profiles.add()
    kv = rp.resource.attributes.add(key="service.name")
    kv.value.string_value = service
    kv = rp.resource.attributes.add(key="container.id")
    kv.value.string_value = "c0ffee" * 10 + "abcd"
    prof = rp.scope_profiles.add().profiles.add()
    prof.sample_type.type_strindex = S["samples"]
    prof.sample_type.unit_strindex = S["count"]
    prof.period_type.type_strindex = S["cpu"]
    prof.period_type.unit_strindex = S["nanoseconds"]
    prof.period = 50_000_000
    prof.time_unix_nano = time.time_ns()
    prof.duration_nano = 1_000_000_000
    s = prof.samples.add(stack_index=1)
    s.values.append(values[0])
    s.attribute_indices.extend([1, 3])
    s = prof.samples.add(stack_index=2)
    s.values.append(values[1])
    # extra samples of 1 each on the symbolized stack: a large request (decoded off the loop)
    for _ in range(extra):
        s = prof.samples.add(stack_index=1)
        s.values.append(1)
        s.attribute_indices.extend([1, 3])
    return req


def ambiguous_request():
    """Well-formed as v1.9 and as v1.10 with different meanings: Sample fields
    2 (packed [2]), 3 (varint 1) and 4 (varint 1) are values / attribute_indices
    / link_index in v1.9 (value 2) and attribute_indices / link_index / values
    in v1.10 (value 1). Written by hand: protobuf's own writer would pack
    field 4 and so make the bytes unambiguous."""
    req = build_request("1.10", "ambiguous", 0x1000, 0x1010, "00" * 20, (1, 1))
    req.dictionary.link_table.add()
    req.dictionary.link_table.add(trace_id=b"\x01" * 16, span_id=b"\x02" * 8)
    sample = bytes([0x08, 0x01, 0x12, 0x01, 0x02, 0x18, 0x01, 0x20, 0x01])
    rp = req.resource_profiles[0]
    sp = rp.scope_profiles[0]
    prof = sp.profiles[0]
    del prof.samples[:]
    prof_b = prof.SerializeToString() + b"\x12" + varint(len(sample)) + sample
    del sp.profiles[:]
    sp_b = sp.SerializeToString() + b"\x12" + varint(len(prof_b)) + prof_b
    del rp.scope_profiles[:]
    rp_b = rp.SerializeToString() + b"\x12" + varint(len(sp_b)) + sp_b
    del req.resource_profiles[:]
    return req.SerializeToString() + b"\x0a" + varint(len(rp_b)) + rp_b


def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def parse_response(body):
    r = svc.ExportProfilesServiceResponse()
    r.ParseFromString(body)
    return r


# ---- transports ----

HTTP_PATH = "/v1development/profiles"
GRPC_PATH = "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export"


def http1(port, body, ctype="application/x-protobuf", encoding=None, chunked=False, path=HTTP_PATH,
          method="POST", ctx=None, token=None):
    if ctx:
        c = http.client.HTTPSConnection("127.0.0.1", port, timeout=60, context=ctx)
    else:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Content-Type": ctype}
    if token:
        headers["Authorization"] = "Bearer " + token
    if encoding:
        headers["Content-Encoding"] = encoding
    if chunked:
        def chunks():
            for i in range(0, len(body), 7000):
                yield body[i:i + 7000]
        c.request(method, path, body=chunks(), headers=headers, encode_chunked=True)
    else:
        c.request(method, path, body=body, headers=headers)
    r = c.getresponse()
    data = r.read()
    out = (r.status, dict((k.lower(), v) for k, v in r.getheaders()), data)
    c.close()
    return out


def h2_call(port, path, headers, body, ctx=None):
    """One request on a fresh h2c (or, with ctx, TLS) connection; returns (headers, body, trailers)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    if ctx:
        sock = ctx.wrap_socket(sock, server_hostname="localhost")
        assert sock.selected_alpn_protocol() == "h2", sock.selected_alpn_protocol()
    conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
    conn.initiate_connection()
    # The preface in two pieces: the server must wait to tell HTTP/2 from HTTP/1.1.
    first = conn.data_to_send()
    sock.sendall(first[:2])
    time.sleep(0.05)
    sock.sendall(first[2:])
    sid = conn.get_next_available_stream_id()
    conn.send_headers(sid, [(":method", "POST"), (":scheme", "http"), (":authority", "127.0.0.1:%d" % port),
                            (":path", path)] + headers, end_stream=not body)
    sock.sendall(conn.data_to_send())
    off = 0
    resp_headers, resp_body, trailers, done = {}, bytearray(), {}, False
    while not done:
        while off < len(body):
            n = min(conn.local_flow_control_window(sid), conn.max_outbound_frame_size, len(body) - off)
            if n <= 0:
                break
            conn.send_data(sid, body[off:off + n], end_stream=off + n == len(body))
            off += n
        sock.sendall(conn.data_to_send())
        data = sock.recv(65536)
        if not data:
            break
        for ev in conn.receive_data(data):
            if isinstance(ev, h2.events.ResponseReceived):
                resp_headers = dict(ev.headers)
            elif isinstance(ev, h2.events.DataReceived):
                resp_body += ev.data
                conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            elif isinstance(ev, h2.events.TrailersReceived):
                trailers = dict(ev.headers)
            elif isinstance(ev, (h2.events.StreamEnded, h2.events.StreamReset)):
                done = True
        sock.sendall(conn.data_to_send())
    sock.close()
    return resp_headers, bytes(resp_body), trailers


def grpc(port, msg, token="s3cret", compress=False, ctype="application/grpc", ctx=None):
    headers = [("content-type", ctype), ("te", "trailers")]
    if token:
        headers.append(("authorization", "Bearer " + token))
    if compress:
        headers.append(("grpc-encoding", "gzip"))
    framed = bytes([1 if compress else 0]) + len(msg).to_bytes(4, "big") + msg
    hd, body, trl = h2_call(port, GRPC_PATH, headers, framed, ctx)
    status = trl.get("grpc-status", hd.get("grpc-status"))
    message = trl.get("grpc-message", hd.get("grpc-message", ""))
    return int(status) if status is not None else None, message, body


class Raw:
    """A hand-driven HTTP/1.1 connection, for what http.client will not send."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.buf = b""

    def send(self, data):
        self.sock.sendall(data)

    def _fill(self):
        d = self.sock.recv(65536)
        if not d:
            raise EOFError
        self.buf += d

    def response(self):
        """(status, headers, body) of the next response."""
        while b"\r\n\r\n" not in self.buf:
            self._fill()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode().split("\r\n")
        status = int(lines[0].split()[1])
        hd = {k.strip().lower(): v.strip() for k, v in (ln.split(":", 1) for ln in lines[1:])}
        n = int(hd.get("content-length", "0"))
        while len(self.buf) < n:
            self._fill()
        body, self.buf = self.buf[:n], self.buf[n:]
        return status, hd, body

    def closed(self):
        """True when the server closes the connection (after what it sent)."""
        try:
            while True:
                self._fill()
        except EOFError:
            return True
        except ConnectionResetError:
            return True

    def close(self):
        self.sock.close()


def post_head(n, extra=""):
    return ("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\nContent-Length: %d\r\n%s\r\n"
            % (HTTP_PATH, n, extra)).encode()


def http1_edges(hport, raw_ok):
    """The HTTP/1.1 reader's framing rules, with requests http.client would not write."""
    # Keep-alive: two requests on one connection.
    c = Raw(hport)
    for _ in range(2):
        c.send(post_head(len(raw_ok)) + raw_ok)
        st, hd, _ = c.response()
        assert st == 200 and "connection" not in hd, (st, hd)
    c.close()
    # HTTP/1.0: answered, then closed.
    c = Raw(hport)
    c.send(post_head(len(raw_ok)).replace(b"HTTP/1.1", b"HTTP/1.0") + raw_ok)
    st, hd, _ = c.response()
    assert st == 200 and hd.get("connection") == "close" and c.closed(), (st, hd)
    # Expect: 100-continue: the interim answer, then the body, then 200.
    c = Raw(hport)
    c.send(post_head(len(raw_ok), "Expect: 100-continue\r\n"))
    st, _, _ = c.response()
    assert st == 100, st
    c.send(raw_ok)
    st, _, _ = c.response()
    assert st == 200, st
    c.close()
    # Chunked with extensions and a trailer.
    c = Raw(hport)
    half = len(raw_ok) // 2
    c.send(("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
            "Transfer-Encoding: chunked\r\n\r\n" % HTTP_PATH).encode() +
           b"%x;ext=1\r\n" % half + raw_ok[:half] + b"\r\n" + b"%x\r\n" % (len(raw_ok) - half) + raw_ok[half:] +
           b"\r\n0\r\nX-Trailer: 1\r\n\r\n")
    st, _, _ = c.response()
    assert st == 200, st
    c.close()
    bad = [
        ("headers over 16 KiB", post_head(0, "X-Big: %s\r\n" % ("a" * 17000)), 431),
        ("malformed chunk size", ("POST %s HTTP/1.1\r\nContent-Type: application/x-protobuf\r\n"
                                  "Transfer-Encoding: chunked\r\n\r\nzz\r\n" % HTTP_PATH).encode(), 400),
        ("Content-Length and chunked", post_head(4, "Transfer-Encoding: chunked\r\n") + b"0\r\n\r\n", 400),
        ("conflicting Content-Lengths", post_head(4, "Content-Length: 5\r\n") + b"abcd", 400),
        ("folded header", post_head(0, "X-A: 1\r\n  folded\r\n"), 400),
        ("HTTP/2.0 over HTTP/1", b"POST / HTTP/2.0\r\n\r\n", 400),
    ]
    for what, data, want in bad:
        c = Raw(hport)
        c.send(data)
        st, hd, body = c.response()
        assert st == want and hd.get("connection") == "close" and c.closed(), (what, st, hd, body)
        c.close()
        log("HTTP/1.1 %s -> %d, closed" % (what, want))
    # Pipelining: both requests in one write, answered in order.
    c = Raw(hport)
    c.send(post_head(len(raw_ok)) + raw_ok + post_head(len(raw_ok)) + raw_ok)
    for _ in range(2):
        st, hd, _ = c.response()
        assert st == 200, (st, hd)
    c.close()
    log("HTTP/1.1 keep-alive, HTTP/1.0, 100-continue, chunked, pipelining as documented")


def make_certs(d):
    """A CA, a server certificate for 127.0.0.1/localhost, a client certificate, and a rogue CA's client."""
    def ossl(*args):
        subprocess.run(["openssl"] + list(args), cwd=d, check=True, capture_output=True)
    with open(os.path.join(d, "san.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for ca in ("ca", "rogue-ca"):
        ossl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", ca + ".key",
             "-out", ca + ".crt", "-days", "2", "-subj", "/CN=stackrelay test " + ca)
    for name, ca, ext in (("server", "ca", True), ("client", "ca", False), ("rogue", "rogue-ca", False)):
        ossl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", name + ".key",
             "-out", name + ".csr", "-subj", "/CN=" + name)
        ossl("x509", "-req", "-in", name + ".csr", "-CA", ca + ".crt", "-CAkey", ca + ".key", "-CAcreateserial",
             "-out", name + ".crt", "-days", "2", *(["-extfile", "san.ext"] if ext else []))
    return lambda f: os.path.join(d, f)


def tls_phase(request_bytes, samples_per_request):
    """A second gateway: gRPC with TLS and client certificates, HTTP with TLS and a bearer token."""
    import ssl
    d = os.path.join(tmp, "tls")
    os.makedirs(d)
    p = make_certs(d)
    with open(p("token"), "w") as f:
        f.write("t0ken\n")
    cfg = p("gateway.yaml")
    glog = os.path.join(tmp, "gateway-tls.log")

    def start_gateway(ports):
        gport, hport, mport = ports
        with open(cfg, "w") as f:
            f.write("""receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:%d
        tls: {cert_file: %s, key_file: %s, client_ca_file: %s}
      http:
        endpoint: 127.0.0.1:%d
        tls: {cert_file: %s, key_file: %s}
        auth: {bearer_token_file: %s}
exporters:
  file: {path: %s}
service:
  pipelines:
    profiles: {receivers: [otlp], exporters: [file]}
  telemetry: {metrics: {address: 127.0.0.1:%d}}
""" % (gport, p("server.crt"), p("server.key"), p("ca.crt"), hport, p("server.crt"), p("server.key"), p("token"),
                   p("profiles.jsonl"), mport))
        return subprocess.Popen([gateway, "--config", cfg], stdout=open(glog, "w"), stderr=subprocess.STDOUT)
    gw, (gport, hport, mport) = start_on_free_ports(
        "the TLS gateway", 3, start_gateway, lambda ports: http_ok("http://127.0.0.1:%d/readyz" % ports[2]), glog)

    def ctx(alpn, cert=None):
        c = ssl.create_default_context(cafile=p("ca.crt"))
        c.set_alpn_protocols(alpn)
        if cert:
            c.load_cert_chain(p(cert + ".crt"), p(cert + ".key"))
        return c
    # HTTPS, HTTP/1.1 (ALPN http/1.1) and HTTP/2 (ALPN h2), with the token.
    st, _, body = http1(hport, request_bytes, ctx=ctx(["http/1.1"]), token="t0ken")
    assert st == 200, (st, body)
    st, _, body = http1(hport, request_bytes, ctx=ctx(["http/1.1"]))
    assert st == 401, (st, body)
    hd, body, _ = h2_call(hport, HTTP_PATH, [("content-type", "application/x-protobuf"),
                                             ("authorization", "Bearer t0ken")], request_bytes, ctx(["h2"]))
    assert hd[":status"] == "200", (hd, body)
    # gRPC over TLS with a client certificate of the CA; without one, or with a rogue CA's, no handshake.
    code, message, _ = grpc(gport, request_bytes, token=None, ctx=ctx(["h2"], "client"))
    assert code == 0, (code, message)
    for cert in (None, "rogue"):
        try:
            grpc(gport, request_bytes, token=None, ctx=ctx(["h2"], cert))
        except (ssl.SSLError, ConnectionError, EOFError, OSError):
            continue
        raise SystemExit("FAIL: gRPC without a valid client certificate got through (%s)" % cert)

    m = metricslib.scrape(mport)
    assert metricslib.total(m, "stackrelay_gateway_samples_accepted_total", component="otlp") == 3 * samples_per_request
    assert metricslib.total(m, "stackrelay_gateway_otlp_tls_handshake_failures_total", protocol="grpc") >= 2
    assert metricslib.total(m, "stackrelay_gateway_otlp_auth_failures_total", protocol="http") == 1
    gw.send_signal(signal.SIGTERM)
    assert gw.wait(timeout=60) == 0
    log("TLS: HTTPS over HTTP/1.1 and HTTP/2 with a bearer token, gRPC with client certificates")


def memory_limit_phase(request_bytes, samples_per_request):
    """A gateway over its memory limit from the start (1 MiB): requests are
    refused as retryable, 429 with Retry-After over HTTP, Unavailable over
    gRPC, and their samples accounted as refused (retry_later)."""
    cfg = os.path.join(tmp, "gateway-memlim.yaml")
    glog = os.path.join(tmp, "gateway-memlim.log")

    def start_gateway(ports):
        gport, hport, mport = ports
        with open(cfg, "w") as f:
            f.write("""receivers:
  otlp:
    protocols:
      grpc: {endpoint: 127.0.0.1:%d}
      http: {endpoint: 127.0.0.1:%d}
processors:
  memory_limiter: {check_interval: 100ms, limit_mib: 1, spike_limit_mib: 0}
exporters:
  file: {path: %s}
service:
  pipelines:
    profiles: {receivers: [otlp], processors: [memory_limiter], exporters: [file]}
  telemetry: {metrics: {address: 127.0.0.1:%d}}
""" % (gport, hport, os.path.join(tmp, "memlim.jsonl"), mport))
        return subprocess.Popen([gateway, "--config", cfg], stdout=open(glog, "w"), stderr=subprocess.STDOUT)
    gw, (gport, hport, mport) = start_on_free_ports(
        "the memory-limited gateway", 3, start_gateway,
        lambda ports: http_ok("http://127.0.0.1:%d/readyz" % ports[2]), glog)

    # The first RSS check may come after the first requests: wait for the first refusal.
    def refused_http():
        st, hd, body = http1(hport, request_bytes)
        return (st, hd, body) if st == 429 else None
    st, hd, body = wait_for("a 429 from the memory-limited gateway", refused_http)
    assert int(hd.get("retry-after", "0")) >= 1, hd
    assert body, "no google.rpc.Status in the 429"
    code, message, _ = grpc(gport, request_bytes, token=None)
    assert code == 14, (code, message)

    m = metricslib.scrape(mport)
    refused = metricslib.total(m, "stackrelay_gateway_samples_refused_total", component="otlp")
    assert refused >= 2 * samples_per_request and refused % samples_per_request == 0, refused
    assert metricslib.total(m, "stackrelay_gateway_samples_received_total", component="otlp") == \
        refused + metricslib.total(m, "stackrelay_gateway_samples_accepted_total", component="otlp")
    gw.send_signal(signal.SIGTERM)
    assert gw.wait(timeout=60) == 0
    log("over the memory limit: HTTP 429 with Retry-After, gRPC Unavailable, samples refused")


def k8s_phase(request_bytes):
    """k8s_attributes associates an OTLP sender's resources with its pod by
    the connection's peer address (pod_association from: connection), as
    the Collector's k8sattributes does: the fake API server's pod has
    status.podIP 127.0.0.1, where the test's requests come from."""
    if not shutil.which("node") or not shutil.which("openssl"):
        log("k8s: SKIPPED (node or openssl missing)")
        return
    d = os.path.join(tmp, "k8s")
    os.makedirs(d)
    state = {"namespaces": [{"metadata": {"name": "obs", "uid": "ns-obs"}}],
             "pods": [{"metadata": {"name": "otel-profiler-x7k2p", "namespace": "obs", "uid": "pod-otel"},
                       "spec": {"nodeName": "node-a", "containers": [{"name": "profiler", "image": "otel/p:1"}]},
                       "status": {"phase": "Running", "podIP": "127.0.0.1"}}]}
    kube, kubeconfig = kubelib.start(src, d, state, stderr=open(os.path.join(tmp, "kube.log"), "w"))
    procs.append(kube)
    cfg = os.path.join(tmp, "gateway-k8s.yaml")
    glog = os.path.join(tmp, "gateway-k8s.log")
    out = os.path.join(tmp, "k8s.jsonl")

    def start_gateway(ports):
        hport, mport = ports
        with open(cfg, "w") as f:
            f.write("""receivers:
  otlp:
    protocols:
      grpc: {endpoint: ""}
      http: {endpoint: 127.0.0.1:%d}
processors:
  k8s_attributes:
    auth_type: kubeConfig
    kube_config_path: %s
    wait_for_metadata: true
    pod_association:
      - sources: [{from: connection}]
    extract:
      metadata: [k8s.namespace.name, k8s.pod.name, k8s.pod.uid]
exporters:
  file: {path: %s}
service:
  pipelines:
    profiles: {receivers: [otlp], processors: [k8s_attributes], exporters: [file]}
  telemetry: {metrics: {address: 127.0.0.1:%d}}
""" % (hport, kubeconfig, out, mport))
        return subprocess.Popen([gateway, "--config", cfg], stdout=open(glog, "w"), stderr=subprocess.STDOUT)
    gw, (hport, mport) = start_on_free_ports(
        "the k8s gateway", 2, start_gateway, lambda ports: http_ok("http://127.0.0.1:%d/readyz" % ports[1]), glog)
    st, _, body = http1(hport, request_bytes)
    assert st == 200, (st, body)
    gw.send_signal(signal.SIGTERM)  # flushes the file exporter
    assert gw.wait(timeout=60) == 0
    text = open(out).read()
    assert '"k8s.pod.name"' in text and "otel-profiler-x7k2p" in text and "pod-otel" in text, text[:2000]
    kube.stdin.close()
    log("k8s: resources associated with the sender's pod by its address (pod_association from: connection)")


# ---- the run ----

def main():
    # A stripped binary, its debug twin served by a real debuginfod.
    srv = os.path.join(tmp, "srv")
    os.makedirs(srv)
    prog = os.path.join(tmp, "prog")
    run(["gcc", "-O1", "-g", "-o", prog, os.path.join(fixtures, "sym", "prog.c")])
    run(["objcopy", "--only-keep-debug", prog, os.path.join(srv, "prog.debug")])
    run(["objcopy", "--strip-all", prog, os.path.join(tmp, "prog.stripped")])
    syms = {}
    for line in run(["nm", "-P", "--defined-only", prog]).splitlines():
        f = line.split()
        if len(f) >= 3:
            syms[f[0]] = int(f[2], 16)
    bid = next(line.split()[-1] for line in run(["readelf", "-n", os.path.join(tmp, "prog.stripped")]).splitlines()
               if "Build ID:" in line)
    leaf, middle = syms["sr_fixture_leaf"] + 4, syms["sr_fixture_middle"] + 4
    dlog = os.path.join(tmp, "debuginfod.log")
    _, (dport,) = start_on_free_ports(
        "debuginfod", 1,
        lambda ports: subprocess.Popen(["debuginfod", "-F", "-p", str(ports[0]), "-d", os.path.join(tmp, "db.sqlite"),
                                        "-t", "0", "-g", "0", srv],
                                       stdout=open(dlog, "w"), stderr=subprocess.STDOUT),
        lambda ports: http_ok("http://127.0.0.1:%d/buildid/%s/debuginfo" % (ports[0], bid)), dlog)
    durl = "http://127.0.0.1:%d" % dport
    log("debuginfod serves", bid)

    # The fake Pyroscope.
    portfile = os.path.join(tmp, "pyroscope.port")
    procs.append(subprocess.Popen([sys.executable, os.path.join(src, "tests", "fakes", "fake_pyroscope.py"),
                                   "--port-file", portfile, "--lifetime", "600"],
                                  stdout=open(os.path.join(tmp, "pyroscope.log"), "w"), stderr=subprocess.STDOUT))
    wait_for("the fake Pyroscope", lambda: os.path.exists(portfile) and open(portfile).read().strip())
    pport = int(open(portfile).read().strip())

    # The gateway.
    with open(os.path.join(tmp, "token"), "w") as f:
        f.write("s3cret\n")
    cfg = os.path.join(tmp, "gateway.yaml")
    env = dict(os.environ, HOME=tmp)
    env.pop("DEBUGINFOD_URLS", None)
    # Under ASan: glibc's dprintf buffer inside libdebuginfod is reported as a leak (not ours).
    supp = os.path.join(fixtures, "sym", "lsan.supp")
    env["LSAN_OPTIONS"] = (env.get("LSAN_OPTIONS", "") + ":suppressions=" + supp).lstrip(":")
    glog = os.path.join(tmp, "gateway.log")

    def start_gateway(ports):
        gport, hport, mport = ports
        with open(cfg, "w") as f:
            f.write("""receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:%d
        max_recv_msg_size_mib: 1
        auth: {bearer_token_file: %s}
      http:
        endpoint: 127.0.0.1:%d
        max_request_body_size: 1MiB
processors:
  symbolize: {cache_dir: %s, debuginfod_urls: [%s]}
  batch: {timeout: 200ms}
exporters:
  otlp_http:
    endpoint: http://127.0.0.1:%d
    retry_on_failure: {initial_interval: 100ms}
    process_attributes: sample
service:
  pipelines:
    profiles: {receivers: [otlp], processors: [symbolize, batch], exporters: [otlp_http]}
  telemetry: {metrics: {address: 127.0.0.1:%d}}
""" % (gport, os.path.join(tmp, "token"), hport, os.path.join(tmp, "cache"), durl, pport, mport))
        return subprocess.Popen([gateway, "--config", cfg], stdout=open(glog, "w"), stderr=subprocess.STDOUT,
                                env=env)
    gw, (gport, hport, mport) = start_on_free_ports(
        "the gateway", 3, start_gateway, lambda ports: http_ok("http://127.0.0.1:%d/readyz" % ports[2]), glog)

    def ready():
        if gw.poll() is not None:
            raise SystemExit("FAIL: the gateway exited: " + open(glog).read())
        return http_ok("http://127.0.0.1:%d/readyz" % mport)

    # ---- good requests: every transport, both versions ----
    sent = {}  # service -> (symbolized value, native value)

    def send_ok(name, version, how, extra=0):
        vals = (10 + len(sent) * 3, 5 + len(sent))
        req = build_request(version, name, leaf, middle, bid, vals, extra)
        raw = req.SerializeToString()
        assert not extra or len(raw) > 256 * 1024, len(raw)
        vals = (vals[0] + extra, vals[1])
        if how == "http1":
            st, hd, body = http1(hport, raw)
        elif how == "http1-gzip-chunked":
            st, hd, body = http1(hport, gzip.compress(raw), encoding="gzip", chunked=True)
        elif how == "http1-json":
            st, hd, body = http1(hport, json_format.MessageToJson(req).encode(), ctype="application/json")
            assert hd.get("content-type") == "application/json", hd
            assert st == 200, (name, st, body)
            sent[name] = vals
            return
        elif how == "h2c":
            hd, body, _ = h2_call(hport, HTTP_PATH, [("content-type", "application/x-protobuf")], raw)
            st = int(hd[":status"])
        elif how in ("grpc", "grpc-gzip"):
            code, message, body = grpc(gport, gzip.compress(raw) if how == "grpc-gzip" else raw,
                                       compress=how == "grpc-gzip")
            assert code == 0, (name, code, message)
            assert body[0] == 0 and int.from_bytes(body[1:5], "big") == len(body) - 5, body
            r = parse_response(body[5:])
            assert r.partial_success.rejected_profiles == 0, r
            sent[name] = vals
            return
        assert st == 200, (name, how, st, body)
        r = parse_response(body)
        assert r.partial_success.rejected_profiles == 0, r
        sent[name] = vals

    cases = [("v10-http1", "1.10", "http1"), ("v9-http1-gzip", "1.9", "http1-gzip-chunked"),
             ("v10-h2c", "1.10", "h2c"), ("v9-h2c", "1.9", "h2c"), ("v10-grpc", "1.10", "grpc"),
             ("v9-grpc-gzip", "1.9", "grpc-gzip"), ("v10-json", "1.10", "http1-json")]
    for name, version, how in cases:
        send_ok(name, version, how)
        log("accepted", name)
    # Over 256 KiB: decoded on the receiver's decode thread.
    for name, version, how in [("large-http1", "1.10", "http1"), ("large-grpc", "1.9", "grpc"),
                               ("large-h2c", "1.10", "h2c")]:
        send_ok(name, version, how, extra=40000)
        log("accepted", name)
    total = sum(a + b for a, b in sent.values())

    def stats():
        with urllib.request.urlopen("http://127.0.0.1:%d/stats" % pport, timeout=10) as r:
            return json.loads(r.read())

    def all_named():
        st = stats()
        if st["errors"]:
            raise SystemExit("FAIL: the fake Pyroscope refused: %s" % st["errors"])
        for name, (sym_v, nat_v) in sent.items():
            keys = {k: v for k, v in st["by_key"].items() if k.startswith(name + "|")}
            sym = sum(v for k, v in keys.items()
                      if "work;main" in k and "thread.name=worker-1" in k and "app.region=eu-1" in k)
            nat = sum(v for k, v in keys.items() if "sr_fixture_leaf" in k and "sr_fixture_middle" in k)
            if sym != sym_v or nat != nat_v:
                return None
        return st
    try:
        st = wait_for("every sample at the fake Pyroscope, native frames named", all_named, timeout=120)
    except SystemExit:
        print("sent: %s\nat the fake Pyroscope: %s" % (sent, json.dumps(stats()["by_key"], indent=1)), file=sys.stderr)
        raise
    log("every sample arrived (%d in %d requests), native frames named through debuginfod" % (total, len(sent)))
    assert st["accepted_samples"] == total, (st["accepted_samples"], total)
    m = metricslib.scrape(mport)
    assert metricslib.total(m, "stackrelay_gateway_samples_received_total", component="otlp") == total
    assert metricslib.total(m, "stackrelay_gateway_samples_accepted_total", component="otlp") == total

    # ---- bad input ----
    good = build_request("1.10", "bad", leaf, middle, bid, (1, 1)).SerializeToString()
    bomb = gzip.compress(b"\0" * (64 << 20), 9)
    checks = [
        ("ambiguous version", http1(hport, ambiguous_request()), 400),
        ("truncated gzip", http1(hport, gzip.compress(good)[:-12], encoding="gzip"), 400),
        ("gzip bomb", http1(hport, bomb, encoding="gzip"), 413),
        ("too large", http1(hport, b"\x0a" + b"\0" * (2 << 20)), 413),
        ("wrong content type", http1(hport, good, ctype="text/plain"), 415),
        ("unknown encoding", http1(hport, good, encoding="br"), 415),
        ("malformed protobuf", http1(hport, b"\x0a\xff\xff\xff"), 400),
        ("wrong path", http1(hport, good, path="/v1/profiles"), 404),
        ("GET", http1(hport, b"", method="GET"), 405),
        ("malformed JSON", http1(hport, b"{\"resourceProfiles\": [", ctype="application/json"), 400),
    ]
    for what, (status, hd, body), want in checks:
        assert status == want, (what, status, want, body)
        if want in (400, 413):
            assert body, (what, "no google.rpc.Status in the answer")
        log("HTTP %s -> %d" % (what, status))
    grpc_checks = [
        ("ambiguous version", grpc(gport, ambiguous_request()), 3),
        ("truncated gzip", grpc(gport, gzip.compress(good)[:-12], compress=True), 3),
        ("gzip bomb", grpc(gport, bomb, compress=True), 8),
        ("too large", grpc(gport, b"\x0a" + b"\0" * (2 << 20)), 8),
        ("malformed protobuf", grpc(gport, b"\x0a\xff\xff\xff"), 3),
        ("no token", grpc(gport, good, token=None), 16),
        ("wrong token", grpc(gport, good, token="nope"), 16),
        ("wrong content type", grpc(gport, good, ctype="application/json"), 12),
    ]
    for what, (code, message, _), want in grpc_checks:
        assert code == want, (what, code, want, message)
        assert message, (what, "no grpc-message")
        log("gRPC %s -> %d (%s)" % (what, code, message))
    # The gateway is still up and counted nothing more.
    assert ready()
    m = metricslib.scrape(mport)
    assert metricslib.total(m, "stackrelay_gateway_samples_received_total", component="otlp") == total
    assert metricslib.total(m, "stackrelay_gateway_otlp_too_large_requests_total") >= 4
    http1_edges(hport, build_request("1.10", "edges", leaf, middle, bid, (1, 1)).SerializeToString())
    send_ok("after-bad-input", "1.10", "http1")
    log("still serving after bad input")
    gw.send_signal(signal.SIGTERM)
    rc = gw.wait(timeout=60)
    assert rc == 0, "gateway exit %d: %s" % (rc, open(os.path.join(tmp, "gateway.log")).read()[-3000:])
    tls_phase(build_request("1.10", "tls", leaf, middle, bid, (2, 3)).SerializeToString(), 5)
    memory_limit_phase(build_request("1.10", "memlim", leaf, middle, bid, (2, 3)).SerializeToString(), 5)
    k8s_phase(build_request("1.10", "k8s", leaf, middle, bid, (2, 3)).SerializeToString())
    log("OK")
    return 0


if __name__ == "__main__":
    try:
        rc = main()
    except BaseException:
        for name in ("gateway.log", "gateway-tls.log", "gateway-memlim.log", "gateway-k8s.log", "kube.log",
                     "pyroscope.log", "debuginfod.log"):
            p = os.path.join(tmp, name)
            if os.path.exists(p):
                print("---- " + name, file=sys.stderr)
                print(open(p).read()[-6000:], file=sys.stderr)
        cleanup()
        raise
    cleanup()
    sys.exit(rc)
