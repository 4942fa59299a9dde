#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The persistent sending queue across a crash (docs/exporters.md, "Sending
# queue"): the real agent profiles a workload into the real gateway while
# Pyroscope is down, so every batch lands in the on-disk queue; the gateway
# is killed with SIGKILL; Pyroscope (tests/fakes/fake_pyroscope.py) comes up
# on the same port; a new gateway on the same storage directory replays the
# queue and delivers every queued sample, exactly once (nothing was
# delivered before the kill). Needs root and BPF: suite 'root', else 77.
set -euo pipefail

src=${SR_SOURCE_ROOT:?}
build=${SR_BUILD_ROOT:?}
agent=${SR_AGENT:?}
gateway=${SR_GATEWAY:?}
[ "$(id -u)" = 0 ] || { echo "SKIP: the agent needs root (BPF)"; exit 77; }
[ -r /sys/kernel/btf/vmlinux ] || { echo "SKIP: no kernel BTF"; exit 77; }
command -v curl >/dev/null || { echo "SKIP: curl is not installed"; exit 77; }
workload=$build/tests/workloads/alphabeta-fp
[ -x "$workload" ] || { echo "SKIP: $workload not built"; exit 77; }

work=$(mktemp -d "${TMPDIR:-/tmp}/sr-export-pq.XXXXXX")
pids=()
cleanup() {
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	[ -n "${SR_KEEP_WORK:-}" ] && echo "kept $work" || rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
port_agent=$(free_port)
port_metrics=$(free_port)
port_pyroscope=$(free_port) # nothing listens there until after the kill

cat >"$work/gateway.yaml" <<EOF
receivers:
  agent: {endpoint: 127.0.0.1:$port_agent}
processors:
  symbolize: {cache_dir: $work/cache}
  batch: {timeout: 500ms}
exporters:
  otlp_http:
    endpoint: http://127.0.0.1:$port_pyroscope
    retry_on_failure: {initial_interval: 200ms, max_interval: 1s, max_elapsed_time: 0s}
    sending_queue: {storage: $work/queue}
service:
  pipelines:
    profiles: {receivers: [agent], processors: [symbolize, batch], exporters: [otlp_http]}
  telemetry: {metrics: {address: 127.0.0.1:$port_metrics}}
  shutdown_timeout: 5s
EOF

start_gateway() {
	"$gateway" --config "$work/gateway.yaml" >>"$work/gateway.log" 2>&1 &
	gw=$!
	pids+=($gw)
	for _ in $(seq 100); do
		curl -sf "http://127.0.0.1:$port_metrics/readyz" >/dev/null 2>&1 && return 0
		kill -0 "$gw" 2>/dev/null || break
		sleep 0.1
	done
	echo "FAIL: gateway not ready"; cat "$work/gateway.log"; exit 1
}
metric() { # family label
	curl -s "http://127.0.0.1:$port_metrics/metrics" |
		awk -v f="$1" -v c="$2" '$1 ~ "^"f"{" && index($1, c) {s += $NF} END {print s + 0}'
}

start_gateway
"$workload" 6 >/dev/null &
pids+=($!)
wl=$!
cat >"$work/agent.yaml" <<EOF
gateway: {endpoint: http://127.0.0.1:$port_agent}
profiling: {frequency: 99, report_interval: 1s}
EOF
"$agent" --config "$work/agent.yaml" --pid "$wl" --duration 3 >"$work/agent.log" 2>&1 ||
	{ echo "FAIL: agent"; cat "$work/agent.log"; exit 1; }

# Wait until everything the exporter received is in the queue (on disk), settled past the batch timeout.
queued=0
prev=
for _ in $(seq 60); do
	received=$(metric stackrelay_gateway_samples_received_total 'component="otlp_http"')
	queued=$(metric stackrelay_gateway_export_queue_samples 'exporter="otlp_http"')
	now="$received/$queued"
	if [ "${received%.*}" -gt 0 ] && [ "${queued%.*}" = "${received%.*}" ]; then
		[ "$prev" = "$now" ] && break
		prev=$now
		sleep 1
		continue
	fi
	prev=
	sleep 0.2
done
files=$(find "$work/queue" -name '*.srq' | wc -l)
if [ "${queued%.*}" -le 0 ] || [ "${queued%.*}" != "${received%.*}" ] || [ "$files" -eq 0 ]; then
	echo "FAIL: expected every received sample queued on disk: received=$received queued=$queued files=$files"
	cat "$work/gateway.log"; exit 1
fi
queued=${queued%.*}
echo "ok: backend down: $queued samples in $files queue files"

kill -KILL "$gw"
wait "$gw" 2>/dev/null || true
echo "ok: gateway killed with SIGKILL"

python3 "$src/tests/fakes/fake_pyroscope.py" --port "$port_pyroscope" --port-file "$work/pyroscope.port" \
	--lifetime 60 >"$work/pyroscope.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [ -s "$work/pyroscope.port" ] && break; sleep 0.1; done
[ -s "$work/pyroscope.port" ] || { echo "FAIL: fake Pyroscope did not start"; cat "$work/pyroscope.log"; exit 1; }

start_gateway
accepted=0
for _ in $(seq 150); do
	accepted=$(curl -s "http://127.0.0.1:$port_pyroscope/stats" |
		python3 -c 'import json,sys; print(json.load(sys.stdin)["accepted_samples"])' 2>/dev/null || echo 0)
	[ "$accepted" -ge "$queued" ] && [ "$(find "$work/queue" -name '*.srq' | wc -l)" -eq 0 ] && break
	sleep 0.2
done
fail=0
grep -q 'msg="replaying the persistent queue"' "$work/gateway.log" && echo "ok: queue replayed at start" ||
	{ echo "FAIL: no replay logged"; fail=1; }
if [ "$accepted" = "$queued" ]; then
	echo "ok: after the restart Pyroscope accepted all $accepted queued samples, exactly once"
else
	echo "FAIL: queued $queued samples before the kill, Pyroscope accepted $accepted"; fail=1
fi
left=$(find "$work/queue" -name '*.srq' | wc -l)
[ "$left" -eq 0 ] && echo "ok: queue directory drained" || { echo "FAIL: $left queue files left"; fail=1; }
kill -TERM "$gw"
for _ in $(seq 100); do kill -0 "$gw" 2>/dev/null || break; sleep 0.1; done
wait "$gw" && echo "ok: gateway stopped cleanly" || { echo "FAIL: gateway exit status $?"; fail=1; }
[ $fail = 0 ] || sed 's/^/    /' "$work/gateway.log" | tail -30
exit $fail
