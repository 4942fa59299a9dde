#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""JIT code named from perf maps, with real eBPF and a real Node.js.

tests/workloads/perfmap-hot.js runs under `node --perf-basic-prof` (V8 then
writes /tmp/perf-PID.map) and spends SECONDS of CPU time (its own clock, not
wall time) in hotFunction. The agent (pid filter, --output, nodejs.enabled
false so that the perf map names the frames) sends to a real
gateway (symbolize, batch; file, pprof and flamegraph exporters). Checked:
  - node wrote its perf map, and hotFunction is in it;
  - the agent's output: >= 90 % of the main thread's samples have a JIT frame
    whose FunctionDef (runtime "perf-map") names hotFunction;
  - the exported profile (the OTLP file): >= 90 % of the main thread's
    sample values have a location whose Function is hotFunction, and those
    locations carry profile.frame.type "v8js"; pprof and the flame graph
    name it too;
  - the agent's /metrics count the frames named from perf maps.

Nothing waits on a timer: the workload spends its CPU budget, the agent is
stopped (SIGTERM: it drains BPF and flushes) after the workload exited, and
the gateway after the agent.
"""
import glob
import gzip
import json
import os
import signal
import socket
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ports import free_port  # noqa: E402
import metricslib  # noqa: E402
import agentlib  # noqa: E402

SECONDS = 3
FREQ = 499
JIT = 5  # stackrelay.v1.FrameKind
HOT = "hotFunction"





def start_gateway(env, work):
    port = free_port()
    cfg = os.path.join(work, "gateway.yaml")
    with open(cfg, "w") as f:
        f.write("""receivers:
  agent: {endpoint: 127.0.0.1:%d}
processors:
  symbolize: {cache_dir: %s/cache}
  batch: {timeout: 1s}
exporters:
  file: {path: %s/otlp.jsonl, format: json, process_attributes: sample}
  pprof: {directory: %s/pprof}
  flamegraph: {path: %s/flame.svg}
service:
  pipelines:
    profiles: {receivers: [agent], processors: [symbolize, batch], exporters: [file, pprof, flamegraph]}
  shutdown_timeout: 20s
""" % (port, work, work, work, work))
    gw = subprocess.Popen([env.gateway, "--config", cfg], stderr=open(os.path.join(work, "gateway.log"), "w"))

    def listening():
        if gw.poll() is not None:
            return None
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            return None
    return gw, (port if agentlib.wait_for(listening, 30) else None)


def check_agent_output(c, out, pid):
    main = [s for s in out.for_pid(pid) if s.tid == pid]
    total = sum(s.count for s in main)
    named = 0
    for s in main:
        fns = [out.functions.get(f.function_id) for f in out.frames(s) if f.kind == JIT]
        if any(fn is not None and fn.runtime == "perf-map" and HOT in fn.name for fn in fns):
            named += s.count
    # The share is the CPU time's split (V8's start-up and compiler take more of it under emulation);
    # that the perf map names the JIT frames at all is not.
    c.check(named > 0, "agent output: the perf map names %s in the main thread's samples" % HOT)
    c.timing(total > 0 and named >= 0.9 * total,
             "agent output: %d of the main thread's %d samples (%.1f%%) name %s from the perf map (>= 90%%)" %
             (named, total, 100.0 * named / total if total else 0, HOT))
    return total


def check_otlp(c, path, pid):
    """Share of the main thread's exported values whose stack has a location named HOT; frame types seen."""
    total = hot = 0
    types = set()
    with open(path) as f:
        for line in f:
            req = json.loads(line)
            d = req.get("dictionary", {})
            strings = d.get("stringTable", [])
            funcs = d.get("functionTable", [])
            locs = d.get("locationTable", [])
            attrs = d.get("attributeTable", [])
            stacks = d.get("stackTable", [])

            def attr(i):
                a = attrs[i]
                return strings[a.get("keyStrindex", 0)], a.get("value", {})

            def names(li):
                loc = locs[li]
                return [strings[funcs[ln.get("functionIndex", 0)].get("nameStrindex", 0)]
                        for ln in loc.get("lines", [])]

            for rp in req.get("resourceProfiles", []):
                for sp in rp.get("scopeProfiles", []):
                    for p in sp.get("profiles", []):
                        for s in p.get("samples", []):
                            kv = dict(attr(i) for i in s.get("attributeIndices", []))
                            if int(kv.get("thread.id", {}).get("intValue", -1)) != pid:
                                continue
                            v = sum(int(x) for x in s.get("values", []))
                            total += v
                            li = stacks[s.get("stackIndex", 0)].get("locationIndices", [])
                            if any(HOT in n for i in li for n in names(i)):
                                hot += v
                                for i in li:
                                    if any(HOT in n for n in names(i)):
                                        for ai in locs[i].get("attributeIndices", []):
                                            k, val = attr(ai)
                                            if k == "profile.frame.type":
                                                types.add(val.get("stringValue"))
    c.check(hot > 0, "exported profile: %s named in the main thread's samples" % HOT)
    c.timing(total > 0 and hot >= 0.9 * total,
             "exported profile: %d of the main thread's %d samples (%.1f%%) name %s (>= 90%%)" %
             (hot, total, 100.0 * hot / total if total else 0, HOT))
    c.check(types == {"v8js"}, "exported profile: %s's locations have profile.frame.type v8js (%s)" %
            (HOT, sorted(t for t in types if t)))


def check_pprof_flamegraph(c, work):
    found = False
    for p in glob.glob(os.path.join(work, "pprof", "*.pb.gz")):
        if HOT.encode() in gzip.open(p).read():
            found = True
    c.check(found, "pprof: a profile names %s" % HOT)
    svg = os.path.join(work, "flame.svg")
    c.check(os.path.exists(svg) and HOT in open(svg).read(), "flamegraph: flame.svg names %s" % HOT)


def main():
    agentlib.require_root_bpf()
    env = agentlib.Env()
    env.gateway = os.environ.get("SR_GATEWAY")
    if not env.gateway:
        agentlib.skip("run through meson test (SR_GATEWAY unset)")
    node = subprocess.run(["sh", "-c", "command -v node"], capture_output=True, text=True).stdout.strip()
    if not node:
        agentlib.skip("node (Node.js) not installed")
    c = agentlib.Checks()
    work = env.tmp
    gw = agent = w = None
    map_path = None
    try:
        gw, port = start_gateway(env, work)
        if not c.check(port is not None, "gateway listening"):
            return c.finish()
        script = os.path.join(env.src, "tests", "workloads", "perfmap-hot.js")
        w = subprocess.Popen([node, "--perf-basic-prof", script, str(SECONDS)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, cwd=work)
        pid = int(w.stdout.readline())
        map_path = "/tmp/perf-%d.map" % pid
        metrics_port = free_port()
        cfg = os.path.join(work, "agent.yaml")
        with open(cfg, "w") as f:
            f.write("gateway: {endpoint: http://127.0.0.1:%d}\n"
                    "profiling: {report_interval: 1s}\n"
                    "perf_maps: {enabled: true}\n"
                    # V8's metadata would name node's JavaScript frames before the perf map could: off, so this
                    # test shows the perf map's path (agent-node-names shows both name the same functions).
                    "nodejs: {enabled: false}\n"
                    "telemetry: {metrics: {address: 127.0.0.1:%d}}\n" % (port, metrics_port))
        out_path = os.path.join(work, "out.pb")
        agent, log = agentlib.start_agent(env, ["--config", cfg, "--pid", str(pid), "--frequency", str(FREQ),
                                                "--output", out_path])
        if not c.check(agent is not None, "agent started"):
            return c.finish()
        w.stdin.write("go\n")
        w.stdin.flush()
        done = w.stdout.readline()
        c.check(w.wait(timeout=120) == 0 and done.startswith("done"), "workload spent its CPU budget")
        c.check(os.path.exists(map_path) and HOT in open(map_path, errors="replace").read(),
                "node --perf-basic-prof wrote %s naming %s" % (map_path, HOT))
        metrics = metricslib.scrape(metrics_port)
        named = metricslib.parse(metrics).get('stackrelay_agent_jit_frames_total{result="named"}')
        c.check(named and named > 0, "metrics: %s JIT frames named from perf maps" % named)
        print("# %s" % " ".join(line for line in metrics.splitlines()
                                if line.startswith("stackrelay_agent_jit_frames_total")))
        rc, stderr = agentlib.stop_agent(agent, log)
        c.check(rc == 0, "agent exits 0 on SIGTERM (rc=%d)" % rc)
        out = agentlib.Output(env.pb, out_path)
        check_agent_output(c, out, pid)
        gw.send_signal(signal.SIGTERM)
        try:
            gw_rc = gw.wait(timeout=60)
        except subprocess.TimeoutExpired:
            gw.kill()
            gw_rc = -1
        if gw_rc != 0:
            sys.stderr.write(open(os.path.join(work, "gateway.log")).read())
        c.check(gw_rc == 0, "gateway stops cleanly (rc=%d)" % gw_rc)
        check_otlp(c, os.path.join(work, "otlp.jsonl"), pid)
        check_pprof_flamegraph(c, work)
        return c.finish()
    finally:
        for p in (w, agent, gw):
            if p and p.poll() is None:
                p.kill()
                p.wait()
        if map_path and os.path.exists(map_path):
            os.unlink(map_path)
        env.cleanup()


if __name__ == "__main__":
    sys.exit(main())
