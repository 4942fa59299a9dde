#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The agent's sender over TLS and mTLS with a bearer token, against the Node
fake gateway; certificates from the openssl CLI. A wrong token, a missing or
foreign client certificate, an untrusted server and a wrong server name are
refused, and the sender keeps counting what it could not deliver."""
import importlib.machinery
import os
import shutil

lib = importlib.machinery.SourceFileLoader("sender_lib", os.path.join(os.path.dirname(__file__), "sender-lib.py")).load_module()

tmp = lib.tmpdir()
W, N = 6, 40
expected = lib.expected_per_pid(W, N)
total = sum(expected.values())
c = lib.make_certs(tmp, server_names=("gateway.test",), ips=())
token_file = os.path.join(tmp, "token")
with open(token_file, "w") as f:
    f.write("s3cret-token\n")
wrong_token = os.path.join(tmp, "wrong-token")
with open(wrong_token, "w") as f:
    f.write("not-the-token\n")

fake = lib.Fake(tmp, "tls", ["--tls-cert", c["server.pem"], "--tls-key", c["server.key"], "--client-ca", c["ca.pem"],
                             "--token", "s3cret-token"])
url = f"https://127.0.0.1:{fake.port}"
good = ["--ca", c["ca.pem"], "--cert", c["client.pem"], "--key", c["client.key"], "--server-name", "gateway.test",
        "--token-file", token_file]
common = ["--endpoint", url, "--windows", str(W), "--samples", str(N), "--backoff-ms", "50,200"]
try:
    rc, out, err = lib.run_driver(common + good + ["--flush-timeout-ms", "20000", "--interval-ms", "30"])
    st = fake.stats()
    if rc != 0:
        print(err[-3000:])
    lib.check(rc == 0 and out["accepted"] == total and int(st["accepted"]) == total,
              f"mTLS + token: all {total} accepted ({out and out['accepted']})")
    lib.check({k: int(v) for k, v in st["per_pid"].items()} == expected, "mTLS + token: per-process sums equal")
    lib.check("stackrelay-client" in st["tls_client_subjects"], "mTLS: the gateway saw the client certificate")
    lib.check(st["connections"] == 1 and st["requests"] >= 2,
              f"TLS: one connection reused for {st['requests']} requests ({st['connections']} connections)")

    # max_connection_age: reconnects (so agents rebalance), and each new connection gets definitions again.
    rc, out, err = lib.run_driver(common + good + ["--flush-timeout-ms", "20000", "--interval-ms", "60",
                                                   "--max-connection-age-ms", "100"])
    st2 = fake.stats()
    lib.check(rc == 0 and int(st2["accepted"]) == 2 * total, "max_connection_age: everything accepted")
    # At least two requests 300 ms apart (the windows sleep), so at least one reconnect beyond the first.
    lib.check(st2["connections"] - st["connections"] >= 2,
              f"max_connection_age: reconnected ({st2['connections'] - st['connections']} connections)")
    lib.check(st2["definitions"]["kernels"] - st["definitions"]["kernels"] >= 2,
              "max_connection_age: a new connection starts without definitions")

    def refused(name, args, what):
        before = fake.stats()
        rc, out, err = lib.run_driver(common + args + ["--flush-timeout-ms", "1500"])
        after = fake.stats()
        lib.check(rc == 3 and out is not None, f"{name}: flush timed out (exit {rc})")
        lib.check(out["accepted"] == 0 and out["dropped_flush_timeout"] == total,
                  f"{name}: nothing accepted, all {total} counted as dropped at flush timeout")
        lib.check(after["accepted"] == before["accepted"], f"{name}: the gateway accepted nothing")
        lib.check(what in err, f"{name}: the log says why ({what!r})")
        return before, after

    b, a = refused("wrong token", [x if x != token_file else wrong_token for x in good], "HTTP 401")
    lib.check(a["auth_failures"] > b["auth_failures"], "wrong token: the gateway refused with 401")
    refused("no client certificate", ["--ca", c["ca.pem"], "--server-name", "gateway.test", "--token-file", token_file],
            "push to the gateway failed")
    refused("foreign client certificate", ["--ca", c["ca.pem"], "--cert", c["rogue.pem"], "--key", c["rogue.key"],
                                           "--server-name", "gateway.test", "--token-file", token_file],
            "push to the gateway failed")
    refused("untrusted gateway", ["--ca", c["otherca.pem"], "--cert", c["client.pem"], "--key", c["client.key"],
                                  "--server-name", "gateway.test", "--token-file", token_file], "certificate")
    refused("wrong server name", ["--ca", c["ca.pem"], "--cert", c["client.pem"], "--key", c["client.key"],
                                  "--token-file", token_file], "push to the gateway failed")
    # Setup errors are reported before anything is sent.
    rc, out, err = lib.run_driver(["--endpoint", url, "--ca", os.path.join(tmp, "nope.pem")])
    lib.check(rc == 1 and "nope.pem" in err, "a missing ca_file is named in the error")
    rc, out, err = lib.run_driver(["--endpoint", f"http://127.0.0.1:{fake.port}", "--ca", c["ca.pem"]])
    lib.check(rc == 1 and "https://" in err, "tls settings with an http:// endpoint are refused")
finally:
    fake.stop()
shutil.rmtree(tmp)
