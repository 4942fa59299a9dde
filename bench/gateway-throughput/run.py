#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""End-to-end gateway throughput (bench/gateway-throughput/README.md).

Recorded agent traffic is replayed (replay.js: many agents over h2c) to the
real stackrelay-gateway: receivers.agent -> processors [symbolize, batch] ->
exporters [otlp_http] -> sink.py (counts bytes, answers 200). Side by side in
the same run, the reference: the same traffic and gateway with no processors
(agent -> otlp_http), so the cost of symbolize + batch shows as a ratio.

For each configuration: warm-up replay (symbols loaded and cached), wait until
everything accepted is exported, then the measured replay; the gateway's CPU
time (utime + stime from /proc/PID/stat) and samples exported (its /metrics)
are read before and after (after: once exported == accepted again), so
samples/s per core = exported samples / gateway CPU seconds. Also: bytes per
CPU sample on the wire in (agent protocol, gzip) and out (OTLP, gzip), the
gateway's peak RSS (VmHWM), the sink's and the replay client's CPU.

Usage: run.py --build BUILD_DIR [--recording FILE] [--seconds 10] [--warmup 3]
              [--agents 16] [--inflight 4] [--record-seconds 20] [--smoke]
Without --recording it records one (as root): stackrelay-agent --duration N
--output FILE while a multi-process CPU-bound workload runs.
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        rest = f.read().rsplit(")", 1)[1].split()
    return (int(rest[11]) + int(rest[12])) / TICK


def peak_rss_mib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def metrics(addr):
    text = urllib.request.urlopen("http://%s/metrics" % addr, timeout=10).read().decode()
    out = {"exported": 0.0, "accepted_rx": 0.0, "dropped": 0.0, "named": 0.0, "fallback": 0.0,
           "unsymbolized": 0.0}
    for line in text.splitlines():
        m = re.match(r'^(\w+)(\{[^}]*\})? ([0-9.e+-]+)$', line)
        if not m:
            continue
        name, labels, v = m.group(1), m.group(2) or "", float(m.group(3))
        if name == "stackrelay_gateway_samples_exported_total":
            out["exported"] += v
        elif name == "stackrelay_gateway_samples_accepted_total" and 'component="agent"' in labels:
            out["accepted_rx"] += v
        elif name == "stackrelay_gateway_samples_dropped_total":
            out["dropped"] += v
        elif name == "stackrelay_gateway_symbolize_locations_total":
            for k in ("named", "fallback", "unsymbolized"):
                if 'outcome="%s"' % k in labels:
                    out[k] += v
    return out


def wait_file(path, timeout=10.0):
    end = time.time() + timeout
    while time.time() < end:
        if os.path.exists(path) and os.path.getsize(path) > 0:
            return
        time.sleep(0.05)
    raise SystemExit("run.py: %s did not appear" % path)


def record(build, out, seconds):
    """Records real agent traffic while a multi-process CPU-bound workload runs."""
    if os.geteuid() != 0:
        raise SystemExit("run.py: recording needs root (BPF); pass --recording FILE")
    agent = subprocess.Popen([os.path.join(build, "agent/stackrelay-agent"), "--duration", str(seconds),
                              "--frequency", "97", "--output", out, "--log-level", "warn"],
                             stderr=subprocess.DEVNULL)
    time.sleep(1)
    work = [
        # cpuwork: workers under a 24-deep call chain (frame pointers).
        subprocess.Popen([os.path.join(build, "bench/agent-overhead/cpuwork"), "2", "100000"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
        # An interpreter with a wide, changing set of stacks.
        subprocess.Popen([sys.executable, "-c",
                          "import json,re,hashlib,time\nt=time.time()\n"
                          "while time.time()-t<%d:\n"
                          " s=json.dumps([{'a':i,'b':str(i)*5} for i in range(2000)]);json.loads(s);"
                          "re.findall(r'\\d+',s);hashlib.sha256(s.encode()).hexdigest()" % (seconds - 2)]),
        # Short-lived processes: compression, sorting, directory walks.
        subprocess.Popen(["timeout", str(seconds - 2), "sh", "-c",
                          "while :; do gzip -c %s | sha1sum >/dev/null; ls -R /usr/include >/dev/null; done"
                          % os.path.join(build, "gateway/stackrelay-gateway")]),
    ]
    agent.wait(timeout=seconds + 30)
    for w in work:
        w.kill()
        w.wait()
    if agent.returncode != 0 or not os.path.exists(out):
        raise SystemExit("run.py: the agent failed to record (try: stackrelay-agent --check)")


def executables(recording):
    """(path, gnu_build_id hex) of every ExecutableDef in a recording."""
    def varint(b, i):
        v = s = 0
        while True:
            c = b[i]
            i += 1
            v |= (c & 0x7F) << s
            s += 7
            if c < 0x80:
                return v, i

    def fields(m):
        i = 0
        while i < len(m):
            k, i = varint(m, i)
            f, w = k >> 3, k & 7
            if w == 0:
                v, i = varint(m, i)
                yield f, v
            elif w == 1:
                i += 8
            elif w == 5:
                i += 4
            elif w == 2:
                n, i = varint(m, i)
                yield f, m[i:i + n]
                i += n

    data = open(recording, "rb").read()
    out = set()
    i = 0
    while i < len(data):
        n, i = varint(data, i)
        for f, v in fields(data[i:i + n]):
            if f == 7:
                d = dict(fields(v))
                # id is the GNU build ID when id_kind is 1; else gnu_build_id may carry one.
                bid = d.get(1) if d.get(2) == 1 else d.get(6)
                if d.get(4) and bid:
                    out.add((d[4].decode(errors="replace"), bid.hex()))
        i += n
    return sorted(out)


def debug_dir(recording, d):
    """A /usr/lib/debug-layout directory pointing at this host's files by build ID (the gateway checks it)."""
    n = 0
    for path, bid in executables(recording):
        if len(bid) < 4 or not os.path.isfile(path):
            continue
        sub = os.path.join(d, ".build-id", bid[:2])
        os.makedirs(sub, exist_ok=True)
        link = os.path.join(sub, bid[2:] + ".debug")
        if not os.path.exists(link):
            os.symlink(path, link)
            n += 1
    return n


def replay(args, url, seconds):
    t0 = time.time()
    p = subprocess.run(["node", os.path.join(HERE, "replay.js"), "--recording", args.recording, "--url", url,
                        "--agents", str(args.agents), "--seconds", str(seconds), "--inflight",
                        str(args.inflight)], capture_output=True, text=True, timeout=seconds + 90)
    if p.returncode != 0:
        raise SystemExit("run.py: replay failed: " + p.stderr)
    r = json.loads(p.stdout.strip().splitlines()[-1])
    r["wall"] = time.time() - t0
    # Children's CPU is only known after they exit: the client's, for the record.
    return r


def wait_drained(maddr, timeout=60.0):
    end = time.time() + timeout
    last = None
    while time.time() < end:
        m = metrics(maddr)
        if m["exported"] + m["dropped"] >= m["accepted_rx"] and m == last:
            return m
        last = m
        time.sleep(0.5)
    return metrics(maddr)


def run_config(args, name, processors, tmp, ddir):
    port_file = os.path.join(tmp, name + ".sink.port")
    sink = subprocess.Popen([sys.executable, os.path.join(HERE, "sink.py"), port_file, "--max-seconds", "900"])
    gw = None
    try:
        wait_file(port_file)
        port = int(open(port_file).read())
        cfg = os.path.join(tmp, name + ".yaml")
        with open(cfg, "w") as f:
            f.write("receivers:\n  agent: {endpoint: 127.0.0.1:0}\n")
            if processors:
                f.write("processors:\n")
            if "symbolize" in processors:
                # Symbols from this host's files (debug_dir()); nothing waits for uploads the replay cannot make.
                f.write("  symbolize: {debug_dirs: [%s], wait_for_symbols: 0s}\n" % ddir)
            if "batch" in processors:
                f.write("  batch: {timeout: 1s}\n")
            f.write("exporters:\n  otlp_http: {endpoint: \"http://127.0.0.1:%d\"}\n" % port)
            f.write("service:\n  pipelines:\n    profiles: {receivers: [agent], %sexporters: [otlp_http]}\n"
                    "  telemetry: {metrics: {address: 127.0.0.1:0}}\n"
                    % ("processors: [%s], " % ", ".join(processors) if processors else ""))
        log = os.path.join(tmp, name + ".log")
        gw = subprocess.Popen([os.path.join(args.build, "gateway/stackrelay-gateway"), "--config", cfg],
                              stderr=open(log, "w"))
        addr = maddr = None
        for _ in range(200):
            text = open(log).read()
            a = re.search(r'listening for agents.* address=(\S+)', text)
            m = re.search(r'telemetry server listening" address=(\S+)', text)
            if a and m and "msg=running" in text:
                addr, maddr = a.group(1), m.group(1)
                break
            time.sleep(0.05)
        if not addr:
            raise SystemExit("run.py: the gateway did not start; see " + log + "\n" + open(log).read()[-2000:])
        url = "http://" + addr
        replay(args, url, args.warmup)
        m0 = wait_drained(maddr)
        c0, s0 = cpu_seconds(gw.pid), cpu_seconds(sink.pid)
        k0 = json.loads(urllib.request.urlopen("http://127.0.0.1:%d/stats" % port, timeout=10).read())
        r = replay(args, url, args.seconds)
        m1 = wait_drained(maddr)
        c1, s1 = cpu_seconds(gw.pid), cpu_seconds(sink.pid)
        k1 = json.loads(urllib.request.urlopen("http://127.0.0.1:%d/stats" % port, timeout=10).read())
        exported = m1["exported"] - m0["exported"]
        res = {
            "config": name,
            "sent_samples": r["samples"], "sent_records": r["records"], "requests": r["requests"],
            "statuses": r["statuses"],
            "exported_samples": exported,
            "dropped_samples": m1["dropped"] - m0["dropped"],
            "gateway_cpu_s": c1 - c0,
            "samples_per_cpu_s": exported / max(c1 - c0, 1e-9),
            "records_per_cpu_s": r["records"] / max(c1 - c0, 1e-9),
            "in_bytes_per_sample": r["wire_bytes"] / max(r["samples"], 1),
            "in_plain_bytes_per_sample": r["plain_bytes"] / max(r["samples"], 1),
            "out_bytes_per_sample": (k1["bytes"] - k0["bytes"]) / max(exported, 1),
            "out_requests": k1["requests"] - k0["requests"],
            "sink_cpu_s": s1 - s0,
            "gateway_peak_rss_mib": peak_rss_mib(gw.pid),
            "replay_wall_s": r["wall"],
            "symbolized": {k: m1[k] - m0[k] for k in ("named", "fallback", "unsymbolized")},
        }
        return res
    finally:
        if gw:
            gw.send_signal(signal.SIGTERM)
            try:
                gw.wait(timeout=30)
            except subprocess.TimeoutExpired:
                gw.kill()
                gw.wait()
        sink.terminate()
        sink.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", required=True)
    ap.add_argument("--recording")
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--warmup", type=float, default=3)
    ap.add_argument("--agents", type=int, default=16)
    ap.add_argument("--inflight", type=int, default=4)
    ap.add_argument("--record-seconds", type=int, default=20)
    ap.add_argument("--smoke", action="store_true", help="short run, no verdict (for the test suite)")
    ap.add_argument("--json", help="also write the results there")
    args = ap.parse_args()
    args.build = os.path.abspath(args.build)
    tmp = tempfile.mkdtemp(prefix="sr-bench-e2e-")
    try:
        if not args.recording:
            args.recording = os.path.join(tmp, "recording.bin")
            record(args.build, args.recording, args.record_seconds)
        ddir = os.path.join(tmp, "debug")
        os.makedirs(ddir)
        links = debug_dir(args.recording, ddir)
        size = os.path.getsize(args.recording)
        print("recording: %s (%d bytes); %d executables found on this host for symbols" %
              (args.recording, size, links))
        results = [run_config(args, "symbolize+batch", ["symbolize", "batch"], tmp, ddir),
                   run_config(args, "batch only", ["batch"], tmp, ddir),
                   run_config(args, "reference (no processors)", [], tmp, ddir)]
        full, bonly, ref = results
        hdr = ("config", "CPU samples/s per core", "records/s per core", "exported", "dropped",
               "gateway CPU s", "in B/sample (gzip)", "out B/sample (OTLP gzip)", "peak RSS MiB", "sink CPU s")
        print("| " + " | ".join(hdr) + " |")
        print("|" + "---|" * len(hdr))
        for r in results:
            print("| %s | %.0f | %.0f | %d | %d | %.2f | %.2f | %.2f | %.1f | %.2f |" % (
                r["config"], r["samples_per_cpu_s"], r["records_per_cpu_s"], r["exported_samples"],
                r["dropped_samples"], r["gateway_cpu_s"], r["in_bytes_per_sample"], r["out_bytes_per_sample"],
                r["gateway_peak_rss_mib"], r["sink_cpu_s"]))
        print("CPU per sample relative to the reference (no processors): symbolize+batch %.2fx, batch only %.2fx; "
              "symbolize alone costs %.2fx of batch only" % (
                  ref["samples_per_cpu_s"] / max(full["samples_per_cpu_s"], 1e-9),
                  ref["samples_per_cpu_s"] / max(bonly["samples_per_cpu_s"], 1e-9),
                  bonly["samples_per_cpu_s"] / max(full["samples_per_cpu_s"], 1e-9)))
        print("symbolize outcomes in the measured window (named/fallback count locations named for the first time; "
              "unsymbolized counts every frame occurrence): %s" % json.dumps(full["symbolized"]))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(results, f, indent=1)
        for r in results:
            if r["exported_samples"] <= 0 or r["sent_samples"] <= 0:
                print("run.py: nothing went through (%s)" % r["config"], file=sys.stderr)
                return 1
        if not args.smoke:
            print("target >= 1,000,000 CPU samples/s per core end to end: %s" %
                  ("met" if full["samples_per_cpu_s"] >= 1e6 else "NOT met"))
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
