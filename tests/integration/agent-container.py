#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Container identity and the cgroup filter, with real cgroups and real eBPF.

The test makes a cgroup v2 directory shaped like a kubelet's (cgroupfs
driver): kubepods/besteffort/pod<uid>/<64 hex>, moves a workload into it,
runs a second workload outside, and profiles with profiling.cgroups set to
the pod's directory (as /sys/fs/cgroup/..., which on a hybrid host lives
under the cgroup2 mount). Checks: the inside workload's samples carry the
container ID and pod UID; nothing outside the pod is recorded; without the
filter both show up, only the inside one with a container ID; --pid records
only that process. Everything it created is removed again.
"""
import os
import secrets
import subprocess
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import agentlib  # noqa: E402


def cgroup2_mount():
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            if right.split(" ")[0] == "cgroup2":
                return left.split(" ")[4]
    return None


def main():
    agentlib.require_root_bpf(needs=("profiling.cgroups",))
    mnt = cgroup2_mount()
    if not mnt:
        agentlib.skip("no cgroup v2 mount")
    env = agentlib.Env()
    c = agentlib.Checks()
    pod_uid = str(uuid.uuid4())
    cid = secrets.token_hex(32)
    parts = ["kubepods", "besteffort", "pod" + pod_uid, cid]
    created = []
    procs = []
    try:
        path = mnt
        for p in parts:
            path = os.path.join(path, p)
            if not os.path.isdir(path):
                os.mkdir(path)
                created.append(path)
        inside, (inside_pid,) = agentlib.start([env.workload("alphabeta-fp"), "10"])
        procs.append(inside)
        with open(os.path.join(path, "cgroup.procs"), "w") as f:
            f.write(str(inside_pid))
        outside, (outside_pid,) = agentlib.start([env.workload("uselib"), "10"])
        procs.append(outside)
        line = open("/proc/%d/cgroup" % inside_pid).read()
        c.check(("/kubepods/besteffort/pod%s/%s" % (pod_uid, cid)) in line,
                "workload moved into the pod's container cgroup")

        cfg = os.path.join(env.tmp, "agent.yaml")
        with open(cfg, "w") as f:
            # A config file makes the agent send too; no gateway runs here, so keep the final flush short.
            f.write("gateway:\n  flush_timeout: 1s\nprofiling:\n  frequency: 199\n  report_interval: 1s\n"
                    "  cgroups: [\"/sys/fs/cgroup/kubepods/besteffort/pod%s\"]\n" % pod_uid)
        out_path = os.path.join(env.tmp, "out.pb")
        rc, stderr = agentlib.run_agent(env, ["--config", cfg, "--duration", "3", "--output", out_path], 60)
        c.check(rc == 0, "agent with a cgroup filter exits 0 (rc=%d)" % rc)
        out = agentlib.Output(env.pb, out_path)
        c.check(len(out.requests) >= 3 and out.redefined == 0 and
                len({r.samples[0].start_time_unix_nano for r in out.requests if r.samples}) >= 3,
                "report_interval 1s: %d windows, each definition written once (%d repeats)" %
                (len(out.requests), out.redefined))
        ins = out.for_pid(inside_pid)
        n = sum(s.count for s in ins)
        c.check(n >= 50, "%d samples from the workload in the pod's cgroup" % n)
        c.check(all(s.container_id == cid for s in ins), "every one has container_id %s" % cid[:12])
        c.check(all(s.pod_uid == pod_uid for s in ins), "every one has pod_uid %s" % pod_uid)
        others = {s.pid for s in out.samples if s.pid != inside_pid}
        c.check(not others, "no process outside the pod was recorded (found pids %s)" % sorted(others)[:10])
        c.check(not out.for_pid(outside_pid), "the workload outside the pod was filtered in BPF")

        # Without the filter, the outside workload shows up, without a container ID.
        out2_path = os.path.join(env.tmp, "out2.pb")
        rc, _ = agentlib.run_agent(env, ["--frequency", "99", "--duration", "1", "--output", out2_path], 60)
        out2 = agentlib.Output(env.pb, out2_path)
        o = out2.for_pid(outside_pid)
        i2 = out2.for_pid(inside_pid)
        c.check(rc == 0 and o and all(s.container_id == "" for s in o),
                "unfiltered: the outside workload is recorded, with no container ID")
        c.check(i2 and all(s.container_id == cid for s in i2), "unfiltered: the inside workload keeps its container ID")

        # The pid allowlist (--pid): only that process.
        out3_path = os.path.join(env.tmp, "out3.pb")
        rc, _ = agentlib.run_agent(env, ["--frequency", "199", "--duration", "1", "--pid", str(outside_pid),
                                         "--output", out3_path], 60)
        out3 = agentlib.Output(env.pb, out3_path)
        pids = {s.pid for s in out3.samples}
        c.check(rc == 0 and pids == {outside_pid}, "--pid %d: only that process recorded (got %s)" %
                (outside_pid, sorted(pids)[:10]))

        bad = os.path.join(env.tmp, "bad.yaml")
        with open(bad, "w") as f:
            f.write("profiling:\n  cgroups: [\"kubepods/no-such-pod-%s\"]\n" % pod_uid)
        rc, stderr = agentlib.run_agent(env, ["--config", bad, "--duration", "1", "--output",
                                              os.path.join(env.tmp, "x.pb")], 60)
        c.check(rc != 0 and "no-such-pod" in stderr, "a cgroup that does not exist is an error naming it (rc=%d)" % rc)
        return c.finish()
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        time.sleep(0.1)
        for path in reversed(created):
            try:
                os.rmdir(path)
            except OSError as e:
                print("cleanup: cannot remove %s: %s" % (path, e))
        env.cleanup()


if __name__ == "__main__":
    sys.exit(main())
