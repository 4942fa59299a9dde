# SPDX-License-Identifier: Apache-2.0
"""What a process costs, read from /proc, for the bench scripts.

  proc_cpu_ns(pid)   user + system CPU of every thread, ns (schedstat; /proc/PID/stat counts 10 ms ticks)
  fdinfo(pid)        {fd path: {key: value}} of the BPF programs and maps it holds
  bpf_progs(pid)     {name: (run_time_ns, run_cnt)} of the BPF programs it holds, once each
  rss_by_file(pid)   {file: RSS, PSS, private dirty and text KiB} of the files it maps

`procstats.py files PID` prints the last as a Markdown table.
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


def rss_by_file(pid):
    """{file: {"rss", "pss", "private_dirty", "text"}} in KiB from /proc/PID/smaps; text: the Rss of
    its executable mappings (page cache, shared with every process that maps the file)."""
    out = {}
    cur = None
    for line in open("/proc/%d/smaps" % pid):
        f = line.split()
        if f and "-" in f[0] and ":" not in f[0] and len(f) >= 5:
            name = f[5] if len(f) >= 6 else ""
            cur = out.setdefault(name, {"rss": 0, "pss": 0, "private_dirty": 0, "text": 0}) \
                if name.startswith("/") else None
            exe = "x" in f[1]
        elif cur is not None and f and f[0] in ("Rss:", "Pss:", "Private_Dirty:"):
            kb = int(f[1])
            cur[f[0][:-1].lower()] += kb
            if f[0] == "Rss:" and exe:
                cur["text"] += kb
    return out


if __name__ == "__main__":
    import os
    import sys
    if len(sys.argv) != 3 or sys.argv[1] != "files":
        raise SystemExit("usage: procstats.py files PID  (the process's RSS by mapped file)")
    rows = sorted(rss_by_file(int(sys.argv[2])).items(), key=lambda kv: -kv[1]["rss"])
    print("| file | RSS KiB | of which text | PSS KiB | private dirty KiB |")
    print("|---|---|---|---|---|")
    for name, v in rows:
        print("| %s | %d | %d | %d | %d |" % (os.path.basename(name), v["rss"], v["text"], v["pss"], v["private_dirty"]))
    print("| all files | %d | %d | %d | %d |" % tuple(sum(v[k] for _, v in rows)
                                                    for k in ("rss", "text", "pss", "private_dirty")))
