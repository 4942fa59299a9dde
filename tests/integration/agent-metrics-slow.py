#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The agent's /metrics server against slow and greedy clients (agent/metrics.h).

With a profiling agent serving telemetry.metrics.address:
  - a client that sends part of a request and then one byte a second, and
    one that connects and sends nothing, do not hold the server: a scrape
    made while both are connected is answered, and both are cut off once
    their deadline (AGENT_METRICS_DEADLINE_MS, 5 s) has passed, without a
    response;
  - more silent clients than the server serves at once
    (AGENT_METRICS_MAX_CLIENTS, 4) delay a scrape until their deadlines
    free a slot, and no longer: the scrape is answered;
  - a request head of AGENT_METRICS_MAX_REQUEST (8192) bytes without its
    end is answered 431;
  - the agent stops cleanly with clients still connected.
"""
import os
import socket
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ports import free_port  # noqa: E402
import agentlib  # noqa: E402

DEADLINE = 5.0
MAX_CLIENTS = 4
MAX_REQUEST = 8192
BOUND = 60.0  # how long the test waits for anything, far above the deadline


def scrape(port, timeout=BOUND):
    return urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=timeout)


def connect(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=BOUND)
    return s, time.monotonic()


def wait_closed(s, dribble=False):
    """Reads (dribbling a byte a second if asked) until the server closes; returns (what it sent, when)."""
    got = b""
    s.settimeout(1.0)
    end = time.monotonic() + BOUND
    while time.monotonic() < end:
        try:
            data = s.recv(4096)
            if not data:
                return got, time.monotonic()
            got += data
        except socket.timeout:
            if dribble:
                try:
                    s.send(b"X")
                except OSError:
                    return got, time.monotonic()
        except OSError:
            return got, time.monotonic()
    return got, None


def main():
    agentlib.require_root_bpf()
    env = agentlib.Env()
    c = agentlib.Checks()
    agent = None
    socks = []
    try:
        port = free_port()
        cfg = os.path.join(env.tmp, "agent.yaml")
        with open(cfg, "w") as f:
            f.write("gateway:\n  flush_timeout: 1s\nprofiling:\n  frequency: 49\n"
                    "telemetry:\n  metrics:\n    address: 127.0.0.1:%d\n" % port)
        agent, log = agentlib.start_agent(env, ["--config", cfg, "--duration", "300", "--output",
                                                os.path.join(env.tmp, "out.pb")])
        if not c.check(agent is not None, "agent starts profiling"):
            return c.finish()
        c.check(scrape(port).status == 200, "a scrape is answered")

        # A slowloris and a silent client, then an honest scrape.
        slow, slow_t0 = connect(port)
        slow.send(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
        silent, silent_t0 = connect(port)
        socks += [slow, silent]
        r = scrape(port)
        body = r.read().decode()
        c.check(r.status == 200 and "stackrelay_agent_samples_total" in body,
                "a scrape made while a slow and a silent client are connected is answered")
        got, t = wait_closed(slow, dribble=True)
        c.check(t is not None and got == b"", "the slow client (a byte a second) is cut off without a response")
        if t is not None:
            c.check(t - slow_t0 >= DEADLINE,
                    "... after its deadline, not before (%.1f s after it connected)" % (t - slow_t0))
        got, t = wait_closed(silent)
        c.check(t is not None and got == b"" and t - silent_t0 >= DEADLINE,
                "the silent client is cut off after its deadline (%s s)" %
                ("%.1f" % (t - silent_t0) if t else "never"))

        # More silent clients than slots: a scrape waits for a slot, and gets one.
        flood = [connect(port)[0] for _ in range(MAX_CLIENTS + 2)]
        socks += flood
        r = scrape(port)
        c.check(r.status == 200 and "stackrelay_agent_samples_total" in r.read().decode(),
                "with %d silent clients connected, a scrape is answered once a slot frees" % len(flood))
        closed = [wait_closed(s)[1] is not None for s in flood]
        c.check(all(closed), "every silent client is cut off (%d of %d)" % (sum(closed), len(flood)))

        # A request head as long as the limit, without its end.
        big, _ = connect(port)
        socks.append(big)
        big.sendall(b"GET /metrics HTTP/1.1\r\nX-Pad: " + b"a" * (MAX_REQUEST - 32) + b"\r\n")
        got, _ = wait_closed(big)
        c.check(got.startswith(b"HTTP/1.1 431 "), "a request head of %d bytes is answered 431 (%r)" %
                (MAX_REQUEST, got[:40]))

        # Stop with a client connected.
        held, _ = connect(port)
        socks.append(held)
        rc, _ = agentlib.stop_agent(agent, log)
        agent = None
        c.check(rc == 0, "agent stops with a client connected and exits 0 (rc=%d)" % rc)
        return c.finish()
    finally:
        for s in socks:
            s.close()
        if agent is not None:
            agent.kill()
            agent.wait()
        env.cleanup()


if __name__ == "__main__":
    sys.exit(main())
