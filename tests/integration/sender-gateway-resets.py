#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Exactly-once through connection resets, sender against the real gateway:
a TCP proxy in this test reads the HTTP/2 frames passing through and, on a
script, resets the connection either after the request's first DATA frame
(request cut: the gateway never processes it) or when the response's HEADERS
frame comes back (response lost: the gateway processed it, the sender resends
the same sequence and the gateway must answer from its de-duplication
window). The gateway's accepted count equals what was submitted."""
import importlib.machinery
import os
import shutil

lib = importlib.machinery.SourceFileLoader("sender_lib", os.path.join(os.path.dirname(__file__), "sender-lib.py")).load_module()

tmp = lib.tmpdir()
W, N = 24, 40
expected = lib.expected_per_pid(W, N)
total = sum(expected.values())
gw = lib.Gateway(tmp, "resets")
proxy = lib.Proxy(gw.port, cut=3, lose=4)
proxy.start()
try:
    rc, out, err = lib.run_driver(["--endpoint", f"http://127.0.0.1:{proxy.port}", "--windows", str(W), "--samples",
                                   str(N), "--interval-ms", "20", "--backoff-ms", "20,200",
                                   "--flush-timeout-ms", "30000"])
    m = gw.metrics()
finally:
    proxy.stop()
    gw.stop()
if rc != 0:
    print(err[-3000:])
lib.check(rc == 0 and out["accepted"] == total and out["dropped"] == 0,
          f"the sender counts all {total} accepted, none dropped (exit {rc})")
lib.check(proxy.cuts > 0 and proxy.losses > 0, f"the proxy cut {proxy.cuts} requests and lost {proxy.losses} responses")
lib.check(m.get("stackrelay_gateway_agent_duplicate_requests_total", 0) >= 1,
          f"the gateway recognised resends ({m.get('stackrelay_gateway_agent_duplicate_requests_total')})")
lib.check(m.get("stackrelay_gateway_samples_accepted_total") == total,
          f"the gateway accepted exactly {total} ({m.get('stackrelay_gateway_samples_accepted_total')}), once each")
shutil.rmtree(tmp)
