#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Hostile peers against the gateway's `agent` receiver (docs/reliability.md,
"Hostile peers"): chaos.py CASE runs one attack against a real gateway while
a legitimate agent sender delivers, and checks that the gateway stays up,
answers /healthz, keeps its RSS under memory_limiter's limit, that every
sample the legitimate agent sent reached the fake Pyroscope, and that the
gateway counted the attack. Attackers connect from 127.0.0.2 and up, the
legitimate agent from 127.0.0.1. Each case prints a FIGURE line (JSON)."""
import gzip
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chaoslib as C  # noqa: E402
import h2raw as H  # noqa: E402

AGENT = "stackrelay_gateway_agent_"


def reconnecting(a, port, make, **kw):
    """A connection to attack through, opened again whenever the gateway closes it."""
    while not a.stopping:
        try:
            c = H.Conn(port, **kw)
            a.count("connections")
            return c
        except (OSError, H.Closed):
            a.count("connect_failed")
            time.sleep(0.05)
    return None


# ---- HTTP/2 rapid reset: HEADERS + RST_STREAM in a loop ----
def rapid_reset(a, i, gw):
    block = H.request_block()
    while not a.stopping:
        c = reconnecting(a, gw.port, None)
        if not c:
            return
        c.read(0.2)
        try:
            while not a.stopping and c.read():
                out = b""
                for _ in range(100):
                    sid = c.stream()
                    out += H.frame(H.HEADERS, H.END_HEADERS, sid, block) + \
                        H.frame(H.RST_STREAM, 0, sid, H.CANCEL.to_bytes(4, "big"))
                c.send(out)
                a.count("streams", 100)
        except H.Closed:
            pass
        a.count("goaways", c.goaways)
        c.close()


# ---- CONTINUATION flood: a header block that never ends ----
def continuation_flood(a, i, gw):
    while not a.stopping:
        c = reconnecting(a, gw.port, None)
        if not c:
            return
        c.read(0.2)
        sid = c.stream()
        try:
            c.send(H.frame(H.HEADERS, 0, sid, H.request_block()))
            piece = H.literal("x-filler", "f" * 40)
            while not a.stopping and c.read():
                c.send(b"".join(H.frame(H.CONTINUATION, 0, sid, piece) for _ in range(50)))
                a.count("continuations", 50)
        except H.Closed:
            pass
        c.close()


# ---- oversized headers: lists over max_header_list_bytes, and one field over HPACK's 64 KiB ----
def oversized_headers(a, i, gw):
    while not a.stopping:
        c = reconnecting(a, gw.port, None)
        if not c:
            return
        c.read(0.2)
        try:
            n = 0
            while not a.stopping and c.read():
                n += 1
                if n % 20 == 0:
                    # One header field bigger than any header list allowed, across CONTINUATIONs.
                    block = H.request_block(extra=[("x-huge", "h" * 70000)])
                    a.count("huge_field")
                else:
                    block = H.request_block(extra=[(f"x-big-{k}", "b" * 4000) for k in range(12)])
                    a.count("big_lists")
                sid = c.stream()
                chunks = [block[o:o + 16384] for o in range(0, len(block), 16384)]
                out = H.frame(H.HEADERS, H.END_STREAM | (H.END_HEADERS if len(chunks) == 1 else 0), sid, chunks[0])
                for k, ch in enumerate(chunks[1:], 1):
                    out += H.frame(H.CONTINUATION, H.END_HEADERS if k == len(chunks) - 1 else 0, sid, ch)
                c.send(out)
                c.read(0.02)
        except H.Closed:
            pass
        c.close()


# ---- gzip bombs: small bodies that decompress far beyond max_request_bytes ----
def make_bomb(plain_mib):
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = bytes(1 << 20)
    out = [z.compress(chunk) for _ in range(plain_mib)]
    out.append(z.flush())
    return b"".join(out)


BOMB = []


def gzip_bomb(a, i, gw):
    bomb = BOMB[0]
    while not a.stopping:
        c = reconnecting(a, gw.port, None)
        if not c:
            return
        c.read(0.5)
        try:
            for _ in range(4):
                if a.stopping or not c.read():
                    break
                c.post(bomb, gzip=True)
                a.count("bombs")
                a.count("bomb_bytes", len(bomb))
            # Their answers (413), however long the gateway takes to refuse them.
            deadline = time.monotonic() + 60
            while c.headers + c.resets < 4 and c.read(0.2) and time.monotonic() < deadline and not a.stopping:
                pass
        except H.Closed:
            pass
        c.close()


# ---- protobuf with huge declared lengths and deep nesting ----
def pb_bombs():
    v = H.varint
    head = v(1 << 3) + v(1)
    nested = b""
    for _ in range(20000):
        nested = H.varint(15 << 3 | 2) + H.varint(len(nested)) + nested
    sample_nested = b""
    for _ in range(5000):
        sample_nested = H.pb_bytes(5, sample_nested)
    return [
        head + v(5 << 3 | 2) + v(1 << 62) + b"\x01\x02",  # a sample of 2^62 bytes
        head + v(6 << 3 | 2) + v(0xFFFFFFFF) + b"x" * 100,  # a stack of 4 GiB
        head + H.pb_bytes(2, v(1 << 3 | 2) + v(1 << 40)),  # a resource's instance_id of 1 TiB
        head + H.pb_bytes(99, nested),  # 20000 levels of an unknown field
        head + sample_nested,  # samples inside samples, 5000 deep
        head + b"\xff" * 11,  # a varint key of 11 bytes
        head + v(5 << 3 | 2) + v(300) + H.pb_bytes(6, b"\x80" * 300),  # truncated inner message
    ]


def protobuf_bombs(a, i, gw):
    bodies = pb_bombs()
    while not a.stopping:
        c = reconnecting(a, gw.port, None)
        if not c:
            return
        c.read(0.2)
        try:
            for _ in range(50):
                if a.stopping or not c.read():
                    break
                for b in bodies:
                    c.post(b)
                a.count("bodies", len(bodies))
                c.read(0.05)
        except H.Closed:
            pass
        c.close()


# ---- 100k tiny requests (h2load) ----
def tiny_requests(a, i, gw):
    body = os.path.join(tempfile.gettempdir(), f"sr-chaos-tiny-{os.getpid()}.pb")
    with open(body, "wb") as f:
        f.write(H.push_request())
    p = subprocess.run(["h2load", "-n", "100000", "-c", "8", "-m", "16", "-d", body, "-H",
                        "content-type: application/x-protobuf", f"http://127.0.0.1:{gw.port}{H.PUSH_PATH}"],
                       capture_output=True, text=True, timeout=300)
    os.unlink(body)
    for line in p.stdout.splitlines():
        if line.startswith("requests:"):
            w = line.split()
            a.count("requests", int(w[1]))
            a.count("done", int(w[7]))
        if line.startswith("status codes:"):
            a.count("2xx", int(line.split()[2]))
    if p.returncode != 0:
        raise RuntimeError(f"h2load failed: {p.stderr[-500:]}")


# ---- clients that never read: PING floods whose ACKs they never take, and zero windows for our answers ----
def never_reads(a, i, gw):
    """Even workers flood PINGs; odd ones send requests with a zero window (no answer can be sent) and
    then hold the connection in silence."""
    body = H.push_request(instance_id=f"chaos-noread-{i:04d}".encode())
    conns = []
    while not a.stopping:
        try:
            c = H.Conn(gw.port, client_settings=[(H.SETTINGS_INITIAL_WINDOW_SIZE, 0)], timeout=2,
                       src=f"127.0.0.{3 + i}")
            a.count("connections")
        except OSError:
            a.count("connect_failed")
            time.sleep(0.1)
            continue
        conns.append(c)
        c.s.settimeout(2)
        try:
            if i % 2 == 0:
                ping = H.frame(H.PING, 0, 0, b"chaos!!!")
                while not a.stopping:
                    c.send(ping * 256)
                    a.count("pings", 256)
            else:
                # Without a SETTINGS ACK nghttp2 still applies our window of 0 to its answers.
                for _ in range(32):
                    c.post(body)
                    a.count("requests")
                a.stop_ev.wait(6)
        except (H.Closed, socket.timeout, OSError):
            pass  # our send buffer is full (the gateway stopped reading us), or it closed
        if len(conns) >= 16:
            conns.pop(0).close()
    for c in conns:
        c.close()


# ---- slowloris: thousands of connections that never finish a request ----
def slowloris(a, i, gw):
    # Half an HTTP/2 preface per connection, nothing after.
    C.hold_connections(a, gw.port, H.PREFACE[:10], target=10000)


# ---- mTLS: expired, foreign-CA and absent client certificates; wrong and absent tokens ----
def make_expired(tmp, certs):
    def ossl(*args):
        subprocess.run(["openssl"] + list(args), check=True, capture_output=True, cwd=tmp)

    with open(os.path.join(tmp, "ca.cnf"), "w") as f:
        f.write("[ca]\ndefault_ca = d\n[d]\ndir = .\ndatabase = index.txt\nnew_certs_dir = .\nserial = serial\n"
                "default_md = sha256\npolicy = p\n[p]\ncommonName = supplied\n")
    open(os.path.join(tmp, "index.txt"), "w").close()
    with open(os.path.join(tmp, "serial"), "w") as f:
        f.write("1000\n")
    ossl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=stackrelay-expired", "-keyout", "expired.key",
         "-out", "expired.csr")
    ossl("ca", "-batch", "-config", "ca.cnf", "-cert", certs["ca.pem"], "-keyfile", os.path.join(tmp, "ca.key"),
         "-in", "expired.csr", "-out", "expired.pem", "-startdate", "20200101000000Z", "-enddate",
         "20200102000000Z", "-extfile", "client.ext")
    return os.path.join(tmp, "expired.pem"), os.path.join(tmp, "expired.key")


TLS = {}


def tls_ctx(cert=None):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(TLS["ca.pem"])
    ctx.set_alpn_protocols(["h2"])
    if cert:
        ctx.load_cert_chain(*cert)
    return ctx


def mtls(a, i, gw):
    kinds = ["expired", "foreign", "absent", "wrong_token", "no_token"]
    kind = kinds[i % len(kinds)]
    certs = {"expired": (TLS["expired.pem"], TLS["expired.key"]), "foreign": (TLS["rogue.pem"], TLS["rogue.key"]),
             "absent": None}
    ctx = tls_ctx(certs.get(kind, (TLS["client.pem"], TLS["client.key"])))
    while not a.stopping:
        try:
            c = H.Conn(gw.port, tls=ctx, timeout=5)
        except (OSError, ssl.SSLError):
            a.count(f"{kind}_refused")  # TLS 1.2-style: the handshake itself fails
            time.sleep(0.02)
            continue
        try:
            if kind in certs:
                # TLS 1.3: the client's certificate is judged after its handshake finished.
                if c.read(2) or c.headers:
                    a.count(f"{kind}_served")
                else:
                    a.count(f"{kind}_refused")
                c.close()
                continue
            c.read(0.5)
            for _ in range(20):
                c.post(H.push_request(), token="not-the-token" if kind == "wrong_token" else None)
                a.count(f"{kind}_requests")
            deadline = time.monotonic() + 5
            while c.headers < 20 and c.read(0.2) and time.monotonic() < deadline:
                pass
            a.count(f"{kind}_answers", c.headers)
        except H.Closed:
            pass
        c.close()


CASES = {
    # name: (attack, threads, load (from the attack's counts), counters that must have moved, receiver extra)
    "rapid-reset": (rapid_reset, 2, "{streams:,} streams opened and reset over {connections:,} connections",
                    [AGENT + "streams_reset_total", AGENT + "protocol_errors_total"], ""),
    "continuation-flood": (continuation_flood, 2, "{continuations:,} CONTINUATION frames over {connections:,} connections",
                           [AGENT + "protocol_errors_total"], ""),
    "oversized-headers": (oversized_headers, 2,
                          "{big_lists:,} header lists of 48 KiB, {huge_field:,} fields of 70 KB, {connections:,} connections",
                          [AGENT + "headers_too_large_total", AGENT + "protocol_errors_total"], ""),
    "gzip-bomb": (gzip_bomb, 2, "{bombs:,} bodies of {bomb_bytes:,} bytes in all, each 256 MiB gunzipped",
                  [AGENT + 'requests_total{component="agent",status="413"}'], ""),
    "protobuf-bombs": (protobuf_bombs, 2, "{bodies:,} bodies with 2^62-byte lengths or 20000-deep nesting",
                       [AGENT + 'requests_total{component="agent",status="400"}', AGENT + "protocol_errors_total"], ""),
    "tiny-requests": (tiny_requests, 1, "{requests:,} requests over 8 connections x 16 streams (h2load), {2xx:,} 2xx",
                      [AGENT + "duplicate_requests_total"], ""),
    "never-reads": (never_reads, 4, "{requests:,} requests and {pings:,} PINGs over {connections:,} connections "
                    "with a zero window, never read",
                    [AGENT + "keepalive_timeouts_total", AGENT + "protocol_errors_total"], ""),
    "slowloris": (slowloris, 1, "{opened:,} connections opened from 20 addresses, {held_max:,} open at once on its side",
                  # Evictions can close every idle connection before its header_timeout.
                  [AGENT + "connections_refused_peer_total", AGENT + "connections_evicted_total",
                   "?" + AGENT + "header_timeouts_total"], ""),
    "mtls": (mtls, 5, "handshakes: {expired_refused:,} expired, {foreign_refused:,} foreign CA, {absent_refused:,} "
             "without a certificate; {wrong_token_requests:,} wrong-token, {no_token_requests:,} token-less requests",
             [AGENT + "tls_handshake_failures_total", AGENT + "auth_failures_total"], ""),
}


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in CASES:
        print(f"usage: chaos.py {{{','.join(CASES)}}}")
        sys.exit(2)
    name = sys.argv[1]
    fn, threads, load, counters, extra = CASES[name]
    tls = token = None
    if name == "tiny-requests" and not shutil.which("h2load"):
        C.skip("h2load (nghttp2-client) not installed")
    if name == "gzip-bomb":
        BOMB.append(make_bomb(256))  # 256 MiB of zeros in ~250 KiB
    if name == "mtls":
        if not shutil.which("openssl"):
            C.skip("openssl not installed")
        d = C.slib.tmpdir("sr-chaos-certs-")
        TLS.update(C.slib.make_certs(d))
        TLS["expired.pem"], TLS["expired.key"] = make_expired(d, TLS)
        tls, token = TLS, "chaos-token-0123456789"
    # Slowloris: the legitimate agent comes when the attacker's connections are open.
    under_way = (lambda st: st.get("held_max", 0) >= 5000) if name == "slowloris" else (lambda st: True)
    C.run_case(name, fn, threads=threads, tls=tls, token=token, receiver_extra=extra, load=load,
               counters=counters, under_way=under_way)


if __name__ == "__main__":
    main()
