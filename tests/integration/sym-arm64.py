#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The gateway's symbolizer (bench/symbolize/sym-resolve) names AArch64 code
as binutils does, on this x86-64 host: nothing in it may depend on the
architecture it runs on or the one the file is for.

- tests/fixtures/sym/prog.c cross-compiled with Debian's aarch64-linux-gnu-gcc
  (-O1 -g and -O2 -g): at every instruction (4 bytes apart) of its functions,
  the function, the inlined frames and each frame's file and line must be
  what aarch64-linux-gnu-addr2line -f -i says, innermost first.
- Debian's arm64 libc (libc6-arm64-cross, no .symtab: its .dynsym): at the
  first and the middle instruction of every function aarch64-linux-gnu-nm -D
  lists with a size, the name must be one of the symbols at that function's
  address (glibc gives one function several names).

Exits 77 when the cross compiler, its binutils or the arm64 libc is not
installed (scripts/install-deps installs them)."""
import os
import shutil
import subprocess
import sys
import tempfile

SKIP = 77
CROSS = "aarch64-linux-gnu-"
LIBC = "/usr/aarch64-linux-gnu/lib/libc.so.6"
MAX_REPORT = 15


def log(*a):
    print("sym-arm64:", *a, flush=True)


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=300, **kw).stdout


def resolve(resolver, path, addrs, lines=True):
    """{address: [(function, "file:line"), ...]} innermost first, from sym-resolve --file."""
    p = subprocess.run([resolver, "--file", path] + ([] if lines else ["--no-lines"]) + ["-"],
                       input="".join("0x%x\n" % a for a in addrs), capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise SystemExit("sym-resolve failed (%d): %s" % (p.returncode, p.stderr))
    out = {}
    for line in p.stdout.splitlines():
        f = line.split("\t")
        frames = []
        for i in range(1, len(f), 2):
            where = f[i + 1] if i + 1 < len(f) else ""
            # file:line[:column] -> basename:line
            parts = where.rsplit(":", 2) if where.count(":") >= 2 else where.rsplit(":", 1)
            frames.append((f[i], "%s:%s" % (os.path.basename(parts[0]), parts[1]) if len(parts) > 1 else ""))
        out[int(f[0], 16)] = frames
    return out


def addr2line(path, addrs):
    """{address: [(function, "file:line"), ...]} innermost first, from binutils."""
    out = run([CROSS + "addr2line", "-f", "-i", "-a", "-e", path] + ["0x%x" % a for a in addrs])
    res, cur = {}, None
    lines = out.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith("0x"):
            cur = int(lines[i], 16)
            res[cur] = []
            i += 1
            continue
        fn, where = lines[i], lines[i + 1] if i + 1 < len(lines) else ""
        where = where.split(" (discriminator")[0]
        res[cur].append((fn, "%s:%s" % (os.path.basename(where.rsplit(":", 1)[0]), where.rsplit(":", 1)[1])))
        i += 2
    return res


def nm_functions(path, dynamic):
    """[(address, size, name)] of the defined functions with a size."""
    out = run([CROSS + "nm", "-S", "--defined-only"] + (["-D"] if dynamic else []) + [path])
    syms = []
    for line in out.splitlines():
        f = line.split()
        if len(f) == 4 and f[2] in "TtWi" and int(f[1], 16) > 0:
            syms.append((int(f[0], 16), int(f[1], 16), f[3].split("@")[0]))
    return syms


def check_fixture(resolver, tmp, src, opt, fails):
    prog = os.path.join(tmp, "prog" + opt)
    run([CROSS + "gcc", opt, "-g", "-o", prog, src])
    funcs = [s for s in nm_functions(prog, False) if s[2].startswith("sr_fixture_") or s[2] == "main"]
    if len(funcs) < 3:
        fails.append("%s: the fixture's functions are not in its symbol table: %r" % (opt, funcs))
        return 0
    addrs = [a for start, size, _ in funcs for a in range(start, start + size, 4)]
    got, want = resolve(resolver, prog, addrs), addr2line(prog, addrs)
    inlined = 0
    for a in addrs:
        g, w = got.get(a, []), want.get(a, [])
        inlined += len(w) > 1
        if g != w:
            fails.append("%s 0x%x: sym-resolve %r, addr2line %r" % (opt, a, g, w))
    log("%s: %d instructions of %d functions, %d with inlined frames" % (opt, len(addrs), len(funcs), inlined))
    return len(addrs)


def check_libc(resolver, fails):
    funcs = nm_functions(LIBC, True)
    names = {}
    for start, _, name in funcs:
        names.setdefault(start, set()).add(name)
    addrs = {}
    for start, size, _ in funcs:
        addrs[start] = start
        addrs[start + (size // 2) // 4 * 4] = start
    got = resolve(resolver, LIBC, sorted(addrs), lines=False)
    for a, start in sorted(addrs.items()):
        g = got.get(a, [])
        if not g or g[0][0] not in names[start]:
            fails.append("libc 0x%x: sym-resolve %r, nm: %s" % (a, g[0][0] if g else None,
                                                                 "/".join(sorted(names[start]))))
    log("libc: %d addresses in %d functions (%d names)" % (len(addrs), len(names), len(funcs)))
    return len(addrs)


def main():
    for tool in ("gcc", "addr2line", "nm"):
        if not shutil.which(CROSS + tool):
            print("sym-arm64: SKIP: %s%s not installed (scripts/install-deps)" % (CROSS, tool))
            return SKIP
    build = os.environ.get("SR_BUILD_ROOT", "build")
    fixtures = os.environ.get("SR_TEST_FIXTURES", "tests/fixtures")
    resolver = os.path.join(build, "bench", "symbolize", "sym-resolve")
    if not os.access(resolver, os.X_OK):
        raise SystemExit("%s not built" % resolver)
    src = os.path.join(fixtures, "sym", "prog.c")
    tmp = tempfile.mkdtemp(prefix="sr-sym-arm64.")
    fails = []
    try:
        n = check_fixture(resolver, tmp, src, "-O1", fails)
        n += check_fixture(resolver, tmp, src, "-O2", fails)
        if os.path.exists(LIBC):
            n += check_libc(resolver, fails)
        else:
            log("no %s (libc6-arm64-cross): its part skipped" % LIBC)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for f in fails[:MAX_REPORT]:
        print("  " + f)
    if fails:
        print("not ok - %d of %d AArch64 addresses named otherwise than binutils names them" % (len(fails), n))
        return 1
    print("ok - %d AArch64 addresses named as binutils names them" % n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
