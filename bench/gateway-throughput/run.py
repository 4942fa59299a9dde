#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""End-to-end gateway throughput (bench/gateway-throughput/README.md).

Recorded agent traffic is replayed (replay.js: many agents over h2c) to the
real stackrelay-gateway: receivers.agent -> processors [symbolize, batch] ->
exporters [otlp_http] -> sink.py (counts bytes, answers 200). Side by side in
the same run, the reference: the same traffic and gateway with no processors
(agent -> otlp_http), so the cost of symbolize + batch shows as a ratio.

Symbols come from the two sources a central gateway has. A real debuginfod
(Debian's `debuginfod`, started here) serves the host's /usr/lib/debug
(libc6-dbg: libc's internal functions by build ID), and the gateway's
symbolize processor asks it (debuginfod_urls). Everything else comes from
the agents: the recording is accompanied by the symbol tables the agent
uploaded while it was made (RECORDING.symbols, captured by capture.js
standing in for a gateway that wants every table), and the replayed agents
upload them when the gateway lists them in wanted_symbols. The gateway has
no debug directories of its own. The fraction of frames named is read back
from what the gateway exported (the sink keeps the bodies); below 95 % in
the warm run is a failure.

For each configuration: warm-up replay (symbols uploaded and loaded, repeated
until no agent is asked for a table any more), wait until everything accepted
is exported, then the measured replay; the gateway's CPU
time (utime + stime from /proc/PID/stat) and samples exported (its /metrics)
are read before and after (after: once exported == accepted again), so
samples/s per core = exported samples / gateway CPU seconds. Also: bytes per
CPU sample on the wire in (agent protocol, gzip) and out (OTLP, gzip), the
gateway's peak RSS (VmHWM), the sink's and the replay client's CPU. The cold
run does the same on a fresh gateway without warm-up: the first seconds after a
deploy, tables uploaded and loaded inside the measured window.

The same profiles also go as OTLP ExportProfilesServiceRequests (otlp-encode.js,
an encoder of its own, written once; replay-otlp.js over OTLP/HTTP h2c,
OTLP/gRPC and HTTP/1.1) through the gateway's otlp receiver to the same
processors and sink, so OTLP's samples/s per core shows as a ratio to the
agent protocol's in the same run. Every configuration must export exactly
the CPU samples it acknowledged, none dropped.

Usage: run.py --build BUILD_DIR [--recording FILE [--symbols FILE]] [--seconds 10] [--warmup 3]
              [--agents 16] [--inflight 4] [--record-seconds 20] [--save-recording FILE]
              [--debug-dir /usr/lib/debug | --no-debuginfod] [--smoke | --quick]
Without --recording it records one (as root): stackrelay-agent --duration N
--gateway CAPTURE --output FILE while the project's own workloads run in a
cgroup of their own, which is all the agent profiles (profiling.cgroups).
"""
import argparse
import gzip
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import socket
import tempfile
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        rest = f.read().rsplit(")", 1)[1].split()
    return (int(rest[11]) + int(rest[12])) / TICK


def peak_rss_mib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def metrics(addr):
    text = urllib.request.urlopen("http://%s/metrics" % addr, timeout=10).read().decode()
    out = {"exported": 0.0, "accepted_rx": 0.0, "dropped": 0.0, "named": 0.0, "fallback": 0.0,
           "unsymbolized": 0.0, "debuginfod_requests": 0.0, "debuginfod_failures": 0.0, "wait_timeouts": 0.0}
    for line in text.splitlines():
        m = re.match(r'^(\w+)(\{[^}]*\})? ([0-9.e+-]+)$', line)
        if not m:
            continue
        name, labels, v = m.group(1), m.group(2) or "", float(m.group(3))
        if name == "stackrelay_gateway_samples_exported_total":
            out["exported"] += v
        elif name == "stackrelay_gateway_samples_accepted_total" and \
                ('component="agent"' in labels or 'component="otlp"' in labels):
            out["accepted_rx"] += v
        elif name == "stackrelay_gateway_samples_dropped_total":
            out["dropped"] += v
        elif name == "stackrelay_gateway_symbolize_debuginfod_requests_total":
            out["debuginfod_requests"] += v
        elif name == "stackrelay_gateway_symbolize_debuginfod_failures_total":
            out["debuginfod_failures"] += v
        elif name == "stackrelay_gateway_symbolize_batches_wait_timeouts_total":
            out["wait_timeouts"] += v
        elif name == "stackrelay_gateway_symbolize_locations_total":
            for k in ("named", "fallback", "unsymbolized"):
                if 'outcome="%s"' % k in labels:
                    out[k] += v
    return out


def wait_file(path, timeout=10.0):
    end = time.time() + timeout
    while time.time() < end:
        if os.path.exists(path) and os.path.getsize(path) > 0:
            return
        time.sleep(0.05)
    raise SystemExit("run.py: %s did not appear" % path)


def cgroup2_root():
    with open("/proc/mounts") as f:
        for line in f:
            dev, mnt, fstype = line.split()[:3]
            if fstype == "cgroup2":
                return mnt
    return None


# The recorded workload: the project's own programs (tests/workloads, bench/agent-overhead), all built with
# their symbols, and the libc code they call (qsort, memcpy, stdio, clock_gettime), whose internal functions
# debuginfod names from libc6-dbg; syscalls spends its time in the kernel (named from the agent's kallsyms).
# Not Debian's stripped tools (gzip, ls, sh, python3): no symbolizer can name a frame of a binary that has
# neither symbols nor debug info, so they would measure the host's packaging, not the gateway.
WORKLOADS = [
    ("bench/agent-overhead/cpuwork", ["2", "100000"]),  # 2 workers under a 24-deep call chain
    ("tests/workloads/qsortdeep", ["{s}"]),  # libc qsort + memcpy under a chain without frame pointers
    ("tests/workloads/alphabeta-nofp", ["{s}"]),  # no frame pointers: table unwinding
    ("tests/workloads/threads", ["{s}"]),  # 3 named threads
    ("tests/workloads/uselib", ["{s}"]),  # a shared library at a random address
    ("tests/workloads/syscalls", ["{s}"]),  # read/write: kernel stacks
]


def record(build, out, seconds):
    """Records real agent traffic while the project's CPU-bound workloads run (see WORKLOADS)."""
    if os.geteuid() != 0:
        raise SystemExit("run.py: recording needs root (BPF); pass --recording FILE")
    # The workload gets a cgroup of its own and the agent profiles only it: the rest of this host (other
    # engineers' compilers, Debian's stripped python3) is not what the bench measures.
    root = cgroup2_root()
    cg = os.path.join(root, "sr-bench-%d" % os.getpid()) if root else None
    if cg:
        os.makedirs(cg, exist_ok=True)
    else:
        print("run.py: no cgroup2 mount: recording every process on this host, not only the workload",
              file=sys.stderr)
    agent_cfg = out + ".agent.yaml"
    with open(agent_cfg, "w") as f:
        f.write("profiling:\n  cgroups: [%s]\n" % cg if cg else "{}\n")

    def into_cgroup():
        if cg:
            with open(os.path.join(cg, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))

    # The agent sends to capture.js too (with --gateway, --output means "also"): it is asked for every
    # table and uploads them as it would to a gateway that has none; they are kept in OUT.symbols.
    port_file = out + ".capture.port"
    capture = subprocess.Popen(["node", os.path.join(HERE, "capture.js"), port_file, out + ".symbols",
                                "--max-seconds", str(seconds + 120)], stdout=subprocess.PIPE, text=True)
    wait_file(port_file)
    agent = subprocess.Popen([os.path.join(build, "agent/stackrelay-agent"), "--config", agent_cfg,
                              "--duration", str(seconds), "--frequency", "97", "--output", out,
                              "--log-level", "warn",
                              "--gateway", "http://127.0.0.1:%s" % open(port_file).read().strip()],
                             stderr=subprocess.DEVNULL)
    time.sleep(1)
    work = []
    stop = threading.Event()
    try:
        for rel, argv in WORKLOADS:
            work.append(subprocess.Popen([os.path.join(build, rel)] + [a.format(s=seconds - 2) for a in argv],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                         start_new_session=True, preexec_fn=into_cgroup))

        # Short-lived processes, one after the other (each burns 200 ms in short_work and exits):
        # their executables and mappings come and go while the agent runs.
        def short_lived():
            end = time.time() + seconds - 2
            while time.time() < end and not stop.is_set():
                subprocess.run([os.path.join(build, "tests/workloads/shortlived"), "200"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=into_cgroup)

        shorts = threading.Thread(target=short_lived, daemon=True)
        shorts.start()
        agent.wait(timeout=seconds + 90)
    finally:
        stop.set()
        for w in work:
            # Each in its own session: cpuwork's workers go with their leader.
            try:
                os.killpg(w.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            w.wait()
        if cg:
            for _ in range(100):
                try:
                    os.rmdir(cg)
                    break
                except OSError:
                    time.sleep(0.1)
    capture.terminate()
    cap = json.loads(capture.communicate(timeout=30)[0].strip().splitlines()[-1])
    if agent.returncode != 0 or not os.path.exists(out):
        raise SystemExit("run.py: the agent failed to record (try: stackrelay-agent --check)")
    print("recorded: %s; the agent uploaded %d symbol tables (%d of them errors: file unreadable), %d bytes" %
          (out, cap["tables"], cap["error_tables"], cap["table_bytes"]))


def gnu_build_id(path):
    """The GNU build ID (hex) of an ELF file, from its PT_NOTE segments (64-bit little-endian only)."""
    import struct
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return None
    phoff, = struct.unpack_from("<Q", data, 32)
    phentsize, phnum = struct.unpack_from("<HH", data, 54)
    for i in range(phnum):
        p_type, _, p_offset, _, _, p_filesz = struct.unpack_from("<IIQQQQ", data, phoff + i * phentsize)
        if p_type != 4:  # PT_NOTE
            continue
        j, end = p_offset, p_offset + p_filesz
        while j + 12 <= end:
            namesz, descsz, ntype = struct.unpack_from("<III", data, j)
            name = data[j + 12:j + 12 + namesz]
            desc_at = j + 12 + ((namesz + 3) & ~3)
            if ntype == 3 and name[:3] == b"GNU":
                return data[desc_at:desc_at + descsz].hex()
            j = desc_at + ((descsz + 3) & ~3)
    return None


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_debuginfod(debug_dir, tmp, extra_dirs=(), name="debuginfod"):
    """A real debuginfod (Debian's) serving debug_dir (and extra_dirs) on loopback; returns (process, url) once
    it serves the debug file of this host's libc (libc6-dbg), or raises SystemExit saying what is missing."""
    if not shutil.which("debuginfod"):
        raise SystemExit("run.py: debuginfod not installed (scripts/install-deps installs it; or --no-debuginfod)")
    libc = next((p for p in ("/lib/x86_64-linux-gnu/libc.so.6", "/lib/aarch64-linux-gnu/libc.so.6",
                             "/usr/lib/x86_64-linux-gnu/libc.so.6") if os.path.exists(p)), None)
    bid = gnu_build_id(libc) if libc else None
    if not bid or not os.path.exists(os.path.join(debug_dir, ".build-id", bid[:2], bid[2:] + ".debug")):
        raise SystemExit("run.py: no debug file for this host's libc (%s, build ID %s) in %s: install libc6-dbg "
                         "(scripts/install-deps), or run with --no-debuginfod" % (libc, bid, debug_dir))
    port = free_port()
    log = open(os.path.join(tmp, name + ".log"), "w")
    proc = subprocess.Popen(["debuginfod", "-F", "-p", str(port), "-d", os.path.join(tmp, name + ".sqlite"),
                             "-t", "0", "-g", "0", debug_dir] + list(extra_dirs),
                            stdout=log, stderr=subprocess.STDOUT)
    url = "http://127.0.0.1:%d" % port
    end = time.time() + 120
    while True:
        if proc.poll() is not None:
            raise SystemExit("run.py: debuginfod exited: " + open(log.name).read()[-2000:])
        try:
            with urllib.request.urlopen("%s/buildid/%s/debuginfo" % (url, bid), timeout=5) as r:
                if r.status == 200:
                    break
        except Exception:
            pass
        if time.time() > end:
            proc.kill()
            raise SystemExit("run.py: debuginfod did not index %s in 120 s" % debug_dir)
        time.sleep(0.2)
    # Until the first scan is over, some build IDs may not be indexed yet: wait for it (bounded).
    while time.time() < end:
        try:
            text = urllib.request.urlopen(url + "/metrics", timeout=5).read().decode()
        except Exception:
            text = ""
        if re.search(r'^thread_work_pending\{role="scan"\} 0$', text, re.M) or \
                not re.search(r'^thread_work_pending\{role="scan"\}', text, re.M):
            break
        time.sleep(0.2)
    return proc, url, libc, bid


def executables(recording):
    """(path, gnu_build_id hex) of every ExecutableDef in a recording."""
    data = open(recording, "rb").read()
    out = set()
    i = 0
    while i < len(data):
        n, i = _varint(data, i)
        for f, v in _fields(data[i:i + n]):
            if f == 7:
                d = dict(_fields(v))
                # id is the GNU build ID when id_kind is 1; else gnu_build_id may carry one.
                bid = d.get(1) if d.get(2) == 1 else d.get(6)
                if d.get(4) and bid:
                    out.add((d[4].decode(errors="replace"), bid.hex()))
        i += n
    return sorted(out)


FALLBACK_NAME = re.compile(r"\+0x[0-9a-f]+$")  # "<binary>+0x<address>": symbolize's fallback lines


def otlp_frames(body, acc):
    """Adds to acc the frames of one OTLP ExportProfilesServiceRequest (gzip or not), weighted by CPU
    samples (Sample.values[0]): named, fallback ("<binary>+0x<address>") or unsymbolized (no lines)."""
    if body[:2] == b"\x1f\x8b":
        body = gzip.decompress(body)
    F = list(_fields(body))
    dic = next((v for f, v in F if f == 2), b"")
    strings, functions, locations, loc_mapping, mappings, stacks = [], [], [], [], [], []
    for f, v in _fields(dic):
        if f == 5:
            strings.append(v.decode(errors="replace"))
        elif f == 3:
            functions.append(dict(_fields(v)).get(1, 0))
        elif f == 2:
            locations.append(next((dict(_fields(ln)).get(1, 0) for g, ln in _fields(v) if g == 3), None))
            loc_mapping.append(next((m for g, m in _fields(v) if g == 1 and isinstance(m, int)), 0))
        elif f == 1:
            mappings.append(next((m for g, m in _fields(v) if g == 4 and isinstance(m, int)), 0))
        elif f == 7:
            stacks.append(_ints(_fields(v), 1))
    # One class per location: 0 unsymbolized, 1 fallback, 2 named.
    cls, fb_bin = [], []
    for li, fi in enumerate(locations):
        if fi is None:
            cls.append(0)
            mi = loc_mapping[li]
            fb_bin.append(strings[mappings[mi]] if mi < len(mappings) and mappings[mi] < len(strings) else "?")
        else:
            name = strings[functions[fi]] if fi < len(functions) and functions[fi] < len(strings) else ""
            m = FALLBACK_NAME.search(name)
            cls.append(1 if m else 2)
            fb_bin.append(name[:m.start()] if m else None)
    per_stack = []
    for st in stacks:
        c = [0, 0, 0, {}, {}]
        for li in st:
            k = cls[li] if li < len(cls) else 0
            c[k] += 1
            if k == 1:
                c[3][fb_bin[li]] = c[3].get(fb_bin[li], 0) + 1
            elif k == 0 and li < len(fb_bin):
                c[4][fb_bin[li]] = c[4].get(fb_bin[li], 0) + 1
        per_stack.append(c)
    for f, rp in F:
        if f != 1:
            continue
        for g, sp in _fields(rp):
            if g != 2:
                continue
            for h, prof in _fields(sp):
                if h != 2:
                    continue
                for k, smp in _fields(prof):
                    if k != 2:
                        continue
                    sf = list(_fields(smp))
                    si = next((v for q, v in sf if q == 1 and isinstance(v, int)), 0)
                    vals = _ints(sf, 4)
                    n = vals[0] if vals else max(len(_ints(sf, 5, fixed=True)), 1)
                    c = per_stack[si] if si < len(per_stack) else (0, 0, 0, {}, {})
                    acc["unsymbolized"] += c[0] * n
                    acc["fallback"] += c[1] * n
                    acc["named"] += c[2] * n
                    acc["samples"] += n
                    for b, k in c[3].items():
                        acc["fallback_by_binary"][b] = acc["fallback_by_binary"].get(b, 0) + k * n
                    for b, k in c[4].items():
                        acc["unsymbolized_by_binary"][b] = acc["unsymbolized_by_binary"].get(b, 0) + k * n


def _varint(b, i):
    v = s = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return v, i


def _fields(m):
    i = 0
    while i < len(m):
        k, i = _varint(m, i)
        f, w = k >> 3, k & 7
        if w == 0:
            v, i = _varint(m, i)
            yield f, v
        elif w == 1:
            yield f, ("fixed64", m[i:i + 8])
            i += 8
        elif w == 5:
            i += 4
        elif w == 2:
            n, i = _varint(m, i)
            yield f, m[i:i + n]
            i += n
        else:
            raise ValueError("bad wire type %d" % w)


def _ints(fields, num, fixed=False):
    """A repeated integer field, packed or not (fixed: fixed64, only counted)."""
    out = []
    for f, v in fields:
        if f != num:
            continue
        if isinstance(v, int):
            out.append(v)
        elif isinstance(v, tuple):
            out.append(0)
        elif fixed:
            out.extend([0] * (len(v) // 8))
        else:
            j = 0
            while j < len(v):
                x, j = _varint(v, j)
                out.append(x)
    return out


def kept_frames(path, first, last):
    """Frames of the bodies the sink kept (sink.py --keep) with request numbers first..last."""
    acc = {"named": 0, "fallback": 0, "unsymbolized": 0, "samples": 0, "requests": 0, "fallback_by_binary": {},
           "unsymbolized_by_binary": {}}
    with open(path, "rb") as f:
        while True:
            hdr = f.readline()
            if not hdr:
                break
            num, n = map(int, hdr.split())
            body = f.read(n)
            if first <= num <= last:
                otlp_frames(body, acc)
                acc["requests"] += 1
    return acc


def replay(args, url, seconds, otlp=None):
    """Agent traffic (replay.js), or with otlp ("http", "http1" or "grpc") the same profiles as OTLP
    (replay-otlp.js)."""
    t0 = time.time()
    common = ["--url", url, "--agents", str(args.agents), "--seconds", str(seconds), "--inflight", str(args.inflight)]
    if otlp:
        cmd = ["node", os.path.join(HERE, "replay-otlp.js"), "--requests", args.otlp_requests,
               "--protocol", otlp] + common
    else:
        cmd = ["node", os.path.join(HERE, "replay.js"), "--recording", args.recording] + common + \
            (["--symbols", args.symbols] if args.symbols else [])
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 90)
    if p.returncode != 0:
        raise SystemExit("run.py: replay failed: " + p.stderr)
    r = json.loads(p.stdout.strip().splitlines()[-1])
    r["wall"] = time.time() - t0
    # Children's CPU is only known after they exit: the client's, for the record.
    return r


def wait_drained(maddr, timeout=60.0):
    end = time.time() + timeout
    last = None
    while time.time() < end:
        m = metrics(maddr)
        if m["exported"] + m["dropped"] >= m["accepted_rx"] and m == last:
            return m
        last = m
        time.sleep(0.5)
    return metrics(maddr)


def run_config(args, name, processors, tmp, cold=False, otlp=None):
    """One gateway, one configuration. cold: no warm-up, a fresh symbol store, uploads inside the window.
    otlp ("http": h2c, "http1", "grpc"): the same profiles as OTLP requests to the otlp receiver instead of agent pushes;
    the symbolize processor asks the OTLP debuginfod (libc6-dbg and the recorded executables' own files), as
    an OTel profiler uploads nothing."""
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower())
    rx_proto = "grpc" if otlp == "grpc" else "http"  # http1: the HTTP port, spoken to in HTTP/1.1
    port_file = os.path.join(tmp, slug + ".sink.port")
    keep = os.path.join(tmp, slug + ".bodies")
    sink = subprocess.Popen([sys.executable, os.path.join(HERE, "sink.py"), port_file, "--max-seconds", "900"]
                            + (["--keep", keep] if "symbolize" in processors else []))
    gw = None
    try:
        wait_file(port_file)
        port = int(open(port_file).read())
        cfg = os.path.join(tmp, slug + ".yaml")
        with open(cfg, "w") as f:
            if otlp:
                f.write("receivers:\n  otlp: {protocols: {%s: {endpoint: 127.0.0.1:0}, %s: {endpoint: \"\"}}}\n" % (
                    rx_proto, "http" if rx_proto == "grpc" else "grpc"))
            else:
                f.write("receivers:\n  agent: {endpoint: 127.0.0.1:0}\n")
            if processors:
                f.write("processors:\n")
            if "symbolize" in processors:
                # As a central gateway: an on-disk store of its own (empty at start: debuginfod's files are
                # fetched into it too), no debug directories; symbols come from debuginfod and the agents'
                # uploads. wait_for_symbols: the default.
                cache = os.path.join(tmp, slug + ".cache")
                os.makedirs(cache)
                f.write("  symbolize: {cache_dir: %s, debug_dirs: [], debuginfod_urls: [%s]}\n" % (
                    cache, (args.debuginfod_url_otlp if otlp else args.debuginfod_url) or ""))
            if "batch" in processors:
                f.write("  batch: {timeout: 1s}\n")
            f.write("exporters:\n  otlp_http: {endpoint: \"http://127.0.0.1:%d\"}\n" % port)
            f.write("service:\n  pipelines:\n    profiles: {receivers: [%s], %sexporters: [otlp_http]}\n"
                    "  telemetry: {metrics: {address: 127.0.0.1:0}}\n"
                    % ("otlp" if otlp else "agent", "processors: [%s], " % ", ".join(processors) if processors else ""))
        log = os.path.join(tmp, slug + ".log")
        env = {k: v for k, v in os.environ.items() if k != "DEBUGINFOD_URLS"}
        gw = subprocess.Popen([os.path.join(args.build, "gateway/stackrelay-gateway"), "--config", cfg],
                              stderr=open(log, "w"), env=env)
        addr = maddr = None
        for _ in range(200):
            text = open(log).read()
            a = re.search(r'listening for OTLP profiles.* protocol=%s address=(\S+)' % rx_proto if otlp else
                          r'listening for agents.* address=(\S+)', text)
            m = re.search(r'telemetry server listening" address=(\S+)', text)
            if a and m and "msg=running" in text:
                addr, maddr = a.group(1), m.group(1)
                break
            time.sleep(0.05)
        if not addr:
            raise SystemExit("run.py: the gateway did not start; see " + log + "\n" + open(log).read()[-2000:])
        url = "http://" + addr
        warm_rounds = 0
        if not cold:
            mw = metrics(maddr)
            w = replay(args, url, args.warmup, otlp)
            # Warm means no table is asked for any more: replay again (fresh agents) until none is.
            while "symbolize" in processors and not otlp and w["wanted"] > 0 and warm_rounds < 10:
                wait_drained(maddr)
                warm_rounds += 1
                w = replay(args, url, min(args.warmup, 2))
            # OTLP senders are asked for nothing: warm means the symbols debuginfod has are loaded. Replay
            # again while a warm-up round left more than 1 % of its frames without lines and fewer than the
            # round before (some never get lines: e.g. [vdso]'s, which debuginfod does not have).
            prev = 1.0
            while "symbolize" in processors and otlp and warm_rounds < 10:
                m = wait_drained(maddr)
                frac = (m["unsymbolized"] - mw["unsymbolized"]) / max(w["frames"], 1)
                if frac <= 0.01 or frac >= 0.9 * prev:
                    break
                mw, prev = m, frac
                warm_rounds += 1
                w = replay(args, url, min(args.warmup, 2), otlp)
        m0 = wait_drained(maddr)
        c0, s0 = cpu_seconds(gw.pid), cpu_seconds(sink.pid)
        k0 = json.loads(urllib.request.urlopen("http://127.0.0.1:%d/stats" % port, timeout=10).read())
        r = replay(args, url, args.seconds, otlp)
        m1 = wait_drained(maddr)
        c1, s1 = cpu_seconds(gw.pid), cpu_seconds(sink.pid)
        k1 = json.loads(urllib.request.urlopen("http://127.0.0.1:%d/stats" % port, timeout=10).read())
        exported = m1["exported"] - m0["exported"]
        res = {
            "config": name, "protocol": ("OTLP/" + otlp) if otlp else "agent",
            "sent_samples": r["samples"], "sent_records": r["records"], "requests": r["requests"],
            "statuses": r["statuses"], "sent_frames": r["frames"],
            "exported_samples": exported,
            "dropped_samples": m1["dropped"] - m0["dropped"],
            "gateway_cpu_s": c1 - c0,
            "samples_per_cpu_s": exported / max(c1 - c0, 1e-9),
            "records_per_cpu_s": r["records"] / max(c1 - c0, 1e-9),
            "in_bytes_per_sample": r["wire_bytes"] / max(r["samples"], 1),
            "in_plain_bytes_per_sample": r["plain_bytes"] / max(r["samples"], 1),
            "out_bytes_per_sample": (k1["bytes"] - k0["bytes"]) / max(exported, 1),
            "out_requests": k1["requests"] - k0["requests"],
            "sink_cpu_s": s1 - s0,
            "gateway_peak_rss_mib": peak_rss_mib(gw.pid),
            "replay_wall_s": r["wall"],
            "warmup_extra_rounds": warm_rounds,
            "symbol_uploads": {k: r.get(k, 0) for k in ("wanted", "uploads", "upload_ids", "upload_error_tables",
                                                        "upload_bytes", "upload_statuses")},
            "rejected_profiles": r.get("rejected_profiles", 0),
            # /metrics: named/fallback count locations named for the first time, unsymbolized every frame
            # occurrence exported without lines (so a warm window names nothing new by design).
            "symbolize_metrics": {k: m1[k] - m0[k] for k in ("named", "fallback", "unsymbolized")},
            # Since the gateway started (warm-up included).
            "debuginfod": {k: m1[k] for k in ("debuginfod_requests", "debuginfod_failures", "wait_timeouts")},
        }
        if "symbolize" in processors:
            # What the gateway sent, frame by frame, weighted by CPU samples: the fraction that matters.
            fr = kept_frames(keep, k0["requests"] + 1, k1["requests"])
            total = fr["named"] + fr["fallback"] + fr["unsymbolized"]
            fr["named_fraction"] = fr["named"] / total if total else 0.0
            res["frames_out"] = fr
            res["unsymbolized_occurrence_fraction"] = res["symbolize_metrics"]["unsymbolized"] / max(r["frames"], 1)
        return res
    finally:
        if gw:
            gw.send_signal(signal.SIGTERM)
            try:
                gw.wait(timeout=30)
            except subprocess.TimeoutExpired:
                gw.kill()
                gw.wait()
        sink.terminate()
        sink.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", required=True)
    ap.add_argument("--recording")
    ap.add_argument("--symbols", help="the agent's symbol tables for --recording (default: RECORDING.symbols "
                    "when it exists; without them every table the gateway asks for is answered 'unreadable')")
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--warmup", type=float, default=3)
    ap.add_argument("--agents", type=int, default=16)
    ap.add_argument("--inflight", type=int, default=4)
    ap.add_argument("--record-seconds", type=int, default=20)
    ap.add_argument("--save-recording", metavar="FILE", help="keep the recording made here (and FILE.symbols)")
    ap.add_argument("--min-named", type=float, default=0.95, help="fail below this fraction of frames named "
                    "in the warm run (default 0.95; not checked with --smoke)")
    ap.add_argument("--debug-dir", default="/usr/lib/debug", help="what the bench's debuginfod serves "
                    "(default /usr/lib/debug: libc6-dbg)")
    ap.add_argument("--no-debuginfod", action="store_true", help="no debuginfod: names from agent uploads only")
    ap.add_argument("--smoke", action="store_true", help="short run, no verdict (for the test suite)")
    ap.add_argument("--quick", action="store_true", help="only symbolize+batch (warm, cold) over the agent "
                    "protocol and symbolize+batch over OTLP/HTTP and OTLP/gRPC; implies --smoke")
    ap.add_argument("--json", help="also write the results there")
    args = ap.parse_args()
    args.build = os.path.abspath(args.build)
    args.smoke = args.smoke or args.quick
    tmp = tempfile.mkdtemp(prefix="sr-bench-e2e-")
    dbgd = dbgd_otlp = None
    args.debuginfod_url = None
    try:
        if not args.no_debuginfod:
            try:
                dbgd, args.debuginfod_url, libc, bid = start_debuginfod(args.debug_dir, tmp)
                print("debuginfod: %s serving %s (%s, build ID %s, has its debug file)" % (
                    args.debuginfod_url, args.debug_dir, libc, bid))
            except SystemExit as e:
                if not args.smoke:
                    raise
                # The smoke test checks the plumbing, not the names: it goes on without.
                print("%s; the smoke run goes on without debuginfod" % e)
        if not args.recording:
            args.recording = os.path.join(tmp, "recording.bin")
            record(args.build, args.recording, args.record_seconds)
            args.symbols = args.recording + ".symbols"
            if args.save_recording:
                shutil.copy(args.recording, args.save_recording)
                shutil.copy(args.symbols, args.save_recording + ".symbols")
        elif not args.symbols and os.path.exists(args.recording + ".symbols"):
            args.symbols = args.recording + ".symbols"
        ntab = 0
        if args.symbols:
            data = open(args.symbols, "rb").read()
            i = 0
            while i < len(data):
                n, i = _varint(data, i)
                i += n
                ntab += 1
        print("recording: %s (%d bytes, %d executables); symbol tables: %s" % (
            args.recording, os.path.getsize(args.recording), len(executables(args.recording)),
            "%d in %s" % (ntab, args.symbols) if args.symbols else
            "none (every table asked for is answered 'cannot read')"))
        # The same profiles as OTLP requests (otlp-encode.js: an encoder of its own, not the gateway's), written
        # once; an OTel profiler uploads no symbol tables, so kernel frames are named by the encoder (from the
        # agent's kallsyms upload, as the OTel profiler names them on the host) and the native frames by the
        # gateway from debuginfod, which here also serves the recorded executables' own files (built with their
        # debug info), where the agent path gets their tables from the agents' uploads.
        args.otlp_requests = os.path.join(tmp, "requests.otlp")
        p = subprocess.run(["node", os.path.join(HERE, "otlp-encode.js"), "--recording", args.recording, "--out",
                            args.otlp_requests] + (["--symbols", args.symbols] if args.symbols else []),
                           capture_output=True, text=True, timeout=300)
        if p.returncode != 0:
            raise SystemExit("run.py: otlp-encode.js failed: " + p.stderr)
        enc = json.loads(p.stdout.strip().splitlines()[-1])
        args.debuginfod_url_otlp = None
        if args.debuginfod_url:
            exe_dir = os.path.join(tmp, "otlp-executables")
            os.makedirs(exe_dir)
            copied = 0
            for path, bid in executables(args.recording):
                if os.path.isfile(path) and gnu_build_id(path) == bid:
                    shutil.copy(path, os.path.join(exe_dir, "%s-%s" % (bid[:16], os.path.basename(path))))
                    copied += 1
            dbgd_otlp, args.debuginfod_url_otlp, _, _ = start_debuginfod(args.debug_dir, tmp, [exe_dir],
                                                                          "debuginfod-otlp")
        print("OTLP: %d requests (profiles v1.10, %d bytes before gzip, %d sample records, %d CPU samples; %d off-CPU "
              "records left out; kernel locations named from the agent's kallsyms upload: %d of %d); its debuginfod: %s%s" % (
                  enc["requests"], enc["bytes"], enc["records"], enc["samples"], enc["offcpu_records"],
                  enc["kernel_locations_named"], enc["kernel_locations_named"] + enc["kernel_locations_unnamed"],
                  args.debuginfod_url_otlp or "none",
                  " (also serving %d of the recorded executables found on this host)" % copied
                  if args.debuginfod_url_otlp else ""))
        # --quick: the configurations the test suite needs to see working (both protocols, warm and cold).
        full = run_config(args, "symbolize+batch", ["symbolize", "batch"], tmp)
        cold = run_config(args, "symbolize+batch, cold", ["symbolize", "batch"], tmp, cold=True)
        bonly = None if args.quick else run_config(args, "batch only", ["batch"], tmp)
        ref = None if args.quick else run_config(args, "reference (no processors)", [], tmp)
        ofull = run_config(args, "OTLP/HTTP: symbolize+batch", ["symbolize", "batch"], tmp, otlp="http")
        obonly = None if args.quick else run_config(args, "OTLP/HTTP: batch only", ["batch"], tmp, otlp="http")
        ogrpc = run_config(args, "OTLP/gRPC: symbolize+batch", ["symbolize", "batch"], tmp, otlp="grpc")
        oh1 = None if args.quick else run_config(args, "OTLP/HTTP/1.1: symbolize+batch", ["symbolize", "batch"], tmp,
                                                 otlp="http1")
        results = [r for r in (full, cold, bonly, ref, ofull, obonly, ogrpc, oh1) if r]
        hdr = ("config", "CPU samples/s per core", "records/s per core", "frames named", "exported", "dropped",
               "gateway CPU s", "in B/sample (gzip)", "out B/sample (OTLP gzip)", "peak RSS MiB", "sink CPU s")
        print("| " + " | ".join(hdr) + " |")
        print("|" + "---|" * len(hdr))
        for r in results:
            named = "%.1f %%" % (100 * r["frames_out"]["named_fraction"]) if "frames_out" in r else "-"
            print("| %s | %.0f | %.0f | %s | %d | %d | %.2f | %.2f | %.2f | %.1f | %.2f |" % (
                r["config"], r["samples_per_cpu_s"], r["records_per_cpu_s"], named, r["exported_samples"],
                r["dropped_samples"], r["gateway_cpu_s"], r["in_bytes_per_sample"], r["out_bytes_per_sample"],
                r["gateway_peak_rss_mib"], r["sink_cpu_s"]))
        if not args.quick:
            print("CPU per sample relative to the reference (no processors): symbolize+batch %.2fx, batch only %.2fx; "
                  "symbolize alone costs %.2fx of batch only; cold costs %.2fx of warm" % (
                      ref["samples_per_cpu_s"] / max(full["samples_per_cpu_s"], 1e-9),
                      ref["samples_per_cpu_s"] / max(bonly["samples_per_cpu_s"], 1e-9),
                      bonly["samples_per_cpu_s"] / max(full["samples_per_cpu_s"], 1e-9),
                      full["samples_per_cpu_s"] / max(cold["samples_per_cpu_s"], 1e-9)))
        print("OTLP relative to the agent protocol, CPU samples/s per core of gateway CPU (same profiles, same run): "
              "symbolize+batch, warm: %.2fx (OTLP/HTTP), %.2fx (OTLP/gRPC)%s" % (
                  ofull["samples_per_cpu_s"] / max(full["samples_per_cpu_s"], 1e-9),
                  ogrpc["samples_per_cpu_s"] / max(full["samples_per_cpu_s"], 1e-9),
                  "" if args.quick else ", %.2fx (OTLP/HTTP over HTTP/1.1); batch only: %.2fx (OTLP/HTTP)" % (
                      oh1["samples_per_cpu_s"] / max(full["samples_per_cpu_s"], 1e-9),
                      obonly["samples_per_cpu_s"] / max(bonly["samples_per_cpu_s"], 1e-9))))
        for r in (x for x in (full, cold, ofull, ogrpc, oh1) if x):
            fr, mt = r["frames_out"], r["symbolize_metrics"]
            print("%s: frames exported in the window, weighted by CPU samples (%d OTLP requests, %d CPU samples): "
                  "%.2f %% named, %.2f %% fallback <binary>+0x<address>, %.2f %% without lines; /metrics: %d "
                  "locations named and %d fallback for the first time, %d frame occurrences exported without "
                  "lines (%.2f %% of the %d replayed); uploads: %s" % (
                      r["config"], fr["requests"], fr["samples"], 100 * fr["named_fraction"],
                      100 * fr["fallback"] / max(fr["named"] + fr["fallback"] + fr["unsymbolized"], 1),
                      100 * fr["unsymbolized"] / max(fr["named"] + fr["fallback"] + fr["unsymbolized"], 1),
                      mt["named"], mt["fallback"], mt["unsymbolized"], 100 * r["unsymbolized_occurrence_fraction"],
                      r["sent_frames"], json.dumps(r["symbol_uploads"])))
            print("  since the gateway started: %d debuginfod lookups, %d of them found nothing or timed out; %d "
                  "batches passed on with symbols missing; %d extra warm-up rounds" % (
                      r["debuginfod"]["debuginfod_requests"], r["debuginfod"]["debuginfod_failures"],
                      r["debuginfod"]["wait_timeouts"], r["warmup_extra_rounds"]))
            total = max(fr["named"] + fr["fallback"] + fr["unsymbolized"], 1)
            top = sorted(fr["fallback_by_binary"].items(), key=lambda kv: -kv[1])[:8]
            if top:
                print("  fallback frames by binary (no symbol covers the address, or the agent had no table): " +
                      ", ".join("%s %.2f %%" % (b, 100 * v / total) for b, v in top))
            top = sorted(fr["unsymbolized_by_binary"].items(), key=lambda kv: -kv[1])[:8]
            if top:
                print("  frames without lines by mapping (symbols not there before the batch's wait ran out): " +
                      ", ".join("%s %.2f %%" % (b or "-", 100 * v / total) for b, v in top))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(results, f, indent=1)
        for r in results:
            if r["exported_samples"] <= 0 or r["sent_samples"] <= 0:
                print("run.py: nothing went through (%s)" % r["config"], file=sys.stderr)
                return 1
            # Conservation: every CPU sample the gateway acknowledged in the window was exported, none dropped,
            # every request answered with success (no OTLP partial success).
            ok = ("200", "grpc-0")
            bad = {k: v for k, v in r["statuses"].items() if str(k) not in ok}
            if r["exported_samples"] != r["sent_samples"] or r["dropped_samples"] or r["rejected_profiles"] or bad:
                print("run.py: FAILED: %s: %d CPU samples acknowledged, %d exported, %d dropped, %d profiles "
                      "rejected, answers %s" % (r["config"], r["sent_samples"], r["exported_samples"],
                                                r["dropped_samples"], r["rejected_profiles"], json.dumps(r["statuses"])),
                      file=sys.stderr)
                return 1
        for r in (full, cold):
            # The gateway asks one agent at a time for a table (docs/agent-protocol.md): with many agents
            # replaying the same executables at once, each table is still uploaded once.
            su = r["symbol_uploads"]
            if su["uploads"] > su["upload_ids"]:
                print("run.py: FAILED: %s: %d symbol table uploads for %d IDs: the gateway asked several agents "
                      "for the same table" % (r["config"], su["uploads"], su["upload_ids"]), file=sys.stderr)
                return 1
        if not args.smoke:
            print("target >= 3,000,000 CPU samples/s per core end to end, warm: %s (%.2f M); cold (fresh gateway, "
                  "tables uploaded in the window): %.2f M, %.1f %% of frames named" % (
                      "met" if full["samples_per_cpu_s"] >= 3e6 else "NOT met", full["samples_per_cpu_s"] / 1e6,
                      cold["samples_per_cpu_s"] / 1e6, 100 * cold["frames_out"]["named_fraction"]))
            if full["frames_out"]["named_fraction"] < args.min_named:
                top = sorted(list(full["frames_out"]["fallback_by_binary"].items()) +
                             list(full["frames_out"]["unsymbolized_by_binary"].items()), key=lambda kv: -kv[1])[:3]
                print("\nrun.py: FAILED: only %.1f %% of the frames exported in the warm window were named (need >= "
                      "%.0f %%), so the symbolize figure is not the cost of naming every frame. Unnamed most: %s. "
                      "Symbol tables: %s; debuginfod: %s (a binary with neither symbols nor debug info cannot be "
                      "named; see bench/gateway-throughput/README.md)." % (
                          100 * full["frames_out"]["named_fraction"], 100 * args.min_named,
                          ", ".join(b for b, _ in top) or "-", args.symbols or "none given",
                          args.debuginfod_url or "none"), file=sys.stderr)
                return 1
        return 0
    finally:
        for d in (dbgd, dbgd_otlp):
            if not d:
                continue
            d.terminate()
            try:
                d.wait(timeout=10)
            except subprocess.TimeoutExpired:
                d.kill()
                d.wait()
        shutil.rmtree(tmp, ignore_errors=True)

if __name__ == "__main__":
    sys.exit(main())
