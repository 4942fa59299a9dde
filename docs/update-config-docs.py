#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Replaces (or with --check, compares) the generated part of configuration.md."""
import subprocess
import sys

BEGIN = "<!-- BEGIN GENERATED: ninja -C build update-config-docs -->"
END = "<!-- END GENERATED -->"


def main(argv):
    check = argv[1:2] == ["--check"]
    if check:
        argv = argv[1:]
    tool, doc = argv[1], argv[2]
    generated = subprocess.run([tool], check=True, capture_output=True, text=True).stdout
    text = open(doc, encoding="utf-8").read()
    try:
        head, rest = text.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
    except ValueError:
        print(f"{doc}: markers {BEGIN!r} ... {END!r} not found", file=sys.stderr)
        return 1
    new = head + BEGIN + "\n\n" + generated + "\n" + END + tail
    if check:
        if new != text:
            print(f"{doc} is out of date with the config schemas: run `ninja -C build update-config-docs`",
                  file=sys.stderr)
            return 1
        print(f"{doc} matches the config schemas")
        return 0
    with open(doc, "w", encoding="utf-8") as f:
        f.write(new)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
