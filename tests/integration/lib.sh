# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
#
# Shared setup of the end-to-end shell tests (export-e2e.sh,
# export-persistent-queue.sh, sym-e2e.sh): sourced after `set -euo pipefail`:
#   . "${SR_SOURCE_ROOT:?}/tests/integration/lib.sh"
# Every wait is bounded; every process started is put in pids and killed by
# the EXIT trap, so a failing test leaves nothing running.

# What tests/integration/meson.build passes every test; set here for the scripts that source this file.
# shellcheck disable=SC2034
src=${SR_SOURCE_ROOT:?}
build=${SR_BUILD_ROOT:?}
agent=${SR_AGENT:?}
gateway=${SR_GATEWAY:?}

# The agent needs root and kernel BTF; skips (77) otherwise.
sr_require_root_bpf() {
	[ "$(id -u)" = 0 ] || { echo "SKIP: the agent needs root (BPF)"; exit 77; }
	[ -r /sys/kernel/btf/vmlinux ] || { echo "SKIP: no kernel BTF"; exit 77; }
}

# sr_require_workload NAME: sets workload to the test workload NAME (tests/workloads/); skips (77) if not built.
sr_require_workload() {
	workload=$build/tests/workloads/$1
	[ -x "$workload" ] || { echo "SKIP: $workload not built"; exit 77; }
}

# Skips (77) unless every named tool is on PATH.
sr_require_tools() {
	local t
	for t in "$@"; do
		command -v "$t" >/dev/null || { echo "SKIP: $t is not installed"; exit 77; }
	done
}

# sr_workdir NAME: a fresh $work (kept when SR_KEEP_WORK is set), pids=(), and
# the EXIT trap that stops every pid in pids, then removes $work.
sr_workdir() {
	work=$(mktemp -d "${TMPDIR:-/tmp}/sr-$1.XXXXXX")
	pids=()
	trap sr_cleanup EXIT
}
sr_cleanup() {
	local p
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	if [ -n "${SR_KEEP_WORK:-}" ]; then echo "kept $work"; else rm -rf "$work"; fi
}

# Checks print "ok: ..." or "FAIL: ..."; a FAIL sets fail=1 and the test goes on.
# shellcheck disable=SC2034
fail=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }

# A TCP port free on 127.0.0.1 now, below the kernel's ephemeral range (ports.py says why).
free_port() { python3 "$src/tests/integration/ports.py"; }

# sr_start_fake_pyroscope LIFETIME_S [ARGS...]: starts tests/fakes/fake_pyroscope.py
# (log in $work/pyroscope.log) and sets port_pyroscope once it listens (10 s at most).
sr_start_fake_pyroscope() {
	local lifetime=$1
	shift
	python3 "$src/tests/fakes/fake_pyroscope.py" "$@" --port-file "$work/pyroscope.port" \
		--lifetime "$lifetime" >"$work/pyroscope.log" 2>&1 &
	pids+=("$!")
	for _ in $(seq 100); do [ -s "$work/pyroscope.port" ] && break; sleep 0.1; done
	[ -s "$work/pyroscope.port" ] ||
		{ echo "FAIL: fake Pyroscope did not start"; cat "$work/pyroscope.log"; exit 1; }
	port_pyroscope=$(cat "$work/pyroscope.port")
}

# Samples the fake Pyroscope accepted so far (0 when it does not answer).
sr_pyroscope_accepted() {
	curl -s "http://127.0.0.1:$port_pyroscope/stats" |
		python3 -c 'import json,sys; print(json.load(sys.stdin)["accepted_samples"])' 2>/dev/null || echo 0
}

# shellcheck disable=SC2154 # port_metrics: set by the test before it starts the gateway
# Starts $gateway on $work/gateway.yaml (log appended to $work/gateway.log),
# sets gw, and waits for /readyz on $port_metrics (10 s at most, less if the
# gateway exits); exits the test when it is not ready.
sr_start_gateway() {
	"$gateway" --config "$work/gateway.yaml" >>"$work/gateway.log" 2>&1 &
	gw=$!
	pids+=("$gw")
	for _ in $(seq 100); do
		curl -sf "http://127.0.0.1:$port_metrics/readyz" >/dev/null 2>&1 && return 0
		kill -0 "$gw" 2>/dev/null || break
		sleep 0.1
	done
	echo "FAIL: gateway not ready"; cat "$work/gateway.log"; exit 1
}

# sr_wait_exit PID TENTHS: waits for PID to exit, TENTHS tenths of a second at most.
sr_wait_exit() {
	for _ in $(seq "$2"); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
}

# sr_metric FAMILY [FILTER]: the sum of the gateway's series of FAMILY (on
# $port_metrics) whose name and labels contain FILTER, e.g. 'component="otlp_http"'.
sr_metric() {
	curl -s "http://127.0.0.1:$port_metrics/metrics" |
		awk -v f="$1" -v c="${2:-}" '$1 ~ "^"f"({|$)" && index($1, c) {s += $NF} END {print s + 0}'
}
