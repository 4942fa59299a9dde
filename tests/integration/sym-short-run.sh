#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# A short run is fully symbolized (docs/agent-protocol.md, "Symbol probes"):
# the real agent profiles two workloads for 3 s (one window, sent at exit),
# against the real gateway whose only symbol source is what agents upload (no
# debug_dirs, no debuginfod, an empty cache). The window's response cannot
# want anything yet (the symbolize processor looks at the batch after the
# response), so the agent's flush probes the executables and the kernel it
# sent, uploads the tables the gateway then wants, and only then exits. The
# file exporter's OTLP/JSON lines are read back by Python's json: kernel
# frames carry names from /proc/kallsyms, the workload's frames its function
# names, and no batch waited out wait_for_symbols. Needs root and BPF: suite
# 'root', else exit 77.
set -euo pipefail

. "${SR_SOURCE_ROOT:?}/tests/integration/lib.sh"
sr_require_root_bpf
sr_require_tools curl python3 nm
sr_require_workload alphabeta-fp
alphabeta=$workload
sr_require_workload syscalls
syscalls=$workload
if ! awk 'NR <= 100 && $1 !~ /^0+$/ { found = 1 } END { exit !found }' /proc/kallsyms; then
	echo "SKIP: /proc/kallsyms addresses are hidden (kptr_restrict)"
	exit 77
fi
nm "$alphabeta" | grep -E ' T (alpha|beta)$' >/dev/null ||
	{ echo "FAIL: $alphabeta has no .symtab entries for alpha and beta"; exit 1; }
sr_workdir sym-short-run

port_agent=$(free_port)
port_metrics=$(free_port)
# wait_for_symbols is long on purpose: a batch that had to wait for it shows in
# batches_wait_timeouts_total, which must stay 0.
cat >"$work/gateway.yaml" <<EOF
receivers:
  agent: {endpoint: 127.0.0.1:$port_agent}
processors:
  symbolize:
    cache_dir: $work/cache
    debug_dirs: []
    debuginfod_urls: []
    wait_for_symbols: 30s
  batch: {timeout: 500ms}
exporters:
  file: {path: $work/profiles.jsonl}
service:
  pipelines:
    profiles: {receivers: [agent], processors: [symbolize, batch], exporters: [file]}
  telemetry: {metrics: {address: 127.0.0.1:$port_metrics}}
  shutdown_timeout: 10s
EOF
DEBUGINFOD_URLS= "$gateway" --config "$work/gateway.yaml" >"$work/gateway.log" 2>&1 &
gw=$!
pids+=("$gw")
for _ in $(seq 100); do
	curl -sf "http://127.0.0.1:$port_metrics/readyz" >/dev/null 2>&1 && break
	kill -0 "$gw" 2>/dev/null || break
	sleep 0.1
done
curl -sf "http://127.0.0.1:$port_metrics/readyz" >/dev/null ||
	{ echo "FAIL: gateway not ready"; cat "$work/gateway.log"; exit 1; }

metric() { # family [label filter]
	curl -s "http://127.0.0.1:$port_metrics/metrics" |
		awk -v f="$1" -v c="${2:-}" '$1 ~ "^"f"({|$)" && index($1, c) {s += $NF} END {print s + 0}'
}

"$alphabeta" 20 >"$work/alphabeta.pid" &
w1=$!
pids+=("$w1")
"$syscalls" 20 >"$work/syscalls.pid" &
w2=$!
pids+=("$w2")
sleep 0.2
# The default report interval (10 s) is longer than the run: everything goes in the window sent at exit.
if ! "$agent" --gateway "http://127.0.0.1:$port_agent" --pid "$w1" --pid "$w2" --frequency 99 --duration 3 \
	--log-level debug >"$work/agent.log" 2>&1; then
	echo "FAIL: agent"; tail -20 "$work/agent.log"; exit 1
fi
kill "$w1" "$w2" 2>/dev/null || true
ok "agent ran 3 s and exited 0"
grep -q 'symbol probe round' "$work/agent.log" && ok "the agent probed at exit" ||
	bad "no symbol probe round in the agent's log"

# The batch leaves the symbolize processor once its symbols are in; bounded well past wait_for_symbols.
for _ in $(seq 450); do
	[ "$(metric stackrelay_gateway_samples_exported_total)" != 0 ] &&
		[ "$(metric stackrelay_gateway_samples_held 'component="symbolize"')" = 0 ] && break
	sleep 0.1
done
curl -s "http://127.0.0.1:$port_metrics/metrics" | grep -E '^stackrelay_gateway_(symbolize|agent_symbol|samples)' \
	>"$work/gateway.metrics" || true
exported=$(metric stackrelay_gateway_samples_exported_total)
timeouts=$(metric stackrelay_gateway_symbolize_batches_wait_timeouts_total)
uploads=$(metric stackrelay_gateway_symbolize_uploads_total)
probes=$(metric stackrelay_gateway_agent_symbol_probes_total)
[ "${exported%.*}" -gt 0 ] && ok "$exported samples exported" || bad "nothing exported"
[ "${timeouts%.*}" -eq 0 ] && ok "no batch waited out wait_for_symbols" ||
	bad "$timeouts batches passed on after wait_for_symbols with symbols missing"
[ "${uploads%.*}" -ge 2 ] && ok "the agent uploaded $uploads symbol tables before exiting" ||
	bad "symbol tables uploaded: $uploads (want the kernel's and the workload's at least)"
[ "${probes%.*}" -ge 1 ] && ok "the gateway answered $probes probed IDs" || bad "no probe reached the gateway"

kill -TERM "$gw"
for _ in $(seq 150); do kill -0 "$gw" 2>/dev/null || break; sleep 0.1; done
wait "$gw" && ok "gateway stopped cleanly" || bad "gateway exit status $?"

grep ' [tTwW] ' /proc/kallsyms | awk '{ print $3 }' | sort -u >"$work/kallsyms.names"
python3 - "$work/profiles.jsonl" "$work/kallsyms.names" <<'EOF' && ok "kernel and user frames named" ||
import json, sys
kallsyms = set(open(sys.argv[2]).read().split())
frames = {}
total = 0
with open(sys.argv[1]) as f:
    for line in f:
        req = json.loads(line)
        d = req["dictionary"]
        st = d["stringTable"]
        fn_names = [st[fn.get("nameStrindex", 0)] for fn in d["functionTable"]]
        locs = d["locationTable"]
        stacks = d.get("stackTable", [])
        for rp in req["resourceProfiles"]:
            for sp in rp["scopeProfiles"]:
                for p in sp["profiles"]:
                    for smp in p["samples"]:
                        v = sum(int(x) for x in smp.get("values", [])) or 1
                        total += v
                        idx = stacks[smp.get("stackIndex", 0)].get("locationIndices", []) if stacks else \
                            smp.get("locationIndices", [])
                        for li in idx:
                            for ln in locs[li].get("lines", []):
                                name = fn_names[ln.get("functionIndex", 0)]
                                frames[name] = frames.get(name, 0) + v
kernel = {n: v for n, v in frames.items() if n.split(" [")[0] in kallsyms}
kfallback = {n: v for n, v in frames.items() if n.startswith("[kernel]")}
ufallback = {n: v for n, v in frames.items() if n.startswith("alphabeta-fp+") or n.startswith("syscalls+")}
top = sorted(kernel.items(), key=lambda kv: -kv[1])[:6]
print("  samples=%d frames=%d kernel functions=%d top: %s" % (total, len(frames), len(kernel),
      ", ".join("%s=%d" % kv for kv in top)))
print("  alpha=%d beta=%d main=%d" % (frames.get("alpha", 0), frames.get("beta", 0), frames.get("main", 0)))
print("  unnamed kernel frames: %d, unnamed workload frames: %s" % (sum(kfallback.values()), ufallback))
if not kernel or "alpha" not in frames:
    print("  some frames:", sorted(frames.items(), key=lambda kv: -kv[1])[:20])
assert total > 0
assert len(kernel) >= 3, "too few kernel functions named"
syscall_path = {"do_syscall_64", "entry_SYSCALL_64_after_hwframe", "ksys_read", "ksys_write", "vfs_read",
                "vfs_write", "__x64_sys_read", "__x64_sys_write", "read_zero", "iov_iter_zero", "el0_svc",
                "invoke_syscall", "__arm64_sys_read", "__arm64_sys_write"} & kallsyms
assert len(syscall_path & set(kernel)) >= 2, "read/write system call path not named"
assert frames.get("alpha", 0) > 0 and frames.get("beta", 0) > 0, "the workload's functions not named"
assert not ufallback, "workload frames left as <binary>+0x...: %s" % ufallback
assert sum(kfallback.values()) * 10 <= sum(kernel.values()), "too many kernel frames unnamed"
EOF
	bad "names in the exported profiles"
if [ "$fail" -ne 0 ]; then
	echo "--- gateway metrics"; cat "$work/gateway.metrics"
	echo "--- gateway log"; tail -30 "$work/gateway.log"
	echo "--- agent log"; grep -v 'level=debug component=procs' "$work/agent.log" | tail -30
	echo "0 passed, 1 failed"
	exit 1
fi
echo "1 passed, 0 failed"
