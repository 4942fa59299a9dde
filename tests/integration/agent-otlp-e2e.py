#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The agent's own OTLP export (docs/agent.md, "Sending OTLP"), real eBPF.

Two workloads run behind gates (a shell blocked on a pipe, which then execs
the program under the same PID), so the agent, started first with --pid
filters for exactly them, sees their whole life: alphabeta-fp (native:
alpha and beta, symbols in the binary) and a Python 3.11 script whose
functions py_alpha and py_beta run under py_loop.

A. The agent sends OTLP straight to tests/fakes/fake_pyroscope.py, which
   decodes with its own protobuf reader and applies Pyroscope's checks:
   no request refused, Content-Type application/x-protobuf, gzip, the
   tenant header from otlp.headers; a 503 with Retry-After and a 500
   are retried; the sum of counts the agent exported
   equals the sum the fake accepted, and no sample was dropped; Python
   frames arrive named (py_alpha/py_beta in >= 80 % of the script's
   samples); native frames arrive unsymbolized, as mapping + ELF virtual
   address with the binary's GNU build ID (readelf), and the addresses
   resolve (nm) to alpha, beta or spin in >= 80 % of alphabeta's samples;
   kernel frames arrive named from kallsyms (in the syscalls workload's
   samples, at most 10 % of kernel frames left as offsets).
B. The agent sends OTLP v1.9 to the real gateway's `otlp` receiver (HTTP), which
   symbolizes the native frames by build ID from a debug directory and
   exports to a second fake Pyroscope: alpha and beta come out named, the
   Python frames keep their names, counts are conserved end to end, and the
   agent's /metrics has the stackrelay_agent_otlp_* families.
C. Over https:// to a fake Pyroscope serving TLS: otlp.tls.ca_file and
   server_name verify it, compression none, an Authorization header; the
   counts are conserved.
"""
import importlib.machinery
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import agentlib  # noqa: E402
import metricslib  # noqa: E402
from ports import free_port  # noqa: E402

FREQ = 199
SECONDS = 2
PYTHON = "/usr/bin/python3.11"

HOT = """\
import sys, time


def work(n):
    s = 0
    for i in range(n):
        s += i * i
    return s


def py_alpha(k):
    return work(7 * k)


def py_beta(k):
    return work(3 * k)


def py_loop(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        py_alpha(200)
        py_beta(200)


py_loop(float(sys.argv[1]))
"""


def start_fake(env, name, procs, script="", tls=()):
    portfile = os.path.join(env.tmp, name + ".port")
    procs.append(subprocess.Popen([sys.executable, os.path.join(env.src, "tests", "fakes", "fake_pyroscope.py"),
                                   "--port-file", portfile, "--lifetime", "600", "--script", script] + list(tls),
                                  stdout=open(os.path.join(env.tmp, name + ".log"), "w"), stderr=subprocess.STDOUT))
    agentlib.wait_for(lambda: os.path.exists(portfile), 60)
    return int(open(portfile).read().strip())


def stats(port, ctx=None):
    scheme = "https" if ctx else "http"
    with urllib.request.urlopen("%s://127.0.0.1:%d/stats" % (scheme, port), timeout=10, context=ctx) as r:
        return json.load(r)


def log_fields(stderr, msg):
    fields = agentlib.logfmt_fields(stderr, msg)
    return {k: int(v) for k, v in fields.items() if v.isdigit()} if fields else {}


def run_agent(env, c, what, cfg_text, paths, extra=()):
    """Runs the agent over both workloads; returns (stderr, agent counts)."""
    cfg = os.path.join(env.tmp, what + ".yaml")
    with open(cfg, "w") as f:
        f.write(cfg_text)
    gates = [agentlib.gate([env.workload("alphabeta-fp"), str(SECONDS)], stdout=subprocess.DEVNULL),
             agentlib.gate([PYTHON, paths["hot"], str(SECONDS)])]
    gates += [agentlib.gate(cmd, stdout=subprocess.DEVNULL) for cmd in extra]
    args = ["--config", cfg, "--duration", "120", "--frequency", str(FREQ)]
    for g in gates:
        args += ["--pid", str(g["pid"])]
    agent, log = agentlib.start_agent(env, args)
    if agent is None:
        for g in gates:
            g["proc"].kill()
        raise SystemExit("%s: the agent did not start" % what)
    for g in gates:
        agentlib.release(g)
    for g in gates:
        g["proc"].wait(timeout=120)
    if what == "gateway":
        check_metrics(c, log)
    rc, stderr = agentlib.stop_agent(agent, log)
    c.check(rc == 0, "%s: the agent exits 0 (%s)" % (what, rc))
    stopped = log_fields(stderr, "profiling stopped")
    otlp = log_fields(stderr, "OTLP export")
    c.check(otlp.get("samples_submitted", -1) == stopped.get("samples_exported", -2) > 0,
            "%s: every exported sample went to the OTLP export (%s, %s)" %
            (what, otlp.get("samples_submitted"), stopped.get("samples_exported")))
    drops = {k: v for k, v in otlp.items() if k.startswith("dropped_") and v}
    c.check(otlp.get("samples_sent") == otlp.get("samples_submitted") and not drops,
            "%s: all sent, none dropped (%s)" % (what, otlp))
    return stderr, otlp, [g["pid"] for g in gates]


def check_metrics(c, log):
    port = None
    for line in log:
        if "serving metrics" in line:
            port = int(line.split("port=")[1].split()[0])
    if not c.check(port is not None, "gateway: the agent serves metrics"):
        return
    text = metricslib.scrape(port)
    for fam in ("stackrelay_agent_otlp_samples_submitted_total", "stackrelay_agent_otlp_samples_sent_total",
                "stackrelay_agent_otlp_samples_dropped_total", "stackrelay_agent_otlp_requests_total",
                "stackrelay_agent_otlp_buffered_bytes"):
        c.check(fam in text, "gateway: /metrics has " + fam)


def python_share(by_key):
    total = hit = 0
    for key, v in by_key.items():
        names = key.split("|")[1].split(";")
        if "py_loop" not in names and not any(n.startswith("py_") for n in names):
            continue
        total += v
        if "py_alpha" in names or "py_beta" in names:
            hit += v
    return (100.0 * hit / total if total else 0.0), total


def phase_direct(env, c, paths, procs):
    # The first attempt gets 503 with Retry-After, the second 500 (Pyroscope's transient failure): both retried.
    port = start_fake(env, "pyroscope-a", procs, script="503:1,500")
    _, otlp, _ = run_agent(env, c, "direct", """\
otlp:
  endpoint: http://127.0.0.1:%d
  headers: {X-Scope-OrgID: tenant-a}
  retry_on_failure: {initial_interval: 100ms}
profiling: {report_interval: 60s}
""" % port, paths, extra=[[env.workload("syscalls"), "1"]])
    s = stats(port)
    c.check(not s["errors"] and s["statuses"] == {"503": 1, "500": 1, "200": 1},
            "direct: 503 and 500 retried, then accepted (%s %s)" % (s["statuses"], s["errors"][:2]))
    c.check(otlp.get("requests_failed") == 2 and otlp.get("requests_ok") == 1,
            "direct: the agent counted 2 failed attempts and 1 success (%s)" % otlp)
    c.check(set(s["content_types"]) == {"application/x-protobuf"}, "direct: Content-Type %s" % s["content_types"])
    c.check(set(s["encodings"]) == {"gzip"}, "direct: gzip (%s)" % s["encodings"])
    c.check(list(s["tenants"]) == ["tenant-a"], "direct: X-Scope-OrgID from otlp.headers (%s)" % list(s["tenants"]))
    c.check(s["accepted_samples"] == otlp.get("samples_sent"), "direct: counts conserved (fake %d, agent %s)" %
            (s["accepted_samples"], otlp.get("samples_sent")))
    share, total = python_share(s["by_key"])
    c.check(total > 0 and share >= 80, "direct: Python frames named: py_alpha/py_beta in %.1f%% of %d" % (share, total))
    exe = env.workload("alphabeta-fp")
    bid = agentlib.build_id(exe).hex()
    c.check([exe, "process.executable.build_id.gnu", bid] in s["last_shapes"]["mapping_build_ids"],
            "direct: alphabeta's mapping carries its GNU build ID %s" % bid)
    syms = agentlib.Symbols(exe)
    total = hit = 0
    for key, v in s["by_key"].items():
        leaf = key.split("|")[1].split(";")[0]
        if not leaf.startswith(exe + "+0x"):
            continue
        total += v
        if syms.lookup(int(leaf.rsplit("+0x", 1)[1], 16)) in ("alpha", "beta", "spin"):
            hit += v
    c.check(total > 0 and hit >= 0.8 * total, "direct: native leaves are ELF addresses of alpha/beta/spin: %d of %d" %
            (hit, total))
    ks = agentlib.Kallsyms()
    if ks.usable:
        knames = {n for _, n in ks.syms}
        named = unnamed = 0
        for key, v in s["by_key"].items():
            if not key.startswith("unknown_service:syscalls|"):
                continue
            for name in key.split("|")[1].split(";"):
                if name in knames:
                    named += v
                elif name.startswith("[") and "]+0x" in name:
                    unnamed += v
        c.check(named > 0 and unnamed <= 0.1 * (named + unnamed), "direct: kernel frames named by the agent from "
                "kallsyms: %d named, %d offsets in the syscalls workload's samples" % (named, unnamed))
    res = s["last_shapes"]["resources"]
    c.check(any(r["attributes"].get("process.executable.name") == "alphabeta-fp" and "process.pid" in r["attributes"]
                for r in res), "direct: a resource per process with process.pid and process.executable.name")


def wait_port(port, timeout=60):
    end = time.time() + timeout
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.1)
    return False


def phase_gateway(env, c, paths, procs):
    gateway = os.environ.get("SR_GATEWAY")
    if not gateway:
        c.check(False, "gateway: SR_GATEWAY set")
        return
    fport = start_fake(env, "pyroscope-b", procs)
    exe = env.workload("alphabeta-fp")
    bid = agentlib.build_id(exe).hex()
    ddir = os.path.join(env.tmp, "debug", ".build-id", bid[:2])
    os.makedirs(ddir)
    shutil.copy(exe, os.path.join(ddir, bid[2:] + ".debug"))
    hport, mport = free_port(), free_port()
    gcfg = os.path.join(env.tmp, "gateway.yaml")
    with open(gcfg, "w") as f:
        f.write("""receivers:
  otlp:
    protocols:
      http: {endpoint: 127.0.0.1:%d}
processors:
  symbolize: {cache_dir: %s, debug_dirs: [%s], wait_for_symbols: 5s}
  batch: {timeout: 200ms}
exporters:
  otlp_http:
    endpoint: http://127.0.0.1:%d
    retry_on_failure: {initial_interval: 100ms}
service:
  pipelines:
    profiles: {receivers: [otlp], processors: [symbolize, batch], exporters: [otlp_http]}
  telemetry: {metrics: {address: 127.0.0.1:%d}}
""" % (hport, os.path.join(env.tmp, "cache"), os.path.join(env.tmp, "debug"), fport, mport))
    glog = open(os.path.join(env.tmp, "gateway.log"), "w")
    g = subprocess.Popen([gateway, "--config", gcfg], stdout=glog, stderr=subprocess.STDOUT)
    procs.append(g)
    if not c.check(wait_port(hport), "gateway: the otlp receiver listens"):
        return
    _, otlp, _ = run_agent(env, c, "gateway", """\
otlp: {endpoint: "http://127.0.0.1:%d", proto_version: "1.9"}
profiling: {report_interval: 1s}
telemetry: {metrics: {address: "127.0.0.1:0"}}
""" % hport, paths)
    agentlib.wait_for(lambda: stats(fport)["accepted_samples"] >= otlp.get("samples_sent", 0), 30)
    s = stats(fport)
    c.check(s["accepted_samples"] == otlp.get("samples_sent"), "gateway: counts conserved end to end (fake %d, "
            "agent %s)" % (s["accepted_samples"], otlp.get("samples_sent")))
    total = named = 0
    for key, v in s["by_key"].items():
        names = key.split("|")[1].split(";")
        if any(n.startswith(exe) for n in names) or "alpha" in names or "beta" in names:
            total += v
            if names[0] in ("alpha", "beta", "spin"):
                named += v
    c.check(total > 0 and named >= 0.8 * total, "gateway: alphabeta's native frames named by build ID: %d of %d" %
            (named, total))
    share, ptotal = python_share(s["by_key"])
    c.check(ptotal > 0 and share >= 80, "gateway: Python frames keep their names: %.1f%% of %d" % (share, ptotal))


def phase_tls(env, c, paths, procs):
    """https:// with otlp.tls.ca_file and server_name, no compression, an Authorization header."""
    lib = importlib.machinery.SourceFileLoader(
        "sender_lib", os.path.join(os.path.dirname(os.path.abspath(__file__)), "sender-lib.py")).load_module()
    certs = lib.make_certs(env.tmp, server_names=("otlp.example.test",), ips=())
    port = start_fake(env, "pyroscope-tls", procs, tls=["--tls-cert", certs["server.pem"], "--tls-key",
                                                       certs["server.key"]])
    _, otlp, _ = run_agent(env, c, "tls", """\
otlp:
  endpoint: https://127.0.0.1:%d
  tls: {ca_file: %s, server_name: otlp.example.test}
  compression: none
  headers: {Authorization: Bearer t0ken}
profiling: {report_interval: 60s}
""" % (port, certs["ca.pem"]), paths)
    ctx = ssl.create_default_context(cafile=certs["ca.pem"])
    ctx.check_hostname = False
    s = stats(port, ctx)
    c.check(s["accepted_samples"] == otlp.get("samples_sent") and not s["errors"],
            "tls: counts conserved over https (fake %d, agent %s)" % (s["accepted_samples"], otlp.get("samples_sent")))
    c.check(set(s["encodings"]) <= {"", None, "identity"}, "tls: compression none sends no Content-Encoding (%s)" %
            s["encodings"])
    c.check(s["auth"] and set(s["auth"]) == {"Bearer t0ken"}, "tls: the Authorization header arrives (%s)" % s["auth"])


def main():
    agentlib.require_root_bpf(needs=("table unwinding",))
    if not os.access(PYTHON, os.X_OK):
        agentlib.skip(PYTHON + " not installed (python3 in scripts/install-deps)")
    env = agentlib.Env()
    c = agentlib.Checks()
    procs = []
    paths = {"hot": os.path.join(env.tmp, "hot.py")}
    with open(paths["hot"], "w") as f:
        f.write(HOT)
    try:
        phase_direct(env, c, paths, procs)
        phase_gateway(env, c, paths, procs)
        phase_tls(env, c, paths, procs)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        if c.failed:
            for name in ("gateway.log", "pyroscope-a.log", "pyroscope-b.log"):
                path = os.path.join(env.tmp, name)
                if os.path.exists(path):
                    sys.stderr.write("--- %s\n%s" % (name, open(path).read()[-4000:]))
    return c.finish()


if __name__ == "__main__":
    sys.exit(main())
