# SPDX-License-Identifier: Apache-2.0
"""Helpers of the sender's integration tests (sender-*.py): the Node fake
gateway (tests/fakes/fake-gateway.js), the sender driver
(tests/integration/sender-driver.c), certificates made with the openssl CLI.
Every process started here is stopped by the test that started it."""
import atexit
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ports import free_port  # noqa: E402
import metricslib  # noqa: E402

SOURCE_ROOT = os.environ.get("SR_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
FAKE = os.path.join(SOURCE_ROOT, "tests", "fakes", "fake-gateway.js")


def skip(why):
    print(f"SKIP: {why}")
    sys.exit(77)


def driver_path():
    p = os.environ.get("SR_SENDER_DRIVER")
    if not p and os.environ.get("SR_BUILD_ROOT"):
        p = os.path.join(os.environ["SR_BUILD_ROOT"], "tests", "integration", "sender-driver")
    if not p or not os.access(p, os.X_OK):
        skip("sender-driver not built (SR_SENDER_DRIVER)")
    return p


def need(*tools):
    for t in tools:
        if not shutil.which(t):
            skip(f"{t} not installed")


class Fake:
    """The fake gateway as a child process, on an ephemeral loopback port."""

    def __init__(self, tmp, name, args, port=0):
        need("node")
        self.state = os.path.join(tmp, f"{name}.state.json")
        self.port_file = os.path.join(tmp, f"{name}.port")
        for f in (self.state, self.port_file):
            if os.path.exists(f):
                os.unlink(f)
        self.log = open(os.path.join(tmp, f"{name}.log"), "w")
        self.proc = subprocess.Popen(["node", FAKE, "--port-file", self.port_file, "--state", self.state,
                                      "--port", str(port)] + list(args),
                                     stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 15
        while not os.path.exists(self.port_file):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise SystemExit(f"fake gateway did not start; see {self.log.name}")
            time.sleep(0.05)
        with open(self.port_file) as f:
            self.port = int(f.read())

    def stats(self):
        with open(self.state) as f:
            return json.load(f)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def run_driver(args, timeout=120, env=None):
    """Runs the driver; returns (exit status, its JSON accounting, stderr)."""
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run([driver_path()] + list(args), capture_output=True, text=True, timeout=timeout, env=e)
    try:
        out = json.loads(p.stdout.strip().splitlines()[-1]) if p.stdout.strip() else None
    except json.JSONDecodeError:
        out = None
    return p.returncode, out, p.stderr


def expected_per_pid(windows, samples):
    """What the driver submits: window w -> pid 1000 + w, counts (i % 5) + 1."""
    return {str(1000 + w): sum((i % 5) + 1 for i in range(samples)) for w in range(windows)}


# Called with no arguments before a failing check exits: tests set it to print what they know.
on_fail = None


def check(cond, what):
    if not cond:
        print(f"FAIL: {what}")
        if on_fail:
            on_fail()
        sys.exit(1)
    print(f"ok: {what}")


def make_certs(d, server_names=("localhost",), ips=("127.0.0.1",)):
    """A CA, a server certificate for server_names/ips, a client certificate, and an unrelated CA."""
    need("openssl")

    def ossl(*a):
        subprocess.run(["openssl"] + list(a), check=True, capture_output=True, cwd=d)

    for ca in ("ca", "otherca"):
        ossl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN=stackrelay test {ca}",
             "-keyout", f"{ca}.key", "-out", f"{ca}.pem")
    san = ",".join([f"DNS:{n}" for n in server_names] + [f"IP:{i}" for i in ips])
    with open(os.path.join(d, "server.ext"), "w") as f:
        f.write(f"subjectAltName={san}\nextendedKeyUsage=serverAuth\n")
    with open(os.path.join(d, "client.ext"), "w") as f:
        f.write("extendedKeyUsage=clientAuth\n")
    for who, ca in (("server", "ca"), ("client", "ca"), ("rogue", "otherca")):
        ossl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN=stackrelay-{who}", "-keyout", f"{who}.key",
             "-out", f"{who}.csr")
        ext = "server.ext" if who == "server" else "client.ext"
        ossl("x509", "-req", "-in", f"{who}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key", "-CAcreateserial",
             "-days", "2", "-extfile", ext, "-out", f"{who}.pem")
    return {k: os.path.join(d, k) for k in ("ca.pem", "otherca.pem", "server.pem", "server.key", "client.pem",
                                             "client.key", "rogue.pem", "rogue.key")}


def tmpdir(prefix="sr-sender-"):
    """A new temporary directory, removed when the test exits (however it ends, short of a signal)."""
    d = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, d, ignore_errors=True)
    return d




def gateway_metrics(port):
    """The real gateway's /metrics, series of component="agent" summed by family."""
    return metricslib.sums(metricslib.scrape(port, timeout=5), component="agent")


class Gateway:
    """The real stackrelay-gateway (SR_GATEWAY) with an agent receiver and an unreachable exporter."""

    def __init__(self, tmp, name, receiver_yaml="", processors_yaml=""):
        gateway = os.environ.get("SR_GATEWAY")
        if not gateway or not os.access(gateway, os.X_OK):
            skip("SR_GATEWAY not built")
        self.port, self.mport = free_port(), free_port()
        cfg = os.path.join(tmp, f"{name}.yaml")
        procs = "processors: [symbolize], " if processors_yaml else ""
        with open(cfg, "w") as f:
            f.write(f"""receivers:
  agent:
    endpoint: 127.0.0.1:{self.port}
{receiver_yaml}
{processors_yaml}exporters:
  otlp_http:
    endpoint: http://127.0.0.1:1
service:
  pipelines:
    profiles: {{receivers: [agent], {procs}exporters: [otlp_http]}}
  telemetry: {{metrics: {{address: 127.0.0.1:{self.mport}}}}}
  shutdown_timeout: 1s
""")
        self.log = open(os.path.join(tmp, f"{name}.log"), "w")
        self.proc = subprocess.Popen([gateway, "--config", cfg], stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 15
        while True:
            try:
                self.metrics()
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise SystemExit(f"gateway did not start; see {self.log.name}")
                time.sleep(0.1)

    def metrics(self):
        return gateway_metrics(self.mport)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
FRAME_DATA, FRAME_HEADERS = 0, 1


def rst(sock):
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
    except OSError:
        pass


class Proxy(threading.Thread):
    """A TCP proxy that forwards whole HTTP/2 frames to 127.0.0.1:up (read per connection, so a test may
    switch it). Connection k (1-based): k % cut == 0 cut the request; k % lose == 0 lose the response."""

    def __init__(self, upstream_port, cut=0, lose=0):
        super().__init__(daemon=True)
        self.up = upstream_port
        self.cut, self.lose = cut, lose
        self.ls = socket.socket()
        self.ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(64)
        self.port = self.ls.getsockname()[1]
        self.n = 0
        self.cuts = self.losses = 0
        self.lock = threading.Lock()
        self.stopping = False

    def run(self):
        while not self.stopping:
            try:
                c, _ = self.ls.accept()
            except OSError:
                return
            self.n += 1
            mode = "lose" if self.lose and self.n % self.lose == 0 else "cut" if self.cut and self.n % self.cut == 0 else ""
            try:
                u = socket.create_connection(("127.0.0.1", self.up))
            except OSError:
                c.close()
                continue
            threading.Thread(target=self.pump, args=(c, u, True, mode), daemon=True).start()
            threading.Thread(target=self.pump, args=(u, c, False, mode), daemon=True).start()

    def pump(self, src, dst, client_to_server, mode):
        """Forwards whole HTTP/2 frames, acting on the first one that matters for the mode."""
        buf = b""
        skip = len(PREFACE) if client_to_server else 0
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                buf += data
                out = b""
                while True:
                    if skip:
                        if len(buf) < skip:
                            break
                        out, buf, skip = out + buf[:skip], buf[skip:], 0
                        continue
                    if len(buf) < 9:
                        break
                    length = int.from_bytes(buf[:3], "big")
                    ftype = buf[3]
                    stream = int.from_bytes(buf[5:9], "big") & 0x7FFFFFFF
                    if len(buf) < 9 + length:
                        break
                    frame, buf = buf[:9 + length], buf[9 + length:]
                    if (mode == "cut" and client_to_server and ftype == FRAME_DATA) or \
                       (mode == "lose" and not client_to_server and ftype == FRAME_HEADERS and stream):
                        with self.lock:
                            if mode == "cut":
                                self.cuts += 1
                            else:
                                self.losses += 1
                        if out:
                            dst.sendall(out)
                        rst(src)
                        rst(dst)
                        return
                    out += frame
                if out:
                    dst.sendall(out)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def stop(self):
        self.stopping = True
        self.ls.close()
