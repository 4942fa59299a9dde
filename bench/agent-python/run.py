#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""bench/agent-python: what naming Python frames costs (README: "Python frames").

cost    BPF time per sample (kernel.bpf_stats_enabled: run_time_ns / run_cnt
        of the agent's own programs, found through its fdinfo) while one
        python3.11 process per CPU runs a script whose stacks hold DEPTH
        Python frames, with python.enabled true and false, interleaved
        round by round; and, as the native reference, the same agent over
        qsortdeep (no frame pointers, table-unwound). Ratios: Python walk on /
        off over the same processes, and Python on / native.
rss     The agent's resident memory (VmRSS) after 50 Python processes (each
        with its own code objects: a script per process) ran under it, and
        the bytes per sample of its --output (definitions included).

Usage (root, from the source tree, after building):
  bench/agent-python/run.py --build build [--parts cost,rss] [--rounds 3] [--seconds 10] [--depth 20]
"""
import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from procstats import bpf_progs  # noqa: E402

STATS = "/proc/sys/kernel/bpf_stats_enabled"
PYTHON = "/usr/bin/python3.11"
WARM = 2

SCRIPT = """\
import sys, time


def leaf(n):
    s = 0
    for i in range(n):
        s += i * i
    return s


def chain_%(tag)s(d, n):
    return leaf(n) if d == 0 else chain_%(tag)s(d - 1, n)


end = time.process_time() + float(sys.argv[1])
while time.process_time() < end:
    chain_%(tag)s(int(sys.argv[2]), 2000)
"""


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def loadavg():
    return open("/proc/loadavg").read().split()[0]


class Agent:
    def __init__(self, build, tmp, hz, python, out=None):
        cfg = os.path.join(tmp, "agent-%s.yaml" % python)
        with open(cfg, "w") as f:
            f.write("profiling:\n  frequency: %d\npython:\n  enabled: %s\n" % (hz, "true" if python else "false"))
        self.out = out or os.path.join(tmp, "agent.pb")
        self.p = subprocess.Popen([os.path.join(build, "agent", "stackrelay-agent"), "--config", cfg,
                                   "--duration", "3600", "--output", self.out, "--log-level", "info"],
                                  stderr=subprocess.PIPE, text=True)
        ready = threading.Event()
        self.lines = []

        def drain():
            for line in self.p.stderr:
                self.lines.append(line)
                if "msg=profiling " in line:
                    ready.set()
        threading.Thread(target=drain, daemon=True).start()
        if not ready.wait(60):
            self.p.kill()
            raise SystemExit("agent did not start:\n" + "".join(self.lines))

    def rss_kib(self):
        for line in open("/proc/%d/status" % self.p.pid):
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0

    def stop(self):
        self.p.send_signal(signal.SIGINT)
        self.p.wait()


def workers(cmds):
    return [subprocess.Popen(c, stdout=subprocess.DEVNULL) for c in cmds]


def wait_all(ps):
    for p in ps:
        if p.wait():
            raise SystemExit("workload failed: %s" % p.args)


def part_cost(args, tmp):
    script = os.path.join(tmp, "chain.py")
    with open(script, "w") as f:
        f.write(SCRIPT % {"tag": "a"})
    n = os.cpu_count()
    span = str(args.seconds + 2 * WARM)
    runs = [
        ("python3.11, Python frames", True, [[PYTHON, script, span, str(args.depth)]] * n),
        ("python3.11, native only", False, [[PYTHON, script, span, str(args.depth)]] * n),
        ("qsortdeep (native reference)", True,
         [[os.path.join(args.build, "tests", "workloads", "qsortdeep"), span]] * n),
    ]
    res = {}
    for rnd in range(args.rounds):
        for name, python, cmds in runs:
            a = Agent(args.build, tmp, args.hz, python)
            ws = workers(cmds)
            time.sleep(WARM)
            p0 = bpf_progs(a.p.pid)
            time.sleep(args.seconds)
            p1 = bpf_progs(a.p.pid)
            wait_all(ws)
            a.stop()
            d = {k: (p1[k][0] - p0.get(k, (0, 0))[0], p1[k][1] - p0.get(k, (0, 0))[1]) for k in p1}
            ns = d["do_sample"][0] + d.get("unwind_user", (0, 0))[0]
            cnt = d["do_sample"][1]
            res.setdefault(name, []).append(ns / cnt if cnt else 0)
            log("cost round %d %s: %.0f ns/sample over %d samples (load %s)" %
                (rnd + 1, name, ns / cnt if cnt else 0, cnt, loadavg()))
    on = statistics.median(res[runs[0][0]])
    off = statistics.median(res[runs[1][0]])
    native = statistics.median(res[runs[2][0]])
    print("\n### BPF cost per sample (%d Hz, %d workers x %d s, %d rounds, %d Python frames a stack; "
          "median of rounds, range)\n" % (args.hz, n, args.seconds, args.rounds, args.depth + 3))
    print("| workload | ns per sample | range |")
    print("|---|---|---|")
    for name, _, _ in runs:
        r = res[name]
        print("| %s | %.0f | %.0f–%.0f |" % (name, statistics.median(r), min(r), max(r)))
    print("\nPython walk on / off (same processes): **%.2f×**; Python on / native qsortdeep: **%.2f×**" %
          (on / off if off else 0, on / native if native else 0))


def part_rss(args, tmp):
    out = os.path.join(tmp, "rss.pb")
    a = Agent(args.build, tmp, 19, True, out)
    rss0 = a.rss_kib()
    cmds = []
    for i in range(args.processes):
        path = os.path.join(tmp, "p%d.py" % i)
        with open(path, "w") as f:
            f.write(SCRIPT % {"tag": "p%d" % i})
        cmds.append([PYTHON, path, str(args.process_seconds), "10"])
    # Two at a time: every process is sampled while it runs.
    for i in range(0, len(cmds), 2):
        wait_all(workers(cmds[i:i + 2]))
    rss1 = a.rss_kib()
    a.stop()
    size = os.path.getsize(out)
    samples = 0
    for line in a.lines:
        if 'msg="profiling stopped"' in line:
            for part in line.split():
                if part.startswith("samples_exported="):
                    samples = int(part.split("=")[1])
    print("\n### Agent memory with %d Python processes (%.1f s of CPU each, 19 Hz)\n" %
          (args.processes, args.process_seconds))
    print("| agent VmRSS before | after | --output bytes | samples | bytes per sample |")
    print("|---|---|---|---|---|")
    print("| %.1f MiB | %.1f MiB | %d | %d | %.0f |" % (rss0 / 1024, rss1 / 1024, size, samples,
                                                     size / samples if samples else 0))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--parts", default="cost,rss")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--depth", type=int, default=20)
    ap.add_argument("--hz", type=int, default=997)
    ap.add_argument("--processes", type=int, default=50)
    ap.add_argument("--process-seconds", type=float, default=1.0)
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("needs root")
    old = open(STATS).read().strip()
    open(STATS, "w").write("1")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            parts = args.parts.split(",")
            if "cost" in parts:
                part_cost(args, tmp)
            if "rss" in parts:
                part_rss(args, tmp)
    finally:
        open(STATS, "w").write(old)


if __name__ == "__main__":
    main()
