#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# `meson install` (what scripts/build and the container image use) into a
# scratch DESTDIR: binaries, example configs, systemd units, the sysusers
# entry and the docs land where docs/install-bare-metal.md says, the units
# point at the installed binaries and configs, and nothing else is installed.
set -euo pipefail

build=${SR_BUILD_ROOT:?}
work=$(mktemp -d "${TMPDIR:-/tmp}/sr-install.XXXXXX")
trap 'rm -rf "$work"' EXIT

if ! DESTDIR=$work meson install -C "$build" --no-rebuild --quiet >"$work.log" 2>&1; then
	echo "FAIL: meson install:"; cat "$work.log"; rm -f "$work.log"
	exit 1
fi
rm -f "$work.log"

# The configured directories of this build (prefix /usr/local by default,
# /usr with scripts/build).
opt() { meson introspect "$build" --buildoptions |
	python3 -c 'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == sys.argv[1]))' "$1"; }
prefix=$(opt prefix)
bindir=$(cd / && realpath -m "$prefix/$(opt bindir)")
sysconfdir=$(cd / && realpath -m "$prefix/$(opt sysconfdir)")
datadir=$(cd / && realpath -m "$prefix/$(opt datadir)")

expected=(
	"$bindir/stackrelay-agent"
	"$bindir/stackrelay-gateway"
	"$sysconfdir/stackrelay/agent.yaml"
	"$sysconfdir/stackrelay/gateway.yaml"
	"$prefix/lib/systemd/system/stackrelay-agent.service"
	"$prefix/lib/systemd/system/stackrelay-gateway.service"
	"$prefix/lib/sysusers.d/stackrelay.conf"
	"$datadir/doc/stackrelay/install-bare-metal.md"
	"$datadir/doc/stackrelay/install-kubernetes.md"
	"$datadir/doc/stackrelay/troubleshooting.md"
)
fail=0
for f in "${expected[@]}"; do
	if [ -f "$work$f" ]; then
		echo "ok: $f"
	else
		echo "FAIL: $f was not installed"
		fail=1
	fi
done
for f in "$bindir/stackrelay-agent" "$bindir/stackrelay-gateway"; do
	[ -x "$work$f" ] || { echo "FAIL: $f is not executable"; fail=1; }
done
while read -r f; do
	f=/${f#./}
	printf '%s\n' "${expected[@]}" | grep -qxF "$f" || { echo "FAIL: unexpected installed file $f"; fail=1; }
done < <(cd "$work" && find . -type f)

for name in agent gateway; do
	unit=$work$prefix/lib/systemd/system/stackrelay-$name.service
	[ -f "$unit" ] || continue
	want="ExecStart=$bindir/stackrelay-$name --config $sysconfdir/stackrelay/$name.yaml"
	if grep -qxF "$want" "$unit"; then
		echo "ok: stackrelay-$name.service: $want"
	else
		echo "FAIL: stackrelay-$name.service: no line \"$want\""
		fail=1
	fi
done

# Every User= of an installed unit is a user the installed sysusers.d file
# creates, and the two services do not share one.
sysusers=$work$prefix/lib/sysusers.d/stackrelay.conf
users=()
for name in agent gateway; do
	unit=$work$prefix/lib/systemd/system/stackrelay-$name.service
	[ -f "$unit" ] && [ -f "$sysusers" ] || continue
	user=$(sed -n 's/^User=//p' "$unit" | tail -n 1)
	users+=("$user")
	if [ -n "$user" ] && grep -qE "^u $user " "$sysusers"; then
		echo "ok: stackrelay-$name.service runs as $user, which sysusers.d creates"
	else
		echo "FAIL: stackrelay-$name.service: User=$user is not declared in $prefix/lib/sysusers.d/stackrelay.conf"
		fail=1
	fi
done
if [ ${#users[@]} = 2 ] && [ "${users[0]}" = "${users[1]}" ]; then
	echo "FAIL: the agent and the gateway both run as ${users[0]}"
	fail=1
fi

[ $fail = 0 ] && echo "meson install: ${#expected[@]} files where expected"
exit $fail
