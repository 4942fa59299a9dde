#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The agent's sender (sender-driver) against the real stackrelay-gateway
over TLS with mTLS and a bearer token: the gateway's /metrics accounting
equals what the sender submitted; a wrong token and a missing client
certificate are refused and counted on both sides."""
import importlib.machinery
import os
import shutil

lib = importlib.machinery.SourceFileLoader("sender_lib", os.path.join(os.path.dirname(__file__), "sender-lib.py")).load_module()

tmp = lib.tmpdir()
W, N = 12, 60
total = sum(lib.expected_per_pid(W, N).values())
common = ["--windows", str(W), "--samples", str(N), "--interval-ms", "20", "--backoff-ms", "50,300"]

# TLS + mTLS + bearer token.
c = lib.make_certs(tmp)
token = os.path.join(tmp, "token")
with open(token, "w") as f:
    f.write("gw-token\n")
bad = os.path.join(tmp, "bad-token")
with open(bad, "w") as f:
    f.write("nope\n")
gw = lib.Gateway(tmp, "tls", f"""    tls: {{cert_file: {c['server.pem']}, key_file: {c['server.key']}, client_ca_file: {c['ca.pem']}}}
    auth: {{bearer_token_file: {token}}}""")
port = gw.port
try:
    tls = ["--endpoint", f"https://127.0.0.1:{port}", "--ca", c["ca.pem"], "--cert", c["client.pem"], "--key",
           c["client.key"]]
    rc, out, err = lib.run_driver(tls + ["--token-file", token, "--flush-timeout-ms", "20000"] + common)
    m = gw.metrics()
    if rc != 0:
        print(err[-3000:])
    lib.check(rc == 0 and out["accepted"] == total, f"mTLS + token: the sender counts all {total} accepted")
    lib.check(m.get("stackrelay_gateway_samples_accepted_total") == total,
              f"mTLS + token: the gateway accepted exactly {total}")
    rc, out, err = lib.run_driver(tls + ["--token-file", bad, "--flush-timeout-ms", "1500"] + common)
    m2 = gw.metrics()
    lib.check(rc == 3 and out["accepted"] == 0 and out["dropped_flush_timeout"] == total,
              "wrong token: nothing accepted, all counted dropped at flush timeout")
    lib.check(m2.get("stackrelay_gateway_agent_auth_failures_total", 0) > 0 and
              m2.get("stackrelay_gateway_samples_accepted_total") == total, "wrong token: the gateway refused it")
    rc, out, err = lib.run_driver(["--endpoint", f"https://127.0.0.1:{port}", "--ca", c["ca.pem"], "--token-file",
                                   token, "--flush-timeout-ms", "1500"] + common)
    m3 = gw.metrics()
    lib.check(rc == 3 and out["accepted"] == 0, "no client certificate: refused")
    lib.check(m3.get("stackrelay_gateway_samples_accepted_total") == total, "no client certificate: nothing accepted")
finally:
    gw.stop()
shutil.rmtree(tmp)
