#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The symbolize processor end to end with the real agent and gateway: two
# C++ workloads built at test time run while the agent profiles them:
#   spin-debugdir  stripped on the node; its debug file is only in the
#                  gateway's debug_dirs (by build ID): named with file/line;
#   spin-upload    has a .symtab on the node, the gateway has nothing: it is
#                  wanted, the agent uploads its table, later batches (and,
#                  within wait_for_symbols, the first ones) are named.
# Names are read back by tests/fakes/fake_pyroscope.py (independent OTLP
# reader). Needs root and BPF: suite 'root', else exit 77.
set -euo pipefail

. "${SR_SOURCE_ROOT:?}/tests/integration/lib.sh"
sr_require_root_bpf
sr_require_tools g++ objcopy readelf curl

sr_workdir sym-e2e

# Workloads: frame pointers so the agent's user stacks are deep and reliable.
cxx=(g++ -O1 -g -fno-omit-frame-pointer)
"${cxx[@]}" -DSR_KIND=int -o "$work/spin-debugdir.full" "$src/tests/fixtures/sym/spin.cc"
"${cxx[@]}" -DSR_KIND=long -o "$work/spin-upload" "$src/tests/fixtures/sym/spin.cc"
objcopy --only-keep-debug "$work/spin-debugdir.full" "$work/spin-debugdir.debug"
objcopy --strip-all "$work/spin-debugdir.full" "$work/spin-debugdir"
bid=$(readelf -n "$work/spin-debugdir" | awk '/Build ID:/ { print $3 }')
mkdir -p "$work/debug/.build-id/${bid:0:2}"
cp "$work/spin-debugdir.debug" "$work/debug/.build-id/${bid:0:2}/${bid:2}.debug"

port_agent=$(free_port)
port_metrics=$(free_port)
sr_start_fake_pyroscope 120

cat >"$work/gateway.yaml" <<EOF
receivers:
  agent: {endpoint: 127.0.0.1:$port_agent}
processors:
  symbolize:
    cache_dir: $work/cache
    debug_dirs: [$work/debug]
    demangle: templates
    wait_for_symbols: 10s
  batch: {timeout: 1s}
exporters:
  otlp_http:
    endpoint: http://127.0.0.1:$port_pyroscope
    retry_on_failure: {initial_interval: 100ms}
service:
  pipelines:
    profiles: {receivers: [agent], processors: [symbolize, batch], exporters: [otlp_http]}
  telemetry: {metrics: {address: 127.0.0.1:$port_metrics}}
  shutdown_timeout: 15s
EOF
sr_start_gateway

"$work/spin-debugdir" 12 &
w1=$!
pids+=($w1)
"$work/spin-upload" 12 &
w2=$!
pids+=($w2)
sleep 0.2
cat >"$work/agent.yaml" <<EOF
gateway: {endpoint: http://127.0.0.1:$port_agent}
profiling: {frequency: 99, report_interval: 1s}
EOF
if ! "$agent" --config "$work/agent.yaml" --pid "$w1" --pid "$w2" --duration 8 >"$work/agent.log" 2>&1; then
	echo "FAIL: agent"; tail -20 "$work/agent.log"; exit 1
fi

uploads=$(sr_metric stackrelay_gateway_symbolize_uploads_total)
named=$(sr_metric stackrelay_gateway_symbolize_locations_total 'outcome="named"')
disk=$(sr_metric stackrelay_gateway_symbolize_disk_hits_total)

kill -TERM "$gw"
sr_wait_exit "$gw" 200
kill -0 "$gw" 2>/dev/null && bad "gateway did not stop within 20s"
wait "$gw" && ok "gateway stopped cleanly" || bad "gateway exit status $?"

[ "${uploads%.*}" -ge 1 ] && ok "the agent uploaded $uploads symbol table(s)" || bad "no symbol table uploaded"
[ "${disk%.*}" -ge 1 ] && ok "debug file found in debug_dirs ($disk disk hits)" || bad "debug_dirs not used"
[ "${named%.*}" -ge 2 ] && ok "$named locations named" || bad "locations named: $named"

stats=$(curl -s "http://127.0.0.1:$port_pyroscope/stats")
python3 - "$stats" <<'EOF' && ok "both workloads' functions arrive demangled" || bad "names in the exported profiles"
import json, sys
s = json.loads(sys.argv[1])
keys = s["by_key"]
def total(name):
    return sum(v for k, v in keys.items() if name in k.split("|")[1].split(";"))
a, b = total("sre::Spin<int>::run"), total("sre::Spin<long>::run")
print("  accepted_samples=%d spin-debugdir=%d spin-upload=%d errors=%s" % (s["accepted_samples"], a, b, s["errors"]))
if a == 0 or b == 0:
    for k in list(keys)[:10]:
        print("  key:", k[:200])
assert not s["errors"] and a > 0 and b > 0
EOF
if [ $fail -ne 0 ]; then
	echo "--- gateway log"; tail -30 "$work/gateway.log"
	echo "--- agent log"; tail -30 "$work/agent.log"
	echo "0 passed, 1 failed"
	exit 1
fi
echo "1 passed, 0 failed"
