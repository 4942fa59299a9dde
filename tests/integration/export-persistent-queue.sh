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

. "${SR_SOURCE_ROOT:?}/tests/integration/lib.sh"
sr_require_root_bpf
sr_require_tools curl
sr_require_workload alphabeta-fp

sr_workdir export-pq

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

sr_start_gateway
"$workload" 6 >/dev/null &
pids+=($!)
wl=$!
cat >"$work/agent.yaml" <<EOF
gateway: {endpoint: http://127.0.0.1:$port_agent}
profiling: {frequency: 99, report_interval: 1s}
EOF
"$agent" --config "$work/agent.yaml" --pid "$wl" --duration 3 >"$work/agent.log" 2>&1 ||
	{ echo "FAIL: agent"; cat "$work/agent.log"; exit 1; }

# Wait until everything the receiver accepted has reached the exporter (the symbolize stage may hold
# samples until the agent's symbol tables, which it uploads only when asked, have come) and is in the
# queue on disk, settled past the batch timeout.
queued=0
prev=
for _ in $(seq 100); do
	taken=$(sr_metric stackrelay_gateway_samples_accepted_total 'component="agent"')
	received=$(sr_metric stackrelay_gateway_samples_received_total 'component="otlp_http"')
	queued=$(sr_metric stackrelay_gateway_export_queue_samples 'exporter="otlp_http"')
	now="$taken/$received/$queued"
	if [ "${received%.*}" -gt 0 ] && [ "${queued%.*}" = "${received%.*}" ] && [ "${taken%.*}" = "${received%.*}" ]; then
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

sr_start_fake_pyroscope 60 --port "$port_pyroscope"

sr_start_gateway
accepted=0
for _ in $(seq 150); do
	accepted=$(sr_pyroscope_accepted)
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
sr_wait_exit "$gw" 100
wait "$gw" && echo "ok: gateway stopped cleanly" || { echo "FAIL: gateway exit status $?"; fail=1; }
[ $fail = 0 ] || sed 's/^/    /' "$work/gateway.log" | tail -30
exit $fail
