#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Java frames unwound and named, without flags (real eBPF, Debian's OpenJDK).

tests/workloads/JavaHot.java is compiled (javac -g; its shared method body written
out by tests/workloads/javasrc.py) and run three times, one
after the other: as users run Java (no flags: the interpreter, C1 and C2,
with C2's inlining), with -Xint (every frame interpreted) and with
-XX:TieredStopAtLevel=1 (C1 only). Each run prints its pid and waits; the
agent (--pid filter, --output, java.enabled by default) starts, and once its
/metrics count the JVM as given to the walker the workload is released and
spends SECONDS of CPU in main -> alpha x 11 -> spin -> mid -> work.
Checked for each run, over the samples whose stack holds a JavaHot frame:
  - >= 90 % hold the Java chain in order from their leaf Java frame on (work,
    mid (inlined into spin by C2 in the plain run), spin, eleven alpha, main:
    a sample in spin's own code holds spin < alpha x 11 < main), and >= 70 %
    all of it; every frame of it an INTERPRETED frame of a "jvm" function
    named JavaHot.<method> with file JavaHot.java;
  - >= 90 % go on below main to native code (the stack reaches the thread's
    root: the frame below the Java frames is named, the last frame is the
    thread's entry in libc);
  - the lines: mid's, spin's, alpha's (the caller frames) and main's are the
    lines of their calls in JavaHot.java; in the -Xint run work's line is one
    of its body's;
  - the agent's exit log: >= 90 % of the table-unwound stacks complete, and
    <= 5 % of the Java frames recorded in BPF stayed unnamed.
Then tests/workloads/JavaSplit.java, a split it times itself (alphaWork, too
big to inline, and betaWork, which C2 inlines into its caller), is started
after the agent (a shell waiting on a pipe execs java under its PID, so the
--pid filter knows it) with JFR recording (-XX:StartFlightRecording,
settings=profile, a sample every 2 ms; the agent at 997 Hz). Checked:
  - the JVM started after the agent is given to the walker;
  - >= 95 % of the table-unwound stacks complete over the workload (from its
    go on: the agent's /metrics read at go are taken from its exit log's
    totals, so the JVM's start-up, where a loaded runner may not have built
    every table yet, is left out; the ends by reason are printed);
  - of the main thread's samples after the program's start line whose leaf
    Java frame is alphaWork or betaWork, alphaWork's share is within +-5
    points of the program's own clock (System.nanoTime around each call,
    rounds held up for a CPU or a safepoint left out) over the same windows
    (the program prints its totals every 50 ms); JFR's share of its
    jdk.ExecutionSample top frames (`jfr print --json`) over the same
    methods, a second estimate with errors of its own (it throttles itself
    and runs late on a loaded runner), is printed beside it.
Last, tests/workloads/JavaUnload.java loads a class Gen UNLOAD_PHASES times,
each from a directory of its own where its one method is named phase0,
phase1, ... (javac here), runs it hot for PHASE_SECONDS, and drops and
unloads it (System.gc()); HotSpot puts each new Gen where the last one was
(-Xlog:class+unload shows the same Klass address every time), so its
methods' addresses are reused. Checked: of the samples in aggregation
windows that lie inside phase K, every Gen frame is named Gen.phaseK (none
after another phase's method), and each phase has >= 20 such frames.
And tests/workloads/JavaDeopt.java: run() is compiled by C2 with
Circle.area inlined behind a type check, then called with Squares, which
deoptimizes it and has it compiled again (-XX:+PrintCompilation, which only
prints, shows "made not entrant"). Checked: in windows inside the Circle
phase at most 2 % of the frames are named Square.area and in those inside
the Square phase Circle.area (a sampled leaf pc is named by the next debug
information in its code, which can be the other shape's inlined call);
each phase has >= 20 frames of its own shape's method.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ports import free_port  # noqa: E402
import agentlib  # noqa: E402
import metricslib  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "workloads"))
import javasrc  # noqa: E402

SECONDS = 3
FREQ = 97
SPLIT_FREQ = 997
SPLIT_SECONDS = 5
UNLOAD_PHASES = 4
PHASE_SECONDS = 2.5
INTERPRETED = 4
JIT = 5
UNKNOWN = 3
CHAIN = ["JavaHot.work", "JavaHot.mid", "JavaHot.spin"] + ["JavaHot.alpha"] * 11 + ["JavaHot.main"]
RUNS = [("plain", []), ("interpreted", ["-Xint"]), ("c1", ["-XX:TieredStopAtLevel=1"])]


def start_agent(env, label, pid, freq):
    """The agent on one JVM (--pid, --output, 1 s windows, metrics on a free port): (proc, log, port, output)."""
    port = free_port()
    cfg = os.path.join(env.tmp, "agent-%s.yaml" % label)
    with open(cfg, "w") as f:
        f.write("profiling: {report_interval: 1s}\n"
                "telemetry: {metrics: {address: 127.0.0.1:%d}}\n" % port)
    out_path = os.path.join(env.tmp, "out-%s.pb" % label)
    agent, log = agentlib.start_agent(env, ["--config", cfg, "--pid", str(pid), "--frequency", str(freq),
                                            "--duration", "300", "--output", out_path, "--log-level", "info"])
    return agent, log, port, out_path


def java_known(port):
    """Whether the agent has given a JVM to the walker (once its tables are filled in, at start-up)."""
    def known():
        try:
            return metricslib.parse(metricslib.scrape(port, timeout=5)).get(
                "stackrelay_agent_java_processes_total", 0) >= 1
        except OSError:
            return False
    return bool(agentlib.wait_for(known, 60, step=0.2))


def unwind_counts(port):
    """The agent's table-unwound stacks so far ("stacks") and their ends by reason, from /metrics ({} when
    it does not answer)."""
    try:
        text = metricslib.scrape(port, timeout=5)
    except OSError:
        return {}
    out = {k: int(v) for k, v in metricslib.by_label(text, "stackrelay_agent_unwind_stops_total", "reason").items()}
    out["stacks"] = int(metricslib.total(text, "stackrelay_agent_unwind_stacks_total", method="table"))
    return out


def kill(*procs):
    for p in procs:
        if p and p.poll() is None:
            p.kill()
            p.wait()


def body_lines(path, method):
    """The lines of a method's body in the source (from its declaration to the next method's)."""
    lines = open(path).read().splitlines()
    start = next(i for i, l in enumerate(lines, 1) if re.search(r"static \w+ %s\(" % method, l))
    end = next((i for i, l in enumerate(lines, 1) if i > start and re.search(r"^\s+(public )?static ", l)),
               len(lines))
    return set(range(start, end))


def java_frames(out, sample):
    """(name, file, line, runtime) of the sample's named Java method frames, leaf first, and the index of the
    outermost one in the stack's frames (-1 when none)."""
    res, last = [], -1
    frames = out.frames(sample)
    for i, f in enumerate(frames):
        if f.kind != INTERPRETED:
            continue
        fn = out.functions.get(f.function_id)
        if fn is None or fn.runtime != "jvm":
            continue
        res.append((fn.name, fn.file_name, f.line, fn.runtime))
        last = i
    return res, last


def one_run(env, c, java, classes, src, label, flags):
    w = agent = None
    try:
        w = subprocess.Popen([java] + flags + ["-cp", classes, "JavaHot", str(SECONDS)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, cwd=env.tmp)
        pid = int(w.stdout.readline())
        agent, log, port, out_path = start_agent(env, label, pid, FREQ)
        if agent is None:
            c.check(False, "%s: the agent starts" % label)
            return
        c.check(java_known(port), "%s: the agent gives the JVM to the Java walker" % label)
        w.stdin.write("go\n")
        w.stdin.flush()
        done = w.stdout.readline()
        w.wait(timeout=120)
        c.check(done.startswith("done"), "%s: the workload ran (%r)" % (label, done.strip()))
        time.sleep(1.5)
        rc, stderr = agentlib.stop_agent(agent, log)
        agent = None
        c.check(rc == 0, "%s: the agent exits 0 (got %s)" % (label, rc))
        out = agentlib.Output(env.pb, out_path)
        check_samples(c, out, pid, src, label)
        unw = agentlib.logfmt_fields(stderr, "unwinding stopped") or {}
        stacks = int(unw.get("stacks_table", 0))
        complete = int(unw.get("end_complete", 0))
        c.check(stacks > 0 and complete >= 0.9 * stacks,
                "%s: >= 90%% of table-unwound stacks complete (%d of %d; %s)" % (label, complete, stacks, unw))
        jf = agentlib.logfmt_fields(stderr, "java frames") or {}
        recorded = int(jf.get("frames_recorded", 0))
        unnamed = int(jf.get("unnamed_frames", 0))
        c.check(recorded > 0 and unnamed <= 0.05 * recorded,
                "%s: <= 5%% of Java frames recorded stay unnamed (%d of %d)" % (label, unnamed, recorded))
    finally:
        kill(w, agent)


def check_samples(c, out, pid, src, label):
    samples = out.for_pid(pid)
    java = []
    for s in samples:
        jf, last = java_frames(out, s)
        if any(n.startswith("JavaHot.") for n, _, _, _ in jf):
            java.append((s, jf, last))
    total = sum(s.count or 1 for s, _, _ in java)
    c.check(total >= 50, "%s: >= 50 samples hold a JavaHot frame (%d)" % (label, total))
    if not total:
        return
    whole = full = below = 0
    lines = {"JavaHot.mid": agentlib.line_of(src, "return work(s, x) + 1;"),
             "JavaHot.spin": agentlib.line_of(src, "s = mid(s, i);"),
             "JavaHot.main": agentlib.line_of(src, "s += alpha(10);")}
    alpha_call = agentlib.line_of(src, "return alpha(depth - 1) + 1;")
    alpha_leaf = agentlib.line_of(src, "return spin(3000);")
    work_body = body_lines(src, "work")
    bad_lines = {}
    for s, jf, last in java:
        n = s.count or 1
        names = [x[0] for x in jf]
        # Time spent in spin, alpha or main themselves is theirs: the chain may start anywhere in CHAIN.
        tail = CHAIN[len(CHAIN) - len(names):] if len(names) <= len(CHAIN) else None
        if names == CHAIN:
            full += n
        if names == tail and all(f == "JavaHot.java" for _, f, _, _ in jf):
            whole += n
            skip = len(CHAIN) - len(names)
            for i, (name, _, line, _) in enumerate(jf, skip):
                want = lines.get(name)
                if name == "JavaHot.alpha":
                    want = alpha_leaf if i == 3 else alpha_call
                if i == skip and name != "JavaHot.work":
                    continue  # a leaf's line is where it runs, not a call
                if name == "JavaHot.work":
                    if label == "interpreted" and line not in work_body:
                        bad_lines[(name, line)] = bad_lines.get((name, line), 0) + n
                    continue
                if line != want:
                    bad_lines[(name, line)] = bad_lines.get((name, line), 0) + n
        frames = out.frames(s)
        # Below main: the call stub (named after its code blob), JavaCalls and the launcher's threads, to the root.
        if last >= 0 and last + 1 < len(frames) and frames[last + 1].kind != UNKNOWN and \
                all(f.kind != UNKNOWN for f in frames[last + 1:]) and len(frames) - last - 1 >= 3:
            below += n
    c.check(whole >= 0.9 * total, "%s: >= 90%% of Java samples hold the chain work < mid < spin < alpha x 11 < "
            "main from their leaf Java frame on (%d of %d)" % (label, whole, total))
    c.check(full >= 0.7 * total, "%s: >= 70%% of Java samples hold all of it, work their leaf (%d of %d)" %
            (label, full, total))
    c.check(below >= 0.9 * total, "%s: >= 90%% of Java samples go on below main to named native frames "
            "(%d of %d)" % (label, below, total))
    c.check(sum(bad_lines.values()) <= 0.05 * max(whole, 1),
            "%s: frames' lines are their calls' lines (wrong: %s)" % (label, bad_lines))
    for s, jf, last in java[:1]:
        print("%s: a stack: %s" % (label, " < ".join("%s:%d" % (n, l) for n, _, l, _ in jf)))


def leaf_java(out, sample):
    jf, _ = java_frames(out, sample)
    return jf[0][0] if jf else None


def jfr_top_shares(jfr, path, methods):
    """Top-frame counts of JFR's execution samples over the given methods (class.method)."""
    r = subprocess.run([jfr, "print", "--json", "--events", "jdk.ExecutionSample", path], capture_output=True,
                       text=True, timeout=120)
    counts = {m: 0 for m in methods}
    for ev in json.loads(r.stdout)["recording"]["events"]:
        frames = ev["values"]["stackTrace"]["frames"]
        if not frames:
            continue
        m = frames[0]["method"]
        name = "%s.%s" % (m["type"]["name"].replace("/", "."), m["name"])
        if name in counts:
            counts[name] += 1
    return counts


def clock_share(marks, lo, hi, wall_offset):
    """alphaWork's share of the program's clock between the first and last of its marks (a "marks T A B ..."
    line: System.nanoTime, CLOCK_MONOTONIC, and the running totals) that lie within [lo, hi] (Unix ns)."""
    if not marks or marks[0] != "marks" or lo is None or (len(marks) - 1) % 3:
        return None
    v = [int(x) for x in marks[1:]]
    inside = [v[i:i + 3] for i in range(0, len(v), 3) if lo <= v[i] + wall_offset <= hi]
    if len(inside) < 2:
        return None
    da, db = inside[-1][1] - inside[0][1], inside[-1][2] - inside[0][2]
    return 100.0 * da / (da + db) if da + db > 0 else None


def split_run(env, c, java, classes):
    """JavaSplit started after the agent, with JFR: the split against its own clock and against JFR."""
    jfr = shutil.which("jfr") or os.path.join(os.path.dirname(os.path.realpath(java)), "jfr")
    rec = os.path.join(env.tmp, "split.jfr")
    w = agent = None
    try:
        w = subprocess.Popen(["sh", "-c", 'read x; exec "$0" "$@"', java, "-Xlog:disable", "-Xlog:all=warning:stderr",
                              "-XX:StartFlightRecording=filename=%s,settings=profile,"
                              "jdk.ExecutionSample#period=2ms" % rec,
                              "-cp", classes,
                              "JavaSplit", str(SPLIT_SECONDS)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             cwd=env.tmp)
        pid = w.pid
        # 997 Hz, JFR every 2 ms: thousands of samples each, so 5 points is several standard errors.
        agent, log, port, out_path = start_agent(env, "split", pid, SPLIT_FREQ)
        if agent is None:
            c.check(False, "split: the agent starts")
            return
        w.stdin.write("start\n")
        w.stdin.flush()
        # JFR prints its start-up lines first.
        line = w.stdout.readline()
        while line and not line.strip().isdigit():
            line = w.stdout.readline()
        c.check(line.strip() == str(pid), "split: java started under the gate's PID (%r)" % line.strip())
        c.check(java_known(port), "split: the JVM started after the agent is given to the Java walker")
        at_go = unwind_counts(port)
        w.stdin.write("go\n")
        w.stdin.flush()
        started = w.stdout.readline()
        go = time.time_ns()
        wall_offset = go - time.monotonic_ns()
        done = w.stdout.readline().split()
        marks = w.stdout.readline().split()
        w.wait(timeout=120)
        c.check(started.startswith("start") and len(done) == 5 and done[0] == "done",
                "split: the workload ran (%r %r)" % (started.strip(), done))
        time.sleep(1.5)
        rc, stderr = agentlib.stop_agent(agent, log)
        agent = None
        c.check(rc == 0, "split: the agent exits 0 (got %s)" % rc)
        unw = agentlib.logfmt_fields(stderr, "unwinding stopped") or {}
        # Over the workload: the exit log's totals less the counts at go (the JVM's start-up left out).
        ends = {k[len("end_"):]: int(v) - int(at_go.get(k[len("end_"):], 0))
                for k, v in unw.items() if k.startswith("end_")}
        stacks = int(unw.get("stacks_table", 0)) - int(at_go.get("stacks", 0))
        complete = ends.get("complete", 0)
        c.check(bool(at_go) and stacks > 0 and complete >= 0.95 * stacks,
                "split: >= 95%% of the workload's table-unwound stacks complete (%d of %d; ends %s; whole run %s)"
                % (complete, stacks, {k: v for k, v in ends.items() if v}, unw))
        if len(done) != 5:
            return
        own = 100.0 * int(done[1]) / (int(done[1]) + int(done[2]))
        out = agentlib.Output(env.pb, out_path)
        counts = {"JavaSplit.alphaWork": 0, "JavaSplit.betaWork": 0}
        lo = hi = None
        for s in out.for_pid(pid):
            if s.start_time_unix_nano < go:
                continue
            lo = min(lo or s.start_time_unix_nano, s.start_time_unix_nano)
            hi = max(hi or s.end_time_unix_nano, s.end_time_unix_nano)
            leaf = leaf_java(out, s)
            if leaf in counts:
                counts[leaf] += s.count or 1
        a, b = counts["JavaSplit.alphaWork"], counts["JavaSplit.betaWork"]
        ours = 100.0 * a / (a + b) if a + b else -100
        # The program's clock over the windows counted: the split drifts while C2 compiles.
        within = clock_share(marks, lo, hi, wall_offset)
        c.check(a + b >= 1000 and within is not None and abs(ours - within) <= 5,
                "split: alphaWork's share of the leaf frames is within 5 points of the program's clock over "
                "the same windows (agent %.1f%% of %d, clock %s%%, %.1f%% over the whole run, %s rounds held up)"
                % (ours, a + b, "%.1f" % within if within is not None else "-", own, done[4]))
        if within is None:
            return
        if not os.path.exists(jfr):
            print("# no jfr tool beside java: the JFR comparison is skipped")
            return
        jc = jfr_top_shares(jfr, rec, counts.keys())
        ja, jb = jc["JavaSplit.alphaWork"], jc["JavaSplit.betaWork"]
        theirs = 100.0 * ja / (ja + jb) if ja + jb else -100
        # JFR is a second estimate of the same clock, with errors of its own (it throttles its sampler on a
        # loaded runner, and its samples crowd onto what runs after a late wake-up): it is printed beside the
        # agent's, and the agent is held to the program's clock (above), the truth both estimate.
        print("# split: JFR's share %.1f%% of %d samples, %.1f points off the clock over the whole run; the agent's "
              "%.1f%%, %.1f points off the clock over its windows" % (theirs, ja + jb, abs(theirs - own), ours,
                                                                      abs(ours - within)))
    finally:
        kill(w, agent)


def phase_frames(out, pid, phases, own, rival):
    """Over the samples in windows that lie inside one phase (k, start, end): the Java frames named own(k),
    by phase, and those rival(name, k) calls another's, by (phase, name)."""
    right = {k: 0 for k, _, _ in phases}
    wrong = {}
    for s in out.for_pid(pid):
        phase = [k for k, a, b in phases if a <= s.start_time_unix_nano and s.end_time_unix_nano <= b]
        if not phase:
            continue
        k = phase[0]
        for name, _, _, _ in java_frames(out, s)[0]:
            if name == own(k):
                right[k] += s.count or 1
            elif rival(name, k):
                wrong[(k, name)] = wrong.get((k, name), 0) + (s.count or 1)
    return right, wrong


def unload_run(env, c, java, classes):
    """Classes unloaded and their methods' memory reused: frames keep the name of the method that ran."""
    dirs = []
    for k in range(UNLOAD_PHASES):
        d = os.path.join(env.tmp, "gen%d" % k)
        os.makedirs(d)
        with open(os.path.join(d, "Gen.java"), "w") as f:
            f.write("public class Gen {\n"
                    "    public static long phase%d(long s) {\n"
                    "        for (int i = 0; i < 20000; i++)\n"
                    "            s = s * 31 + (i ^ %d);\n"
                    "        return s;\n"
                    "    }\n"
                    "}\n" % (k, k))
        subprocess.run([shutil.which("javac"), "-d", d, os.path.join(d, "Gen.java")], check=True)
        dirs.append(d)
    w = agent = None
    try:
        w = subprocess.Popen([java, "-cp", classes, "JavaUnload", str(PHASE_SECONDS)] + dirs, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, cwd=env.tmp)
        pid = int(w.stdout.readline())
        agent, log, _, out_path = start_agent(env, "unload", pid, FREQ)
        if agent is None:
            c.check(False, "unload: the agent starts")
            return
        # System.nanoTime is CLOCK_MONOTONIC: the phases' bounds in wall-clock time, as the samples carry.
        offset = time.time_ns() - time.monotonic_ns()
        w.stdin.write("go\n")
        w.stdin.flush()
        phases = []
        for line in w.stdout:
            f = line.split()
            if f and f[0] == "phase":
                phases.append((int(f[1]), int(f[2]) + offset, int(f[3]) + offset))
            if f and f[0] == "done":
                break
        w.wait(timeout=120)
        c.check(len(phases) == UNLOAD_PHASES, "unload: the workload ran %d phases" % len(phases))
        time.sleep(1.5)
        rc, _ = agentlib.stop_agent(agent, log)
        agent = None
        c.check(rc == 0, "unload: the agent exits 0 (got %s)" % rc)
        out = agentlib.Output(env.pb, out_path)
        right, wrong = phase_frames(out, pid, phases, lambda k: "Gen.phase%d" % k,
                                    lambda name, k: name.startswith("Gen.") and name != "Gen.phase%d" % k)
        c.check(not wrong, "unload: no Gen frame is named after another phase's method (wrong: %s)" % wrong)
        c.check(all(v >= 20 for v in right.values()),
                "unload: each phase has >= 20 Gen frames named after its own method (%s)" % right)
    finally:
        kill(w, agent)


def deopt_run(env, c, java, classes):
    """A compiled method deoptimized and compiled again: frames keep the name of the code that ran."""
    w = agent = None
    try:
        # The JVM's own output (PrintCompilation) goes to stderr, a file: on stdout its lines, written by
        # compiler threads, could land in the middle of the program's.
        vm_log = os.path.join(env.tmp, "deopt-vm.log")
        with open(vm_log, "w") as vm_out:
            w = subprocess.Popen([java, "-XX:+PrintCompilation", "-XX:+DisplayVMOutputToStderr", "-cp", classes,
                                  "JavaDeopt", str(PHASE_SECONDS)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=vm_out, text=True, cwd=env.tmp)
        line = w.stdout.readline()
        while line and not line.strip().isdigit():
            line = w.stdout.readline()
        pid = int(line)
        agent, log, _, out_path = start_agent(env, "deopt", pid, FREQ)
        if agent is None:
            c.check(False, "deopt: the agent starts")
            return
        offset = time.time_ns() - time.monotonic_ns()
        w.stdin.write("go\n")
        w.stdin.flush()
        phases = []
        for line in w.stdout:
            f = line.split()
            if f and f[0] == "phase":
                phases.append((int(f[1]), int(f[2]) + offset, int(f[3]) + offset))
            elif f and f[0] == "done":
                break
        w.wait(timeout=120)
        # C2's code of run() (tier 4, not an OSR compilation) made not entrant: only a deoptimization does that.
        deopt = any(re.search(r"^\s*\d+\s+\d+\s+4\s+JavaDeopt::run \(.*made not entrant", line)
                    for line in open(vm_log))
        c.check(len(phases) == 2, "deopt: the workload ran 2 phases")
        c.check(deopt, "deopt: C2's JavaDeopt.run was made not entrant (PrintCompilation): deoptimized")
        time.sleep(1.5)
        rc, _ = agentlib.stop_agent(agent, log)
        agent = None
        c.check(rc == 0, "deopt: the agent exits 0 (got %s)" % rc)
        out = agentlib.Output(env.pb, out_path)
        own = {0: "JavaDeopt$Circle.area", 1: "JavaDeopt$Square.area"}
        right, wrong = phase_frames(out, pid, phases, own.get, lambda name, k: name == own[1 - k])
        right = {0: 0, 1: 0, **right}  # both phases counted, even when the workload ran fewer
        # A sampled pc (the leaf compiled frame) is named by the next debug information in its code, which
        # in run()'s recompiled code can be the other shape's inlined call: a stray sample, never more.
        c.check(sum(wrong.values()) <= max(1, 0.02 * sum(right.values())),
                "deopt: at most 2%% of frames are named after the other phase's shape (wrong: %s)" % wrong)
        c.check(all(v >= 20 for v in right.values()),
                "deopt: each phase has >= 20 frames of its own shape's area (%s)" % right)
    finally:
        kill(w, agent)


def main():
    agentlib.require_root_bpf()
    env = agentlib.Env()
    java, javac = shutil.which("java"), shutil.which("javac")
    if not java or not javac:
        agentlib.skip("no JDK (java, javac: openjdk-17-jdk-headless, scripts/install-deps)")
    # The sources as compiled, their shared method bodies written out (javasrc.py): line lookups read these.
    sources = [javasrc.expand(os.path.join(env.src, "tests", "workloads", w), os.path.join(env.tmp, "src"))
               for w in ("JavaHot.java", "JavaSplit.java", "JavaUnload.java", "JavaDeopt.java")]
    src = sources[0]
    classes = os.path.join(env.tmp, "classes")
    subprocess.run([javac, "-g", "-d", classes] + sources, check=True)
    c = agentlib.Checks()
    for label, flags in RUNS:
        one_run(env, c, java, classes, src, label, flags)
    split_run(env, c, java, classes)
    unload_run(env, c, java, classes)
    deopt_run(env, c, java, classes)
    return c.finish()


if __name__ == "__main__":
    sys.exit(main())
