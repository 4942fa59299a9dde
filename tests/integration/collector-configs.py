#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Gateway configs written the way OpenTelemetry Collector users write them,
loaded and run end to end (docs/otel-collector-migration.md): OTLP/HTTP
profiles in (hand-written OTLP JSON, independent of the gateway's code), the
real gateway, tests/fakes/fake_pyroscope.py out.

Phases:
  zero     a scrape right after start shows every component's refusal and
           drop reasons (stackrelay_gateway_samples_{refused,dropped}_total)
           at 0; one request to a backend that is down then grows its
           send_failed series, so a first drop shows as a rate.

  tls      `otlphttp` with the Collector's `tls` keys (ca_file, min_version,
           insecure: false) and `sending_queue.queue_size`/`sizer` delivers
           to a fake Pyroscope serving HTTPS with a certificate of a test CA
           made with openssl; `min_version: "1.3"` against a server capped at
           TLS 1.2 makes no delivery and counts network errors.

  tenants  multi-tenancy as Collector users write it: `include_metadata: true`
           on the otlp receiver, `metadata_keys: [X-Scope-OrgID]` on batch;
           requests of two tenants (and one without the header) in, and at
           the fake Pyroscope each tenant's samples arrive in requests of
           their own carrying their X-Scope-OrgID; the one without it gets
           the exporter's configured header, one with k8s.namespace.name its
           namespace (metadata_from_attributes). Through a persistent queue
           (sending_queue.storage) too, across a restart with the backend down.

  examples every config of docs/examples/collector/ validates, then runs with
           only its addresses pointed at the test's (listen addresses,
           http://pyroscope:4040, the file_storage directory, and
           auth_type: serviceAccount at a fake API server's kubeconfig):
           OTLP in, profiles out at the fake Pyroscope with the example's
           headers (bearer token from ${BACKEND_TOKEN}, basicauth, tenants),
           pods' metadata, health_check answering, the queue on disk.

Needs openssl (scripts/install-deps); skips (77) without it.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kubelib  # noqa: E402
import metricslib  # noqa: E402
from ports import free_port  # noqa: E402

SKIP = 77


def log(*a):
    print("collector-configs:", *a, flush=True)


def skip(why):
    print("SKIP: " + why)
    sys.exit(SKIP)


src = os.environ.get("SR_SOURCE_ROOT")
gateway = os.environ.get("SR_GATEWAY")
if not src or not gateway:
    skip("run through meson test (SR_SOURCE_ROOT, SR_GATEWAY unset)")
if not shutil.which("openssl"):
    skip("openssl not installed (scripts/install-deps)")

fake_pyroscope = os.path.join(src, "tests", "fakes", "fake_pyroscope.py")
tmp = tempfile.mkdtemp(prefix="sr-collector-configs.")
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


def wait_for(what, cond, timeout=90, logs=()):
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            for path in logs:
                with open(path) as f:
                    sys.stderr.write("---- %s\n%s\n" % (path, f.read()[-4000:]))
            raise SystemExit("FAIL: timed out waiting for " + what)
        time.sleep(0.2)


def http_get(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read()
    except Exception as e:  # noqa: BLE001 - not up yet, or refused: the caller waits
        return 0, str(e).encode()


# ---- certificates ----

def make_certs(d):
    """A test CA and a server certificate for 127.0.0.1 and localhost signed by it."""
    os.makedirs(d, exist_ok=True)

    def ossl(*args):
        subprocess.run(["openssl"] + list(args), cwd=d, check=True, capture_output=True)
    with open(os.path.join(d, "san.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    ossl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "ca.key",
         "-out", "ca.crt", "-days", "2", "-subj", "/CN=stackrelay collector-configs CA")
    ossl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "server.key",
         "-out", "server.csr", "-subj", "/CN=localhost")
    ossl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
         "-out", "server.crt", "-days", "2", "-extfile", "san.ext")
    return lambda f: os.path.join(d, f)


# ---- the fake Pyroscope and the gateway ----

class Fake:
    def __init__(self, name, *args):
        self.port_file = os.path.join(tmp, name + ".port")
        self.log = os.path.join(tmp, name + ".log")
        self.proc = subprocess.Popen([sys.executable, fake_pyroscope, "--port-file", self.port_file,
                                      "--lifetime", "600", *args],
                                     stdout=open(self.log, "w"), stderr=subprocess.STDOUT)
        procs.append(self.proc)
        wait_for(name + " to listen", lambda: os.path.exists(self.port_file) or self.proc.poll() is not None)
        if self.proc.poll() is not None:
            raise SystemExit("FAIL: %s exited: %s" % (name, open(self.log).read()[-2000:]))
        with open(self.port_file) as f:
            self.port = int(f.read())
        self.scheme = "https" if "--tls-cert" in args else "http"

    def stats(self):
        import ssl
        ctx = ssl._create_unverified_context()  # the test's own fake, its stats only
        with urllib.request.urlopen("%s://127.0.0.1:%d/stats" % (self.scheme, self.port), timeout=10,
                                    context=ctx if self.scheme == "https" else None) as r:
            return json.loads(r.read())


class Gateway:
    """A gateway on config text with {otlp_port} and {metrics_port} filled in, started on free ports."""

    def __init__(self, name, config, env=None, attempts=5):
        self.log = os.path.join(tmp, name + ".log")
        self.path = os.path.join(tmp, name + ".yaml")
        for _ in range(attempts):
            self.otlp_port, self.metrics_port = free_port(), free_port()
            with open(self.path, "w") as f:
                f.write(config.replace("{otlp_port}", str(self.otlp_port))
                        .replace("{metrics_port}", str(self.metrics_port)))
            check = subprocess.run([gateway, "--validate", "--config", self.path], capture_output=True, text=True,
                                   env=env)
            if check.returncode != 0:
                raise SystemExit("FAIL: %s does not validate:\n%s%s" % (name, check.stdout, check.stderr))
            self.validate_output = check.stdout + check.stderr
            self.proc = subprocess.Popen([gateway, "--config", self.path], stdout=open(self.log, "w"),
                                         stderr=subprocess.STDOUT, env=env)
            procs.append(self.proc)
            deadline = time.monotonic() + 120
            while self.proc.poll() is None:
                if http_get("http://127.0.0.1:%d/readyz" % self.metrics_port)[0] == 200:
                    return
                if time.monotonic() > deadline:
                    raise SystemExit("FAIL: %s not ready:\n%s" % (name, open(self.log).read()[-4000:]))
                time.sleep(0.2)
            if "in use" not in open(self.log).read().lower():
                raise SystemExit("FAIL: %s exited:\n%s" % (name, open(self.log).read()[-4000:]))
            log(name, "lost a race for a port; starting it again")
        raise SystemExit("FAIL: %s: no free ports" % name)

    def metric(self, family, **labels):
        try:
            return metricslib.total(metricslib.scrape(self.metrics_port), family, **labels)
        except OSError:
            return 0

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=60)


# ---- OTLP in: hand-written OTLP/JSON, as the Collector's otlphttp exporter can send it ----

def otlp_json(service, value, resource=None):
    """One CPU profile of one sample (value) on the stack work <- main, for service."""
    strings = ["", "samples", "count", "cpu", "nanoseconds", "main", "work", "app.c"]
    attrs = [{"key": "service.name", "value": {"stringValue": service}}]
    for k, v in (resource or {}).items():
        attrs.append({"key": k, "value": {"stringValue": v}})
    return {
        "dictionary": {
            "stringTable": strings,
            "mappingTable": [{}],
            "attributeTable": [{}],
            "functionTable": [{}, {"nameStrindex": 5, "filenameStrindex": 7},
                              {"nameStrindex": 6, "filenameStrindex": 7}],
            "locationTable": [{}, {"lines": [{"functionIndex": 2, "line": "10"}]},
                              {"lines": [{"functionIndex": 1, "line": "3"}]}],
            "stackTable": [{}, {"locationIndices": [1, 2]}],
        },
        "resourceProfiles": [{
            "resource": {"attributes": attrs},
            "scopeProfiles": [{"profiles": [{
                "sampleType": {"typeStrindex": 1, "unitStrindex": 2},
                "periodType": {"typeStrindex": 3, "unitStrindex": 4},
                "period": "50000000",
                "timeUnixNano": str(time.time_ns()),
                "durationNano": "1000000000",
                "samples": [{"stackIndex": 1, "values": [str(value)]}],
            }]}],
        }],
    }


def send(gw, service, value, headers=None, resource=None):
    body = json.dumps(otlp_json(service, value, resource)).encode()
    req = urllib.request.Request("http://127.0.0.1:%d/v1development/profiles" % gw.otlp_port, data=body,
                                 method="POST", headers={"Content-Type": "application/json", **(headers or {})})
    with urllib.request.urlopen(req, timeout=30) as r:
        assert r.status == 200, r.status


STACK = "work;main"


def key(service):
    return "%s|%s|" % (service, STACK)


# ---- phases ----

def tls_phase():
    p = make_certs(os.path.join(tmp, "certs"))
    fake = Fake("fake-tls", "--tls-cert", p("server.crt"), "--tls-key", p("server.key"))
    fake12 = Fake("fake-tls12", "--tls-cert", p("server.crt"), "--tls-key", p("server.key"),
                  "--tls-max-version", "1.2")
    gw = Gateway("gateway-tls", """receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:{otlp_port}
processors:
  batch: {timeout: 200ms}
exporters:
  otlphttp/pyroscope:
    endpoint: https://localhost:%d
    tls:
      insecure: false
      ca_file: %s
      min_version: "1.2"
    sending_queue:
      enabled: true
      num_consumers: 2
      queue_size: 100
      sizer: requests
    retry_on_failure: {enabled: true, initial_interval: 200ms, max_interval: 1s}
  otlphttp/tls13:
    endpoint: https://localhost:%d
    tls: {ca_file: %s, min_version: "1.3"}
    retry_on_failure: {enabled: true, initial_interval: 200ms, max_interval: 1s}
service:
  pipelines:
    profiles:
      receivers: [otlp]
      processors: [batch]
      exporters: [otlphttp/pyroscope, otlphttp/tls13]
  telemetry:
    metrics:
      level: detailed
      readers:
        - pull: {exporter: {prometheus: {host: 127.0.0.1, port: {metrics_port}}}}
""" % (fake.port, p("ca.crt"), fake12.port, p("ca.crt")))
    assert "warning" not in gw.validate_output, gw.validate_output
    send(gw, "tls-app", 7)
    send(gw, "tls-app", 5)
    wait_for("12 samples over TLS at the fake Pyroscope",
             lambda: fake.stats()["accepted_samples"] == 12, logs=[gw.log, fake.log])
    assert fake.stats()["by_key"] == {key("tls-app"): 12}, fake.stats()["by_key"]
    # TLS 1.3 at least, from a server that offers 1.2 at most: no handshake, network errors, nothing delivered.
    wait_for("a network error of otlphttp/tls13",
             lambda: gw.metric("stackrelay_gateway_export_requests_total", exporter="otlphttp/tls13",
                               outcome="network_error") >= 1, logs=[gw.log])
    assert fake12.stats()["requests"] == 0, fake12.stats()
    gw.stop()
    log("tls: delivered over TLS with ca_file; min_version 1.3 refused a TLS 1.2 server")


ZERO_CONFIG = """receivers:
  agent:
    endpoint: 127.0.0.1:%d
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:{otlp_port}
        include_metadata: true
processors:
  memory_limiter: {check_interval: 1s, limit_mib: 4000, spike_limit_mib: 500}
  relabel:
    rules:
      - {source_labels: [service.name], regex: never-sent, action: drop}
  batch: {timeout: 100ms, metadata_keys: [X-Scope-OrgID]}
exporters:
  otlphttp/down:
    endpoint: http://127.0.0.1:%d
    retry_on_failure: {enabled: false}
    sending_queue: {storage: %s}
  file:
    path: %s
service:
  pipelines:
    profiles:
      receivers: [agent, otlp]
      processors: [memory_limiter, relabel, batch]
      exporters: [otlphttp/down, file]
  telemetry:
    metrics:
      readers:
        - pull: {exporter: {prometheus: {host: 127.0.0.1, port: {metrics_port}}}}
"""

# Each component's refusal and drop reasons, as series at 0 from the first scrape.
ZERO_SERIES = {
    "refused": {"agent": ["retry_later", "missing_definition"], "otlp": ["retry_later", "bad_request"]},
    "dropped": {
        "memory_limiter": ["memory_limit", "shutdown"],
        "relabel": ["relabel", "out_of_memory", "shutdown"],
        "batch": ["out_of_memory", "metadata_cardinality", "shutdown"],
        "otlphttp/down": ["rejected_400", "rejected_401", "rejected_403", "rejected_404", "rejected_415",
                          "rejected_500", "rejected", "too_large", "send_failed", "queue_full", "memory_limit",
                          "queue_corrupt", "queue_unwritable_at_shutdown", "shutdown"],
        "file": ["write_error", "shutdown"],
    },
}


def zero_phase():
    """A scrape right after start has every component's refused and dropped series at 0, so the first drop
    shows as an increase (rate() and increase() need a series' earlier sample); then one request to a
    backend that is down makes exactly that series grow."""
    down = free_port()  # nothing listens there
    gw = Gateway("gateway-zero", ZERO_CONFIG % (free_port(), down, os.path.join(tmp, "zero-queue"),
                                                os.path.join(tmp, "zero.otlp")))
    text = metricslib.scrape(gw.metrics_port)
    for what, comps in ZERO_SERIES.items():
        family = "stackrelay_gateway_samples_%s_total" % what
        for comp, reasons in comps.items():
            have = {labels["reason"]: value for fam, labels, value, _ in metricslib.samples(text)
                    if fam == family and labels.get("component") == comp}
            missing = [r for r in reasons if r not in have]
            assert not missing, "%s{component=%s}: no series of %s after start:\n%s" % (
                family, comp, missing, text)
            assert all(v == 0 for v in have.values()), (family, comp, have)
    assert "retries_exhausted" not in text, "otlphttp/down has retries off: send_failed, not retries_exhausted"
    send(gw, "zero-app", 9)
    wait_for("the request to the closed port dropped as send_failed",
             lambda: gw.metric("stackrelay_gateway_samples_dropped_total", component="otlphttp/down",
                               reason="send_failed") == 9, logs=[gw.log])
    text = metricslib.scrape(gw.metrics_port)
    assert metricslib.total(text, "stackrelay_gateway_samples_dropped_total", component="otlphttp/down") == 9, text
    gw.stop()
    log("zero: every refusal and drop reason at 0 from the first scrape; one drop grew its series 0 -> 9")


TENANTS_CONFIG = """receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:{otlp_port}
        include_metadata: true
processors:
  batch:
    timeout: 300ms
    metadata_keys: [X-Scope-OrgID]
    metadata_from_attributes: {X-Scope-OrgID: k8s.namespace.name}
exporters:
  otlphttp:
    endpoint: http://127.0.0.1:%d
    headers: {X-Scope-OrgID: fallback}
    tls: {insecure: true}
    retry_on_failure: {initial_interval: 200ms, max_interval: 1s, max_elapsed_time: 0s}
    sending_queue: {storage: %s}
service:
  pipelines:
    profiles:
      receivers: [otlp]
      processors: [batch]
      exporters: [otlphttp]
  telemetry:
    metrics:
      readers:
        - pull: {exporter: {prometheus: {host: 127.0.0.1, port: {metrics_port}}}}
"""


def tenants_phase():
    fake = Fake("fake-tenants")
    queue = os.path.join(tmp, "tenant-queue")
    gw = Gateway("gateway-tenants", TENANTS_CONFIG % (fake.port, queue))
    sent = {"tenant-a": 0, "tenant-b": 0, "fallback": 0, "payments": 0}
    for i in range(6):
        tenant = "tenant-a" if i % 2 == 0 else "tenant-b"
        send(gw, "svc-" + tenant, 10 + i, headers={"X-Scope-OrgID": tenant})
        sent[tenant] += 10 + i
    send(gw, "svc-none", 4)
    sent["fallback"] += 4
    # Without the header, as agents' data comes: the tenant is the namespace k8s_attributes adds.
    send(gw, "svc-payments", 7, resource={"k8s.namespace.name": "payments"})
    sent["payments"] += 7
    want = sum(sent.values())
    wait_for("every tenant's samples at the fake Pyroscope",
             lambda: fake.stats()["accepted_samples"] == want, logs=[gw.log, fake.log])
    st = fake.stats()
    assert {t: v["samples"] for t, v in st["tenants"].items()} == sent, st["tenants"]
    # One service per tenant here: a request mixing tenants would show as a service under the wrong tenant.
    assert st["by_key"] == {key("svc-tenant-a"): sent["tenant-a"], key("svc-tenant-b"): sent["tenant-b"],
                            key("svc-none"): 4, key("svc-payments"): 7}, st["by_key"]
    assert all(v["requests"] >= 1 for v in st["tenants"].values()), st["tenants"]
    gw.stop()
    fake.proc.send_signal(signal.SIGTERM)
    fake.proc.wait(timeout=30)

    # The tenant survives the disk: queued with the backend down, delivered after a restart.
    gw = Gateway("gateway-tenants-2", TENANTS_CONFIG % (fake.port, queue))
    send(gw, "svc-tenant-a", 3, headers={"X-Scope-OrgID": "tenant-a"})
    send(gw, "svc-tenant-b", 5, headers={"X-Scope-OrgID": "tenant-b"})
    wait_for("two requests queued on disk",
             lambda: len([f for f in os.listdir(os.path.join(queue, "otlphttp")) if f.endswith(".srq")]) >= 2
             if os.path.isdir(os.path.join(queue, "otlphttp")) else
             len([f for f in os.listdir(queue) if f.endswith(".srq")]) >= 2, logs=[gw.log])
    gw.stop()
    fake2 = Fake("fake-tenants-2", "--port", str(fake.port))
    gw = Gateway("gateway-tenants-3", TENANTS_CONFIG % (fake2.port, queue))
    wait_for("the queued requests delivered after the restart",
             lambda: fake2.stats()["accepted_samples"] == 8, logs=[gw.log, fake2.log])
    st = fake2.stats()
    assert {t: v["samples"] for t, v in st["tenants"].items()} == {"tenant-a": 3, "tenant-b": 5}, st["tenants"]
    gw.stop()
    log("tenants: each tenant's samples in requests of their own with its X-Scope-OrgID, through the disk too")


EXAMPLES = os.path.join(src, "docs", "examples", "collector")


def fake_kube(pod_ip):
    """The fake API server with one pod at pod_ip; returns the kubeconfig's path."""
    state = {"namespaces": [{"metadata": {"name": "shop", "uid": "ns-shop"}}],
             "pods": [{"metadata": {"name": "checkout-7d9f8-x2x4p", "namespace": "shop", "uid": "pod-checkout"},
                       "spec": {"nodeName": "node-a", "containers": [{"name": "app", "image": "shop/checkout:1"}]},
                       "status": {"phase": "Running", "podIP": pod_ip}}]}
    kube, path = kubelib.start(src, os.path.join(tmp, "kube"), state, stderr=open(os.path.join(tmp, "kube.log"), "w"))
    procs.append(kube)
    return path


def example(name, fake, extra_ports=None, kubeconfig=None):
    """An example's text with its addresses pointed at the test's; {otlp_port} and {metrics_port} left for Gateway."""
    with open(os.path.join(EXAMPLES, name)) as f:
        text = f.read()
    subs = [("0.0.0.0:4318", "127.0.0.1:{otlp_port}"),
            ("0.0.0.0:4317", '""'),  # gRPC off: the test speaks OTLP/HTTP
            ("http://pyroscope:4040", "http://127.0.0.1:%d" % fake.port),
            ("host: 0.0.0.0", "host: 127.0.0.1"), ("port: 8888", "port: {metrics_port}")]
    for old, new in (extra_ports or {}).items():
        subs.append((old, new))
    if kubeconfig:
        subs.append(("auth_type: serviceAccount", "auth_type: kubeConfig\n    kube_config_path: " + kubeconfig))
    for old, new in subs:
        text = text.replace(old, new)
    assert "0.0.0.0" not in text and "pyroscope:4040" not in text, text
    return text


def examples_phase():
    names = sorted(f for f in os.listdir(EXAMPLES) if f.endswith(".yaml"))
    assert names == ["basic-auth.yaml", "bearer-token.yaml", "gateway-k8s.yaml", "multi-tenant-headers-setter.yaml",
                     "multi-tenant.yaml", "persistent-queue.yaml"], names
    env = dict(os.environ, BACKEND_TOKEN="s3cret-t0ken", GRAFANA_CLOUD_USER="123456",
               GRAFANA_CLOUD_TOKEN="glc_t0ken", GRAFANA_CLOUD_PROFILES_URL="http://127.0.0.1:1")
    for name in names:
        check = subprocess.run([gateway, "--validate", "--config", os.path.join(EXAMPLES, name)],
                               capture_output=True, text=True, env=env)
        assert check.returncode == 0, (name, check.stdout, check.stderr)
        assert "warning" not in check.stdout + check.stderr, (name, check.stdout, check.stderr)

    # otlp -> batch -> otlphttp with the bearer token from ${BACKEND_TOKEN}.
    fake = Fake("fake-bearer")
    gw = Gateway("example-bearer", example("bearer-token.yaml", fake), env=env)
    send(gw, "bearer-app", 9)
    gw.stop()  # flushes the batch (10s by default)
    st = fake.stats()
    assert st["accepted_samples"] == 9 and st["auth"] == ["Bearer s3cret-t0ken"], st
    log("examples: bearer-token.yaml sent Authorization: Bearer from ${BACKEND_TOKEN}")

    # basicauth: Authorization: Basic base64(user:token), the URL from the environment too.
    fake = Fake("fake-basic")
    env_basic = dict(env, GRAFANA_CLOUD_PROFILES_URL="http://127.0.0.1:%d" % fake.port)
    gw = Gateway("example-basic", example("basic-auth.yaml", fake), env=env_basic)
    send(gw, "basic-app", 3)
    gw.stop()
    st = fake.stats()
    assert st["accepted_samples"] == 3 and st["auth"] == ["Basic MTIzNDU2OmdsY190MGtlbg=="], st
    log("examples: basic-auth.yaml sent Authorization: Basic from its basicauth extension")

    # Two tenants and one without the header.
    fake = Fake("fake-multi")
    gw = Gateway("example-multi", example("multi-tenant.yaml", fake))
    send(gw, "shop", 6, headers={"X-Scope-OrgID": "team-shop"})
    send(gw, "billing", 8, headers={"X-Scope-OrgID": "team-billing"})
    send(gw, "legacy", 2)
    gw.stop()
    st = fake.stats()
    assert {t: v["samples"] for t, v in st["tenants"].items()} == {"team-shop": 6, "team-billing": 8,
                                                                   "anonymous": 2}, st["tenants"]
    log("examples: multi-tenant.yaml sent each tenant's samples with its X-Scope-OrgID")

    # The same through headers_setter: its rule sets the header, its default_value for the untenanted.
    fake = Fake("fake-multi-hs")
    gw = Gateway("example-multi-hs", example("multi-tenant-headers-setter.yaml", fake))
    send(gw, "shop", 6, headers={"X-Scope-OrgID": "team-shop"})
    send(gw, "legacy", 2)
    gw.stop()
    st = fake.stats()
    assert {t: v["samples"] for t, v in st["tenants"].items()} == {"team-shop": 6, "anonymous": 2}, st["tenants"]
    log("examples: multi-tenant-headers-setter.yaml set X-Scope-OrgID by its headers_setter rule")

    # file_storage queue and health_check.
    fake = Fake("fake-queue")
    health = free_port()
    storage = os.path.join(tmp, "file_storage")
    gw = Gateway("example-queue", example("persistent-queue.yaml", fake, {
        "0.0.0.0:13133": "127.0.0.1:%d" % health, "/var/lib/otelcol/file_storage": storage}))
    status, body = http_get("http://127.0.0.1:%d/" % health)
    assert status == 200 and b"Server available" in body, (status, body)
    send(gw, "queued-app", 11)
    wait_for("the queued request delivered", lambda: fake.stats()["accepted_samples"] == 11, logs=[gw.log])
    assert os.path.isdir(os.path.join(storage, "otlphttp_pyroscope")), os.listdir(storage)
    gw.stop()
    log("examples: persistent-queue.yaml queued in file_storage's directory; health_check answered")

    # The gateway with k8sattributes: a sender's pod found by the k8s.pod.ip it reports.
    if not shutil.which("node"):
        log("examples: gateway-k8s.yaml run SKIPPED (node, for the fake API server, not installed)")
        return
    fake = Fake("fake-k8s")
    health = free_port()
    gw = Gateway("example-k8s", example("gateway-k8s.yaml", fake, {"0.0.0.0:13133": "127.0.0.1:%d" % health},
                                        kubeconfig=fake_kube("10.1.2.3")))
    assert http_get("http://127.0.0.1:%d/" % health)[0] == 200
    send(gw, "checkout", 5, resource={"k8s.pod.ip": "10.1.2.3"})
    # A sender that reports its pod's IP as host.name, as some OTLP senders do.
    send(gw, "checkout-worker", 4, resource={"host.name": "10.1.2.3"})
    wait_for("both resources matched",
             lambda: gw.metric("stackrelay_gateway_k8s_resources_matched_pod_ip_total") == 1 and
             gw.metric("stackrelay_gateway_k8s_resources_matched_host_name_total") == 1, logs=[gw.log])
    gw.stop()
    st = fake.stats()
    assert st["accepted_samples"] == 9, st
    for resource in st["last_shapes"]["resources"]:
        attrs = resource["attributes"]
        assert attrs.get("k8s.pod.name") == "checkout-7d9f8-x2x4p" and attrs.get("k8s.namespace.name") == "shop", attrs
        assert attrs.get("k8s.node.name") == "node-a", attrs
    log("examples: gateway-k8s.yaml named the senders' pod from k8s.pod.ip and from host.name")


def main():
    try:
        zero_phase()
        tls_phase()
        tenants_phase()
        examples_phase()
    finally:
        cleanup()
    print("PASS")


main()
