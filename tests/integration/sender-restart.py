#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Conservation through gateway restarts: the fake gateway is stopped and a
new one (empty definition store) started on the same port twice while the
sender streams windows. The sum accepted by the three gateway processes
equals what was submitted, per process, exactly once."""
import importlib.machinery
import os
import shutil
import subprocess
import time

lib = importlib.machinery.SourceFileLoader("sender_lib", os.path.join(os.path.dirname(__file__), "sender-lib.py")).load_module()

tmp = lib.tmpdir()
W, N = 30, 40
expected = lib.expected_per_pid(W, N)
total = sum(expected.values())
fakes = [lib.Fake(tmp, "gw0", [])]
port = fakes[0].port
drv = subprocess.Popen([lib.driver_path(), "--endpoint", f"http://127.0.0.1:{port}", "--windows", str(W),
                        "--samples", str(N), "--interval-ms", "100", "--backoff-ms", "50,300",
                        "--flush-timeout-ms", "30000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
try:
    for i in (1, 2):
        time.sleep(0.9)
        fakes[-1].stop()
        time.sleep(0.4)
        fakes.append(lib.Fake(tmp, f"gw{i}", [], port=port))
    out, err = drv.communicate(timeout=90)
finally:
    if drv.poll() is None:
        drv.kill()
        drv.wait()
    for f in fakes:
        f.stop()
import json  # noqa: E402

res = json.loads(out.strip().splitlines()[-1])
stats = [f.stats() for f in fakes]
acc = [int(s["accepted"]) for s in stats]
lib.check(drv.returncode == 0, f"driver flushed everything (exit {drv.returncode})")
lib.check(all(a > 0 for a in acc), f"each of the 3 gateway processes accepted some ({acc})")
lib.check(sum(acc) == total, f"sum accepted over restarts {sum(acc)} == submitted {total}")
per_pid = {}
for s in stats:
    for k, v in s["per_pid"].items():
        per_pid[k] = per_pid.get(k, 0) + int(v)
lib.check(per_pid == expected, "per-process sums over restarts equal what was sent")
lib.check(res["accepted"] == total and res["dropped"] == 0, "the sender counts all accepted, none dropped")
lib.check(res["retries"] > 0, f"the sender retried while the gateway was down ({res['retries']})")
shutil.rmtree(tmp)
