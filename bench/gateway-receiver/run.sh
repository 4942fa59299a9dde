#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The gateway's agent receiver under load (bench/README.md, "Gateway receiver"):
#  1. ingest-bench: request decoding + batch building on one core (CPU time),
#     no network, for the agent protocol and then for OTLP profiles requests
#     of the same samples (v1.10 and v1.9) beside it;
#  2. h2load (Debian nghttp2-client) against the real stackrelay-gateway over
#     h2c, 100 connections, side by side with the same requests sent to a path
#     the gateway answers 404 without decoding (the cost of HTTP/2 alone), so
#     the ratio says how much of a request is the agent protocol's work.
# Usage: bench/gateway-receiver/run.sh BUILD_DIR [REQUESTS]
set -euo pipefail
build=${1:?usage: run.sh BUILD_DIR [REQUESTS]}
n=${2:-50000}
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
dir=$(mktemp -d /tmp/sr-bench-rx-XXXXXX)
gw_pid=""
sink_pid=""
cleanup() {
	[ -n "$gw_pid" ] && kill "$gw_pid" 2>/dev/null
	[ -n "$sink_pid" ] && kill "$sink_pid" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT

echo "== ingest-bench (one core, no network): agent protocol, then OTLP decoding"
"$build/bench/gateway-receiver/ingest-bench"

node -e '
const L = require(process.argv[1]);
const w = L.makeWorld(64);
require("fs").writeFileSync(process.argv[2], L.encodePushRequest({ samples: w.stacks.map((s, i) =>
  ({ stackId: s.id, pid: 1, tid: i, count: 4, processName: "bench", threadName: "t" })) }));
require("fs").writeFileSync(process.argv[3], L.encodePushRequest({ stacks: w.stacks, executables: w.exes }));
' "$src/tests/integration/gw-lib.js" "$dir/samples.bin" "$dir/defs.bin"

# The exporter's backend: answers 200 to every POST (shared with bench/gateway-throughput).
python3 "$src/bench/gateway-throughput/sink.py" "$dir/sink.port" --max-seconds 3600 &
sink_pid=$!
for _ in $(seq 50); do [ -s "$dir/sink.port" ] && break; sleep 0.1; done
cat >"$dir/gw.yaml" <<YAML
receivers:
  agent: {endpoint: 127.0.0.1:0}
exporters:
  otlp_http: {endpoint: "http://127.0.0.1:$(cat "$dir/sink.port")"}
service:
  pipelines:
    profiles: {receivers: [agent], exporters: [otlp_http]}
  telemetry: {metrics: {address: 127.0.0.1:0}}
YAML
"$build/gateway/stackrelay-gateway" --config "$dir/gw.yaml" 2>"$dir/gw.log" &
gw_pid=$!
for _ in $(seq 100); do grep -q 'msg=running' "$dir/gw.log" && break; sleep 0.1; done
addr=$(sed -n 's/.*listening for agents.* address=\([^ ]*\).*/\1/p' "$dir/gw.log")
url="http://$addr/stackrelay.v1.Ingest/Push"
ct='content-type: application/x-protobuf'
nghttp -d "$dir/defs.bin" -H "$ct" "$url" >/dev/null

echo "== h2load: $n requests of 64 samples (256 CPU samples), 100 connections, 4 streams each"
h2load -n "$n" -c 100 -m 4 -d "$dir/samples.bin" -H "$ct" "$url" | grep -E '^(finished|requests:|status codes:)'
echo "== h2load: $n requests answered 404 (the HTTP/2 cost alone)"
h2load -n "$n" -c 100 -m 4 -d "$dir/samples.bin" -H "$ct" "http://$addr/nothing" | grep -E '^(finished|requests:|status codes:)'
maddr=$(sed -n 's/.*telemetry server listening" address=\([^ ]*\).*/\1/p' "$dir/gw.log")
sleep 2
echo "== accounting of that gateway (CPU samples)"
python3 -c 'import sys,urllib.request
t=urllib.request.urlopen("http://"+sys.argv[1]+"/metrics",timeout=5).read().decode()
print("\n".join(l for l in t.splitlines() if l.startswith(("stackrelay_gateway_samples_accepted_total","stackrelay_gateway_samples_exported_total","stackrelay_gateway_samples_dropped_total"))))' "$maddr"
kill "$gw_pid"
wait "$gw_pid" || true
gw_pid=""

# Receiver + runtime alone: gw-harness with an exporter that only counts, requests of 1000 records.
node -e '
const L = require(process.argv[1]);
const w = L.makeWorld(512);
const smp = [];
for (let i = 0; i < 1000; i++)
  smp.push({ stackId: w.stacks[i % 512].id, pid: 1 + i % 20, tid: i % 100, count: 1 + i % 4,
    processName: "app" + (i % 20), threadName: "t" + (i % 8) });
require("fs").writeFileSync(process.argv[2], L.encodePushRequest({ stacks: w.stacks, executables: w.exes }));
require("fs").writeFileSync(process.argv[3], L.encodePushRequest({ samples: smp }));
' "$src/tests/integration/gw-lib.js" "$dir/defs1000.bin" "$dir/s1000.bin"
cat >"$dir/h.yaml" <<YAML
receivers:
  agent: {endpoint: 127.0.0.1:0}
exporters:
  test_count: {}
service:
  pipelines:
    profiles: {receivers: [agent], exporters: [test_count]}
  telemetry: {metrics: {address: 127.0.0.1:0}}
YAML
"$build/tests/integration/gw-harness" --config "$dir/h.yaml" 2>"$dir/h.log" &
gw_pid=$!
for _ in $(seq 100); do grep -q 'msg=running' "$dir/h.log" && break; sleep 0.1; done
addr=$(sed -n 's/.*listening for agents.* address=\([^ ]*\).*/\1/p' "$dir/h.log")
url="http://$addr/stackrelay.v1.Ingest/Push"
nghttp -d "$dir/defs1000.bin" -H "$ct" "$url" >/dev/null
m=$((n / 10))
echo "== h2load: $m requests of 1000 records (2500 CPU samples) into gw-harness (counting exporter), 10 connections"
h2load -n "$m" -c 10 -m 4 -d "$dir/s1000.bin" -H "$ct" "$url" | grep -E '^(finished|requests:|status codes:)'
