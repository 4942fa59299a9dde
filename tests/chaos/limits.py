#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The agent receiver's connection and stream limits (docs/configuration.md)
at small values, one client breaking each: max_header_list_bytes (431),
max_continuations, stream_resets, max_pending_acks (GOAWAY, counted in
protocol_errors), max_connections_per_peer (closed at accept) and
max_connections (the oldest silent connection makes room). Each is seen in
/metrics, and a well-behaved request is still answered afterwards."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chaoslib as C  # noqa: E402
import h2raw as H  # noqa: E402

A = "stackrelay_gateway_agent_"


def wait_metric(gw, key, at_least, what):
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        v = gw.metrics().get(key, 0)
        if v >= at_least:
            C.slib.check(True, f"{what} ({key} = {v:g})")
            return
        time.sleep(0.1)
    C.slib.check(False, f"{what} ({key} = {gw.metrics().get(key, 0):g}, wanted >= {at_least})")


def goaway(c, what):
    deadline = time.monotonic() + 30
    while c.read(0.2) and time.monotonic() < deadline and not c.goaways:
        pass
    C.slib.check(c.goaways or c.closed, f"{what}: GOAWAY or closed")


def main():
    tmp = C.slib.tmpdir()
    pyro = C.Pyroscope(tmp)
    gw = C.Gateway(tmp, pyro.port, per_peer=3, receiver_extra="""    max_connections: 6
    max_header_list_bytes: 1KiB
    max_continuations: 2
    max_pending_acks: 10
    stream_resets: {burst: 10, per_second: 1}
""")
    try:
        # A header list over 1 KiB: 431, the connection goes on.
        c = H.Conn(gw.port, src="127.0.0.2")
        c.read(0.5)
        c.post(H.push_request(), extra=[("x-pad", "p" * 1200)])
        wait_metric(gw, A + 'requests_total{component="agent",status="431"}', 1, "a 1.2 KB header list gets 431")
        wait_metric(gw, A + "headers_too_large_total", 1, "and is counted")
        c.post(H.push_request())
        wait_metric(gw, A + 'requests_total{component="agent",status="200"}', 1,
                    "the same connection's next request is answered 200")
        c.close()

        # Three CONTINUATION frames where two are allowed.
        c = H.Conn(gw.port, src="127.0.0.2")
        c.read(0.5)
        sid = c.stream()
        c.send(H.frame(H.HEADERS, 0, sid, H.request_block()) +
               b"".join(H.frame(H.CONTINUATION, 0, sid, H.literal("x-f", "f")) for _ in range(3)))
        goaway(c, "a third CONTINUATION frame")
        c.close()
        wait_metric(gw, A + "protocol_errors_total", 1, "counted as a protocol error")

        # Resets beyond a burst of 10 at 1 per second.
        c = H.Conn(gw.port, src="127.0.0.2")
        c.read(0.5)
        out = b""
        for _ in range(40):
            sid = c.stream()
            out += H.frame(H.HEADERS, H.END_HEADERS, sid, H.request_block()) + \
                H.frame(H.RST_STREAM, 0, sid, H.CANCEL.to_bytes(4, "big"))
        c.send(out)
        goaway(c, "40 streams reset at once")
        c.close()
        wait_metric(gw, A + "protocol_errors_total", 2, "counted as a protocol error")

        # PINGs whose ACKs are never read, beyond 10 queued.
        c = H.Conn(gw.port, src="127.0.0.2")
        c.read(0.5)
        try:
            c.send(H.frame(H.PING, 0, 0, b"12345678") * 200)
        except H.Closed:
            pass
        goaway(c, "200 PINGs in one write")
        c.close()
        wait_metric(gw, A + "protocol_errors_total", 3, "counted as a protocol error")

        # A fourth connection from one address (3 allowed) is closed at accept.
        conns = [H.Conn(gw.port, src="127.0.0.3", preface=False) for _ in range(4)]
        wait_metric(gw, A + "connections_refused_peer_total", 1, "a fourth connection from 127.0.0.3 is refused")
        # Four more from other addresses: past max_connections (6), the oldest silent one makes room.
        conns += [H.Conn(gw.port, src=f"127.0.0.{4 + i}", preface=False) for i in range(4)]
        wait_metric(gw, A + "connections_evicted_total", 1, "past max_connections a silent connection is closed")
        for x in conns:
            x.close()
        c = H.Conn(gw.port, src="127.0.0.10")
        c.read(0.5)
        c.post(H.push_request(sequence=2))
        wait_metric(gw, A + 'requests_total{component="agent",status="200"}', 2, "the gateway still serves")
        c.close()
        C.slib.check(gw.proc.poll() is None, "the gateway is up")
    finally:
        gw.stop()
        pyro.stop()


if __name__ == "__main__":
    main()
