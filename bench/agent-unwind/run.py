#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""bench/agent-unwind: what table unwinding costs, measured side by side.

Four parts (README: "Table unwinding"), each printed as a table:

cost    BPF time per sample (kernel.bpf_stats_enabled, run_time_ns / run_cnt
        of the agent's own programs, found through its fdinfo so other agents
        on the host do not count) with profiling.unwinding auto (tables) and
        fp, interleaved round by round, on fpchain (frame pointers: both
        unwinders reach main, the fair comparison), on qsortdeep (no frame
        pointers: the fp figure is cheaper because it stops in libc) and on
        Node.js (tests/workloads/v8-split.js, no flags: JIT frames and V8's
        builtins crossed by frame pointers, node's C++ by its table) and on
        Java (tests/workloads/JavaHot.java on the host's JDK, no flags:
        interpreted, C1 and C2 frames stepped by the HotSpot walker).
cpu     The agent's own CPU (user + system) plus its BPF time at 19 Hz while
        two qsortdeep keep both CPUs busy, against `perf record --call-graph
        dwarf -a -F 19` over the same workload; perf's unwinding afterwards
        (`perf script`, `perf report`) is timed separately.
tables  Rows, kernel memory per row (the map's memlock from its fdinfo) and
        build time cold (page cache dropped) and warm for libc, libstdc++,
        libpython3.11 and libLLVM-14/-15, with table-bench.
host    200 distinct executables from /usr/bin plus the libraries each needs
        (ldd): their tables' memory as the agent accounts it and as the
        kernel charges it, plus unwind_procs for 200 processes; then for
        real: 200 mapspin processes (each maps one executable and its
        libraries) in their own cgroup under the agent, and the kernel's
        memlock figures of the agent's sr_unwind_rows maps and unwind_procs.

Usage (root, from the source tree, after building):
  bench/agent-unwind/run.py --build build [--parts cost,cpu,tables,host]
      [--rounds 3] [--seconds 20] [--cpu-seconds 30] [--hosts 200]
      [--workloads fpchain,qsortdeep,node,java] [--filter-pids]
"""
import argparse
import json
import os
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from procstats import bpf_progs, fdinfo, proc_cpu_ns  # noqa: E402


STATS = "/proc/sys/kernel/bpf_stats_enabled"
# Seconds a cost run waits after starting the workload before measuring (and stops before its end).
WARM = 2
# Seconds both profilers run before the cpu part's workload starts.
SETTLE = 3
# agent/unwinder.c's TABLE_MAP_OVERHEAD: what the agent counts per table against unwind_table_memory.
TABLE_MAP_OVERHEAD = 4096
# sizeof(struct unwind_proc) in bpf/unwind.h: 24 + UNWIND_MAX_MAPPINGS (128) * 32.
UNWIND_PROC_BYTES = 24 + 128 * 32
LIBS = [
    "/usr/lib/x86_64-linux-gnu/libc.so.6",
    "/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
    "/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0",
    "/usr/lib/x86_64-linux-gnu/libLLVM-14.so.1",
    "/usr/lib/x86_64-linux-gnu/libLLVM-15.so.1",
]


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def loadavg():
    return open("/proc/loadavg").read().split()[0]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def proc_cpu(pid):
    """utime + stime of a process (all its threads), seconds, from /proc/PID/stat."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_rusage(p):
    """CPU seconds over the whole life of p (start-up and exit work included)."""
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return ru.ru_utime + ru.ru_stime


def bpftool(*args):
    return json.loads(subprocess.run(["bpftool", "-j"] + list(args), capture_output=True, text=True,
                                     check=True).stdout or "null")


def metrics(port):
    text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10).read().decode()
    res = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            k, _, v = line.rpartition(" ")
            res[k] = float(v)
    return res


class Agent:
    """stackrelay-agent with a config file and a metrics port; ready once it logs msg=profiling."""

    def __init__(self, build, tmp, hz, unwinding, extra="", pids=()):
        self.port = free_port()
        cfg = os.path.join(tmp, "agent-%s.yaml" % unwinding)
        with open(cfg, "w") as f:
            f.write("profiling:\n  frequency: %d\n  unwinding: %s\n%s"
                    "telemetry:\n  metrics:\n    address: 127.0.0.1:%d\n" % (hz, unwinding, extra, self.port))
        self.p = subprocess.Popen([os.path.join(build, "agent", "stackrelay-agent"), "--config", cfg,
                                   "--duration", "3600", "--output", os.path.join(tmp, "agent.pb"),
                                   "--log-level", "info"] + [a for p in pids for a in ("--pid", str(p))],
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

    def stop(self):
        self.p.send_signal(signal.SIGINT)
        return wait_rusage(self.p)


def run_workers(cmd, n):
    """Starts n copies of a workload that prints its pid first; returns the Popens once all have.
    Their stdin is a pipe: go() releases the ones that wait for a line (tests/workloads/v8-split.js)."""
    ps = [subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) for _ in range(n)]
    for p in ps:
        p.pid_printed = int(p.stdout.readline())
    return ps


def go(ps):
    for p in ps:
        p.stdin.write("go\n")
        p.stdin.flush()


def wait_all(ps):
    for p in ps:
        p.communicate()
        if p.returncode:
            raise SystemExit("workload failed: %s" % p.args)


# ---------------------------------------------------------------- cost


def calibrate_filter(args, tmp):
    """BPF ns of a perf event that the pid filter ends: an agent whose only pid is this (sleeping) script."""
    a = Agent(args.build, tmp, args.cost_hz, "auto", pids=[os.getpid()])
    time.sleep(WARM)
    p0 = bpf_progs(a.p.pid)
    time.sleep(args.seconds)
    p1 = bpf_progs(a.p.pid)
    a.stop()
    ns, cnt = (p1["do_sample"][0] - p0["do_sample"][0], p1["do_sample"][1] - p0["do_sample"][1])
    log("cost: a filtered event costs %.0f ns (%d events, load %s)" % (ns / cnt if cnt else 0, cnt, loadavg()))
    return ns / cnt if cnt else 0.0


def part_cost(args, tmp):
    """BPF ns per sample, tables vs frame pointers, on fpchain, qsortdeep and Node.js (v8-split.js)."""
    src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    node = shutil.which("node")
    workloads = [
        ("fpchain (frame pointers, depth %d)" % args.depth,
         lambda secs: [os.path.join(args.build, "bench", "agent-unwind", "fpchain"), str(secs), str(args.depth)]),
        ("qsortdeep (no frame pointers)",
         lambda secs: [os.path.join(args.build, "tests", "workloads", "qsortdeep"), str(secs)]),
    ]
    if node:
        # Its CPU seconds: warm-up until released, then the budget (it prints its pid first).
        workloads.append(("node v8-split.js (JIT code, builtins without CFI)",
                          lambda secs: [node, os.path.join(src, "tests", "workloads", "v8-split.js"), str(secs)]))
    java, javac = shutil.which("java"), shutil.which("javac")
    if java and javac:
        classes = os.path.join(tmp, "java-classes")
        sys.path.insert(0, os.path.join(src, "tests", "workloads"))
        import javasrc  # its shared method bodies written out
        hot = javasrc.expand(os.path.join(src, "tests", "workloads", "JavaHot.java"), os.path.join(tmp, "java-src"))
        subprocess.run([javac, "-d", classes, hot], check=True)
        workloads.append(("java JavaHot (HotSpot: interpreter, C1, C2, inlining)",
                          lambda secs: [java, "-cp", classes, "JavaHot", str(secs)]))
    if args.workloads:
        workloads = [w for w in workloads if any(k in w[0] for k in args.workloads.split(","))]
    res = {}
    accounting = None
    for rnd in range(args.rounds):
        filter_ns = calibrate_filter(args, tmp) if args.filter_pids else 0.0
        for wname, cmd in workloads:
            for mode in ("auto", "fp"):
                # --filter-pids: the agent samples the workers only (a busy host's other processes
                # would be in the figures otherwise), so it starts after them, with --pid.
                ws = run_workers(cmd(args.seconds + 2 * WARM), os.cpu_count()) if args.filter_pids else None
                a = Agent(args.build, tmp, args.cost_hz, mode, pids=[p.pid_printed for p in ws or []])
                # Measured from WARM s in, once the agent has the workers' tables (before, their
                # samples take the frame-pointer path), until WARM s before they end.
                if ws is None:
                    ws = run_workers(cmd(args.seconds + 2 * WARM), os.cpu_count())
                go(ws)
                time.sleep(WARM)
                p0, m0 = bpf_progs(a.p.pid), metrics(a.port)
                time.sleep(args.seconds)
                p1, m1 = bpf_progs(a.p.pid), metrics(a.port)
                wait_all(ws)
                a.stop()
                d = {k: (p1[k][0] - p0.get(k, (0, 0))[0], p1[k][1] - p0.get(k, (0, 0))[1]) for k in p1}
                ns = d["do_sample"][0] + d.get("unwind_user", (0, 0))[0]
                cnt = d["do_sample"][1]
                if args.filter_pids:
                    # Per sample of the workers: the other processes' events end at the pid filter,
                    # whose cost (calibrated this round) is taken out of ns.
                    filtered = m1.get('stackrelay_agent_samples_filtered_total{filter="pid"}', 0) - \
                        m0.get('stackrelay_agent_samples_filtered_total{filter="pid"}', 0)
                    ns -= filtered * filter_ns
                    cnt = m1.get("stackrelay_agent_samples_total", 0) - m0.get("stackrelay_agent_samples_total", 0)
                if mode == "auto":
                    accounting = d.get("unwind_user")

                def dm(k):
                    return m1.get(k, 0) - m0.get(k, 0)
                tstacks = dm('stackrelay_agent_unwind_stacks_total{method="table"}')
                fstacks = dm('stackrelay_agent_unwind_stacks_total{method="fp"}')
                # Java frames the HotSpot walker stepped are frames of the stack too.
                frames = dm('stackrelay_agent_unwind_frames_total{method="table"}') + \
                    dm('stackrelay_agent_unwind_frames_total{method="fp"}') + \
                    dm('stackrelay_agent_java_frames_total{result="recorded"}')
                complete = dm('stackrelay_agent_unwind_stops_total{reason="complete"}')
                r = res.setdefault((wname, mode), {"ns": [], "cnt": 0, "tstacks": 0, "fstacks": 0, "frames": 0,
                                                   "complete": 0})
                r["ns"].append(ns / cnt if cnt else 0)
                r["cnt"] += cnt
                r["tstacks"] += tstacks
                r["fstacks"] += fstacks
                r["frames"] += frames
                r["complete"] += complete
                log("cost round %d %s %s: %.0f ns/sample over %d samples (load %s)" %
                    (rnd + 1, wname, mode, ns / cnt if cnt else 0, cnt, loadavg()))
    print("\n### BPF cost per sample (%d Hz, %d workers x %d s, %d rounds; median of rounds, range)\n" %
          (args.cost_hz, os.cpu_count(), args.seconds, args.rounds))
    print("| workload | unwinding | ns per sample | range | samples | table-unwound stacks | frames per "
          "table stack | complete | ratio table / fp |")
    print("|---|---|---|---|---|---|---|---|---|")
    for wname, _ in workloads:
        fp = statistics.median(res[(wname, "fp")]["ns"])
        for mode in ("auto", "fp"):
            r = res[(wname, mode)]
            med = statistics.median(r["ns"])
            stacks = r["tstacks"] + r["fstacks"]
            print("| %s | %s | %.0f | %.0f–%.0f | %d | %s | %s | %s | %s |" % (
                wname, "table" if mode == "auto" else "fp", med, min(r["ns"]), max(r["ns"]), r["cnt"],
                "%.1f%%" % (100.0 * r["tstacks"] / stacks) if mode == "auto" and stacks else "-",
                "%.1f" % (r["frames"] / r["tstacks"]) if mode == "auto" and r["tstacks"] else "-",
                "%.1f%%" % (100.0 * r["complete"] / r["tstacks"]) if mode == "auto" and r["tstacks"] else "-",
                "**%.2f×**" % (med / fp) if mode == "auto" and fp else "-"))
    print("\nTail calls: unwind_user's own counters over the last table run: run_time_ns=%s run_cnt=%s "
          "(0 means the kernel accounts tail-called runs to the entry program, do_sample)." %
          (accounting or ("-", "-")))


# ---------------------------------------------------------------- cpu


def timed(cmd, **kw):
    """(CPU seconds of cmd and its children, wall seconds)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    subprocess.run(cmd, check=True, **kw)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime), wall


def part_cpu(args, tmp):
    """The agent's own CPU + BPF at 19 Hz vs perf record --call-graph dwarf, same workload and duration."""
    qsd = [os.path.join(args.build, "tests", "workloads", "qsortdeep"), str(args.cpu_seconds)]
    rows = {"agent": [], "perf": []}
    for rnd in range(args.rounds):
        # The agent: CPU while the workload ran (threads' schedstat, and /proc/PID/stat), BPF time, whole life.
        a = Agent(args.build, tmp, 19, "auto")
        # Both profilers get the same settling time: the agent's first seconds build tables for
        # whatever already runs on the host, perf's write its initial records.
        time.sleep(SETTLE)
        c0, s0, p0 = proc_cpu_ns(a.p.pid), proc_cpu(a.p.pid), bpf_progs(a.p.pid)
        wait_all(run_workers(qsd, os.cpu_count()))
        c1, s1, p1 = proc_cpu_ns(a.p.pid), proc_cpu(a.p.pid), bpf_progs(a.p.pid)
        m = metrics(a.port)
        total = a.stop()
        per_prog = {k: (p1[k][0] - p0.get(k, (0, 0))[0]) / 1e9 for k in p1}
        bpf = sum(per_prog.values())
        samples = p1["do_sample"][1] - p0.get("do_sample", (0, 0))[1]
        rows["agent"].append({"during": (c1 - c0) / 1e9, "stat": s1 - s0, "bpf": bpf, "total": total,
                              "samples": samples, "per_prog": per_prog,
                              "tables": m.get("stackrelay_agent_unwind_tables_built_total", 0),
                              "build": m.get("stackrelay_agent_unwind_build_seconds_total", 0)})
        log("cpu round %d agent: %.3f s during (stat %.2f), BPF %.3f s, %.3f s in all, %d samples (load %s)" %
            (rnd + 1, (c1 - c0) / 1e9, s1 - s0, bpf, total, samples, loadavg()))
        # perf: the same, then its unwinding afterwards.
        data = os.path.join(tmp, "perf.data")
        p = subprocess.Popen(["perf", "record", "--call-graph", "dwarf", "-a", "-F", "19", "-o", data, "-q"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(SETTLE)  # perf prints nothing when ready
        c0, s0 = proc_cpu_ns(p.pid), proc_cpu(p.pid)
        wait_all(run_workers(qsd, os.cpu_count()))
        c1, s1 = proc_cpu_ns(p.pid), proc_cpu(p.pid)
        p.send_signal(signal.SIGINT)
        total = wait_rusage(p)
        size = os.path.getsize(data)
        script = timed(["perf", "script", "-i", data], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # Its samples (one line each without call chains), for the per-sample figures.
        psamples = subprocess.run(["perf", "script", "-i", data, "-G", "-F", "pid"], capture_output=True,
                                  text=True).stdout.count("\n")
        report = timed(["perf", "report", "-i", data, "--stdio", "--no-children"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        rows["perf"].append({"during": (c1 - c0) / 1e9, "stat": s1 - s0, "total": total, "size": size,
                             "script": script, "report": report, "samples": psamples})
        log("cpu round %d perf: %.3f s during (stat %.2f), %.3f s in all, %.1f MB; perf script %.2f s CPU, "
            "perf report %.2f s CPU (load %s)" % (rnd + 1, (c1 - c0) / 1e9, s1 - s0, total, size / 1e6,
                                                  script[0], report[0], loadavg()))
        os.unlink(data)

    def med(k, key):
        return statistics.median(r[key] for r in rows[k])

    def rng(k, key):
        return "%.3f–%.3f" % (min(r[key] for r in rows[k]), max(r[key] for r in rows[k]))
    a_during = med("agent", "during") + med("agent", "bpf")
    a_total = med("agent", "total") + med("agent", "bpf")
    print("\n### Profiler CPU at 19 Hz, %d × qsortdeep for %d s (%d rounds, medians, range)\n" %
          (os.cpu_count(), args.cpu_seconds, args.rounds))
    print("| profiler | CPU s while the workload ran | /proc/PID/stat | BPF s | CPU + BPF s while it ran "
          "| CPU s whole life (+ BPF) |")
    print("|---|---|---|---|---|---|")
    print("| stackrelay-agent (tables) | %.3f (%s) | %.2f | %.3f (%s) | %.3f | %.3f |" % (
        med("agent", "during"), rng("agent", "during"), med("agent", "stat"), med("agent", "bpf"),
        rng("agent", "bpf"), a_during, a_total))
    print("| perf record --call-graph dwarf -a -F 19 | %.3f (%s) | %.2f | - | %.3f | %.3f |" % (
        med("perf", "during"), rng("perf", "during"), med("perf", "stat"), med("perf", "during"),
        med("perf", "total")))
    print("\nRatio perf / agent: **%.1f×** while the workload ran, **%.1f×** over the whole life "
          "(the agent's includes loading BPF and building %.2f s of tables; its samples: %d)." % (
              med("perf", "during") / a_during if a_during else float("inf"),
              med("perf", "total") / a_total if a_total else float("inf"), med("agent", "build"),
              med("agent", "samples")))
    progs = sorted({k for r in rows["agent"] for k in r["per_prog"]})
    print("BPF seconds by program (medians): %s; do_sample per sample: %.1f µs. Tables built per agent "
          "run (the host's other processes too): %d." % (
              ", ".join("%s %.3f" % (k, statistics.median(r["per_prog"].get(k, 0) for r in rows["agent"]))
                        for k in progs),
              1e6 * statistics.median(r["per_prog"].get("do_sample", 0) / r["samples"] for r in rows["agent"]
                                      if r["samples"]), med("agent", "tables")))
    script_cpu = statistics.median(r["script"][0] for r in rows["perf"])
    print("Like for like (both ending with unwound stacks): perf record whole life + `perf script` = %.3f s "
          "vs the agent's whole life + BPF = %.3f s: **%.1f×**." % (
              med("perf", "total") + script_cpu, a_total, (med("perf", "total") + script_cpu) / a_total))
    # Steady state, per sample: what each costs for one unwound stack, start-up and exit left out.
    # The agent: CPU and BPF while the workload ran, over the samples it took then. perf: its CPU
    # while the workload ran, over that window's share of the file's samples (perf records for
    # SETTLE seconds before it), plus `perf script`'s unwinding of every sample in the file.
    a_ps = statistics.median((r["during"] + r["bpf"]) / r["samples"] for r in rows["agent"] if r["samples"])
    p_ps = statistics.median(r["script"][0] / r["samples"] for r in rows["perf"] if r["samples"]) + \
        statistics.median(r["during"] / r["samples"] for r in rows["perf"] if r["samples"]) * \
        (args.cpu_seconds + SETTLE) / args.cpu_seconds
    print("Per unwound stack in steady state: the agent %.1f µs (CPU + BPF while the workload ran / its %d "
          "samples), perf record + `perf script` %.1f µs (%d samples in the file): **%.1f×**. perf's "
          "in-kernel 8 KiB stack copy per sample is charged to the workload and not in its figure." % (
              1e6 * a_ps, med("agent", "samples"), 1e6 * p_ps, med("perf", "samples"), p_ps / a_ps))
    print("perf afterwards (not included above): perf.data %.1f MB; `perf script` %.2f s CPU (%.2f s wall), "
          "`perf report --stdio --no-children` %.2f s CPU (%.2f s wall)." % (
              med("perf", "size") / 1e6, statistics.median(r["script"][0] for r in rows["perf"]),
              statistics.median(r["script"][1] for r in rows["perf"]),
              statistics.median(r["report"][0] for r in rows["perf"]),
              statistics.median(r["report"][1] for r in rows["perf"])))


# ---------------------------------------------------------------- tables


def drop_caches():
    subprocess.run(["sync"], check=False)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3")


def table_bench(args, files, repeat, load=True):
    cmd = [os.path.join(args.build, "bench", "agent-unwind", "table-bench"), "--repeat", str(repeat)]
    if load:
        cmd.append("--load")
    out = subprocess.run(cmd + files, capture_output=True, text=True, check=True).stdout
    return [json.loads(line) for line in out.splitlines()]


def part_tables(args, tmp):
    print("\n### Tables (table-bench --load; cold: page cache dropped just before; warm: best of %d)\n" %
          args.repeat)
    print("| file | MB | FDEs | rows | kernel memlock bytes | bytes/row (kernel) | bytes/row (agent's "
          "account) | build ms cold | build ms warm | load into BPF ms |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for f in LIBS:
        if not os.path.exists(f):
            continue
        cold, warm = [], []
        for _ in range(args.rounds):
            drop_caches()
            r = table_bench(args, [f], args.repeat)[0]
            cold.append(r["cold_ms"])
            warm.append(r["warm_ms"])
        print("| %s | %.1f | %d | %d | %d | %.3f | %.3f | %.1f (%.1f–%.1f) | %.1f | %.1f |" % (
            os.path.basename(f), r["file_bytes"] / 1e6, r["fdes"], r["rows"], r["memlock"],
            r["memlock"] / r["rows"], (r["rows"] * 8 + TABLE_MAP_OVERHEAD) / r["rows"],
            statistics.median(cold), min(cold), max(cold), min(warm), r["load_ms"]))


# ---------------------------------------------------------------- host


def is_elf(path):
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def needed_libs(exe):
    """The libraries the dynamic loader maps for exe (ldd), real paths."""
    try:
        out = subprocess.run(["ldd", exe], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    libs = []
    for line in out.splitlines():
        m = re.search(r"(?:=>\s*)?(/\S+)\s+\(0x", line)
        if m and os.path.exists(m.group(1)):
            libs.append(os.path.realpath(m.group(1)))
    return libs


def pick_programs(args):
    """The first N executables of /usr/bin (sorted, distinct inodes) that are dynamic ELF with a table."""
    seen, cands = set(), []
    for name in sorted(os.listdir("/usr/bin")):
        path = os.path.realpath(os.path.join("/usr/bin", name))
        try:
            st = os.stat(path)
        except OSError:
            continue
        if (st.st_dev, st.st_ino) in seen or not os.path.isfile(path) or not is_elf(path):
            continue
        seen.add((st.st_dev, st.st_ino))
        cands.append(path)
    ok = {r["path"] for r in table_bench(args, cands, 0, load=False) if "rows" in r}
    progs = []
    for path in cands:
        if path not in ok:
            continue
        libs = needed_libs(path)
        if not libs:  # static, or ldd refused it: a program whose libraries we cannot name
            continue
        progs.append((path, libs))
        if len(progs) == args.hosts:
            break
    return progs


def part_host(args, tmp):
    progs = pick_programs(args)
    files = sorted({p for p, _ in progs} | {lib for _, libs in progs for lib in libs})
    rows = {r["path"]: r for r in table_bench(args, files, 0) if "rows" in r}
    n_rows = sum(r["rows"] for r in rows.values())
    agent_bytes = sum(r["rows"] * 8 + TABLE_MAP_OVERHEAD for r in rows.values())
    kernel_bytes = sum(r["memlock"] for r in rows.values())
    procs_bytes = len(progs) * UNWIND_PROC_BYTES
    biggest = sorted(rows.values(), key=lambda r: -r["rows"])[:3]
    print("\n### Host of %d distinct programs (/usr/bin, sorted, dynamic ELF with .eh_frame) and their "
          "libraries\n" % len(progs))
    print("| | tables | rows | MiB as the agent accounts (rows × 8 + %d per map) | MiB as the kernel charges "
          "(memlock) | bytes/row (kernel) |" % TABLE_MAP_OVERHEAD)
    print("|---|---|---|---|---|---|")
    print("| computed (table-bench --load per file) | %d (%d programs + %d libraries) | %d | %.1f | %.1f | %.3f |" %
          (len(rows), len(progs), len(rows) - len(progs), n_rows, agent_bytes / 2**20, kernel_bytes / 2**20,
           kernel_bytes / n_rows))
    print("\nLargest: %s. unwind_procs for %d processes: %d × %d B = %.2f MiB of values." % (
        ", ".join("%s %d rows" % (os.path.basename(r["path"]), r["rows"]) for r in biggest), len(progs),
        len(progs), UNWIND_PROC_BYTES, procs_bytes / 2**20))

    # For real: each program's mappings in a mapspin process, in a cgroup the agent is limited to.
    cg = None
    for root in ("/sys/fs/cgroup/unified", "/sys/fs/cgroup"):
        if os.path.exists(os.path.join(root, "cgroup.procs")) and \
                os.path.exists(os.path.join(root, "cgroup.controllers")):
            cg = os.path.join(root, "sr-bench-unwind-%d" % os.getpid())
            os.mkdir(cg)
            break
    extra = "  unwind_table_memory: 4GiB\n" + ("  cgroups: [%s]\n" % cg if cg else "")
    a = Agent(args.build, tmp, 99, "auto", extra)
    mapspin = os.path.join(args.build, "bench", "agent-unwind", "mapspin")
    spin, hold = args.spin, 600
    spawned = []
    try:
        for exe, libs in progs:
            spawned.append(subprocess.Popen(
                [mapspin, str(spin), str(hold), exe] + libs, stdout=subprocess.DEVNULL,
                preexec_fn=(lambda: open(os.path.join(cg, "cgroup.procs"), "w").write("0")) if cg else None))
        time.sleep(spin)
        # The agent builds tables as it reads the samples; wait until the count stops moving.
        last, stable = -1, 0
        for _ in range(300):
            m = metrics(a.port)
            n = m.get("stackrelay_agent_unwind_tables_built_total", 0)
            stable = stable + 1 if n == last else 0
            last = n
            if stable >= 5:
                break
            time.sleep(1)
        maps = {}
        for kv in fdinfo(a.p.pid).values():
            if "map_id" in kv:
                maps[int(kv["map_id"])] = kv
        info = {mp["id"]: mp for mp in bpftool("map", "show")}
        outer = [i for i in maps if info.get(i, {}).get("name") == "unwind_tables"]
        procs_map = [i for i in maps if info.get(i, {}).get("name") == "unwind_procs"]
        inner_ids = []
        if outer:
            for e in bpftool("map", "dump", "id", str(outer[0])):
                v = e.get("value")
                inner_ids.append(v if isinstance(v, int) else int.from_bytes(bytes(int(x, 16) for x in v),
                                                                               "little"))
        inner = sum(info[i]["bytes_memlock"] for i in inner_ids if i in info)
        pm = info[procs_map[0]]["bytes_memlock"] if procs_map else 0
        om = info[outer[0]]["bytes_memlock"] if outer else 0
        all_maps = sum(info[i]["bytes_memlock"] for i in maps if i in info)
        print("| measured (agent, %d mapspin processes%s) | %d | %d | %.1f | %.1f (sr_unwind_rows maps) | %.3f |" %
              (len(progs), " in one cgroup" if cg else ", no cgroup filter: other processes' tables count too",
               len(inner_ids), m.get("stackrelay_agent_unwind_table_rows", 0),
               m.get("stackrelay_agent_unwind_table_bytes", 0) / 2**20, inner / 2**20,
               inner / m["stackrelay_agent_unwind_table_rows"] if m.get("stackrelay_agent_unwind_table_rows")
               else 0))
        total = inner + pm + om
        print("\nMeasured kernel memlock: sr_unwind_rows %.1f MiB + unwind_tables (map of maps) %.2f MiB + "
              "unwind_procs %.2f MiB = **%.1f MiB** (target ≤ 64 MiB); the maps the agent holds itself "
              "(ring buffer, unwind_procs, ...; the tables are held by unwind_tables): %.1f MiB. Agent: %d tables built, %d evicted, %.2f s building and loading, "
              "no table: %s." % (
                  inner / 2**20, om / 2**20, pm / 2**20, total / 2**20, all_maps / 2**20,
                  m.get("stackrelay_agent_unwind_tables_built_total", 0),
                  m.get("stackrelay_agent_unwind_tables_evicted_total", 0),
                  m.get("stackrelay_agent_unwind_build_seconds_total", 0),
                  ", ".join("%s %d" % (k.split('"')[1], v) for k, v in m.items()
                            if k.startswith("stackrelay_agent_unwind_no_table_total") and v)))
    finally:
        for p in spawned:
            p.terminate()
        for p in spawned:
            p.wait()
        a.stop()
        if cg:
            os.rmdir(cg)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--parts", default="cost,cpu,tables,host")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=10, help="workload seconds per cost run")
    ap.add_argument("--cost-hz", type=int, default=97)
    ap.add_argument("--depth", type=int, default=16, help="fpchain's chain depth")
    ap.add_argument("--workloads", default="", help="cost part: only workloads whose name holds one of these "
                    "comma-separated words (fpchain, qsortdeep, node, java)")
    ap.add_argument("--filter-pids", action="store_true", help="cost part: the agent samples the workers only")
    ap.add_argument("--cpu-seconds", type=float, default=30, help="workload seconds per cpu run")
    ap.add_argument("--repeat", type=int, default=5, help="warm builds per file")
    ap.add_argument("--hosts", type=int, default=200, help="distinct programs for the host part")
    ap.add_argument("--spin", type=float, default=15, help="seconds each mapspin burns CPU")
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("run as root (BPF, perf, drop_caches)")
    for tool in ("bpftool", "perf", "ldd"):
        if not shutil.which(tool):
            raise SystemExit(tool + " not installed")
    parts = args.parts.split(",")
    tmp = tempfile.mkdtemp(prefix="sr-bench-unwind-")
    old = open(STATS).read().strip()
    print("kernel %s, %d CPUs; load average before: %s" % (os.uname().release, os.cpu_count(),
                                                           " ".join(open("/proc/loadavg").read().split()[:3])))
    try:
        # On for the whole run: the agents' programs are new each run and read as differences.
        open(STATS, "w").write("1")
        if "cost" in parts:
            part_cost(args, tmp)
        if "cpu" in parts:
            part_cpu(args, tmp)
        if "tables" in parts:
            part_tables(args, tmp)
        if "host" in parts:
            part_host(args, tmp)
    finally:
        open(STATS, "w").write(old)
        shutil.rmtree(tmp, ignore_errors=True)
    print("\nload average after: %s" % " ".join(open("/proc/loadavg").read().split()[:3]))


if __name__ == "__main__":
    main()
