# SPDX-License-Identifier: Apache-2.0
"""Free TCP ports for test servers, chosen so that nothing else takes them first.

A port found by binding to port 0 and closing is an ephemeral port: the
kernel hands the same numbers to every other bind(0) and to outgoing
connections, so a server started a moment later may find its port taken by
another test's connection or server (the fleet soak once started HAProxy on
its sink's port). Ports below the kernel's ephemeral range
(net.ipv4.ip_local_port_range) are never chosen by the kernel; picking one
at random there and checking it binds leaves only the small chance that a
test running in parallel picks the same one in the same moment.

Run as a script, prints one port (for shell tests).
"""
import random
import socket

_handed_out = set()


def _ephemeral_low():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port():
    """A port on 127.0.0.1 that binds now, below the ephemeral range, not handed out before by this process."""
    high = min(_ephemeral_low(), 65536) - 1
    low = 10000 if high > 12000 else 1024
    for _ in range(1000):
        port = random.randint(low, high)
        if port in _handed_out:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    raise RuntimeError(f"no free port in {low}..{high} after 1000 tries")


if __name__ == "__main__":
    print(free_port())
