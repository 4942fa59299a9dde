# SPDX-License-Identifier: Apache-2.0
"""Helpers of the agent's integration tests: an independent decoder of the
agent's --output (protoc-generated Python classes, Debian's python3-protobuf)
and the truth to check it against (nm, readelf, /proc/kallsyms).

Needs Debian's /usr/bin/python3 with python3-protobuf, protoc, nm, readelf.
"""
import atexit
import bisect
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

SKIP = 77


def skip(msg):
    print("SKIP: " + msg)
    sys.exit(SKIP)


def require_root_bpf(needs=()):
    """Skips unless root can run the agent here. needs: words of the agent's
    --check lines for the features a test uses beyond what the agent cannot
    start without ("table unwinding", "off_cpu.enabled"):
    a kernel that lacks one skips the test with the agent's own reason."""
    if os.geteuid() != 0:
        skip("needs root (BPF and perf events)")
    if not os.path.exists("/sys/kernel/btf/vmlinux"):
        skip("kernel without BTF (/sys/kernel/btf/vmlinux)")
    for tool in ("protoc", "nm", "readelf"):
        if not shutil.which(tool):
            skip(tool + " not installed (scripts/install-deps)")
    lacks = kernel_lacks()
    fatal = [line for status, line in lacks if status == "FAIL"]
    if fatal:
        skip("the agent cannot start on this kernel: " + "; ".join(fatal))
    for need in needs:
        for _, line in lacks:
            if need in line:
                skip(line)


def kernel_lacks():
    """The kernel features the agent's --check finds missing, as (status,
    line) pairs: FAIL when the agent cannot start without it, WARN when a
    setting or a runtime's frames cannot be used. Only those lines: a --check
    that fails for another reason is the test's to find."""
    agent = os.environ.get("SR_AGENT")
    if not agent:
        return []
    try:
        out = subprocess.run([agent, "--check"], capture_output=True, text=True, timeout=120).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    found = []
    for line in out.splitlines():
        m = re.match(r"\[(FAIL|WARN)\s*\] (kernel (?:\(or seccomp\) )?lacks .*)", line)
        if m:
            found.append((m.group(1), m.group(2)))
    return found


def emulated():
    """Whether this runs in a virtual machine without hardware virtualization (scripts/vm-test's TCG)."""
    return os.environ.get("SR_VM_ACCEL") == "tcg"


def frame_pointers_only():
    """Whether the agent unwinds by frame pointers only here (a kernel without what table unwinding
    needs: --check's WARN). Stacks through libc and the loader, built without frame pointers, then
    carry return addresses read from wherever the frame pointer register points."""
    return any("table unwinding" in line for _, line in kernel_lacks())


class Env:
    def __init__(self):
        self.agent = os.environ.get("SR_AGENT")
        self.src = os.environ.get("SR_SOURCE_ROOT")
        self.build = os.environ.get("SR_BUILD_ROOT")
        if not self.agent or not self.src or not self.build:
            skip("run through meson test (SR_AGENT, SR_SOURCE_ROOT, SR_BUILD_ROOT unset)")
        self.workloads = os.path.join(self.build, "tests", "workloads")
        self.tmp = tempfile.mkdtemp(prefix="sr-agent-test-")
        atexit.register(self.cleanup)  # also when a check fails or the test skips
        self.pb = load_proto(self.src, self.tmp)

    def workload(self, name):
        path = os.path.join(self.workloads, name)
        if not os.access(path, os.X_OK):
            raise SystemExit("workload not built: " + path)
        return path

    def cleanup(self):
        shutil.rmtree(self.tmp, ignore_errors=True)


def load_proto(src, tmp):
    try:
        import google.protobuf  # noqa: F401
    except ImportError:
        skip("python3-protobuf not installed (scripts/install-deps); run with Debian's /usr/bin/python3")
    proto = os.path.join(src, "proto")
    subprocess.run(["protoc", "-I", proto, "--python_out=" + tmp, "stackrelay/v1/types.proto",
                    "stackrelay/v1/ingest.proto"], check=True)
    sys.path.insert(0, tmp)
    from stackrelay.v1 import ingest_pb2, types_pb2
    return type("pb", (), {"ingest": ingest_pb2, "types": types_pb2})


def read_varint(data, pos):
    shift = 0
    value = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated varint at %d" % pos)
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


class Output:
    """All PushRequests of one --output file, with their definitions indexed."""

    def __init__(self, pb, path):
        data = open(path, "rb").read()
        self.requests = []
        pos = 0
        while pos < len(data):
            n, pos = read_varint(data, pos)
            if pos + n > len(data):
                raise ValueError("truncated message")
            req = pb.ingest.PushRequest()
            req.ParseFromString(data[pos:pos + n])
            pos += n
            self.requests.append(req)
        self.stacks = {}
        self.exes = {}
        self.kernels = {}
        self.functions = {}
        self.samples = []
        self.redefined = 0
        for r in self.requests:
            for s in r.stacks:
                if s.id in self.stacks:
                    self.redefined += 1
                self.stacks[s.id] = s
            for e in r.executables:
                if e.id in self.exes:
                    self.redefined += 1
                self.exes[e.id] = e
            for k in r.kernels:
                self.kernels[k.id] = k
            for fn in r.functions:
                self.functions[fn.id] = fn
            self.samples.extend(r.samples)

    def drops(self):
        total = {}
        for r in self.requests:
            for f in ("ring_buffer_full", "stack_errors", "buffer_overflow", "process_unknown"):
                total[f] = total.get(f, 0) + getattr(r.drops, f)
        return total

    def for_pid(self, pid):
        return [s for s in self.samples if s.pid == pid]

    def frames(self, sample):
        st = self.stacks.get(sample.stack_id)
        if st is None:
            raise AssertionError("sample references stack %s that the file never defined" % sample.stack_id.hex())
        return st.frames


def sanitized(path):
    """Whether an executable is built with AddressSanitizer (it then links libasan)."""
    r = subprocess.run(["ldd", path], capture_output=True, text=True)
    return "libasan" in r.stdout


def build_id(path):
    """The GNU build ID of an ELF file per readelf, or None."""
    out = subprocess.run(["readelf", "-n", path], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        line = line.strip()
        if line.startswith("Build ID:"):
            return bytes.fromhex(line.split(":", 1)[1].strip())
    return None


class Symbols:
    """Function symbols of an ELF file per nm: ELF virtual address -> name."""

    def __init__(self, path):
        out = subprocess.run(["nm", "-S", "--defined-only", path], capture_output=True, text=True,
                             check=True).stdout
        syms = []
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 4 and parts[2] in ("T", "t", "W", "w"):
                syms.append((int(parts[0], 16), int(parts[1], 16), parts[3]))
        syms.sort()
        self.starts = [s[0] for s in syms]
        self.syms = syms

    def lookup(self, addr):
        i = bisect.bisect_right(self.starts, addr) - 1
        if i < 0:
            return None
        start, size, name = self.syms[i]
        return name if start <= addr < start + size else None


class Kallsyms:
    def __init__(self):
        syms = []
        with open("/proc/kallsyms") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 3 and parts[1] in "tTwW":
                    syms.append((int(parts[0], 16), parts[2]))
        syms.sort()
        self.usable = bool(syms) and syms[-1][0] != 0
        self.starts = [s[0] for s in syms]
        self.syms = syms
        # arm64's kallsyms has no _text: the agent counts from _stext there (agent/kernel.h).
        self.text = next((a for a, n in syms if n == "_text"), 0) or next((a for a, n in syms if n == "_stext"), 0)

    def runtime(self, out, frame):
        """A KERNEL frame's runtime address: the agent sends image frames as
        offsets from _text, or _stext where kallsyms has no _text (KernelDef.addressing 1), the rest as they are."""
        k = out.kernels.get(frame.executable_id)
        if k is not None and k.addressing == 1:
            return self.text + frame.address
        return frame.address

    def lookup(self, addr):
        i = bisect.bisect_right(self.starts, addr) - 1
        return self.syms[i][1] if i >= 0 else None


class Checks:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def check(self, ok, what):
        if ok:
            self.passed += 1
            print("ok - " + what)
        else:
            self.failed += 1
            print("FAIL - " + what)
        sys.stdout.flush()
        return ok

    def timing(self, ok, what):
        """A check of figures that follow from time: samples per second of CPU time, shares of
        samples between code that runs for set times. Under emulation (SR_VM_ACCEL=tcg, set by
        scripts/vm-test) the guest's sampling clock does not keep the rate asked of it, so such a
        figure is printed and not asserted (docs/platforms.md); everything else is."""
        if ok or not emulated():
            return self.check(ok, what)
        print("ok - (emulated, not asserted) " + what)
        sys.stdout.flush()
        return True

    def finish(self):
        print("%d passed, %d failed" % (self.passed, self.failed))
        return 1 if self.failed else 0


def start(cmd, **kw):
    """Starts a workload that prints its pid (and maybe tids) on its first line; returns (proc, ints)."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, **kw)
    line = p.stdout.readline()
    return p, [int(x) for x in line.split()]


def gate(cmd, **kw):
    """A shell that waits on a pipe, then execs cmd under its own PID: the PID is known before the program runs.
    release() lets it go."""
    r, w = os.pipe()
    p = subprocess.Popen(["sh", "-c", 'read go; exec "$@"', "sh"] + cmd, stdin=r, **kw)
    os.close(r)
    return {"proc": p, "w": w, "pid": p.pid}


def release(g):
    os.write(g["w"], b"go\n")
    os.close(g["w"])


def start_agent(env, args):
    """Starts the agent and waits for its "profiling" line (bounded by the agent's own start-up or exit).
    Returns (proc, log lines), or (None, log lines) when it exited first. Tests that profile
    workloads give the agent a generous --duration as a bound only, and stop it with stop_agent()
    once the workloads are done: a duration sized for a quiet machine ends the profile before
    the workloads on a loaded one."""
    agent = subprocess.Popen([env.agent] + args, stderr=subprocess.PIPE, text=True)
    log = []
    for line in agent.stderr:
        log.append(line)
        if "msg=profiling " in line or 'msg="profiling"' in line:
            return agent, log
    agent.wait(timeout=30)
    sys.stderr.write("".join(log))
    return None, log


def stop_agent(agent, log):
    """SIGTERM: the agent stops sampling, drains the ring buffer, writes its last window and exits 0.
    Returns (returncode, the whole stderr)."""
    agent.terminate()
    try:
        _, rest = agent.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        agent.kill()
        _, rest = agent.communicate()
    log.append(rest)
    stderr = "".join(log)
    sys.stderr.write(stderr)
    return agent.returncode, stderr


def run_agent(env, args, timeout):
    """Runs the agent to completion; returns (returncode, stderr)."""
    r = subprocess.run([env.agent] + args, capture_output=True, text=True, timeout=timeout)
    sys.stderr.write(r.stderr)
    return r.returncode, r.stderr


def wait_for(cond, timeout, step=0.1):
    """cond()'s first true value within timeout seconds (polled every step), or None."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(step)
    return None


def line_of(path, text):
    """The 1-based number of the first line of path that holds text."""
    with open(path) as f:
        for i, line in enumerate(f, 1):
            if text in line:
                return i
    raise AssertionError("%s not in %s" % (text, path))


def logfmt_fields(stderr, msg):
    """key=value pairs of the last log line with this msg."""
    found = None
    for line in stderr.splitlines():
        if ('msg="%s"' % msg) in line or ("msg=%s " % msg) in line:
            found = line
    if not found:
        return None
    fields = {}
    for part in found.split():
        if "=" in part:
            k, v = part.split("=", 1)
            fields[k] = v.strip('"')
    return fields


def sample_accounting(stderr):
    """From the agent's exit line: (its fields, samples taken in BPF, exported, and the losses it counts)."""
    stopped = logfmt_fields(stderr, "profiling stopped") or {}
    dropped = sum(int(stopped.get(k, 0)) for k in ("lost_ring_buffer", "dropped_stack_errors", "dropped_overflow"))
    return stopped, int(stopped.get("samples_taken", -1)), int(stopped.get("samples_exported", -2)), dropped


def check_sample_accounting(c, out, stderr):
    """No sample lost unreported: the file's counts sum to what the agent exported, it took in BPF what it
    exported plus the losses it counts, and the file's ring-buffer drop count is the log's. Returns the exit
    line's fields."""
    stopped, taken, exported, dropped = sample_accounting(stderr)
    total = sum(s.count for s in out.samples)
    c.check(total == exported, "sum of sample counts in the file (%d) = samples exported (%d)" % (total, exported))
    c.check(taken == exported + dropped, "samples taken in BPF (%d) = exported (%d) + losses the agent counts (%d)"
            % (taken, exported, dropped))
    drops = out.drops()
    c.check(drops["ring_buffer_full"] == int(stopped.get("lost_ring_buffer", 0)),
            "DropCounters.ring_buffer_full in the file matches the log (%s)" % drops)
    return stopped
