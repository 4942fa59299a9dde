#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The agent's sender (sender-driver) against the real stackrelay-gateway
over h2c, with the gateway's symbolizer asking for symbol tables: the
gateway's /metrics accounting equals what the sender submitted."""
import importlib.machinery
import os
import shutil

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
shutil.rmtree(tmp)
