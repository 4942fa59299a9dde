#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Off-CPU profiling with real eBPF, checked against the workload's own clock.

tests/workloads/offcpu runs three threads: "sleeper" sleeps 10 ms at a time
in offcpu_sleep(), "reader" blocks on a pipe the sleeper writes in
offcpu_pipe_read(), "burner" spins in offcpu_burn(). It measures the time
its two blocking threads spend inside their blocking calls (CLOCK_MONOTONIC
around each call) and prints it at exit. The agent (off_cpu enabled, pid
filter) sends to a real gateway (symbolize, then the file, pprof and
flamegraph exporters) and writes --output as well. Checked:
  - the agent's output (protoc-generated decoder): for the sleeper and the
    reader, >= 90 % of their off-CPU nanoseconds have their known function
    on the stack (nm), and their totals match the workload's clock within
    10 %; the off-CPU stacks are unwound through the tables (the workload
    has no frame pointers) down to the thread's start;
  - the CPU profile is the burner's: >= 90 % of the workload's CPU samples
    (the waiting threads' system calls take a little CPU);
  - accounting: CPU samples and off-CPU waits taken in BPF = exported +
    dropped (the agent's exit log);
  - the gateway: tests/fakes/fake_pyroscope.py (Pyroscope's OTLP rules)
    stores the off-CPU profile as off_cpu with exactly the agent's
    nanoseconds and the CPU one as process_cpu, refusing nothing;
    the OTLP file holds an off_cpu/nanoseconds profile with no
    period type (the shape Pyroscope names off_cpu) whose values sum to the
    agent's off_cpu_nanos, next to the CPU profile (samples/count,
    cpu/nanoseconds); the pprof exporter wrote off_cpu-*.pb.gz apart from
    profile-*.pb.gz; the flame graph has a second file, flame.off_cpu.svg,
    where offcpu_sleep and offcpu_pipe_read are named, and flame.svg stays
    the CPU graph.

Run as agent-offcpu-fallbacks with SR_AGENT_FORCE_FALLBACKS=1, the agent
takes the kprobe on finish_task_switch (the hook before 6.17 where the
kernel has only its clone) and the old kernels' other fallbacks, held to
the same figures.

Nothing waits on a timer: the workload runs its own SECONDS, the agent is
stopped (SIGTERM: it drains BPF and flushes) after the workload has exited,
and the gateway after the agent.
"""
import glob
import json
import os
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ports import free_port  # noqa: E402
import agentlib  # noqa: E402

SECONDS = 4
FREQ = 499
USER = 1
OFF_CPU = 2  # stackrelay.v1.ProfileType




def wait_log(proc, path, what, timeout=60):
    """Waits until the log file has a line containing what; False when proc exits first or after timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(path) and what in open(path, errors="replace").read():
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.05)
    return False


def start_fake_pyroscope(env, work):
    """tests/fakes/fake_pyroscope.py (Pyroscope's OTLP rules, its own reader); (process, port or None)."""
    port_file = os.path.join(work, "pyroscope.port")
    p = subprocess.Popen([sys.executable, os.path.join(env.src, "tests", "fakes", "fake_pyroscope.py"),
                          "--port-file", port_file, "--lifetime", "300"],
                         stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "pyroscope.log"), "w"))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and p.poll() is None:
        if os.path.exists(port_file) and open(port_file).read().strip():
            return p, int(open(port_file).read())
        time.sleep(0.05)
    return p, None


def start_gateway(env, work, pyroscope_port):
    port = free_port()
    cfg = os.path.join(work, "gateway.yaml")
    with open(cfg, "w") as f:
        f.write("""receivers:
  agent: {endpoint: 127.0.0.1:%d}
processors:
  symbolize: {cache_dir: %s/cache, wait_for_symbols: 10s}
  batch: {timeout: 1s}
exporters:
  file: {path: %s/otlp.jsonl, format: json}
  pprof: {directory: %s/pprof}
  flamegraph: {path: %s/flame.svg}
  otlp_http:
    endpoint: http://127.0.0.1:%d
    retry_on_failure: {initial_interval: 100ms}
service:
  pipelines:
    profiles: {receivers: [agent], processors: [symbolize, batch], exporters: [file, pprof, flamegraph, otlp_http]}
  shutdown_timeout: 20s
""" % (port, work, work, work, work, pyroscope_port))
    gw = subprocess.Popen([env.gateway, "--config", cfg], stderr=open(os.path.join(work, "gateway.log"), "w"))
    # Connect until the receiver answers (bounded).
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and gw.poll() is None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return gw, port
        except OSError:
            time.sleep(0.05)
    return gw, None


def names_on_stack(out, sample, syms, exe_id):
    return {syms.lookup(f.address) for f in out.frames(sample) if f.kind == USER and f.executable_id == exe_id}


def check_agent_output(c, env, out, pid, measured):
    path = env.workload("offcpu")
    syms = agentlib.Symbols(path)
    bid = agentlib.build_id(path)
    mine = out.for_pid(pid)
    off = [s for s in mine if s.profile_type == OFF_CPU]
    cpu = [s for s in mine if s.profile_type != OFF_CPU]
    c.check(all(s.off_cpu_nanos == 0 for s in cpu), "CPU samples carry no off-CPU time")
    for thread, func in (("sleeper", "offcpu_sleep"), ("reader", "offcpu_pipe_read")):
        waits = [s for s in off if s.thread_name == thread]
        total = sum(s.off_cpu_nanos for s in waits)
        known = sum(s.off_cpu_nanos for s in waits if func in names_on_stack(out, s, syms, bid))
        through = sum(s.off_cpu_nanos for s in waits if thread in names_on_stack(out, s, syms, bid))
        share = 100.0 * known / total if total else 0.0
        ratio = float(total) / measured[thread] if measured.get(thread) else 0.0
        # Finding func and the thread's start takes the tables of libc and of the workload (no frame
        # pointers), which the agent builds as the workload runs: under emulation, late in its few seconds.
        c.check(known > 0, "%s: %s found on its off-CPU stacks" % (thread, func))
        c.timing(share >= 90.0, "%s: %.1f%% of its %.3f s off CPU in %s (>= 90%%), %d waits" %
                 (thread, share, total / 1e9, func, sum(s.count for s in waits)))
        c.check(0.9 <= ratio <= 1.1, "%s: off-CPU total %.3f s vs %.3f s by its own clock (ratio %.3f, 0.9-1.1)" %
                (thread, total / 1e9, measured.get(thread, 0) / 1e9, ratio))
        # No frame pointers in the workload: reaching the thread's start function takes the tables.
        c.timing(100.0 * through / total >= 90.0 if total else False,
                 "%s: %.1f%% of its off-CPU time unwound down to %s() (>= 90%%)" %
                 (thread, 100.0 * through / total if total else 0, thread))
    cpu_total = sum(s.count for s in cpu)
    burner = sum(s.count for s in cpu if s.thread_name == "burner")
    # The waiting threads do use a little CPU (their system calls): "only the burner" is >= 90 %.
    c.timing(cpu_total > 0 and 100.0 * burner / cpu_total >= 90.0,
             "CPU profile: %d of %d samples are the burner's (>= 90%%)" % (burner, cpu_total))
    in_burn = sum(s.count for s in cpu if "offcpu_burn" in names_on_stack(out, s, syms, bid))
    c.check(burner > 0 and in_burn >= 0.9 * burner, "CPU profile: %d of the burner's %d samples in offcpu_burn" %
            (in_burn, burner))
    return sum(s.off_cpu_nanos for s in off), sum(s.count for s in off)


def otlp_profiles(path):
    """(sample type, unit, period type or None, values sum) of every profile in the OTLP/JSON file."""
    found = []
    with open(path) as f:
        for line in f:
            req = json.loads(line)
            strings = req.get("dictionary", {}).get("stringTable", [])
            for rp in req.get("resourceProfiles", []):
                for sp in rp.get("scopeProfiles", []):
                    for p in sp.get("profiles", []):
                        st = p.get("sampleType", {})
                        pt = p.get("periodType")
                        values = sum(int(v) for s in p.get("samples", []) for v in s.get("values", []))
                        found.append((strings[st.get("typeStrindex", 0)], strings[st.get("unitStrindex", 0)],
                                      strings[pt.get("typeStrindex", 0)] if pt else None, values))
    return found


def check_pyroscope(c, port, off_ns, cpu_count):
    import urllib.request
    st = json.load(urllib.request.urlopen("http://127.0.0.1:%d/stats" % port, timeout=10))
    c.check(not st["errors"], "fake Pyroscope: no request refused by its rules (%s)" % st["errors"][:1])
    c.check(st["off_cpu_nanoseconds"] == off_ns,
            "fake Pyroscope: stored as off_cpu, %d ns = the agent's %d" % (st["off_cpu_nanoseconds"], off_ns))
    c.check(st["accepted_samples"] == cpu_count,
            "fake Pyroscope: process_cpu samples %d = the agent's %d" % (st["accepted_samples"], cpu_count))
    types = {p.get("profile_type") for r in (st.get("last_shapes") or {}).get("resources", []) for p in r["profiles"]}
    print("# fake Pyroscope: profile types in the last request: %s" % sorted(t for t in types if t))


def check_gateway(c, work, off_ns):
    profs = otlp_profiles(os.path.join(work, "otlp.jsonl"))
    off = [p for p in profs if p[0] == "off_cpu"]
    cpu = [p for p in profs if p[0] == "samples"]
    c.check(off and all(p[1] == "nanoseconds" and p[2] is None for p in off),
            "OTLP: %d off-CPU profiles, each off_cpu/nanoseconds without a period type" % len(off))
    c.check(cpu and all(p[1] == "count" and p[2] == "cpu" for p in cpu),
            "OTLP: %d CPU profiles (samples/count, period cpu) apart from them" % len(cpu))
    got = sum(p[3] for p in off)
    c.check(got == off_ns, "OTLP: off-CPU values sum to the agent's off_cpu_nanos (%d = %d)" % (got, off_ns))
    c.check(glob.glob(os.path.join(work, "pprof", "off_cpu-*.pb.gz")) and
            glob.glob(os.path.join(work, "pprof", "profile-*.pb.gz")),
            "pprof: off_cpu-*.pb.gz written apart from profile-*.pb.gz")
    svg = os.path.join(work, "flame.off_cpu.svg")
    text = open(svg).read() if os.path.exists(svg) else ""
    c.check("offcpu_sleep" in text and "offcpu_pipe_read" in text and "off-CPU" in text,
            "flamegraph: flame.off_cpu.svg names offcpu_sleep and offcpu_pipe_read")
    main_svg = os.path.join(work, "flame.svg")
    main_text = open(main_svg).read() if os.path.exists(main_svg) else ""
    c.check("offcpu_burn" in main_text and "off-CPU" not in main_text,
            "flamegraph: flame.svg is the CPU graph, with offcpu_burn")


def main():
    agentlib.require_root_bpf(needs=("off_cpu.enabled",))
    env = agentlib.Env()
    env.gateway = os.environ.get("SR_GATEWAY")
    if not env.gateway:
        agentlib.skip("run through meson test (SR_GATEWAY unset)")
    c = agentlib.Checks()
    work = env.tmp
    gw = agent = w = pyro = None
    try:
        pyro, pyro_port = start_fake_pyroscope(env, work)
        if not c.check(pyro_port is not None, "fake Pyroscope listening"):
            return c.finish()
        gw, port = start_gateway(env, work, pyro_port)
        if not c.check(port is not None, "gateway listening"):
            return c.finish()
        w = subprocess.Popen([env.workload("offcpu"), str(SECONDS)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
        pid = int(w.stdout.readline())
        cfg = os.path.join(work, "agent.yaml")
        with open(cfg, "w") as f:
            f.write("gateway: {endpoint: http://127.0.0.1:%d}\n"
                    "profiling: {report_interval: 1s}\n"
                    "off_cpu: {enabled: true, min_block: 1ms}\n" % port)
        out_path = os.path.join(work, "out.pb")
        agent_log = os.path.join(work, "agent.log")
        agent = subprocess.Popen([env.agent, "--config", cfg, "--pid", str(pid), "--frequency", str(FREQ),
                                  "--output", out_path], stderr=open(agent_log, "w"))
        if not c.check(wait_log(agent, agent_log, "msg=\"off-CPU profiling\""), "agent started with off-CPU profiling"):
            sys.stderr.write(open(agent_log).read())
            return c.finish()
        started = agentlib.logfmt_fields(open(agent_log).read(), "off-CPU profiling") or {}
        print("# off-CPU waits end at %s" % started.get("hook"))
        if os.environ.get("SR_AGENT_FORCE_FALLBACKS") == "1":
            # agent-offcpu-fallbacks: the hook of kernels before 6.17 whose finish_task_switch is a clone.
            c.check(started.get("hook", "").startswith("kprobe/finish_task_switch"),
                    "SR_AGENT_FORCE_FALLBACKS=1: waits end at a kprobe on finish_task_switch (%s)" % started.get("hook"))
        w.stdin.write("go\n")
        w.stdin.flush()
        measured = {}
        for line in w.stdout:
            k, v = line.split()
            measured[k] = int(v)
        c.check(w.wait(timeout=60) == 0, "workload ran")
        agent.send_signal(signal.SIGTERM)
        rc = agent.wait(timeout=60)
        stderr = open(agent_log).read()
        if rc != 0:
            sys.stderr.write(stderr)
        c.check(rc == 0, "agent exits 0 on SIGTERM (rc=%d)" % rc)
        stopped, taken, exported, dropped = agentlib.sample_accounting(stderr)
        c.check(taken == exported + dropped and int(stopped.get("off_cpu_events", 0)) > 0,
                "accounting: taken %d (off-CPU waits %s) = exported %d + dropped %d" %
                (taken, stopped.get("off_cpu_events"), exported, dropped))
        print("# skipped: min_block %s, probability %s, rate %s" %
              (stopped.get("off_cpu_skipped_short"), stopped.get("off_cpu_skipped_probability"),
               stopped.get("off_cpu_skipped_rate")))
        out = agentlib.Output(env.pb, out_path)
        off_ns, _ = check_agent_output(c, env, out, pid, measured)
        gw.send_signal(signal.SIGTERM)
        try:
            gw_rc = gw.wait(timeout=60)
        except subprocess.TimeoutExpired:
            gw.kill()
            gw_rc = -1
        if gw_rc != 0:
            sys.stderr.write(open(os.path.join(work, "gateway.log")).read())
        c.check(gw_rc == 0, "gateway stops cleanly (rc=%d)" % gw_rc)
        # The agent's --output and its requests to the gateway carry the same samples.
        all_off = sum(s.off_cpu_nanos for s in out.samples if s.profile_type == OFF_CPU)
        all_cpu = sum(s.count for s in out.samples if s.profile_type != OFF_CPU)
        check_gateway(c, work, all_off)
        check_pyroscope(c, pyro_port, all_off, all_cpu)
        print("# off-CPU: %.3f s of the workload's waits, %.3f s in all" % (off_ns / 1e9, all_off / 1e9))
        return c.finish()
    finally:
        for p in (w, agent, gw, pyro):
            if p and p.poll() is None:
                p.kill()
                p.wait()
        env.cleanup()


if __name__ == "__main__":
    sys.exit(main())
