#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Kernel frames of a syscall-heavy workload (dd with 16-byte blocks), sampled
by `perf record -g` as the reference profiler, resolved by the gateway's
symbolizer from a kallsyms snapshot uploaded under a kernel ID (runtime
addresses of this boot, KASLR included: KernelDef.addressing RUNTIME, what
older agents send for every kernel frame and agents now for code outside the
image and modules; sym-kernel-go-e2e covers image offsets with the real
agent) must get the same function names perf gives. libc frames of the same run are resolved
from the distribution's debug file by build ID (/usr/lib/debug, when
libc6-dbg is installed). Needs root (kallsyms addresses, perf): exits 77
otherwise."""
import os
import shutil
import subprocess
import sys
import tempfile

SKIP = 77


def log(*a):
    print("sym-kernel:", *a, flush=True)


def kallsyms_visible():
    try:
        with open("/proc/kallsyms") as f:
            for i, line in enumerate(f):
                if i > 100:
                    break
                if not line.startswith("0000000000000000"):
                    return True
    except OSError:
        pass
    return False


def perf_frames(tmp):
    data = os.path.join(tmp, "perf.data")
    subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-F", "2000", "-g", "-o", data, "--",
                    "dd", "if=/dev/zero", "of=/dev/null", "bs=16", "count=400000"],
                   check=True, capture_output=True, timeout=60)
    out = subprocess.run(["perf", "script", "-i", data, "-F", "ip,sym,dso"], check=True,
                         capture_output=True, text=True, timeout=60).stdout
    frames = []
    for line in out.splitlines():
        f = line.strip().split()
        if len(f) < 3 or not f[-1].startswith("("):
            continue
        ip, sym, dso = f[0], " ".join(f[1:-1]), f[-1].strip("()")
        if sym.startswith("[unknown]"):
            continue
        sym = sym.split("+0x")[0]
        frames.append((int(ip, 16), sym, dso))
    return frames


def resolve(resolver, args, addrs):
    p = subprocess.run([resolver] + args + ["--no-lines", "-"], input="\n".join(hex(a) for a in addrs) + "\n",
                       capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        raise SystemExit(f"sym-resolve failed: {p.stderr}")
    names = {}
    for line in p.stdout.splitlines():
        f = line.split("\t")
        names[int(f[0], 16)] = f[1]
    return names


def unversioned(name):
    return name.split("@")[0] if "@" in name and not name.startswith("@") else name


def aliases_from(lines):
    """name -> address and address -> names, from "ADDR TYPE NAME [module]" (kallsyms) lines."""
    by_name, by_addr = {}, {}
    for line in lines:
        f = line.split()
        if len(f) < 3:
            continue
        try:
            a = int(f[0], 16)
        except ValueError:
            continue
        by_name.setdefault(unversioned(f[2]), a)
        by_addr.setdefault(a, set()).add(unversioned(f[2]))
    return by_name, by_addr


def compare(what, frames, names, aliases, need):
    """Our name must be perf's, or another symbol at the same address (an alias: tools choose differently)."""
    by_name, by_addr = aliases
    uniq = {}
    for ip, sym, _ in frames:
        # perf makes up "name@plt" for PLT stubs from relocations; they are
        # not symbols of the file, so there is nothing to agree on.
        if sym.endswith("@plt"):
            continue
        uniq[ip] = sym
    same = alias = 0
    diffs = []
    for ip, sym in uniq.items():
        ours = names.get(ip, "??").split(" [")[0]  # kallsyms module suffix: "name [module]"
        # A symbol version ("pthread_rwlock_wrlock@@GLIBC_2.34", as perf and nm
        # print .symtab names) is not part of the function's name.
        sym = unversioned(sym)
        ours = unversioned(ours)
        if ours == sym:
            same += 1
        elif sym in by_name and ours in by_addr.get(by_name[sym], ()):
            alias += 1
        else:
            diffs.append((hex(ip), sym, ours))
    log(f"{what}: {len(uniq)} distinct addresses: {same} named as perf names them, {alias} by an alias "
        f"at the same address, {len(diffs)} otherwise")
    for d in diffs[:5]:
        log("  differs:", d)
    if not uniq or same + alias < need * len(uniq):
        raise SystemExit(f"{what}: too few names agree with perf")


def main():
    if os.geteuid() != 0:
        print("sym-kernel: SKIP: needs root (kallsyms addresses, perf)")
        return SKIP
    if not shutil.which("perf") or not kallsyms_visible():
        print("sym-kernel: SKIP: perf missing or kallsyms addresses hidden (kptr_restrict)")
        return SKIP
    build = os.environ.get("SR_BUILD_ROOT", "build")
    resolver = os.path.join(build, "bench", "symbolize", "sym-resolve")
    tmp = tempfile.mkdtemp(prefix="sr-sym-kernel.")
    try:
        try:
            frames = perf_frames(tmp)
        except subprocess.CalledProcessError as e:
            print(f"sym-kernel: SKIP: perf record cannot sample here: {e.stderr.decode(errors='replace')[:200]}")
            return SKIP
        kernel = [f for f in frames if f[2] == "[kernel.kallsyms]" or (f[2].startswith("[") and f[2] != "[unknown]")]
        log(f"perf: {len(frames)} named frames, {len(kernel)} in the kernel")
        if len(kernel) < 10:
            raise SystemExit("perf recorded too few kernel frames")
        # The snapshot as the agent uploads it, under a kernel ID.
        names = resolve(resolver, ["--id", "6b65726e656c2d746573742d626f6f74", "--kallsyms", "/proc/kallsyms"],
                        [f[0] for f in kernel])
        # Aliases at one address may be named differently by two tools; nearly all must agree.
        with open("/proc/kallsyms") as f:
            kaliases = aliases_from(f)
        compare("kernel", kernel, names, kaliases, 0.95)

        libc_path = "/usr/lib/x86_64-linux-gnu/libc.so.6"
        libc = [f for f in frames if f[2] == libc_path]
        bid = None
        if libc and os.path.exists(libc_path):
            out = subprocess.run(["readelf", "-n", libc_path], capture_output=True, text=True).stdout
            for line in out.splitlines():
                if "Build ID:" in line:
                    bid = line.split()[-1]
        if bid and os.path.exists(f"/usr/lib/debug/.build-id/{bid[:2]}/{bid[2:]}.debug"):
            names = resolve(resolver, ["--id", bid, "--debug-dir", "/usr/lib/debug"], [f[0] for f in libc])
            nm = subprocess.run(["nm", f"/usr/lib/debug/.build-id/{bid[:2]}/{bid[2:]}.debug"],
                                capture_output=True, text=True).stdout.splitlines()
            compare("libc (debug file by build ID)", libc, names, aliases_from(nm), 0.95)
        else:
            log("libc debug file not installed (libc6-dbg): user frames not compared")
        print("sym-kernel: 1 passed, 0 failed")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
