#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The agent profiles with exactly the capabilities the systemd unit and the
# Helm chart grant, and no more (least privilege: docs/install-kubernetes.md, "Agent privileges"):
#   1. as the systemd unit runs it: an unprivileged user (65534) holding the
#      unit's AmbientCapabilities= as ambient capabilities, the bounding set
#      cut to them, no_new_privs;
#   2. as the chart's DaemonSet runs it: uid 0 with every capability dropped
#      except the chart's agent.capabilities (bounding set), no_new_privs
#      (allowPrivilegeEscalation: false);
# each passing `--check` (which loads and attaches the BPF program) and taking
# real samples of a busy process with --duration/--output. A control run
# without CAP_BPF must fail the check, so the test can tell the difference.
# Needs root (to hand out capabilities) and BPF: suite 'root', else exit 77.
set -euo pipefail

src=${SR_SOURCE_ROOT:?}
agent=${SR_AGENT:?}
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root to set up the capability sets"; exit 77; }
command -v setpriv >/dev/null || { echo "SKIP: setpriv (util-linux) is not installed"; exit 77; }
[ -r /sys/kernel/btf/vmlinux ] || { echo "SKIP: no kernel BTF (/sys/kernel/btf/vmlinux)"; exit 77; }

# The unit's set, e.g. "CAP_BPF CAP_PERFMON ..." -> "bpf perfmon ...".
unit_caps=$(sed -n 's/^AmbientCapabilities=//p' "$src/packaging/systemd/stackrelay-agent.service.in" |
	tr 'A-Z' 'a-z' | sed 's/cap_//g')
chart_caps=$(sed -n '/^agent:/,/^[^ ]/p' "$src/charts/stackrelay/values.yaml" |
	sed -n '/^  capabilities:/,/^  [a-z]/p' | sed -n 's/^ *- *//p' | tr 'A-Z' 'a-z' | tr '\n' ' ')
[ -n "$unit_caps" ] && [ -n "$chart_caps" ] || { echo "FAIL: capability sets not found"; exit 1; }

# A sandbox may itself lack a capability (containers often drop
# SYS_RESOURCE). Hand out only what we have, and say what was left out:
# SYS_RESOURCE only matters on kernels before 5.11 (memlock-charged maps).
bnd=$(sed -n 's/^CapBnd:\t//p' /proc/self/status)
have() { # NAME -> is the capability in our bounding set?
	local n
	n=$(grep -iw "define CAP_$1" /usr/include/linux/capability.h 2>/dev/null | awk '{print $3}')
	[ -n "$n" ] && (( (0x$bnd >> n) & 1 ))
}
list() { # "a b c" minus what we lack -> "+a,+b,+c"
	local out="" c
	for c in $1; do
		if have "$c"; then
			out+="${out:+,}+$c"
		elif [ "$c" = sys_resource ]; then
			echo "note: CAP_SYS_RESOURCE is not in this sandbox's bounding set; testing without it" >&2
		else
			echo "SKIP: this sandbox lacks CAP_${c^^}, which the test must hand out"
			exit 77
		fi
	done
	echo "$out"
}
unit_set=$(list "$unit_caps")
chart_set=$(list "$chart_caps")

work=$(mktemp -d "${TMPDIR:-/tmp}/sr-lp.XXXXXX")
chmod 0777 "$work"
burner=
cleanup() {
	if [ -n "$burner" ]; then
		kill "$burner" 2>/dev/null || true
		wait "$burner" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT
# A busy process to sample, bounded in time.
timeout 60 sh -c 'while :; do :; done' &
burner=$!

fail=0
run() { # NAME then the setpriv options
	local name=$1
	shift
	if setpriv "$@" --no-new-privs "$agent" --check >"$work/$name.check" 2>&1; then
		echo "ok: $name: --check passes"
	else
		echo "FAIL: $name: --check:"; sed 's/^/    /' "$work/$name.check"
		fail=1
		return
	fi
	rm -f "$work/$name.out"
	if ! setpriv "$@" --no-new-privs "$agent" --duration 2 --output "$work/$name.out" --log-level info \
		>"$work/$name.log" 2>&1; then
		echo "FAIL: $name: profiling run:"; sed 's/^/    /' "$work/$name.log"
		fail=1
		return
	fi
	taken=$(sed -n 's/.*"profiling stopped".* samples_taken=\([0-9]*\).*/\1/p' "$work/$name.log")
	if [ -s "$work/$name.out" ] && [ "${taken:-0}" -gt 0 ]; then
		echo "ok: $name: profiled: samples_taken=$taken, $(stat -c %s "$work/$name.out") bytes of output"
	else
		echo "FAIL: $name: no samples (samples_taken=${taken:-?}):"; sed 's/^/    /' "$work/$name.log"
		fail=1
	fi
}

# 1. systemd: unprivileged user, ambient capabilities.
run systemd-unit --reuid=65534 --regid=65534 --clear-groups \
	--inh-caps="-all,$unit_set" --ambient-caps="-all,$unit_set" --bounding-set="-all,$unit_set"
# 2. Kubernetes: root, bounding set = capabilities.add after drop ALL.
run helm-chart --inh-caps=-all --bounding-set="-all,$chart_set"

# Control: the same as 1 without CAP_BPF must be refused by --check.
no_bpf=$(echo "$unit_set" | sed 's/+bpf,\{0,1\}//; s/,$//')
if setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps="-all,$no_bpf" --ambient-caps="-all,$no_bpf" \
	--bounding-set="-all,$no_bpf" --no-new-privs "$agent" --check >"$work/control" 2>&1; then
	echo "FAIL: control: --check passed without CAP_BPF"
	fail=1
elif grep -q 'FAIL.*CAP_BPF' "$work/control"; then
	echo "ok: control: without CAP_BPF, --check fails and names it"
else
	echo "FAIL: control: --check failed without naming CAP_BPF:"; sed 's/^/    /' "$work/control"
	fail=1
fi

[ $fail = 0 ] && echo "least privilege: the unit's and the chart's capability sets are enough"
exit $fail
