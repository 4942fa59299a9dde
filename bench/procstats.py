# SPDX-License-Identifier: Apache-2.0
"""What a process costs, read from /proc, for the bench scripts.

  proc_cpu_ns(pid)   user + system CPU of every thread, ns (schedstat; /proc/PID/stat counts 10 ms ticks)
  fdinfo(pid)        {fd path: {key: value}} of the BPF programs and maps it holds
  bpf_progs(pid)     {prog id: (name, run_time_ns, run_cnt)} of the BPF programs it holds, once each
"""
import glob
import json
import subprocess


def proc_cpu_ns(pid):
    total = 0
    for f in glob.glob("/proc/%d/task/*/schedstat" % pid):
        try:
            total += int(open(f).read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total


def fdinfo(pid):
    out = {}
    for path in glob.glob("/proc/%d/fdinfo/*" % pid):
        try:
            text = open(path).read()
        except OSError:
            continue
        if "prog_id:" not in text and "map_id:" not in text:
            continue
        kv = {}
        for line in text.splitlines():
            k, _, v = line.partition(":")
            kv[k.strip()] = v.strip()
        out[path] = kv
    return out


def bpf_progs(pid):
    """Each BPF program the process holds, once (links and duplicated fds name the same prog_id)."""
    out = {}
    for kv in fdinfo(pid).values():
        if "prog_id" in kv and "run_time_ns" in kv:
            out[int(kv["prog_id"])] = [None, int(kv["run_time_ns"]), int(kv.get("run_cnt", 0))]
    try:
        shown = json.loads(subprocess.run(["bpftool", "--json", "prog", "show"], capture_output=True,
                                          text=True, timeout=30).stdout or "[]")
    except (OSError, ValueError, subprocess.TimeoutExpired):
        shown = []
    for p in shown:
        if p.get("id") in out:
            out[p["id"]][0] = p.get("name")
    return {k: tuple(v) for k, v in out.items()}
