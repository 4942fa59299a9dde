#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Prints the functions using the most CPU in gzipped pprof profiles.

Reads the protobuf with its own small decoder (field numbers from pprof's
profile.proto), so it needs only Python's standard library. Several files
(e.g. one per exported batch) are added up:

    scripts/top-functions.py stackrelay-pprof/*.pb.gz [--top 15]
"""
import argparse
import gzip
import sys


def varint(buf, i):
    shift = result = 0
    while True:
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i
        shift += 7


def fields(buf):
    """Yields (field number, wire type, value) of one message."""
    i = 0
    while i < len(buf):
        key, i = varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(buf, i)
        elif wt == 1:
            v, i = int.from_bytes(buf[i:i + 8], "little"), i + 8
        elif wt == 2:
            n, i = varint(buf, i)
            v, i = buf[i:i + n], i + n
        elif wt == 5:
            v, i = int.from_bytes(buf[i:i + 4], "little"), i + 4
        else:
            raise ValueError(f"unsupported wire type {wt}")
        yield num, wt, v


def ints(wt, v):
    """A repeated integer field, packed or not."""
    if wt == 0:
        return [v]
    out, i = [], 0
    while i < len(v):
        x, i = varint(v, i)
        out.append(x)
    return out


def add_profile(data, flat, cum, total, unit):
    """Adds one decoded profile's samples to flat and cum; returns the new total and unit."""
    strings, samples, locations, functions = [], [], {}, {}
    sample_types = []
    for num, wt, v in fields(data):
        if num == 1:
            st = dict((n, x) for n, _, x in fields(v))
            sample_types.append((st.get(1, 0), st.get(2, 0)))
        elif num == 2:
            locs, vals = [], []
            for n, w, x in fields(v):
                if n == 1:
                    locs += ints(w, x)
                elif n == 2:
                    vals += ints(w, x)
            samples.append((locs, vals))
        elif num == 4:
            loc_id, lines, address = 0, [], 0
            for n, w, x in fields(v):
                if n == 1:
                    loc_id = x
                elif n == 3:
                    address = x
                elif n == 4:
                    line = dict((a, b) for a, _, b in fields(x))
                    lines.append(line.get(1, 0))
            locations[loc_id] = (lines, address)
        elif num == 5:
            f = dict((n, x) for n, _, x in fields(v))
            functions[f.get(1, 0)] = f.get(2, 0)
        elif num == 6:
            strings.append(v.decode("utf-8", "replace"))

    def name_of(loc_id):
        lines, address = locations.get(loc_id, ([], 0))
        if lines:
            return strings[functions.get(lines[0], 0)] or "?"
        return f"0x{address:x}"

    # The last value is the one the profile is about (pprof's default sample index).
    for locs, vals in samples:
        if not vals:
            continue
        v = vals[-1]
        total += v
        if locs:
            leaf = name_of(locs[0])
            flat[leaf] = flat.get(leaf, 0) + v
        for name in {name_of(l) for l in locs}:
            cum[name] = cum.get(name, 0) + v
    if sample_types:
        unit = strings[sample_types[-1][1]]
    return total, unit


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("profiles", nargs="+")
    ap.add_argument("--top", type=int, default=15)
    args = ap.parse_args()
    flat, cum, total, unit = {}, {}, 0, ""
    for path in args.profiles:
        data = open(path, "rb").read()
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
        total, unit = add_profile(data, flat, cum, total, unit)
    if total == 0:
        print("no samples in the profile")
        return 1
    print(f"{'flat%':>7} {'cum%':>7}  function        (total {total} {unit})")
    for name, v in sorted(flat.items(), key=lambda kv: -kv[1])[:args.top]:
        print(f"{100.0 * v / total:6.2f}% {100.0 * cum[name] / total:6.2f}%  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
