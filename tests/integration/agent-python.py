#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Python frames by name (real eBPF, Debian's /usr/bin/python3.11).

Scripts the test writes run behind gates (a shell blocked on a pipe, which
then execs python3 under the same PID), so the agent, started first with
--pid filters for exactly them, sees their whole life. One agent run at
997 Hz over:
  - hot.py: main_loop calls alpha (7 parts of work) and beta (3 parts of the
    same work) until the process has used SECONDS of CPU time (not wall
    time: the split does not depend on the load). Each round's length is
    drawn at random (the same for both): rounds of one length could beat
    with the sampling rate (1.5 s runs of pyenv's 3.11 split 65-75 %, where
    the binomial spread is about 1 point). The exported profile names
    alpha, beta, main_loop and <module> as INTERPRETED frames whose
    FunctionDef has the script's path, their first lines, and lines inside
    their bodies; alpha:beta within 5 points of 70:30; main_loop in >= 95 %
    of the samples that have a Python frame; alpha/beta -> main_loop ->
    <module> in that order, leaf first, and below them the native frames of
    the interpreter's start: Py_BytesMain and libc's __libc_start_main
    (nm -D; Debian's main tail-calls Py_BytesMain, so main itself is never
    on the stack).
  - ext.py: a thread (not the main one) compresses a large buffer with zlib
    in squeeze(), called from worker(): in the samples that hold a frame of
    libz, the first Python frame below the libz frames is squeeze (the
    extension's native frames sit above the Python frame that called it).
  - execer.py spins in spin() for 1 s of CPU, then execs qsortdeep (native)
    under the same PID: its Python samples are named, and none of the new
    image's samples has a Python frame or was walked as Python (the exec
    ends the process's interpreter: the agent's exit line counts no sample
    whose thread state was not found).
  - short.py, SHORT_RUNS times one after another: each uses SHORT_CPU
    seconds of CPU in brief_work() and exits; brief_work is named in >= 80 %
    of the samples that much CPU time yields (the interpreter's start before
    it takes more or less CPU with the host's load, so the process's other
    samples are not the measure).
Then, in a second agent run, hot.py (3 s of CPU each) under every other
CPython 3.8-3.13 this host has (pyenv's under /root/.pyenv/versions, or
SR_TEST_PYTHONS, a colon-separated list of interpreters; none: that part is
skipped with a message): each names alpha, beta and main_loop with the script's path and
lines inside them, the split within 5 points, main_loop in >= 95 % of the
samples with the script's frames (start-up imports differ between builds).
"""
import bisect
import glob
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import agentlib  # noqa: E402

FREQ = 997
SECONDS = 3
SHORT_RUNS = 4
SHORT_CPU = 0.3
USER = 1
INTERPRETED = 4
PYTHON = "/usr/bin/python3.11"

HOT = """\
import os, sys, time


def work(n):
    s = 0
    for i in range(n):
        s += i * i
    return s


def alpha(k):
    return work(700 * k)


def beta(k):
    return work(300 * k)


def main_loop(seconds):
    end = time.process_time() + seconds
    r = 1
    while time.process_time() < end:
        r = (r * 1103515245 + 12345) % 2147483648
        k = 5 + r % 11  # rounds of varying length, which cannot beat with the sampling rate
        alpha(k)
        beta(k)


main_loop(float(sys.argv[1]))
"""

# The split must come from alpha and beta themselves, not work(): work is called from both.
HOT_LINES = {"alpha": (11, 12), "beta": (15, 16), "main_loop": (19, 26), "work": (4, 8), "<module>": (1, 29)}

EXT = """\
import sys, threading, time, zlib

DATA = bytes(range(256)) * 4096 + bytes(i * 7 % 251 for i in range(1 << 20))


def squeeze():
    return len(zlib.compress(DATA, 9))


def worker(seconds):
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        squeeze()


t = threading.Thread(target=worker, args=(float(sys.argv[1]),))
t.start()
t.join()
"""

EXECER = """\
import os, sys, time


def spin(seconds):
    end = time.process_time() + seconds
    s = 0
    while time.process_time() < end:
        s += 1
    return s


spin(1.0)
os.execv(sys.argv[1], [sys.argv[1], "2"])
"""

SHORT = """\
import sys, time


def brief_work(seconds):
    end = time.process_time() + seconds
    s = 0
    while time.process_time() < end:
        for i in range(1000):
            s += i
    return s


brief_work(float(sys.argv[1]))
"""


class DynSymbols:
    """Function symbols of an ELF file's .dynsym and .symtab (nm -D, nm): ELF virtual address -> name."""

    def __init__(self, path):
        syms = []
        for args in (["nm", "-D", "-S", "--defined-only", path], ["nm", "-S", "--defined-only", path]):
            r = subprocess.run(args, capture_output=True, text=True)
            for line in r.stdout.splitlines():
                parts = line.split()
                if len(parts) == 4 and parts[2] in ("T", "t", "W", "w"):
                    syms.append((int(parts[0], 16), int(parts[1], 16), parts[3]))
        syms = sorted(set(syms))
        self.starts = [s[0] for s in syms]
        self.syms = syms

    def lookup(self, addr):
        i = bisect.bisect_right(self.starts, addr) - 1
        if i < 0:
            return None
        start, size, name = self.syms[i]
        return name if start <= addr < start + size else None


class Namer:
    """Each frame of a sample as (kind, file, name, line, FunctionDef start line), leaf first."""

    def __init__(self, out):
        self.out = out
        self.funcs = {}
        for r in out.requests:
            for f in r.functions:
                self.funcs[f.id] = f
        self.syms = {}

    def frame(self, f):
        if f.kind == INTERPRETED:
            fd = self.funcs.get(f.function_id)
            if fd is None:
                raise AssertionError("frame names function %s that the file never defined" % f.function_id.hex())
            return (INTERPRETED, fd.file_name, fd.name, f.line, fd.start_line, fd.runtime)
        if f.kind == USER:
            exe = self.out.exes.get(f.executable_id)
            path = exe.path if exe else None
            name = None
            if path and path.startswith("/") and os.path.exists(path):
                if path not in self.syms:
                    self.syms[path] = DynSymbols(path)
                name = self.syms[path].lookup(f.address)
            return (USER, path, name, 0, 0, None)
        return (f.kind, None, None, 0, 0, None)

    def stack(self, sample):
        return [self.frame(f) for f in self.out.frames(sample)]


gate = agentlib.gate
release = agentlib.release


def share(samples, pred):
    total = sum(s.count for s in samples)
    hit = sum(s.count for s in samples if pred(s))
    return (100.0 * hit / total if total else 0.0), total


def main():
    agentlib.require_root_bpf(needs=("table unwinding",))
    if not os.access(PYTHON, os.X_OK):
        agentlib.skip(PYTHON + " not installed (python3 in scripts/install-deps)")
    env = agentlib.Env()
    c = agentlib.Checks()
    try:
        return run(env, c)
    finally:
        env.cleanup()


def run(env, c):
    paths = {}
    for name, text in (("hot", HOT), ("ext", EXT), ("short", SHORT), ("execer", EXECER)):
        paths[name] = os.path.join(env.tmp, name + ".py")
        with open(paths[name], "w") as f:
            f.write(text)
    gates = {"hot": gate([PYTHON, paths["hot"], str(SECONDS)]), "ext": gate([PYTHON, paths["ext"], str(SECONDS)])}
    for i in range(SHORT_RUNS):
        gates["short%d" % i] = gate([PYTHON, paths["short"], str(SHORT_CPU)])
    gates["execer"] = gate([PYTHON, paths["execer"], env.workload("qsortdeep")])
    out_path = os.path.join(env.tmp, "python.pb")
    args = ["--duration", "300", "--frequency", str(FREQ), "--output", out_path, "--log-level", os.environ.get("SR_PY_LOG", "info")]
    for g in gates.values():
        args += ["--pid", str(g["pid"])]
    agent, log = agentlib.start_agent(env, args)
    if agent is None:
        for g in gates.values():
            g["proc"].kill()
        return c.check(False, "agent started") or c.finish()
    # One at a time on the machine's CPUs: hot and ext together, then the short ones one after another.
    for k in ("hot", "ext"):
        release(gates[k])
    for k in ("hot", "ext"):
        gates[k]["rc"] = gates[k]["proc"].wait(timeout=300)
    for i in range(SHORT_RUNS):
        g = gates["short%d" % i]
        release(g)
        g["rc"] = g["proc"].wait(timeout=120)
    release(gates["execer"])
    gates["execer"]["rc"] = gates["execer"]["proc"].wait(timeout=120)
    rc, stderr = agentlib.stop_agent(agent, log)
    c.check(rc == 0, "agent exits 0 on SIGTERM (rc=%d)" % rc)
    for k, g in gates.items():
        c.check(g["rc"] == 0, "%s ran (rc=%s)" % (k, g["rc"]))
    c.check("Python interpreter found" in stderr and "version=3.11" in stderr,
            "the agent found the interpreter and its version (3.11) in its log")

    out = agentlib.Output(env.pb, out_path)
    namer = Namer(out)
    real = os.path.realpath(PYTHON)

    # hot.py: names, lines, split, order, native frames below.
    samples = out.for_pid(gates["hot"]["pid"])
    stacks = {id(s): namer.stack(s) for s in samples}
    py = [s for s in samples if any(f[0] == INTERPRETED for f in stacks[id(s)])]
    pct_py, n = share(samples, lambda s: s in py)
    print("# hot.py: %d samples, %.1f%% with Python frames" % (n, pct_py))
    c.check(n >= 1000, "hot.py: %d samples (>= 1000)" % n)
    c.check(pct_py >= 90.0, "hot.py: %.1f%% of samples have Python frames (>= 90%%)" % pct_py)
    bad = set()
    seen = {}
    unknown = total = 0
    for s in py:
        for kind, fname, name, line, start, runtime in stacks[id(s)]:
            if kind != INTERPRETED or fname != paths["hot"]:
                continue
            seen[name] = seen.get(name, 0) + s.count
            total += s.count
            lo, hi = HOT_LINES.get(name, (0, -1))
            if runtime == "cpython" and start == lo and line == 0:
                unknown += s.count  # an instruction without a line (the protocol's "unknown")
            elif runtime != "cpython" or start != lo or not (lo <= line <= hi):
                bad.add((name, line, start, runtime))
    c.check(unknown * 100 <= total, "hot.py: %d of %d frames without a line (<= 1%%)" % (unknown, total))
    c.check(all(k in seen for k in ("alpha", "beta", "main_loop", "<module>", "work")),
            "hot.py: alpha, beta, work, main_loop and <module> named with the script's path (%s)" %
            ", ".join("%s=%d" % kv for kv in sorted(seen.items())))
    c.check(not bad, "hot.py: every frame's first line and line lie in its function (bad: %s)" % sorted(bad)[:5])
    a = sum(s.count for s in py if any(f[2] == "alpha" for f in stacks[id(s)]))
    b = sum(s.count for s in py if any(f[2] == "beta" for f in stacks[id(s)]))
    split = 100.0 * a / (a + b) if a + b else 0.0
    c.timing(abs(split - 70.0) <= 5.0, "hot.py: alpha %.1f%% : beta %.1f%% (70:30 within 5 points)" %
             (split, 100.0 - split if a + b else 0.0))
    pct_main, _ = share(py, lambda s: any(f[2] == "main_loop" for f in stacks[id(s)]))
    c.check(pct_main >= 95.0, "hot.py: main_loop in %.1f%% of the samples with Python frames (>= 95%%)" % pct_main)

    def ordered(st):
        names = [f[2] for f in st if f[0] == INTERPRETED]
        want = ["main_loop", "<module>"]
        if not names or names[-2:] != want:
            return False
        natives = [i for i, f in enumerate(st) if f[0] == USER and f[1] == real and f[2] == "Py_BytesMain"]
        last_py = max(i for i, f in enumerate(st) if f[0] == INTERPRETED)
        libc = [i for i, f in enumerate(st)
                if f[0] == USER and (f[2] or "").startswith("__libc_start_main")]
        return bool(natives) and natives[0] > last_py and bool(libc) and libc[0] > natives[0]

    if os.environ.get("SR_PY_DEBUG"):
        print("# example: %s" % [(f[2], os.path.basename(f[1] or "")) for f in stacks[id(py[0])]])
        for s in py[:200]:
            for f in out.frames(s):
                if f.kind not in (USER, INTERPRETED, 2):
                    print("# unnamed frame kind %d address 0x%x" % (f.kind, f.address))
    pct_order, _ = share(py, lambda s: ordered(stacks[id(s)]))
    c.check(pct_order >= 90.0, "hot.py: %.1f%% of Python stacks read ... -> main_loop -> <module> -> (native) "
            "Py_BytesMain -> libc's __libc_start_main, leaf first (>= 90%%)" % pct_order)

    # ext.py: libz's frames above the Python frame that called into it.
    samples = out.for_pid(gates["ext"]["pid"])
    in_z, above = 0, 0
    for s in samples:
        st = namer.stack(s)
        zi = [i for i, f in enumerate(st) if f[0] == USER and f[1] and os.path.basename(f[1]).startswith("libz.so")]
        if not zi:
            continue
        in_z += s.count
        after = [f for f in st[zi[-1] + 1:] if f[0] == INTERPRETED]
        if after and after[0][2] == "squeeze" and after[0][1] == paths["ext"] and \
                [f[2] for f in after[:2]] == ["squeeze", "worker"]:
            above += s.count
    pct_above = 100.0 * above / in_z if in_z else 0.0
    c.check(in_z >= 300, "ext.py: %d samples in libz (>= 300)" % in_z)
    c.check(pct_above >= 90.0, "ext.py: in %.1f%% of the samples in libz, the Python frames below libz's are "
            "squeeze -> worker (>= 90%%)" % pct_above)

    # Short-lived processes. brief_work runs for SHORT_CPU seconds of CPU, so about SHORT_CPU * FREQ samples
    # fall in it; the interpreter's start before it (C only, tens of ms, more when the host is busy: 78 ms
    # once beside the sanitizer build's other tests) adds samples that name no Python frame. So the check
    # counts brief_work's named samples against the samples its CPU time yields, not against the process's.
    want = SHORT_CPU * FREQ
    for i in range(SHORT_RUNS):
        samples = out.for_pid(gates["short%d" % i]["pid"])
        named = other_py = 0
        for s in samples:
            st = namer.stack(s)
            if any(f[0] == INTERPRETED and f[2] == "brief_work" and f[1] == paths["short"] for f in st):
                named += s.count
            elif any(f[0] == INTERPRETED for f in st):
                other_py += s.count
        n = sum(s.count for s in samples)
        print("# short.py run %d: %d samples: %d name brief_work, %d other Python frames, %d native only" %
              (i, n, named, other_py, n - named - other_py))
        c.check(named > 0, "short.py run %d: brief_work named" % i)
        c.timing(named >= 0.8 * want, "short.py run %d (%.1f s of CPU in brief_work, about %.0f samples): brief_work "
                 "named in %d samples (>= 80%%)" % (i, SHORT_CPU, want, named))

    # execer.py: Python, then qsortdeep under the same PID.
    samples = out.for_pid(gates["execer"]["pid"])
    spin, native, mixed = 0, 0, 0
    for s in samples:
        st = namer.stack(s)
        py_names = [f[2] for f in st if f[0] == INTERPRETED]
        in_q = any(f[0] == USER and f[1] and os.path.basename(f[1]) == "qsortdeep" for f in st)
        if in_q:
            native += s.count
            if py_names:
                mixed += s.count
        elif "spin" in py_names:
            spin += s.count
    c.check(spin >= 300, "execer.py: spin named in %d samples before the exec (>= 300)" % spin)
    c.check(native >= 300 and mixed == 0, "execer.py: %d samples of qsortdeep after the exec, %d of them with "
            "Python frames (>= 300, 0)" % (native, mixed))
    pyc = agentlib.logfmt_fields(stderr, "python frames") or {}
    found, no_ts = int(pyc.get("stacks_found", 0)), int(pyc.get("no_thread_state", -1))
    c.check(found > 0 and 0 <= no_ts <= found // 100,
            "the agent's exit line: %d Python stacks found, %d samples of Python processes without a thread "
            "state (<= 1%%: no image after an exec is walked as Python)" % (found, no_ts))

    ends = agentlib.logfmt_fields(stderr, "unwinding stopped") or {}
    print("# unwinding: " + " ".join("%s=%s" % kv for kv in sorted(ends.items()) if kv[0] not in ("ts", "level")))
    other_versions(env, c, paths["hot"])
    return c.finish()


def other_interpreters():
    """{minor: path} of CPython 3.8-3.13 interpreters other than Debian's, one per version."""
    spec = os.environ.get("SR_TEST_PYTHONS")
    cands = spec.split(":") if spec else sorted(glob.glob("/root/.pyenv/versions/3.*/bin/python3.*"))
    found = {}
    for path in cands:
        m = re.search(r"python3\.(\d+)$", path)
        if m and 8 <= int(m.group(1)) <= 13 and os.access(path, os.X_OK) and \
                os.path.realpath(path) != os.path.realpath(PYTHON):
            found.setdefault(int(m.group(1)), path)
    return found


def other_versions(env, c, hot):
    found = other_interpreters()
    if not found:
        print("# SKIP other CPython versions: none found (pyenv's /root/.pyenv/versions, or SR_TEST_PYTHONS)")
        return
    gates = {minor: gate([path, hot, "3"]) for minor, path in sorted(found.items())}
    out_path = os.path.join(env.tmp, "versions.pb")
    args = ["--duration", "300", "--frequency", str(FREQ), "--output", out_path, "--log-level", "info"]
    for g in gates.values():
        args += ["--pid", str(g["pid"])]
    agent, log = agentlib.start_agent(env, args)
    if agent is None:
        for g in gates.values():
            g["proc"].kill()
        c.check(False, "agent (other versions) started")
        return
    order = sorted(gates)
    for i in range(0, len(order), 2):
        for minor in order[i:i + 2]:
            release(gates[minor])
        for minor in order[i:i + 2]:
            gates[minor]["rc"] = gates[minor]["proc"].wait(timeout=300)
    rc, stderr = agentlib.stop_agent(agent, log)
    c.check(rc == 0, "agent (other versions) exits 0 on SIGTERM (rc=%d)" % rc)
    out = agentlib.Output(env.pb, out_path)
    namer = Namer(out)
    for minor in order:
        g = gates[minor]
        what = "3.%d (%s)" % (minor, found[minor])
        c.check(g["rc"] == 0, "%s: hot.py ran (rc=%s)" % (what, g["rc"]))
        c.check("version=3.%d " % minor in stderr or "version=3.%d\n" % minor in stderr,
                "%s: the agent found the interpreter as 3.%d" % (what, minor))
        samples = out.for_pid(g["pid"])
        stacks = {id(s): namer.stack(s) for s in samples}
        py = [s for s in samples if any(f[0] == INTERPRETED for f in stacks[id(s)])]
        names, bad = {}, set()
        unknown = total = 0
        for s in py:
            for kind, fname, name, line, start, _ in stacks[id(s)]:
                if kind == INTERPRETED and fname == hot:
                    names[name] = names.get(name, 0) + s.count
                    total += s.count
                    lo, hi = HOT_LINES.get(name, (0, -1))
                    if start == lo and line == 0:
                        unknown += s.count  # an instruction without a line (the protocol's "unknown")
                    elif start != lo or not (lo <= line <= hi):
                        bad.add((name, line, start))
        c.check(unknown * 100 <= total, "%s: %d of %d frames without a line (<= 1%%)" % (what, unknown, total))
        pct_py, n = share(samples, lambda s: s in py)
        # Interpreter start-up (C, before the agent has the process) is a larger share of a 3 s run than of the main one.
        c.check(n >= 300 and pct_py >= 80.0, "%s: %.1f%% of %d samples have Python frames (>= 80%% of >= 300)" %
                (what, pct_py, n))
        c.check(all(k in names for k in ("alpha", "beta", "main_loop", "work")),
                "%s: alpha, beta, work, main_loop named with the script's path (%s)" %
                (what, ", ".join("%s=%d" % kv for kv in sorted(names.items()))))
        c.check(not bad, "%s: first lines and lines lie in their functions (bad: %s)" % (what, sorted(bad)[:5]))
        a = sum(s.count for s in py if any(f[2] == "alpha" for f in stacks[id(s)]))
        b = sum(s.count for s in py if any(f[2] == "beta" for f in stacks[id(s)]))
        split = 100.0 * a / (a + b) if a + b else 0.0
        c.check(abs(split - 70.0) <= 5.0, "%s: alpha %.1f%% : beta %.1f%% (70:30 within 5 points)" %
                (what, split, 100.0 - split if a + b else 0.0))
        # Start-up imports differ between builds (pyenv's compile their .pyc): the script's own samples count.
        mine = [s for s in py if any(f[0] == INTERPRETED and f[1] == hot for f in stacks[id(s)])]
        pct_main, _ = share(mine, lambda s: any(f[2] == "main_loop" for f in stacks[id(s)]))
        if os.environ.get("SR_PY_DEBUG"):
            other = {}
            for s in py:
                if not any(f[2] == "main_loop" for f in stacks[id(s)]):
                    k = tuple((f[2], os.path.basename(f[1] or "")) for f in stacks[id(s)] if f[0] == INTERPRETED)
                    other[k] = other.get(k, 0) + s.count
            for k, v in sorted(other.items(), key=lambda kv: -kv[1])[:8]:
                print("# %s without main_loop: %d %s" % (what, v, k))
        c.check(pct_main >= 95.0, "%s: main_loop in %.1f%% of the samples with frames of hot.py (>= 95%%)" %
                (what, pct_main))


if __name__ == "__main__":
    sys.exit(main())
