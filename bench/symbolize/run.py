#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""bench/symbolize: the same addresses of one large binary resolved to function
names by the gateway's symbolizer (sym-bench, the library the symbolize
processor runs), by llvm-symbolizer and by addr2line -f, side by side in one
run. Each tool runs as its own process end to end (start, load, resolve,
print); wall time and peak RSS are measured per process (wait4).

  bench/symbolize/run.py [--build build] [--file /usr/lib/llvm-14/lib/libLLVM-14.so.1]
                         [--count 1000000] [--addr2line-sample 20000] [--llvm-sample 0]

A sample > 0 runs that tool on the first N addresses only and extrapolates
linearly to --count (stated in the output). Results are also compared:
function names (demangled, full) from sym-bench vs llvm-symbolizer on the
addresses both resolved.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time


REPEAT = 1


def run_timed(cmd, stdin_path=None, stdout_path=None):
    """Best of REPEAT runs (least CPU): the least disturbed by other load on the machine."""
    best = None
    for _ in range(REPEAT):
        r = run_once(cmd, stdin_path, stdout_path)
        if best is None or r[0][1] < best[0][1]:
            best = r
    return best


def run_once(cmd, stdin_path=None, stdout_path=None):
    fin = open(stdin_path, "rb") if stdin_path else subprocess.DEVNULL
    fout = open(stdout_path, "wb") if stdout_path else subprocess.DEVNULL
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdin=fin, stdout=fout, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    err = p.stderr.read().decode(errors="replace")
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{cmd[0]} failed: {err}")
    return (wall, ru.ru_utime + ru.ru_stime), ru.ru_maxrss, err


def head(src, dst, n):
    with open(src) as f, open(dst, "w") as g:
        for i, line in enumerate(f):
            if i >= n:
                break
            g.write(line)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--file", default="/usr/lib/llvm-14/lib/libLLVM-14.so.1")
    ap.add_argument("--count", type=int, default=1000000)
    ap.add_argument("--addr2line-sample", type=int, default=20000)
    ap.add_argument("--llvm-sample", type=int, default=0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--compare-sample", type=int, default=100000)
    ap.add_argument("--repeat", type=int, default=3, help="runs per tool; the least CPU is reported")
    ap.add_argument("--lines-file", default="", help="also compare DWARF lines on this file (e.g. the gateway)")
    ap.add_argument("--lines-count", type=int, default=100000)
    a = ap.parse_args()
    global REPEAT
    REPEAT = a.repeat

    bench = os.path.join(a.build, "bench", "symbolize", "sym-bench")
    tmp = tempfile.mkdtemp(prefix="sr-bench-sym.")
    addrs = os.path.join(tmp, "addrs.txt")
    print(f"file: {a.file} ({os.path.getsize(os.path.realpath(a.file)) >> 20} MiB)")

    # Addresses inside sized function symbols, deterministic for the seed.
    subprocess.run([bench, "--file", a.file, "--count", str(a.count), "--seed", str(a.seed),
                    "--write-addresses", addrs], check=True, capture_output=True)

    lines_timed = lines_time(a, bench, tmp) if a.lines_file else None
    results = []

    # Timing runs print every answer to /dev/null (each tool still formats and writes it), so disk
    # speed is not measured; the comparison of answers below uses separate runs into files.
    wall, rss, _ = run_timed([bench, "--file", a.file, "--addresses", addrs, "--count", str(a.count),
                              "--demangle", "full", "--output", "/dev/null"])
    # sym-bench's own breakdown (load, resolve loop without printing).
    info = subprocess.run([bench, "--file", a.file, "--addresses", addrs, "--count", str(a.count),
                           "--demangle", "full"], check=True, capture_output=True, text=True).stdout
    kv = dict(line.split("=", 1) for line in info.splitlines() if "=" in line)
    results.append(("stackrelay symbolizer, cold (reads the ELF, demangles)", a.count, wall, rss, a.count))
    # Warm: the table comes from cache_dir, as after a gateway restart (a first run fills it).
    warm = os.path.join(tmp, "warm")
    subprocess.run([bench, "--file", a.file, "--addresses", addrs, "--count", "1", "--demangle", "full",
                    "--cache-dir", warm], check=True, capture_output=True)
    wall, rss, _ = run_timed([bench, "--file", a.file, "--addresses", addrs, "--count", str(a.count),
                              "--demangle", "full", "--output", "/dev/null", "--cache-dir", warm])
    results.append(("stackrelay symbolizer, warm (table from cache_dir)", a.count, wall, rss, a.count))

    def sample_file(n):
        if n >= a.count:
            return addrs
        path = os.path.join(tmp, f"addrs-{n}.txt")
        head(addrs, path, n)
        return path

    def other(name, cmd, sample):
        n = sample if 0 < sample < a.count else a.count
        w, r, _ = run_timed(cmd, stdin_path=sample_file(n), stdout_path="/dev/null")
        results.append((name, n, w, r, a.count))

    llvm_cmd = ["llvm-symbolizer", "--obj=" + a.file, "--functions=linkage", "--no-inlines", "--demangle"]
    other("llvm-symbolizer", llvm_cmd, a.llvm_sample)
    other("addr2line -f", ["addr2line", "-f", "-C", "-e", a.file], a.addr2line_sample)

    # Answers compared on a sample.
    llvm_n = min(a.count, a.compare_sample)
    ours_out, llvm_out = os.path.join(tmp, "ours.txt"), os.path.join(tmp, "llvm.txt")
    subprocess.run([bench, "--file", a.file, "--addresses", sample_file(llvm_n), "--count", str(llvm_n),
                    "--demangle", "full", "--output", ours_out], check=True, capture_output=True)
    run_timed(llvm_cmd, stdin_path=sample_file(llvm_n), stdout_path=llvm_out)

    print(f"addresses: {a.count}, symbols: {kv.get('symbols')}, "
          f"our load: {float(kv['load_seconds']) * 1000:.0f} ms, "
          f"our resolve loop: {float(kv['ns_per_address']):.0f} ns/address")
    print(f"our table: {int(kv['table_bytes']) / 1e6:.1f} MB for {kv['symbols']} symbols = "
          f"{float(kv['table_bytes_per_million_symbols']) / 1e6:.0f} MB per million symbols (demangle=full; "
          f"names are most of it)")
    print()
    print(f"best of {a.repeat} runs per tool (least CPU time); every tool prints each answer (to /dev/null)")
    print()
    print("| tool | addresses run | CPU (s) | wall (s) | CPU for %d (s) | peak RSS (MiB) | CPU vs ours cold | "
          "CPU vs ours warm |" % a.count)
    print("|---|---|---|---|---|---|---|---|")
    cold_cpu, warm_cpu = results[0][2][1], results[1][2][1]
    for name, n, (w, cpu), r, total in results:
        ext = cpu * total / n
        print(f"| {name} | {n} | {cpu:.2f} | {w:.2f} | {ext:.2f}{'' if n == total else ' (extrapolated)'} | "
              f"{r / 1024:.0f} | {ext / cold_cpu:.1f}x | {ext / warm_cpu:.1f}x |")

    # Agreement with llvm-symbolizer (LLVM style: name, location, blank line per address).
    with open(ours_out) as f:
        ours = [line.rstrip("\n") for line in f]
    with open(llvm_out) as f:
        blocks = f.read().split("\n\n")
    llvm = [b.split("\n")[0] for b in blocks if b.strip()]
    n = min(len(ours), len(llvm), llvm_n)
    same = sum(1 for i in range(n) if ours[i] == llvm[i])
    norm = lambda s: s.replace(" ", "").replace("std::nullptr_t", "decltype(nullptr)")
    same_norm = sum(1 for i in range(n) if norm(ours[i]) == norm(llvm[i]))
    print()
    print(f"same function name as llvm-symbolizer: {same}/{n} ({100.0 * same / n:.2f}%); "
          f"ignoring demangler spelling (spaces, std::nullptr_t): {same_norm}/{n} ({100.0 * same_norm / n:.2f}%)")
    diffs = [(ours[i], llvm[i]) for i in range(n) if norm(ours[i]) != norm(llvm[i])][:3]
    for o, l in diffs:
        print(f"  differs: ours {o[:100]!r} llvm {l[:100]!r}")
    if a.lines_file:
        lines_report(a, bench, lines_timed)
    subprocess.run(["rm", "-rf", tmp])
    return 0


def lines_time(a, bench, tmp):
    """Timing runs of the DWARF comparison. They run first: a child's peak RSS (wait4) starts at
    this Python process's size when it forked, so the runs happen while that is still small."""
    n = a.lines_count
    addrs = os.path.join(tmp, "lines-addrs.txt")
    subprocess.run([bench, "--file", a.lines_file, "--count", str(n), "--seed", str(a.seed),
                    "--write-addresses", addrs], check=True, capture_output=True)
    ours = run_timed([bench, "--file", a.lines_file, "--addresses", addrs, "--count", str(n), "--lines",
                      "--demangle", "full", "--output", "/dev/null"])
    llvm = run_timed(["llvm-symbolizer", "--obj=" + a.lines_file, "--demangle"], stdin_path=addrs,
                     stdout_path="/dev/null")
    return addrs, ours, llvm


def lines_report(a, bench, timed):
    """Function, file, line and inlined frames from DWARF: ours vs llvm-symbolizer (its default output)."""
    n = a.lines_count
    addrs, ((w1, c1), r1, _), ((w2, c2), r2, _) = timed
    info = subprocess.run([bench, "--file", a.lines_file, "--addresses", addrs, "--count", str(n), "--lines"],
                          check=True, capture_output=True, text=True).stdout
    kv = dict(line.split("=", 1) for line in info.splitlines() if "=" in line)
    print()
    print(f"DWARF lines + inlined frames: {a.lines_file}, {n} addresses "
          f"({kv['with_lines']} with a line; our resolve loop {float(kv['ns_per_address']):.0f} ns/address)")
    print()
    print("| tool | CPU (s) | wall (s) | peak RSS (MiB) | CPU vs ours |")
    print("|---|---|---|---|---|")
    print(f"| stackrelay symbolizer (--lines) | {c1:.2f} | {w1:.2f} | {r1 / 1024:.0f} | 1.0x |")
    print(f"| llvm-symbolizer (lines, inlining) | {c2:.2f} | {w2:.2f} | {r2 / 1024:.0f} | {c2 / c1:.1f}x |")

    # Answers: innermost function, its file:line, and the inlining depth, vs llvm-symbolizer.
    resolver = os.path.join(os.path.dirname(bench), "sym-resolve")
    ours = subprocess.run([resolver, "--file", a.lines_file, "--demangle", "none", "-"], stdin=open(addrs),
                          capture_output=True, text=True).stdout.splitlines()
    llvm = subprocess.run(["llvm-symbolizer", "--obj=" + a.lines_file, "--no-demangle"], stdin=open(addrs),
                          capture_output=True, text=True).stdout.split("\n\n")
    same = comparable = 0
    for o, b in zip(ours, llvm):
        f = o.split("\t")[1:]
        ll = b.strip().split("\n")
        if len(f) < 2 or f[1].startswith("??") or len(ll) < 2 or ll[1].startswith("??"):
            continue
        comparable += 1
        lf = [(ll[i], ll[i + 1].rsplit(":", 2)) for i in range(0, len(ll) - 1, 2)]
        of = [(f[i], f[i + 1].split(":")) for i in range(0, len(f) - 1, 2)]
        if len(lf) == len(of) and all(x[0] == y[0] and x[1][0].split("/")[-1] == y[1][0].split("/")[-1] and
                                      x[1][1] == y[1][1] for x, y in zip(of, lf)):
            same += 1
    print()
    print(f"every frame (function, file, line) equal to llvm-symbolizer's, inlined frames included: "
          f"{same}/{comparable} addresses with lines ({100.0 * same / max(comparable, 1):.2f}%)")


if __name__ == "__main__":
    sys.exit(main())
