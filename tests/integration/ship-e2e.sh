#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The bare-metal install, end to end, as docs/install-bare-metal.md sets it
# up: the shipped example configs (packaging/config/*.yaml) with only ports
# and directories changed, each program with the privileges its systemd unit
# gives it,
#   gateway: an unprivileged user (65534), no capabilities, no_new_privs;
#   agent:   an unprivileged user holding the unit's AmbientCapabilities=;
# and Pyroscope faked by tests/fakes/fake_pyroscope.py (an independent
# implementation of its OTLP handler). A busy process is profiled for a few
# seconds; its samples must reach the fake Pyroscope, the gateway must
# report them exported, and SIGTERM must stop the gateway cleanly.
# Needs root and BPF: suite 'root', else exit 77.
set -euo pipefail

src=${SR_SOURCE_ROOT:?}
agent=${SR_AGENT:?}
gateway=${SR_GATEWAY:?}
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root to hand out the agent's capabilities"; exit 77; }
command -v setpriv >/dev/null || { echo "SKIP: setpriv (util-linux) is not installed"; exit 77; }
[ -r /sys/kernel/btf/vmlinux ] || { echo "SKIP: no kernel BTF (/sys/kernel/btf/vmlinux)"; exit 77; }
command -v curl >/dev/null || { echo "SKIP: curl is not installed"; exit 77; }

work=$(mktemp -d "${TMPDIR:-/tmp}/sr-e2e.XXXXXX")
chmod 0755 "$work"
pids=()
cleanup() {
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 "$src/tests/integration/ports.py"; }
port_agent=$(free_port)
port_metrics=$(free_port)
port_agent_metrics=$(free_port)

# Fake Pyroscope, bounded lifetime.
python3 "$src/tests/fakes/fake_pyroscope.py" --port-file "$work/pyroscope.port" --lifetime 90 \
	>"$work/pyroscope.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [ -s "$work/pyroscope.port" ] && break; sleep 0.1; done
[ -s "$work/pyroscope.port" ] || { echo "FAIL: fake Pyroscope did not start"; cat "$work/pyroscope.log"; exit 1; }
port_pyroscope=$(cat "$work/pyroscope.port")

# The shipped configs, with this test's ports and directories.
install -d -o 65534 -g 65534 "$work/cache" "$work/queue"
sed -e "s|endpoint: 127.0.0.1:7480|endpoint: 127.0.0.1:$port_agent|" \
	-e "s|endpoint: http://127.0.0.1:4040|endpoint: http://127.0.0.1:$port_pyroscope|" \
	-e "s|cache_dir: /var/cache/stackrelay|cache_dir: $work/cache|" \
	-e "s|storage: /var/lib/stackrelay/queue|storage: $work/queue|" \
	-e "s|address: 127.0.0.1:8888|address: 127.0.0.1:$port_metrics|" \
	-e "s|timeout: 10s|timeout: 1s|" \
	"$src/packaging/config/gateway.yaml" >"$work/gateway.yaml"
sed -e "s|endpoint: http://127.0.0.1:7480|endpoint: http://127.0.0.1:$port_agent|" \
	-e "s|address: 127.0.0.1:8889|address: 127.0.0.1:$port_agent_metrics|" \
	-e "s|report_interval: 10s|report_interval: 1s|" \
	"$src/packaging/config/agent.yaml" >"$work/agent.yaml"
for f in gateway agent; do
	if cmp -s "$work/$f.yaml" "$src/packaging/config/$f.yaml"; then
		echo "FAIL: packaging/config/$f.yaml changed shape: the test's substitutions no longer apply"
		exit 1
	fi
done

# Gateway: unprivileged, no capabilities.
setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all --bounding-set=-all --no-new-privs \
	"$gateway" --config "$work/gateway.yaml" >"$work/gateway.log" 2>&1 &
gw=$!
pids+=($gw)
ready=0
for _ in $(seq 100); do
	if curl -sf "http://127.0.0.1:$port_metrics/readyz" >/dev/null 2>&1; then ready=1; break; fi
	kill -0 "$gw" 2>/dev/null || break
	sleep 0.1
done
if [ $ready = 0 ]; then
	echo "FAIL: the gateway with packaging/config/gateway.yaml did not become ready:"
	sed 's/^/    /' "$work/gateway.log"
	exit 1
fi
echo "ok: gateway ready as uid 65534 without capabilities"

# Agent: the unit's capabilities, minus any this sandbox itself lacks.
caps=$(sed -n 's/^AmbientCapabilities=//p' "$src/packaging/systemd/stackrelay-agent.service.in" |
	tr 'A-Z' 'a-z' | sed 's/cap_//g')
bnd=$(sed -n 's/^CapBnd:\t//p' /proc/self/status)
set_=""
for c in $caps; do
	n=$(grep -iw "define CAP_$c" /usr/include/linux/capability.h 2>/dev/null | awk '{print $3}')
	if [ -n "$n" ] && (( (0x$bnd >> n) & 1 )); then
		set_+="${set_:+,}+$c"
	fi
done
timeout 30 sh -c 'while :; do :; done' &
pids+=($!)
if ! setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps="-all,$set_" --ambient-caps="-all,$set_" \
	--bounding-set="-all,$set_" --no-new-privs "$agent" --config "$work/agent.yaml" --duration 4 \
	>"$work/agent.log" 2>&1; then
	echo "FAIL: the agent with packaging/config/agent.yaml:"
	sed 's/^/    /' "$work/agent.log"
	exit 1
fi
taken=$(sed -n 's/.*"profiling stopped".* samples_taken=\([0-9]*\).*/\1/p' "$work/agent.log")
sent=$(sed -n 's/.*"profiling stopped".* samples_exported=\([0-9]*\).*/\1/p' "$work/agent.log")
echo "ok: agent ran as uid 65534 with $set_: samples_taken=${taken:-?} samples_exported=${sent:-?}"

# Every sample the agent handed over reaches Pyroscope, once: within the
# batch timeout (1s here) plus symbolize's wait_for_symbols (10s), so the
# wait is bounded at 30 s.
accepted=0
for _ in $(seq 300); do
	accepted=$(curl -s "http://127.0.0.1:$port_pyroscope/stats" |
		python3 -c 'import json,sys; print(int(json.load(sys.stdin)["accepted_samples"]))' 2>/dev/null || echo 0)
	[ "$accepted" -ge "${sent:-1}" ] && break
	sleep 0.1
done
exported=$(curl -s "http://127.0.0.1:$port_metrics/metrics" |
	awk '/^stackrelay_gateway_samples_exported_total/ {s += $NF} END {printf "%d", s}')
fail=0
if [ -n "$sent" ] && [ "$sent" -gt 0 ] && [ "$accepted" = "$sent" ] && [ "$exported" = "$sent" ]; then
	echo "ok: all $sent samples arrived: Pyroscope accepted $accepted, gateway samples_exported_total=$exported"
else
	echo "FAIL: agent sent ${sent:-?} samples; Pyroscope accepted $accepted, gateway exported $exported"
	echo "  gateway log:"; sed 's/^/    /' "$work/gateway.log"
	echo "  fake Pyroscope:"; curl -s "http://127.0.0.1:$port_pyroscope/stats" | head -c 2000; echo
	fail=1
fi

# Bounded: service.shutdown_timeout (30s in the example) plus a margin, as
# the unit's TimeoutStopSec= (45s) would.
kill -TERM "$gw"
rc=
for _ in $(seq 450); do
	if ! kill -0 "$gw" 2>/dev/null; then
		rc=0
		wait "$gw" || rc=$?
		break
	fi
	sleep 0.1
done
if [ -z "$rc" ]; then
	echo "FAIL: gateway still running 45 s after SIGTERM (systemd would SIGKILL it); its log ends:"
	tail -n 5 "$work/gateway.log" | sed 's/^/    /'
	kill -KILL "$gw" 2>/dev/null || true
	rc=killed
fi
if [ "$rc" = 0 ]; then
	echo "ok: gateway stopped on SIGTERM with status 0"
elif [ "$rc" != killed ]; then
	echo "FAIL: gateway exit status $rc after SIGTERM"
	fail=1
else
	fail=1
fi
[ $fail = 0 ] && echo "end to end: shipped configs and unit privileges deliver profiles"
exit $fail
