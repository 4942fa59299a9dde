#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""bench/agent-overhead/steady.py: what the agent costs a node as deployed.

run.py measures the slowdown of a fixed workload, which at 19 Hz is below
its noise. This one measures the profiler itself over a long window, with
nanosecond clocks. The headline configuration is the deployed one: the whole
host profiled, the default configuration, sending to a real
stackrelay-gateway that the bench starts on loopback (no processors,
exporting to a local sink that answers 200), in the environment packaging/
gives it (GNUTLS_NO_IMPLICIT_INIT=1). CPU-bound spinners keep every
CPU busy (the default --busy is one per CPU: Debian's python3, so the Python
walk is in) while, round by round and side by side, the agent runs at each
frequency of --hz, and `perf record -a -g` at the first. For each, over
--seconds after a warm-up:
  - user + system CPU of every thread of the profiler (/proc/PID/task/*/schedstat),
  - for the agent, the run time and run count of every BPF program it holds
    (its /proc/PID/fdinfo, with kernel.bpf_stats_enabled on during the
    window): the in-context cost that the sampled or hooked task pays.
    do_sample's time includes the unwind_user programs it tail-calls (a
    tail call is not a run of its own), so do_sample's time / runs is the
    cost of a sample. perf's equivalent (its interrupt-time callchain walk)
    has no counter and is not included, which flatters perf;
  - the agent's BPF counters over the window (samples, frames by kind per
    stack), to say what a sample did;
  - wake-ups per second (context switches of the profiler's threads),
  - RSS (smaps_rollup) and, for the agent, RSS by mapping kind and the
    kernel memory of its BPF maps (fdinfo memlock).
Prints a Markdown table of medians per frequency.

Usage (root): bench/agent-overhead/steady.py --build build [--hz 19,97,997] [--seconds 60]
              [--warmup 20] [--rounds 3] [--busy N] [--no-perf] [--reference BUILD] [--output] [--cgroup]
              [--stage-times] [--churn RATE]
--reference BUILD runs an earlier build's agent too, alternating with this
one at each frequency, and prints the ratios (what a change cut).
Each window states the host's processes a second (/proc/stat "processes"):
the threads' CPU follows them.
--churn RATE starts short-lived processes (tests/integration/churnlib.py:
copies of true with new build IDs, python3, xz, sh pipelines) at RATE a
second through the warm-up and the window, and states the threads' CPU per
process started; with --cgroup they run in the spinners' cgroup, so the
host's own processes stay out of the figure.
Diagnostics, not the deployed figure:
--stage-times: the agent's BPF times the stages of each table-unwound CPU
sample (SR_AGENT_DEBUG_STAGE_TIMES=1; the clock reads add their own cost)
and the table says where a sample's time goes at each frequency.
--output: the agent writes --output FILE instead of sending (no gateway).
--cgroup: the spinners get a cgroup v2 of their own and the agent is limited
to it (profiling.cgroups), so that other work on the machine (builds, tests:
new processes and files, which the agent must handle) does not count: the
figure is then the cost of profiling the busy CPUs alone, on any machine.
perf stays system-wide (its own process does almost nothing either way).
"""
import argparse
import glob
import json
import os
import re
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
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "tests", "integration"))
import churnlib  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def counter_names():
    """The names of the agent's BPF counters, in index order (enum profile_counter of bpf/profile.h)."""
    text = open(os.path.join(ROOT, "bpf", "profile.h")).read()
    body = text[text.index("enum profile_counter {"):]
    body = body[:body.index("};")]
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    return [n for n in re.findall(r"\b(PROFILE_CNT_\w+)", body) if n != "PROFILE_CNT__MAX"]


COUNTERS = counter_names()


def bpf_counters(pid):
    """{counter name: sum over CPUs} of the `counters` map the agent holds (bpftool), or {}."""
    ids = {int(kv["map_id"]) for kv in fdinfo(pid).values() if "map_id" in kv}
    for mid in ids:
        try:
            show = json.loads(subprocess.run(["bpftool", "--json", "map", "show", "id", str(mid)],
                                             capture_output=True, text=True, timeout=30).stdout or "{}")
            if show.get("name") != "counters":
                continue
            dump = json.loads(subprocess.run(["bpftool", "--json", "map", "dump", "id", str(mid)],
                                             capture_output=True, text=True, timeout=30).stdout or "[]")
        except (OSError, ValueError, subprocess.TimeoutExpired):
            return {}
        out = {}
        for e in dump:
            f = e.get("formatted")
            if f:
                key, vals = f["key"], [v["value"] for v in f["values"]]
            else:
                key = int.from_bytes(bytes(int(b, 16) for b in e["key"]), "little")
                vals = [int.from_bytes(bytes(int(b, 16) for b in v["value"]), "little") for v in e["values"]]
            if key < len(COUNTERS):
                out[COUNTERS[key]] = sum(vals)
        return out
    return {}


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
    """Total RSS and RSS by kind (BPF maps, heap/anonymous, files; and by file) in KiB."""
    total = 0
    kinds = {"bpf maps": 0, "anonymous": 0, "files": 0, "by file": {}}
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
                    base = os.path.basename(name)
                    kinds["by file"][base] = kinds["by file"].get(base, 0) + kb
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


# The program that runs per sample; the unwind_user programs it tail-calls are in its run time.
SAMPLE_PROG = "do_sample"


def host_forks():
    """Processes (and threads) the host has created since boot (/proc/stat "processes")."""
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("processes "):
                return int(line.split()[1])
    return 0


def measure(pid, seconds, bpf):
    forks0 = host_forks()
    cpu0, ctx0 = proc_cpu_ns(pid), ctx_switches(pid)
    p0 = bpf_totals(pid)[0] if bpf else {}
    c0 = bpf_counters(pid) if bpf else {}
    time.sleep(seconds)
    cpu1, ctx1 = proc_cpu_ns(pid), ctx_switches(pid)
    forks = (host_forks() - forks0) / seconds
    p1, maps = bpf_totals(pid) if bpf else ({}, 0)
    c1 = bpf_counters(pid) if bpf else {}
    rss, kinds = rss_kib(pid)
    # Per program: (s, runs) in the window. The sampling program's cost follows the
    # frequency; the hooks' (exec, fork, exit, mmap) follows the host's process churn.
    progs = {n: ((v[0] - p0.get(n, (0, 0))[0]) / 1e9, v[1] - p0.get(n, (0, 0))[1]) for n, v in p1.items()}
    sample = progs.get(SAMPLE_PROG, (0, 0))
    return {"cpu": (cpu1 - cpu0) / 1e9, "bpf": sum(v[0] for v in progs.values()),
            "bpf_runs": sum(v[1] for v in progs.values()), "progs": progs,
            "sampling_bpf": sample[0], "sample_runs": sample[1],
            "us_per_sample": 1e6 * sample[0] / sample[1] if sample[1] else float("nan"),
            "counters": {n: c1[n] - c0.get(n, 0) for n in c1},
            "wakeups": (ctx1 - ctx0) / seconds, "forks": forks, "seconds": seconds, "rss": rss / 1024.0, "kinds": kinds, "maps": maps}


def run_agent(args, build, hz, tmp, gw_endpoint, cgroup):
    cmd = [os.path.join(build, "agent", "stackrelay-agent"), "--frequency", str(hz), "--log-level", "info"]
    cfg = os.path.join(tmp, "agent.yaml")
    with open(cfg, "w") as f:
        if gw_endpoint:
            f.write("gateway:\n  endpoint: %s\n" % gw_endpoint)
        if cgroup:
            f.write("profiling:\n  cgroups: [%s]\n" % cgroup)
    cmd += ["--config", cfg]
    if not gw_endpoint:
        cmd += ["--output", os.path.join(tmp, "agent.pb")]
    env = dict(os.environ)
    # As packaging/ runs it (the systemd unit, the image): GnuTLS, loaded by libcurl and unused, not initialised.
    env["GNUTLS_NO_IMPLICIT_INIT"] = "1"
    if args.stage_times:
        env["SR_AGENT_DEBUG_STAGE_TIMES"] = "1"
    p = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env=env)
    if not wait_ready(p, "msg=profiling "):
        p.kill()
        raise SystemExit("agent did not start")
    churn = None
    if args.churn:
        churn = churnlib.Churn(tmp, args.churn, preexec=args.enter)
        churn.start()
    time.sleep(args.warmup)
    started = churn.started_so_far if churn else 0
    m = measure(p.pid, args.seconds, True)
    if churn:
        m["churned"] = (churn.started_so_far - started) / args.seconds
        churn.finish()
    p.send_signal(signal.SIGINT)
    p.wait(timeout=60)
    return m


def run_perf(args, hz, tmp):
    p = subprocess.Popen(["perf", "record", "-a", "-g", "-F", str(hz), "-o", os.path.join(tmp, "perf.data"),
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


def start_gateway(args, tmp, stores=None, wrap=None):
    """A stackrelay-gateway exporting to a local sink; stores: {store: bound} for receivers.agent.stores.

    wrap: a command the gateway runs under (heaptrack -o FILE): it gets a session of its own, and the
    returned process's gateway_pid is the gateway's (pid is the wrapper's)."""
    sink = subprocess.Popen([sys.executable, "-c", SINK], stdout=subprocess.PIPE, text=True)
    sink_port = int(sink.stdout.readline())
    port, metrics = free_port(), free_port()
    cfg = os.path.join(tmp, "gateway.yaml")
    with open(cfg, "w") as f:
        f.write("receivers:\n  agent:\n    endpoint: 127.0.0.1:%d\n" % port)
        if stores:
            f.write("    stores:\n" + "".join("      %s: %s\n" % kv for kv in sorted(stores.items())))
        f.write("exporters:\n  otlp_http:\n    endpoint: http://127.0.0.1:%d\n"
                "service:\n  pipelines:\n    profiles:\n      receivers: [agent]\n      exporters: [otlp_http]\n"
                "  telemetry:\n    metrics:\n      address: 127.0.0.1:%d\n" % (sink_port, metrics))
    binary = os.path.join(args.build, "gateway", "stackrelay-gateway")
    gw = subprocess.Popen(list(wrap or []) + [binary, "--config", cfg], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, start_new_session=bool(wrap))
    gw.metrics_port = metrics
    gw.gateway_pid = gw.pid
    for _ in range(300 if wrap else 100):
        try:
            urllib.request.urlopen("http://127.0.0.1:%d/readyz" % metrics, timeout=1)
            if wrap:
                found = subprocess.run(["pgrep", "-s", str(gw.pid), "-f", "^%s " % re.escape(binary)],
                                       capture_output=True, text=True).stdout.split()
                if len(found) != 1:
                    raise SystemExit("the gateway under %s: %d processes found" % (wrap[0], len(found)))
                gw.gateway_pid = int(found[0])
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


# The agent loads one of each: exec's hook, and the mmap hook the kernel allows (bpf/profile.bpf.c).
MMAP_HOOKS = ("handle_vm_mmap", "handle_vm_mmap_args", "handle_vm_mmap_ret", "handle_mmap_exit", "handle_sys_exit")


def hook_runs(m, names):
    """Runs of the named hooks in the window: how many processes started (exec) or mapped code on the host."""
    names = (names,) if isinstance(names, str) else names
    return sum(c for n, (t, c) in m["progs"].items() if n in names or n.startswith(tuple(n_ + "_" for n_ in names)))


def per_stack(c, name):
    stacks = c.get("PROFILE_CNT_SAMPLES", 0)
    return c.get(name, 0) / stacks if stacks else float("nan")


def report_round(rnd, hz, m, label=""):
    c = m["counters"]
    print("round %d agent%s %d Hz: %.4f s CPU + %.4f s BPF (%d runs), do_sample %.2f us x %d, %.1f wake-ups/s, "
          "RSS %.1f MiB (BPF maps %d KiB, anonymous %d KiB, files %d KiB), BPF maps %.1f MiB; "
          "host %.1f processes/s, threads %.3f %% of a core" % (
              rnd + 1, label, hz, m["cpu"], m["bpf"], m["bpf_runs"], m["us_per_sample"], m["sample_runs"],
              m["wakeups"], m["rss"], m["kinds"]["bpf maps"], m["kinds"]["anonymous"], m["kinds"]["files"],
              m["maps"] / 2**20, m.get("forks", 0), 100.0 * m["cpu"] / m.get("seconds", 1)), file=sys.stderr)
    if "churned" in m:
        print("    churn: %.1f processes/s started, threads %.1f us a process started" % (
            m["churned"], 1e6 * m["cpu"] / max(m["churned"] * m["seconds"], 1)), file=sys.stderr)
    print("    BPF by program: " + ", ".join(
        "%s %.2f ms / %d runs" % (n, 1e3 * t, c_) for n, (t, c_) in sorted(m["progs"].items()) if c_),
        file=sys.stderr)
    print("    counters: " + ", ".join("%s %d" % (n[12:].lower(), v) for n, v in sorted(c.items()) if v),
          file=sys.stderr)


STAGES = (("begin: to the first frame", "BEGIN"), ("... of which the mapping list and scratch found", "LOOKUP"),
          ("... of which the header and kernel stack", "HEADER"), ("... ... of which the kernel stack", "KSTACK"),
          ("... of which the Python, V8, Java starts", "RUNTIMES"),
          ("frames", "UNWIND"), ("... of which rows", "ROW"), ("... of which mappings", "MAPPING"),
          ("... of which Python frames", "PY"), ("submit", "SUBMIT"))


def stage_table(freqs, res):
    """Per table-unwound sample: ns by stage (PROFILE_CNT_DBG_*), and the row cache's misses."""
    def per(m, name, by="PROFILE_CNT_DBG_STACKS"):
        c = m["counters"]
        return c.get("PROFILE_CNT_DBG_" + name, 0) / c[by] if c.get(by) else float("nan")
    print()
    print("Stages of a table-unwound CPU sample (--stage-times: bpf_ktime_get_ns() at each stage, which adds "
          "its own cost), µs a sample, medians:")
    print()
    print("| stage | " + " | ".join("%d Hz" % hz for hz in freqs) + " |")
    print("|---|" + "---|" * len(freqs))
    for label, name in STAGES:
        print("| %s | %s |" % (label, " | ".join(
            "%.2f" % (statistics.median(per(m, "NS_" + name) for m in res[hz]) / 1e3) for hz in freqs)))
    print("| rows looked up a sample | %s |" % " | ".join(
        "%.1f" % statistics.median(per(m, "ROWS") for m in res[hz]) for hz in freqs))
    print("| ... not in the row cache | %s |" % " | ".join(
        "%.1f" % statistics.median(per(m, "ROW_MISSES") for m in res[hz]) for hz in freqs))
    print("| mapping searches a sample | %s |" % " | ".join(
        "%.1f" % statistics.median(per(m, "MAPPINGS") for m in res[hz]) for hz in freqs))
    print("| ns a row (hit or search) | %s |" % " | ".join(
        "%.0f" % statistics.median(per(m, "NS_ROW", "PROFILE_CNT_DBG_ROWS") for m in res[hz]) for hz in freqs))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--hz", default="19,97,997", help="frequencies, comma-separated; the first is the headline")
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--warmup", type=float, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--busy", type=int, default=os.cpu_count())
    ap.add_argument("--no-perf", action="store_true", help="do not run perf record beside the agent")
    ap.add_argument("--output", action="store_true", help="diagnostic: the agent writes a file, no gateway")
    ap.add_argument("--cgroup", action="store_true", help="diagnostic: the agent profiles the spinners' cgroup only")
    ap.add_argument("--reference", metavar="BUILD",
                    help="also run this build's agent (an earlier commit's), alternating, and print the ratios")
    ap.add_argument("--churn", type=float, default=0, metavar="RATE",
                    help="start short-lived processes (tests/integration/churnlib.py) at RATE a second, in the "
                         "spinners' cgroup with --cgroup, and state the threads' CPU per process started")
    ap.add_argument("--stage-times", action="store_true",
                    help="diagnostic: the agent's BPF times each stage of a sample (SR_AGENT_DEBUG_STAGE_TIMES=1)")
    args = ap.parse_args()
    freqs = [int(h) for h in args.hz.split(",")]
    if os.geteuid() != 0:
        raise SystemExit("run as root (BPF, system-wide perf)")
    have_perf = shutil.which("perf") is not None and not args.no_perf
    tmp = tempfile.mkdtemp(prefix="sr-steady-")
    stats_path = "/proc/sys/kernel/bpf_stats_enabled"
    old_stats = open(stats_path).read().strip()
    cgroup = make_cgroup() if args.cgroup else None

    def enter():
        if cgroup:
            with open(os.path.join(cgroup, "cgroup.procs"), "w") as f:
                f.write("0")
    args.enter = enter if cgroup else None
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"], preexec_fn=enter)
                for _ in range(args.busy)]
    gw = sink = None
    load_before = open("/proc/loadavg").read().split()[0]
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    builds = [args.build] + ([args.reference] if args.reference else [])
    res = {hz: [] for hz in freqs}
    ref = {hz: [] for hz in freqs}
    perf = []
    try:
        endpoint = None
        if not args.output:
            gw, sink, endpoint = start_gateway(args, tmp)
        open(stats_path, "w").write("1")
        for rnd in range(args.rounds):
            # Frequencies interleaved, in a rotating order, so the host's drift hits all alike.
            order = freqs[rnd % len(freqs):] + freqs[:rnd % len(freqs)]
            for hz in order:
                for b in (builds if rnd % 2 == 0 else builds[::-1]):
                    m = run_agent(args, b, hz, tmp, endpoint, cgroup)
                    (res if b == args.build else ref)[hz].append(m)
                    report_round(rnd, hz, m, "" if b == args.build else " (reference)")
            if have_perf:
                m = run_perf(args, freqs[0], tmp)
                perf.append(m)
                print("round %d perf %d Hz: %.4f s CPU, %.1f wake-ups/s, RSS %.1f MiB" %
                      (rnd + 1, freqs[0], m["cpu"], m["wakeups"], m["rss"]), file=sys.stderr)
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

    def med(ms, f):
        return statistics.median(f(m) for m in ms)
    w = args.seconds
    print("%s; %d busy CPUs (of %d), %d rounds of %.0f s after %.0f s warm-up, medians; kernel %s; "
          "load average before: %s; %s%s" %
          (started, args.busy, os.cpu_count(), args.rounds, w, args.warmup, os.uname().release, load_before,
           "agent writes --output (diagnostic)" if args.output else
           "agent sends to a stackrelay-gateway on loopback, default configuration",
           "; agent limited to the spinners' cgroup (diagnostic)" if cgroup else "; whole host"))
    print()
    print("| profiler | Hz | user+sys % of a core | BPF per sample (% of a core) | BPF hooks (% of a core) "
          "| total % of a core | BPF µs a sample | samples/s | wake-ups/s | RSS MiB | host execs/s, mmap hook runs/s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    rows = [("stackrelay-agent", hz, res[hz]) for hz in freqs]
    if args.reference:
        rows += [("reference", hz, ref[hz]) for hz in freqs]
    for label, hz, ms in rows:
        print("| %s | %d | %.3f | %.3f | %.3f | **%.3f** | %.2f | %.1f | %.1f | %.1f | %.0f, %.0f |" % (
            label, hz, 100 * med(ms, lambda m: m["cpu"]) / w, 100 * med(ms, lambda m: m["sampling_bpf"]) / w,
            100 * med(ms, lambda m: m["bpf"] - m["sampling_bpf"]) / w,
            100 * med(ms, lambda m: m["cpu"] + m["bpf"]) / w, med(ms, lambda m: m["us_per_sample"]),
            med(ms, lambda m: m["sample_runs"]) / w, med(ms, lambda m: m["wakeups"]), med(ms, lambda m: m["rss"]),
            med(ms, lambda m: hook_runs(m, "handle_exec")) / w, med(ms, lambda m: hook_runs(m, MMAP_HOOKS)) / w))
    if perf:
        p_total = med(perf, lambda m: m["cpu"])
        print("| perf record -a -g | %d | %.3f | (in the interrupt, not measurable) | — | ≥ %.3f | — | — | %.1f | %.1f | |"
              % (freqs[0], 100 * p_total / w, 100 * p_total / w, med(perf, lambda m: m["wakeups"]),
                 med(perf, lambda m: m["rss"])))
    if len(freqs) > 1:
        last = freqs[-1]
        print()
        print("BPF per sample, %d Hz / %d Hz: %.2f" % (freqs[0], last, med(res[freqs[0]], lambda m: m["us_per_sample"]) /
                                                        med(res[last], lambda m: m["us_per_sample"])))
    if args.reference:
        print()
        for hz in freqs:
            print("%d Hz, this build / reference: BPF a sample %.2f, total CPU %.2f, threads %.2f "
                  "(%.3f vs %.3f %% of a core; host %.1f vs %.1f processes/s)" % (
                      hz, med(res[hz], lambda m: m["us_per_sample"]) / med(ref[hz], lambda m: m["us_per_sample"]),
                      med(res[hz], lambda m: m["cpu"] + m["bpf"]) / med(ref[hz], lambda m: m["cpu"] + m["bpf"]),
                      med(res[hz], lambda m: m["cpu"]) / med(ref[hz], lambda m: m["cpu"]),
                      100 * med(res[hz], lambda m: m["cpu"]) / w, 100 * med(ref[hz], lambda m: m["cpu"]) / w,
                      med(res[hz], lambda m: m["forks"]), med(ref[hz], lambda m: m["forks"])))
            if args.churn:
                print("%d Hz, threads' CPU a churned process: %.1f us, reference %.1f us" % (
                    hz, med(res[hz], lambda m: 1e6 * m["cpu"] / max(m["churned"] * w, 1)),
                    med(ref[hz], lambda m: 1e6 * m["cpu"] / max(m["churned"] * w, 1))))
    print()
    print("| Hz | table frames / stack | FP frames / stack | Python frames / stack | FP-only stacks / stack "
          "|")
    print("|---|---|---|---|---|")
    for hz in freqs:
        ms = res[hz]
        print("| %d | %.1f | %.1f | %.1f | %.2f |" % (
            hz, med(ms, lambda m: per_stack(m["counters"], "PROFILE_CNT_UNWIND_TABLE_FRAMES")),
            med(ms, lambda m: per_stack(m["counters"], "PROFILE_CNT_UNWIND_FP_FRAMES")),
            med(ms, lambda m: per_stack(m["counters"], "PROFILE_CNT_PY_FRAMES")),
            med(ms, lambda m: per_stack(m["counters"], "PROFILE_CNT_UNWIND_FP_STACKS"))))
    if args.stage_times:
        stage_table(freqs, res)
    k = res[freqs[0]][-1]["kinds"]
    print()
    print("agent RSS by kind (last %d Hz round): BPF map pages %.1f MiB, anonymous %.1f MiB, files %.1f MiB; "
          "BPF map kernel memory %.1f MiB" % (freqs[0], k["bpf maps"] / 1024, k["anonymous"] / 1024,
                                             k["files"] / 1024, res[freqs[0]][-1]["maps"] / 2**20))
    print("agent RSS by file, KiB (last %d Hz round): %s" % (freqs[0], ", ".join(
        "%s %d" % (n, kb) for n, kb in sorted(k["by file"].items(), key=lambda x: -x[1]) if kb)))


if __name__ == "__main__":
    main()
