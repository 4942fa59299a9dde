# SPDX-License-Identifier: Apache-2.0
"""What a process costs, read from /proc, for the bench scripts.

  proc_cpu_ns(pid)   user + system CPU of every thread, ns (schedstat; /proc/PID/stat counts 10 ms ticks)
  fdinfo(pid)        {fd path: {key: value}} of the BPF programs and maps it holds
  bpf_progs(pid)     {name: (run_time_ns, run_cnt)} of the BPF programs it holds, once each
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
    """{name: (run_time_ns, run_cnt)} of the BPF programs the process holds, each program once
    (links and duplicated fds name the same prog_id), by bpftool's names."""
    ids = {int(kv["prog_id"]) for kv in fdinfo(pid).values() if "prog_id" in kv}
    try:
        shown = json.loads(subprocess.run(["bpftool", "--json", "prog", "show"], capture_output=True,
                                          text=True, timeout=30).stdout or "[]")
    except (OSError, ValueError, subprocess.TimeoutExpired):
        shown = []
    res = {}
    for prog in shown:
        if prog.get("id") in ids:
            name = prog.get("name", str(prog["id"]))
            ns, cnt = res.get(name, (0, 0))
            res[name] = (ns + prog.get("run_time_ns", 0), cnt + prog.get("run_cnt", 0))
    return res
