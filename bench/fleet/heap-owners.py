#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The gateway's heap by owner, over time, from a heaptrack recording.

A replica's RSS is its stores (slot pools and stack slabs, counted by their
own metrics), the heap, and the binary. The heap's metric says how much is in
use, not whose it is. Run the soak with `--heaptrack FILE` (replica 0 under
heaptrack, Debian's package) and this reads the recording (heaptrack's
interpreted format, zstd-compressed) and prints:

  - the heap in use every --every seconds;
  - the allocation sites holding the most on average, each named by its
    innermost --depth functions, with what each held at those times.

Only malloc'd memory is seen: the stores' slot pools and slabs, and blocks
that gw_heap_paged_alloc() maps itself, are not in it. A recording cut off
when the soak stopped the replica is read up to where it ends.

Usage: heap-owners.py FILE.zst [--depth N] [--every SECONDS] [--top N]
"""
import argparse
import collections
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('file', help='heaptrack recording (heaptrack.*.zst)')
    ap.add_argument('--depth', type=int, default=3, help='functions naming a site, innermost first (default 3)')
    ap.add_argument('--every', type=float, default=30, help='seconds between the figures printed (default 30)')
    ap.add_argument('--top', type=int, default=30, help='sites printed (default 30)')
    o = ap.parse_args()
    if o.depth < 1 or o.every <= 0 or o.top < 1:
        ap.error('--depth, --every and --top must be positive')

    try:
        p = subprocess.Popen(['zstd', '-dc', o.file], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    except FileNotFoundError:
        sys.exit('heap-owners.py: zstd is not installed')
    strings, ips, traces, infos = [None], [None], [None], []
    names = {}
    live = collections.Counter()
    snaps = []
    every_ms = int(o.every * 1000)
    next_ms, now = every_ms, 0

    def site(t):
        k = names.get(t)
        if k is None:
            fns, tt = [], t
            while tt and len(fns) < o.depth:
                ip, parent = traces[tt]
                if ips[ip]:
                    fns.append(ips[ip])
                tt = parent
            k = names[t] = ' < '.join(fns) or '?'
        return k

    lineno = 0
    try:
        for line in p.stdout:
            lineno += 1
            c = line[:1]
            if c == b'+':
                size, k = infos[int(line[2:], 16)]
                live[k] += size
            elif c == b'-':
                size, k = infos[int(line[2:], 16)]
                live[k] -= size
            elif c == b'a':
                _, size, t = line.split()
                infos.append((int(size, 16), site(int(t, 16))))
            elif c == b't':
                _, ip, parent = line.split()
                traces.append((int(ip, 16), int(parent, 16)))
            elif c == b'i':
                f = line.split()
                ips.append(strings[int(f[3], 16)] if len(f) > 3 else None)
            elif c == b's':
                f = line[2:].rstrip(b'\n').split(b' ', 1)
                strings.append(f[1].decode(errors='replace') if len(f) > 1 else '')
            elif c == b'c':
                now = int(line[2:], 16)
                while now >= next_ms:
                    snaps.append((next_ms, +live))
                    next_ms += every_ms
    except (ValueError, IndexError) as e:
        sys.exit(f'heap-owners.py: {o.file}: line {lineno}: not a heaptrack recording ({e})')
    p.wait()
    if not snaps and not live:
        sys.exit(f'heap-owners.py: {o.file}: no allocations (is it a heaptrack recording?)')
    snaps.append((now, +live))

    print('seconds  heap in use, MiB')
    for t, l in snaps:
        print(f'{t / 1000:7.0f}  {sum(l.values()) / 1048576:7.1f}')
    total = collections.Counter()
    for _, l in snaps:
        total.update(l)
    cols = snaps[:: max(1, len(snaps) // 8)]
    print(f'\nmean MiB  held at ' + ' '.join(f'{t / 1000:.0f}s' for t, _ in cols) + '  site (innermost first)')
    for k, v in total.most_common(o.top):
        print(f'{v / len(snaps) / 1048576:8.2f}  ' + ' '.join(f'{l[k] / 1048576:.1f}' for _, l in cols) + f'  {k}')


if __name__ == '__main__':
    main()
