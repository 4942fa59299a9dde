#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Whole Node.js stacks without flags (real eBPF, Debian's /usr/bin/node).

tests/workloads/v8-split.js starts (no flags: no frame pointers asked for, no
perf map), prints its pid and warms up; the agent (--pid filter, --output,
profiling.unwinding auto) is started, and once its /metrics show a complete
table-unwound stack (the node binary's table is loaded), the test sends the
workload its start line and notes the time. The workload then spends SECONDS
of CPU time in alphaWork and betaWork, timing them itself. Checked, over the
main thread's samples of the agent windows that start after that moment:
  - >= 95 % reach the process entry: the last user frame is node's _start (nm
    on the node binary; its .symtab names it);
  - >= 90 % go through V8's code: a frame outside every file mapping (JIT
    code) or in one of the node binary's embedded builtins (Builtins_*, which
    have no CFI), with node::Start below it (node's main tail-calls it, so
    main itself is never on the stack) — the stacks that stopped at
    Builtins_JSEntryTrampoline before V8 frames were followed;
  - the agent's end-reason counters (its exit log line): complete is >= 95 %
    of the table-unwound stacks, and they are printed.
Then tests/workloads/v8-worker.js (started with the first, released after
it) spends WORKER_SECONDS of CPU in a worker thread: >= 90 % of the worker
thread's samples cross JIT code or builtins and end in libc's thread root
(the last frame is in libc: clone3, where the thread starts).

Nothing waits on a timer: the workload spends its CPU budget, and the agent is
stopped (SIGTERM: it drains BPF and flushes) after the workload exited.
"""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ports import free_port  # noqa: E402
import metricslib  # noqa: E402
import agentlib  # noqa: E402

SECONDS = 4
WORKER_SECONDS = 2
FREQ = 997
USER = 1
UNKNOWN = 3
# node::Start(int, char**): node's main tail-calls it, so it is the bottom of node's own frames above libc.
NODE_START = "_ZN4node5StartEiPPc"



def main():
    agentlib.require_root_bpf(needs=("table unwinding",))
    env = agentlib.Env()
    node = subprocess.run(["sh", "-c", "command -v node"], capture_output=True, text=True).stdout.strip()
    if not node:
        agentlib.skip("node (Node.js) not installed")
    node = os.path.realpath(node)
    syms = agentlib.Symbols(node)
    if not syms.syms:
        agentlib.skip("%s has no .symtab: its frames cannot be checked by name" % node)
    c = agentlib.Checks()
    w = wk = agent = None
    try:
        script = os.path.join(env.src, "tests", "workloads", "v8-split.js")
        w = subprocess.Popen([node, script, str(SECONDS)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True, cwd=env.tmp)
        pid = int(w.stdout.readline())
        wk = subprocess.Popen([node, os.path.join(env.src, "tests", "workloads", "v8-worker.js"),
                               str(WORKER_SECONDS)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                              cwd=env.tmp)
        wk_pid = int(wk.stdout.readline())
        metrics_port = free_port()
        cfg = os.path.join(env.tmp, "agent.yaml")
        with open(cfg, "w") as f:
            f.write("profiling: {report_interval: 1s}\n"
                    "telemetry: {metrics: {address: 127.0.0.1:%d}}\n" % metrics_port)
        out_path = os.path.join(env.tmp, "out.pb")
        agent, log = agentlib.start_agent(env, ["--config", cfg, "--pid", str(pid), "--pid", str(wk_pid),
                                                "--frequency", str(FREQ),
                                                "--duration", "300", "--output", out_path, "--log-level", "info"])
        if not c.check(agent is not None, "agent started"):
            return c.finish()

        def table_loaded():
            try:
                text = metricslib.scrape(metrics_port, timeout=5)
            except OSError:
                return None
            v = metricslib.parse(text).get('stackrelay_agent_unwind_stops_total{reason="complete"}')
            return v and v > 0
        c.check(agentlib.wait_for(table_loaded, 120), "the warm-up's stacks complete: node's unwind table is loaded")
        go_ns = time.time_ns()
        w.stdin.write("go\n")
        w.stdin.flush()
        done = w.stdout.readline()
        c.check(w.wait(timeout=300) == 0 and done.startswith("done"), "workload spent its CPU budget (%s)" %
                done.strip())
        wk.stdin.write("go\n")
        wk.stdin.flush()
        wk_done = wk.stdout.readline()
        c.check(wk.wait(timeout=300) == 0 and wk_done.startswith("done 0"), "the worker thread spent its CPU budget")
        rc, stderr = agentlib.stop_agent(agent, log)
        agent = None
        c.check(rc == 0, "agent exits 0 on SIGTERM (rc=%d)" % rc)
        ends = agentlib.logfmt_fields(stderr, "unwinding stopped") or {}
        ends = {k: int(v) for k, v in ends.items() if v.isdigit()}
        print("# end reasons: " + " ".join("%s=%d" % kv for kv in sorted(ends.items())))

        out = agentlib.Output(env.pb, out_path)

        def crosses_v8(user):
            """A frame of JIT code (no file) or of one of node's builtins."""
            for f in user:
                exe = out.exes.get(f.executable_id)
                if f.kind == UNKNOWN or (exe is not None and os.path.realpath(exe.path) == node and
                                         (syms.lookup(f.address) or "").startswith("Builtins_")):
                    return True
            return False
        main_samples = [s for s in out.for_pid(pid) if s.tid == pid and s.start_time_unix_nano >= go_ns]
        total = sum(s.count for s in main_samples)
        entry = through_v8 = 0
        for s in main_samples:
            user = [f for f in out.frames(s) if f.kind in (USER, UNKNOWN)]
            names = []
            for f in user:
                exe = out.exes.get(f.executable_id)
                if f.kind == USER and exe is not None and os.path.realpath(exe.path) == node:
                    names.append(syms.lookup(f.address) or "?")
                else:
                    names.append("[jit]" if f.kind == UNKNOWN else "[lib]")
            if names and names[-1] == "_start":
                entry += s.count
                if crosses_v8(user) and NODE_START in names:
                    through_v8 += s.count
        c.check(total >= 1000, "main thread: %d samples after the start line (>= 1000)" % total)
        c.check(total and entry >= 0.95 * total,
                "main thread: %d of %d samples (%.1f%%) reach node's _start (>= 95%%)" %
                (entry, total, 100.0 * entry / total if total else 0))
        c.check(total and through_v8 >= 0.9 * total,
                "main thread: %d of %d samples (%.1f%%) cross JIT code or V8's builtins down to node::Start and _start "
                "(>= 90%%)" % (through_v8, total, 100.0 * through_v8 / total if total else 0))
        wk_total = wk_root = 0
        for s in out.for_pid(wk_pid):
            if s.tid == wk_pid:
                continue
            user = [f for f in out.frames(s) if f.kind in (USER, UNKNOWN)]
            wk_total += s.count
            if not user or user[-1].kind != USER:
                continue
            last = out.exes.get(user[-1].executable_id)
            if last is not None and os.path.basename(last.path).startswith("libc.so") and crosses_v8(user):
                wk_root += s.count
        c.check(wk_total >= 300 and wk_root >= 0.9 * wk_total,
                "worker thread: %d of %d samples (%.1f%%) cross V8's code and end in libc's thread root (>= 90%%)" %
                (wk_root, wk_total, 100.0 * wk_root / wk_total if wk_total else 0))
        fin = ends.get("end_complete", 0)
        others = sum(v for k, v in ends.items() if k.startswith("end_") and k != "end_complete")
        c.check(fin >= 0.95 * (fin + others),
                "end reasons: complete %d of %d table-unwound stacks (>= 95%%)" % (fin, fin + others))
        return c.finish()
    finally:
        for p in (w, wk, agent):
            if p and p.poll() is None:
                p.kill()
                p.wait()
        if os.environ.get("SR_NODE_KEEP"):
            import shutil
            shutil.copy(os.path.join(env.tmp, "out.pb"), os.environ["SR_NODE_KEEP"])
        env.cleanup()


if __name__ == "__main__":
    sys.exit(main())
