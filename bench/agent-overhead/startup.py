#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""bench/agent-overhead/startup.py: the agent's start-up on a host with many processes.

Before the agent starts, --procs idle processes are running, a third each of
  - native: coreutils' sleep,
  - Debian's python3 blocked in time.sleep(),
  - shells: sh -c 'read x' waiting on a pipe,
and one busy workload (Debian's python3 spinning, so the first complete stack
needs the unwind tables of python3 and libc and the Python walk). Then, round
by round, the agent starts as deployed (default configuration, sending to a
stackrelay-gateway on loopback, GNUTLS_NO_IMPLICIT_INIT=1) and the bench
measures, from the agent's exec:
  - "ready": wall time and the agent's CPU (every thread's schedstat) until
    its "profiling" log line (BPF loaded and attached, setup done);
  - "first complete stack": wall time and CPU until its BPF counters count
    a stack unwound to its end (PROFILE_CNT_UNWIND_END_COMPLETE, which the
    BPF program adds at the sample; read with bpftool every --poll seconds,
    which costs the agent nothing: its /metrics are refreshed only once a
    second);
  - "settled": the CPU of the --settle seconds after that, the processes the
    agent holds (stackrelay_agent_cache_entries{cache="processes"}), the
    /proc/PID/maps files it read and the tables it built by then: what the
    idle processes cost.
Prints a Markdown table of medians. --reference BUILD runs an earlier build's
agent too, alternating.

Needs bpftool. Usage (root): bench/agent-overhead/startup.py --build build [--procs 300] [--rounds 3]
              [--settle 10] [--reference BUILD]
"""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "tests", "integration"))
from procstats import proc_cpu_ns  # noqa: E402
from steady import COUNTERS, free_port, host_forks, start_gateway  # noqa: E402
from procstats import fdinfo  # noqa: E402
import metricslib  # noqa: E402

PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


def spawn_idle(n):
    kinds = (["sleep", "3600"], [PYTHON, "-c", "import time; time.sleep(3600)"], ["sh", "-c", "read x"])
    procs = []
    for i in range(n):
        procs.append(subprocess.Popen(kinds[i % 3], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL))
    return procs


def counters_map(pid):
    """The ID of the agent's `counters` BPF map, or None."""
    for mid in {int(kv["map_id"]) for kv in fdinfo(pid).values() if "map_id" in kv}:
        out = subprocess.run(["bpftool", "--json", "map", "show", "id", str(mid)], capture_output=True, text=True)
        if json.loads(out.stdout or "{}").get("name") == "counters":
            return mid
    return None


def counter(mid, name):
    """One BPF counter, summed over CPUs."""
    key = COUNTERS.index(name).to_bytes(4, "little")
    out = subprocess.run(["bpftool", "--json", "map", "lookup", "id", str(mid), "key"] +
                         ["0x%02x" % b for b in key], capture_output=True, text=True)
    e = json.loads(out.stdout or "{}")
    if e.get("formatted"):
        return sum(v["value"] for v in e["formatted"]["values"])
    return sum(int.from_bytes(bytes(int(b, 16) for b in v["value"]), "little") for v in e.get("values", []))


def one(args, build, tmp, endpoint):
    port = free_port()
    cfg = os.path.join(tmp, "agent.yaml")
    with open(cfg, "w") as f:
        f.write("gateway:\n  endpoint: %s\ntelemetry:\n  metrics:\n    address: 127.0.0.1:%d\n" % (endpoint, port))
    env = dict(os.environ, GNUTLS_NO_IMPLICIT_INIT="1")
    ready = threading.Event()
    forks0 = host_forks()
    t0 = time.monotonic()
    p = subprocess.Popen([os.path.join(build, "agent", "stackrelay-agent"), "--config", cfg, "--log-level", "info"],
                         stderr=subprocess.PIPE, text=True, env=env)
    res = {}

    def drain():
        for line in p.stderr:
            if "msg=profiling " in line and not ready.is_set():
                res["ready_s"], res["ready_cpu"] = time.monotonic() - t0, proc_cpu_ns(p.pid) / 1e9
                ready.set()
    threading.Thread(target=drain, daemon=True).start()
    try:
        if not ready.wait(60):
            raise SystemExit("agent did not start")
        mid = counters_map(p.pid)
        if mid is None:
            raise SystemExit("the agent's counters map was not found")
        while time.monotonic() - t0 < 60:
            if counter(mid, "PROFILE_CNT_UNWIND_END_COMPLETE"):
                res["first_s"], res["first_cpu"] = time.monotonic() - t0, proc_cpu_ns(p.pid) / 1e9
                break
            time.sleep(args.poll)
        else:
            raise SystemExit("no complete stack within 60 s")
        time.sleep(args.settle)
        res["settle_cpu"] = proc_cpu_ns(p.pid) / 1e9 - res["first_cpu"]
        text = metricslib.scrape(port)
        m = metricslib.parse(text)
        res["processes"] = m.get('stackrelay_agent_cache_entries{cache="processes"}', 0)
        res["maps_reads"] = m.get("stackrelay_agent_maps_reads_total", 0)
        res["tables"] = m.get("stackrelay_agent_unwind_tables_built_total", 0)
        res["forks"] = (host_forks() - forks0) / (time.monotonic() - t0)
    finally:
        p.send_signal(signal.SIGINT)
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--reference", metavar="BUILD", help="also run this build's agent, alternating")
    ap.add_argument("--procs", type=int, default=300, help="idle processes running before the agent starts")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--settle", type=float, default=10, help="seconds measured after the first complete stack")
    ap.add_argument("--poll", type=float, default=0.02, help="seconds between reads of the BPF counter")
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("run as root (BPF)")
    tmp = tempfile.mkdtemp(prefix="sr-startup-")
    idle = spawn_idle(args.procs)
    busy = subprocess.Popen([PYTHON, "-c", "while True: pass"])
    gw = sink = None
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    builds = [args.build] + ([args.reference] if args.reference else [])
    res = {b: [] for b in builds}
    try:
        gw, sink, endpoint = start_gateway(args, tmp)
        time.sleep(2)
        for rnd in range(args.rounds):
            for b in (builds if rnd % 2 == 0 else builds[::-1]):
                r = one(args, b, tmp, endpoint)
                res[b].append(r)
                print("round %d %s: ready %.3f s (%.3f s CPU), first complete stack %.3f s (%.3f s CPU), "
                      "%.3f s CPU in the %.0f s after; %d processes held, %d maps reads, %d tables; "
                      "host %.1f processes/s" % (rnd + 1, b, r["ready_s"], r["ready_cpu"], r["first_s"],
                                                 r["first_cpu"], r["settle_cpu"], args.settle, r["processes"],
                                                 r["maps_reads"], r["tables"], r["forks"]), file=sys.stderr)
                time.sleep(1)
    finally:
        for p in idle:
            p.kill()
        busy.kill()
        for p in (gw, sink):
            if p:
                p.kill()
        for p in idle:
            p.wait()
        shutil.rmtree(tmp, ignore_errors=True)

    def med(b, k):
        return statistics.median(r[k] for r in res[b])
    print("%s; %d idle processes (sleep, python3, sh) and one busy python3 before the agent starts; %d rounds, "
          "medians; kernel %s; BPF counter read every %.0f ms" % (started, args.procs, args.rounds,
                                                                os.uname().release, 1e3 * args.poll))
    print()
    print("| build | ready s | ready CPU s | first complete stack s | its CPU s | CPU s in the %.0f s after "
          "| processes held | maps reads | tables built |" % args.settle)
    print("|---|---|---|---|---|---|---|---|---|")
    for b in builds:
        print("| %s | %.3f | %.3f | %.3f | %.3f | %.3f | %.0f | %.0f | %.0f |" % (
            b, med(b, "ready_s"), med(b, "ready_cpu"), med(b, "first_s"), med(b, "first_cpu"),
            med(b, "settle_cpu"), med(b, "processes"), med(b, "maps_reads"), med(b, "tables")))


if __name__ == "__main__":
    main()
