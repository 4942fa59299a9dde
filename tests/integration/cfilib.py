# SPDX-License-Identifier: Apache-2.0
"""What the two CFI cross-checks share (unwind-table-readelf.py for x86-64,
unwind-table-arm64.py for AArch64): the table builder's rows as the dump
tool prints them, and which pcs of which FDEs are comparable at all."""
import bisect
import subprocess


def dump(tool, path, test):
    """The builder's rows of path: (header line, stats from it, sorted pcs, (type, offset, rbp) rules)."""
    out = subprocess.run([tool, path], check=True, capture_output=True, text=True).stdout
    header, pcs, rules = None, [], []
    for line in out.splitlines():
        if line.startswith("#"):
            header = line
            continue
        a, t, off, rbp = line.split()
        pcs.append(int(a, 16))
        rules.append((int(t), int(off), int(rbp)))
    if any(b <= a for a, b in zip(pcs, pcs[1:])):
        raise SystemExit("%s: %s: our rows are not sorted" % (test, path))
    stats = dict(zip(header.split()[1::2], header.split()[2::2])) if header else {}
    return header, stats, pcs, rules


class Coverage:
    """The builder lets .eh_frame win over .debug_frame, and a later FDE over an overlapping one of its
    own section: only the pcs exactly one FDE of the winning section covers are compared. FDEs need
    begin, end, sec; eh_sec names the .eh_frame section as the parser spells it."""

    def __init__(self, fdes, eh_sec, pcs, rules):
        self.eh = sorted((f.begin, f.end) for f in fdes if f.sec == eh_sec)
        self.eh_begins = [b for b, _ in self.eh]
        self.pcs, self.rules = pcs, rules
        self.overlapping = set()
        for sec in {f.sec for f in fdes}:
            reach = None  # the FDE that reaches furthest so far
            for f in sorted((f for f in fdes if f.sec == sec), key=lambda f: (f.begin, f.end)):
                if reach is not None and f.begin < reach.end:
                    self.overlapping.update({id(reach), id(f)})
                if reach is None or f.end > reach.end:
                    reach = f

    def eh_covers(self, pc):
        i = bisect.bisect_right(self.eh_begins, pc) - 1
        return i >= 0 and self.eh[i][0] <= pc < self.eh[i][1]

    def ours(self, pc):
        """Our rule at pc: the last row at or before it."""
        i = bisect.bisect_right(self.pcs, pc) - 1
        return self.rules[i] if i >= 0 else None
