#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""bench/agent-overhead: what continuous profiling costs a CPU-bound workload.

Runs a fixed amount of CPU-bound work (cpuwork: one worker per CPU, a
24-deep call chain) with nothing attached, with stackrelay-agent, and with
`perf record -a -g` at the same frequencies, interleaved round by round so
drift hits every configuration alike, and reports the median wall time of
each, the slowdown against the unprofiled median, the workers' CPU seconds
(robust when other work shares the machine), and the profiler's own CPU
seconds while the workload ran and over its whole life (start-up and exit
work included: perf writes and post-processes its file at exit), and its peak
RSS (from wait4). With --bpf-stats it also reads the
kernel's run-time statistics of the agent's BPF program (ns per sample).

Usage (root, from the source tree, after building):
  bench/agent-overhead/run.py --build build [--rounds 5] [--work 1500] [--freqs 19,97]
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


def run_work(cpuwork, workers, work):
    """(wall seconds, workers' CPU seconds)"""
    out = subprocess.run([cpuwork, str(workers), str(work)], capture_output=True, text=True, check=True).stdout
    wall, cpu = out.split()
    return float(wall), float(cpu)


def proc_cpu(pid):
    """utime + stime of a running process, seconds."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def during(p, fn):
    """Runs fn while p runs; returns (fn's result, p's CPU seconds meanwhile)."""
    before = proc_cpu(p.pid)
    res = fn()
    return res, proc_cpu(p.pid) - before


def wait_rusage(p):
    """(CPU seconds over the whole life, incl. start-up and exit work; peak RSS MiB)"""
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024.0


def with_agent(agent, hz, tmp, fn):
    p = subprocess.Popen([agent, "--frequency", str(hz), "--duration", "3600", "--output",
                          os.path.join(tmp, "agent.pb"), "--log-level", "info"],
                         stderr=subprocess.PIPE, text=True)
    ready = threading.Event()

    def drain():
        for line in p.stderr:
            if "msg=profiling " in line:
                ready.set()
    t = threading.Thread(target=drain, daemon=True)
    t.start()
    if not ready.wait(30):
        p.kill()
        raise SystemExit("agent did not start")
    secs, cpu = during(p, fn)
    p.send_signal(signal.SIGINT)
    total, rss = wait_rusage(p)
    return secs, (cpu, total), rss


def with_perf(hz, tmp, fn):
    data = os.path.join(tmp, "perf.data")
    p = subprocess.Popen(["perf", "record", "-a", "-g", "-F", str(hz), "-o", data, "-q"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # perf prints nothing when ready; give it the time it takes to set up
    secs, cpu = during(p, fn)
    p.send_signal(signal.SIGINT)
    total, rss = wait_rusage(p)
    return secs, (cpu, total), rss


def bpf_prog_stats():
    try:
        out = subprocess.run(["bpftool", "prog", "show", "-j"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    for prog in json.loads(out):
        if prog.get("name") == "do_sample":
            return prog.get("run_time_ns", 0), prog.get("run_cnt", 0)
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--work", type=int, default=1500, help="iterations (millions of inner steps) per worker")
    ap.add_argument("--freqs", default="19,97")
    ap.add_argument("--bpf-stats", action="store_true", help="enable kernel.bpf_stats_enabled during agent runs")
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("run as root (BPF, system-wide perf)")
    agent = os.path.join(args.build, "agent", "stackrelay-agent")
    cpuwork = os.path.join(args.build, "bench", "agent-overhead", "cpuwork")
    for f in (agent, cpuwork):
        if not os.access(f, os.X_OK):
            raise SystemExit("not built: " + f)
    have_perf = shutil.which("perf") is not None
    workers = os.cpu_count()
    freqs = [int(x) for x in args.freqs.split(",")]
    tmp = tempfile.mkdtemp(prefix="sr-bench-")
    load_before = open("/proc/loadavg").read().split()[0]
    configs = [("none", 0)] + [(k, hz) for hz in freqs for k in (["agent", "perf"] if have_perf else ["agent"])]
    results = {c: {"secs": [], "wcpu": [], "cpu": [], "total": [], "rss": []} for c in configs}
    bpf = {}
    stats_path = "/proc/sys/kernel/bpf_stats_enabled"
    old_stats = open(stats_path).read().strip() if args.bpf_stats else None
    try:
        fn = lambda: run_work(cpuwork, workers, args.work)  # noqa: E731
        run_work(cpuwork, workers, max(1, args.work // 10))  # warm up
        for rnd in range(args.rounds):
            for kind, hz in configs:
                if kind == "none":
                    secs, cpu, rss = fn(), (0.0, 0.0), 0.0
                elif kind == "agent":
                    if args.bpf_stats:
                        open(stats_path, "w").write("1")
                    before = bpf_prog_stats()
                    st = {}

                    def measured():
                        s = fn()
                        st["v"] = bpf_prog_stats()
                        return s
                    secs, cpu, rss = with_agent(agent, hz, tmp, measured)
                    if args.bpf_stats and st.get("v"):
                        ns, cnt = st["v"]
                        bpf.setdefault(hz, []).append((ns, cnt))
                    if args.bpf_stats:
                        open(stats_path, "w").write("0")
                    del before
                else:
                    secs, cpu, rss = with_perf(hz, tmp, fn)
                r = results[(kind, hz)]
                r["secs"].append(secs[0])
                r["wcpu"].append(secs[1])
                r["cpu"].append(cpu[0])
                r["total"].append(cpu[1])
                r["rss"].append(rss)
                print("round %d %-5s %4s Hz: %.3f s wall, %.3f s workload CPU (profiler %.2f CPU s during, "
                      "%.2f in all, %.1f MiB)" % (rnd + 1, kind, hz or "-", secs[0], secs[1], cpu[0], cpu[1], rss),
                      file=sys.stderr)
    finally:
        if old_stats is not None:
            open(stats_path, "w").write(old_stats)
        shutil.rmtree(tmp, ignore_errors=True)

    base = statistics.median(results[("none", 0)]["secs"])
    basecpu = statistics.median(results[("none", 0)]["wcpu"])
    print("cpuwork: %d workers x %d, %d rounds, medians; kernel %s; load average before: %s" %
          (workers, args.work, args.rounds, os.uname().release, load_before))
    print()
    print("| profiler | Hz | wall s | wall slowdown | workload CPU s | CPU slowdown | profiler CPU s during "
          "| profiler CPU / workload CPU | profiler CPU s in all | profiler peak RSS MiB |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for kind, hz in configs:
        r = results[(kind, hz)]
        med = statistics.median(r["secs"])
        medcpu = statistics.median(r["wcpu"])
        if kind == "none":
            print("| none | - | %.3f | - | %.3f | - | - | - | - | - |" % (med, medcpu))
        else:
            pcpu = statistics.median(r["cpu"])
            print("| %s | %d | %.3f | %+.2f%% | %.3f | %+.2f%% | %.3f | %.2f%% | %.2f | %.1f |" %
                  ("stackrelay-agent" if kind == "agent" else "perf record -a -g", hz, med,
                   100.0 * (med - base) / base, medcpu, 100.0 * (medcpu - basecpu) / basecpu, pcpu,
                   100.0 * pcpu / medcpu, statistics.median(r["total"]), max(r["rss"])))
    for hz, vals in sorted(bpf.items()):
        ns = sum(v[0] for v in vals)
        cnt = sum(v[1] for v in vals)
        if cnt:
            print("\nBPF do_sample at %d Hz: %.0f ns per sample over %d samples (kernel.bpf_stats_enabled)" %
                  (hz, ns / cnt, cnt))


if __name__ == "__main__":
    main()
