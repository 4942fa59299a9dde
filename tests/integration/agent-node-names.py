#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Node.js JavaScript frames by name, without flags (real eBPF, Debian's /usr/bin/node).

Seven workloads start and wait (each prints its pid, then warms up until a
line arrives on stdin): tests/workloads/v8-split.js three times (no flags;
with --cpu-prof, V8's own profiler; with --perf-basic-prof, a perf map),
tests/workloads/v8-worker.js, tests/workloads/v8-deopt.js,
tests/workloads/v8-lines.js (--max-opt=0: interpreted frames only) and
tests/workloads/v8-inline.js (default flags: optimized frames). The agent
(--pid filter, --output, profiling.unwinding auto, nodejs.enabled by
default) starts, and once its /metrics show a named JavaScript frame each
workload is released in turn and spends its CPU budget while the others are
stopped (SIGSTOP). Checked:
  - plain run: its main thread's samples after the start line whose leaf
    JavaScript frame is alphaWork or betaWork are >= 90 % of them; those
    functions are INTERPRETED frames of runtime "v8js" whose file is the
    script's path and whose first line is the line `function alphaWork` is
    on; every alphaWork frame's line lies in its body; and alphaWork's share
    of the two is within +-5 points of the workload's own clock
    (process.hrtime around each call, printed at its end);
  - --cpu-prof run: each function with >= 5 % of V8's own self samples (its
    .cpuprofile; samples of the warm-up and V8's "(program)" / "(garbage
    collector)" nodes left out) has within +-5 points of the agent's leaf
    JavaScript frames of the same run after its start line — unless V8's
    profile is itself more than 5 points off the program's own clock (V8's
    sampler thread runs late on a loaded runner): then, as always, the
    agent's split of that run is checked against the program's own clock;
  - late: a fifth, v8-split.js started after the agent (a shell waiting on
    a pipe execs node under its PID, so the --pid filter knows it), is
    checked as the plain run;
  - short: v8-split.js started after the agent for SHORT_SECONDS of CPU,
    exiting at once: <= 5 % of its samples keep a JavaScript frame unnamed
    (a function not seen lately wakes the agent, which reads the names
    while the process lives), >= 60 % name alphaWork or betaWork (the rest
    is node's start-up);
  - deopt: tests/workloads/v8-deopt.js under --trace-deopt: shapeWork is
    deoptimized (the trace says so) and >= 90 % of the samples have it as
    their leaf JavaScript frame, named with script and first line;
  - worker: >= 90 % of the worker thread's samples have spin as their leaf
    JavaScript frame;
  - inline: tests/workloads/v8-inline.js with node's default flags: the
    optimized frames of inlineWork carry the line their pc runs: >= 80 %
    of the samples with inlineWork on their stack have it on one of its
    two loops' lines, each >= 10 %; mix, which TurboFan inlines in the
    first loop, is a frame of its own above it in >= 5 % of them, >= 90 %
    of those on mix's line called from the first loop's;
  - lines: the interpreted frames of lineWork carry the line being run:
    >= 80 % of the samples with lineWork on their stack have it on one of
    its two loops' lines (LOOP-A, LOOP-B), each line >= 10 % of them,
    while its function keeps its first line;
  - the agent's exit log: <= 1 % of the JavaScript frames recorded in BPF
    stayed unnamed;
  - --perf-basic-prof run: the agent still names alphaWork and betaWork by
    V8's metadata, and the process's perf map names the same functions at the
    same script and line ("JS:*alphaWork /path/v8-split.js:14:19").
"""
import glob
import json
import os
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ports import free_port  # noqa: E402
import metricslib  # noqa: E402
import agentlib  # noqa: E402

SECONDS = 3
DEOPT_SECONDS = 2
SHORT_SECONDS = 0.5
WORKER_SECONDS = 2
FREQ = 997
INTERPRETED = 4
UNKNOWN = 3
V8_FRAME_FLAG = 1 << 62  # bpf/v8frame.h: what an unnamed V8 frame keeps as its address
WARM_UP = ("warmUp", "warmSlice")



TRACE = []


def first_line(p, want):
    """The first line of p's stdout that want() accepts; the lines before it (--trace-deopt's) go to TRACE."""
    while True:
        line = p.stdout.readline()
        if not line:
            return ""
        line = line.strip()
        if want(line):
            return line
        TRACE.append(line)



def cpuprofile_shares(path, since_us):
    """Self samples per function name in a .cpuprofile from since_us (CLOCK_MONOTONIC, which V8's profile
    timestamps use: the agent is compared after the start line only), leaving out the warm-up (samples with
    warmSlice or warmUp on their stack) and V8's pseudo nodes."""
    prof = json.load(open(path))
    times = []
    t = prof["startTime"]
    for d in prof["timeDeltas"]:
        t += d
        times.append(t)
    nodes = {n["id"]: n for n in prof["nodes"]}
    parent = {}
    for n in prof["nodes"]:
        for ch in n.get("children", []):
            parent[ch] = n["id"]

    def warm(nid):
        while nid is not None:
            if nodes[nid]["callFrame"]["functionName"] in WARM_UP:
                return True
            nid = parent.get(nid)
        return False
    counts = {}
    for sid, ts in zip(prof["samples"], times):
        name = nodes[sid]["callFrame"]["functionName"] if sid in nodes else ""
        if ts < since_us or name.startswith("(") or warm(sid):
            continue
        counts[name] = counts.get(name, 0) + 1
    total = sum(counts.values())
    return {k: 100.0 * v / total for k, v in counts.items()} if total else {}


class Names:
    def __init__(self, out):
        self.out = out

    def js(self, s):
        """The sample's named JavaScript frames, leaf first: (name, file, start_line, runtime)."""
        res = []
        for f in self.out.frames(s):
            if f.kind != INTERPRETED:
                continue
            fd = self.out.functions.get(f.function_id)
            if fd is None:
                raise AssertionError("frame names function %s that the file never defined" % f.function_id.hex())
            res.append((fd.name, fd.file_name, fd.start_line, fd.runtime))
        return res

    def leaf_shares(self, samples):
        counts = {}
        for s in samples:
            js = self.js(s)
            if js:
                counts[js[0][0]] = counts.get(js[0][0], 0) + s.count
        total = sum(counts.values())
        return counts, total


def main():
    agentlib.require_root_bpf(needs=("table unwinding",))
    env = agentlib.Env()
    node = subprocess.run(["sh", "-c", "command -v node"], capture_output=True, text=True).stdout.strip()
    if not node:
        agentlib.skip("node (Node.js) not installed")
    node = os.path.realpath(node)
    c = agentlib.Checks()
    procs = {}
    agent = None
    split = os.path.join(env.src, "tests", "workloads", "v8-split.js")
    deopt = os.path.join(env.src, "tests", "workloads", "v8-deopt.js")
    deopt_line = agentlib.line_of(deopt, "function shapeWork(")
    lines = os.path.join(env.src, "tests", "workloads", "v8-lines.js")
    inline = os.path.join(env.src, "tests", "workloads", "v8-inline.js")
    in_a, in_b = agentlib.line_of(inline, "// LOOP-A"), agentlib.line_of(inline, "// LOOP-B")
    in_mix, in_work = agentlib.line_of(inline, "// MIX"), agentlib.line_of(inline, "function inlineWork(")
    loop_a, loop_b = agentlib.line_of(lines, "// LOOP-A"), agentlib.line_of(lines, "// LOOP-B")
    line_work = agentlib.line_of(lines, "function lineWork(")
    alpha_line = agentlib.line_of(split, "function alphaWork(")
    beta_line = agentlib.line_of(split, "function betaWork(")
    prof_dir = os.path.join(env.tmp, "prof")
    try:
        runs = {
            "plain": [node, split, str(SECONDS)],
            "cpuprof": [node, "--cpu-prof", "--cpu-prof-dir=" + prof_dir, split, str(SECONDS)],
            "perfmap": [node, "--perf-basic-prof", split, str(SECONDS)],
            "worker": [node, os.path.join(env.src, "tests", "workloads", "v8-worker.js"), str(WORKER_SECONDS)],
            "deopt": [node, "--trace-deopt", deopt, str(DEOPT_SECONDS)],
            "lines": [node, "--max-opt=0", lines, str(SECONDS)],
            "inline": [node, inline, str(SECONDS)],
        }
        pids = {}
        for k, argv in runs.items():
            procs[k] = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=env.tmp)
            pids[k] = int(first_line(procs[k], lambda x: x.isdigit()))
        # Started after the agent: a shell that waits for a line, then execs node under its own PID (known now).
        procs["late"] = subprocess.Popen(["sh", "-c", 'read go; exec "$@"', "sh", node, split, str(SECONDS)],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=env.tmp)
        pids["late"] = procs["late"].pid
        # Short-lived: runs SHORT_SECONDS of CPU at once and exits; named only if the agent reads its functions
        # while it lives (a new function wakes the agent).
        procs["short"] = subprocess.Popen(["sh", "-c", 'read go; exec "$@"', "sh", node, split, str(SHORT_SECONDS)],
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=env.tmp)
        pids["short"] = procs["short"].pid
        metrics_port = free_port()
        cfg = os.path.join(env.tmp, "agent.yaml")
        with open(cfg, "w") as f:
            f.write("profiling: {report_interval: 1s}\n"
                    "telemetry: {metrics: {address: 127.0.0.1:%d}}\n" % metrics_port)
        out_path = os.path.join(env.tmp, "out.pb")
        args = ["--config", cfg, "--frequency", str(FREQ), "--duration", "300", "--output", out_path,
                "--log-level", "info"]
        for p in pids.values():
            args += ["--pid", str(p)]
        agent, log = agentlib.start_agent(env, args)
        if not c.check(agent is not None, "agent started"):
            return c.finish()

        def named():
            try:
                text = metricslib.scrape(metrics_port, timeout=5)
            except OSError:
                return None
            v = metricslib.parse(text).get('stackrelay_agent_nodejs_frames_total{result="recorded"}')
            n = metricslib.parse(text).get("stackrelay_agent_nodejs_processes_total")
            # The worker's process is idle until released: it is given to BPF at its first sample.
            return v and v > 0 and n and n >= len(runs) - 1
        c.check(agentlib.wait_for(named, 120), "the warm-ups' JavaScript frames are recorded in BPF for the %d "
                "warming processes" % (len(runs) - 1))
        # The workloads waiting their turn are stopped: on this 2-CPU runner their warm-ups would take CPU
        # from the one measured, and its own clock (wall time) would count their time slices.
        order = ("plain", "cpuprof", "perfmap", "worker", "deopt", "lines", "inline")
        for k in order:
            os.kill(pids[k], signal.SIGSTOP)
        go = {}
        go_mono = {}
        done = {}
        for k in order:
            os.kill(pids[k], signal.SIGCONT)
            go[k] = time.time_ns()
            go_mono[k] = time.monotonic_ns()
            procs[k].stdin.write("go\n")
            procs[k].stdin.flush()
            done[k] = first_line(procs[k], lambda x: x.startswith("done"))
            c.check(procs[k].wait(timeout=300) == 0 and done[k].startswith("done"),
                    "%s: workload spent its CPU budget (%s)" % (k, done[k]))
        # The late one: node starts now, warms up until the agent has named its frames, then runs.
        procs["late"].stdin.write("start\n")
        procs["late"].stdin.flush()
        c.check(int(procs["late"].stdout.readline()) == pids["late"], "late: node started under the gate's PID")

        def late_named():
            try:
                text = metricslib.scrape(metrics_port, timeout=5)
            except OSError:
                return None
            n = metricslib.parse(text).get("stackrelay_agent_nodejs_processes_total")
            return n and n >= len(pids) - 1
        c.check(agentlib.wait_for(late_named, 120), "late: the process started after the agent is given to the BPF namer")
        go["late"] = time.time_ns()
        procs["late"].stdin.write("go\n")
        procs["late"].stdin.flush()
        done["late"] = procs["late"].stdout.readline().strip()
        c.check(procs["late"].wait(timeout=300) == 0 and done["late"].startswith("done"),
                "late: workload spent its CPU budget (%s)" % done["late"])
        go["short"] = time.time_ns()
        procs["short"].stdin.write("start\ngo\n")
        procs["short"].stdin.flush()
        c.check(int(procs["short"].stdout.readline()) == pids["short"], "short: node started under the gate's PID")
        done["short"] = procs["short"].stdout.readline().strip()
        c.check(procs["short"].wait(timeout=300) == 0 and done["short"].startswith("done"),
                "short: workload spent its CPU budget and exited (%s)" % done["short"])
        time.sleep(1.5)  # the agent's next drain (1 s) takes the exited process's last samples
        rc, stderr = agentlib.stop_agent(agent, log)
        agent = None
        c.check(rc == 0, "agent exits 0 on SIGTERM (rc=%d)" % rc)
        js = {k: int(v) for k, v in (agentlib.logfmt_fields(stderr, "nodejs frames") or {}).items() if v.isdigit()}
        print("# nodejs frames: " + " ".join("%s=%d" % kv for kv in sorted(js.items())))
        c.check(js.get("frames", 0) > 0 and js.get("unnamed_frames", 0) <= 0.01 * js.get("frames", 0),
                "exit log: %d of %d JavaScript frames recorded in BPF stayed unnamed (<= 1%%)" %
                (js.get("unnamed_frames", 0), js.get("frames", 0)))

        out = agentlib.Output(env.pb, out_path)
        nm = Names(out)

        def main_samples(k):
            return [s for s in out.for_pid(pids[k]) if s.tid == pids[k] and s.start_time_unix_nano >= go[k]]

        # Plain run and the one started after the agent: names, script, lines, runtime, and the split against
        # the workload's own clock.
        for run in ("plain", "late"):
            m = re.search(r"alpha_ns=(\d+) beta_ns=(\d+)", done[run])
            own = 100.0 * int(m.group(1)) / (int(m.group(1)) + int(m.group(2))) if m else -100
            samples = main_samples(run)
            total = sum(s.count for s in samples)
            counts, _ = nm.leaf_shares(samples)
            a, b = counts.get("alphaWork", 0), counts.get("betaWork", 0)
            c.check(total >= 1000 and a + b >= 0.9 * total,
                    "%s: %d of %d main-thread samples (%.1f%%) have alphaWork or betaWork as their leaf "
                    "JavaScript frame (>= 90%%); leaves: %s" %
                    (run, a + b, total, 100.0 * (a + b) / total if total else 0,
                     sorted(counts.items(), key=lambda kv: -kv[1])[:6]))
            seen = {}
            for s in samples:
                for fr in nm.js(s):
                    seen.setdefault(fr[0], fr)
            for fname, line in (("alphaWork", alpha_line), ("betaWork", beta_line)):
                c.check(seen.get(fname) == (fname, split, line, "v8js"),
                        "%s: %s is named with its script, first line and runtime v8js (%s)" %
                        (run, fname, seen.get(fname)))
            # A frame's line is the one it runs (optimized and interpreted frames) or the first: within the body.
            stray = sum(s.count for s in samples for f in out.frames(s)
                        if f.kind == INTERPRETED and f.function_id in out.functions and
                        out.functions[f.function_id].name == "alphaWork" and not alpha_line <= f.line < beta_line)
            c.check(stray == 0, "%s: every alphaWork frame's line lies in its body, lines %d-%d (%d outside)" %
                    (run, alpha_line, beta_line - 1, stray))
            mine = 100.0 * a / (a + b) if a + b else -100
            c.check(abs(mine - own) <= 5,
                    "%s: alphaWork's share %.1f%% of the agent's samples vs %.1f%% of the workload's own clock "
                    "(+-5 points)" % (run, mine, own))
            for k in ("timedAlpha", "round", "run"):
                c.check(k in seen, "%s: the caller %s is named on the stacks" % (run, k))

        # --cpu-prof: the agent and V8's profiler agree on the top functions.
        profs = glob.glob(os.path.join(prof_dir, "*.cpuprofile"))
        if c.check(len(profs) == 1, "cpuprof: node wrote one .cpuprofile (%s)" % profs):
            ref = cpuprofile_shares(profs[0], go_mono["cpuprof"] // 1000)
            counts, total = nm.leaf_shares(main_samples("cpuprof"))
            counts = {k: v for k, v in counts.items() if k not in WARM_UP}
            total = sum(counts.values())
            top = sorted((k for k, v in ref.items() if v >= 5), key=lambda k: -ref[k])
            c.check(len(top) >= 2, "cpuprof: V8's profile has top functions %s" % top)
            m = re.search(r"alpha_ns=(\d+) beta_ns=(\d+)", done["cpuprof"])
            own = 100.0 * int(m.group(1)) / (int(m.group(1)) + int(m.group(2))) if m else -100
            a, b = ref.get("alphaWork", 0), ref.get("betaWork", 0)
            v8 = 100.0 * a / (a + b) if a + b else -100
            a, b = counts.get("alphaWork", 0), counts.get("betaWork", 0)
            # A frame's line is the one it runs (optimized and interpreted frames) or the first: within the body.
            stray = sum(s.count for s in samples for f in out.frames(s)
                        if f.kind == INTERPRETED and f.function_id in out.functions and
                        out.functions[f.function_id].name == "alphaWork" and not alpha_line <= f.line < beta_line)
            c.check(stray == 0, "%s: every alphaWork frame's line lies in its body, lines %d-%d (%d outside)" %
                    (run, alpha_line, beta_line - 1, stray))
            mine = 100.0 * a / (a + b) if a + b else -100
            print("# cpuprof: alphaWork's share of the two: own clock %.1f%%, V8's profiler %.1f%%, agent %.1f%%" %
                  (own, v8, mine))
            c.check(abs(mine - own) <= 5, "cpuprof: alphaWork's share %.1f%% of the agent's samples vs %.1f%% of "
                    "the workload's own clock (+-5 points)" % (mine, own))
            if abs(v8 - own) > 5:
                # V8's sampler is a thread of the process woken every millisecond: on a loaded runner it runs
                # late, mostly when the main thread enters the kernel (process.cpuUsage), and its samples
                # crowd onto the code that runs next. Its profile is then no reference.
                print("# cpuprof: V8's profile is %.1f points off the workload's own clock (a loaded runner): "
                      "not compared function by function" % abs(v8 - own))
                top = []
            for k in top:
                ours = 100.0 * counts.get(k, 0) / total if total else 0
                c.check(abs(ours - ref[k]) <= 5, "cpuprof: %s has %.1f%% of the agent's leaf JavaScript frames vs "
                        "%.1f%% of V8's self samples (+-5 points)" % (k, ours, ref[k]))

        # Short-lived: its functions are named although it is gone by the time its samples are read.
        samples = [s for s in out.for_pid(pids["short"]) if s.tid == pids["short"]]
        total = sum(s.count for s in samples)
        counts, _ = nm.leaf_shares(samples)
        a, b = counts.get("alphaWork", 0), counts.get("betaWork", 0)
        unnamed = sum(s.count for s in samples
                      if any(f.kind == UNKNOWN and f.address & V8_FRAME_FLAG for f in out.frames(s)))
        print("# short: %d samples, %d name alphaWork or betaWork, %d have an unnamed V8 frame; leaves: %s" %
              (total, a + b, unnamed, sorted(counts.items(), key=lambda kv: -kv[1])[:6]))
        c.check(total >= 100 and unnamed <= 0.05 * total,
                "short: %d of %d main-thread samples (%.1f%%) of a %.1f s process have a JavaScript frame left "
                "unnamed (<= 5%%)" % (unnamed, total, 100.0 * unnamed / total if total else 0, SHORT_SECONDS))
        c.check(a + b >= 0.6 * total, "short: %d of %d samples (%.1f%%) name alphaWork or betaWork as their leaf "
                "JavaScript frame (>= 60%%: the rest is node's start-up)" %
                (a + b, total, 100.0 * (a + b) / total if total else 0))

        # Deoptimizations: the function keeps its name through them.
        deopts = [t for t in TRACE if "shapeWork" in t and ("deoptimiz" in t.lower() or "bailout" in t.lower())]
        c.check(len(deopts) >= 1, "deopt: --trace-deopt shows shapeWork deoptimized %d times (>= 1)" % len(deopts))
        samples = main_samples("deopt")
        total = sum(s.count for s in samples)
        counts, _ = nm.leaf_shares(samples)
        seen = {}
        for s in samples:
            for fr in nm.js(s):
                seen.setdefault(fr[0], fr)
        c.check(total >= 500 and counts.get("shapeWork", 0) >= 0.9 * total,
                "deopt: %d of %d main-thread samples (%.1f%%) have shapeWork as their leaf JavaScript frame (>= 90%%); "
                "leaves: %s" % (counts.get("shapeWork", 0), total,
                                100.0 * counts.get("shapeWork", 0) / total if total else 0,
                                sorted(counts.items(), key=lambda kv: -kv[1])[:6]))
        c.check(seen.get("shapeWork") == ("shapeWork", deopt, deopt_line, "v8js"),
                "deopt: shapeWork is named with its script and first line (%s)" % (seen.get("shapeWork"),))

        # Worker thread.
        wk = [s for s in out.for_pid(pids["worker"])
              if s.tid != pids["worker"] and s.start_time_unix_nano >= go["worker"]]
        wk_total = sum(s.count for s in wk)
        counts, _ = nm.leaf_shares(wk)
        c.check(wk_total >= 300 and counts.get("spin", 0) >= 0.9 * wk_total,
                "worker thread: %d of %d samples (%.1f%%) have spin as their leaf JavaScript frame (>= 90%%)" %
                (counts.get("spin", 0), wk_total, 100.0 * counts.get("spin", 0) / wk_total if wk_total else 0))

        # Interpreted frames: the line being run, per sample.
        samples = main_samples("lines")
        at = {}
        starts = set()
        for s in samples:
            for f in out.frames(s):
                fd = out.functions.get(f.function_id) if f.kind == INTERPRETED else None
                if fd is not None and fd.name == "lineWork":
                    at[f.line] = at.get(f.line, 0) + s.count
                    starts.add(fd.start_line)
                    break
        total = sum(at.values())
        a, b = at.get(loop_a, 0), at.get(loop_b, 0)
        print("# lines: lineWork's frames by line (LOOP-A %d, LOOP-B %d): %s" %
              (loop_a, loop_b, sorted(at.items(), key=lambda kv: -kv[1])[:6]))
        c.check(total >= 500 and a + b >= 0.8 * total,
                "lines: %d of %d samples with lineWork (%.1f%%) have it on line %d or %d (>= 80%%)" %
                (a + b, total, 100.0 * (a + b) / total if total else 0, loop_a, loop_b))
        c.check(total and a >= 0.1 * total and b >= 0.1 * total,
                "lines: each loop's line has >= 10%% of them (%d: %d, %d: %d)" % (loop_a, a, loop_b, b))
        c.check(starts == {line_work}, "lines: lineWork's function keeps its first line %d (%s)" % (line_work, starts))

        # Optimized frames: the line their pc runs, and the function TurboFan inlined there as a frame of its own.
        samples = main_samples("inline")
        at = {}
        starts = set()
        mixed = mixed_at = 0
        for s in samples:
            js = [(out.functions[f.function_id], f.line) for f in out.frames(s)
                  if f.kind == INTERPRETED and f.function_id in out.functions]
            for i, (fd, line) in enumerate(js):
                if fd.name != "inlineWork":
                    continue
                at[line] = at.get(line, 0) + s.count
                starts.add(fd.start_line)
                if i > 0 and js[i - 1][0].name == "mix":
                    mixed += s.count
                    if js[i - 1][1] == in_mix and line == in_a:
                        mixed_at += s.count
                break
        total = sum(at.values())
        a, b = at.get(in_a, 0), at.get(in_b, 0)
        print("# inline: inlineWork's frames by line (LOOP-A %d, LOOP-B %d): %s; mix inlined above it in %d" %
              (in_a, in_b, sorted(at.items(), key=lambda kv: -kv[1])[:6], mixed))
        c.check(total >= 500 and a + b >= 0.8 * total,
                "inline: %d of %d samples with inlineWork (%.1f%%) have it on line %d or %d (>= 80%%)" %
                (a + b, total, 100.0 * (a + b) / total if total else 0, in_a, in_b))
        c.check(total and a >= 0.1 * total and b >= 0.1 * total,
                "inline: each loop's line has >= 10%% of them (%d: %d, %d: %d)" % (in_a, a, in_b, b))
        c.check(total and mixed >= 0.05 * total and mixed_at >= 0.9 * mixed,
                "inline: mix, inlined in inlineWork, is a frame of its own in %d of them (>= 5%%), %d of those "
                "on its line %d called from line %d (>= 90%%)" % (mixed, mixed_at, in_mix, in_a))
        c.check(starts == {in_work}, "inline: inlineWork's function keeps its first line %d (%s)" % (in_work, starts))

        # --perf-basic-prof: the metadata's names and the perf map's agree.
        samples = main_samples("perfmap")
        seen = {}
        for s in samples:
            for fr in nm.js(s):
                seen.setdefault(fr[0], fr)
        perf_map = "/tmp/perf-%d.map" % pids["perfmap"]
        text = open(perf_map).read() if os.path.exists(perf_map) else ""
        for fname, line in (("alphaWork", alpha_line), ("betaWork", beta_line)):
            ours = seen.get(fname)
            c.check(ours == (fname, split, line, "v8js"), "perfmap: the agent names %s from V8's metadata (%s)" %
                    (fname, ours))
            pat = re.compile(r"^[0-9a-f]+ [0-9a-f]+ \w+:[*~^+]?%s %s:%d:\d+$" % (fname, re.escape(split), line), re.M)
            c.check(bool(pat.search(text)), "perfmap: %s names %s at %s:%d as well" % (perf_map, fname, split, line))
        try:
            os.unlink(perf_map)
        except OSError:
            pass
        return c.finish()
    finally:
        for p in list(procs.values()) + [agent]:
            if p and p.poll() is None:
                p.kill()
                p.wait()
        if os.environ.get("SR_NODE_KEEP"):
            import shutil
            shutil.copy(os.path.join(env.tmp, "out.pb"), os.environ["SR_NODE_KEEP"])
        env.cleanup()


if __name__ == "__main__":
    sys.exit(main())
