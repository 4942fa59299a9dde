#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Hostile neighbours against the real agent (docs/security.md, "The agent
against hostile files"), with real eBPF and the Node fake gateway.

While an honest workload runs, processes map hostile files executable:
- a 1.4 MB ELF whose compressed .debug_frame really inflates to the 1.5 GB
  its Chdr declares (hostile_files.zlib_bomb);
- a sparse file whose one PT_NOTE sits at a misaligned offset declaring 1 GiB;
and two short-lived processes run copies of a workload that, once they have
exited (their map_files entries gone), are swapped: one for a FIFO, one for a
symlink out of the tree (to /etc/passwd). Only then does the gateway come up
and want every executable's symbols, so the agent's sender reopens both by
path, on its one thread.

The test runs in a cgroup of its own (cgroup v2) and the agent profiles only
that cgroup, so the rest of the machine does not move the RSS measured.

Checks: the agent's peak RSS (VmHWM) stays within 64 MiB; the honest
workload's samples are accepted, and keep being accepted after the sender met
the FIFO (it was never stuck); the swapped files are answered with an error
table, not read; /metrics counts the refusals by reason. Needs root, BPF and
node (skips with 77 otherwise).
"""
import os
import random
import shutil
import socket
import subprocess
import sys
import time
import importlib.machinery

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import agentlib  # noqa: E402
import hostile_files  # noqa: E402
import metricslib  # noqa: E402

sender_lib = importlib.machinery.SourceFileLoader(
    "sender_lib", os.path.join(os.path.dirname(os.path.abspath(__file__)), "sender-lib.py")).load_module()

RSS_BUDGET_KB = 64 * 1024

MAPPER = r"""
import mmap, os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY)
m = mmap.mmap(fd, 4096, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_EXEC)
print(os.getpid(), flush=True)
end = time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    pass
"""


def cgroup2_mount():
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            if right.split(" ")[0] == "cgroup2":
                return left.split(" ")[4]
    return None


def enter_cgroup(tmp_name):
    """Moves this test (and so every process it starts) into a cgroup of its own, so the agent
    profiles only them: the machine's other processes would move the RSS measured. Returns
    (the cgroup's path for profiling.cgroups, a function that undoes it), or (None, None)."""
    mnt = cgroup2_mount()
    if not mnt:
        return None, None
    with open("/proc/self/cgroup") as f:
        old = next((ln.strip()[3:] for ln in f if ln.startswith("0::")), None)
    path = os.path.join(mnt, tmp_name)
    try:
        os.mkdir(path)
        with open(os.path.join(path, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))
    except OSError as e:
        print("no cgroup of its own (%s): the agent profiles the whole machine" % e)
        return None, None

    def leave():
        try:
            with open(os.path.join(mnt, old.lstrip("/"), "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
            os.rmdir(path)
        except OSError as e:
            print("cleanup: cannot remove %s: %s" % (path, e))
    return path, leave


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def status_kb(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return None


def wait_for(what, cond, bound):
    """Polls cond() until it holds; the bound only ends a test that would otherwise hang."""
    end = time.monotonic() + bound
    while time.monotonic() < end:
        v = cond()
        if v:
            return v
        time.sleep(0.25)
    print("gave up waiting for " + what)
    return None


def unique_copy(src, dst):
    """A copy of a workload built without a build ID, with bytes appended: its own content-hash ID."""
    shutil.copyfile(src, dst)
    with open(dst, "ab") as f:
        f.write(random.randbytes(64))
    os.chmod(dst, 0o755)


def main():
    agentlib.require_root_bpf()
    sender_lib.need("node")
    env = agentlib.Env()
    c = agentlib.Checks()
    procs = []
    fake = None
    agent = None
    cgroup, leave_cgroup = enter_cgroup("sr-hostile-agent-%d" % os.getpid())
    try:
        bomb = os.path.join(env.tmp, "bomb.so")
        note = os.path.join(env.tmp, "note.so")
        hostile_files.zlib_bomb(bomb)
        hostile_files.sparse_note(note)
        mapper = os.path.join(env.tmp, "mapper.py")
        with open(mapper, "w") as f:
            f.write(MAPPER)
        fifo_victim = os.path.join(env.tmp, "fifo-victim")
        link_victim = os.path.join(env.tmp, "link-victim")
        for p in (fifo_victim, link_victim):
            unique_copy(env.workload("alphabeta-nofp"), p)

        gw_port, m_port = free_port(), free_port()
        cfg = os.path.join(env.tmp, "agent.yaml")
        with open(cfg, "w") as f:
            f.write("gateway:\n  endpoint: http://127.0.0.1:%d\n  flush_timeout: 2s\n"
                    "profiling:\n  frequency: 99\n  report_interval: 1s\n" % gw_port)
            if cgroup:
                f.write("  cgroups: [\"%s\"]\n" % cgroup)
            f.write("telemetry:\n  metrics:\n    address: 127.0.0.1:%d\n" % m_port)
        honest, (honest_pid,) = agentlib.start([env.workload("alphabeta-fp"), "120"])
        procs.append(honest)
        agent, log = agentlib.start_agent(env, ["--config", cfg, "--duration", "180"])
        if agent is None:
            c.check(False, "agent started")
            return c.finish()
        before_kb = status_kb(agent.pid, "VmHWM")

        # The hostile files, mapped executable by running processes, and the victims to be swapped.
        for path in (bomb, note):
            p, _ = agentlib.start([sys.executable, mapper, path, "6"])
            procs.append(p)
        for path in (fifo_victim, link_victim):
            p, _ = agentlib.start([path, "4"])
            procs.append(p)
        for p in procs[1:]:
            p.wait(timeout=120)

        # map_files is gone with the processes: the sender will have to open the paths.
        os.unlink(fifo_victim)
        os.mkfifo(fifo_victim)
        os.unlink(link_victim)
        os.symlink("/etc/passwd", link_victim)

        parsed_kb = status_kb(agent.pid, "VmHWM")
        fake = sender_lib.Fake(env.tmp, "hostile", ["--want-symbols"], port=gw_port)

        def tables_for_victims():
            st = fake.stats()
            ids = {k: p for k, p in st["executable_paths"].items() if p in (fifo_victim, link_victim)}
            got = {ids[k]: t for k, t in st["symbol_tables"].items() if k in ids}
            return got if len(got) == 2 else None

        tables = wait_for("the victims' symbol tables", tables_for_victims, 120)
        c.check(tables is not None, "the gateway got an answer for both swapped executables")
        if tables:
            for path, t in sorted(tables.items()):
                c.check(t["symbols"] == 0 and t["error"] != "",
                        "%s: an error table, nothing read (%s)" % (os.path.basename(path), t["error"]))

        # The sender is not stuck: the honest workload's samples keep being accepted after the swap.
        first = int(fake.stats()["per_pid"].get(str(honest_pid), "0"))
        c.check(first > 0, "the honest workload's samples were accepted (%d)" % first)
        later = wait_for("more accepted samples",
                         lambda: int(fake.stats()["per_pid"].get(str(honest_pid), "0")) > first, 60)
        c.check(bool(later), "and keep being accepted after the sender met the FIFO and the symlink")

        refused = metricslib.by_label(metricslib.scrape(m_port, timeout=5), "stackrelay_agent_parse_refused_total",
                                       "reason")
        print("refusals: %s" % refused)
        c.check(refused.get("inflate_ratio", 0) + refused.get("inflated_size", 0) >= 1,
                "the zlib bomb was refused before inflating (inflate_ratio %d, inflated_size %d)" %
                (refused.get("inflate_ratio", 0), refused.get("inflated_size", 0)))
        c.check(refused.get("note", 0) >= 1, "the misaligned 1 GiB note was refused (note %d)" % refused.get("note", 0))
        c.check(refused.get("not_regular", 0) >= 1, "the FIFO was refused (not_regular %d)" %
                refused.get("not_regular", 0))
        c.check(refused.get("path_escape", 0) >= 1, "the symlink was not followed (path_escape %d)" %
                refused.get("path_escape", 0))

        hwm_kb = status_kb(agent.pid, "VmHWM")
        print("agent VmHWM: %d kB before the hostile processes, %d kB after them, %d kB after the uploads" %
              (before_kb, parsed_kb, hwm_kb))
        if agentlib.sanitized(env.agent):
            # ASan's shadow memory and its quarantine of freed blocks (256 MiB by default) are no
            # measure of the agent's own; the refusals above still show nothing was inflated.
            c.check(hwm_kb > 0, "the agent's peak RSS %d kB (bound not checked under AddressSanitizer)" % hwm_kb)
        else:
            c.check(hwm_kb <= RSS_BUDGET_KB, "the agent's peak RSS stayed within 64 MiB (%d kB)" % hwm_kb)

        rc, _ = agentlib.stop_agent(agent, log)
        agent = None
        c.check(rc == 0, "agent exits 0 (rc=%d)" % rc)
        return c.finish()
    finally:
        if agent is not None and agent.poll() is None:
            agent.kill()
            agent.wait()
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        if fake is not None:
            fake.stop()
        if leave_cgroup:
            time.sleep(0.1)
            leave_cgroup()
        env.cleanup()


if __name__ == "__main__":
    sys.exit(main())
