# SPDX-License-Identifier: Apache-2.0
"""The chaos suite's harness: a real stackrelay-gateway (SR_GATEWAY) with its
`agent` receiver (and, for the otlp cases, its `otlp` receiver) and a memory limit, exporting to the fake Pyroscope
(tests/fakes/fake_pyroscope.py), a legitimate agent sender
(tests/integration/sender-driver.c: the agent's real sender and transport)
delivering while an attack runs in threads, and watchers of the gateway's
RSS and /healthz. Every process started here is stopped here."""
import collections
import http.client
import importlib.machinery
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_ROOT = os.environ.get("SR_SOURCE_ROOT", os.path.join(HERE, "..", ".."))
slib = importlib.machinery.SourceFileLoader(
    "sender_lib", os.path.join(SOURCE_ROOT, "tests", "integration", "sender-lib.py")).load_module()
sys.path.insert(0, os.path.join(SOURCE_ROOT, "tests", "integration"))
import metricslib  # noqa: E402

# memory_limiter.limit_mib of every configuration here. Under AddressSanitizer its shadow memory and
# quarantine would keep the limiter refusing the legitimate agent: the RSS is not checked there.
SANITIZED = os.environ.get("SR_SANITIZED") == "1"
LIMIT_MIB = 4096 if SANITIZED else 256
PER_PEER = 256   # max_connections_per_peer
WINDOWS, SAMPLES, INTERVAL_MS = 40, 50, 150  # the legitimate sender: 6 s of windows


def skip(why):
    slib.skip(why)


def raise_fd_limit(want=20000):
    """Raises this process's descriptor limit (the gateway inherits it); returns the new soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    new = want if hard == resource.RLIM_INFINITY else min(want, hard)
    if new > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


class Pyroscope:
    def __init__(self, tmp):
        self.port_file = os.path.join(tmp, "pyroscope.port")
        self.proc = subprocess.Popen([sys.executable, os.path.join(SOURCE_ROOT, "tests", "fakes", "fake_pyroscope.py"),
                                      "--port-file", self.port_file, "--lifetime", "600"],
                                     stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "pyroscope.log"), "w"))
        deadline = time.monotonic() + 30
        while not (os.path.exists(self.port_file) and open(self.port_file).read().strip()):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("fake Pyroscope did not start")
            time.sleep(0.05)
        self.port = int(open(self.port_file).read())

    def stats(self):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/stats", timeout=30) as r:
            return json.load(r)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)


class Gateway:
    """The real gateway: agent receiver (h2c, or TLS + mTLS + token), memory_limiter, batch, otlp_http."""

    def __init__(self, tmp, pyroscope_port, receiver_extra="", tls=None, token_file=None, per_peer=PER_PEER,
                 otlp_extra=None, otlp_proto=""):
        gateway = os.environ.get("SR_GATEWAY")
        if not gateway or not os.access(gateway, os.X_OK):
            skip("SR_GATEWAY not built")
        self.port, self.mport = slib.free_port(), slib.free_port()
        # otlp_extra (a string, maybe empty): the otlp receiver too, OTLP/HTTP on hport, OTLP/gRPC on gport;
        # otlp_proto: more settings of both protocols (", tls: {...}, auth: {...}").
        self.hport = self.gport = None
        otlp = ""
        if otlp_extra is not None:
            self.hport, self.gport = slib.free_port(), slib.free_port()
            otlp = f"""  otlp:
    protocols:
      grpc: {{endpoint: 127.0.0.1:{self.gport}{otlp_proto}}}
      http: {{endpoint: 127.0.0.1:{self.hport}{otlp_proto}}}
    header_timeout: 3s
    request_timeout: 5s
    idle_timeout: 10s
{otlp_extra}"""
        self.tls = tls
        sec = ""
        if tls:
            sec += (f"    tls: {{cert_file: {tls['server.pem']}, key_file: {tls['server.key']}, "
                    f"client_ca_file: {tls['ca.pem']}}}\n")
        if token_file:
            sec += f"    auth: {{bearer_token_file: {token_file}}}\n"
        receivers = "agent, otlp" if otlp else "agent"
        self.cfg = os.path.join(tmp, "gateway.yaml")
        with open(self.cfg, "w") as f:
            f.write(f"""receivers:
  agent:
    endpoint: 127.0.0.1:{self.port}
    max_connections_per_peer: {per_peer}
    request_timeout: 5s
    keepalive: {{interval: 2s, timeout: 2s}}
{sec}{receiver_extra}{otlp}
processors:
  memory_limiter: {{limit_mib: {LIMIT_MIB}, check_interval: 100ms}}
  batch: {{timeout: 200ms}}
exporters:
  otlp_http:
    endpoint: http://127.0.0.1:{pyroscope_port}
    retry_on_failure: {{initial_interval: 100ms}}
service:
  pipelines:
    profiles: {{receivers: [{receivers}], processors: [memory_limiter, batch], exporters: [otlp_http]}}
  telemetry: {{metrics: {{address: 127.0.0.1:{self.mport}}}}}
  shutdown_timeout: 2s
""")
        self.log = open(os.path.join(tmp, "gateway.log"), "w")
        self.proc = subprocess.Popen([gateway, "--config", self.cfg], stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
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
        """Every series of /metrics: {'family{labels}': value}, and families summed under their names."""
        return metricslib.parse(metricslib.scrape(self.mport, timeout=30))

    def healthz(self):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.mport}/healthz", timeout=30) as r:
            return r.status

    def status(self, key):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
        return 0

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


class Watch(threading.Thread):
    """Samples the gateway's RSS and asks /healthz until stopped."""

    def __init__(self, gw):
        super().__init__(daemon=True)
        self.gw, self.stop_ev = gw, threading.Event()
        self.rss_peak, self.health_ok, self.health_bad = 0, 0, []

    def run(self):
        while not self.stop_ev.is_set():
            try:
                self.rss_peak = max(self.rss_peak, self.gw.status("VmRSS"))
            except OSError:
                pass
            try:
                st = self.gw.healthz()
                if st == 200:
                    self.health_ok += 1
                else:
                    self.health_bad.append(st)
            except OSError as e:
                self.health_bad.append(str(e))
            self.stop_ev.wait(0.25)

    def stop(self):
        self.stop_ev.set()
        self.join()


def expected_total():
    return sum(slib.expected_per_pid(WINDOWS, SAMPLES).values())


def start_sender(port, tls=None, token_file=None):
    """The legitimate agent (sender-driver), in the background; returns its Popen."""
    args = [slib.driver_path(), "--windows", str(WINDOWS), "--samples", str(SAMPLES), "--interval-ms",
            str(INTERVAL_MS), "--flush-timeout-ms", "90000", "--backoff-ms", "50,500",
            # A new connection every second: the attack also meets the agent's connects and handshakes.
            "--max-connection-age-ms", "1000"]
    if tls:
        args += ["--endpoint", f"https://127.0.0.1:{port}", "--ca", tls["ca.pem"], "--cert", tls["client.pem"],
                 "--key", tls["client.key"], "--server-name", "localhost"]
    else:
        args += ["--endpoint", f"http://127.0.0.1:{port}"]
    if token_file:
        args += ["--token-file", token_file]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


class OtlpSender(threading.Thread):
    """A legitimate OTel profiler's exporter: `requests` valid OTLP/HTTP protobuf bodies over one HTTP/1.1
    keep-alive connection, one every `interval` s, each retried until answered 200 (after 429/503, or a
    connection the gateway closed before answering)."""

    def __init__(self, port, body, samples, requests=40, interval=0.15, ctx=None, token=None):
        super().__init__(daemon=True)
        self.ctx, self.token = ctx, token
        self.port, self.body, self.samples, self.n, self.interval = port, body, samples, requests, interval
        self.res = {"requests_ok": 0, "retries": 0, "connections": 0, "accepted": 0, "statuses": {}}
        self.error = None

    def run(self):
        conn = None
        start = time.monotonic()
        try:
            for _ in range(self.n):
                deadline = time.monotonic() + 120
                while True:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"no 200 within 120 s ({self.res})")
                    try:
                        if conn is None:
                            conn = http.client.HTTPSConnection("127.0.0.1", self.port, timeout=60, context=self.ctx) \
                                if self.ctx else http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
                            self.res["connections"] += 1
                        headers = {"Content-Type": "application/x-protobuf"}
                        if self.token:
                            headers["Authorization"] = "Bearer " + self.token
                        conn.request("POST", "/v1development/profiles", body=self.body, headers=headers)
                        r = conn.getresponse()
                        data = r.read()
                    except (OSError, http.client.HTTPException):
                        conn.close()
                        conn = None
                        self.res["retries"] += 1
                        time.sleep(0.05)
                        continue
                    st = self.res["statuses"]
                    st[str(r.status)] = st.get(str(r.status), 0) + 1
                    if r.will_close:
                        conn.close()
                        conn = None
                    if r.status == 200:
                        if data:  # partial_success: the test's bodies are all valid, none may be refused
                            raise RuntimeError(f"partial success answered: {data[:200]!r}")
                        self.res["requests_ok"] += 1
                        self.res["accepted"] += self.samples
                        break
                    if r.status not in (429, 503):
                        raise RuntimeError(f"a valid request answered {r.status}: {data[:300]!r}")
                    self.res["retries"] += 1
                    time.sleep(0.2)
                time.sleep(self.interval)
        except Exception as e:  # reported by run_case
            self.error = f"{type(e).__name__}: {e}"
        if conn:
            conn.close()
        self.res["elapsed_ms"] = int((time.monotonic() - start) * 1000)


class Attack:
    """Runs fn(stop_event, stats, worker_index) in n threads; stats is a shared dict of counts."""

    def __init__(self, fn, n=1):
        self.stop_ev = threading.Event()
        self.stats = {}
        self.lock = threading.Lock()
        self.errors = []
        self.threads = [threading.Thread(target=self._run, args=(fn, i), daemon=True) for i in range(n)]
        for t in self.threads:
            t.start()

    def count(self, key, n=1):
        with self.lock:
            self.stats[key] = self.stats.get(key, 0) + n

    def _run(self, fn, i):
        try:
            fn(self, i)
        except Exception as e:  # reported by the case: an attack that cannot run is a failure
            self.errors.append(f"{type(e).__name__}: {e}")

    @property
    def stopping(self):
        return self.stop_ev.is_set()

    def stop(self, timeout=120):
        self.stop_ev.set()
        for t in self.threads:
            t.join(timeout)


def hold_connections(a, port, first, trickle=None, target=10000, peers=20):
    """Slowloris: keeps up to target connections open from `peers` source addresses
    (127.0.1.1...), each sending `first` and then, once a second, `trickle` (if given)
    without ever finishing a request; reopens the ones the gateway closes. Counts
    opened, connect_failed, closed_by_gateway and held_max on the attack a."""
    socks = []
    per_peer = target // peers
    last = 0
    while not a.stopping:
        for p in range(peers):
            src = f"127.0.1.{p + 1}"
            have = sum(1 for s in socks if s[1] == src)
            for _ in range(per_peer - have):
                if a.stopping:
                    break
                try:
                    s = socket.create_connection(("127.0.0.1", port), timeout=2, source_address=(src, 0))
                    s.setblocking(False)
                    s.send(first)
                    socks.append((s, src))
                    a.count("opened")
                except OSError:
                    a.count("connect_failed")
        with a.lock:
            a.stats["held_max"] = max(a.stats.get("held_max", 0), len(socks))
        # Once a second: drop the connections the gateway closed, trickle on the others.
        now = time.monotonic()
        if now - last >= 1:
            last = now
            keep = []
            for s, src in socks:
                try:
                    if s.recv(4096, socket.MSG_DONTWAIT) == b"":
                        raise OSError("closed")
                except BlockingIOError:
                    pass
                except OSError:
                    s.close()
                    a.count("closed_by_gateway")
                    continue
                if trickle:
                    try:
                        s.send(trickle)
                    except OSError:
                        s.close()
                        a.count("closed_by_gateway")
                        continue
                keep.append((s, src))
            socks = keep
        a.stop_ev.wait(0.2)
    for s, _ in socks:
        s.close()


def run_case(name, attack_fn, threads=1, tls=None, token=None, receiver_extra="", load="", counters=(),
             under_way=lambda stats: True, otlp=None):
    """One attack against one gateway while the legitimate sender delivers; checks and prints the figures.
    otlp: {"body": a valid OTLP protobuf request, "samples": its samples' values summed, "extra": otlp
    receiver settings}: the gateway has the otlp receiver too, and a legitimate OTLP/HTTP sender
    (OtlpSender) delivers beside the agent."""
    fd_limit = raise_fd_limit()
    tmp = slib.tmpdir()
    token_file = None
    if token:
        token_file = os.path.join(tmp, "token")
        with open(token_file, "w") as f:
            f.write(token + "\n")
    pyro = Pyroscope(tmp)
    gw = Gateway(tmp, pyro.port, receiver_extra=receiver_extra, tls=tls, token_file=token_file,
                 otlp_extra=otlp.get("extra", "") if otlp else None, otlp_proto=otlp.get("proto", "") if otlp else "")
    watch = Watch(gw)
    watch.start()
    sender = attack = osender = None
    agent_total = total = expected_total()
    if otlp:
        osender = OtlpSender(gw.hport, otlp["body"], otlp["samples"], ctx=otlp.get("ctx"), token=otlp.get("token"))
        total += osender.n * osender.samples
    ok = True

    def fail(what):
        nonlocal ok
        ok = False
        print(f"FAIL: {what}")

    try:
        attack = Attack(lambda a, i: attack_fn(a, i, gw), threads)
        # The attack is under way before the legitimate agent starts.
        time.sleep(1.0)
        deadline = time.monotonic() + 30
        while not under_way(attack.stats) and time.monotonic() < deadline and not attack.errors:
            time.sleep(0.1)
        sender = start_sender(gw.port, tls=tls, token_file=token_file)
        if osender:
            osender.start()
        out, err = sender.communicate(timeout=240)
        if osender:
            osender.join(240)
        during = dict(attack.stats)
        # The attack goes on until the gateway counted it (e.g. header_timeout must pass for slowloris).
        deadline = time.monotonic() + 60
        while gw.proc.poll() is None and time.monotonic() < deadline and not attack.errors and \
                not all(gw.metrics().get(c, 0) for c in counters if not c.startswith("?")):
            time.sleep(0.2)
        attack.stop()
        try:
            res = json.loads(out.strip().splitlines()[-1])
        except (ValueError, IndexError):
            res = None
            print(err[-3000:])
        # What reached the fake Pyroscope (the batch and the exporter's retries take a moment).
        deadline = time.monotonic() + 60
        while pyro.stats()["accepted_samples"] < total and time.monotonic() < deadline:
            time.sleep(0.2)
        delivered = pyro.stats()["accepted_samples"]
        alive = gw.proc.poll() is None
        m = gw.metrics() if alive else {}
        health_after = gw.healthz() if alive else None
        watch.stop()
        hwm = gw.status("VmHWM") if alive else watch.rss_peak
    finally:
        if attack:
            attack.stop()
        if sender and sender.poll() is None:
            sender.kill()
            sender.wait()
        watch.stop_ev.set()
        gw.stop()
        pyro.stop()

    if attack.errors:
        fail(f"the attack ran: {attack.errors[:3]}")
    if not alive:
        fail(f"the gateway stayed up (exit status {gw.proc.returncode}); see {gw.log.name}")
    else:
        print("ok: the gateway stayed up")
    if watch.health_bad or health_after != 200:
        fail(f"/healthz answered 200 throughout ({watch.health_ok} ok, bad: {watch.health_bad[:5]})")
    else:
        print(f"ok: /healthz answered 200 throughout ({watch.health_ok} times)")
    peak = max(hwm, watch.rss_peak)
    if SANITIZED:
        print(f"# RSS peak {peak / 1048576:.1f} MiB not checked: AddressSanitizer's shadow memory and "
              "quarantine are not the gateway's")
    elif peak >= LIMIT_MIB << 20:
        fail(f"RSS peak {peak >> 20} MiB stayed under memory_limiter.limit_mib {LIMIT_MIB}")
    else:
        print(f"ok: RSS peak {peak / 1048576:.1f} MiB < limit {LIMIT_MIB} MiB")
    if sender.returncode != 0 or not res or res["accepted"] != agent_total:
        fail(f"the legitimate sender flushed all {agent_total} samples accepted (exit {sender.returncode}, {res})")
    if osender:
        if osender.error or osender.res["accepted"] != total - agent_total:
            fail(f"the legitimate OTLP sender had all {total - agent_total} samples accepted "
                 f"({osender.error}, {osender.res})")
        else:
            print(f"ok: the OTLP sender had {osender.res['accepted']} samples accepted "
                  f"({osender.res['requests_ok']} requests, {osender.res['retries']} retries)")
    if delivered != total:
        fail(f"the fake Pyroscope got the legitimate sender's {total} samples ({delivered})")
    else:
        print(f"ok: delivered {delivered} = sent {total} (agent sender: {res['requests_ok']} requests ok, "
              f"{res['retries']} retries, {res['connections']} connections)")
    for key, want in (('stackrelay_gateway_samples_accepted_total{component="agent"}', agent_total),
                      ('stackrelay_gateway_samples_accepted_total{component="otlp"}',
                       total - agent_total if osender else None),
                      ('stackrelay_gateway_samples_exported_total{component="otlp_http"}', total)):
        if want is not None and m.get(key) != want:
            fail(f"{key} = {want} ({m.get(key)})")
    if m.get("stackrelay_gateway_samples_dropped_total", 0):
        fail(f"no sample dropped in the gateway ({m.get('stackrelay_gateway_samples_dropped_total')})")
    # A family name is summed over its series; a full series key names one.
    # "?name": reported, but the attack may well be stopped before it moves.
    seen = {c.lstrip("?"): m.get(c.lstrip("?"), 0) for c in counters}
    optional = {c.lstrip("?") for c in counters if c.startswith("?")}
    print("FIGURE " + json.dumps({
        "case": name, "load": load.format_map(collections.defaultdict(int, attack.stats)) if load else "",
        "attack": attack.stats, "attack_when_agent_done": during,
        "agent": {k: res.get(k) for k in ("requests_ok", "retries", "connections", "elapsed_ms")} if res else None,
        "otlp_sender": osender.res if osender else None,
        # Samples the gateway gave back to the agent to resend later (the memory limiter's soft limit).
        "samples_refused": m.get("stackrelay_gateway_samples_refused_total", 0),
        "rss_peak_mib": round(peak / 1048576, 1), "limit_mib": LIMIT_MIB, "delivered": delivered, "sent": total,
        "fd_limit": fd_limit,
        "counted": {k.replace("stackrelay_gateway_agent_", "").replace("stackrelay_gateway_", ""): v
                    for k, v in seen.items()},
    }, sort_keys=True))
    missing = [c for c, v in seen.items() if not v and c not in optional]
    if missing:
        fail(f"the gateway counted the attack in {missing}")
    if not ok:
        with open(gw.log.name) as f:
            print("--- gateway log (tail) ---\n" + f.read()[-4000:])
        sys.exit(1)
    import shutil
    shutil.rmtree(tmp, ignore_errors=True)
