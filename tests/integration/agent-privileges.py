#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The agent drops the capabilities only setup needs (docs/security.md,
"The agent's privileges"), and still profiles everything after the drop.

One agent run as root (every capability), with /metrics and --output:
  - once it profiles, /proc/AGENT/status and the status of each of its
    threads hold exactly the documented running set (CAP_DAC_READ_SEARCH,
    CAP_SYS_PTRACE, CAP_SYSLOG, CAP_BPF, CAP_CHECKPOINT_RESTORE) in CapEff,
    CapPrm and CapBnd, nothing in CapInh and CapAmb, and NoNewPrivs: 1; its
    log and /metrics say the same;
  - a process started before the drop is profiled;
  - processes started after it are too: a Python script (python.enabled is
    on by default) whose function is named from its interpreter's memory
    (process_vm_readv), and a container-like process: qsortdeep (no frame
    pointers) copied into a tmpfs mounted in its own mount namespace, so
    its file exists only through /proc/PID/root and /proc/PID/map_files,
    run as nobody from a mode 0500 file that root without
    CAP_DAC_READ_SEARCH could not read. Its executable is identified by its
    build ID under its in-namespace path, and its stacks reach main through
    the unwind table built from that file after the drop (a BPF map created
    with the CAP_BPF kept).
A second run with --keep-privileges keeps every capability.
"""
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ports import free_port  # noqa: E402
import metricslib  # noqa: E402
import agentlib  # noqa: E402

# Bits of the documented running set (linux/capability.h).
RUNNING = {"dac_read_search": 2, "sys_ptrace": 19, "syslog": 34, "bpf": 39, "checkpoint_restore": 40}
NOBODY = 65534
INTERPRETED = 4
PY_SCRIPT = """
import os, sys, time
print(os.getpid(), flush=True)
def privdrop_spin(seconds):
    end = time.process_time() + seconds
    x = 0
    while time.process_time() < end:
        for i in range(1000):
            x = (x * 31 + i) % 1000003
    return x
privdrop_spin(float(sys.argv[1]))
"""


def status(pid):
    fields = {}
    with open("/proc/%s/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            fields[k] = v.strip()
    return fields


def caps(fields, key):
    return int(fields[key], 16)


def names(mask):
    return sorted(n for n, b in RUNNING.items() if mask >> b & 1) + \
        ["cap_%d" % b for b in range(64) if mask >> b & 1 and b not in RUNNING.values()]


def main():
    # Its checks follow Python frames and tables built after the drop.
    agentlib.require_root_bpf(needs=("table unwinding",))
    for tool in ("unshare", "setpriv", "mount"):
        if not shutil.which(tool):
            agentlib.skip(tool + " (util-linux) not installed")
    if not os.path.exists("/usr/bin/python3.11"):
        agentlib.skip("/usr/bin/python3.11 not installed")
    env = agentlib.Env()
    c = agentlib.Checks()
    procs = []
    agent = None
    try:
        mine = status("self")
        expect = sum(1 << b for b in RUNNING.values()) & caps(mine, "CapBnd")
        print("# test's own (the agent's before): CapEff %s CapPrm %s CapBnd %s NoNewPrivs %s" %
              (mine["CapEff"], mine["CapPrm"], mine["CapBnd"], mine["NoNewPrivs"]))
        if not caps(mine, "CapEff") >> 8 & 1:
            agentlib.skip("this sandbox withholds CAP_SETPCAP: the bounding set could not be checked")

        # The container's file system: a tmpfs only its mount namespace sees.
        ctr = os.path.join(env.tmp, "ctr")
        os.mkdir(ctr)
        qsortdeep = env.workload("qsortdeep")
        port = free_port()
        cfg = os.path.join(env.tmp, "agent.yaml")
        with open(cfg, "w") as f:
            f.write("gateway:\n  flush_timeout: 1s\nprofiling:\n  frequency: 199\n  report_interval: 1s\n"
                    "telemetry:\n  metrics:\n    address: 127.0.0.1:%d\n" % port)
        out_path = os.path.join(env.tmp, "out.pb")
        before, (before_pid,) = agentlib.start([env.workload("alphabeta-fp"), "4"])
        procs.append(before)
        agent, log = agentlib.start_agent(env, ["--config", cfg, "--duration", "120", "--output", out_path])
        if not c.check(agent is not None, "agent starts profiling"):
            return c.finish()

        st = status(agent.pid)
        print("# agent after the drop: CapEff %s CapPrm %s CapInh %s CapBnd %s CapAmb %s NoNewPrivs %s" %
              (st["CapEff"], st["CapPrm"], st["CapInh"], st["CapBnd"], st["CapAmb"], st["NoNewPrivs"]))
        c.check(caps(st, "CapEff") == expect, "CapEff %s is the running set %s" % (names(caps(st, "CapEff")),
                                                                                    names(expect)))
        c.check(caps(st, "CapPrm") == expect, "CapPrm %s is the running set" % names(caps(st, "CapPrm")))
        c.check(caps(st, "CapBnd") == expect, "CapBnd %s is the running set" % names(caps(st, "CapBnd")))
        c.check(caps(st, "CapInh") == 0 and caps(st, "CapAmb") == 0, "no inheritable or ambient capabilities")
        c.check(st["NoNewPrivs"] == "1", "NoNewPrivs: 1")
        tasks = os.listdir("/proc/%d/task" % agent.pid)
        same = [t for t in tasks if all(status("%d/task/%s" % (agent.pid, t))[k] == st[k]
                                        for k in ("CapEff", "CapPrm", "CapBnd", "CapInh", "CapAmb", "NoNewPrivs"))]
        c.check(len(tasks) >= 2 and len(same) == len(tasks),
                "every thread of the agent (%d) holds the same sets" % len(tasks))
        fields = agentlib.logfmt_fields("".join(log), "dropped the capabilities only setup needs") or {}
        kept = ",".join("CAP_" + n.upper() for n, b in sorted(RUNNING.items(), key=lambda kv: kv[1])
                        if expect >> b & 1)
        c.check(fields.get("kept") == kept and "CAP_PERFMON" in fields.get("dropped", "") and "CAP_SYS_ADMIN" in fields.get("dropped", "")
                and fields.get("bounding_set") == "dropped",
                "the start-up log names what was kept and dropped: %s" % fields)

        # Started after the drop: Python, and the container-like process.
        script = os.path.join(env.tmp, "privdrop.py")
        with open(script, "w") as f:
            f.write(PY_SCRIPT)
        py, (py_pid,) = agentlib.start(["/usr/bin/python3.11", script, "3"])
        procs.append(py)
        inner = ("mount -t tmpfs -o mode=0755 sr-priv-test {ctr} && cp {exe} {ctr}/qsortdeep && "
                 "chown {nobody}:{nobody} {ctr}/qsortdeep && chmod 0500 {ctr}/qsortdeep && "
                 "exec setpriv --reuid {nobody} --regid {nobody} --clear-groups {ctr}/qsortdeep 3"
                 ).format(ctr=ctr, exe=qsortdeep, nobody=NOBODY)
        ctr_proc, (ctr_pid,) = agentlib.start(["unshare", "--mount", "--propagation", "private", "sh", "-c", inner])
        procs.append(ctr_proc)
        c.check(not os.listdir(ctr), "the container's executable is not visible outside its mount namespace")
        c.check(os.stat("/proc/%d" % ctr_pid).st_uid == NOBODY, "the container's process runs as nobody")
        for p in procs:
            p.wait(timeout=120)
        text = metricslib.scrape(port)
        m = metricslib.parse(text)
        rc, stderr = agentlib.stop_agent(agent, log)
        agent = None
        c.check(rc == 0, "agent exits 0 (rc=%d)" % rc)
        c.check(m.get("stackrelay_agent_privileges_dropped") == 1 and m.get("stackrelay_agent_no_new_privs") == 1,
                "/metrics: privileges_dropped 1, no_new_privs 1")
        eff = {labels["capability"] for family, labels, _, _ in metricslib.samples(text)
               if family == "stackrelay_agent_capability" and labels.get("set") == "effective"}
        c.check(eff == {n for n, b in RUNNING.items() if expect >> b & 1},
                "/metrics lists the effective set: %s" % sorted(eff))
        print("# agent RSS %.1f MiB, CPU %.2f s" % (m.get("process_resident_memory_bytes") / 2 ** 20,
                                                   m.get("process_cpu_seconds_total")))

        out = agentlib.Output(env.pb, out_path)
        n = sum(s.count for s in out.for_pid(before_pid))
        c.check(n >= 100, "process started before the drop: %d samples" % n)

        funcs = {}
        for r in out.requests:
            for fn in r.functions:
                funcs[fn.id] = fn
        py_samples = out.for_pid(py_pid)
        named = sum(s.count for s in py_samples
                    if any(f.kind == INTERPRETED and funcs.get(f.function_id) is not None and
                           funcs[f.function_id].name == "privdrop_spin" for f in out.frames(s)))
        total = sum(s.count for s in py_samples)
        # What the dropped privileges decide is whether the interpreter can be read at all: without
        # SYS_PTRACE nothing is named. How soon a new interpreter is named (its first samples come
        # before the agent has read its layout, more of them on a loaded host) is agent-python's.
        c.check(total >= 100 and named >= 0.5 * total,
                "Python started after the drop: privdrop_spin named in %d of %d samples (>= 50%%)" % (named, total))

        ctr_samples = out.for_pid(ctr_pid)
        total = sum(s.count for s in ctr_samples)
        bid = agentlib.build_id(qsortdeep)
        exe = out.exes.get(bid) if bid else None
        c.check(total >= 100, "container process started after the drop: %d samples" % total)
        c.check(exe is not None and exe.path == os.path.join(ctr, "qsortdeep"),
                "its executable is identified by build ID at its in-namespace path (%s)" % (exe.path if exe else None))
        syms = agentlib.Symbols(qsortdeep)
        reach = sum(s.count for s in ctr_samples
                    if any(f.executable_id == bid and syms.lookup(f.address) == "main" for f in out.frames(s)))
        c.check(total and reach >= 0.8 * total,
                "its stacks reach main through a table built after the drop: %d of %d (>= 80%%)" % (reach, total))

        # --keep-privileges: every capability stays.
        agent, log = agentlib.start_agent(env, ["--keep-privileges", "--duration", "30", "--output",
                                                os.path.join(env.tmp, "keep.pb")])
        if c.check(agent is not None, "--keep-privileges: agent starts profiling"):
            st = status(agent.pid)
            c.check(st["CapEff"] == mine["CapEff"] and st["CapBnd"] == mine["CapBnd"],
                    "--keep-privileges: CapEff %s and CapBnd %s unchanged" % (st["CapEff"], st["CapBnd"]))
            c.check("--keep-privileges" in "".join(log), "--keep-privileges: the log says so")
            rc, _ = agentlib.stop_agent(agent, log)
            agent = None
            c.check(rc == 0, "--keep-privileges: agent exits 0")
        return c.finish()
    finally:
        if agent is not None:
            agent.kill()
            agent.wait()
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        env.cleanup()


if __name__ == "__main__":
    sys.exit(main())
