#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The agent's memory under process churn, short (the root suite's version of bench/agent-churn).

The agent profiles the whole host with its default config (but 97 Hz) and
writes --output, while tests/integration/churnlib.py starts short-lived
processes at 100 a second for 40 s: fresh copies of /usr/bin/true with new
build IDs, python3, xz, shell pipelines, node, every 100th a JVM (Debian's
OpenJDK), every 10th in its own mount namespace (unshare -m). /metrics is scraped before, during and after.
Checked, none of it against the clock:
  - every cache with an entry bound (stackrelay_agent_cache_limit{cache})
    stays at or under it in every scrape; unwind tables stay under
    profiling.unwind_table_memory (64 MiB) and perf map entries under
    perf_maps.max_entries_per_process x max_processes;
  - once the churn has stopped and three report windows have been flushed
    (stackrelay_agent_windows_total; the test stops waiting after two when
    all is back), the per-process caches (processes and their mappings,
    Python code objects, Node.js functions and code objects, Java methods and
    compiled pcs, perf map entries) are back near
    their counts before the churn: what gone processes held is released
    (slack: 100 entries or half of what the churn added, for the host's
    other processes: in CI other tests, Python ones among them, run beside
    this one and their processes are rightly held);
  - the agent's peak RSS (VmHWM) stays under the 48 MiB target of the churn
    bench (not asserted under AddressSanitizer);
  - no sample is lost unreported: the file's counts = samples exported, and
    samples taken in BPF = exported + the losses the agent counts;
  - every churn process exited 0 (the mount namespaces were made), and the
    agent exits 0 on SIGTERM.
Speed (processes a second reached, CPU per process) is the bench's to measure;
here it is printed only.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ports import free_port  # noqa: E402
import agentlib  # noqa: E402
import churnlib  # noqa: E402
import metricslib  # noqa: E402

FREQ = 97
RATE = 100
CHURN_SECONDS = 40
WINDOWS_AFTER = 3
RSS_TARGET = 48 * 2 ** 20
UNWIND_TABLE_MEMORY = 64 * 2 ** 20  # profiling.unwind_table_memory's default
PERF_MAP_ENTRIES = 65536 * 64  # perf_maps.max_entries_per_process x max_processes, their defaults
# Caches that hold what processes hold, and should give it back when they are gone.
PER_PROCESS = ("processes", "python_code_objects", "nodejs_functions", "nodejs_code_objects", "java_methods",
               "java_compiled_pcs", "perf_map_entries")
JAVA_EVERY = 100  # a JVM start costs a fifth of a second of CPU: about one a second at the rate this host reaches


def snapshot(port, timeout=10):
    """{"entries": {cache: n}, "limit": {...}, "bytes": {...}, "windows": n}, or None when /metrics does not answer."""
    try:
        text = metricslib.scrape(port, timeout=timeout)
    except OSError:
        return None
    s = {what: metricslib.by_label(text, "stackrelay_agent_cache_" + what, "cache")
         for what in ("entries", "limit", "bytes")}
    s["windows"] = metricslib.total(text, "stackrelay_agent_windows_total")
    return s


def vm_hwm(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def over_bound(s):
    """The caches above their bound in one scrape: ["name entries/bound", ...]."""
    over = []
    for name, n in s["entries"].items():
        lim = s["limit"].get(name)
        if lim and n > lim:
            over.append("%s %d/%d" % (name, n, lim))
    if s["bytes"].get("unwind_tables", 0) > UNWIND_TABLE_MEMORY:
        over.append("unwind_tables %d bytes" % s["bytes"]["unwind_tables"])
    if s["entries"].get("perf_map_entries", 0) > PERF_MAP_ENTRIES:
        over.append("perf_map_entries %d" % s["entries"]["perf_map_entries"])
    return over


def fmt(s):
    return " ".join("%s=%d" % kv for kv in sorted(s["entries"].items()))


def main():
    agentlib.require_root_bpf()
    env = agentlib.Env()
    c = agentlib.Checks()
    churn = churnlib.Churn(env.tmp, RATE, java_every=JAVA_EVERY)
    agent = None
    try:
        port = free_port()
        cfg = os.path.join(env.tmp, "agent.yaml")
        with open(cfg, "w") as f:
            f.write("telemetry:\n  metrics:\n    address: 127.0.0.1:%d\n" % port)
        out_path = os.path.join(env.tmp, "out.pb")
        # --duration only bounds the run; the agent is stopped once the churn has been given back.
        agent, log = agentlib.start_agent(env, ["--config", cfg, "--duration", "600", "--frequency", str(FREQ),
                                                "--output", out_path, "--log-level", "info"])
        if not c.check(agent is not None, "agent started"):
            return c.finish()
        # The counts before the churn once the agent has settled: its first window flushed.
        before = agentlib.wait_for(lambda: (lambda s: s if s and s["windows"] >= 1 else None)(snapshot(port)), 60,
                                   step=0.5)
        if not c.check(before is not None, "/metrics answers and a first window is flushed"):
            agentlib.stop_agent(agent, log)
            return c.finish()
        print("# before the churn: " + fmt(before))
        scrapes = [before]
        t0 = time.monotonic()
        churn.start()
        while time.monotonic() - t0 < CHURN_SECONDS:
            time.sleep(2)
            s = snapshot(port, timeout=5)
            if s:
                scrapes.append(s)
        started = churn.finish()
        secs = time.monotonic() - t0
        print("# %d processes started in %.0f s (%.0f a second; %s)" %
              (started, secs, started / secs, " ".join("%s=%d" % kv for kv in sorted(churn.by_kind.items()))))
        c.check(not churn.failed, "every churn process exited 0, the mount namespaces made (non-zero: %s)" %
                churn.failed)
        stop = snapshot(port) or scrapes[-1]
        scrapes.append(stop)
        print("# the churn stopped: " + fmt(stop))
        peak = {name: max(s["entries"].get(name, 0) for s in scrapes) for name in PER_PROCESS}
        peak_bytes = max(s["bytes"].get("processes", 0) for s in scrapes)

        def slack(name):
            # Other tests' processes run beside this one in CI (Python ones among them, whose code objects the
            # agent rightly holds): what the churn added must mostly go, not all of it.
            return max(100, 0.5 * (peak[name] - before["entries"].get(name, 0)))

        def back(s):
            return all(s["entries"].get(name, 0) <= before["entries"].get(name, 0) + slack(name)
                       for name in PER_PROCESS)

        # Bounded by the agent's own windows, not by the clock (but a hung agent does not hang the test).
        after = stop
        deadline = time.monotonic() + 15 * WINDOWS_AFTER
        while time.monotonic() < deadline:
            time.sleep(1)
            s = snapshot(port)
            if not s:
                continue
            scrapes.append(s)
            after = s
            passed = s["windows"] - stop["windows"]
            if passed >= WINDOWS_AFTER or (passed >= 2 and back(s)):
                break
        print("# %d windows later: %s" % (after["windows"] - stop["windows"], fmt(after)))
        c.check(after["windows"] - stop["windows"] >= 2, "at least two windows flushed after the churn (%d)" %
                (after["windows"] - stop["windows"]))
        over = [(i, o) for i, s in enumerate(scrapes) for o in over_bound(s)]
        c.check(not over, "every cache at or under its bound in all %d scrapes (over: %s)" % (len(scrapes), over[:5]))
        for name in PER_PROCESS:
            b, p, a = before["entries"].get(name, 0), peak[name], after["entries"].get(name, 0)
            c.check(a <= b + slack(name), "%s: %d before, %d at the peak, %d after (<= %d: released)" %
                    (name, b, p, a, b + slack(name)))
        bb, ab = before["bytes"].get("processes", 0), after["bytes"].get("processes", 0)
        c.check(ab - bb <= max(256 * 1024, 0.25 * (peak_bytes - bb)),
                "processes' entries and mappings: %.0f KiB before, %.0f KiB at the peak, %.0f KiB after "
                "(at least 3/4 of what the churn added released)" % (bb / 1024, peak_bytes / 1024, ab / 1024))
        for name in ("files", "executables", "stacks"):
            print("# %s: %d before, %d at the peak, %d after (bound %d)" %
                  (name, before["entries"].get(name, 0), max(s["entries"].get(name, 0) for s in scrapes),
                   after["entries"].get(name, 0), after["limit"].get(name, 0)))
        hwm = vm_hwm(agent.pid)
        if agentlib.sanitized(env.agent):
            c.check(hwm > 0, "agent peak RSS %.1f MiB (target not checked under AddressSanitizer)" % (hwm / 2 ** 20))
        else:
            c.check(0 < hwm <= RSS_TARGET, "agent peak RSS (VmHWM) %.1f MiB (<= 48 MiB)" % (hwm / 2 ** 20))
        rc, stderr = agentlib.stop_agent(agent, log)
        agent = None
        c.check(rc == 0, "agent exits 0 on SIGTERM (rc=%d)" % rc)

        out = agentlib.Output(env.pb, out_path)
        agentlib.check_sample_accounting(c, out, stderr)
        return c.finish()
    finally:
        churn.finish()
        if agent is not None:
            agent.kill()
            agent.wait()
        env.cleanup()


if __name__ == "__main__":
    sys.exit(main())
