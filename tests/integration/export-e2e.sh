#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Every exporter of docs/exporters.md at once, end to end, each output read
# by an independent reader: the real agent profiles a workload (alpha ~70%,
# beta ~30%), the real gateway symbolizes, batches and exports it to
#   otlp_http  -> tests/fakes/fake_pyroscope.py (stdlib Python, own protobuf reader)
#   file       -> OTLP/JSON lines, parsed by Python's json
#   pprof      -> gzipped pprof, parsed by the npm package pprof-format
#   flamegraph -> SVG, rendered by headless Chromium (DOM dump + screenshot)
# and every reader must find the workload's function names. The fake's
# accepted sample count must equal the exporter's exported count (exactly
# once). Needs root and BPF: suite 'root', else exit 77.
set -euo pipefail

. "${SR_SOURCE_ROOT:?}/tests/integration/lib.sh"
sr_require_root_bpf
sr_require_tools curl
sr_require_workload alphabeta-fp

sr_workdir export-e2e

port_agent=$(free_port)
port_metrics=$(free_port)

sr_start_fake_pyroscope 120

cat >"$work/gateway.yaml" <<EOF
receivers:
  agent: {endpoint: 127.0.0.1:$port_agent}
processors:
  memory_limiter: {limit_mib: 2048, spike_limit_mib: 256}
  symbolize: {cache_dir: $work/cache}
  batch: {timeout: 1s}
exporters:
  otlp_http:
    endpoint: http://127.0.0.1:$port_pyroscope
    retry_on_failure: {initial_interval: 100ms}
  file: {path: $work/profiles.jsonl}
  pprof: {directory: $work/pprof}
  flamegraph: {path: $work/flame.svg, title: "export-e2e"}
service:
  pipelines:
    profiles:
      receivers: [agent]
      processors: [memory_limiter, symbolize, batch]
      exporters: [otlp_http, file, pprof, flamegraph]
  telemetry: {metrics: {address: 127.0.0.1:$port_metrics}}
  shutdown_timeout: 10s
EOF
sr_start_gateway

"$workload" 9 >"$work/workload.out" &
wl=$!
pids+=($wl)
sleep 0.2
# Reports every second: the first makes the gateway ask for the workload's
# symbols, which the agent uploads; later windows arrive symbolized.
cat >"$work/agent.yaml" <<EOF
gateway: {endpoint: http://127.0.0.1:$port_agent}
profiling: {frequency: 99, report_interval: 1s}
EOF
if ! "$agent" --config "$work/agent.yaml" --pid "$wl" --duration 6 >"$work/agent.log" 2>&1; then
	echo "FAIL: agent"; cat "$work/agent.log"; exit 1
fi

# Everything the otlp_http exporter received is delivered: its exported count
# reaches its received count, and equals what the fake accepted (bounded wait).
# Settled means: equal twice in a row, more than a batch timeout (1s) apart.
accepted=0
settled=
for _ in $(seq 100); do
	received=$(sr_metric stackrelay_gateway_samples_received_total 'component="otlp_http"')
	exported=$(sr_metric stackrelay_gateway_samples_exported_total 'component="otlp_http"')
	accepted=$(sr_pyroscope_accepted)
	now="$received/$exported/$accepted"
	if [ "${received%.*}" -gt 0 ] && [ "${exported%.*}" = "${received%.*}" ] && [ "$accepted" = "${exported%.*}" ]; then
		[ "$settled" = "$now" ] && break
		settled=$now
		sleep 1.5
		continue
	fi
	settled=
	sleep 0.2
done
if [ "${received%.*}" -gt 0 ] && [ "${exported%.*}" = "${received%.*}" ] && [ "$accepted" = "${exported%.*}" ]; then
	ok "exactly once: otlp_http received=$received exported=$exported, fake accepted=$accepted"
else
	bad "otlp_http received=$received exported=$exported but fake accepted=$accepted"
fi

# Graceful stop (bounded by shutdown_timeout).
kill -TERM "$gw"
sr_wait_exit "$gw" 150
if kill -0 "$gw" 2>/dev/null; then bad "gateway did not stop within 15s"; fi
wait "$gw" && ok "gateway stopped cleanly" || bad "gateway exit status $?"

stats=$(curl -s "http://127.0.0.1:$port_pyroscope/stats")
# 1. Pyroscope (fake): the workload's functions, each sample once.
python3 - "$stats" <<'EOF' && ok "fake Pyroscope: alpha and beta received, alpha > beta" || bad "fake Pyroscope content"
import json, sys
s = json.loads(sys.argv[1])
keys = s["by_key"]
alpha = sum(v for k, v in keys.items() if "alpha" in k.split("|")[1].split(";"))
beta = sum(v for k, v in keys.items() if "beta" in k.split("|")[1].split(";"))
print("  accepted_samples=%d requests=%d alpha=%d beta=%d errors=%s" % (s["accepted_samples"], s["requests"], alpha, beta, s["errors"]))
assert s["accepted_samples"] > 0 and not s["errors"]
assert alpha > 0 and beta > 0 and alpha > beta, (alpha, beta)
EOF

# 2. file: OTLP/JSON lines.
python3 - "$work/profiles.jsonl" <<'EOF' && ok "file: OTLP/JSON lines parse and name alpha and beta" || bad "file exporter output"
import json, sys
names = set()
total = 0
with open(sys.argv[1]) as f:
    for line in f:
        req = json.loads(line)
        st = req["dictionary"]["stringTable"]
        assert st[0] == ""
        for fn in req["dictionary"]["functionTable"][1:]:
            names.add(st[fn.get("nameStrindex", 0)])
        for rp in req["resourceProfiles"]:
            for sp in rp["scopeProfiles"]:
                for p in sp["profiles"]:
                    assert st[p["sampleType"]["typeStrindex"]] == "samples"
                    total += sum(int(v) for smp in p["samples"] for v in smp.get("values", []))
print("  samples=%d functions=%d" % (total, len(names)))
assert "alpha" in names and "beta" in names
EOF

# 3. pprof: read by pprof-format (npm), an independent implementation of profile.proto.
if [ -d "$src/tests/node_modules/pprof-format" ]; then
	NODE_PATH="$src/tests/node_modules" node - "$work/pprof" <<'EOF' && ok "pprof: pprof-format reads every file; alpha and beta present" || bad "pprof exporter output"
const fs = require('fs'), path = require('path'), zlib = require('zlib');
const { Profile } = require('pprof-format');
const dir = process.argv[2];
const files = fs.readdirSync(dir).filter((f) => f.endsWith('.pb.gz'));
if (!files.length) throw new Error('no pprof files');
const names = new Set();
let samples = 0;
for (const f of files) {
  const p = Profile.decode(zlib.gunzipSync(fs.readFileSync(path.join(dir, f))));
  const st = p.stringTable.strings;
  if (st[p.sampleType[0].type] !== 'samples' || st[p.periodType.type] !== 'cpu') throw new Error('types');
  for (const fn of p.function) names.add(st[fn.name]);
  for (const s of p.sample) samples += Number(s.value[0]);
}
console.log(`  files=${files.length} samples=${samples} functions=${names.size}`);
if (!names.has('alpha') || !names.has('beta')) throw new Error('alpha/beta missing: ' + [...names].join(','));
EOF
else
	bad "tests/node_modules/pprof-format missing: run scripts/install-deps"
fi

# 3b. pprof: and by `go tool pprof` itself when Go is installed (scripts/install-deps installs golang-go).
if command -v go >/dev/null; then
	# Every file, merged (pprof reads several): one file may hold a single batch, with alpha alone.
	if top=$(HOME=$work GOCACHE=$work/gocache GOFLAGS=-mod=mod timeout 60 go tool pprof -top -sample_index=cpu \
		"$work"/pprof/*.pb.gz 2>&1); then
		if echo "$top" | grep -qE ' alpha$' && echo "$top" | grep -qE ' beta$'; then
			ok "pprof: go tool pprof -top of every file lists alpha and beta"
			echo "$top" | grep -E ' (alpha|beta)$' | sed 's/^/  /'
		else
			bad "go tool pprof read the files, but alpha or beta is missing"; echo "$top" | head -12
		fi
	else
		bad "go tool pprof could not read the files"; echo "$top" | head -10
	fi
fi

# 4. flamegraph: rendered by a real browser; the DOM after its script ran must show the names.
chromium_bin=$(command -v chromium || command -v chromium-browser || true)
if [ -n "$chromium_bin" ]; then
	home=$work/chromium-home
	mkdir -p "$home"
	flags=(--headless --no-sandbox --disable-gpu --disable-dev-shm-usage --user-data-dir="$home/profile")
	HOME=$home timeout 60 "$chromium_bin" "${flags[@]}" --dump-dom "file://$work/flame.svg" \
		>"$work/flame.dom" 2>"$work/chromium.log" || true
	HOME=$home timeout 60 "$chromium_bin" "${flags[@]}" --window-size=1200,800 \
		--screenshot="$work/flame.png" "file://$work/flame.svg" >>"$work/chromium.log" 2>&1 || true
	if grep -q '>alpha<' "$work/flame.dom" && grep -q '>beta<' "$work/flame.dom" &&
		grep -q 'data-n="alpha"' "$work/flame.dom"; then
		ok "flamegraph: Chromium rendered it; labels alpha and beta drawn by its script"
	else
		bad "flamegraph: names not in the rendered DOM"; head -c 1500 "$work/flame.dom"; tail -5 "$work/chromium.log"
	fi
	if [ -s "$work/flame.png" ] && [ "$(stat -c %s "$work/flame.png")" -gt 5000 ]; then
		ok "flamegraph: screenshot taken ($(stat -c %s "$work/flame.png") bytes)"
		[ -n "${SR_KEEP_ARTIFACTS:-}" ] && cp "$work/flame.png" "$work/flame.svg" "$SR_KEEP_ARTIFACTS/"
	else
		bad "flamegraph: no screenshot"
	fi
else
	echo "note: chromium not installed (scripts/install-deps); SVG checked as text only"
	grep -q 'data-n="alpha"' "$work/flame.svg" && ok "flamegraph: alpha in the SVG" || bad "flamegraph: alpha missing"
fi

if grep -q 'level=error' "$work/gateway.log"; then
	bad "gateway logged errors:"; grep 'level=error' "$work/gateway.log" | head
fi
[ $fail = 0 ] || { echo "gateway log:"; sed 's/^/    /' "$work/gateway.log" | tail -40; }
exit $fail
