# SPDX-License-Identifier: Apache-2.0
"""The Java workloads' sources as javac compiles them (tests/integration/agent-java.py, bench/agent-unwind).

A line `// @mix48 S M X` stands for the 48 statements `S = S * M + (X ^ i);`, i = 0 .. 47, at its indentation:
a method body with more bytecode than C2 inlines (FreqInlineSize), so the method that holds it is compiled on
its own and shows as a frame of its own. JavaHot, JavaSplit and JavaDeopt each hold one or two; writing them
here keeps the 48 lines in one place while each workload keeps its own method (and frame name).
"""
import os
import re

MARK = re.compile(r"^(\s*)// @mix48 (\w+) (\d+) (\w+)\s*$")
STATEMENTS = 48


def expand(src, out_dir):
    """Writes src with its @mix48 lines expanded to out_dir (same file name) and returns that path. Line numbers
    (for a test's lookups and javac -g) are those of the copy."""
    out = []
    with open(src) as f:
        for line in f.read().splitlines():
            m = MARK.match(line)
            if not m:
                out.append(line)
                continue
            ind, s, mul, x = m.groups()
            out.extend("%s%s = %s * %s + (%s ^ %d);" % (ind, s, s, mul, x, i) for i in range(STATEMENTS))
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, os.path.basename(src))
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
    return path
