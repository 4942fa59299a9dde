#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""bench/agent-overhead/steady.py: what a profiler costs a node in steady state.

run.py measures the slowdown of a fixed workload, which at 19 Hz is below
its noise. This one measures the profiler itself over a long window, with
nanosecond clocks: CPU-bound spinners keep every CPU busy (the default
--busy is one per CPU) while, round by round and side by side, the agent and
`perf record -a -g` run at the same frequency. For each, over --seconds after
a warm-up:
  - user + system CPU of every thread of the profiler (/proc/PID/task/*/schedstat),
  - for the agent, the run time of every BPF program it holds (its
    /proc/PID/fdinfo, with kernel.bpf_stats_enabled on during the window):
    the in-context cost that the sampled or hooked task pays; perf's
    equivalent (its interrupt-time callchain walk) has no counter and is not
    included, which flatters perf;
  - wake-ups per second (context switches of the profiler's threads),
  - RSS (smaps_rollup) and, for the agent, RSS by mapping kind and the
    kernel memory of its BPF maps (fdinfo memlock).
Prints a Markdown table of medians and the agent/perf ratio.

Usage (root): bench/agent-overhead/steady.py --build build [--hz 19] [--seconds 60]
              [--rounds 3] [--busy N] [--gateway] [--cgroup]
--gateway also runs a stackrelay-gateway (no processors, exporting to a local
sink that answers 200) and points the agent at it, so the sender's cost is in.
--cgroup puts the spinners in a cgroup v2 of their own and limits the agent
to it (profiling.cgroups), so that other work on the machine (builds, tests:
new processes and files, which the agent must handle) does not count: the
figure is then the cost of profiling the busy CPUs alone, on any machine.
perf stays system-wide (its own process does almost nothing either way).
"""
import argparse
import glob
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from procstats import bpf_progs, fdinfo, proc_cpu_ns  # noqa: E402


def ctx_switches(pid):
    n = 0
    for f in glob.glob("/proc/%d/task/*/status" % pid):
        try:
            for line in open(f):
                if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                    n += int(line.split()[1])
        except OSError:
            pass
    return n


def bpf_totals(pid):
    """({program name: (run time ns, run count)}, BPF map memlock bytes) over the objects pid holds."""
    progs = bpf_progs(pid)
    memlock = sum(int(kv.get("memlock", 0)) for kv in fdinfo(pid).values() if "map_id" in kv)
    return progs, memlock


def rss_kib(pid):
    """Total RSS and RSS by kind (BPF maps, heap/anonymous, files) in KiB."""
    total = 0
    kinds = {"bpf maps": 0, "anonymous": 0, "files": 0}
    name = None
    try:
        for line in open("/proc/%d/smaps" % pid):
            f = line.split()
            if f and "-" in f[0] and len(f) >= 5 and ":" not in f[0]:
                name = f[5] if len(f) >= 6 else ""
            elif f and f[0] == "Rss:":
                kb = int(f[1])
                total += kb
                if name.startswith("anon_inode:bpf"):
                    kinds["bpf maps"] += kb
                elif name.startswith("/"):
                    kinds["files"] += kb
                else:
                    kinds["anonymous"] += kb
    except OSError:
        pass
    return total, kinds


def make_cgroup():
    """A cgroup v2 directory for the spinners (the unified hierarchy, wherever it is mounted)."""
    for root in ("/sys/fs/cgroup/unified", "/sys/fs/cgroup"):
        if os.path.exists(os.path.join(root, "cgroup.procs")) and \
                os.path.exists(os.path.join(root, "cgroup.controllers")):
            path = os.path.join(root, "sr-bench-steady-%d" % os.getpid())
            os.mkdir(path)
            return path
    raise SystemExit("--cgroup: no cgroup v2 hierarchy mounted")


def wait_ready(p, needle, timeout=30):
    ready = threading.Event()

    def drain():
        for line in p.stderr:
            if needle in line:
                ready.set()
    threading.Thread(target=drain, daemon=True).start()
    return ready.wait(timeout)


def measure(pid, seconds, bpf):
    cpu0, ctx0 = proc_cpu_ns(pid), ctx_switches(pid)
    p0 = bpf_totals(pid)[0] if bpf else {}
    time.sleep(seconds)
    cpu1, ctx1 = proc_cpu_ns(pid), ctx_switches(pid)
    p1, maps = bpf_totals(pid) if bpf else ({}, 0)
    rss, kinds = rss_kib(pid)
    # Per program: (s, runs) in the window. The sampling programs' cost follows the
    # frequency; the hooks' (exec, fork, exit, mmap) follows the host's process churn.
    progs = {n: ((v[0] - p0.get(n, (0, 0))[0]) / 1e9, v[1] - p0.get(n, (0, 0))[1]) for n, v in p1.items()}
    return {"cpu": (cpu1 - cpu0) / 1e9, "bpf": sum(v[0] for v in progs.values()),
            "bpf_runs": sum(v[1] for v in progs.values()), "progs": progs,
            "sampling_bpf": sum(v[0] for n, v in progs.items() if n in SAMPLING_PROGS),
            "wakeups": (ctx1 - ctx0) / seconds, "rss": rss / 1024.0, "kinds": kinds, "maps": maps}


# The programs that run per sample (the rest are the mapping and process hooks).
SAMPLING_PROGS = ("do_sample", "unwind_user")


def run_agent(args, tmp, gw_endpoint, cgroup):
    cmd = [os.path.join(args.build, "agent", "stackrelay-agent"), "--frequency", str(args.hz), "--log-level", "info"]
    cfg = os.path.join(tmp, "agent.yaml")
    with open(cfg, "w") as f:
        if gw_endpoint:
            f.write("gateway:\n  endpoint: %s\ntelemetry:\n  metrics:\n    address: 127.0.0.1:%d\n" %
                    (gw_endpoint, free_port()))
        if cgroup:
            f.write("profiling:\n  cgroups: [%s]\n" % cgroup)
    cmd += ["--config", cfg]
    if not gw_endpoint:
        cmd += ["--output", os.path.join(tmp, "agent.pb")]
    p = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    if not wait_ready(p, "msg=profiling "):
        p.kill()
        raise SystemExit("agent did not start")
    time.sleep(args.warmup)
    m = measure(p.pid, args.seconds, True)
    p.send_signal(signal.SIGINT)
    p.wait(timeout=60)
    return m


def run_perf(args, tmp):
    p = subprocess.Popen(["perf", "record", "-a", "-g", "-F", str(args.hz), "-o", os.path.join(tmp, "perf.data"),
                          "-q"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0 + args.warmup)
    m = measure(p.pid, args.seconds, False)
    p.send_signal(signal.SIGINT)
    p.wait(timeout=120)
    return m


def free_port():
    import socket
    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        return so.getsockname()[1]


def start_gateway(args, tmp):
    sink = subprocess.Popen([sys.executable, "-c", SINK], stdout=subprocess.PIPE, text=True)
    sink_port = int(sink.stdout.readline())
    port, metrics = free_port(), free_port()
    cfg = os.path.join(tmp, "gateway.yaml")
    with open(cfg, "w") as f:
        f.write("receivers:\n  agent:\n    endpoint: 127.0.0.1:%d\n"
                "exporters:\n  otlp_http:\n    endpoint: http://127.0.0.1:%d\n"
                "service:\n  pipelines:\n    profiles:\n      receivers: [agent]\n      exporters: [otlp_http]\n"
                "  telemetry:\n    metrics:\n      address: 127.0.0.1:%d\n" % (port, sink_port, metrics))
    gw = subprocess.Popen([os.path.join(args.build, "gateway", "stackrelay-gateway"), "--config", cfg],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    gw.metrics_port = metrics
    for _ in range(100):
        try:
            urllib.request.urlopen("http://127.0.0.1:%d/readyz" % metrics, timeout=1)
            return gw, sink, "http://127.0.0.1:%d" % port
        except OSError:
            time.sleep(0.1)
    gw.kill()
    sink.kill()
    raise SystemExit("gateway did not become ready")


SINK = r"""
import http.server, sys

class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200); self.send_header("Content-Length", "0"); self.end_headers()
    def log_message(self, *a): pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--hz", type=int, default=19)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--warmup", type=float, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--busy", type=int, default=os.cpu_count())
    ap.add_argument("--gateway", action="store_true")
    ap.add_argument("--cgroup", action="store_true")
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("run as root (BPF, system-wide perf)")
    have_perf = shutil.which("perf") is not None
    tmp = tempfile.mkdtemp(prefix="sr-steady-")
    stats_path = "/proc/sys/kernel/bpf_stats_enabled"
    old_stats = open(stats_path).read().strip()
    cgroup = make_cgroup() if args.cgroup else None

    def enter():
        if cgroup:
            with open(os.path.join(cgroup, "cgroup.procs"), "w") as f:
                f.write("0")
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"], preexec_fn=enter)
                for _ in range(args.busy)]
    gw = sink = None
    load_before = open("/proc/loadavg").read().split()[0]
    res = {"agent": [], "perf": []}
    try:
        endpoint = None
        if args.gateway:
            gw, sink, endpoint = start_gateway(args, tmp)
        open(stats_path, "w").write("1")
        for rnd in range(args.rounds):
            m = run_agent(args, tmp, endpoint, cgroup)
            res["agent"].append(m)
            print("round %d agent: %.4f s CPU + %.4f s BPF (%d runs), %.1f wake-ups/s, RSS %.1f MiB %s, "
                  "BPF maps %.1f MiB" % (rnd + 1, m["cpu"], m["bpf"], m["bpf_runs"], m["wakeups"], m["rss"],
                                         m["kinds"], m["maps"] / 2**20), file=sys.stderr)
            print("    BPF by program: " + ", ".join(
                "%s %.2f ms / %d runs" % (n, 1e3 * t, c) for n, (t, c) in sorted(m["progs"].items()) if c),
                file=sys.stderr)
            if have_perf:
                m = run_perf(args, tmp)
                res["perf"].append(m)
                print("round %d perf:  %.4f s CPU, %.1f wake-ups/s, RSS %.1f MiB" %
                      (rnd + 1, m["cpu"], m["wakeups"], m["rss"]), file=sys.stderr)
    finally:
        open(stats_path, "w").write(old_stats)
        for s in spinners:
            s.kill()
        for p in (gw, sink):
            if p:
                p.kill()
        shutil.rmtree(tmp, ignore_errors=True)
        if cgroup:
            for s in spinners:
                s.wait()
            os.rmdir(cgroup)

    def med(kind, key):
        return statistics.median(m[key] for m in res[kind])
    w = args.seconds
    print("%d busy CPUs (of %d), %d Hz, %d rounds of %.0f s, medians; kernel %s; load average before: %s%s" %
          (args.busy, os.cpu_count(), args.hz, args.rounds, w, os.uname().release, load_before,
           ("; agent sends to a gateway" if args.gateway else "; agent writes --output") +
           ("; agent limited to the spinners' cgroup" if cgroup else "")))
    print()
    print("| profiler | user+sys % of a core | BPF per sample (% of a core) | BPF hooks (% of a core) "
          "| total % of a core | wake-ups/s | RSS MiB |")
    print("|---|---|---|---|---|---|---|")
    a_total = statistics.median((m["cpu"] + m["bpf"]) for m in res["agent"])
    print("| stackrelay-agent | %.3f | %.3f | %.3f | %.3f | %.1f | %.1f |" %
          (100 * med("agent", "cpu") / w, 100 * med("agent", "sampling_bpf") / w,
           100 * statistics.median(m["bpf"] - m["sampling_bpf"] for m in res["agent"]) / w, 100 * a_total / w,
           med("agent", "wakeups"), med("agent", "rss")))
    if res["perf"]:
        p_total = med("perf", "cpu")
        print("| perf record -a -g | %.3f | (not measurable) | — | ≥ %.3f | %.1f | %.1f |" %
              (100 * p_total / w, 100 * p_total / w, med("perf", "wakeups"), med("perf", "rss")))
        print()
        print("agent total / perf record's own CPU: %.2f (perf's interrupt-time cost not included)" %
              (a_total / p_total if p_total else float("inf")))
    k = res["agent"][-1]["kinds"]
    print("agent RSS by kind (last round): BPF map pages %.1f MiB, anonymous %.1f MiB, files %.1f MiB; "
          "BPF map kernel memory %.1f MiB" % (k["bpf maps"] / 1024, k["anonymous"] / 1024, k["files"] / 1024,
                                             res["agent"][-1]["maps"] / 2**20))


if __name__ == "__main__":
    main()
