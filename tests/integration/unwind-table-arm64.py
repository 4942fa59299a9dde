#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The unwind table agent/unwind-table.c builds from AArch64 files, checked
against binutils' readelf (aarch64-linux-gnu-readelf --debug-dump=frames-interp),
an independent reader of the same call frame information. readelf prints
"u" both for an undefined register (_start's return address: the stack
ends) and for one no rule names (a leaf's return address, still in LR);
llvm-dwarfdump tells the two apart and decides there. (llvm-dwarfdump 14
is not the reference for the rest: its DW_CFA_restore_state keeps the CFA
rule it had, where DWARF restores it, so it misreads GCC's epilogues.)

tests/workloads/arm64-frames.c is cross-compiled here, at test time, with
Debian's aarch64-linux-gnu-gcc: -O2 -fomit-frame-pointer, with frame
pointers, with frame pointers and pointer authentication
(-mbranch-protection=standard), and with .debug_frame only. Those files
and, when libc6-arm64-cross is installed, its libc and dynamic loader are
compared row by row. At every llvm-dwarfdump row inside an FDE, and at
every one of our rows inside that row's range, the two must say the same
thing once llvm-dwarfdump's rule is put the way bpf/unwind.h holds it:

  CFA sp+N   -> UNWIND_CFA_RSP N (UNWIND_CFA_RSP_X8 N/8 from 64 KiB on)
  CFA x29+N  -> UNWIND_CFA_RBP N
  ra undefined -> UNWIND_CFA_END;  CIE augmentation with 'S' -> UNWIND_CFA_SIGNAL
  ra unspecified or s -> UNWIND_A64_RA_LR
  ra c-K     -> UNWIND_A64_RA_CFA -K/8, else UNWIND_A64_RA_BASE (N-K)/8
  x29 unspecified or s -> FP_SAME; c-K at the slot below ra's -> FP_PAIR;
  c-K with ra in LR -> FP_CFA -K/8; else FP_UNDEFINED
  anything else (another register, an expression) -> UNWIND_CFA_UNSUPPORTED
  a CIE whose return address column is not x30 (glibc's rawmemchr says x15)
             -> refused: its FDEs' ranges are UNWIND_CFA_INVALID

Then rules that must hold in arm64-frames.c whatever the compiler chose:
_start ends the stack, a leaf keeps its return address in LR, the callers
save it, and no FDE is refused.

Exits 77 when the cross compiler (with its binutils) or llvm-dwarfdump is
not installed (scripts/install-deps installs them)."""
import bisect
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cfilib  # noqa: E402

SKIP = 77

INVALID, RSP, RBP, PLT, DEREF_RBP, SIGNAL, END, RSP_X8, UNSUPPORTED = range(9)
TYPE_NAMES = ["INVALID", "RSP", "RBP", "PLT", "DEREF_RBP", "SIGNAL", "END", "RSP_X8", "UNSUPPORTED"]
RA_LR, RA_CFA, RA_BASE = 0x00, 0x10, 0x20
FP_SAME, FP_PAIR, FP_UNDEFINED, FP_CFA = 0x00, 0x40, 0x80, 0xC0
RA_NAMES = {RA_LR: "ra=lr", RA_CFA: "ra=cfa", RA_BASE: "ra=base"}
FP_NAMES = {FP_SAME: "fp=same", FP_PAIR: "fp=pair", FP_UNDEFINED: "fp=undef", FP_CFA: "fp=cfa"}
MAX_REPORT = 20
CROSS_LIB = "/usr/aarch64-linux-gnu/lib"

# readelf --debug-dump=frames-interp
RE_SECTION_RE = re.compile(r"^Contents of the \.(\w+) section")
RE_CIE_RE = re.compile(r'^([0-9a-f]+) [0-9a-f]+ [0-9a-f]+ CIE "([^"]*)".* ra=(\d+)')
RE_FDE_RE = re.compile(r"^([0-9a-f]+) [0-9a-f]+ [0-9a-f]+ FDE cie=([0-9a-f]+) pc=([0-9a-f]+)\.\.([0-9a-f]+)")
RE_ROW_RE = re.compile(r"^([0-9a-f]{8,16}) +(\S+)(.*)$")
# llvm-dwarfdump --debug-frame
SECTION_RE = re.compile(r"^\.(eh_frame|debug_frame) contents:")
CIE_RE = re.compile(r"^([0-9a-f]{8,16}) [0-9a-f]+ [0-9a-f]+ CIE")
FDE_RE = re.compile(r"^([0-9a-f]{8,16}) [0-9a-f]+ [0-9a-f]+ FDE cie=([0-9a-f]+) pc=([0-9a-f]+)\.\.\.([0-9a-f]+)")
ROW_RE = re.compile(r"^\s+0x([0-9a-f]+): CFA=(.*)$")


def log(*a):
    print("unwind-table-arm64:", *a, flush=True)


def find_tool(names):
    for n in names:
        p = shutil.which(n)
        if p:
            return p
    return None


def norm_reg(name):
    """llvm-dwarfdump 14 names AArch64 registers W0..W30 and WSP; later versions X0.. and SP."""
    m = re.fullmatch(r"[WX](\d+)", name)
    if m:
        return "x" + m.group(1)
    return {"WSP": "sp", "SP": "sp", "FP": "x29", "LR": "x30"}.get(name, name)


class Fde:
    def __init__(self, sec, off, cie, begin, end):
        self.sec, self.off, self.cie, self.begin, self.end = sec, off, cie, begin, end
        self.rows = []  # (loc, cfa, {reg: rule})


def parse_readelf(text):
    """CIE augmentations and rows keyed by (section, offset), and the FDEs with their rows."""
    cies, fdes = {}, []
    sec, cur, cols = None, None, None
    for line in text.splitlines():
        m = RE_SECTION_RE.match(line)
        if m:
            sec, cur = m.group(1), None
            continue
        m = RE_CIE_RE.match(line)
        if m:
            cur, cols = Fde(sec, int(m.group(1), 16), None, 0, 0), None
            cur.aug, cur.ra = m.group(2), int(m.group(3))
            cies[(sec, cur.off)] = cur
            continue
        m = RE_FDE_RE.match(line)
        if m:
            cur, cols = Fde(sec, int(m.group(1), 16), int(m.group(2), 16), int(m.group(3), 16), int(m.group(4), 16)), None
            fdes.append(cur)
            continue
        if cur is None:
            continue
        if line.strip().startswith("LOC"):
            cols = line.split()[2:]
            continue
        m = RE_ROW_RE.match(line)
        if m and cols is not None:
            cur.rows.append((int(m.group(1), 16), m.group(2), dict(zip(cols, m.group(3).split()))))
    return cies, fdes


def parse_dwarfdump(text):
    """Per FDE (section, offset): its rows as [(loc, {reg: rule})], for what readelf prints as "u"."""
    out = {}
    sec, cur = None, None
    for line in text.splitlines():
        m = SECTION_RE.match(line)
        if m:
            sec, cur = m.group(1), None
            continue
        if CIE_RE.match(line):
            cur = None
            continue
        m = FDE_RE.match(line)
        if m:
            cur = out.setdefault((sec, int(m.group(1), 16)), [])
            continue
        m = ROW_RE.match(line)
        if m and cur is not None:
            _, _, rest = m.group(2).partition(": ")
            regs = {}
            for item in rest.split(", ") if rest else []:
                name, _, rule = item.partition("=")
                regs[norm_reg(name.strip())] = rule.strip()
            cur.append((int(m.group(1), 16), regs))
    return out


def llvm_rule(llvm_rows, loc, reg):
    """llvm-dwarfdump's rule for reg at loc: "undefined", "same", "[CFA-K]"..., or None (no rule)."""
    i = bisect.bisect_right([r[0] for r in llvm_rows], loc) - 1
    return llvm_rows[i][1].get(reg) if i >= 0 else None


def slot8(off):
    if off == 0 or off % 8 or not -127 <= off // 8 <= 127:
        return None
    return off // 8


def column(cols, name, llvm_rows, loc, llvm_name):
    """readelf's rule for a register, its "u" resolved by llvm-dwarfdump: None (no rule), "undefined", "s", "c-K"..."""
    v = cols.get(name, "u")
    if v != "u":
        return v
    return "undefined" if llvm_rule(llvm_rows, loc, llvm_name) == "undefined" else None


def want(cfa, cols, aug, llvm_rows, loc):
    """readelf's rule as bpf/unwind.h holds an AArch64 row: (cfa_type, cfa_off, rbp_off)."""
    ra = column(cols, "ra", llvm_rows, loc, "x30")
    if ra == "undefined":
        return (END, 0, 0)
    if "S" in aug:
        return (SIGNAL, 0, 0)
    m = re.fullmatch(r"(sp|x29)([+-]\d+)?", cfa)
    if not m:
        return (UNSUPPORTED, 0, 0)
    n = int(m.group(2) or 0)
    is_sp = m.group(1) == "sp"
    if n < 0:
        return (UNSUPPORTED, 0, 0)
    if n <= 0xFFFF:
        t, off = (RSP if is_sp else RBP), n
    elif is_sp and n % 8 == 0 and n // 8 <= 0xFFFF:
        t, off = RSP_X8, n // 8
    else:
        return (UNSUPPORTED, 0, 0)
    slot = 0
    ra_off = None
    if ra is None or ra == "s":
        ra_mode = RA_LR
    else:
        mr = re.fullmatch(r"c([+-]\d+)", ra)
        if not mr:
            return (UNSUPPORTED, 0, 0)
        ra_off = int(mr.group(1))
        if slot8(ra_off) is not None:
            ra_mode, slot = RA_CFA, slot8(ra_off)
        elif slot8(n + ra_off) is not None:
            ra_mode, slot = RA_BASE, slot8(n + ra_off)
        else:
            return (UNSUPPORTED, 0, 0)
    fp = column(cols, "x29", llvm_rows, loc, "x29")
    mf = re.fullmatch(r"c([+-]\d+)", fp or "")
    if fp is None or fp == "s":
        fp_mode = FP_SAME
    elif mf and ra_off is not None and int(mf.group(1)) == ra_off - 8:
        fp_mode = FP_PAIR
    elif mf and ra_mode == RA_LR and slot8(int(mf.group(1))) is not None:
        fp_mode, slot = FP_CFA, slot8(int(mf.group(1)))
    else:
        fp_mode = FP_UNDEFINED
    return (t | ra_mode | fp_mode, off, slot)


def fmt(rule):
    t = rule[0] & 0x0F
    name = TYPE_NAMES[t] if t < len(TYPE_NAMES) else str(t)
    return "%s %s %s off %d slot %d" % (
        name,
        RA_NAMES.get(rule[0] & 0x30, hex(rule[0] & 0x30)),
        FP_NAMES[rule[0] & 0xC0],
        rule[1],
        rule[2],
    )


def compare(tool, readelf, dwarfdump, path):
    header, stats, pcs, rules = cfilib.dump(tool, path, "unwind-table-arm64")
    log(path + ":", header)
    if stats.get("arch") != "arm64":
        log("%s: built as arch %s, not arm64" % (path, stats.get("arch")))
        return False, stats, pcs, rules
    # -wN: this file's own sections only, as the table builder reads them (no separate debug files).
    text = subprocess.run(
        [readelf, "-wN", "--debug-dump=frames-interp", path], check=True, capture_output=True, text=True
    ).stdout
    cies, fdes = parse_readelf(text)
    llvm = parse_dwarfdump(
        subprocess.run([dwarfdump, "--debug-frame", path], check=True, capture_output=True, text=True).stdout
    )
    fdes = [f for f in fdes if f.begin != 0 and f.end > f.begin]
    cov = cfilib.Coverage(fdes, "eh_frame", pcs, rules)

    checked = fdes_checked = skipped = 0
    bad = []
    for f in fdes:
        cie = cies.get((f.sec, f.cie))
        if id(f) in cov.overlapping or cie is None or (f.sec, f.off) not in llvm:
            skipped += 1
            continue
        # An FDE without instructions of its own keeps its CIE's rules throughout.
        rows = f.rows or ([(f.begin, cie.rows[0][1], cie.rows[0][2])] if cie.rows else [])
        if not rows:
            skipped += 1
            continue
        by_loc = {}
        for loc, cfa, cols in rows:
            by_loc[loc] = (cfa, cols)
        locs = sorted(l for l in by_loc if f.begin <= l < f.end)
        fdes_checked += 1
        for k, loc in enumerate(locs):
            seg_end = locs[k + 1] if k + 1 < len(locs) else f.end
            cfa, cols = by_loc[loc]
            if cie.ra != 30:
                wanted = (INVALID, 0, 0)
            else:
                wanted = want(cfa, cols, cie.aug, llvm[(f.sec, f.off)], loc)
            for pc in [loc] + pcs[bisect.bisect_right(pcs, loc) : bisect.bisect_left(pcs, seg_end)]:
                if f.sec != "eh_frame" and cov.eh_covers(pc):
                    continue
                got = cov.ours(pc)
                checked += 1
                if got != wanted:
                    bad.append(
                        "%s FDE at %#x (%#x..%#x): at %#x readelf says CFA %s %s; we say %s, want %s"
                        % (
                            f.sec,
                            f.off,
                            f.begin,
                            f.end,
                            pc,
                            cfa,
                            " ".join("%s=%s" % kv for kv in cols.items()),
                            fmt(got) if got else "no row",
                            fmt(wanted),
                        )
                    )
    log(
        "%s: %d FDEs compared (%d skipped: overlapping or without rules), %d rule checks, %d mismatches"
        % (path, fdes_checked, skipped, checked, len(bad))
    )
    for b in bad[:MAX_REPORT]:
        log("  " + b)
    if fdes_checked == 0 or checked == 0:
        log("%s: nothing was compared" % path)
        return False, stats, pcs, rules
    return not bad, stats, pcs, rules


def symbols(nm, path):
    out = subprocess.run([nm, path], check=True, capture_output=True, text=True).stdout
    syms = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "Tt":
            syms[parts[2]] = int(parts[0], 16)
    return syms


def rules_in(pcs, rules, begin, end):
    """Our rules over [begin, end): the one holding at begin and every one starting inside."""
    i = bisect.bisect_right(pcs, begin) - 1
    out = [rules[i]] if i >= 0 else []
    j = bisect.bisect_left(pcs, end)
    return out + rules[i + 1 : j]


def check_shapes(name, syms, pcs, rules, stats):
    """What arm64-frames.c's functions must have, whatever the compiler chose."""
    problems = []

    def at(addr):
        i = bisect.bisect_right(pcs, addr) - 1
        return rules[i] if i >= 0 else None

    if stats.get("fdes_bad") != "0":
        problems.append("fdes_bad %s (every FDE of the workload is one the builder follows)" % stats.get("fdes_bad"))
    for fn in ("main", "leaf_mix", "small_frame", "big_frame", "var_frame", "_start"):
        if fn not in syms:
            problems.append("no symbol %s" % fn)
    if problems:
        return problems
    start = at(syms["_start"] + 4)
    if not start or start[0] != END:
        problems.append("_start+4: %s, want END (.cfi_undefined x30)" % (fmt(start) if start else "no row"))
    for fn in ("main", "leaf_mix", "small_frame", "big_frame", "var_frame"):
        entry = at(syms[fn])
        if entry != (RSP | RA_LR | FP_SAME, 0, 0):
            problems.append("%s's entry: %s, want RSP ra=lr fp=same off 0" % (fn, fmt(entry) if entry else "no row"))
    # The leaf never saves LR: every row of its body keeps the return address there.
    end = min(a for a in syms.values() if a > syms["leaf_mix"])
    for r in rules_in(pcs, rules, syms["leaf_mix"], end):
        if r[0] & 0x0F == RSP and r[0] & 0x30 != RA_LR:
            problems.append("leaf_mix: %s, want the return address in LR" % fmt(r))
    # The callers save it, and their bodies say where.
    for fn in ("small_frame", "big_frame", "var_frame"):
        end = min(a for a in syms.values() if a > syms[fn])
        saved = [r for r in rules_in(pcs, rules, syms[fn], end) if r[0] & 0x30 in (RA_CFA, RA_BASE)]
        if not saved:
            problems.append("%s: no row with the return address saved" % fn)
    big_end = min(a for a in syms.values() if a > syms["big_frame"])
    big = rules_in(pcs, rules, syms["big_frame"], big_end)
    if name.startswith("nofp") and not any(r[0] & 0x30 == RA_BASE for r in big):
        problems.append("big_frame (GCC, no frame pointer): no row with the return address at the frame's bottom")
    if name.startswith("fp"):
        var_end = min(a for a in syms.values() if a > syms["var_frame"])
        if not any(r[0] & 0x0F == RBP and r[0] & 0xC0 == FP_PAIR for r in rules_in(pcs, rules, syms["var_frame"], var_end)):
            problems.append("var_frame (alloca, frame pointer): no FP-based CFA with FP saved beside LR")
    return problems


def main():
    cc = os.environ.get("SR_AARCH64_CC") or find_tool(["aarch64-linux-gnu-gcc"])
    nm = find_tool(["aarch64-linux-gnu-nm", "llvm-nm", "llvm-nm-14"])
    readelf = find_tool(["aarch64-linux-gnu-readelf"])
    dwarfdump = find_tool(["llvm-dwarfdump", "llvm-dwarfdump-14", "llvm-dwarfdump-16"])
    if not cc:
        log("SKIP: no AArch64 cross compiler (aarch64-linux-gnu-gcc: apt-get install gcc-aarch64-linux-gnu)")
        return SKIP
    if not dwarfdump or not nm or not readelf:
        log("SKIP: llvm-dwarfdump or aarch64-linux-gnu-readelf/-nm (binutils-aarch64-linux-gnu) is not installed")
        return SKIP
    build = os.environ.get("SR_BUILD_ROOT", "")
    src = os.path.join(os.environ.get("SR_SOURCE_ROOT", "."), "tests", "workloads", "arm64-frames.c")
    tool = os.environ.get("SR_UNWIND_DUMP") or os.path.join(build, "tests", "integration", "unwind-table-dump")
    if not os.access(tool, os.X_OK):
        log("no unwind-table-dump at %s (set SR_UNWIND_DUMP or SR_BUILD_ROOT)" % tool)
        return 1
    builds = {
        "nofp": ["-O2", "-fomit-frame-pointer"],
        "fp": ["-O2", "-fno-omit-frame-pointer"],
        "fp-pac": ["-O2", "-fno-omit-frame-pointer", "-mbranch-protection=standard"],
        # .debug_frame only: the builder's other section, with 64-bit addresses.
        "nofp-debug-frame": ["-O2", "-fomit-frame-pointer", "-g", "-fno-asynchronous-unwind-tables",
                             "-fno-unwind-tables"],
    }
    ok = True
    with tempfile.TemporaryDirectory(prefix="sr-unwind-arm64-") as tmp:
        for name, flags in builds.items():
            out = os.path.join(tmp, "arm64-frames-" + name)
            r = subprocess.run([cc] + flags + ["-o", out, src], capture_output=True, text=True)
            if r.returncode != 0:
                log("%s: %s failed:\n%s" % (name, cc, r.stderr))
                ok = False
                continue
            good, stats, pcs, rules = compare(tool, readelf, dwarfdump, out)
            ok = good and ok
            if name.endswith("debug-frame") and stats.get("from_debug_frame", "0") == "0":
                log("%s: no FDE came from .debug_frame" % name)
                ok = False
            problems = check_shapes(name, symbols(nm, out), pcs, rules, stats)
            for p in problems:
                log("%s: %s" % (name, p))
            ok = ok and not problems
        for lib in ("libc.so.6", "ld-linux-aarch64.so.1"):
            path = os.path.join(CROSS_LIB, lib)
            if not os.path.exists(path):
                log("%s is not installed (libc6-arm64-cross): not compared" % path)
                continue
            good, _, _, _ = compare(tool, readelf, dwarfdump, path)
            ok = good and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
