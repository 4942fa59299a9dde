#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Table unwinding of code without frame pointers (real eBPF), checked against
independent truth.

Workloads start behind a gate (a shell blocked on a pipe, which then execs the
workload under the same PID), so the agent runs first with --pid filters for
exactly them and sees their whole life. One agent run with
profiling.unwinding: auto, 997 Hz, over:
  - qsortdeep (-O2 -fomit-frame-pointer; libc's qsort and memcpy under a
    12-deep chain): >= 95 % of its samples reach main and end at _start
    (nm on the workload, nm -D on libc: the frames between main and _start are
    libc's); the sort_phase / copy_phase split within 5 points of the CPU time
    the workload measured itself (its sort_ns= copy_ns= line);
  - Debian's /usr/bin/python3.11 running a CPU-bound script: >= 90 % of its
    samples end Py_BytesMain -> libc -> _start (nm -D, and the ELF entry point
    per readelf -h for _start: Debian's main tail-calls Py_BytesMain);
  - cxxunwind (C++, -O2 -fomit-frame-pointer: exceptions thrown and caught
    through libstdc++/libgcc_s, always_inline frames in a deep chain) and
    staticnohdr (static, linked without .eh_frame_hdr, which readelf confirms):
    no wrong frames: every frame in the workload lies inside a function nm
    knows, each of the workload's functions is called from one of the callers
    listed below from the source, no frame lies outside every mapping; stacks
    that do not reach _start stay within what the agent counted (frame-pointer
    fallback and stacks that ended for a counted reason).
The agent's end-reason counters (its "unwinding stopped" exit log line) are
printed, and `complete` must be most of them.
A second, short run with profiling.unwinding: fp (a --config file) over
qsortdeep shows how few of its stacks reach main by frame pointers.
Last, `perf record --call-graph dwarf` (the reference unwinder: it copies the
stack and unwinds it later) profiles another qsortdeep run: for each of
sort_phase, copy_phase, chain and main, the share of samples whose stack holds
it agrees with the agent's within 5 points. Skipped with a message when perf
cannot run here.
"""
import bisect
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import agentlib  # noqa: E402

FREQ = 997
PERF_FREQ = 499
SECONDS = 3
USER = 1
KERNEL = 2
UNKNOWN = 3
PYTHON = "/usr/bin/python3.11"
PERF_FUNCS = ("sort_phase", "copy_phase", "chain", "main")
LIBC_PREFIX = "libc.so"

# Callers of the workloads' own functions, from their sources (suffixes such as .cold, .isra.0 removed).
# A caller outside the workload's file (libc's startup code, libc's qsort) is written as "lib:<file prefix>".
CXX_CALLERS = {
    "mix_round": {"level1"},
    "thrower": {"catch_round"},
    "catch_round": {"level1"},
    "level1": {"level2"},
    "level2": {"level3"},
    "level3": {"level4"},
    "level4": {"level5"},
    "level5": {"level6"},
    "level6": {"level7"},
    "level7": {"level8"},
    "level8": {"main"},
    "main": {"lib:libc.so"},
}
# Functions of cxxunwind that call into libraries (libstdc++'s throw and catch, libc's clock_gettime/printf).
CXX_CALL_OUT = {"thrower", "catch_round", "main", "_start"}
STATIC_CALLERS = {
    "compare_vals": {"msort_with_tmp"},
    "sort_work": {"chain"},
    "spin": {"chain"},
    "chain": {"chain", "main"},
    "main": {"__libc_start_call_main"},
}

PY_SCRIPT = """
import os, sys, time
def leaf(n):
    s = 0
    for i in range(n):
        s += i * i
    return s
def mid(d, n):
    return leaf(n) if d == 0 else mid(d - 1, n)
print(os.getpid(), flush=True)
# CPU time, so that the samples the test expects do not depend on the load.
end = time.process_time() + float(sys.argv[1])
while time.process_time() < end:
    mid(5, 2000)
"""


def base_name(name):
    """GCC's clones and split parts (f.cold, f.isra.0, f.part.0) are still f."""
    return name.split(".", 1)[0] if name else name


class ElfSymbols:
    """Functions of an ELF file per nm -S (its .symtab, or its dynamic symbols when it has none)."""

    def __init__(self, path):
        syms = self._nm(["nm", "-S", "--defined-only", path])
        if not syms:
            syms = self._nm(["nm", "-D", "-S", "--defined-only", path])
        # PLT stubs have no symbol: a frame in them (a call on its way through the PLT) is still right.
        out = subprocess.run(["readelf", "-SW", path], capture_output=True, text=True).stdout
        for m in re.finditer(r"\]\s+(\.i?plt(?:\.sec|\.got)?)\s+\S+\s+([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)", out):
            syms.append((int(m.group(2), 16), int(m.group(3), 16), "@plt"))
        syms.sort()
        self.syms = syms
        self.starts = [s[0] for s in syms]

    @staticmethod
    def _nm(cmd):
        r = subprocess.run(cmd, capture_output=True, text=True)
        syms = []
        for line in r.stdout.splitlines():
            parts = line.split()
            if len(parts) == 4 and parts[2] in ("T", "t", "W", "w", "i"):
                syms.append((int(parts[0], 16), int(parts[1], 16), parts[3].split("@", 1)[0]))
        return syms

    def lookup(self, addr):
        i = bisect.bisect_right(self.starts, addr) - 1
        # Aliases share an address: any of them whose size covers addr.
        while i >= 0 and self.syms[i][0] == self.starts[i]:
            start, size, name = self.syms[i]
            if start <= addr < start + size:
                return name
            if i == 0 or self.syms[i - 1][0] != start:
                break
            i -= 1
        return None


def entry_point(path):
    out = subprocess.run(["readelf", "-h", path], capture_output=True, text=True, check=True).stdout
    m = re.search(r"Entry point address:\s+0x([0-9a-fA-F]+)", out)
    return int(m.group(1), 16)


def has_eh_frame_hdr(path):
    out = subprocess.run(["readelf", "-lSW", path], capture_output=True, text=True, check=True).stdout
    return ".eh_frame_hdr" in out or "GNU_EH_FRAME" in out


class Symbolizer:
    """Names the output's user frames: (file name, function) per nm, _start per the ELF entry point."""

    def __init__(self, out):
        self.out = out
        self.cache = {}

    def file(self, frame):
        exe = self.out.exes.get(frame.executable_id)
        return exe.path if exe else None

    def name(self, frame):
        if frame.kind != USER:
            return None, None
        path = self.file(frame)
        if not path or not path.startswith("/"):
            return path, None
        if path not in self.cache:
            try:
                self.cache[path] = (ElfSymbols(path), entry_point(path))
            except (OSError, subprocess.CalledProcessError):
                self.cache[path] = (None, None)
        syms, entry = self.cache[path]
        if syms is None:
            return path, None
        name = syms.lookup(frame.address)
        if name is None and entry is not None and entry <= frame.address < entry + 0x40:
            name = "_start"
        return path, name

    def stack(self, sample):
        """[(file path, function name, frame)] of the user frames, leaf first."""
        return [self.name(f) + (f,) for f in self.out.frames(sample) if f.kind in (USER, UNKNOWN)]


def reaches(frames, exe, top):
    """The stack holds top (a function of exe) and ends at exe's _start with only libc's start code in between
    (in the executable itself when it is static)."""
    if not frames or frames[-1][0] != exe or frames[-1][1] != "_start":
        return False
    for i, (path, name, _) in enumerate(frames):
        if path == exe and name == top:
            return all(p == exe or (p and os.path.basename(p).startswith(LIBC_PREFIX)) for p, _, _ in frames[i + 1:-1])
    return False


def print_short_stacks(out, samples, stacks, exe):
    """The commonest shapes of the stacks that do not reach main, leaf first, for a failing share; "(kernel)"
    when the sample was taken in the kernel (the user registers are then those saved at its entry)."""
    shapes = {}
    for s in samples:
        fr = stacks[id(s)]
        if reaches(fr, exe, "main"):
            continue
        key = "(kernel) " if any(f.kind == KERNEL for f in out.frames(s)) else ""
        key += " <- ".join("%s:%s" % (os.path.basename(p) if p else "?", n or "0x%x" % f.address)
                           for p, n, f in fr[:12])
        shapes[key] = shapes.get(key, 0) + s.count
    for key, count in sorted(shapes.items(), key=lambda kv: -kv[1])[:6]:
        print("# not reaching main, %d samples: %s" % (count, key))


def share(samples, pred):
    total = sum(s.count for s in samples)
    hit = sum(s.count for s in samples if pred(s))
    return (100.0 * hit / total if total else 0.0), total


def in_eh_return(frames, exe):
    """The stack was sampled while libgcc installs a catch frame's registers.

    _Unwind_RaiseException's last step (uw_install_context_1, then
    __builtin_eh_return) copies the handler frame's saved registers, its
    return address included, into _Unwind_RaiseException's own save slots
    before it jumps to the landing pad. Until the jump, its CFI truthfully
    describes a caller that is the catch frame: any CFI unwinder (perf's,
    gdb's) shows the landing pad's function directly above
    _Unwind_RaiseException for those few instructions.
    """
    for i in range(1, len(frames)):
        below_path, below_name, _ = frames[i - 1]
        if frames[i][0] == exe and below_name and below_name.startswith("_Unwind_") and below_path and \
                os.path.basename(below_path).startswith("libgcc_s"):
            return True
    return False


def wrong_frames(frames, exe, callers, call_out):
    """Why a stack of the workload exe has a frame that cannot be right, or None."""
    for i, (path, name, f) in enumerate(frames):
        if f.kind == UNKNOWN:
            return "frame %#x outside every mapping" % f.address
        if path != exe:
            continue
        if name is None:
            return "frame %#x of %s inside no function" % (f.address, os.path.basename(exe))
        if i == 0:
            continue
        below_path, below_name, _ = frames[i - 1]
        below = base_name(below_name)
        if below_path == exe and below in callers and base_name(name) not in callers[below]:
            return "%s called from %s" % (below, name)
        if below_path != exe and call_out is not None and base_name(name) not in call_out:
            return "%s calls into %s" % (name, os.path.basename(below_path or "?"))
    # The caller of main is libc's start code (checked by file for the dynamic workload).
    for i, (path, name, _) in enumerate(frames[:-1]):
        if path == exe and base_name(name) == "main":
            caller_path, caller_name, _ = frames[i + 1]
            allowed = callers.get("main", set())
            if "lib:libc.so" in allowed:
                if not (caller_path and os.path.basename(caller_path).startswith(LIBC_PREFIX)):
                    return "main called from %s" % caller_path
            elif base_name(caller_name) not in allowed:
                return "main called from %s" % caller_name
    return None


def gate(cmd):
    """A shell that waits on a pipe, then execs cmd under its own PID: the PID is known before the program runs."""
    r, w = os.pipe()
    p = subprocess.Popen(["sh", "-c", 'read go; exec "$@"', "sh"] + cmd, stdin=r, stdout=subprocess.PIPE, text=True)
    os.close(r)
    return {"proc": p, "w": w, "pid": p.pid, "cmd": cmd}


def release(g):
    os.write(g["w"], b"go\n")
    os.close(g["w"])
    line = g["proc"].stdout.readline()
    g["printed_pid"] = int(line.split()[0]) if line.strip() else -1


def finish(g, timeout=60):
    g["rest"] = g["proc"].stdout.read()
    g["rc"] = g["proc"].wait(timeout=timeout)


def start_perf(pid, tmp):
    """perf record --call-graph dwarf on a running process; it ends when the process does. None when unavailable."""
    perf = shutil.which("perf")
    if not perf:
        print("# SKIP perf comparison: perf not installed (Debian's linux-perf)")
        return None
    data = os.path.join(tmp, "perf.data")
    p = subprocess.Popen([perf, "record", "-q", "-F", str(PERF_FREQ), "--call-graph", "dwarf", "-p", str(pid), "-o",
                          data], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return {"proc": p, "perf": perf, "data": data}


def perf_shares(run):
    """{function: share of perf's stacks holding it}, or None (with a message) when perf could not record."""
    try:
        _, err = run["proc"].communicate(timeout=60)
    except subprocess.TimeoutExpired:
        run["proc"].kill()
        run["proc"].communicate()
        print("# SKIP perf comparison: perf record did not end with its process")
        return None
    if run["proc"].returncode != 0 or not os.path.exists(run["data"]):
        print("# SKIP perf comparison: perf record failed here: %s" % err.strip()[-300:])
        return None
    scr = subprocess.run([run["perf"], "script", "-i", run["data"], "-F", "pid,ip,sym,dso"], capture_output=True,
                         text=True, timeout=120)
    if scr.returncode != 0:
        print("# SKIP perf comparison: perf script failed: %s" % scr.stderr.strip()[-300:])
        return None
    stacks = []
    cur = None
    for line in scr.stdout.splitlines():
        # A sample: its header line (the pid, right-aligned), then one tab-indented line per frame, then a blank.
        if not line.startswith("\t"):
            if cur:
                stacks.append(cur)
            cur = [] if line.strip() else None
            continue
        parts = line.split()
        # perf names inlined and debug-info frames "(inlined)" instead of their file: match by name.
        if cur is not None and len(parts) >= 2:
            cur.append(parts[1])
    if cur:
        stacks.append(cur)
    if len(stacks) < 200:
        print("# SKIP perf comparison: perf recorded only %d stacks" % len(stacks))
        return None
    shares = {fn: 100.0 * sum(1 for st in stacks if fn in st) / len(stacks) for fn in PERF_FUNCS}
    shares["_n"] = len(stacks)
    return shares


def main():
    agentlib.require_root_bpf(needs=("table unwinding",))
    env = agentlib.Env()
    c = agentlib.Checks()
    try:
        return run(env, c)
    finally:
        env.cleanup()


def run(env, c):
    qsortdeep = env.workload("qsortdeep")
    static = env.workload("staticnohdr")
    cxx = os.path.join(env.workloads, "cxxunwind")
    have_cxx = os.access(cxx, os.X_OK)
    if not have_cxx:
        print("# SKIP C++ workload: not built (no C++ compiler)")
    have_py = os.access(PYTHON, os.X_OK)
    if not have_py:
        print("# SKIP python part: %s not installed" % PYTHON)
    script = os.path.join(env.tmp, "busy.py")
    with open(script, "w") as f:
        f.write(PY_SCRIPT)

    c.check(not has_eh_frame_hdr(static), "staticnohdr has no .eh_frame_hdr section and no PT_GNU_EH_FRAME (readelf)")

    # Run 1: profiling.unwinding auto (the default), every workload behind a gate.
    gates = {"qsortdeep": gate([qsortdeep, str(SECONDS + 1)]), "staticnohdr": gate([static, str(SECONDS)])}
    if have_py:
        gates["python"] = gate([PYTHON, script, str(SECONDS)])
    if have_cxx:
        # Its start-up (libstdc++'s table is the largest to build) is a smaller share of a longer run.
        gates["cxxunwind"] = gate([cxx, str(SECONDS + 1)])
    out_path = os.path.join(env.tmp, "auto.pb")
    args = ["--duration", "120", "--frequency", str(FREQ), "--output", out_path, "--log-level", "info"]
    for g in gates.values():
        args += ["--pid", str(g["pid"])]
    agent, log = agentlib.start_agent(env, args)
    if agent is None:
        for g in gates.values():
            g["proc"].kill()
        return c.check(False, "agent (auto) started") or c.finish()
    # At most two at a time on two CPUs; qsortdeep with perf beside it (perf's own unwinding takes a CPU).
    perf = None
    for pair in (["qsortdeep"], [k for k in ("python", "cxxunwind") if k in gates], ["staticnohdr"]):
        for k in pair:
            release(gates[k])
            # perf samples the same qsortdeep process as the agent: same work, same phases.
            if k == "qsortdeep":
                perf = start_perf(gates[k]["pid"], env.tmp)
        for k in pair:
            finish(gates[k])
    rc, stderr = agentlib.stop_agent(agent, log)
    c.check(rc == 0, "agent (auto) exits 0 on SIGTERM (rc=%d)" % rc)
    for k, g in gates.items():
        c.check(g["rc"] == 0 and g["printed_pid"] == g["pid"],
                "%s ran under its gate's PID %d (rc=%s)" % (k, g["pid"], g["rc"]))
    ends = agentlib.logfmt_fields(stderr, "unwinding stopped") or {}
    c.check(bool(ends), "the agent logged its unwinding counters at exit")
    ends = {k: int(v) for k, v in ends.items() if v.isdigit()}
    print("# end reasons (auto run): " + " ".join("%s=%d" % (k, v) for k, v in sorted(ends.items())))

    out = agentlib.Output(env.pb, out_path)
    sym = Symbolizer(out)
    if os.environ.get("SR_UNWIND_KEEP"):
        shutil.copy(out_path, os.environ["SR_UNWIND_KEEP"])

    # qsortdeep: complete stacks, and the split against its own CPU time.
    pid = gates["qsortdeep"]["pid"]
    samples = out.for_pid(pid)
    stacks = {id(s): sym.stack(s) for s in samples}
    reach_auto, n = share(samples, lambda s: reaches(stacks[id(s)], qsortdeep, "main"))
    c.check(n >= 500, "qsortdeep (auto): %d samples (>= 500)" % n)
    c.check(reach_auto >= 95.0, "qsortdeep (auto): %.1f%% of stacks reach main and _start (>= 95%%)" % reach_auto)
    if reach_auto < 95.0:
        print_short_stacks(out, samples, stacks, qsortdeep)
    m = re.search(r"sort_ns=(\d+) copy_ns=(\d+)", gates["qsortdeep"]["rest"])
    truth = 100.0 * int(m.group(1)) / (int(m.group(1)) + int(m.group(2))) if m else -1

    def phase(s):
        names = [base_name(nm) for p, nm, _ in stacks[id(s)] if p == qsortdeep]
        return "sort" if "sort_phase" in names else "copy" if "copy_phase" in names else None
    in_sort = sum(s.count for s in samples if phase(s) == "sort")
    in_copy = sum(s.count for s in samples if phase(s) == "copy")
    split = 100.0 * in_sort / (in_sort + in_copy) if in_sort + in_copy else -100
    c.timing(m is not None and abs(split - truth) <= 5.0,
             "qsortdeep (auto): sort_phase %.1f%% / copy_phase %.1f%% of phase samples; its own CPU time says "
             "%.1f%% / %.1f%% (within 5 points)" % (split, 100 - split, truth, 100 - truth))
    # The callers of the hot code: compare_keys under qsort under sort_phase, memcpy under copy_phase.
    hot_ok = hot = 0
    for s in samples:
        fr = stacks[id(s)]
        if not fr:
            continue
        leaf_path, leaf_name, _ = fr[0]
        if leaf_path == qsortdeep and leaf_name == "compare_keys" or (
                leaf_path and os.path.basename(leaf_path).startswith(LIBC_PREFIX)):
            hot += s.count
            if phase(s) is not None:
                hot_ok += s.count
    c.check(hot and hot_ok >= 0.95 * hot,
            "qsortdeep (auto): %d of %d samples in compare_keys or libc name their phase's caller (>= 95%%)" %
            (hot_ok, hot))
    our_shares = {}
    for fn in PERF_FUNCS:
        our_shares[fn] = share(samples, lambda s: any(p == qsortdeep and base_name(nm) == fn
                                                      for p, nm, _ in stacks[id(s)]))[0]

    # Python: Py_BytesMain -> libc -> _start.
    if have_py:
        pid = gates["python"]["pid"]
        samples = out.for_pid(pid)
        real = os.path.realpath(PYTHON)
        reach_py, n = share(samples, lambda s: reaches(sym.stack(s), real, "Py_BytesMain"))
        c.check(n >= 500, "python3.11: %d samples (>= 500)" % n)
        c.check(reach_py >= 90.0, "python3.11: %.1f%% of stacks end Py_BytesMain -> libc -> _start (>= 90%%)" %
                reach_py)

    # C++ and the static binary: never a wrong frame beyond what the agent counted.
    allowed_bad = ends.get("stacks_fp", 0) + ends.get("end_no_table", 0) + ends.get("end_no_mapping", 0) + \
        ends.get("end_no_cfi", 0)
    bad_total = 0
    for name, path, callers, call_out in (("cxxunwind", cxx, CXX_CALLERS, CXX_CALL_OUT),
                                          ("staticnohdr", static, STATIC_CALLERS, None)):
        if name not in gates:
            continue
        samples = out.for_pid(gates[name]["pid"])
        bad = {}
        complete = truncated = eh_window = 0
        for s in samples:
            fr = sym.stack(s)
            why = wrong_frames(fr, path, callers, call_out)
            if why and in_eh_return(fr, path):
                eh_window += s.count
            elif why:
                bad[why] = bad.get(why, 0) + s.count
            elif reaches(fr, path, "main"):
                complete += s.count
            else:
                truncated += s.count
        n = sum(s.count for s in samples)
        nbad = sum(bad.values())
        bad_total += nbad
        c.check(n >= 300, "%s: %d samples (>= 300)" % (name, n))
        c.check(complete >= 0.85 * n,
                "%s: %.1f%% of stacks reach main and _start (>= 85%%), %d end early, %d with a wrong frame" %
                (name, 100.0 * complete / max(n, 1), truncated, nbad))
        if name == "cxxunwind":
            c.check(eh_window <= 0.05 * n,
                    "cxxunwind: %d stacks (<= 5%%) sampled while _Unwind_RaiseException installs the catch frame "
                    "(its CFI then names the landing pad's function as its caller; not counted as wrong)" % eh_window)
        c.check(nbad <= 0.1 * n, "%s: %d stacks with a wrong frame (<= 10%%)%s" %
                (name, nbad, (": " + "; ".join("%s x%d" % kv for kv in sorted(bad.items())[:5])) if bad else ""))
    c.check(bad_total <= allowed_bad,
            "stacks with a wrong frame (%d) are no more than the agent counted as frame-pointer fallback or "
            "ended in no_table/no_mapping (%d)" % (bad_total, allowed_bad))
    fin = ends.get("end_complete", 0)
    others = sum(v for k, v in ends.items() if k.startswith("end_") and k != "end_complete")
    c.check(fin >= 0.95 * (fin + others),
            "end reasons: complete %d of %d table-unwound stacks (>= 95%%)" % (fin, fin + others))

    # Run 2: profiling.unwinding fp.
    cfg = os.path.join(env.tmp, "fp.yaml")
    with open(cfg, "w") as f:
        f.write("profiling:\n  unwinding: fp\n")
    g = gate([qsortdeep, "2"])
    out_fp = os.path.join(env.tmp, "fp.pb")
    agent, log = agentlib.start_agent(env, ["--config", cfg, "--duration", "120", "--frequency", str(FREQ), "--output",
                                   out_fp, "--log-level", "info", "--pid", str(g["pid"])])
    if agent is None:
        g["proc"].kill()
        c.check(False, "agent (fp) started")
    else:
        release(g)
        finish(g)
        rc, stderr = agentlib.stop_agent(agent, log)
        c.check(rc == 0, "agent (fp) exits 0 on SIGTERM (rc=%d)" % rc)
        out2 = agentlib.Output(env.pb, out_fp)
        sym2 = Symbolizer(out2)
        samples = out2.for_pid(g["pid"])
        reach_fp, n = share(samples, lambda s: reaches(sym2.stack(s), qsortdeep, "main"))
        c.check(n >= 300 and reach_fp <= reach_auto - 50,
                "qsortdeep: %.1f%% of stacks reach main with unwinding: fp, %.1f%% with auto (%d samples)" %
                (reach_fp, reach_auto, n))

    # perf record --call-graph dwarf (the reference) on the same qsortdeep process.
    ps = perf_shares(perf) if perf else None
    if ps is not None:
        worst = max(abs(ps[fn] - our_shares[fn]) for fn in PERF_FUNCS)
        c.check(worst <= 5.0, "qsortdeep vs perf --call-graph dwarf (%d perf samples): share of stacks holding %s; "
                "worst difference %.1f points (<= 5)" %
                (ps["_n"], ", ".join("%s %.1f%% vs %.1f%%" % (fn, our_shares[fn], ps[fn]) for fn in PERF_FUNCS),
                 worst))
    return c.finish()


if __name__ == "__main__":
    sys.exit(main())
