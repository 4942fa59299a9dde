#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The real agent (BPF sampling, store, sender) against the Node fake gateway:
with --duration the agent flushes before exiting, so every sample it exported
is accepted by the gateway exactly once, and wanted symbol tables are
uploaded before exit. Needs root and BPF (skips with 77 otherwise)."""
import importlib.machinery
import os
import re
import shutil
import subprocess

lib = importlib.machinery.SourceFileLoader("sender_lib", os.path.join(os.path.dirname(__file__), "sender-lib.py")).load_module()

if os.geteuid() != 0:
    lib.skip("needs root (perf events and BPF)")
if not os.path.exists("/sys/kernel/btf/vmlinux"):
    lib.skip("kernel without BTF")
agent = os.environ.get("SR_AGENT")
if not agent or not os.access(agent, os.X_OK):
    lib.skip("SR_AGENT not built")

tmp = lib.tmpdir()
fake = lib.Fake(tmp, "agent", ["--want-symbols", "--reset-every", "7"])
busy = subprocess.Popen(["sh", "-c", "end=$(($(date +%s) + 8)); while [ $(date +%s) -lt $end ]; do :; done"])
try:
    p = subprocess.run([agent, "--gateway", f"http://127.0.0.1:{fake.port}", "--duration", "3", "--frequency", "99"],
                       capture_output=True, text=True, timeout=90)
finally:
    busy.kill()
    busy.wait()
    fake.stop()
st = fake.stats()
if p.returncode != 0:
    print(p.stderr[-4000:])
lib.check(p.returncode == 0, f"agent exited 0 after --duration (exit {p.returncode})")
m = re.search(r'msg="profiling stopped" samples_taken=(\d+) samples_exported=(\d+)', p.stderr)
lib.check(m is not None, "agent reported what it exported")
exported = int(m.group(2))
lib.check(exported > 0, f"agent sampled something ({exported})")
lib.check(int(st["accepted"]) == exported,
          f"gateway accepted exactly what the agent exported ({st['accepted']} == {exported}), through resets")
tables = st["symbol_tables"]
with_symbols = [st["executable_paths"].get(k, "?") for k, t in tables.items() if t["symbols"] > 0]
lib.check(len(tables) > 0 and all(t["uploads"] >= 1 for t in tables.values()),
          f"every wanted executable got a table or an error before exit ({len(tables)})")
lib.check(len(with_symbols) > 0, f"some tables carry symbols: {with_symbols[:5]}")
lib.check(st["bad_requests"] == 0, "no malformed request")
shutil.rmtree(tmp)
