#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Kernel and Go symbolization end to end with the real agent and gateway:
#   dd bs=1     a syscall-heavy workload: its kernel frames are named from
#               the kallsyms snapshot the agent uploads when the gateway lists
#               the kernel ID in wanted_symbols (offsets from _text under
#               the image's build-wide ID; the gateway has no other kernel
#               symbol source);
#   gospin      a Go program stripped with -ldflags='-s -w' (no .symtab, no
#               DWARF), present only on the node: named from the .gopclntab
#               functions the agent uploads.
# Names are read back by tests/fakes/fake_pyroscope.py (an independent OTLP
# reader) and compared with /proc/kallsyms and with the unstripped build's
# symbols. Needs root and BPF: suite 'root', else exit 77.
set -euo pipefail

src=${SR_SOURCE_ROOT:?}
agent=${SR_AGENT:?}
gateway=${SR_GATEWAY:?}
[ "$(id -u)" = 0 ] || { echo "SKIP: the agent needs root (BPF)"; exit 77; }
[ -r /sys/kernel/btf/vmlinux ] || { echo "SKIP: no kernel BTF"; exit 77; }
for t in go readelf nm curl dd; do
	command -v $t >/dev/null || { echo "SKIP: $t is not installed (go: Debian golang-go)"; exit 77; }
done
if ! awk 'NR <= 100 && $1 !~ /^0+$/ { found = 1 } END { exit !found }' /proc/kallsyms; then
	echo "SKIP: /proc/kallsyms addresses are hidden (kptr_restrict)"
	exit 77
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/sr-sym-kgo.XXXXXX")
pids=()
cleanup() {
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	[ -n "${SR_KEEP_WORK:-}" ] && echo "kept $work" || rm -rf "$work"
}
trap cleanup EXIT
fail=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }
free_port() { python3 "$src/tests/integration/ports.py"; }

# The Go workload, stripped; the unstripped build is the reference for its names.
(
	cd "$work"
	export GOCACHE="$work/gocache" GOPATH="$work/gopath" GOFLAGS= GO111MODULE=auto GOTOOLCHAIN=local
	cp "$src/tests/fixtures/sym/gospin.go" .
	go build -ldflags='-s -w' -o gospin gospin.go
	go build -o gospin.full gospin.go
)
if readelf -S "$work/gospin" | grep '\.symtab' >/dev/null; then
	echo "FAIL: go build -ldflags='-s -w' left a .symtab"
	exit 1
fi
nm "$work/gospin.full" | grep ' main\.srGoSpinInner$' >/dev/null ||
	{ echo "FAIL: reference build lacks main.srGoSpinInner"; exit 1; }

port_agent=$(free_port)
port_metrics=$(free_port)
python3 "$src/tests/fakes/fake_pyroscope.py" --port-file "$work/pyroscope.port" --lifetime 150 \
	>"$work/pyroscope.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [ -s "$work/pyroscope.port" ] && break; sleep 0.1; done
[ -s "$work/pyroscope.port" ] || { echo "FAIL: fake Pyroscope did not start"; exit 1; }
port_pyroscope=$(cat "$work/pyroscope.port")

# No debug_dirs, no debuginfod, an empty cache: agents' uploads are the only symbol source.
cat >"$work/gateway.yaml" <<EOF2
receivers:
  agent: {endpoint: 127.0.0.1:$port_agent}
processors:
  symbolize:
    cache_dir: $work/cache
    debug_dirs: []
    wait_for_symbols: 20s
  batch: {timeout: 1s}
exporters:
  otlp_http:
    endpoint: http://127.0.0.1:$port_pyroscope
    retry_on_failure: {initial_interval: 100ms}
service:
  pipelines:
    profiles: {receivers: [agent], processors: [symbolize, batch], exporters: [otlp_http]}
  telemetry: {metrics: {address: 127.0.0.1:$port_metrics}}
  shutdown_timeout: 25s
EOF2
"$gateway" --config "$work/gateway.yaml" >"$work/gateway.log" 2>&1 &
gw=$!
pids+=($gw)
for _ in $(seq 100); do
	curl -sf "http://127.0.0.1:$port_metrics/readyz" >/dev/null 2>&1 && break
	kill -0 "$gw" 2>/dev/null || break
	sleep 0.1
done
curl -sf "http://127.0.0.1:$port_metrics/readyz" >/dev/null ||
	{ echo "FAIL: gateway not ready"; cat "$work/gateway.log"; exit 1; }

# One-byte blocks: nearly all of dd's time is in read/write system calls.
dd if=/dev/zero of=/dev/null bs=1 count=2000000000 2>/dev/null &
w1=$!
pids+=($w1)
"$work/gospin" 14 &
w2=$!
pids+=($w2)
sleep 0.2
cat >"$work/agent.yaml" <<EOF2
gateway: {endpoint: http://127.0.0.1:$port_agent}
profiling: {frequency: 99, report_interval: 1s}
EOF2
if ! "$agent" --config "$work/agent.yaml" --pid "$w1" --pid "$w2" --duration 10 >"$work/agent.log" 2>&1; then
	echo "FAIL: agent"; tail -20 "$work/agent.log"; exit 1
fi
kill "$w1" "$w2" 2>/dev/null || true

metric() { # family [label filter]
	curl -s "http://127.0.0.1:$port_metrics/metrics" |
		awk -v f="$1" -v c="${2:-}" '$1 ~ "^"f"({|$)" && index($1, c) {s += $NF} END {print s + 0}'
}
uploads=$(metric stackrelay_gateway_symbolize_uploads_total)
rejected=$(metric stackrelay_gateway_symbolize_uploads_rejected_total)
named=$(metric stackrelay_gateway_symbolize_locations_total 'outcome="named"')
curl -s "http://127.0.0.1:$port_metrics/metrics" | grep '^stackrelay_gateway_symbolize' \
	>"$work/symbolize.metrics" || true

kill -TERM "$gw"
for _ in $(seq 300); do kill -0 "$gw" 2>/dev/null || break; sleep 0.1; done
kill -0 "$gw" 2>/dev/null && bad "gateway did not stop within 30s"
wait "$gw" && ok "gateway stopped cleanly" || bad "gateway exit status $?"

[ "${uploads%.*}" -ge 2 ] && ok "the agent uploaded $uploads symbol tables (kernel, Go)" ||
	bad "symbol tables uploaded: $uploads (want the kernel's and the Go program's)"
[ "${rejected%.*}" -eq 0 ] && ok "no upload rejected" || bad "$rejected uploads rejected"
[ "${named%.*}" -ge 5 ] && ok "$named locations named" || bad "locations named: $named"

grep ' [tTwW] ' /proc/kallsyms | awk '{ print $3 }' | sort -u >"$work/kallsyms.names"
nm "$work/gospin.full" | awk '$2 ~ /^[tT]$/ { print $3 }' | sort -u >"$work/go.names"
curl -s "http://127.0.0.1:$port_pyroscope/stats" >"$work/stats.json"
python3 - "$work/stats.json" "$work/kallsyms.names" "$work/go.names" <<'EOF2' && ok "kernel and Go frames named" ||
import json, sys
s = json.load(open(sys.argv[1]))
kallsyms = set(open(sys.argv[2]).read().split())
go_names = set(open(sys.argv[3]).read().split())
frames = {}
for key, v in s["by_key"].items():
    for name in key.split("|")[1].split(";"):
        frames[name] = frames.get(name, 0) + v
# Module symbols are uploaded as "name [module]"; the name alone is in kallsyms.
kernel = {f: v for f, v in frames.items() if f.split(" [")[0] in kallsyms and f not in go_names}
go = {f: v for f, v in frames.items() if f in go_names}
fallback = {f: v for f, v in frames.items() if f.startswith("[kernel]") or f.startswith("[unknown]")}
top = sorted(kernel.items(), key=lambda kv: -kv[1])[:8]
print("  accepted_samples=%d errors=%s" % (s["accepted_samples"], s["errors"]))
print("  kernel functions: %d distinct, top: %s" % (len(kernel), ", ".join("%s=%d" % kv for kv in top)))
print("  go functions: %s" % ", ".join(sorted(f for f in go if f.startswith("main."))))
print("  fallback-named frames: %s" % ", ".join("%s=%d" % kv for kv in list(fallback.items())[:5]))
# dd spends its time in read/write system calls: their entry path must be named.
syscall_path = {"do_syscall_64", "entry_SYSCALL_64_after_hwframe", "ksys_read", "ksys_write", "vfs_read",
                "vfs_write", "__x64_sys_read", "__x64_sys_write", "read_zero", "iov_iter_zero", "el0_svc",
                "invoke_syscall", "__arm64_sys_read", "__arm64_sys_write"} & kallsyms
hit = syscall_path & set(kernel)
print("  syscall path functions seen: %s" % ", ".join(sorted(hit)))
if not kernel or not go:
    for k in list(s["by_key"])[:10]:
        print("  key:", k[:300])
assert not s["errors"]
assert len(kernel) >= 3, "too few kernel functions named"
assert len(hit) >= 2, "read/write system call path not named"
# The leaf's caller may be skipped by frame-pointer unwinding (Go leaves without a frame): the leaf and main.main
# are always there.
assert "main.srGoSpinInner" in go and "main.main" in go, "Go functions not named"
# Kernel frames resolved from a table are never left as [kernel]+0x... once it arrived.
kfb = sum(v for f, v in fallback.items() if f.startswith("[kernel]"))
ktot = sum(kernel.values())
assert kfb * 10 <= ktot, "too many kernel frames unresolved: %d vs %d named" % (kfb, ktot)
EOF2
	bad "names in the exported profiles"
if [ $fail -ne 0 ]; then
	echo "--- symbolize metrics"; cat "$work/symbolize.metrics"
	echo "--- gateway log"; tail -30 "$work/gateway.log"
	echo "--- agent log"; tail -30 "$work/agent.log"
	echo "0 passed, 1 failed"
	exit 1
fi
echo "1 passed, 0 failed"
