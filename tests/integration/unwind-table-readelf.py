#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The unwind table agent/unwind-table.c builds, checked against binutils'
readelf, an independent reader of the same call frame information.

For libc, the agent binary and python3.11, unwind-table-dump prints our rows
and `readelf --debug-dump=frames-interp` prints the rules per FDE. At every
readelf row inside an FDE, and at every one of our rows inside a readelf
row's range, the two must say the same thing once readelf's rule is put the
way bpf/unwind.h holds it:

  CFA rsp+N  -> UNWIND_CFA_RSP N, or UNWIND_CFA_RSP_X8 N/8 from 64 KiB on
  CFA rbp+N  -> UNWIND_CFA_RBP N
  CFA exp    -> UNWIND_CFA_PLT or UNWIND_CFA_DEREF_RBP, exactly which (and
                its operand) from the expression `--debug-dump=frames` shows
  ra u       -> UNWIND_CFA_END;  CIE augmentation with 'S' -> UNWIND_CFA_SIGNAL
  rbp cN     -> rbp_off N/8;  u or s -> UNWIND_RBP_SAME; else UNDEFINED
  anything else (another register, ra not at CFA-8) -> UNWIND_CFA_UNSUPPORTED

readelf also prints a row exactly at an FDE's end address; it is outside the
FDE and not compared. Exits 77 when readelf is not installed."""
import bisect
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cfilib  # noqa: E402

SKIP = 77

INVALID, RSP, RBP, PLT, DEREF_RBP, SIGNAL, END, RSP_X8, UNSUPPORTED = range(9)
TYPE_NAMES = ["INVALID", "RSP", "RBP", "PLT", "DEREF_RBP", "SIGNAL", "END", "RSP_X8", "UNSUPPORTED"]
RBP_SAME = 0
RBP_UNDEFINED = -128
# Mismatches printed before giving up on a file.
MAX_REPORT = 20

SECTION_RE = re.compile(r"^Contents of the (\.\w+) section")
CIE_RE = re.compile(r'^([0-9a-f]+) [0-9a-f]+ [0-9a-f]+ CIE "([^"]*)"')
FDE_RE = re.compile(r"^([0-9a-f]+) [0-9a-f]+ [0-9a-f]+ FDE cie=([0-9a-f]+) pc=([0-9a-f]+)\.\.([0-9a-f]+)")
ROW_RE = re.compile(r"^([0-9a-f]{8,16}) +(\S+)(.*)$")
EXPR_RE = re.compile(r"DW_CFA_def_cfa_expression \((.*)\)\s*$")
PLT_RE = re.compile(
    r"DW_OP_breg7 \(rsp\): 8; DW_OP_breg16 \(rip\): 0; DW_OP_lit15; DW_OP_and; "
    r"DW_OP_lit(\d+); DW_OP_ge; DW_OP_lit3; DW_OP_shl; DW_OP_plus$"
)
DEREF_RE = re.compile(r"DW_OP_breg6 \(rbp\): (-?\d+); DW_OP_deref$")


def log(*a):
    print("unwind-table-readelf:", *a, flush=True)


def readelf(mode, path):
    # -wN: this file's own sections only, as the table builder reads them (no separate debug files).
    return subprocess.run(
        ["readelf", "-wN", "--debug-dump=" + mode, path], check=True, capture_output=True, text=True
    ).stdout


class Entry:
    def __init__(self, sec, off):
        self.sec = sec
        self.off = off
        self.cols = []
        self.rows = []  # (loc, cfa, {column: value})


def parse_interp(text):
    """CIEs keyed by (section, offset) and the FDEs, with their rows."""
    cies, fdes = {}, []
    sec, cur = None, None
    for line in text.splitlines():
        m = SECTION_RE.match(line)
        if m:
            sec, cur = m.group(1), None
            continue
        m = CIE_RE.match(line)
        if m:
            cur = Entry(sec, int(m.group(1), 16))
            cur.aug = m.group(2)
            cies[(sec, cur.off)] = cur
            continue
        m = FDE_RE.match(line)
        if m:
            cur = Entry(sec, int(m.group(1), 16))
            cur.cie = int(m.group(2), 16)
            cur.begin, cur.end = int(m.group(3), 16), int(m.group(4), 16)
            fdes.append(cur)
            continue
        if cur is None:
            continue
        if line.strip().startswith("LOC"):
            cur.cols = line.split()[2:]
            continue
        m = ROW_RE.match(line)
        if m and cur.cols:
            # A register rule reads "r10 (r10)": the name in parentheses belongs to the value before it.
            vals = []
            for tok in m.group(3).split():
                if tok.startswith("(") and vals:
                    vals[-1] += " " + tok
                else:
                    vals.append(tok)
            cur.rows.append((int(m.group(1), 16), m.group(2), dict(zip(cur.cols, vals))))
    return cies, fdes


def parse_exprs(text):
    """For every FDE (section, offset): the CFA expressions its instructions define."""
    exprs, sec, cur = {}, None, None
    for line in text.splitlines():
        m = SECTION_RE.match(line)
        if m:
            sec, cur = m.group(1), None
            continue
        m = FDE_RE.match(line)
        if m:
            cur = (sec, int(m.group(1), 16))
            exprs[cur] = set()
            continue
        if CIE_RE.match(line):
            cur = None
            continue
        m = EXPR_RE.search(line)
        if m and cur is not None:
            exprs[cur].add(m.group(1))
    return exprs


def expr_rule(expr):
    m = PLT_RE.match(expr)
    if m:
        return (PLT, int(m.group(1)))
    m = DEREF_RE.match(expr)
    if m and -32768 <= int(m.group(1)) <= 32767:
        return (DEREF_RBP, int(m.group(1)) & 0xFFFF)
    return (INVALID, 0)


def want(cfa, cols, aug, exprs):
    """readelf's rule as bpf/unwind.h holds it: a set of acceptable (type, cfa_off, rbp_off)."""
    ra = cols.get("ra")
    if ra == "u":
        return {(END, 0, 0)}
    if "S" in aug:
        return {(SIGNAL, 0, 0)}
    if ra != "c-8":
        return {(UNSUPPORTED, 0, 0)}
    rbp = cols.get("rbp", "u")
    m = re.fullmatch(r"c([+-]\d+)", rbp)
    if rbp in ("u", "s"):
        rbp_off = RBP_SAME
    elif m and int(m.group(1)) % 8 == 0 and int(m.group(1)) != 0 and -127 <= int(m.group(1)) // 8 <= 127:
        rbp_off = int(m.group(1)) // 8
    else:
        rbp_off = RBP_UNDEFINED
    if cfa == "exp":
        # Which expression is exact when the FDE defines only one; else either recognised shape.
        cands = [expr_rule(e) for e in exprs] if len(exprs) == 1 else [(PLT, None), (DEREF_RBP, None)]
        out = set()
        for t, off in cands:
            out.add((UNSUPPORTED, 0, 0) if t == INVALID else (t, off, rbp_off))
        return out
    m = re.fullmatch(r"(rsp|rbp)\+(\d+)", cfa)
    if not m:
        return {(UNSUPPORTED, 0, 0)}
    n = int(m.group(2))
    if n <= 0xFFFF:
        return {(RSP if m.group(1) == "rsp" else RBP, n, rbp_off)}
    if m.group(1) == "rsp" and n % 8 == 0 and n // 8 <= 0xFFFF:
        return {(RSP_X8, n // 8, rbp_off)}
    return {(UNSUPPORTED, 0, 0)}


def matches(got, wanted):
    for t, off, rbp in wanted:
        if got[0] == t and (off is None or got[1] == off) and got[2] == rbp:
            return True
    return False


def fmt(rule):
    return "%s off %s rbp %s" % (TYPE_NAMES[rule[0]] if rule[0] < len(TYPE_NAMES) else rule[0], rule[1], rule[2])


def check(tool, path):
    header, _, pcs, rules = cfilib.dump(tool, path, "unwind-table-readelf")
    log(path + ":", header)
    cies, fdes = parse_interp(readelf("frames-interp", path))
    exprs = parse_exprs(readelf("frames", path))
    fdes = [f for f in fdes if f.begin != 0 and f.end > f.begin]
    cov = cfilib.Coverage(fdes, ".eh_frame", pcs, rules)

    checked = fdes_checked = skipped = 0
    bad = []
    for f in fdes:
        cie = cies.get((f.sec, f.cie))
        if cie is None or id(f) in cov.overlapping:
            skipped += 1
            continue
        rows = f.rows or cie.rows
        if not rows and "S" not in cie.aug:
            skipped += 1
            continue
        if not f.rows:
            # The CIE's rules hold over the whole FDE.
            rows = [(f.begin, cie.rows[0][1], cie.rows[0][2])] if rows else [(f.begin, "exp", {"ra": "exp"})]
        # Two rows at one location: the later one holds.
        by_loc = {}
        for loc, cfa, cols in rows:
            by_loc[loc] = (cfa, cols)
        locs = sorted(l for l in by_loc if f.begin <= l < f.end)
        fx = exprs.get((f.sec, f.off), set())
        fdes_checked += 1
        for k, loc in enumerate(locs):
            seg_end = locs[k + 1] if k + 1 < len(locs) else f.end
            cfa, cols = by_loc[loc]
            wanted = want(cfa, cols, cie.aug, fx)
            # readelf's row, and every row of ours that starts inside its range.
            points = [loc] + pcs[bisect.bisect_right(pcs, loc) : bisect.bisect_left(pcs, seg_end)]
            for pc in points:
                if f.sec != ".eh_frame" and cov.eh_covers(pc):
                    continue
                got = cov.ours(pc)
                checked += 1
                if got is None or not matches(got, wanted):
                    bad.append(
                        "%s FDE at %#x (%#x..%#x): at %#x readelf says CFA %s %s, we say %s; want %s"
                        % (
                            f.sec,
                            f.off,
                            f.begin,
                            f.end,
                            pc,
                            cfa,
                            " ".join("%s=%s" % kv for kv in cols.items()),
                            fmt(got) if got else "no row",
                            " or ".join(fmt(w) for w in sorted(wanted, key=str)),
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
        return False
    return not bad


def libc_path():
    # This interpreter's own libc, as the dynamic linker found it.
    with open("/proc/self/maps") as f:
        for line in f:
            p = line.split()[-1]
            if re.search(r"/libc(\.so\.6|-[\d.]+\.so)$", p):
                return p
    return None


def main():
    if not shutil.which("readelf"):
        log("SKIP: readelf (binutils) is not installed")
        return SKIP
    build = os.environ.get("SR_BUILD_ROOT", "")
    tool = os.environ.get("SR_UNWIND_DUMP") or os.path.join(build, "tests", "integration", "unwind-table-dump")
    if not os.access(tool, os.X_OK):
        log("no unwind-table-dump at %s (set SR_UNWIND_DUMP or SR_BUILD_ROOT)" % tool)
        return 1
    files = [libc_path(), os.environ.get("SR_AGENT") or os.path.join(build, "agent", "stackrelay-agent")]
    if os.path.exists("/usr/bin/python3.11"):
        files.append("/usr/bin/python3.11")
    else:
        log("/usr/bin/python3.11 is not installed: not compared")
    ok = True
    for path in files:
        if not path or not os.path.exists(path):
            log("missing file to compare: %s" % path)
            ok = False
            continue
        ok = check(tool, path) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
