# SPDX-License-Identifier: Apache-2.0
"""What a process costs, read from /proc, for the bench scripts.

  proc_cpu_ns(pid)   user + system CPU of every thread, ns (schedstat; /proc/PID/stat counts 10 ms ticks)
  fdinfo(pid)        {fd path: {key: value}} of the BPF programs and maps it holds
"""
import glob


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
