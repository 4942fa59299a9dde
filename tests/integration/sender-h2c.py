#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The agent's sender against the Node fake gateway over h2c: exact
conservation through stream resets, lost responses (same sequence resent and
de-duplicated), 503 + Retry-After, retry_after_ms, GOAWAY, a gateway that
forgets its definitions (missing_* resends), symbol uploads for
wanted_symbols, and the exit probes (probe_symbols / symbols_pending)."""
import importlib.machinery
import os
import shutil

lib = importlib.machinery.SourceFileLoader("sender_lib", os.path.join(os.path.dirname(__file__), "sender-lib.py")).load_module()

tmp = lib.tmpdir()
driver = lib.driver_path()
W, N = 20, 50
expected = lib.expected_per_pid(W, N)
total = sum(expected.values())


def scenario(name, fake_args, driver_args):
    fake = lib.Fake(tmp, name, fake_args)
    try:
        rc, out, err = lib.run_driver(["--endpoint", f"http://127.0.0.1:{fake.port}", "--windows", str(W),
                                       "--samples", str(N), "--interval-ms", "20", "--backoff-ms", "20,200",
                                       "--flush-timeout-ms", "30000"] + driver_args)
    finally:
        fake.stop()
    st = fake.stats()
    if rc != 0 or out is None:
        print(err[-4000:])

    def dump():
        print("driver:", out)
        print("driver log:", err[-3000:])
        print("fake:", {k: v for k, v in st.items() if k not in ("per_pid", "symbol_tables", "executable_paths")})
    lib.on_fail = dump
    lib.check(rc == 0 and out is not None, f"{name}: driver flushed everything (exit {rc})")
    lib.check(out["submitted"] == total and out["samples_submitted"] == total, f"{name}: {total} submitted")
    lib.check(out["accepted"] == total and out["dropped"] == 0 and out["buffered"] == 0,
              f"{name}: the sender counts all accepted, none dropped ({out['accepted']}/{total})")
    lib.check(int(st["accepted"]) == total, f"{name}: the gateway accepted exactly {total} (got {st['accepted']})")
    lib.check({k: int(v) for k, v in st["per_pid"].items()} == expected, f"{name}: per-process sums at the gateway equal what was sent")
    lib.check(st["bad_requests"] == 0 and not st["errors"], f"{name}: no request was malformed {st['errors']}")
    return out, st


# 1. No faults, gzip: definitions are sent once per connection.
out, st = scenario("clean", [], [])
lib.check(st["gzip_requests"] == st["requests"], "clean: every body gzip-compressed")
lib.check(st["definitions"]["stacks"] == 64, f"clean: each of the 64 stacks defined once ({st['definitions']})")
lib.check(len(st["instances"]) == 1, "clean: one instance_id")

# 2. Every fault at once, plus symbol uploads.
out, st = scenario("faults", ["--want-symbols", "--reset-every", "5", "--lose-every", "7", "--unavailable-every",
                              "11", "--forget-every", "6", "--retry-after-every", "13", "--goaway-every", "4"],
                   ["--exec-path", driver])
lib.check(st["resets"] > 0 and st["lost"] > 0 and st["unavailable"] > 0 and st["retry_after"] > 0,
          f"faults: resets={st['resets']} lost={st['lost']} 503={st['unavailable']} retry_after={st['retry_after']}")
lib.check(st["duplicates"] >= 1, f"faults: resends after lost responses were recognised ({st['duplicates']})")
lib.check(out["retries"] > 0, f"faults: the sender retried ({out['retries']})")
tables = st["symbol_tables"]
lib.check(len(tables) == 8, f"faults: a symbol table (or error) for each of the 8 wanted executables ({len(tables)})")
lib.check(all(t["uploads"] == 1 for t in tables.values()), "faults: each executable uploaded once")
exe0 = [t for t in tables.values() if not t["error"]]
lib.check(len(exe0) == 1 and "main" in exe0[0]["names"] and exe0[0]["sorted"] and ".symtab" in exe0[0]["sources"],
          "faults: the reachable executable's table has its functions, sorted by address")
lib.check(all("not reachable" in t["error"] for t in tables.values() if t["symbols"] == 0),
          "faults: unreachable executables answered with an error")
lib.check(out["symbol_tables_sent"] == 1, "faults: the sender counts one table sent")

# 3. A gateway that keeps forgetting definitions: missing_* answered, exactly those samples resent.
out, st = scenario("forget", ["--forget-every", "2"], ["--compression", "none"])
lib.check(st["missing_answered"] > 0 and out["resent_missing"] > 0,
          f"forget: missing answered {st['missing_answered']} times, {out['resent_missing']} samples resent")
lib.check(st["gzip_requests"] == 0, "forget: compression none sends plain bodies")

# 4. Exit probes: the windows' responses want nothing; at flush the sender asks about every executable and
# the kernel it sent, keeps asking while the gateway says "pending", and uploads what the answer wants.
out, st = scenario("probes", ["--want-on-probe", "--probe-pending", "2"], ["--exec-path", driver])
tables = st["symbol_tables"]
lib.check(st["probes_pending"] > 0 and st["probe_requests"] >= 3,
          f"probes: asked again while pending ({st['probe_requests']} probe requests, {st['probes_pending']} pending)")
lib.check(0 < st["probe_max_ids"] <= 256, f"probes: at most 256 IDs per probe ({st['probe_max_ids']})")
lib.check(len(tables) == 9 and all(t["uploads"] == 1 for t in tables.values()),
          f"probes: the 8 executables and the kernel wanted at exit were uploaded once each ({len(tables)})")
lib.check(any("main" in t["names"] for t in tables.values()), "probes: the reachable executable's table has main")

shutil.rmtree(tmp)
