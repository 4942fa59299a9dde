#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The agent's sender (sender-driver) against the real stackrelay-gateway
over h2c, with the gateway's symbolizer asking for symbol tables: the
gateway's /metrics accounting equals what the sender submitted. Then a
second gateway that never got the tables (another replica behind the
balancer, or one restarted without cache_dir) gets them too."""
import importlib.machinery
import json
import os
import shutil
import subprocess
import time

lib = importlib.machinery.SourceFileLoader("sender_lib", os.path.join(os.path.dirname(__file__), "sender-lib.py")).load_module()

tmp = lib.tmpdir()
W, N = 12, 60
total = sum(lib.expected_per_pid(W, N).values())
common = ["--windows", str(W), "--samples", str(N), "--interval-ms", "20", "--backoff-ms", "50,300"]

# Executable 0 of the driver's fake world is the driver itself, so one table carries symbols.
os.makedirs(os.path.join(tmp, "cache"))
gw = lib.Gateway(tmp, "h2c", processors_yaml=f"""processors:
  symbolize: {{cache_dir: {os.path.join(tmp, 'cache')}, wait_for_symbols: 2s}}
""")
try:
    rc, out, err = lib.run_driver(["--endpoint", f"http://127.0.0.1:{gw.port}", "--flush-timeout-ms", "20000",
                                   "--exec-path", lib.driver_path()] + common)
    m = gw.metrics()
finally:
    gw.stop()
if rc != 0:
    print(err[-3000:])
lib.check(rc == 0 and out["accepted"] == total, f"h2c: the sender counts all {total} accepted")
lib.check(m.get("stackrelay_gateway_samples_accepted_total") == total,
          f"h2c: the gateway accepted exactly {total} ({m.get('stackrelay_gateway_samples_accepted_total')})")
# The driver's kernel frames make the gateway want the kernel's symbols too: the sender uploads this
# machine's /proc/kallsyms for it, or an error table where its addresses are hidden (not root).
def kallsyms_visible():
    try:
        with open("/proc/kallsyms") as f:
            return any(not line.startswith("0000000000000000") for _, line in zip(range(100), f))
    except OSError:
        return False


with_symbols = 1 + kallsyms_visible()
lib.check(m.get("stackrelay_gateway_agent_wanted_symbols_total", 0) >= 9 and
          m.get("stackrelay_gateway_agent_symbol_tables_total") == 9 and
          out["symbol_tables_sent"] == with_symbols,
          f"h2c: the gateway asked for the 8 executables' and the kernel's symbols and got 9 tables, "
          f"{with_symbols} with symbols ({m.get('stackrelay_gateway_agent_symbol_tables_total')}, "
          f"{out['symbol_tables_sent']})")

# Replicas: the balancer sends the agent's connections to gateway A, which wants and gets every table; then to
# gateway B, which wants them too. Each table goes again once --symbol-reupload-after-ms has passed since its
# upload to A (gateway.symbol_reupload_after); before that setting, B's frames stayed unnamed until the agent
# restarted.
W2, N2 = 60, 40
total2 = sum(lib.expected_per_pid(W2, N2).values())
procs = """processors:
  symbolize: {wait_for_symbols: 2s}
"""
a = lib.Gateway(tmp, "replica-a", processors_yaml=procs)
b = lib.Gateway(tmp, "replica-b", processors_yaml=procs)
proxy = lib.Proxy(a.port)
proxy.start()
driver = None
try:
    driver = subprocess.Popen([lib.driver_path(), "--endpoint", f"http://127.0.0.1:{proxy.port}", "--windows", str(W2),
                               "--samples", str(N2), "--interval-ms", "100", "--max-connection-age-ms", "1",
                               "--symbol-reupload-after-ms", "300", "--flush-timeout-ms", "20000",
                               "--backoff-ms", "50,300", "--exec-path", lib.driver_path()],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while a.metrics().get("stackrelay_gateway_agent_symbol_tables_total", 0) < 9 and time.monotonic() < deadline \
            and driver.poll() is None:
        time.sleep(0.05)
    got_a = a.metrics().get("stackrelay_gateway_agent_symbol_tables_total", 0)
    # Past the 300 ms since the last upload: B lists a wanted ID once per 30 s (docs/agent-protocol.md).
    time.sleep(0.5)
    proxy.up = b.port
    sout, serr = driver.communicate(timeout=120)
    out2 = json.loads(sout.strip().splitlines()[-1]) if sout.strip() else None
    ma, mb = a.metrics(), b.metrics()
finally:
    if driver and driver.poll() is None:
        driver.kill()
    proxy.stop()
    a.stop()
    b.stop()
if not out2 or driver.returncode != 0:
    print(serr[-3000:])
accepted2 = ma.get("stackrelay_gateway_samples_accepted_total", 0) + mb.get("stackrelay_gateway_samples_accepted_total", 0)
lib.check(out2 and out2["accepted"] == total2 and accepted2 == total2,
          f"replicas: the two gateways accepted exactly the {total2} submitted ({accepted2})")
lib.check(got_a == 9, f"replicas: gateway A got the 9 tables before the switch ({got_a})")
lib.check(mb.get("stackrelay_gateway_agent_symbol_tables_total", 0) >= 9 and out2 and out2["symbol_tables_reuploaded"] >= 9,
          f"replicas: gateway B wanted the 9 tables and got them uploaded again "
          f"({mb.get('stackrelay_gateway_agent_symbol_tables_total', 0)} tables, "
          f"{out2 and out2['symbol_tables_reuploaded']} uploaded again)")
shutil.rmtree(tmp)
