#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Checks packaging/systemd/*.service.in:
#   - `systemd-analyze verify` accepts both units (syntax, known settings,
#     executables present), filled in with the built binaries;
#   - the agent's capability set is exactly the least-privilege set of docs/install-kubernetes.md,
#     the same in the unit's bounding and ambient sets and in the Helm
#     chart's agent.capabilities; the gateway has no capabilities;
#   - the hardening the docs promise is there (ProtectSystem=strict,
#     MemoryMax, NoNewPrivileges, config under /etc/stackrelay);
#   - each service runs as its own user, declared in the sysusers.d file,
#     and the gateway's cache and queue directories are 0700;
#   - prints `systemd-analyze security --offline` exposure scores.
set -euo pipefail

src=${SR_SOURCE_ROOT:?}
command -v systemd-analyze >/dev/null || { echo "SKIP: systemd-analyze is not installed"; exit 77; }

work=$(mktemp -d "${TMPDIR:-/tmp}/sr-units.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin" "$work/etc/stackrelay" "$work/units"
ln -s "${SR_AGENT:?}" "$work/bin/stackrelay-agent"
ln -s "${SR_GATEWAY:?}" "$work/bin/stackrelay-gateway"
cp "$src"/packaging/config/*.yaml "$work/etc/stackrelay/"
for unit in stackrelay-agent.service stackrelay-gateway.service; do
	sed -e "s|@bindir@|$work/bin|g" -e "s|@sysconfdir@|$work/etc|g" -e "s|@docdir@|/usr/share/doc/stackrelay|g" \
		"$src/packaging/systemd/$unit.in" >"$work/units/$unit"
	if grep -n '@[a-z]*@' "$work/units/$unit"; then
		echo "FAIL: $unit: placeholders meson does not fill in"
		exit 1
	fi
done

fail=0
# verify prints problems and may still exit 0 for some; both count.
if ! systemd-analyze verify --man=no "$work/units/"*.service >"$work/verify.out" 2>&1 || [ -s "$work/verify.out" ]; then
	# Only complaints about our units matter, not about unrelated host units.
	if grep -E 'stackrelay-(agent|gateway)\.service' "$work/verify.out"; then
		echo "FAIL: systemd-analyze verify"
		fail=1
	fi
fi
[ $fail = 0 ] && echo "ok: systemd-analyze verify: both units"

# value KEY UNIT: the setting's value (last assignment wins, as in systemd)
value() { sed -n "s/^$1=//p" "$work/units/$2" | tail -n 1; }
design="BPF CHECKPOINT_RESTORE DAC_READ_SEARCH PERFMON SYSLOG SYS_PTRACE SYS_RESOURCE"
norm() { tr ' ' '\n' | sed '/^$/d; s/^CAP_//' | sort | tr '\n' ' ' | sed 's/ $//'; }

for key in CapabilityBoundingSet AmbientCapabilities; do
	got=$(value "$key" stackrelay-agent.service | norm)
	if [ "$got" = "$design" ]; then
		echo "ok: agent $key = the documented least-privilege set"
	else
		echo "FAIL: agent $key is \"$got\", the docs say \"$design\""
		fail=1
	fi
done
chart=$(sed -n '/^agent:/,/^[^ ]/p' "$src/charts/stackrelay/values.yaml" |
	sed -n '/^  capabilities:/,/^  [a-z]/p' | sed -n 's/^ *- *//p' | norm)
if [ "$chart" = "$design" ]; then
	echo "ok: chart agent.capabilities = the documented least-privilege set"
else
	echo "FAIL: chart agent.capabilities is \"$chart\", the docs say \"$design\""
	fail=1
fi
for key in CapabilityBoundingSet AmbientCapabilities; do
	if [ -n "$(value "$key" stackrelay-gateway.service)" ]; then
		echo "FAIL: gateway $key should be empty"
		fail=1
	fi
done

expect() { # UNIT KEY VALUE
	if [ "$(value "$2" "$1")" = "$3" ]; then
		echo "ok: $1: $2=$3"
	else
		echo "FAIL: $1: $2 is \"$(value "$2" "$1")\", expected \"$3\""
		fail=1
	fi
}
for unit in stackrelay-agent.service stackrelay-gateway.service; do
	expect "$unit" ProtectSystem strict
	expect "$unit" NoNewPrivileges yes
	expect "$unit" PrivateTmp yes
	name=${unit%.service}
	expect "$unit" User "$name"
	expect "$unit" Group "$name"
	if grep -qE "^u $name " "$src/packaging/systemd/stackrelay.sysusers.conf"; then
		echo "ok: $name is declared in stackrelay.sysusers.conf"
	else
		echo "FAIL: stackrelay.sysusers.conf does not declare the user $name"
		fail=1
	fi
	expect "$unit" ExecStart "$work/bin/$name --config $work/etc/stackrelay/${name#stackrelay-}.yaml"
done
# systemd-sysusers itself reads the file into a scratch root: it parses and
# creates both users.
if command -v systemd-sysusers >/dev/null; then
	mkdir -p "$work/root/etc"
	if systemd-sysusers --root="$work/root" "$src/packaging/systemd/stackrelay.sysusers.conf" >"$work/sysusers.out" 2>&1 &&
		[ "$(cut -d: -f1 "$work/root/etc/passwd" | grep -c '^stackrelay-\(agent\|gateway\)$')" = 2 ]; then
		echo "ok: systemd-sysusers creates stackrelay-agent and stackrelay-gateway"
	else
		echo "FAIL: systemd-sysusers on stackrelay.sysusers.conf:"
		cat "$work/sysusers.out" "$work/root/etc/passwd" 2>/dev/null
		fail=1
	fi
fi
expect stackrelay-gateway.service MemoryMax 2G
expect stackrelay-agent.service MemoryMax 512M
expect stackrelay-gateway.service ProtectHome yes
expect stackrelay-agent.service ProtectHome read-only
expect stackrelay-gateway.service CacheDirectoryMode 0700
expect stackrelay-gateway.service StateDirectoryMode 0700
expect stackrelay-gateway.service UMask 0077
expect stackrelay-agent.service UMask 0077

# Exposure score (0 = locked down, 10 = unprotected): informational.
for unit in stackrelay-agent.service stackrelay-gateway.service; do
	score=$(systemd-analyze security --offline=yes --no-pager "$work/units/$unit" 2>/dev/null |
		sed -n 's/.*Overall exposure level for .*: \([0-9.]*\).*/\1/p' || true)
	[ -n "$score" ] && echo "info: systemd-analyze security $unit: exposure $score"
done

[ $fail = 0 ] && echo "systemd units: all checks passed"
exit $fail
