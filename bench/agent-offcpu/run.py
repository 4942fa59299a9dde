#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""bench/agent-offcpu: what off-CPU profiling costs a context-switch-heavy workload.

A pipe ping-pong between two processes pinned to one CPU (pingpong: every
round trip is two blocking reads, two context switches) runs with nothing
attached, with stackrelay-agent (off_cpu enabled; CPU sampling at its default
19 Hz as well), and with libbpf-tools' offcputime, at the same minimum block
time, interleaved round by round so drift hits every configuration alike.
Both tools trace every thread on the machine (no pid filter: offcputime takes
one pid only, and the cost that matters is the system-wide one) and skip
kernel threads (offcputime -u). Reports the median ns per round trip of each
and the slowdown against the unprofiled median.

Settings compared (MIN_BLOCK in microseconds, --min-blocks):
  stackrelay  off_cpu: {enabled: true, min_block: MIN_BLOCK us}, the default
              probability 1 and max_events_per_second 500 (per CPU), and also
              max_events_per_second 1000000 (no cap in practice);
  offcputime  -u -m MIN_BLOCK.

Usage (root, from the source tree, after building; needs libbpf-tools):
  bench/agent-offcpu/run.py --build build [--rounds 7] [--trips 200000] [--min-blocks 1,1000]
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
import time


def trip(pingpong, trips, cpu):
    out = subprocess.run([pingpong, str(trips), str(cpu)], capture_output=True, text=True, check=True).stdout
    return float(out.strip())


def wait_for(path, what, proc, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(path) and what in open(path, errors="replace").read():
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.05)
    return False


def with_agent(agent, tmp, min_block_us, cap, fn):
    cfg = os.path.join(tmp, "agent.yaml")
    log = os.path.join(tmp, "agent.log")
    with open(cfg, "w") as f:
        f.write("off_cpu: {enabled: true, min_block: %dus, max_events_per_second: %d}\n" % (min_block_us, cap))
    out = os.path.join(tmp, "agent.pb")
    p = subprocess.Popen([agent, "--config", cfg, "--output", out], stderr=open(log, "w"))
    try:
        if not wait_for(log, "msg=\"off-CPU profiling\"", p):
            raise SystemExit("agent did not start:\n" + open(log).read())
        return fn()
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=120)
        os.unlink(out)


def prog_ids(name):
    r = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True)
    try:
        return {p["id"] for p in json.loads(r.stdout or "[]") if p.get("name") == name}
    except ValueError:
        return set()


def bpf_loaded(name, before, proc, timeout=60):
    """Waits until a BPF program called name that was not in before is loaded; False when proc exits first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        if prog_ids(name) - before:
            return True
        time.sleep(0.1)
    return False


def with_offcputime(tool, tmp, min_block_us, fn):
    out = os.path.join(tmp, "offcputime.out")
    before = prog_ids("sched_switch")
    p = subprocess.Popen([tool, "-u", "-m", str(min_block_us)], stdout=open(out, "w"), stderr=subprocess.STDOUT)
    try:
        # It prints nothing until it stops: wait for its sched_switch program (attached right after loading).
        if not bpf_loaded("sched_switch", before, p):
            raise SystemExit("offcputime did not start:\n" + open(out).read())
        time.sleep(0.5)
        return fn()
    finally:
        p.send_signal(signal.SIGINT)
        p.wait(timeout=120)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--trips", type=int, default=200000)
    ap.add_argument("--cpu", type=int, default=0)
    ap.add_argument("--min-blocks", default="1,1000", help="microseconds, comma-separated")
    a = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("needs root (BPF)")
    tool = shutil.which("offcputime") or "/usr/sbin/offcputime"
    if not os.access(tool, os.X_OK):
        raise SystemExit("offcputime not found: apt-get install libbpf-tools (scripts/install-deps)")
    agent = os.path.join(a.build, "agent", "stackrelay-agent")
    pingpong = os.path.join(a.build, "bench", "agent-offcpu", "pingpong")
    tmp = tempfile.mkdtemp(prefix="sr-offcpu-bench-")
    configs = [("baseline", None)]
    for mb in (int(x) for x in a.min_blocks.split(",")):
        configs += [
            ("stackrelay min_block=%dus cap=500/s/CPU" % mb, lambda fn, mb=mb: with_agent(agent, tmp, mb, 500, fn)),
            ("stackrelay min_block=%dus no cap" % mb, lambda fn, mb=mb: with_agent(agent, tmp, mb, 1000000, fn)),
            ("offcputime -u -m %d" % mb, lambda fn, mb=mb: with_offcputime(tool, tmp, mb, fn)),
        ]
    results = {name: [] for name, _ in configs}
    trip(pingpong, a.trips // 10, a.cpu)  # warm-up
    for r in range(a.rounds):
        for name, wrap in configs:
            fn = lambda: trip(pingpong, a.trips, a.cpu)  # noqa: E731
            results[name].append(fn() if wrap is None else wrap(fn))
        print("# round %d/%d done" % (r + 1, a.rounds), file=sys.stderr)
    base = statistics.median(results["baseline"])
    print("| configuration | ns per round trip (median of %d) | slowdown vs nothing |" % a.rounds)
    print("|---|---|---|")
    for name, _ in configs:
        m = statistics.median(results[name])
        print("| %s | %.0f | %s |" % (name, m, "—" if name == "baseline" else "%+.1f %%" % (100.0 * (m / base - 1))))
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
